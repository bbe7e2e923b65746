//! Helpers of the import tests: the legacy configurations, importing them,
//! and reading the emitted TOML.
#![allow(dead_code, missing_docs)]

use std::path::{Path, PathBuf};

use tessera_import::{import, Imported, Options, Outcome, Source};
use toml::Value;

/// `../shared/legacy-configs` beside the clone when present (the project's
/// shared test data), else the identical copy in `tests/data/legacy-configs`,
/// so that a fresh clone tests the same files.
pub(crate) fn legacy() -> PathBuf {
    let shared = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/legacy-configs"
    ));
    let copy = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/legacy-configs"
    ));
    let d = if shared.is_dir() { shared } else { copy };
    assert!(
        d.is_dir(),
        "{} is missing: the legacy configurations are test data",
        d.display()
    );
    d
}

pub(crate) struct Out {
    pub(crate) imported: Imported,
    pub(crate) toml: toml::Table,
}

impl Out {
    pub(crate) fn vhosts(&self) -> &Vec<Value> {
        self.toml["vhost"].as_array().unwrap()
    }
    pub(crate) fn vhost(&self, i: usize) -> &toml::Table {
        self.vhosts()[i].as_table().unwrap()
    }
    pub(crate) fn default_vhost(&self) -> &toml::Table {
        self.vhosts()
            .iter()
            .map(|v| v.as_table().unwrap())
            .find(|v| v.get("default").and_then(Value::as_bool) == Some(true))
            .expect("a default vhost")
    }
    pub(crate) fn listen(&self) -> Vec<&str> {
        self.toml["server"]["listen"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect()
    }
    pub(crate) fn rules<'a>(&self, v: &'a toml::Table) -> Vec<&'a toml::Table> {
        v.get("rule")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|r| r.as_table().unwrap()).collect())
            .unwrap_or_default()
    }
    pub(crate) fn has(&self, outcome: Outcome, needle: &str) -> bool {
        self.imported
            .report
            .find(needle)
            .any(|e| e.outcome == outcome)
    }
}

pub(crate) fn run(source: Source, rel: &str) -> Out {
    let path = legacy().join(rel);
    let imported =
        import(source, &path, &Options::default()).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let toml: toml::Table = toml::from_str(&imported.toml)
        .unwrap_or_else(|e| panic!("{rel}: the output is not TOML: {e}\n{}", imported.toml));
    assert!(!imported.report.entries.is_empty(), "{rel}: empty report");
    Out { imported, toml }
}

pub(crate) fn l(rel: &str) -> Out {
    run(Source::Lighttpd, &format!("lighttpd/{rel}"))
}

pub(crate) fn c(rel: &str) -> Out {
    run(Source::Cherokee, &format!("cherokee/{rel}"))
}

pub(crate) fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect()
}

/// Imports configuration text of `source` (includes name absolute paths).
pub(crate) fn import_source_text(source: Source, name: &str, text: &str) -> Out {
    let imported = tessera_import::import_text(
        source,
        name,
        text,
        Path::new("/nonexistent"),
        &Options::default(),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    let toml = toml::from_str(&imported.toml).unwrap();
    Out { imported, toml }
}

/// Imports lighttpd configuration text.
pub(crate) fn import_lighttpd_text(name: &str, text: &str) -> Out {
    import_source_text(Source::Lighttpd, name, text)
}

/// Imports Cherokee configuration text.
pub(crate) fn import_cherokee_text(name: &str, text: &str) -> Out {
    import_source_text(Source::Cherokee, name, text)
}

/// The `[[upstream]]` named `name`.
pub(crate) fn upstream<'a>(o: &'a Out, name: &str) -> &'a toml::Table {
    o.toml["upstream"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_table().unwrap())
        .find(|u| u["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no upstream {name}:\n{}", o.imported.toml))
}

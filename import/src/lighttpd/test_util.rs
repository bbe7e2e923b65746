//! Test helpers: importing lighttpd text, and reading the TOML written.

use std::path::Path;

use super::import_text;
use crate::{Options, Report};

pub(super) fn imp(text: &str) -> (String, Report) {
    let mut r = Report::default();
    let out = import_text(
        "t.conf",
        text,
        Path::new("/nonexistent"),
        &Options::default(),
        &mut r,
    )
    .unwrap();
    (crate::emit::write(&out), r)
}

/// The whole import (with `[[upstream]]` names assigned), parsed.
pub(super) fn imp_toml(text: &str) -> (toml::Table, crate::Report) {
    let out = crate::import_text(
        crate::Source::Lighttpd,
        "t.conf",
        text,
        Path::new("/nonexistent"),
        &Options::default(),
    )
    .unwrap();
    let t: toml::Table = toml::from_str(&out.toml).unwrap_or_else(|e| panic!("{e}\n{}", out.toml));
    (t, out.report)
}

pub(super) fn upstreams(t: &toml::Table) -> Vec<&toml::Table> {
    t.get("upstream")
        .and_then(|u| u.as_array())
        .map(|a| a.iter().filter_map(|u| u.as_table()).collect())
        .unwrap_or_default()
}

pub(super) fn upstream<'a>(t: &'a toml::Table, name: &str) -> &'a toml::Table {
    upstreams(t)
        .into_iter()
        .find(|u| u["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no upstream {name}: {t:#?}"))
}

pub(super) fn vhost(t: &toml::Table, i: usize) -> &toml::Table {
    t["vhost"].as_array().unwrap()[i].as_table().unwrap()
}

pub(super) fn rules(v: &toml::Table) -> Vec<&toml::Table> {
    v.get("rule")
        .and_then(|r| r.as_array())
        .map(|a| a.iter().filter_map(|r| r.as_table()).collect())
        .unwrap_or_default()
}

pub(super) fn no_drops(r: &crate::Report, needles: &[&str]) {
    for e in &r.entries {
        if e.outcome == crate::Outcome::Dropped {
            assert!(
                !needles
                    .iter()
                    .any(|n| e.what.contains(n) || e.message.contains(n)),
                "dropped: {e:?}"
            );
        }
    }
}

pub(super) const PROXY_HEAD: &str =
    "server.document-root = \"/srv\"\nserver.modules = ( \"mod_proxy\", \"mod_extforward\" )\n";

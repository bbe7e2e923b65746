//! `tessera import`: turns a lighttpd 1.4 or Cherokee configuration into
//! Tessera's `server.toml`, with a report of everything that was translated,
//! approximated (and how), dropped (and why) or not needed, each with its
//! source file and line.
//!
//! - [`lighttpd`]: a tokenizer and parser of the lighttpd configuration
//!   language (variables, `+=`, includes, conditionals with `else`), evaluated
//!   as lighttpd evaluates it.
//! - [`cherokee`]: the `key!path = value` tree of `cherokee.conf`.
//! - [`model`]: the intermediate model (blocks where the last match wins) and
//!   the resolver into Tessera's ordered, first-match rules.
//! - [`backend`]: the back ends (`fastcgi`, `scgi`, `uwsgi`, `cgi`) and path
//!   mapping (`alias`, `userdir`, `mass-vhost`) in the model.
//! - [`emit`]: commented TOML; [`report`]: the report.
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("tessera-import-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let conf = dir.join("lighttpd.conf");
//! std::fs::write(&conf, concat!(
//!     "server.document-root = \"/srv/www\"\n",
//!     "server.port = 8080\n",
//!     "server.modules = ( \"mod_expire\" )\n",
//!     "$HTTP[\"url\"] =^ \"/img/\" { expire.url = ( \"\" => \"access plus 1 days\" ) }\n",
//! )).unwrap();
//! let out = tessera_import::import(tessera_import::Source::Lighttpd, &conf, &Default::default()).unwrap();
//! assert!(out.toml.contains("listen = [\n  \"0.0.0.0:8080\","));
//! assert!(out.toml.contains("match = { path-prefix = \"/img/\" }"));
//! assert!(out.toml.contains("url = { \"/\" = \"access plus 1 days\" }"));
//! println!("{}", out.report);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

pub mod backend;
pub mod cherokee;
pub mod emit;
pub mod error;
pub mod expire;
#[doc(hidden)]
pub mod fuzzing;
pub mod lighttpd;
pub mod model;
pub mod report;
pub mod tessera;
pub mod upstream;

use std::path::{Path, PathBuf};

pub use error::ImportError;
pub use report::{Entry, Outcome, Report, Src};

/// Which server's configuration is imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// lighttpd 1.4 (`lighttpd.conf`).
    Lighttpd,
    /// Cherokee (`cherokee.conf`).
    Cherokee,
}

impl Source {
    /// `lighttpd` or `cherokee`.
    pub fn name(self) -> &'static str {
        match self {
            Source::Lighttpd => "lighttpd",
            Source::Cherokee => "cherokee",
        }
    }
}

/// Import options.
#[derive(Debug, Clone)]
pub struct Options {
    /// The system MIME table read in place of running Debian's
    /// `create-mime.conf.pl`. Default `/etc/mime.types`.
    pub mime_types: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mime_types: PathBuf::from("/etc/mime.types"),
        }
    }
}

/// The result of an import.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The configuration, as commented TOML.
    pub toml: String,
    /// What was translated, approximated, dropped, not needed.
    pub report: Report,
}

impl Imported {
    /// The exit status `tessera import` uses: 0 when the translation is clean
    /// (nothing approximated or dropped), 1 when it has warnings. (A failed
    /// import exits with 2.)
    pub fn exit_code(&self) -> u8 {
        if self.report.has_warnings() {
            1
        } else {
            0
        }
    }
}

/// Imports the configuration file `path` of `source`.
///
/// # Errors
/// [`ImportError`]: the file (or an include) cannot be read, a syntax error,
/// or nothing to serve. Everything else is a warning in the report.
pub fn import(source: Source, path: &Path, opts: &Options) -> Result<Imported, ImportError> {
    let mut report = Report::default();
    let out = match source {
        Source::Lighttpd => lighttpd::import(path, opts, &mut report)?,
        Source::Cherokee => cherokee::import(path, opts, &mut report)?,
    };
    Ok(finish(source, &path.display().to_string(), out, report))
}

/// Imports configuration text (`name` is used in messages; includes are
/// resolved against `basedir`).
///
/// # Errors
/// As [`import`].
pub fn import_text(
    source: Source,
    name: &str,
    text: &str,
    basedir: &Path,
    opts: &Options,
) -> Result<Imported, ImportError> {
    let mut report = Report::default();
    let out = match source {
        Source::Lighttpd => lighttpd::import_text(name, text, basedir, opts, &mut report)?,
        Source::Cherokee => cherokee::import_text(name, text, &mut report)?,
    };
    Ok(finish(source, name, out, report))
}

fn finish(source: Source, name: &str, mut out: emit::Output, report: Report) -> Imported {
    backend::place_rule_only(&mut out);
    upstream::assign(&mut out);
    let mut header = vec![
        format!("Imported by `tessera import {} {name}`.", source.name()),
        format!("Report: {}.", report.summary()),
        "Check it with `tessera -t -c FILE`; every [[vhost]] and [[vhost.rule]] names the".into(),
        "source lines it came from. All rules have final = false: each module takes its".into(),
        "table from the first matching rule that has one (README, Migration).".into(),
    ];
    header.append(&mut out.header);
    out.header = header;
    Imported {
        toml: emit::write(&out),
        report,
    }
}

/// The host without its port: `a.b:80` -> `a.b`, `[::1]:8080` -> `[::1]`.
pub(crate) fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    match host.rfind(':') {
        Some(i) if host[i + 1..].bytes().all(|b| b.is_ascii_digit()) => &host[..i],
        _ => host,
    }
}

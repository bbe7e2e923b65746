//! Cherokee: parse the `key!path = value` tree ([`tree`]) and translate it into
//! the model.
//!
//! Virtual servers become vhosts, tried in Cherokee's order (highest number
//! first); a `match = wildcard` with domain `*` makes its vserver the default
//! vhost and every lower one unreachable. A vserver's rules, evaluated by
//! Cherokee from the highest priority down with "the first rule that sets a
//! property wins" and `final` (the default) stopping the evaluation, become
//! model blocks in ascending priority: a higher rule comes later and wins, and
//! a final rule resets what it does not set ([`crate::model`]).
//!
//! This file holds the entry points, the build placeholders and `Tr`; the
//! translation is in `translate` (the virtual servers in `vserver`), rule
//! matching in `matching`, a rule's properties in `rules` (the proxy handler
//! in `proxy`, the other back ends in `backends`), logger templates in
//! `logger`.

mod backends;
mod logger;
mod matching;
mod proxy;
mod rules;
#[cfg(test)]
mod test_util;
mod translate;
pub mod tree;
mod vserver;

use std::path::Path;

use crate::emit::Output;
use crate::error::ImportError;
use crate::report::{Report, Src};
use crate::Options;
use translate::translate;
use tree::Node;

/// `Expires` for `expiration = epoch` (Cherokee's literal).
pub const EPOCH_EXPIRES: &str = "Tue, 01 Jan 1970 00:00:01 GMT";
/// `Expires` for `expiration = max` (Cherokee's literal).
pub const MAX_EXPIRES: &str = "Thu, 31 Dec 2037 23:55:55 GMT";
/// `max-age` for `expiration = max`.
pub const MAX_AGE: u64 = 315_360_000;

/// Build-time placeholders of the `*.conf.sample.pre` files, with the values
/// of Debian's Cherokee package.
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("%prefix%", "/usr"),
    ("%sysconfdir%", "/etc"),
    ("%localstatedir%", "/var"),
    ("%wwwroot%", "/var/www"),
    ("%cgiroot%", "/usr/lib/cgi-bin"),
    ("%datadir%", "/usr/share"),
    ("%docdir%", "/usr/share/doc/cherokee"),
    ("%libdir%", "/usr/lib"),
    ("%bindir%", "/usr/bin"),
    ("%sbindir%", "/usr/sbin"),
];

/// Compressible types written for Cherokee's encoders (Cherokee compresses
/// any type; these are Tessera's defaults).
const COMPRESS_TYPES: &[&str] = &[
    "text/",
    "application/javascript",
    "application/json",
    "application/xml",
    "image/svg+xml",
];

/// Imports the Cherokee configuration `path`.
///
/// # Errors
/// [`ImportError`] when the file cannot be read or parsed, or defines no
/// virtual server.
pub(crate) fn import(
    path: &Path,
    _opts: &Options,
    report: &mut Report,
) -> Result<Output, ImportError> {
    let t = tree::parse_file(path)?;
    translate(&t, &path.display().to_string(), report)
}

/// Imports Cherokee configuration text.
///
/// # Errors
/// As [`import`].
pub(crate) fn import_text(
    name: &str,
    text: &str,
    report: &mut Report,
) -> Result<Output, ImportError> {
    let t = tree::parse_text(name, text)?;
    translate(&t, name, report)
}

struct Tr<'a> {
    report: &'a mut Report,
    main: String,
    /// The `source!*` subtree (back ends of proxy and the gateway handlers).
    sources: Option<Node>,
    /// Sources a `proxy` handler uses (translated as upstream servers).
    used_sources: Vec<String>,
}

impl Tr<'_> {
    /// A path value with build placeholders replaced (reported).
    fn path(&mut self, v: &str, src: &Src, what: &str) -> String {
        let mut out = v.to_owned();
        for (p, r) in PLACEHOLDERS {
            if out.contains(p) {
                out = out.replace(p, r);
                self.report.approximated(
                    src,
                    what,
                    format!("the build placeholder {p} becomes {r} (Debian's values); change it if your build differs"),
                );
            }
        }
        if out.contains('%') && out.matches('%').count() >= 2 {
            self.report.approximated(
                src,
                what,
                format!("\"{out}\" still contains a % placeholder"),
            );
        }
        out
    }

    fn src_of(&self, n: &Node) -> Src {
        n.first_src()
            .cloned()
            .unwrap_or_else(|| Src::new(&self.main, 0))
    }
}

//! Response headers: mod_expire (`expire.url`, `expire.mimetypes`) as
//! Tessera's expires module and mod_setenv's `setenv.*-response-header` as
//! its headers module.

use super::{Arg, Tr};
use crate::expire;
use crate::model::{Opt, V};
use crate::report::{Report, Src};

impl Tr<'_> {
    /// The options of mod_expire and mod_setenv's response headers.
    pub(super) fn headers_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { key, src, val, .. } = *a;
        let opt = |module, k, v| a.opt(module, k, v);
        Some(match key {
            "expire.url" => {
                let mut t = Vec::new();
                for (k, v) in val.as_pairs() {
                    let prefix = if k.is_empty() {
                        "/".to_owned()
                    } else {
                        k.clone()
                    };
                    if !prefix.starts_with('/') {
                        report.dropped(
                            src,
                            key,
                            format!("\"{k}\" does not start with '/', so it never matches a path"),
                        );
                        continue;
                    }
                    if let Some(e) = self.expire_value(&v, src, key, report) {
                        if let Some((earlier, _)) = t
                            .iter()
                            .find(|(p, _): &&(String, V)| prefix.starts_with(p.as_str()))
                        {
                            report.approximated(src, key, format!("\"{k}\" is shadowed by the earlier \"{earlier}\" (first match wins): it never applies"));
                        }
                        t.push((prefix, V::s(e)));
                    }
                }
                report.translated(src, key, "expires url (first match wins, as in lighttpd)");
                vec![
                    opt("expires", "url", V::Tab(t)),
                    opt("expires", "existing-cache-control", V::s("keep")),
                ]
            }
            "expire.mimetypes" => {
                let mut t: Vec<(String, V)> = Vec::new();
                let pairs = val.as_pairs();
                let has_text = pairs
                    .iter()
                    .any(|(k, _)| k == "text/" || k == "text/javascript");
                let mut moved = None;
                for (k, v) in pairs {
                    let Some(e) = self.expire_value(&v, src, key, report) else {
                        continue;
                    };
                    if k == "application/javascript" && !has_text {
                        report.approximated(src, key, "\"application/javascript\" is renamed \"text/javascript\" and moved to the end, as lighttpd 1.4.65 and later do");
                        moved = Some(("text/javascript".to_owned(), V::s(e)));
                        continue;
                    }
                    let k2 = if k.is_empty() || k.contains('/') || k.ends_with('*') {
                        k.clone()
                    } else {
                        format!("{k}*")
                    };
                    if let Some((earlier, _)) = t.iter().find(|(p, _)| p.is_empty()) {
                        report.approximated(
                            src,
                            key,
                            format!(
                                "\"{k}\" comes after the catch-all \"{earlier}\": it never applies"
                            ),
                        );
                    }
                    t.push((k2, V::s(e)));
                }
                t.extend(moved);
                report.translated(
                    src,
                    key,
                    "expires mime-types (tried after url, first match wins)",
                );
                vec![
                    opt("expires", "mime-types", V::Tab(t)),
                    opt("expires", "existing-cache-control", V::s("keep")),
                ]
            }
            "setenv.add-response-header" | "setenv.set-response-header" => {
                let k = if key.ends_with("add-response-header") {
                    "add"
                } else {
                    "set"
                };
                let mut t: Vec<(String, V)> = Vec::new();
                for (name, v) in val.as_pairs() {
                    let clean: String = v
                        .chars()
                        .map(|c| {
                            if matches!(c, '\t' | '\r' | '\n') {
                                ' '
                            } else {
                                c
                            }
                        })
                        .collect();
                    t.push((name, V::s(clean.trim())));
                }
                report.translated(
                    src,
                    key,
                    format!(
                        "headers {k}{}",
                        if k == "set" {
                            " (an empty value removes the field)"
                        } else {
                            ""
                        }
                    ),
                );
                vec![opt("headers", k, V::Tab(t))]
            }
            _ => return None,
        })
    }

    fn expire_value(&self, v: &str, src: &Src, key: &str, report: &mut Report) -> Option<String> {
        match expire::parse_lighttpd(v) {
            Ok(e) => {
                if e.uses_years {
                    report.approximated(src, key, format!("\"{v}\": a year is 365 days (lighttpd 1.4.74 and later; earlier versions counted 360)"));
                }
                Some(e.to_tessera())
            }
            Err(msg) => {
                report.dropped(
                    src,
                    key,
                    format!("{msg} (lighttpd refuses to start with it)"),
                );
                None
            }
        }
    }
}

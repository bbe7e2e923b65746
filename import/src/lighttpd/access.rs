//! mod_access (`url.access-deny`) and mod_auth (`auth.backend`, its user
//! files and `auth.require`) as Tessera's access and auth-basic modules.

use std::path::Path;

use super::value::Val;
use super::{Arg, Tr};
use crate::model::{Opt, V};
use crate::report::Report;

impl Tr<'_> {
    /// The options of mod_access and mod_auth.
    pub(super) fn access_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { key, src, val, .. } = *a;
        let opt = |module, k, v| a.opt(module, k, v);
        Some(match key {
            "url.access-deny" => {
                report.translated(src, key, "access deny-suffixes");
                vec![opt("access", "deny-suffixes", V::strs(val.as_list()))]
            }
            "auth.backend" => {
                let b = val.as_string().unwrap_or_default();
                if matches!(b.as_str(), "htpasswd" | "plain") {
                    report.translated(src, key, "auth-basic (user-file)");
                } else {
                    report.dropped(src, key, format!("the \"{b}\" backend is not supported (htpasswd and plain are): the protected paths answer 401 to everyone (fail closed) until auth-basic gets a user file"));
                }
                vec![opt("auth-basic", "backend", V::s(b))]
            }
            "auth.backend.htpasswd.userfile" | "auth.backend.plain.userfile" => {
                let f = val.as_string().unwrap_or_default();
                if !Path::new(&f).exists() {
                    report.missing(src, key, &f);
                } else {
                    report.translated(src, key, "auth-basic user-file");
                }
                let k = if key.contains("htpasswd") {
                    "user-file"
                } else {
                    "plain-file"
                };
                vec![opt("auth-basic", k, V::s(f))]
            }
            "auth.require" => {
                let Val::Arr(items) = val else {
                    return Some(Vec::new());
                };
                let mut list = Vec::new();
                for (prefix, entry) in items {
                    let Some(prefix) = prefix else { continue };
                    let pairs = entry.as_pairs();
                    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                    let method = get("method").unwrap_or_else(|| "basic".into());
                    if method != "basic" {
                        report.approximated(src, key, format!("\"{prefix}\": {method} authentication becomes Basic (the only scheme Tessera has)"));
                    }
                    let require = get("require").unwrap_or_else(|| "valid-user".into());
                    let users: Vec<String> = require
                        .split('|')
                        .filter_map(|p| p.trim().strip_prefix("user=").map(str::to_owned))
                        .collect();
                    let req = if require.split('|').any(|p| p.trim() == "valid-user")
                        || users.is_empty()
                    {
                        if !require.split('|').any(|p| p.trim() == "valid-user") {
                            report.weaker(src, key, format!("\"{prefix}\": require \"{require}\" (groups, hosts) becomes valid-user: any user in the file is let in"));
                        }
                        V::s("valid-user")
                    } else {
                        if require.split('|').any(|p| !p.trim().starts_with("user=")) {
                            report.approximated(
                                src,
                                key,
                                format!(
                                    "\"{prefix}\": only the user= parts of \"{require}\" are kept"
                                ),
                            );
                        }
                        V::strs(users)
                    };
                    let mut t = vec![("prefix".to_owned(), V::s(prefix.clone()))];
                    if let Some(r) = get("realm") {
                        t.push(("realm".to_owned(), V::s(r)));
                    }
                    t.push(("require".to_owned(), req));
                    list.push(V::Tab(t));
                }
                report.translated(src, key, "auth-basic rules (one per path prefix)");
                vec![opt("auth-basic", "require-list", V::Arr(list))]
            }
            _ => return None,
        })
    }
}

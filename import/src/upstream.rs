//! Upstreams: the `proxy`, `fastcgi`, `scgi` and `uwsgi` tables the resolver writes carry a description of
//! their back ends (servers, balancing, timeouts, and the source's prefix or
//! rule as `key`); [`assign`] turns each distinct description into one
//! `[[upstream]]` with a readable, stable name and puts the name in its place.

use crate::emit::Output;
use crate::model::V;

/// The `[[upstream]]` name for back ends found in vhost `vhost` under `key`
/// (a lighttpd prefix or suffix, a Cherokee rule): `default-api` for `/api/`
/// in the default vhost, `www.example.org-php` for `.php`, `…-root` for the
/// whole vhost.
pub fn base_name(vhost: &str, key: &str) -> String {
    let clean = |s: &str| {
        let mut out = String::new();
        for c in s.chars() {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_') {
                out.push(c.to_ascii_lowercase());
            } else if !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
        }
        out.trim_matches(|c| c == '-' || c == '.').to_owned()
    };
    let v = match clean(vhost) {
        s if s.is_empty() => "vhost".to_owned(),
        s => s,
    };
    let k = match clean(key) {
        s if s.is_empty() => "root".to_owned(),
        s => s,
    };
    format!("{v}-{k}")
}

/// Replaces every `proxy` (and `fastcgi`, `scgi`, `uwsgi`) table's upstream description (in vhost tables and
/// rules) by the name of an `[[upstream]]`, which it adds to
/// `out.upstreams`: one per distinct description (servers, balance and the
/// other settings), named after the first vhost and key that use it.
pub fn assign(out: &mut Output) {
    let mut known: Vec<(Vec<(String, V)>, String)> = Vec::new();
    let mut upstreams: Vec<Vec<(String, V)>> = Vec::new();
    for vh in &mut out.vhosts {
        let vname = if vh.default {
            "default".to_owned()
        } else {
            vh.names.first().cloned().unwrap_or_default()
        };
        let res = &mut vh.resolved;
        let tables = res.tables.iter_mut().map(|(m, t, _)| (*m, t)).chain(
            res.rules
                .iter_mut()
                .flat_map(|r| r.tables.iter_mut().map(|(m, t)| (*m, t))),
        );
        for (m, t) in tables {
            if m != "proxy" && !crate::backend::SOCKET_BACKENDS.contains(&m) {
                continue;
            }
            for (k, v) in t.iter_mut() {
                if k != "upstream" {
                    continue;
                }
                let V::Tab(desc) = v else { continue };
                let key = desc
                    .iter()
                    .find(|(n, _)| n == "key")
                    .and_then(|(_, v)| v.as_str())
                    .unwrap_or("")
                    .to_owned();
                let settings: Vec<(String, V)> =
                    desc.iter().filter(|(n, _)| n != "key").cloned().collect();
                let name = match known.iter().find(|(s, _)| *s == settings) {
                    Some((_, n)) => n.clone(),
                    None => {
                        let base = base_name(&vname, &key);
                        let mut name = base.clone();
                        let mut i = 2;
                        while known.iter().any(|(_, n)| *n == name) {
                            name = format!("{base}-{i}");
                            i += 1;
                        }
                        let mut table = vec![("name".to_owned(), V::s(name.clone()))];
                        table.extend(settings.iter().cloned());
                        upstreams.push(table);
                        known.push((settings, name.clone()));
                        name
                    }
                };
                *v = V::s(name);
            }
        }
    }
    out.upstreams.extend(upstreams);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit::VhostOut;
    use crate::model::{OutRule, Resolved};

    fn desc(key: &str, servers: &[&str]) -> V {
        V::Tab(vec![
            ("key".into(), V::s(key)),
            ("servers".into(), V::strs(servers.iter().copied())),
        ])
    }

    #[test]
    fn names_are_readable_and_shared_by_equal_back_ends() {
        assert_eq!(base_name("default", "/api/"), "default-api");
        assert_eq!(base_name("www.Example.org", ".php"), "www.example.org-php");
        assert_eq!(base_name("default", ""), "default-root");
        assert_eq!(base_name("~^a\\.b$", "/"), "a-.b-root");
        let rule = |key: &str, servers: &[&str]| OutRule {
            ctx: Vec::new(),
            tables: vec![("proxy", vec![("upstream".into(), desc(key, servers))])],
            from: Vec::new(),
            srcs: Vec::new(),
        };
        let mut out = Output::default();
        out.vhosts.push(VhostOut {
            comment: Vec::new(),
            names: Vec::new(),
            default: true,
            listen: Vec::new(),
            names_see_port: false,
            document_root: "/srv".into(),
            document_root_src: None,
            resolved: Resolved {
                tables: Vec::new(),
                modules: Vec::new(),
                rules: vec![
                    rule("/api/", &["127.0.0.1:8080"]),
                    rule("/v2/", &["127.0.0.1:8080"]),
                    rule("/api", &["127.0.0.1:9090"]),
                ],
            },
        });
        assign(&mut out);
        let names: Vec<&V> = out.vhosts[0]
            .resolved
            .rules
            .iter()
            .map(|r| &r.tables[0].1[0].1)
            .collect();
        assert_eq!(
            names,
            vec![
                &V::s("default-api"),
                &V::s("default-api"),
                &V::s("default-api-2")
            ]
        );
        assert_eq!(out.upstreams.len(), 2);
        assert_eq!(
            out.upstreams[1],
            vec![
                ("name".into(), V::s("default-api-2")),
                ("servers".into(), V::strs(["127.0.0.1:9090"])),
            ]
        );
    }
}

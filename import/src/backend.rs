//! Back ends and path mapping in the model: how the options the front ends
//! collect for `fastcgi`, `scgi`, `uwsgi`, `cgi`, `alias`, `userdir` and
//! `mass-vhost` become module tables (issue 14's keys, README "Modules").
//!
//! The socket back ends (`fastcgi`, `scgi`, `uwsgi`) take a model key
//! `server`: a list of entries, each an inline table
//!
//! | key | meaning |
//! |---|---|
//! | `key` | names the `[[upstream]]` ([`crate::upstream::assign`]) |
//! | `prefix` | lighttpd's `fastcgi.server` key: `".php"` (an extension) or `"/app"` (a prefix, the application's `script-name`); absent: every request of the block (a Cherokee rule) |
//! | `servers`, `balance`, `spawn`, timeouts | the upstream ([`UPSTREAM_KEYS`]) |
//! | `extensions`, `script-name`, `check-local`, `x-sendfile`, `x-sendfile-docroot`, `modifier1` | the module table ([`TABLE_KEYS`]) |
//! | `fix-root-scriptname` | lighttpd: the `"/"` prefix gives `SCRIPT_NAME = ""` |
//!
//! and the module keys `balance` (lighttpd's `fastcgi.balance`),
//! `index-names` (lighttpd's `index-file.names`, Cherokee's
//! `directory_index`: the back end's `index-files` are the names it would
//! run) and `params`. The first entry whose prefix or extension matches wins,
//! as in lighttpd.

use crate::emit::Output;
use crate::model::{Cond, Leaf, V};
use crate::tessera::MODULE_ORDER;

/// The socket back-end modules, which use an `[[upstream]]`.
pub const SOCKET_BACKENDS: &[&str] = &["fastcgi", "scgi", "uwsgi"];

/// Keys of a back-end entry that describe its `[[upstream]]`.
pub const UPSTREAM_KEYS: &[&str] = &[
    "servers",
    "balance",
    "connect-timeout",
    "read-timeout",
    "send-timeout",
    "fail-timeout",
    "spawn",
];

/// Keys of a back-end entry that go into the module's table.
pub const TABLE_KEYS: &[&str] = &[
    "extensions",
    "script-name",
    "check-local",
    "x-sendfile",
    "x-sendfile-docroot",
    "modifier1",
];

fn get<'a>(opts: &'a [(&'static str, V)], key: &str) -> Option<&'a V> {
    opts.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v)
}

fn field(e: &[(String, V)], k: &str) -> Option<V> {
    e.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

/// The index files a back end runs: the `index-names` (in order) that end
/// with one of `exts` (`""` matches every name).
pub fn index_files(opts: &[(&'static str, V)], exts: &[String]) -> V {
    let names = get(opts, "index-names")
        .and_then(V::as_arr)
        .unwrap_or_default();
    V::Arr(
        names
            .iter()
            .filter(|n| {
                n.as_str()
                    .is_some_and(|n| exts.iter().any(|e| n.ends_with(e.as_str())))
            })
            .cloned()
            .collect(),
    )
}

/// The leaf of a socket back end (`fastcgi`, `scgi`, `uwsgi`): one part per
/// prefix entry (`path-prefix`, `script-name`), one per group of extension
/// entries sharing a back end (`path-regex` on the extensions, except the
/// first group, which takes every other request so that a directory's index
/// file reaches it), in the source's order.
pub fn socket_leaf(module: &str, opts: &[(&'static str, V)]) -> Leaf {
    let Some(V::Arr(entries)) = get(opts, "server") else {
        return Leaf::Off;
    };
    let mut parts: Vec<(Cond, Vec<(String, V)>)> = Vec::new();
    // Extension groups: (upstream, table settings, extensions).
    type Group = (Vec<(String, V)>, Vec<(String, V)>, Vec<String>);
    let mut groups: Vec<Group> = Vec::new();
    let params = get(opts, "params").filter(|p| !p.is_empty()).cloned();
    for e in entries {
        let Some(e) = e.as_tab() else { continue };
        let Some(V::Arr(servers)) = field(e, "servers") else {
            continue;
        };
        if servers.is_empty() {
            continue;
        }
        let mut up = vec![(
            "key".to_owned(),
            field(e, "key").unwrap_or_else(|| V::s("")),
        )];
        up.push(("servers".to_owned(), V::Arr(servers.clone())));
        if servers.len() > 1 {
            // lighttpd's default balance is "fair".
            let b = field(e, "balance")
                .or_else(|| get(opts, "balance").cloned())
                .unwrap_or_else(|| V::s("least-conn"));
            up.push(("balance".to_owned(), b));
        }
        for k in UPSTREAM_KEYS
            .iter()
            .filter(|k| !matches!(**k, "servers" | "balance"))
        {
            if let Some(v) = field(e, k) {
                up.push(((*k).to_owned(), v));
            }
        }
        let mut settings: Vec<(String, V)> = Vec::new();
        for k in TABLE_KEYS {
            if matches!(*k, "extensions" | "script-name") {
                continue;
            }
            if let Some(v) = field(e, k) {
                settings.push(((*k).to_owned(), v));
            }
        }
        if let Some(p) = &params {
            settings.push(("params".to_owned(), p.clone()));
        }
        let prefix = field(e, "prefix").and_then(|v| v.as_str().map(str::to_owned));
        match prefix {
            None => {
                // A Cherokee rule: its own extensions or script name.
                let mut t = vec![("upstream".to_owned(), V::Tab(up))];
                let exts: Vec<String> = match field(e, "extensions") {
                    Some(V::Arr(x)) => x
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect(),
                    _ => Vec::new(),
                };
                if let Some(x) = field(e, "extensions") {
                    t.push(("extensions".to_owned(), x));
                }
                if let Some(s) = field(e, "script-name") {
                    t.push(("script-name".to_owned(), s));
                } else {
                    let exts = if exts.is_empty() && module == "fastcgi" {
                        vec![".php".to_owned()]
                    } else {
                        exts
                    };
                    t.push(("index-files".to_owned(), index_files(opts, &exts)));
                }
                t.extend(settings);
                parts.push((Cond::True, t));
                break;
            }
            Some(p) if p.starts_with('/') => {
                let root = p == "/";
                let name = if root {
                    String::new()
                } else {
                    p.trim_end_matches('/').to_owned()
                };
                let mut t = vec![
                    ("upstream".to_owned(), V::Tab(up)),
                    ("script-name".to_owned(), V::s(name)),
                ];
                settings.retain(|(k, _)| k != "check-local");
                t.extend(settings);
                let cond = if root {
                    Cond::True
                } else {
                    Cond::Match(V::tab1("path-prefix", V::s(p)))
                };
                parts.push((cond, t));
                if root {
                    break;
                }
            }
            Some(ext) => {
                let same = |g: &Group| g.0[1..] == up[1..] && g.1 == settings;
                match groups.iter_mut().find(|g| same(g)) {
                    Some(g) => {
                        if !g.2.contains(&ext) {
                            g.2.push(ext);
                        }
                    }
                    None => groups.push((up, settings, vec![ext])),
                }
            }
        }
    }
    let whole = parts.iter().any(|(c, _)| *c == Cond::True);
    let n = groups.len();
    // Later groups first, each on its extensions; the first group last,
    // for every other request (its index files included).
    let mut ext_parts: Vec<(Cond, Vec<(String, V)>)> = Vec::new();
    for (i, (up, settings, exts)) in groups.into_iter().enumerate() {
        let mut t = vec![
            ("upstream".to_owned(), V::Tab(up)),
            ("extensions".to_owned(), V::strs(exts.clone())),
            ("index-files".to_owned(), index_files(opts, &exts)),
        ];
        t.extend(settings);
        let cond = if i == 0 && !whole {
            Cond::True
        } else {
            let alts: Vec<String> = exts
                .iter()
                .map(|x| fancy_regex::escape(x).into_owned())
                .collect();
            Cond::Match(V::tab1(
                "path-regex",
                V::s(format!("({})(/|$)", alts.join("|"))),
            ))
        };
        ext_parts.push((cond, t));
    }
    if n > 1 && !whole {
        let first = ext_parts.remove(0);
        ext_parts.push(first);
    }
    // Prefix parts keep their place before a whole-vhost part.
    let pos = parts
        .iter()
        .position(|(c, _)| *c == Cond::True)
        .unwrap_or(parts.len());
    for (i, p) in ext_parts.into_iter().enumerate() {
        parts.insert(pos + i, p);
    }
    if parts.is_empty() {
        return Leaf::Off;
    }
    Leaf::Split(parts)
}

/// A back end set only in rules would run after the vhost's `static-file`
/// (README, "How rules combine": a rule-only module takes its place after
/// the vhost's modules), which would send a script's source as a file. Each
/// such module gets a vhost table that passes every request on (`fastcgi`,
/// `scgi`, `uwsgi`: the rules' first upstream with `extensions = []` and
/// `index-files = []`; `cgi`: `assign = {}`), so the pipeline lists it
/// before `static-file`.
pub fn place_rule_only(out: &mut Output) {
    for vh in &mut out.vhosts {
        let res = &mut vh.resolved;
        for m in ["fastcgi", "scgi", "uwsgi", "cgi"] {
            if res.tables.iter().any(|(n, _, _)| *n == m) {
                continue;
            }
            let Some(first) = res
                .rules
                .iter()
                .flat_map(|r| r.tables.iter())
                .find(|(n, _)| *n == m)
                .map(|(_, t)| t.clone())
            else {
                continue;
            };
            let table = if m == "cgi" {
                vec![("assign".to_owned(), V::Tab(Vec::new()))]
            } else {
                let Some(up) = field(&first, "upstream") else {
                    continue;
                };
                vec![
                    ("upstream".to_owned(), up),
                    ("extensions".to_owned(), V::Arr(Vec::new())),
                    ("index-files".to_owned(), V::Arr(Vec::new())),
                ]
            };
            let rank = |n: &str| MODULE_ORDER.iter().position(|x| *x == n);
            let at = res
                .modules
                .iter()
                .position(|n| rank(n) > rank(m))
                .unwrap_or(res.modules.len());
            res.modules.insert(at, m);
            let tat = res
                .tables
                .iter()
                .position(|(n, _, _)| rank(n) > rank(m))
                .unwrap_or(res.tables.len());
            res.tables.insert(tat, (m, table, Vec::new()));
        }
    }
}

/// The `cgi` table: `assign` (off when empty), the index files it would
/// run, `script-name`, `x-sendfile`, `x-sendfile-docroot`, `params`,
/// `timeout`.
pub fn cgi_leaf(opts: &[(&'static str, V)]) -> Leaf {
    let Some(V::Tab(assign)) = get(opts, "assign") else {
        return Leaf::Off;
    };
    if assign.is_empty() {
        return Leaf::Off;
    }
    let exts: Vec<String> = assign.iter().map(|(k, _)| k.clone()).collect();
    let mut t = vec![("assign".to_owned(), V::Tab(assign.clone()))];
    if let Some(s) = get(opts, "script-name") {
        t.push(("script-name".to_owned(), s.clone()));
    } else {
        t.push(("index-files".to_owned(), index_files(opts, &exts)));
    }
    for k in ["x-sendfile", "x-sendfile-docroot", "params", "timeout"] {
        if let Some(v) = get(opts, k).filter(|v| !v.is_empty()) {
            t.push((k.to_owned(), v.clone()));
        }
    }
    Leaf::Table(t)
}

/// The `alias` table (`paths`; off when empty).
pub fn alias_leaf(opts: &[(&'static str, V)]) -> Leaf {
    match get(opts, "paths") {
        Some(p @ V::Tab(t)) if !t.is_empty() => Leaf::Table(vec![("paths".to_owned(), p.clone())]),
        _ => Leaf::Off,
    }
}

/// The `userdir` table (off without `path`, or with `enabled = false`).
pub fn userdir_leaf(opts: &[(&'static str, V)]) -> Leaf {
    if get(opts, "enabled") == Some(&V::Bool(false)) {
        return Leaf::Off;
    }
    let Some(path) = get(opts, "path") else {
        return Leaf::Off;
    };
    let mut t = vec![("path".to_owned(), path.clone())];
    for k in ["basepath", "exclude-user", "include-user", "letterhomes"] {
        if let Some(v) = get(opts, k).filter(|v| !v.is_empty()) {
            t.push((k.to_owned(), v.clone()));
        }
    }
    Leaf::Table(t)
}

/// Joins path pieces with one `/` between them.
fn join(parts: &[&str]) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            out.push_str(p.trim_end_matches('/'));
        } else {
            let p = p.trim_matches('/');
            if !p.is_empty() {
                out.push('/');
                out.push_str(p);
            }
        }
    }
    out
}

/// The `mass-vhost` table: `path-pattern` (lighttpd `evhost.path-pattern`,
/// Cherokee `tpl_document_root`), or lighttpd's `simple-vhost.server-root`,
/// `document-root`, `default-host` as `<server-root>/%_/<document-root>`
/// with `default-root`; off without either.
pub fn mass_vhost_leaf(opts: &[(&'static str, V)]) -> Leaf {
    let s = |k: &str| get(opts, k).and_then(V::as_str).filter(|s| !s.is_empty());
    if let Some(p) = s("path-pattern") {
        let mut t = vec![("path-pattern".to_owned(), V::s(p))];
        if let Some(d) = s("default-root") {
            t.push(("default-root".to_owned(), V::s(d)));
        }
        return Leaf::Table(t);
    }
    let Some(root) = s("simple-server-root") else {
        return Leaf::Off;
    };
    let doc = s("simple-document-root").unwrap_or("");
    let mut t = vec![("path-pattern".to_owned(), V::s(join(&[root, "%_", doc])))];
    if let Some(h) = s("simple-default-host") {
        t.push(("default-root".to_owned(), V::s(join(&[root, h, doc]))));
    }
    Leaf::Table(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(prefix: &str, servers: &[&str]) -> V {
        V::Tab(vec![
            ("key".into(), V::s(prefix)),
            ("prefix".into(), V::s(prefix)),
            ("servers".into(), V::strs(servers.iter().copied())),
        ])
    }

    #[test]
    fn extension_groups_and_prefixes() {
        let opts = [
            (
                "server",
                V::Arr(vec![
                    entry(".php", &["unix:/run/php.sock"]),
                    entry("/app/", &["127.0.0.1:9000"]),
                    entry(".py", &["127.0.0.1:9001", "127.0.0.1:9002"]),
                ]),
            ),
            ("index-names", V::strs(["index.html", "index.php"])),
        ];
        let Leaf::Split(parts) = socket_leaf("fastcgi", &opts) else {
            panic!()
        };
        assert_eq!(parts.len(), 3);
        assert_eq!(
            parts[0].0,
            Cond::Match(V::tab1("path-prefix", V::s("/app/")))
        );
        assert!(parts[0].1.contains(&("script-name".into(), V::s("/app"))));
        assert_eq!(
            parts[1].0,
            Cond::Match(V::tab1("path-regex", V::s("(\\.py)(/|$)")))
        );
        let up = parts[1].1[0].1.as_tab().unwrap();
        assert!(up.contains(&("balance".into(), V::s("least-conn"))));
        assert_eq!(parts[2].0, Cond::True);
        assert!(parts[2]
            .1
            .contains(&("index-files".into(), V::strs(["index.php"]))));
    }

    #[test]
    fn root_prefix_is_an_empty_script_name() {
        let opts = [("server", V::Arr(vec![entry("/", &["127.0.0.1:9000"])]))];
        let Leaf::Split(parts) = socket_leaf("scgi", &opts) else {
            panic!()
        };
        assert_eq!(
            parts,
            vec![(
                Cond::True,
                vec![
                    (
                        "upstream".into(),
                        V::Tab(vec![
                            ("key".into(), V::s("/")),
                            ("servers".into(), V::strs(["127.0.0.1:9000"]))
                        ])
                    ),
                    ("script-name".into(), V::s("")),
                ]
            )]
        );
    }

    #[test]
    fn cgi_and_mass_vhost() {
        let leaf = cgi_leaf(&[
            (
                "assign",
                V::Tab(vec![(".pl".into(), V::s("/usr/bin/perl"))]),
            ),
            ("index-names", V::strs(["index.html", "index.pl"])),
        ]);
        let Leaf::Table(t) = leaf else { panic!() };
        assert_eq!(t[1], ("index-files".into(), V::strs(["index.pl"])));
        assert_eq!(cgi_leaf(&[("assign", V::Tab(vec![]))]), Leaf::Off);
        let Leaf::Table(t) = mass_vhost_leaf(&[
            ("simple-server-root", V::s("/srv/")),
            ("simple-document-root", V::s("htdocs")),
            ("simple-default-host", V::s("www.example.com")),
        ]) else {
            panic!()
        };
        assert_eq!(
            t,
            vec![
                ("path-pattern".into(), V::s("/srv/%_/htdocs")),
                ("default-root".into(), V::s("/srv/www.example.com/htdocs")),
            ]
        );
    }
}

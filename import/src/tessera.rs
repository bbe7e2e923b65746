//! What the importer knows about Tessera's modules: how the options the
//! front ends collect become a module table, which tables switch a module off,
//! and static-file's built-in MIME table (so only differences are written).
//!
//! Model keys per module (the front ends set them; see [`crate::model`]):
//!
//! | module | keys |
//! |---|---|
//! | `static-file` | `enabled` (false: off), `index-files`, `hidden-files`, `follow-symlinks`, `mime-types`, `etag`, `exclude-extensions` |
//! | `dir-listing` | `enabled` (off unless true), `hidden-files`, `follow-symlinks`, `header-file`, `readme-file` |
//! | `headers` | `expiration` (fields set by Cherokee's expiration), `set` (an empty value removes the field), `add` |
//! | `expires` | `url`, `mime-types`, `existing-cache-control` (off without rules) |
//! | `access-log` | `path` (off when absent or empty), `format` |
//! | `access` | `deny-suffixes`, `rules` |
//! | `auth-basic` | `backend` (`htpasswd` or `plain`), `user-file` (htpasswd), `plain-file`, `require-list` (`[{prefix, realm, require}]`, first prefix wins) |
//! | `compress` | `enabled`, `encodings`, `mime-types` (off when empty), `min-size`, `max-size`, `gzip-level` |
//! | `redirect` | `rules`, `status` |
//! | `rewrite` | `once`, `if-not-file` (lists of `{regex, target}`) |
//! | `error-pages` | `prefix`, `pages` |
//! | `proxy` | `server` (`[{key, prefix?, servers, balance?, connect-timeout?, …}]`: the first entry whose `prefix` (a lighttpd path prefix, or a suffix when it does not start with `/`) matches wins; `key` names the upstream), `balance`, `map-path`, `host`, `forwarded`; the table's `upstream` is an upstream description that [`crate::upstream::assign`] turns into a name |
//! | `fastcgi`, `scgi`, `uwsgi` | `server` (entries as [`crate::backend`] describes), `balance`, `index-names`, `params` |
//! | `cgi` | `assign`, `script-name`, `index-names`, `x-sendfile`, `x-sendfile-docroot`, `params`, `timeout` |
//! | `alias` | `paths` |
//! | `userdir` | `enabled`, `path`, `basepath`, `exclude-user`, `include-user`, `letterhomes` |
//! | `mass-vhost` | `path-pattern`, `default-root`, or `simple-server-root`, `simple-document-root`, `simple-default-host` |

use crate::backend;
use crate::model::{Cond, Leaf, ModuleSpec, V};

/// The Tessera modules the importer writes, in pipeline order: request-phase
/// modules, content handlers, response-phase modules, the access log.
pub const MODULE_ORDER: &[&str] = &[
    "redirect",
    "rewrite",
    "mass-vhost",
    "userdir",
    "alias",
    "access",
    "auth-basic",
    "compress",
    "proxy",
    "fastcgi",
    "scgi",
    "uwsgi",
    "cgi",
    "static-file",
    "dir-listing",
    "headers",
    "expires",
    "error-pages",
    "access-log",
];

/// The `user-file` of an `auth-basic` table for paths that require a login
/// without a usable backend or user file (lighttpd `auth.require` without
/// `auth.backend` and its user file): an empty file, so every request there
/// gets 401 (fail closed).
pub const FAIL_CLOSED_USER_FILE: &str = "/dev/null";

/// The [`ModuleSpec`] for Tessera's built-in modules.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tessera;

fn get<'a>(opts: &'a [(&'static str, V)], key: &str) -> Option<&'a V> {
    opts.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| v)
}

fn copy(opts: &[(&'static str, V)], keys: &[&str]) -> Vec<(String, V)> {
    let mut t = Vec::new();
    for k in keys {
        if let Some(v) = get(opts, k) {
            t.push(((*k).to_owned(), v.clone()));
        }
    }
    t
}

fn nonempty(v: Option<&V>) -> bool {
    v.is_some_and(|v| !v.is_empty())
}

impl ModuleSpec for Tessera {
    fn finalize(&self, module: &str, opts: &[(&'static str, V)]) -> Leaf {
        match module {
            "static-file" => {
                if get(opts, "enabled") == Some(&V::Bool(false)) {
                    return Leaf::Off;
                }
                Leaf::Table(copy(
                    opts,
                    &[
                        "index-files",
                        "hidden-files",
                        "follow-symlinks",
                        "etag",
                        "exclude-extensions",
                        "mime-types",
                    ],
                ))
            }
            "dir-listing" => {
                if get(opts, "enabled") != Some(&V::Bool(true)) {
                    return Leaf::Off;
                }
                Leaf::Table(copy(
                    opts,
                    &[
                        "hidden-files",
                        "follow-symlinks",
                        "header-file",
                        "readme-file",
                    ],
                ))
            }
            "headers" => {
                let mut set: Vec<(String, V)> = Vec::new();
                let mut remove: Vec<V> = Vec::new();
                for key in ["expiration", "set"] {
                    let Some(V::Tab(t)) = get(opts, key) else {
                        continue;
                    };
                    for (name, v) in t {
                        set.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
                        remove
                            .retain(|r| !r.as_str().is_some_and(|r| r.eq_ignore_ascii_case(name)));
                        if v.is_empty() {
                            remove.push(V::s(name.clone()));
                        } else {
                            set.push((name.clone(), v.clone()));
                        }
                    }
                }
                let mut add: Vec<(String, V)> = Vec::new();
                // Cherokee's caching directives (`expiration-add`), then adds.
                let adds = ["expiration-add", "add"]
                    .iter()
                    .filter_map(|k| match get(opts, k) {
                        Some(V::Tab(t)) => Some(t),
                        _ => None,
                    })
                    .flatten();
                {
                    for (name, v) in adds {
                        // lighttpd runs add before set: a field also set keeps
                        // only the set value.
                        if set.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
                            || remove
                                .iter()
                                .any(|r| r.as_str().is_some_and(|r| r.eq_ignore_ascii_case(name)))
                        {
                            continue;
                        }
                        // Tessera's add takes each name once: join repeated ones.
                        if let Some((_, V::Str(old))) =
                            add.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(name))
                        {
                            if let Some(s) = v.as_str() {
                                old.push_str(", ");
                                old.push_str(s);
                            }
                            continue;
                        }
                        add.push((name.clone(), v.clone()));
                    }
                }
                if set.is_empty() && add.is_empty() && remove.is_empty() {
                    return Leaf::Off;
                }
                let mut t = Vec::new();
                if !remove.is_empty() {
                    t.push(("remove".to_owned(), V::Arr(remove)));
                }
                if !set.is_empty() {
                    t.push(("set".to_owned(), V::Tab(set)));
                }
                if !add.is_empty() {
                    t.push(("add".to_owned(), V::Tab(add)));
                }
                Leaf::Table(t)
            }
            "expires" => {
                if !nonempty(get(opts, "url")) && !nonempty(get(opts, "mime-types")) {
                    return Leaf::Off;
                }
                let mut t = copy(opts, &["url", "mime-types", "existing-cache-control"]);
                t.retain(|(_, v)| !v.is_empty());
                Leaf::Table(t)
            }
            "access-log" => {
                if !nonempty(get(opts, "path")) {
                    return Leaf::Off;
                }
                Leaf::Table(copy(opts, &["path", "format"]))
            }
            "access" => {
                let mut t = copy(opts, &["deny-suffixes", "rules"]);
                t.retain(|(_, v)| !v.is_empty());
                if t.is_empty() {
                    return Leaf::Off;
                }
                Leaf::Table(t)
            }
            "auth-basic" => {
                let backend = get(opts, "backend").and_then(V::as_str).unwrap_or("");
                let file_key = if backend == "plain" {
                    "plain-file"
                } else {
                    "user-file"
                };
                let Some(V::Arr(list)) = get(opts, "require-list") else {
                    return Leaf::Off;
                };
                if list.is_empty() {
                    return Leaf::Off;
                }
                // Paths that require a login without a usable backend or
                // user file: nobody gets in (lighttpd answers 500 or 401),
                // never an open door. An empty user file is that.
                let usable = matches!(backend, "htpasswd" | "plain");
                let closed = V::s(FAIL_CLOSED_USER_FILE);
                let file = match get(opts, file_key) {
                    Some(f) if usable && f.as_str() != Some("") => f,
                    _ => &closed,
                };
                let backend = if usable { backend } else { "htpasswd" };
                let mut parts = Vec::new();
                for e in list {
                    let Some(e) = e.as_tab() else { continue };
                    let field = |k: &str| e.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                    let prefix = field("prefix").and_then(|v| v.as_str().map(str::to_owned));
                    let mut t = Vec::new();
                    if let Some(r) = field("realm") {
                        t.push(("realm".to_owned(), r));
                    }
                    t.push(("user-file".to_owned(), file.clone()));
                    if backend == "plain" {
                        t.push(("allow-plain".to_owned(), V::Bool(true)));
                    }
                    t.push((
                        "require".to_owned(),
                        field("require").unwrap_or_else(|| V::s("valid-user")),
                    ));
                    let cond = match prefix.as_deref() {
                        None | Some("") | Some("/") => Cond::True,
                        Some(p) if p.starts_with('/') => {
                            Cond::Match(V::tab1("path-prefix", V::s(p)))
                        }
                        Some(p) => Cond::Match(V::tab1(
                            "path-regex",
                            V::s(format!("^{}", fancy_regex::escape(p))),
                        )),
                    };
                    parts.push((cond, t));
                }
                if parts.is_empty() {
                    return Leaf::Off;
                }
                Leaf::Split(parts)
            }
            "compress" => {
                if get(opts, "enabled") == Some(&V::Bool(false)) {
                    return Leaf::Off;
                }
                let encodings = get(opts, "encodings");
                if !nonempty(get(opts, "mime-types")) || encodings.is_some_and(V::is_empty) {
                    return Leaf::Off;
                }
                let mut t = vec![("precompressed".to_owned(), V::Arr(Vec::new()))];
                t.extend(copy(
                    opts,
                    &[
                        "encodings",
                        "mime-types",
                        "min-size",
                        "max-size",
                        "gzip-level",
                    ],
                ));
                Leaf::Table(t)
            }
            "redirect" => {
                let Some(V::Arr(rules)) = get(opts, "rules") else {
                    return Leaf::Off;
                };
                if rules.is_empty() {
                    return Leaf::Off;
                }
                let status = get(opts, "status").cloned();
                let rules = rules
                    .iter()
                    .map(|r| match (r, &status) {
                        (V::Tab(t), Some(s)) => {
                            let mut t = t.clone();
                            t.push(("status".to_owned(), s.clone()));
                            V::Tab(t)
                        }
                        (r, _) => r.clone(),
                    })
                    .collect();
                Leaf::Table(vec![("rules".to_owned(), V::Arr(rules))])
            }
            "rewrite" => {
                let mut rules = Vec::new();
                if let Some(V::Arr(r)) = get(opts, "once") {
                    rules.extend(r.iter().cloned());
                }
                if let Some(V::Arr(r)) = get(opts, "if-not-file") {
                    for x in r {
                        if let V::Tab(t) = x {
                            let mut t = t.clone();
                            t.push(("if-not-file".to_owned(), V::Bool(true)));
                            rules.push(V::Tab(t));
                        }
                    }
                }
                if rules.is_empty() {
                    return Leaf::Off;
                }
                Leaf::Table(vec![("rules".to_owned(), V::Arr(rules))])
            }
            "error-pages" => {
                let mut t = copy(opts, &["pages", "prefix"]);
                t.retain(|(_, v)| !v.is_empty());
                if t.is_empty() {
                    return Leaf::Off;
                }
                Leaf::Table(t)
            }
            "proxy" => proxy_leaf(opts),
            "fastcgi" | "scgi" | "uwsgi" => backend::socket_leaf(module, opts),
            "cgi" => backend::cgi_leaf(opts),
            "alias" => backend::alias_leaf(opts),
            "userdir" => backend::userdir_leaf(opts),
            "mass-vhost" => backend::mass_vhost_leaf(opts),
            _ => Leaf::Table(
                opts.iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect(),
            ),
        }
    }

    fn off_table(&self, module: &str) -> Option<Vec<(String, V)>> {
        match module {
            "headers" | "expires" | "access" => Some(Vec::new()),
            "compress" => Some(vec![
                ("precompressed".to_owned(), V::Arr(Vec::new())),
                ("encodings".to_owned(), V::Arr(Vec::new())),
            ]),
            _ => None,
        }
    }
}

/// The `proxy` leaf: one part per `server` entry, in order (lighttpd uses the
/// first entry whose prefix or suffix matches), each with its upstream
/// description and the options shared by all entries.
fn proxy_leaf(opts: &[(&'static str, V)]) -> Leaf {
    let Some(V::Arr(entries)) = get(opts, "server") else {
        return Leaf::Off;
    };
    let mut parts = Vec::new();
    for e in entries {
        let Some(e) = e.as_tab() else { continue };
        let field = |k: &str| e.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let key = field("key")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let Some(V::Arr(servers)) = field("servers") else {
            continue;
        };
        if servers.is_empty() {
            continue;
        }
        // `prefix`: lighttpd's prefix or suffix (absent: every request).
        let prefix = field("prefix")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let mut up = vec![("key".to_owned(), V::s(key))];
        up.push(("servers".to_owned(), V::Arr(servers.clone())));
        if servers.len() > 1 {
            // lighttpd's default proxy.balance is "fair".
            let balance = field("balance")
                .or_else(|| get(opts, "balance").cloned())
                .unwrap_or_else(|| V::s("least-conn"));
            up.push(("balance".to_owned(), balance));
        }
        for (k, v) in e {
            if !matches!(k.as_str(), "key" | "prefix" | "servers" | "balance") {
                up.push((k.clone(), v.clone()));
            }
        }
        let mut t = vec![("upstream".to_owned(), V::Tab(up))];
        t.extend(copy(opts, &["map-path", "host", "forwarded"]));
        let cond = match prefix.as_str() {
            "" | "/" => Cond::True,
            p if p.starts_with('/') => Cond::Match(V::tab1("path-prefix", V::s(p))),
            s => Cond::Match(V::tab1(
                "path-regex",
                V::s(format!("{}$", fancy_regex::escape(s))),
            )),
        };
        let whole = cond == Cond::True;
        parts.push((cond, t));
        if whole {
            break;
        }
    }
    if parts.is_empty() {
        return Leaf::Off;
    }
    Leaf::Split(parts)
}

/// Types static-file gives `; charset=utf-8` (its `mime.rs`).
fn is_text(t: &str) -> bool {
    t.starts_with("text/")
        || matches!(
            t,
            "application/javascript"
                | "application/json"
                | "application/xml"
                | "application/xhtml+xml"
                | "application/manifest+json"
                | "application/ld+json"
                | "application/rss+xml"
                | "application/atom+xml"
                | "image/svg+xml"
        )
}

/// Extensions of files most web sites serve (pages, styles, scripts, data,
/// images, fonts, media, archives). One that an imported `mimetype.assign`
/// leaves out is written into `mime-types` with the type lighttpd sends for it
/// (the `""` default, else `application/octet-stream`) instead of Tessera's
/// built-in type. Rarer extensions keep Tessera's types.
pub const WEB_EXTENSIONS: &[&str] = &[
    "html", "htm", "css", "js", "mjs", "json", "xml", "txt", "csv", "svg", "png", "jpg", "jpeg",
    "gif", "webp", "avif", "ico", "woff", "woff2", "ttf", "otf", "pdf", "zip", "gz", "tar", "mp4",
    "webm", "ogg", "mp3", "wav", "wasm",
];

/// The Content-Type static-file sends for a file extension (without the dot)
/// when no `mime-types` entry overrides it: mime_guess's first type, with
/// `; charset=utf-8` for text types; `application/octet-stream` when unknown.
pub fn builtin_mime(ext: &str) -> String {
    match mime_guess::from_ext(ext).first_raw() {
        Some(t) if is_text(t) && !t.contains(';') => format!("{t}; charset=utf-8"),
        Some(t) => t.to_owned(),
        None => "application/octet-stream".to_owned(),
    }
}

/// A Content-Type in a comparable form: lower-case, no spaces around `;` and `=`.
pub fn normalize_mime(t: &str) -> String {
    t.split(';')
        .map(|p| p.trim().to_ascii_lowercase().replace(" = ", "="))
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_set_wins_over_add_and_blank_removes() {
        let leaf = Tessera.finalize(
            "headers",
            &[
                (
                    "add",
                    V::Tab(vec![("X-A".into(), V::s("1")), ("X-B".into(), V::s("2"))]),
                ),
                (
                    "set",
                    V::Tab(vec![("x-b".into(), V::s("3")), ("X-C".into(), V::s(""))]),
                ),
            ],
        );
        assert_eq!(
            leaf,
            Leaf::Table(vec![
                ("remove".into(), V::strs(["X-C"])),
                ("set".into(), V::Tab(vec![("x-b".into(), V::s("3"))])),
                ("add".into(), V::Tab(vec![("X-A".into(), V::s("1"))])),
            ])
        );
        assert_eq!(Tessera.finalize("headers", &[]), Leaf::Off);
    }

    #[test]
    fn auth_without_a_usable_backend_or_file_fails_closed() {
        let list = V::Arr(vec![V::Tab(vec![
            ("prefix".into(), V::s("/admin/")),
            ("require".into(), V::s("valid-user")),
        ])]);
        let file_of = |opts: &[(&'static str, V)]| match Tessera.finalize("auth-basic", opts) {
            Leaf::Split(parts) => parts[0]
                .1
                .iter()
                .find(|(k, _)| k == "user-file")
                .and_then(|(_, v)| v.as_str().map(str::to_owned)),
            other => panic!("{other:?}"),
        };
        // no backend, no file, an unsupported backend, a file for another backend
        for opts in [
            vec![("require-list", list.clone())],
            vec![
                ("backend", V::s("htpasswd")),
                ("require-list", list.clone()),
            ],
            vec![
                ("backend", V::s("ldap")),
                ("user-file", V::s("/etc/h")),
                ("require-list", list.clone()),
            ],
            vec![
                ("backend", V::s("htpasswd")),
                ("plain-file", V::s("/etc/p")),
                ("require-list", list.clone()),
            ],
            vec![
                ("backend", V::s("htpasswd")),
                ("user-file", V::s("")),
                ("require-list", list.clone()),
            ],
        ] {
            assert_eq!(
                file_of(&opts).as_deref(),
                Some(FAIL_CLOSED_USER_FILE),
                "{opts:?}"
            );
        }
        let good = [
            ("backend", V::s("htpasswd")),
            ("user-file", V::s("/etc/h")),
            ("require-list", list),
        ];
        assert_eq!(file_of(&good).as_deref(), Some("/etc/h"));
    }

    #[test]
    fn builtin_types() {
        assert_eq!(builtin_mime("css"), "text/css; charset=utf-8");
        assert_eq!(builtin_mime("png"), "image/png");
        assert_eq!(builtin_mime("qqzz"), "application/octet-stream");
        assert_eq!(
            normalize_mime("text/css;charset=utf-8"),
            normalize_mime("text/css; charset=UTF-8")
        );
    }
}

//! lighttpd's back ends and path mapping into the model keys of
//! [`crate::backend`]: `fastcgi.server`, `scgi.server` (`"proto" =>
//! "uwsgi"` or `scgi.protocol = "uwsgi"`: the `uwsgi` module), their
//! `*.balance`, `cgi.*`, `alias.url`, `userdir.*`, `simple-vhost.*`,
//! `evhost.path-pattern`, `setenv.*-environment` (the back ends' `params`),
//! and Debian's `-*- depends: … -*-` file headers.

use super::proxy::{backend_addr, BACKEND_KEYS};
use super::value::{Setting, Val};
use super::Tr;
use crate::model::{Opt, V};
use crate::report::{Report, Src};
use std::path::Path;

/// The module a gateway option's entries go to: `fastcgi`, or for
/// `scgi.server` `scgi` or `uwsgi` (lighttpd's `"proto"`).
fn gateway_module(option: &str, proto: &str) -> &'static str {
    match (option, proto) {
        ("fastcgi.server", _) => "fastcgi",
        (_, "uwsgi") => "uwsgi",
        _ => "scgi",
    }
}

/// The back ends of one `fastcgi.server`/`scgi.server` key: the direct
/// one-host form `( "host" => …, "port" => … )`, a list of hosts, or named
/// hosts `( "name" => ( … ) )`.
fn hosts_of(items: &[(Option<String>, Val)]) -> Vec<Vec<(String, Val)>> {
    let lower = |p: &[(Option<String>, Val)]| -> Vec<(String, Val)> {
        p.iter()
            .filter_map(|(k, v)| Some((k.clone()?.to_ascii_lowercase(), v.clone())))
            .collect()
    };
    // One host: some option has a plain value ("host" => "127.0.0.1");
    // named hosts have only lists as values.
    if items
        .iter()
        .any(|(k, v)| k.is_some() && !matches!(v, Val::Arr(_)))
    {
        return vec![lower(items)];
    }
    items
        .iter()
        .filter_map(|(_, v)| match v {
            Val::Arr(p) => Some(lower(p)),
            _ => None,
        })
        .collect()
}

impl Tr<'_> {
    /// The back-end modules this configuration uses (their options are
    /// written only then): `fastcgi`, `scgi`, `uwsgi`, `cgi`.
    pub(super) fn backend_modules(&self) -> Vec<&'static str> {
        let set = |k: &str| self.parsed.contexts.iter().any(|c| c.get(k).is_some());
        let mut out = Vec::new();
        if set("fastcgi.server") && self.is_loaded("mod_fastcgi") {
            out.push("fastcgi");
        }
        if set("scgi.server") && self.is_loaded("mod_scgi") {
            out.extend(["scgi", "uwsgi"]);
        }
        if set("cgi.assign") && self.is_loaded("mod_cgi") {
            out.push("cgi");
        }
        out
    }

    /// The model options of a back-end or path-mapping option, `None` when
    /// `s` is not one of them.
    pub(super) fn backend_option(
        &self,
        ctx: usize,
        s: &Setting,
        report: &mut Report,
    ) -> Option<Vec<Opt>> {
        let key = s.key.as_str();
        let src = &s.src;
        let val = &s.val;
        let opt = |module: &'static str, k: &'static str, v: V| Opt {
            module,
            key: k,
            val: v,
            src: src.clone(),
        };
        let bool_of = |report: &mut Report| -> Option<bool> {
            let b = val.as_bool();
            if b.is_none() {
                report.dropped(src, key, format!("{} is not a boolean", val.show()));
            }
            b
        };
        let out = match key {
            "fastcgi.server" | "scgi.server" => {
                let proto = self
                    .ctx(ctx)
                    .get("scgi.protocol")
                    .or_else(|| self.global("scgi.protocol"))
                    .and_then(|p| p.val.as_string())
                    .unwrap_or_else(|| "scgi".into());
                let mut per: Vec<(&'static str, Vec<V>)> = Vec::new();
                for (m, e) in gateway_servers(key, val, &proto, src, report) {
                    match per.iter_mut().find(|(n, _)| *n == m) {
                        Some((_, l)) => l.push(e),
                        None => per.push((m, vec![e])),
                    }
                }
                per.into_iter()
                    .map(|(m, l)| opt(m, "server", V::Arr(l)))
                    .collect()
            }
            "scgi.protocol" => {
                let p = val.as_string().unwrap_or_default();
                if matches!(p.as_str(), "scgi" | "uwsgi") {
                    report.translated(
                        src,
                        key,
                        format!("the scgi.server back ends of this block use the {p} module"),
                    );
                } else {
                    report.dropped(
                        src,
                        key,
                        format!("\"{p}\": lighttpd knows \"scgi\" and \"uwsgi\""),
                    );
                }
                Vec::new()
            }
            "fastcgi.map-extensions" | "scgi.map-extensions" => {
                report.dropped(src, key, "extension aliases are not translated: add the extensions to the server list (each gets its own entry)");
                Vec::new()
            }
            "cgi.assign" => {
                let pairs = val.as_pairs();
                let t: Vec<(String, V)> = pairs
                    .iter()
                    .map(|(e, i)| (e.clone(), V::s(i.clone())))
                    .collect();
                let every = pairs.iter().any(|(e, _)| e.is_empty());
                report.translated(
                    src,
                    key,
                    if every {
                        "cgi assign (the \"\" key: every file is run, as in lighttpd)"
                    } else {
                        "cgi assign"
                    },
                );
                vec![opt("cgi", "assign", V::Tab(t))]
            }
            "cgi.x-sendfile" => {
                let Some(b) = bool_of(report) else {
                    return Some(Vec::new());
                };
                if b && !self
                    .parsed
                    .contexts
                    .iter()
                    .any(|c| c.get("cgi.x-sendfile-docroot").is_some())
                {
                    report.approximated(src, key, "cgi x-sendfile = true: without cgi.x-sendfile-docroot lighttpd serves any file a script names, Tessera only files under the document root (set x-sendfile-docroot)");
                } else {
                    report.translated(src, key, format!("cgi x-sendfile = {b}"));
                }
                vec![opt("cgi", "x-sendfile", V::Bool(b))]
            }
            "cgi.x-sendfile-docroot" => {
                report.translated(src, key, "cgi x-sendfile-docroot");
                vec![opt("cgi", "x-sendfile-docroot", V::strs(val.as_list()))]
            }
            "cgi.execute-x-only" => {
                report.approximated(src, key, "no such option in Tessera: a file cgi assign runs itself (\"\") must be executable, one with an interpreter is read by it");
                Vec::new()
            }
            "cgi.local-redir" => {
                report.approximated(src, key, "Tessera always treats a local Location without a status as an internal redirect (RFC 3875 §6.2.2)");
                Vec::new()
            }
            "cgi.upgrade" => {
                report.dropped(
                    src,
                    key,
                    "CGI scripts cannot take over the connection (Upgrade) in Tessera",
                );
                Vec::new()
            }
            "cgi.limits" => {
                report.approximated(src, key, "not translated: Tessera's cgi has timeout (60 s) and max-processes (32); set them by hand");
                Vec::new()
            }
            "alias.url" => {
                let pairs = val.as_pairs();
                report.translated(src, key, "alias paths (the longest matching prefix wins; lighttpd refuses overlapping prefixes in the wrong order, so the answer is the same)");
                // as for a document root: translated, and a warning per
                // target missing (lighttpd also aliases single files)
                for (_, target) in pairs.iter().filter(|(_, t)| !Path::new(t).exists()) {
                    report.missing(src, key, target);
                }
                vec![opt(
                    "alias",
                    "paths",
                    V::Tab(pairs.into_iter().map(|(u, d)| (u, V::s(d))).collect()),
                )]
            }
            "userdir.path" | "userdir.basepath" => {
                let k = if key == "userdir.path" {
                    "path"
                } else {
                    "basepath"
                };
                report.translated(src, key, format!("userdir {k}"));
                vec![opt("userdir", k, V::s(val.as_string().unwrap_or_default()))]
            }
            "userdir.exclude-user" | "userdir.include-user" => {
                let k = if key == "userdir.exclude-user" {
                    "exclude-user"
                } else {
                    "include-user"
                };
                report.translated(src, key, format!("userdir {k}"));
                vec![opt("userdir", k, V::strs(val.as_list()))]
            }
            "userdir.letterhomes" | "userdir.active" => {
                let Some(b) = bool_of(report) else {
                    return Some(Vec::new());
                };
                let k = if key == "userdir.active" {
                    "enabled"
                } else {
                    "letterhomes"
                };
                report.translated(src, key, format!("userdir {k} = {b}"));
                vec![opt("userdir", k, V::Bool(b))]
            }
            "simple-vhost.server-root"
            | "simple-vhost.document-root"
            | "simple-vhost.default-host" => {
                let k = match key {
                    "simple-vhost.server-root" => "simple-server-root",
                    "simple-vhost.document-root" => "simple-document-root",
                    _ => "simple-default-host",
                };
                report.translated(src, key, "mass-vhost path-pattern = \"<server-root>/%_/<document-root>\", default-root = \"<server-root>/<default-host>/<document-root>\"");
                vec![opt(
                    "mass-vhost",
                    k,
                    V::s(val.as_string().unwrap_or_default()),
                )]
            }
            "evhost.path-pattern" => {
                let p = val.as_string().unwrap_or_default();
                if let Some(bad) = evhost_unsupported(&p) {
                    report.dropped(
                        src,
                        key,
                        format!(
                            "\"{p}\": {bad} is not supported by mass-vhost (%%, %_, %0 to %9 are)"
                        ),
                    );
                    return Some(Vec::new());
                }
                report.translated(src, key, "mass-vhost path-pattern (an unknown host, or one whose directory is missing, gets the vhost's document root)");
                vec![opt("mass-vhost", "path-pattern", V::s(p))]
            }
            "setenv.add-environment" | "setenv.set-environment" => {
                let mods = self.backend_modules();
                if mods.is_empty() {
                    report.not_needed(src, key, "no FastCGI, SCGI or CGI back end uses it");
                    return Some(Vec::new());
                }
                report.translated(src, key, format!("params of {}", mods.join(", ")));
                let t = V::Tab(
                    val.as_pairs()
                        .into_iter()
                        .map(|(k, v)| (k, V::s(v)))
                        .collect(),
                );
                mods.into_iter()
                    .map(|m| opt(m, "params", t.clone()))
                    .collect()
            }
            _ => return None,
        };
        Some(out)
    }
}

/// The first construct of an evhost pattern mass-vhost cannot express
/// (`%{M.N}`, a `%` followed by anything but `%`, `_` or a digit).
fn evhost_unsupported(p: &str) -> Option<String> {
    let b = p.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            match b.get(i + 1) {
                Some(b'%' | b'_' | b'0'..=b'9') => i += 2,
                Some(b'{') => return Some(p[i..].chars().take(6).collect()),
                _ => return Some("a lone %".into()),
            }
        } else {
            i += 1;
        }
    }
    None
}

/// One back end's options (lower-case names) in a gateway's server list.
pub(super) type Host = Vec<(String, Val)>;

/// The keys of a `proxy.server`, `fastcgi.server` or `scgi.server` value
/// (extensions or prefixes) with their back ends' options (lower-case
/// names), in order; malformed entries are reported and left out.
/// The requests a `fastcgi.server` (or `scgi.server`) key applies to, in
/// words: `every request` for `"/"`, `paths under "/app"` for a prefix,
/// `paths ending in ".php"` for an extension.
fn guarded(key: &str) -> String {
    if key == "/" {
        "every request".to_owned()
    } else if key.starts_with('/') {
        format!("paths under \"{key}\"")
    } else {
        format!("paths ending in \"{key}\"")
    }
}

pub(super) fn keyed_hosts(
    option: &str,
    val: &Val,
    src: &Src,
    report: &mut Report,
) -> Vec<(String, Vec<Host>)> {
    let Val::Arr(exts) = val else {
        report.dropped(
            src,
            option,
            format!("{}: not a list of extensions or prefixes", val.show()),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for (ext, hosts) in exts {
        let Some(ext) = ext else {
            report.dropped(
                src,
                option,
                format!(
                    "{}: an entry without an extension or prefix (\".php\" => ( … ))",
                    hosts.show()
                ),
            );
            continue;
        };
        let Val::Arr(items) = hosts else {
            report.dropped(
                src,
                option,
                format!("\"{ext}\": {} is not a list of back ends", hosts.show()),
            );
            continue;
        };
        out.push((ext.clone(), hosts_of(items)));
    }
    out
}

/// `fastcgi.server` or `scgi.server` entries: `(module, entry)` in order,
/// each entry as [`crate::backend`] describes it.
fn gateway_servers(
    option: &str,
    val: &Val,
    proto: &str,
    src: &Src,
    report: &mut Report,
) -> Vec<(&'static str, V)> {
    let mut out = Vec::new();
    for (ext, hosts) in keyed_hosts(option, val, src, report) {
        let get =
            |h: &[(String, Val)], k: &str| h.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let proto = hosts
            .iter()
            .find_map(|h| get(h, "proto").and_then(|v| v.as_string()))
            .unwrap_or_else(|| proto.to_owned());
        let module = gateway_module(option, &proto);
        let what = |k: &str| format!("{option} \"{ext}\" \"{k}\"");
        let mut servers: Vec<V> = Vec::new();
        let mut e: Vec<(String, V)> = Vec::new();
        let set = |e: &mut Vec<(String, V)>, k: &str, v: V| {
            if !e.iter().any(|(n, _)| n == k) {
                e.push((k.to_owned(), v));
            }
        };
        let mut spawn: Vec<(String, V)> = Vec::new();
        let mut authorizer = false;
        for h in &hosts {
            if let Some(m) = get(h, "mode").and_then(|v| v.as_string()) {
                if m == "authorizer" {
                    report.weaker(src, &what("mode"), format!("\"authorizer\" is not supported (only the FastCGI responder role is), so this back end is not imported: the requests it checked ({}) are now served WITHOUT that check; protect them by hand (auth-basic, access)", guarded(&ext)));
                    authorizer = true;
                    continue;
                }
                if m != "responder" {
                    report.dropped(src, &what("mode"), format!("\"{m}\": only the FastCGI responder role is supported; this back end is not imported"));
                    authorizer = true;
                    continue;
                }
            }
            match backend_addr(h) {
                Ok(a) => {
                    if !servers.contains(&V::s(a.clone())) {
                        servers.push(V::s(a));
                    }
                }
                Err(err) => {
                    report.dropped(
                        src,
                        option,
                        format!("\"{ext}\": a back end is left out: {err}"),
                    );
                    continue;
                }
            }
            for (k, v) in h {
                match k.as_str() {
                    "host" | "port" | "socket" | "mode" | "proto" => {}
                    "bin-path" => spawn.push(("bin-path".into(), V::s(v.as_string().unwrap_or_default()))),
                    "max-procs" => match v.as_string().and_then(|n| n.parse::<i64>().ok()) {
                        Some(n) => spawn.push(("max-procs".into(), V::Int(n.max(1)))),
                        None => report.dropped(src, &what(k), format!("{} is not a number", v.show())),
                    },
                    "bin-environment" => spawn.push((
                        "bin-environment".into(),
                        V::Tab(v.as_pairs().into_iter().map(|(a, b)| (a, V::s(b))).collect()),
                    )),
                    "bin-copy-environment" => spawn.push(("bin-copy-environment".into(), V::strs(v.as_list()))),
                    "min-procs" | "max-load-per-proc" | "idle-timeout" => report.not_needed(src, &what(k), "lighttpd 1.4.46+ ignores it too: max-procs processes run all the time"),
                    "listen-backlog" => report.not_needed(src, &what(k), "Tessera's spawned processes listen with the system's default backlog"),
                    "kill-signal" => report.approximated(src, &what(k), "Tessera stops the processes it spawned with SIGTERM"),
                    "check-local" => match v.as_bool() {
                        Some(b) => {
                            report.translated(src, &what(k), format!("{module} check-local = {b}"));
                            set(&mut e, "check-local", V::Bool(b));
                        }
                        None => report.dropped(src, &what(k), format!("{} is not a boolean", v.show())),
                    },
                    "x-sendfile" | "allow-x-send-file" => match v.as_bool() {
                        Some(b) => {
                            if b && !h.iter().any(|(n, _)| n == "x-sendfile-docroot") {
                                report.approximated(src, &what(k), format!("{module} x-sendfile = true: without x-sendfile-docroot lighttpd serves any file the back end names, Tessera only files under the document root (set x-sendfile-docroot)"));
                            } else {
                                report.translated(src, &what(k), format!("{module} x-sendfile = {b}"));
                            }
                            set(&mut e, "x-sendfile", V::Bool(b));
                        }
                        None => report.dropped(src, &what(k), format!("{} is not a boolean", v.show())),
                    },
                    "x-sendfile-docroot" => {
                        report.translated(src, &what(k), format!("{module} x-sendfile-docroot"));
                        set(&mut e, "x-sendfile-docroot", V::strs(v.as_list()));
                    }
                    "fix-root-scriptname" => {
                        if v.as_bool() == Some(true) {
                            report.translated(src, &what(k), format!("{module} script-name = \"\" for the \"/\" prefix"));
                            set(&mut e, "fix-root-scriptname", V::Bool(true));
                        }
                    }
                    "broken-scriptfilename" => report.not_needed(src, &what(k), "Tessera sends the script's SCRIPT_FILENAME and PATH_INFO apart, which PHP reads with or without cgi.fix_pathinfo"),
                    "docroot" => report.dropped(src, &what(k), "Tessera sends the vhost's document root (DOCUMENT_ROOT, SCRIPT_FILENAME): a back end on another machine needs the same paths"),
                    "strip-request-uri" => report.dropped(src, &what(k), "not supported: map the path with script-name (a prefix key) instead"),
                    "uds-perms" => report.dropped(src, &what(k), "Tessera leaves the socket's permissions to the spawned process"),
                    _ => {
                        if let Some((_, t)) = BACKEND_KEYS.iter().find(|(l, _)| l == k) {
                            match v.as_string().and_then(|n| n.parse::<i64>().ok()) {
                                Some(n) => {
                                    report.translated(src, &what(k), format!("upstream {t} = {n}"));
                                    set(&mut e, t, V::Int(n));
                                }
                                None => report.dropped(src, &what(k), format!("{} is not a number of seconds", v.show())),
                            }
                        } else {
                            report.dropped(src, &what(k), "not an option Tessera knows for a back end");
                        }
                    }
                }
            }
        }
        if servers.is_empty() {
            if !authorizer {
                report.dropped(src, option, format!("\"{ext}\": no usable back end"));
            }
            continue;
        }
        let spawned = spawn.iter().any(|(k, _)| k == "bin-path");
        if spawned && servers.len() > 1 {
            report.dropped(src, &what("bin-path"), "Tessera spawns processes for an upstream of one server only: start these back ends yourself");
        } else if spawned {
            report.translated(src, &what("bin-path"), "[upstream.spawn] bin-path, max-procs, bin-environment, bin-copy-environment: Tessera starts, restarts and stops the processes");
            // lighttpd starts one process when max-procs is not set.
            if !spawn.iter().any(|(k, _)| k == "max-procs") {
                spawn.push(("max-procs".into(), V::Int(1)));
            }
            let order = [
                "bin-path",
                "max-procs",
                "bin-environment",
                "bin-copy-environment",
            ];
            spawn.sort_by_key(|(k, _)| order.iter().position(|o| o == k));
            spawn.dedup_by(|a, b| a.0 == b.0);
        } else if !spawn.is_empty() {
            report.dropped(src, option, format!("\"{ext}\": process settings without bin-path are ignored (lighttpd ignores them too)"));
        }
        let n = servers.len();
        let place = if ext == "/" {
            "for every request of the block".to_owned()
        } else if ext.starts_with('/') {
            format!(
                "in a rule matching path-prefix \"{ext}\", script-name = \"{}\"",
                ext.trim_end_matches('/')
            )
        } else {
            format!("for scripts ending in \"{ext}\" ({module} extensions)")
        };
        report.translated(
            src,
            option,
            format!(
                "\"{ext}\": {module} upstream = an [[upstream]] with {n} server{} {place}",
                if n == 1 { "" } else { "s" }
            ),
        );
        if ext == "/" && !e.iter().any(|(k, _)| k == "fix-root-scriptname") {
            report.approximated(src, option, format!("\"/\": {module} script-name = \"\" (SCRIPT_NAME empty, PATH_INFO the whole path), as fix-root-scriptname gives; without it lighttpd sends the whole path as SCRIPT_NAME"));
        }
        e.retain(|(k, _)| k != "fix-root-scriptname");
        let mut t = vec![
            ("key".to_owned(), V::s(ext.clone())),
            ("prefix".to_owned(), V::s(ext.clone())),
            ("servers".to_owned(), V::Arr(servers)),
        ];
        if spawned && n == 1 {
            t.push(("spawn".to_owned(), V::Tab(spawn)));
        }
        t.extend(e);
        out.push((module, V::Tab(t)));
    }
    out
}

/// Debian's `-*- depends: NAME -*-` headers (`15-fastcgi-php.conf` depends
/// on `fastcgi`): `lighty-enable-mod` enables the named configuration with
/// the file, which loads `mod_NAME`. Returns `(mod_NAME, where)` for each
/// file read.
pub(super) fn debian_depends(files: &[String]) -> Vec<(String, Src)> {
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for (i, line) in text.lines().take(10).enumerate() {
            let Some(rest) = line.split("-*- depends:").nth(1) else {
                continue;
            };
            let names = rest.split("-*-").next().unwrap_or("");
            for n in names
                .split([',', ' '])
                .map(str::trim)
                .filter(|n| !n.is_empty())
            {
                let m = format!("mod_{}", n.replace('-', "_"));
                let line = u32::try_from(i + 1).unwrap_or(u32::MAX);
                out.push((m, Src::new(f.clone(), line)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evhost_patterns() {
        assert_eq!(evhost_unsupported("/srv/%_/htdocs/%%/%3"), None);
        assert_eq!(
            evhost_unsupported("/srv/%{3.1}/x").as_deref(),
            Some("%{3.1}")
        );
        assert!(evhost_unsupported("/srv/%x").is_some());
    }

    #[test]
    fn hosts_forms() {
        let one = vec![
            (Some("host".to_owned()), Val::Str("127.0.0.1".into())),
            (Some("port".to_owned()), Val::Int(9000)),
        ];
        assert_eq!(hosts_of(&one).len(), 1);
        let named = vec![(Some("localhost".to_owned()), Val::Arr(one.clone()))];
        assert_eq!(
            hosts_of(&named),
            vec![vec![
                ("host".to_owned(), Val::Str("127.0.0.1".into())),
                ("port".to_owned(), Val::Int(9000)),
            ]]
        );
        let list = vec![(None, Val::Arr(one.clone())), (None, Val::Arr(one))];
        assert_eq!(hosts_of(&list).len(), 2);
    }

    /// An authorizer is not imported, and the report says plainly (WEAKER)
    /// that the paths it guarded are served without its check.
    #[test]
    fn an_authorizer_is_reported_as_a_weakening() {
        let (t, r) = crate::lighttpd::test_util::imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.modules = ( \"mod_fastcgi\" )\n",
            "fastcgi.server = ( \"/private/\" => (( \"host\" => \"127.0.0.1\", \"port\" => 9001,\n",
            "  \"mode\" => \"authorizer\", \"docroot\" => \"/srv\" )) )\n",
        ));
        assert!(!t.contains("[vhost.fastcgi]") && !t.contains("9001"), "{t}");
        let w: Vec<_> = r.entries.iter().filter(|e| e.is_weaker()).collect();
        assert_eq!(w.len(), 1, "{r}");
        assert_eq!(w[0].outcome, crate::Outcome::Dropped);
        assert_eq!(w[0].src.line, 3);
        assert!(
            w[0].message.starts_with("WEAKER: ")
                && w[0].message.contains("paths under \"/private/\"")
                && w[0].message.contains("WITHOUT that check"),
            "{r}"
        );
        assert_eq!(guarded("/"), "every request");
        assert_eq!(guarded(".php"), "paths ending in \".php\"");
    }

    #[test]
    fn scgi_proto_picks_the_module() {
        assert_eq!(gateway_module("scgi.server", "uwsgi"), "uwsgi");
        assert_eq!(gateway_module("scgi.server", "scgi"), "scgi");
        assert_eq!(gateway_module("fastcgi.server", "uwsgi"), "fastcgi");
    }
}

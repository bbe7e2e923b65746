//! The translation of a parsed configuration: `server.modules`, the
//! `[server]` keys, the blocks (lighttpd's defaults, then every context in
//! file order, each with its full condition), the module order, and the split
//! into vhosts (one per host test, plus the default one), each resolved into
//! ordered rules by [`crate::model::resolve`].

use std::collections::HashMap;
use std::path::Path;

use super::value::Parsed;
use super::{backends, log_format, Tr, DEFAULT_LOG_FORMAT, KNOWN_MODULES};
use crate::emit::{Output, VhostOut};
use crate::error::ImportError;
use crate::model::{resolve, Block, Cond, HostTest, Opt, V};
use crate::report::{Report, Src};
use crate::tessera::{Tessera, MODULE_ORDER};

pub(super) fn translate(
    parsed: &Parsed,
    main: &str,
    report: &mut Report,
) -> Result<Output, ImportError> {
    for n in &parsed.notes {
        report.push(&n.src, n.outcome, &n.what, n.message.clone());
    }
    let mut tr = Tr {
        parsed,
        main: main.to_owned(),
        loaded: Vec::new(),
        cond_cache: HashMap::new(),
        unimported: Default::default(),
        listen: Vec::new(),
        ctx_cond: HashMap::new(),
    };
    // server.modules
    if let Some(m) = tr.global("server.modules").cloned() {
        let list = m.val.as_list();
        for name in &list {
            if !KNOWN_MODULES.contains(&name.as_str()) {
                report.dropped(
                    &m.src,
                    "server.modules",
                    format!("{name}: not supported, its options are dropped"),
                );
            }
        }
        report.translated(
            &m.src,
            "server.modules",
            "the vhost modules lists (pipelines)",
        );
        tr.loaded = list;
    }
    for (m, src) in backends::debian_depends(&parsed.files) {
        if !tr.is_loaded(&m) {
            report.approximated(
                &src,
                "-*- depends -*-",
                format!("Debian's lighty-enable-mod enables the configuration loading {m} with this file: imported as if {m} were in server.modules"),
            );
            tr.loaded.push(m);
        }
    }
    for (i, c) in parsed.contexts.iter().enumerate().skip(1) {
        if let Some(s) = c.get("server.modules") {
            report.dropped(
                &s.src,
                "server.modules",
                "only allowed in the global context",
            );
        }
        let _ = i;
    }
    tr.listeners(report);
    // [server] keys.
    let mut server: Vec<(String, V, Src)> = Vec::new();
    let g = tr.ctx(0).clone();
    for s in &g.settings {
        let n = s.val.as_string().and_then(|v| v.parse::<i64>().ok());
        match (s.key.as_str(), n) {
            ("server.max-keep-alive-idle", Some(n)) => {
                report.translated(&s.src, &s.key, "[server] keep-alive");
                server.push(("keep-alive".into(), V::Int(n), s.src.clone()));
            }
            ("server.max-keep-alive-requests", Some(0)) => {
                report.translated(&s.src, &s.key, "[server] keep-alive = 0");
                server.retain(|(k, _, _)| k != "keep-alive");
                server.push(("keep-alive".into(), V::Int(0), s.src.clone()));
            }
            ("server.max-keep-alive-requests", _) => {
                report.approximated(
                    &s.src,
                    &s.key,
                    "Tessera does not limit requests per connection",
                );
            }
            ("server.max-read-idle", Some(n)) => {
                report.approximated(
                    &s.src,
                    &s.key,
                    "[server] client-header-timeout (the time to send the request head)",
                );
                server.push(("client-header-timeout".into(), V::Int(n), s.src.clone()));
            }
            ("server.max-write-idle", Some(n)) => {
                report.translated(&s.src, &s.key, "[server] send-timeout");
                server.push(("send-timeout".into(), V::Int(n), s.src.clone()));
            }
            ("server.max-connections", Some(n)) => {
                report.approximated(
                    &s.src,
                    &s.key,
                    "[server] max-connections is per worker in Tessera",
                );
                server.push(("max-connections".into(), V::Int(n.max(1)), s.src.clone()));
            }
            ("server.max-worker", _) => {
                report.not_needed(
                    &s.src,
                    &s.key,
                    "Tessera uses one worker thread per core ([server] workers)",
                );
            }
            _ => {}
        }
    }
    tr.proxy_server_keys(&mut server, report);
    // Blocks: lighttpd's defaults, then every context in file order.
    let dsrc = Src::new("<lighttpd default>", 0);
    let d = |module, key, val| Opt {
        module,
        key,
        val,
        src: dsrc.clone(),
    };
    let mut blocks = vec![Block {
        cond: Cond::True,
        opts: vec![
            d("static-file", "index-files", V::Arr(Vec::new())),
            d("static-file", "hidden-files", V::Bool(true)),
            d("static-file", "follow-symlinks", V::s("always")),
            d("dir-listing", "enabled", V::Bool(false)),
            d("dir-listing", "hidden-files", V::Bool(false)),
            d("dir-listing", "follow-symlinks", V::s("always")),
            d(
                "access-log",
                "format",
                V::s(log_format(DEFAULT_LOG_FORMAT).0),
            ),
        ],
        reset: false,
        base: true,
        label: "lighttpd's defaults".into(),
    }];
    // Written explicitly, so Tessera behaves as lighttpd does: not a warning.
    report.translated(
        &Src::new(main, 1),
        "static-file",
        "hidden-files = true and follow-symlinks = \"always\", as lighttpd serves dot-files and follows every symbolic link (set hidden-files = false and follow-symlinks = \"inside-root\" to harden)",
    );
    if !parsed
        .contexts
        .iter()
        .any(|c| c.get("mimetype.assign").is_some())
    {
        report.approximated(
            &Src::new(main, 1),
            "mimetype.assign",
            "not set: lighttpd sends application/octet-stream for every file, Tessera its built-in types",
        );
    }
    let mut docroots: Vec<(usize, String, Src)> = Vec::new();
    for i in 0..parsed.contexts.len() {
        let ctx = tr.ctx(i).clone();
        let cond = tr.cond_of(i, report);
        let mut opts = Vec::new();
        for s in &ctx.settings {
            if s.key == "server.document-root" {
                if let Some(p) = s.val.as_string() {
                    if p.is_empty() {
                        // Tessera would serve the configuration's directory.
                        return Err(ImportError::Parse {
                            file: s.src.file.clone(),
                            line: s.src.line,
                            message: "server.document-root is empty: set the directory of the files to serve".into(),
                        });
                    }
                    docroots.push((i, p, s.src.clone()));
                }
                continue;
            }
            opts.extend(tr.option(i, s, report));
        }
        let label = match &ctx.cond {
            _ if i == 0 => format!("{} (global)", main),
            Some(c) => format!("{}-{} {}", c.src, ctx.end_line, c.show()),
            None => format!("{}-{} else", ctx.src, ctx.end_line),
        };
        blocks.push(Block {
            cond,
            opts,
            reset: false,
            base: false,
            label,
        });
    }
    // A restriction in a block that never applies because a test could not
    // be imported (whatever its operator: `!~` lifts it for every client,
    // `=~` for the clients it named) is a weakening, said at the option.
    for i in 0..parsed.contexts.len() {
        let Some(test) = tr.unimported_test(i) else {
            continue;
        };
        for o in &blocks[i + 1].opts {
            let key = match (o.module, o.key) {
                ("access", "deny-suffixes") => "url.access-deny",
                ("auth-basic", "require-list") => "auth.require",
                _ => continue,
            };
            report.weaker(
                &o.src,
                key,
                format!("the test at {test} could not be imported, so its block never applies: this restriction is lifted for the requests it covered; restrict those paths by hand (access, auth-basic)"),
            );
        }
    }
    let sets = |m: &str, k: &str| {
        blocks
            .iter()
            .flat_map(|b| b.opts.iter())
            .find(|o| o.module == m && o.key == k)
            .map(|o| o.src.clone())
    };
    if let (Some(s), None) = (
        sets("compress", "mime-types"),
        sets("compress", "encodings"),
    ) {
        report.approximated(
            &s,
            "deflate.allowed-encodings",
            "not set: Tessera offers br, zstd and gzip (lighttpd's default depends on its build)",
        );
    }
    // Module order: lighttpd's server.modules decides redirect vs rewrite and
    // setenv vs expire.
    let pos = |m: &str| tr.loaded.iter().position(|l| l == m).unwrap_or(usize::MAX);
    let mut order: Vec<&'static str> = MODULE_ORDER.to_vec();
    if pos("mod_rewrite") < pos("mod_redirect") {
        swap(&mut order, "redirect", "rewrite");
    }
    if pos("mod_setenv") < pos("mod_expire") {
        // setenv first: headers before expires (expires then sees the
        // Cache-Control setenv added and, like lighttpd, keeps it).
    } else {
        swap(&mut order, "headers", "expires");
    }
    // Paths that require a login with no usable backend and user file
    // anywhere: the import closes them (see tessera::FAIL_CLOSED_USER_FILE)
    let auth_opts = || {
        blocks
            .iter()
            .flat_map(|b| &b.opts)
            .filter(|o| o.module == "auth-basic")
    };
    let usable_backend = auth_opts()
        .any(|o| o.key == "backend" && matches!(o.val.as_str(), Some("htpasswd" | "plain")));
    let user_file = auth_opts().any(|o| matches!(o.key, "user-file" | "plain-file"));
    if !(usable_backend && user_file) {
        if let Some(o) = auth_opts().find(|o| o.key == "require-list") {
            report.approximated(
                &o.src,
                "auth.require",
                "no usable auth.backend with its user file: every path it lists answers 401 to everyone (fail closed, with an empty user-file; lighttpd answers 500 or 401)",
            );
        }
    }
    // Vhosts: the default (global) one, then one per host test.
    let mut tests: Vec<HostTest> = Vec::new();
    for b in &blocks {
        b.cond.host_tests(&mut tests);
    }
    let mut names_seen: Vec<String> = Vec::new();
    tests.retain(|t| {
        let n = t.server_name();
        if names_seen.contains(&n) {
            false
        } else {
            names_seen.push(n);
            true
        }
    });
    // A host test met only inside $SERVER["socket"] blocks is a vhost for
    // those listeners (vhost `listen`); elsewhere its host goes to the other
    // vhosts, as in lighttpd. Where the sockets cannot be told (a socket
    // test under `!=` or an `else`), the vhost is not written rather than
    // served on every port.
    let mut vhost_listen: HashMap<HostTest, Vec<String>> = HashMap::new();
    tests.retain(|t| {
        let with: Vec<usize> = (0..parsed.contexts.len())
            .filter(|&i| {
                let mut ts = Vec::new();
                blocks[i + 1].cond.host_tests(&mut ts);
                ts.contains(t)
            })
            .collect();
        if !with.iter().all(|&i| blocks[i + 1].cond.has_matcher("socket")) {
            return true;
        }
        let mut addrs: Vec<String> = Vec::new();
        let mut told = true;
        for &i in &with {
            match blocks[i + 1].cond.required_matchers("socket") {
                Some(v) if !v.is_empty() => {
                    for a in v.iter().filter_map(V::as_str) {
                        if !addrs.iter().any(|x| x == a) {
                            addrs.push(a.to_owned());
                        }
                    }
                }
                _ => told = false,
            }
        }
        for &i in &with {
            let Some(rc) = &parsed.contexts[i].cond else {
                continue;
            };
            if told {
                report.translated(
                    &rc.src,
                    &rc.show(),
                    format!("vhost \"{}\" listen = {addrs:?} (only on those listeners)", t.server_name()),
                );
            } else {
                report.dropped(
                    &rc.src,
                    &rc.show(),
                    format!(
                        "a vhost for \"{}\" on some listeners only, which a $SERVER[\"socket\"] test under != or else does not name: no vhost of its own; its host is served by the other vhosts, where this block's settings apply per request (host and socket matchers) but not its vhost-wide ones (document root, server name)",
                        t.server_name()
                    ),
                );
            }
        }
        if told {
            vhost_listen.insert(t.clone(), addrs);
        }
        told
    });
    // A test has a vhost when one of `tests` has its server name (two tests
    // of the same name, `=^ "a."` and `=~ "^a\."`, select the same hosts);
    // a test without one (dropped above) never decides a block for another
    // vhost: its hosts reach that vhost, so it is checked per request.
    let vhost_of = |t: &HostTest| {
        let n = t.server_name();
        tests.iter().position(|x| x.server_name() == n)
    };
    let mut out = Output {
        header: vec![format!("Files read: {}.", parsed.files.join(", "))],
        listen: tr.listen.clone(),
        server,
        upstreams: Vec::new(),
        vhosts: Vec::new(),
    };
    let mut vhosts: Vec<(Option<HostTest>, VhostOut)> = Vec::new();
    for own in std::iter::once(None).chain(tests.iter().cloned().map(Some)) {
        let eval = |t: &HostTest| -> Option<bool> {
            let has_vhost = vhost_of(t).is_some();
            match &own {
                None => has_vhost.then_some(false),
                // The authorities this vhost gets: the name without port or
                // with any port (with one port for `== "h:8080"`): the test
                // is decided when it gives all of them the same answer.
                Some(HostTest::Exact(h)) => {
                    let name = crate::strip_port(h);
                    let ported: Vec<String> = if name.len() == h.len() {
                        vec![format!("{h}:1"), format!("{h}:80"), format!("{h}:65535")]
                    } else {
                        vec![h.clone()]
                    };
                    let first = t.eval_authority(name);
                    ported
                        .iter()
                        .all(|a| t.eval_authority(a) == first)
                        .then_some(first)
                }
                Some(v) => {
                    if t == v || t.server_name() == v.server_name() {
                        return Some(true);
                    }
                    if !has_vhost {
                        return None;
                    }
                    let v_wild = v.is_wildcard();
                    match t {
                        HostTest::Exact(_) => Some(false),
                        _ if t.is_wildcard() => {
                            let ts = t.server_name()[1..].to_owned();
                            if v_wild {
                                let vs = v.server_name()[1..].to_owned();
                                Some(vs.ends_with(&ts))
                            } else {
                                Some(false)
                            }
                        }
                        _ => {
                            if v_wild {
                                None
                            } else if vhost_of(t) < vhost_of(v) {
                                Some(false)
                            } else {
                                None
                            }
                        }
                    }
                }
            }
        };
        let listen = own
            .as_ref()
            .and_then(|t| vhost_listen.get(t))
            .cloned()
            .unwrap_or_default();
        let vblocks: Vec<Block> = blocks
            .iter()
            .map(|b| {
                // A vhost on one listener knows its socket tests' answers.
                let cond = match listen.as_slice() {
                    [one] => b.cond.decide_matcher("socket", &V::s(one.clone())),
                    _ => b.cond.clone(),
                };
                Block {
                    cond: cond.simplify(&eval),
                    ..b.clone()
                }
            })
            .collect();
        let vname = own
            .as_ref()
            .map_or_else(|| "default".to_owned(), HostTest::server_name);
        // Document root: the last one set where the vhost's condition holds.
        let mut root: Option<(String, Src)> = None;
        let mut conditional: Vec<(&str, &Src)> = Vec::new();
        for (ci, p, s) in &docroots {
            let c = vblocks[ci + 1].cond.clone();
            match c {
                Cond::True => root = Some((p.clone(), s.clone())),
                Cond::False => {}
                _ => conditional.push((p, s)),
            }
        }
        // (what they get instead: the root chosen below)
        let instead = root
            .clone()
            .or_else(|| docroots.first().map(|(_, p, s)| (p.clone(), s.clone())))
            .map_or_else(
                || "the vhost's document root".to_owned(),
                |(r, _)| format!("\"{r}\""),
            );
        for (p, s) in conditional {
            report.weaker(
                s,
                "server.document-root",
                format!(
                    "vhost \"{vname}\": Tessera has one document root per vhost; this conditional one (\"{p}\") is not used: the requests it covers are served from {instead} instead, with whatever files that holds"
                ),
            );
        }
        if root.is_none() {
            if let Some((_, p, s)) = docroots.first() {
                report.approximated(s, "server.document-root", format!("vhost \"{vname}\": no unconditional document root; this one is used for every request"));
                root = Some((p.clone(), s.clone()));
            }
        }
        let (root, root_src) = match root {
            Some((p, s)) => {
                report.translated(
                    &s,
                    "server.document-root",
                    format!("vhost \"{vname}\" document-root"),
                );
                (p, Some(s))
            }
            None => {
                report.approximated(
                    &Src::new(main, 1),
                    "server.document-root",
                    format!("vhost \"{vname}\": not set anywhere; /var/www is written, change it"),
                );
                ("/var/www".to_owned(), None)
            }
        };
        if !Path::new(&root).is_dir() {
            report.missing(
                root_src.as_ref().unwrap_or(&Src::new(main, 1)),
                "server.document-root",
                &root,
            );
        }
        let resolved = resolve(&vblocks, &order, &Tessera, &vname, report);
        let mut comment = Vec::new();
        match &own {
            None => comment.push(format!(
                "The global context of {main}: every host no other vhost claims."
            )),
            Some(t) => {
                let from: Vec<String> = blocks
                    .iter()
                    .filter(|b| {
                        let mut ts = Vec::new();
                        b.cond.host_tests(&mut ts);
                        ts.contains(t)
                    })
                    .map(|b| b.label.clone())
                    .collect();
                comment.push(format!(
                    "Hosts passing $HTTP[\"host\"] {}, from:",
                    show_test(t)
                ));
                comment.extend(from.into_iter().map(|f| format!("  {f}")));
            }
        }
        vhosts.push((
            own.clone(),
            VhostOut {
                comment,
                // `== "h:8080"` also claims `h`, unless a `== "h"` vhost does.
                names: own
                    .iter()
                    .flat_map(HostTest::server_names)
                    .filter(|n| {
                        own.as_ref().is_some_and(|o| &o.server_name() == n)
                            || !tests.iter().any(|t| &t.server_name() == n)
                    })
                    .collect(),
                default: own.is_none(),
                listen,
                names_see_port: own.as_ref().is_some_and(HostTest::sees_port),
                document_root: root,
                document_root_src: root_src,
                resolved,
            },
        ));
    }
    // An exact-name vhost identical to the default one, whose name no other
    // vhost would claim, is left out.
    let default = vhosts[0].1.clone();
    let others: Vec<HostTest> = vhosts.iter().filter_map(|(t, _)| t.clone()).collect();
    for (t, v) in vhosts {
        if let Some(HostTest::Exact(h)) = &t {
            let claimed = others
                .iter()
                .any(|o| o != t.as_ref().unwrap_or(o) && o.eval(h));
            if !claimed
                && v.document_root == default.document_root
                && v.resolved == default.resolved
            {
                report.not_needed(
                    &Src::new(main, 1),
                    &format!("$HTTP[\"host\"] == \"{h}\""),
                    "the host gets the same configuration as the default vhost; no vhost is written for it",
                );
                continue;
            }
        }
        out.vhosts.push(v);
    }
    if out.vhosts.is_empty() {
        return Err(ImportError::Empty {
            file: main.to_owned(),
            message: "nothing to serve".into(),
        });
    }
    Ok(out)
}

fn show_test(t: &HostTest) -> String {
    match t {
        HostTest::Exact(h) => format!("== \"{h}\""),
        HostTest::Suffix(s) => format!("=$ \"{s}\""),
        HostTest::Prefix(p) => format!("=^ \"{p}\""),
        HostTest::Regex(r) => format!("=~ \"{r}\""),
    }
}

fn swap(order: &mut [&'static str], a: &str, b: &str) {
    let (Some(i), Some(j)) = (
        order.iter().position(|m| *m == a),
        order.iter().position(|m| *m == b),
    ) else {
        return;
    };
    order.swap(i, j);
}

#[cfg(test)]
mod tests {
    use crate::lighttpd::test_util::*;
    use crate::tessera::builtin_mime;

    /// A `mimetype.assign` naming every common extension, with Tessera's types.
    fn full_mime_assign() -> String {
        let mut m = String::from("mimetype.assign = (\n");
        for e in crate::tessera::WEB_EXTENSIONS {
            m.push_str(&format!("  \".{e}\" => \"{}\",\n", builtin_mime(e)));
        }
        m.push_str(")\n");
        m
    }

    /// Issue 11 #8: the note about dot-files and symbolic links is not a
    /// warning (the values written are lighttpd's), so a clean import has none.
    #[test]
    fn clean_import_has_no_warnings() {
        let (t, r) = imp(&format!(
            "server.document-root = \"/\"\nserver.port = 8080\n{}",
            full_mime_assign()
        ));
        assert!(!r.has_warnings(), "{r}");
        assert!(t.contains("hidden-files = true"), "{t}");
        assert!(t.contains("follow-symlinks = \"always\""), "{t}");
        assert!(r.find("hidden-files = true").count() == 1, "{r}");
    }

    /// Issue 11 #3: what a `$SERVER["socket"]` block holds applies on that
    /// listener only: a host block becomes a vhost with `listen`, other
    /// options rules matching the socket (a wildcard one too).
    #[test]
    fn socket_blocks_apply_to_their_listener_only() {
        let (t, r) = imp(concat!(
            "server.document-root = \"/\"\n",
            "server.port = 8080\n",
            "server.modules = ( \"mod_setenv\" )\n",
            "$SERVER[\"socket\"] == \":8443\" {\n",
            "  setenv.add-response-header = ( \"X-Port\" => \"admin\" )\n",
            "  $HTTP[\"host\"] == \"admin.example\" {\n",
            "    server.document-root = \"/tmp\"\n",
            "  }\n",
            "}\n",
            "$SERVER[\"socket\"] != \":8443\" {\n",
            "  $HTTP[\"host\"] == \"other.example\" { server.document-root = \"/tmp\" }\n",
            "}\n",
        ));
        let v: toml::Table = toml::from_str(&t).unwrap();
        let vh = v["vhost"].as_array().unwrap();
        let admin = vh
            .iter()
            .find(|x| {
                x["server-names"]
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(|n| n.as_str())
                    == Some("admin.example")
            })
            .unwrap_or_else(|| panic!("{t}"));
        assert_eq!(
            admin["listen"].as_array().unwrap()[0].as_str(),
            Some("0.0.0.0:8443")
        );
        assert_eq!(admin["document-root"].as_str(), Some("/tmp"), "{t}");
        // In the default vhost the header is a rule on the wildcard socket.
        assert!(t.contains(r#"match = { socket = "0.0.0.0:8443" }"#), "{t}");
        assert!(!t.contains("server-names = [\"other.example\"]"), "{t}");
        assert!(
            r.find("other.example")
                .any(|e| e.outcome == crate::Outcome::Dropped),
            "{r}"
        );
    }

    #[test]
    fn idle_timeouts_become_server_timeouts() {
        let (t, _) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.max-read-idle = 30\n",
            "server.max-write-idle = 120\n",
            "server.max-keep-alive-idle = 7\n",
        ));
        assert!(t.contains("client-header-timeout = 30"), "{t}");
        assert!(t.contains("send-timeout = 120"), "{t}");
        assert!(t.contains("keep-alive = 7"), "{t}");
    }

    /// A hostile review: two host tests Tessera names alike both keep their
    /// blocks, and a host block without a vhost of its own (its listeners
    /// cannot be told) still applies, per request, where its host is served.
    #[test]
    fn host_tests_of_one_name_and_hosts_without_a_vhost_keep_their_blocks() {
        let (t, _) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.modules = ( \"mod_access\", \"mod_setenv\" )\n",
            "$HTTP[\"host\"] =^ \"admin.\" { setenv.add-response-header = ( \"X-Admin\" => \"1\" ) }\n",
            "$HTTP[\"host\"] =~ \"^admin\\.\" { url.access-deny = ( \"\" ) }\n",
        ));
        assert!(t.contains("deny-suffixes"), "{t}");
        let (t, r) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.port = 8080\n",
            "server.modules = ( \"mod_access\" )\n",
            "$SERVER[\"socket\"] == \":8443\" { }\n",
            "$SERVER[\"socket\"] != \":8443\" {\n",
            "  $HTTP[\"host\"] == \"intranet.example\" { url.access-deny = ( \"\" ) }\n",
            "}\n",
        ));
        assert!(t.contains("deny-suffixes"), "{t}");
        assert!(t.contains("host = "), "{t}");
        assert!(r.to_string().contains("served by the other vhosts"), "{r}");
    }

    /// Paths that require a login without a usable backend and user file
    /// answer 401 to everyone, and the report says so.
    #[test]
    fn auth_require_without_a_backend_fails_closed() {
        let (t, r) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.modules = ( \"mod_auth\" )\n",
            "auth.require = ( \"/admin/\" => ( \"method\" => \"basic\", \"realm\" => \"x\", \"require\" => \"valid-user\" ) )\n",
        ));
        assert!(
            t.contains(&format!(
                "user-file = \"{}\"",
                crate::tessera::FAIL_CLOSED_USER_FILE
            )),
            "{t}"
        );
        assert!(r.to_string().contains("fail closed"), "{r}");
    }

    /// A conditional document root that is not used says which root its
    /// requests get instead.
    #[test]
    fn an_unused_conditional_document_root_names_the_root_used() {
        let (_, r) = imp(concat!(
            "server.document-root = \"/srv/internal\"\n",
            "$HTTP[\"remoteip\"] != \"127.0.0.1\" { server.document-root = \"/srv/public\" }\n",
        ));
        let text = r.to_string();
        assert!(
            text.contains("(\"/srv/public\") is not used: the requests it covers are served from \"/srv/internal\""),
            "{text}"
        );
    }
}

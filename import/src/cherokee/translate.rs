//! The translation of a Cherokee tree: listeners and `[server]` keys, the
//! global MIME types, the virtual servers in Cherokee's order (their names,
//! wildcard and regex matches), and per vhost its document root, index files,
//! logger, error pages and rules, lowest priority first.

use super::logger::log_template;
use super::matching::glob_regex;
use super::rules::rule_options;
use std::path::Path;

use super::tree::Node;
use super::{backends, Tr};
use crate::emit::{Listen, Output, VhostOut};
use crate::error::ImportError;
use crate::model::{resolve, Block, Cond, Opt, V};
use crate::report::{Report, Src};
use crate::tessera::{builtin_mime, normalize_mime, Tessera, MODULE_ORDER};

struct VServer<'a> {
    num: u64,
    node: &'a Node,
    nick: String,
    names: Vec<String>,
    catch_all: bool,
}

pub(super) fn translate(t: &Node, main: &str, report: &mut Report) -> Result<Output, ImportError> {
    let mut tr = Tr {
        report,
        main: main.to_owned(),
        sources: t.get("source").cloned(),
        used_sources: Vec::new(),
    };
    if let Some(s) = t.src("config!version") {
        let v = t.val("config!version").unwrap_or("");
        tr.report.not_needed(
            s,
            "config!version",
            format!("format {v}; older keys are upgraded as cherokee-admin does"),
        );
    }
    // Listeners.
    let mut listen: Vec<Listen> = Vec::new();
    let mut binds: Vec<(u64, String)> = Vec::new();
    if let Some(b) = t.get("server!bind") {
        let mut nums = b.numbered();
        nums.reverse();
        for (id, n) in nums {
            let src = tr.src_of(n);
            let port = n
                .val("port")
                .and_then(|p| p.parse::<u16>().ok())
                .unwrap_or(80);
            if n.flag("tls") == Some(true) {
                tr.report.dropped(
                    &src,
                    &format!("server!bind!{id}"),
                    format!("a TLS listener on port {port}: TLS is not imported"),
                );
                continue;
            }
            let ip = n.val("interface").unwrap_or("0.0.0.0");
            let addr = if ip.contains(':') && !ip.starts_with('[') {
                format!("[{ip}]:{port}")
            } else {
                format!("{ip}:{port}")
            };
            if addr.parse::<std::net::SocketAddr>().is_err() {
                tr.report.dropped(
                    &src,
                    &format!("server!bind!{id}"),
                    format!("\"{ip}\" is not an IP address"),
                );
                continue;
            }
            tr.report.translated(
                &src,
                &format!("server!bind!{id}"),
                format!("[server] listen \"{addr}\""),
            );
            binds.push((id, addr.clone()));
            if !listen.iter().any(|l| l.addr == addr) {
                listen.push(Listen { addr, src });
            }
        }
    }
    if let Some(p) = t.val("server!port") {
        let src = t
            .src("server!port")
            .cloned()
            .unwrap_or_else(|| Src::new(main, 0));
        if let Ok(port) = p.parse::<u16>() {
            let addr = format!("0.0.0.0:{port}");
            tr.report
                .translated(&src, "server!port", format!("[server] listen \"{addr}\""));
            binds.push((0, addr.clone()));
            listen.push(Listen { addr, src });
        }
    }
    if listen.is_empty() {
        listen.push(Listen {
            addr: "0.0.0.0:80".into(),
            src: Src::new(main, 0),
        });
        binds.push((0, "0.0.0.0:80".into()));
    }
    if t.val("server!ipv6") != Some("0") {
        tr.report.approximated(
            &t.src("server!ipv6").cloned().unwrap_or_else(|| Src::new(main, 1)),
            "server!ipv6",
            "Cherokee also listens on IPv6 by default; add \"[::]:PORT\" to [server] listen if you need it",
        );
    }
    let mut server: Vec<(String, V, Src)> = Vec::new();
    if let Some(s) = t.get("server") {
        for (path, v, src) in s.leaves() {
            let key = format!("server!{path}");
            if path.starts_with("bind") || path == "port" || path == "ipv6" {
                continue;
            }
            match path.as_str() {
                "keepalive" if v.trim() == "0" => {
                    tr.report.translated(src, &key, "[server] keep-alive = 0");
                    server.retain(|(k, _, _)| k != "keep-alive");
                    server.push(("keep-alive".into(), V::Int(0), src.clone()));
                }
                "timeout" => {
                    let n = v.trim().parse::<i64>().unwrap_or(15);
                    if t.val("server!keepalive").map(str::trim) != Some("0") {
                        tr.report.approximated(src, &key, "[server] keep-alive (Tessera's idle timeout of a kept-alive connection)");
                        server.push(("keep-alive".into(), V::Int(n), src.clone()));
                    }
                }
                "keepalive"
                | "user"
                | "group"
                | "pid_file"
                | "panic_action"
                | "fdlimit"
                | "thread_number"
                | "thread_policy"
                | "chunked_encoding"
                | "iocache"
                | "collector"
                | "post_track"
                | "server_tokens"
                | "keepalive_max_requests"
                | "listen_queue"
                | "sendfile_min"
                | "sendfile_max"
                | "max_fds"
                | "chroot"
                | "log_flush_lapse"
                | "nonces_cleanup_lapse"
                | "poll_method"
                | "max_connection_reuse" => {
                    tr.report.not_needed(
                        src,
                        &key,
                        "Tessera manages this itself (or the service manager does)",
                    );
                }
                _ if path.starts_with("iocache!")
                    || path.starts_with("tls!")
                    || path.starts_with("collector!") =>
                {
                    tr.report.not_needed(src, &key, "not needed by Tessera");
                }
                _ => tr.report.dropped(src, &key, "not supported"),
            }
        }
    }
    for top in ["icons", "admin"] {
        if let Some(n) = t.get(top) {
            let src = tr.src_of(n);
            match top {
                "icons" => tr.report.not_needed(
                    &src,
                    "icons!*",
                    "Tessera's directory listings have no icons",
                ),
                _ => tr
                    .report
                    .not_needed(&src, "admin!*", "cherokee-admin settings"),
            }
        }
    }
    // MIME types (global): static-file overrides and per-type max-age.
    let mut mime_over: Vec<(String, V)> = Vec::new();
    let mut mime_age: Vec<(String, V)> = Vec::new();
    let mut same = 0;
    let mut mime_src = None;
    if let Some(m) = t.get("mime") {
        // mime!TYPE!… where TYPE itself contains '/', stored as mime!text/css!…
        for (ty, n) in &m.children {
            let src = tr.src_of(n);
            mime_src.get_or_insert(src.clone());
            if let Some(exts) = n.val("extensions") {
                for e in exts.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                    let e = e.to_ascii_lowercase();
                    if !e
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_'))
                    {
                        tr.report.approximated(&src, &format!("mime!{ty}!extensions"), format!("\"{e}\" is not a plain extension: Tessera looks at the last extension only"));
                        continue;
                    }
                    if normalize_mime(&builtin_mime(&e)) == normalize_mime(ty) {
                        same += 1;
                    } else if !mime_over.iter().any(|(x, _)| *x == e) {
                        mime_over.push((e, V::s(ty.clone())));
                    }
                }
            }
            if let Some(age) = n.val("max-age") {
                if let Ok(s) = age.trim().parse::<u64>() {
                    mime_age.push((ty.clone(), V::s(format!("access plus {s} seconds"))));
                }
            }
        }
        mime_over.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(s) = &mime_src {
            tr.report.translated(s, "mime!*", format!("static-file mime-types: {} entries differ from Tessera's built-in types and are written, {same} are the same", mime_over.len()));
            if !mime_age.is_empty() {
                tr.report.translated(
                    s,
                    "mime!*!max-age",
                    "expires mime-types in each vhost (used when a rule sets no expiration)",
                );
            }
        }
    }
    // Virtual servers in Cherokee's order (highest number first).
    let Some(vs_root) = t.get("vserver") else {
        return Err(ImportError::Empty {
            file: main.to_owned(),
            message: "no vserver!N is defined".into(),
        });
    };
    let all = vs_root.numbered();
    if all.is_empty() {
        return Err(ImportError::Empty {
            file: main.to_owned(),
            message: "no vserver!N is defined".into(),
        });
    }
    let lowest = all.last().map(|(n, _)| *n).unwrap_or(1);
    let mut vservers: Vec<VServer<'_>> = Vec::new();
    let mut seen_names: Vec<String> = Vec::new();
    let mut catch_all_seen = false;
    for (num, n) in &all {
        let nick = n.val("nick").unwrap_or("").to_owned();
        let vsrc = tr.src_of(n);
        if catch_all_seen {
            tr.report.dropped(
                &vsrc,
                &format!("vserver!{num} (\"{nick}\")"),
                "unreachable: a higher-numbered vserver matches every host first",
            );
            continue;
        }
        let mut names = Vec::new();
        let mut catch_all = false;
        let mut push_name = |tr: &mut Tr<'_>, name: String, src: &Src, names: &mut Vec<String>| {
            if seen_names.contains(&name) {
                tr.report.approximated(
                    src,
                    &format!("vserver!{num}!match"),
                    format!("\"{name}\" is already claimed by a higher-numbered vserver"),
                );
            } else {
                seen_names.push(name.clone());
                names.push(name);
            }
        };
        fn collect(
            tr: &mut Tr<'_>,
            m: &Node,
            num: u64,
            out: &mut Vec<(String, Src)>,
            catch_all: &mut bool,
        ) {
            let ty = m.value.as_ref().map(|(v, _)| v.as_str()).unwrap_or("");
            let src = tr.src_of(m);
            match ty {
                "wildcard" => {
                    if let Some(d) = m.child("domain") {
                        let mut ds = d.numbered();
                        ds.reverse();
                        for (_, dn) in ds {
                            let Some((dom, dsrc)) = &dn.value else {
                                continue;
                            };
                            let dom = dom.trim().to_ascii_lowercase();
                            if dom == "*" {
                                *catch_all = true;
                            } else if dom.starts_with("*.") && !dom[2..].contains(['*', '?']) {
                                out.push((dom, dsrc.clone()));
                            } else if dom.contains(['*', '?']) {
                                out.push((format!("~{}", glob_regex(&dom)), dsrc.clone()));
                            } else {
                                out.push((dom, dsrc.clone()));
                            }
                        }
                    }
                }
                "rehost" => {
                    if let Some(r) = m.child("regex") {
                        let mut rs = r.numbered();
                        rs.reverse();
                        for (_, rn) in rs {
                            let Some((re, rsrc)) = &rn.value else {
                                continue;
                            };
                            if fancy_regex::Regex::new(re).is_err() {
                                tr.report.dropped(
                                    rsrc,
                                    &format!("vserver!{num}!match!regex"),
                                    format!("\"{re}\": invalid regular expression"),
                                );
                                continue;
                            }
                            out.push((format!("~{re}"), rsrc.clone()));
                        }
                    }
                }
                "or" => {
                    for side in ["left", "right"] {
                        if let Some(s) = m.child(side) {
                            collect(tr, s, num, out, catch_all);
                        }
                    }
                }
                "" => {}
                other => tr.report.dropped(
                    &src,
                    &format!("vserver!{num}!match"),
                    format!(
                        "\"{other}\" (by local address or other) cannot select a vhost in Tessera"
                    ),
                ),
            }
        }
        if let Some(m) = n.child("match") {
            let mut found = Vec::new();
            collect(&mut tr, m, *num, &mut found, &mut catch_all);
            for (name, src) in found {
                tr.report.translated(
                    &src,
                    &format!("vserver!{num}!match"),
                    format!("server-names \"{name}\""),
                );
                push_name(&mut tr, name, &src, &mut names);
            }
            if let Some(s) = m.src("nick") {
                tr.report.not_needed(
                    s,
                    &format!("vserver!{num}!match!nick"),
                    "Cherokee never reads it (nick matching is always on)",
                );
            }
        }
        // The nick also selects the vserver (after every match), when it looks
        // like a host name.
        if nick.contains('.') && !catch_all {
            let lower = nick.to_ascii_lowercase();
            if !seen_names.contains(&lower) {
                tr.report.translated(
                    &vsrc,
                    &format!("vserver!{num}!nick"),
                    format!(
                        "server-names \"{lower}\" (Cherokee matches the nick against the host)"
                    ),
                );
                seen_names.push(lower.clone());
                names.push(lower);
            }
        }
        if catch_all {
            catch_all_seen = true;
        }
        vservers.push(VServer {
            num: *num,
            node: n,
            nick,
            names,
            catch_all,
        });
    }
    let default_num = vservers
        .iter()
        .find(|v| v.catch_all)
        .map_or(lowest, |v| v.num);
    let mut out = Output {
        header: Vec::new(),
        listen,
        server,
        upstreams: Vec::new(),
        vhosts: Vec::new(),
    };
    // Cherokee writes Expires and `Cache-Control: max-age=N` first, then its
    // caching directives into the same line, then the header operations
    // (an `add` replaces a field): expires runs before headers, whose `add`
    // merges the directives into expires' line and whose `set` replaces it.
    let mut order: Vec<&'static str> = MODULE_ORDER.to_vec();
    if let (Some(h), Some(e)) = (
        order.iter().position(|m| *m == "headers"),
        order.iter().position(|m| *m == "expires"),
    ) {
        if h < e {
            order.swap(h, e);
        }
    }
    for vs in &vservers {
        let n = vs.node;
        let vsrc = tr.src_of(n);
        let label = format!("vserver!{} (\"{}\")", vs.num, vs.nick);
        let p = |k: &str| format!("vserver!{}!{k}", vs.num);
        let dsrc = Src::new("<cherokee default>", 0);
        let d = |module, key, val| Opt {
            module,
            key,
            val,
            src: dsrc.clone(),
        };
        let mut defaults = vec![
            d("static-file", "enabled", V::Bool(false)),
            d("static-file", "hidden-files", V::Bool(true)),
            d("static-file", "follow-symlinks", V::s("always")),
            d("dir-listing", "enabled", V::Bool(false)),
            d("dir-listing", "hidden-files", V::Bool(false)),
            d("dir-listing", "follow-symlinks", V::s("always")),
        ];
        if !mime_over.is_empty() {
            defaults.push(Opt {
                module: "static-file",
                key: "mime-types",
                val: V::Tab(mime_over.clone()),
                src: mime_src.clone().unwrap_or_else(|| dsrc.clone()),
            });
        }
        let mut vopts: Vec<Opt> = Vec::new();
        // Document root.
        let (root, root_src) = match (n.val("document_root"), n.src("document_root")) {
            (Some(r), Some(s)) => {
                let s = s.clone();
                let r = tr.path(r, &s, &p("document_root"));
                tr.report
                    .translated(&s, &p("document_root"), "document-root");
                (r, Some(s))
            }
            _ => {
                tr.report.approximated(
                    &vsrc,
                    &p("document_root"),
                    "not set; /var/www is written, change it",
                );
                ("/var/www".to_owned(), None)
            }
        };
        if !Path::new(&root).is_dir() {
            tr.report.missing(
                root_src.as_ref().unwrap_or(&vsrc),
                &p("document_root"),
                &root,
            );
        }
        // Index files.
        let mut index: Vec<String> = Vec::new();
        if let (Some(di), Some(s)) = (n.val("directory_index"), n.src("directory_index")) {
            let s = s.clone();
            for f in di.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                if f.contains('/') {
                    tr.report.approximated(
                        &s,
                        &p("directory_index"),
                        format!("\"{f}\" is a path, not a file name; left out"),
                    );
                } else {
                    index.push(f.to_owned());
                }
            }
            tr.report
                .translated(&s, &p("directory_index"), "static-file index-files");
            vopts.push(Opt {
                module: "static-file",
                key: "index-files",
                val: V::strs(index.clone()),
                src: s,
            });
        } else {
            defaults.push(d("static-file", "index-files", V::Arr(Vec::new())));
        }
        // Logger.
        if let Some(kind) = n.val("logger") {
            let s = n.src("logger").cloned().unwrap_or_else(|| vsrc.clone());
            let format = match kind {
                "combined" => {
                    tr.report.approximated(&s, &p("logger"), "access-log format \"combined\" (Cherokee logs the original request and counts header bytes)");
                    Some("combined".to_owned())
                }
                "ncsa" => {
                    tr.report.approximated(&s, &p("logger"), "access-log format \"common\" (Cherokee logs the original request and counts header bytes)");
                    Some("common".to_owned())
                }
                "custom" => {
                    let tpl = n.val("logger!access_template").unwrap_or("");
                    let (f, notes) = log_template(tpl);
                    if notes.is_empty() {
                        tr.report.translated(
                            &s,
                            &p("logger!access_template"),
                            format!("access-log format \"{f}\""),
                        );
                    } else {
                        tr.report.approximated(
                            &s,
                            &p("logger!access_template"),
                            format!("access-log format \"{f}\": {}", notes.join("; ")),
                        );
                    }
                    Some(f)
                }
                other => {
                    tr.report.dropped(
                        &s,
                        &p("logger"),
                        format!("the \"{other}\" logger is not supported"),
                    );
                    None
                }
            };
            let wtype = n.val("logger!access!type").unwrap_or("");
            let wsrc = n
                .src("logger!access!type")
                .cloned()
                .unwrap_or_else(|| s.clone());
            let path = match wtype {
                "file" => n
                    .val("logger!access!filename")
                    .map(|f| tr.path(f, &wsrc, &p("logger!access!filename"))),
                "stderr" => Some("/dev/stderr".to_owned()),
                other => {
                    tr.report.dropped(
                        &wsrc,
                        &p("logger!access!type"),
                        format!("\"{other}\" log writers are not supported: log to a file"),
                    );
                    None
                }
            };
            if let (Some(f), Some(path)) = (format, path) {
                tr.report.translated(
                    &wsrc,
                    &p("logger!access"),
                    format!("access-log path \"{path}\""),
                );
                if let Some(parent) = Path::new(&path).parent() {
                    if !parent.as_os_str().is_empty() && !parent.is_dir() {
                        tr.report.approximated(&wsrc, &p("logger!access!filename"), format!("{} does not exist on this machine: Tessera creates it when it starts (it needs the permission)", parent.display()));
                    }
                }
                vopts.push(Opt {
                    module: "access-log",
                    key: "path",
                    val: V::s(path),
                    src: wsrc.clone(),
                });
                vopts.push(Opt {
                    module: "access-log",
                    key: "format",
                    val: V::s(f),
                    src: s.clone(),
                });
            }
            for extra in [
                "logger!access!buffsize",
                "logger!access!bufsize",
                "logger!utc_time",
                "logger!x_real_ip_enabled",
                "logger!x_real_ip_access_all",
                "logger!x_real_ip_access",
            ] {
                if let Some(es) = n.src(extra) {
                    if extra.ends_with("buffsize") {
                        tr.report.not_needed(es, &p(extra), "a misspelling Cherokee ignores (bufsize); Tessera batches log lines itself");
                    } else if extra.ends_with("bufsize") {
                        tr.report
                            .not_needed(es, &p(extra), "Tessera batches log lines itself");
                    } else if extra.ends_with("utc_time") {
                        tr.report
                            .not_needed(es, &p(extra), "Tessera logs times in UTC");
                    } else if n.flag(extra) == Some(true) {
                        tr.report
                            .dropped(es, &p(extra), "X-Real-IP is not consulted");
                    } else {
                        tr.report.not_needed(es, &p(extra), "off");
                    }
                }
            }
        }
        for (k, why) in [
            ("error_writer", "Tessera logs diagnostics to stderr"),
            ("collector", "statistics collection is not supported"),
            (
                "collect_statistics",
                "statistics collection is not supported",
            ),
            ("keepalive", "see [server] keep-alive"),
        ] {
            if let Some(c) = n.child(k) {
                let s = tr.src_of(c);
                tr.report.not_needed(&s, &p(k), why);
            }
        }
        for (k, why) in [
            (
                "hsts",
                "HSTS only makes sense over TLS, which is not imported",
            ),
            ("ssl_certificate_file", "TLS is not imported"),
            ("ssl_certificate_key_file", "TLS is not imported"),
            ("user_dir", "user directories are not supported"),
            (
                "post_max_len",
                "not imported: set [server] max-body-size, Tessera's limit on request bodies (default 1 MiB)",
            ),
            ("flcache", "the front-line cache is not supported"),
        ] {
            if let Some(c) = n.child(k) {
                let s = tr.src_of(c);
                tr.report.dropped(&s, &p(k), why);
            }
        }
        if let Some(ev) = n.child("evhost") {
            let s = tr.src_of(ev);
            match ev.val("tpl_document_root").map(backends::evhost_pattern) {
                Some(Ok(pat)) => {
                    tr.report.translated(&s, &p("evhost!tpl_document_root"), format!("mass-vhost path-pattern = \"{pat}\" (a host whose directory is missing gets the vserver's document root)"));
                    vopts.push(Opt {
                        module: "mass-vhost",
                        key: "path-pattern",
                        val: V::s(pat),
                        src: s.clone(),
                    });
                }
                Some(Err(bad)) => tr.report.dropped(&s, &p("evhost!tpl_document_root"), format!("{bad} has no mass-vhost equivalent (${{domain}}, ${{root_domain}}, ${{tld}}, ${{domain_no_tld}}, ${{subdomain1}} to ${{subdomain7}} have): every host gets the vserver's document root")),
                None => tr.report.dropped(&s, &p("evhost"), "no tpl_document_root: nothing to compute"),
            }
            for (k, c) in &ev.children {
                let cs = tr.src_of(c);
                match k.as_str() {
                    "tpl_document_root" => {}
                    "check_document_root" if ev.flag("check_document_root") != Some(false) => {
                        tr.report.translated(
                            &cs,
                            &p("evhost!check_document_root"),
                            "mass-vhost checks that the directory exists",
                        )
                    }
                    _ => tr.report.dropped(
                        &cs,
                        &p(&format!("evhost!{k}")),
                        "not supported by mass-vhost",
                    ),
                }
            }
        }
        // Error pages.
        if n.val("error_handler") == Some("error_redir") {
            let mut pages = Vec::new();
            if let Some(eh) = n.child("error_handler") {
                for (code, en) in &eh.children {
                    if let (Ok(c), Some(url)) = (code.parse::<u16>(), en.val("url")) {
                        let s = tr.src_of(en);
                        if url.contains("://") {
                            tr.report.dropped(
                                &s,
                                &p(&format!("error_handler!{code}")),
                                "an error page on another site is not supported",
                            );
                            continue;
                        }
                        tr.report.approximated(&s, &p(&format!("error_handler!{code}")), format!("error-pages pages.{c} = \"{}\" (the file is sent with the error status; Cherokee {} it)", url.trim_start_matches('/'), if en.flag("show") == Some(true) { "redirects to" } else { "serves" }));
                        pages.push((c.to_string(), V::s(url.trim_start_matches('/'))));
                    }
                }
            }
            if !pages.is_empty() {
                let s = n
                    .src("error_handler")
                    .cloned()
                    .unwrap_or_else(|| vsrc.clone());
                vopts.push(Opt {
                    module: "error-pages",
                    key: "pages",
                    val: V::Tab(pages),
                    src: s,
                });
            }
        } else if let Some(e) = n.val("error_handler") {
            let s = n
                .src("error_handler")
                .cloned()
                .unwrap_or_else(|| vsrc.clone());
            tr.report.dropped(
                &s,
                &p("error_handler"),
                format!("the \"{e}\" error handler is not supported"),
            );
        }
        if !mime_age.is_empty() {
            vopts.push(Opt {
                module: "expires",
                key: "mime-types",
                val: V::Tab(mime_age.clone()),
                src: mime_src.clone().unwrap_or_else(|| vsrc.clone()),
            });
        }
        let mut blocks = vec![
            Block {
                cond: Cond::True,
                opts: defaults,
                reset: false,
                base: true,
                label: "Cherokee's defaults".into(),
            },
            Block {
                cond: Cond::True,
                opts: vopts,
                reset: false,
                base: true,
                label: format!("{vsrc} {label}"),
            },
        ];
        // Rules, lowest priority first (the last block wins).
        let mut rules: Vec<(u64, &Node)> = n.get("rule").map(|r| r.numbered()).unwrap_or_default();
        rules.reverse();
        for (prio, r) in rules {
            let rp = |k: &str| {
                format!(
                    "vserver!{}!rule!{prio}{}{k}",
                    vs.num,
                    if k.is_empty() { "" } else { "!" }
                )
            };
            let rsrc = tr.src_of(r);
            if r.flag("disabled") == Some(true) {
                tr.report.not_needed(&rsrc, &rp(""), "disabled");
                continue;
            }
            let cond = match r.child("match") {
                Some(m) => {
                    let c = tr.cond(m, &rp("match"), &binds);
                    c.simplify(&|_| None)
                }
                None => {
                    tr.report
                        .dropped(&rsrc, &rp(""), "no match; the rule never applies");
                    Cond::False
                }
            };
            let is_final = r.flag("match!final").unwrap_or(true);
            let mut opts: Vec<Opt> = Vec::new();
            rule_options(&mut tr, r, &rp, &cond, &root, &mut opts);
            blocks.push(Block {
                cond,
                opts,
                reset: is_final,
                base: false,
                label: format!(
                    "{rsrc} {} (priority {prio}{})",
                    rp(""),
                    if is_final { ", final" } else { "" }
                ),
            });
        }
        let vname = vs.names.first().cloned().unwrap_or_else(|| vs.nick.clone());
        let resolved = resolve(&blocks, &order, &Tessera, &vname, tr.report);
        let mut comment = vec![format!("{label}, from {vsrc}.")];
        if vs.catch_all {
            comment.push("Its match covers every host (domain *): it is the default vhost.".into());
        }
        out.vhosts.push(VhostOut {
            comment,
            names: vs.names.clone(),
            default: vs.num == default_num,
            listen: Vec::new(),
            names_see_port: false,
            document_root: root,
            document_root_src: root_src,
            resolved,
        });
    }
    // Information sources: those of proxy handlers are upstream servers;
    // the others serve handlers Tessera does not have.
    if let Some(srcs) = t.get("source") {
        for (id, n) in srcs.numbered() {
            let src = tr.src_of(n);
            let what = format!("source!{id}");
            if tr.used_sources.contains(&id.to_string()) {
                tr.report.translated(
                    &src,
                    &what,
                    "a server of the [[upstream]] of the rules using it",
                );
            } else {
                let kind = n.val("type").unwrap_or("");
                tr.report.dropped(
                    &src,
                    &what,
                    format!("a back end ({kind}) no imported rule uses"),
                );
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

//! The virtual servers of a Cherokee tree: their order and names (wildcard
//! and regex matches, the nick), and per vhost its document root, index
//! files, logger, error pages and rules, lowest priority first.

use super::logger::log_template;
use super::matching::glob_regex;
use super::rules::rule_options;
use std::path::Path;

use super::translate::Mime;
use super::tree::Node;
use super::{backends, Tr};
use crate::emit::VhostOut;
use crate::error::ImportError;
use crate::model::{resolve, Block, Cond, Opt, V};
use crate::report::Src;
use crate::tessera::{Tessera, MODULE_ORDER};

/// A reachable vserver and the host names that select it.
struct VServer<'a> {
    num: u64,
    node: &'a Node,
    nick: String,
    names: Vec<String>,
    catch_all: bool,
}

/// What the translation of every vhost shares.
struct Shared<'a> {
    /// The binds as `(number, address)`, for rules that match by bind.
    binds: &'a [(u64, String)],
    /// The global MIME types.
    mime: &'a Mime,
    /// The module order of the resolution ([`module_order`]).
    order: Vec<&'static str>,
    /// The number of the default vserver.
    default_num: u64,
}

/// Translates the vservers of `t` (the file `main`) into vhosts, in
/// Cherokee's order; `binds` are the listeners' binds, `mime` the global
/// MIME types.
///
/// # Errors
/// [`ImportError::Empty`] when no `vserver!N` is defined.
pub(super) fn vhosts(
    tr: &mut Tr<'_>,
    t: &Node,
    main: &str,
    binds: &[(u64, String)],
    mime: &Mime,
) -> Result<Vec<VhostOut>, ImportError> {
    let (vservers, default_num) = vservers(tr, t, main)?;
    let sh = Shared {
        binds,
        mime,
        order: module_order(),
        default_num,
    };
    let mut out = Vec::new();
    for vs in &vservers {
        out.push(vhost(tr, vs, &sh));
    }
    Ok(out)
}

/// The reachable vservers and the number of the default one (the catch-all,
/// else the lowest).
///
/// # Errors
/// [`ImportError::Empty`] when no `vserver!N` is defined.
fn vservers<'t>(
    tr: &mut Tr<'_>,
    t: &'t Node,
    main: &str,
) -> Result<(Vec<VServer<'t>>, u64), ImportError> {
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
    let mut vservers: Vec<VServer<'t>> = Vec::new();
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
        let (names, catch_all) = names(tr, *num, n, &nick, &vsrc, &mut seen_names);
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
    Ok((vservers, default_num))
}

/// The server names of vserver `num` (node `n`) not already in `seen_names`
/// (which gets them), and whether its match covers every host.
fn names(
    tr: &mut Tr<'_>,
    num: u64,
    n: &Node,
    nick: &str,
    vsrc: &Src,
    seen_names: &mut Vec<String>,
) -> (Vec<String>, bool) {
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
    if let Some(m) = n.child("match") {
        let mut found = Vec::new();
        collect_names(tr, m, num, &mut found, &mut catch_all);
        for (name, src) in found {
            tr.report.translated(
                &src,
                &format!("vserver!{num}!match"),
                format!("server-names \"{name}\""),
            );
            push_name(tr, name, &src, &mut names);
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
                vsrc,
                &format!("vserver!{num}!nick"),
                format!("server-names \"{lower}\" (Cherokee matches the nick against the host)"),
            );
            seen_names.push(lower.clone());
            names.push(lower);
        }
    }
    (names, catch_all)
}

/// Collects the host names of the vserver match `m` (`wildcard`, `rehost`,
/// `or`) into `out`; a `*` domain sets `catch_all`.
fn collect_names(
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
                    collect_names(tr, s, num, out, catch_all);
                }
            }
        }
        "" => {}
        other => tr.report.dropped(
            &src,
            &format!("vserver!{num}!match"),
            format!("\"{other}\" (by local address or other) cannot select a vhost in Tessera"),
        ),
    }
}

/// The module order of the resolution: expires before headers.
fn module_order() -> Vec<&'static str> {
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
    order
}

/// Translates one vserver into a vhost.
fn vhost(tr: &mut Tr<'_>, vs: &VServer<'_>, sh: &Shared<'_>) -> VhostOut {
    let n = vs.node;
    let vsrc = tr.src_of(n);
    let label = format!("vserver!{} (\"{}\")", vs.num, vs.nick);
    let p = |k: &str| format!("vserver!{}!{k}", vs.num);
    let mut defaults = cherokee_defaults(sh.mime);
    let mut vopts: Vec<Opt> = Vec::new();
    let (root, root_src) = document_root(tr, n, &vsrc, &p);
    index_files(tr, n, &p, &mut defaults, &mut vopts);
    logger(tr, n, &vsrc, &p, &mut vopts);
    ignored_keys(tr, n, &p);
    evhost(tr, n, &p, &mut vopts);
    error_pages(tr, n, &vsrc, &p, &mut vopts);
    if !sh.mime.age.is_empty() {
        vopts.push(Opt {
            module: "expires",
            key: "mime-types",
            val: V::Tab(sh.mime.age.clone()),
            src: sh.mime.src.clone().unwrap_or_else(|| vsrc.clone()),
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
    rule_blocks(tr, vs, sh.binds, &root, &mut blocks);
    let vname = vs.names.first().cloned().unwrap_or_else(|| vs.nick.clone());
    let resolved = resolve(&blocks, &sh.order, &Tessera, &vname, tr.report);
    let mut comment = vec![format!("{label}, from {vsrc}.")];
    if vs.catch_all {
        comment.push("Its match covers every host (domain *): it is the default vhost.".into());
    }
    VhostOut {
        comment,
        names: vs.names.clone(),
        default: vs.num == sh.default_num,
        listen: Vec::new(),
        names_see_port: false,
        document_root: root,
        document_root_src: root_src,
        resolved,
    }
}

/// Where Cherokee's defaults come from.
fn default_src() -> Src {
    Src::new("<cherokee default>", 0)
}

/// An option at Cherokee's default value.
fn default_opt(module: &'static str, key: &'static str, val: V) -> Opt {
    Opt {
        module,
        key,
        val,
        src: default_src(),
    }
}

/// Cherokee's defaults for a vhost, with the global MIME types that differ
/// from Tessera's.
fn cherokee_defaults(mime: &Mime) -> Vec<Opt> {
    let mut defaults = vec![
        default_opt("static-file", "enabled", V::Bool(false)),
        default_opt("static-file", "hidden-files", V::Bool(true)),
        default_opt("static-file", "follow-symlinks", V::s("always")),
        default_opt("dir-listing", "enabled", V::Bool(false)),
        default_opt("dir-listing", "hidden-files", V::Bool(false)),
        default_opt("dir-listing", "follow-symlinks", V::s("always")),
    ];
    if !mime.over.is_empty() {
        defaults.push(Opt {
            module: "static-file",
            key: "mime-types",
            val: V::Tab(mime.over.clone()),
            src: mime.src.clone().unwrap_or_else(default_src),
        });
    }
    defaults
}

/// Document root: the path and where it is set (`p` names a key of the
/// vserver).
fn document_root(
    tr: &mut Tr<'_>,
    n: &Node,
    vsrc: &Src,
    p: &dyn Fn(&str) -> String,
) -> (String, Option<Src>) {
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
                vsrc,
                &p("document_root"),
                "not set; /var/www is written, change it",
            );
            ("/var/www".to_owned(), None)
        }
    };
    if !Path::new(&root).is_dir() {
        tr.report.missing(
            root_src.as_ref().unwrap_or(vsrc),
            &p("document_root"),
            &root,
        );
    }
    (root, root_src)
}

/// Index files: static-file `index-files` from `directory_index`, else an
/// empty default.
fn index_files(
    tr: &mut Tr<'_>,
    n: &Node,
    p: &dyn Fn(&str) -> String,
    defaults: &mut Vec<Opt>,
    vopts: &mut Vec<Opt>,
) {
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
        defaults.push(default_opt(
            "static-file",
            "index-files",
            V::Arr(Vec::new()),
        ));
    }
}

/// Logger: the access log's format and where it is written.
fn logger(tr: &mut Tr<'_>, n: &Node, vsrc: &Src, p: &dyn Fn(&str) -> String, vopts: &mut Vec<Opt>) {
    if let Some(kind) = n.val("logger") {
        let s = n.src("logger").cloned().unwrap_or_else(|| vsrc.clone());
        let format = log_format(tr, n, kind, &s, p);
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
        logger_extras(tr, n, p);
    }
}

/// The access-log format of the logger `kind` (set at `s`), if supported.
fn log_format(
    tr: &mut Tr<'_>,
    n: &Node,
    kind: &str,
    s: &Src,
    p: &dyn Fn(&str) -> String,
) -> Option<String> {
    match kind {
        "combined" => {
            tr.report.approximated(s, &p("logger"), "access-log format \"combined\" (Cherokee logs the original request and counts header bytes)");
            Some("combined".to_owned())
        }
        "ncsa" => {
            tr.report.approximated(s, &p("logger"), "access-log format \"common\" (Cherokee logs the original request and counts header bytes)");
            Some("common".to_owned())
        }
        "custom" => {
            let tpl = n.val("logger!access_template").unwrap_or("");
            let (f, notes) = log_template(tpl);
            if notes.is_empty() {
                tr.report.translated(
                    s,
                    &p("logger!access_template"),
                    format!("access-log format \"{f}\""),
                );
            } else {
                tr.report.approximated(
                    s,
                    &p("logger!access_template"),
                    format!("access-log format \"{f}\": {}", notes.join("; ")),
                );
            }
            Some(f)
        }
        other => {
            tr.report.dropped(
                s,
                &p("logger"),
                format!("the \"{other}\" logger is not supported"),
            );
            None
        }
    }
}

/// Reports the logger's buffer, time and X-Real-IP keys.
fn logger_extras(tr: &mut Tr<'_>, n: &Node, p: &dyn Fn(&str) -> String) {
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
                tr.report.not_needed(
                    es,
                    &p(extra),
                    "a misspelling Cherokee ignores (bufsize); Tessera batches log lines itself",
                );
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

/// Reports the vserver keys Tessera does not need or support.
fn ignored_keys(tr: &mut Tr<'_>, n: &Node, p: &dyn Fn(&str) -> String) {
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
}

/// Mass-vhost `path-pattern` (`evhost`).
fn evhost(tr: &mut Tr<'_>, n: &Node, p: &dyn Fn(&str) -> String, vopts: &mut Vec<Opt>) {
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
}

/// Error pages: error-pages `pages` from `error_handler = error_redir`.
fn error_pages(
    tr: &mut Tr<'_>,
    n: &Node,
    vsrc: &Src,
    p: &dyn Fn(&str) -> String,
    vopts: &mut Vec<Opt>,
) {
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
}

/// Appends a block per rule of `vs` (vhost document root `root`).
fn rule_blocks(
    tr: &mut Tr<'_>,
    vs: &VServer<'_>,
    binds: &[(u64, String)],
    root: &str,
    blocks: &mut Vec<Block>,
) {
    let n = vs.node;
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
                let c = tr.cond(m, &rp("match"), binds);
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
        rule_options(tr, r, &rp, &cond, root, &mut opts);
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
}

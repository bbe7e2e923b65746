//! Cherokee's gateway handlers (`fcgi`, `scgi`, `uwsgi`, `cgi`) with their
//! balancers and `source!N` entries, a rule's `document_root` (an `alias`),
//! and `vserver!N!evhost` (`mass-vhost`), into the model keys of
//! [`crate::backend`].

use super::tree::Node;
use super::Tr;
use crate::model::V;

/// The servers of a handler's `balancer!source!N` entries, its balance, and
/// the `[upstream.spawn]` of an `interpreter` source (with one server).
pub(super) struct Balanced {
    /// `host:port` or `unix:/path`, in Cherokee's order.
    pub(super) servers: Vec<V>,
    /// Tessera's balance (`round-robin`, `ip-hash`, `first`).
    pub(super) balance: &'static str,
    /// The spawn table of the first `interpreter` source, if any.
    pub(super) spawn: Option<Vec<(String, V)>>,
}

/// A source's `host` as a Tessera server (`unix:/path`, `host:port`, port 80
/// when none is given).
pub(super) fn source_addr(host: &str) -> String {
    if host.starts_with('/') {
        format!("unix:{host}")
    } else if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.to_owned()
    } else {
        format!("{host}:80")
    }
}

/// Resolves `node`'s balancer and sources (`what` names the handler in the
/// report). `spawn`: interpreter sources become `[upstream.spawn]` (the
/// gateway handlers) rather than being reported as not started (proxy).
pub(super) fn balanced(tr: &mut Tr<'_>, node: &Node, what: &str, spawn: bool) -> Balanced {
    let hsrc = tr.src_of(node);
    let balance = match node.val("balancer").unwrap_or("round_robin") {
        "round_robin" => "round-robin",
        "ip_hash" => "ip-hash",
        "failover" => "first",
        other => {
            tr.report.approximated(
                &hsrc,
                &format!("{what}!balancer"),
                format!(
                    "\"{other}\" is not a Cherokee balancer Tessera knows: round-robin is used"
                ),
            );
            "round-robin"
        }
    };
    let mut out = Balanced {
        servers: Vec::new(),
        balance,
        spawn: None,
    };
    let mut ids: Vec<(u64, &Node)> = node
        .get("balancer!source")
        .map(Node::numbered)
        .unwrap_or_default();
    ids.reverse();
    let mut interpreters = 0;
    for (_, sn) in ids {
        let Some((id, ssrc)) = &sn.value else {
            continue;
        };
        let id = id.trim().to_owned();
        let source = tr.sources.as_ref().and_then(|s| s.child(&id)).cloned();
        let Some(source) = source else {
            tr.report.dropped(
                ssrc,
                &format!("{what}!balancer!source"),
                format!("source {id} is not defined"),
            );
            continue;
        };
        let Some(host) = source.val("host").map(str::trim).filter(|h| !h.is_empty()) else {
            tr.report.dropped(
                ssrc,
                &format!("{what}!balancer!source"),
                format!("source {id} has no host"),
            );
            continue;
        };
        let addr = source_addr(host);
        let sw = format!("source!{id}");
        if source.val("type") == Some("interpreter") {
            let cmd = source.val("interpreter").unwrap_or("").trim().to_owned();
            if !spawn {
                tr.report.approximated(ssrc, &sw, format!("an interpreter source: Tessera connects to {addr} but does not start \"{cmd}\"; run it yourself (a service manager unit)"));
            } else if cmd.is_empty() {
                tr.report.dropped(
                    ssrc,
                    &sw,
                    "an interpreter source without an interpreter command: nothing to start",
                );
            } else {
                interpreters += 1;
                if out.spawn.is_none() {
                    out.spawn = Some(spawn_table(tr, &source, &sw, &cmd));
                }
            }
        }
        if !tr.used_sources.contains(&id) {
            tr.used_sources.push(id.clone());
        }
        if !out.servers.contains(&V::s(addr.clone())) {
            out.servers.push(V::s(addr));
        }
    }
    if out.spawn.is_some() && (out.servers.len() > 1 || interpreters > 1) {
        tr.report.dropped(&hsrc, &format!("{what}!balancer"), "Tessera spawns processes for an upstream of one server only: the interpreters of these sources are not started, start them yourself");
        out.spawn = None;
    }
    out
}

/// `[upstream.spawn]` of an interpreter source: `bin-path` (the command),
/// `bin-environment` (`env!X`), `bin-copy-environment` (`env_inherited`).
fn spawn_table(tr: &mut Tr<'_>, source: &Node, sw: &str, cmd: &str) -> Vec<(String, V)> {
    let ssrc = tr.src_of(source);
    let mut t = vec![
        ("bin-path".to_owned(), V::s(cmd)),
        ("max-procs".to_owned(), V::Int(1)),
    ];
    let binds_itself = cmd
        .split_whitespace()
        .any(|a| matches!(a, "-b" | "-s" | "--socket" | "--bind" | "--http-socket"));
    if binds_itself {
        tr.report.approximated(&ssrc, sw, format!("[upstream.spawn] bin-path = \"{cmd}\": Tessera starts it with the listening socket on its standard input, as lighttpd does; Cherokee let it bind the address itself, so remove the command's own address option if it refuses to start"));
    } else {
        tr.report.translated(
            &ssrc,
            sw,
            format!("[upstream.spawn] bin-path = \"{cmd}\": Tessera starts, restarts and stops it"),
        );
    }
    if let Some(env) = source.child("env") {
        let vars: Vec<(String, V)> = env
            .children
            .iter()
            .filter_map(|(k, n)| Some((k.clone(), V::s(n.value.as_ref()?.0.clone()))))
            .collect();
        if !vars.is_empty() {
            t.push(("bin-environment".to_owned(), V::Tab(vars)));
        }
    }
    if source.flag("env_inherited") == Some(true) {
        tr.report.approximated(&ssrc, &format!("{sw}!env_inherited"), "bin-copy-environment = [\"PATH\", \"HOME\", \"LANG\", \"USER\", \"SHELL\"]: Tessera copies named variables only, Cherokee the whole environment");
        t.push((
            "bin-copy-environment".to_owned(),
            V::strs(["PATH", "HOME", "LANG", "USER", "SHELL"]),
        ));
    }
    for (k, n) in &source.children {
        let s = tr.src_of(n);
        let w = format!("{sw}!{k}");
        match k.as_str() {
            "type" | "host" | "interpreter" | "env" | "env_inherited" => {}
            "nick" | "debug" | "timeout" => tr.report.not_needed(&s, &w, "Tessera names the upstream itself and logs to stderr"),
            "user" | "group" | "chroot" => tr.report.dropped(&s, &w, "Tessera starts the process as its own user: run it under a service manager unit to change user"),
            _ => tr.report.dropped(&s, &w, "not an option Tessera knows for a spawned process"),
        }
    }
    t
}

/// How the rule around a gateway handler selects requests: by extensions
/// (`Some(exts)`, `.php` style) or by a directory prefix (`script-name`).
pub(super) enum Mount {
    /// `match = extensions`: the extensions, with their dots.
    Extensions(Vec<String>),
    /// `match = directory` (without a trailing `/`; `""` for `/`), or any
    /// other rule (`""`: the whole request path is the application's).
    Prefix(String),
}

/// The mount of rule `r` (its `match` node).
pub(super) fn mount(r: &Node) -> Mount {
    match r.val("match") {
        Some("extensions") => Mount::Extensions(
            r.val("match!extensions")
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(|e| format!(".{}", e.trim_start_matches('.')))
                .collect(),
        ),
        Some("directory") => Mount::Prefix(
            r.val("match!directory")
                .unwrap_or("/")
                .trim_end_matches('/')
                .to_owned(),
        ),
        _ => Mount::Prefix(String::new()),
    }
}

/// A gateway handler (`fcgi`, `scgi`, `uwsgi`, `cgi`) into the module and
/// its model options; `None` (reported) when it has no usable back end.
pub(super) fn gateway_handler(
    tr: &mut Tr<'_>,
    node: &Node,
    handler: &str,
    r: &Node,
    what: &str,
    key: &str,
) -> Option<(&'static str, Vec<(&'static str, V)>)> {
    let hsrc = tr.src_of(node);
    let module: &'static str = match handler {
        "fcgi" => "fastcgi",
        "scgi" => "scgi",
        "uwsgi" => "uwsgi",
        _ => "cgi",
    };
    let mount = mount(r);
    let mut settings: Vec<(String, V)> = Vec::new();
    let mut params: Vec<(String, V)> = Vec::new();
    for (hk, hn) in &node.children {
        let hs = tr.src_of(hn);
        let w = format!("{what}!{hk}");
        match hk.as_str() {
            "balancer" | "iocache" => {}
            "check_file" => {
                let b = node.flag("check_file") != Some(false);
                if matches!(mount, Mount::Extensions(_)) || module == "cgi" {
                    tr.report.translated(&hs, &w, format!("{module} check-local = {b}"));
                    if module != "cgi" {
                        settings.push(("check-local".into(), V::Bool(b)));
                    }
                } else {
                    tr.report.translated(&hs, &w, format!("{module} script-name: the application takes every request of the rule, nothing is checked on disk"));
                }
            }
            "xsendfile" => {
                let b = node.flag("xsendfile") == Some(true);
                if b {
                    tr.report.approximated(&hs, &w, format!("{module} x-sendfile = true: Cherokee serves any file the back end names, Tessera only files under the document root (set x-sendfile-docroot)"));
                } else {
                    tr.report.translated(&hs, &w, format!("{module} x-sendfile = false"));
                }
                settings.push(("x-sendfile".into(), V::Bool(b)));
            }
            "pass_req_headers" => {
                if node.flag("pass_req_headers") == Some(false) {
                    tr.report.approximated(&hs, &w, "Tessera always passes the request headers (HTTP_*), as RFC 3875 §4.1.18 has it");
                } else {
                    tr.report.translated(&hs, &w, "the request headers are passed as HTTP_* variables (always, in Tessera)");
                }
            }
            "error_handler" => {
                if node.flag("error_handler") == Some(true) {
                    tr.report.approximated(&hs, &w, "the back end's error responses are sent as it wrote them; the vhost's error-pages apply to responses Tessera makes itself (404 of check-local, 502, 504)");
                }
            }
            "modifier1" if module == "uwsgi" => match node.val("modifier1").and_then(|m| m.trim().parse::<i64>().ok()) {
                Some(m) if (0..=255).contains(&m) => {
                    tr.report.translated(&hs, &w, format!("uwsgi modifier1 = {m}"));
                    if m != 0 {
                        settings.push(("modifier1".into(), V::Int(m)));
                    }
                }
                _ => tr.report.dropped(&hs, &w, "not an integer from 0 to 255"),
            },
            "modifier2" if module == "uwsgi" => {
                if node.val("modifier2").map(str::trim) == Some("0") {
                    tr.report.not_needed(&hs, &w, "0, the only value Tessera sends");
                } else {
                    tr.report.dropped(&hs, &w, "Tessera always sends modifier2 = 0");
                }
            }
            "env" => {
                for (k, n) in &hn.children {
                    if let Some((v, _)) = &n.value {
                        params.push((k.clone(), V::s(v.clone())));
                    }
                }
                tr.report.translated(&hs, &w, format!("{module} params"));
            }
            "change_user" => tr.report.dropped(&hs, &w, "Tessera runs back ends as its own user"),
            "script_alias" => tr.report.dropped(&hs, &w, "a fixed script for every request is not supported: point the rule at the script's path"),
            "x_real_ip_enabled" | "x_real_ip_access" | "x_real_ip_access_all" => tr.report.dropped(&hs, &w, "X-Real-IP is not consulted: use [server] trusted-proxies"),
            _ => tr.report.dropped(&hs, &w, format!("not an option Tessera's {module} has")),
        }
    }
    let mut opts: Vec<(&'static str, V)> = Vec::new();
    if !params.is_empty() {
        opts.push(("params", V::Tab(params)));
    }
    if module == "cgi" {
        let assign: Vec<(String, V)> = match &mount {
            Mount::Extensions(exts) => exts.iter().map(|e| (e.clone(), V::s(""))).collect(),
            Mount::Prefix(_) => vec![(String::new(), V::s(""))],
        };
        tr.report.translated(&hsrc, what, "cgi: every file the rule matches is run itself (assign = { \"\" = \"\" }, or its extensions)");
        opts.push(("assign", V::Tab(assign)));
        for (k, v) in settings {
            if k == "x-sendfile" {
                opts.push(("x-sendfile", v));
            }
        }
        return Some((module, opts));
    }
    let b = balanced(tr, node, what, true);
    if b.servers.is_empty() {
        tr.report.dropped(
            &hsrc,
            what,
            format!("a {handler} handler without a usable source: these requests get 404"),
        );
        return None;
    }
    let n = b.servers.len();
    let mut e = vec![
        ("key".to_owned(), V::s(key)),
        ("servers".to_owned(), V::Arr(b.servers)),
        ("balance".to_owned(), V::s(b.balance)),
    ];
    if let Some(s) = b.spawn {
        e.push(("spawn".to_owned(), V::Tab(s)));
    }
    let mounted = match &mount {
        Mount::Extensions(exts) => {
            e.push(("extensions".to_owned(), V::strs(exts.clone())));
            format!("extensions = {exts:?}")
        }
        Mount::Prefix(p) => {
            e.push(("script-name".to_owned(), V::s(p.clone())));
            format!("script-name = \"{p}\"")
        }
    };
    e.extend(settings);
    tr.report.translated(
        &hsrc,
        what,
        format!(
            "{module}: an [[upstream]] with {n} server{}, {mounted}",
            if n == 1 { "" } else { "s" }
        ),
    );
    opts.push(("server", V::Arr(vec![V::Tab(e)])));
    Some((module, opts))
}

/// Cherokee's evhost `tpl_document_root` as a mass-vhost `path-pattern`:
/// `${domain}` `%_`, `${root_domain}` `%0`, `${tld}` `%1`,
/// `${domain_no_tld}` `%2`, `${subdomainN}` `%(N+2)` (up to `%9`). `Err`
/// names a variable that has no equivalent (`${domain_md5}`, ...).
pub(super) fn evhost_pattern(tpl: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = tpl;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i].replace('%', "%%"));
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else {
            return Err(format!("an unclosed ${{ in \"{tpl}\""));
        };
        let var = &after[..j];
        let piece = match var {
            "domain" => "%_".to_owned(),
            "root_domain" => "%0".to_owned(),
            "tld" => "%1".to_owned(),
            "domain_no_tld" => "%2".to_owned(),
            v => match v
                .strip_prefix("subdomain")
                .and_then(|n| n.parse::<u32>().ok())
            {
                Some(n @ 1..=7) => format!("%{}", n + 2),
                _ => return Err(format!("${{{v}}}")),
            },
        };
        out.push_str(&piece);
        rest = &after[j + 1..];
    }
    out.push_str(&rest.replace('%', "%%"));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evhost_templates() {
        assert_eq!(
            evhost_pattern("/var/www/${root_domain}/${subdomain1}").as_deref(),
            Ok("/var/www/%0/%3")
        );
        assert_eq!(
            evhost_pattern("/srv/${domain}/${tld}/x%").as_deref(),
            Ok("/srv/%_/%1/x%%")
        );
        assert_eq!(
            evhost_pattern("/srv/${domain_md5}"),
            Err("${domain_md5}".to_owned())
        );
    }

    #[test]
    fn addresses() {
        assert_eq!(source_addr("/run/php.sock"), "unix:/run/php.sock");
        assert_eq!(source_addr("127.0.0.1:9000"), "127.0.0.1:9000");
        assert_eq!(source_addr("localhost"), "localhost:80");
    }
}

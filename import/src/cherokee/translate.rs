//! The translation of a Cherokee tree: listeners and `[server]` keys, the
//! global MIME types, the virtual servers ([`super::vserver`]) and the
//! information sources.

use super::tree::Node;
use super::{vserver, Tr};
use crate::emit::{Listen, Output};
use crate::error::ImportError;
use crate::model::V;
use crate::report::{Report, Src};
use crate::tessera::{builtin_mime, normalize_mime};

/// The global MIME types (`mime!*`), written in every vhost.
pub(super) struct Mime {
    /// Static-file `mime-types`: the extensions whose type differs from
    /// Tessera's built-in one, sorted.
    pub(super) over: Vec<(String, V)>,
    /// Expires `mime-types`: `access plus N seconds` per type.
    pub(super) age: Vec<(String, V)>,
    /// Where the first `mime!*` entry is.
    pub(super) src: Option<Src>,
}

/// Translates the tree `t` of the file `main`.
///
/// # Errors
/// [`ImportError::Empty`] when no `vserver!N` is defined.
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
    let (listen, binds) = listeners(&mut tr, t, main);
    let server = server_keys(&mut tr, t);
    icons_admin(&mut tr, t);
    let mime = global_mime(&mut tr, t);
    let vhosts = vserver::vhosts(&mut tr, t, main, &binds, &mime)?;
    sources(&mut tr, t);
    Ok(Output {
        header: Vec::new(),
        listen,
        server,
        upstreams: Vec::new(),
        vhosts,
    })
}

/// Listeners: `server!bind!*` and `server!port` (else port 80), with the
/// binds as `(number, address)` for rules that match by bind (0 for
/// `server!port` and the default).
fn listeners(tr: &mut Tr<'_>, t: &Node, main: &str) -> (Vec<Listen>, Vec<(u64, String)>) {
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
    (listen, binds)
}

/// The other `[server]` keys (keep-alive), reporting those Tessera does not
/// need or support.
fn server_keys(tr: &mut Tr<'_>, t: &Node) -> Vec<(String, V, Src)> {
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
    server
}

/// Reports the `icons` and `admin` subtrees, which Tessera does not need.
fn icons_admin(tr: &mut Tr<'_>, t: &Node) {
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
}

/// The global MIME types from `mime!*`.
fn global_mime(tr: &mut Tr<'_>, t: &Node) -> Mime {
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
    Mime {
        over: mime_over,
        age: mime_age,
        src: mime_src,
    }
}

/// Reports the information sources (`source!N`), after the rules have
/// marked those they use.
fn sources(tr: &mut Tr<'_>, t: &Node) {
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
}

#[cfg(test)]
mod tests;

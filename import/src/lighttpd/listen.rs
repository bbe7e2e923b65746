//! Listeners and the global-only `server.*` options: `server.port`,
//! `server.bind`, `server.use-ipv6` and the `$SERVER["socket"]` blocks
//! become `[server] listen` addresses (TLS ones are left out); the
//! connection limits are read with `[server]` in `translate`.

use super::value::CondOp;
use super::{Arg, Tr};
use crate::emit::Listen;
use crate::model::Opt;
use crate::report::{Report, Src};

/// Normalizes a lighttpd socket (`":80"`, `"0.0.0.0:80"`, `"[::]:80"`,
/// `"localhost:80"`) to `IP:PORT`.
pub(super) fn socket_addr(s: &str, default_port: u16) -> Option<String> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']')?;
        (format!("[{h}]"), p.strip_prefix(':').unwrap_or(""))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), p),
            None => (s.to_owned(), ""),
        }
    };
    let port: u16 = if port.is_empty() {
        default_port
    } else {
        port.parse().ok()?
    };
    let host = match host.as_str() {
        "" => "0.0.0.0".to_owned(),
        "localhost" => "127.0.0.1".to_owned(),
        h => h.to_owned(),
    };
    let addr = format!("{host}:{port}");
    addr.parse::<std::net::SocketAddr>().ok()?;
    Some(addr)
}

impl Tr<'_> {
    /// `server.*` options that are global-only or read with `[server]`, and the modules' debug switches.
    pub(super) fn server_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { ctx, key, src, .. } = *a;
        let in_block = ctx != 0;
        Some(match key {
            "server.document-root"
            | "server.port"
            | "server.bind"
            | "server.use-ipv6"
            | "server.modules" => {
                if in_block && key != "server.document-root" {
                    report.dropped(
                        src,
                        key,
                        "only allowed in the global context (lighttpd ignores it here)",
                    );
                }
                Vec::new()
            }
            "proxy.debug" | "fastcgi.debug" | "scgi.debug" | "simple-vhost.debug"
            | "evhost.debug" => {
                report.not_needed(src, key, "lighttpd's debug logging; use RUST_LOG=debug");
                Vec::new()
            }
            "server.max-keep-alive-idle"
            | "server.max-read-idle"
            | "server.max-connections"
            | "server.max-worker"
            | "server.max-keep-alive-requests"
            | "server.max-write-idle" => {
                // Handled with [server] below.
                Vec::new()
            }
            _ => return None,
        })
    }

    /// The listener address of context `ctx` when its own test is
    /// `$SERVER["socket"] == "…"` (not TLS).
    pub(super) fn socket_block(&self, ctx: usize) -> Option<String> {
        let rc = self.ctx(ctx).cond.as_ref()?;
        if rc.field != "SERVER" || rc.key != "socket" || rc.op != CondOp::Eq {
            return None;
        }
        socket_addr(&rc.value, self.port())
    }

    pub(super) fn port(&self) -> u16 {
        self.global("server.port")
            .and_then(|s| s.val.as_string())
            .and_then(|p| p.parse().ok())
            .unwrap_or(80)
    }

    pub(super) fn listeners(&mut self, report: &mut Report) {
        let port = self.port();
        let port_src = self
            .global("server.port")
            .map(|s| s.src.clone())
            .unwrap_or_else(|| Src::new(&self.main, 0));
        let bind = self.global("server.bind").cloned();
        let mut addrs: Vec<Listen> = Vec::new();
        match &bind {
            Some(b) => {
                let v = b.val.as_string().unwrap_or_default();
                if v.starts_with('/') {
                    report.dropped(&b.src, "server.bind", "Unix sockets are not supported");
                } else if let Some(a) = socket_addr(&v, port) {
                    report.translated(&b.src, "server.bind", format!("[server] listen \"{a}\""));
                    addrs.push(Listen {
                        addr: a,
                        src: b.src.clone(),
                    });
                } else {
                    report.dropped(
                        &b.src,
                        "server.bind",
                        format!("\"{v}\" is not an IP address (host names are not resolved)"),
                    );
                }
            }
            None => addrs.push(Listen {
                addr: format!("0.0.0.0:{port}"),
                src: port_src.clone(),
            }),
        }
        if let Some(p) = self.global("server.port") {
            report.translated(
                &p.src,
                "server.port",
                format!("[server] listen port {port}"),
            );
        }
        if let Some(u) = self.global("server.use-ipv6") {
            if u.val.as_bool() == Some(true) && bind.is_none() {
                addrs.push(Listen {
                    addr: format!("[::]:{port}"),
                    src: u.src.clone(),
                });
            }
            report.translated(
                &u.src,
                "server.use-ipv6",
                format!("[server] listen \"[::]:{port}\""),
            );
        }
        // $SERVER["socket"] blocks add listeners, except TLS ones.
        for i in 1..self.parsed.contexts.len() {
            let c = self.ctx(i).clone();
            let Some(rc) = &c.cond else { continue };
            if rc.field != "SERVER" || rc.key != "socket" || rc.op != CondOp::Eq {
                continue;
            }
            let Some(addr) = socket_addr(&rc.value, port) else {
                continue;
            };
            let tls = c
                .get("ssl.engine")
                .is_some_and(|s| s.val.as_bool() == Some(true));
            if tls {
                report.dropped(
                    &rc.src,
                    &rc.show(),
                    format!("a TLS listener: TLS is not imported, so {addr} is not listened on (configure TLS in Tessera by hand)"),
                );
                continue;
            }
            if !addrs.iter().any(|l| l.addr == addr) {
                addrs.push(Listen {
                    addr,
                    src: rc.src.clone(),
                });
            }
        }
        // A [::] listener takes IPv4 connections too (Linux's default
        // bindv6only = 0), so it cannot sit beside 0.0.0.0 on the same port.
        let mut i = 0;
        while i < addrs.len() {
            let a = addrs[i].addr.clone();
            let twin = a.strip_prefix("0.0.0.0:").map(|p| format!("[::]:{p}"));
            if let Some(twin) = twin.filter(|t| addrs.iter().any(|l| &l.addr == t)) {
                report.approximated(
                    &addrs[i].src,
                    "server.port",
                    format!("{a} is left out: {twin} also accepts IPv4 connections (Linux, net.ipv6.bindv6only = 0), and both cannot be bound; if your system sets bindv6only = 1, list both"),
                );
                addrs.remove(i);
            } else {
                i += 1;
            }
        }
        self.listen = addrs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets() {
        assert_eq!(socket_addr(":8080", 80).as_deref(), Some("0.0.0.0:8080"));
        assert_eq!(socket_addr("[::]:80", 80).as_deref(), Some("[::]:80"));
        assert_eq!(
            socket_addr("127.0.0.1", 81).as_deref(),
            Some("127.0.0.1:81")
        );
        assert_eq!(
            socket_addr("localhost:81", 80).as_deref(),
            Some("127.0.0.1:81")
        );
        assert_eq!(socket_addr("/run/x.sock", 80), None);
    }
}

//! Listeners and the global-only `server.*` options: `server.port`,
//! `server.bind`, `server.use-ipv6` and the `$SERVER["socket"]` blocks
//! become `[server] listen` addresses (TLS ones are left out: an address
//! any of its socket blocks enables `ssl.engine` for, and the
//! `server.bind`/`server.port` one with the global `ssl.engine`); the
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
    // in one spelling (`[0:0::1]:80` is `[::1]:80`), so that addresses
    // compare equal when the sockets are the same
    let addr: std::net::SocketAddr = format!("{host}:{port}").parse().ok()?;
    Some(addr.to_string())
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
    /// `$SERVER["socket"] == "…"` (TLS or not: [`Tr::listeners`] leaves TLS
    /// addresses out of `[server] listen`).
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

    /// The TLS listener addresses, each with the `ssl.engine` line that
    /// makes it TLS: an address is TLS when any `$SERVER["socket"] == "…"`
    /// block for it enables `ssl.engine` (lighttpd applies every block of a
    /// socket to it, so settings split over two blocks are one listener),
    /// and the `server.bind`/`server.port` listener is TLS when the global
    /// `ssl.engine` is enabled (socket blocks do not inherit it).
    fn tls_addrs(&self, main: &[Listen]) -> Vec<(String, Src)> {
        let mut tls: Vec<(String, Src)> = Vec::new();
        let mut add = |addr: &str, src: &Src| {
            if !tls.iter().any(|(a, _)| a == addr) {
                tls.push((addr.to_owned(), src.clone()));
            }
        };
        if let Some(s) = self
            .global("ssl.engine")
            .filter(|s| s.val.as_bool() == Some(true))
        {
            for l in main {
                add(&l.addr, &s.src);
            }
        }
        for i in 1..self.parsed.contexts.len() {
            let Some(addr) = self.socket_block(i) else {
                continue;
            };
            if let Some(s) = self
                .ctx(i)
                .get("ssl.engine")
                .filter(|s| s.val.as_bool() == Some(true))
            {
                add(&addr, &s.src);
            }
        }
        tls
    }

    pub(super) fn listeners(&mut self, report: &mut Report) {
        let port = self.port();
        let port_src = self
            .global("server.port")
            .map(|s| s.src.clone())
            .unwrap_or_else(|| Src::new(&self.main, 0));
        let bind = self.global("server.bind").cloned();
        let mut addrs: Vec<Listen> = Vec::new();
        // The server.bind/server.port listener (and [::] with use-ipv6).
        let mut main: Vec<Listen> = Vec::new();
        let mut bind_ok = false;
        match &bind {
            Some(b) => {
                let v = b.val.as_string().unwrap_or_default();
                if v.starts_with('/') {
                    report.dropped(&b.src, "server.bind", "Unix sockets are not supported");
                } else if let Some(a) = socket_addr(&v, port) {
                    bind_ok = true;
                    main.push(Listen {
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
            None => main.push(Listen {
                addr: format!("0.0.0.0:{port}"),
                src: port_src.clone(),
            }),
        }
        let use_ipv6 = self.global("server.use-ipv6").cloned();
        if let Some(u) = &use_ipv6 {
            if u.val.as_bool() == Some(true) && bind.is_none() {
                main.push(Listen {
                    addr: format!("[::]:{port}"),
                    src: u.src.clone(),
                });
            }
        }
        let tls = self.tls_addrs(&main);
        let tls_src = |addr: &str| tls.iter().find(|(a, _)| a == addr).map(|(_, s)| s);
        let not_listened = |addr: &str, s: &Src| {
            format!("{addr} is a TLS listener (ssl.engine at {s}): TLS is not imported, so {addr} is not listened on (configure TLS in Tessera by hand)")
        };
        if let (Some(b), true) = (&bind, bind_ok) {
            let a = &main[0].addr;
            match tls_src(a) {
                Some(s) => report.dropped(&b.src, "server.bind", not_listened(a, s)),
                None => {
                    report.translated(&b.src, "server.bind", format!("[server] listen \"{a}\""))
                }
            }
        }
        if let Some(p) = self.global("server.port") {
            match main.iter().find_map(|l| tls_src(&l.addr)) {
                Some(s) if main.iter().all(|l| tls_src(&l.addr).is_some()) => {
                    report.dropped(
                        &p.src,
                        "server.port",
                        format!("port {port}: a TLS listener (ssl.engine at {s}): TLS is not imported, so it is not listened on (configure TLS in Tessera by hand)"),
                    );
                }
                _ => report.translated(
                    &p.src,
                    "server.port",
                    format!("[server] listen port {port}"),
                ),
            }
        }
        if let Some(u) = &use_ipv6 {
            let a = format!("[::]:{port}");
            match tls_src(&a).filter(|_| u.val.as_bool() == Some(true) && bind.is_none()) {
                Some(s) => report.dropped(&u.src, "server.use-ipv6", not_listened(&a, s)),
                None => report.translated(
                    &u.src,
                    "server.use-ipv6",
                    format!("[server] listen \"{a}\""),
                ),
            }
        }
        addrs.extend(main.into_iter().filter(|l| tls_src(&l.addr).is_none()));
        // $SERVER["socket"] blocks add listeners, except TLS ones: an
        // address is TLS when any of its blocks enables ssl.engine.
        for i in 1..self.parsed.contexts.len() {
            let Some(addr) = self.socket_block(i) else {
                continue;
            };
            let Some(rc) = self.ctx(i).cond.clone() else {
                continue;
            };
            if let Some(s) = tls_src(&addr) {
                let own = self
                    .ctx(i)
                    .get("ssl.engine")
                    .is_some_and(|x| x.val.as_bool() == Some(true));
                let msg = if own {
                    format!("a TLS listener: TLS is not imported, so {addr} is not listened on (configure TLS in Tessera by hand)")
                } else {
                    format!(
                        "{}; what this block sets applies on no imported listener",
                        not_listened(&addr, s)
                    )
                };
                report.dropped(&rc.src, &rc.show(), msg);
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
        if addrs.is_empty() && !tls.is_empty() {
            report.approximated(
                &port_src,
                "server.port",
                "every listener is TLS, so [server] listen is not written and Tessera listens on its default, 127.0.0.1:8080 (plain HTTP): set listen by hand",
            );
        }
        self.listen = addrs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lighttpd::test_util::imp;
    use crate::Outcome;

    /// The `[server] listen` addresses of an import.
    fn listen(t: &str) -> Vec<String> {
        let v: toml::Table = toml::from_str(t).unwrap();
        v["server"]
            .get("listen")
            .and_then(|l| l.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A TLS socket whose settings are split over two `$SERVER["socket"]`
    /// blocks is one TLS listener: not listened on (it was served as plain
    /// HTTP), and no line of the report says otherwise.
    #[test]
    fn tls_split_over_two_socket_blocks_is_not_listened_on() {
        let (t, r) = imp(concat!(
            "server.document-root = \"/tmp\"\n",
            "server.bind = \"127.0.0.1\"\n",
            "server.port = 20200\n",
            "server.modules = ( \"mod_setenv\" )\n",
            "$SERVER[\"socket\"] == \"127.0.0.1:20205\" { ssl.engine = \"enable\"\n",
            " ssl.pemfile = \"/tmp/cert.pem\" }\n",
            "$SERVER[\"socket\"] == \"127.0.0.1:20205\" { setenv.add-response-header = (\"Strict-Transport-Security\" => \"max-age=1\") }\n",
        ));
        assert_eq!(listen(&t), ["127.0.0.1:20200"], "{t}");
        for line in [5, 7] {
            assert!(
                r.entries.iter().any(|e| e.src.line == line
                    && e.outcome == Outcome::Dropped
                    && e.message.contains("127.0.0.1:20205 is not listened on")),
                "line {line}: {r}"
            );
        }
        // The order of the blocks does not matter.
        let (t, _) = imp(concat!(
            "server.document-root = \"/tmp\"\n",
            "server.port = 20200\n",
            "$SERVER[\"socket\"] == \":20205\" { server.max-connections = 10 }\n",
            "$SERVER[\"socket\"] == \"0.0.0.0:20205\" { ssl.engine = \"enable\" }\n",
        ));
        assert_eq!(listen(&t), ["0.0.0.0:20200"], "{t}");
    }

    /// The `server.bind`/`server.port` listener is TLS with the global
    /// `ssl.engine`, or with a socket block for the same address: it is
    /// left out too, and the report says so instead of "translated".
    #[test]
    fn a_tls_main_listener_is_not_listened_on() {
        let (t, r) = imp(concat!(
            "server.document-root = \"/tmp\"\n",
            "server.port = 443\n",
            "ssl.engine = \"enable\"\n",
            "$SERVER[\"socket\"] == \":80\" { }\n",
        ));
        assert_eq!(listen(&t), ["0.0.0.0:80"], "{t}");
        assert!(
            r.find("server.port")
                .all(|e| e.outcome == Outcome::Dropped && e.message.contains("TLS")),
            "{r}"
        );
        let (t, r) = imp(concat!(
            "server.document-root = \"/tmp\"\n",
            "server.bind = \"127.0.0.1\"\n",
            "server.port = 8443\n",
            "$SERVER[\"socket\"] == \"127.0.0.1:8443\" { ssl.engine = \"enable\" }\n",
        ));
        assert_eq!(listen(&t), Vec::<String>::new(), "{t}");
        assert!(
            r.find("server.bind")
                .all(|e| e.outcome == Outcome::Dropped && e.message.contains("not listened on")),
            "{r}"
        );
        assert!(r.find("every listener is TLS").count() == 1, "{r}");
        // A socket block disabling it (lighttpd does not inherit the global
        // ssl.engine) stays plain HTTP.
        let (t, _) = imp(concat!(
            "server.document-root = \"/tmp\"\n",
            "ssl.engine = \"enable\"\n",
            "$SERVER[\"socket\"] == \":8080\" { }\n",
        ));
        assert_eq!(listen(&t), ["0.0.0.0:8080"], "{t}");
    }

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
        // one spelling per socket: a TLS block and a plain one name the same
        assert_eq!(
            socket_addr("[0:0::1]:443", 80).as_deref(),
            Some("[::1]:443")
        );
    }
}

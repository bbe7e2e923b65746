//! mod_extforward and `server.max-request-size`: the server-wide `[server]`
//! keys `trusted-proxies`, `real-ip-header`, `listen-proxy-protocol` and
//! `max-body-size` (a conditional one is reported, not imported).

use super::value::Val;
use super::{Arg, Tr};
use crate::model::{Opt, V};
use crate::report::{Report, Src};

impl Tr<'_> {
    /// mod_extforward's options and `server.max-request-size` in a block (the global ones are `[server]` keys).
    pub(super) fn extforward_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { ctx, key, src, .. } = *a;
        let in_block = ctx != 0;
        Some(match key {
            "server.max-request-size"
            | "extforward.forwarder"
            | "extforward.headers"
            | "extforward.hap-PROXY"
                if !in_block
                    || self.socket_block(ctx).is_some() && key == "extforward.hap-PROXY" =>
            {
                // Handled with [server] below.
                Vec::new()
            }
            "server.max-request-size" => {
                report.dropped(
                    src,
                    key,
                    "Tessera's max-body-size is server-wide ([server]): set it there if this block needs a larger limit",
                );
                Vec::new()
            }
            "extforward.forwarder" | "extforward.headers" | "extforward.hap-PROXY" => {
                report.dropped(
                    src,
                    key,
                    "Tessera's trusted proxies, real-ip-header and PROXY protocol listeners are server-wide ([server]); a conditional one is not imported (trusting more than intended would let clients spoof their address)",
                );
                Vec::new()
            }
            "extforward.params" | "extforward.hap-PROXY-ssl-client-verify" => {
                report.dropped(src, key, "not supported: Tessera takes only the client address from the header or the PROXY protocol");
                Vec::new()
            }
            _ => return None,
        })
    }

    /// `[server]` keys of `server.max-request-size` and mod_extforward.
    pub(super) fn proxy_server_keys(
        &self,
        server: &mut Vec<(String, V, Src)>,
        report: &mut Report,
    ) {
        if let Some(s) = self.global("server.max-request-size") {
            match s.val.as_string().and_then(|v| v.parse::<i64>().ok()) {
                Some(0) => report.approximated(
                    &s.src,
                    &s.key,
                    "0 (no limit): Tessera always has a limit, the default max-body-size of 1 MiB applies; set [server] max-body-size to the largest body you accept",
                ),
                Some(k) if k > 0 => {
                    let bytes = k.saturating_mul(1024);
                    report.translated(
                        &s.src,
                        &s.key,
                        format!("[server] max-body-size = {bytes} ({k} KiB; lighttpd counts the request head too, Tessera the body only)"),
                    );
                    server.push(("max-body-size".into(), V::Int(bytes), s.src.clone()));
                }
                _ => report.dropped(&s.src, &s.key, format!("{} is not a size in KiB", s.val.show())),
            }
        } else if self.is_loaded("mod_proxy")
            && self
                .parsed
                .contexts
                .iter()
                .any(|c| c.get("proxy.server").is_some())
        {
            report.approximated(
                &Src::new(&self.main, 1),
                "server.max-request-size",
                "not set: lighttpd accepts request bodies of any size, Tessera refuses bodies over max-body-size (default 1 MiB) with 413; set [server] max-body-size for uploads through the proxy",
            );
        }
        if !self.is_loaded("mod_extforward") {
            return;
        }
        if let Some(s) = self.global("extforward.forwarder") {
            let mut nets: Vec<V> = Vec::new();
            let entries: Vec<(String, String)> = match &s.val {
                Val::Arr(items) => items
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Some(k) => Some((k.clone(), v.as_string().unwrap_or_default())),
                        None => Some((v.as_string()?, "trust".to_owned())),
                    })
                    .collect(),
                _ => Vec::new(),
            };
            for (addr, how) in entries {
                if !how.eq_ignore_ascii_case("trust") {
                    report.translated(
                        &s.src,
                        &s.key,
                        format!("\"{addr}\" => \"{how}\": not trusted"),
                    );
                    continue;
                }
                if addr.eq_ignore_ascii_case("all") {
                    report.approximated(&s.src, &s.key, "\"all\" => \"trust\": trusted-proxies = [\"0.0.0.0/0\", \"::/0\"]: every client may set its own address with the header; list your proxies instead");
                    for n in ["0.0.0.0/0", "::/0"] {
                        if !nets.contains(&V::s(n)) {
                            nets.push(V::s(n));
                        }
                    }
                } else if parse_net(&addr) {
                    nets.push(V::s(addr.trim()));
                } else {
                    report.dropped(
                        &s.src,
                        &s.key,
                        format!("\"{addr}\" is not an IP address or CIDR network"),
                    );
                }
            }
            if !nets.is_empty() {
                report.translated(&s.src, &s.key, "[server] trusted-proxies");
                server.push(("trusted-proxies".into(), V::Arr(nets), s.src.clone()));
            }
        }
        if let Some(s) = self.global("extforward.headers") {
            let mut chosen: Option<&str> = None;
            for h in s.val.as_list() {
                let t = match h.to_ascii_lowercase().as_str() {
                    "x-forwarded-for" => Some("x-forwarded-for"),
                    "forwarded" => Some("forwarded"),
                    _ => None,
                };
                match (t, chosen) {
                    (Some(t), None) => chosen = Some(t),
                    (Some(_), Some(c)) => report.approximated(&s.src, &s.key, format!("\"{h}\": Tessera reads one header, \"{c}\" (the first listed)")),
                    (None, _) => report.dropped(&s.src, &s.key, format!("\"{h}\": Tessera reads the client address from X-Forwarded-For or Forwarded only")),
                }
            }
            if let Some(c) = chosen {
                report.translated(&s.src, &s.key, format!("[server] real-ip-header = \"{c}\""));
                server.push(("real-ip-header".into(), V::s(c), s.src.clone()));
            }
        }
        let mut pp: Vec<V> = Vec::new();
        let mut pp_src: Option<Src> = None;
        if let Some(s) = self.global("extforward.hap-PROXY") {
            if s.val.as_bool() == Some(true) {
                for l in &self.listen {
                    pp.push(V::s(l.addr.clone()));
                }
                report.translated(
                    &s.src,
                    &s.key,
                    "[server] listen-proxy-protocol = every listen address",
                );
                pp_src = Some(s.src.clone());
            } else {
                report.translated(&s.src, &s.key, "disabled (the default)");
            }
        }
        for i in 1..self.parsed.contexts.len() {
            let Some(s) = self.ctx(i).get("extforward.hap-PROXY") else {
                continue;
            };
            let Some(addr) = self.socket_block(i) else {
                continue;
            };
            let on = s.val.as_bool() == Some(true);
            if on && !pp.contains(&V::s(addr.clone())) && self.listen.iter().any(|l| l.addr == addr)
            {
                pp.push(V::s(addr.clone()));
            } else if !on {
                pp.retain(|a| a.as_str() != Some(addr.as_str()));
            }
            report.translated(
                &s.src,
                &s.key,
                format!(
                    "[server] listen-proxy-protocol {} \"{addr}\"",
                    if on { "includes" } else { "leaves out" }
                ),
            );
            pp_src.get_or_insert(s.src.clone());
        }
        if let (false, Some(src)) = (pp.is_empty(), pp_src) {
            server.push(("listen-proxy-protocol".into(), V::Arr(pp), src));
        }
    }
}

pub(super) fn parse_net(a: &str) -> bool {
    let a = a.trim();
    if let Some((ip, bits)) = a.split_once('/') {
        let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
            return false;
        };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        bits.parse::<u8>().is_ok_and(|b| b <= max)
    } else {
        a.parse::<std::net::IpAddr>().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use crate::lighttpd::test_util::*;

    #[test]
    fn extforward_and_max_request_size() {
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}server.port = 8080\nserver.max-request-size = 8192\n\
             extforward.forwarder = ( \"10.0.0.1\" => \"trust\", \"192.168.0.0/16\" => \"trust\", \"10.9.9.9\" => \"untrusted\" )\n\
             extforward.headers = ( \"Forwarded\" )\n\
             extforward.hap-PROXY = \"enable\"\n\
             $SERVER[\"socket\"] == \":8443\" {{ extforward.hap-PROXY = \"disable\" }}\n\
             $SERVER[\"socket\"] == \":9000\" {{ }}\n"
        ));
        no_drops(&r, &["extforward", "max-request-size"]);
        let s = t["server"].as_table().unwrap();
        assert_eq!(s["max-body-size"].as_integer(), Some(8_388_608));
        assert_eq!(
            s["trusted-proxies"].as_array().unwrap(),
            &vec![
                toml::Value::from("10.0.0.1"),
                toml::Value::from("192.168.0.0/16")
            ]
        );
        assert_eq!(s["real-ip-header"].as_str(), Some("forwarded"));
        assert_eq!(
            s["listen-proxy-protocol"].as_array().unwrap(),
            &vec![
                toml::Value::from("0.0.0.0:8080"),
                toml::Value::from("0.0.0.0:9000")
            ]
        );
        // "all", unknown headers, 0 KiB, per-block values.
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}server.max-request-size = 0\n\
             extforward.forwarder = ( \"all\" => \"trust\" )\n\
             extforward.headers = ( \"X-Real-IP\", \"X-Forwarded-For\", \"Forwarded\" )\n\
             $HTTP[\"url\"] =^ \"/upload/\" {{ server.max-request-size = 102400 }}\n\
             $HTTP[\"remoteip\"] == \"10.0.0.0/8\" {{ extforward.forwarder = ( \"10.0.0.1\" => \"trust\" ) }}\n"
        ));
        let s = t["server"].as_table().unwrap();
        assert!(s.get("max-body-size").is_none());
        assert_eq!(
            s["trusted-proxies"].as_array().unwrap(),
            &vec![toml::Value::from("0.0.0.0/0"), toml::Value::from("::/0")]
        );
        assert_eq!(s["real-ip-header"].as_str(), Some("x-forwarded-for"));
        let outcome = |what: &str, msg: &str| {
            r.entries
                .iter()
                .find(|e| e.what == what && e.message.contains(msg))
                .map(|e| e.outcome)
        };
        use crate::Outcome::*;
        assert_eq!(
            outcome("server.max-request-size", "no limit"),
            Some(Approximated)
        );
        assert_eq!(
            outcome("server.max-request-size", "server-wide"),
            Some(Dropped)
        );
        assert_eq!(
            outcome("extforward.forwarder", "\"all\""),
            Some(Approximated)
        );
        assert_eq!(
            outcome("extforward.forwarder", "server-wide"),
            Some(Dropped)
        );
        assert_eq!(outcome("extforward.headers", "X-Real-IP"), Some(Dropped));
        assert_eq!(
            outcome("extforward.headers", "\"Forwarded\""),
            Some(Approximated)
        );
    }
}

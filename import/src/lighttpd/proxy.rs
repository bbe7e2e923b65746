//! mod_proxy: `proxy.server` (back ends by extension or path prefix, with
//! their per-back-end timeouts), `proxy.balance` (and the gateways'
//! `*.balance`), `proxy.header` and `proxy.forwarded`.

use super::value::Val;
use super::{backends, Arg, Tr};
use crate::model::{Opt, V};
use crate::report::{Report, Src};

impl Tr<'_> {
    /// mod_proxy's options, and the gateways' `*.balance`.
    pub(super) fn proxy_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { key, src, val, .. } = *a;
        let opt = |module, k, v| a.opt(module, k, v);
        Some(match key {
            "proxy.server" => {
                let entries = proxy_servers(val, src, report);
                if entries.is_empty() {
                    return Some(Vec::new());
                }
                vec![opt("proxy", "server", V::Arr(entries))]
            }
            "proxy.balance" | "fastcgi.balance" | "scgi.balance" => {
                let v = val.as_string().unwrap_or_default();
                let b = match v.as_str() {
                    "round-robin" => "round-robin",
                    "hash" | "sticky" => "ip-hash",
                    "fair" => "least-conn",
                    _ => {
                        report.dropped(src, key, format!("{}: not a balancing method lighttpd knows (fair, round-robin, hash, sticky)", val.show()));
                        return Some(Vec::new());
                    }
                };
                if v == "hash" {
                    // gw_backend.c: "hash" hashes the request's authority and
                    // path, "sticky" the client address.
                    report.approximated(src, key, "upstream balance = \"ip-hash\": lighttpd's \"hash\" picks the server by a hash of the requested host and path (each URL on one server), Tessera's by the client address (each client on one server)");
                } else {
                    report.translated(src, key, format!("upstream balance = \"{b}\""));
                }
                let mods: &[&'static str] = match key {
                    "proxy.balance" => &["proxy"],
                    "fastcgi.balance" => &["fastcgi"],
                    _ => &["scgi", "uwsgi"],
                };
                mods.iter().map(|m| opt(m, "balance", V::s(b))).collect()
            }
            "proxy.header" => proxy_header(val, src, report)
                .into_iter()
                .map(|(k, v)| opt("proxy", k, v))
                .collect(),
            "proxy.forwarded" => {
                let flags: Vec<(String, bool)> = match val {
                    Val::Arr(items) => items
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone()?.to_ascii_lowercase(), v.as_bool()?)))
                        .collect(),
                    _ => Vec::new(),
                };
                let on: Vec<&str> = flags
                    .iter()
                    .filter(|(_, b)| *b)
                    .map(|(k, _)| k.as_str())
                    .collect();
                if on.is_empty() {
                    report.translated(
                        src,
                        key,
                        "nothing enabled: proxy forwarded = \"x-forwarded\" (the default)",
                    );
                    return Some(Vec::new());
                }
                let extra: Vec<&str> = on
                    .iter()
                    .copied()
                    .filter(|k| !matches!(*k, "for" | "proto" | "host"))
                    .collect();
                if extra.is_empty() && on.len() == 3 {
                    report.translated(src, key, "proxy forwarded = \"both\": lighttpd adds Forwarded (for, proto, host) and still sends X-Forwarded-For, -Proto and -Host");
                } else {
                    report.approximated(src, key, format!("proxy forwarded = \"both\": Tessera's Forwarded carries for, proto and host (lighttpd here: {}); X-Forwarded-For, -Proto and -Host are sent as lighttpd sends them", on.join(", ")));
                }
                vec![opt("proxy", "forwarded", V::s("both"))]
            }
            "proxy.replace-http-host" => {
                if val.as_bool() == Some(true) {
                    report.dropped(src, key, "lighttpd sends the back end's name from proxy.server as Host; set host = \"NAME\" in the proxy table by hand");
                } else {
                    report.translated(src, key, "disabled: proxy host = \"client\" (the default)");
                }
                Vec::new()
            }
            "proxy.map-extensions" => {
                report.dropped(
                    src,
                    key,
                    "extension aliases are not supported: add the extensions to proxy.server",
                );
                Vec::new()
            }
            _ => return None,
        })
    }
}

/// A lighttpd back end (`"host"`, `"port"`, `"socket"`) as a Tessera server:
/// `host:port` (`[v6]:port`), or `unix:/path`.
pub(super) fn backend_addr(pairs: &[(String, Val)]) -> Result<String, String> {
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.as_string())
    };
    if let Some(sock) = get("socket") {
        if !sock.starts_with('/') {
            return Err(format!("socket \"{sock}\" is not an absolute path"));
        }
        return Ok(format!("unix:{sock}"));
    }
    let Some(host) = get("host").filter(|h| !h.is_empty()) else {
        return Err("no \"host\" or \"socket\"".into());
    };
    let port = match get("port") {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("port \"{p}\" is not a port number"))?,
        None => 80,
    };
    if host.contains(':') && !host.starts_with('[') {
        Ok(format!("[{host}]:{port}"))
    } else {
        Ok(format!("{host}:{port}"))
    }
}

/// Per-back-end keys of lighttpd's `proxy.server` that become upstream
/// settings (the same for every back end of one list).
pub(super) const BACKEND_KEYS: &[(&str, &str)] = &[
    ("connect-timeout", "connect-timeout"),
    ("read-timeout", "read-timeout"),
    ("write-timeout", "send-timeout"),
    ("disable-time", "fail-timeout"),
];

/// `proxy.server` entries: `[{key, servers, connect-timeout?, …}]`, in order.
fn proxy_servers(val: &Val, src: &Src, report: &mut Report) -> Vec<V> {
    const KEY: &str = "proxy.server";
    let mut out = Vec::new();
    for (ext, backends) in backends::keyed_hosts(KEY, val, src, report) {
        let mut servers = Vec::new();
        let mut settings: Vec<(String, V)> = Vec::new();
        for b in &backends {
            match backend_addr(b) {
                Ok(a) => servers.push(V::s(a)),
                Err(e) => {
                    report.dropped(src, KEY, format!("\"{ext}\": a back end is left out: {e}"));
                    continue;
                }
            }
            for (k, v) in b {
                if matches!(k.as_str(), "host" | "port" | "socket") {
                    continue;
                }
                if let Some((_, t)) = BACKEND_KEYS.iter().find(|(l, _)| l == k) {
                    match v.as_string().and_then(|n| n.parse::<i64>().ok()) {
                        Some(n) if !settings.iter().any(|(x, _)| x == t) => {
                            report.translated(
                                src,
                                &format!("{KEY} \"{k}\""),
                                format!("upstream {t} = {n}"),
                            );
                            settings.push(((*t).to_owned(), V::Int(n)));
                        }
                        Some(n) if settings.iter().any(|(x, w)| x == t && *w != V::Int(n)) => {
                            report.approximated(src, &format!("{KEY} \"{k}\""), format!("\"{ext}\": back ends differ; Tessera has one {t} per upstream, the first back end's is used"));
                        }
                        Some(_) => {}
                        None => report.dropped(
                            src,
                            &format!("{KEY} \"{k}\""),
                            format!("{} is not a number of seconds", v.show()),
                        ),
                    }
                    continue;
                }
                let why = match k.as_str() {
                    "bin-path"
                    | "bin-environment"
                    | "bin-copy-environment"
                    | "min-procs"
                    | "max-procs"
                    | "max-load-per-proc"
                    | "kill-signal"
                    | "listen-backlog" => "Tessera does not start back ends: start it yourself",
                    "check-local"
                    | "docroot"
                    | "fix-root-scriptname"
                    | "strip-request-uri"
                    | "mode"
                    | "broken-scriptfilename" => {
                        "a FastCGI/SCGI setting with no meaning for an HTTP back end"
                    }
                    "x-sendfile" | "x-sendfile-docroot" | "allow-x-send-file" => {
                        "X-Sendfile from HTTP back ends is not supported"
                    }
                    _ => "not supported for HTTP back ends",
                };
                report.dropped(src, &format!("{KEY} \"{k}\""), format!("\"{ext}\": {why}"));
            }
        }
        if servers.is_empty() {
            continue;
        }
        let n = servers.len();
        report.translated(
            src,
            KEY,
            format!(
                "\"{ext}\": an [[upstream]] with {n} server{} and proxy upstream = its name {}",
                if n == 1 { "" } else { "s" },
                match ext.as_str() {
                    "" | "/" => "for every request of the block".to_owned(),
                    p if p.starts_with('/') => format!("in a rule matching path-prefix \"{p}\""),
                    x => format!("in a rule matching paths ending in \"{x}\""),
                }
            ),
        );
        let mut t = vec![
            ("key".to_owned(), V::s(ext.clone())),
            ("prefix".to_owned(), V::s(ext.clone())),
            ("servers".to_owned(), V::Arr(servers)),
        ];
        t.extend(settings);
        out.push(V::Tab(t));
    }
    out
}

/// `proxy.header` options into model keys (`map-path`, `host`), with the
/// others reported.
fn proxy_header(val: &Val, src: &Src, report: &mut Report) -> Vec<(&'static str, V)> {
    let mut out = Vec::new();
    let Val::Arr(items) = val else {
        report.dropped(src, "proxy.header", format!("{}: not a list", val.show()));
        return out;
    };
    for (k, v) in items {
        let Some(k) = k else { continue };
        let what = format!("proxy.header \"{k}\"");
        match k.to_ascii_lowercase().as_str() {
            "map-urlpath" => {
                let pairs = v.as_pairs();
                if pairs.is_empty() {
                    continue;
                }
                report.approximated(src, &what, "proxy map-path (the request path's longest matching prefix is replaced); lighttpd also maps the paths back in the response's Location, Content-Location and Set-Cookie, which Tessera does not");
                out.push(("map-path", V::Tab(pairs.into_iter().map(|(a, b)| (a, V::s(b))).collect())));
            }
            "map-host-request" => {
                let pairs = v.as_pairs();
                match pairs.as_slice() {
                    [(any, to)] if any == "-" && to == "-" => {
                        report.translated(src, &what, "proxy host = \"upstream\" (the server's host:port)");
                        out.push(("host", V::s("upstream")));
                    }
                    [(any, to)] if any == "-" && !to.is_empty() => {
                        report.translated(src, &what, format!("proxy host = \"{to}\""));
                        out.push(("host", V::s(to.clone())));
                    }
                    _ => report.dropped(src, &what, "only ( \"-\" => \"HOST\" ) is translated: Tessera sets one Host for every request, it cannot map each client host to another"),
                }
            }
            "map-host-response" => report.dropped(src, &what, "Tessera does not rewrite host names in the upstream's response headers (Location, Set-Cookie)"),
            "map-urlpath-response" => report.dropped(src, &what, "Tessera does not rewrite paths in the upstream's response headers"),
            "https-remap" => report.dropped(src, &what, "Tessera does not rewrite https:// back to http:// in the upstream's response headers"),
            "upgrade" => {
                if v.as_bool() == Some(true) {
                    report.translated(src, &what, "Tessera's proxy always passes Upgrade (WebSocket) through");
                } else {
                    report.approximated(src, &what, "disabled here, but Tessera's proxy always passes Upgrade (WebSocket) through");
                }
            }
            "connect" => {
                if v.as_bool() == Some(true) {
                    report.dropped(src, &what, "CONNECT tunnels are not supported by Tessera's proxy");
                }
            }
            "force-http10" => report.not_needed(src, &what, "Tessera speaks HTTP/1.1 to upstreams"),
            _ => report.dropped(src, &what, "unknown proxy.header option"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::lighttpd::test_util::*;

    #[test]
    fn proxy_server_prefixes_extensions_and_back_end_forms() {
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}proxy.server = ( \"/api/\" => ( ( \"host\" => \"127.0.0.1\", \"port\" => 8080 ), ( \"host\" => \"10.0.0.2\", \"port\" => 8080 ) ),\n\
             \".jsp\" => ( \"tomcat\" => ( \"host\" => \"192.168.0.101\", \"port\" => 80 ) ),\n\
             \"/sock/\" => ( ( \"socket\" => \"/run/app.sock\" ) ),\n\
             \"/v6/\" => ( \"host\" => \"::1\", \"port\" => 9000, \"connect-timeout\" => 3, \"read-timeout\" => 30, \"write-timeout\" => 20, \"disable-time\" => 5 ),\n\
             \"/same/\" => ( ( \"host\" => \"192.168.0.101\" ) ) )\n"
        ));
        no_drops(&r, &["proxy"]);
        let api = upstream(&t, "default-api");
        assert_eq!(api["servers"].as_array().unwrap().len(), 2);
        // lighttpd's default balance is "fair".
        assert_eq!(api["balance"].as_str(), Some("least-conn"));
        assert_eq!(
            upstream(&t, "default-jsp")["servers"][0].as_str(),
            Some("192.168.0.101:80")
        );
        assert_eq!(
            upstream(&t, "default-sock")["servers"][0].as_str(),
            Some("unix:/run/app.sock")
        );
        let v6 = upstream(&t, "default-v6");
        assert_eq!(v6["servers"][0].as_str(), Some("[::1]:9000"));
        assert_eq!(v6["connect-timeout"].as_integer(), Some(3));
        assert_eq!(v6["read-timeout"].as_integer(), Some(30));
        assert_eq!(v6["send-timeout"].as_integer(), Some(20));
        assert_eq!(v6["fail-timeout"].as_integer(), Some(5));
        assert!(v6.get("balance").is_none(), "one server: no balance");
        // The same back end (port 80 by default) is one upstream.
        assert_eq!(upstreams(&t).len(), 4);
        let v = vhost(&t, 0);
        let rs = rules(v);
        let m =
            |i: usize| toml::Value::Table(rs[i]["match"].as_table().unwrap().clone()).to_string();
        assert!(m(0).contains("path-prefix = \"/api/\""), "{}", m(0));
        assert!(m(1).contains(r#"path-regex = '\.jsp$'"#), "{}", m(1));
        assert_eq!(rs[1]["proxy"]["upstream"].as_str(), Some("default-jsp"));
        // Rules of proxy.server's own prefixes are named after them.
        assert_eq!(
            rs[0]["name"].as_str(),
            Some("1: { path-prefix = \"/api/\" }")
        );
        assert_eq!(rs[4]["proxy"]["upstream"].as_str(), Some("default-jsp"));
        assert_eq!(rs.len(), 5);
    }

    #[test]
    fn proxy_balance_header_and_forwarded() {
        let two = "proxy.server = ( \"\" => ( ( \"host\" => \"10.0.0.10\" ), ( \"host\" => \"10.0.0.11\" ) ) )\n";
        for (lighttpd, tessera, warns) in [
            ("round-robin", "round-robin", false),
            ("fair", "least-conn", false),
            ("sticky", "ip-hash", false),
            ("hash", "ip-hash", true),
        ] {
            let (t, r) = imp_toml(&format!(
                "{PROXY_HEAD}proxy.balance = \"{lighttpd}\"\n{two}"
            ));
            let u = upstream(&t, "default-root");
            assert_eq!(u["balance"].as_str(), Some(tessera), "{lighttpd}");
            assert_eq!(
                r.find("proxy.balance").any(|e| e.outcome.is_warning()),
                warns,
                "{lighttpd}"
            );
            // "" is the whole vhost: the vhost's own table, before static-file.
            let v = vhost(&t, 0);
            assert_eq!(v["proxy"]["upstream"].as_str(), Some("default-root"));
            assert_eq!(v["modules"][0].as_str(), Some("proxy"));
        }
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}{two}proxy.header = ( \"map-urlpath\" => ( \"/api/\" => \"/\", \"/a\" => \"/b\" ), \"map-host-request\" => ( \"-\" => \"app.internal\" ),\n\
             \"upgrade\" => \"enable\", \"https-remap\" => \"enable\", \"connect\" => \"enable\" )\n\
             proxy.forwarded = ( \"for\" => 1, \"proto\" => 1, \"host\" => 1 )\n"
        ));
        let p = &vhost(&t, 0)["proxy"];
        assert_eq!(p["map-path"]["/api/"].as_str(), Some("/"));
        assert_eq!(p["map-path"]["/a"].as_str(), Some("/b"));
        assert_eq!(p["host"].as_str(), Some("app.internal"));
        assert_eq!(p["forwarded"].as_str(), Some("both"));
        let dropped: Vec<&str> = r
            .entries
            .iter()
            .filter(|e| e.outcome == crate::Outcome::Dropped)
            .map(|e| e.what.as_str())
            .collect();
        assert_eq!(
            dropped,
            vec!["proxy.header \"https-remap\"", "proxy.header \"connect\""]
        );
        assert!(r
            .find("proxy.header \"upgrade\"")
            .all(|e| e.outcome == crate::Outcome::Translated));
        // "-" => "-": the server's own host:port; a per-host map is not translated.
        let (t, _) = imp_toml(&format!(
            "{PROXY_HEAD}{two}proxy.header = ( \"map-host-request\" => ( \"-\" => \"-\" ) )\n"
        ));
        assert_eq!(vhost(&t, 0)["proxy"]["host"].as_str(), Some("upstream"));
        let (t, r) = imp_toml(&format!("{PROXY_HEAD}{two}proxy.header = ( \"map-host-request\" => ( \"a.example\" => \"b.internal\" ) )\n"));
        assert!(vhost(&t, 0)["proxy"].get("host").is_none());
        assert!(r
            .find("map-host-request")
            .any(|e| e.outcome == crate::Outcome::Dropped));
        // Only some Forwarded parameters: approximated.
        let (_, r) = imp_toml(&format!(
            "{PROXY_HEAD}{two}proxy.forwarded = ( \"for\" => 1, \"by\" => 1 )\n"
        ));
        assert!(r
            .find("proxy.forwarded")
            .any(|e| e.outcome == crate::Outcome::Approximated));
    }

    #[test]
    fn proxy_in_host_and_url_blocks() {
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}$HTTP[\"host\"] == \"www.example.com\" {{\n\
               proxy.balance = \"round-robin\"\n\
               proxy.server = ( \"\" => ( ( \"host\" => \"10.0.0.10\" ), ( \"host\" => \"10.0.0.11\" ) ) )\n\
             }}\n\
             $HTTP[\"url\"] =~ \"^/legacy/\" {{\n\
               proxy.server = ( \"/\" => ( ( \"host\" => \"127.0.0.1\", \"port\" => 9000 ) ) )\n\
             }}\n"
        ));
        no_drops(&r, &["proxy"]);
        assert_eq!(
            upstream(&t, "www.example.com-root")["balance"].as_str(),
            Some("round-robin")
        );
        // The default vhost: only the URL block proxies.
        let d = vhost(&t, 0);
        assert!(d.get("proxy").is_none());
        let rs = rules(d);
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0]["match"]["path-regex"].as_str(), Some("^/legacy/"));
        assert_eq!(rs[0]["proxy"]["upstream"].as_str(), Some("default-root"));
        // The host: everything goes to its pool, except /legacy/ (the later block).
        let h = vhost(&t, 1);
        assert_eq!(
            h["proxy"]["upstream"].as_str(),
            Some("www.example.com-root")
        );
        assert_eq!(
            rules(h)[0]["proxy"]["upstream"].as_str(),
            Some("default-root")
        );
        // mod_proxy not loaded: lighttpd ignores proxy.*.
        let (t, r) = imp_toml("server.document-root = \"/srv\"\nproxy.server = ( \"\" => ( ( \"host\" => \"10.0.0.10\" ) ) )\n");
        assert!(upstreams(&t).is_empty());
        assert!(r
            .find("mod_proxy is not in server.modules")
            .any(|e| e.outcome == crate::Outcome::Dropped));
    }
}

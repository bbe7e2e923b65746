//! Heads: mapped paths, hop-by-hop, forwarding and upstream fields, interim answers, framing.

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::engine::read_response;
use crate::util::Server;

use super::*;

#[test]
fn a_request_reaches_the_upstream_with_its_path_mapped_and_hop_by_hop_fields_stripped() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "");
    let r = s.req(
        "GET",
        "/api/echo/x?q=1",
        &[
            "Connection: X-Secret",
            "X-Secret: no",
            "Keep-Alive: 5",
            "TE: trailers",
            "X-Kept: yes",
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let j = json(&r);
    assert_eq!(j["path"], "/echo/x?q=1");
    assert_eq!(upstream_header(&j, "x-kept"), ["yes"]);
    for gone in ["x-secret", "keep-alive", "te"] {
        assert!(
            upstream_header(&j, gone).is_empty(),
            "{gone} reached the upstream"
        );
    }
    assert_eq!(upstream_header(&j, "host"), ["site.test"]);
    assert_eq!(upstream_header(&j, "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(upstream_header(&j, "x-forwarded-proto"), ["http"]);
    assert_eq!(upstream_header(&j, "x-forwarded-host"), ["site.test"]);
    // the upstream's own hop-by-hop fields stay behind too
    assert!(r.header("x-hop").is_none(), "{:?}", r.headers);
    assert!(r.header("keep-alive").is_none(), "{:?}", r.headers);
    // the rest of the vhost is still static
    assert_eq!(s.get("/local.txt").text(), "local");
}

#[test]
fn forwarding_fields_from_untrusted_clients_are_replaced_and_trusted_ones_give_the_client() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "");
    let spoof = ["X-Forwarded-For: 203.0.113.9", "X-Real-IP: 203.0.113.7"];
    let r = s.req("GET", "/api/echo", &spoof);
    assert_eq!(upstream_header(&json(&r), "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(upstream_header(&json(&r), "x-real-ip"), ["127.0.0.1"]);
    let s = proxy_server(&[app.addr()], "", "trusted-proxies = [\"127.0.0.0/8\"]");
    let r = s.req("GET", "/api/echo", &spoof);
    assert_eq!(
        upstream_header(&json(&r), "x-forwarded-for"),
        ["203.0.113.9, 127.0.0.1"]
    );
    // X-Real-IP is the client address the trusted chain gave
    assert_eq!(upstream_header(&json(&r), "x-real-ip"), ["203.0.113.9"]);
    // the access log names the client, not the proxy (flushed at exit)
    let dir = s.root().parent().unwrap().to_path_buf();
    s.stop_keep_dir();
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    assert!(log.starts_with("203.0.113.9 "), "{log}");
}

/// Response-phase modules and the access log treat a proxied response as
/// they treat a file.
#[test]
fn response_phase_modules_apply_to_proxied_responses() {
    let app = App::start("a");
    let s = Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"access-log\", \"headers\", \"error-pages\", \"compress\", \"proxy\", \"static-file\"]\n[vhost.access-log]\npath = \"access.log\"\n[vhost.headers]\nset = {{ \"X-Frame-Options\" = \"DENY\" }}\n[vhost.error-pages]\npages = {{ \"404\" = \"errors/404.html\" }}\n[vhost.compress]\nencodings = [\"gzip\"]\nmime-types = [\"application/json\"]\nmin-size = 10\n[vhost.proxy]\nupstream = \"app\"\n",
            app.addr()
        ),
        |d| {
            d.write("www/errors/404.html", "<p>our own 404</p>");
        },
    );
    let big = s.req("GET", "/big?n=5000", &["Accept-Encoding: gzip"]);
    assert_eq!(big.status, 200);
    assert_eq!(big.header("x-frame-options"), Some("DENY"));
    let r = s.req("GET", "/echo", &["Accept-Encoding: gzip"]);
    assert_eq!(
        r.header("content-encoding"),
        Some("gzip"),
        "{:?}",
        r.headers
    );
    let mut plain = String::new();
    flate2_gunzip(&r.body, &mut plain);
    assert!(plain.contains("\"path\": \"/echo\""), "{plain}");
    let missing = s.get("/no-such-path");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.text(), "<p>our own 404</p>", "{}", s.stderr());
    let dir = s.root().parent().unwrap().to_path_buf();
    s.stop_keep_dir();
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let first = log.lines().next().unwrap();
    assert!(
        first.contains("\"GET /big?n=5000 HTTP/1.1\" 200 5000"),
        "{log}"
    );
}

/// Decompresses gzip with the system's gzip (the test crate has no inflater).
fn flate2_gunzip(data: &[u8], out: &mut String) {
    let mut c = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(data).unwrap();
    let o = c.wait_with_output().unwrap();
    out.push_str(&String::from_utf8_lossy(&o.stdout));
}

#[test]
fn upstream_fields_in_every_allowed_form_pass_on_both_paths() {
    // the engine without response-phase modules gets the fields as lines
    // (no header map); with `headers` the map path: both give the same
    // fields, the upstream's Server replaced, one Date, nothing hop-by-hop
    let app = App::start("a");
    let lines = proxy_server(&[app.addr()], "", "");
    let map = Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"headers\", \"proxy\"]\n[vhost.headers]\nset = {{ \"X-Map\" = \"1\" }}\n[vhost.proxy]\nupstream = \"app\"\nmap-path = {{ \"/api/\" = \"/\" }}\n",
            app.addr()
        ),
        |d| {
            d.mkdir("www");
        },
    );
    for (s, name) in [(&lines, "lines"), (&map, "map")] {
        for lf in ["", "?lf=1"] {
            let mut c = TcpStream::connect(s.addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let req = format!("GET /api/odd-fields{lf} HTTP/1.1\r\nHost: site.test\r\n\r\n");
            c.write_all(req.as_bytes()).unwrap();
            let (line, r) = crate::engine::read_response_line(&mut c);
            let at = format!("{name}{lf}: {line} {:?}", r.headers);
            assert!(line.starts_with("HTTP/1.1 200"), "{at}");
            assert_eq!(r.text(), "ok", "{at}");
            assert_eq!(r.header("x-tight"), Some("tight"), "{at}");
            assert_eq!(r.header("x-padded"), Some("padded value"), "{at}");
            assert_eq!(r.header("x-empty"), Some(""), "{at}");
            assert_eq!(r.header("x-mixed"), Some("Case"), "{at}");
            let all = |n: &str| r.header_all(n);
            assert_eq!(all("set-cookie"), ["a=1", "b=2"], "{at}");
            assert_eq!(all("server"), ["tessera"], "{at}");
            assert_eq!(all("date"), ["Thu, 01 Jan 2026 00:00:00 GMT"], "{at}");
            assert_eq!(all("content-length"), ["2"], "{at}");
            for gone in ["x-named", "keep-alive", "connection"] {
                assert!(all(gone).is_empty(), "{gone} passed: {at}");
            }
            // the connection is still in step
            c.write_all(b"GET /api/name HTTP/1.1\r\nHost: site.test\r\n\r\n")
                .unwrap();
            assert_eq!(read_response(&mut c).text(), "a", "{at}");
        }
    }
}

#[test]
fn a_date_the_connection_field_names_is_replaced_and_an_http_1_0_answer_closes() {
    let app = App::start("a");
    // no response-phase module: the upstream's fields pass on as lines
    let s = proxy_server(&[app.addr()], "", "");
    // `Connection: Date` makes Date hop-by-hop: it is left out, and the
    // response still gets one (RFC 9110 §6.6.1)
    let r = s.get("/api/conn-date");
    assert_eq!(r.text(), "ok");
    assert_eq!(r.header("x-keep"), Some("1"), "{:?}", r.headers);
    let dates = r.header_all("date");
    assert_eq!(dates.len(), 1, "{:?}", r.headers);
    assert_ne!(dates[0], "Mon, 01 Jan 2001 00:00:00 GMT");
    // an HTTP/1.0 answer without keep-alive ends its connection (RFC 9112
    // §9.3), though the upstream left it open: the next request goes on a
    // new one
    assert_eq!(s.get("/api/http10").text(), "ok");
    assert_eq!(s.get("/api/served-here").text(), "0");
}

#[test]
fn an_upstream_response_with_invalid_framing_is_502() {
    // RFC 9112 §6.3 items 4 and 5: a Content-Length list or sign, or a
    // transfer coding other than chunked alone, is never passed on
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "");
    for f in ["list", "sign", "gzip"] {
        let r = s.get(&format!("/api/bad-framing?f={f}"));
        assert_eq!(r.status, 502, "{f}: {}", r.text());
    }
    assert!(
        s.stderr().contains("invalid Content-Length"),
        "{}",
        s.stderr()
    );
    assert_eq!(s.get("/api/name").text(), "a");
}

#[test]
fn interim_and_unasked_switching_answers_never_reach_the_client_as_final() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "http1-engine = \"tessera\"");
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /api/early HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    let (line, r) = crate::engine::read_response_line(&mut c);
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    assert_eq!(r.text(), "final");
    // the connection is still in step
    c.write_all(b"GET /api/name HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut c).text(), "a");
    // a 101 nobody asked for is a bad gateway
    assert_eq!(s.get("/api/switch").status, 502);
    // Upgrade without the upgrade connection option is not an upgrade
    let r = s.req(
        "GET",
        "/api/ws",
        &[
            "Upgrade: websocket",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        ],
    );
    assert_ne!(r.status, 101);
}

#[test]
fn the_upstream_gets_the_normalized_path_the_rules_matched() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "");
    for raw in ["/api/x/%2e%2e/echo", "/api//echo", "/api/./echo"] {
        let r = s.get(raw);
        assert_eq!(r.status, 200, "{raw}");
        assert_eq!(json(&r)["path"], "/echo", "{raw}");
    }
}

#[test]
fn only_the_trusted_chain_is_passed_on() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "trusted-proxies = [\"127.0.0.0/8\"]");
    // trust comes from X-Forwarded-For; a Forwarded field is the client's word
    let r = s.req(
        "GET",
        "/api/echo",
        &["X-Forwarded-For: 5.5.5.5", "Forwarded: for=1.2.3.4"],
    );
    let j = json(&r);
    assert_eq!(
        upstream_header(&j, "x-forwarded-for"),
        ["5.5.5.5, 127.0.0.1"]
    );
    assert!(upstream_header(&j, "forwarded").is_empty());
}

/// Without `map-path`, the target reaches the upstream as the client sent
/// it where, decoded once, it is the path the rules matched (nginx's
/// `proxy_pass` without a URI): an escaped `/` keeps its meaning; dot
/// segments are removed, escaped unreserved characters decoded (RFC 3986
/// §6.2.2) and `;` escaped. Where the form sent hides dot segments, the
/// matched path goes. With `map-path`, the matched (decoded) path is
/// mapped and encoded again, as nginx's `proxy_pass` with a URI part.
#[test]
fn the_target_passes_on_as_sent() {
    let app = App::start("a");
    let plain = Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"proxy\"]\n[vhost.proxy]\nupstream = \"app\"\n",
            app.addr()
        ),
        |d| {
            d.mkdir("www");
        },
    );
    for (sent, got) in [
        ("/echo/a%2fb;c=d/%41?q=%2F", "/echo/a%2fb%3Bc=d/A?q=%2F"),
        ("/echo/group%2Fproject", "/echo/group%2Fproject"),
        ("/echo/x/../y//z", "/echo/y/z"),
        // dots behind escaped slashes: the path the rules saw
        ("/echo/x%2F..%2Fadmin", "/echo/admin"),
    ] {
        let r = plain.get(sent);
        assert_eq!(r.status, 200, "{sent}: {}", r.text());
        assert_eq!(json(&r)["path"], got, "{sent}");
    }
    let mapped = proxy_server(&[app.addr()], "", "");
    for (sent, got) in [
        ("/api/echo/a%2fb;c=d/%41?q=%2F", "/echo/a/b%3Bc=d/A?q=%2F"),
        // the prefix `/api/` only after decoding: still mapped
        ("/api%2Fecho/p;q", "/echo/p%3Bq"),
    ] {
        let r = mapped.get(sent);
        assert_eq!(r.status, 200, "{sent}: {}", r.text());
        assert_eq!(json(&r)["path"], got, "{sent}");
    }
}

/// Extension methods (WebDAV's PROPFIND and MKCOL, RFC 4918) reach the
/// upstream, as with nginx and lighttpd; the static part of the vhost
/// still answers 501 for them.
#[test]
fn extension_methods_reach_the_upstream() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "");
    for m in ["PROPFIND", "MKCOL"] {
        let r = s.req(m, "/api/echo/dav/", &["Depth: 1"]);
        assert_eq!(r.status, 200, "{m}: {}", r.text());
        assert_eq!(json(&r)["method"], m);
        assert_eq!(s.req(m, "/local.txt", &[]).status, 501, "{m}");
        assert_eq!(s.req(m, "/missing.txt", &[]).status, 501, "{m}");
    }
}

/// After a back end's internal redirect (a local `Location`, RFC 3875
/// §6.2.2), the request continues as a GET with the query the redirect
/// named: the proxy sends that method and query, not the client's.
#[test]
fn an_internal_redirect_reaches_the_upstream_as_a_get_with_its_query() {
    let app = App::start("a");
    let s = Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"cgi\", \"static-file\"]\n[vhost.cgi]\nassign = {{ \".cgi\" = \"\" }}\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/p/\" }}\n[vhost.rule.proxy]\nupstream = \"app\"\nmap-path = {{ \"/p/\" = \"/echo/\" }}\n",
            app.addr()
        ),
        |d| {
            let p = d.write(
                "www/go.cgi",
                "#!/bin/sh\nprintf 'Location: /p/target?new=1\\r\\n\\r\\n'\n",
            );
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        },
    );
    for (method, headers) in [("GET", &[][..]), ("POST", &["Content-Length: 0"][..])] {
        let r = s.req(method, "/go.cgi?old=1", headers);
        assert_eq!(r.status, 200, "{method}: {}", r.text());
        let j = json(&r);
        assert_eq!(j["method"], "GET", "{method}");
        assert_eq!(j["path"], "/echo/target?new=1", "{method}");
    }
}

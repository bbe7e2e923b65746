//! The PROXY protocol from trusted and untrusted sources, and WebSocket passed through.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::util::{Response, Server};

use super::*;

/// A server whose only listener expects the PROXY protocol, trusting
/// `trusted`, with `/api/` proxied to `app` and an access log.
fn proxy_protocol_server(app: &App, trusted: &str) -> Server {
    proxy_server(
        &[app.addr()],
        "",
        &format!(
            "http1-engine = \"tessera\"\nlisten-proxy-protocol = [\"127.0.0.1:0\"]\ntrusted-proxies = [\"{trusted}\"]"
        ),
    )
}

fn send_raw(s: &Server, bytes: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    out
}

#[test]
fn the_proxy_protocol_gives_the_client_address_from_a_trusted_source() {
    let app = App::start("a");
    let s = proxy_protocol_server(&app, "127.0.0.0/8");
    // version 1
    let out = send_raw(
        &s,
        b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\nGET /api/echo HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    );
    let r = Response::parse(&out, false);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        upstream_header(&json(&r), "x-forwarded-for"),
        ["203.0.113.7"]
    );
    // version 2, TCP over IPv4: 198.51.100.4:8080 -> 10.0.0.1:80
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    v2.extend_from_slice(&[
        0x21, 0x11, 0, 12, 198, 51, 100, 4, 10, 0, 0, 1, 0x1f, 0x90, 0, 80,
    ]);
    v2.extend_from_slice(
        b"GET /local.txt HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    );
    let r = Response::parse(&send_raw(&s, &v2), false);
    assert_eq!(r.status, 200);
    // a connection without the header is closed unanswered
    assert!(send_raw(&s, b"GET /local.txt HTTP/1.1\r\nHost: site.test\r\n\r\n").is_empty());
    let dir = s.root().parent().unwrap().to_path_buf();
    s.stop_keep_dir();
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let hosts: Vec<&str> = log.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(hosts, ["203.0.113.7", "198.51.100.4"], "{log}");
}

#[test]
fn the_proxy_protocol_from_an_untrusted_source_is_refused() {
    let app = App::start("a");
    let s = proxy_protocol_server(&app, "10.0.0.0/8");
    let out = send_raw(
        &s,
        b"PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\nGET /local.txt HTTP/1.1\r\nHost: site.test\r\n\r\n",
    );
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    assert!(
        s.stderr().contains("not in trusted-proxies"),
        "{}",
        s.stderr()
    );
}

#[test]
fn a_websocket_echo_passes_through() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "http1-engine = \"tessera\"");
    let (mut c, line, r) = websocket(&s);
    assert!(line.starts_with("HTTP/1.1 101"), "{line}");
    assert_eq!(r.header("upgrade"), Some("websocket"));
    assert_eq!(r.header("connection"), Some("upgrade"));
    // RFC 6455 §1.3's example key and accept
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    for word in ["hello", "again"] {
        let mask = [1u8, 2, 3, 4];
        let mut frame = vec![0x81, 0x80 | word.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(word.bytes().enumerate().map(|(i, x)| x ^ mask[i % 4]));
        c.write_all(&frame).unwrap();
        let mut echo = vec![0u8; 2 + word.len()];
        c.read_exact(&mut echo).unwrap();
        assert_eq!(&echo[..2], &[0x81, word.len() as u8]);
        assert_eq!(&echo[2..], word.as_bytes());
    }
}

/// A server that declines an upgrade answers as usual (RFC 9110 §7.8):
/// that answer reaches the client whole, body and all (it was sent with an
/// empty body), and the connection serves the next request.
#[test]
fn an_upgrade_the_server_declines_keeps_its_body() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "http1-engine = \"tessera\"");
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for (path, status, len) in [
        ("/api/name", "200", 1),
        ("/api/nowhere", "404", 12),
        ("/api/big?n=200000", "200", 200_000),
        // an interim answer and the final one in one write
        ("/api/early", "200", 5),
    ] {
        c.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: site.test\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let (line, r) = crate::engine::read_response_line(&mut c);
        assert!(
            line.starts_with(&format!("HTTP/1.1 {status}")),
            "{path}: {line}"
        );
        assert_eq!(r.body.len(), len, "{path}");
    }
}

/// Sends a WebSocket handshake for `/api/ws` on a new connection to `s`:
/// the connection, the status line of the answer and its fields.
fn websocket(s: &Server) -> (TcpStream, String, Response) {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(
        b"GET /api/ws HTTP/1.1\r\nHost: site.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let (line, r) = crate::engine::read_response_line(&mut c);
    (c, line, r)
}

/// An upgrade goes out on a new connection, never on an idle kept-alive
/// one the server may have closed meanwhile (its failure could not be
/// retried), and a server at `max-connections` is skipped for the next
/// one, as for any request. Before, the tunnel took the idle connection (a
/// "rude" server, which drops a connection's second request, then made it
/// 502 and was marked down) and a busy first server was 503.
#[test]
fn an_upgrade_takes_a_new_connection_and_skips_a_busy_server() {
    let rude = App::start("rude-a");
    let b = App::start("b");
    let s = proxy_server(
        &[rude.addr(), b.addr()],
        "balance = \"first\"\nmax-connections = 1\nconnect-timeout = 1",
        "http1-engine = \"tessera\"",
    );
    // leaves one idle connection to the first server
    assert_eq!(s.get("/api/name").text(), "rude-a");
    let (_held, line, _) = websocket(&s);
    assert!(line.starts_with("HTTP/1.1 101"), "{line}\n{}", s.stderr());
    // the first server's only connection is the tunnel: the next one
    // goes to the second server
    let (_second, line, _) = websocket(&s);
    assert!(line.starts_with("HTTP/1.1 101"), "{line}\n{}", s.stderr());
    assert!(!s.stderr().contains("marked down"), "{}", s.stderr());
}

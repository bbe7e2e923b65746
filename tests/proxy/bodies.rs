//! Bodies: streaming, 100-continue, size limits, smuggling, flat memory, HTTP/2 bodies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::engine::read_response;
use crate::util::{Response, Server};

use super::*;

/// Sends `head` then `body` on one connection and reads the response.
fn exchange(s: &Server, head: &str, body: &[u8]) -> (TcpStream, Response) {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(head.as_bytes()).unwrap();
    c.write_all(body).unwrap();
    let r = read_response(&mut c);
    (c, r)
}

#[test]
fn request_bodies_stream_up_with_content_length_and_chunked_framing() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "max-body-size = 8388608");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let want = sha256_hex(&data);
    // Content-Length
    let (mut c, r) = exchange(
        &s,
        &format!(
            "POST /api/echo HTTP/1.1\r\nHost: site.test\r\nContent-Length: {}\r\n\r\n",
            data.len()
        ),
        &data,
    );
    let j = json(&r);
    assert_eq!(j["length"], data.len());
    assert_eq!(j["sha256"], want);
    // chunked, on the same kept-alive connection
    let mut chunked = Vec::new();
    for part in data.chunks(100_000) {
        chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    c.write_all(
        b"POST /api/echo HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    c.write_all(&chunked).unwrap();
    let r = read_response(&mut c);
    let j = json(&r);
    assert_eq!(j["length"], data.len(), "{}", r.text());
    assert_eq!(j["sha256"], want);
}

#[test]
fn expect_100_continue_is_answered_when_the_proxy_wants_the_body() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "");
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(
        b"POST /api/echo HTTP/1.1\r\nHost: site.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    let mut interim = [0u8; 25];
    c.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(b"hello").unwrap();
    let r = read_response(&mut c);
    assert_eq!(json(&r)["length"], 5);
    // and the connection lives on
    c.write_all(b"GET /api/name HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut c).text(), "a");
}

#[test]
fn max_body_size_cuts_a_chunked_body_off_as_it_streams() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "max-body-size = 100000");
    let mut body = Vec::new();
    for _ in 0..20 {
        body.extend_from_slice(b"2710\r\n");
        body.extend_from_slice(&[b'z'; 10_000]);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let r = s.raw(
        &[
            b"POST /api/echo HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                .as_slice(),
            &body,
        ]
        .concat(),
    );
    let r = Response::parse(&r, false);
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
}

#[test]
fn smuggling_framings_never_reach_the_upstream() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "");
    let attack = b"POST /api/echo HTTP/1.1\r\nHost: site.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/echo HTTP/1.1\r\nHost: site.test\r\n\r\n";
    let r = Response::parse(&s.raw(attack), false);
    assert_eq!(r.status, 400);
    let dup = b"POST /api/echo HTTP/1.1\r\nHost: site.test\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\nabcd";
    assert_eq!(Response::parse(&s.raw(dup), false).status, 400);
    // the upstream served nothing before this request
    assert_eq!(s.get("/api/count").text(), "0");
}

/// The server's resident memory, KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

#[test]
fn a_100_mib_download_and_upload_stream_through_with_flat_memory() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "max-body-size = 209715200");
    let before = rss_kib(s.child.id());
    let n = 100u64 << 20;
    // download
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c.write_all(format!("GET /api/big?n={n} HTTP/1.1\r\nHost: site.test\r\n\r\n").as_bytes())
        .unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    let mut len = 0u64;
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    assert_eq!(len, n);
    let mut got = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    let mut peak = before;
    while got < n {
        let k = r.read(&mut buf).unwrap();
        assert!(k > 0, "closed after {got} bytes");
        got += k as u64;
        if got % (8 << 20) < (1 << 16) {
            peak = peak.max(rss_kib(s.child.id()));
        }
    }
    // upload on the same connection
    c.write_all(
        format!("POST /api/echo HTTP/1.1\r\nHost: site.test\r\nContent-Length: {n}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let chunk = vec![b'u'; 1 << 20];
    for i in 0..100 {
        c.write_all(&chunk).unwrap();
        if i % 8 == 0 {
            peak = peak.max(rss_kib(s.child.id()));
        }
    }
    let mut c2 = c.try_clone().unwrap();
    let resp = read_response(&mut c2);
    assert_eq!(json(&resp)["length"], n);
    assert!(
        peak < before + 48 * 1024,
        "RSS grew from {before} KiB to {peak} KiB while 100 MiB streamed"
    );
}

#[test]
fn a_chunked_body_over_the_limit_gets_413_without_waiting_for_the_rest() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "max-body-size = 1000");
    let mut c = TcpStream::connect(s.addr).unwrap();
    // less than the 5 s client-header-timeout the drain would wait
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c.write_all(
        b"POST /api/echo HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    c.write_all(format!("7d0\r\n{}\r\n", "z".repeat(2000)).as_bytes())
        .unwrap();
    // the body is never finished
    let (line, _) = crate::engine::read_response_line(&mut c);
    assert!(line.starts_with("HTTP/1.1 413"), "{line}");
}

#[test]
fn an_http_1_0_client_never_gets_100_continue() {
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "", "");
    let out = s.raw(b"POST /api/echo HTTP/1.0\r\nHost: site.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello");
    let text = String::from_utf8_lossy(&out);
    assert!(!text.contains("100 Continue"), "{text}");
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
}

/// One HTTP/2 request with `body` sent as DATA frames of 16 KiB and no
/// Content-Length (`None`: the stream ends with the headers); the status
/// and the response body.
async fn h2_exchange(
    send: &mut h2::client::SendRequest<bytes::Bytes>,
    path: &str,
    body: Option<&[u8]>,
) -> (u16, Vec<u8>) {
    let req = http::Request::post(format!("https://h2.test{path}"))
        .body(())
        .unwrap();
    let (resp, mut stream) = send.send_request(req, body.is_none()).unwrap();
    if let Some(body) = body {
        let parts: Vec<&[u8]> = body.chunks(16_384).collect();
        for (i, part) in parts.iter().enumerate() {
            stream
                .send_data(bytes::Bytes::copy_from_slice(part), i + 1 == parts.len())
                .unwrap();
        }
    }
    let resp = resp.await.unwrap();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut got = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        got.extend_from_slice(&chunk);
    }
    (status, got)
}

/// HTTP/2 has no chunked coding: a body may come as DATA frames with no
/// Content-Length (RFC 9113 §8.1). The upstream gets it re-framed chunked, a
/// CGI script gets it collected with its CONTENT_LENGTH, and a request whose
/// stream ends with its headers reaches both with no body.
#[test]
fn an_http2_body_without_content_length_reaches_the_upstream_and_a_cgi_script() {
    let app = App::start("a");
    let d = crate::util::TempDir::new("h2body");
    d.write(
        "www/echo.py",
        "import os, sys, hashlib\nn = int(os.environ.get('CONTENT_LENGTH') or -1)\ndata = sys.stdin.buffer.read(n) if n >= 0 else b''\nsys.stdout.write('Content-Type: text/plain\\n\\n%d %d %s' % (n, len(data), hashlib.sha256(data).hexdigest()))\n",
    );
    let (_s, addr, der) = crate::lifecycle::h2_server_with(
        &d,
        "max-body-size = 4194304",
        &format!("[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n", app.addr()),
        "modules = [\"cgi\", \"static-file\"]\n[vhost.cgi]\nassign = { \".py\" = \"/usr/bin/python3\" }\n\
         [[vhost.rule]]\nmatch = { path-prefix = \"/api/\" }\n[vhost.rule.proxy]\nupstream = \"app\"\nmap-path = { \"/api/\" = \"/\" }\n",
    );
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let sha = sha256_hex(&data);
    crate::lifecycle::block_on(async {
        let (mut send, conn) = crate::lifecycle::h2_connect(addr, &der, 1 << 20).await;
        tokio::spawn(conn);
        let (status, got) = h2_exchange(&mut send, "/api/echo", Some(&data)).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&got));
        let j: serde_json::Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(j["length"], data.len());
        assert_eq!(j["sha256"], sha);
        let (status, got) = h2_exchange(&mut send, "/api/echo", None).await;
        assert_eq!(status, 200);
        let j: serde_json::Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(j["length"], 0);
        let te = j["headers"].as_array().unwrap().iter().any(|p| {
            p[0].as_str()
                .unwrap()
                .eq_ignore_ascii_case("transfer-encoding")
        });
        assert!(!te, "a request without a body went up chunked: {j}");
        let (status, got) = h2_exchange(&mut send, "/echo.py", Some(&data)).await;
        assert_eq!(status, 200);
        let want = format!("{} {} {sha}", data.len(), data.len());
        assert_eq!(String::from_utf8_lossy(&got), want);
        let (_, got) = h2_exchange(&mut send, "/echo.py", None).await;
        assert!(
            String::from_utf8_lossy(&got).starts_with("-1 0 "),
            "{}",
            String::from_utf8_lossy(&got)
        );
    });
}

/// HTTP/2 lets a client end a stream short of its Content-Length, send a
/// second Content-Length, or stall without a byte: each is the client's
/// fault (400, in `client-header-timeout` at most for a stall), never the
/// upstream's (it is not marked down, and the next request reaches it). An
/// empty DATA frame that ends a GET sends no body up.
#[test]
fn a_short_doubled_or_stalled_http2_body_is_400_and_never_the_upstream_s_fault() {
    let app = App::start("a");
    let d = crate::util::TempDir::new("h2short");
    let (_s, addr, der) = crate::lifecycle::h2_server_with(
        &d,
        "client-header-timeout = 2",
        &format!(
            "[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\nread-timeout = 30\nmax-fails = 1\n",
            app.addr()
        ),
        "modules = [\"static-file\"]\n\
         [[vhost.rule]]\nmatch = { path-prefix = \"/api/\" }\n[vhost.rule.proxy]\nupstream = \"app\"\nmap-path = { \"/api/\" = \"/\" }\n",
    );
    crate::lifecycle::block_on(async {
        let (mut send, conn) = crate::lifecycle::h2_connect(addr, &der, 1 << 20).await;
        tokio::spawn(conn);
        let post = |lengths: &[&str]| {
            let mut b = http::Request::post("https://h2.test/api/echo");
            for l in lengths {
                b = b.header("content-length", *l);
            }
            b.body(()).unwrap()
        };
        // ends with its headers, one byte short of what it announced
        let (resp, _) = send.send_request(post(&["1"]), true).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(resp.await.unwrap().status(), 400);
        assert!(started.elapsed() < Duration::from_secs(10));
        // two Content-Length fields
        let (resp, mut body) = send.send_request(post(&["3", "4"]), false).unwrap();
        body.send_data(bytes::Bytes::from_static(b"abc"), true)
            .unwrap();
        assert_eq!(resp.await.unwrap().status(), 400);
        // headers without END_STREAM, then nothing: cut off, not held
        let (resp, _stalled) = send.send_request(post(&[]), false).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(20), resp).await;
        assert_eq!(
            r.expect("a stalled body held for 20 s").unwrap().status(),
            400
        );
        // the upstream was never blamed: it answers the next request
        let (status, got) = h2_exchange(&mut send, "/api/echo", Some(b"ok")).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&got));
        // a GET ended by an empty DATA frame has no body upstream
        let get = http::Request::get("https://h2.test/api/echo")
            .body(())
            .unwrap();
        let (resp, mut body) = send.send_request(get, false).unwrap();
        body.send_data(bytes::Bytes::new(), true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut b = resp.into_body();
        let mut got = Vec::new();
        while let Some(c) = b.data().await {
            got.extend_from_slice(&c.unwrap());
        }
        let j: serde_json::Value = serde_json::from_slice(&got).unwrap();
        let te = j["headers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p[0].as_str().unwrap() == "transfer-encoding");
        assert!(!te, "an empty DATA frame went up as a chunked body: {j}");
    });
}

//! Timeouts: slow headers, idle keep-alive, trickled bodies, clients that stop reading.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::util::{Response, Server};

use super::*;

#[test]
fn slow_header_client_is_cut_off_while_others_are_served() {
    let s = Server::start(
        &site(
            "client-header-timeout = 1",
            "modules = [\"static-file\"]\n[[vhost.rule]]\nmatch = { path-prefix = \"/server-status\" }\n[vhost.rule.status]\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    let mut slow = TcpStream::connect(s.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    slow.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: site")
        .unwrap();
    let started = std::time::Instant::now();
    // Others are served meanwhile.
    for _ in 0..50 {
        assert_eq!(s.get("/ten.txt").status, 200);
    }
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    assert!(buf.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(10),
        "cut off only after {waited:?}"
    );
    let status = s.get("/server-status").text();
    assert!(status.contains("connections-timed-out: 1\n"), "{status}");
}

#[test]
fn an_idle_keep_alive_connection_closes_at_keep_alive() {
    // The header timer armed while a head was read must not extend the idle
    // time (actix restarts its keep-alive timer whenever the task wakes).
    let s = Server::start(
        &site(
            "keep-alive = 4\nclient-header-timeout = 2",
            "modules = [\"static-file\"]\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    let mut conn = TcpStream::connect(s.addr).unwrap();
    conn.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    assert_eq!(read_one_response(&mut conn).status, 200);
    let started = std::time::Instant::now();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = conn.read(&mut buf).unwrap_or(0);
    let idle = started.elapsed();
    assert_eq!(n, 0, "the server sent something on an idle connection");
    assert!(
        idle > Duration::from_millis(3000) && idle < Duration::from_millis(5200),
        "an idle connection closed after {idle:?}; keep-alive is 4 s"
    );
}

/// Keeps `conn` busy with one byte of `trickle` every 100 ms (the read
/// timeout paces it) until the server closes it; returns how long that took,
/// or `None` if it was still open after 20 s. Response bytes are read and
/// ignored.
fn trickle_until_closed(conn: &mut TcpStream, trickle: &[u8]) -> Option<Duration> {
    conn.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(20) {
        match conn.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return Some(started.elapsed()),
        }
        if conn.write_all(&trickle[i % trickle.len()..][..1]).is_err() {
            return Some(started.elapsed());
        }
        i += 1;
    }
    None
}

/// Reads one response with a Content-Length body from a keep-alive connection.
fn read_one_response(conn: &mut TcpStream) -> Response {
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        r.read_until(b'\n', &mut line).unwrap();
        head.extend_from_slice(&line);
        if line == b"\r\n" || line.is_empty() {
            break;
        }
    }
    let resp = Response::parse(&head, true);
    let len: usize = resp.header("content-length").unwrap().parse().unwrap();
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    assert!(
        r.buffer().is_empty(),
        "nothing beyond the response was sent"
    );
    resp
}

#[test]
fn slow_header_on_a_later_keep_alive_request_is_cut_off() {
    let s = Server::start(
        &site("client-header-timeout = 1", "modules = [\"static-file\"]\n"),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    let mut conn = TcpStream::connect(s.addr).unwrap();
    conn.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    assert_eq!(read_one_response(&mut conn).status, 200);
    // The second request's head comes one byte per 100 ms and never ends.
    let other = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            trickle_until_closed(&mut conn, b"GET /ten.txt HTTP/1.1\r\nX-Slow: aaaaaaaaaa")
        });
        for _ in 0..20 {
            assert_eq!(s.get("/ten.txt").status, 200);
        }
        h.join().unwrap()
    });
    let took = other.expect("a trickled second request head held the connection for 20 s");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "closed after {took:?}, client-header-timeout is 1 s"
    );
}

#[test]
fn trickled_unread_request_body_is_cut_off() {
    let s = Server::start(
        &site("client-header-timeout = 1", "modules = [\"static-file\"]\n"),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    let mut conn = TcpStream::connect(s.addr).unwrap();
    conn.write_all(
        b"POST /ten.txt HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let took = trickle_until_closed(&mut conn, b"1\r\nX\r\n")
        .expect("a trickled chunked body held the connection for 20 s");
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
}

#[test]
fn client_that_stops_reading_is_cut_off_at_send_timeout() {
    let size = 256u64 << 20;
    let s = Server::start(
        &site(
            "send-timeout = 1",
            "modules = [\"static-file\"]\n[[vhost.rule]]\nmatch = { path-prefix = \"/server-status\" }\n[vhost.rule.status]\n",
        ),
        |d| {
            let f = std::fs::File::create(d.path().join("www/big.bin")).unwrap();
            f.set_len(size).unwrap();
        },
    );
    let mut conn = TcpStream::connect(s.addr).unwrap();
    conn.write_all(b"GET /big.bin HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    // The client stops reading: the behaviour under test is this pause.
    std::thread::sleep(Duration::from_secs(4));
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n as u64,
        }
    }
    assert!(
        got < size,
        "the whole {size}-byte response arrived: nothing cut the stalled client off"
    );
    let status = s.get("/server-status").text();
    assert!(status.contains("connections-timed-out: 1\n"), "{status}");
}

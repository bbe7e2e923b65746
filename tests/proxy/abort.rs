//! A client that closes its connection while a back end has not answered:
//! Tessera's engine drops the request (its back-end connection closes at
//! once, its slot is free) and logs it with nginx's 499, as nginx does with
//! `proxy_ignore_client_abort off`. Before, the back end's connection was
//! held until it answered or `read-timeout` passed, and the access log
//! gave the 504 of a timeout no client saw.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::proxy_server;

/// actix-http (TLS, HTTP/2, or the "actix" engine) does not watch the
/// client while the app runs: there the request waits for its answer.
fn on_actix() -> bool {
    std::env::var("TESSERA_SERVER__HTTP1_ENGINE").as_deref() == Ok("actix")
}

/// Accepts the front's connection on `mute` and reads the request head.
fn upstream_side(mute: &TcpListener) -> TcpStream {
    // at most 20 s: a front that never connects fails the test
    mute.set_nonblocking(true).unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    let mut u = loop {
        match mute.accept() {
            Ok((u, _)) => break u,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < until => {
                std::thread::yield_now();
            }
            Err(e) => panic!("no connection from the front: {e}"),
        }
    };
    u.set_nonblocking(false).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = u.read(&mut b).unwrap();
        assert!(n > 0, "the front closed before its request");
        head.extend_from_slice(&b[..n]);
    }
    u
}

/// What the upstream side reads next: `Ok(0)` is the front's close.
fn next_read(u: &mut TcpStream) -> std::io::Result<usize> {
    u.read(&mut [0u8; 64])
}

#[test]
fn a_client_that_closes_first_frees_the_upstream_and_is_logged_499() {
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = proxy_server(
        &[mute.local_addr().unwrap().to_string()],
        "read-timeout = 60",
        "",
    );
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(b"GET /api/slow HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    let mut u = upstream_side(&mute);
    let closed = Instant::now();
    drop(c);
    if on_actix() {
        // held until read-timeout: nothing to see within this test's time
        return;
    }
    // the front closes its upstream connection at once, not at read-timeout
    assert_eq!(next_read(&mut u).unwrap(), 0);
    assert!(closed.elapsed() < Duration::from_secs(10));
    // the server still serves, and logs the request as nginx does
    assert_eq!(s.get("/local.txt").text(), "local");
    let dir = s.root().parent().unwrap().to_path_buf();
    s.stop_keep_dir();
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(log.contains("\"GET /api/slow HTTP/1.1\" 499 - "), "{log}");
}

/// A pipelined request behind a slow one is not a close: the slow one is
/// answered, then the next.
#[test]
fn pipelined_bytes_behind_a_slow_answer_are_not_a_close() {
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = proxy_server(&[mute.local_addr().unwrap().to_string()], "", "");
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(
        b"GET /api/slow HTTP/1.1\r\nHost: site.test\r\n\r\n\
          GET /local.txt HTTP/1.1\r\nHost: site.test\r\n\r\n",
    )
    .unwrap();
    let mut u = upstream_side(&mute);
    u.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow")
        .unwrap();
    let first = crate::engine::read_response(&mut c);
    assert_eq!((first.status, first.text().as_str()), (200, "slow"));
    let second = crate::engine::read_response(&mut c);
    assert_eq!((second.status, second.text().as_str()), (200, "local"));
}

/// `scgi` (and `uwsgi`, the same code) holds one connection per request:
/// a client that goes away gives it back at once, so `max-connections`
/// is not spent on requests no one waits for.
#[test]
fn an_scgi_request_whose_client_left_gives_its_connection_back() {
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = crate::scgi::scgi_to(&mute);
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(b"GET /app/held HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    // SCGI's request is a netstring of variables, then the body: no
    // blank line to wait for, so wait for its first bytes
    let (mut u, _) = mute.accept().unwrap();
    u.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert!(next_read(&mut u).unwrap() > 0);
    let open = |prom: &str| {
        prom.lines().any(|l| {
            l.starts_with("tessera_upstream_connections_open{") && l.trim_end().ends_with(" 1")
        })
    };
    assert!(open(&s.get("/server-status?format=prometheus").text()));
    drop(c);
    if on_actix() {
        return;
    }
    // closed at once on the back end's side, and no longer counted open
    let mut rest = [0u8; 65536];
    while u.read(&mut rest).unwrap() > 0 {}
    let prom = s.get("/server-status?format=prometheus").text();
    assert!(!open(&prom), "{prom}");
}

/// A request still waiting for its back end when `shutdown-timeout` ends
/// the server is logged as 499 (on both engines): before, its line was lost.
#[test]
fn a_request_cut_off_by_the_shutdown_timeout_is_logged() {
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = proxy_server(
        &[mute.local_addr().unwrap().to_string()],
        "read-timeout = 60",
        "shutdown-timeout = 1",
    );
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(b"GET /api/cut HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    let _u = upstream_side(&mute);
    let dir = s.root().parent().unwrap().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(log.contains("\"GET /api/cut HTTP/1.1\" 499 - "), "{log}");
}

/// `ignore-client-abort = true` keeps the request running (nginx
/// `proxy_ignore_client_abort on`): the back end's late answer is taken
/// and logged as sent.
#[test]
fn with_ignore_client_abort_the_request_runs_to_its_answer() {
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = proxy_server(
        &[mute.local_addr().unwrap().to_string()],
        "read-timeout = 60",
        "ignore-client-abort = true",
    );
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(b"GET /api/late HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    let mut u = upstream_side(&mute);
    drop(c);
    // the front keeps its upstream connection: the answer is read
    u.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
        .unwrap();
    assert_eq!(s.get("/local.txt").text(), "local");
    let dir = s.root().parent().unwrap().to_path_buf();
    // a request still in flight is waited for by the graceful stop
    assert!(s.stop_keep_dir().success());
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(log.contains("\"GET /api/late HTTP/1.1\" 200 "), "{log}");
}

/// HTTP/2 streams (actix-http) still waiting for a back end when
/// `shutdown-timeout` ends the server are each logged 499, those of a
/// connection the client has already closed too: a stream's request can
/// outlive its connection, and the stop waits for its line.
#[test]
fn http2_streams_cut_off_by_the_shutdown_timeout_are_all_logged() {
    use crate::lifecycle::{h2_connect, h2_get, h2_server_with};
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = crate::util::TempDir::new("h2-cut");
    let (mut s, tls, der) = h2_server_with(
        &d,
        "shutdown-timeout = 1",
        &format!(
            "[[upstream]]\nname = \"up\"\nservers = [\"{}\"]\nread-timeout = 60\n",
            mute.local_addr().unwrap()
        ),
        "modules = [\"access-log\", \"proxy\"]\n[vhost.proxy]\nupstream = \"up\"\n\
         [vhost.access-log]\npath = \"a.log\"\n",
    );
    const CONNS: usize = 10;
    const STREAMS: usize = 10;
    // a thread of its own drives the client's connections while this one
    // accepts the front's upstream connections and stops the server
    let (close_last, last) = tokio::sync::oneshot::channel::<()>();
    let (closed_tx, closed) = std::sync::mpsc::channel::<()>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let client = std::thread::spawn(move || {
        crate::lifecycle::block_on(async move {
            let (mut held, mut senders, mut conns) = (Vec::new(), Vec::new(), Vec::new());
            for c in 0..CONNS {
                let (mut client, conn) = h2_connect(tls, &der, 65_535).await;
                conns.push(tokio::spawn(conn));
                for n in 0..STREAMS {
                    client = client.ready().await.unwrap();
                    let (answer, _) = client
                        .send_request(h2_get(&format!("/c{c}s{n}")), true)
                        .unwrap();
                    held.push(answer);
                }
                senders.push(client);
            }
            // the last connection goes away: its streams wait on in the server
            let _ = last.await;
            conns.pop().unwrap().abort();
            tokio::task::yield_now().await;
            closed_tx.send(()).unwrap();
            let _ = stopped.await;
        });
    });
    // every request reached the back end
    let upstream: Vec<TcpStream> = (0..CONNS * STREAMS).map(|_| upstream_side(&mute)).collect();
    close_last.send(()).unwrap();
    closed.recv().unwrap();
    assert!(s.terminate().success());
    let _ = stop.send(());
    client.join().unwrap();
    drop(upstream);
    let log = std::fs::read_to_string(d.path().join("a.log")).unwrap();
    assert_eq!(log.matches(" 499 - ").count(), CONNS * STREAMS, "{log}");
}

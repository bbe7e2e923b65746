//! Running it in production: reload (SIGHUP) under load, a broken reload, log
//! rotation (SIGUSR1), graceful shutdown, the pid file, limits and timeouts,
//! running out of descriptors, TLS with SNI and HTTP/2, the HTTPS redirect, and
//! the `status` module.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::{Response, Server, TempDir};

fn signal(s: &Server, sig: &str) {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(s.child.id().to_string())
        .status()
        .unwrap();
    assert!(st.success());
}

/// Spawns the prepared server command with stdout piped and returns it with
/// the address it printed (`tessera: listening on http://ADDR`).
fn spawn_listening(cmd: &mut Command) -> (std::process::Child, SocketAddr) {
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("//").next().unwrap().parse().unwrap();
    (child, addr)
}

fn site(extra_server: &str, vhost_extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 2\n{extra_server}\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\n{vhost_extra}\n"
    )
}

/// Status, header fields and body of one response.
type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// A keep-alive HTTP/1.1 client: one request at a time on one connection.
struct KeepAlive {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl KeepAlive {
    fn new(addr: SocketAddr) -> KeepAlive {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        KeepAlive {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    /// GET `path`; returns (status, headers, body) or an error text.
    fn get(&mut self, path: &str) -> Result<Answer, String> {
        let req = format!("GET {path} HTTP/1.1\r\nHost: site.test\r\n\r\n");
        self.w
            .write_all(req.as_bytes())
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        self.r.read_line(&mut line).map_err(|e| e.to_string())?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line {line:?}"))?;
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h).map_err(|e| e.to_string())?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').ok_or("bad header")?;
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if k == "content-length" {
                len = v.parse().map_err(|_| "bad length")?;
            }
            headers.push((k, v));
        }
        let mut body = vec![0; len];
        self.r.read_exact(&mut body).map_err(|e| e.to_string())?;
        Ok((status, headers, body))
    }
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

const GEN1: &str =
    "modules = [\"headers\", \"static-file\"]\n[vhost.headers]\nset = { \"X-Gen\" = \"1\" }\n";
const GEN2: &str =
    "modules = [\"headers\", \"static-file\"]\n[vhost.headers]\nset = { \"X-Gen\" = \"2\" }\n";

#[test]
fn reload_under_load_drops_nothing() {
    let s = Server::start(&site("", GEN1), |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let conf = s.dir.path().join("server.toml");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (total, failures, saw_new) = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (stop, addr) = (&stop, s.addr);
                sc.spawn(move || {
                    let mut c = KeepAlive::new(addr);
                    let (mut n, mut bad, mut new) = (0u32, Vec::new(), false);
                    // Bounded: at most 20,000 requests per client.
                    while n < 20_000
                        && !(stop.load(std::sync::atomic::Ordering::Relaxed) && new && n >= 1000)
                    {
                        match c.get("/ten.txt") {
                            Ok((200, h, b)) if b == b"0123456789" => {
                                new |= header(&h, "x-gen") == Some("2")
                            }
                            other => bad.push(format!("{other:?}")),
                        }
                        n += 1;
                    }
                    (n, bad, new)
                })
            })
            .collect();
        // Let every client get going, then reload.
        let mut probe = KeepAlive::new(s.addr);
        for _ in 0..200 {
            assert_eq!(probe.get("/ten.txt").unwrap().0, 200);
        }
        std::fs::write(&conf, site("", GEN2)).unwrap();
        signal(&s, "HUP");
        let mut seen = false;
        for _ in 0..5000 {
            if header(&probe.get("/ten.txt").unwrap().1, "x-gen") == Some("2") {
                seen = true;
                break;
            }
        }
        assert!(seen, "reload never took effect: {}", s.stderr());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut total = 0;
        let mut failures = Vec::new();
        let mut all_new = true;
        for w in workers {
            let (n, bad, new) = w.join().unwrap();
            total += n;
            failures.extend(bad);
            all_new &= new;
        }
        (total, failures, all_new)
    });
    assert!(
        failures.is_empty(),
        "{} failed of {total}: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(total >= 4000, "only {total} requests");
    assert!(
        saw_new,
        "a keep-alive connection opened before the reload never saw the new configuration"
    );
    assert!(
        s.stderr().contains("configuration reloaded"),
        "{}",
        s.stderr()
    );
}

#[test]
fn broken_reload_keeps_the_old_configuration() {
    let s = Server::start(&site("", GEN1), |d| {
        d.write("www/ten.txt", "0123456789");
    });
    std::fs::write(
        s.dir.path().join("server.toml"),
        site("", &GEN2.replace("headers\"", "headerz\"")),
    )
    .unwrap();
    signal(&s, "HUP");
    // The error is logged; wait for it (bounded) by reading stderr between requests.
    let mut logged = false;
    for _ in 0..2000 {
        let r = s.get("/ten.txt");
        assert_eq!((r.status, r.header("x-gen")), (200, Some("1")));
        if s.stderr().contains("reload failed") {
            logged = true;
            break;
        }
    }
    assert!(logged, "{}", s.stderr());
    assert!(
        s.stderr().contains("unknown module \"headerz\""),
        "{}",
        s.stderr()
    );
    assert_eq!(s.get("/ten.txt").header("x-gen"), Some("1"));
}

#[test]
fn sigusr1_rotation_loses_no_line() {
    let s = Server::start(
        &site("", "modules = [\"access-log\", \"static-file\"]\n[vhost.access-log]\npath = \"logs/access.log\"\nformat = \"%U\"\n"),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    let log = s.dir.path().join("logs/access.log");
    let rotated = s.dir.path().join("logs/access.log.1");
    for i in 0..100 {
        s.get(&format!("/ten.txt?before={i}"));
    }
    std::fs::rename(&log, &rotated).unwrap();
    signal(&s, "USR1");
    // Requests keep coming; once the writer reopened, the new file appears.
    let mut n = 0;
    while !log.exists() && n < 5000 {
        s.get(&format!("/ten.txt?during={n}"));
        n += 1;
    }
    assert!(log.exists(), "never reopened: {}", s.stderr());
    for i in 0..100 {
        s.get(&format!("/ten.txt?after={i}"));
    }
    let dir = s.dir.path().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let old = std::fs::read_to_string(dir.join("logs/access.log.1")).unwrap();
    let new = std::fs::read_to_string(dir.join("logs/access.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        old.lines().count() + new.lines().count(),
        200 + n,
        "lines lost or duplicated"
    );
    assert!(
        old.lines().all(|l| l == "/ten.txt"),
        "split line in {old:?}"
    );
    assert!(new.lines().all(|l| l == "/ten.txt"));
    assert!(old.lines().count() >= 100 && new.lines().count() >= 100);
}

#[test]
fn graceful_shutdown_finishes_a_download_and_removes_the_pid_file() {
    let d = TempDir::new("grace");
    let size = 64 << 20;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    d.write("www/big.bin", &data);
    let conf = d.write("server.toml", site("", "modules = [\"static-file\"]\n"));
    let pid = d.path().join("tessera.pid");
    let (mut child, addr) = spawn_listening(
        Command::new(crate::util::bin())
            .arg("-c")
            .arg(&conf)
            .arg("--pid-file")
            .arg(&pid)
            .stderr(std::process::Stdio::null()),
    );
    assert_eq!(
        std::fs::read_to_string(&pid).unwrap().trim(),
        child.id().to_string()
    );
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut first = vec![0u8; 4096];
    let n = c.read(&mut first).unwrap();
    assert!(n > 0);
    // Stop while the body is still being sent.
    assert!(Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap()
        .success());
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    let mut all = first[..n].to_vec();
    all.extend(rest);
    let resp = Response::parse(&all, false);
    assert_eq!(resp.status, 200);
    assert!(
        resp.body == data,
        "download cut short: {} of {size} bytes",
        resp.body.len()
    );
    assert!(child.wait().unwrap().success());
    assert!(!pid.exists(), "pid file left behind");
}

#[test]
fn idle_keep_alive_connections_close_at_once_on_shutdown() {
    // keep-alive and shutdown-timeout far longer than the test's limits: the
    // connections must close because shutdown wakes them, not by a timer
    let mut s = Server::start(
        &site(
            "keep-alive = 120\nshutdown-timeout = 60",
            "modules = [\"static-file\"]\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    let mut idle: Vec<KeepAlive> = (0..4).map(|_| KeepAlive::new(s.addr)).collect();
    for c in &mut idle {
        assert_eq!(c.get("/ten.txt").unwrap().0, 200);
    }
    signal(&s, "TERM");
    for c in &mut idle {
        c.r.get_ref()
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut rest = Vec::new();
        let r = c.r.read_to_end(&mut rest);
        assert!(
            matches!(r, Ok(0)) && rest.is_empty(),
            "an idle connection was not closed at shutdown: {r:?} {rest:?}"
        );
    }
    let status = s.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "{}", s.stderr());
}

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

#[test]
fn malformed_requests_get_400_without_flooding_the_error_log() {
    let s = Server::start(&site("", "modules = [\"static-file\"]\n"), |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let bad: [&[u8]; 3] = [
        b"GET /ten.txt HTTP/1.1\r\nHost: site.test\r\n folded\r\n\r\n",
        b"GET /ten.txt HTTP/1.1\r\nHost: site.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /\x01 HTTP/1.1\r\nHost: site.test\r\n\r\n",
    ];
    for req in bad {
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(req).unwrap();
        let mut out = Vec::new();
        // The server closes after the 400, once it has logged whatever it logs.
        let _ = c.read_to_end(&mut out);
        assert!(
            out.starts_with(b"HTTP/1.1 400 "),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }
    assert_eq!(s.get("/ten.txt").status, 200);
    let err = s.stderr();
    assert!(
        !err.contains("ERROR"),
        "a client wrote to the error log:\n{err}"
    );
}

#[test]
fn limits_414_431_413() {
    let s = Server::start(
        &site(
            "max-uri-length = 100\nmax-request-header-size = 1000\nmax-body-size = 10",
            "modules = [\"static-file\"]\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    assert_eq!(s.get(&format!("/ten.txt?{}", "a".repeat(100))).status, 414);
    assert_eq!(s.get(&format!("/ten.txt?{}", "a".repeat(80))).status, 200);
    let big = format!("X-Big: {}", "b".repeat(1000));
    assert_eq!(s.req("GET", "/ten.txt", &[&big]).status, 431);
    assert_eq!(
        s.req("POST", "/ten.txt", &["Content-Length: 11"]).status,
        413
    );
    assert_eq!(
        s.req("POST", "/ten.txt", &["Content-Length: 0"]).status,
        405
    );
    // A chunked body no module reads: actix-http's engine closes the
    // connection after the answer; Tessera's drains the body and keeps it.
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    c.write_all(b"POST /ten.txt HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n").unwrap();
    if std::env::var("TESSERA_SERVER__HTTP1_ENGINE").is_ok_and(|e| e == "actix") {
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        let text = String::from_utf8_lossy(&buf);
        assert!(text.starts_with("HTTP/1.1 405"), "{text}");
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
    } else {
        c.write_all(
            b"0\r\n\r\nGET /ten.txt HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut buf = Vec::new();
        let _ = c.read_to_end(&mut buf);
        let text = String::from_utf8_lossy(&buf);
        assert!(text.starts_with("HTTP/1.1 405"), "{text}");
        let second = text
            .find("HTTP/1.1 200")
            .expect("the connection served a second request");
        assert!(
            !text[..second]
                .to_ascii_lowercase()
                .contains("connection: close"),
            "{text}"
        );
        assert!(text.ends_with("0123456789"), "{text}");
    }
}

#[test]
fn running_out_of_descriptors_slows_accepting_and_recovers() {
    let d = TempDir::new("fds");
    d.write("www/ten.txt", "0123456789");
    let conf = d.write("server.toml", site("", "modules = [\"static-file\"]\n"));
    let err = d.path().join("err.txt");
    let (mut child, addr) = spawn_listening(
        Command::new("prlimit")
            .arg("--nofile=48:48")
            .arg(crate::util::bin())
            .arg("-c")
            .arg(&conf)
            .stderr(std::fs::File::create(&err).unwrap()),
    );
    // Hold more connections than the server has descriptors for (bounded).
    let mut held = Vec::new();
    for _ in 0..80 {
        if let Ok(c) = TcpStream::connect(addr) {
            held.push(c);
        }
    }
    // Make the server accept (and fail to accept) them: talk on a few.
    for c in held.iter_mut().take(5) {
        let _ = c.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: site.test\r\n\r\n");
    }
    let mut logged = false;
    for _ in 0..400 {
        if std::fs::read_to_string(&err)
            .unwrap_or_default()
            .contains("Too many open files")
        {
            logged = true;
            break;
        }
        let _ = TcpStream::connect(addr);
        std::thread::yield_now();
    }
    drop(held);
    // Recovers once descriptors are free again (bounded retries).
    let mut ok = false;
    for _ in 0..200 {
        if let Ok(mut c) = TcpStream::connect(addr) {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = c.write_all(
                b"GET /ten.txt HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
            );
            let mut buf = Vec::new();
            let _ = c.read_to_end(&mut buf);
            if buf.starts_with(b"HTTP/1.1 200") {
                ok = true;
                break;
            }
        }
    }
    let alive = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        alive,
        "server died: {}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    assert!(
        logged,
        "exhaustion not logged: {}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    assert!(ok, "did not recover");
}

/// Out of descriptors, a file that exists is 503 with Retry-After, never
/// 404 (the resilience benchmark saw 404s for index.html at the limit).
#[test]
fn out_of_descriptors_a_file_is_503_never_404() {
    let d = TempDir::new("fds404");
    d.write("www/ten.txt", "0123456789");
    let conf = d.write(
        "server.toml",
        site(
            "",
            "modules = [\"static-file\"]\n[vhost.static-file]\nopen-file-cache = 0\n",
        ),
    );
    let (mut child, addr) = spawn_listening(
        Command::new("prlimit")
            .arg("--nofile=40:40")
            .arg(crate::util::bin())
            .arg("-c")
            .arg(&conf)
            .stderr(std::process::Stdio::null()),
    );
    // more connections than descriptors, each with a request (bounded)
    let mut conns = Vec::new();
    for _ in 0..60 {
        if let Ok(mut c) = TcpStream::connect(addr) {
            c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            let _ = c.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: site.test\r\n\r\n");
            conns.push(c);
        }
    }
    let mut statuses = std::collections::BTreeMap::new();
    for c in conns.iter_mut() {
        let mut buf = [0u8; 12];
        if c.read_exact(&mut buf).is_ok() {
            let code = String::from_utf8_lossy(&buf[9..12]).into_owned();
            *statuses.entry(code).or_insert(0) += 1;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(!statuses.contains_key("404"), "{statuses:?}");
    assert!(
        statuses.contains_key("503"),
        "the limit was never reached: {statuses:?}"
    );
}

#[test]
fn status_module_text_prometheus_and_access() {
    let s = Server::start(
        &site(
            "",
            "modules = [\"access-log\", \"static-file\"]\n[vhost.access-log]\npath = \"a.log\"\n\
             [[vhost.rule]]\nmatch = { path-prefix = \"/server-status\" }\n[vhost.rule.status]\nallow = [\"127.0.0.1\"]\n\
             [[vhost.rule]]\nmatch = { path-prefix = \"/closed-status\" }\n[vhost.rule.status]\nallow = [\"10.0.0.0/8\"]\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    for _ in 0..7 {
        s.get("/ten.txt");
    }
    s.get("/missing");
    let r = s.get("/server-status");
    assert_eq!(r.status, 200);
    let t = r.text();
    assert!(t.contains("vhost site.test:"), "{t}");
    let line = t
        .lines()
        .find(|l| l.starts_with("vhost site.test:"))
        .unwrap();
    let field = |k: &str| -> u64 {
        line.split(' ')
            .find_map(|f| f.strip_prefix(&format!("{k}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(field("2xx") >= 7 && field("4xx") >= 1, "{line}");
    assert!(field("bytes") >= 70, "{line}");
    assert!(t.contains("connections-active: "), "{t}");
    assert!(t.contains("config-generation: 1"), "{t}");
    assert!(
        t.contains("access-log ") && t.contains("lines-dropped=0"),
        "{t}"
    );
    let p = s.get("/server-status?format=prometheus");
    assert_eq!(
        p.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(
        p.text()
            .contains("tessera_requests_total{vhost=\"site.test\",class=\"2xx\"}"),
        "{}",
        p.text()
    );
    assert!(p.text().contains("# TYPE tessera_uptime_seconds gauge"));
    assert_eq!(s.get("/closed-status").status, 403);
    let r = s.req("POST", "/server-status", &["Content-Length: 0"]);
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD")));
}

/// Writes a self-signed certificate for `names` (first is the CN) into `dir`.
fn cert(dir: &Path, stem: &str, names: &[&str]) -> (String, String) {
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, names[0]);
    let key = rcgen::KeyPair::generate().unwrap();
    let c = params.self_signed(&key).unwrap();
    let (cp, kp) = (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&cp, c.pem()).unwrap();
    std::fs::write(&kp, key.serialize_pem()).unwrap();
    (cp.display().to_string(), kp.display().to_string())
}

/// The subject CN of the certificate served for `sni`.
fn served_cn(addr: SocketAddr, sni: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} -servername {sni} </dev/null 2>/dev/null | openssl x509 -noout -subject"
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Kills the server when the test ends, also when an assertion fails.
pub(crate) struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn tls_server(d: &TempDir) -> (String, KillOnDrop, SocketAddr, SocketAddr) {
    let dir = d.path();
    let (ac, ak) = cert(dir, "a", &["a.test"]);
    let (bc, bk) = cert(dir, "b", &["b.test", "*.b.test"]);
    let (dc, dk) = cert(dir, "default", &["default.test"]);
    d.write("a/index.html", "A");
    d.write("b/index.html", "B");
    let conf = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nlisten-tls = [\"127.0.0.1:0\"]\n[server.tls]\ncertificate = \"{dc}\"\nkey = \"{dk}\"\n\n\
         [[vhost]]\nserver-names = [\"a.test\"]\ndefault = true\ndocument-root = \"a\"\nmodules = [\"static-file\"]\ntls-certificate = \"{ac}\"\ntls-key = \"{ak}\"\n\n\
         [[vhost]]\nserver-names = [\"b.test\", \"*.b.test\"]\ndocument-root = \"b\"\nmodules = [\"static-file\"]\ntls-certificate = \"{bc}\"\ntls-key = \"{bk}\"\nhttps-redirect = true\n"
    );
    let f = d.write("server.toml", &conf);
    let mut child = Command::new(crate::util::bin())
        .arg("-c")
        .arg(&f)
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(dir.join("err.txt")).unwrap())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let child = KillOnDrop(child);
    let (mut plain, mut tls) = (None, None);
    for _ in 0..2 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let l = line.trim();
        if let Some(a) = l.strip_prefix("tessera: listening on https://") {
            tls = Some(a.parse().unwrap());
        } else if let Some(a) = l.strip_prefix("tessera: listening on http://") {
            plain = Some(a.parse().unwrap());
        }
    }
    let err = std::fs::read_to_string(dir.join("err.txt")).unwrap_or_default();
    (
        conf,
        child,
        plain.unwrap_or_else(|| panic!("plain listener: {err}")),
        tls.unwrap_or_else(|| panic!("TLS listener: {err}")),
    )
}

fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "10"])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tls_sni_http2_redirect_and_renewed_certificate() {
    let d = TempDir::new("tls");
    let (_conf, child, plain, tls) = tls_server(&d);
    let port = tls.port();
    assert_eq!(served_cn(tls, "a.test"), "subject=CN = a.test");
    assert_eq!(served_cn(tls, "x.b.test"), "subject=CN = b.test");
    assert_eq!(served_cn(tls, "unknown.test"), "subject=CN = default.test");
    // HTTP/2 by ALPN, and the vhost chosen by :authority
    let v = curl(&[
        "--http2",
        "--resolve",
        &format!("b.test:{port}:127.0.0.1"),
        "-w",
        " %{http_version}",
        &format!("https://b.test:{port}/"),
    ]);
    assert_eq!(v, "B 2");
    let v = curl(&[
        "--http1.1",
        "--resolve",
        &format!("a.test:{port}:127.0.0.1"),
        "-w",
        " %{http_version}",
        &format!("https://a.test:{port}/"),
    ]);
    assert_eq!(v, "A 1.1");
    // Plain HTTP to b.test is redirected to https with host, path and query.
    let loc = curl(&[
        "-o",
        "/dev/null",
        "-H",
        "Host: b.test",
        "-w",
        "%{http_code} %{redirect_url}",
        &format!("http://{plain}/x/y?q=1"),
    ]);
    assert_eq!(loc, format!("301 https://b.test:{port}/x/y?q=1"));
    // a.test has no redirect
    assert_eq!(
        curl(&["-H", "Host: a.test", &format!("http://{plain}/")]),
        "A"
    );
    // Renew a.test's certificate and reload: new handshakes get the new one.
    cert(d.path(), "a", &["a.test", "renewed.a.test"]);
    let before = served_cn(tls, "a.test");
    let fp = |sni: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("openssl s_client -connect {tls} -servername {sni} </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let old_fp = fp("a.test");
    assert!(Command::new("kill")
        .arg("-HUP")
        .arg(child.0.id().to_string())
        .status()
        .unwrap()
        .success());
    let mut changed = false;
    for _ in 0..200 {
        if fp("a.test") != old_fp {
            changed = true;
            break;
        }
    }
    drop(child);
    assert_eq!(before, "subject=CN = a.test");
    assert!(
        changed,
        "renewed certificate not served: {}",
        std::fs::read_to_string(d.path().join("err.txt")).unwrap_or_default()
    );
}

/// A TLS server with one vhost `h2.test` (and `[server]` lines `extra`),
/// serving `ten.txt` and a 64 MiB `big.bin`; returns the server, its TLS
/// address and the certificate's DER.
fn h2_server(d: &TempDir, extra: &str) -> (KillOnDrop, SocketAddr, Vec<u8>) {
    h2_server_with(d, extra, "", "modules = [\"static-file\"]")
}

/// [`h2_server`] with `tables` (such as `[[plugin]]`) before the vhost and
/// `vhost` (its `modules` line and module tables) at the vhost's end.
pub(crate) fn h2_server_with(
    d: &TempDir,
    extra: &str,
    tables: &str,
    vhost: &str,
) -> (KillOnDrop, SocketAddr, Vec<u8>) {
    let mut params = rcgen::CertificateParams::new(vec!["h2.test".to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "h2.test");
    let key = rcgen::KeyPair::generate().unwrap();
    let c = params.self_signed(&key).unwrap();
    let cp = d.write("h2.pem", c.pem());
    let kp = d.write("h2.key", key.serialize_pem());
    d.write("www/ten.txt", "0123456789");
    std::fs::File::create(d.path().join("www/big.bin"))
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let conf = format!(
        "[server]\nlisten-tls = [\"127.0.0.1:0\"]\nlisten = []\nworkers = 1\n{extra}\n\n{tables}\n\
         [[vhost]]\nserver-names = [\"h2.test\"]\ndefault = true\ndocument-root = \"www\"\n\
         tls-certificate = \"{}\"\ntls-key = \"{}\"\n{vhost}\n",
        cp.display(),
        kp.display()
    );
    let f = d.write("server.toml", &conf);
    let mut child = Command::new(crate::util::bin())
        .arg("-c")
        .arg(&f)
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(d.path().join("err.txt")).unwrap())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let child = KillOnDrop(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let tls = line
        .trim()
        .strip_prefix("tessera: listening on https://")
        .unwrap_or_else(|| {
            panic!(
                "no TLS listener: {line:?} {}",
                std::fs::read_to_string(d.path().join("err.txt")).unwrap_or_default()
            )
        })
        .parse()
        .unwrap();
    (child, tls, c.der().to_vec())
}

pub(crate) type H2Conn =
    h2::client::Connection<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, bytes::Bytes>;

/// An HTTP/2 connection (ALPN h2) to `addr` trusting `der`; `window` is the
/// stream flow-control window the client grants (0 stalls every response).
pub(crate) async fn h2_connect(
    addr: SocketAddr,
    der: &[u8],
    window: u32,
) -> (h2::client::SendRequest<bytes::Bytes>, H2Conn) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.to_vec().into()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
        .connect("h2.test".try_into().unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    h2::client::Builder::new()
        .initial_window_size(window)
        .handshake(tls)
        .await
        .unwrap()
}

pub(crate) fn h2_get(path: &str) -> http::Request<()> {
    http::Request::get(format!("https://h2.test{path}"))
        .body(())
        .unwrap()
}

pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn an_idle_http2_connection_closes_at_keep_alive_though_it_answers_pings() {
    let d = TempDir::new("h2idle");
    let (_s, tls, der) = h2_server(&d, "keep-alive = 2");
    block_on(async {
        let (mut client, conn) = h2_connect(tls, &der, 65_535).await;
        let conn = tokio::spawn(conn);
        let (resp, _) = client.send_request(h2_get("/ten.txt"), true).unwrap();
        let mut body = resp.await.unwrap().into_body();
        let mut got = Vec::new();
        while let Some(chunk) = body.data().await {
            got.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(got, b"0123456789");
        // The client stays and answers the server's PINGs (the h2 crate does
        // so while the connection is polled); the server must still close.
        let started = std::time::Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(20), conn).await;
        let idle = started.elapsed();
        assert!(
            ended.is_ok(),
            "an idle HTTP/2 connection was open after 20 s"
        );
        assert!(idle < Duration::from_secs(8), "closed after {idle:?}");
        drop(client);
    });
}

#[test]
fn an_http2_stream_stalled_by_flow_control_is_cut_off_at_send_timeout() {
    let d = TempDir::new("h2stall");
    let (_s, tls, der) = h2_server(&d, "send-timeout = 2");
    block_on(async {
        // A stream window of 0: the response headers come, no data ever can.
        let (mut client, conn) = h2_connect(tls, &der, 0).await;
        let conn = tokio::spawn(conn);
        let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
        assert_eq!(resp.await.unwrap().status(), 200);
        let ended = tokio::time::timeout(Duration::from_secs(20), conn).await;
        assert!(
            ended.is_ok(),
            "a stalled HTTP/2 stream held its connection for 20 s"
        );
        drop(client);
    });
}

#[test]
fn an_http2_connection_gets_at_most_128_requests_in_flight() {
    let d = TempDir::new("h2many");
    let (_s, tls, der) = h2_server(&d, "");
    block_on(async {
        let (mut client, conn) = h2_connect(tls, &der, 0).await;
        let _conn = tokio::spawn(conn);
        // 128 stalled downloads, each holding a file open on the server.
        let mut held = Vec::new();
        for _ in 0..128 {
            client = client.ready().await.unwrap();
            let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
            held.push(resp);
        }
        // Keep every response (dropping one resets its stream).
        let mut open = Vec::new();
        for resp in held {
            let r = resp.await.unwrap();
            assert_eq!(r.status(), 200);
            open.push(r);
        }
        client = client.ready().await.unwrap();
        let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers().get("retry-after").unwrap(), "1");
    });
}

#[test]
fn a_stalled_http2_stream_is_cut_off_though_other_requests_come_and_go() {
    let d = TempDir::new("h2mixed");
    let (_s, tls, der) = h2_server(&d, "send-timeout = 2");
    block_on(async {
        // A zero window stalls the download; HEAD answers need no window.
        let (mut client, conn) = h2_connect(tls, &der, 0).await;
        let mut conn = tokio::spawn(conn);
        let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
        let _stalled = resp.await.unwrap();
        let started = std::time::Instant::now();
        let mut answered = 0;
        while started.elapsed() < Duration::from_secs(15) {
            let head = http::Request::head("https://h2.test/ten.txt")
                .body(())
                .unwrap();
            let Ok(c) = client.clone().ready().await else {
                break;
            };
            client = c;
            let Ok((resp, _)) = client.send_request(head, true) else {
                break;
            };
            match resp.await {
                Ok(r) if r.status() == 200 => answered += 1,
                _ => break,
            }
            // A request every half second keeps the connection busy.
            if tokio::time::timeout(Duration::from_millis(500), &mut conn)
                .await
                .is_ok()
            {
                break;
            }
        }
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(8),
            "a stalled stream survived {took:?} of other requests ({answered} answered)"
        );
        assert!(answered > 0);
    });
}

#[test]
fn a_slow_but_steady_http2_download_is_not_cut_off() {
    let d = TempDir::new("h2slow");
    let (_s, tls, der) = h2_server(&d, "send-timeout = 2");
    block_on(async {
        // 16 KiB of window a second: a slow reader, but a steady one.
        let (mut client, conn) = h2_connect(tls, &der, 16 * 1024).await;
        let conn = tokio::spawn(conn);
        let (resp, _) = client.send_request(h2_get("/big.bin"), true).unwrap();
        let mut body = resp.await.unwrap().into_body();
        let started = std::time::Instant::now();
        let mut got = 0usize;
        let mut since_pause = 0usize;
        while started.elapsed() < Duration::from_secs(6) {
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.data())
                .await
                .expect("the download stopped")
                .expect("the stream ended early")
                .expect("the stream was reset");
            got += chunk.len();
            since_pause += chunk.len();
            body.flow_control().release_capacity(chunk.len()).unwrap();
            if since_pause >= 16 * 1024 {
                since_pause = 0;
                // The reader's pace is the behaviour under test.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        assert!(got >= 4 * 16 * 1024, "only {got} bytes in 6 s");
        assert!(!conn.is_finished(), "the connection was closed");
    });
}

/// Resident kB of the read-only mappings of `pid`'s executable
/// (`/proc/PID/smaps`).
fn executable_rss_kb(pid: u32) -> u64 {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let exe = exe.to_str().unwrap();
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let (mut ours, mut kb) = (false, 0);
    for line in smaps.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.first().is_some_and(|a| a.contains('-')) && f.len() >= 5 {
            ours = f.get(5) == Some(&exe) && !f[1].contains('w');
        } else if ours && f.first() == Some(&"Rss:") {
            kb += f[1].parse::<u64>().unwrap();
        }
    }
    kb
}

/// Once the workers accept, and before the listeners are announced, the
/// pages of the start-up code (configuration parsing, module building) are
/// unmapped (core/src/residency.rs): fewer of the executable's pages are
/// resident than were released, and the server answers; a reload (which maps
/// the parser's pages again) releases them again.
#[cfg(target_os = "linux")]
#[test]
fn start_up_pages_are_released_once_the_workers_accept() {
    let s = Server::start(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 2\nlog-level = \"debug\"\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n",
        |d| {
            d.write("www/a.txt", "aaaa");
        },
    );
    let released = |log: &str| -> Option<u64> {
        let at = log.find("start-up pages released: ")?;
        log[at + 25..].split(' ').next()?.parse().ok()
    };
    let mut log = s.stderr();
    for _ in 0..500 {
        if released(&log).is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        log = s.stderr();
    }
    let freed = released(&log).expect("no release logged");
    let resident = executable_rss_kb(s.pid());
    assert!(
        resident < freed,
        "{resident} kB of the executable resident after releasing {freed} kB"
    );
    assert_eq!(s.get("/a.txt").status, 200);
    s.reload(None);
    let mut log = s.stderr();
    for _ in 0..500 {
        if log.matches("start-up pages released: ").count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        log = s.stderr();
    }
    assert_eq!(log.matches("start-up pages released: ").count(), 2, "{log}");
    assert_eq!(s.get("/a.txt").status, 200);
    s.stop();
}

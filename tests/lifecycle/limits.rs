//! Limits and resources: bad and oversized requests, descriptors, memory; the `status` module.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use crate::util::{Server, TempDir};

use super::*;

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
    // Hold more connections than the server has descriptors for (bounded);
    // each sends a byte, or `defer-accept` keeps it in the kernel.
    let mut held = Vec::new();
    for _ in 0..80 {
        if let Ok(mut c) = TcpStream::connect(addr) {
            let _ = c.write_all(b"G");
            held.push(c);
        }
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
        if let Ok(mut c) = TcpStream::connect(addr) {
            let _ = c.write_all(b"G");
        }
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

/// The state of the server's side of the connection from client port
/// `client` to server port `server` in /proc/net/tcp (hex: "01"
/// established, "03" SYN_RECV), if listed.
fn server_side_state(server: u16, client: u16) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let want = (format!(":{server:04X}"), format!(":{client:04X}"));
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f[1].ends_with(&want.0) && f[2].ends_with(&want.1)).then(|| f[3].to_owned())
    })
}

/// `defer-accept` (default on): a connection that has sent nothing stays
/// in the kernel, its handshake's last ACK dropped (Linux
/// `TCP_DEFER_ACCEPT`: SYN_RECV on the server's side), until its first
/// bytes come; then it is served. With `defer-accept = false` the
/// server's side is established at once. The ACK reaches the server's
/// socket before `connect` returns on loopback, so the state is read once.
#[test]
fn defer_accept_keeps_a_silent_connection_in_the_kernel_until_it_speaks() {
    for (extra, state) in [("", "03"), ("defer-accept = false", "01")] {
        let s = Server::start(&site(extra, "modules = [\"static-file\"]\n"), |d| {
            d.write("www/ten.txt", "0123456789");
        });
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let port = c.local_addr().unwrap().port();
        assert_eq!(
            server_side_state(s.addr.port(), port).as_deref(),
            Some(state),
            "{extra:?}"
        );
        c.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        assert!(
            out.starts_with(b"HTTP/1.1 200 "),
            "{extra:?}: {:?}",
            String::from_utf8_lossy(&out)
        );
    }
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
    // a refused client learns nothing of the endpoint, not even its methods
    let r = s.req("POST", "/closed-status", &["Content-Length: 0"]);
    assert_eq!((r.status, r.header("allow")), (403, None));
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

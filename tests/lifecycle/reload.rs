//! Signals: reload (SIGHUP) under load, a broken reload, log rotation (SIGUSR1), shutdown.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::util::{Response, Server, TempDir};

use super::*;

fn signal(s: &Server, sig: &str) {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(s.child.id().to_string())
        .status()
        .unwrap();
    assert!(st.success());
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

/// Settings read only at start are named in the reload's warning, and the
/// rest of the reload still takes effect.
#[test]
fn a_reload_names_every_setting_that_needs_a_restart() {
    let s = Server::start(&site("", GEN1), |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let mut changed = vec![
        ("request-spans = true", "server.request-spans"),
        ("max-request-headers = 50", "server.max-request-headers"),
        ("ignore-client-abort = true", "server.ignore-client-abort"),
        ("keep-alive = 9", "server.keep-alive"),
    ];
    // the environment overrides the engine (CI's run on actix-http), and
    // PROXY-protocol listeners need Tessera's
    if std::env::var_os("TESSERA_SERVER__HTTP1_ENGINE").is_none() {
        changed.push((
            "listen-proxy-protocol = [\"127.0.0.1:0\"]\ntrusted-proxies = [\"127.0.0.1\"]",
            "server.listen-proxy-protocol",
        ));
    }
    let lines: Vec<&str> = changed.iter().map(|(line, _)| *line).collect();
    // waits until the reload is logged: the warning comes before it
    s.reload(Some(&site(&lines.join("\n"), GEN2)));
    let err = s.stderr();
    assert!(err.contains("only after a restart"), "{err}");
    for (_, key) in &changed {
        assert!(err.contains(key), "{key} not named: {err}");
    }
    // only what changed is named
    assert!(!err.contains("send-timeout"), "{err}");
    // the rest of the reload took effect
    assert_eq!(s.get("/ten.txt").header("x-gen"), Some("2"));
    if std::env::var_os("TESSERA_SERVER__HTTP1_ENGINE").is_none() {
        s.reload(Some(&site("http1-engine = \"actix\"", GEN1)));
        assert!(s.stderr().contains("server.http1-engine"), "{}", s.stderr());
        assert_eq!(s.get("/ten.txt").header("x-gen"), Some("1"));
    }
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

//! Liveness and readiness endpoints and the drain before a graceful
//! shutdown (issue 15, Health).

use std::process::Command;
use std::time::Duration;

use crate::util::Server;

fn config(extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nliveness-path = \"/livez\"\nreadiness-path = \"/readyz\"\n{extra}\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"access-log\", \"static-file\"]\n[vhost.access-log]\npath = \"access.log\"\n"
    )
}

fn signal(s: &Server, sig: &str) {
    assert!(Command::new("kill")
        .args([sig, &s.pid().to_string()])
        .status()
        .unwrap()
        .success());
}

/// Polls the readiness path (every 20 ms, at most 250 times) until it
/// answers 503.
fn wait_draining(s: &Server) {
    for _ in 0..250 {
        if s.get("/readyz").status == 503 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("readiness never turned 503: {}", s.stderr());
}

#[test]
fn probes_answer_for_any_host_and_are_not_logged() {
    let s = Server::start(&config(""), |d| {
        d.write("www/index.html", "home");
    });
    let r = s.get("/livez");
    assert_eq!((r.status, r.text().as_str()), (200, "alive\n"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let r = s.req("GET", "/readyz", &["Host: 10.0.0.7:8080"]);
    assert_eq!((r.status, r.text().as_str()), (200, "ready\n"));
    let r = s.req("HEAD", "/readyz", &[]);
    assert_eq!(r.status, 200);
    let r = s.req("POST", "/livez", &["Content-Length: 0"]);
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    // other paths are the vhost's
    assert_eq!(s.get("/").text(), "home");
    assert_eq!(s.get("/livez/x").status, 404);
    let dir = s.root().parent().unwrap().to_path_buf();
    s.stop_keep_dir();
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(log.lines().count(), 2, "only / and /livez/x: {log}");
    assert!(!log.contains("/readyz"), "{log}");
}

#[test]
fn sigterm_turns_readiness_to_503_and_serving_goes_on_through_the_drain() {
    let mut s = Server::start(&config("drain-delay = 60"), |d| {
        d.write("www/index.html", "home");
    });
    assert_eq!(s.get("/readyz").status, 200);
    signal(&s, "-TERM");
    wait_draining(&s);
    assert_eq!(s.get("/readyz").text(), "draining\n");
    // still serving, and alive
    assert_eq!(s.get("/").text(), "home");
    assert_eq!(s.get("/livez").status, 200);
    assert!(s.stderr().contains("draining for 60 s"), "{}", s.stderr());
    // a second SIGTERM ends the drain: graceful shutdown, exit 0
    signal(&s, "-TERM");
    let status = s.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "{}", s.stderr());
}

#[test]
fn without_a_drain_delay_sigterm_stops_at_once() {
    let mut s = Server::start(&config(""), |_| {});
    signal(&s, "-TERM");
    let status = s.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{}", s.stderr());
}

#[test]
fn probe_paths_are_checked() {
    let d = crate::util::TempDir::new("health-bad");
    let conf = d.write(
        "server.toml",
        "[server]\nreadiness-path = \"readyz\"\n\n[[vhost]]\ndefault = true\ndocument-root = \".\"\nmodules = [\"static-file\"]\n",
    );
    let out = crate::util::check_config(&conf);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server.readiness-path"), "{err}");
}

/// Sends `GET path` on the kept-alive connection `s` and reads the answer
/// (Content-Length framing): its head (lowercase) and body.
fn get_on(s: &mut std::net::TcpStream, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: site.test\r\n\r\n").as_bytes())
        .unwrap();
    let head = String::from_utf8(crate::engine::read_head(s))
        .unwrap()
        .to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    (head, String::from_utf8(body).unwrap())
}

#[test]
fn during_the_drain_responses_close_kept_alive_connections() {
    // keep-alive clients that reach the server directly (a Kubernetes
    // Service) move to another node at their next request, instead of
    // racing the close at the end of the drain
    let mut s = Server::start(&config("drain-delay = 60"), |d| {
        d.write("www/index.html", "home");
    });
    let mut c = std::net::TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (head, body) = get_on(&mut c, "/");
    assert_eq!(body, "home");
    assert!(!head.contains("connection: close"), "{head}");
    signal(&s, "-TERM");
    wait_draining(&s);
    // the kept-alive connection is still served, and told to close
    let (head, body) = get_on(&mut c, "/");
    assert_eq!(body, "home");
    assert!(head.contains("connection: close"), "{head}");
    let mut rest = Vec::new();
    use std::io::Read;
    assert_eq!(c.read_to_end(&mut rest).unwrap(), 0, "the server closes it");
    signal(&s, "-TERM");
    assert_eq!(s.wait_exit(Duration::from_secs(20)).code(), Some(0));
}

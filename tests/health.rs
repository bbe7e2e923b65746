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
    let mut draining = false;
    for _ in 0..250 {
        if s.get("/readyz").status == 503 {
            draining = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(draining, "readiness never turned 503: {}", s.stderr());
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

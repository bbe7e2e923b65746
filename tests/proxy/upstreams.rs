//! Upstream servers: refused, slow and dead ones, balancing, unix sockets, health, retries.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::engine::read_response;

use super::*;

/// A port nothing listens on (bound, then closed).
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server whose upstream lists a server nothing listens on, then `app`;
/// `extra` are TOML lines for the upstream.
fn dead_then(app: &App, extra: &str) -> Server {
    proxy_server(
        &[format!("127.0.0.1:{}", dead_port()), app.addr()],
        extra,
        "",
    )
}

#[test]
fn a_refused_upstream_is_502_and_a_slow_one_504() {
    let s = proxy_server(&[format!("127.0.0.1:{}", dead_port())], "", "");
    assert_eq!(s.get("/api/name").status, 502);
    assert!(s.stderr().contains("proxy:"), "{}", s.stderr());
    let app = App::start("a");
    let s = proxy_server(&[app.addr()], "read-timeout = 1", "");
    assert_eq!(s.get("/api/slow?s=5").status, 504);
    assert_eq!(s.get("/api/name").text(), "a");
}

/// A listener whose accept queue is full (backlog 0, filled, never
/// accepted): the kernel drops further SYNs, so a connect to it hangs.
fn unaccepting_listener() -> (socket2::Socket, Vec<socket2::Socket>, u16) {
    use socket2::{Domain, Socket, Type};
    let l = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    l.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    l.listen(0).unwrap();
    let addr = l.local_addr().unwrap();
    let port = addr.as_socket().unwrap().port();
    let fill = (0..4)
        .map(|_| {
            let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
            s.set_nonblocking(true).unwrap();
            let _ = s.connect(&addr);
            s
        })
        .collect();
    (l, fill, port)
}

#[test]
fn a_connect_timeout_is_504_after_every_server_was_tried() {
    let (_listener, _fill, port) = unaccepting_listener();
    let s = proxy_server(&[format!("127.0.0.1:{port}")], "connect-timeout = 1", "");
    let started = std::time::Instant::now();
    let r = s.get("/api/name");
    assert_eq!(r.status, 504, "{}", s.stderr());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(s.stderr().contains("timed out"), "{}", s.stderr());
}

#[test]
fn with_one_of_two_upstreams_down_every_request_succeeds() {
    let app = App::start("b");
    let s = dead_then(&app, "fail-timeout = 60");
    for _ in 0..10 {
        let r = s.get("/api/name");
        assert_eq!((r.status, r.text().as_str()), (200, "b"));
    }
    // the status module shows the dead server down, the other up
    let text = s.get("/server-status").text();
    let line = |state: &str| {
        text.lines()
            .any(|l| l.starts_with("upstream app server ") && l.contains(&format!("state={state}")))
    };
    assert!(line("down") && line("up"), "{text}");
    let prom = s.get("/server-status?format=prometheus").text();
    assert!(
        prom.contains(&format!(
            "tessera_upstream_up{{upstream=\"app\",server=\"{}\"}} 1",
            app.addr()
        )),
        "{prom}"
    );
    assert!(
        prom.contains("tessera_upstream_failures_total{upstream=\"app\""),
        "{prom}"
    );
    // the kept-alive connection to the live server waits idle in the pool
    assert!(
        text.lines().any(|l| l.contains(&app.addr())
            && l.contains("connections-open=1")
            && l.contains("connections-idle=1")),
        "{text}"
    );
}

/// Every server of a two-server upstream down: 502 at once, without a
/// connection to either (nginx "no live upstreams"), until `fail-timeout`
/// passes.
#[test]
fn with_every_upstream_down_the_answer_is_502_at_once() {
    let app = App::start("b");
    let s = dead_then(
        &app,
        "balance = \"first\"\nread-timeout = 1\nfail-timeout = 60",
    );
    // the first is refused, the second times out: both are down
    assert_eq!(s.get("/api/slow?s=5").status, 504, "{}", s.stderr());
    // the second is alive again, but down for 60 s: not tried
    let r = s.get("/api/name");
    assert_eq!(r.status, 502, "{} {}", r.text(), s.stderr());
    assert!(s.stderr().contains("no live server"), "{}", s.stderr());
    let text = s.get("/server-status").text();
    assert!(
        text.lines()
            .any(|l| l.contains(&app.addr()) && l.contains("requests=1 ")),
        "the live server got only the first request: {text}"
    );
}

#[test]
fn round_robin_takes_turns_and_ip_hash_keeps_a_client_on_one_server() {
    let (a, b) = (App::start("a"), App::start("b"));
    let s = proxy_server(&[a.addr(), b.addr()], "", "");
    let names: Vec<String> = (0..4).map(|_| s.get("/api/name").text()).collect();
    assert_eq!(names, ["a", "b", "a", "b"]);
    let s = proxy_server(&[a.addr(), b.addr()], "balance = \"ip-hash\"", "");
    let first = s.get("/api/name").text();
    for _ in 0..6 {
        assert_eq!(s.get("/api/name").text(), first);
    }
    let s = proxy_server(&[a.addr(), b.addr()], "balance = \"first\"", "");
    for _ in 0..4 {
        assert_eq!(s.get("/api/name").text(), "a");
    }
}

#[test]
fn an_upstream_that_dies_mid_response_never_looks_complete() {
    for path in ["/api/die", "/api/die-chunked"] {
        let app = App::start("a");
        let s = proxy_server(&[app.addr()], "", "");
        let raw = s.raw(format!("GET {path} HTTP/1.1\r\nHost: site.test\r\n\r\n").as_bytes());
        let text = String::from_utf8_lossy(&raw);
        // actix-http (TLS, or the "actix" engine) may close before it sent
        // the head; either way the response never looks complete
        if raw.is_empty() {
            assert_eq!(
                std::env::var("TESSERA_SERVER__HTTP1_ENGINE").as_deref(),
                Ok("actix"),
                "Tessera's engine sends the head and the bytes it got"
            );
            drop(app);
            continue;
        }
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        let head_end = text.find("\r\n\r\n").unwrap() + 4;
        let body = &raw[head_end..];
        if path == "/api/die" {
            assert!(body.len() < 1_000_000, "a full body arrived");
        } else {
            assert!(!text.ends_with("0\r\n\r\n"), "the chunked body was ended");
        }
        // the access log counts the bytes sent, not the announced length
        let dir = s.root().parent().unwrap().to_path_buf();
        s.stop_keep_dir();
        let log = std::fs::read_to_string(dir.join("access.log")).unwrap();
        assert!(
            log.contains(&format!("\"GET {path} HTTP/1.1\" 200 1000 ")),
            "{log}"
        );
        drop(app);
    }
}

#[test]
fn an_upstream_on_a_unix_socket_is_reached() {
    let d = crate::util::TempDir::new("unix-upstream");
    let sock = d.path().join("app.sock");
    let _app = App::start_on("u", Some(&sock));
    let s = proxy_server(&[format!("unix:{}", sock.display())], "", "");
    let r = s.get("/api/echo/over-unix");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(json(&r)["path"], "/echo/over-unix");
    assert_eq!(json(&r)["name"], "u");
}

#[test]
fn an_active_health_check_takes_a_failing_server_out() {
    let (sick, b) = (App::start("sick"), App::start("b"));
    let s = proxy_server(
        &[sick.addr(), b.addr()],
        "health-check = \"/health\"\nhealth-interval = 1\nmax-fails = 0",
        "",
    );
    // the first check runs at start; wait for it (bounded)
    let mut down = false;
    for _ in 0..100 {
        let text = s.get("/server-status").text();
        if text.contains(&format!("server {}: state=down", sick.addr())) {
            down = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(down, "{}", s.get("/server-status").text());
    for _ in 0..6 {
        assert_eq!(s.get("/api/name").text(), "b");
    }
}

#[test]
fn a_kept_alive_connection_the_upstream_dropped_is_retried_once() {
    // one server, which answers one request per connection and then drops it
    let app = App::start("rude");
    let s = proxy_server(&[app.addr()], "max-fails = 1", "");
    for _ in 0..4 {
        let r = s.get("/api/name");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "rude"),
            "{}",
            s.stderr()
        );
    }
}

/// `GET /api/slow?s=SECS` for `host` on a thread of its own: its status.
fn slow_request(addr: std::net::SocketAddr, host: &str, secs: u32) -> std::thread::JoinHandle<u16> {
    let request =
        format!("GET /api/slow?s={secs} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        read_response(&mut c).status
    })
}

/// Tessera's own `max-connections` to a server is not the server's failure:
/// a request that finds every connection busy gets 503, and the server is
/// not marked down (the next request, once one is free, reaches it). Before,
/// a few slow or stalled requests could take every server down.
#[test]
fn max_connections_reached_is_503_and_never_the_server_s_fault() {
    let app = App::start("a");
    let s = proxy_server(
        &[app.addr()],
        "max-connections = 1\nmax-fails = 1\nconnect-timeout = 1",
        "",
    );
    let slow = slow_request(s.addr, "site.test", 3);
    // the slow request holds the only connection (bounded wait, no sleep)
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let prom = s.get("/server-status?format=prometheus").text();
        if prom.lines().any(|l| {
            l.starts_with("tessera_upstream_connections_open{") && l.trim_end().ends_with(" 1")
        }) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{prom}");
    }
    let r = s.get("/api/name");
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(slow.join().unwrap(), 200);
    let r = s.get("/api/name");
    assert_eq!((r.status, r.text().as_str()), (200, "a"), "{}", s.stderr());
    // the 503 never reached the server: two requests sent, not three
    let prom = s.get("/server-status?format=prometheus").text();
    assert!(
        prom.lines()
            .any(|l| l.starts_with("tessera_upstream_requests_total{") && l.ends_with(" 2")),
        "{prom}"
    );
}

/// Two module tables (a rule in each of two vhosts) that use one upstream
/// share its pool, as nginx's `keepalive` and `max_conns` count per
/// `upstream` block: the second vhost's request reuses the connection the
/// first one's left idle, and `max-connections = 1` holds for both together.
/// Before, each table had its own pools, so each doubled the figures.
#[test]
fn module_tables_that_use_one_upstream_share_its_pool() {
    let app = App::start("a");
    let rule = |name: &str, default: bool| {
        format!(
            "[[vhost]]\nserver-names = [\"{name}\"]\ndefault = {default}\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n\
             [[vhost.rule]]\nmatch = {{ path-prefix = \"/api/\" }}\n\
             [vhost.rule.proxy]\nupstream = \"app\"\nmap-path = {{ \"/api/\" = \"/\" }}\n"
        )
    };
    let s = Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\nmax-connections = 1\nconnect-timeout = 1\n\n\
             {}\n{}",
            app.addr(),
            rule("one.test", true),
            rule("two.test", false)
        ),
        |d| {
            d.write("www/local.txt", "local");
        },
    );
    let served = |host: &str| {
        let r = s.req("GET", "/api/served-here", &[&format!("Host: {host}")]);
        assert_eq!(r.status, 200, "{}", s.stderr());
        r.text()
    };
    assert_eq!(served("one.test"), "0");
    assert_eq!(
        served("two.test"),
        "1",
        "the second vhost opened its own connection"
    );
    assert_eq!(served("one.test"), "2");

    // one slow request through the first vhost holds the only connection
    let slow = slow_request(s.addr, "one.test", 3);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s.req("GET", "/api/name", &["Host: two.test"]).status != 503 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second vhost's requests never met the shared max-connections"
        );
    }
    assert_eq!(slow.join().unwrap(), 200);
    let r = s.req("GET", "/api/name", &["Host: two.test"]);
    assert_eq!((r.status, r.text().as_str()), (200, "a"));
}

/// Established TCP connections to 127.0.0.1:`port` on this machine (from
/// /proc/net/tcp: the remote end is the port; state 01).
fn established_to(port: u16) -> usize {
    let want = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[2] == want && f[3] == "01"
        })
        .count()
}

/// A reload retires the old configuration's pools: their idle connections
/// close at once, though a request of the old configuration is still in
/// flight (it might hold an application's worker: php-fpm's), and the
/// connection that request gives back is closed too, though no further
/// request looks up a pool. Before, both stayed open: until the old
/// configuration's last request ended, or until a later reload.
#[test]
fn a_reload_closes_the_old_pools_connections() {
    let app = App::start("a");
    let port: u16 = app.addr().rsplit(':').next().unwrap().parse().unwrap();
    let s = proxy_server(&[app.addr()], "", "");
    // two idle connections
    let (a, b) = (
        slow_request(s.addr, "site.test", 1),
        slow_request(s.addr, "site.test", 1),
    );
    assert_eq!((a.join().unwrap(), b.join().unwrap()), (200, 200));
    assert_eq!(established_to(port), 2);
    // one of them carries a slow request across the reload
    let slow = slow_request(s.addr, "site.test", 4);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !s
        .get("/server-status?format=prometheus")
        .text()
        .lines()
        .any(|l| l.starts_with("tessera_upstream_in_flight{") && l.trim_end().ends_with(" 1"))
    {
        assert!(std::time::Instant::now() < deadline, "never in flight");
    }
    s.reload(None);
    crate::fastcgi::wait_for("the old pool's idle connection to close", || {
        established_to(port) == 1
    });
    assert_eq!(slow.join().unwrap(), 200);
    crate::fastcgi::wait_for("the connection given back to the old pool to close", || {
        established_to(port) == 0
    });
    assert_eq!(s.get("/api/name").status, 200);
    assert_eq!(established_to(port), 1);
}

/// A request with a body goes to the next server when none of its bytes
/// reached the first (refused there), as nginx passes on a request that no
/// server got; the body arrives whole. Before, only requests without a body
/// were passed on: a POST got 502 while a GET was served.
#[test]
fn a_request_with_a_body_goes_to_the_next_server_when_the_first_refuses() {
    let app = App::start("b");
    let s = dead_then(&app, "balance = \"first\"");
    let body = "x".repeat(100_000);
    let request = format!(
        "POST /api/echo HTTP/1.1\r\nHost: site.test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let r = Response::parse(&s.raw(request.as_bytes()), false);
    assert_eq!(r.status, 200, "{}", s.stderr());
    let j = json(&r);
    assert_eq!(
        (j["name"].as_str(), j["length"].as_u64()),
        (Some("b"), Some(100_000))
    );
    assert_eq!(j["sha256"].as_str().unwrap(), sha256_hex(body.as_bytes()));
}

/// An idle kept-alive connection closes once `keepalive-timeout` has
/// passed, though no further request comes (nginx's `keepalive_timeout`
/// in an upstream closes it on a timer). Before, it stayed open, and
/// counted idle, until the next lease looked at its age.
#[test]
fn an_idle_upstream_connection_closes_at_keepalive_timeout() {
    let app = App::start("a");
    let port: u16 = app.addr().rsplit(':').next().unwrap().parse().unwrap();
    let s = proxy_server(&[app.addr()], "keepalive-timeout = 1", "");
    assert_eq!(s.get("/api/name").status, 200);
    assert_eq!(established_to(port), 1);
    crate::fastcgi::wait_for("the idle connection to close", || established_to(port) == 0);
    let prom = s.get("/server-status?format=prometheus").text();
    assert!(
        prom.lines().any(|l| {
            l.starts_with("tessera_upstream_connections_idle{") && l.trim_end().ends_with(" 0")
        }),
        "{prom}"
    );
}

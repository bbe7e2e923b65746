//! The `scgi` module (issue 14) against Debian's uwsgi speaking SCGI
//! (`--scgi-socket`), running tests/upstream/wsgi_app.py; uWSGI answers
//! SCGI requests with CGI output (`Status: 200 OK`, not a status line).

use crate::uwsgi::{check_app, site, Uwsgi};

#[test]
fn scgi_runs_a_wsgi_app_over_tcp() {
    let app = Uwsgi::start("scgi", false);
    let s = site("scgi", &app.server);
    check_app(&s);
    // SCGI=1 is among the variables
    let r = s.get("/app/env");
    assert!(r.text().contains("SCGI=1\n"), "{}", r.text());
}

#[test]
fn scgi_runs_a_wsgi_app_on_a_unix_socket() {
    let app = Uwsgi::start("scgi", true);
    let s = site("scgi", &app.server);
    check_app(&s);
}

#[test]
fn an_scgi_backend_that_is_down_is_502() {
    let s = site("scgi", &format!("127.0.0.1:{}", crate::util::free_port()));
    assert_eq!(s.get("/app/env").status, 502);
}

/// A server of the upstream that refuses the connection got nothing: the
/// request goes to the next one (nginx's `scgi_next_upstream error`).
#[test]
fn an_scgi_server_that_refuses_is_skipped_for_the_next() {
    let app = Uwsgi::start("scgi", false);
    let dead = format!("127.0.0.1:{}", crate::util::free_port());
    // round-robin tries the dead server first
    let s = site("scgi", &format!("{dead}\", \"{}", app.server));
    for _ in 0..4 {
        let r = s.get("/app/env");
        assert_eq!(r.status, 200, "{}", s.stderr());
    }
    assert!(s.stderr().contains(&dead), "{}", s.stderr());
}

/// `max-connections` holds for `scgi` (and `uwsgi`, which shares its
/// code), whose connections serve one request each, and the status counts
/// them open: with one allowed, a request while one is open waits
/// `connect-timeout` and gets 503. The server here accepts (the kernel
/// does) and never answers. Before, these modules connected without the
/// upstream's pools: no cap, and the status showed no open connection.
#[test]
fn scgi_connections_count_against_max_connections_and_show_open() {
    let mute = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = scgi_to(&mute);
    let addr = s.addr;
    let held = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(40)))
            .unwrap();
        std::io::Write::write_all(
            &mut c,
            b"GET /app/held HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        crate::engine::read_response(&mut c).status
    });
    let open = |prom: &str| {
        prom.lines().any(|l| {
            l.starts_with("tessera_upstream_connections_open{") && l.trim_end().ends_with(" 1")
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let prom = s.get("/server-status?format=prometheus").text();
        if open(&prom) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never open: {prom}");
    }
    let r = s.get("/app/second");
    assert_eq!(r.status, 503, "{}", s.stderr());
    assert!(s.stderr().contains("max-connections"), "{}", s.stderr());
    // the mute server goes away: the held request fails as a bad gateway,
    // and its connection is no longer counted
    drop(mute);
    assert_eq!(held.join().unwrap(), 502);
    let prom = s.get("/server-status?format=prometheus").text();
    assert!(!open(&prom), "{prom}");
}

/// A site whose `/app/` goes by `scgi` to `mute` (an upstream with
/// `max-connections = 1`, `connect-timeout = 1`, `read-timeout = 30`),
/// with the status at `/server-status`.
pub(crate) fn scgi_to(mute: &std::net::TcpListener) -> crate::util::Server {
    crate::util::Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n\
             [[upstream]]\nname = \"py\"\nservers = [\"{}\"]\nmax-connections = 1\n\
             connect-timeout = 1\nread-timeout = 30\n\n\
             [[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\n\
             modules = [\"static-file\"]\n\n\
             [[vhost.rule]]\nmatch = {{ path-prefix = \"/app/\" }}\n\
             [vhost.rule.scgi]\nupstream = \"py\"\nscript-name = \"/app\"\n\n\
             [[vhost.rule]]\nmatch = {{ path-prefix = \"/server-status\" }}\n\
             [vhost.rule.status]\nallow = [\"127.0.0.1\"]\n",
            mute.local_addr().unwrap()
        ),
        |d| {
            d.write("www/plain.txt", "static");
        },
    )
}

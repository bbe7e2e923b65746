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

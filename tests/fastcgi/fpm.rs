//! php-fpm on a unix socket: kept connections, the pool's figures, read-timeout.

use crate::util::{post, Response, Server};

use super::*;

#[test]
fn php_fpm_on_a_unix_socket_runs_the_scripts() {
    let d = crate::util::TempDir::new("fpm");
    let fpm = Fpm::start(&d);
    let s = Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:{}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
            fpm.socket.display()
        ),
        |w| {
            w.write(
                "www/info.php",
                "<?php header('Content-Type: text/plain'); foreach (['SCRIPT_NAME','PATH_INFO','QUERY_STRING','REQUEST_METHOD'] as $k) echo $k, '=', $_SERVER[$k] ?? '', \"\\n\";",
            );
            w.write(
                "www/post.php",
                "<?php $b = file_get_contents('php://input'); echo strlen($b), ' ', md5($b);",
            );
        },
    );
    let r = s.get("/info.php/p?x=1");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(var(&r, "SCRIPT_NAME"), "/info.php");
    assert_eq!(var(&r, "PATH_INFO"), "/p");
    assert_eq!(var(&r, "QUERY_STRING"), "x=1");
    let body = vec![b'q'; 200_000];
    let r = Response::parse(&s.raw(&post("/post.php", &body)), false);
    assert_eq!(r.text(), format!("200000 {}", md5_hex(&body)));
}

/// `connections-open` and `connections-idle` of the upstream's server.
fn pool_figures(s: &Server) -> (u64, u64, u64) {
    let text = s.get("/server-status").text();
    let line = text
        .lines()
        .find(|l| l.starts_with("upstream php server"))
        .unwrap_or_else(|| panic!("no upstream line in {text}"));
    let get = |k: &str| -> u64 {
        line.split(' ')
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {line}"))
    };
    (
        get("requests"),
        get("connections-open"),
        get("connections-idle"),
    )
}

#[test]
fn connections_to_php_fpm_are_kept_and_reused() {
    let d = crate::util::TempDir::new("fpm-keep");
    let fpm = Fpm::start(&d);
    let s = fpm_site(&fpm, "", "keep-conn = true");
    for _ in 0..5 {
        assert_eq!(s.get("/hello.php").text(), "hello");
    }
    // FCGI_KEEP_CONN: one connection carried all five, and waits idle
    assert_eq!(pool_figures(&s), (5, 1, 1));
    // the default: no FCGI_KEEP_CONN, php-fpm closes, nothing is kept
    let s = fpm_site(&fpm, "", "");
    for _ in 0..3 {
        assert_eq!(s.get("/hello.php").text(), "hello");
    }
    assert_eq!(pool_figures(&s), (3, 0, 0));
}

#[test]
fn kept_connections_never_starve_requests_beyond_the_php_workers() {
    // php-fpm has 2 workers (Fpm::start); with keep-conn each kept
    // connection holds one, so max-connections = 2 and the others wait for
    // a connection instead of queueing in php-fpm's backlog behind idle ones
    let d = crate::util::TempDir::new("fpm-starve");
    let fpm = Fpm::start(&d);
    let s = fpm_site(
        &fpm,
        "max-connections = 2
read-timeout = 5",
        "keep-conn = true",
    );
    let ok: usize = std::thread::scope(|sc| {
        let clients: Vec<_> = (0..8)
            .map(|_| {
                sc.spawn(|| {
                    (0..10)
                        .filter(|_| {
                            let r = s.get("/hello.php");
                            r.status == 200 && r.text() == "hello"
                        })
                        .count()
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().unwrap()).sum()
    });
    assert_eq!(ok, 80, "{}", s.stderr());
    let (_, open, _) = pool_figures(&s);
    assert!(open <= 2, "at most max-connections open: {open}");
}

#[test]
fn an_application_silent_past_read_timeout_is_504() {
    // nginx answers an upstream timeout with 504; a refused or broken one is
    // 502 (the answer's own timer fires as early as the outer one)
    let d = crate::util::TempDir::new("fpm-timeout");
    let fpm = Fpm::start(&d);
    let s = fpm_site(&fpm, "read-timeout = 1", "");
    let r = s.get("/slow.php");
    assert_eq!(r.status, 504, "{}", s.stderr());
    assert!(s.stderr().contains("read-timeout"), "{}", s.stderr());
    assert_eq!(s.get("/hello.php").text(), "hello");
}

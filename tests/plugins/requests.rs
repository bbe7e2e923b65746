//! Requests through plugins: hooks, isolation, per-request state, concurrency, blocking hooks.

use std::io::{Read, Write};
use std::time::Duration;

use crate::util::{Server, TempDir};

use super::*;

#[test]
fn unknown_return_code_is_a_500_not_undefined_behaviour() {
    let s = Server::start(
        &config(
            &[("raw", lib("raw-unknown-code.so"))],
            "\"raw\", \"static-file\"",
            "",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    assert_eq!(s.get("/ten.txt").status, 500);
    assert!(
        s.stderr().contains("returned an unknown code"),
        "{}",
        s.stderr()
    );
}

#[test]
fn hooks_see_and_change_the_request() {
    let s = echo_server("[vhost.echo]\ntag = \"t\"\n");
    let r = s.req(
        "GET",
        "/ten.txt?q=1",
        &["X-Copy: original", "X-Remove-Me: no"],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"0123456789");
    assert_eq!(r.header("x-echo-path"), Some("/ten.txt"));
    assert_eq!(r.header("x-echo-method"), Some("GET"));
    assert_eq!(r.header("x-echo-peer"), Some("127.0.0.1"));
    assert_eq!(r.header("x-echo-vhost"), Some("site.test"));
    assert_eq!(r.header("x-echo-query"), Some("q=1"));
    assert_eq!(r.header("x-echo-status"), Some("200"));
    // copied in on_request, header overwritten since: the copy is intact
    assert_eq!(r.header("x-copied"), Some("original"));
    assert_eq!(r.header("x-copy-now"), Some("overwritten"));
    // answering from the request phase
    let r = s.get("/respond");
    assert_eq!(
        (r.status, r.text().as_str()),
        (202, "answered by the plugin")
    );
    // rewriting the path: static-file serves the new one
    let r = s.get("/rewrite");
    assert_eq!((r.status, r.text().as_str()), (200, "0123456789"));
    // changing the status in the response phase
    assert_eq!(s.get("/teapot").status, 418);
}

#[test]
fn panicking_hooks_cost_one_request_and_the_server_keeps_serving() {
    let s = echo_server("");
    for p in [
        "/panic-request",
        "/panic-response",
        "/error",
        "/respond-unstaged",
    ] {
        assert_eq!(s.get(p).status, 500, "{p}");
    }
    // a panic in the log phase does not touch the response
    assert_eq!(s.get("/panic-log").status, 404);
    let err = s.stderr();
    assert!(
        err.contains("module=echo")
            && err.contains("hook=\"request\"")
            && err.contains("boom in on_request"),
        "{err}"
    );
    assert!(
        err.contains("hook=\"response\"") && err.contains("boom in on_response"),
        "{err}"
    );
    assert!(
        err.contains("hook=\"log\"") && err.contains("boom in on_log"),
        "{err}"
    );
    for i in 0..1000 {
        let r = s.get("/ten.txt");
        assert_eq!(r.status, 200, "request {i} after the panics");
    }
}

#[test]
fn request_end_runs_exactly_once_per_request() {
    let s = echo_server("");
    let counts = |s: &Server| {
        let r = s.get("/ten.txt");
        let b: u64 = r.header("x-begun").unwrap().parse().unwrap();
        let e: u64 = r.header("x-ended").unwrap().parse().unwrap();
        (b, e)
    };
    let (b0, e0) = counts(&s);
    // This request is begun and not yet ended while its response is built.
    assert_eq!(b0, e0 + 1);
    for p in [
        "/ten.txt",
        "/respond",
        "/panic-request",
        "/panic-response",
        "/error",
        "/panic-log",
        "/missing",
    ] {
        s.get(p);
    }
    // A client that goes away in the middle of a large response.
    s.dir.write("www/big.bin", vec![7u8; 8 << 20]);
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: site.test\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 1024];
        let _ = c.read(&mut buf).unwrap();
    }
    // Wait (bounded) until the server noticed the disconnect: each probe is a
    // real request; the counts converge once the aborted body was dropped.
    let mut last = (0, 0);
    for _ in 0..200 {
        last = counts(&s);
        if last.0 == last.1 + 1 {
            break;
        }
        std::thread::yield_now();
    }
    assert_eq!(last.0, last.1 + 1, "begun {} ended {}", last.0, last.1);
    assert!(last.0 >= b0 + 9, "{last:?}");
}

#[test]
fn custom_allocator_passes_strings_both_ways() {
    let s = Server::start(
        &config(
            &[("custom-alloc", lib("tessera-fixture-custom-alloc"))],
            "\"custom-alloc\", \"access-log\", \"static-file\"",
            "[vhost.custom-alloc]\ngreeting = \"Hello\"\n[vhost.access-log]\npath = \"a.log\"\nformat = \"%{greeting}n\"\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    for _ in 0..50 {
        let r = s.req("GET", "/greet", &["X-Name: Ada"]);
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "Hello, Ada!\n".repeat(100));
        assert_eq!(r.header("x-greeting"), Some("Hello, Ada"));
        let r = s.req("GET", "/ten.txt", &["X-Name: Bob"]);
        assert_eq!(r.header("x-seen-type"), Some("text/plain; charset=utf-8"));
    }
    let dir = s.dir.path().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let log = std::fs::read_to_string(dir.join("a.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(log.lines().filter(|l| *l == "Hello, Ada").count(), 50);
}

#[test]
fn many_concurrent_requests_through_a_plugin() {
    let s = echo_server("");
    std::thread::scope(|sc| {
        for t in 0..8 {
            let s = &s;
            sc.spawn(move || {
                for i in 0..150 {
                    let r = s.req(
                        "GET",
                        &format!("/ten.txt?t={t}&i={i}"),
                        &[&format!("X-Copy: {t}-{i}")],
                    );
                    assert_eq!(r.status, 200);
                    assert_eq!(r.header("x-copied"), Some(format!("{t}-{i}").as_str()));
                }
            });
        }
    });
}

#[test]
fn one_library_is_opened_once_and_instances_are_independent() {
    let path = lib("tessera-fixture-echo");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[plugin]]\nname = \"echo\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"a.test\"]\ndocument-root = \"www\"\nmodules = [\"echo\", \"static-file\"]\n[vhost.echo]\ntag = \"A\"\n\n\
         [[vhost]]\nserver-names = [\"b.test\"]\ndocument-root = \"www\"\nmodules = [\"echo\", \"static-file\"]\n[vhost.echo]\ntag = \"B\"\n\n\
         [[vhost]]\nserver-names = [\"c.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n"
    );
    let s = Server::start(&cfg, |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let tag = |h: &str| {
        s.req("GET", "/ten.txt", &[h])
            .header("x-echo-tag")
            .map(str::to_owned)
    };
    assert_eq!(tag("Host: a.test").as_deref(), Some("A"));
    assert_eq!(tag("Host: b.test").as_deref(), Some("B"));
    // a module enabled only on a and b never runs on the default vhost
    assert_eq!(tag("Host: c.test"), None);
    assert_eq!(tag("Host: other.test"), None);
}

#[test]
fn builtin_and_plugin_give_the_same_responses() {
    // The echo fixture sets x-echo-tag in its response phase; the built-in
    // headers module does the same with `set`. Everything else must match.
    let files = |d: &TempDir| {
        d.write("www/ten.txt", "0123456789");
        d.write("www/index.html", "home");
        d.mkdir("www/dir");
    };
    let plugin = Server::start(
        &config(
            &[("echo", lib("tessera-fixture-echo"))],
            "\"echo\", \"static-file\"",
            "[vhost.echo]\ntag = \"same\"\n",
        ),
        files,
    );
    let builtin = Server::start(
        &config(
            &[],
            "\"headers\", \"static-file\"",
            "[vhost.headers]\nset = { \"X-Echo-Tag\" = \"same\" }\n",
        ),
        files,
    );
    for (m, p, h) in [
        ("GET", "/ten.txt", vec![]),
        ("HEAD", "/ten.txt", vec![]),
        ("GET", "/ten.txt", vec!["Range: bytes=2-4"]),
        ("GET", "/", vec![]),
        ("GET", "/dir", vec![]),
        ("GET", "/missing", vec![]),
        ("POST", "/ten.txt", vec!["Content-Length: 0"]),
        ("GET", "/ten.txt", vec!["If-None-Match: *"]),
    ] {
        let a = plugin.req(m, p, &h);
        let b = builtin.req(m, p, &h);
        assert_eq!(a.status, b.status, "{m} {p}");
        assert_eq!(a.body, b.body, "{m} {p}");
        assert_eq!(a.header("x-echo-tag"), b.header("x-echo-tag"), "{m} {p}");
        for k in [
            "content-type",
            "content-length",
            "content-range",
            "allow",
            "location",
        ] {
            assert_eq!(a.header(k), b.header(k), "{m} {p} {k}");
        }
        // the two servers' files have different mtimes, so only presence
        assert_eq!(
            a.header("etag").is_some(),
            b.header("etag").is_some(),
            "{m} {p}"
        );
    }
}

#[test]
fn blocking_hooks_run_off_the_worker_threads() {
    let d_marker = TempDir::new("marker");
    let marker = d_marker.path().join("go");
    let path = lib("tessera-fixture-blocking");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"slow.test\"]\ndocument-root = \"www\"\nmodules = [\"blocking\", \"static-file\"]\n[vhost.blocking]\nwait-for = \"{}\"\n\n\
         [[vhost]]\nserver-names = [\"fast.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n",
        marker.display()
    );
    let s = Server::start(&cfg.replace("wait-for", "wait_for"), |d| {
        d.write("www/ten.txt", "0123456789");
    });
    std::thread::scope(|sc| {
        // Three requests whose hooks block until the marker exists.
        let slow: Vec<_> = (0..3)
            .map(|_| sc.spawn(|| s.req("GET", "/ten.txt", &["Host: slow.test"])))
            .collect();
        // With one worker, these are served only if the blocking hooks do not
        // run on it.
        for _ in 0..20 {
            let r = s.req("GET", "/ten.txt", &["Host: fast.test"]);
            assert_eq!(r.status, 200);
        }
        assert!(
            slow.iter().all(|h| !h.is_finished()),
            "slow requests did not wait"
        );
        std::fs::write(&marker, "").unwrap();
        for h in slow {
            let r = h.join().unwrap();
            assert_eq!((r.status, r.text().as_str()), (200, "0123456789"));
        }
    });
}

#[test]
fn clients_leaving_during_a_blocking_hook_are_cleaned_up_on_their_worker() {
    let d_marker = TempDir::new("marker2");
    let marker = d_marker.path().join("go");
    let s = blocking_site(&marker, "");
    use std::io::Write;
    for _ in 0..3 {
        // Clients that send a request and leave while its hook blocks.
        let mut gone = Vec::new();
        for _ in 0..30 {
            let mut c = std::net::TcpStream::connect(s.addr).unwrap();
            c.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: slow.test\r\n\r\n")
                .unwrap();
            gone.push(c);
        }
        drop(gone);
        std::fs::write(&marker, "").unwrap();
        // The next requests are answered; the abandoned ones were dropped.
        for _ in 0..20 {
            assert_eq!(s.get("/ten.txt").status, 200);
        }
        std::fs::remove_file(&marker).unwrap();
    }
    std::fs::write(&marker, "").unwrap();
    assert_eq!(s.get("/ten.txt").status, 200);
    let err = s.stderr();
    assert!(
        !err.contains("panicked") && !err.contains("already borrowed"),
        "{err}"
    );
}

#[test]
fn a_request_pipelined_behind_a_slow_handler_is_not_cut_off() {
    // client-header-timeout times request heads, not the server's own work:
    // bytes that arrive while a blocking hook runs (a pipelined request, a
    // body) must not start the clock that closes the connection.
    let d_marker = TempDir::new("marker");
    let marker = d_marker.path().join("go");
    let path = lib("tessera-fixture-blocking");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nclient-header-timeout = 1\n\n\
         [[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"slow.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"blocking\", \"static-file\"]\n[vhost.blocking]\nwait_for = \"{}\"\n",
        marker.display()
    );
    let s = Server::start(&cfg, |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let mut c = std::net::TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let req = b"GET /ten.txt HTTP/1.1\r\nHost: slow.test\r\n\r\n";
    c.write_all(req).unwrap();
    // The scenario: the client pipelines its next request a moment later and
    // the backend takes longer than client-header-timeout.
    std::thread::sleep(std::time::Duration::from_millis(300));
    c.write_all(req).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    std::fs::write(&marker, "").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.windows(10).filter(|w| w == b"0123456789").count() < 2 {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert_eq!(
        text.matches("HTTP/1.1 200 OK").count(),
        2,
        "both pipelined requests answered: {text:?}"
    );
}

#[test]
fn http2_requests_to_a_blocking_handler_count_in_flight_and_outlive_keep_alive() {
    use crate::lifecycle::{block_on, h2_connect, h2_get, h2_server_with};
    let d = TempDir::new("h2block");
    let marker = d.path().join("go");
    let path = lib("tessera-fixture-blocking");
    let (_s, tls, der) = h2_server_with(
        &d,
        "keep-alive = 2\nsend-timeout = 2",
        &format!("[[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n"),
        &format!(
            "modules = [\"blocking\", \"static-file\"]\n[vhost.blocking]\nwait_for = \"{}\"\n",
            marker.display()
        ),
    );
    block_on(async {
        let (mut client, conn) = h2_connect(tls, &der, 65_535).await;
        let conn = tokio::spawn(conn);
        // 128 requests whose handlers block: they are in flight.
        let mut waiting = Vec::new();
        for _ in 0..128 {
            client = client.ready().await.unwrap();
            waiting.push(client.send_request(h2_get("/ten.txt"), true).unwrap().0);
        }
        client = client.ready().await.unwrap();
        let (extra, _) = client.send_request(h2_get("/ten.txt"), true).unwrap();
        let extra = tokio::time::timeout(Duration::from_secs(10), extra)
            .await
            .expect("the 129th request was not answered at once")
            .unwrap();
        assert_eq!(extra.status(), 503);
        // The handlers take longer than keep-alive and send-timeout: server
        // work, not an idle or stalled client.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            !conn.is_finished(),
            "the connection was closed while its handlers ran"
        );
        std::fs::write(&marker, "").unwrap();
        for resp in waiting {
            let r = tokio::time::timeout(Duration::from_secs(20), resp)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(r.status(), 200);
        }
    });
}

#[test]
fn a_cached_file_answered_on_the_blocking_pool_keeps_its_fields() {
    // static-file hands a cached file's fields to the engine beside the
    // response (tessera_core::body::set_prebuilt); a request handled on
    // the blocking pool carries them back to its worker
    let d_marker = TempDir::new("marker3");
    let marker = d_marker.path().join("go");
    std::fs::write(&marker, "").unwrap();
    let path = lib("tessera-fixture-blocking");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"slow.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"blocking\", \"static-file\"]\n[vhost.blocking]\nwait_for = \"{}\"\n",
        marker.display()
    );
    let s = Server::start(&cfg, |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let first = crate::static_file::cached(&s, "/ten.txt", "ten.txt");
    for r in [first, s.get("/ten.txt")] {
        assert_eq!((r.status, r.text().as_str()), (200, "0123456789"));
        assert_eq!(r.header_all("content-type"), ["text/plain; charset=utf-8"]);
        assert_eq!(r.header_all("accept-ranges"), ["bytes"]);
        assert_eq!(r.header_all("etag").len(), 1, "{:?}", r.headers);
        assert_eq!(r.header_all("last-modified").len(), 1);
        assert_eq!(r.header_all("server"), ["tessera"]);
    }
}

/// A blocking hook cannot be interrupted: a client that leaves while it
/// runs gets its request logged as 499 (never sent) when the hook returns.
/// Before, the answer nobody received was logged 200.
#[test]
fn a_client_that_leaves_during_a_blocking_hook_is_logged_499() {
    let d_marker = TempDir::new("marker-499");
    let marker = d_marker.path().join("go");
    let s = blocking_site(&marker, "");
    let mut c = std::net::TcpStream::connect(s.addr).unwrap();
    c.write_all(b"GET /ten.txt?left HTTP/1.1\r\nHost: slow.test\r\n\r\n")
        .unwrap();
    drop(c);
    std::fs::write(&marker, "").unwrap();
    assert_eq!(s.get("/ten.txt?stayed").status, 200);
    // the abandoned answer is dropped on the worker once the hook returns;
    // lines reach the file within the log's 50 ms batch
    let log = s.dir.path().join("a.log");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("?left HTTP/1.1\" ") || std::time::Instant::now() > until {
            break text;
        }
        std::thread::yield_now();
    };
    // actix-http does not watch the client: the answer is written (into
    // the socket's buffer, or refused by it) and logged as such
    let left = if std::env::var("TESSERA_SERVER__HTTP1_ENGINE").as_deref() == Ok("actix") {
        "\"GET /ten.txt?left HTTP/1.1\" 200 "
    } else {
        "\"GET /ten.txt?left HTTP/1.1\" 499 - "
    };
    assert!(text.contains(left), "{text}");
    assert!(
        text.contains("\"GET /ten.txt?stayed HTTP/1.1\" 200 10 "),
        "{text}"
    );
    // the status counts what the log says
    let want = if left.contains(" 499 ") {
        (1, 1)
    } else {
        (2, 0)
    };
    assert_eq!(slow_test_counts(&s), want);
}

/// Clients that send a request and close at once, while blocking hooks
/// run without waiting: each answer is either sent (200 with its 10 bytes)
/// or dropped unsent (499), and the status counts what the log says. The
/// window between the hook's end and the worker taking its answer once
/// gave `200 -` lines counted 2xx (a hostile review: 9 of 3,000).
#[test]
fn clients_that_leave_at_once_are_logged_and_counted_by_what_was_sent() {
    let d_marker = TempDir::new("marker-race");
    let marker = d_marker.path().join("go");
    std::fs::write(&marker, "").unwrap();
    let s = blocking_site(&marker, "");
    let n = 1500;
    for i in 0..n {
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        if i % 2 == 1 {
            // a reset instead of a FIN
            socket2::SockRef::from(&c)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
        }
        let _ = c
            .write_all(format!("GET /ten.txt?r{i} HTTP/1.1\r\nHost: slow.test\r\n\r\n").as_bytes());
    }
    let log = s.dir.path().join("a.log");
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= n || std::time::Instant::now() > until {
            break text;
        }
        std::thread::yield_now();
    };
    assert_eq!(text.lines().count(), n, "{text}");
    let (mut sent, mut unsent) = (0, 0);
    for l in text.lines() {
        if l.contains("\" 200 10 ") {
            sent += 1;
        } else if l.contains("\" 499 - ") {
            unsent += 1;
        } else {
            panic!("neither sent nor 499: {l}");
        }
    }
    assert_eq!(slow_test_counts(&s), (sent, unsent));
}

/// `slow.test`'s 2xx and 4xx responses, from the status page of
/// [`blocking_site`].
fn slow_test_counts(s: &Server) -> (u64, u64) {
    let prom = s
        .req("GET", "/?format=prometheus", &["Host: status.test"])
        .text();
    let count = |class: &str| {
        let key = format!("tessera_requests_total{{vhost=\"slow.test\",class=\"{class}\"}} ");
        prom.lines()
            .find_map(|l| l.strip_prefix(&key))
            .map_or(0, |n| n.trim().parse::<u64>().unwrap())
    };
    (count("2xx"), count("4xx"))
}

/// `shutdown-timeout` holds while a blocking hook still runs (the hook
/// here would run 20 s): the process does not wait for the blocking pool.
#[test]
fn the_shutdown_timeout_holds_while_a_blocking_hook_runs() {
    let d_marker = TempDir::new("marker-stop");
    let marker = d_marker.path().join("never");
    for engine in ["tessera", "actix"] {
        let s = blocking_site(
            &marker,
            &format!("shutdown-timeout = 1\nhttp1-engine = \"{engine}\"\n"),
        );
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        c.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: slow.test\r\n\r\n")
            .unwrap();
        // the status page would run the hook too: the request's bytes in
        // the server's socket are enough, the stop is what is timed
        let asked = std::time::Instant::now();
        assert!(s.stop().success());
        let took = asked.elapsed();
        assert!(
            took < std::time::Duration::from_secs(8),
            "{engine}: the stop took {took:?}"
        );
        drop(c);
    }
}

/// One worker; `blocking` (its hook waits for `marker`, at most 20 s),
/// `access-log` to `a.log` and `static-file` with `/ten.txt` on
/// `slow.test`, the status page on `status.test`;
/// `server_extra`: lines of `[server]`.
fn blocking_site(marker: &std::path::Path, server_extra: &str) -> Server {
    let path = lib("tessera-fixture-blocking");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n{server_extra}\n[[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"slow.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"blocking\", \"access-log\", \"static-file\"]\n[vhost.blocking]\nwait_for = \"{}\"\n[vhost.access-log]\npath = \"a.log\"\n\n\
         [[vhost]]\nserver-names = [\"status.test\"]\ndocument-root = \"www\"\nmodules = [\"status\"]\n",
        marker.display()
    );
    Server::start(&cfg, |d| {
        d.write("www/ten.txt", "0123456789");
    })
}

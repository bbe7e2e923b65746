//! The `fastcgi` module (issue 14, begun) against Debian's php-cgi, which the
//! tests start as a FastCGI server on 127.0.0.1 (`php-cgi -b`).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::{post, post_chunked, Response, Server};

/// A running `php-cgi -b 127.0.0.1:PORT` (also used by tests/userdir.rs).
pub(crate) struct Php {
    child: Child,
    pub(crate) port: u16,
}

impl Php {
    pub(crate) fn start() -> Option<Php> {
        if Command::new("php-cgi").arg("-v").output().is_err() {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        use std::os::unix::process::CommandExt;
        let child = Command::new("php-cgi")
            .args([
                "-d",
                "log_errors=1",
                "-d",
                "display_errors=0",
                "-d",
                "session.save_path=/tmp",
            ])
            .args(["-d", "upload_max_filesize=16M", "-d", "post_max_size=16M"])
            .arg("-b")
            .arg(format!("127.0.0.1:{port}"))
            .env("PHP_FCGI_CHILDREN", "2")
            // its own process group: its children are killed with it
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("php-cgi");
        let php = Php { child, port };
        wait_for(&format!("php-cgi on port {port}"), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Some(php)
    }
}

impl Drop for Php {
    fn drop(&mut self) {
        // php-cgi and the PHP_FCGI_CHILDREN it forked
        kill_group(&mut self.child);
    }
}

/// Kills `child` and the processes of its process group (it was started
/// with `process_group(0)`), and reaps it.
pub(crate) fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// Polls `ready` every 20 ms for at most 5 s (a back end starting up).
pub(crate) fn wait_for(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..250 {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} did not come up");
}

fn site(php: &Php) -> Server {
    Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nmax-body-size = 8388608\n\n[[upstream]]\nname = \"php\"\nservers = [\"127.0.0.1:{}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\nparams = {{ \"APP_ENV\" = \"test\" }}\n",
            php.port
        ),
        |d| {
            d.write(
                "www/info.php",
                "<?php header('Content-Type: text/plain'); foreach (['SCRIPT_NAME','SCRIPT_FILENAME','PATH_INFO','QUERY_STRING','REQUEST_METHOD','REMOTE_ADDR','SERVER_PROTOCOL','REQUEST_URI','HTTP_X_TEST','HTTP_X_DUP','HTTP_COOKIE','APP_ENV','REDIRECT_STATUS'] as $k) echo $k, '=', $_SERVER[$k] ?? '', \"\\n\";",
            );
            d.write(
                "www/post.php",
                "<?php $b = file_get_contents('php://input'); echo strlen($b), ' ', md5($b);",
            );
            d.write(
                "www/upload.php",
                "<?php $f = $_FILES['f']; echo $_POST['name'], ' ', $f['size'], ' ', md5_file($f['tmp_name']);",
            );
            d.write("www/status.php", "<?php header('Status: 418 I am a teapot'); echo 'tea';");
            d.write("www/redirect.php", "<?php header('Location: https://example.org/there'); ");
            d.write("www/stderr.php", "<?php error_log('oops from php'); echo 'ok';");
            d.write(
                "www/session.php",
                "<?php session_start(); $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1; echo $_SESSION['n'];",
            );
            d.write("www/index.php", "<?php echo 'index ran';");
            d.write("www/app.php/index.php", "<?php echo 'dir index ran';");
            d.write("www/uploads/evil.jpg", "<?php echo 'EXECUTED';");
            d.write("www/plain.txt", "static");
        },
    )
}

fn md5_hex(data: &[u8]) -> String {
    use std::io::Write;
    let mut c = Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(data).unwrap();
    String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()[..32].to_string()
}

fn var<'a>(r: &'a Response, k: &str) -> &'a str {
    let text = std::str::from_utf8(&r.body).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{k}=")))
        .unwrap_or_else(|| panic!("no {k} in {text}"))
}

#[test]
fn php_sees_the_cgi_variables() {
    let Some(php) = Php::start() else {
        panic!("php-cgi is not installed (apt-get install php-cgi)");
    };
    let s = site(&php);
    // X_Test would pose as X-Test in HTTP_X_TEST: dropped (nginx does too)
    let r = s.req(
        "GET",
        "/info.php/extra/path?a=1&b=2",
        &[
            "X-Test: yes",
            "X_Test: forged",
            "X-Dup: a",
            "X-Dup: b",
            "Cookie: c=1",
            "Cookie: d=2",
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(var(&r, "SCRIPT_NAME"), "/info.php");
    assert!(var(&r, "SCRIPT_FILENAME").ends_with("/www/info.php"));
    assert_eq!(var(&r, "PATH_INFO"), "/extra/path");
    assert_eq!(var(&r, "QUERY_STRING"), "a=1&b=2");
    assert_eq!(var(&r, "REQUEST_METHOD"), "GET");
    assert_eq!(var(&r, "REMOTE_ADDR"), "127.0.0.1");
    assert_eq!(var(&r, "SERVER_PROTOCOL"), "HTTP/1.1");
    assert_eq!(var(&r, "REQUEST_URI"), "/info.php/extra/path?a=1&b=2");
    assert_eq!(var(&r, "HTTP_X_TEST"), "yes");
    // RFC 3875 §4.1.18: a repeated field is one variable
    assert_eq!(var(&r, "HTTP_X_DUP"), "a, b");
    assert_eq!(var(&r, "HTTP_COOKIE"), "c=1; d=2");
    assert_eq!(var(&r, "APP_ENV"), "test");
    assert_eq!(var(&r, "REDIRECT_STATUS"), "200");
    // the script's Content-Type, once
    assert_eq!(r.header_all("content-type"), ["text/plain;charset=UTF-8"]);
    // a directory runs its index.php; other files stay static
    assert_eq!(s.get("/").text(), "index ran");
    assert_eq!(s.get("/plain.txt").text(), "static");
}

#[test]
fn bodies_forms_and_uploads_reach_php() {
    let Some(php) = Php::start() else {
        panic!("php-cgi is not installed (apt-get install php-cgi)");
    };
    let s = site(&php);
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    let r = Response::parse(&s.raw(&post("/post.php", &data)), false);
    assert_eq!(r.text(), format!("{} {}", data.len(), md5_hex(&data)));
    // chunked: collected, then sent with its length
    let chunked = post_chunked("/post.php", &data[..100_000], 30_000);
    let r = Response::parse(&s.raw(&chunked), false);
    assert_eq!(r.text(), format!("100000 {}", md5_hex(&data[..100_000])));
    // a multipart form with a file of several MiB
    let boundary = "tessera-boundary";
    let mut body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nalice\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").into_bytes();
    body.extend_from_slice(&data);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut req = format!(
        "POST /upload.php HTTP/1.1\r\nHost: site.test\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let r = Response::parse(&s.raw(&req), false);
    assert_eq!(r.text(), format!("alice {} {}", data.len(), md5_hex(&data)));
}

#[test]
fn status_location_cookies_and_stderr() {
    let Some(php) = Php::start() else {
        panic!("php-cgi is not installed (apt-get install php-cgi)");
    };
    let s = site(&php);
    let r = s.get("/status.php");
    assert_eq!((r.status, r.text().as_str()), (418, "tea"));
    let r = s.get("/redirect.php");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("https://example.org/there"));
    assert_eq!(s.get("/stderr.php").text(), "ok");
    assert!(s.stderr().contains("oops from php"), "{}", s.stderr());
    let first = s.get("/session.php");
    assert_eq!(first.text(), "1");
    let cookie = first.header("set-cookie").expect("a session cookie");
    let id = cookie.split(';').next().unwrap();
    let second = s.req("GET", "/session.php", &[&format!("Cookie: {id}")]);
    assert_eq!(second.text(), "2");
}

#[test]
fn an_upload_named_like_a_script_is_never_executed() {
    let Some(php) = Php::start() else {
        panic!("php-cgi is not installed (apt-get install php-cgi)");
    };
    let s = site(&php);
    let r = s.get("/uploads/evil.jpg/x.php");
    assert_eq!(r.status, 404);
    assert!(!r.text().contains("EXECUTED"));
    // a missing script is 404 without calling php (check-local)
    assert_eq!(s.get("/missing.php").status, 404);
    // and the image itself is served as a file, not run
    assert_eq!(s.get("/uploads/evil.jpg").text(), "<?php echo 'EXECUTED';");
}

#[test]
fn a_directory_named_like_a_script_gets_its_slash_as_under_lighttpd() {
    let Some(php) = Php::start() else {
        panic!("php-cgi is not installed (apt-get install php-cgi)");
    };
    let s = site(&php);
    // the directory app.php/: 301 to add the slash (lighttpd's physical-path
    // check), not 404 from check-local
    let r = s.get("/app.php");
    assert_eq!(r.status, 301, "{}", r.text());
    assert!(
        r.header("location")
            .is_some_and(|l| l.ends_with("/app.php/")),
        "{:?}",
        r.headers
    );
    // then its index script runs
    assert_eq!(s.get("/app.php/").text(), "dir index ran");
    // a missing script is still 404 without calling php
    assert_eq!(s.get("/app.php/missing.php").status, 404);
}

#[test]
fn a_php_backend_that_is_down_is_502() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    use std::os::unix::process::CommandExt;
    let fake = Php {
        child: Command::new("true").process_group(0).spawn().unwrap(),
        port,
    };
    let s = site(&fake);
    assert_eq!(s.get("/info.php").status, 502);
}

/// A PHP server that cannot be reached got nothing: the request goes to the
/// next server of the upstream (lighttpd's mod_fastcgi, nginx's
/// `fastcgi_next_upstream error`), and the failure is logged with the
/// server's address.
#[test]
fn a_php_server_that_cannot_be_reached_is_skipped_for_the_next() {
    let d = crate::util::TempDir::new("fpm-next");
    let fpm = Fpm::start(&d);
    let dead = d.path().join("nobody.sock");
    let s = Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:{}\", \"unix:{}\"]\nmax-fails = 0\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
            dead.display(),
            fpm.socket.display()
        ),
        |w| {
            w.write("www/hello.php", "<?php echo 'hello';");
        },
    );
    // round-robin, never marked down: every other request meets the dead
    // server first
    for _ in 0..4 {
        let r = s.get("/hello.php");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "hello"),
            "{}",
            s.stderr()
        );
    }
    assert!(s.stderr().contains("nobody.sock"), "{}", s.stderr());
}

/// A running php-fpm (Debian's php-fpm package) on a Unix socket in `dir`.
struct Fpm {
    child: Child,
    socket: std::path::PathBuf,
}

impl Fpm {
    fn start(dir: &crate::util::TempDir) -> Fpm {
        use std::os::unix::process::CommandExt;
        let bin = std::fs::read_dir("/usr/sbin")
            .ok()
            .and_then(|d| {
                d.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("php-fpm"))
                })
            })
            .expect("php-fpm is not installed (apt-get install php-fpm)");
        let socket = dir.path().join("fpm.sock");
        let conf = dir.write(
            "fpm.conf",
            format!(
                "[global]\nerror_log = {d}/fpm.log\ndaemonize = no\npid = {d}/fpm.pid\n\n[www]\nlisten = {s}\npm = static\npm.max_children = 2\nclear_env = no\ncatch_workers_output = yes\n",
                d = dir.path().display(),
                s = socket.display()
            ),
        );
        let child = Command::new(bin)
            .arg("-y")
            .arg(&conf)
            .args(["-R", "-F"])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("php-fpm");
        let fpm = Fpm { child, socket };
        wait_for("php-fpm", || {
            std::os::unix::net::UnixStream::connect(&fpm.socket).is_ok()
        });
        fpm
    }
}

impl Drop for Fpm {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}

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

/// A php-fpm site with the status module on `/server-status`; `upstream`
/// holds extra `[[upstream]]` keys and `fastcgi` extra `[vhost.fastcgi]` keys.
fn fpm_site(fpm: &Fpm, upstream: &str, fastcgi: &str) -> Server {
    Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:{}\"]\n{upstream}\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\n{fastcgi}\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/server-status\" }}\n[vhost.rule.status]\nallow = [\"127.0.0.1\"]\n",
            fpm.socket.display()
        ),
        |w| {
            w.write("www/hello.php", "<?php echo 'hello';");
            w.write("www/plain.txt", "plain text\n");
            w.write(
                "www/send.php",
                "<?php header('X-Sendfile: ' . $_GET['f']); header('Content-Disposition: attachment; filename=\"f.bin\"'); header('ETag: \"from-php\"'); header('Last-Modified: Mon, 01 Jan 2001 00:00:00 GMT'); header('Cache-Control: max-age=60'); header('Content-Encoding: gzip'); echo 'BODY FROM PHP';",
            );
            w.write(
                "www/gone.php",
                "<?php http_response_code(404); header('X-Sendfile: ' . $_GET['f']); header('Cache-Control: no-store'); echo 'BODY FROM PHP';",
            );
            w.write(
                "www/reset.php",
                "<?php http_response_code(205); header('X-Sendfile: ' . $_GET['f']);",
            );
            w.write(
                "www/down.php",
                "<?php http_response_code(503); header('X-Sendfile: ' . $_GET['f']);",
            );
            w.write(
                "www/accel.php",
                "<?php header('X-Accel-Redirect: /plain.txt'); echo 'BODY FROM PHP';",
            );
            w.write(
                "www/local.php",
                "<?php header('Location: /plain.txt', true, 200); echo 'dropped';",
            );
            w.write("www/loop.php", "<?php header('Location: /loop.php', true, 200);");
            w.write("www/slow.php", "<?php usleep(4000000); echo 'late';");
            let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            w.write("files/big.bin", data);
            w.write("secret/key.txt", "secret");
        },
    )
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

#[test]
fn x_sendfile_serves_files_inside_the_docroot_only() {
    let d = crate::util::TempDir::new("fpm-xsendfile");
    let fpm = Fpm::start(&d);
    let s = fpm_site(
        &fpm,
        "",
        "x-sendfile = true\nx-sendfile-docroot = [\"files\"]",
    );
    let files = s
        .root()
        .parent()
        .unwrap()
        .join("files")
        .canonicalize()
        .unwrap();
    let big = files.join("big.bin");
    let data = std::fs::read(&big).unwrap();
    let q = |p: &std::path::Path| format!("/send.php?f={}", p.display());
    let r = s.get(&q(&big));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, data, "the file, not PHP's body");
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=\"f.bin\""),
        "the back end's other fields are kept"
    );
    assert!(
        r.header("x-sendfile").is_none(),
        "the path never reaches the client"
    );
    // the file is sent as it is: the back end's coding does not describe it
    assert!(r.header("content-encoding").is_none());
    assert_eq!(r.header("cache-control"), Some("max-age=60"));
    // the file's validators, once: the back end's describe its own body
    assert_eq!(r.header_all("etag").len(), 1, "{:?}", r.header_all("etag"));
    assert_ne!(r.header("etag"), Some("\"from-php\""));
    assert_eq!(r.header_all("last-modified").len(), 1);
    assert_ne!(
        r.header("last-modified"),
        Some("Mon, 01 Jan 2001 00:00:00 GMT")
    );
    // static-file's Range and validators
    let r = s.req("GET", &q(&big), &["Range: bytes=10-19"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[10..20]);
    let etag = r.header("etag").expect("an ETag").to_string();
    let r = s.req("GET", &q(&big), &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);
    // a 304 keeps what a cache needs of the 200 (RFC 9110 §15.4.5)
    assert_eq!(r.header("cache-control"), Some("max-age=60"));
    // several ranges: multipart/byteranges, not the back end's type
    let r = s.req("GET", &q(&big), &["Range: bytes=0-1,5-6"]);
    assert_eq!(r.status, 206);
    let ct = r.header("content-type").unwrap_or_default();
    assert!(ct.starts_with("multipart/byteranges; boundary="), "{ct}");
    // outside x-sendfile-docroot, or climbing out of it: 403, logged
    let secret = s
        .root()
        .parent()
        .unwrap()
        .join("secret/key.txt")
        .canonicalize()
        .unwrap();
    let r = s.get(&q(&secret));
    assert_eq!(r.status, 403);
    assert!(!r.text().contains("secret"));
    let climb = format!("{}/../secret/key.txt", files.display());
    assert_eq!(s.get(&format!("/send.php?f={climb}")).status, 403);
    assert!(s.stderr().contains("x-sendfile: refused"), "{}", s.stderr());
    // a missing file inside it: 404
    assert_eq!(s.get(&q(&files.join("none.bin"))).status, 404);
    // once static-file's open-file cache keeps the file (its change time 2 s
    // old), the answer still has one Content-Type, the back end's
    let changed = {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&big).unwrap();
        std::time::UNIX_EPOCH + std::time::Duration::new(m.ctime() as u64, 0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::SystemTime::now()
        .duration_since(changed)
        .unwrap_or_default()
        < std::time::Duration::from_millis(3100)
    {
        assert!(std::time::Instant::now() < deadline, "big.bin never aged");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for _ in 0..2 {
        let r = s.get(&q(&big));
        assert_eq!(r.body, data);
        assert_eq!(
            r.header_all("content-type").len(),
            1,
            "{:?}",
            r.header_all("content-type")
        );
    }
    // X-Accel-Redirect: the URL path is served instead
    let r = s.get("/accel.php");
    assert_eq!((r.status, r.text().as_str()), (200, "plain text\n"));
    // a POST gets the whole file, its Range aside (lighttpd serves
    // X-Sendfile for any method; static-file alone would answer 405)
    let r = s.req("POST", &q(&big), &["Content-Length: 0", "Range: bytes=0-1"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, data);
    // the back end's own status, with the whole file as its body, whatever
    // the client's conditions and Range (lighttpd keeps a status other
    // than 200); the file's validators are not that answer's
    let gone = format!("/gone.php?f={}", big.display());
    let r = s.req(
        "GET",
        &gone,
        &["Range: bytes=0-1", &format!("If-None-Match: {etag}")],
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.body, data);
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert!(r.header("etag").is_none() && r.header("last-modified").is_none());
    let r = s.req("HEAD", &gone, &[]);
    assert_eq!((r.status, r.body.len()), (404, 0));
    // a file that cannot be served: its 404, or the back end's error status
    let none = files.join("none.bin");
    assert_eq!(
        s.get(&format!("/gone.php?f={}", none.display())).status,
        404
    );
    assert_eq!(
        s.get(&format!("/down.php?f={}", none.display())).status,
        503
    );
    let r = s.get(&format!("/down.php?f={}", big.display()));
    assert_eq!((r.status, r.body == data), (503, true));
    // 205 has no content (RFC 9110 §15.3.6)
    let r = s.get(&format!("/reset.php?f={}", big.display()));
    assert_eq!((r.status, r.body.len()), (205, 0));
    // a trailing slash names a directory, not the file
    let r = s.get(&format!("/send.php?f={}/", big.display()));
    assert_eq!(r.status, 403);
}

#[test]
fn without_x_sendfile_the_header_is_dropped_and_the_body_sent() {
    let d = crate::util::TempDir::new("fpm-no-xsendfile");
    let fpm = Fpm::start(&d);
    let s = fpm_site(&fpm, "", "");
    let r = s.get("/send.php?f=/etc/passwd");
    assert_eq!((r.status, r.text().as_str()), (200, "BODY FROM PHP"));
    assert!(r.header("x-sendfile").is_none());
    let r = s.get("/accel.php");
    assert_eq!(r.text(), "BODY FROM PHP");
}

#[test]
fn a_local_location_is_an_internal_redirect() {
    let d = crate::util::TempDir::new("fpm-local");
    let fpm = Fpm::start(&d);
    let s = fpm_site(&fpm, "", "");
    // RFC 3875 §6.2.2: the client gets /plain.txt itself, not a redirect
    let r = s.get("/local.php");
    assert_eq!((r.status, r.text().as_str()), (200, "plain text\n"));
    assert!(r.header("location").is_none());
    // a POST continues as a GET (static-file would answer 405 otherwise)
    let r = s.req("POST", "/local.php", &["Content-Length: 0"]);
    assert_eq!((r.status, r.text().as_str()), (200, "plain text\n"));
    // a redirect loop ends with 500
    assert_eq!(s.get("/loop.php").status, 500);
}

/// A site whose PHP is php-cgi spawned by Tessera (`[upstream.spawn]`,
/// lighttpd's `bin-path`) with `procs` processes on Unix sockets in the
/// test directory.
fn spawned_config(dir: &std::path::Path, procs: usize, children: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:{}/php.sock\"]\n[upstream.spawn]\nbin-path = \"/usr/bin/php-cgi -d session.save_path=/tmp\"\nmax-procs = {procs}\nbin-environment = {{ PHP_FCGI_CHILDREN = \"{children}\", APP_MODE = \"spawned\" }}\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
        dir.display()
    )
}

fn need_php_cgi() {
    assert!(
        std::path::Path::new("/usr/bin/php-cgi").exists(),
        "php-cgi is not installed (apt-get install php-cgi)"
    );
}

/// `php-cgi` processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ..."
        let Some((comm, rest)) = stat.split_once(") ") else {
            continue;
        };
        let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if comm.ends_with("(php-cgi") && ppid == Some(parent) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
}

#[test]
fn php_cgi_spawned_by_tessera_runs_restarts_reloads_and_stops() {
    need_php_cgi();
    let d = crate::util::TempDir::new("spawn");
    let config = |procs, children| {
        spawned_config(d.path(), procs, children)
            .replace("workers = 1\n", "workers = 1\nshutdown-timeout = 2\n")
    };
    let s = Server::start(&config(2, "1"), |w| {
        w.write(
            "www/who.php",
            "<?php echo getenv('APP_MODE'), ' ', getmypid();",
        );
    });
    let pid_of = |r: &Response| -> u32 {
        let t = r.text();
        let (mode, pid) = t.split_once(' ').unwrap_or_else(|| panic!("{t}"));
        assert_eq!(mode, "spawned", "bin-environment reaches PHP");
        pid.parse().unwrap()
    };
    // two processes, each on its own socket, balanced round-robin
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let r = s.get("/who.php");
        assert_eq!(r.status, 200, "{} {}", r.text(), s.stderr());
        seen.insert(pid_of(&r));
    }
    assert_eq!(seen.len(), 2, "both php-cgi processes answered: {seen:?}");
    for i in 0..2 {
        assert!(d.path().join(format!("php.sock-{i}")).exists());
    }
    let parents = children_of(s.pid());
    assert_eq!(parents.len(), 2, "two php-cgi processes under Tessera");
    // a process that crashes is started again
    let victim = parents[0];
    assert!(Command::new("kill")
        .args(["-KILL", "--", &format!("-{victim}")])
        .status()
        .unwrap()
        .success());
    let mut back = false;
    for _ in 0..250 {
        let now = children_of(s.pid());
        if now.len() == 2 && !now.contains(&victim) {
            back = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(back, "the killed process was not restarted: {}", s.stderr());
    for _ in 0..4 {
        assert_eq!(s.get("/who.php").status, 200);
    }
    assert!(s.stderr().contains("starting it again"), "{}", s.stderr());
    // a reload that does not change them keeps them
    let before = children_of(s.pid());
    s.reload(None);
    assert_eq!(children_of(s.pid()), before, "unchanged processes are kept");
    // one that changes them replaces them: the old ones stop
    // shutdown-timeout (here 2 s) later
    s.reload(Some(&config(1, "2")));
    let mut replaced = Vec::new();
    for _ in 0..500 {
        replaced = children_of(s.pid());
        if replaced.len() == 1 && before.iter().all(|p| !alive(*p)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(replaced.len(), 1, "max-procs = 1 after the reload");
    assert!(
        before.iter().all(|p| !alive(*p)),
        "the old processes stopped"
    );
    assert_eq!(s.get("/who.php").status, 200);
    // shutdown stops them, with the children php-cgi forked
    let last = replaced[0];
    // php-cgi forks its children one after the other
    let mut forked = children_of(last);
    for _ in 0..250 {
        if forked.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        forked = children_of(last);
    }
    assert_eq!(forked.len(), 2, "PHP_FCGI_CHILDREN = 2");
    s.stop();
    for p in std::iter::once(last).chain(forked) {
        // killed before Tessera exits; reaping by init may lag a little
        for _ in 0..100 {
            if !alive(p) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(p), "php-cgi {p} outlived Tessera");
    }
    assert!(
        !d.path().join("php.sock-0").exists(),
        "the socket is removed"
    );
}

#[test]
fn a_spawn_table_that_cannot_work_is_a_configuration_error() {
    let d = crate::util::TempDir::new("spawn-bad");
    let conf = d.write(
        "server.toml",
        "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:/tmp/x.sock\", \"unix:/tmp/y.sock\"]\n[upstream.spawn]\nbin-path = \"/usr/bin/php-cgi\"\n\n[[vhost]]\ndefault = true\ndocument-root = \".\"\nmodules = [\"fastcgi\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
    );
    let out = crate::util::check_config(&conf);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("upstream[0].servers") && err.contains("exactly one"),
        "{err}"
    );
    d.write(
        "server.toml",
        "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:/tmp/x.sock\"]\n[upstream.spawn]\nbin-path = \"/nonexistent/php-cgi\"\n\n[[vhost]]\ndefault = true\ndocument-root = \".\"\nmodules = [\"fastcgi\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
    );
    let out = crate::util::check_config(&conf);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("upstream[0].spawn.bin-path") && err.contains("/nonexistent/php-cgi"),
        "{err}"
    );
}

#[test]
fn an_internal_only_path_is_reached_through_x_accel_redirect_alone() {
    // nginx's `internal` location: /protected/ is refused to clients, and
    // served when the application hands it out
    let d = crate::util::TempDir::new("fpm-internal");
    let fpm = Fpm::start(&d);
    let s = fpm_site(
        &fpm,
        "",
        "x-sendfile = true\n\n[[vhost.rule]]\nmatch = { all = [{ path-prefix = \"/protected/\" }, { internal = false }] }\n[vhost.rule.access]\nrules = [{ deny = \"all\" }]",
    );
    std::fs::create_dir_all(s.root().join("protected")).unwrap();
    std::fs::write(s.root().join("protected/report.txt"), "members only\n").unwrap();
    std::fs::write(
        s.root().join("give.php"),
        "<?php header('X-Accel-Redirect: /protected/report.txt');",
    )
    .unwrap();
    assert_eq!(s.get("/protected/report.txt").status, 403);
    let r = s.get("/give.php");
    assert_eq!((r.status, r.text().as_str()), (200, "members only\n"));
}

/// A reload that replaces the spawned processes lets the requests they are
/// answering finish: the old processes are retired, stopped only
/// `shutdown-timeout` seconds later, while new requests reach the new
/// processes on a new socket at the same path.
#[test]
fn a_reload_that_replaces_spawned_processes_lets_their_requests_finish() {
    use std::io::{Read, Write};
    need_php_cgi();
    let d = crate::util::TempDir::new("spawn-retire");
    let gate = d.path().join("gate");
    std::fs::create_dir_all(&gate).unwrap();
    // the old process is stopped shutdown-timeout s after the reload
    let config = |children| {
        spawned_config(d.path(), 1, children)
            .replace("workers = 1\n", "workers = 1\nshutdown-timeout = 10\n")
    };
    let s = Server::start(&config("1"), |w| {
        // answers once the test opens the gate: an exchange in progress
        // for as long as the test wants
        w.write(
            "www/slow.php",
            format!(
                "<?php touch('{g}/started'); $n = 0; while (!file_exists('{g}/open') && $n++ < 2000) usleep(5000); echo 'slow done ', getmypid();",
                g = gate.display()
            ),
        );
        w.write("www/pid.php", "<?php echo getmypid();");
    });
    // the supervisor starts php-cgi on its own thread
    let mut old = Vec::new();
    for _ in 0..500 {
        old = children_of(s.pid());
        if !old.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(old.len(), 1, "{}", s.stderr());
    let addr = s.addr;
    let slow = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(b"GET /slow.php HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    });
    let mut started = false;
    for _ in 0..500 {
        if gate.join("started").exists() {
            started = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(started, "slow.php never ran: {}", s.stderr());
    // PHP_FCGI_CHILDREN changes: the process is replaced
    s.reload(Some(&config("2")));
    let mut replaced = false;
    for _ in 0..500 {
        let now = children_of(s.pid());
        if now.iter().any(|p| !old.contains(p)) {
            replaced = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(replaced, "no new process: {}", s.stderr());
    // new requests go to the new process while the old one still works
    let r = s.get("/pid.php");
    assert_eq!(r.status, 200, "{} {}", r.text(), s.stderr());
    assert!(
        alive(old[0]),
        "the old process was stopped during its request"
    );
    std::fs::write(gate.join("open"), "").unwrap();
    let answer = slow.join().unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("slow done"),
        "the request in progress was lost: {answer} {}",
        s.stderr()
    );
    // then the old process goes, shutdown-timeout (10 s) after the reload
    let mut gone = false;
    for _ in 0..1500 {
        if !alive(old[0]) {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone, "the retired process still runs: {}", s.stderr());
    assert_eq!(s.get("/pid.php").status, 200);
    assert!(
        d.path().join("php.sock-0").exists(),
        "the new process's socket was removed with the old one"
    );
    s.stop();
}

/// Reloads that take a spawned address away and give it back before the
/// retired process stops, and quick back-and-forth reloads: every socket
/// stays served by the newest process (a retired supervisor removes only
/// its own socket file, and a new process takes over a retired one's path).
#[test]
fn reloads_that_take_an_address_away_and_back_keep_every_socket_served() {
    need_php_cgi();
    let d = crate::util::TempDir::new("spawn-flip");
    let config = |procs, mode: &str| {
        spawned_config(d.path(), procs, "1")
            .replace("APP_MODE = \"spawned\"", &format!("APP_MODE = \"{mode}\""))
            .replace("workers = 1\n", "workers = 1\nshutdown-timeout = 2\n")
    };
    let s = Server::start(&config(2, "a"), |w| {
        w.write("www/mode.php", "<?php echo getenv('APP_MODE');");
    });
    // php.sock-1 goes away with its process, and is wanted again while
    // that process is still retiring
    s.reload(Some(&config(1, "b")));
    s.reload(Some(&config(2, "c")));
    for _ in 0..5 {
        s.reload(Some(&config(2, "d")));
        s.reload(Some(&config(2, "c")));
    }
    // every process but the last two retires 2 s after its reload
    let before = children_of(s.pid());
    s.reload(Some(&config(2, "e")));
    let mut settled = false;
    for _ in 0..1000 {
        if before.iter().all(|p| !alive(*p)) && children_of(s.pid()).len() == 2 {
            settled = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(settled, "retired processes remain: {}", s.stderr());
    // requests keep reaching the newest processes while the retired ones'
    // supervisors finish
    for _ in 0..40 {
        let r = s.get("/mode.php");
        assert_eq!((r.status, r.text().as_str()), (200, "e"), "{}", s.stderr());
    }
    for i in 0..2 {
        assert!(d.path().join(format!("php.sock-{i}")).exists());
    }
    s.stop();
}

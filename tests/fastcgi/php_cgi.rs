//! php-cgi as a FastCGI server (`php-cgi -b`): CGI variables, bodies, headers, failures.

use std::process::Command;

use crate::util::{post, post_chunked, Response, Server};

use super::*;

fn site(php: &Php) -> Server {
    Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nmax-body-size = 8388608\n\n[[upstream]]\nname = \"php\"\nservers = [\"127.0.0.1:{}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\nparams = {{ \"APP_ENV\" = \"test\" }}\n",
            php.port
        ),
        |d| {
            d.write(
                "www/info.php",
                "<?php header('Content-Type: text/plain'); foreach (['SCRIPT_NAME','SCRIPT_FILENAME','PATH_INFO','QUERY_STRING','REQUEST_METHOD','REMOTE_ADDR','SERVER_PROTOCOL','REQUEST_URI','HTTP_X_TEST','HTTP_X_FORGED','HTTP_X_DUP','HTTP_COOKIE','APP_ENV','REDIRECT_STATUS'] as $k) echo $k, '=', $_SERVER[$k] ?? '', \"\\n\";",
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
            d.write(
                "www/cl_short.php",
                "<?php header('Content-Length: 100'); echo 'short';",
            );
            d.write(
                "www/cl_long.php",
                "<?php header('Content-Length: 3'); echo '0123456789';",
            );
            d.write(
                "www/cl_stream.php",
                "<?php header('Content-Length: 300000'); echo str_repeat('x', 200000);",
            );
        },
    )
}

#[test]
fn php_sees_the_cgi_variables() {
    let Some(php) = Php::start() else {
        panic!("php-cgi is not installed (apt-get install php-cgi)");
    };
    let s = site(&php);
    // X_Test would pose as X-Test in HTTP_X_TEST, and X.Forged as
    // X-Forged (PHP maps `.` to `_`): dropped (nginx does too)
    let r = s.req(
        "GET",
        "/info.php/extra/path?a=1&b=2",
        &[
            "X-Test: yes",
            "X_Test: forged",
            "X.Forged: forged",
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
    assert_eq!(var(&r, "HTTP_X_FORGED"), "");
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

/// The application's Content-Length holds: a body that ends short never
/// looks complete (502 when known before anything is sent, else a body
/// cut off without its end), bytes past it are not sent, and a HEAD
/// answer (no body by rule) is not held to it.
#[test]
fn the_applications_content_length_is_held_to() {
    let Some(php) = Php::start() else {
        panic!("php-cgi is not installed (apt-get install php-cgi)");
    };
    let s = site(&php);
    assert_eq!(s.get("/cl_short.php").status, 502);
    let r = s.get("/cl_long.php");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "012");
    // HEAD: what a GET would carry, the declared length or none (RFC 9110
    // §9.3.2, §8.6), never a length of 0 that GET would not send
    let r = s.req("HEAD", "/cl_short.php", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("100"));
    let r = s.req("HEAD", "/index.php", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), None);
    let raw = s.raw(b"GET /cl_stream.php HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n");
    let text = String::from_utf8_lossy(&raw);
    let complete = text.starts_with("HTTP/1.1 200") && text.ends_with("\r\n0\r\n\r\n");
    assert!(
        !complete && (text.starts_with("HTTP/1.1 502") || text.starts_with("HTTP/1.1 200")),
        "{}",
        &text[..text.len().min(300)]
    );
}

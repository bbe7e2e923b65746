//! Virtual host selection (RFC 9110 §7.2, RFC 9112 §3.2) and request-level
//! protocol checks, over real HTTP.

use crate::util::Server;

fn two_sites() -> Server {
    let cfg = r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1

[[vhost]]
server-names = ["default.test"]
default = true
document-root = "d"
modules = ["static-file"]

[[vhost]]
server-names = ["site.test", "[::1]"]
document-root = "a"
modules = ["static-file"]

[[vhost]]
server-names = ["*.example.com"]
document-root = "w"
modules = ["static-file"]

[[vhost]]
server-names = ["*.deep.example.com"]
document-root = "deep"
modules = ["static-file"]
"#;
    Server::start(cfg, |d| {
        for (dir, body) in [("d", "D"), ("a", "A"), ("w", "W"), ("deep", "DEEP")] {
            d.write(&format!("{dir}/index.html"), body);
        }
    })
}

fn body_for(s: &Server, host_line: &str) -> String {
    let r = s.req("GET", "/", &[host_line]);
    assert_eq!(r.status, 200, "{host_line}");
    r.text()
}

#[test]
fn host_matching() {
    let s = two_sites();
    assert_eq!(body_for(&s, "Host: site.test"), "A");
    assert_eq!(body_for(&s, "Host: SITE.Test"), "A");
    assert_eq!(body_for(&s, "Host: site.test:8080"), "A");
    assert_eq!(body_for(&s, "Host: site.test."), "A");
    assert_eq!(body_for(&s, "Host: site.test.:80"), "A");
    assert_eq!(body_for(&s, "Host: [::1]:8080"), "A");
    assert_eq!(body_for(&s, "Host: a.example.com"), "W");
    assert_eq!(body_for(&s, "Host: x.deep.example.com"), "DEEP");
    assert_eq!(body_for(&s, "Host: example.com"), "D");
    assert_eq!(body_for(&s, "Host: unknown.test"), "D");
}

#[test]
fn http10_without_host_gets_default_and_http11_without_host_400() {
    let s = two_sites();
    let raw = s.raw(b"GET / HTTP/1.0\r\n\r\n");
    let r = crate::util::Response::parse(&raw, false);
    assert_eq!((r.status, r.text().as_str()), (200, "D"));
    let raw = s.raw(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_eq!(crate::util::Response::parse(&raw, false).status, 400);
}

#[test]
fn duplicate_or_invalid_host_is_400() {
    let s = two_sites();
    assert_eq!(
        s.req("GET", "/", &["Host: site.test", "Host: site.test"])
            .status,
        400
    );
    assert_eq!(s.req("GET", "/", &["Host: a b"]).status, 400);
    assert_eq!(s.req("GET", "/", &["Host: site.test/x"]).status, 400);
    // RFC 9110 §4.2.1: an empty host; a port beyond 65535
    assert_eq!(s.req("GET", "/", &["Host: :80"]).status, 400);
    assert_eq!(s.req("GET", "/", &["Host: site.test:99999"]).status, 400);
    // an empty label, as nginx and lighttpd refuse it; one trailing dot is
    // a fully qualified name
    for h in [
        "..",
        ".",
        "site..test",
        ".site.test",
        "site.test..",
        "..:80",
        "[.]",
        "[:]",
        "[1.2.3.4]",
    ] {
        assert_eq!(
            s.req("GET", "/", &[&format!("Host: {h}")]).status,
            400,
            "{h}"
        );
    }
    let r = s.req("GET", "/", &["Host: site.test."]);
    assert_eq!((r.status, r.text().as_str()), (200, "A"));
}

#[test]
fn absolute_form_target_wins_over_host() {
    let s = two_sites();
    let r = s.req("GET", "http://site.test/", &["Host: other.test"]);
    assert_eq!((r.status, r.text().as_str()), (200, "A"));
}

#[test]
fn header_line_without_colon_is_400() {
    let s = two_sites();
    let raw = s.raw(
        b"GET / HTTP/1.1\r\nHost: site.test\r\nthis line has no colon\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
}

#[test]
fn suffix_and_regex_names() {
    let cfg = r#"
[server]
listen = ["127.0.0.1:0"]

[[vhost]]
server-names = ["default.test"]
default = true
document-root = "d"
modules = ["static-file"]

[[vhost]]
server-names = [".example.org"]
document-root = "s"
modules = ["static-file"]

[[vhost]]
server-names = ["~^app[0-9]+\\.test$"]
document-root = "r"
modules = ["static-file"]

[[vhost]]
server-names = ["FQ.test.", "*.wild.test."]
document-root = "f"
modules = ["static-file"]
"#;
    let s = Server::start(cfg, |d| {
        for (dir, body) in [("d", "D"), ("s", "S"), ("r", "R"), ("f", "F")] {
            d.write(&format!("{dir}/index.html"), body);
        }
    });
    assert_eq!(body_for(&s, "Host: example.org"), "S");
    assert_eq!(body_for(&s, "Host: www.example.org:8080"), "S");
    assert_eq!(body_for(&s, "Host: APP7.test:81"), "R");
    assert_eq!(body_for(&s, "Host: app.test"), "D");
    assert_eq!(body_for(&s, "Host: xapp7.test"), "D");
    // a fully qualified name's trailing dot, in the configuration or the
    // request, names the same vhost
    for h in [
        "fq.test",
        "fq.test.",
        "FQ.TEST.:80",
        "a.wild.test",
        "a.wild.test.",
    ] {
        assert_eq!(body_for(&s, &format!("Host: {h}")), "F", "{h}");
    }
}

/// Issue 11 #3: a vhost with `listen` answers only on that listener; on the
/// others its host name goes to the vhosts without `listen` (here the
/// default), so a site meant for one port is not served on another.
#[test]
fn listen_restricts_a_vhost_to_its_listener() {
    let admin_port = crate::util::free_port();
    let cfg = format!(
        r#"
[server]
listen = ["127.0.0.1:0", "127.0.0.1:{admin_port}"]
workers = 1

[[vhost]]
server-names = ["main.test"]
default = true
document-root = "m"
modules = ["static-file"]

[[vhost]]
server-names = ["admin.test", "*.admin.test"]
listen = ["127.0.0.1:{admin_port}"]
document-root = "a"
modules = ["static-file"]
"#
    );
    let s = Server::start(&cfg, |d| {
        d.write("m/index.html", "MAIN");
        d.write("a/index.html", "ADMIN");
    });
    assert_ne!(s.addr.port(), admin_port);
    let on_admin = |host: &str| {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", admin_port)).unwrap();
        write!(
            c,
            "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut buf = Vec::new();
        c.read_to_end(&mut buf).unwrap();
        crate::util::Response::parse(&buf, false).text()
    };
    assert_eq!(on_admin("admin.test"), "ADMIN");
    assert_eq!(on_admin("x.admin.test:8443"), "ADMIN");
    assert_eq!(on_admin("main.test"), "MAIN");
    assert_eq!(body_for(&s, "Host: admin.test"), "MAIN");
    assert_eq!(body_for(&s, "Host: x.admin.test"), "MAIN");
    assert_eq!(body_for(&s, "Host: main.test"), "MAIN");
}

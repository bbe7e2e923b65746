//! `mass-vhost` over real HTTP: the document root from the host name
//! (lighttpd simple-vhost and evhost patterns), the default root for unknown
//! hosts, 400 for hosts that are not valid names, and caches that keep one
//! host's files apart from another's.

use std::io::Read;

use crate::util::{Response, Server};

fn host(s: &Server, path: &str, host: &str) -> Response {
    s.req("GET", path, &[&format!("Host: {host}")])
}

fn server(default_root: bool) -> Server {
    let extra = format!(
        "[vhost.mass-vhost]\npath-pattern = \"vhosts/%_/htdocs\"\n{}",
        if default_root {
            "default-root = \"default\"\n"
        } else {
            ""
        }
    );
    Server::site("\"mass-vhost\", \"static-file\"", &extra, |d| {
        d.write("vhosts/a.test/htdocs/index.html", "A");
        d.write("vhosts/b.test/htdocs/index.html", "B");
        d.write("vhosts/b.test/htdocs/sub/f.txt", "B-SUB");
        d.write("vhosts/127.0.0.1/htdocs/index.html", "IP");
        d.write("vhosts/index.html", "VHOSTS");
        d.write("default/index.html", "DEFAULT");
        d.write("www/index.html", "WWW");
        std::os::unix::fs::symlink("a.test", d.path().join("vhosts/www.a.test")).unwrap();
        std::os::unix::fs::symlink(
            "../../b.test/htdocs/index.html",
            d.path().join("vhosts/a.test/htdocs/b-link"),
        )
        .unwrap();
    })
}

#[test]
fn the_host_names_the_document_root() {
    let s = server(true);
    assert_eq!(host(&s, "/", "a.test").text(), "A");
    assert_eq!(host(&s, "/", "b.test").text(), "B");
    // lowercased, port and trailing dot removed
    assert_eq!(host(&s, "/", "B.Test:8080").text(), "B");
    assert_eq!(host(&s, "/", "a.test.").text(), "A");
    assert_eq!(host(&s, "/sub/f.txt", "b.test").text(), "B-SUB");
    // the absolute-form target's host wins over Host (RFC 9112 §3.2.2)
    let r = Response::parse(
        &s.raw(b"GET http://b.test/ HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"),
        false,
    );
    assert_eq!(r.text(), "B");
    // a host directory that is a link is followed (www.a.test -> a.test)
    assert_eq!(host(&s, "/", "www.a.test").text(), "A");
    // static-file's slash redirect keeps the request's host
    let r = host(&s, "/sub", "b.test");
    assert_eq!(r.header("location"), Some("http://b.test/sub/"));
    // an IPv4 address is a name like any other
    assert_eq!(host(&s, "/", "127.0.0.1").text(), "IP");
}

#[test]
fn unknown_hosts_get_the_default_root() {
    let s = server(true);
    assert_eq!(host(&s, "/", "unknown.test").text(), "DEFAULT");
    assert_eq!(host(&s, "/", "[::1]:8080").text(), "DEFAULT", "IP literal");
    let r = Response::parse(&s.raw(b"GET / HTTP/1.0\r\n\r\n"), false);
    assert_eq!(r.text(), "DEFAULT", "no Host");
    // without default-root: the vhost's document root
    let s = server(false);
    assert_eq!(host(&s, "/", "unknown.test").text(), "WWW");
    assert_eq!(host(&s, "/", "a.test").text(), "A");
}

#[test]
fn invalid_hosts_are_400() {
    let s = server(true);
    let long = ["abcdefghi"; 26].join("."); // 259 bytes of valid labels
    let label = format!("{}.test", "a".repeat(64));
    for h in [
        "..",
        "...",
        ".",
        "a..test",
        ".a.test",
        "a/b",
        "..%2f..",
        "%2e%2e",
        "%2e%2e.test",
        "a_b.test",
        "a\\b",
        long.as_str(),
        label.as_str(),
    ] {
        let r = host(&s, "/", h);
        assert_eq!(r.status, 400, "Host: {h}");
        assert!(!["A", "B", "VHOSTS", "DEFAULT", "WWW"].contains(&r.text().as_str()));
    }
    // the longest valid host is still mapped (to the default root here)
    let ok = ["abcdefghi"; 25].join(".");
    assert_eq!(host(&s, "/", &ok).text(), "DEFAULT");
}

#[test]
fn symlink_policy_applies_to_the_host_root() {
    let s = server(true);
    // a link from a.test's root into b.test's is outside a.test's root
    assert_eq!(host(&s, "/b-link", "a.test").status, 403);
}

#[test]
fn evhost_patterns() {
    let extra = "[vhost.mass-vhost]\npath-pattern = \"evhost/%0/%3/%%x\"\n";
    let s = Server::site("\"mass-vhost\", \"static-file\"", extra, |d| {
        d.write("evhost/example.org/www/%x/index.html", "WWW-EXAMPLE");
        d.write("evhost/example.org/shop/%x/index.html", "SHOP");
        d.write("www/index.html", "VHOST");
    });
    assert_eq!(host(&s, "/", "www.example.org").text(), "WWW-EXAMPLE");
    assert_eq!(host(&s, "/", "shop.example.org").text(), "SHOP");
    // %3 of a deeper name is still the label left of the domain
    assert_eq!(host(&s, "/", "x.shop.example.org").text(), "SHOP");
    // no %3: the default (here the vhost's) root
    assert_eq!(host(&s, "/", "example.org").text(), "VHOST");
}

#[test]
fn configuration_errors() {
    for (table, want) in [
        ("", "mass-vhost: path-pattern: missing"),
        ("path-pattern = \"/srv/%x\"\n", "is not %_, %0 to %9 or %%"),
        (
            "path-pattern = \"/srv/htdocs\"\n",
            "names no part of the host",
        ),
        (
            "path-pattern = \"/srv/%_\"\ndefault-root = \"nope\"\n",
            "mass-vhost: default-root: \"nope\": ",
        ),
    ] {
        let d = crate::util::TempDir::new("mv-cfg");
        d.mkdir("www");
        let f = d.write(
            "server.toml",
            crate::util::site_config("\"mass-vhost\"", &format!("[vhost.mass-vhost]\n{table}")),
        );
        let out = crate::util::check_config(&f);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{table} accepted");
        assert!(err.contains(want), "{table}: {err}");
    }
}

/// The open-file cache keeps only files changed at least 2 s ago
/// (`static_file::cache::RACY`): polls `path` on `h` until the file is that
/// old, then asks once more so that it is cached.
fn cached(s: &Server, h: &str, path: &str, file: &std::path::Path) -> Response {
    use std::os::unix::fs::MetadataExt;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let m = std::fs::metadata(file).unwrap();
        let ctime = std::time::UNIX_EPOCH + std::time::Duration::new(m.ctime() as u64, 0);
        let age = std::time::SystemTime::now()
            .duration_since(ctime)
            .unwrap_or_default();
        assert_eq!(host(s, path, h).status, 200);
        if age > std::time::Duration::from_millis(3100) {
            return host(s, path, h);
        }
        assert!(std::time::Instant::now() < deadline, "never aged");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn caches_keep_hosts_apart() {
    // One URL path, two hosts, files of the same size and modification time
    // (hence the same ETag): neither static-file's open-file cache (trusted
    // for a minute, so a hit makes no stat) nor compress's cache of
    // compressed bodies may answer one host with the other's file.
    let extra = "[vhost.mass-vhost]\npath-pattern = \"vhosts/%_\"\n\
                 [vhost.static-file]\nopen-file-cache-valid = 60000\n\
                 [vhost.compress]\nmin-size = 16\n";
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    let s = Server::site(
        "\"mass-vhost\", \"compress\", \"static-file\"",
        extra,
        |d| {
            for (h, c) in [("a.test", "a"), ("b.test", "b")] {
                let p = d.write(&format!("vhosts/{h}/same.txt"), c.repeat(2000));
                let f = std::fs::File::options().write(true).open(&p).unwrap();
                f.set_modified(mtime).unwrap();
            }
        },
    );
    let a = s.dir.path().join("vhosts/a.test/same.txt");
    assert_eq!(
        cached(&s, "a.test", "/same.txt", &a).text(),
        "a".repeat(2000)
    );
    let b = host(&s, "/same.txt", "b.test");
    assert!(
        b.text() == "b".repeat(2000),
        "the open-file cache answered b.test with a.test's file"
    );
    assert_eq!(host(&s, "/same.txt", "a.test").text(), "a".repeat(2000));
    let gz = |h: &str| {
        let r = s.req(
            "GET",
            "/same.txt",
            &[&format!("Host: {h}"), "Accept-Encoding: gzip"],
        );
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        let mut out = String::new();
        flate2::read::GzDecoder::new(&r.body[..])
            .read_to_string(&mut out)
            .unwrap();
        (r.header("etag").map(str::to_owned), out)
    };
    let (etag_a, body_a) = gz("a.test");
    let (etag_b, body_b) = gz("b.test");
    assert_eq!(etag_a, etag_b, "the test needs equal ETags");
    assert_eq!(body_a, "a".repeat(2000));
    assert!(
        body_b == "b".repeat(2000),
        "the compressed-body cache answered b.test with a.test's body"
    );
}

#[test]
fn rewrite_if_not_file_looks_in_the_host_root() {
    let extra = "[vhost.mass-vhost]\npath-pattern = \"vhosts/%_\"\n\
                 [vhost.rewrite]\nrules = [{ regex = \"^/app/\", target = \"/app/index.html\", if-not-file = true }]\n";
    let s = Server::site("\"mass-vhost\", \"rewrite\", \"static-file\"", extra, |d| {
        d.write("vhosts/a.test/app/index.html", "SPA");
        d.write("vhosts/a.test/app/real.txt", "REAL");
    });
    assert_eq!(host(&s, "/app/real.txt", "a.test").text(), "REAL");
    assert_eq!(host(&s, "/app/route", "a.test").text(), "SPA");
}

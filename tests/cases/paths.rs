//! Request targets: percent-encoding, paths, slash redirects, directories, Host (b14–b27, b34–b36).

use crate::util::{Server, TempDir};

use super::*;

// ---------------------------------------------------------------------------
// Percent-encoding and path rules

#[test]
fn b14_percent_decoded_once() {
    let s = sf("", |d| {
        d.write("www/a b.txt", "x");
        d.write("www/ünï.txt", "y");
    });
    let r = s.get("/a%20b.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "x"));
    let r = s.get("/%C3%BCn%C3%AF.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "y"));
    // `+` is a plus in a path
    assert_eq!(s.get("/a+b.txt").status, 404);
}

#[test]
fn b15_literal_percent_and_hash_in_names() {
    let s = sf("", |d| {
        d.write("www/pkg_1%3a9.deb", "");
        d.write("www/Session #01.mp3", "");
    });
    for p in ["/pkg_1%253a9.deb", "/Session%20%2301.mp3"] {
        let r = s.get(p);
        assert_eq!(r.status, 200, "{p}");
        assert_eq!(r.header("content-length"), Some("0"), "{p}");
    }
    // decoding twice would turn this into `pkg_1:9.deb`, which does not exist
    assert_eq!(s.get("/pkg_1%3a9.deb").status, 404);
}

#[test]
fn b16_malformed_percent_escape() {
    let s = sf("", |d| {
        d.write("www/%@.exe", "exe");
    });
    // Tessera: 400 for a malformed escape and for %00
    for p in ["/%@.exe", "/abc%", "/abc%4", "/a%00b", "/%00"] {
        assert_eq!(s.get(p).status, 400, "{p}");
    }
    let r = s.get("/%25%40.exe");
    assert_eq!((r.status, r.text().as_str()), (200, "exe"));
}

#[test]
fn b17_encoded_trailing_slash() {
    let s = sf("", |d| {
        d.write("www/docs/index.html", "docs index");
        d.write("www/file.txt", "file");
    });
    // `%2F` decodes to `/`: the directory index, no redirect loop
    let r = s.get("/docs%2F");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "docs index");
    assert_eq!(r.header("location"), None);
    // a file asked for as a directory
    assert_eq!(s.get("/file.txt%2F").status, 404);
}

#[test]
fn b18_colon_in_segment() {
    let s = sf("", |d| {
        d.write("www/http:/foo.txt", "foo");
    });
    let r = s.get("/http:/foo.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "foo"));
}

#[test]
fn b20_absolute_components_never_escape_root() {
    let s = sf("", |d| {
        d.write("c:/windows/win.ini", "OUTSIDE");
        d.write("secret.txt", "OUTSIDE");
        d.write("www/%2e%2e/inside.txt", "literal");
    });
    for p in [
        "/anypath/c:/windows/win.ini",
        "/anypath/c%3A/windows/win.ini",
    ] {
        let r = s.get(p);
        assert_eq!(r.status, 404, "{p}");
        assert!(!r.text().contains("OUTSIDE"), "{p}");
    }
    // climbing above the root: 400
    for p in [
        "/..%2f..%2fetc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/..%2fsecret.txt",
    ] {
        let r = s.get(p);
        assert_eq!(r.status, 400, "{p}");
        assert!(
            !r.text().contains("root:") && !r.text().contains("OUTSIDE"),
            "{p}"
        );
    }
    // `\` is an ordinary character on Unix: a literal name inside the root
    let r = s.get("/..%5c..%5cetc/passwd");
    assert_eq!(r.status, 404);
    assert!(!r.text().contains("root:"));
    // double-encoded dots stay literal
    let r = s.get("/%252e%252e/%252e%252e/etc/passwd");
    assert_eq!(r.status, 404);
    assert!(!r.text().contains("root:"));
    let r = s.get("/%252e%252e/inside.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "literal"));
}

#[test]
fn b22_symlinks_refused_on_every_component() {
    let hostname = std::fs::read("/etc/hostname").unwrap();
    let setup = |d: &TempDir| {
        std::os::unix::fs::symlink("/etc", d.path().join("www/etc-link")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", d.path().join("www/h")).unwrap();
        d.write("www/real.txt", "real");
    };
    // symlinks disallowed
    let s = sf("[vhost.static-file]\nfollow-symlinks = \"never\"\n", setup);
    for p in ["/h", "/etc-link/hostname"] {
        let r = s.get(p);
        assert_eq!(r.status, 403, "{p}");
        assert!(hostname.is_empty() || r.body != hostname, "{p}");
    }
    assert_eq!(s.get("/real.txt").text(), "real");
    // symlinks allowed (default inside-root): targets outside the root refused
    let s = sf("", setup);
    for p in ["/h", "/etc-link/hostname"] {
        assert_eq!(s.get(p).status, 403, "{p}");
    }
    assert_eq!(s.get("/real.txt").text(), "real");
    // explicitly permitted: served (so the refusals above are the policy's doing)
    let s = sf("[vhost.static-file]\nfollow-symlinks = \"always\"\n", setup);
    let r = s.get("/etc-link/hostname");
    assert_eq!((r.status, &r.body), (200, &hostname));
}

#[test]
fn b23_dot_files_404_and_well_known_served() {
    let setup = |d: &TempDir| {
        d.write("www/.env", "KEY=1");
        d.write("www/.well-known/acme-challenge/t1", "tok");
        d.mkdir("www/.git");
        // not in the case's setup: gives `/%2Egit/config` something to leak
        d.write("www/.git/config", "[core]");
    };
    let s = sf("", setup);
    for p in [
        "/.env",
        "/.git/",
        "/%2eenv",
        "/%2Egit/config",
        "/.git",
        "/.git/config",
    ] {
        let r = s.get(p);
        assert_eq!(r.status, 404, "{p}");
        assert!(
            !r.text().contains("KEY=1") && !r.text().contains("[core]"),
            "{p}"
        );
    }
    let r = s.get("/.well-known/acme-challenge/t1");
    assert_eq!((r.status, r.text().as_str()), (200, "tok"));
    let s = sf("[vhost.static-file]\nhidden-files = true\n", setup);
    let r = s.get("/.env");
    assert_eq!((r.status, r.text().as_str()), (200, "KEY=1"));
    let r = s.get("/.well-known/acme-challenge/t1");
    assert_eq!((r.status, r.text().as_str()), (200, "tok"));
}

// ---------------------------------------------------------------------------
// Trailing-slash redirects and directories

#[test]
fn b25_slash_redirect_keeps_query() {
    let s = sf("", |d| {
        d.write("www/assets/index.html", "");
        d.write("www/f.txt", "f");
    });
    let r = s.get("/assets?param=123");
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("location"),
        Some("http://site.test/assets/?param=123")
    );
    // reverse direction: a file asked for with a trailing slash
    let r = s.get("/f.txt/?a=1");
    assert_eq!(r.status, 404);
}

#[test]
fn b26_slash_redirect_encodes_location() {
    let s = sf("", |d| {
        // index files (not in the case's setup) make "adding the slash manually"
        // observable as a 200
        for dir in ["folder]", "snow☃", "q?"] {
            d.write(&format!("www/{dir}/index.html"), dir);
        }
    });
    for (req, loc, name) in [
        ("/folder%5D", "/folder%5D/", "folder]"),
        ("/snow%E2%98%83", "/snow%E2%98%83/", "snow☃"),
        ("/q%3F", "/q%3F/", "q?"),
    ] {
        let r = s.get(req);
        assert_eq!(r.status, 301, "{req}");
        assert_eq!(
            r.header("location"),
            Some(format!("http://site.test{loc}").as_str()),
            "{req}"
        );
        let r = s.get(loc);
        assert_eq!((r.status, r.text().as_str()), (200, name), "{loc}");
    }
}

#[test]
fn b27_directory_without_index() {
    let s = sf("", |d| {
        d.mkdir("www/emptydir");
    });
    let r = s.get("/emptydir/");
    // 403 as lighttpd and nginx (autoindex off) answer; the case allows both.
    assert_eq!(r.status, 403);
    assert_framed(&r);
    assert!(!r.raw_body.is_empty(), "error page body");
    let r = s.get("/emptydir");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("http://site.test/emptydir/"));
    assert_framed(&r);
}

// ---------------------------------------------------------------------------
// Virtual hosts

/// `site.test` serves "A"; the default vhost serves "D".
fn two_vhosts(a_extra: &str, d_extra: &str, setup: impl FnOnce(&TempDir)) -> Server {
    let conf = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 2\n\n\
         [[vhost]]\nserver-names = [\"site.test\"]\ndocument-root = \"a\"\nmodules = [{SF}]\n{a_extra}\n\
         [[vhost]]\nserver-names = [\"default.test\"]\ndefault = true\ndocument-root = \"d\"\nmodules = [{SF}]\n{d_extra}\n"
    );
    Server::start(&conf, |d| {
        d.write("a/index.html", "A");
        d.write("d/index.html", "D");
        setup(d);
    })
}

#[track_caller]
fn body_for_host(s: &Server, host: &str) -> String {
    let r = s.req("GET", "/", &[&format!("Host: {host}")]);
    assert_eq!(r.status, 200, "Host: {host}");
    r.text()
}

#[test]
fn b34_host_with_port() {
    // Not yet testable: the same over HTTP/2 with :authority and no host field (issue 5 HTTP/2)
    let s = two_vhosts("", "", |_| {});
    assert_eq!(body_for_host(&s, "site.test"), "A");
    assert_eq!(body_for_host(&s, "other.test"), "D");
    assert_eq!(body_for_host(&s, "site.test:8080"), "A");
    assert_eq!(body_for_host(&s, "SITE.test"), "A");
    assert_eq!(body_for_host(&s, "SITE.TEST:8080"), "A");
    // an IPv6 literal is not split at its first colon
    assert_eq!(body_for_host(&s, "[::1]:8080"), "D");
    assert_eq!(body_for_host(&s, "[::1]"), "D");
    // HTTP/1.1's counterpart of :authority: an absolute-form target wins over Host
    let r = s.req("GET", "http://site.test/", &["Host: other.test"]);
    assert_eq!((r.status, r.text().as_str()), (200, "A"));
    // but an HTTP/1.1 request needs Host even then (RFC 9112 §3.2);
    // HTTP/1.0 may go without
    let raw =
        String::from_utf8_lossy(&s.raw(b"GET http://site.test/ HTTP/1.1\r\n\r\n")).into_owned();
    assert!(raw.starts_with("HTTP/1.1 400 "), "{raw}");
    let raw =
        String::from_utf8_lossy(&s.raw(b"GET http://site.test/ HTTP/1.0\r\n\r\n")).into_owned();
    assert!(
        raw.starts_with("HTTP/1.0 200 ") && raw.ends_with("A"),
        "{raw}"
    );
}

#[test]
fn b35_host_case_and_default_port() {
    // Not applicable: a vhost name with a port (`other.test:8080`); Tessera's
    // server-names carry no port and match on every listener.
    let s = two_vhosts("", "", |_| {});
    assert_eq!(body_for_host(&s, "Site.Test"), "A");
    assert_eq!(body_for_host(&s, "site.test:80"), "A");
    assert_eq!(body_for_host(&s, "site.test:443"), "A");
}

#[test]
fn b36_trailing_dot_fqdn() {
    // site.test keeps hidden files hidden; the default vhost would serve them
    let s = two_vhosts("", "[vhost.static-file]\nhidden-files = true\n", |d| {
        d.write("a/.env", "A-SECRET");
        d.write("d/.env", "D-SECRET");
    });
    assert_eq!(body_for_host(&s, "site.test."), "A");
    assert_eq!(body_for_host(&s, "site.test.:8080"), "A");
    assert_eq!(body_for_host(&s, "SITE.TEST."), "A");
    // the dot does not move the request to the more permissive default vhost
    let r = s.req("GET", "/.env", &["Host: site.test."]);
    assert_eq!(r.status, 404);
    assert!(!r.text().contains("SECRET"));
    // (the default vhost does serve it: the check above can fail)
    assert_eq!(
        s.req("GET", "/.env", &["Host: other.test"]).text(),
        "D-SECRET"
    );
}

//! What the application hands back: X-Sendfile, X-Accel-Redirect, a local Location.

use super::*;

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

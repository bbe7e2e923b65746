//! `static-file` over real HTTP: methods, index files, redirects, validators,
//! conditional requests, Range, MIME types, safe paths, symlinks, large files.

use crate::util::Server;

const SF: &str = "\"static-file\"";

fn server() -> Server {
    Server::site(SF, "", |d| {
        d.write("www/index.html", "<h1>home</h1>");
        d.write("www/ten.txt", "0123456789");
        d.write("www/docs/index.html", "docs");
        d.write("www/docs/page.html", "page");
        d.mkdir("www/emptydir");
        d.write("www/empty.bin", "");
    })
}

#[test]
fn get_and_head_agree() {
    let s = server();
    let g = s.get("/ten.txt");
    assert_eq!(g.status, 200);
    assert_eq!(g.body, b"0123456789");
    assert_eq!(g.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(g.header("accept-ranges"), Some("bytes"));
    let h = s.req("HEAD", "/ten.txt", &[]);
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some("10"));
    assert!(h.raw_body.is_empty(), "HEAD sent a body");
    for k in ["etag", "last-modified", "content-type", "accept-ranges"] {
        assert_eq!(g.header(k), h.header(k), "{k}");
    }
    assert!(g.header("etag").unwrap().starts_with('"'), "strong ETag");
}

#[test]
fn other_methods_405_with_allow_and_unknown_501() {
    let s = server();
    for m in ["POST", "PUT", "DELETE", "PATCH"] {
        let r = s.req(m, "/ten.txt", &["Content-Length: 0"]);
        assert_eq!(r.status, 405, "{m}");
        assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
    }
    let r = s.req("OPTIONS", "/ten.txt", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
    assert_eq!(s.req("FROBNICATE", "/ten.txt", &[]).status, 501);
    let r = s.req("OPTIONS", "*", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
}

#[test]
fn index_files_and_slash_redirect() {
    let s = server();
    assert_eq!(s.get("/").text(), "<h1>home</h1>");
    assert_eq!(s.get("/docs/").text(), "docs");
    let r = s.get("/docs?a=1&b=2");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("http://site.test/docs/?a=1&b=2"));
    // the request's own Host, port included, never the listen address
    let r = s.req("GET", "/docs", &["Host: www.example.org:8443"]);
    assert_eq!(
        r.header("location"),
        Some("http://www.example.org:8443/docs/")
    );
    // A directory without an index file: 403, as lighttpd and nginx answer.
    assert_eq!(s.get("/emptydir/").status, 403);
    assert_eq!(s.get("/ten.txt/").status, 404);
}

#[test]
fn zero_length_file() {
    let s = server();
    let r = s.get("/empty.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("0"));
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
}

#[test]
fn conditional_requests() {
    let s = server();
    let g = s.get("/ten.txt");
    let etag = g.header("etag").unwrap().to_string();
    let lm = g.header("last-modified").unwrap().to_string();
    let r = s.req(
        "GET",
        "/ten.txt",
        &[&format!("If-None-Match: \"x\", {etag}")],
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert!(r.body.is_empty());
    assert_eq!(
        s.req("GET", "/ten.txt", &[&format!("If-None-Match: W/{etag}")])
            .status,
        304
    );
    assert_eq!(s.req("GET", "/ten.txt", &["If-None-Match: *"]).status, 304);
    assert_eq!(
        s.req("GET", "/ten.txt", &[&format!("If-Modified-Since: {lm}")])
            .status,
        304
    );
    // later than the file's time is still 304 (§13.1.3)
    let later = httpdate::fmt_http_date(
        std::time::SystemTime::now() + std::time::Duration::from_secs(86400),
    );
    assert_eq!(
        s.req("GET", "/ten.txt", &[&format!("If-Modified-Since: {later}")])
            .status,
        304
    );
    // If-None-Match makes If-Modified-Since ignored (§13.2.2)
    let r = s.req(
        "GET",
        "/ten.txt",
        &[
            "If-None-Match: \"other\"",
            &format!("If-Modified-Since: {lm}"),
        ],
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        s.req("GET", "/ten.txt", &["If-Match: \"other\""]).status,
        412
    );
    assert_eq!(
        s.req("GET", "/ten.txt", &[&format!("If-Match: {etag}")])
            .status,
        200
    );
    assert_eq!(
        s.req("GET", "/ten.txt", &[&format!("If-Match: W/{etag}")])
            .status,
        412
    );
    // If-Match makes If-Unmodified-Since ignored
    let r = s.req(
        "GET",
        "/ten.txt",
        &[
            &format!("If-Match: {etag}"),
            "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:01 GMT",
        ],
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        s.req(
            "GET",
            "/ten.txt",
            &["If-Unmodified-Since: Thu, 01 Jan 1970 00:00:01 GMT"]
        )
        .status,
        412
    );
    // a malformed date is ignored, never 412
    assert_eq!(
        s.req("GET", "/ten.txt", &["If-Unmodified-Since: yesterday"])
            .status,
        200
    );
    assert_eq!(
        s.req("GET", "/ten.txt", &["If-Modified-Since: yesterday"])
            .status,
        200
    );
}

#[test]
fn ranges() {
    let s = server();
    let r = s.req("GET", "/ten.txt", &["Range: bytes=2-4"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, b"234");
    assert_eq!(r.header("content-range"), Some("bytes 2-4/10"));
    assert_eq!(r.header("content-length"), Some("3"));
    assert_eq!(s.req("GET", "/ten.txt", &["Range: bytes=-3"]).body, b"789");
    assert_eq!(s.req("GET", "/ten.txt", &["Range: bytes=7-"]).body, b"789");
    let r = s.req("GET", "/ten.txt", &["Range: bytes=20-30"]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */10"));
    // invalid Range is ignored
    let r = s.req("GET", "/ten.txt", &["Range: bytes=5-1"]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"0123456789"[..]));
    // Range is ignored on HEAD and on other methods (§14.2)
    let r = s.req("HEAD", "/ten.txt", &["Range: bytes=0-1"]);
    assert_eq!((r.status, r.header("content-length")), (200, Some("10")));
    // If-Range: a matching ETag honours Range, another one sends the whole file
    let etag = s.get("/ten.txt").header("etag").unwrap().to_string();
    assert_eq!(
        s.req(
            "GET",
            "/ten.txt",
            &["Range: bytes=0-0", &format!("If-Range: {etag}")]
        )
        .status,
        206
    );
    assert_eq!(
        s.req(
            "GET",
            "/ten.txt",
            &["Range: bytes=0-0", "If-Range: \"old\""]
        )
        .status,
        200
    );
}

#[test]
fn multipart_byteranges() {
    let s = server();
    let r = s.req("GET", "/ten.txt", &["Range: bytes=0-1,5-6"]);
    assert_eq!(r.status, 206);
    let ct = r.header("content-type").unwrap();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .expect(ct);
    assert_eq!(
        r.header("content-length")
            .unwrap()
            .parse::<usize>()
            .unwrap(),
        r.body.len()
    );
    let text = r.text();
    let parts: Vec<&str> = text.split(&format!("--{boundary}")).collect();
    assert_eq!(parts.len(), 4, "{text}");
    assert!(
        parts[1].contains("Content-Range: bytes 0-1/10\r\n\r\n01\r\n"),
        "{text}"
    );
    assert!(
        parts[2].contains("Content-Type: text/plain; charset=utf-8"),
        "{text}"
    );
    assert!(
        parts[2].contains("Content-Range: bytes 5-6/10\r\n\r\n56\r\n"),
        "{text}"
    );
    assert_eq!(parts[3], "--\r\n");
}

#[test]
fn traversal_never_leaves_the_document_root() {
    let s = server();
    s.dir.write("secret.txt", "SECRET");
    for p in [
        "/../secret.txt",
        "/../../etc/passwd",
        "/..%2fsecret.txt",
        "/%2e%2e/secret.txt",
        "/%2e%2e%2fsecret.txt",
        "/docs/../../secret.txt",
        "/..%5csecret.txt",
        "/%252e%252e/secret.txt",
        "/..\\secret.txt",
        "/a%00b",
    ] {
        let r = s.get(p);
        assert!(r.status == 400 || r.status == 404, "{p}: {}", r.status);
        assert!(!r.text().contains("SECRET"), "{p}");
    }
    // dot segments inside the root are fine
    assert_eq!(s.get("/docs/../ten.txt").status, 200);
}

#[test]
fn hidden_files_default_and_enabled() {
    let s = server();
    s.dir.write("www/.env", "KEY=1");
    s.dir.write("www/.well-known/acme-challenge/t1", "tok");
    assert_eq!(s.get("/.env").status, 404);
    assert_eq!(s.get("/%2eenv").status, 404);
    assert_eq!(s.get("/.well-known/acme-challenge/t1").text(), "tok");
    let s2 = Server::site(SF, "[vhost.static-file]\nhidden-files = true\n", |d| {
        d.write("www/.env", "KEY=1");
    });
    assert_eq!(s2.get("/.env").text(), "KEY=1");
}

#[test]
fn symlinks_follow_policy() {
    let setup = |d: &crate::util::TempDir| {
        d.write("outside/secret.txt", "SECRET");
        d.write("www/real/in.txt", "inside");
        std::os::unix::fs::symlink(d.path().join("outside"), d.path().join("www/out")).unwrap();
        std::os::unix::fs::symlink(d.path().join("outside/secret.txt"), d.path().join("www/s"))
            .unwrap();
        std::os::unix::fs::symlink(d.path().join("www/real/in.txt"), d.path().join("www/in"))
            .unwrap();
    };
    let s = Server::site(SF, "", setup);
    assert_eq!(s.get("/s").status, 403);
    assert_eq!(s.get("/out/secret.txt").status, 403);
    assert_eq!(s.get("/in").text(), "inside");
    let s = Server::site(
        SF,
        "[vhost.static-file]\nfollow-symlinks = \"never\"\n",
        setup,
    );
    assert_eq!(s.get("/in").status, 403);
    assert_eq!(s.get("/real/in.txt").text(), "inside");
    let s = Server::site(
        SF,
        "[vhost.static-file]\nfollow-symlinks = \"always\"\n",
        setup,
    );
    assert_eq!(s.get("/out/secret.txt").text(), "SECRET");
    let s = Server::site(
        SF,
        "[vhost.static-file]\nfollow-symlinks = \"owner-match\"\n",
        setup,
    );
    assert_eq!(s.get("/s").text(), "SECRET");
}

#[test]
fn mime_types_and_overrides() {
    let s = Server::site(SF, "[vhost.static-file]\nmime-types = { md = \"text/markdown; charset=utf-8\", dat = \"application/x-data\" }\n", |d| {
        d.write("www/a.css", "a{}");
        d.write("www/a.md", "# a");
        d.write("www/a.dat", "x");
        d.write("www/a.png", "x");
        d.write("www/Packages.qqzz", "x");
    });
    assert_eq!(
        s.get("/a.css").header("content-type"),
        Some("text/css; charset=utf-8")
    );
    assert_eq!(
        s.get("/a.md").header("content-type"),
        Some("text/markdown; charset=utf-8")
    );
    assert_eq!(
        s.get("/a.dat").header("content-type"),
        Some("application/x-data")
    );
    assert_eq!(s.get("/a.png").header("content-type"), Some("image/png"));
    assert_eq!(
        s.get("/Packages.qqzz").header("content-type"),
        Some("application/octet-stream")
    );
}

#[test]
fn large_file_streams_exactly() {
    let s = server();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    s.dir.write("www/big.bin", &data);
    let r = s.get("/big.bin");
    assert_eq!(r.header("content-length"), Some("3000000"));
    assert!(r.body == data, "body differs");
    let r = s.req("GET", "/big.bin", &["Range: bytes=1000000-1999999"]);
    assert!(r.body == data[1_000_000..2_000_000]);
}

#[test]
fn files_above_4_gib() {
    let s = server();
    let f = std::fs::File::create(s.root().join("huge.bin")).unwrap();
    let size: u64 = (5 << 30) + 7;
    f.set_len(size).unwrap(); // sparse: no disk used
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"TAIL", size - 4).unwrap();
    let h = s.req("HEAD", "/huge.bin", &[]);
    assert_eq!(h.header("content-length"), Some(size.to_string().as_str()));
    let r = s.req("GET", "/huge.bin", &["Range: bytes=-4"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, b"TAIL");
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes {}-{}/{size}", size - 4, size - 1).as_str())
    );
    let r = s.req(
        "GET",
        "/huge.bin",
        &[&format!("Range: bytes={}-{}", 1u64 << 32, (1u64 << 32) + 1)],
    );
    assert_eq!(r.body, b"\0\0");
}

/// The open-file cache only keeps files whose change time is at least 2 s old
/// (`static_file::cache::RACY`). Polls `path` with real requests until the
/// file `rel` is older than that, then once more so that the file is cached;
/// returns that last response.
pub(crate) fn cached(s: &Server, path: &str, rel: &str) -> crate::util::Response {
    use std::os::unix::fs::MetadataExt;
    let file = s.root().join(rel);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let m = std::fs::metadata(&file).unwrap();
        let ctime = std::time::UNIX_EPOCH + std::time::Duration::new(m.ctime() as u64, 0);
        let age = std::time::SystemTime::now()
            .duration_since(ctime)
            .unwrap_or_default();
        let r = s.get(path);
        assert_eq!(r.status, 200, "{path}");
        if age > std::time::Duration::from_millis(3100) {
            return s.get(path);
        }
        assert!(std::time::Instant::now() < deadline, "{rel} never aged");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Rewrites `rel` in place with `content` (same inode).
fn rewrite_in_place(s: &Server, rel: &str, content: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(s.root().join(rel))
        .unwrap();
    f.write_all(content.as_bytes()).unwrap();
}

#[test]
fn open_file_cache_change_is_seen_by_the_next_request() {
    // Default: one stat per request; an in-place write of the same size is seen
    // at once.
    let s = server();
    let before = cached(&s, "/ten.txt", "ten.txt");
    assert_eq!(before.text(), "0123456789");
    let etag = before.header("etag").unwrap().to_owned();
    // served from the cache: conditional and Range requests still work
    let r = s.req("GET", "/ten.txt", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    let r = s.req("GET", "/ten.txt", &["Range: bytes=2-4"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.text(), "234");
    assert_eq!(r.header("content-range"), Some("bytes 2-4/10"));
    let r = s.req("GET", "/ten.txt", &["Range: bytes=0-0,-1"]);
    assert_eq!(r.status, 206);
    assert!(r.text().contains("\r\n\r\n0\r\n") && r.text().contains("\r\n\r\n9\r\n"));
    let r = s.req("HEAD", "/ten.txt", &[]);
    assert_eq!(r.header("content-length"), Some("10"));
    assert!(r.raw_body.is_empty());
    assert_eq!(
        s.req("POST", "/ten.txt", &["Content-Length: 0"]).status,
        405
    );
    // the index file of a directory is cached under the directory's path
    assert_eq!(cached(&s, "/docs/", "docs/index.html").text(), "docs");

    rewrite_in_place(&s, "ten.txt", "abcdefghij");
    let after = s.get("/ten.txt");
    assert_eq!(after.text(), "abcdefghij");
    assert_ne!(after.header("etag"), Some(etag.as_str()));
    let r = s.req("GET", "/ten.txt", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 200, "the old ETag no longer matches");
    std::fs::remove_file(s.root().join("docs/index.html")).unwrap();
    assert_eq!(s.get("/docs/").status, 403);
}

#[test]
fn open_file_cache_change_is_seen_within_the_bound() {
    // open-file-cache-valid = 500: a change may go unseen for up to 500 ms,
    // never longer. Poll with real requests until the new content appears.
    let s = Server::site(
        SF,
        "[vhost.static-file]\nopen-file-cache-valid = 500\n",
        |d| {
            d.write("www/page.html", "version 1");
        },
    );
    assert_eq!(cached(&s, "/page.html", "page.html").text(), "version 1");
    rewrite_in_place(&s, "page.html", "version 2");
    let changed = std::time::Instant::now();
    loop {
        let r = s.get("/page.html");
        assert_eq!(r.status, 200);
        if r.text() == "version 2" {
            break;
        }
        assert_eq!(r.text(), "version 1", "never a torn body");
        // the bound, plus slack for a slow machine
        assert!(
            changed.elapsed() < std::time::Duration::from_millis(500 + 1500),
            "still stale after {:?}",
            changed.elapsed()
        );
    }
    // an atomic replacement (rename over the file) too
    let tmp = s.root().join("page.tmp");
    std::fs::write(&tmp, "version 3, longer").unwrap();
    std::fs::rename(&tmp, s.root().join("page.html")).unwrap();
    let changed = std::time::Instant::now();
    while s.get("/page.html").text() != "version 3, longer" {
        assert!(changed.elapsed() < std::time::Duration::from_millis(2000));
    }
}

#[test]
fn open_file_cache_serves_from_memory_until_the_bound() {
    // With a bound of an hour, a cached file is not looked at again: the old
    // content is still served after a change (this is what the bound means).
    let s = Server::site(
        SF,
        "[vhost.static-file]\nopen-file-cache-valid = 3600000\n",
        |d| {
            d.write("www/a.txt", "cached");
        },
    );
    assert_eq!(cached(&s, "/a.txt", "a.txt").text(), "cached");
    rewrite_in_place(&s, "a.txt", "edited");
    assert_eq!(s.get("/a.txt").text(), "cached");
    // the cache can be turned off
    let s = Server::site(
        SF,
        "[vhost.static-file]\nopen-file-cache = 0\nopen-file-cache-valid = 3600000\n",
        |d| {
            d.write("www/a.txt", "cached");
        },
    );
    assert_eq!(cached(&s, "/a.txt", "a.txt").text(), "cached");
    rewrite_in_place(&s, "a.txt", "edited");
    assert_eq!(s.get("/a.txt").text(), "edited");
}

#[test]
fn open_file_cache_keeps_symlink_policy_and_hidden_files() {
    let s = Server::site(SF, "", |d| {
        d.write("www/f.txt", "inside");
        d.write("outside/f.txt", "secret");
        d.write("www/.hidden", "h");
    });
    assert_eq!(cached(&s, "/f.txt", "f.txt").text(), "inside");
    // a cached file replaced by a link out of the document root: 403
    std::fs::remove_file(s.root().join("f.txt")).unwrap();
    std::os::unix::fs::symlink(s.dir.path().join("outside/f.txt"), s.root().join("f.txt")).unwrap();
    assert_eq!(s.get("/f.txt").status, 403);
    assert_eq!(s.get("/.hidden").status, 404);
    assert_eq!(s.get("/.hidden").status, 404);
}

#[test]
fn excluded_extensions_are_never_served_also_as_index_files() {
    let s = Server::site(
        SF,
        "[vhost.static-file]\nindex-files = [\"index.php\", \"index.html\"]\nexclude-extensions = [\"php\"]\n",
        |d| {
            d.write("www/index.php", "<?php secret(); ?>");
            d.write("www/app/index.php", "<?php secret(); ?>");
            d.write("www/app/index.html", "html");
        },
    );
    assert_eq!(s.get("/index.php").status, 403);
    assert_eq!(s.get("/").status, 403);
    assert_eq!(s.get("/app/").text(), "html");
}

/// The files of the suffix tests: PHP source, an include, an editor's
/// backup, and a page that is served.
fn suffix_files(d: &crate::util::TempDir) {
    d.write("www/x.php", "<?php secret(); ?>");
    d.write("www/X.PHP", "<?php secret(); ?>");
    d.write("www/lib.inc", "secret include");
    d.write("www/notes.txt~", "secret backup");
    d.write("www/a.html", "<p>a</p>");
    d.write("www/app/index.php", "<?php secret(); ?>");
}

/// With suffix entries (`"php"`, `".inc"`, `"~"`, as lighttpd's
/// `static-file.exclude-extensions` takes them), static-file serves none of
/// those files (it passes them on: 403 here, where no module takes them, as
/// lighttpd refuses them; 404 for one that does not exist) and still serves
/// `a.html`.
fn assert_suffixes_excluded(s: &Server) {
    for path in [
        "/x.php",
        "/X.PHP",
        "/x.ph%70",
        "/lib.inc",
        "/notes.txt~",
        "/notes.txt%7E",
        "/app/index.php",
    ] {
        let r = s.get(path);
        assert_eq!(r.status, 403, "{path}");
        assert!(!r.text().contains("secret"), "{path}: {}", r.text());
    }
    assert_eq!(s.get("/missing.php").status, 404);
    // index.php is not an index file either: no index, 403.
    assert_eq!(s.get("/app/").status, 403);
    let r = s.get("/a.html");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<p>a</p>");
}

#[test]
fn exclude_extensions_are_suffixes_of_the_file_name() {
    let s = Server::site(
        SF,
        "[vhost.static-file]\nindex-files = [\"index.php\"]\nexclude-extensions = [\"php\", \".inc\", \"~\"]\n",
        suffix_files,
    );
    assert_suffixes_excluded(&s);
}

/// lighttpd's `static-file.exclude-extensions = ( "php", ".inc", "~" )`,
/// imported: the same files stay unserved (the review found x.php's source
/// served with 200 after an import).
#[test]
fn imported_exclude_extensions_without_dots_are_not_served() {
    let dir = crate::util::TempDir::new("exclude-import");
    suffix_files(&dir);
    let conf = dir.write(
        "lighttpd.conf",
        format!(
            "server.document-root = \"{}/www\"\nserver.port = 8080\nindex-file.names = ( \"index.php\" )\nstatic-file.exclude-extensions = ( \"php\", \".inc\", \"~\" )\n",
            dir.path().display()
        ),
    );
    let out = dir.path().join("imported.toml");
    let (code, report) = crate::util::status_and_output(
        std::process::Command::new(crate::util::bin())
            .args(["import", "lighttpd"])
            .arg(&conf)
            .arg("-o")
            .arg(&out),
    );
    assert!(code == 0 || code == 1, "{report}");
    assert!(
        report.contains("static-file.exclude-extensions: static-file exclude-extensions"),
        "{report}"
    );
    let mut t: toml::Table = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    t["server"].as_table_mut().unwrap().insert(
        "listen".into(),
        toml::Value::Array(vec!["127.0.0.1:0".into()]),
    );
    let s = Server::start(&toml::to_string(&t).unwrap(), |_| {});
    assert_suffixes_excluded(&s);
}

#[test]
fn a_304_gets_the_expiry_its_200_would_get_also_for_an_index_file() {
    // The 304 has no Content-Type (RFC 9110 §15.4.5) and "/" no extension,
    // but a cache refreshes its stored Expires from the 304 (RFC 9111 §4.3.4).
    let s = Server::site(
        "\"expires\", \"static-file\"",
        "[vhost.expires]\nmime-types = { \"text/html\" = \"access plus 5 minutes\" }\n",
        |d| {
            d.write("www/index.html", "<p>home</p>");
        },
    );
    let r = s.get("/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control"), Some("max-age=300"));
    let etag = r.header("etag").unwrap().to_string();
    let r = s.req("GET", "/", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);
    assert_eq!(r.header("content-type"), None);
    assert_eq!(r.header("cache-control"), Some("max-age=300"));
    assert!(r.header("expires").is_some());
}

/// Every field of a full response from the open-file cache, each exactly
/// once, as raw lines of the head.
fn head_fields(raw: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(raw);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    head.lines()
        .skip(1)
        .map(|l| l.split(':').next().unwrap_or_default().to_ascii_lowercase())
        .collect()
}

#[test]
fn a_cached_file_s_prebuilt_fields_are_sent_once_and_response_modules_still_see_them() {
    // Tessera's engine sends the cached file's Content-Type, Accept-Ranges,
    // ETag and Last-Modified as lines built once; a pipeline with a
    // response-phase module gets them in the header map, where that module
    // (expires by type here) reads them.
    let plain = server();
    let with_expires = Server::site(
        "\"expires\", \"static-file\"",
        "[vhost.expires]\nmime-types = { \"text/html\" = \"access plus 5 minutes\" }\n",
        |d| {
            d.write("www/index.html", "<h1>home</h1>");
        },
    );
    for s in [&plain, &with_expires] {
        let first = s.get("/index.html");
        let r = cached(s, "/index.html", "index.html");
        assert_eq!(r.text(), "<h1>home</h1>");
        for k in ["content-type", "accept-ranges", "etag", "last-modified"] {
            assert_eq!(r.header_all(k).len(), 1, "{k} not sent once");
            assert_eq!(r.header(k), first.header(k), "{k} differs once cached");
        }
        for raw in [
            s.raw(b"GET /index.html HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n"),
            s.raw(b"HEAD /index.html HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n"),
        ] {
            let names = head_fields(&raw);
            for k in [
                "content-type",
                "accept-ranges",
                "etag",
                "last-modified",
                "date",
            ] {
                assert_eq!(
                    names.iter().filter(|n| *n == k).count(),
                    1,
                    "{k} in {names:?}"
                );
            }
        }
    }
    let r = with_expires.get("/index.html");
    assert_eq!(r.header("cache-control"), Some("max-age=300"));
    assert!(r.header("expires").is_some());
    assert_eq!(plain.get("/index.html").header("cache-control"), None);
}

#[test]
fn every_answer_names_the_server_once() {
    // a cached file (its fields prebuilt on Tessera's engine), 304, 404,
    // 405 and HEAD; with `headers` setting a Server of its own, Tessera's
    // still wins, as it always has
    let servers = [
        ("\"static-file\"", ""),
        (
            "\"headers\", \"static-file\"",
            "[vhost.headers]\nset = { \"Server\" = \"other\" }\n",
        ),
    ]
    .map(|(modules, extra)| {
        let s = Server::site(modules, extra, |d| {
            d.write("www/a.txt", "aaaa");
        });
        (modules, s)
    });
    for (modules, s) in &servers {
        let first = cached(s, "/a.txt", "a.txt");
        let etag = first.header("etag").unwrap().to_owned();
        for (r, what) in [
            (first, "200 cached"),
            (
                s.req("GET", "/a.txt", &[&format!("If-None-Match: {etag}")]),
                "304",
            ),
            (s.req("GET", "/nope", &[]), "404"),
            (s.req("POST", "/a.txt", &[]), "405"),
            (s.req("HEAD", "/a.txt", &[]), "HEAD"),
        ] {
            assert_eq!(r.header_all("server"), ["tessera"], "{modules} {what}");
        }
    }
}

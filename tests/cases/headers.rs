//! Response headers: MIME types, Content-Encoding and Vary, Cache-Control (b28–b33, b40–b41).

use std::time::{Duration, SystemTime};

use crate::util::{Response, Server, TempDir};

use super::*;

// ---------------------------------------------------------------------------
// MIME types

#[test]
fn b28_text_types_have_charset() {
    let s = sf("", |d| {
        d.write("www/zh.txt", "中文 ünï\n");
        d.write("www/app.js", "const s=\"ü\";\n");
        d.write("www/readme.md", "# ü\n");
        d.write("www/a.css", "a{}");
        d.write("www/index.html", "<p>ü</p>");
        d.write("www/logo.png", "\u{89}PNG");
    });
    let ct = |p: &str| s.get(p).header("content-type").map(str::to_owned);
    assert_eq!(ct("/zh.txt").as_deref(), Some("text/plain; charset=utf-8"));
    let js = ct("/app.js").unwrap();
    assert!(
        js == "text/javascript; charset=utf-8" || js == "application/javascript; charset=utf-8",
        "{js}"
    );
    assert_eq!(
        ct("/readme.md").as_deref(),
        Some("text/markdown; charset=utf-8")
    );
    assert_eq!(ct("/a.css").as_deref(), Some("text/css; charset=utf-8"));
    assert_eq!(
        ct("/index.html").as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(ct("/logo.png").as_deref(), Some("image/png"));
    assert_eq!(s.get("/zh.txt").text(), "中文 ünï\n");
}

#[test]
fn b29_unknown_extension_keeps_validators() {
    let s = sf("", |d| {
        d.write("www/Packages.xyz", "");
        // `xyz` is in mime_guess's table (chemical/x-xyz); this one is not
        d.write("www/Packages.qqzz", "");
    });
    for p in ["/Packages.xyz", "/Packages.qqzz"] {
        let r = s.get(p);
        assert_eq!(r.status, 200, "{p}");
        let etag = r.header("etag").expect("ETag").to_string();
        let lm = r
            .header("last-modified")
            .expect("Last-Modified")
            .to_string();
        let r = s.req("GET", p, &[&format!("If-Modified-Since: {lm}")]);
        assert_eq!(r.status, 304, "{p}");
        let r = s.req("GET", p, &[&format!("If-None-Match: {etag}")]);
        assert_eq!(r.status, 304, "{p}");
    }
    assert!(s.get("/Packages.xyz").header("content-type").is_some());
    assert_eq!(
        s.get("/Packages.qqzz").header("content-type"),
        Some("application/octet-stream")
    );
}

// ---------------------------------------------------------------------------
// Content-Encoding and Vary

#[test]
fn b30_precompressed_never_double_encoded() {
    // static-file alone: the identity file; with compress (below) the sidecar.
    let css = b"body{color:red}\n".repeat(20);
    // any bytes stand in for the gzip of app.min.css: they are served as-is
    let gz = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03fake-gzip-member".to_vec();
    let (c2, g2) = (css.clone(), gz.clone());
    let s = sf("", move |d| {
        d.write("www/app.min.css", &c2);
        d.write("www/app.min.css.gz", &g2);
    });
    let r = s.req("GET", "/app.min.css", &["Accept-Encoding: gzip, zstd, br"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/css; charset=utf-8"));
    assert!(r.header_all("content-encoding").len() <= 1);
    match r.header("content-encoding") {
        None => assert!(r.body == css),
        Some("gzip") => {
            assert!(r.body == gz, "sidecar served as-is");
            assert!(r
                .header("vary")
                .is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")));
        }
        Some(other) => panic!("Content-Encoding: {other}"),
    }
    assert_framed(&r);
    // no gzip accepted: the identity file
    for ae in [
        None,
        Some("Accept-Encoding: gzip;q=0"),
        Some("Accept-Encoding: identity"),
    ] {
        let hs: Vec<&str> = ae.into_iter().collect();
        let r = s.req("GET", "/app.min.css", &hs);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding"), None, "{ae:?}");
        assert!(r.body == css, "{ae:?}");
    }
    // With compress serving precompressed sidecars (issue 6): the .gz bytes as
    // they are, Content-Encoding once, Vary, the .gz length.
    let (c3, g3) = (css.clone(), gz.clone());
    let s = Server::site(
        "\"compress\", \"static-file\"",
        "[vhost.compress]\nprecompressed = [\"br\", \"zstd\", \"gzip\"]\n",
        move |d| {
            d.write("www/app.min.css", &c3);
            d.write("www/app.min.css.gz", &g3);
        },
    );
    let r = s.req("GET", "/app.min.css", &["Accept-Encoding: gzip, zstd, br"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header_all("content-encoding"), ["gzip"]);
    assert_eq!(r.header("content-type"), Some("text/css; charset=utf-8"));
    assert_eq!(r.header_all("vary"), ["Accept-Encoding"]);
    assert!(r.body == gz, "sidecar served as-is");
    assert_framed(&r);
    for ae in [
        None,
        Some("Accept-Encoding: gzip;q=0"),
        Some("Accept-Encoding: identity"),
    ] {
        let hs: Vec<&str> = ae.into_iter().collect();
        let r = s.req("GET", "/app.min.css", &hs);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding"), None, "{ae:?}");
        assert_eq!(r.header_all("vary"), ["Accept-Encoding"], "{ae:?}");
        assert!(r.body == css, "{ae:?}");
    }
}

#[test]
fn b31_zstd_coding_token() {
    // static-file alone: identity; with compress (below): the sidecar as `zstd`.
    let html = b"<!doctype html><p>index</p>\n".to_vec();
    let zst = b"\x28\xb5\x2f\xfdfake-zstd-frame".to_vec();
    let (h2, z2) = (html.clone(), zst.clone());
    let s = sf("", move |d| {
        d.write("www/index.html", &h2);
        d.write("www/index.html.zst", &z2);
    });
    let r = s.req("GET", "/", &["Accept-Encoding: zstd"]);
    assert_eq!(r.status, 200);
    match r.header("content-encoding") {
        None => assert_eq!(r.body, html),
        Some("zstd") => assert_eq!(r.body, zst),
        Some(other) => panic!("Content-Encoding: {other} (the token is `zstd`)"),
    }
    let r = s.get("/");
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, html);
    let (h3, z3) = (html.clone(), zst.clone());
    let s = Server::site(
        "\"compress\", \"static-file\"",
        "[vhost.compress]\nprecompressed = [\"br\", \"zstd\", \"gzip\"]\n",
        move |d| {
            d.write("www/index.html", &h3);
            d.write("www/index.html.zst", &z3);
        },
    );
    let r = s.req("GET", "/", &["Accept-Encoding: zstd"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header_all("content-encoding"), ["zstd"]);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.body, zst);
    let r = s.get("/");
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, html);
}

#[test]
fn b32_206_has_no_content_encoding() {
    // Also with the compress module in the pipeline, for the movie and for a
    // compressible page.
    let movie: Vec<u8> = (0..2_100_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let page = b"<p>a compressible page</p>\n".repeat(200);
    let (m2, p2) = (movie.clone(), page.clone());
    let setup = move |d: &TempDir| {
        d.write("www/movie.webm", &m2);
        d.write("www/page.html", &p2);
    };
    for modules in [SF, "\"compress\", \"static-file\""] {
        let s = Server::site(modules, "", setup.clone());
        for (path, body) in [("/movie.webm", &movie), ("/page.html", &page)] {
            let r = s.req(
                "GET",
                path,
                &["Range: bytes=1000-", "Accept-Encoding: gzip, deflate, br"],
            );
            assert_eq!(r.status, 206, "{modules} {path}");
            assert!(
                r.header_all("content-encoding").is_empty(),
                "{:?}",
                r.header_all("content-encoding")
            );
            assert_eq!(
                r.header("content-range"),
                Some(format!("bytes 1000-{}/{}", body.len() - 1, body.len()).as_str())
            );
            assert_framed(&r);
            assert!(r.body == body[1000..], "{modules} {path}");
        }
    }
}

#[test]
fn b33_vary_on_304_and_206() {
    // Without compress: a Vary the 200 carries is also on the 304 and the 206,
    // as one merged field. With compress (below): Accept-Encoding merged in on
    // every variant, and distinct ETags per coding.
    let s = Server::site(
        "\"headers\", \"static-file\"",
        "[vhost.headers]\nadd = { Vary = \"Origin\" }\n",
        |d| {
            d.write("www/app.js", "console.log('app');\n");
            d.write("www/app.js.gz", "\x1f\u{8b}fake");
        },
    );
    let g = s.get("/app.js");
    assert_eq!(g.status, 200);
    assert_eq!(g.header_all("vary"), ["Origin"]);
    let etag = g.header("etag").unwrap().to_string();
    let r = s.req(
        "GET",
        "/app.js",
        &["Accept-Encoding: gzip", &format!("If-None-Match: {etag}")],
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header_all("vary"), ["Origin"]);
    let r = s.req(
        "GET",
        "/app.js",
        &["Accept-Encoding: gzip", "Range: bytes=0-9"],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header_all("vary"), ["Origin"]);
    assert_eq!(r.body, b"console.lo");

    let s = Server::site(
        "\"headers\", \"compress\", \"static-file\"",
        "[vhost.headers]\nadd = { Vary = \"Origin\" }\n\
         [vhost.compress]\nprecompressed = [\"gzip\"]\n",
        |d| {
            d.write("www/app.js", "console.log('app');\n");
            d.write("www/app.js.gz", "\x1f\u{8b}fake");
        },
    );
    // one Vary line holding both names (in either order)
    let vary = |r: &Response| {
        let v = r.header_all("vary");
        assert_eq!(v.len(), 1, "{v:?}");
        let mut e: Vec<String> = v[0]
            .split(',')
            .map(|x| x.trim().to_ascii_lowercase())
            .collect();
        e.sort();
        assert_eq!(e, ["accept-encoding", "origin"], "{v:?}");
    };
    let id = s.get("/app.js");
    assert_eq!(id.status, 200);
    assert_eq!(id.header("content-encoding"), None);
    vary(&id);
    let gz = s.req("GET", "/app.js", &["Accept-Encoding: gzip"]);
    assert_eq!(gz.status, 200);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    vary(&gz);
    let gz_tag = gz.header("etag").unwrap().to_string();
    assert_ne!(id.header("etag"), Some(gz_tag.as_str()));
    let r = s.req(
        "GET",
        "/app.js",
        &["Accept-Encoding: gzip", &format!("If-None-Match: {gz_tag}")],
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(gz_tag.as_str()));
    vary(&r);
    let r = s.req(
        "GET",
        "/app.js",
        &["Accept-Encoding: gzip", "Range: bytes=0-1"],
    );
    assert_eq!(r.status, 206);
    vary(&r);
    assert_eq!(r.body, b"\x1f\xc2");
    let r = s.req("GET", "/app.js", &["Range: bytes=0-9"]);
    assert_eq!(r.status, 206);
    vary(&r);
    assert_eq!(r.body, b"console.lo");
}

// ---------------------------------------------------------------------------
// Cache-Control and Expires

#[test]
fn b40_no_public_for_authorized_requests() {
    // Basic Auth on the vhost (user "user", password "pass"; the hash is
    // `openssl passwd -apr1 -salt saltsalt pass`).
    let s = Server::site(
        "\"auth-basic\", \"expires\", \"static-file\"",
        "[vhost.expires]\nmime-types = { \"text/html\" = \"access plus 1 days\" }\n\
         [vhost.auth-basic]\nrealm = \"site\"\nuser-file = \"htpasswd\"\n",
        |d| {
            d.write("htpasswd", "user:$apr1$saltsalt$xx013OFx2cRtDjpNeiZXf.\n");
            d.write("www/secret.html", "<p>secret</p>");
        },
    );
    // the 401 challenge gets no long max-age and no Expires
    let r = s.get("/secret.html");
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"site\", charset=\"UTF-8\"")
    );
    assert!(r
        .header_all("cache-control")
        .iter()
        .all(|v| !v.contains("max-age=86400")));
    assert_eq!(r.header("expires"), None);
    let r = s.req(
        "GET",
        "/secret.html",
        &["Authorization: Basic dXNlcjpwYXNz"],
    );
    assert_eq!(r.status, 200);
    let cc = r.header_all("cache-control");
    assert_eq!(cc.len(), 1, "{cc:?}");
    let directives: Vec<String> = cc[0]
        .split(',')
        .map(|d| d.trim().to_ascii_lowercase())
        .collect();
    assert!(directives.iter().any(|d| d == "max-age=86400"), "{cc:?}");
    assert!(!directives.iter().any(|d| d == "public"), "{cc:?}");
    // an error response gets no long max-age
    let r = s.req(
        "GET",
        "/missing.html",
        &["Authorization: Basic dXNlcjpwYXNz"],
    );
    assert_eq!(r.status, 404);
    assert!(
        r.header_all("cache-control")
            .iter()
            .all(|v| !v.contains("max-age=86400")),
        "{:?}",
        r.header_all("cache-control")
    );
    assert_eq!(r.header("expires"), None);
}

/// Directives of the single Cache-Control line, lower-cased.
#[track_caller]
fn one_cache_control(r: &Response) -> Vec<String> {
    let cc = r.header_all("cache-control");
    assert_eq!(cc.len(), 1, "one Cache-Control line: {cc:?}");
    let mut d: Vec<String> = cc[0]
        .split(',')
        .map(|d| d.trim().to_ascii_lowercase())
        .collect();
    d.sort();
    d
}

#[test]
fn b41_one_coherent_cache_policy() {
    for op in ["set", "add"] {
        let s = Server::site(
            "\"headers\", \"expires\", \"static-file\"",
            &format!(
                "[vhost.headers]\n{op} = {{ \"Cache-Control\" = \"public, must-revalidate\" }}\n\
                 [vhost.expires]\nmime-types = {{ \"image/png\" = \"access plus 30 days\" }}\nexisting-cache-control = \"merge\"\n"
            ),
            |d| {
                d.write("www/logo.png", "\u{89}PNG");
            },
        );
        let r = s.get("/logo.png");
        assert_eq!(r.status, 200);
        assert_eq!(
            one_cache_control(&r),
            ["max-age=2592000", "must-revalidate", "public"],
            "{op}"
        );
        let exp = r.header_all("expires");
        assert!(exp.len() <= 1, "{exp:?}");
        if let Some(e) = exp.first() {
            assert!(e.ends_with(" GMT") && e.len() == 29, "IMF-fixdate: {e}");
            let date = unix(http_date(r.header("date").unwrap()));
            let diff = unix(http_date(e)) - date - 2_592_000;
            assert!((-2..=2).contains(&diff), "Expires {e} vs Date {date}");
        }
    }
    // "modification plus N" on a file older than N: Expires in the past, max-age=0
    let s = Server::site(
        "\"expires\", \"static-file\"",
        "[vhost.expires]\nurl = { \"/\" = \"modification plus 1 hours\" }\n",
        |d| {
            let p = d.write("www/old.png", "\u{89}PNG");
            set_mtime(&p, SystemTime::now() - Duration::from_secs(2 * 86_400));
        },
    );
    let r = s.get("/old.png");
    assert_eq!(r.status, 200);
    assert_eq!(one_cache_control(&r), ["max-age=0"]);
    let lm = unix(http_date(r.header("last-modified").unwrap()));
    let exp = r.header_all("expires");
    assert!(exp.len() <= 1, "{exp:?}");
    if let Some(e) = exp.first() {
        assert_eq!(unix(http_date(e)), lm + 3600, "{e}");
        assert!(unix(http_date(e)) < unix(http_date(r.header("date").unwrap())));
    }
}

/// A 206 carries the Cache-Control and Expires a 200 would (RFC 9110
/// §15.3.7): a multipart one too, whose own Content-Type is
/// `multipart/byteranges`, not the file's.
#[test]
fn a_multipart_206_keeps_the_expiry_of_its_type() {
    let s = Server::site(
        "\"expires\", \"static-file\"",
        "[vhost.expires]\nmime-types = { \"text/\" = \"access plus 1 days\" }\n",
        |d| {
            d.write("www/x.css", "a".repeat(100));
        },
    );
    for range in [None, Some("bytes=0-9"), Some("bytes=0-9,20-29")] {
        let headers: Vec<String> = range.iter().map(|r| format!("Range: {r}")).collect();
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let r = s.req("GET", "/x.css", &headers);
        assert!(
            r.status == 200 || r.status == 206,
            "{range:?}: {}",
            r.status
        );
        assert_eq!(
            r.header_all("cache-control"),
            ["max-age=86400"],
            "{range:?}"
        );
        assert_eq!(r.header_all("expires").len(), 1, "{range:?}");
    }
}

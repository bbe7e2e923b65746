//! `compress` over real HTTP: on-the-fly br/zstd/gzip with Accept-Encoding
//! q-values, precompressed sidecars with Range and conditional requests, Vary on
//! every variant, distinct ETags per coding, and what is never compressed.

use std::io::{Read, Write};

use crate::util::{Response, Server, TempDir};

const MODS: &str = "\"compress\", \"static-file\"";

fn css() -> Vec<u8> {
    b"body { color: red; margin: 0 auto; }\n".repeat(200)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => {
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap();
        }
        "br" => {
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        "zstd" => out = zstd::stream::decode_all(data).unwrap(),
        other => panic!("coding {other}"),
    }
    out
}

fn server(extra: &str, setup: impl FnOnce(&TempDir)) -> Server {
    Server::site(MODS, extra, setup)
}

fn site() -> Server {
    let big: Vec<u8> = (0..300_000u32)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    server(
        "[vhost.compress]\nprecompressed = [\"br\", \"zstd\", \"gzip\"]\n",
        move |d| {
            d.write("www/app.css", css());
            d.write("www/tiny.css", "a{}");
            d.write("www/logo.png", vec![7u8; 5000]);
            d.write("www/big.txt", big);
            let js = b"console.log('app');\n".repeat(100);
            d.write("www/app.js", &js);
            d.write("www/app.js.gz", gzip(&js));
            d.write(
                "www/index.html",
                b"<!doctype html><p>index</p>\n".repeat(10),
            );
        },
    )
}

/// Exactly one Vary field line, and it names Accept-Encoding.
#[track_caller]
fn assert_vary(r: &Response) {
    let v = r.header_all("vary");
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].to_ascii_lowercase().contains("accept-encoding"),
        "{v:?}"
    );
}

#[track_caller]
fn assert_framed(r: &Response) {
    assert_eq!(r.header("transfer-encoding"), None);
    let n: usize = r.header("content-length").unwrap().parse().unwrap();
    assert_eq!(n, r.raw_body.len());
}

#[test]
fn on_the_fly_each_coding() {
    let s = site();
    for (ae, coding) in [
        ("gzip", "gzip"),
        ("br", "br"),
        ("zstd", "zstd"),
        ("gzip, deflate, br, zstd", "br"),
        ("gzip;q=1, br;q=0.5, zstd;q=0.8", "gzip"),
        ("zstd;q=0.9, gzip;q=0.9", "zstd"),
        ("*", "br"),
        ("br;q=0, *;q=0.5", "zstd"),
        ("gzip, identity;q=0", "gzip"),
        ("x-gzip", "gzip"),
    ] {
        let r = s.req("GET", "/app.css", &[&format!("Accept-Encoding: {ae}")]);
        assert_eq!(r.status, 200, "{ae}");
        assert_eq!(r.header_all("content-encoding"), [coding], "{ae}");
        assert_eq!(r.header("content-type"), Some("text/css; charset=utf-8"));
        assert_vary(&r);
        assert_eq!(r.header("accept-ranges"), None, "{ae}");
        let tag = r.header("etag").unwrap();
        assert!(tag.ends_with(&format!("-{coding}\"")), "{ae}: {tag}");
        assert_framed(&r);
        assert!(r.body.len() < css().len() / 5, "{ae}: {}", r.body.len());
        assert_eq!(decode(coding, &r.body), css(), "{ae}");
    }
}

#[test]
fn identity_when_not_accepted() {
    let s = site();
    let plain = s.get("/app.css");
    let plain_tag = plain.header("etag").unwrap().to_string();
    for ae in [
        None,
        Some("Accept-Encoding: gzip;q=0"),
        Some("Accept-Encoding: identity"),
        Some("Accept-Encoding: gzip;q=0.5, identity"),
        Some("Accept-Encoding: identity;q=0"),
        Some("Accept-Encoding: *;q=0"),
        Some("Accept-Encoding: deflate, compress"),
        Some("Accept-Encoding: "),
        Some("Accept-Encoding: ;;;,,,q=1,gzip;q=7"),
    ] {
        let hs: Vec<&str> = ae.into_iter().collect();
        let r = s.req("GET", "/app.css", &hs);
        assert_eq!(r.status, 200, "{ae:?}");
        assert_eq!(r.header("content-encoding"), None, "{ae:?}");
        assert_eq!(r.body, css(), "{ae:?}");
        assert_eq!(r.header("etag"), Some(plain_tag.as_str()), "{ae:?}");
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
        assert_vary(&r);
    }
}

#[test]
fn distinct_etags_and_304_per_coding() {
    let s = site();
    let id = s.get("/app.css");
    let gz = s.req("GET", "/app.css", &["Accept-Encoding: gzip"]);
    let br = s.req("GET", "/app.css", &["Accept-Encoding: br"]);
    let (t_id, t_gz, t_br) = (
        id.header("etag").unwrap(),
        gz.header("etag").unwrap(),
        br.header("etag").unwrap(),
    );
    assert!(t_id != t_gz && t_gz != t_br && t_id != t_br);
    // the gzip tag with gzip accepted: 304 with that tag and Vary
    let r = s.req(
        "GET",
        "/app.css",
        &["Accept-Encoding: gzip", &format!("If-None-Match: {t_gz}")],
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(t_gz));
    assert_eq!(r.header("content-encoding"), None);
    assert!(r.body.is_empty());
    assert_vary(&r);
    // the gzip tag when the client now wants br: a full br answer
    let r = s.req(
        "GET",
        "/app.css",
        &["Accept-Encoding: br", &format!("If-None-Match: {t_gz}")],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("br"));
    // the gzip tag without Accept-Encoding: the identity answer
    let r = s.req("GET", "/app.css", &[&format!("If-None-Match: {t_gz}")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, css());
    // the identity tag: 304 from static-file, with Vary
    let r = s.req("GET", "/app.css", &[&format!("If-None-Match: {t_id}")]);
    assert_eq!(r.status, 304);
    assert_vary(&r);
}

#[test]
fn vary_on_every_variant_merged_with_headers() {
    let s = Server::site(
        "\"headers\", \"compress\", \"static-file\"",
        "[vhost.headers]\nadd = { Vary = \"Origin\" }\n",
        |d| {
            d.write("www/app.css", css());
        },
    );
    let id = s.get("/app.css");
    let gz = s.req("GET", "/app.css", &["Accept-Encoding: gzip"]);
    let nm = s.req(
        "GET",
        "/app.css",
        &[
            "Accept-Encoding: gzip",
            &format!("If-None-Match: {}", gz.header("etag").unwrap()),
        ],
    );
    let nm_id = s.req(
        "GET",
        "/app.css",
        &[&format!("If-None-Match: {}", id.header("etag").unwrap())],
    );
    let part = s.req(
        "GET",
        "/app.css",
        &["Accept-Encoding: gzip", "Range: bytes=0-9"],
    );
    let multi = s.req(
        "GET",
        "/app.css",
        &["Accept-Encoding: gzip", "Range: bytes=0-1,5-6"],
    );
    let head = s.req("HEAD", "/app.css", &["Accept-Encoding: gzip"]);
    assert_eq!(
        [
            id.status,
            gz.status,
            nm.status,
            nm_id.status,
            part.status,
            multi.status,
            head.status
        ],
        [200, 200, 304, 304, 206, 206, 200]
    );
    for r in [&id, &gz, &nm, &nm_id, &part, &multi, &head] {
        assert_eq!(
            r.header_all("vary"),
            ["Origin, Accept-Encoding"],
            "{}",
            r.status
        );
    }
    assert_eq!(part.body, &css()[..10]);
}

#[test]
fn never_compressed() {
    let s = site();
    let ae = "Accept-Encoding: gzip, br, zstd";
    // 206 (B32): identity bytes of the range, no Content-Encoding at all
    let r = s.req("GET", "/app.css", &[ae, "Range: bytes=100-"]);
    assert_eq!(r.status, 206);
    assert!(r.header_all("content-encoding").is_empty());
    assert_eq!(r.body, &css()[100..]);
    assert_framed(&r);
    // HEAD: the identity headers
    let r = s.req("HEAD", "/app.css", &[ae]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(
        r.header("content-length"),
        Some(css().len().to_string().as_str())
    );
    assert_vary(&r);
    // below min-size
    let r = s.req("GET", "/tiny.css", &[ae]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, b"a{}");
    // not a compressible type: neither coding nor Vary
    let r = s.req("GET", "/logo.png", &[ae]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.header("vary"), None);
    assert_eq!(r.body.len(), 5000);
    // errors
    let r = s.req("GET", "/missing.css", &[ae]);
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-encoding"), None);
    // POST is 405, untouched
    let r = s.req("POST", "/app.css", &[ae, "Content-Length: 0"]);
    assert_eq!(r.status, 405);
    assert_eq!(r.header("content-encoding"), None);
}

#[test]
fn no_transform_is_respected() {
    let s = Server::site(
        "\"headers\", \"compress\", \"static-file\"",
        "[vhost.headers]\nset = { Cache-Control = \"no-transform\" }\n",
        |d| {
            d.write("www/app.css", css());
        },
    );
    let r = s.req("GET", "/app.css", &["Accept-Encoding: gzip"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, css());
}

#[test]
fn large_files_stream_compressed_and_are_cached() {
    let s = site();
    let plain = s.get("/big.txt");
    assert!(plain.body.len() > 128 * 1024);
    let mut first = None;
    for _ in 0..2 {
        let r = s.req("GET", "/big.txt", &["Accept-Encoding: zstd"]);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding"), Some("zstd"));
        assert_vary(&r);
        assert_eq!(decode("zstd", &r.body), plain.body);
        match &first {
            None => first = Some(r.body.clone()),
            Some(b) => assert_eq!(&r.body, b, "same bytes from the cache"),
        }
    }
    // the second answer came from the cache: one buffer with Content-Length
    let r = s.req("GET", "/big.txt", &["Accept-Encoding: zstd"]);
    assert_framed(&r);
}

#[test]
fn precompressed_sidecar_served_as_is() {
    let s = site();
    let js = b"console.log('app');\n".repeat(100);
    let gz = gzip(&js);
    let r = s.req("GET", "/app.js", &["Accept-Encoding: gzip, br, zstd"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header_all("content-encoding"), ["gzip"], "B30: once");
    assert_eq!(
        r.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(r.body, gz, "sidecar bytes as they are");
    assert_eq!(decode("gzip", &r.body), js);
    assert_framed(&r);
    assert_vary(&r);
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    let tag = r.header("etag").unwrap().to_string();
    assert!(tag.ends_with("-gzip\""), "{tag}");
    // HEAD: the sidecar's headers and length
    let h = s.req("HEAD", "/app.js", &["Accept-Encoding: gzip"]);
    assert_eq!(h.header("content-encoding"), Some("gzip"));
    assert_eq!(
        h.header("content-length"),
        Some(gz.len().to_string().as_str())
    );
    // br preferred but only .gz exists: on-the-fly br, not the sidecar
    let r = s.req("GET", "/app.js", &["Accept-Encoding: br"]);
    assert_eq!(r.header("content-encoding"), Some("br"));
    assert_eq!(decode("br", &r.body), js);
    // conditional on the sidecar's tag
    let r = s.req(
        "GET",
        "/app.js",
        &["Accept-Encoding: gzip", &format!("If-None-Match: {tag}")],
    );
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(tag.as_str()));
    assert_vary(&r);
    // Range applies to the encoded bytes
    let r = s.req(
        "GET",
        "/app.js",
        &["Accept-Encoding: gzip", "Range: bytes=0-9"],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 0-9/{}", gz.len()).as_str())
    );
    assert_eq!(r.body, &gz[..10]);
    assert_vary(&r);
    let r = s.req(
        "GET",
        "/app.js",
        &[
            "Accept-Encoding: gzip",
            "Range: bytes=10-",
            &format!("If-Range: {tag}"),
        ],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &gz[10..]);
    // gzip refused: the identity file, its own tag
    let r = s.req("GET", "/app.js", &["Accept-Encoding: gzip;q=0"]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, js);
    assert_ne!(r.header("etag"), Some(tag.as_str()));
}

#[test]
fn zstd_sidecar_token_for_index() {
    let html = b"<!doctype html><p>index</p>\n".to_vec();
    let zst = zstd::bulk::compress(&html, 3).unwrap();
    let (h2, z2) = (html.clone(), zst.clone());
    let s = server(
        "[vhost.compress]\nprecompressed = [\"zstd\"]\nencodings = []\n",
        move |d| {
            d.write("www/index.html", &h2);
            d.write("www/index.html.zst", &z2);
        },
    );
    let r = s.req("GET", "/", &["Accept-Encoding: zstd"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header_all("content-encoding"), ["zstd"]);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.body, zst);
    assert_eq!(decode("zstd", &r.body), html);
    let r = s.get("/");
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.body, html);
}

#[test]
fn hidden_and_traversal_never_reach_sidecars() {
    let s = server("[vhost.compress]\nprecompressed = [\"gzip\"]\n", |d| {
        d.write("www/.env", "SECRET=1");
        d.write("www/.env.gz", gzip(b"SECRET=1"));
        d.write("secret.txt", "outside");
        d.write("secret.txt.gz", gzip(b"outside"));
    });
    assert_eq!(
        s.req("GET", "/.env", &["Accept-Encoding: gzip"]).status,
        404
    );
    let r = s.req("GET", "/../secret.txt", &["Accept-Encoding: gzip"]);
    assert!(r.status == 400 || r.status == 404, "{}", r.status);
    assert!(!r.text().contains("outside"));
}

#[test]
fn access_log_counts_compressed_bytes() {
    let s = Server::site(
        "\"access-log\", \"compress\", \"static-file\"",
        "[vhost.access-log]\npath = \"logs/access.log\"\nformat = \"%U %>s %b\"\n",
        |d| {
            d.write("www/app.css", css());
        },
    );
    let r = s.req("GET", "/app.css", &["Accept-Encoding: gzip"]);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let sent = r.raw_body.len();
    let path = s.dir.path().join("logs/access.log");
    let dir = s.dir.path().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let log = std::fs::read_to_string(path).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    assert_eq!(log.trim(), format!("/app.css 200 {sent}"));
}

#[test]
fn bad_configurations_are_refused() {
    for (table, key) in [
        ("precompressed = [\"zst\"]", "precompressed"),
        ("encodings = [\"deflate\"]", "encodings"),
        ("encodings = [\"gzip\", \"gzip\"]", "encodings[1]"),
        ("min-size = 10\nmax-size = 1", "min-size"),
        ("gzip-level = 10", "gzip-level"),
        ("mime-types = [\"html\"]", "mime-types[0]"),
        ("cache = 1", "cache"),
    ] {
        let d = TempDir::new("compress-conf");
        d.mkdir("www");
        let f = d.write(
            "server.toml",
            crate::util::site_config(MODS, &format!("[vhost.compress]\n{table}\n")),
        );
        let out = std::process::Command::new(crate::util::bin())
            .arg("-t")
            .arg("-c")
            .arg(&f)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{table}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{table}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
}

#[test]
fn sidecars_of_non_compressible_sources_are_not_served() {
    let s = crate::util::Server::site(
        "\"compress\", \"static-file\"",
        "[vhost.compress]\nprecompressed = [\"gzip\"]\n[vhost.static-file]\nexclude-extensions = [\"php\"]\n",
        |d| {
            d.write("www/app/config.php", "<?php $secret = 1; ?>");
            d.write("www/app/config.php.gz", "<?php $secret = 1; ?> (pretend gzip)");
        },
    );
    // an excluded file no module takes: refused (403, as lighttpd), and
    // its sidecar is never sent instead
    let r = s.req("GET", "/app/config.php", &["Accept-Encoding: gzip"]);
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(!r.text().contains("secret"));
}

#[test]
fn if_match_with_the_encoded_etag_holds() {
    let s = site();
    let gz = s.req("GET", "/app.css", &["Accept-Encoding: gzip"]);
    let tag = gz.header("etag").unwrap().to_string();
    let r = s.req(
        "GET",
        "/app.css",
        &["Accept-Encoding: gzip", &format!("If-Match: {tag}")],
    );
    assert_eq!(r.status, 200, "If-Match {tag}");
    assert_eq!(r.header("etag"), Some(tag.as_str()));
    assert_eq!(
        s.req("GET", "/app.css", &["If-Match: \"other\""]).status,
        412
    );
}

#[test]
fn a_sidecar_gets_the_content_type_static_file_would_give() {
    // An operator serves user-uploaded .html as text/plain (no XSS); the
    // precompressed sidecar must not bring text/html back.
    let html = b"<script>alert(1)</script>\n".repeat(50);
    let s = server(
        "[vhost.compress]\nprecompressed = [\"gzip\"]\nencodings = []\n\
         [vhost.static-file]\nmime-types = { html = \"text/plain; charset=utf-8\" }\n",
        |d| {
            d.write("www/upload.html", &html);
            d.write("www/upload.html.gz", gzip(&html));
        },
    );
    let plain = s.get("/upload.html");
    assert_eq!(
        plain.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let r = s.req("GET", "/upload.html", &["Accept-Encoding: gzip"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(decode("gzip", &r.body), html);
}

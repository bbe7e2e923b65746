//! Range requests (b01–b08) and conditional requests with their validators (b11–b13).

use std::fs::File;
use std::time::{Duration, UNIX_EPOCH};

use crate::util::Response;

use super::*;

/// Splits a multipart/byteranges body into (part headers, part body).
fn multipart(r: &Response) -> Vec<(String, Vec<u8>)> {
    let ct = r.header("content-type").unwrap();
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("not multipart: {ct}"));
    let delim = format!("--{boundary}");
    let text = String::from_utf8(r.body.clone()).unwrap();
    let pieces: Vec<&str> = text.split(&delim).collect();
    assert_eq!(pieces.first(), Some(&""), "body starts with the boundary");
    assert_eq!(pieces.last(), Some(&"--\r\n"), "closing delimiter");
    pieces[1..pieces.len() - 1]
        .iter()
        .map(|p| {
            let p = p.strip_prefix("\r\n").expect("CRLF after boundary");
            let p = p.strip_suffix("\r\n").expect("CRLF before boundary");
            let (h, b) = p.split_once("\r\n\r\n").expect("part head");
            (h.to_string(), b.as_bytes().to_vec())
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Range

#[test]
fn b01_range_end_past_eof() {
    let page: Vec<u8> = (0..1000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let p2 = page.clone();
    let s = sf("", move |d| {
        d.write("www/page.html", &p2);
    });
    let r = s.req("GET", "/page.html", &["Range: bytes=0-3145727"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 0-999/1000"));
    assert_eq!(r.header("content-length"), Some("1000"));
    assert_framed(&r);
    assert!(r.body == page);
    // a later start past the end is still clamped, never 416
    let r = s.req("GET", "/page.html", &["Range: bytes=990-3145727"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 990-999/1000"));
    assert_eq!(r.body, &page[990..]);
}

#[test]
fn b02_multi_range_not_416() {
    let s = sf("", |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let r = s.req("GET", "/ten.txt", &["Range: bytes=0-0,2-2,4-4"]);
    assert_eq!(r.status, 206);
    assert_framed(&r);
    let parts = multipart(&r);
    assert_eq!(parts.len(), 3);
    for (i, (h, b)) in parts.iter().enumerate() {
        let n = 2 * i;
        assert!(h.contains("Content-Type: text/plain; charset=utf-8"), "{h}");
        assert!(
            h.contains(&format!("Content-Range: bytes {n}-{n}/10")),
            "{h}"
        );
        assert_eq!(b, &n.to_string().into_bytes());
    }
    // HEAD with the same Range: plain 200 headers (§14.2: ranges are for GET)
    let h = s.req("HEAD", "/ten.txt", &["Range: bytes=0-0,2-2,4-4"]);
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some("10"));
    assert_eq!(h.header("content-type"), Some("text/plain; charset=utf-8"));
    assert!(h.raw_body.is_empty());
    // a 416 does not carry the file's Content-Type
    let r = s.req("GET", "/ten.txt", &["Range: bytes=20-30,40-50"]);
    assert_eq!(r.status, 416);
    assert_ne!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("content-encoding"), None);
}

#[test]
fn b04_unknown_range_unit_ignored() {
    let s = sf("", |d| {
        d.write("www/s.txt", "0123456789abcdef");
    });
    let r = s.req("GET", "/s.txt", &["Range: items=0-3"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"0123456789abcdef");
    assert_eq!(r.header("content-range"), None);
    let r = s.req("GET", "/s.txt", &["Range: bytes=0-3"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, b"0123");
}

#[test]
fn b05_416_has_content_range() {
    let s = sf("", |d| {
        d.write("www/three.txt", "abc");
    });
    let r = s.req("GET", "/three.txt", &["Range: bytes=10-20"]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */3"));
    assert_framed(&r);
}

#[test]
fn b06_206_has_content_length() {
    let html: Vec<u8> = (0..2074u32).map(|i| b'A' + (i % 23) as u8).collect();
    let h2 = html.clone();
    let s = sf("", move |d| {
        d.write("www/index.html", &h2);
    });
    let r = s.req("GET", "/index.html", &["Range: bytes=0-20"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 0-20/2074"));
    assert_eq!(r.header("content-length"), Some("21"));
    assert_framed(&r);
    assert_eq!(r.body, &html[..21]);
}

#[test]
fn b07_whole_file_range_is_206() {
    let clip: Vec<u8> = (0..100u8).collect();
    let c2 = clip.clone();
    let s = sf("", move |d| {
        d.write("www/clip.mp4", &c2);
    });
    let r = s.req("GET", "/clip.mp4", &["Range: bytes=0-"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 0-99/100"));
    assert_eq!(r.header("content-length"), Some("100"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("content-type"), Some("video/mp4"));
    assert_framed(&r);
    assert_eq!(r.body, clip);
}

#[test]
fn b08_empty_range_values() {
    let data: Vec<u8> = (0..100u8).rev().collect();
    let d2 = data.clone();
    let s = sf("", move |d| {
        d.write("www/test.binary", &d2);
    });
    for range in ["Range:", "Range: bytes="] {
        let r = s.req("GET", "/test.binary", &[range]);
        // Tessera ignores an empty range set: 200 with the whole file
        assert_eq!(r.status, 200, "{range}");
        assert_eq!(r.body, data, "{range}");
        assert_framed(&r);
    }
    // the worker survived
    assert_eq!(
        s.req("GET", "/test.binary", &["Range: bytes=0-1"]).body,
        &data[..2]
    );
}

// ---------------------------------------------------------------------------
// Conditional requests and validators

#[test]
fn b11_subsecond_mtime_if_modified_since() {
    let s = sf("", |d| {
        let p = d.write("www/a.css", "a{}");
        let t = http_date("Sat, 04 May 2024 16:34:47 GMT") + Duration::from_nanos(596_349_158);
        set_mtime(&p, t);
    });
    let g = s.get("/a.css");
    assert_eq!(g.status, 200);
    assert_eq!(
        g.header("last-modified"),
        Some("Sat, 04 May 2024 16:34:47 GMT")
    );
    let r = s.req(
        "GET",
        "/a.css",
        &["If-Modified-Since: Sat, 04 May 2024 16:34:47 GMT"],
    );
    assert_eq!(r.status, 304);
    assert!(r.raw_body.is_empty());
    // later than Last-Modified: not modified either
    let r = s.req(
        "GET",
        "/a.css",
        &["If-Modified-Since: Sat, 04 May 2024 16:34:48 GMT"],
    );
    assert_eq!(r.status, 304);
    // one second earlier: modified since
    let r = s.req(
        "GET",
        "/a.css",
        &["If-Modified-Since: Sat, 04 May 2024 16:34:46 GMT"],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"a{}");
    // not an HTTP-date: ignored
    let r = s.req("GET", "/a.css", &["If-Modified-Since: yesterday"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"a{}");
}

#[test]
fn b12_pre_1970_and_far_future_mtimes() {
    let s = sf("", |d| {
        // 1964-02-12 12:30:00 UTC
        let p = d.write("www/archive.mp4", "old footage");
        set_mtime(&p, UNIX_EPOCH - Duration::from_secs(185_715_000));
        let p = d.write("www/minus1.mp4", "one second before");
        set_mtime(&p, UNIX_EPOCH - Duration::from_secs(1));
        let p = d.write("www/future.mp4", "far future");
        // year 10000; the file system may clamp it (ext4 stops at 2446)
        let _ = File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(UNIX_EPOCH + Duration::from_secs(253_402_300_800));
    });
    for (path, body, allowed_lm) in [
        (
            "/archive.mp4",
            "old footage",
            "Wed, 12 Feb 1964 12:30:00 GMT",
        ),
        (
            "/minus1.mp4",
            "one second before",
            "Wed, 31 Dec 1969 23:59:59 GMT",
        ),
    ] {
        let r = s.get(path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.text(), body);
        // a valid IMF-fixdate for the real time, or none at all
        let lm = r.header("last-modified");
        assert!(lm.is_none() || lm == Some(allowed_lm), "{path}: {lm:?}");
        let etag = r
            .header("etag")
            .unwrap_or_else(|| panic!("{path}: no ETag"));
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        // the validator works
        assert_eq!(
            s.req("GET", path, &[&format!("If-None-Match: {etag}")])
                .status,
            304
        );
    }
    let r = s.get("/future.mp4");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "far future");
    assert!(r.header("etag").is_some());
    let mtime = std::fs::metadata(s.root().join("future.mp4"))
        .unwrap()
        .modified()
        .unwrap();
    if let Some(lm) = r.header("last-modified") {
        assert_eq!(unix(http_date(lm)), unix(mtime), "{lm}");
    } else {
        // omitted only when the time cannot be written as an HTTP-date
        assert!(
            unix(mtime) >= 253_402_300_800,
            "Last-Modified missing for {mtime:?}"
        );
    }
}

#[test]
fn b13_head_content_length() {
    let s = sf("", |d| {
        let f = File::create(d.path().join("www/big.bin")).unwrap();
        f.set_len(9_513_784).unwrap();
    });
    let h = s.req("HEAD", "/big.bin", &[]);
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some("9513784"));
    assert_eq!(h.header("accept-ranges"), Some("bytes"));
    assert!(
        h.raw_body.is_empty(),
        "HEAD sent {} body bytes",
        h.raw_body.len()
    );
    let g = s.get("/big.bin");
    assert_eq!(g.header("content-length"), Some("9513784"));
    assert_eq!(g.raw_body.len(), 9_513_784);
    for k in ["etag", "last-modified", "content-type", "accept-ranges"] {
        assert!(g.header(k).is_some(), "{k}");
        assert_eq!(g.header(k), h.header(k), "{k}");
    }
    // Range is ignored on HEAD
    let h = s.req("HEAD", "/big.bin", &["Range: bytes=0-1"]);
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some("9513784"));
    assert_eq!(h.header("content-range"), None);
    assert!(h.raw_body.is_empty());
}

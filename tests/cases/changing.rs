//! Files changing while they are served (b42).

use std::sync::{Arc, Barrier};

use crate::util::Response;

use super::*;

/// Version `i` of data.json: distinct content and length, some versions above
/// the 128 KiB whole-read threshold so that both read paths are exercised.
fn version(i: usize) -> Vec<u8> {
    let pad = (i * 7919) % 300_000;
    let mut v = format!("{{\"v\":{i:04},\"pad\":\"").into_bytes();
    v.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, pad));
    v.extend_from_slice(b"\"}\n");
    v
}

fn version_of(body: &[u8]) -> Option<usize> {
    let n = body.strip_prefix(b"{\"v\":")?.get(..4)?;
    std::str::from_utf8(n).ok()?.parse().ok()
}

const REWRITES: usize = 200;
const REQUESTS: usize = 200;

#[test]
fn b42_atomic_replace_while_serving() {
    let s = sf("", |d| {
        d.write("www/data.json", version(0));
    });
    let root = s.root();
    let start = Arc::new(Barrier::new(2));
    let go = start.clone();
    let writer = std::thread::spawn(move || {
        go.wait();
        for i in 1..=REWRITES {
            let tmp = root.join("data.json.tmp");
            std::fs::write(&tmp, version(i)).unwrap();
            std::fs::rename(&tmp, root.join("data.json")).unwrap();
        }
    });
    start.wait();
    let mut seen = std::collections::BTreeSet::new();
    for n in 0..REQUESTS {
        let r = s.get("/data.json");
        assert_eq!(r.status, 200, "request {n}");
        assert_framed(&r);
        let v = version_of(&r.body).unwrap_or_else(|| panic!("request {n}: not a version"));
        assert!(
            r.body == version(v),
            "request {n}: torn body for version {v}"
        );
        // Tessera's ETag ends with the size it describes: old validators are
        // never paired with new bytes
        let etag = r.header("etag").unwrap();
        assert!(
            etag.ends_with(&format!("-{:x}\"", r.body.len())),
            "request {n}: ETag {etag} for {} bytes",
            r.body.len()
        );
        seen.insert(v);
    }
    writer.join().unwrap();
    let r = s.get("/data.json");
    assert!(r.body == version(REWRITES));
    assert!(!seen.is_empty());
}

/// B42 (a) with `follow-symlinks = "never"`: a file replaced by
/// write-then-rename while it is opened is served, never refused. The check
/// once read the opened file's path back from `/proc/self/fd`, which had
/// become `data.json (deleted)`: 1 to 3% of the GETs got 403.
#[test]
fn b42_atomic_replace_with_symlinks_never_is_never_403() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let s = sf(
        "[vhost.static-file]\nfollow-symlinks = \"never\"\nopen-file-cache = 0\n",
        |d| {
            d.write("www/data.json", version(0));
        },
    );
    let root = s.root();
    let stop = Arc::new(AtomicBool::new(false));
    let done = stop.clone();
    // bounded: at most 100,000 renames, or until the reader is done
    let writer = std::thread::spawn(move || {
        let tmp = root.join("data.json.tmp");
        for i in 1..=100_000 {
            if done.load(Ordering::Relaxed) {
                break;
            }
            std::fs::write(&tmp, version(i % 50)).unwrap();
            std::fs::rename(&tmp, root.join("data.json")).unwrap();
        }
    });
    let mut refused = 0;
    for _ in 0..1000 {
        let r = s.req("GET", "/data.json", &[]);
        match r.status {
            200 => assert_framed(&r),
            403 => refused += 1,
            other => panic!("status {other}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(
        refused, 0,
        "403s for a file that exists at the requested path"
    );
}

#[test]
fn b42_in_place_rewrite_never_overruns() {
    let s = sf("", |d| {
        d.write("www/data.json", version(0));
    });
    let path = s.root().join("data.json");
    let start = Arc::new(Barrier::new(2));
    let go = start.clone();
    let writer = std::thread::spawn(move || {
        go.wait();
        for i in 1..=REWRITES {
            std::fs::write(&path, version(i)).unwrap(); // truncate, then write
        }
    });
    start.wait();
    for n in 0..REQUESTS {
        let raw = s.raw(b"GET /data.json HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n");
        if raw.is_empty() {
            // the file shrank before the first byte was read: the connection is
            // closed without a response, which keeps nothing out of sync
            continue;
        }
        let r = Response::parse(&raw, false);
        assert_eq!(r.status, 200, "request {n}");
        assert_eq!(r.header("transfer-encoding"), None);
        let cl: usize = r.header("content-length").unwrap().parse().unwrap();
        // fewer bytes only with the connection closed (it is: Connection: close);
        // never more than announced
        assert!(
            r.raw_body.len() <= cl,
            "request {n}: {} bytes for Content-Length {cl}",
            r.raw_body.len()
        );
    }
    writer.join().unwrap();
    // the server is still up and serves the final version whole
    let r = s.get("/data.json");
    assert_framed(&r);
    assert!(r.body == version(REWRITES));
}

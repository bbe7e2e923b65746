use super::*;
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;
use tessera_core::actix_web::http::header::HeaderName;
use tessera_core::actix_web::test::TestRequest;
use tessera_core::actix_web::HttpRequest;
use tessera_core::vhost::VhostInfo;
use tessera_core::SharedState;

fn build(json: serde_json::Value) -> Result<Compress, String> {
    let cfg: CompressConfig = serde_json::from_value(json).map_err(|e| e.to_string())?;
    let v = vhost(std::env::temp_dir());
    let shared = SharedState::default();
    Compress::build(
        cfg,
        &BuildContext {
            vhost: &v,
            config_dir: Path::new("."),
            shared: &shared,
            rule_match: None,
            upstreams: &tessera_core::upstream::Upstreams::default(),
        },
    )
}

fn vhost(root: PathBuf) -> VhostInfo {
    VhostInfo {
        index: 0,
        names: vec!["site.test".into()],
        document_root: root,
    }
}

fn req(method: Method, path: &str, headers: &[(&str, &str)]) -> HttpRequest {
    let mut r = TestRequest::default().method(method).uri(path);
    for (k, v) in headers {
        r = r.append_header((*k, *v));
    }
    r.to_http_request()
}

fn decode(coding: Coding, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        Coding::Gzip => {
            flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap();
        }
        Coding::Br => {
            brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        Coding::Zstd => out = zstd::stream::decode_all(data).unwrap(),
    }
    out
}

fn body_bytes(res: HttpResponse) -> Bytes {
    res.into_body()
        .try_into_bytes()
        .unwrap_or_else(|_| panic!("not a buffer"))
}

/// A 200 `text/css` response of `body` with ETag `"t"`.
fn css(body: &[u8]) -> HttpResponse {
    let mut r = HttpResponse::Ok().body(body.to_vec());
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css"));
    r.headers_mut()
        .insert(header::ETAG, HeaderValue::from_static("\"t\""));
    r.headers_mut()
        .insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    r
}

fn run(m: &Compress, req: &HttpRequest, mut res: HttpResponse) -> HttpResponse {
    let v = vhost(std::env::temp_dir());
    let mut cx = Ctx::new(req, &v, Cow::Owned(req.path().to_owned()));
    m.on_response(&mut cx, &mut res);
    res
}

fn hv<'a>(r: &'a HttpResponse, name: &str) -> Vec<&'a str> {
    r.headers()
        .get_all(HeaderName::from_bytes(name.as_bytes()).unwrap())
        .map(|v| v.to_str().unwrap())
        .collect()
}

#[test]
fn vary_merges_into_one_line() {
    let mut h = HeaderMap::new();
    merge_vary(&mut h);
    assert_eq!(h.get(header::VARY).unwrap(), "Accept-Encoding");
    merge_vary(&mut h);
    assert_eq!(h.get_all(header::VARY).count(), 1);
    let mut h = HeaderMap::new();
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    h.append(header::VARY, HeaderValue::from_static("Cookie, "));
    merge_vary(&mut h);
    let all: Vec<_> = h.get_all(header::VARY).collect();
    assert_eq!(all, ["Origin, Cookie, Accept-Encoding"]);
    let mut h = HeaderMap::new();
    h.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    merge_vary(&mut h);
    assert_eq!(h.get(header::VARY).unwrap(), "accept-encoding");
    let mut h = HeaderMap::new();
    h.append(header::VARY, HeaderValue::from_static("*"));
    merge_vary(&mut h);
    assert_eq!(h.get(header::VARY).unwrap(), "*");
}

#[test]
fn etag_suffixes() {
    assert_eq!(suffixed_etag("\"x\"", "-gzip").unwrap(), "\"x-gzip\"");
    assert_eq!(suffixed_etag("W/\"x\"", "-br").unwrap(), "W/\"x-br\"");
    assert_eq!(suffixed_etag("\"\"", "-br").unwrap(), "\"-br\"");
    for bad in ["x", "\"x", "W/x", "\"", ""] {
        assert_eq!(suffixed_etag(bad, "-br"), None, "{bad}");
    }
}

#[test]
fn types() {
    let m = build(serde_json::json!({})).unwrap();
    for t in [
        "text/html; charset=utf-8",
        "TEXT/CSS",
        "application/javascript",
        "image/svg+xml",
        "application/json",
    ] {
        assert!(m.type_matches(t), "{t}");
    }
    for t in [
        "image/png",
        "application/octet-stream",
        "video/webm",
        "",
        "text",
    ] {
        assert!(!m.type_matches(t), "{t}");
    }
    let m = build(serde_json::json!({"mime-types": ["application/x-custom"]})).unwrap();
    assert!(m.type_matches("application/x-custom; v=1"));
    assert!(!m.type_matches("text/html"));
}

#[test]
fn build_errors_name_the_key() {
    let e = |j| build(j).err().unwrap();
    assert!(e(serde_json::json!({"precompressed": ["zst"]})).contains("zst"));
    assert!(e(serde_json::json!({"encodings": ["deflate"]})).contains("deflate"));
    assert_eq!(
        e(serde_json::json!({"encodings": ["gzip", "br", "gzip"]})),
        "encodings[2]: \"gzip\" is listed twice"
    );
    assert!(e(serde_json::json!({"mime-types": ["text"]})).starts_with("mime-types[0]: "));
    assert!(e(serde_json::json!({"min-size": 10, "max-size": 5})).starts_with("min-size: "));
    assert!(e(serde_json::json!({"gzip-level": 0})).starts_with("gzip-level: "));
    assert!(e(serde_json::json!({"brotli-level": 12})).starts_with("brotli-level: "));
    assert!(e(serde_json::json!({"zstd-level": 20})).starts_with("zstd-level: "));
    assert!(e(serde_json::json!({"index-files": ["a/b"]})).starts_with("index-files[0]: "));
    assert!(e(serde_json::json!({"level": 3})).contains("level"));
}

#[test]
fn compresses_200_with_each_coding() {
    let m = build(serde_json::json!({})).unwrap();
    let text = b"body { color: red }\n".repeat(200);
    for (ae, coding) in [
        ("br", Coding::Br),
        ("zstd", Coding::Zstd),
        ("gzip", Coding::Gzip),
        ("gzip, br, zstd", Coding::Br),
        ("gzip;q=1, br;q=0.5", Coding::Gzip),
    ] {
        let rq = req(Method::GET, "/a.css", &[("accept-encoding", ae)]);
        let r = run(&m, &rq, css(&text));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(hv(&r, "content-encoding"), [coding.token()], "{ae}");
        assert_eq!(hv(&r, "vary"), ["Accept-Encoding"]);
        assert_eq!(
            hv(&r, "etag"),
            [format!("\"t{}\"", coding.etag_suffix()).as_str()]
        );
        assert!(hv(&r, "accept-ranges").is_empty());
        assert_eq!(decode(coding, &body_bytes(r)), text, "{ae}");
    }
    assert_eq!(m.cache.len(), 3, "one entry per coding");
}

#[test]
fn cache_hit_serves_the_same_bytes() {
    let m = build(serde_json::json!({})).unwrap();
    let text = b"x".repeat(5000);
    let rq = req(Method::GET, "/a.css", &[("accept-encoding", "gzip")]);
    let first = body_bytes(run(&m, &rq, css(&text)));
    assert_eq!(m.cache.len(), 1);
    // a different body under the same path and ETag: the cached bytes win
    let second = body_bytes(run(&m, &rq, css(&b"y".repeat(5000))));
    assert_eq!(first, second);
    // no ETag: not cached
    let mut r = css(&text);
    r.headers_mut().remove(header::ETAG);
    let r = run(
        &m,
        &req(Method::GET, "/b.css", &[("accept-encoding", "gzip")]),
        r,
    );
    assert!(hv(&r, "etag").is_empty());
    assert_eq!(m.cache.len(), 1);
}

#[test]
fn left_alone() {
    let m = build(serde_json::json!({})).unwrap();
    let text = b"body { color: red }\n".repeat(200);
    let gz = [("accept-encoding", "gzip")];
    let identity = |r: &HttpResponse| hv(r, "content-encoding").is_empty();
    // no Accept-Encoding, gzip refused, identity only: identity with Vary
    for h in [
        &[][..],
        &[("accept-encoding", "gzip;q=0")],
        &[("accept-encoding", "identity")],
    ] {
        let r = run(&m, &req(Method::GET, "/a.css", h), css(&text));
        assert!(identity(&r));
        assert_eq!(hv(&r, "vary"), ["Accept-Encoding"]);
        assert_eq!(hv(&r, "etag"), ["\"t\""]);
        assert_eq!(body_bytes(r), text);
    }
    // HEAD
    let r = run(&m, &req(Method::HEAD, "/a.css", &gz), css(&text));
    assert!(identity(&r));
    assert_eq!(hv(&r, "vary"), ["Accept-Encoding"]);
    // too small
    let r = run(&m, &req(Method::GET, "/a.css", &gz), css(b"tiny"));
    assert!(identity(&r));
    // not a compressible type
    let mut png = css(&text);
    png.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
    let r = run(&m, &req(Method::GET, "/a.png", &gz), png);
    assert!(identity(&r) && hv(&r, "vary").is_empty());
    // already encoded (B30)
    let mut enc = css(&text);
    enc.headers_mut()
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    let r = run(&m, &req(Method::GET, "/a.css", &gz), enc);
    assert_eq!(hv(&r, "content-encoding"), ["gzip"]);
    assert_eq!(body_bytes(r), text);
    // no-transform
    let mut nt = css(&text);
    nt.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=60, No-Transform"),
    );
    let r = run(&m, &req(Method::GET, "/a.css", &gz), nt);
    assert!(identity(&r));
    // 206 (B32) and 304 get Vary, never a coding
    let mut p = css(&text);
    *p.status_mut() = StatusCode::PARTIAL_CONTENT;
    let r = run(&m, &req(Method::GET, "/a.css", &gz), p);
    assert!(identity(&r));
    assert_eq!(hv(&r, "vary"), ["Accept-Encoding"]);
    let nm = HttpResponse::NotModified().finish();
    let r = run(&m, &req(Method::GET, "/a.css", &gz), nm);
    assert!(identity(&r));
    assert_eq!(hv(&r, "vary"), ["Accept-Encoding"]);
    let nm = HttpResponse::NotModified().finish();
    let r = run(&m, &req(Method::GET, "/a.png", &gz), nm);
    assert!(hv(&r, "vary").is_empty());
    // errors are left alone
    let mut e = css(&text);
    *e.status_mut() = StatusCode::NOT_FOUND;
    let r = run(&m, &req(Method::GET, "/a.css", &gz), e);
    assert!(identity(&r) && hv(&r, "vary").is_empty());
    // on-the-fly off: Vary only where sidecars could apply
    let off = build(serde_json::json!({"encodings": []})).unwrap();
    let r = run(&off, &req(Method::GET, "/a.css", &gz), css(&text));
    assert!(identity(&r) && hv(&r, "vary").is_empty());
}

#[test]
fn if_none_match_on_the_encoded_tag_is_304() {
    let m = build(serde_json::json!({})).unwrap();
    let text = b"body { color: red }\n".repeat(200);
    let rq = req(
        Method::GET,
        "/a.css",
        &[("accept-encoding", "gzip"), ("if-none-match", "\"t-gzip\"")],
    );
    let r = run(&m, &rq, css(&text));
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(hv(&r, "etag"), ["\"t-gzip\""]);
    assert_eq!(hv(&r, "vary"), ["Accept-Encoding"]);
    assert!(hv(&r, "content-type").is_empty() && hv(&r, "content-encoding").is_empty());
    // the tag of another coding does not match
    let rq = req(
        Method::GET,
        "/a.css",
        &[("accept-encoding", "br"), ("if-none-match", "\"t-gzip\"")],
    );
    let r = run(&m, &rq, css(&text));
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(hv(&r, "content-encoding"), ["br"]);
}

#[test]
fn streamed_bodies_are_encoded_chunked() {
    use tessera_core::actix_web::body::MessageBody as _;
    let m = build(serde_json::json!({})).unwrap();
    let text: Vec<u8> = (0..400_000u32)
        .map(|i| b"abcdefg\n"[(i % 8) as usize])
        .collect();
    struct Chunks(std::collections::VecDeque<Bytes>, u64);
    impl MessageBody for Chunks {
        type Error = std::io::Error;
        fn size(&self) -> BodySize {
            BodySize::Sized(self.1)
        }
        fn poll_next(
            self: std::pin::Pin<&mut Self>,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<Bytes, Self::Error>>> {
            std::task::Poll::Ready(self.get_mut().0.pop_front().map(Ok))
        }
    }
    let body = Chunks(
        text.chunks(65536).map(Bytes::copy_from_slice).collect(),
        text.len() as u64,
    );
    let mut res = HttpResponse::Ok().body(body);
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    res.headers_mut()
        .insert(header::ETAG, HeaderValue::from_static("\"big\""));
    let rq = req(Method::GET, "/big.txt", &[("accept-encoding", "zstd")]);
    let r = run(&m, &rq, res);
    assert_eq!(hv(&r, "content-encoding"), ["zstd"]);
    let mut body = r.into_body();
    assert_eq!(body.size(), BodySize::Stream);
    struct NoopWake;
    impl std::task::Wake for NoopWake {
        fn wake(self: Arc<Self>) {}
    }
    let waker = std::task::Waker::from(Arc::new(NoopWake));
    let mut tcx = std::task::Context::from_waker(&waker);
    let mut out = Vec::new();
    for _ in 0..10_000 {
        match std::pin::Pin::new(&mut body).poll_next(&mut tcx) {
            std::task::Poll::Ready(Some(Ok(b))) => out.extend_from_slice(&b),
            std::task::Poll::Ready(None) => break,
            _ => panic!("unexpected poll result"),
        }
    }
    assert_eq!(decode(Coding::Zstd, &out), text);
    assert_eq!(m.cache.len(), 1, "complete stream cached");
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
fn dir(tag: &str) -> Dir {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "tessera-compress-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    Dir(std::fs::canonicalize(&p).unwrap())
}

fn content(m: &Compress, root: &Path, rq: &HttpRequest) -> Option<HttpResponse> {
    let v = vhost(root.to_path_buf());
    let mut cx = Ctx::new(rq, &v, Cow::Owned(rq.path().to_owned()));
    let r = m.content(&mut cx);
    r.map(|mut r| {
        m.on_response(&mut cx, &mut r);
        r
    })
}

#[test]
fn sidecars() {
    let d = dir("side");
    std::fs::write(d.0.join("app.js"), "console.log(1)").unwrap();
    std::fs::write(d.0.join("app.js.gz"), "GZ").unwrap();
    std::fs::write(d.0.join("app.js.zst"), "ZST").unwrap();
    std::fs::create_dir_all(d.0.join("sub")).unwrap();
    std::fs::write(d.0.join("sub/index.html"), "<p>").unwrap();
    std::fs::write(d.0.join("sub/index.html.br"), "BR").unwrap();
    std::fs::write(d.0.join(".hidden.js"), "x").unwrap();
    std::fs::write(d.0.join(".hidden.js.gz"), "x").unwrap();
    std::fs::write(d.0.join("orphan.js.gz"), "x").unwrap();
    let m = build(serde_json::json!({"precompressed": ["br", "zstd", "gzip"]})).unwrap();
    assert!(m.hooks().contains(Hooks::CONTENT));
    let get =
        |p: &str, ae: &str| content(&m, &d.0, &req(Method::GET, p, &[("accept-encoding", ae)]));
    let r = get("/app.js", "gzip, zstd").unwrap();
    assert_eq!(hv(&r, "content-encoding"), ["zstd"]);
    assert_eq!(hv(&r, "content-type"), ["text/javascript; charset=utf-8"]);
    assert_eq!(hv(&r, "vary"), ["Accept-Encoding"]);
    assert!(hv(&r, "etag")[0].ends_with("-zstd\""));
    assert_eq!(body_bytes(r), "ZST");
    let r = get("/app.js", "gzip").unwrap();
    assert_eq!(hv(&r, "content-encoding"), ["gzip"]);
    assert_eq!(body_bytes(r), "GZ");
    // br wanted but missing: the next acceptable coding
    let r = get("/app.js", "br, gzip;q=0.5").unwrap();
    assert_eq!(hv(&r, "content-encoding"), ["gzip"]);
    assert!(get("/app.js", "br").is_none());
    assert!(get("/app.js", "gzip;q=0").is_none());
    assert!(content(&m, &d.0, &req(Method::GET, "/app.js", &[])).is_none());
    // index file of a directory path
    let r = get("/sub/", "br").unwrap();
    assert_eq!(hv(&r, "content-encoding"), ["br"]);
    assert_eq!(hv(&r, "content-type"), ["text/html; charset=utf-8"]);
    assert!(get("/sub", "br").is_none(), "static-file redirects");
    // hidden, orphan sidecar, other methods
    assert!(get("/.hidden.js", "gzip").is_none());
    assert!(get("/orphan.js", "gzip").is_none());
    let post = req(Method::POST, "/app.js", &[("accept-encoding", "gzip")]);
    assert!(content(&m, &d.0, &post).is_none());
    // conditional and Range on the sidecar
    let tag = hv(&get("/app.js", "zstd").unwrap(), "etag")[0].to_owned();
    let rq = req(
        Method::GET,
        "/app.js",
        &[("accept-encoding", "zstd"), ("if-none-match", &tag)],
    );
    let r = content(&m, &d.0, &rq).unwrap();
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(hv(&r, "vary"), ["Accept-Encoding"]);
    let rq = req(
        Method::GET,
        "/app.js",
        &[("accept-encoding", "zstd"), ("range", "bytes=1-")],
    );
    let r = content(&m, &d.0, &rq).unwrap();
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(hv(&r, "content-range"), ["bytes 1-2/3"]);
    assert_eq!(hv(&r, "content-encoding"), ["zstd"]);
}

#[test]
fn stale_and_linked_sidecars_are_skipped() {
    let d = dir("stale");
    std::fs::write(d.0.join("a.css"), "new").unwrap();
    std::fs::write(d.0.join("a.css.gz"), "old").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(d.0.join("a.css.gz"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    std::fs::write(d.0.join("b.css"), "b").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", d.0.join("b.css.gz")).unwrap();
    std::fs::write(d.0.join("real.css"), "r").unwrap();
    std::fs::write(d.0.join("real.css.gz"), "R").unwrap();
    std::os::unix::fs::symlink(d.0.join("real.css"), d.0.join("c.css")).unwrap();
    std::fs::write(d.0.join("c.css.gz"), "C").unwrap();
    let m = build(serde_json::json!({"precompressed": ["gzip"]})).unwrap();
    for p in ["/a.css", "/b.css", "/c.css"] {
        let rq = req(Method::GET, p, &[("accept-encoding", "gzip")]);
        assert!(content(&m, &d.0, &rq).is_none(), "{p}");
    }
}

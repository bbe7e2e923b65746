//! The response for a file: the method check, conditional requests (RFC 9110
//! §13.2.2: 304, 412), Range (§14: 206, multipart/byteranges, If-Range, 416)
//! and the full 200, with the body from memory or from the file
//! (`sendfile(2)` on Tessera's engine).

use std::fs::{File, Metadata};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use smallvec::smallvec;
use tessera_core::actix_web::http::header::{self, HeaderName, HeaderValue};
use tessera_core::actix_web::http::{Method, StatusCode};
use tessera_core::actix_web::HttpResponse;
use tessera_core::body::PrebuiltFields;
use tessera_core::response::error_response;
use tessera_core::Ctx;

use super::conditional::{self, Precondition};
use super::range::{self, RangeRequest};
use super::{mime, FileBody, FileInfo, HeadBody, Segment, Source, ALLOW, BYTES, SMALL_FILE};

/// How a file answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// As the request asks: GET and HEAD only, conditional requests and
    /// Range. `prebuilt`: a full response may carry the file's prebuilt
    /// fields instead of map entries ([`Ctx::prebuilt_fields_ok`], for the
    /// pipeline's own content phase only).
    Request { prebuilt: bool },
    /// The whole file as a 200 (no body for HEAD), whatever the method,
    /// conditions and Range: a back end's X-Sendfile answer to a POST, or
    /// under a status of its own (lighttpd serves X-Sendfile for any
    /// method; nginx turns `X-Accel-Redirect` into a GET).
    Whole,
}

/// 405 with `Allow` for methods other than GET, HEAD and OPTIONS; 200 with
/// `Allow` for OPTIONS (RFC 9110 §9.3.7, §15.5.6).
pub(super) fn method_check(cx: &Ctx<'_>) -> Option<HttpResponse> {
    let m = cx.method();
    if m == Method::GET || m == Method::HEAD {
        return None;
    }
    let mut r = if m == Method::OPTIONS {
        HttpResponse::Ok().finish()
    } else {
        error_response(StatusCode::METHOD_NOT_ALLOWED)
    };
    r.headers_mut().insert(header::ALLOW, ALLOW);
    Some(r)
}

fn boundary() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("tessera{:016x}{:08x}", t ^ 0x9e37_79b9_7f4a_7c15, n)
}

/// How [`serve_file`] labels the file it sends.
pub struct Representation<'a> {
    /// The Content-Type (for a precompressed sidecar, the type of the original
    /// name, not `application/gzip`).
    pub content_type: HeaderValue,
    /// Send an `ETag` and honour entity-tag conditions (static-file's `etag`).
    pub etag: bool,
    /// Appended to the ETag inside its quotes (`"-br"` gives `"…-br"`), so that
    /// each content-coding of a resource has its own tag (RFC 9110 §8.8.3);
    /// `""` for none.
    pub etag_suffix: &'a str,
    /// Fields added to the 200 and 206 responses (HEAD included), for example
    /// `Content-Encoding`; not to 304, 412 or 416.
    pub headers: &'a [(HeaderName, HeaderValue)],
}

/// In the extensions of a 304 or a multipart 206 from static-file: the
/// Content-Type the 200 would have carried. A 304 sends none (RFC 9110
/// §15.4.5) and a multipart 206 sends `multipart/byteranges`, but
/// response-phase modules that choose by type (expires `mime-types`) must
/// still apply: a 206 carries the Cache-Control and Expires a 200 would
/// (RFC 9110 §15.3.7), and a 304 refreshes the cache's stored ones (RFC
/// 9111 §4.3.4).
#[derive(Debug, Clone)]
pub struct NotModifiedType(pub HeaderValue);

/// The first `size` bytes of `file`, read with `pread` from offset 0.
pub(super) fn read_whole(file: &File, size: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; size as usize];
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// Answers a GET or HEAD for an open regular `file` with metadata `meta` (of the
/// open descriptor): 405/OPTIONS handling, `Last-Modified` and `ETag`,
/// conditional requests (RFC 9110 §13.2.2: 304, 412), Range (§14: 206, multipart,
/// If-Range, 416), and 200 otherwise, with `Accept-Ranges: bytes`. Files up to
/// [`SMALL_FILE`] bytes are read into one buffer; larger ones are streamed.
/// This is the `static-file` content handler's response; other modules (the
/// `compress` module's precompressed sidecars) call it for files they chose.
pub fn serve_file(
    cx: &Ctx<'_>,
    file: File,
    meta: &Metadata,
    rep: &Representation<'_>,
) -> HttpResponse {
    let info = FileInfo::new(meta, rep.content_type.clone(), rep.etag, rep.etag_suffix);
    respond(
        cx,
        &info,
        Source::File(file),
        rep.headers,
        Mode::Request { prebuilt: false },
    )
}

/// 503 with `Retry-After: 1`: the file could not be opened for want of
/// descriptors or memory (it may well exist; a 404 would be a lie that caches
/// and crawlers keep).
pub fn unavailable() -> HttpResponse {
    let mut r = error_response(StatusCode::SERVICE_UNAVAILABLE);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// A response with a file body whose `sendfile(2)` handle rides in the
/// extensions, for the HTTP/1.1 engine ([`tessera_core::body`]).
fn with_sendfile(
    mut builder: tessera_core::actix_web::HttpResponseBuilder,
    body: FileBody,
) -> HttpResponse {
    let handle = body.sendfile();
    let mut r = builder.body(body);
    if let Some(h) = handle {
        r.extensions_mut().insert(h);
    }
    r
}

/// The response for a file described by `info` whose bytes come from `source`
/// (see [`serve_file`]) as `mode` says; `extra` is added to 200 and 206
/// responses.
pub(super) fn respond(
    cx: &Ctx<'_>,
    info: &FileInfo,
    source: Source,
    extra: &[(HeaderName, HeaderValue)],
    mode: Mode,
) -> HttpResponse {
    let whole = mode == Mode::Whole;
    let prebuilt = mode == Mode::Request { prebuilt: true };
    if !whole {
        if let Some(r) = method_check(cx) {
            return r;
        }
    }
    let size = info.size;
    let lm = info.last_modified;
    let headers = cx.req.headers();
    // With ETags off, entity-tag conditions compare against a tag that never
    // matches a well-formed one.
    let cmp_tag = if info.etag.is_empty() {
        "\"\u{0}\""
    } else {
        info.etag.as_str()
    };
    // (most requests carry no condition: the core saw that in its pass over
    // the fields, and the five lookups are skipped)
    let conditions = !whole && cx.may_have_conditions();
    let precondition = if conditions {
        conditional::evaluate(headers, cmp_tag, lm)
    } else {
        Precondition::Proceed
    };
    match precondition {
        Precondition::NotModified => {
            let mut r = HttpResponse::NotModified().finish();
            info.validators(&mut r);
            r.extensions_mut()
                .insert(NotModifiedType(info.content_type.clone()));
            return r;
        }
        Precondition::Failed => return error_response(StatusCode::PRECONDITION_FAILED),
        Precondition::Proceed => {}
    }
    let ctype = info.content_type.clone();
    // the body goes out for GET, and for any method but HEAD when whole
    let with_body = cx.method() == Method::GET || (whole && cx.method() != Method::HEAD);
    let range = if conditions {
        headers.get(header::RANGE)
    } else {
        None
    };
    let ranges = match range {
        Some(v) if with_body && conditional::if_range(headers, cmp_tag, lm) => {
            range::parse(v.to_str().unwrap_or(""), size)
        }
        _ => RangeRequest::Ignore,
    };
    let mut r = match ranges {
        RangeRequest::Unsatisfiable => {
            let mut r = error_response(StatusCode::RANGE_NOT_SATISFIABLE);
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            r.headers_mut().insert(header::ACCEPT_RANGES, BYTES);
            return r;
        }
        RangeRequest::Ranges(rs) if rs.len() == 1 => {
            let br = rs[0];
            let mut r = match source {
                Source::Memory(b) => HttpResponse::PartialContent()
                    .body(b.slice(br.start as usize..(br.start + br.len) as usize)),
                Source::File(file) => with_sendfile(
                    HttpResponse::PartialContent(),
                    FileBody::new(
                        file,
                        smallvec![Segment::File {
                            offset: br.start,
                            len: br.len
                        }],
                    ),
                ),
            };
            if let Ok(v) =
                HeaderValue::from_str(&format!("bytes {}-{}/{size}", br.start, br.last()))
            {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            r.headers_mut().insert(header::CONTENT_TYPE, ctype);
            r
        }
        RangeRequest::Ranges(rs) => {
            let b = boundary();
            let mut segs = smallvec::SmallVec::new();
            for (i, br) in rs.iter().enumerate() {
                let head = format!(
                    "{}--{b}\r\nContent-Type: {}\r\nContent-Range: bytes {}-{}/{size}\r\n\r\n",
                    if i == 0 { "" } else { "\r\n" },
                    ctype.to_str().unwrap_or(mime::DEFAULT_TYPE),
                    br.start,
                    br.last()
                );
                segs.push(Segment::Bytes(Bytes::from(head)));
                segs.push(Segment::File {
                    offset: br.start,
                    len: br.len,
                });
            }
            segs.push(Segment::Bytes(Bytes::from(format!("\r\n--{b}--\r\n"))));
            let mut r = with_sendfile(
                HttpResponse::PartialContent(),
                FileBody::with_source(source, segs),
            );
            if let Ok(v) = HeaderValue::from_str(&format!("multipart/byteranges; boundary={b}")) {
                r.headers_mut().insert(header::CONTENT_TYPE, v);
            }
            r.extensions_mut().insert(NotModifiedType(ctype));
            r
        }
        RangeRequest::Ignore => {
            let mut r = if !with_body {
                HttpResponse::Ok().body(HeadBody(size))
            } else {
                match source {
                    Source::Memory(b) => HttpResponse::Ok().body(b),
                    Source::File(file) if size <= SMALL_FILE => match read_whole(&file, size) {
                        Ok(buf) => HttpResponse::Ok().body(buf),
                        Err(e) => {
                            tracing::warn!(path = %cx.path(), error = %e, "read failed");
                            return error_response(StatusCode::INTERNAL_SERVER_ERROR);
                        }
                    },
                    Source::File(file) => with_sendfile(
                        HttpResponse::Ok(),
                        FileBody::new(
                            file,
                            smallvec![Segment::File {
                                offset: 0,
                                len: size
                            }],
                        ),
                    ),
                }
            };
            if let (true, Some(fields), true) = (prebuilt, &info.fields, extra.is_empty()) {
                tessera_core::body::set_prebuilt(PrebuiltFields {
                    lines: fields.clone(),
                    date: false,
                });
                return r;
            }
            r.headers_mut().append(header::CONTENT_TYPE, ctype);
            r
        }
    };
    // a new response's own fields: `append` adds them without the removed
    // old value `insert` builds and drops
    r.headers_mut().append(header::ACCEPT_RANGES, BYTES);
    info.validators(&mut r);
    for (k, v) in extra {
        r.headers_mut().insert(k.clone(), v.clone());
    }
    r
}

//! The request head: request line and header fields (RFC 9112 §2-§6) into
//! actix types, with the framing of the body decided once.

use actix_http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_http::{Method, Uri, Version};
use bytes::{Bytes, BytesMut};
use std::cell::RefCell;

/// The most header fields any configuration may allow (`max-request-headers`
/// is capped here).
pub const MAX_HEADERS: usize = 256;

/// The longest request target, in bytes, that the `http` crate's `Uri`
/// holds (`u16::MAX - 1`); a longer one is 414 (RFC 9110 §15.5.15), and
/// `max-uri-length` cannot exceed it.
pub const MAX_TARGET: usize = u16::MAX as usize - 1;

/// Limits on a request head, from `[server]`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest request target, bytes (`max-uri-length`, default 8192); longer
    /// is 414 (RFC 9112 §3).
    pub max_uri: usize,
    /// Largest head, request line to the empty line, bytes
    /// (`max-request-header-size`, default 16384); larger is 431 (RFC 6585 §5).
    pub max_head: usize,
    /// Most header fields (`max-request-headers`, default 100, at most
    /// [`MAX_HEADERS`]); more is 431.
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_uri: 8192,
            max_head: 16384,
            max_headers: 100,
        }
    }
}

/// How the request's body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body: neither Content-Length nor Transfer-Encoding.
    None,
    /// Exactly this many bytes (Content-Length).
    Length(u64),
    /// `Transfer-Encoding: chunked` (see [`super::chunked`]).
    Chunked,
}

/// A parsed request head (its header fields go to the map [`parse`] fills).
#[derive(Debug)]
pub struct Head {
    /// Method (any token; `CONNECT` is refused, see [`HeadError::Connect`]).
    pub method: Method,
    /// Request target as sent (origin-form, absolute-form, or `*`).
    pub uri: Uri,
    /// HTTP/1.0 or HTTP/1.1 (1.2 and later minor versions are served as 1.1,
    /// RFC 9112 §2.3).
    pub version: Version,
    /// The body's framing.
    pub framing: Framing,
    /// The connection may stay open after the response: HTTP/1.1 without
    /// `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`
    /// (RFC 9112 §9.3).
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent (RFC 9110 §10.1.1).
    pub expect_continue: bool,
}

/// Why a head is refused. Every refusal closes the connection after the
/// answer: the position of the next request is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// 400: malformed request line or header field, obs-fold, bare CR, NUL,
    /// an invalid or conflicting Content-Length, Content-Length with
    /// Transfer-Encoding (RFC 9112 §6.3 item 3), chunked not last.
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// 400 and close at once: `CONNECT` (no tunnels here).
    #[error("CONNECT is not served")]
    Connect,
    /// 414: the target is longer than `max-uri-length`.
    #[error("request target too long")]
    UriTooLong,
    /// 431: the head is larger than `max-request-header-size` or has more than
    /// `max-request-headers` fields.
    #[error("request header fields too large")]
    HeadersTooLarge,
    /// 501: a transfer coding other than chunked (RFC 9112 §6.1).
    #[error("transfer coding not implemented")]
    UnknownCoding,
    /// 505: a major version other than 1.
    #[error("HTTP version not supported")]
    Version,
}

impl HeadError {
    /// The status code to answer with.
    pub fn status(self) -> u16 {
        match self {
            HeadError::BadRequest(_) | HeadError::Connect => 400,
            HeadError::UriTooLong => 414,
            HeadError::HeadersTooLarge => 431,
            HeadError::UnknownCoding => 501,
            HeadError::Version => 505,
        }
    }
}

/// Capacity of a worker's head chunk, bytes: the heads of many requests are
/// copied one after another into one chunk (about 80 of wrk's, 10 of a
/// browser's), which is freed when the last request sharing it is done.
const CHUNK: usize = 8 * 1024;
/// Heads larger than this, bytes, get a copy of their own, so that a chunk
/// always holds several and a long-lived request pins at most one chunk.
const CHUNK_HEAD_MAX: usize = 2 * 1024;

thread_local! {
    /// This worker's current chunk: its free capacity takes the next head.
    static CHUNK_FREE: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// A shared copy of `head`: a slice of this worker's current chunk (no
/// allocation but one per [`CHUNK`] bytes of heads), or, for a head over
/// [`CHUNK_HEAD_MAX`] bytes, its own. `Bytes::copy_from_slice` cost two
/// allocations per request (the copy, then the shared header its first
/// slice adds), about 400 instructions with their frees (callgrind).
fn shared_copy(head: &[u8]) -> Bytes {
    if head.len() > CHUNK_HEAD_MAX {
        return Bytes::copy_from_slice(head);
    }
    CHUNK_FREE
        .try_with(|c| {
            let mut c = c.borrow_mut();
            if c.capacity() < head.len() {
                *c = BytesMut::with_capacity(CHUNK);
            }
            c.extend_from_slice(head);
            c.split().freeze()
        })
        .unwrap_or_else(|_| Bytes::copy_from_slice(head))
}

/// Parses the head at the start of `buf`, its header fields into `headers`
/// (cleared first; in order, repeated names keep every value). The target
/// and the field values share one copy of the head's bytes ([`shared_copy`]:
/// no allocation per request in the usual case), none for the map when it
/// is a pooled request head's (actix-http clears those and keeps their
/// capacity).
///
/// Returns `Ok(None)` when more bytes are needed, or `Ok(Some((head, n)))`
/// with `n` the bytes of the head (the body or the next request follows).
/// A minor version above 1 (`HTTP/1.2`) is rewritten in place to `HTTP/1.1`,
/// hence `&mut`. Empty lines before the request line are skipped (RFC 9112
/// §2.2) and counted in `n`.
///
/// # Errors
/// See [`HeadError`]; `HeadersTooLarge` also when `buf` holds `max_head` bytes
/// and still no complete head.
pub fn parse(
    buf: &mut [u8],
    limits: &Limits,
    headers: &mut HeaderMap,
) -> Result<Option<(Head, usize)>, HeadError> {
    // RFC 9112 §2.2: at least one empty line before a request is ignored
    let skip = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let rest = &mut buf[skip..];
    headers.clear();
    match parse_at(rest, limits, headers)? {
        Some((head, n)) => Ok(Some((head, skip + n))),
        None if buf.len() >= limits.max_head => Err(HeadError::HeadersTooLarge),
        None => Ok(None),
    }
}

fn parse_at(
    buf: &mut [u8],
    limits: &Limits,
    headers: &mut HeaderMap,
) -> Result<Option<(Head, usize)>, HeadError> {
    // uninitialised slots: nothing is cleared per request (actix-http spends
    // about 6,000 instructions per request zeroing its header index arrays)
    let mut slots =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let cap = limits.max_headers.min(MAX_HEADERS);
    let mut req = httparse::Request::new(&mut []);
    let status = match req.parse_with_uninit_headers(buf, &mut slots[..cap]) {
        Ok(s) => s,
        Err(httparse::Error::Version) => {
            // httparse judges the version before the line ends: wait for the
            // whole line, so that the answer does not depend on how it arrived
            if first_line(buf).is_none() {
                return Ok(None);
            }
            // HTTP/1.2 and later minor versions are served as 1.1; others refused
            return match minor_version_at(buf) {
                Some(pos) => {
                    buf[pos] = b'1';
                    parse_at(buf, limits, headers)
                }
                None => Err(version_error(buf)),
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::HeadersTooLarge),
        Err(e) => return Err(HeadError::BadRequest(bad(e))),
    };
    let n = match status {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => {
            // a target that already exceeds the limit need not be read whole
            let line_open = !buf.contains(&b'\n');
            if req.path.is_some_and(|p| p.len() > limits.max_uri)
                || (line_open && buf.len() > limits.max_uri + 32)
            {
                return Err(HeadError::UriTooLong);
            }
            return Ok(None);
        }
    };
    if n > limits.max_head {
        return Err(HeadError::HeadersTooLarge);
    }
    let method_s = req.method.ok_or(HeadError::BadRequest("no method"))?;
    let path = req.path.ok_or(HeadError::BadRequest("no target"))?;
    if path.len() > limits.max_uri {
        return Err(HeadError::UriTooLong);
    }
    let method = Method::from_bytes(method_s.as_bytes())
        .map_err(|_| HeadError::BadRequest("invalid method"))?;
    if method == Method::CONNECT {
        return Err(HeadError::Connect);
    }
    // the target and the field values are slices of one copy of the head
    let shared = shared_copy(&buf[..n]);
    let base = buf.as_ptr() as usize;
    let slice = |part: &[u8]| {
        // httparse's slices lie in `buf`; anything else (an empty value may
        // not) is copied
        let at = (part.as_ptr() as usize).wrapping_sub(base);
        if part.is_empty() {
            Bytes::new()
        } else if at < n && part.len() <= n - at {
            shared.slice(at..at + part.len())
        } else {
            Bytes::copy_from_slice(part)
        }
    };
    // the `http` crate holds targets up to MAX_TARGET bytes: a longer one
    // is too long, not malformed
    if path.len() > MAX_TARGET {
        return Err(HeadError::UriTooLong);
    }
    let uri = Uri::from_maybe_shared(slice(path.as_bytes()))
        .map_err(|_| HeadError::BadRequest("invalid target"))?;
    let version = if req.version == Some(0) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut has_te = false;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        // httparse has checked the name is a token and the value has no CR, LF
        // or NUL; obs-fold is a parse error there
        let name = match common_name(h.name.as_bytes()) {
            Some(n) => n,
            None => HeaderName::from_bytes(h.name.as_bytes())
                .map_err(|_| HeadError::BadRequest("invalid field name"))?,
        };
        let value = parsed_value(slice(h.value));
        if name == actix_http::header::CONTENT_LENGTH {
            let v = parse_content_length(h.value)?;
            if content_length.is_some() {
                // RFC 9112 §6.3 item 5: a repeated field is refused (even with
                // equal values, as h2o and nginx do)
                return Err(HeadError::BadRequest("repeated Content-Length"));
            }
            content_length = Some(v);
        } else if name == actix_http::header::TRANSFER_ENCODING {
            has_te = true;
            for coding in list_items(h.value) {
                if chunked {
                    // chunked must be the final coding (RFC 9112 §6.3 item 4)
                    return Err(HeadError::BadRequest(
                        "chunked is not the last transfer coding",
                    ));
                }
                if coding.eq_ignore_ascii_case(b"chunked") {
                    chunked = true;
                } else {
                    return Err(HeadError::UnknownCoding);
                }
            }
        } else if name == actix_http::header::CONNECTION {
            for t in list_items(h.value) {
                if t.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive_token = true;
                }
            }
        } else if name == actix_http::header::EXPECT {
            expect_continue = h.value.eq_ignore_ascii_case(b"100-continue");
        }
        headers.append(name, value);
    }
    if has_te && !chunked {
        return Err(HeadError::BadRequest("Transfer-Encoding without chunked"));
    }
    let framing = match (chunked, content_length) {
        (true, Some(_)) => {
            return Err(HeadError::BadRequest(
                "Content-Length with Transfer-Encoding",
            ))
        }
        (true, None) if version == Version::HTTP_10 => {
            // RFC 9112 §6.1: chunked in a 1.0 message is a framing fault
            return Err(HeadError::BadRequest("Transfer-Encoding in HTTP/1.0"));
        }
        (true, None) => Framing::Chunked,
        (false, Some(0)) | (false, None) => Framing::None,
        (false, Some(n)) => Framing::Length(n),
    };
    let keep_alive = !close && (version == Version::HTTP_11 || keep_alive_token);
    Ok(Some((
        Head {
            method,
            uri,
            version,
            framing,
            keep_alive,
            expect_continue,
        },
        n,
    )))
}

fn bad(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "invalid header field name (or obs-fold)",
        httparse::Error::HeaderValue => "invalid header field value",
        httparse::Error::NewLine => "bare CR or invalid line ending",
        httparse::Error::Token => "invalid method or target",
        _ => "malformed request",
    }
}

/// The position of `X` in a complete request line ending ` HTTP/1.X`, X a
/// digit from 2 to 9.
fn minor_version_at(buf: &[u8]) -> Option<usize> {
    let line = first_line(buf)?;
    let start = line.len().checked_sub(9)?;
    let tail = &line[start..];
    (tail.starts_with(b" HTTP/1.") && (b'2'..=b'9').contains(&tail[8])).then_some(start + 8)
}

/// The first line without its line ending, if it is complete.
fn first_line(buf: &[u8]) -> Option<&[u8]> {
    let line = &buf[..buf.iter().position(|&b| b == b'\n')?];
    Some(line.strip_suffix(b"\r").unwrap_or(line))
}

/// 505 for `HTTP/2.0`, `HTTP/3` and the like; 400 for anything else.
fn version_error(buf: &[u8]) -> HeadError {
    let version = first_line(buf)
        .and_then(|l| l.rsplit(|&b| b == b' ').next())
        .and_then(|v| v.strip_prefix(b"HTTP/"));
    match version {
        Some([d, rest @ ..])
            if d.is_ascii_digit()
                && *d != b'1'
                && rest.iter().all(|b| b.is_ascii_digit() || *b == b'.') =>
        {
            HeadError::Version
        }
        _ => HeadError::BadRequest("invalid HTTP version"),
    }
}

/// `Content-Length: 1*DIGIT` (RFC 9110 §8.6); a list of values is refused.
fn parse_content_length(v: &[u8]) -> Result<u64, HeadError> {
    content_length(v).ok_or(HeadError::BadRequest("invalid Content-Length"))
}

/// A Content-Length field value (RFC 9110 §8.6: `1*DIGIT`, surrounding
/// whitespace allowed), in bytes; `None` for anything else: empty, a sign,
/// a list (`2, 2`), more than 19 digits. RFC 9112 §6.3 item 5 makes such a
/// value a framing error, for requests (400) and for a proxy's upstream
/// responses (502) alike.
pub fn content_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// A field value that httparse accepted (in a request or a response), as a
/// `HeaderValue` without checking its bytes a second time: httparse admits
/// HTAB, SP to `~` and obs-text (0x80 to 0xFF) in a field value (RFC 9110
/// §5.5), the very bytes `HeaderValue::from_bytes` admits; the unit test
/// `httparse_and_header_value_admit_the_same_bytes` holds the two crates to
/// that. About 90 instructions per field. Other bytes must not be passed
/// (debug builds check).
#[allow(unsafe_code)]
pub fn parsed_value(value: Bytes) -> HeaderValue {
    debug_assert!(HeaderValue::from_bytes(&value).is_ok());
    // SAFETY: `from_maybe_shared_unchecked` only skips the byte check
    // (an invalid byte could end up in a head written out, no memory is at
    // stake), and httparse has made it, for the same set of bytes.
    unsafe { HeaderValue::from_maybe_shared_unchecked(value) }
}

/// The field names that browsers and load generators send most, matched by
/// length and first byte, then bytes, ASCII case-insensitively (RFC 9110
/// §5.1): about 80 instructions a field, where `HeaderName::from_bytes`
/// lower-cases the name through a table and then matches it against the
/// standard names (about 110).
/// `None` for any other name, which then goes the long way.
fn common_name(name: &[u8]) -> Option<HeaderName> {
    use actix_http::header as h;
    let first = name.first()? | 0x20;
    let (known, n): (&[u8], HeaderName) = match (name.len(), first) {
        (4, b'h') => (b"host", h::HOST),
        (6, b'a') => (b"accept", h::ACCEPT),
        (6, b'c') => (b"cookie", h::COOKIE),
        (7, b'r') => (b"referer", h::REFERER),
        (10, b'u') => (b"user-agent", h::USER_AGENT),
        (10, b'c') => (b"connection", h::CONNECTION),
        (12, b'c') => (b"content-type", h::CONTENT_TYPE),
        (13, b'c') => (b"cache-control", h::CACHE_CONTROL),
        (13, b'i') => (b"if-none-match", h::IF_NONE_MATCH),
        (14, b'c') => (b"content-length", h::CONTENT_LENGTH),
        (15, b'a') if name[7] | 0x20 == b'e' => (b"accept-encoding", h::ACCEPT_ENCODING),
        (15, b'a') => (b"accept-language", h::ACCEPT_LANGUAGE),
        (17, b'i') => (b"if-modified-since", h::IF_MODIFIED_SINCE),
        _ => return None,
    };
    // `| 0x20` lower-cases the letters and keeps '-'; the only other byte it
    // maps onto a letter or '-' is CR (onto '-'), which no token holds
    // (httparse checked the name)
    name.iter()
        .zip(known)
        .all(|(&a, &k)| a | 0x20 == k)
        .then_some(n)
}

/// The non-empty items of a comma-separated list field, trimmed.
fn list_items(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|i| !i.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_share_a_chunk_until_it_is_full_and_a_large_head_has_its_own() {
        let a = shared_copy(b"GET /a HTTP/1.1\r\n\r\n");
        let b = shared_copy(b"GET /b HTTP/1.1\r\n\r\n");
        assert_eq!(&a[..], b"GET /a HTTP/1.1\r\n\r\n");
        assert_eq!(&b[..], b"GET /b HTTP/1.1\r\n\r\n");
        // one after the other in the same chunk
        assert_eq!(a.as_ptr() as usize + a.len(), b.as_ptr() as usize);
        let large = vec![b'x'; CHUNK_HEAD_MAX + 1];
        let own = shared_copy(&large);
        assert_eq!(&own[..], &large[..]);
        let c = shared_copy(b"GET /c HTTP/1.1\r\n\r\n");
        assert_eq!(b.as_ptr() as usize + b.len(), c.as_ptr() as usize);
        // a full chunk is replaced; the heads of the old one stay intact
        let fill = vec![b'y'; CHUNK_HEAD_MAX];
        let kept: Vec<Bytes> = (0..8).map(|_| shared_copy(&fill)).collect();
        assert!(kept.iter().all(|k| k[..] == fill[..]));
        assert_eq!(&a[..], b"GET /a HTTP/1.1\r\n\r\n");
        let starts: std::collections::HashSet<usize> =
            kept.iter().map(|k| k.as_ptr() as usize).collect();
        assert_eq!(starts.len(), 8);
    }

    #[test]
    fn common_names_are_the_names_header_name_gives() {
        const COMMON: [&str; 13] = [
            "host",
            "accept",
            "cookie",
            "referer",
            "user-agent",
            "connection",
            "content-type",
            "cache-control",
            "if-none-match",
            "content-length",
            "accept-encoding",
            "accept-language",
            "if-modified-since",
        ];
        let others = [
            "Host",
            "HOST",
            "User-Agent",
            "Accept-Language",
            "hosts",
            "hos",
            "x-host",
            "acceptx",
            "content-lengtt",
            "accept-encodinx",
        ];
        for n in COMMON.into_iter().chain(others) {
            let long = HeaderName::from_bytes(n.as_bytes()).unwrap();
            match common_name(n.as_bytes()) {
                Some(fast) => assert_eq!(fast, long, "{n}"),
                // a miss must be a name the table does not list
                None => assert!(!COMMON.contains(&long.as_str()), "{n}"),
            }
        }
    }

    #[test]
    fn httparse_and_header_value_admit_the_same_bytes() {
        // whether httparse takes `x: a<b>a` whole in a head starting `first`
        let takes = |first: &[u8], value: &[u8], request: bool| {
            let head = [first, b"\r\nx: ", value, b"\r\n\r\n"].concat();
            let mut fields = [httparse::EMPTY_HEADER; 4];
            let parsed = if request {
                httparse::Request::new(&mut fields).parse(&head)
            } else {
                httparse::Response::new(&mut fields).parse(&head)
            };
            matches!(parsed, Ok(httparse::Status::Complete(_))) && fields[0].value == value
        };
        for b in 0..=255u8 {
            let value = [b'a', b, b'a'];
            let admitted = HeaderValue::from_bytes(&value).is_ok();
            assert_eq!(
                takes(b"GET / HTTP/1.1", &value, true),
                admitted,
                "request, byte {b:#04x}"
            );
            assert_eq!(
                takes(b"HTTP/1.1 200 OK", &value, false),
                admitted,
                "response, byte {b:#04x}"
            );
        }
    }

    fn p(raw: &str) -> Result<Option<(Head, usize)>, HeadError> {
        parse(
            &mut raw.as_bytes().to_vec(),
            &Limits::default(),
            &mut HeaderMap::new(),
        )
    }

    fn ok(raw: &str) -> Head {
        p(raw).unwrap().unwrap().0
    }

    fn err(raw: &str) -> HeadError {
        p(raw).unwrap_err()
    }

    #[test]
    fn request_line_headers_and_keep_alive() {
        let raw = "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nAccept: a\r\nAccept: b\r\n\r\n";
        let mut fields = HeaderMap::new();
        // a pooled map's old fields are cleared
        fields.insert(actix_http::header::ETAG, HeaderValue::from_static("x"));
        let (h, _) = parse(
            &mut raw.as_bytes().to_vec(),
            &Limits::default(),
            &mut fields,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.method, Method::GET);
        assert_eq!(h.uri.path(), "/a");
        assert_eq!(h.uri.query(), Some("b=1"));
        assert_eq!(h.version, Version::HTTP_11);
        assert_eq!(fields.get_all("accept").count(), 2);
        assert_eq!(fields.len(), 3);
        assert_eq!(h.framing, Framing::None);
        assert!(h.keep_alive && !h.expect_continue);
        assert!(!ok("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").keep_alive);
        assert!(!ok("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(ok("GET / HTTP/1.0\r\nConnection: foo, Keep-Alive\r\n\r\n").keep_alive);
        let h = ok("GET http://a.test:8080/x HTTP/1.1\r\nHost: b\r\n\r\n");
        assert_eq!(h.uri.host(), Some("a.test"));
        assert_eq!(ok("OPTIONS * HTTP/1.1\r\n\r\n").uri.path(), "*");
        assert!(
            ok("PUT /u HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n")
                .expect_continue
        );
    }

    #[test]
    fn values_and_target_share_the_heads_bytes() {
        let raw = "\r\nGET /p?q=1 HTTP/1.1\r\nHost: a.test\r\nX-Empty:\r\nX-Sp: \t \r\n\r\n";
        let mut fields = HeaderMap::new();
        let (h, n) = parse(
            &mut raw.as_bytes().to_vec(),
            &Limits::default(),
            &mut fields,
        )
        .unwrap()
        .unwrap();
        assert_eq!(n, raw.len());
        assert_eq!(h.uri.to_string(), "/p?q=1");
        assert_eq!(fields.get("host").unwrap(), "a.test");
        assert_eq!(fields.get("x-empty").unwrap(), "");
        assert_eq!(fields.get("x-sp").unwrap(), "");
    }

    #[test]
    fn consumed_bytes_leave_the_pipelined_request() {
        let raw = "\r\n\r\nGET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n";
        let mut buf = raw.as_bytes().to_vec();
        let (h, n) = parse(&mut buf, &Limits::default(), &mut HeaderMap::new())
            .unwrap()
            .unwrap();
        assert_eq!(h.uri.path(), "/1");
        assert_eq!(&raw[n..], "GET /2 HTTP/1.1\r\n\r\n");
        assert!(p("GET /1 HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
        assert!(p("GET /1 HT").unwrap().is_none());
    }

    #[test]
    fn framing_and_smuggling_defences() {
        use HeadError::*;
        assert_eq!(
            ok("POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n").framing,
            Framing::Length(12)
        );
        assert_eq!(
            ok("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").framing,
            Framing::None
        );
        assert_eq!(
            ok("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n").framing,
            Framing::Chunked
        );
        assert!(matches!(
            err("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
            BadRequest(_)
        ));
        assert!(matches!(
            err("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            BadRequest(_)
        ));
        for cl in ["1a", "-1", "+5", "1,1", "", "99999999999999999999", "0x10"] {
            assert!(
                matches!(
                    err(&format!("POST / HTTP/1.1\r\nContent-Length: {cl}\r\n\r\n")),
                    BadRequest(_)
                ),
                "{cl}"
            );
        }
        assert!(matches!(
            err("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"),
            BadRequest(_)
        ));
        assert_eq!(
            err("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            UnknownCoding
        );
        assert_eq!(
            err("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            UnknownCoding
        );
        assert!(matches!(
            err("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            BadRequest(_)
        ));
        assert!(matches!(err("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), BadRequest(_)));
        assert!(matches!(
            err("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            BadRequest(_)
        ));
        assert!(matches!(
            err("POST / HTTP/1.1\r\nTransfer-Encoding: \r\n\r\n"),
            BadRequest(_)
        ));
    }

    #[test]
    fn malformed_heads_are_400() {
        for raw in [
            "GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
            "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n",
            "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
            "GET / HTTP/1.1\r\nX : a\r\n\r\n",
            "GET /\0 HTTP/1.1\r\n\r\n",
            "G@T / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.10\r\n\r\n",
            "GET / FTP/1.1\r\n\r\n",
        ] {
            assert!(
                matches!(err(raw), HeadError::BadRequest(_)),
                "{raw:?}: {:?}",
                p(raw)
            );
        }
    }

    #[test]
    fn a_version_split_across_reads_waits_for_the_line() {
        for raw in ["GET / HTTP/1.2", "GET / HTTP/2.0", "GET / HTTP/1.2\r"] {
            assert!(p(raw).unwrap().is_none(), "{raw:?}");
        }
        assert_eq!(ok("GET / HTTP/1.2\r\n\r\n").version, Version::HTTP_11);
    }

    #[test]
    fn versions() {
        let h = ok("GET / HTTP/1.2\r\nHost: x\r\n\r\n");
        assert_eq!(h.version, Version::HTTP_11);
        assert!(h.keep_alive);
        assert_eq!(ok("GET / HTTP/1.9\r\n\r\n").version, Version::HTTP_11);
        assert_eq!(err("GET / HTTP/2.0\r\n\r\n"), HeadError::Version);
        assert_eq!(err("GET / HTTP/3\r\n\r\n"), HeadError::Version);
        assert_eq!(err("GET / HTTP/2.0\r\n\r\n").status(), 505);
    }

    #[test]
    fn connect_and_limits() {
        assert_eq!(
            err("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n"),
            HeadError::Connect
        );
        let lim = Limits {
            max_uri: 20,
            max_head: 200,
            max_headers: 3,
        };
        let run = |raw: &str| parse(&mut raw.as_bytes().to_vec(), &lim, &mut HeaderMap::new());
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(20));
        assert_eq!(run(&long).unwrap_err(), HeadError::UriTooLong);
        // known before the line is complete
        let open = format!("GET /{}", "a".repeat(60));
        assert_eq!(run(&open).unwrap_err(), HeadError::UriTooLong);
        assert!(run("GET /ok HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n")
            .unwrap()
            .is_some());
        assert_eq!(
            run("GET /ok HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n").unwrap_err(),
            HeadError::HeadersTooLarge
        );
        let big = format!("GET / HTTP/1.1\r\nA: {}\r\n", "x".repeat(200));
        assert_eq!(run(&big).unwrap_err(), HeadError::HeadersTooLarge);
        let big = format!("GET / HTTP/1.1\r\nA: {}\r\n\r\n", "x".repeat(190));
        assert_eq!(run(&big).unwrap_err(), HeadError::HeadersTooLarge);
        assert_eq!(HeadError::HeadersTooLarge.status(), 431);
        assert_eq!(HeadError::UriTooLong.status(), 414);
        // past what the `http` crate's Uri holds: 414 too, not 400
        let wide = Limits {
            max_uri: 200_000,
            max_head: 300_000,
            max_headers: 3,
        };
        for len in [MAX_TARGET, MAX_TARGET + 1, 70_000] {
            let raw = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(len - 1));
            let r = parse(&mut raw.into_bytes(), &wide, &mut HeaderMap::new());
            if len <= MAX_TARGET {
                assert!(r.unwrap().is_some(), "{len}");
            } else {
                assert_eq!(r.unwrap_err(), HeadError::UriTooLong, "{len}");
            }
        }
        assert_eq!(HeadError::UnknownCoding.status(), 501);
    }
}

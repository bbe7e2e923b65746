//! The proxy's HTTP/1.1 client: one exchange on a pooled connection to one
//! server. Per worker and server, idle connections wait in a pool (at most
//! `keepalive`, each for at most `keepalive-timeout` seconds; nginx
//! `keepalive` and `keepalive_timeout` in an `upstream`), and at most
//! `max-connections` are open.
//!
//! Written for Tessera instead of awc, which ended a chunked body cut short as
//! if it were complete, and can neither cap nor count idle connections:
//! the request head is encoded straight from the header map (no URI to
//! parse, no fields added), and the response head is parsed with httparse
//! into the header map the client gets, or, where the engine writes the
//! fields and no module reads them, into lines rewritten in place over the
//! head. The response body (Content-Length, chunked with the engine's own
//! decoder, or delimited by the close) streams to the client and gives its
//! connection back to the pool once complete; a body cut short is an
//! error, never a clean end.

use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_core::Stream;
use std::future::Future;
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderName};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::body::PrebuiltFields;
use tessera_core::h1::chunked::Decoder;
use tessera_core::request_body::RequestBody;
use tessera_core::upstream::pool::{Lease, LeaseError, Pool};
use tokio::io::AsyncWriteExt;

/// The largest response head read, bytes (nginx `proxy_buffer_size` is 4
/// or 8 KiB; lighttpd allows 64 KiB).
const MAX_HEAD: usize = 64 * 1024;
/// The first read's buffer, bytes: a head and a small body. At most glibc's
/// per-thread cache size (1032 bytes), whose allocations cost a tenth of
/// larger ones; a larger body is read 16 KiB at a time.
const HEAD_BUF: usize = 1024;
/// The longest field name passed on, bytes (the `http` crate's limit,
/// which the map path meets; a longer one is a bad response on both).
const MAX_NAME: usize = u16::MAX as usize;
/// Response header fields parsed at most.
const MAX_FIELDS: usize = 128;

/// A connection to a server.
pub(super) type Conn = tessera_core::upstream::Connection;

/// Why an exchange failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// Refused or unreachable: nothing was sent (retry elsewhere).
    Connect(std::io::Error),
    /// `connect-timeout` passed: nothing was sent.
    ConnectTimeout,
    /// `max-connections` are open to this server on this worker.
    Busy,
    /// The server closed a reused connection before answering: it may
    /// have been closed while idle (one more try).
    Stale,
    /// Writing the request failed or stalled.
    Send(std::io::Error),
    /// No response head within `read-timeout`.
    ReadTimeout,
    /// The response head is malformed, too large, or cut short.
    BadResponse(&'static str),
    /// The client's body failed (over max-body-size, cut short).
    Body(tessera_core::request_body::BodyError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(e) => write!(f, "connect: {e}"),
            Failure::ConnectTimeout => f.write_str("connect: timed out (connect-timeout)"),
            Failure::Busy => f.write_str("max-connections reached"),
            Failure::Stale => f.write_str("the server closed a kept-alive connection"),
            Failure::Send(e) => write!(f, "sending the request: {e}"),
            Failure::ReadTimeout => f.write_str("no response (read-timeout)"),
            Failure::BadResponse(why) => write!(f, "bad response: {why}"),
            Failure::Body(e) => write!(f, "{e}"),
        }
    }
}

impl From<LeaseError> for Failure {
    fn from(e: LeaseError) -> Failure {
        match e {
            LeaseError::Connect(e) => Failure::Connect(e),
            LeaseError::ConnectTimeout => Failure::ConnectTimeout,
            LeaseError::Busy => Failure::Busy,
        }
    }
}

/// How the response body is framed (RFC 9112 §6.3).
enum Framing {
    None,
    Length(u64),
    Chunked(Box<Decoder>),
    Close,
}

/// The response: status, header fields, and the body stream.
pub(super) struct Response {
    pub status: StatusCode,
    /// The client's response, its fields the end-to-end fields of the
    /// server's response. Its head
    /// comes from actix-http's pool, so the field map keeps its capacity
    /// from one response to the next.
    pub head: HttpResponse,
    /// The announced length (Content-Length), when there is one.
    pub length: Option<u64>,
    /// The end-to-end fields as lines for the engine to write as they are,
    /// when the exchange was asked for them (`lines`): then `head` holds
    /// none of them.
    pub lines: Option<PrebuiltFields>,
    pub body: Body,
}

/// One exchange: `head` (the request head, encoded) and the body (`body`,
/// its Content-Length `length` or chunked), on a connection of `pool`. The
/// body is taken only once a connection is leased: when none can be
/// (refused, connect-timeout, max-connections) it is still in `body`, and
/// the request may go to another server. `head_only`: the request was HEAD (the response has
/// no body whatever its fields say). `lines`: the response's end-to-end
/// fields may come back as prebuilt lines ([`Ctx::prebuilt_fields_ok`]:
/// Tessera's engine writes them, and no response-phase module reads them)
/// instead of entries of the response's map.
///
/// [`Ctx::prebuilt_fields_ok`]: tessera_core::Ctx::prebuilt_fields_ok
pub(super) async fn exchange(
    pool: &Rc<Pool>,
    tcp: Option<std::net::SocketAddr>,
    head: &[u8],
    body: &mut Option<Box<RequestBody>>,
    length: Option<u64>,
    head_only: bool,
    lines: bool,
) -> Result<Response, Failure> {
    let limits = pool.limits();
    // the usual request reuses an idle connection and sends no body: the
    // connect and the body's loop are boxed futures, so that this one stays
    // small (its box is allocated per request)
    let mut lease = match pool.lease_idle() {
        Some(l) => l,
        None => Box::pin(pool.lease(tcp)).await?,
    };
    let reused = lease.reused();
    // a write to a connection the server closed may still succeed; its
    // failure shows when the answer does not come (a dropped lease is closed)
    let sent = match body.take().map(|b| (b, length)) {
        None => write(lease.conn(), head, limits.send).await,
        body => Box::pin(send_request(lease.conn(), head, body, limits.send)).await,
    };
    if let Err(e) = sent {
        return Err(match e {
            Failure::Send(_) if reused => Failure::Stale,
            e => e,
        });
    }
    let mut buf = BytesMut::with_capacity(HEAD_BUF);
    let mut out = HttpResponse::new(StatusCode::OK);
    let parsed = tokio::time::timeout(
        limits.read,
        read_head(lease.conn(), &mut buf, out.headers_mut(), lines),
    )
    .await;
    let mut head = match parsed {
        Ok(Ok(h)) => h,
        Ok(Err(Failure::BadResponse(_))) if reused && buf.is_empty() => {
            return Err(Failure::Stale);
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(Failure::ReadTimeout),
    };
    let status = head.status;
    // RFC 9112 §6.3: an invalid Content-Length (a list, a sign, not a
    // number) is an unrecoverable framing error, 502 from a proxy; a
    // transfer coding other than chunked alone is not one this client
    // decodes (nginx refuses it too)
    let length = head
        .length
        .map_err(|()| Failure::BadResponse("an invalid Content-Length"))?;
    let chunked = head
        .chunked
        .map_err(|()| Failure::BadResponse("a transfer coding other than chunked"))?;
    let close = head.close;
    let framing = if head_only
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        Framing::None
    } else if chunked {
        Framing::Chunked(Box::new(Decoder::new(u64::MAX)))
    } else if let Some(n) = length {
        if n == 0 {
            Framing::None
        } else {
            Framing::Length(n)
        }
    } else {
        Framing::Close
    };
    let keep = !close && !matches!(framing, Framing::Close) && limits.keepalive > 0;
    let mut body = Body {
        conn: Some(lease),
        buf,
        framing,
        keep,
        read: limits.read,
        sleep: None,
    };
    if matches!(body.framing, Framing::None) {
        body.finish();
    }
    *out.status_mut() = status;
    Ok(Response {
        status,
        head: out,
        length: if chunked { None } else { length },
        lines: head.lines.take(),
        body,
    })
}

async fn send_request(
    conn: &mut Conn,
    head: &[u8],
    body: Option<(Box<RequestBody>, Option<u64>)>,
    limit: Duration,
) -> Result<(), Failure> {
    let Some((mut body, length)) = body else {
        return write(conn, head, limit).await;
    };
    let mut first = BytesMut::with_capacity(head.len() + 64);
    first.put_slice(&head[..head.len() - 2]);
    match length {
        Some(n) => {
            first.put_slice(b"content-length: ");
            first.put_slice(n.to_string().as_bytes());
            first.put_slice(b"\r\n\r\n");
        }
        None => first.put_slice(b"transfer-encoding: chunked\r\n\r\n"),
    }
    write(conn, &first, limit).await?;
    loop {
        let next = std::future::poll_fn(|cx| Pin::new(&mut body).poll_next(cx));
        let next = match tokio::time::timeout(limit, next).await {
            Ok(n) => n,
            Err(_) => {
                return Err(Failure::Body(
                    tessera_core::request_body::BodyError::Incomplete(
                        "the client stopped sending (send-timeout)".into(),
                    ),
                ))
            }
        };
        match next {
            Some(Ok(chunk)) if chunk.is_empty() => {}
            Some(Ok(chunk)) => {
                if length.is_none() {
                    write(conn, format!("{:x}\r\n", chunk.len()).as_bytes(), limit).await?;
                    write(conn, &chunk, limit).await?;
                    write(conn, b"\r\n", limit).await?;
                } else {
                    write(conn, &chunk, limit).await?;
                }
            }
            Some(Err(e)) => return Err(Failure::Body(e)),
            None => break,
        }
    }
    if length.is_none() {
        write(conn, b"0\r\n\r\n", limit).await?;
    }
    Ok(())
}

/// Writes `bytes` whole; a write that stalls longer than `limit` fails.
async fn write(conn: &mut Conn, bytes: &[u8], limit: Duration) -> Result<(), Failure> {
    let now = conn.write_now(bytes).map_err(Failure::Send)?;
    let bytes = &bytes[now..];
    if bytes.is_empty() {
        return Ok(());
    }
    match tokio::time::timeout(limit, conn.write_all(bytes)).await {
        Ok(r) => r.map_err(Failure::Send),
        Err(_) => Err(Failure::Send(std::io::ErrorKind::TimedOut.into())),
    }
}

/// What a response head says about its framing and connection, read from
/// the fields before the hop-by-hop ones are left out.
struct Head {
    status: StatusCode,
    /// Content-Length; `Err`: not a valid one.
    length: Result<Option<u64>, ()>,
    /// Transfer-Encoding is `chunked` alone; `Err`: another coding.
    chunked: Result<bool, ()>,
    /// `Connection: close`.
    close: bool,
    /// The end-to-end fields as lines, when asked for and possible.
    lines: Option<PrebuiltFields>,
}

/// Reads until a final (non-1xx, or 101) response head parses, takes it off
/// `buf`, and appends its end-to-end fields to `h` (the values share its
/// bytes), or with `lines` returns them as lines in [`Head::lines`]:
/// hop-by-hop fields and those its `Connection` names (RFC 9110 §7.6.1) are
/// left out, and `Server` (Tessera sets its own, as nginx does).
async fn read_head(
    conn: &mut Conn,
    buf: &mut BytesMut,
    h: &mut HeaderMap,
    lines: bool,
) -> Result<Head, Failure> {
    use tokio::io::AsyncReadExt;
    loop {
        if !buf.is_empty() {
            // uninitialised slots: nothing to clear per response
            let mut slots =
                [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_FIELDS];
            let mut res = httparse::Response::new(&mut []);
            match httparse::ParserConfig::default()
                .parse_response_with_uninit_headers(&mut res, buf, &mut slots)
            {
                Ok(httparse::Status::Complete(n)) => {
                    // a head read whole in one burst may pass the limit
                    if n > MAX_HEAD {
                        return Err(Failure::BadResponse("response head too large"));
                    }
                    let code = res.code.unwrap_or(0);
                    if !(100..=599).contains(&code) {
                        return Err(Failure::BadResponse("status code out of range"));
                    }
                    let status = StatusCode::from_u16(code)
                        .map_err(|_| Failure::BadResponse("status code out of range"))?;
                    if status == StatusCode::SWITCHING_PROTOCOLS {
                        // only the upgrade path asks for a protocol switch
                        return Err(Failure::BadResponse(
                            "101 to a request that did not ask to upgrade",
                        ));
                    }
                    if status.is_informational() {
                        // 100 Continue, 102, 103 Early Hints: interim, not
                        // passed on (RFC 9110 §15.2); the final answer follows
                        buf.advance(n);
                        continue;
                    }
                    let mut head = Head {
                        status,
                        length: Ok(None),
                        chunked: Ok(false),
                        close: false,
                        lines: None,
                    };
                    // one pass: the framing and connection fields are found
                    // by their names' bytes (no name is converted for a field
                    // left out), and what Connection names is left out after
                    // the pass (it may come later in the head)
                    let mut named: smallvec::SmallVec<[&[u8]; 4]> = smallvec::SmallVec::new();
                    // HTTP/1.0 closes unless the server says keep-alive
                    // (RFC 9112 §9.3)
                    let mut keep_alive = res.version == Some(1);
                    let mut lengths = 0;
                    let mut codings = 0;
                    let mut date = false;
                    // offsets in the head's bytes: name, value start, value end
                    let base = buf.as_ptr() as usize;
                    let at = |p: &[u8]| (p.as_ptr() as usize).wrapping_sub(base);
                    let mut fields: smallvec::SmallVec<[Kept; 16]> =
                        smallvec::SmallVec::with_capacity(res.headers.len());
                    for f in res.headers.iter() {
                        // a name `HeaderName` refuses is refused on both paths
                        if f.name.len() > MAX_NAME {
                            return Err(Failure::BadResponse("a header name is too long"));
                        }
                        match kind(f.name.as_bytes()) {
                            Kind::ContentLength => {
                                lengths += 1;
                                head.length = tessera_core::h1::head::content_length(f.value)
                                    .map(Some)
                                    .ok_or(());
                                continue;
                            }
                            Kind::TransferEncoding => {
                                for c in list(f.value) {
                                    codings += 1;
                                    head.chunked =
                                        if codings == 1 && c.eq_ignore_ascii_case(b"chunked") {
                                            Ok(true)
                                        } else {
                                            Err(())
                                        };
                                }
                                continue;
                            }
                            Kind::Connection => {
                                for t in list(f.value) {
                                    if t.eq_ignore_ascii_case(b"close") {
                                        head.close = true;
                                    } else if t.eq_ignore_ascii_case(b"keep-alive") {
                                        keep_alive = true;
                                    } else {
                                        named.push(t);
                                    }
                                }
                                continue;
                            }
                            Kind::HopByHop | Kind::Server => continue,
                            Kind::Date => date = true,
                            Kind::Other => {}
                        }
                        // an empty value need not lie in the head's bytes
                        let value = if f.value.is_empty() {
                            at(f.name.as_bytes()) + f.name.len()
                                ..at(f.name.as_bytes()) + f.name.len()
                        } else {
                            at(f.value)..at(f.value) + f.value.len()
                        };
                        fields.push(Kept {
                            name: at(f.name.as_bytes()),
                            name_len: f.name.len(),
                            value,
                        });
                    }
                    if lengths > 1 {
                        return Err(Failure::BadResponse("more than one Content-Length"));
                    }
                    if !keep_alive {
                        head.close = true;
                    }
                    if !named.is_empty() {
                        fields.retain(|k| {
                            let name = &buf[k.name..k.name + k.name_len];
                            !named.iter().any(|t| t.eq_ignore_ascii_case(name))
                        });
                        // a Date the Connection field named is left out too
                        date = date
                            && fields
                                .iter()
                                .any(|k| kind(&buf[k.name..k.name + k.name_len]) == Kind::Date);
                    }
                    drop(named);
                    if lines {
                        if let Some(m) = compact(&mut buf[..n], &fields) {
                            let mut taken = buf.split_to(n);
                            taken.truncate(m);
                            head.lines = Some(PrebuiltFields {
                                lines: taken.freeze(),
                                date,
                            });
                            return Ok(head);
                        }
                    }
                    let shared = buf.split_to(n).freeze();
                    for k in fields.drain(..) {
                        let name = HeaderName::from_bytes(&shared[k.name..k.name + k.name_len])
                            .map_err(|_| Failure::BadResponse("a header name is invalid"))?;
                        let value = tessera_core::h1::head::parsed_value(shared.slice(k.value));
                        h.append(name, value);
                    }
                    return Ok(head);
                }
                Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
                Ok(httparse::Status::Partial) => {
                    return Err(Failure::BadResponse("response head too large"))
                }
                Err(_) => return Err(Failure::BadResponse("malformed response head")),
            }
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(4096);
        }
        let n = conn
            .read_buf(buf)
            .await
            .map_err(|_| Failure::BadResponse("the connection failed"))?;
        if n == 0 {
            return Err(Failure::BadResponse("closed before a response"));
        }
    }
}

/// The non-empty items of a comma-separated field value, trimmed.
fn list(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

/// A field of a response head that is passed on: offsets in the head's
/// bytes.
struct Kept {
    name: usize,
    name_len: usize,
    value: std::ops::Range<usize>,
}

/// What a response field is to the proxy, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ContentLength,
    TransferEncoding,
    Connection,
    /// The other hop-by-hop fields of [`super::forward::is_hop_by_hop`].
    HopByHop,
    /// `Server`: Tessera's replaces it.
    Server,
    Date,
    Other,
}

/// The kind of the field named `name` (any case): its length picks the one
/// or two names it can be, so most names cost one compare.
fn kind(name: &[u8]) -> Kind {
    let is = |s: &[u8]| name.eq_ignore_ascii_case(s);
    match name.len() {
        2 if is(b"te") => Kind::HopByHop,
        4 if is(b"date") => Kind::Date,
        6 if is(b"server") => Kind::Server,
        7 if is(b"upgrade") || is(b"trailer") => Kind::HopByHop,
        10 if is(b"connection") => Kind::Connection,
        10 if is(b"keep-alive") => Kind::HopByHop,
        14 if is(b"content-length") => Kind::ContentLength,
        16 if is(b"proxy-connection") => Kind::HopByHop,
        17 if is(b"transfer-encoding") => Kind::TransferEncoding,
        18 if is(b"proxy-authenticate") => Kind::HopByHop,
        _ => Kind::Other,
    }
}

/// Rewrites the kept fields of the head in `head` as `name: value\r\n`
/// lines from its start (over the status line and the fields left out) and
/// returns their length; `None`, with `head` unchanged, when a line would
/// overtake bytes not yet moved (a field without the space after its colon
/// right after a short status line, or bare-LF lines, can be shorter than
/// the line written).
fn compact(head: &mut [u8], fields: &[Kept]) -> Option<usize> {
    // each part moves left (or stays): the name, then the value (written
    // after ": "), then the next line past this one's end
    let mut w = 0;
    for (i, k) in fields.iter().enumerate() {
        if !k.value.is_empty() && k.value.start < w + k.name_len + 2 {
            return None;
        }
        let next = fields.get(i + 1).map_or(head.len(), |n| n.name);
        w += k.name_len + 2 + k.value.len() + 2;
        if w > next {
            return None;
        }
    }
    // a line already in the form written is moved whole, with the lines
    // that follow it in the head (one move for a run of kept fields)
    let mut w = 0;
    let mut run = 0..0;
    for k in fields {
        let sep = k.name + k.name_len;
        let canonical = k.value.start == sep + 2
            && head[sep..sep + 2] == *b": "
            && head.get(k.value.end..k.value.end + 2) == Some(b"\r\n");
        if canonical {
            if run.end != k.name {
                w = flush(head, &mut run, w);
                run = k.name..k.name;
            }
            run.end = k.value.end + 2;
            continue;
        }
        w = flush(head, &mut run, w);
        head.copy_within(k.name..sep, w);
        w += k.name_len;
        head[w..w + 2].copy_from_slice(b": ");
        w += 2;
        head.copy_within(k.value.clone(), w);
        w += k.value.len();
        head[w..w + 2].copy_from_slice(b"\r\n");
        w += 2;
    }
    Some(flush(head, &mut run, w))
}

/// Moves the bytes of `run` to `w` and returns where the next line goes.
fn flush(head: &mut [u8], run: &mut std::ops::Range<usize>, w: usize) -> usize {
    let len = run.len();
    if len > 0 {
        head.copy_within(run.clone(), w);
        *run = 0..0;
    }
    w + len
}

/// The response body as a stream; the connection goes back to the pool
/// when the body is complete and the server keeps it alive.
pub(super) struct Body {
    /// Given back when the body ends cleanly and `keep`; closed otherwise
    /// (dropped).
    conn: Option<Lease>,
    buf: BytesMut,
    framing: Framing,
    keep: bool,
    read: Duration,
    sleep: Option<Pin<Box<actix_rt::time::Sleep>>>,
}

/// The server broke off or stalled while its response body was being sent.
#[derive(Debug, thiserror::Error)]
#[error("upstream response body: {0}")]
pub(super) struct BodyFailed(&'static str);

impl Body {
    /// The body ended properly: the connection is reused or closed.
    fn finish(&mut self) {
        if let Some(lease) = self.conn.take() {
            if self.keep && self.buf.is_empty() {
                lease.release();
            }
        }
        self.framing = Framing::None;
    }

    /// The body of an answer on a connection of its own (the upgrade path's
    /// answer other than 101) on `conn`, `buf` holding its first bytes,
    /// framed by the fields `h` as [`exchange`] frames a pooled one
    /// (`head_only`: the request was HEAD); the connection is closed at
    /// its end. Returns the body and its Content-Length when sized.
    ///
    /// # Errors
    /// The framing is broken (RFC 9112 §6.3; 502): more than one or an
    /// invalid Content-Length, or a transfer coding other than chunked.
    pub(super) fn unpooled(
        conn: Lease,
        buf: BytesMut,
        read: Duration,
        (status, head_only): (StatusCode, bool),
        h: &HeaderMap,
    ) -> Result<(Body, Option<u64>), &'static str> {
        let mut lengths = h.get_all(header::CONTENT_LENGTH);
        let length = match (lengths.next(), lengths.next()) {
            (None, _) => None,
            (Some(v), None) => Some(
                tessera_core::h1::head::content_length(v.as_bytes())
                    .ok_or("an invalid Content-Length")?,
            ),
            (Some(_), Some(_)) => return Err("more than one Content-Length"),
        };
        let mut codings = h
            .get_all(header::TRANSFER_ENCODING)
            .flat_map(|v| list(v.as_bytes()));
        let chunked = match (codings.next(), codings.next()) {
            (None, _) => false,
            (Some(c), None) if c.eq_ignore_ascii_case(b"chunked") => true,
            _ => return Err("a transfer coding other than chunked"),
        };
        let framing = if head_only
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
            || length == Some(0) && !chunked
        {
            Framing::None
        } else if chunked {
            Framing::Chunked(Box::new(Decoder::new(u64::MAX)))
        } else if let Some(n) = length {
            Framing::Length(n)
        } else {
            Framing::Close
        };
        let mut body = Body {
            conn: Some(conn),
            buf,
            framing,
            keep: false,
            read,
            sleep: None,
        };
        if matches!(body.framing, Framing::None) {
            body.finish();
        }
        Ok((body, if chunked { None } else { length }))
    }

    /// The whole body when it is already read (a sized body that came with
    /// its head, as a small file's does); the connection is then released
    /// at once. `None` (nothing taken) when more is to come or the body is
    /// not sized.
    pub(super) fn take_whole(&mut self) -> Option<Bytes> {
        match self.framing {
            Framing::Length(left) if self.buf.len() as u64 >= left => self.take().ok().flatten(),
            _ => None,
        }
    }

    /// The body failed: the connection is closed.
    fn fail(&mut self, why: &'static str) -> Poll<Option<Result<Bytes, BodyFailed>>> {
        self.conn = None;
        self.framing = Framing::None;
        Poll::Ready(Some(Err(BodyFailed(why))))
    }

    /// Body bytes from what is buffered, if any.
    fn take(&mut self) -> Result<Option<Bytes>, &'static str> {
        match &mut self.framing {
            Framing::None => Ok(None),
            Framing::Length(left) => {
                let k = (*left).min(self.buf.len() as u64) as usize;
                if k == 0 {
                    return Ok(None);
                }
                *left -= k as u64;
                let out = self.buf.split_to(k).freeze();
                if *left == 0 {
                    self.finish();
                }
                Ok(Some(out))
            }
            Framing::Close => {
                if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Ok(Some(self.buf.split().freeze()))
                }
            }
            Framing::Chunked(d) => loop {
                let s = d.step(&self.buf).map_err(|_| "a malformed chunk")?;
                if s.consumed == 0 && !s.done {
                    return Ok(None);
                }
                let piece = self.buf.split_to(s.consumed).freeze();
                if s.done {
                    self.finish();
                    return Ok((s.data.1 > s.data.0).then(|| piece.slice(s.data.0..s.data.1)));
                }
                if s.data.1 > s.data.0 {
                    return Ok(Some(piece.slice(s.data.0..s.data.1)));
                }
            },
        }
    }
}

impl Stream for Body {
    type Item = Result<Bytes, BodyFailed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match this.take() {
                Ok(Some(b)) => {
                    this.sleep = None;
                    return Poll::Ready(Some(Ok(b)));
                }
                Ok(None) => {}
                Err(why) => return this.fail(why),
            }
            if matches!(this.framing, Framing::None) {
                return Poll::Ready(None);
            }
            let Some(lease) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            if this.buf.capacity() - this.buf.len() < 4096 {
                this.buf.reserve(16 * 1024);
            }
            match tokio_util::io::poll_read_buf(Pin::new(lease.conn()), cx, &mut this.buf) {
                Poll::Ready(Ok(0)) => {
                    if matches!(this.framing, Framing::Close) {
                        this.keep = false;
                        this.finish();
                        return Poll::Ready(None);
                    }
                    return this.fail("the server closed the connection mid-body");
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(_)) => return this.fail("the connection failed mid-body"),
                Poll::Pending => {
                    let read = this.read;
                    let sleep = this
                        .sleep
                        .get_or_insert_with(|| Box::pin(actix_rt::time::sleep(read)));
                    if sleep.as_mut().poll(cx).is_ready() {
                        return this.fail("no body bytes within read-timeout");
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! One HTTP/1.x connection of Tessera's engine: read and parse a head
//! ([`super::head`]), build an `actix_http::Request`, call the same actix-web
//! app service that actix-http calls, write the response, keep the connection
//! alive or close it (RFC 9112 §9).
//!
//! What it does that actix-http's dispatcher does not: no read or write buffer
//! is held while the connection is idle (both are released after each
//! response), the head and a small body leave in one write, `Date` is
//! formatted once a second per worker thread, every request head is timed
//! from its first byte (client header timeout), an unread request body of a
//! bounded size is drained so that the connection stays alive (chunked ones
//! too), and a request the parser refuses gets its 4xx and a close.
//!
//! Timeouts are plain per-connection deadlines: `keep-alive` while idle
//! between requests, `client-header-timeout` from the first byte of a head
//! (from the connection's start for the first request, as nginx and
//! actix-http do), `send-timeout` for each write.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use actix_http::body::{BodySize, BoxBody, MessageBody};
use actix_http::header::{self, HeaderValue};
use actix_http::{ConnectionType, Method, Request, Response, StatusCode, Version};
use actix_rt::net::TcpStream;
use actix_service::Service;
use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

use super::head::{self, Framing, HeadError, Limits};

/// Settings of every connection of a listener, read once at start.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Parser limits. The configured `max-uri-length` and
    /// `max-request-header-size` are checked by the request path (so that
    /// their 414 and 431 go through error pages and the access log); these
    /// are the engine's hard caps.
    pub limits: Limits,
    /// `keep-alive`: idle time between requests; `None`: one request per
    /// connection.
    pub keep_alive: Option<Duration>,
    /// `client-header-timeout`.
    pub header_timeout: Duration,
    /// `send-timeout`: the longest one write may wait.
    pub send_timeout: Duration,
    /// The most unread request-body bytes read and discarded after a response
    /// to keep the connection; a larger body closes it (nginx discards bodies
    /// the same way, lighttpd up to a limit).
    pub drain_limit: u64,
}

/// The room a read asks for when its buffer has less than 1 KiB free, bytes
/// (4 KiB). A pooled buffer starts at 1 KiB ([`crate::buffers::SIZE`], a
/// head's worth); a request body or a pipelined burst grows it by this much,
/// so that a body is read 4 KiB per `recv`, not 1 KiB.
const READ_CHUNK: usize = 4096;

/// Bodies up to this size are copied behind the head and leave in one write
/// (a streamed body: until the stream has nothing ready, see `send_body`).
const COALESCE: usize = 16 * 1024;

thread_local! {
    /// (second, `Date` value) of this worker thread.
    static DATE: RefCell<(u64, HeaderValue)> =
        const { RefCell::new((u64::MAX, HeaderValue::from_static(""))) };
}

/// The `Date` field value (RFC 9110 §6.6.1), formatted at most once a second.
fn date() -> HeaderValue {
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            let v = httpdate::fmt_http_date(now);
            d.1 = HeaderValue::from_str(&v).unwrap_or_else(|_| HeaderValue::from_static(""));
            d.0 = secs;
        }
        d.1.clone()
    })
}

/// Why a connection ends.
enum End {
    /// The client closed, or the connection is done.
    Closed,
    /// A deadline passed while a head was being read: answer 408.
    HeaderTimeout,
}

/// Serves one connection until it closes.
pub(super) async fn serve<S>(
    io: TcpStream,
    peer: Option<SocketAddr>,
    svc: Rc<S>,
    st: Rc<Settings>,
    idle: Rc<super::accept::Idle>,
) where
    S: Service<Request, Response = Response<BoxBody>, Error = actix_web::Error>,
{
    let _guard = crate::stats::ConnectionGuard::new();
    let mut buf = BytesMut::new();
    let shutdown = super::accept::IdleWait::new(idle);
    requests(io, peer, &svc, &st, &shutdown, &mut buf).await;
    // the read buffer serves the next connection of this worker
    pool::give(buf);
}

/// The requests of one connection, read into `buf`.
async fn requests<S>(
    mut io: TcpStream,
    peer: Option<SocketAddr>,
    svc: &S,
    st: &Settings,
    shutdown: &super::accept::IdleWait,
    buf: &mut BytesMut,
) where
    S: Service<Request, Response = Response<BoxBody>, Error = actix_web::Error>,
{
    let mut first = true;
    let started = Instant::now();
    // the request the next head is parsed into: actix-http's pooled head,
    // whose header map keeps its capacity; taken when bytes arrive, so an
    // idle connection holds none
    let mut next: Option<Request> = None;
    loop {
        // 1. a head
        let read = read_head(&mut io, buf, &mut next, st, first, started, shutdown);
        let head = match read.await {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(End::Closed) => return,
            Err(End::HeaderTimeout) => {
                count_timeout();
                let _ = write_error(&mut io, StatusCode::REQUEST_TIMEOUT, st).await;
                return;
            }
        };
        first = false;
        let (head, n) = match head {
            Ok(h) => h,
            Err(e) => {
                let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
                let _ = write_error(&mut io, status, st).await;
                return;
            }
        };
        buf.advance(n);
        // 2. the request, as actix-http would build it
        let is_head = head.method == Method::HEAD;
        let version = head.version;
        let framing = head.framing;
        let mut keep = head.keep_alive && st.keep_alive.is_some();
        // A client waiting for 100 Continue gets the final answer instead and
        // a close: its body may or may not follow (RFC 9110 §10.1.1).
        // an HTTP/1.0 client never gets a 1xx (RFC 9110 §10.1.1, §15.2)
        let head_expects =
            head.expect_continue && framing != Framing::None && head.version == Version::HTTP_11;
        let mut req = next.take().unwrap_or_else(Request::new);
        // the body streams to the handler as it asks (super::body)
        let mut body = match framing {
            Framing::None | Framing::Length(0) => None,
            _ => {
                let (inc, stream) = super::body::Incoming::new(framing);
                let stream: actix_http::BoxedPayloadStream = Box::pin(stream);
                *req.payload() = actix_http::Payload::Stream { payload: stream };
                Some(inc)
            }
        };
        {
            let h = req.head_mut();
            h.method = head.method;
            h.uri = head.uri;
            h.version = head.version;
            h.peer_addr = peer;
            h.set_connection_type(if head.keep_alive {
                ConnectionType::KeepAlive
            } else {
                ConnectionType::Close
            });
        }
        // a request that asks for another protocol may get the connection
        // after a 101 (crate::upgrade)
        // RFC 9110 §7.8: Upgrade counts in HTTP/1.1 only, with the
        // `upgrade` connection option
        let upgradable = framing == Framing::None
            && version == Version::HTTP_11
            && req.head().headers.contains_key(header::UPGRADE)
            && req.head().headers.get_all(header::CONNECTION).any(|v| {
                v.to_str().is_ok_and(|v| {
                    v.split(',')
                        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
                })
            });
        if upgradable {
            actix_http::HttpMessage::extensions_mut(&req).insert(crate::upgrade::CanUpgrade);
        }
        // 3. the app
        let mut call = std::pin::pin!(svc.call(req));
        let res = loop {
            match body.as_mut() {
                Some(b) if b.active() => {
                    tokio::select! {
                        biased;
                        r = &mut call => break r,
                        () = b.pump(&mut io, buf, st, head_expects) => {}
                    }
                }
                _ => break call.await,
            }
        };
        let res = match res {
            Ok(r) => r,
            Err(e) => e.error_response().into(),
        };
        if res.head().connection_type() == ConnectionType::Close {
            keep = false;
        }
        let status = res.status();
        // 4. the unread body, read and discarded before the response goes out
        // (a client that sends its whole body before reading would otherwise
        // stall against a large response); a body above the drain limit, or
        // one the client withholds for a 100 Continue never sent, closes the
        // connection
        let drained = match body.as_mut() {
            None => true,
            // a 413 over max-body-size (small, it fits the socket buffers):
            // answer at once, the lingering close reads the rest
            Some(_) if status == StatusCode::PAYLOAD_TOO_LARGE => false,
            Some(b) if head_expects && !b.continued && !b.done => false,
            Some(b) => b.drain(&mut io, buf, st, st.drain_limit).await,
        };
        if !drained {
            keep = false;
        }
        // 5. the response
        let upgrade = if upgradable && res.status() == StatusCode::SWITCHING_PROTOCOLS {
            res.extensions().get::<crate::upgrade::Upgrade>().cloned()
        } else {
            None
        };
        let written = write_response(&mut io, res, version, is_head, keep, st).await;
        if let Some(run) = upgrade.and_then(|u| u.take()) {
            if written.is_ok() {
                run(crate::upgrade::Tunnel {
                    io,
                    read: std::mem::take(buf),
                })
                .await;
            }
            return;
        }
        match written {
            Ok(true) if keep => {}
            Ok(_) => return linger_close(&mut io, buf).await,
            Err(_) => return,
        }
        // no buffer is held while idle
        if buf.is_empty() {
            pool::give(std::mem::take(buf));
        }
    }
}

type Parsed = Result<(head::Head, usize), HeadError>;

/// Reads until a head parses. `Ok(None)`: the connection ends quietly (idle
/// keep-alive expired, client closed between requests, shutdown).
async fn read_head(
    io: &mut TcpStream,
    buf: &mut BytesMut,
    next: &mut Option<Request>,
    st: &Settings,
    first: bool,
    started: Instant,
    shutdown: &super::accept::IdleWait,
) -> Result<Option<Parsed>, End> {
    let mut head_since = if first { Some(started) } else { None };
    loop {
        if !buf.is_empty() {
            head_since.get_or_insert_with(Instant::now);
            let fields = &mut next.get_or_insert_with(Request::new).head_mut().headers;
            match head::parse(&mut buf[..], &st.limits, fields) {
                Ok(Some(h)) => return Ok(Some(Ok(h))),
                Ok(None) => {}
                Err(e) => return Ok(Some(Err(e))),
            }
        }
        let deadline = match head_since {
            Some(t) => t + st.header_timeout,
            None => Instant::now() + st.keep_alive.unwrap_or(st.header_timeout),
        };
        let read = if buf.is_empty() {
            // idle: wait for bytes without a buffer, then take one from the pool
            let ready = tokio::select! {
                r = timeout_at(deadline, io.readable()) => r,
                // an idle connection closes at shutdown; one mid-head gets its deadline
                () = shutdown.wait(), if head_since.is_none() => return Ok(None),
            };
            match ready {
                Ok(Ok(())) => {
                    if buf.capacity() == 0 {
                        *buf = pool::take();
                    }
                    let room = buf.capacity() - buf.len();
                    match io.try_read_buf(buf) {
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        Ok(n) if n > 0 && n < room => {
                            // a short read drained the socket: forget its
                            // readable event, as tokio's poll_read does, or
                            // the next wait returns at once into a read
                            // that fails with EAGAIN (one syscall per
                            // request on a keep-alive connection)
                            let _ = io.try_io(tokio::io::Interest::READABLE, || {
                                Err::<(), _>(std::io::ErrorKind::WouldBlock.into())
                            });
                            Ok(Ok(n))
                        }
                        r => Ok(r),
                    }
                }
                Ok(Err(e)) => Ok(Err(e)),
                Err(t) => Err(t),
            }
        } else {
            if buf.capacity() - buf.len() < 1024 {
                buf.reserve(READ_CHUNK);
            }
            timeout_at(deadline, io.read_buf(buf)).await
        };
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => {
                return if buf.is_empty() {
                    Ok(None)
                } else {
                    Err(End::Closed)
                }
            }
            Ok(Ok(_)) => {}
            Err(_) if head_since.is_some() => return Err(End::HeaderTimeout),
            Err(_) => return Ok(None),
        }
    }
}

/// Writes `bytes` whole within the send timeout. The first write is tried
/// at once: most fit the socket buffer, and those need no clock read and no
/// timer.
pub(super) async fn send(io: &mut TcpStream, bytes: &[u8], st: &Settings) -> std::io::Result<()> {
    let at = match io.try_write(bytes) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(e) => return Err(e),
    };
    if at == bytes.len() {
        return Ok(());
    }
    match timeout_at(Instant::now() + st.send_timeout, io.write_all(&bytes[at..])).await {
        Ok(r) => r,
        Err(_) => {
            count_timeout();
            Err(std::io::ErrorKind::TimedOut.into())
        }
    }
}

/// Writes `bytes` whole, the last write of a response. When the connection
/// closes right after (`closing`), with `MSG_MORE`, so that the close's FIN
/// leaves in the same packet as the response's last bytes: one segment fewer
/// each way per connection, as nginx gets from `tcp_nopush` and a close.
async fn send_last(
    io: &mut TcpStream,
    bytes: &[u8],
    st: &Settings,
    closing: bool,
) -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if closing {
        return send_more(io, bytes, st).await;
    }
    let _ = closing;
    send(io, bytes, st).await
}

/// Sends `buf` whole with `MSG_MORE`: it waits in the socket for what
/// follows (more bytes, a `sendfile`, or the FIN of a close or shutdown).
#[cfg(any(target_os = "linux", target_os = "android"))]
async fn send_more(io: &TcpStream, buf: &[u8], st: &Settings) -> std::io::Result<()> {
    use tokio::io::Interest;
    let mut at = 0;
    // the clock is read only when a write has to wait
    let mut since = None;
    while at < buf.len() {
        let r = io.try_io(Interest::WRITABLE, || {
            rustix::net::send(io, &buf[at..], rustix::net::SendFlags::MORE)
                .map_err(std::io::Error::from)
        });
        match r {
            Ok(n) => {
                at += n;
                since = None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let since = *since.get_or_insert_with(Instant::now);
                match timeout_at(since + st.send_timeout, io.writable()).await {
                    Ok(r) => r?,
                    Err(_) => {
                        count_timeout();
                        return Err(std::io::ErrorKind::TimedOut.into());
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `a` then `b` whole, with `writev` (one system call, one packet
/// when they fit), within the send timeout of each write.
async fn send_pair(io: &mut TcpStream, a: &[u8], b: &[u8], st: &Settings) -> std::io::Result<()> {
    let (mut a, mut b) = (a, b);
    while !a.is_empty() {
        let bufs = [std::io::IoSlice::new(a), std::io::IoSlice::new(b)];
        // tried at once; the clock and a timer only for a write that waits
        let n = match io.try_write_vectored(&bufs) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                match timeout_at(Instant::now() + st.send_timeout, io.write_vectored(&bufs)).await {
                    Ok(r) => r?,
                    Err(_) => {
                        count_timeout();
                        return Err(std::io::ErrorKind::TimedOut.into());
                    }
                }
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        if n < a.len() {
            a = &a[n..];
        } else {
            b = &b[n - a.len()..];
            a = &[];
        }
    }
    send(io, b, st).await
}

/// A body-less answer of the engine itself, and a close.
async fn write_error(io: &mut TcpStream, status: StatusCode, st: &Settings) -> std::io::Result<()> {
    let mut b = BytesMut::with_capacity(128);
    b.put_slice(b"HTTP/1.1 ");
    b.put_slice(status.as_str().as_bytes());
    b.put_u8(b' ');
    b.put_slice(status.canonical_reason().unwrap_or("").as_bytes());
    b.put_slice(b"\r\ncontent-length: 0\r\nconnection: close\r\ndate: ");
    b.put_slice(date().as_bytes());
    b.put_slice(b"\r\n\r\n");
    send_last(io, &b, st, true).await?;
    linger_close(io, &mut BytesMut::new()).await;
    Ok(())
}

/// How long a closing connection keeps reading (and discarding) what the
/// client still sends, in total and per read (nginx `lingering_time` 30 s and
/// `lingering_timeout` 5 s; shorter here).
const LINGER_TOTAL: Duration = Duration::from_secs(5);
const LINGER_READ: Duration = Duration::from_secs(2);

/// Closes gracefully: FIN first, then read and discard until the client
/// closes too, or for at most [`LINGER_TOTAL`]. Closing with unread bytes in
/// the receive queue makes the kernel send RST, which destroys response bytes
/// the client has not read yet (RFC 9112 §9.6). When nothing is pending (no
/// unparsed bytes, none in the socket) the close follows at once, as nginx
/// decides in `ngx_http_finalize_connection`. The FIN always leaves first,
/// with what the last write held back (`MSG_MORE`): bytes the client sends
/// between the look and the close can then reset the connection, but no
/// longer destroy the response.
async fn linger_close(io: &mut TcpStream, buf: &mut BytesMut) {
    if io.shutdown().await.is_err() {
        return;
    }
    if buf.is_empty() && !pending_input(io) {
        return;
    }
    let end = Instant::now() + LINGER_TOTAL;
    if buf.capacity() == 0 {
        *buf = pool::take();
    }
    loop {
        buf.clear();
        let deadline = (Instant::now() + LINGER_READ).min(end);
        match timeout_at(deadline, io.read_buf(buf)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => break,
        }
    }
    pool::give(std::mem::take(buf));
}

/// Whether the client has sent bytes not read yet, asked of the kernel (one
/// `recv(MSG_PEEK)`: tokio's cached readiness may predate them). Errors and
/// end of stream count as nothing pending.
fn pending_input(io: &TcpStream) -> bool {
    let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    matches!(socket2::SockRef::from(io).peek(&mut probe), Ok(n) if n > 0)
}

/// Encodes the status line and header fields (RFC 9112 §4, §6) and sends the
/// body. `Ok(false)`: the body ended early or the client went away, so the
/// connection must close.
async fn write_response(
    io: &mut TcpStream,
    res: Response<BoxBody>,
    version: Version,
    is_head: bool,
    keep: bool,
    st: &Settings,
) -> std::io::Result<bool> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let sendfile = if is_head {
        None
    } else {
        res.extensions().get::<crate::body::SendFile>().cloned()
    };
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let sendfile: Option<crate::body::SendFile> = None;
    let (res, body) = res.into_parts();
    let status = res.status();
    let mut size = body.size();
    let no_body_status = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    if no_body_status {
        size = BodySize::None;
    }
    let chunked = matches!(size, BodySize::Stream) && version == Version::HTTP_11;
    // an HTTP/1.0 stream is delimited by the close
    let keep = keep && (chunked || !matches!(size, BodySize::Stream));
    // the connection closes after this response (a 101's goes on as a tunnel)
    let closing = !keep && status != StatusCode::SWITCHING_PROTOCOLS;
    let mut w = pool::take();
    w.put_slice(if version == Version::HTTP_10 {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    w.put_slice(status.as_str().as_bytes());
    w.put_u8(b' ');
    w.put_slice(status.canonical_reason().unwrap_or("").as_bytes());
    w.put_slice(b"\r\n");
    match size {
        BodySize::Sized(n) => {
            w.put_slice(b"content-length: ");
            w.put_slice(itoa(n).as_bytes());
            w.put_slice(b"\r\n");
        }
        BodySize::Stream if chunked => w.put_slice(b"transfer-encoding: chunked\r\n"),
        _ => {}
    }
    if status == StatusCode::SWITCHING_PROTOCOLS {
        // the connection now speaks the protocol of the Upgrade field
        w.put_slice(b"connection: upgrade\r\n");
    } else if !keep && version == Version::HTTP_11 {
        w.put_slice(b"connection: close\r\n");
    } else if keep && version == Version::HTTP_10 {
        w.put_slice(b"connection: keep-alive\r\n");
    }
    let mut has_date = false;
    for (name, value) in res.headers() {
        match *name {
            header::CONNECTION | header::TRANSFER_ENCODING => continue,
            // 304 keeps a Content-Length the handler set (RFC 9110 §8.6)
            header::CONTENT_LENGTH if status != StatusCode::NOT_MODIFIED => continue,
            header::DATE => has_date = true,
            _ => {}
        }
        w.put_slice(name.as_str().as_bytes());
        w.put_slice(b": ");
        w.put_slice(value.as_bytes());
        w.put_slice(b"\r\n");
    }
    if !has_date {
        w.put_slice(b"date: ");
        w.put_slice(date().as_bytes());
        w.put_slice(b"\r\n");
    }
    w.put_slice(b"\r\n");
    if matches!(size, BodySize::None) {
        drop(body);
        send_last(io, &w, st, closing).await?;
        pool::give(w);
        return Ok(keep);
    }
    // a body of bytes (a cached file, a proxied answer that came whole), or
    // a stream that yields all of it and its end at once (the same, counted
    // for the access log): written here, without `send_body`
    let out = BodyOut {
        size,
        chunked,
        is_head,
        closing,
    };
    // (in a block: what is moved into the boxed `send_body` takes no room
    // in this future's state)
    let streamed = {
        let (body, first) = match (&sendfile, size) {
            (None, BodySize::Sized(n)) => match body.try_into_bytes() {
                Ok(b) if b.len() as u64 == n => (BoxBody::new(()), First::Whole(b)),
                Ok(b) => (BoxBody::new(b), First::Polled([None, None])),
                Err(mut body) => {
                    let first = std::future::poll_fn(|cx| {
                        std::task::Poll::Ready(first_items(&mut body, n, cx))
                    })
                    .await;
                    (body, first)
                }
            },
            _ => (body, First::Polled([None, None])),
        };
        match first {
            First::Whole(b) => {
                if is_head || w.len() + b.len() <= COALESCE {
                    if !is_head {
                        w.put_slice(&b);
                    }
                    send_last(io, &w, st, closing).await?;
                } else {
                    send_pair(io, &w, &b, st).await?;
                }
                pool::give(w);
                // a counted body runs the log phase when it is dropped:
                // after its bytes went out
                drop(body);
                return Ok(keep);
            }
            // boxed: a streamed body allocates anyway, and its state would
            // make every connection's larger by about 800 bytes
            First::Polled(pre) => Box::pin(send_body(io, w, body, pre, out, sendfile, st)),
        }
    };
    let complete = streamed.await?;
    Ok(keep && complete)
}

/// One item of a response body, as `poll_next` yields it.
type Polled = Option<Result<bytes::Bytes, Box<dyn std::error::Error>>>;

/// What the first polls of a body of `n` announced bytes gave.
enum First {
    /// All of it, and then its end.
    Whole(bytes::Bytes),
    /// Anything else: the items polled, in order, for `send_body`.
    Polled([Option<Polled>; 2]),
}

/// Polls `body` (announced as `n` bytes) once, and a second time when the
/// first item was all of it: a counted body of bytes (the access log's)
/// yields both at once.
fn first_items(body: &mut BoxBody, n: u64, cx: &mut std::task::Context<'_>) -> First {
    use std::task::Poll;
    let mut poll = || std::pin::Pin::new(&mut *body).poll_next(cx);
    match poll() {
        Poll::Ready(Some(Ok(b))) if b.len() as u64 == n => match poll() {
            Poll::Ready(None) => First::Whole(b),
            Poll::Ready(next) => First::Polled([Some(Some(Ok(b))), Some(next)]),
            Poll::Pending => First::Polled([Some(Some(Ok(b))), None]),
        },
        Poll::Ready(next) => First::Polled([Some(next), None]),
        Poll::Pending => First::Polled([None, None]),
    }
}

/// How a response body goes out.
#[derive(Clone, Copy)]
struct BodyOut {
    /// As the body announced it (`None` for a status without a body).
    size: BodySize,
    /// Chunked transfer coding (a stream on HTTP/1.1).
    chunked: bool,
    /// A HEAD request: the body is polled, never written.
    is_head: bool,
    /// The connection closes after this response (see `send_last`).
    closing: bool,
}

/// Polls the body to its end and writes it (nothing for HEAD, whose body is
/// still polled so that the log phase sees it complete); `pre` holds what
/// was polled of it already, in order. `false` when the body failed or was
/// shorter than announced: the connection must close, and a chunked body
/// gets no last-chunk, so it never looks complete.
async fn send_body(
    io: &mut TcpStream,
    mut w: BytesMut,
    body: BoxBody,
    pre: [Option<Polled>; 2],
    out: BodyOut,
    sendfile: Option<crate::body::SendFile>,
    st: &Settings,
) -> std::io::Result<bool> {
    let BodyOut {
        size,
        chunked,
        is_head,
        closing,
    } = out;
    let mut body = std::pin::pin!(body);
    let mut sent: u64 = 0;
    let mut first = None;
    let mut pre = pre.into_iter().flatten();
    if let (Some(sf), BodySize::Sized(_), false) = (&sendfile, size, chunked) {
        sf.offer();
        let next = std::future::poll_fn(|cx| body.as_mut().poll_next(cx)).await;
        match (next, sf.take_handed()) {
            (None, Some(segments)) => {
                #[cfg(any(target_os = "linux", target_os = "android"))]
                // boxed: the sendfile path's state would otherwise make
                // every connection's state larger by about 600 bytes
                return Box::pin(zero_copy::send_segments(io, w, segments, sf, st, closing)).await;
                #[cfg(not(any(target_os = "linux", target_os = "android")))]
                unreachable!("no sendfile offer here: {}", segments.len());
            }
            // a module replaced the file body: send what it yields
            (next, _) => first = Some(next),
        }
    }
    loop {
        let next = match first.take().or_else(|| pre.next()) {
            Some(n) => n,
            None => {
                let ready =
                    std::future::poll_fn(|cx| std::task::Poll::Ready(body.as_mut().poll_next(cx)))
                        .await;
                match ready {
                    std::task::Poll::Ready(n) => n,
                    // the stream has nothing yet (a slow back end, a CGI
                    // script between two writes): what is coalesced goes
                    // out now, not when more comes
                    std::task::Poll::Pending => {
                        if !w.is_empty() {
                            send(io, &w, st).await?;
                            w.clear();
                        }
                        std::future::poll_fn(|cx| body.as_mut().poll_next(cx)).await
                    }
                }
            }
        };
        match next {
            Some(Ok(chunk)) => {
                if is_head || chunk.is_empty() {
                    continue;
                }
                sent += chunk.len() as u64;
                if let BodySize::Sized(n) = size {
                    if sent > n {
                        // more than announced: never send it
                        return Ok(false);
                    }
                }
                if chunked {
                    put_hex(&mut w, chunk.len());
                    w.put_slice(b"\r\n");
                }
                if w.len() + chunk.len() <= COALESCE {
                    w.put_slice(&chunk);
                    if chunked {
                        w.put_slice(b"\r\n");
                    }
                } else {
                    // the head (or what is pending) and the chunk in one writev
                    send_pair(io, &w, &chunk, st).await?;
                    w.clear();
                    if chunked {
                        w.put_slice(b"\r\n");
                    }
                }
            }
            Some(Err(_)) => {
                if !w.is_empty() {
                    send(io, &w, st).await?;
                }
                return Ok(false);
            }
            None => break,
        }
        if w.len() >= COALESCE {
            send(io, &w, st).await?;
            w.clear();
        }
    }
    if chunked && !is_head {
        w.put_slice(b"0\r\n\r\n");
    }
    if !w.is_empty() {
        send_last(io, &w, st, closing).await?;
    }
    pool::give(w);
    let whole = match size {
        BodySize::Sized(n) => is_head || sent == n,
        _ => true,
    };
    Ok(whole)
}

/// `sendfile(2)` from the open file to the socket, the head in front with
/// `MSG_MORE` so that it leaves in the first segment's packet (nginx
/// `sendfile on; tcp_nopush on`).
#[cfg(any(target_os = "linux", target_os = "android"))]
mod zero_copy {
    use bytes::{BufMut, BytesMut};
    use tokio::io::Interest;
    use tokio::time::{timeout_at, Instant};

    use super::{count_timeout, send_more, Settings, TcpStream};
    use crate::body::{Segment, Segments, SendFile};

    /// Largest count passed to one `sendfile` call (Linux caps one call
    /// near 2 GiB).
    const MAX_SENDFILE: u64 = 1 << 30;

    /// Waits until `io` is writable, within the send timeout from `since`.
    async fn writable(io: &TcpStream, st: &Settings, since: Instant) -> std::io::Result<()> {
        match timeout_at(since + st.send_timeout, io.writable()).await {
            Ok(r) => r,
            Err(_) => {
                count_timeout();
                Err(std::io::ErrorKind::TimedOut.into())
            }
        }
    }

    /// Sends the head in `w` and the handed `segments`. `false`: the file
    /// shrank (fewer bytes than announced went out), so the connection closes.
    pub(super) async fn send_segments(
        io: &mut TcpStream,
        mut w: BytesMut,
        segments: Segments,
        sf: &SendFile,
        st: &Settings,
        closing: bool,
    ) -> std::io::Result<bool> {
        for seg in segments {
            match seg {
                Segment::Bytes(b) => {
                    w.put_slice(&b);
                    sf.add_sent(b.len() as u64);
                }
                Segment::File { offset, len } => {
                    if !w.is_empty() {
                        send_more(io, &w, st).await?;
                        w.clear();
                    }
                    let (mut off, end) = (offset, offset + len);
                    let mut since = Instant::now();
                    while off < end {
                        writable(io, st, since).await?;
                        let count = (end - off).min(MAX_SENDFILE) as usize;
                        let r = io.try_io(Interest::WRITABLE, || {
                            rustix::fs::sendfile(&*io, sf.file(), Some(&mut off), count)
                                .map_err(std::io::Error::from)
                        });
                        match r {
                            Ok(0) => {
                                tracing::warn!("static-file: a file shrank while it was sent; connection closed");
                                return Ok(false);
                            }
                            Ok(n) => {
                                sf.add_sent(n as u64);
                                since = Instant::now();
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
        }
        if !w.is_empty() {
            super::send_last(io, &w, st, closing).await?;
        }
        super::pool::give(w);
        Ok(true)
    }
}

use crate::buffers as pool;

/// Appends `n` in lowercase hexadecimal (a chunk size, RFC 9112 §7.1),
/// without allocating.
fn put_hex(w: &mut BytesMut, n: usize) {
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b"0123456789abcdef"[n & 15];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    w.put_slice(&digits[at..]);
}

/// Decimal digits of `n` without allocating.
fn itoa(n: u64) -> ItoaBuf {
    let mut b = ItoaBuf([0; 20], 20);
    let mut n = n;
    loop {
        b.1 -= 1;
        b.0[b.1] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    b
}

struct ItoaBuf([u8; 20], usize);

impl ItoaBuf {
    fn as_bytes(&self) -> &[u8] {
        &self.0[self.1..]
    }
}

/// Reads more bytes into `buf` within the header timeout (an unread body
/// trickled by the client is timed like a head).
pub(super) async fn fill(io: &mut TcpStream, buf: &mut BytesMut, deadline: Instant) -> bool {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(READ_CHUNK);
    }
    match timeout_at(deadline, io.read_buf(buf)).await {
        Ok(Ok(n)) => n > 0,
        Ok(Err(_)) => false,
        Err(_) => {
            count_timeout();
            false
        }
    }
}

/// A connection cut off by one of its timeouts (`connections-timed-out`).
fn count_timeout() {
    crate::stats::global()
        .timeouts
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::{fill, first_items, First};

    use actix_http::body::{BoxBody, SizedStream};
    use bytes::Bytes;

    #[actix_rt::test]
    async fn a_body_is_read_more_than_a_pooled_buffer_at_a_time() {
        use tokio::io::AsyncWriteExt;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = actix_rt::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = l.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let mut server = actix_rt::net::TcpStream::from_std(server).unwrap();
        client.write_all(&[b'x'; 64 * 1024]).await.unwrap();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut buf = crate::buffers::take();
        assert!(fill(&mut server, &mut buf, deadline).await);
        // the body's bytes are handed on (split off), as the engine does
        let first = buf.split().freeze();
        assert!(fill(&mut server, &mut buf, deadline).await);
        assert!(
            buf.len() > crate::buffers::SIZE,
            "after {} bytes, a read of {}",
            first.len(),
            buf.len()
        );
    }

    /// A body announced as `n` bytes that yields `parts`, each at once.
    fn stream(n: u64, parts: &[&'static str]) -> BoxBody {
        struct Parts(std::collections::VecDeque<&'static str>);
        impl futures_core::Stream for Parts {
            type Item = Result<Bytes, std::convert::Infallible>;
            fn poll_next(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Option<Self::Item>> {
                std::task::Poll::Ready(
                    self.0
                        .pop_front()
                        .map(|p| Ok(Bytes::from_static(p.as_bytes()))),
                )
            }
        }
        BoxBody::new(SizedStream::new(n, Parts(parts.iter().copied().collect())))
    }

    fn first(n: u64, parts: &[&'static str]) -> First {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        first_items(&mut stream(n, parts), n, &mut cx)
    }

    #[test]
    fn a_stream_whole_at_once_is_taken_whole() {
        assert!(matches!(first(3, &["abc"]), First::Whole(b) if b == "abc"));
    }

    #[test]
    fn other_streams_keep_what_was_polled_in_order() {
        // a first part, not all of it: polled once
        match first(3, &["ab", "c"]) {
            First::Polled([Some(Some(Ok(a))), None]) => assert_eq!(a, "ab"),
            _ => panic!("first part"),
        }
        // all of it, then more than announced: both kept for send_body
        match first(3, &["abc", "d"]) {
            First::Polled([Some(Some(Ok(a))), Some(Some(Ok(b)))]) => {
                assert_eq!((a, b), ("abc".into(), "d".into()))
            }
            _ => panic!("more than announced"),
        }
        // an empty stream announced with bytes: its end is kept
        assert!(matches!(first(3, &[]), First::Polled([Some(None), None])));
    }

    #[test]
    fn put_hex_writes_lowercase_hexadecimal() {
        for (n, hex) in [
            (0, "0"),
            (9, "9"),
            (10, "a"),
            (255, "ff"),
            (4096, "1000"),
            (usize::MAX, "ffffffffffffffff"),
        ] {
            let mut w = bytes::BytesMut::new();
            super::put_hex(&mut w, n);
            assert_eq!(&w[..], hex.as_bytes());
        }
    }

    #[test]
    fn itoa_writes_decimal() {
        for n in [0u64, 7, 10, 151, 104_857_600, u64::MAX] {
            assert_eq!(super::itoa(n).as_bytes(), n.to_string().as_bytes());
        }
    }
}

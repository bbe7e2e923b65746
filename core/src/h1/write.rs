//! The response side of Tessera's HTTP/1.1 engine: the status line and
//! header fields (RFC 9112 §4, §6), the body (whole, streamed, chunked, or
//! by `sendfile`), and the writes with their send timeout. A small body
//! leaves with its head in one write; `Date` is formatted once a second per
//! worker thread.

use std::cell::RefCell;
use std::time::SystemTime;

use actix_http::body::{BodySize, BoxBody, MessageBody};
use actix_http::header::{self, HeaderValue};
use actix_http::{Response, StatusCode, Version};
use actix_rt::net::TcpStream;
use bytes::{BufMut, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::time::{timeout_at, Instant};

use super::conn::{count_timeout, Settings};
use crate::buffers as pool;

/// A streamed body's chunks are copied behind the head (and each other) up to
/// this size, and leave in one write (until the stream has nothing ready,
/// see `send_body`).
const COALESCE: usize = 16 * 1024;

/// A whole body (a cached file, an answer that came whole) is copied behind
/// the head when both fit one pooled buffer ([`pool::SIZE`], 1 KiB);
/// a larger one leaves with the head in one `writev`, without a copy in user
/// space and without growing the buffer.
const COPY_WHOLE: usize = pool::SIZE;

thread_local! {
    /// (second, `Date` value) of this worker thread.
    static DATE: RefCell<(u64, HeaderValue)> =
        const { RefCell::new((u64::MAX, HeaderValue::from_static(""))) };
}

/// The `Date` field value (RFC 9110 §6.6.1), formatted at most once a second.
pub(super) fn date() -> HeaderValue {
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

/// Writes `bytes` whole within the send timeout. The first write is tried
/// at once: most fit the socket buffer, and those need no clock read and no
/// timer.
pub(super) async fn send(io: &mut TcpStream, bytes: &[u8], st: &Settings) -> std::io::Result<()> {
    // nothing to send is no system call (a write of 0 bytes still is one)
    if bytes.is_empty() {
        return Ok(());
    }
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
pub(super) async fn send_last(
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
/// when they fit), within the send timeout of each write. `closing`: the
/// last write of a connection that closes next, sent with `MSG_MORE` as
/// [`send_last`] does, so that the FIN shares the last packet.
async fn send_pair(
    io: &mut TcpStream,
    a: &[u8],
    b: &[u8],
    st: &Settings,
    closing: bool,
) -> std::io::Result<()> {
    let (mut a, mut b) = (a, b);
    while !a.is_empty() {
        let bufs = [std::io::IoSlice::new(a), std::io::IoSlice::new(b)];
        // tried at once; the clock and a timer only for a write that waits
        let n = match try_write_pair(io, &bufs, closing) {
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
    // what the vectored write left of `b` (nothing, usually: no call then)
    if b.is_empty() {
        return Ok(());
    }
    send_last(io, b, st, closing).await
}

/// One vectored write without waiting; with `MSG_MORE` when `more` (Linux).
fn try_write_pair(
    io: &TcpStream,
    bufs: &[std::io::IoSlice<'_>],
    more: bool,
) -> std::io::Result<usize> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if more {
        return io.try_io(tokio::io::Interest::WRITABLE, || {
            rustix::net::sendmsg(
                io,
                bufs,
                &mut Default::default(),
                rustix::net::SendFlags::MORE,
            )
            .map_err(std::io::Error::from)
        });
    }
    let _ = more;
    io.try_write_vectored(bufs)
}

/// Encodes the status line and header fields (RFC 9112 §4, §6) and sends the
/// body. `Ok(false)`: the body ended early or the client went away, so the
/// connection must close.
pub(super) async fn write_response(
    io: &mut TcpStream,
    res: Response<BoxBody>,
    prebuilt: Option<crate::body::PrebuiltFields>,
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
    w.put_slice(b"server: tessera\r\n");
    let mut has_date = false;
    for (name, value) in res.headers() {
        match *name {
            // (this engine's `Server` replaces any other, as the core's
            // insert does on actix-http)
            header::CONNECTION | header::TRANSFER_ENCODING | header::SERVER => continue,
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
    if let Some(p) = prebuilt {
        w.put_slice(&p.lines);
        has_date |= p.date;
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
                if is_head || w.len() + b.len() <= COPY_WHOLE {
                    if !is_head {
                        w.put_slice(&b);
                    }
                    send_last(io, &w, st, closing).await?;
                } else {
                    send_pair(io, &w, &b, st, closing).await?;
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
                    send_pair(io, &w, &chunk, st, false).await?;
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

#[cfg(test)]
mod tests {
    use super::{first_items, First};

    use actix_http::body::{BoxBody, SizedStream};
    use bytes::Bytes;

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

    /// A whole body larger than a pooled buffer leaves beside the head
    /// (`writev`), so the buffer the head was written in goes back to the
    /// pool at its 1 KiB: copied behind the head, a 13 KB body grew it, and
    /// 64 grown buffers per worker stayed behind (1.2 MiB more anonymous
    /// memory after wrk on a 13,263-byte file).
    #[actix_rt::test]
    async fn a_whole_body_larger_than_a_buffer_does_not_grow_the_pooled_one() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (io, _) = l.accept().unwrap();
        io.set_nonblocking(true).unwrap();
        let mut io = actix_rt::net::TcpStream::from_std(io).unwrap();
        let st = super::Settings {
            limits: Default::default(),
            keep_alive: Some(std::time::Duration::from_secs(5)),
            header_timeout: std::time::Duration::from_secs(5),
            send_timeout: std::time::Duration::from_secs(5),
            drain_limit: 0,
            watch_client: true,
        };
        let body = Bytes::from(vec![7u8; 13_263]);
        let res =
            actix_http::Response::with_body(actix_http::StatusCode::OK, body).map_into_boxed_body();
        let kept = super::write_response(
            &mut io,
            res,
            None,
            actix_http::Version::HTTP_11,
            false,
            false,
            &st,
        )
        .await
        .unwrap();
        assert!(!kept);
        drop(io);
        let mut out = Vec::new();
        client.read_to_end(&mut out).unwrap();
        let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert!(out.starts_with(b"HTTP/1.1 200 OK\r\ncontent-length: 13263\r\n"));
        assert_eq!(&out[head_end..], &[7u8; 13_263][..]);
        assert!(crate::buffers::largest_kept() <= crate::buffers::SIZE);
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

//! One HTTP/1.x connection of Tessera's engine: read and parse a head
//! ([`super::head`]), build an `actix_http::Request`, call the same actix-web
//! app service that actix-http calls, write the response, keep the connection
//! alive or close it (RFC 9112 §9).
//!
//! What it does that actix-http's dispatcher does not: an idle connection
//! holds no buffer and no request state (the read buffer goes back to the
//! worker's pool after each response, a request in progress runs in a pooled
//! `slot`, the response is written by `write`), the head
//! and a small body leave in one write, `Date` is formatted once a second
//! per worker thread, every request head is timed
//! from its first byte (client header timeout), an unread request body of a
//! bounded size is drained so that the connection stays alive (chunked ones
//! too), and a request the parser refuses gets its 4xx and a close.
//!
//! Timeouts are plain per-connection deadlines: `keep-alive` while idle
//! between requests, `client-header-timeout` from the first byte of a head
//! (from the connection's start for the first request, as nginx and
//! actix-http do), `send-timeout` for each write.

use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use actix_http::body::{BodySize, BoxBody, MessageBody};
use actix_http::header;
use actix_http::{ConnectionType, Method, Request, Response, StatusCode, Version};
use actix_rt::net::TcpStream;
use actix_service::Service;
use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

use super::head::{self, Framing, HeadError, Limits};
use super::slot;
use super::write::{date, send_last, write_response};
use crate::buffers as pool;

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
    /// Watch the client while an answer is pending and end the request when
    /// it closes (`ignore-client-abort = false`, the default).
    pub watch_client: bool,
}

/// The room a read asks for when its buffer has less than 1 KiB free, bytes
/// (4 KiB). A pooled buffer starts at 1 KiB ([`crate::buffers::SIZE`], a
/// head's worth); a request body or a pipelined burst grows it by this much,
/// so that a body is read 4 KiB per `recv`, not 1 KiB.
const READ_CHUNK: usize = 4096;

/// Why a connection ends.
enum End {
    /// The client closed, or the connection is done.
    Closed,
    /// A deadline passed while a head was being read: answer 408.
    HeaderTimeout,
}

/// The future of one connection's task: serves it until it closes.
///
/// This future is what an idle connection costs (under 512 bytes, besides
/// tokio's task header and socket registration; the arguments are captured
/// once, by a plain `async move` block). A request in progress runs in a
/// pooled [`slot::Slot`]. On a PROXY protocol listener (`proxied`) the
/// header is read first and gives the client address.
// not an `async fn`: that would keep every argument twice in the state
// (rust-lang/rust#62958)
#[allow(clippy::manual_async_fn)]
pub(super) fn serve<S>(
    mut io: TcpStream,
    peer: SocketAddr,
    proxied: Option<Rc<crate::realip::TrustedProxies>>,
    svc: Rc<S>,
    st: Rc<Settings>,
    idle: Rc<super::accept::Idle>,
    open: super::accept::Open,
) -> impl Future<Output = ()> + 'static
where
    S: Service<Request, Response = Response<BoxBody>, Error = actix_web::Error> + 'static,
{
    async move {
        // counted open until the task ends, also by a panic
        let _open = &open;
        let peer = match &proxied {
            None => peer,
            // boxed: rare, and its state would make every connection larger
            Some(t) => match Box::pin(super::accept::proxy_header(&mut io, peer, t, &st)).await {
                Some(p) => p,
                None => return,
            },
        };
        let _guard = crate::stats::ConnectionGuard::new();
        let shutdown = super::accept::IdleWait::new(idle);
        // the read buffer, taken from the pool when bytes arrive; given back
        // when idle, and when the task ends (also by a panic)
        let mut buf = Pooled(BytesMut::new());
        let buf = &mut buf.0;
        let started = Instant::now();
        // the connection's one idle timer, re-armed lazily (wait_for_bytes)
        let mut timer = std::pin::pin!(tokio::time::sleep_until(started + st.header_timeout));
        let mut first = true;
        loop {
            if buf.is_empty() {
                let wait = wait_for_bytes(&io, buf, &st, first, started, &shutdown, timer.as_mut());
                match wait.await {
                    Woke::Bytes => {}
                    Woke::Quiet => return,
                    Woke::HeaderTimeout => {
                        count_timeout();
                        // boxed, not in a slot: the pool holds blocks of
                        // the request future's layout only
                        let w = write_error(&mut io, StatusCode::REQUEST_TIMEOUT, &st);
                        let _ = Box::pin(w).await;
                        return;
                    }
                }
            }
            let step = slot::Slot::new_with(|| {
                request(&mut io, Some(peer), &*svc, &st, buf, first, started)
            })
            .await;
            first = false;
            match step {
                Step::Next => {}
                Step::Close => return,
                Step::Upgrade(run) => {
                    let read = std::mem::take(buf);
                    return run(crate::upgrade::Tunnel { io, read }).await;
                }
            }
        }
    }
}

/// Largest response body (bytes) sent before an unread request body is
/// drained: with its head it fits a socket's send buffer, so writing it
/// cannot stall against a client that is still sending (4 KiB).
const ANSWER_FIRST: u64 = 4096;

/// A buffer that goes back to this worker's pool when dropped.
struct Pooled(BytesMut);

impl Drop for Pooled {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.0));
    }
}

/// What a connection does after a request.
enum Step {
    /// Waits for the next request (keep-alive).
    Next,
    /// Closes (done already).
    Close,
    /// Hands the connection to the protocol a 101 switched to.
    Upgrade(crate::upgrade::Run),
}

/// How waiting for a request's first bytes ended.
enum Woke {
    /// `buf` holds bytes.
    Bytes,
    /// The connection ends quietly: idle keep-alive expired, the client
    /// closed between requests, shutdown.
    Quiet,
    /// The first request's head did not come within `client-header-timeout`
    /// of the connection's start: answer 408.
    HeaderTimeout,
}

/// Waits, without a buffer, until the client sends bytes, then reads them
/// into a buffer from the pool. Polls the socket's readiness and one timer
/// by hand: `tokio::select!` over `readable()` and `timeout_at` keeps both
/// futures, about 250 bytes more in every idle connection.
///
/// `timer` is the connection's, kept from one wait to the next: it is moved
/// only when it would fire after this wait's deadline, and one that fires
/// before it is re-armed then. A busy keep-alive connection so re-arms it
/// about once per keep-alive timeout, not per request: each arming is an
/// insert into tokio's timer wheel and a removal, about 450 instructions.
async fn wait_for_bytes(
    io: &TcpStream,
    buf: &mut BytesMut,
    st: &Settings,
    first: bool,
    started: Instant,
    shutdown: &super::accept::IdleWait,
    mut timer: std::pin::Pin<&mut tokio::time::Sleep>,
) -> Woke {
    use std::task::Poll;
    // the first request is timed from the connection's start, as nginx and
    // actix-http do; later ones wait for the keep-alive timeout
    let deadline = if first {
        started + st.header_timeout
    } else {
        Instant::now() + st.keep_alive.unwrap_or(st.header_timeout)
    };
    if timer.deadline() > deadline {
        timer.as_mut().reset(deadline);
    }
    let mut stop = std::pin::pin!(shutdown.wait());
    loop {
        let ready = std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = io.poll_read_ready(cx) {
                return Poll::Ready(Some(r));
            }
            // an idle connection closes at shutdown; the first request's
            // head gets its deadline
            if !first && stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            loop {
                match timer.as_mut().poll(cx) {
                    // an early timer (armed for an earlier wait): on to this
                    // wait's deadline
                    Poll::Ready(()) if timer.deadline() < deadline => {
                        timer.as_mut().reset(deadline);
                    }
                    Poll::Ready(()) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await;
        match ready {
            Some(Ok(())) => {}
            Some(Err(_)) => return Woke::Quiet,
            None if first => return Woke::HeaderTimeout,
            None => return Woke::Quiet,
        }
        if buf.capacity() == 0 {
            *buf = pool::take();
        }
        let room = buf.capacity() - buf.len();
        match io.try_read_buf(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Ok(0) | Err(_) => return Woke::Quiet,
            Ok(n) => {
                if n < room {
                    // a short read drained the socket: forget its readable
                    // event, as tokio's poll_read does, or the next wait
                    // returns at once into a read that fails with EAGAIN
                    // (one syscall per request on a keep-alive connection)
                    let _ = io.try_io(tokio::io::Interest::READABLE, || {
                        Err::<(), _>(std::io::ErrorKind::WouldBlock.into())
                    });
                }
                return Woke::Bytes;
            }
        }
    }
}

/// One request, whose first bytes are in `buf`: its head, the app, the
/// response.
async fn request<S>(
    io: &mut TcpStream,
    peer: Option<SocketAddr>,
    svc: &S,
    st: &Settings,
    buf: &mut BytesMut,
    first: bool,
    started: Instant,
) -> Step
where
    S: Service<Request, Response = Response<BoxBody>, Error = actix_web::Error>,
{
    // 1. a head, parsed into actix-http's pooled request head, whose header
    // map keeps its capacity
    let mut req = Request::new();
    let head = match read_head(
        io,
        buf,
        &mut req,
        st,
        if first { Some(started) } else { None },
    )
    .await
    {
        Ok(h) => h,
        Err(End::Closed) => return Step::Close,
        Err(End::HeaderTimeout) => {
            count_timeout();
            let _ = write_error(io, StatusCode::REQUEST_TIMEOUT, st).await;
            return Step::Close;
        }
    };
    let (head, n) = match head {
        Ok(h) => h,
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
            let _ = write_error(io, status, st).await;
            return Step::Close;
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
    // 3. the app; the prebuilt lines its handler hands over
    // (crate::body::set_prebuilt) are kept beside the call, which answers
    // most requests at once, and beside each poll
    crate::body::put_prebuilt(None);
    let mut inner = std::pin::pin!(svc.call(req));
    let mut fields = crate::body::take_prebuilt();
    let mut call = std::future::poll_fn(|cx| {
        crate::body::put_prebuilt(fields.take());
        let r = inner.as_mut().poll(cx);
        fields = crate::body::take_prebuilt();
        r
    });
    let res = loop {
        match body.as_mut() {
            Some(b) if b.active() => {
                tokio::select! {
                    biased;
                    r = &mut call => break r,
                    () = b.pump(io, buf, st, head_expects) => {}
                }
            }
            // the client is watched while the answer is pending: a close
            // drops the app's future (its back-end connection with it)
            _ => match answer_or_gone(io, &mut call, st.watch_client).await {
                Some(r) => break r,
                None => return Step::Close,
            },
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
    // connection. A small answer (it fits the socket's buffer) goes out
    // first and the body is drained after, as nginx discards a body after
    // it answers: a client that waits for the answer before it sends its
    // body is not kept waiting.
    // (an answer to HEAD carries no body, whatever its length says)
    let small = |res: &Response<BoxBody>| {
        is_head
            || match res.body().size() {
                BodySize::None => true,
                BodySize::Sized(n) => n <= ANSWER_FIRST,
                BodySize::Stream => false,
            }
    };
    let mut drain_after = false;
    let drained = match body.as_mut() {
        None => true,
        // a 413 over max-body-size (small, it fits the socket buffers):
        // answer at once, the lingering close reads the rest
        Some(_) if status == StatusCode::PAYLOAD_TOO_LARGE => false,
        // an error that closes the connection anyway (a refused head): the
        // lingering close reads the rest, after the answer
        Some(_) if !keep && (status.is_client_error() || status.is_server_error()) => false,
        Some(b) if head_expects && !b.continued && !b.done => false,
        Some(b) if keep && !b.done && b.drainable_after(st.drain_limit) && small(&res) => {
            drain_after = true;
            true
        }
        Some(b) => b.drain(io, buf, st, st.drain_limit).await,
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
    let written = write_response(io, res, fields, version, is_head, keep, st).await;
    if let Some(run) = upgrade.and_then(|u| u.take()) {
        return match written {
            Ok(_) => Step::Upgrade(run),
            Err(_) => Step::Close,
        };
    }
    match written {
        Ok(true) if keep => {}
        Ok(_) => {
            linger_close(io, buf).await;
            return Step::Close;
        }
        Err(_) => return Step::Close,
    }
    if let (true, Some(b)) = (drain_after, body.as_mut()) {
        // a timeout or a client gone: the answer is out, the connection ends
        if !b.drain(io, buf, st, st.drain_limit).await {
            linger_close(io, buf).await;
            return Step::Close;
        }
    }
    // no buffer is held while idle
    if buf.is_empty() {
        pool::give(std::mem::take(buf));
    }
    Step::Next
}

type Parsed = Result<(head::Head, usize), HeadError>;

/// Reads until a head parses into `req`'s header map; `buf` holds its first
/// bytes. The head is timed from `since` (the connection's start for the
/// first request), else from now: `client-header-timeout`.
async fn read_head(
    io: &mut TcpStream,
    buf: &mut BytesMut,
    req: &mut Request,
    st: &Settings,
    since: Option<Instant>,
) -> Result<Parsed, End> {
    let mut deadline = None;
    loop {
        match head::parse(&mut buf[..], &st.limits, &mut req.head_mut().headers) {
            Ok(Some(h)) => return Ok(Ok(h)),
            Ok(None) => {}
            Err(e) => return Ok(Err(e)),
        }
        // the clock is read only for a head that does not come whole
        let deadline =
            *deadline.get_or_insert_with(|| since.unwrap_or_else(Instant::now) + st.header_timeout);
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(READ_CHUNK);
        }
        match timeout_at(deadline, io.read_buf(buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Err(End::Closed),
            Ok(Ok(_)) => {}
            Err(_) => return Err(End::HeaderTimeout),
        }
    }
}

/// A body-less answer of the engine itself, and a close.
async fn write_error(io: &mut TcpStream, status: StatusCode, st: &Settings) -> std::io::Result<()> {
    let mut b = BytesMut::with_capacity(128);
    b.put_slice(b"HTTP/1.1 ");
    b.put_slice(status.as_str().as_bytes());
    b.put_u8(b' ');
    b.put_slice(status.canonical_reason().unwrap_or("").as_bytes());
    b.put_slice(b"\r\ncontent-length: 0\r\nconnection: close\r\nserver: tessera\r\ndate: ");
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

/// Awaits the app's answer. While it is pending (a back end, a blocking
/// hook), the client is watched: a connection the client closed (end of
/// stream or an error, `recv(MSG_PEEK)`) gives `None` and the caller drops
/// the app's future, which closes its back-end connection and logs the
/// request as 499 (`request::log`), as nginx does with its default
/// `proxy_ignore_client_abort off` (a client's half-close counts as a
/// close there too). Bytes of a next request stop the watch: they wait for
/// their turn. A request answered at once (a file) costs no system call.
/// `watch` false (`ignore-client-abort`): the answer is awaited, whatever
/// the client does.
async fn answer_or_gone<F>(io: &TcpStream, call: &mut F, mut watch: bool) -> Option<F::Output>
where
    F: Future + Unpin,
{
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(r) = std::pin::Pin::new(&mut *call).poll(cx) {
            return std::task::Poll::Ready(Some(r));
        }
        while watch {
            match io.poll_read_ready(cx) {
                std::task::Poll::Pending => break,
                std::task::Poll::Ready(Err(_)) => return std::task::Poll::Ready(None),
                std::task::Poll::Ready(Ok(())) => {
                    let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
                    // inside try_io: a would-block clears tokio's readiness
                    // (then the loop asks again, which registers the waker)
                    match io.try_io(tokio::io::Interest::READABLE, || {
                        socket2::SockRef::from(io).peek(&mut probe)
                    }) {
                        Ok(0) => return std::task::Poll::Ready(None),
                        Ok(_) => watch = false,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => return std::task::Poll::Ready(None),
                    }
                }
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Whether the client has sent bytes not read yet, asked of the kernel (one
/// `recv(MSG_PEEK)`: tokio's cached readiness may predate them). Errors and
/// end of stream count as nothing pending.
fn pending_input(io: &TcpStream) -> bool {
    let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    matches!(socket2::SockRef::from(io).peek(&mut probe), Ok(n) if n > 0)
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
pub(super) fn count_timeout() {
    crate::stats::global()
        .timeouts
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::fill;

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
}

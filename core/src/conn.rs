//! Per-connection timeouts that actix-http does not enforce: the client header
//! timeout on every request of a keep-alive connection (actix-http times only
//! the first), a client that trickles a request body the server never reads,
//! and a send timeout for a client that stops reading.
//!
//! [`TimedIo`] wraps the connection's stream (plain TCP, or TLS after the
//! handshake) and sees every read and write; the request path tells it when a
//! request head has been parsed ([`ConnClock::begin`]) and while a handler on
//! the blocking pool has not answered yet ([`ConnClock::set_handling`]). The
//! timer is armed lazily: a deadline that moves later does not re-arm it; the
//! timer re-arms itself when it fires early, and holds a no-op waker while no
//! deadline applies. A connection past a deadline gets an
//! `ErrorKind::TimedOut` I/O error, which makes actix drop (close) it.
//!
//! The head of a connection's first request is also timed by actix-http
//! (`client_request_timeout`, from the connection's start), which answers 408;
//! those 408s are counted with the rest.
//!
//! HTTP/2 connections are timed per request instead of per head: the request
//! path registers each request in flight ([`ConnClock::start`]); with none in
//! flight the connection closes after `h2_idle`, and it closes when any
//! answered request's body has made no progress for the send timeout (a
//! stream stalled by flow control never blocks the socket).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_rt::time::{sleep_until, Instant, Sleep};
use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::web::Bytes;
use actix_web::HttpResponse;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The timeouts of [`TimedIo`], in whole seconds as configured; zero disables one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timeouts {
    /// `client-header-timeout`: from the first byte of a request head until the
    /// head is parsed. Bytes that arrive after the previous response (an unread
    /// request body, trickled) count the same way, measured from the later of
    /// the first such byte and the last byte written. Mirrors nginx
    /// `client_header_timeout` (the whole head) and lighttpd `server.max-read-idle`.
    pub header: Duration,
    /// `send-timeout`: the longest a write may wait for the client to read.
    /// Mirrors nginx `send_timeout` (between two successive writes) and
    /// lighttpd `server.max-write-idle`.
    pub send: Duration,
    /// HTTP/2 only: how long a connection with no request in flight is kept
    /// (`keep-alive`, else `client-header-timeout` when keep-alive is off).
    /// Mirrors nginx `keepalive_timeout` for HTTP/2 (formerly
    /// `http2_idle_timeout`); actix-http alone keeps an idle HTTP/2 connection
    /// for as long as the client answers its PINGs.
    pub h2_idle: Duration,
}

/// Requests one HTTP/2 connection may have in flight; more get 503 at once
/// (nginx `http2_max_concurrent_streams`, default 128: actix-http advertises no
/// SETTINGS_MAX_CONCURRENT_STREAMS, so each stream could hold an open file).
pub const H2_MAX_REQUESTS: u32 = 128;

/// What the request path and the stream share about one connection; found in
/// the connection data of each request (`HttpRequest::conn_data`).
#[derive(Debug)]
pub struct ConnClock {
    /// When the first byte of the current request head (or of leftover body)
    /// arrived; `None` while no head is being read.
    reading_since: Cell<Option<Instant>>,
    /// A handler is still producing its response (a module on the blocking
    /// pool): bytes that arrive meanwhile (a pipelined request, this request's
    /// body) are not timed until it answers.
    handling: Cell<bool>,
    /// A request of this connection reached the handler.
    begun: Cell<bool>,
    /// HTTP/2: the requests in flight (handler entry to the end of the
    /// response body), one slot each, and when the last one ended.
    h2: bool,
    streams: RefCell<Vec<Option<Stream>>>,
    active: Cell<u32>,
    idle_since: Cell<Instant>,
}

/// One HTTP/2 request in flight.
#[derive(Debug, Clone, Copy)]
struct Stream {
    /// When its response body last made progress (or its handler answered).
    since: Instant,
    /// Its handler has not answered yet (server work is not a client stall).
    handling: bool,
}

/// Largest body chunk handed to HTTP/2 at once, in bytes: the stream's
/// progress is noted per chunk, so a client reading slowly but steadily makes
/// progress at least every 16 KiB (the default HTTP/2 frame size).
const H2_CHUNK: usize = 16 * 1024;

impl ConnClock {
    /// Marks the request head as complete: the header timeout stops for this
    /// request. Called once per request, when the request reaches the handler.
    pub fn begin(&self) {
        self.reading_since.set(None);
        self.begun.set(true);
    }

    /// Marks a handler that answers later (`true`) and its answer (`false`).
    pub fn set_handling(&self, handling: bool) {
        self.handling.set(handling);
    }

    /// True for an HTTP/2 connection that has [`H2_MAX_REQUESTS`] in flight.
    pub fn h2_busy(&self) -> bool {
        self.h2 && self.active.get() >= H2_MAX_REQUESTS
    }

    /// On an HTTP/2 connection, counts a request in flight from now (its
    /// handler is running) until the returned guard, or the response body it
    /// is moved into by [`InFlight::track`], is dropped. `None` on HTTP/1.
    pub fn start(self: &Rc<Self>) -> Option<InFlight> {
        if !self.h2 {
            return None;
        }
        let entry = Stream {
            since: Instant::now(),
            handling: true,
        };
        let mut streams = self.streams.borrow_mut();
        let slot = match streams.iter().position(Option::is_none) {
            Some(i) => {
                streams[i] = Some(entry);
                i
            }
            None => {
                streams.push(Some(entry));
                streams.len() - 1
            }
        };
        self.active.set(self.active.get() + 1);
        Some(InFlight {
            clock: self.clone(),
            slot,
        })
    }

    /// The earliest stall deadline of the HTTP/2 requests in flight whose
    /// handlers have answered.
    fn h2_stall_deadline(&self, send: Duration) -> Option<Instant> {
        self.streams
            .borrow()
            .iter()
            .flatten()
            .filter(|s| !s.handling)
            .map(|s| s.since + send)
            .min()
    }
}

/// An HTTP/2 request in flight (see [`ConnClock::start`]).
pub struct InFlight {
    clock: Rc<ConnClock>,
    slot: usize,
}

impl InFlight {
    fn progress(&self, handling: bool) {
        if let Some(s) = self.clock.streams.borrow_mut()[self.slot].as_mut() {
            s.since = Instant::now();
            s.handling = handling;
        }
    }

    /// The handler answered with `res`: from now on the request's clock runs
    /// on its body's progress (each chunk of at most 16 KiB), and it stays in
    /// flight until the body ends or the stream is reset.
    pub fn track(self, res: HttpResponse) -> HttpResponse {
        self.progress(false);
        res.map_body(|_, body| {
            BoxBody::new(TrackedBody {
                body,
                rest: Bytes::new(),
                flight: self,
            })
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let c = &self.clock;
        c.streams.borrow_mut()[self.slot] = None;
        c.active.set(c.active.get().saturating_sub(1));
        if c.active.get() == 0 {
            c.idle_since.set(Instant::now());
        }
    }
}

/// An HTTP/2 response body in flight, handed out in chunks of at most
/// [`H2_CHUNK`] bytes.
struct TrackedBody {
    body: BoxBody,
    rest: Bytes,
    flight: InFlight,
}

impl MessageBody for TrackedBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.get_mut();
        if this.rest.is_empty() {
            match Pin::new(&mut this.body).poll_next(cx) {
                Poll::Ready(Some(Ok(b))) => this.rest = b,
                other => {
                    if other.is_ready() {
                        this.flight.progress(false);
                    }
                    return other;
                }
            }
        }
        let n = this.rest.len().min(H2_CHUNK);
        this.flight.progress(false);
        Poll::Ready(Some(Ok(this.rest.split_to(n))))
    }
}

/// A stream with Tessera's per-connection deadlines (see the module docs).
pub struct TimedIo<T> {
    io: T,
    clock: Rc<ConnClock>,
    limits: Timeouts,
    /// The header deadline applies (HTTP/1; an HTTP/2 connection reads control
    /// frames while idle, and its requests are timed by the send timeout only).
    time_heads: bool,
    /// When the last write made progress.
    last_write: Instant,
    /// Since when a write has been waiting for the client to read.
    write_blocked_since: Option<Instant>,
    timer: Option<Pin<Box<Sleep>>>,
    /// The timer holds the connection task's waker (else a no-op one, so a
    /// timer armed for a deadline that went away does not wake the task:
    /// actix restarts its keep-alive timer on every wake-up).
    timer_wakes: bool,
    /// Counts the connection open while its stream lives (not while an
    /// offloaded request that outlived it does).
    _open: crate::stats::ConnectionGuard,
}

impl<T> TimedIo<T> {
    /// Wraps `io`; `time_heads` is false for HTTP/2 connections.
    pub fn new(io: T, limits: Timeouts, time_heads: bool) -> Self {
        TimedIo {
            io,
            clock: Rc::new(ConnClock {
                reading_since: Cell::new(None),
                handling: Cell::new(false),
                begun: Cell::new(false),
                h2: !time_heads,
                streams: RefCell::new(Vec::new()),
                active: Cell::new(0),
                idle_since: Cell::new(Instant::now()),
            }),
            limits,
            time_heads,
            last_write: Instant::now(),
            write_blocked_since: None,
            timer: None,
            timer_wakes: false,
            _open: crate::stats::ConnectionGuard::new(),
        }
    }

    /// The clock to put in the connection data.
    pub fn clock(&self) -> Rc<ConnClock> {
        self.clock.clone()
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// The earliest deadline that applies now, if any.
    fn deadline(&self) -> Option<Instant> {
        let read = match self.clock.reading_since.get() {
            Some(since)
                if self.time_heads
                    && !self.limits.header.is_zero()
                    && !self.clock.handling.get() =>
            {
                Some(since.max(self.last_write) + self.limits.header)
            }
            _ => None,
        };
        let write = match self.write_blocked_since {
            Some(since) if !self.limits.send.is_zero() => Some(since + self.limits.send),
            _ => None,
        };
        let c = &self.clock;
        let h2 = if !c.h2 {
            None
        } else if c.active.get() == 0 {
            (!self.limits.h2_idle.is_zero()).then(|| c.idle_since.get() + self.limits.h2_idle)
        } else if self.limits.send.is_zero() {
            None
        } else {
            c.h2_stall_deadline(self.limits.send)
        };
        [read, write, h2].into_iter().flatten().min()
    }

    /// Fails once a deadline has passed; otherwise makes sure the task is woken
    /// by the time it will.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Some(deadline) = self.deadline() else {
            self.quiet_timer();
            return Ok(());
        };
        if Instant::now() >= deadline {
            crate::stats::global()
                .timeouts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let what = if self.clock.h2 && self.clock.active.get() == 0 {
                "keep-alive: an idle HTTP/2 connection"
            } else if self.clock.h2
                || self
                    .write_blocked_since
                    .is_some_and(|s| s + self.limits.send <= deadline)
            {
                "send-timeout: the client stopped reading"
            } else {
                "client-header-timeout: the client did not send a complete request head"
            };
            tracing::debug!("closing connection: {what}");
            return Err(io::Error::new(io::ErrorKind::TimedOut, what));
        }
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(sleep_until(deadline)));
        if timer.deadline() > deadline {
            timer.as_mut().reset(deadline);
        }
        if timer.as_mut().poll(cx).is_ready() {
            // It fired for an earlier deadline that has since moved.
            timer.as_mut().reset(deadline);
            let _ = timer.as_mut().poll(cx);
        }
        self.timer_wakes = true;
        Ok(())
    }

    /// Gives the timer a no-op waker when it holds the task's and no deadline
    /// applies any more (a head was completed since it was armed).
    fn quiet_timer(&mut self) {
        if self.timer_wakes && self.deadline().is_none() {
            self.timer_wakes = false;
            if let Some(t) = &mut self.timer {
                let _ = t
                    .as_mut()
                    .poll(&mut Context::from_waker(std::task::Waker::noop()));
            }
        }
    }

    fn wrote(&mut self, buf: &[u8], r: &Poll<io::Result<usize>>) {
        match r {
            Poll::Ready(Ok(n)) if *n > 0 => {
                if !self.clock.begun.get() && buf.starts_with(b"HTTP/1.1 408 ") {
                    // actix-http's own head timeout on the first request.
                    crate::stats::global()
                        .timeouts
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                self.write_blocked_since = None;
                self.last_write = Instant::now();
                // A response is going out: its request's head is complete.
                self.quiet_timer();
            }
            Poll::Pending if self.write_blocked_since.is_none() => {
                self.write_blocked_since = Some(Instant::now());
            }
            _ => {}
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        match r {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before && this.clock.reading_since.get().is_none() {
                    this.clock.reading_since.set(Some(Instant::now()));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match this.check(cx) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            },
            err => err,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(buf, &r);
        if r.is_pending() {
            this.check(cx)?;
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(bufs.first().map_or(&[][..], |b| &b[..]), &r);
        if r.is_pending() {
            this.check(cx)?;
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        if r.is_pending() {
            if this.write_blocked_since.is_none() {
                this.write_blocked_since = Some(Instant::now());
            }
            this.check(cx)?;
        }
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn limits(header: u64, send: u64) -> Timeouts {
        Timeouts {
            header: Duration::from_millis(header),
            send: Duration::from_millis(send),
            h2_idle: Duration::from_millis(200),
        }
    }

    #[actix_rt::test]
    async fn a_trickled_head_times_out_and_begin_stops_the_clock() {
        let (client, server) = tokio::io::duplex(64);
        let mut io = TimedIo::new(server, limits(200, 0), true);
        let mut client = client;
        client.write_all(b"GET").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(io.read(&mut buf).await.unwrap(), 3);
        // Nothing more comes: the read fails at the header deadline.
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);

        let (client, server) = tokio::io::duplex(64);
        let mut io = TimedIo::new(server, limits(200, 0), true);
        let mut client = client;
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        assert!(io.read(&mut buf).await.unwrap() > 0);
        io.clock().begin();
        // With the head complete an idle read waits past the deadline.
        let idle = actix_rt::time::timeout(Duration::from_millis(400), io.read(&mut buf)).await;
        assert!(
            idle.is_err(),
            "an idle read after begin() must not time out"
        );
    }

    #[actix_rt::test]
    async fn h2_connections_time_idleness_not_heads() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut io = TimedIo::new(server, limits(100, 0), false);
        client.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(io.read(&mut buf).await.unwrap(), 1);
        // A request in flight: neither the header nor the idle deadline.
        let flight = io.clock().start().expect("an HTTP/2 clock");
        let res = flight.track(HttpResponse::Ok().finish());
        let busy = actix_rt::time::timeout(Duration::from_millis(400), io.read(&mut buf)).await;
        assert!(
            busy.is_err(),
            "a connection with a request in flight was closed"
        );
        // Its response is done: idle from then on, closed after h2_idle.
        drop(res);
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[actix_rt::test]
    async fn a_blocked_write_times_out() {
        let (_client, server) = tokio::io::duplex(16);
        let mut io = TimedIo::new(server, limits(0, 200), true);
        // The client never reads: the first 16 bytes fill the pipe, then the
        // write blocks until the send deadline.
        let err = io.write_all(&[0u8; 64]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[actix_rt::test]
    async fn zero_disables_both() {
        let (_client, server) = tokio::io::duplex(16);
        let mut io = TimedIo::new(server, limits(0, 0), true);
        let w = actix_rt::time::timeout(Duration::from_millis(300), io.write_all(&[0u8; 64])).await;
        assert!(w.is_err(), "without a send timeout the write just waits");
    }
}

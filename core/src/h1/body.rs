//! The request body between the connection and the app: the engine feeds
//! decoded chunks in as the handler asks for them, and stops at 64 KiB
//! queued (backpressure; actix-http's `h1::Payload` does the same with
//! 32 KiB, but its sender type is private).
//!
//! A handler that never polls the body never makes the engine read it (so
//! `Expect: 100-continue` is answered only when it is wanted), and one that
//! drops it lets the engine discard the rest.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use actix_http::error::PayloadError;
use bytes::Bytes;
use futures_core::Stream;

/// Queued bytes above which the engine stops reading the socket.
const HIGH_WATER: usize = 64 * 1024;

#[derive(Default)]
struct Shared {
    chunks: VecDeque<Bytes>,
    queued: usize,
    eof: bool,
    error: Option<PayloadError>,
    /// The handler polled the body at least once.
    asked: bool,
    /// The handler dropped the body.
    gone: bool,
    reader: Option<Waker>,
    feeder: Option<Waker>,
}

/// The handler's side: a stream of chunks (`actix_http::Payload::Stream`).
pub struct BodyStream(Rc<RefCell<Shared>>);

/// The engine's side.
pub struct Feed(Rc<RefCell<Shared>>);

/// A connected pair.
pub fn channel() -> (Feed, BodyStream) {
    let s = Rc::new(RefCell::new(Shared::default()));
    (Feed(s.clone()), BodyStream(s))
}

impl Stream for BodyStream {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut s = self.0.borrow_mut();
        s.asked = true;
        if let Some(b) = s.chunks.pop_front() {
            s.queued -= b.len();
            if s.queued < HIGH_WATER {
                if let Some(w) = s.feeder.take() {
                    w.wake();
                }
            }
            return Poll::Ready(Some(Ok(b)));
        }
        if let Some(e) = s.error.take() {
            return Poll::Ready(Some(Err(e)));
        }
        if s.eof {
            return Poll::Ready(None);
        }
        s.reader = Some(cx.waker().clone());
        if let Some(w) = s.feeder.take() {
            w.wake();
        }
        Poll::Pending
    }
}

impl Drop for BodyStream {
    fn drop(&mut self) {
        let mut s = self.0.borrow_mut();
        s.gone = true;
        if let Some(w) = s.feeder.take() {
            w.wake();
        }
    }
}

/// What the handler wants of the engine now.
#[derive(Debug, PartialEq, Eq)]
pub enum Want {
    /// More bytes.
    More,
    /// Nothing: it dropped the body.
    Gone,
}

impl Feed {
    /// Completes when the handler has asked for the body and the queue has
    /// room, or when it dropped the body.
    pub async fn wanted(&self) -> Want {
        std::future::poll_fn(|cx| {
            let mut s = self.0.borrow_mut();
            if s.gone {
                return Poll::Ready(Want::Gone);
            }
            if s.asked && s.queued < HIGH_WATER {
                return Poll::Ready(Want::More);
            }
            s.feeder = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Whether the handler has polled the body yet.
    pub fn asked(&self) -> bool {
        self.0.borrow().asked
    }

    /// Queues body bytes.
    pub fn push(&self, b: Bytes) {
        let mut s = self.0.borrow_mut();
        s.queued += b.len();
        s.chunks.push_back(b);
        if let Some(w) = s.reader.take() {
            w.wake();
        }
    }

    /// The body is complete.
    pub fn end(&self) {
        self.finish(None);
    }

    /// The body cannot complete (`e` says why).
    pub fn fail(&self, e: PayloadError) {
        self.finish(Some(e));
    }

    fn finish(&self, e: Option<PayloadError>) {
        let mut s = self.0.borrow_mut();
        s.eof = true;
        s.error = e;
        if let Some(w) = s.reader.take() {
            w.wake();
        }
    }
}

/// The engine's reading of one request body into a [`Feed`].
pub(super) struct Incoming {
    feed: Feed,
    framing: super::head::Framing,
    /// Content-Length bytes still to come.
    left: u64,
    decoder: super::chunked::Decoder,
    /// `100 Continue` was sent.
    pub(super) continued: bool,
    /// The body was read whole.
    pub(super) done: bool,
    /// The body cannot be read further (timeout, bad chunk, client gone):
    /// the connection must close.
    pub(super) broken: bool,
    /// The handler dropped the body.
    gone: bool,
}

impl Incoming {
    /// A reader for a body of `framing` (not `Framing::None`), and the stream
    /// the handler gets.
    pub(super) fn new(framing: super::head::Framing) -> (Incoming, BodyStream) {
        let (feed, stream) = channel();
        let left = match framing {
            super::head::Framing::Length(n) => n,
            _ => 0,
        };
        let inc = Incoming {
            feed,
            framing,
            left,
            // max-body-size is applied above, as the handler reads
            decoder: super::chunked::Decoder::new(u64::MAX),
            continued: false,
            done: false,
            broken: false,
            gone: false,
        };
        (inc, stream)
    }

    /// Whether [`Incoming::pump`] has more to do.
    pub(super) fn active(&self) -> bool {
        !(self.done || self.broken || self.gone)
    }

    /// Reads the body into the feed as the handler asks for it, answering
    /// `Expect: 100-continue` (`expects`) before the first read (RFC 9110
    /// §10.1.1). Returns when the body is complete, broken, or dropped.
    pub(super) async fn pump(
        &mut self,
        io: &mut actix_rt::net::TcpStream,
        buf: &mut bytes::BytesMut,
        st: &super::conn::Settings,
        expects: bool,
    ) {
        loop {
            if self.feed.wanted().await == Want::Gone {
                self.gone = true;
                return;
            }
            if expects && !self.continued {
                if super::write::send(io, b"HTTP/1.1 100 Continue\r\n\r\n", st)
                    .await
                    .is_err()
                {
                    return self.fail("the client went away");
                }
                self.continued = true;
            }
            match self.take(buf) {
                Ok(true) => {
                    self.done = true;
                    self.feed.end();
                    return;
                }
                Ok(false) => {}
                Err(why) => return self.fail(why),
            }
            let deadline = tokio::time::Instant::now() + st.header_timeout;
            if !super::conn::fill(io, buf, deadline).await {
                return self.fail("the client stopped sending");
            }
        }
    }

    fn fail(&mut self, why: &'static str) {
        self.broken = true;
        self.feed.fail(PayloadError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            why,
        )));
    }

    /// Moves buffered body bytes into the feed; `Ok(true)` once complete.
    fn take(&mut self, buf: &mut bytes::BytesMut) -> Result<bool, &'static str> {
        if self.framing != super::head::Framing::Chunked {
            let k = self.left.min(buf.len() as u64) as usize;
            if k > 0 {
                self.feed.push(buf.split_to(k).freeze());
                self.left -= k as u64;
            }
            return Ok(self.left == 0);
        }
        loop {
            let s = self
                .decoder
                .step(buf)
                .map_err(|_| "a malformed chunked body")?;
            if s.consumed == 0 && !s.done {
                return Ok(false);
            }
            let piece = buf.split_to(s.consumed).freeze();
            if s.data.1 > s.data.0 {
                self.feed.push(piece.slice(s.data.0..s.data.1));
            }
            if s.done {
                return Ok(true);
            }
        }
    }

    /// Whether the answer may go out before what is left of the body is
    /// drained ([`Incoming::drain`] after it): a Content-Length body of at
    /// most `limit` bytes left (its drain can only fail by a timeout or a
    /// client gone), or a chunked one, whose length is unknown: one that
    /// passes `limit` closes the connection after the answer, as nginx
    /// closes when a discard it started after answering does not finish.
    pub(super) fn drainable_after(&self, limit: u64) -> bool {
        self.done
            || (!self.broken
                && (self.framing == super::head::Framing::Chunked || self.left <= limit))
    }

    /// Discards what is left of the body, at most `limit` more bytes, so that
    /// the connection can serve its next request; `false`: it must close.
    pub(super) async fn drain(
        &mut self,
        io: &mut actix_rt::net::TcpStream,
        buf: &mut bytes::BytesMut,
        st: &super::conn::Settings,
        limit: u64,
    ) -> bool {
        use bytes::Buf;
        if self.done {
            return true;
        }
        if self.broken {
            return false;
        }
        let deadline = tokio::time::Instant::now() + st.header_timeout;
        if self.framing != super::head::Framing::Chunked {
            if self.left > limit {
                return false;
            }
            loop {
                let k = self.left.min(buf.len() as u64) as usize;
                buf.advance(k);
                self.left -= k as u64;
                if self.left == 0 {
                    return true;
                }
                if !super::conn::fill(io, buf, deadline).await {
                    return false;
                }
            }
        }
        let start = self.decoder.received();
        loop {
            match self.decoder.step(buf) {
                Ok(s) if s.done => {
                    buf.advance(s.consumed);
                    return true;
                }
                Ok(s) if s.consumed > 0 => buf.advance(s.consumed),
                Ok(_) => {
                    if self.decoder.received() - start > limit
                        || !super::conn::fill(io, buf, deadline).await
                    {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    fn poll(b: &mut BodyStream) -> Poll<Option<Result<Bytes, PayloadError>>> {
        Pin::new(b).poll_next(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn chunks_arrive_in_order_then_end() {
        let (f, mut b) = channel();
        assert!(!f.asked());
        assert!(poll(&mut b).is_pending());
        assert!(f.asked());
        f.push(Bytes::from_static(b"ab"));
        f.push(Bytes::from_static(b"c"));
        f.end();
        assert!(matches!(poll(&mut b), Poll::Ready(Some(Ok(x))) if x == "ab"));
        assert!(matches!(poll(&mut b), Poll::Ready(Some(Ok(x))) if x == "c"));
        assert!(matches!(poll(&mut b), Poll::Ready(None)));
    }

    #[test]
    fn a_failed_body_ends_with_an_error() {
        let (f, mut b) = channel();
        f.push(Bytes::from_static(b"ab"));
        f.fail(PayloadError::Incomplete(None));
        assert!(matches!(poll(&mut b), Poll::Ready(Some(Ok(_)))));
        assert!(matches!(poll(&mut b), Poll::Ready(Some(Err(_)))));
    }

    #[test]
    fn the_queue_pushes_back_above_the_high_water_mark() {
        let (f, mut b) = channel();
        let _ = poll(&mut b);
        let mut wanted = std::pin::pin!(f.wanted());
        let cx = &mut Context::from_waker(Waker::noop());
        assert_eq!(wanted.as_mut().poll(cx), Poll::Ready(Want::More));
        f.push(Bytes::from(vec![0u8; HIGH_WATER]));
        let mut wanted = std::pin::pin!(f.wanted());
        assert!(wanted.as_mut().poll(cx).is_pending());
        drop(b);
        assert_eq!(wanted.as_mut().poll(cx), Poll::Ready(Want::Gone));
    }
}

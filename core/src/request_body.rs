//! The request body as content handlers read it: a stream of chunks with
//! backpressure, for Content-Length and chunked framing alike, limited to
//! `[server] max-body-size` as it streams (RFC 9110 §15.5.14: 413).
//!
//! The bytes come from the connection engine (Tessera's, or actix-http's for
//! TLS and HTTP/2) only as fast as the handler reads them; nothing is
//! buffered whole unless a module collects it (nginx
//! `proxy_request_buffering off`, lighttpd `server.stream-request-body`).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::dev::Payload;
use actix_web::http::{header, Version};
use actix_web::HttpRequest;
use bytes::Bytes;
use futures_core::Stream;

/// Why reading the request body failed.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The body is larger than `max-body-size` (bytes): answer 413, and the
    /// connection closes.
    #[error("request body larger than max-body-size ({limit} bytes)")]
    TooLarge {
        /// The limit, bytes.
        limit: u64,
    },
    /// The client stopped sending, sent a malformed chunk, or went away.
    #[error("request body incomplete: {0}")]
    Incomplete(String),
}

/// The request body (a `Stream` of `Result<Bytes, BodyError>`).
pub struct RequestBody {
    payload: Payload,
    limit: u64,
    seen: u64,
    over: Rc<Cell<bool>>,
    /// The first read, when [`RequestBody::framing`] had to look at it.
    peeked: Option<Option<Result<Bytes, BodyError>>>,
    /// The announced Content-Length: a body that ends short of it is
    /// incomplete.
    declared: Option<u64>,
    /// The longest wait for the next bytes, when the connection engine does
    /// not time body reads itself.
    idle: Option<Duration>,
    /// The idle timer, armed while a read waits; `stale` once bytes came.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    stale: bool,
    /// Ended or failed: every later read is the end.
    ended: bool,
}

/// How a request's body is delimited (RFC 9112 §6.3; RFC 9113 §8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    None,
    /// A body of exactly this many bytes (Content-Length).
    Length(u64),
    /// A body that ends when the client says so: chunked in HTTP/1.1, or an
    /// HTTP/2 stream with DATA frames and no Content-Length.
    Unknown,
}

impl RequestBody {
    /// A body over the engine's `payload`, limited to `limit` bytes. `over`
    /// is set when the limit is passed, so that the core closes the
    /// connection after its 413. `declared` is the request's Content-Length:
    /// a body that ends before it fails ([`BodyError::Incomplete`]; HTTP/2
    /// lets a stream end short of it). `idle`: the longest wait for more
    /// bytes (`client-header-timeout`, as Tessera's engine times the reads
    /// of a body itself; `None` there), then the body fails.
    pub fn new(
        payload: Payload,
        limit: u64,
        over: Rc<Cell<bool>>,
        declared: Option<u64>,
        idle: Option<Duration>,
    ) -> Self {
        RequestBody {
            payload,
            limit,
            seen: 0,
            over,
            peeked: None,
            declared,
            idle,
            timer: None,
            stale: false,
            ended: false,
        }
    }

    /// How the body of `req` (whose body this is) is delimited.
    /// Content-Length (the `declared` length given to [`RequestBody::new`];
    /// the engines refuse an invalid one) gives a length and
    /// Transfer-Encoding (always chunked here: the engines refuse others
    /// with 501) an unknown one. An HTTP/2
    /// request may carry DATA frames with neither field, so there the first
    /// read is awaited (a request without a body ends its stream with its
    /// headers, so that read does not wait) and kept for the handler.
    pub async fn framing(&mut self, req: &HttpRequest) -> Framing {
        if req.headers().contains_key(header::TRANSFER_ENCODING) {
            return Framing::Unknown;
        }
        if let Some(n) = self.declared {
            return Framing::Length(n);
        }
        if req.version() != Version::HTTP_2 {
            return Framing::None;
        }
        while self.peeked.is_none() {
            let first = std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await;
            // an empty DATA frame says nothing: look further
            if !matches!(&first, Some(Ok(b)) if b.is_empty()) {
                self.peeked = Some(first);
            }
        }
        match self.peeked {
            Some(None) => Framing::None,
            _ => Framing::Unknown,
        }
    }

    /// Bytes read so far.
    pub fn received(&self) -> u64 {
        self.seen
    }
}

impl Stream for RequestBody {
    type Item = Result<Bytes, BodyError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match this.peeked.take() {
            Some(Some(first)) => return Poll::Ready(Some(first)),
            Some(None) => {
                this.peeked = Some(None);
                return Poll::Ready(None);
            }
            None => {}
        }
        if this.ended || this.over.get() {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.payload).poll_next(cx) {
            Poll::Ready(Some(Ok(b))) => {
                this.stale = true;
                this.seen += b.len() as u64;
                if this.seen > this.limit {
                    this.over.set(true);
                    return Poll::Ready(Some(Err(BodyError::TooLarge { limit: this.limit })));
                }
                Poll::Ready(Some(Ok(b)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.ended = true;
                Poll::Ready(Some(Err(BodyError::Incomplete(e.to_string()))))
            }
            Poll::Ready(None) => {
                this.ended = true;
                match this.declared {
                    Some(n) if this.seen < n => Poll::Ready(Some(Err(BodyError::Incomplete(
                        format!("the body ended after {} of {n} bytes", this.seen),
                    )))),
                    _ => Poll::Ready(None),
                }
            }
            Poll::Pending => {
                let Some(idle) = this.idle else {
                    return Poll::Pending;
                };
                let deadline = tokio::time::Instant::now() + idle;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if std::mem::take(&mut this.stale) {
                    timer.as_mut().reset(deadline);
                }
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.ended = true;
                        Poll::Ready(Some(Err(BodyError::Incomplete(
                            "the client stopped sending".into(),
                        ))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

//! The request body as content handlers read it: a stream of chunks with
//! backpressure, for Content-Length and chunked framing alike, limited to
//! `[server] max-body-size` as it streams (RFC 9110 §15.5.14: 413).
//!
//! The bytes come from the connection engine (Tessera's, or actix-http's for
//! TLS and HTTP/2) only as fast as the handler reads them; nothing is
//! buffered whole unless a module collects it (nginx
//! `proxy_request_buffering off`, lighttpd `server.stream-request-body`).

use std::cell::Cell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use actix_web::dev::Payload;
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
}

impl RequestBody {
    /// A body over the engine's `payload`, limited to `limit` bytes. `over`
    /// is set when the limit is passed, so that the core closes the
    /// connection after its 413.
    pub fn new(payload: Payload, limit: u64, over: Rc<Cell<bool>>) -> Self {
        RequestBody {
            payload,
            limit,
            seen: 0,
            over,
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
        if this.over.get() {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.payload).poll_next(cx) {
            Poll::Ready(Some(Ok(b))) => {
                this.seen += b.len() as u64;
                if this.seen > this.limit {
                    this.over.set(true);
                    return Poll::Ready(Some(Err(BodyError::TooLarge { limit: this.limit })));
                }
                Poll::Ready(Some(Ok(b)))
            }
            Poll::Ready(Some(Err(e))) => {
                Poll::Ready(Some(Err(BodyError::Incomplete(e.to_string()))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

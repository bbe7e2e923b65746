//! The answer of a back end that ends its output by closing it: a CGI
//! process's stdout (`cgi`), an SCGI or uwsgi connection (`scgi`, `uwsgi`).
//! The head is read first; the body then streams as it comes until EOF.
//!
//! With no framing, EOF is the end: an answer that declared a
//! `Content-Length` and ended before it is an error, so that the client's
//! connection closes without a proper end (as `fastcgi` and `proxy` do) and
//! the response never looks complete.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use tokio::io::AsyncRead;
use tokio::time::{Instant, Sleep};

use crate::gateway::head::{find_end, MAX_HEAD};
use crate::gateway::Input;
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::response::error_response;
use tessera_core::upstream::pool::{pool, PoolOwner};

/// When reading gives up.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Limit {
    /// No bytes for this long (an upstream's `read-timeout`).
    Idle(Duration),
    /// Not done by then (a CGI process's `timeout`).
    Deadline(Instant),
}

/// Why the answer failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum OutputError {
    /// The back end's time ran out ([`Limit`]).
    #[error("{0}: no more output within the time limit")]
    TimedOut(&'static str),
    /// The output ended before its header block was complete.
    #[error("{0}: the output ended before its header block")]
    NoHead(&'static str),
    /// The header block is larger than [`MAX_HEAD`].
    #[error("{0}: header block larger than 64 KiB")]
    HeadTooLarge(&'static str),
    /// EOF before the declared `Content-Length` (bytes missing).
    #[error("{0}: output ended {1} bytes short of its Content-Length")]
    Short(&'static str, u64),
    /// Reading failed.
    #[error("{0}: reading the output failed")]
    Read(&'static str),
}

/// Output read until EOF: [`Output::head`], then the body as a [`Stream`].
pub(crate) struct Output<R> {
    io: R,
    /// Bytes read and not yet consumed (after the head: the body's start).
    buf: BytesMut,
    limit: Limit,
    sleep: Option<Pin<Box<Sleep>>>,
    /// Body bytes still due by a declared `Content-Length`.
    due: Option<u64>,
    /// The back end closed its side.
    eof: bool,
    /// No more to yield (the end, or an error).
    done: bool,
    /// The body ended as it should: EOF, or its declared length.
    complete: bool,
    /// The module, for errors and the log.
    who: &'static str,
}

impl<R: AsyncRead + Unpin> Output<R> {
    /// An answer read from `io`; `who`: the module (`"cgi"`).
    pub(crate) fn new(io: R, limit: Limit, who: &'static str) -> Self {
        Output {
            io,
            buf: BytesMut::with_capacity(8192),
            limit,
            sleep: None,
            due: None,
            eof: false,
            done: false,
            complete: false,
            who,
        }
    }

    /// Reads until the end of the header block (a blank line, CRLF or LF) and
    /// returns the block without it; the bytes after it stay for the body.
    ///
    /// # Errors
    /// [`OutputError::NoHead`], [`OutputError::HeadTooLarge`], a timeout or
    /// a read error.
    pub(crate) async fn head(&mut self) -> Result<BytesMut, OutputError> {
        let mut searched: usize = 0;
        loop {
            // a separator may straddle two reads: look back 3 bytes
            let from = searched.saturating_sub(3);
            if let Some((n, sep)) = find_end(&self.buf[from..]) {
                let head = self.buf.split_to(from + n);
                let _ = self.buf.split_to(sep);
                return Ok(head);
            }
            searched = self.buf.len();
            if self.buf.len() > MAX_HEAD {
                return Err(OutputError::HeadTooLarge(self.who));
            }
            if std::future::poll_fn(|cx| self.poll_fill(cx)).await? == 0 {
                return Err(OutputError::NoHead(self.who));
            }
        }
    }

    /// Reads until `cap` bytes are buffered or the output ends (a CGI
    /// script's output while its input is still being written: reading it
    /// keeps a script that answers before reading everything from blocking).
    ///
    /// # Errors
    /// A timeout or a read error.
    pub(crate) async fn fill(&mut self, cap: usize) -> Result<(), OutputError> {
        while self.buf.len() < cap && !self.eof {
            std::future::poll_fn(|cx| self.poll_fill(cx)).await?;
        }
        Ok(())
    }

    /// The body must be `len` bytes (the answer's `Content-Length`): EOF
    /// before is [`OutputError::Short`], bytes after are dropped.
    pub(crate) fn expect(&mut self, len: u64) {
        self.due = Some(len);
    }

    /// Whether the body was read to its proper end (EOF, or its declared
    /// length), not broken off.
    pub(crate) fn ended(&self) -> bool {
        self.complete
    }

    /// Reads more into `buf`: the bytes read, 0 at EOF.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, OutputError>> {
        if self.eof {
            return Poll::Ready(Ok(0));
        }
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(16 * 1024);
        }
        match tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.buf) {
            Poll::Ready(Ok(n)) => {
                if let Limit::Idle(_) = self.limit {
                    self.sleep = None;
                }
                self.eof = n == 0;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(_)) => Poll::Ready(Err(OutputError::Read(self.who))),
            Poll::Pending => {
                let sleep = self.sleep.get_or_insert_with(|| {
                    Box::pin(match self.limit {
                        Limit::Idle(d) => tokio::time::sleep(d),
                        Limit::Deadline(t) => tokio::time::sleep_until(t),
                    })
                });
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(OutputError::TimedOut(self.who)));
                }
                Poll::Pending
            }
        }
    }
}

use std::future::Future;

impl<R: AsyncRead + Unpin> Stream for Output<R> {
    type Item = Result<Bytes, OutputError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if !this.buf.is_empty() {
                let mut chunk = this.buf.split();
                if let Some(due) = &mut this.due {
                    if chunk.len() as u64 >= *due {
                        chunk.truncate(*due as usize);
                        this.done = true;
                        this.complete = true;
                    }
                    *due -= chunk.len() as u64;
                }
                return Poll::Ready(Some(Ok(chunk.freeze())));
            }
            if this.due == Some(0) {
                this.done = true;
                this.complete = true;
                continue;
            }
            match this.poll_fill(cx) {
                Poll::Ready(Ok(0)) => {
                    this.done = true;
                    if let Some(due) = this.due.filter(|d| *d > 0) {
                        return Poll::Ready(Some(Err(OutputError::Short(this.who, due))));
                    }
                    this.complete = true;
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The `Content-Length` a header block declares (CGI or HTTP), if any: the
/// body must then have exactly that many bytes ([`Output::expect`]).
///
/// # Errors
/// A value that is not a decimal number of bytes, or two fields that
/// disagree: the answer's framing is broken, and the gateway refuses it as
/// a proxy refuses such a response (RFC 9112 §6.3, 502; nginx "upstream
/// sent duplicate header line").
pub(crate) fn declared_length(head: &[u8]) -> Result<Option<u64>, &'static str> {
    let mut found = None;
    for line in head.split(|&b| b == b'\n') {
        // a line that starts with white space continues the field before
        // it (obs-fold, RFC 9112 §5.2): never a field of its own
        if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
            continue;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if !line[..colon]
            .trim_ascii()
            .eq_ignore_ascii_case(b"content-length")
        {
            continue;
        }
        let v = line[colon + 1..].trim_ascii();
        let n = std::str::from_utf8(v)
            .ok()
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or("an invalid Content-Length")?;
        match found {
            Some(m) if m != n => return Err("two different Content-Length values"),
            _ => found = Some(n),
        }
    }
    Ok(found)
}

/// A connection to a server of an upstream, for one request: leased from
/// the upstream's pool for the module (never given back, as each request
/// has a connection of its own), so that `max-connections` holds and the
/// status counts it open until it is dropped.
pub(crate) type Conn = tessera_core::upstream::pool::Lease;

/// One request to an application over a connection of its own (`scgi`,
/// `uwsgi`): picks a server of `upstream` for `client`, connects (within
/// `max-connections` per worker and server, counted with every other table
/// of `owner`'s configuration that sends `who` to the upstream), sends
/// `request` (the encoded header) and the body within the upstream's
/// `send-timeout`, and reads the header block ([`Output::head`]) within its
/// `read-timeout`. Failures count against the server's health and are
/// logged with `who`.
///
/// # Errors
/// The response to send: 502 (refused, broken off, a bad head), 504 (a
/// timeout), 503 (every server at `max-connections`), 413 or 400 (the
/// client's body failed on the way).
pub(crate) async fn exchange(
    upstream: &Arc<tessera_core::upstream::Upstream>,
    owner: &PoolOwner,
    client: Option<std::net::IpAddr>,
    request: Bytes,
    input: Input,
    who: &'static str,
) -> Result<(BytesMut, Output<Conn>), HttpResponse> {
    use tokio::io::AsyncWriteExt;

    let u = &upstream.config;
    // a server that cannot be reached got nothing: the next one is tried,
    // and the last one's status answers when none can (nginx's
    // scgi_next_upstream / uwsgi_next_upstream "error timeout")
    let mut tried: smallvec::SmallVec<[usize; 2]> = smallvec::SmallVec::new();
    let mut last = StatusCode::BAD_GATEWAY;
    let (pick, mut io, server) = loop {
        let pick = upstream
            .pick(client, &tried)
            .ok_or_else(|| error_response(last))?;
        tried.push(pick.index);
        let server = upstream.servers[pick.index].address.clone();
        let pool = pool(owner, upstream, pick.index, who);
        match pick.lease(&pool, None, who).await {
            Ok((pick, io)) => break (pick, io, server),
            Err(status) => last = status,
        }
    };
    // the client's side failing is not the server's fault
    let mut client_failed = None;
    let sent = async {
        let now = io.conn().write_now(&request)?;
        io.write_all(&request[now..]).await?;
        if let Input::Whole(b) = &input {
            io.write_all(b).await?;
        }
        if let Input::Stream(mut b, _) = input {
            while let Some(chunk) = crate::gateway::next(&mut b).await {
                match chunk {
                    Ok(c) => io.write_all(&c).await?,
                    Err(e) => {
                        client_failed = Some(crate::gateway::body_error(&e));
                        return Ok(());
                    }
                }
            }
        }
        io.flush().await
    };
    match tokio::time::timeout(Duration::from_secs(u.send_timeout), sent).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::error!(upstream = %upstream.name, %server, "{who}: sending: {e}");
            pick.failed();
            return Err(error_response(StatusCode::BAD_GATEWAY));
        }
        Err(_) => {
            tracing::error!(upstream = %upstream.name, %server, "{who}: sending: send-timeout");
            pick.failed();
            return Err(error_response(StatusCode::GATEWAY_TIMEOUT));
        }
    }
    if let Some(r) = client_failed {
        return Err(r);
    }
    let mut out = Output::new(io, Limit::Idle(Duration::from_secs(u.read_timeout)), who);
    match out.head().await {
        Ok(head) => {
            pick.succeeded();
            Ok((head, out))
        }
        Err(e) => {
            tracing::error!(upstream = %upstream.name, %server, "{e}");
            pick.failed();
            Err(error_response(match e {
                OutputError::TimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
                _ => StatusCode::BAD_GATEWAY,
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<F: Future>(f: F) -> F::Output {
        actix_rt::System::new().block_on(f)
    }

    async fn body<R: AsyncRead + Unpin>(out: &mut Output<R>) -> Result<Vec<u8>, OutputError> {
        let mut all = Vec::new();
        while let Some(c) = std::future::poll_fn(|cx| Pin::new(&mut *out).poll_next(cx)).await {
            all.extend_from_slice(&c?);
        }
        Ok(all)
    }

    #[test]
    fn the_head_then_the_body_until_eof() {
        run(async {
            let limit = Limit::Idle(Duration::from_secs(5));
            let mut out = Output::new(&b"A: b\nC: d\n\nthe body"[..], limit, "t");
            assert_eq!(&out.head().await.unwrap()[..], b"A: b\nC: d");
            assert_eq!(body(&mut out).await.unwrap(), b"the body");
            assert!(out.ended());
            let mut out = Output::new(&b"A: b\n"[..], limit, "t");
            assert_eq!(out.head().await, Err(OutputError::NoHead("t")));
        });
    }

    #[test]
    fn declared_lengths_are_found() {
        assert_eq!(
            declared_length(b"Status: 200\r\ncontent-length:  12 \r\nX: y"),
            Ok(Some(12))
        );
        assert_eq!(declared_length(b"X-Content-Length: 3"), Ok(None));
        assert_eq!(declared_length(b"X-A: a\r\n Content-Length: 3"), Ok(None));
        assert_eq!(
            declared_length(b"Content-Length: 3\nContent-Length: 3"),
            Ok(Some(3))
        );
        for bad in [
            &b"HTTP/1.1 200 OK\nContent-Length: x"[..],
            b"Content-Length: -1",
            b"Content-Length: +1",
            b"Content-Length: 1, 1",
            b"Content-Length:",
            b"Content-Length: 99999999999999999999999",
            b"Content-Length: 4\nContent-Length: 12",
        ] {
            assert!(
                declared_length(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_declared_length_is_enforced() {
        run(async {
            let limit = Limit::Idle(Duration::from_secs(5));
            let mut out = Output::new(&b"X: y\n\n12345"[..], limit, "t");
            out.head().await.unwrap();
            out.expect(10);
            assert_eq!(body(&mut out).await, Err(OutputError::Short("t", 5)));
            // more than declared: cut at the length
            let mut out = Output::new(&b"X: y\n\n12345678"[..], limit, "t");
            out.head().await.unwrap();
            out.expect(3);
            assert_eq!(body(&mut out).await.unwrap(), b"123");
        });
    }

    #[test]
    fn a_silent_back_end_times_out() {
        run(async {
            let (_keep, rx) = tokio::io::duplex(64);
            let mut out = Output::new(rx, Limit::Idle(Duration::from_millis(50)), "t");
            assert_eq!(out.head().await, Err(OutputError::TimedOut("t")));
            let (_keep, rx) = tokio::io::duplex(64);
            let at = Instant::now() + Duration::from_millis(50);
            let mut out = Output::new(rx, Limit::Deadline(at), "t");
            assert_eq!(out.head().await, Err(OutputError::TimedOut("t")));
        });
    }

    #[test]
    fn a_separator_split_across_reads_is_found() {
        run(async {
            let (mut tx, rx) = tokio::io::duplex(64);
            let mut out = Output::new(rx, Limit::Idle(Duration::from_secs(5)), "t");
            let writer = async {
                use tokio::io::AsyncWriteExt;
                tx.write_all(b"A: b\n").await.unwrap();
                tokio::task::yield_now().await;
                tx.write_all(b"\nrest").await.unwrap();
                drop(tx);
            };
            let (head, ()) = tokio::join!(out.head(), writer);
            assert_eq!(&head.unwrap()[..], b"A: b");
            assert_eq!(body(&mut out).await.unwrap(), b"rest");
        });
    }
}

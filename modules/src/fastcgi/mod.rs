//! `fastcgi`: scripts run by a FastCGI application, PHP's above all
//! (lighttpd mod_fastcgi `fastcgi.server`, Cherokee's `fcgi` handler, nginx
//! `fastcgi_pass` with `fastcgi_param`).
//!
//! ```toml
//! [[upstream]]
//! name = "php"
//! servers = ["unix:/run/php/php8.2-fpm.sock"]
//!
//! [vhost]
//! modules = ["access-log", "fastcgi", "static-file"]
//! [vhost.fastcgi]
//! upstream = "php"
//! ```
//!
//! An asynchronous content handler for paths whose script ends with one of
//! `extensions` (default `.php`), or for every path with `script-name`;
//! other paths pass on (to `static-file`). What it shares with `scgi`,
//! `uwsgi` and `cgi` is in [`crate::gateway`]:
//!
//! - **The script** ([`gateway::ScriptMap`]): `/index.php/more` runs
//!   `/index.php` with `PATH_INFO=/more`; a path is never split at a segment
//!   without the extension, so `/uploads/evil.jpg/x.php` never runs
//!   `evil.jpg`. A directory path runs its first existing `index-files`
//!   entry (default `index.php`). **check-local** (default on): a missing
//!   script is 404 without calling the back end (each worker remembers the
//!   answer for a second, as lighttpd's stat cache does).
//! - **Parameters**: the CGI/1.1 meta-variables ([`gateway::environment`]),
//!   then `params`; over 64 KiB they take several records, split between
//!   pairs, and one pair larger than a record (a header field of about
//!   64 KiB, possible only with a raised `max-request-header-size`) is 431
//!   without calling the application.
//! - **Bodies.** A Content-Length body streams to the application as STDIN
//!   records; a chunked body is collected first (FastCGI needs its length),
//!   at most `max-body-size` bytes.
//! - **The answer.** CGI header lines (`Status:`, `Location:`); a local
//!   `Location` without a status is an internal redirect (RFC 3875 §6.2.2);
//!   X-Sendfile with `x-sendfile`. The body streams as it comes; STDERR
//!   lines go to the error log. An application that ends its connection
//!   before END_REQUEST makes the client's connection close without a proper
//!   end. Refused is 502 and a timeout 504, as for `proxy`.
//! - **Connection reuse** with `keep-conn = true`: requests are sent with
//!   `FCGI_KEEP_CONN` and the connection goes back to the worker's pool
//!   after END_REQUEST (nginx `fastcgi_keep_conn`); a kept connection the
//!   application closed is replaced once, when the body can be sent again.
//!   Off by default, as in nginx and lighttpd: each kept connection holds
//!   one of the application's workers.
//! - **Processes**: an `[[upstream]]` with a `[upstream.spawn]` table is
//!   started and kept running by Tessera (lighttpd's `bin-path`).

mod protocol;

use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use tessera_core::actix_web::http::{Method, StatusCode};
use tessera_core::actix_web::HttpResponse;
use tessera_core::module::ContentFuture;
use tessera_core::response::error_response;
use tessera_core::upstream::pool::{pool, Lease, Pool, PoolOwner};
use tessera_core::upstream::Upstream;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};
use tokio::io::AsyncWriteExt;

use crate::gateway::{self, head::MAX_HEAD, Head, Input, Script, ScriptMap, XSendfile};
use protocol::Record;

pub use crate::gateway::config::BackendConfig as FastCgiConfig;
use crate::gateway::config::Kind;

/// A configured `fastcgi` instance.
pub struct FastCgi {
    upstream: Arc<Upstream>,
    scripts: ScriptMap,
    params: Vec<(String, String)>,
    sendfile: XSendfile,
    /// Send `FCGI_KEEP_CONN` and pool connections (`keep-conn`, and the
    /// upstream's `keepalive` is above 0).
    keep_conn: bool,
    /// Keeps the configuration's per-worker pools (shared with every module
    /// table that uses the same upstream) for as long as the instance lives.
    pools: PoolOwner,
}

impl ModuleDecl for FastCgi {
    const NAME: &'static str = "fastcgi";
    type Config = FastCgiConfig;

    fn build(cfg: FastCgiConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        let b = cfg.build(Kind::FastCgi, cx)?;
        Ok(FastCgi {
            keep_conn: b.keep_conn && b.upstream.config.keepalive > 0,
            upstream: b.upstream,
            scripts: b.scripts,
            params: b.params,
            sendfile: b.sendfile,
            pools: cx.upstreams.pool_owner().clone(),
        })
    }
}

impl Module for FastCgi {
    fn hooks(&self) -> Hooks {
        Hooks::ASYNC
    }

    fn runs_files(&self) -> bool {
        self.scripts.runs_files()
    }

    fn content_async<'a>(&'a self, cx: &'a mut Ctx<'_>) -> Option<ContentFuture<'a>> {
        let script = self.scripts.resolve_request(cx)?;
        if self.scripts.declines(&script) {
            return None;
        }
        Some(Box::pin(self.run(cx, script)))
    }

    /// `script /srv/www/x.php (SCRIPT_NAME "/x.php", …) to upstream "php",
    /// server …`, without calling the application.
    fn explain(&self, cx: &Ctx<'_>) -> Option<String> {
        self.scripts.explain(cx, || {
            self.upstream.describe(cx.req.peer_addr().map(|a| a.ip()))
        })
    }
}

/// Why one attempt failed.
enum Failed {
    /// Answer with this status (logged already).
    Status(StatusCode),
    /// No connection to the server (refused, timed out, at
    /// `max-connections`): nothing was sent, so the next server may take
    /// the request; this status if none does (logged already).
    Unsent(StatusCode),
    /// A kept-alive connection was closed by the application before it
    /// answered: try once more on a new one, if the body allows.
    Stale,
}

impl FastCgi {
    async fn run(&self, cx: &mut Ctx<'_>, script: Script) -> HttpResponse {
        if self.scripts.missing(&script) {
            return error_response(StatusCode::NOT_FOUND);
        }
        let mut input = match Input::take(cx).await {
            Ok(i) => i,
            Err(r) => return r,
        };
        // BEGIN_REQUEST, PARAMS, and STDIN when the body is already here
        // the parameters are written once, into their records' place
        let mut out = tessera_core::buffers::take();
        protocol::begin(&mut out, self.keep_conn);
        let written = protocol::params(&mut out, |params| {
            gateway::environment(cx, &script, input.length(), &self.params, &mut |k, v| {
                protocol::pair(params, k, v)
            });
        });
        if let Err(why) = written {
            // the client's fields, not the application: nothing is sent
            tracing::info!(upstream = %self.upstream.name, "fastcgi: {why}");
            return error_response(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        }
        if let Input::Whole(b) = &input {
            protocol::stream(&mut out, protocol::STDIN, b);
        }
        if !matches!(input, Input::Stream(..)) {
            protocol::record(&mut out, protocol::STDIN, &[]);
        }
        let peer = cx.req.peer_addr().map(|p| p.ip());
        let mut tried: smallvec::SmallVec<[usize; 2]> = smallvec::SmallVec::new();
        // when no server could be reached, the last one's status (504 for
        // a connect timeout, as nginx's fastcgi_next_upstream)
        let mut last = StatusCode::BAD_GATEWAY;
        loop {
            let Some(pick) = self.upstream.pick(peer, &tried) else {
                return error_response(last);
            };
            tried.push(pick.index);
            let server = &self.upstream.servers[pick.index].address;
            let pool = pool(&self.pools, &self.upstream, pick.index, Self::NAME);
            let attempt = self.attempt(&pool, &out, &mut input).await;
            if !matches!(attempt, Err(Failed::Stale | Failed::Unsent(_))) {
                tessera_core::buffers::give(std::mem::take(&mut out));
            }
            let (head, answer) = match attempt {
                Ok(a) => a,
                Err(Failed::Stale) if !matches!(input, Input::Stream(..)) => {
                    // the same server again, on a new connection
                    tried.pop();
                    tracing::debug!(upstream = %self.upstream.name, %server, "fastcgi: a kept connection was closed; retrying");
                    continue;
                }
                Err(Failed::Stale) => {
                    pick.failed();
                    return error_response(StatusCode::BAD_GATEWAY);
                }
                Err(Failed::Unsent(s)) => {
                    if s != StatusCode::SERVICE_UNAVAILABLE {
                        pick.failed();
                    }
                    last = s;
                    continue;
                }
                Err(Failed::Status(s)) => {
                    if s != StatusCode::SERVICE_UNAVAILABLE {
                        pick.failed();
                    }
                    return error_response(s);
                }
            };
            pick.succeeded();
            let mut answer = answer;
            // the head's Content-Length holds where the application's body
            // is sent: a shorter body never looks complete (RFC 9112 §8)
            if gateway::body_follows(cx, &head, &self.sendfile) {
                answer.due = answer.declared;
            } else if *cx.method() == Method::HEAD {
                // what a GET would carry: the declared length, else none
                // (it would stream); the answer is read to its end first,
                // so that a kept connection goes back to the pool
                let declared = answer.declared;
                let _ = answer.take_whole();
                return match declared {
                    Some(n) => {
                        gateway::respond(cx, head, crate::static_file::HeadBody(n), &self.sendfile)
                    }
                    None => gateway::respond(cx, head, gateway::streamed(answer), &self.sendfile),
                }
                .into_response();
            }
            // a small answer often comes whole with its head: sent with its
            // length, without chunked framing or a stream to poll
            match answer.take_whole() {
                Some(Ok(whole)) => {
                    return gateway::respond(cx, head, whole, &self.sendfile).into_response();
                }
                Some(Err(e)) => {
                    tracing::error!(upstream = %self.upstream.name, %server, "fastcgi: {}", e.0);
                    return error_response(StatusCode::BAD_GATEWAY);
                }
                None => {}
            }
            return gateway::respond(cx, head, gateway::streamed(answer), &self.sendfile)
                .into_response();
        }
    }

    /// One exchange on a pooled connection: the records, the body, and the
    /// answer's head.
    async fn attempt(
        &self,
        pool: &Rc<Pool>,
        out: &[u8],
        input: &mut Input,
    ) -> Result<(Head, Answer), Failed> {
        let limits = pool.limits();
        let name = &self.upstream.name;
        let mut lease = match pool.lease(None).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(upstream = %name, server = %pool.address(), "fastcgi: {e}");
                return Err(Failed::Unsent(match e {
                    tessera_core::upstream::pool::LeaseError::ConnectTimeout => {
                        StatusCode::GATEWAY_TIMEOUT
                    }
                    tessera_core::upstream::pool::LeaseError::Busy => {
                        StatusCode::SERVICE_UNAVAILABLE
                    }
                    _ => StatusCode::BAD_GATEWAY,
                }));
            }
        };
        let reused = lease.reused();
        let sent = tokio::time::timeout(limits.send, send(lease.conn(), out, input)).await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(SendError::Body(r))) => return Err(Failed::Status(r)),
            Ok(Err(SendError::Io(_))) if reused => return Err(Failed::Stale),
            Ok(Err(SendError::Io(e))) => {
                tracing::error!(upstream = %name, "fastcgi: sending: {e}");
                return Err(Failed::Status(StatusCode::BAD_GATEWAY));
            }
            Err(_) => {
                tracing::error!(upstream = %name, "fastcgi: sending: send-timeout");
                return Err(Failed::Status(StatusCode::GATEWAY_TIMEOUT));
            }
        }
        let mut answer = Answer {
            lease: Some(lease),
            buf: tessera_core::buffers::take(),
            pending: BytesMut::new(),
            read: limits.read,
            sleep: None,
            done: false,
            upstream: Arc::clone(&self.upstream),
            got_any: false,
            keep: self.keep_conn,
            declared: None,
            due: None,
        };
        match tokio::time::timeout(limits.read, answer.head()).await {
            Ok(Ok(h)) => Ok((h, answer)),
            Ok(Err(_)) if reused && !answer.got_any => Err(Failed::Stale),
            // the answer's own timer may fire first: a timeout either way
            Ok(Err(why)) if why == READ_TIMEOUT => {
                tracing::error!(upstream = %name, "fastcgi: no answer (read-timeout)");
                Err(Failed::Status(StatusCode::GATEWAY_TIMEOUT))
            }
            Ok(Err(why)) => {
                tracing::error!(upstream = %name, "fastcgi: {why}");
                Err(Failed::Status(StatusCode::BAD_GATEWAY))
            }
            Err(_) => {
                tracing::error!(upstream = %name, "fastcgi: no answer (read-timeout)");
                Err(Failed::Status(StatusCode::GATEWAY_TIMEOUT))
            }
        }
    }
}

/// Why sending failed.
enum SendError {
    /// The connection failed.
    Io(std::io::Error),
    /// The client's body failed: answer with this.
    Body(StatusCode),
}

/// Writes the records, then a streamed body as STDIN records and its end.
async fn send(io: &mut Io, out: &[u8], input: &mut Input) -> Result<(), SendError> {
    let now = io.write_now(out).map_err(SendError::Io)?;
    io.write_all(&out[now..]).await.map_err(SendError::Io)?;
    let Input::Stream(body, _) = input else {
        return Ok(());
    };
    let mut rec = BytesMut::with_capacity(protocol::MAX_CONTENT + 16);
    while let Some(piece) = gateway::next(body).await {
        let chunk = piece.map_err(|e| SendError::Body(gateway::body_error(&e).status()))?;
        rec.clear();
        protocol::stream(&mut rec, protocol::STDIN, &chunk);
        io.write_all(&rec).await.map_err(SendError::Io)?;
    }
    rec.clear();
    protocol::record(&mut rec, protocol::STDIN, &[]);
    io.write_all(&rec).await.map_err(SendError::Io)
}

/// A connection to the application.
type Io = tessera_core::upstream::Connection;

/// The application's answer: records read from the connection, STDOUT
/// yielded as the body after the CGI header block. After END_REQUEST a
/// clean connection goes back to the pool.
struct Answer {
    lease: Option<Lease>,
    buf: BytesMut,
    /// STDOUT bytes not yet yielded (the start of the body after the head).
    pending: BytesMut,
    read: Duration,
    sleep: Option<Pin<Box<actix_rt::time::Sleep>>>,
    done: bool,
    /// For the error log's `upstream` name.
    upstream: Arc<Upstream>,
    /// Any byte came from the application.
    got_any: bool,
    /// The request asked the application to keep the connection.
    keep: bool,
    /// The head's `Content-Length`, if it has one.
    declared: Option<u64>,
    /// Body bytes still due by that length, when it is enforced: a body
    /// that ends short fails, bytes past it are dropped (as `cgi` does).
    due: Option<u64>,
}

/// Why an answer failed when the application sent nothing for
/// `read-timeout` (504, not 502).
const READ_TIMEOUT: &str = "no bytes within read-timeout";

/// Why an answer failed whose body ended short of its Content-Length.
const SHORT: &str = "the body ended short of its Content-Length";

/// The application broke off or stalled while its body was being sent.
#[derive(Debug, thiserror::Error)]
#[error("fastcgi application: {0}")]
struct AnswerFailed(&'static str);

impl Answer {
    /// Reads records until the CGI header block is complete.
    async fn head(&mut self) -> Result<Head, &'static str> {
        loop {
            if let Some((end, skip)) = gateway::head::find_end(&self.pending) {
                let head = self.pending.split_to(end);
                let _ = self.pending.split_to(skip);
                self.declared = crate::eof_output::declared_length(&head)?;
                return Head::parse(&head);
            }
            if self.pending.len() > MAX_HEAD {
                return Err("CGI header block too large");
            }
            match std::future::poll_fn(|cx| self.poll_record(cx)).await {
                Some(Ok(b)) => self.pending.extend_from_slice(&b),
                Some(Err(e)) => return Err(e.0),
                None => return Err("the application ended before its header block"),
            }
        }
    }

    /// The whole body when the rest of the answer, up to END_REQUEST, is
    /// already read, cut at the length due; `None` (nothing lost: what was
    /// taken waits in `pending`) when more is to come.
    ///
    /// # Errors
    /// The body is shorter than the length due.
    fn take_whole(&mut self) -> Option<Result<Bytes, AnswerFailed>> {
        loop {
            match protocol::next(&mut self.buf) {
                Ok(Some(Record::Stdout(b))) => self.pending.extend_from_slice(&b),
                Ok(Some(Record::Stderr(b))) => {
                    for line in String::from_utf8_lossy(&b).lines() {
                        tracing::warn!(upstream = %self.upstream.name, "fastcgi stderr: {line}");
                    }
                }
                Ok(Some(Record::End)) => {
                    self.end();
                    let mut body = self.pending.split().freeze();
                    if let Some(due) = self.due {
                        if (body.len() as u64) < due {
                            return Some(Err(AnswerFailed(SHORT)));
                        }
                        self.note_over(body.len() as u64 > due);
                        body.truncate(due as usize);
                    }
                    return Some(Ok(body));
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// Logs, once, that the body went past its Content-Length.
    fn note_over(&mut self, over: bool) {
        if over && self.declared.take().is_some() {
            tracing::warn!(upstream = %self.upstream.name, "fastcgi: the body went past its Content-Length; cut there");
        }
    }

    /// The request is complete: the connection is reused when nothing
    /// unread is left on it, closed otherwise.
    fn end(&mut self) {
        self.done = true;
        if let Some(l) = self.lease.take() {
            if self.keep && self.buf.is_empty() {
                l.release();
            }
        }
    }

    /// The next STDOUT bytes; STDERR is logged on the way.
    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, AnswerFailed>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match protocol::next(&mut self.buf) {
                Ok(Some(Record::Stdout(b))) if !b.is_empty() => {
                    self.sleep = None;
                    return Poll::Ready(Some(Ok(b)));
                }
                Ok(Some(Record::Stderr(b))) => {
                    for line in String::from_utf8_lossy(&b).lines() {
                        tracing::warn!(upstream = %self.upstream.name, "fastcgi stderr: {line}");
                    }
                    continue;
                }
                Ok(Some(Record::End)) => {
                    self.end();
                    return Poll::Ready(None);
                }
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(why) => {
                    self.lease = None;
                    return Poll::Ready(Some(Err(AnswerFailed(why))));
                }
            }
            // the pooled 1 KiB buffer takes a small answer whole; a larger
            // one is read 16 KiB at a time once the buffer is nearly full
            if self.buf.capacity() - self.buf.len() < 512 {
                self.buf.reserve(16 * 1024);
            }
            let Some(lease) = self.lease.as_mut() else {
                return Poll::Ready(Some(Err(AnswerFailed("the connection is gone"))));
            };
            match tokio_util::io::poll_read_buf(Pin::new(lease.conn()), cx, &mut self.buf) {
                Poll::Ready(Ok(0)) => {
                    self.lease = None;
                    return Poll::Ready(Some(Err(AnswerFailed(
                        "the connection ended before END_REQUEST",
                    ))));
                }
                Poll::Ready(Ok(_)) => self.got_any = true,
                Poll::Ready(Err(_)) => {
                    self.lease = None;
                    return Poll::Ready(Some(Err(AnswerFailed("the connection failed"))));
                }
                Poll::Pending => {
                    let read = self.read;
                    let sleep = self
                        .sleep
                        .get_or_insert_with(|| Box::pin(actix_rt::time::sleep(read)));
                    if std::future::Future::poll(sleep.as_mut(), cx).is_ready() {
                        self.lease = None;
                        return Poll::Ready(Some(Err(AnswerFailed(READ_TIMEOUT))));
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        tessera_core::buffers::give(std::mem::take(&mut self.buf));
    }
}

impl Stream for Answer {
    type Item = Result<Bytes, AnswerFailed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let item = if this.pending.is_empty() {
                std::task::ready!(this.poll_record(cx))
            } else {
                Some(Ok(this.pending.split().freeze()))
            };
            let Some(due) = this.due.as_mut() else {
                return Poll::Ready(item);
            };
            match item {
                // bytes past the length are read (the connection stays
                // clean up to END_REQUEST) and dropped
                Some(Ok(mut b)) => {
                    if *due == 0 {
                        this.note_over(true);
                        continue;
                    }
                    if b.len() as u64 > *due {
                        b.truncate(*due as usize);
                    }
                    *due -= b.len() as u64;
                    return Poll::Ready(Some(Ok(b)));
                }
                None if *due > 0 => return Poll::Ready(Some(Err(AnswerFailed(SHORT)))),
                other => return Poll::Ready(other),
            }
        }
    }
}

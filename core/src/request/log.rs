//! The log phase: a response body that counts what it sent and runs the
//! log modules when it is dropped, and the guard that logs a request whose
//! future was dropped before it was answered (nginx's 499).

use std::cell::Cell;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{HttpMessage, HttpRequest};
use smallvec::SmallVec;

use crate::config::Config;
use crate::context::{Ctx, LogRecord};
use crate::module::{Hooks, Module};
use crate::vhost::Vhost;

/// Marks an offloaded request whose worker gave up on it (its client went
/// away, or the shutdown cut it off) while a blocking hook ran: its answer
/// is dropped unsent and logged as [`UNANSWERED`].
pub(super) struct Abandoned;

/// The status logged for a request that ended before it was answered:
/// nginx's 499 ("client closed request"), also used when the server's
/// `shutdown-timeout` cut the request off.
pub(super) const UNANSWERED: u16 = 499;

pub(super) struct LogState {
    /// The file body's handle, when the engine may send it itself.
    pub(super) sendfile: Option<crate::body::SendFile>,
    pub(super) req: HttpRequest,
    pub(super) cfg: Arc<Config>,
    pub(super) vhost: usize,
    pub(super) status: StatusCode,
    pub(super) user: Option<String>,
    pub(super) notes: crate::context::Notes,
    pub(super) ext: crate::context::Extensions,
    pub(super) modules: SmallVec<[Arc<dyn Module>; 2]>,
    pub(super) start_time: SystemTime,
    pub(super) started: Instant,
    pub(super) sent: u64,
    pub(super) complete: bool,
    /// Counted until the line is written (dropped after `on_log`).
    pub(super) _pending: Option<PendingLine>,
}

/// Log lines still to be written by requests on actix-http connections,
/// whose HTTP/2 streams can outlive their connection: the graceful stop
/// waits for none to be left before the logs' last flush
/// (`server::connections_dropped`). Tessera's engine needs no count (its
/// workers report done after their last connection), nor do requests
/// offloaded to the blocking pool (a hook cannot be interrupted: the stop
/// does not wait for it).
static PENDING_LINES: AtomicI64 = AtomicI64::new(0);

thread_local! {
    /// This thread runs an offloaded request (`request::offload`).
    static OFFLOADED: Cell<bool> = const { Cell::new(false) };
}

/// Log lines still to be written by actix-http's requests (see
/// [`PENDING_LINES`]).
pub(crate) fn pending_lines() -> i64 {
    PENDING_LINES.load(Ordering::Acquire)
}

/// Marks the current thread as running an offloaded request, or no longer.
pub(super) fn set_offloaded(on: bool) {
    OFFLOADED.with(|o| o.set(on));
}

/// One line to be written, counted in [`PENDING_LINES`] while it lives.
pub(super) struct PendingLine(());

impl PendingLine {
    /// A count for `req`'s line when it runs on an actix-http connection,
    /// not offloaded; `None` otherwise (one branch on Tessera's engine).
    pub(super) fn of(req: &HttpRequest) -> Option<PendingLine> {
        if crate::body::on_engine(req) || OFFLOADED.with(Cell::get) {
            return None;
        }
        PENDING_LINES.fetch_add(1, Ordering::AcqRel);
        Some(PendingLine(()))
    }
}

impl Drop for PendingLine {
    fn drop(&mut self) {
        PENDING_LINES.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that counts the bytes it yields and runs the log phase when it
/// is dropped: after the last byte, or when the client went away.
pub(super) struct LoggedBody {
    pub(super) body: BoxBody,
    pub(super) state: LogState,
}

impl MessageBody for LoggedBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_next(cx) {
            Poll::Ready(Some(Ok(b))) => {
                this.state.sent += b.len() as u64;
                Poll::Ready(Some(Ok(b)))
            }
            Poll::Ready(None) => {
                this.state.complete = true;
                Poll::Ready(None)
            }
            other => other,
        }
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        let s = &self.state;
        let vhost = &s.cfg.vhosts.all()[s.vhost];
        // bytes the engine sent with sendfile(2) never passed through here
        let (body_bytes, complete) = match s.sendfile.as_ref().and_then(|h| h.engine_sent()) {
            Some((sent, total)) => (s.sent + sent, sent == total),
            None => (
                s.sent,
                s.complete || matches!(self.body.size(), BodySize::None | BodySize::Sized(0)),
            ),
        };
        // an offloaded answer whose worker gave up on it was never sent
        let status = if body_bytes == 0 && s.req.extensions().contains::<Abandoned>() {
            StatusCode::from_u16(UNANSWERED).unwrap_or(s.status)
        } else {
            s.status
        };
        let rec = LogRecord {
            req: &s.req,
            vhost: &vhost.info,
            vhost_label: &vhost.label,
            status,
            body_bytes,
            start_time: s.start_time,
            started: s.started,
            user: s.user.as_deref(),
            complete,
            notes: &s.notes,
            ext: &s.ext,
        };
        for m in &s.modules {
            m.on_log(&rec);
        }
    }
}

/// Holds a request's context while its handlers run. Dropped before it was
/// answered ([`Unanswered::answered`] not called: the engine saw the client
/// close its connection and dropped the request's future, or a shutdown
/// cut it off), it counts the request as 499 and runs the log modules of
/// the rules that matched its path, with nothing sent, as nginx logs a
/// request whose client closed first. One branch per request otherwise.
pub(super) struct Unanswered<'a> {
    cx: Option<Ctx<'a>>,
    req: &'a HttpRequest,
    vhost: &'a Vhost,
    began: Instant,
    /// Dropped after the drop's line; handed on by [`Unanswered::answered`].
    pending: Option<PendingLine>,
}

impl<'a> Unanswered<'a> {
    pub(super) fn new(cx: Ctx<'a>, req: &'a HttpRequest, vhost: &'a Vhost, began: Instant) -> Self {
        Unanswered {
            cx: Some(cx),
            req,
            vhost,
            began,
            pending: PendingLine::of(req),
        }
    }

    /// The context, while the request is unanswered.
    pub(super) fn cx(&mut self) -> &mut Ctx<'a> {
        match self.cx.as_mut() {
            Some(cx) => cx,
            None => unreachable!("the context is taken only when the request is answered"),
        }
    }

    /// The request has its answer: the context goes back, with the count
    /// of its line to come (for [`LogState`]); nothing is logged here.
    pub(super) fn answered(mut self) -> (Ctx<'a>, Option<PendingLine>) {
        match self.cx.take() {
            Some(cx) => (cx, self.pending.take()),
            None => unreachable!("answered once"),
        }
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        let Some(cx) = self.cx.take() else {
            return;
        };
        // a panic unwinding through a handler is not a client's close
        if std::thread::panicking() {
            return;
        }
        let vhost = self.vhost;
        vhost.counters.record(UNANSWERED, 0, self.began.elapsed());
        let active = vhost.pipeline.resolve(&crate::rule::MatchInput {
            path: cx.path(),
            req: Some(self.req),
            document_root: &vhost.info.document_root,
            internal: cx.redirected(),
        });
        let log: SmallVec<[&Arc<dyn Module>; 2]> = active
            .iter()
            .filter(|(h, _)| h.contains(Hooks::LOG))
            .map(|(_, m)| *m)
            .collect();
        if log.is_empty() {
            return;
        }
        let (user, notes, ext) = cx.into_parts();
        let rec = LogRecord {
            req: self.req,
            vhost: &vhost.info,
            vhost_label: &vhost.label,
            status: StatusCode::from_u16(UNANSWERED).unwrap_or(StatusCode::BAD_REQUEST),
            body_bytes: 0,
            start_time: SystemTime::now()
                .checked_sub(self.began.elapsed())
                .unwrap_or_else(SystemTime::now),
            started: self.began,
            user: user.as_deref(),
            complete: false,
            notes: &notes,
            ext: &ext,
        };
        for m in log {
            m.on_log(&rec);
        }
    }
}

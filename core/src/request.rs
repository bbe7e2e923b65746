//! The request path: protocol checks, vhost selection, rule resolution, the
//! phases of the resolved pipeline, and the log phase over the body sent;
//! with the service glue that runs it on a worker, on the blocking pool for
//! blocking hooks, or as a future for an asynchronous content phase.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode, Version};
use actix_web::{HttpRequest, HttpResponse};
use smallvec::SmallVec;
use std::rc::Rc;

use crate::config::{Config, ServerSettings};
use crate::context::{request_host, Ctx};
use crate::explain::{Observe, Phase};
use crate::module::{Hooks, Module, Outcome};
use crate::response::error_response;
use crate::supervisor::Runtime;

mod log;
pub(crate) use log::pending_lines;
use log::{LogState, LoggedBody, Unanswered};

/// The port of the first bound TLS listener (0 before binding or without TLS),
/// for `https-redirect` when `listen-tls` asks for port 0.
pub(crate) static TLS_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// `Allow` for `OPTIONS *` (RFC 9110 §9.3.7): the methods Tessera serves.
const ALLOW_ALL: HeaderValue = HeaderValue::from_static("GET, HEAD, OPTIONS");
const SERVER: HeaderValue = HeaderValue::from_static("tessera");

/// The app's one service: realip, the HTTP/2 busy check, `X-Tessera-Explain`
/// and health answers, then the request on this worker ([`handle`]), on the
/// blocking pool for a vhost with blocking hooks ([`offload`]), or as a
/// future for one with an asynchronous content phase ([`respond_observed`]).
pub(crate) fn dispatch(rt: &Runtime, mut sreq: ServiceRequest) -> HandleFuture {
    // the configuration this request runs on, loaded once
    let cfg = rt.current.load();
    let s = &cfg.server;
    if !s.trusted_proxies.is_empty() {
        crate::realip::apply(&mut sreq, &s.trusted_proxies, s.real_ip_header);
    }
    let (req, payload) = sreq.into_parts();
    let clock = req.conn_data::<Rc<crate::conn::ConnClock>>();
    let busy = clock.is_some_and(|c| {
        c.begin();
        c.h2_busy()
    });
    if busy {
        let mut r = error_response(StatusCode::SERVICE_UNAVAILABLE);
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return HandleFuture::Ready(Some(ServiceResponse::new(req, r)));
    }
    let flight = clock.and_then(|c| c.start());
    // `X-Tessera-Explain` from an `explain-from` client; one
    // emptiness check per request otherwise
    if !cfg.server.explain_from.is_empty() {
        if let Some(mut res) = crate::explain::answer(&cfg, &req) {
            if let Some(f) = flight {
                res = f.track(res);
            }
            return HandleFuture::Ready(Some(ServiceResponse::new(req, res)));
        }
    }
    if let Some(mut res) = crate::health::answer(&cfg.server, &req) {
        if let Some(f) = flight {
            res = f.track(res);
        }
        return HandleFuture::Ready(Some(ServiceResponse::new(req, res)));
    }
    let (blocks, later, vhost) = vhost_needs(&cfg, &req);
    if blocks {
        let cfg = arc_swap::Guard::into_inner(cfg);
        let handling = clock.map(|c| Handling::new(c.clone()));
        return HandleFuture::Offloaded(Box::pin(async move {
            let res = offload(cfg, req).await;
            drop(handling);
            match flight {
                Some(f) => {
                    let (req, res) = res.into_parts();
                    ServiceResponse::new(req, f.track(res))
                }
                None => res,
            }
        }));
    }
    if later {
        let cfg = arc_swap::Guard::into_inner(cfg);
        return HandleFuture::Offloaded(Box::pin(async move {
            // respond_observed itself: a `respond` between would add its
            // arguments to the boxed future's size (kept under glibc's
            // 1,032-byte per-thread cache)
            let mut res = respond_observed(
                &cfg,
                &req,
                Some(payload),
                &mut crate::explain::Unobserved,
                vhost,
            )
            .await;
            if let Some(f) = flight {
                res = f.track(res);
            }
            ServiceResponse::new(req, res)
        }));
    }
    let mut res = handle(&cfg, &req, vhost, &mut crate::explain::Unobserved);
    if let Some(f) = flight {
        res = f.track(res);
    }
    HandleFuture::Ready(Some(ServiceResponse::new(req, res)))
}

/// The service future: ready at once for the usual request, or waiting for the
/// blocking pool when the vhost uses a module whose hooks may block.
pub(crate) enum HandleFuture {
    Ready(Option<ServiceResponse>),
    Offloaded(Pin<Box<dyn std::future::Future<Output = ServiceResponse>>>),
}

impl std::future::Future for HandleFuture {
    type Output = Result<ServiceResponse, actix_web::Error>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let res = match self.get_mut() {
            HandleFuture::Ready(r) => r.take().expect("polled after completion"),
            HandleFuture::Offloaded(f) => std::task::ready!(f.as_mut().poll(cx)),
        };
        Poll::Ready(Ok(close_when_draining(res)))
    }
}

/// From SIGTERM on (the drain, then the graceful shutdown), every HTTP/1.x
/// response but a 101 carries `Connection: close` and its connection
/// closes after it (RFC 9112 §9.6), on both engines: a kept-alive client
/// opens its next connection elsewhere (another node behind the load
/// balancer or Service) instead of racing the close of an idle connection
/// when the shutdown starts. HTTP/2 ignores the connection type.
fn close_when_draining(mut res: ServiceResponse) -> ServiceResponse {
    if crate::health::draining() && res.status() != StatusCode::SWITCHING_PROTOCOLS {
        res.response_mut()
            .head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
    }
    res
}

/// Marks the connection as waiting for an offloaded handler while it lives
/// (the header timeout then ignores bytes that arrive meanwhile).
struct Handling(Rc<crate::conn::ConnClock>);

impl Handling {
    fn new(clock: Rc<crate::conn::ConnClock>) -> Self {
        clock.set_handling(true);
        Handling(clock)
    }
}

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.set_handling(false);
    }
}

/// Whether the vhost this request goes to has a module with blocking hooks
/// ([`Hooks::BLOCKING`]) and one that answers later ([`Hooks::ASYNC`]). The
/// vhost is selected here only when some vhost has either.
fn vhost_needs(cfg: &Config, req: &HttpRequest) -> (bool, bool, Option<usize>) {
    if !cfg.vhosts.any_may_block() && !cfg.vhosts.any_may_async() {
        return (false, false, None);
    }
    let v = cfg.vhosts.select_on(
        request_host(req),
        Some(req.app_config().local_addr()),
        req.app_config().secure(),
    );
    (
        v.pipeline.may_block,
        v.pipeline.may_async,
        Some(v.info.index),
    )
}

/// Moves a value between a worker and the blocking pool.
struct AssertSend<T>(T);
// SAFETY: see `offload`: a value wrapped here is owned by exactly one thread at
// a time and is dropped only on the worker thread it came from.
#[allow(unsafe_code)]
unsafe impl<T> Send for AssertSend<T> {}

/// What a blocking-pool task hands back: the request and the response, both
/// made of worker-thread types (`Rc`s, thread-local pools).
type Outcome2 = (
    HttpRequest,
    HttpResponse,
    Option<crate::body::PrebuiltFields>,
);

/// The meeting point of an offloaded request and its worker (see `offload`).
#[derive(Default)]
struct Handoff {
    /// The worker gave up (the client went away and the future was dropped).
    abandoned: bool,
    /// The finished request and response, waiting for the worker.
    done: Option<AssertSend<Outcome2>>,
    /// `done`'s count in its vhost's counters, recorded by whoever takes
    /// `done`: the worker (its status) or the guard (499).
    count: Option<Count>,
}

/// An offloaded request's outcome on its way back to its worker: taken and
/// dropped there; dropped anywhere else (the worker is gone and actix-rt
/// dropped the future carrying it on the blocking thread), it is leaked,
/// so that no worker-thread `Rc` is touched off its thread.
struct OnWorker(Option<AssertSend<Outcome2>>);

impl Drop for OnWorker {
    fn drop(&mut self) {
        if let Some(out) = self.0.take() {
            std::mem::forget(out);
        }
    }
}

/// An offloaded request's count in its vhost's counters, held until it is
/// known whether its answer is sent: one its worker gave up on counts as
/// [`log::UNANSWERED`], as its log line says.
struct DeferredCount(Option<Count>);

/// A response's count: its vhost's counters, status, announced body bytes
/// and time since dispatch.
type Count = (
    Arc<crate::stats::VhostCounters>,
    u16,
    u64,
    std::time::Duration,
);

impl crate::explain::Observe for DeferredCount {
    fn counted(
        &mut self,
        counters: &Arc<crate::stats::VhostCounters>,
        status: u16,
        body_bytes: u64,
        took: std::time::Duration,
    ) {
        self.0 = Some((counters.clone(), status, body_bytes, took));
    }
}

/// Drops the finished request on the worker if the worker's future goes away.
struct HandoffGuard(Arc<std::sync::Mutex<Handoff>>);

impl Drop for HandoffGuard {
    fn drop(&mut self) {
        let mut h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        h.abandoned = true;
        // Dropped here, on the worker thread, if the task already finished:
        // never sent, so logged (log::LoggedBody) and counted as 499.
        if let Some(AssertSend((req, res, fields))) = h.done.take() {
            actix_web::HttpMessage::extensions_mut(&req).insert(log::Abandoned);
            if let Some((counters, _, _, took)) = h.count.take() {
                counters.record(log::UNANSWERED, 0, took);
            }
            drop(h);
            drop((res, fields, req));
        }
    }
}

/// Handles the request on the blocking thread pool (for plugins that declare
/// `FLAG_MAY_BLOCK`), so that a blocking hook never stalls a worker.
///
/// Thread safety: the request (an `Rc` of the worker) moves to the pool thread
/// whole, and the worker keeps no clone while the task runs; the task hands the
/// request and the response back under a lock. If the worker's future was
/// dropped meanwhile (the client went away), the task sends them to the
/// worker's arbiter to be dropped there, so no worker-thread object is ever
/// dropped, or its reference count changed, on two threads.
async fn offload(cfg: Arc<Config>, req: HttpRequest) -> ServiceResponse {
    let handoff = Arc::new(std::sync::Mutex::new(Handoff::default()));
    let guard = HandoffGuard(handoff.clone());
    let worker = actix_rt::Arbiter::current();
    let job = AssertSend(req);
    let task = actix_web::rt::task::spawn_blocking(move || {
        let job = job;
        let req = job.0;
        // A panic must not unwind here with the request on this thread.
        crate::body::put_prebuilt(None);
        log::set_offloaded(true);
        // counted once it is known whether the answer is sent
        let mut count = DeferredCount(None);
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handle(&cfg, &req, None, &mut count)
        }));
        log::set_offloaded(false);
        // the lines a handler handed over go back with the response (none
        // with a panic's 500)
        let fields = crate::body::take_prebuilt();
        let (res, fields) = match res {
            Ok(r) => (r, fields),
            Err(_) => (error_response(StatusCode::INTERNAL_SERVER_ERROR), None),
        };
        let mut h = handoff.lock().unwrap_or_else(|e| e.into_inner());
        if h.abandoned {
            if let Some((counters, _, _, took)) = count.0 {
                counters.record(log::UNANSWERED, 0, took);
            }
            drop(h);
            // never sent: its log line says 499 (log::LoggedBody)
            actix_web::HttpMessage::extensions_mut(&req).insert(log::Abandoned);
            let mut out = OnWorker(Some(AssertSend((req, res, fields))));
            let back = async move {
                // dropped here, on the worker
                drop(out.0.take());
            };
            if !worker.spawn(back) {
                // The worker is gone (shutdown): actix-rt dropped `back` on
                // this thread, and `OnWorker` leaked what it held.
                tracing::debug!("offloaded request outlived its worker; leaked");
            }
        } else {
            h.done = Some(AssertSend((req, res, fields)));
            h.count = count.0;
        }
    });
    let joined = task.await;
    let (done, count) = {
        let mut h = guard.0.lock().unwrap_or_else(|e| e.into_inner());
        (h.done.take(), h.count.take())
    };
    drop(guard);
    if let Some((counters, status, bytes, took)) = count {
        counters.record(status, bytes, took);
    }
    match (joined, done) {
        (Ok(()), Some(AssertSend((req, res, fields)))) => {
            // on the worker, inside the engine's poll (crate::body)
            if let Some(f) = fields {
                crate::body::set_prebuilt(f);
            }
            ServiceResponse::new(req, res)
        }
        // The task never ran (the runtime is shutting down): the request is
        // gone with it, so answer with a stand-in request.
        _ => {
            tracing::error!("an offloaded request failed on the blocking pool");
            ServiceResponse::new(
                actix_web::test::TestRequest::default().to_http_request(),
                error_response(StatusCode::INTERNAL_SERVER_ERROR),
            )
        }
    }
}

fn is_known_method(m: &Method) -> bool {
    matches!(
        *m,
        Method::GET
            | Method::HEAD
            | Method::POST
            | Method::PUT
            | Method::DELETE
            | Method::OPTIONS
            | Method::PATCH
            | Method::TRACE
            | Method::CONNECT
    )
}

/// Checks of RFC 9110/9112 that come before any module: returns the response to
/// send instead of running the pipeline.
pub(crate) fn protocol_check(req: &HttpRequest, limits: &ServerSettings) -> Option<HttpResponse> {
    checked_host(req, limits).err()
}

/// What [`checked_host`] found in its pass over a request's fields.
struct Checked<'r> {
    /// The host ([`request_host`]), when there is one.
    host: Option<&'r str>,
    /// A precondition (If-Match, If-None-Match, If-Modified-Since,
    /// If-Unmodified-Since, If-Range) or Range field is present.
    conditions: bool,
}

/// [`protocol_check`], giving what it found of a request that passes (the
/// host, as [`request_host`] gives it, and whether conditions are present),
/// or the response to send instead of running the pipeline.
// the error is the response to send, moved out once: boxing it would cost an
// allocation per refusal
#[allow(clippy::result_large_err)]
fn checked_host<'r>(
    req: &'r HttpRequest,
    limits: &ServerSettings,
) -> Result<Checked<'r>, HttpResponse> {
    // RFC 9110 §15.5.15: a request target longer than we accept is 414.
    if req.uri().path_and_query().map_or(0, |p| p.as_str().len()) > limits.max_uri_length {
        return Err(error_response(StatusCode::URI_TOO_LONG));
    }
    // One pass over the fields (this runs on every request): their size, the
    // Content-Length fields, the Host fields and whether conditions are sent.
    let mut size = 0usize;
    let (mut lengths, mut length) = (0u8, None);
    let (mut n, mut host_ok, mut host) = (0u8, true, None);
    let mut conditions = false;
    for (k, v) in req.headers().iter() {
        size += k.as_str().len() + v.len() + 4;
        match *k {
            header::HOST => {
                n = n.saturating_add(1);
                host_ok &= crate::vhost::valid_host_bytes(v.as_bytes());
                host = Some(v);
            }
            header::CONTENT_LENGTH => {
                lengths = lengths.saturating_add(1);
                length = Some(v);
            }
            header::IF_MATCH
            | header::IF_NONE_MATCH
            | header::IF_MODIFIED_SINCE
            | header::IF_UNMODIFIED_SINCE
            | header::IF_RANGE
            | header::RANGE => conditions = true,
            _ => {}
        }
    }
    // RFC 6585 §5: header fields larger than we accept are 431.
    if size > limits.max_request_header_size {
        return Err(error_response(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
    }
    // RFC 9110 §15.5.14: a body larger than we accept is 413 (a chunked body
    // is held to the same limit as it streams).
    if let Some(len) = length {
        // RFC 9112 §6.3: a second Content-Length is a framing error
        // (Tessera's engine refuses it while parsing; HTTP/2 lets it through)
        if lengths > 1 {
            return Err(error_response(StatusCode::BAD_REQUEST));
        }
        if len
            .to_str()
            .ok()
            .and_then(|l| l.trim().parse::<u64>().ok())
            .is_some_and(|l| l > limits.max_body_size)
        {
            return Err(error_response(StatusCode::PAYLOAD_TOO_LARGE));
        }
    }
    // RFC 9112 §3.2: more than one Host, or an invalid one, is 400. An
    // absolute-form target's authority wins over Host, but Host must still be
    // well-formed.
    if n > 1 || !host_ok {
        return Err(error_response(StatusCode::BAD_REQUEST));
    }
    // RFC 9112 §3.2: an HTTP/1.1 request without Host is 400, also with an
    // absolute-form target; HTTP/2 and 3 name the host in `:authority`
    // (RFC 9113 §8.3.1), which the target's authority carries here
    let no_host = match req.version() {
        Version::HTTP_11 => true,
        v => v > Version::HTTP_11 && req.uri().authority().is_none(),
    };
    if n == 0 && no_host {
        return Err(error_response(StatusCode::BAD_REQUEST));
    }
    if let Some(a) = req.uri().authority() {
        if !crate::vhost::valid_host(a.as_str()) {
            return Err(error_response(StatusCode::BAD_REQUEST));
        }
        return Ok(Checked {
            host: Some(a.as_str()),
            conditions,
        });
    }
    Ok(Checked {
        // a valid host is visible ASCII
        host: host.and_then(|h| h.to_str().ok()),
        conditions,
    })
}

/// Runs one request through the pipeline of its vhost, synchronously: the
/// future of [`respond_observed`] is polled once in place (no allocation), which
/// completes unless an asynchronous content handler answers, and those
/// vhosts take [`respond_observed`] as a future instead (see the app service).
fn handle<O: crate::explain::Observe>(
    cfg: &Arc<Config>,
    req: &HttpRequest,
    vhost: Option<usize>,
    obs: &mut O,
) -> HttpResponse {
    let fut = std::pin::pin!(respond_observed(cfg, req, None, obs, vhost));
    match std::future::Future::poll(fut, &mut Context::from_waker(std::task::Waker::noop())) {
        Poll::Ready(r) => r,
        Poll::Pending => {
            tracing::error!(
                "an asynchronous content handler cannot run in a vhost whose plugins may block"
            );
            error_response(StatusCode::INTERNAL_SERVER_ERROR)
        }
    }
}

/// Runs one request through the pipeline of its vhost, reporting to `obs`
/// what answered and why. `payload` is the request body, for the content
/// handlers that take it; `selected` the index of the vhost the host
/// selects, when the caller has selected it already. With
/// [`crate::explain::Unobserved`] (every real request) the reports compile to
/// nothing; with an explanation's observer ([`Observe::DRY`]) back ends are
/// asked to describe the request instead of getting it, and the response is
/// returned before counters and the log phase.
pub(crate) async fn respond_observed<O: Observe>(
    cfg: &Arc<Config>,
    req: &HttpRequest,
    payload: Option<actix_web::dev::Payload>,
    obs: &mut O,
    selected: Option<usize>,
) -> HttpResponse {
    let began = Instant::now();
    let (mut early, host, conditions) = match checked_host(req, &cfg.server) {
        Ok(c) => (None, c.host, c.conditions),
        Err(mut refused) => {
            // the connection closes after a malformed request, as nginx
            // does: what the client sends next is not waited for
            refused
                .head_mut()
                .set_connection_type(actix_web::http::ConnectionType::Close);
            (Some(refused), None, true)
        }
    };
    let vhost = match selected {
        Some(i) if early.is_none() => &cfg.vhosts.all()[i],
        _ => cfg.vhosts.select_on(
            host,
            Some(req.app_config().local_addr()),
            req.app_config().secure(),
        ),
    };
    if early.is_none() && vhost.https_redirect && !req.app_config().secure() {
        early = Some(https_redirect(req, &cfg.server));
    }
    let raw_path = req.uri().path();
    let path = if early.is_some() {
        std::borrow::Cow::Borrowed("/")
    } else if raw_path == "*" {
        early = Some(if req.method() == Method::OPTIONS {
            // RFC 9110 §9.3.7: OPTIONS * asks about the server as a whole.
            let mut r = HttpResponse::Ok().finish();
            r.headers_mut().insert(header::ALLOW, ALLOW_ALL);
            r
        } else {
            error_response(StatusCode::BAD_REQUEST)
        });
        std::borrow::Cow::Borrowed("/")
    } else {
        match crate::path::normalize(raw_path) {
            Ok(p) => p,
            Err(_) => {
                early = Some(error_response(StatusCode::BAD_REQUEST));
                std::borrow::Cow::Borrowed("/")
            }
        }
    };
    let pipeline = &vhost.pipeline;
    // logged as 499 if this future is dropped before the answer (log::Unanswered)
    let mut pending = Unanswered::new(Ctx::new(req, &vhost.info, path), req, vhost, began);
    let cx = pending.cx();
    cx.set_conditions(conditions);
    // set when a body over max-body-size was cut off (only with a body)
    let mut over = None;
    if let Some(p) = payload.filter(|p| !matches!(p, actix_web::dev::Payload::None)) {
        let flag = Rc::new(std::cell::Cell::new(false));
        over = Some(flag.clone());
        // Tessera's engine times a body's reads itself; actix-http (TLS,
        // HTTP/2) does not
        let idle = (!crate::body::on_engine(req))
            .then(|| std::time::Duration::from_secs(cfg.server.client_header_timeout));
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| crate::h1::head::content_length(v.as_bytes()));
        cx.set_body(crate::request_body::RequestBody::new(
            p,
            cfg.server.max_body_size,
            flag,
            declared,
            idle,
        ));
    }
    let resolve = |cx: &Ctx<'_>| {
        pipeline.resolve(&crate::rule::MatchInput {
            path: cx.path(),
            req: Some(req),
            document_root: &vhost.info.document_root,
            internal: cx.redirected(),
        })
    };
    let mut active = if early.is_some() {
        pipeline.resolve_base()
    } else {
        resolve(cx)
    };
    let needs_log = active.iter().any(|(h, _)| h.contains(Hooks::LOG));
    // Tessera's engine writes the response (not an explanation, which
    // shows the map)
    let engine = !O::DRY && crate::body::on_engine(req);
    let times = needs_log.then(|| (SystemTime::now(), began));
    let mut res = match early {
        Some(r) => {
            obs.early();
            r
        }
        None => {
            let mut rewrites = 0;
            loop {
                cx.set_prebuilt_fields_ok(
                    engine && !active.iter().any(|(h, _)| h.contains(Hooks::RESPONSE)),
                );
                match run_handlers(&active, cx, obs).await {
                    Handled::Response(r) => break r,
                    Handled::Rewritten if rewrites < crate::context::MAX_REWRITES => {
                        rewrites += 1;
                        obs.rewritten(cx.path());
                        active = resolve(cx);
                    }
                    Handled::Rewritten => {
                        tracing::warn!(path = %cx.path(), "too many internal rewrites");
                        break error_response(StatusCode::INTERNAL_SERVER_ERROR);
                    }
                }
            }
        }
    };
    let (mut cx, line) = pending.answered();
    for (h, m) in &active {
        if h.contains(Hooks::RESPONSE) {
            m.on_response(&mut cx, &mut res);
        }
    }
    // the engine writes its own `Server` line (h1::write), without the
    // map's insert: one hash and a removal less per request
    if !engine {
        res.headers_mut().insert(header::SERVER, SERVER);
    }
    if O::DRY {
        return res;
    }
    // a body over max-body-size was cut off unread: 413, then close
    if over.is_some_and(|o| o.get()) {
        res.head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
    }
    // No module reads request bodies: on actix-http (TLS, or the "actix"
    // engine) a request with a chunked body gets `Connection: close`, so the
    // connection is not kept alive behind an unread body; Tessera's engine
    // drains it.
    if req.headers().contains_key(header::TRANSFER_ENCODING) && !crate::body::on_engine(req) {
        res.head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
    }
    let sized = match res.body().size() {
        BodySize::Sized(n) if req.method() != Method::HEAD => n,
        _ => 0,
    };
    obs.counted(
        &vhost.counters,
        res.status().as_u16(),
        sized,
        began.elapsed(),
    );
    // A rewrite may have brought in log modules the first resolution lacked.
    let times = times.or_else(|| {
        active
            .iter()
            .any(|(h, _)| h.contains(Hooks::LOG))
            .then(|| (SystemTime::now(), began))
    });
    let Some((start_time, started)) = times else {
        return res;
    };
    let log: SmallVec<[Arc<dyn Module>; 2]> = active
        .iter()
        .filter(|(h, _)| h.contains(Hooks::LOG))
        .map(|(_, m)| Arc::clone(m))
        .collect();
    let (user, notes, ext) = cx.into_parts();
    let status = res.status();
    let sendfile = res.extensions().get::<crate::body::SendFile>().cloned();
    let state = LogState {
        sendfile,
        req: req.clone(),
        cfg: cfg.clone(),
        vhost: vhost.info.index,
        status,
        user,
        notes,
        ext,
        modules: log,
        start_time,
        started,
        sent: 0,
        complete: false,
        _pending: line,
    };
    res.map_body(|_, body| BoxBody::new(LoggedBody { body, state }))
}

/// 301 to the same host, path and query over https (the first TLS listen
/// port, left out when it is 443).
fn https_redirect(req: &HttpRequest, s: &ServerSettings) -> HttpResponse {
    let host = request_host(req)
        .map(crate::vhost::strip_port)
        .unwrap_or("localhost");
    let bound = TLS_PORT.load(std::sync::atomic::Ordering::Relaxed);
    let port = if bound != 0 {
        bound
    } else {
        s.listen_tls
            .first()
            .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
            .map_or(443, |a| a.port())
    };
    let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let loc = if port == 443 {
        format!("https://{host}{pq}")
    } else {
        format!("https://{host}:{port}{pq}")
    };
    let mut r = error_response(StatusCode::MOVED_PERMANENTLY);
    if let Ok(v) = HeaderValue::from_str(&loc) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

enum Handled {
    Response(HttpResponse),
    /// A request-phase hook rewrote the path: resolve the rules again.
    Rewritten,
}

async fn run_handlers<O: Observe>(
    active: &crate::pipeline::Active<'_>,
    cx: &mut Ctx<'_>,
    obs: &mut O,
) -> Handled {
    // lines a handler of an earlier pass (before a rewrite) handed over
    // are not this pass's answer
    crate::body::put_prebuilt(None);
    for (h, m) in active {
        if h.contains(Hooks::REQUEST) {
            let outcome = m.on_request(cx);
            if let Outcome::Respond(r) = outcome {
                obs.answered(m, Phase::Request, cx);
                return Handled::Response(r);
            }
            if cx.take_rewritten() {
                return Handled::Rewritten;
            }
        }
    }
    for (h, m) in active {
        if h.contains(Hooks::CONTENT) {
            if let Some(r) = m.content(cx) {
                obs.answered(m, Phase::Content, cx);
                return Handled::Response(not_implemented(cx.method(), r));
            }
        }
        if O::DRY && h.contains(Hooks::ASYNC) {
            // an explanation never reaches a back end
            if let Some(what) = m.explain(cx) {
                obs.back_end(m, what);
                return Handled::Response(HttpResponse::Ok().finish());
            }
            continue;
        }
        if h.contains(Hooks::ASYNC) {
            let answered = match m.content_async(cx) {
                Some(f) => Some(f.await),
                None => None,
            };
            if let Some(r) = answered {
                // a back end's local redirect (RFC 3875 §6.2.2)
                if cx.take_rewritten() {
                    return Handled::Rewritten;
                }
                return Handled::Response(r);
            }
        }
    }
    Handled::Response(if is_known_method(cx.method()) {
        error_response(cx.fallback_status())
    } else {
        not_implemented_status()
    })
}

/// An extension method (WebDAV's PROPFIND, MKCOL, ...: RFC 9110 §9.1,
/// §16.1) goes through the pipeline, request phase first (access, auth): a
/// back end (proxy, fastcgi, scgi, uwsgi, cgi) takes it as nginx and
/// lighttpd pass it on. Where a file handler refuses it (405) or no content
/// handler answers, the server does not implement it: 501 (RFC 9110
/// §15.6.2). A back end's own answer, 405 included, is left as it is.
fn not_implemented(m: &Method, r: HttpResponse) -> HttpResponse {
    if r.status() == StatusCode::METHOD_NOT_ALLOWED && !is_known_method(m) {
        return not_implemented_status();
    }
    r
}

fn not_implemented_status() -> HttpResponse {
    error_response(StatusCode::NOT_IMPLEMENTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditions(fields: &[(&str, &str)]) -> bool {
        let mut tr = actix_web::test::TestRequest::default().insert_header(("host", "a.test"));
        for f in fields {
            tr = tr.insert_header(*f);
        }
        let req = tr.to_http_request();
        match checked_host(&req, &ServerSettings::default()) {
            Ok(c) => {
                assert_eq!(c.host, Some("a.test"));
                c.conditions
            }
            Err(r) => panic!("refused: {}", r.status()),
        }
    }

    #[test]
    fn the_field_pass_sees_every_precondition_and_range() {
        assert!(!conditions(&[]));
        assert!(!conditions(&[("accept", "*/*"), ("if-modified", "x")]));
        for name in [
            "if-match",
            "if-none-match",
            "if-modified-since",
            "if-unmodified-since",
            "if-range",
            "range",
            "If-Modified-Since",
        ] {
            assert!(conditions(&[("accept", "*/*"), (name, "x")]), "{name}");
        }
    }
}

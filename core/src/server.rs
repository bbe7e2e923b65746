//! The actix-web server assembly and the request path: protocol checks, vhost
//! selection, rule resolution, then the phases of the resolved pipeline.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{fn_service, ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode, Version};
use actix_web::web::Bytes;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use smallvec::SmallVec;

use crate::config::Config;
use crate::context::{request_host, Ctx, LogRecord};
use crate::module::{Hooks, Module, Outcome};
use crate::response::error_response;

/// `Allow` for `OPTIONS *` (RFC 9110 §9.3.7): the methods Tessera serves.
const ALLOW_ALL: HeaderValue = HeaderValue::from_static("GET, HEAD, OPTIONS");
const SERVER: HeaderValue = HeaderValue::from_static("tessera");

/// Binds every listen address, prints `tessera: listening on http://ADDR` for
/// each (on stdout, so that tests and scripts learn a port 0 address), serves
/// until SIGINT/SIGTERM (graceful, up to `shutdown-timeout` seconds) and then runs
/// the modules' shutdown hooks (flushing access logs).
///
/// # Errors
/// A listen address that cannot be bound (in use, no permission).
pub async fn run(cfg: Arc<Config>) -> std::io::Result<()> {
    let s = &cfg.server;
    let spans = s.request_spans;
    let workers = if s.workers == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        s.workers
    };
    let app_cfg = cfg.clone();
    let mut server = HttpServer::new(move || {
        let cfg = app_cfg.clone();
        App::new()
            .wrap(actix_web::middleware::Condition::new(
                spans,
                tracing_actix_web::TracingLogger::default(),
            ))
            .default_service(fn_service(move |sreq: ServiceRequest| {
                let (req, _payload) = sreq.into_parts();
                let res = handle(&cfg, &req);
                std::future::ready(Ok::<_, actix_web::Error>(ServiceResponse::new(req, res)))
            }))
    })
    .workers(workers)
    .keep_alive(if s.keep_alive == 0 {
        actix_web::http::KeepAlive::Disabled
    } else {
        actix_web::http::KeepAlive::Timeout(Duration::from_secs(s.keep_alive))
    })
    .client_request_timeout(Duration::from_secs(s.client_header_timeout))
    .shutdown_timeout(s.shutdown_timeout)
    .max_connections(s.max_connections)
    .tcp_nodelay(true);
    for a in &s.listen {
        server = server
            .bind(a.as_str())
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {a}: {e}")))?;
    }
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for a in server.addrs() {
            let _ = writeln!(out, "tessera: listening on http://{a}");
        }
        let _ = out.flush();
    }
    tracing::info!(
        vhosts = cfg.vhosts.all().len(),
        workers,
        "serving {}",
        cfg.file.display()
    );
    let result = server.run().await;
    cfg.shutdown();
    tracing::info!("stopped");
    result
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
fn protocol_check(req: &HttpRequest) -> Option<HttpResponse> {
    let hosts = req.headers().get_all(header::HOST);
    let mut n = 0;
    for h in hosts {
        n += 1;
        // RFC 9112 §3.2: more than one Host, or an invalid one, is 400. An
        // absolute-form target's authority wins over Host, but Host must still
        // be well-formed.
        if n > 1 || !h.to_str().is_ok_and(crate::vhost::valid_host) {
            return Some(error_response(StatusCode::BAD_REQUEST));
        }
    }
    if n == 0 && req.uri().authority().is_none() && req.version() >= Version::HTTP_11 {
        // RFC 9112 §3.2: an HTTP/1.1 request without Host is 400.
        return Some(error_response(StatusCode::BAD_REQUEST));
    }
    if let Some(a) = req.uri().authority() {
        if !crate::vhost::valid_host(a.as_str()) {
            return Some(error_response(StatusCode::BAD_REQUEST));
        }
    }
    if !is_known_method(req.method()) {
        // RFC 9110 §15.6.2: a method the server does not recognize is 501.
        return Some(error_response(StatusCode::NOT_IMPLEMENTED));
    }
    None
}

/// Runs one request through the pipeline of its vhost.
fn handle(cfg: &Arc<Config>, req: &HttpRequest) -> HttpResponse {
    let early = protocol_check(req);
    let vhost = cfg.vhosts.select(if early.is_some() {
        None
    } else {
        request_host(req)
    });
    let mut early = early;
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
    let mut cx = Ctx::new(req, &vhost.info, path);
    let resolve = |cx: &Ctx<'_>| {
        pipeline.resolve(&crate::rule::MatchInput {
            path: cx.path(),
            req: Some(req),
            document_root: &vhost.info.document_root,
        })
    };
    let mut active = if early.is_some() {
        pipeline.resolve_base()
    } else {
        resolve(&cx)
    };
    let needs_log = active.iter().any(|(h, _)| h.contains(Hooks::LOG));
    let times = needs_log.then(|| (SystemTime::now(), Instant::now()));
    let mut res = match early {
        Some(r) => r,
        None => {
            let mut rewrites = 0;
            loop {
                match run_handlers(&active, &mut cx) {
                    Handled::Response(r) => break r,
                    Handled::Rewritten if rewrites < crate::context::MAX_REWRITES => {
                        rewrites += 1;
                        active = resolve(&cx);
                    }
                    Handled::Rewritten => {
                        tracing::warn!(path = %cx.path(), "too many internal rewrites");
                        break error_response(StatusCode::INTERNAL_SERVER_ERROR);
                    }
                }
            }
        }
    };
    for (h, m) in &active {
        if h.contains(Hooks::RESPONSE) {
            m.on_response(&mut cx, &mut res);
        }
    }
    res.headers_mut().insert(header::SERVER, SERVER);
    // A rewrite may have brought in log modules the first resolution lacked.
    let times = times.or_else(|| {
        active
            .iter()
            .any(|(h, _)| h.contains(Hooks::LOG))
            .then(|| (SystemTime::now(), Instant::now()))
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
    let state = LogState {
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
    };
    res.map_body(|_, body| BoxBody::new(LoggedBody { body, state }))
}

enum Handled {
    Response(HttpResponse),
    /// A request-phase hook rewrote the path: resolve the rules again.
    Rewritten,
}

fn run_handlers(active: &crate::pipeline::Active<'_>, cx: &mut Ctx<'_>) -> Handled {
    for (h, m) in active {
        if h.contains(Hooks::REQUEST) {
            let outcome = m.on_request(cx);
            if let Outcome::Respond(r) = outcome {
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
                return Handled::Response(r);
            }
        }
    }
    Handled::Response(error_response(StatusCode::NOT_FOUND))
}

struct LogState {
    req: HttpRequest,
    cfg: Arc<Config>,
    vhost: usize,
    status: StatusCode,
    user: Option<String>,
    notes: crate::context::Notes,
    ext: crate::context::Extensions,
    modules: SmallVec<[Arc<dyn Module>; 2]>,
    start_time: SystemTime,
    started: Instant,
    sent: u64,
    complete: bool,
}

/// A response body that counts the bytes it yields and runs the log phase when it
/// is dropped: after the last byte, or when the client went away.
struct LoggedBody {
    body: BoxBody,
    state: LogState,
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
        let rec = LogRecord {
            req: &s.req,
            vhost: &vhost.info,
            vhost_label: &vhost.label,
            status: s.status,
            body_bytes: s.sent,
            start_time: s.start_time,
            started: s.started,
            user: s.user.as_deref(),
            complete: s.complete || matches!(self.body.size(), BodySize::None | BodySize::Sized(0)),
            notes: &s.notes,
            ext: &s.ext,
        };
        for m in &s.modules {
            m.on_log(&rec);
        }
    }
}

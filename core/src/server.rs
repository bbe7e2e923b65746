//! The server assembly (actix-server listeners, actix-http connections with
//! Tessera's timeouts, an actix-web App) and the request path: protocol checks, vhost
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
use actix_web::{App, HttpRequest, HttpResponse};
use smallvec::SmallVec;
use std::rc::Rc;

use crate::config::{Config, ServerSettings};
use crate::context::{request_host, Ctx, LogRecord};
use crate::explain::{Observe, Phase};
use crate::module::{Hooks, Module, Outcome};
use crate::response::error_response;
use crate::supervisor::Runtime;

/// The port of the first bound TLS listener (0 before binding or without TLS),
/// for `https-redirect` when `listen-tls` asks for port 0.
static TLS_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// `Allow` for `OPTIONS *` (RFC 9110 §9.3.7): the methods Tessera serves.
const ALLOW_ALL: HeaderValue = HeaderValue::from_static("GET, HEAD, OPTIONS");
const SERVER: HeaderValue = HeaderValue::from_static("tessera");

/// Options of [`run`] that come from the command line.
#[derive(Debug, Default, Clone)]
pub struct RunOptions {
    /// Write the process id here once listening; removed at exit
    /// (`--pid-file`, like nginx's `pid`).
    pub pid_file: Option<std::path::PathBuf>,
}

/// Binds every listen address (TLS ones with the SNI resolver), prints
/// `tessera: listening on http://ADDR` (or `https://`) for each on stdout, so that
/// tests and scripts learn a port 0 address, then serves until SIGINT/SIGTERM
/// (graceful, up to `shutdown-timeout` seconds) and runs the modules' shutdown
/// hooks (flushing access logs). SIGHUP reloads and SIGUSR1 reopens logs (see
/// [`crate::supervisor`]).
///
/// # Errors
/// A listen address that cannot be bound (in use, no permission), or a pid file
/// that cannot be written.
pub async fn run(rt: Arc<Runtime>, opts: RunOptions) -> std::io::Result<()> {
    use actix::Actor;
    use actix_rt::signal::unix::{signal, SignalKind};
    let cfg = rt.current.load_full();
    let s = &cfg.server;
    let spans = s.request_spans;
    let workers = if s.workers == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        s.workers
    };
    let app_rt = rt.clone();
    let make_app = move || {
        let rt = app_rt.clone();
        App::new()
            .wrap(actix_web::middleware::Condition::new(
                spans,
                tracing_actix_web::TracingLogger::default(),
            ))
            .default_service(fn_service(move |mut sreq: ServiceRequest| {
                {
                    let cfg = rt.current.load();
                    let s = &cfg.server;
                    if !s.trusted_proxies.is_empty() {
                        crate::realip::apply(&mut sreq, &s.trusted_proxies, s.real_ip_header);
                    }
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
                let cfg = rt.current.load();
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
                        let mut res = respond(&cfg, &req, Some(payload), vhost).await;
                        if let Some(f) = flight {
                            res = f.track(res);
                        }
                        ServiceResponse::new(req, res)
                    }));
                }
                let mut res = handle(&cfg, &req, vhost);
                if let Some(f) = flight {
                    res = f.track(res);
                }
                HandleFuture::Ready(Some(ServiceResponse::new(req, res)))
            }))
    };
    let mut builder = actix_server::ServerBuilder::default()
        .workers(workers)
        .max_concurrent_connections(s.max_connections)
        .shutdown_timeout(s.shutdown_timeout);
    let listeners = Listeners {
        settings: ConnSettings::new(s),
        shutdown: builder.graceful_shutdown_signal(),
    };
    let engine = listeners.settings.engine == crate::config::Http1Engine::Tessera;
    let mut actix_sockets = 0;
    let mut groups = Vec::new();
    let mut bound = Vec::new();
    for a in &s.listen {
        if engine {
            for addr in resolve(a, "")? {
                let mut g =
                    crate::h1::accept::bind(addr, workers).map_err(|e| listen_error(a, "", e))?;
                g.proxy_protocol = s.listen_proxy_protocol.iter().any(|p| p.trim() == a);
                bound.push((g.addr, "http"));
                groups.push(g);
            }
            continue;
        }
        for lst in bind(a, "")? {
            let addr = lst.local_addr()?;
            builder = listeners.add(builder, lst, None, make_app.clone())?;
            bound.push((addr, "http"));
            actix_sockets += 1;
        }
    }
    for a in &s.listen_tls {
        for lst in bind(a, " (TLS)")? {
            let addr = lst.local_addr()?;
            let tls = crate::tls::server_config(rt.sni.clone());
            builder = listeners.add(builder, lst, Some(tls), make_app.clone())?;
            bound.push((addr, "https"));
            actix_sockets += 1;
        }
    }
    // the engine's workers accept for themselves (crate::h1::accept)
    let (stop_engine, engine_shutdown) = crate::h1::accept::Shutdown::new();
    let running = (!groups.is_empty()).then(|| {
        let make_app = make_app.clone();
        crate::h1::accept::start(
            groups,
            workers,
            move |addr: std::net::SocketAddr| {
                use actix_service::{IntoServiceFactory, ServiceFactory, ServiceFactoryExt};
                let app = make_app()
                    .into_factory()
                    .map(|r| actix_http::Response::from(r).map_into_boxed_body())
                    .map_err(Into::into);
                async move {
                    app.new_service(actix_web::dev::AppConfig::__priv_test_new(
                        false,
                        addr.to_string(),
                        addr,
                    ))
                    .await
                    .map_err(|e| tracing::error!("the app service failed to start: {e:?}"))
                }
            },
            crate::h1::accept::WorkerSettings {
                conn: listeners.settings.h1.clone(),
                max_connections: s.max_connections,
                shutdown_timeout: Duration::from_secs(s.shutdown_timeout),
                trusted: s.trusted_proxies.clone(),
            },
            engine_shutdown,
        )
    });
    crate::upstream::spawn::reconcile(&cfg.upstreams).map_err(std::io::Error::other)?;
    crate::upstream::start_health_checks(&cfg.upstreams);
    let hup = signal(SignalKind::hangup())?;
    let usr1 = signal(SignalKind::user_defined1())?;
    // before the listeners are announced: a SIGTERM right after must stop
    // gracefully, not kill the process
    let stops = StopSignals::new()?;
    crate::supervisor::Supervisor::new(
        rt.clone(),
        vec![
            crate::supervisor::SignalStream::new(hup, crate::supervisor::Sig::Hup),
            crate::supervisor::SignalStream::new(usr1, crate::supervisor::Sig::Usr1),
        ],
    )
    .start();
    if let Some(p) = &opts.pid_file {
        std::fs::write(p, format!("{}\n", std::process::id())).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot write pid file {}: {e}", p.display()),
            )
        })?;
    }
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for (a, scheme) in &bound {
            if *scheme == "https" && TLS_PORT.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                TLS_PORT.store(a.port(), std::sync::atomic::Ordering::Relaxed);
            }
            let _ = writeln!(out, "tessera: listening on {scheme}://{a}");
        }
        let _ = out.flush();
    }
    tracing::info!(
        vhosts = cfg.vhosts.all().len(),
        workers,
        "serving {}",
        cfg.file.display()
    );
    drop(cfg);
    // Tessera takes the stop signals itself for both kinds of listener, so
    // that a graceful stop can drain first (crate::health).
    let server = (actix_sockets > 0).then(|| builder.disable_signals().run());
    let handle = server.as_ref().map(actix_server::Server::handle);
    let mut server_done = std::pin::pin!(async move {
        match server {
            Some(s) => s.await,
            None => std::future::pending().await,
        }
    });
    let graceful = tokio::select! {
        g = stop_signals(&rt, stops) => g?,
        r = &mut server_done => {
            // actix-server ended by itself (it failed to start a worker)
            rt.current.load().shutdown();
            return r;
        }
    };
    if graceful {
        stop_engine.start();
    }
    // actix-server carries out the stop command inside its own future,
    // which is therefore polled while `stop` waits for it
    let actix = async {
        match &handle {
            Some(h) => tokio::join!(h.stop(graceful), &mut server_done).1,
            None => Ok(()),
        }
    };
    let engine = async {
        // after SIGINT or SIGQUIT the process ends at once
        if let (true, Some(r)) = (graceful, running) {
            r.finished().await;
        }
    };
    let (result, ()) = tokio::join!(actix, engine);
    rt.current.load().shutdown();
    crate::upstream::spawn::stop_all();
    if let Some(p) = &opts.pid_file {
        let _ = std::fs::remove_file(p);
    }
    tracing::info!("stopped");
    result
}

/// Every address `a` (`host:port`) resolves to. Errors name `a` and `what`
/// (" (TLS)" or ""); an address that resolves to nothing is an error.
fn resolve(a: &str, what: &str) -> std::io::Result<Vec<std::net::SocketAddr>> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = a
        .to_socket_addrs()
        .map_err(|e| listen_error(a, what, e))?
        .collect();
    if addrs.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("cannot listen on {a}{what}: it resolves to no address"),
        ));
    }
    Ok(addrs)
}

fn listen_error(a: &str, what: &str, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot listen on {a}{what}: {e}"))
}

/// Binds every address `a` resolves to, as actix-web's `HttpServer::bind`
/// does (SO_REUSEADDR, backlog 1024, non-blocking).
fn bind(a: &str, what: &str) -> std::io::Result<Vec<std::net::TcpListener>> {
    let err = |e| listen_error(a, what, e);
    let mut out = Vec::new();
    for addr in resolve(a, what)? {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .map_err(err)?;
        socket.set_reuse_address(true).map_err(err)?;
        socket.bind(&addr.into()).map_err(err)?;
        socket.listen(1024).map_err(err)?;
        socket.set_nonblocking(true).map_err(err)?;
        out.push(socket.into());
    }
    Ok(out)
}

/// SIGTERM, SIGINT and SIGQUIT, taken over from their default action (to
/// end the process) when created.
struct StopSignals {
    term: actix_rt::signal::unix::Signal,
    int: actix_rt::signal::unix::Signal,
    quit: actix_rt::signal::unix::Signal,
}

impl StopSignals {
    /// The next stop signal, logged: `true` for SIGTERM (logged with
    /// `on_term`), `false` for SIGINT or SIGQUIT.
    async fn next(&mut self, on_term: &str) -> bool {
        tokio::select! {
            _ = self.term.recv() => {
                tracing::info!("{on_term}");
                true
            }
            _ = self.int.recv() => {
                tracing::info!("SIGINT received; stopping");
                false
            }
            _ = self.quit.recv() => {
                tracing::info!("SIGQUIT received; stopping");
                false
            }
        }
    }

    fn new() -> std::io::Result<StopSignals> {
        use actix_rt::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            quit: signal(SignalKind::quit())?,
        })
    }
}

/// Waits for a stop signal: SIGTERM stops gracefully (`true`), SIGINT and
/// SIGQUIT at once (`false`), as actix-server and nginx do. After SIGTERM
/// the readiness endpoint answers 503 and the server keeps serving for
/// `drain-delay` seconds first (ended early by another signal; SIGINT or
/// SIGQUIT then stop at once).
async fn stop_signals(rt: &Runtime, mut stops: StopSignals) -> std::io::Result<bool> {
    if !stops
        .next("SIGTERM received; starting graceful shutdown")
        .await
    {
        return Ok(false);
    }
    crate::health::start_draining();
    let delay = rt.current.load().server.drain_delay;
    if delay == 0 {
        return Ok(true);
    }
    tracing::info!("draining for {delay} s (drain-delay) before the graceful shutdown");
    Ok(tokio::select! {
        () = actix_rt::time::sleep(Duration::from_secs(delay)) => true,
        g = stops.next("SIGTERM received again; graceful shutdown now") => g,
    })
}

/// The `HttpServiceBuilder` of a listener at `$addr` whose stream type is
/// `TimedIo<$io>`: actix-web's `HttpServer` settings, with Tessera's.
macro_rules! http_builder {
    ($this:expr, $addr:expr, $io:ty) => {{
        let shutdown = $this.shutdown.clone();
        actix_http::HttpService::build()
            .graceful_shutdown_signal(move || {
                let signal = shutdown.clone();
                async move { signal.notified().await }
            })
            .keep_alive($this.settings.keep_alive)
            .client_request_timeout($this.settings.header_timeout)
            .client_disconnect_timeout(Duration::from_secs(1))
            .h1_allow_half_closed(true)
            .local_addr($addr)
            .on_connect_ext(
                |io: &crate::conn::TimedIo<$io>, ext: &mut actix_http::Extensions| {
                    ext.insert(io.clock());
                    ext.insert(crate::stats::ConnectionGuard::new());
                },
            )
    }};
}

/// The largest request head the engine reads, bytes (actix-http's cap too).
const ENGINE_MAX_HEAD: usize = 128 * 1024;

/// Unread request bodies up to this many bytes are discarded to keep the
/// connection alive (nginx discards any; lighttpd reads up to 64 KiB).
const DRAIN_LIMIT: u64 = 1024 * 1024;

/// The HTTP settings every listener shares (read once at start; see
/// `ServerSettings` for the keys and their defaults).
#[derive(Clone)]
struct ConnSettings {
    keep_alive: actix_web::http::KeepAlive,
    header_timeout: Duration,
    timeouts: crate::conn::Timeouts,
    engine: crate::config::Http1Engine,
    h1: crate::h1::conn::Settings,
}

impl ConnSettings {
    fn new(s: &ServerSettings) -> Self {
        ConnSettings {
            keep_alive: if s.keep_alive == 0 {
                actix_web::http::KeepAlive::Disabled
            } else {
                actix_web::http::KeepAlive::Timeout(Duration::from_secs(s.keep_alive))
            },
            header_timeout: Duration::from_secs(s.client_header_timeout),
            engine: s.http1_engine,
            h1: crate::h1::conn::Settings {
                // the configured 414 and 431 limits are the request path's
                // (protocol_check); these are the parser's hard caps
                limits: crate::h1::head::Limits {
                    max_uri: ENGINE_MAX_HEAD,
                    max_head: ENGINE_MAX_HEAD,
                    max_headers: s.max_request_headers,
                },
                keep_alive: (s.keep_alive > 0).then(|| Duration::from_secs(s.keep_alive)),
                header_timeout: Duration::from_secs(s.client_header_timeout),
                send_timeout: Duration::from_secs(s.send_timeout),
                drain_limit: DRAIN_LIMIT,
            },
            timeouts: crate::conn::Timeouts {
                header: Duration::from_secs(s.client_header_timeout),
                send: Duration::from_secs(s.send_timeout),
                h2_idle: Duration::from_secs(if s.keep_alive > 0 {
                    s.keep_alive
                } else {
                    s.client_header_timeout
                }),
            },
        }
    }
}

/// Builds the service of each listener: what actix-web's `HttpServer::listen`
/// and `listen_rustls_0_23` build, with the connection's stream wrapped in
/// [`crate::conn::TimedIo`] and its clock put in the connection data.
#[derive(Clone)]
struct Listeners {
    settings: ConnSettings,
    shutdown: actix_server::GracefulShutdownSignal,
}

impl Listeners {
    /// Adds a listener: plain HTTP/1.1 when `tls` is `None`; otherwise TLS
    /// (1.2 and 1.3 only, the config of [`crate::tls::server_config`]) with
    /// HTTP/2 or HTTP/1.1 by ALPN.
    fn add<F, I, S, B>(
        &self,
        builder: actix_server::ServerBuilder,
        lst: std::net::TcpListener,
        tls: Option<rustls::ServerConfig>,
        make_app: F,
    ) -> std::io::Result<actix_server::ServerBuilder>
    where
        F: Fn() -> I + Send + Clone + 'static,
        I: actix_service::IntoServiceFactory<S, actix_http::Request>,
        S: actix_service::ServiceFactory<actix_http::Request, Config = actix_web::dev::AppConfig>
            + 'static,
        S::Error: Into<actix_web::Error> + 'static,
        S::InitError: std::fmt::Debug,
        S::Response: Into<actix_http::Response<B>> + 'static,
        <S::Service as actix_service::Service<actix_http::Request>>::Future: 'static,
        S::Service: 'static,
        B: MessageBody + 'static,
    {
        use actix_service::ServiceFactoryExt;
        use actix_tls::accept::rustls_0_23::{Acceptor, TlsStream};
        use actix_tls::accept::TlsError;
        let addr = lst.local_addr()?;
        let limits = self.settings.timeouts;
        let this = self.clone();
        let Some(mut tls) = tls else {
            return builder.listen(format!("tessera-{addr}"), lst, move || {
                let app = make_app()
                    .into_factory()
                    .map_err(|err| err.into().error_response());
                fn_service(move |io: actix_rt::net::TcpStream| {
                    let _ = io.set_nodelay(true);
                    let peer = io.peer_addr().ok();
                    let io = crate::conn::TimedIo::new(io, limits, true);
                    std::future::ready(Ok::<_, actix_http::error::DispatchError>((
                        io,
                        actix_http::Protocol::Http1,
                        peer,
                    )))
                })
                .and_then(
                    http_builder!(this, addr, actix_rt::net::TcpStream).finish(
                        actix_service::map_config(app, move |_| {
                            actix_web::dev::AppConfig::__priv_test_new(
                                false,
                                addr.to_string(),
                                addr,
                            )
                        }),
                    ),
                )
            });
        };
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        builder.listen(format!("tessera-tls-{addr}"), lst, move || {
            let app = make_app()
                .into_factory()
                .map_err(|err| err.into().error_response());
            Acceptor::new(tls.clone())
                .map_init_err(|_| unreachable!("the TLS acceptor factory does not fail"))
                .map_err(TlsError::into_service_error)
                .and_then(fn_service(
                    move |io: TlsStream<actix_rt::net::TcpStream>| {
                        let h2 = io.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
                        let _ = io.get_ref().0.set_nodelay(true);
                        let peer = io.get_ref().0.peer_addr().ok();
                        let proto = if h2 {
                            actix_http::Protocol::Http2
                        } else {
                            actix_http::Protocol::Http1
                        };
                        let io = crate::conn::TimedIo::new(io, limits, !h2);
                        std::future::ready(Ok((io, proto, peer)))
                    },
                ))
                .and_then(
                    http_builder!(this, addr, TlsStream<actix_rt::net::TcpStream>)
                        .finish(actix_service::map_config(app, move |_| {
                            actix_web::dev::AppConfig::__priv_test_new(true, addr.to_string(), addr)
                        }))
                        .map_err(TlsError::Service),
                )
        })
    }
}

/// The service future: ready at once for the usual request, or waiting for the
/// blocking pool when the vhost uses a module whose hooks may block.
enum HandleFuture {
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
type Outcome2 = (HttpRequest, HttpResponse);

/// The meeting point of an offloaded request and its worker (see `offload`).
#[derive(Default)]
struct Handoff {
    /// The worker gave up (the client went away and the future was dropped).
    abandoned: bool,
    /// The finished request and response, waiting for the worker.
    done: Option<AssertSend<Outcome2>>,
}

/// Drops the finished request on the worker if the worker's future goes away.
struct HandoffGuard(Arc<std::sync::Mutex<Handoff>>);

impl Drop for HandoffGuard {
    fn drop(&mut self) {
        let mut h = self.0.lock().unwrap_or_else(|e| e.into_inner());
        h.abandoned = true;
        // Dropped here, on the worker thread, if the task already finished.
        drop(h.done.take());
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
        let res =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle(&cfg, &req, None)))
                .unwrap_or_else(|_| error_response(StatusCode::INTERNAL_SERVER_ERROR));
        let out = AssertSend((req, res));
        let mut h = handoff.lock().unwrap_or_else(|e| e.into_inner());
        if h.abandoned {
            drop(h);
            let back = async move {
                drop(out);
            };
            if !worker.spawn(back) {
                // The worker is gone (shutdown): nothing may drop these here.
                tracing::debug!("offloaded request outlived its worker; leaked");
            }
        } else {
            h.done = Some(out);
        }
    });
    let joined = task.await;
    let done = guard
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .done
        .take();
    drop(guard);
    match (joined, done) {
        (Ok(()), Some(AssertSend((req, res)))) => ServiceResponse::new(req, res),
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
    // RFC 9110 §15.5.15: a request target longer than we accept is 414.
    if req.uri().path_and_query().map_or(0, |p| p.as_str().len()) > limits.max_uri_length {
        return Some(error_response(StatusCode::URI_TOO_LONG));
    }
    // RFC 6585 §5: header fields larger than we accept are 431.
    let head: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if head > limits.max_request_header_size {
        return Some(error_response(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
    }
    // RFC 9110 §15.5.14: a body larger than we accept is 413 (bodies are
    // announced by Content-Length; chunked bodies are never read).
    if let Some(len) = req.headers().get(header::CONTENT_LENGTH) {
        if len
            .to_str()
            .ok()
            .and_then(|l| l.trim().parse::<u64>().ok())
            .is_some_and(|l| l > limits.max_body_size)
        {
            return Some(error_response(StatusCode::PAYLOAD_TOO_LARGE));
        }
    }
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

/// Runs one request through the pipeline of its vhost, synchronously: the
/// future of [`respond`] is polled once in place (no allocation), which
/// completes unless an asynchronous content handler answers, and those
/// vhosts take [`respond`] as a future instead (see the app service).
fn handle(cfg: &Arc<Config>, req: &HttpRequest, vhost: Option<usize>) -> HttpResponse {
    let fut = std::pin::pin!(respond(cfg, req, None, vhost));
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

/// Runs one request through the pipeline of its vhost. `payload` is the
/// request body, for the content handlers that take it; `vhost` the index of
/// the vhost the host selects, when the caller has selected it already.
async fn respond(
    cfg: &Arc<Config>,
    req: &HttpRequest,
    payload: Option<actix_web::dev::Payload>,
    vhost: Option<usize>,
) -> HttpResponse {
    respond_observed(cfg, req, payload, &mut crate::explain::Unobserved, vhost).await
}

/// [`respond`], reporting to `obs` what answered and why. With
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
    let early = protocol_check(req, &cfg.server);
    let vhost = match selected {
        Some(i) if early.is_none() => &cfg.vhosts.all()[i],
        _ => cfg.vhosts.select_on(
            if early.is_some() {
                None
            } else {
                request_host(req)
            },
            Some(req.app_config().local_addr()),
            req.app_config().secure(),
        ),
    };
    let mut early = early;
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
    let mut cx = Ctx::new(req, &vhost.info, path);
    // set when a body over max-body-size was cut off (only with a body)
    let mut over = None;
    if let Some(p) = payload.filter(|p| !matches!(p, actix_web::dev::Payload::None)) {
        let flag = Rc::new(std::cell::Cell::new(false));
        over = Some(flag.clone());
        cx.set_body(crate::request_body::RequestBody::new(
            p,
            cfg.server.max_body_size,
            flag,
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
        resolve(&cx)
    };
    let needs_log = active.iter().any(|(h, _)| h.contains(Hooks::LOG));
    let times = needs_log.then(|| (SystemTime::now(), began));
    let mut res = match early {
        Some(r) => {
            obs.early();
            r
        }
        None => {
            let mut rewrites = 0;
            loop {
                match run_handlers(&active, &mut cx, obs).await {
                    Handled::Response(r) => break r,
                    Handled::Rewritten if rewrites < crate::context::MAX_REWRITES => {
                        rewrites += 1;
                        obs.rewritten(cx.path());
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
    if req.headers().contains_key(header::TRANSFER_ENCODING)
        && (cfg.server.http1_engine == crate::config::Http1Engine::Actix
            || req.app_config().secure())
    {
        res.head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
    }
    let sized = match res.body().size() {
        BodySize::Sized(n) if req.method() != Method::HEAD => n,
        _ => 0,
    };
    vhost
        .counters
        .record(res.status().as_u16(), sized, began.elapsed());
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
                return Handled::Response(r);
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
    Handled::Response(error_response(cx.fallback_status()))
}

struct LogState {
    /// The file body's handle, when the engine may send it itself.
    sendfile: Option<crate::body::SendFile>,
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
        // bytes the engine sent with sendfile(2) never passed through here
        let (body_bytes, complete) = match s.sendfile.as_ref().and_then(|h| h.engine_sent()) {
            Some((sent, total)) => (s.sent + sent, sent == total),
            None => (
                s.sent,
                s.complete || matches!(self.body.size(), BodySize::None | BodySize::Sized(0)),
            ),
        };
        let rec = LogRecord {
            req: &s.req,
            vhost: &vhost.info,
            vhost_label: &vhost.label,
            status: s.status,
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

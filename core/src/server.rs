//! The server assembly: the listeners (Tessera's HTTP/1.1 engine, or
//! actix-server with actix-http connections with Tessera's timeouts, and
//! TLS), one actix-web App per worker whose one service is
//! [`crate::request::dispatch`], the stop and reload signals. The request
//! path itself is in [`crate::request`].

use std::sync::Arc;
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{fn_service, ServiceRequest};
use actix_web::App;

use crate::config::ServerSettings;
use crate::supervisor::Runtime;

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
    let app_rt = rt.clone();
    let service = move || {
        let rt = app_rt.clone();
        fn_service(move |sreq: ServiceRequest| crate::request::dispatch(&rt, sreq))
    };
    // two app types, so that without spans no middleware runs at all
    // (actix-web's `Condition` costs an allocation and two polls a request)
    if rt.current.load().server.request_spans {
        serve(rt, opts, move || {
            App::new()
                .wrap(tracing_actix_web::TracingLogger::default())
                .default_service(service())
        })
        .await
    } else {
        serve(rt, opts, move || App::new().default_service(service())).await
    }
}

/// [`run`] with the app that `make_app` builds for each worker.
async fn serve<F, T, B>(rt: Arc<Runtime>, opts: RunOptions, make_app: F) -> std::io::Result<()>
where
    F: Fn() -> App<T> + Send + Clone + 'static,
    T: actix_service::ServiceFactory<
            ServiceRequest,
            Config = (),
            Response = actix_web::dev::ServiceResponse<B>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
    B: MessageBody + 'static,
{
    use actix::Actor;
    use actix_rt::signal::unix::{signal, SignalKind};
    let cfg = rt.current.load_full();
    let s = &cfg.server;
    let workers = if s.workers == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        s.workers
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
    crate::body::set_engine_serves(engine);
    let mut actix_sockets = 0;
    let mut groups = Vec::new();
    let mut bound = Vec::new();
    for a in &s.listen {
        if engine {
            for addr in resolve(a, "")? {
                let mut g = crate::h1::accept::bind(addr, workers, s.defer_accept)
                    .map_err(|e| listen_error(a, "", e))?;
                g.proxy_protocol = s.listen_proxy_protocol.iter().any(|p| p.trim() == a);
                bound.push((g.addr, "http"));
                groups.push(g);
            }
            continue;
        }
        for lst in bind(a, "", s.defer_accept)? {
            let addr = lst.local_addr()?;
            builder = listeners.add(builder, lst, None, make_app.clone())?;
            bound.push((addr, "http"));
            actix_sockets += 1;
        }
    }
    for a in &s.listen_tls {
        for lst in bind(a, " (TLS)", s.defer_accept)? {
            let addr = lst.local_addr()?;
            let tls = crate::tls::server_config(rt.sni.clone());
            builder = listeners.add(builder, lst, Some(tls), make_app.clone())?;
            bound.push((addr, "https"));
            actix_sockets += 1;
        }
    }
    // the engine's workers accept for themselves (crate::h1::accept)
    let (stop_engine, engine_shutdown) = crate::h1::accept::Shutdown::new();
    let mut running = (!groups.is_empty()).then(|| {
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
    crate::upstream::spawn::reconcile(&cfg.upstreams, None).map_err(std::io::Error::other)?;
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
    // the start-up code's pages, once every worker accepts (see
    // crate::residency); announced after, so a script that waits for the
    // line below sees the server as it runs
    if let Some(r) = running.as_mut() {
        r.ready().await;
    }
    crate::residency::release_startup_pages();
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for (a, scheme) in &bound {
            if *scheme == "https"
                && crate::request::TLS_PORT.load(std::sync::atomic::Ordering::Relaxed) == 0
            {
                crate::request::TLS_PORT.store(a.port(), std::sync::atomic::Ordering::Relaxed);
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
    if graceful && actix_sockets > 0 {
        connections_dropped(Duration::from_secs(5)).await;
    }
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
/// does (SO_REUSEADDR, backlog 1024, non-blocking), with
/// `TCP_DEFER_ACCEPT` when `defer` (`[server] defer-accept`).
fn bind(a: &str, what: &str, defer: bool) -> std::io::Result<Vec<std::net::TcpListener>> {
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
        crate::h1::accept::defer_accept(&socket, defer).map_err(err)?;
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
                    max_uri: crate::h1::head::MAX_TARGET,
                    max_head: ENGINE_MAX_HEAD,
                    max_headers: s.max_request_headers,
                },
                keep_alive: (s.keep_alive > 0).then(|| Duration::from_secs(s.keep_alive)),
                header_timeout: Duration::from_secs(s.client_header_timeout),
                send_timeout: Duration::from_secs(s.send_timeout),
                drain_limit: DRAIN_LIMIT,
                watch_client: !s.ignore_client_abort,
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

/// Waits (at most `limit`, checking every 10 ms) until no connection is
/// open and no request of actix-http has its log line to write:
/// actix-server's workers have stopped, and their runtimes drop the
/// connections and HTTP/2 streams still open at the shutdown timeout just
/// after, whose unanswered requests are then logged (crate::request)
/// before the logs' last flush. A connection is counted in its stream
/// ([`crate::conn::TimedIo`]), and an offloaded request not at all, so a
/// blocking plugin hook still running does not hold this.
async fn connections_dropped(limit: Duration) {
    let until = tokio::time::Instant::now() + limit;
    while (crate::stats::open_connections() > 0 || crate::request::pending_lines() > 0)
        && tokio::time::Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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

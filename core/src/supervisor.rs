//! The supervisor actor: owns the live configuration and the signals that change
//! it.
//!
//! - SIGHUP: reload. The new configuration is read and fully built (plugins
//!   included) to the side; on any error the error is logged and the old
//!   configuration keeps serving, unchanged. Otherwise it is swapped in
//!   atomically: requests already running finish on the old one (they hold a
//!   reference), new requests see the new one, no connection is dropped. TLS
//!   certificates are swapped for new handshakes. Changes that need a restart
//!   (listen addresses, worker count) are named in a warning.
//! - SIGUSR1: every access-log file is reopened (logrotate's convention, as in
//!   nginx and lighttpd); pending lines go to the old file first.
//! - SIGTERM is handled in `crate::server`: graceful shutdown, in-flight
//!   requests get up to `shutdown-timeout` seconds, then the access logs are
//!   flushed and the process exits 0. SIGINT and SIGQUIT stop at once (the
//!   access logs are still flushed).

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use actix::{Actor, Context, StreamHandler};
use actix_rt::signal::unix::Signal;
use arc_swap::ArcSwap;

use crate::config::Config;
use crate::registry::Registry;
use crate::tls::SniResolver;

/// The live configuration and what is needed to rebuild it.
pub struct Runtime {
    /// The configuration requests use now.
    pub current: ArcSwap<Config>,
    /// The configuration file, re-read at reload.
    pub file: PathBuf,
    /// Built-in modules (plugins are added from the file at each load).
    pub registry: Registry,
    /// The certificate resolver of every TLS listener.
    pub sni: Arc<SniResolver>,
}

impl Runtime {
    /// A runtime serving `cfg`, loaded from `file` with `registry`.
    pub fn new(cfg: Config, file: PathBuf, registry: Registry) -> Self {
        let sni = Arc::new(SniResolver::new(cfg.tls.clone()));
        Runtime {
            current: ArcSwap::from_pointee(cfg),
            file,
            registry,
            sni,
        }
    }

    /// Re-reads the configuration file and swaps it in if it is valid.
    ///
    /// # Errors
    /// The configuration error; the old configuration stays in place.
    pub fn reload(&self) -> Result<(), crate::ConfigError> {
        let new = crate::config::load(&self.file, &self.registry)?;
        let old = self.current.load();
        let (a, b) = (&old.server, &new.server);
        // settings read once at start: listeners, workers, the engine and its
        // timers and parser, the app's middleware
        let restart: Vec<&str> = [
            (a.listen != b.listen, "server.listen"),
            (a.listen_tls != b.listen_tls, "server.listen-tls"),
            (
                a.listen_proxy_protocol != b.listen_proxy_protocol,
                "server.listen-proxy-protocol",
            ),
            (a.workers != b.workers, "server.workers"),
            (a.keep_alive != b.keep_alive, "server.keep-alive"),
            (
                a.client_header_timeout != b.client_header_timeout,
                "server.client-header-timeout",
            ),
            (a.send_timeout != b.send_timeout, "server.send-timeout"),
            (
                a.max_connections != b.max_connections,
                "server.max-connections",
            ),
            (
                a.shutdown_timeout != b.shutdown_timeout,
                "server.shutdown-timeout",
            ),
            (a.http1_engine != b.http1_engine, "server.http1-engine"),
            (
                a.max_request_headers != b.max_request_headers,
                "server.max-request-headers",
            ),
            (a.request_spans != b.request_spans, "server.request-spans"),
            (
                a.ignore_client_abort != b.ignore_client_abort,
                "server.ignore-client-abort",
            ),
            (a.defer_accept != b.defer_accept, "server.defer-accept"),
        ]
        .into_iter()
        .filter_map(|(changed, key)| changed.then_some(key))
        .collect();
        if !restart.is_empty() {
            tracing::warn!(
                "reload: {} changed; the new value(s) take effect only after a restart",
                restart.join(", ")
            );
        }
        self.sni.replace(new.tls.clone());
        let retire_after = std::time::Duration::from_secs(a.shutdown_timeout);
        if let Err(e) = crate::upstream::spawn::reconcile(&new.upstreams, Some(retire_after)) {
            // the supervisor keeps trying to listen and start it
            tracing::error!("reload: {e}");
        }
        crate::upstream::start_health_checks(&new.upstreams);
        let old = self.current.swap(Arc::new(new));
        // its requests in flight finish on it, but its pools keep nothing
        old.upstreams.pool_owner().retire();
        let generation = crate::stats::global()
            .generation
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        tracing::info!(
            generation,
            "configuration reloaded from {}",
            self.file.display()
        );
        Ok(())
    }
}

/// Which signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    /// SIGHUP: reload.
    Hup,
    /// SIGUSR1: reopen logs.
    Usr1,
}

/// A stream of one signal's arrivals.
pub struct SignalStream(Signal, Sig);

impl SignalStream {
    /// Wraps a registered signal (register it before the server announces
    /// itself, so that no early signal meets the default action).
    pub fn new(signal: Signal, sig: Sig) -> Self {
        SignalStream(signal, sig)
    }
}

impl futures_core::Stream for SignalStream {
    type Item = Sig;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Sig>> {
        let tag = self.1;
        self.0.poll_recv(cx).map(|o| o.map(|()| tag))
    }
}

/// The actor that reacts to SIGHUP and SIGUSR1.
pub struct Supervisor {
    rt: Arc<Runtime>,
    signals: Vec<SignalStream>,
}

impl Supervisor {
    /// A supervisor for `rt`, listening to the given signal streams.
    pub fn new(rt: Arc<Runtime>, signals: Vec<SignalStream>) -> Self {
        Supervisor { rt, signals }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for s in self.signals.drain(..) {
            <Self as StreamHandler<Sig>>::add_stream(s, ctx);
        }
    }
}

impl StreamHandler<Sig> for Supervisor {
    fn handle(&mut self, sig: Sig, _ctx: &mut Context<Self>) {
        match sig {
            Sig::Hup => {
                tracing::info!("SIGHUP: reloading {}", self.rt.file.display());
                if let Err(e) = self.rt.reload() {
                    tracing::error!("reload failed, the old configuration keeps serving: {e}");
                }
                // the parser's and the modules' builders' pages, mapped again
                crate::residency::release_startup_pages();
            }
            Sig::Usr1 => {
                tracing::info!("SIGUSR1: reopening log files");
                self.rt.current.load().reopen();
            }
        }
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {}
}

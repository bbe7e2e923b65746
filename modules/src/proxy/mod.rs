//! `proxy`: an HTTP reverse proxy to an upstream (lighttpd mod_proxy
//! `proxy.server`, Cherokee's `proxy` handler with its balancers, nginx
//! `proxy_pass` to an `upstream`).
//!
//! ```toml
//! [[upstream]]
//! name = "app"
//! servers = ["127.0.0.1:8081", "127.0.0.1:8082"]
//!
//! [[vhost.rule]]
//! match = { path-prefix = "/api/" }
//! modules = ["proxy"]
//! proxy = { upstream = "app", map-path = { "/api/" = "/" } }
//! ```
//!
//! An asynchronous content handler: the request goes to a server of the
//! upstream chosen by its `balance`, over a per-worker pool of kept-alive
//! HTTP/1.1 connections (awc). Request and response bodies stream both ways
//! with backpressure; neither is buffered whole.
//!
//! # The request to the upstream
//! - Method, path (after `map-path`) and query as received.
//! - Header fields minus hop-by-hop ones (RFC 9110 §7.6.1: `Connection`,
//!   every field `Connection` names, `Keep-Alive`, `Proxy-Connection`, `TE`,
//!   `Trailer`, `Transfer-Encoding`, `Upgrade`) and minus `Expect` (the
//!   engine answered it) and the framing fields (the body is re-framed).
//! - `Host`: see [`HostMode`]. Forwarding fields: see [`ForwardedMode`].
//!
//! # The response
//! Status and header fields minus hop-by-hop ones; the body streams. A
//! refused or failed connection is 502, a timeout 504, each logged with the
//! server's address and counted against the server's health. A request
//! without a body whose bytes never reached a server is retried on the next
//! one (never a request whose body was taken). An upstream that breaks off
//! mid-body makes the client's connection close without a proper end, so the
//! response never looks complete.

mod forward;
mod tunnel;

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use serde::Deserialize;
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::module::ContentFuture;
use tessera_core::response::error_response;
use tessera_core::upstream::{Address, Upstream};
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

pub use forward::{ForwardedMode, HostMode};

/// Options of `[vhost.proxy]` (or a rule's `proxy` table).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ProxyConfig {
    /// The `[[upstream]]` to send requests to. Without it the instance
    /// passes every request on: listing `proxy` in a vhost's `modules` with
    /// no table only places rules' `proxy` tables in the pipeline (before
    /// `static-file`, say).
    #[serde(default)]
    pub upstream: String,
    /// Path prefixes to replace, `{ "/api/" = "/" }`: the longest prefix of
    /// the request path that matches is replaced (nginx `proxy_pass` with a
    /// URI part, lighttpd `proxy.header` `map-urlpath`). Default: none.
    #[serde(default)]
    pub map_path: HashMap<String, String>,
    /// The `Host` sent upstream. Default `"client"`.
    #[serde(default)]
    pub host: HostMode,
    /// Which forwarding fields are sent. Default `"x-forwarded"`.
    #[serde(default)]
    pub forwarded: ForwardedMode,
}

/// A configured `proxy` instance.
pub struct Proxy {
    inner: Option<Inner>,
}

struct Inner {
    upstream: Arc<Upstream>,
    /// One resolved address per server (index as in `upstream.servers`);
    /// `None` for a Unix socket.
    addrs: Vec<Option<SocketAddr>>,
    /// `(from, to)` longest first.
    map_path: Vec<(String, String)>,
    host: HostMode,
    forwarded: ForwardedMode,
    /// Identifies this instance's per-worker client.
    id: usize,
}

impl ModuleDecl for Proxy {
    const NAME: &'static str = "proxy";
    type Config = ProxyConfig;

    fn build(cfg: ProxyConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        if cfg.upstream.is_empty() {
            if !cfg.map_path.is_empty() || cfg.host != HostMode::Client {
                return Err("upstream: required with map-path or host".into());
            }
            return Ok(Proxy { inner: None });
        }
        let upstream = cx.upstreams.get(&cfg.upstream).cloned().ok_or_else(|| {
            let names = cx.upstreams.names();
            format!(
                "upstream: \"{}\" is not declared (declared: {})",
                cfg.upstream,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        })?;
        let mut addrs = Vec::new();
        for s in &upstream.servers {
            match &s.address {
                Address::Tcp(a) => {
                    use std::net::ToSocketAddrs;
                    let first = a
                        .to_socket_addrs()
                        .map_err(|e| format!("upstream \"{}\": {a}: {e}", upstream.name))?
                        .next()
                        .ok_or_else(|| {
                            format!("upstream \"{}\": {a} resolves to no address", upstream.name)
                        })?;
                    addrs.push(Some(first));
                }
                Address::Unix(_) => addrs.push(None),
            }
        }
        let mut map_path: Vec<(String, String)> = cfg.map_path.into_iter().collect();
        for (from, to) in &map_path {
            if !from.starts_with('/') || !to.starts_with('/') {
                return Err(format!(
                    "map-path: \"{from}\" = \"{to}\": both must start with /"
                ));
            }
        }
        map_path.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        if let HostMode::Set(h) = &cfg.host {
            HeaderValue::from_str(h).map_err(|_| format!("host: \"{h}\" is not a valid Host"))?;
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        Ok(Proxy {
            inner: Some(Inner {
                upstream,
                addrs,
                map_path,
                host: cfg.host,
                forwarded: cfg.forwarded,
                id: NEXT.fetch_add(1, Ordering::Relaxed),
            }),
        })
    }
}

thread_local! {
    /// The worker's HTTP client of each proxy instance and server: its own
    /// pool of kept-alive connections (awc's `Client` is not `Send`).
    static CLIENTS: RefCell<HashMap<(usize, usize), awc::Client>> = RefCell::new(HashMap::new());
}

impl Inner {
    fn client(&self, server: usize) -> awc::Client {
        CLIENTS.with(|c| {
            c.borrow_mut()
                .entry((self.id, server))
                .or_insert_with(|| {
                    let u = &self.upstream.config;
                    let connector = awc::Connector::new()
                        .timeout(Duration::from_secs(u.connect_timeout))
                        .limit(u.max_connections)
                        .conn_keep_alive(Duration::from_secs(u.keepalive_timeout.max(1)));
                    let builder = awc::Client::builder()
                        .no_default_headers()
                        .disable_redirects()
                        .timeout(Duration::from_secs(u.read_timeout));
                    match &self.upstream.servers[server].address {
                        Address::Unix(path) => builder
                            .connector(connector.connector(unix_connector(path.clone())))
                            .finish(),
                        Address::Tcp(_) => builder.connector(connector).finish(),
                    }
                })
                .clone()
        })
    }

    /// The path sent upstream: `path` with its longest mapped prefix replaced.
    fn map<'p>(&self, path: &'p str) -> std::borrow::Cow<'p, str> {
        for (from, to) in &self.map_path {
            if let Some(rest) = path.strip_prefix(from.as_str()) {
                let mut p = String::with_capacity(to.len() + rest.len());
                p.push_str(to);
                if to.ends_with('/') && rest.starts_with('/') {
                    p.push_str(&rest[1..]);
                } else {
                    p.push_str(rest);
                }
                return std::borrow::Cow::Owned(p);
            }
        }
        std::borrow::Cow::Borrowed(path)
    }

    async fn forward(&self, cx: &mut Ctx<'_>) -> HttpResponse {
        let req = cx.req;
        // the raw (still percent-encoded) path, mapped; the query as received
        let raw = req.uri().path();
        let mut target = self.map(raw).into_owned();
        if let Some(q) = req.uri().query() {
            target.push('?');
            target.push_str(q);
        }
        let headers = forward::request_headers(
            cx.headers(),
            req,
            &self.host,
            self.forwarded,
            &self.upstream_host(0),
        );
        // a request without framing has no body (RFC 9112 §6.3), whatever
        // payload object the connection gave it
        let framed = req.headers().contains_key(header::TRANSFER_ENCODING)
            || req
                .headers()
                .get(header::CONTENT_LENGTH)
                .is_some_and(|v| v.as_bytes() != b"0");
        let mut body = cx.take_body().filter(|_| framed);
        let has_body = body.is_some();
        if let Some(up) = req.headers().get(header::UPGRADE) {
            use tessera_core::actix_web::HttpMessage;
            if !has_body
                && req
                    .extensions()
                    .contains::<tessera_core::upgrade::CanUpgrade>()
            {
                return self.upgrade(req, &target, headers, up.clone()).await;
            }
        }
        let u = &self.upstream.config;
        let client_ip: Option<IpAddr> = req.peer_addr().map(|a| a.ip());
        let mut tried: smallvec::SmallVec<[usize; 4]> = smallvec::SmallVec::new();
        let idempotent = is_idempotent(req.method());
        let mut stale_retried = false;
        loop {
            let Some(pick) = self.upstream.pick(client_ip, &tried) else {
                return error_response(StatusCode::BAD_GATEWAY);
            };
            tried.push(pick.index);
            let client = self.client(pick.index);
            let mut creq = match self.addrs[pick.index] {
                Some(addr) => client
                    .request(req.method().clone(), format!("http://{addr}{target}"))
                    .address(addr),
                // the connector ignores the authority
                None => client.request(req.method().clone(), format!("http://localhost{target}")),
            }
            .timeout(Duration::from_secs(u.read_timeout));
            *creq.headers_mut() = headers.clone();
            if let HostMode::Upstream = self.host {
                if let Ok(v) = HeaderValue::from_str(&self.upstream_host(pick.index)) {
                    creq.headers_mut().insert(header::HOST, v);
                }
            }
            let sent = match body.take() {
                Some(b) => {
                    let len = req
                        .headers()
                        .get(header::CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    let stream = SendTimed::new(b, Duration::from_secs(u.send_timeout));
                    match len {
                        Some(n) => creq.send_body(awc::body::SizedStream::new(n, stream)).await,
                        None => creq.send_stream(stream).await,
                    }
                }
                None => creq.send().await,
            };
            match sent {
                Ok(res) => {
                    pick.succeeded();
                    return self.respond(res);
                }
                Err(e) => {
                    let server = &self.upstream.servers[pick.index].address;
                    // the client's body failed (over max-body-size, cut
                    // short): not the server's fault
                    if let Some(status) = body_status(&e) {
                        tracing::info!(upstream = %self.upstream.name, %server, "proxy: {e}");
                        return error_response(status);
                    }
                    // a kept-alive connection the server had closed: one more
                    // try, not counted against the server (nginx does the
                    // same for a cached connection)
                    if idempotent && !has_body && !stale_retried && maybe_stale(&e) {
                        tracing::debug!(upstream = %self.upstream.name, %server, "proxy: {e}; retrying");
                        stale_retried = true;
                        tried.pop();
                        continue;
                    }
                    let (status, retry) = classify(&e, idempotent);
                    tracing::error!(
                        upstream = %self.upstream.name,
                        %server,
                        "proxy: {e} ({} {})",
                        req.method(),
                        req.uri()
                    );
                    pick.failed();
                    if retry && !has_body {
                        continue;
                    }
                    return error_response(status);
                }
            }
        }
    }

    /// An `Upgrade` request (WebSocket): its own connection to a server, and
    /// the tunnel after a 101 (see [`tunnel`]).
    async fn upgrade(
        &self,
        req: &tessera_core::actix_web::HttpRequest,
        target: &str,
        mut headers: HeaderMap,
        upgrade: HeaderValue,
    ) -> HttpResponse {
        let u = &self.upstream.config;
        let Some(pick) = self.upstream.pick(req.peer_addr().map(|a| a.ip()), &[]) else {
            return error_response(StatusCode::BAD_GATEWAY);
        };
        if let HostMode::Upstream = self.host {
            if let Ok(v) = HeaderValue::from_str(&self.upstream_host(pick.index)) {
                headers.insert(header::HOST, v);
            }
        }
        let mut head = Vec::with_capacity(512);
        head.extend_from_slice(req.method().as_str().as_bytes());
        head.push(b' ');
        head.extend_from_slice(target.as_bytes());
        head.extend_from_slice(b" HTTP/1.1\r\n");
        for (k, v) in headers.iter() {
            head.extend_from_slice(k.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(v.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"upgrade: ");
        head.extend_from_slice(upgrade.as_bytes());
        head.extend_from_slice(b"\r\nconnection: upgrade\r\n\r\n");
        let server = &self.upstream.servers[pick.index].address;
        let connect = tokio::time::timeout(
            Duration::from_secs(u.connect_timeout),
            tunnel::connect(server, self.addrs[pick.index]),
        );
        let up = match connect.await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::error!(upstream = %self.upstream.name, %server, "proxy: upgrade: {e}");
                pick.failed();
                return error_response(StatusCode::BAD_GATEWAY);
            }
            Err(_) => {
                tracing::error!(upstream = %self.upstream.name, %server, "proxy: upgrade: connect timed out");
                pick.failed();
                return error_response(StatusCode::GATEWAY_TIMEOUT);
            }
        };
        let idle = Duration::from_secs(u.read_timeout);
        match tokio::time::timeout(idle, tunnel::upgrade(up, head, idle)).await {
            Ok(Ok(r)) => {
                pick.succeeded();
                r
            }
            Ok(Err(e)) => {
                tracing::error!(upstream = %self.upstream.name, %server, "proxy: upgrade: {e}");
                pick.failed();
                error_response(StatusCode::BAD_GATEWAY)
            }
            Err(_) => {
                tracing::error!(upstream = %self.upstream.name, %server, "proxy: upgrade: no answer (read-timeout)");
                pick.failed();
                error_response(StatusCode::GATEWAY_TIMEOUT)
            }
        }
    }

    /// The server's `host:port`, as the Host of [`HostMode::Upstream`].
    fn upstream_host(&self, i: usize) -> String {
        match &self.upstream.servers[i].address {
            Address::Tcp(a) => a.clone(),
            Address::Unix(_) => "localhost".into(),
        }
    }

    fn respond<S>(&self, res: awc::ClientResponse<S>) -> HttpResponse
    where
        S: Stream<Item = Result<Bytes, awc::error::PayloadError>> + Unpin + 'static,
    {
        let mut out = HttpResponse::build(res.status());
        let mut headers = HeaderMap::new();
        forward::response_headers(res.headers(), &mut headers);
        let read_timeout = Duration::from_secs(self.upstream.config.read_timeout);
        let known = res
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let upstream = self.upstream.name.clone();
        let body = ReadTimed::new(res, read_timeout, upstream);
        let mut r = match known {
            Some(n) if n > 0 => out.body(tessera_core::actix_web::body::SizedStream::new(n, body)),
            Some(_) => out.finish(),
            None => out.streaming(body),
        };
        for (k, v) in headers.iter() {
            r.headers_mut().append(k.clone(), v.clone());
        }
        r
    }
}

/// An awc connector that reaches `path` (a Unix socket) whatever the URL.
fn unix_connector(
    path: std::path::PathBuf,
) -> impl actix_service::Service<
    actix_tls::connect::ConnectInfo<awc::http::Uri>,
    Response = actix_tls::connect::Connection<awc::http::Uri, actix_rt::net::UnixStream>,
    Error = actix_tls::connect::ConnectError,
> + Clone {
    actix_service::fn_service(
        move |info: actix_tls::connect::ConnectInfo<awc::http::Uri>| {
            let path = path.clone();
            async move {
                let io = actix_rt::net::UnixStream::connect(&path)
                    .await
                    .map_err(actix_tls::connect::ConnectError::Io)?;
                Ok(actix_tls::connect::Connection::new(
                    info.request().clone(),
                    io,
                ))
            }
        },
    )
}

/// The status for a failed send, and whether another server may be tried:
/// nothing reached the server, or the server closed the connection without
/// an answer to an idempotent request (RFC 9110 §9.2.2).
fn classify(e: &awc::error::SendRequestError, idempotent: bool) -> (StatusCode, bool) {
    use awc::error::{ConnectError, SendRequestError as E};
    match e {
        E::Connect(ConnectError::Timeout) => (StatusCode::GATEWAY_TIMEOUT, true),
        E::Connect(ConnectError::Disconnected) => (StatusCode::BAD_GATEWAY, idempotent),
        E::Connect(_) => (StatusCode::BAD_GATEWAY, true),
        E::Timeout => (StatusCode::GATEWAY_TIMEOUT, false),
        _ => (StatusCode::BAD_GATEWAY, false),
    }
}

/// An error a kept-alive connection the server closed meanwhile gives: the
/// request was written, no answer came.
fn maybe_stale(e: &awc::error::SendRequestError) -> bool {
    use awc::error::{ConnectError, SendRequestError as E};
    matches!(
        e,
        E::Connect(ConnectError::Disconnected) | E::Send(_) | E::Response(_)
    )
}

/// GET, HEAD, OPTIONS, TRACE, PUT, DELETE (RFC 9110 §9.2.2).
fn is_idempotent(m: &tessera_core::actix_web::http::Method) -> bool {
    use tessera_core::actix_web::http::Method;
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// A request body that failed on the client's side: 413 over max-body-size,
/// 400 when the client's body was incomplete.
fn body_status(e: &awc::error::SendRequestError) -> Option<StatusCode> {
    let awc::error::SendRequestError::Body(b) = e else {
        return None;
    };
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(b.as_ref());
    while let Some(err) = src {
        if let Some(be) = err.downcast_ref::<tessera_core::request_body::BodyError>() {
            return Some(match be {
                tessera_core::request_body::BodyError::TooLarge { .. } => {
                    StatusCode::PAYLOAD_TOO_LARGE
                }
                tessera_core::request_body::BodyError::Incomplete(_) => StatusCode::BAD_REQUEST,
            });
        }
        src = err.source();
    }
    None
}

impl Module for Proxy {
    fn hooks(&self) -> Hooks {
        Hooks::ASYNC
    }

    fn content_async<'a>(&'a self, cx: &'a mut Ctx<'_>) -> Option<ContentFuture<'a>> {
        let inner = self.inner.as_ref()?;
        Some(Box::pin(inner.forward(cx)))
    }
}

/// The request body on its way up, cut off when a write stalls longer than
/// `send-timeout`.
struct SendTimed {
    body: tessera_core::request_body::RequestBody,
    limit: Duration,
    sleep: Pin<Box<actix_rt::time::Sleep>>,
}

impl SendTimed {
    fn new(body: tessera_core::request_body::RequestBody, limit: Duration) -> Self {
        SendTimed {
            body,
            limit,
            sleep: Box::pin(actix_rt::time::sleep(limit)),
        }
    }
}

impl Stream for SendTimed {
    type Item = Result<Bytes, tessera_core::request_body::BodyError>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_next(cx) {
            Poll::Ready(r) => {
                let next = actix_rt::time::Instant::now() + this.limit;
                this.sleep.as_mut().reset(next);
                Poll::Ready(r)
            }
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(
                    tessera_core::request_body::BodyError::Incomplete(
                        "the client stopped sending (send-timeout)".into(),
                    ),
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

use std::future::Future;

/// The response body on its way down: an error when the upstream stalls
/// longer than `read-timeout` between two reads, or breaks off; the engine
/// then closes the client's connection without ending the body.
struct ReadTimed<S> {
    res: awc::ClientResponse<S>,
    limit: Duration,
    sleep: Pin<Box<actix_rt::time::Sleep>>,
    upstream: String,
}

impl<S> ReadTimed<S> {
    fn new(res: awc::ClientResponse<S>, limit: Duration, upstream: String) -> Self {
        ReadTimed {
            res,
            limit,
            sleep: Box::pin(actix_rt::time::sleep(limit)),
            upstream,
        }
    }
}

/// An upstream failed while its response body was being sent.
#[derive(Debug, thiserror::Error)]
#[error("upstream {0}: {1}")]
pub struct UpstreamBodyError(String, String);

impl<S> Stream for ReadTimed<S>
where
    S: Stream<Item = Result<Bytes, awc::error::PayloadError>> + Unpin,
{
    type Item = Result<Bytes, UpstreamBodyError>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match Pin::new(&mut this.res).poll_next(cx) {
            Poll::Ready(Some(Ok(b))) => {
                let next = actix_rt::time::Instant::now() + this.limit;
                this.sleep.as_mut().reset(next);
                Poll::Ready(Some(Ok(b)))
            }
            Poll::Ready(Some(Err(e))) => {
                tracing::error!(upstream = %this.upstream, "proxy: response body broke off: {e}");
                Poll::Ready(Some(Err(UpstreamBodyError(
                    this.upstream.clone(),
                    e.to_string(),
                ))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    tracing::error!(upstream = %this.upstream, "proxy: response body timed out (read-timeout)");
                    Poll::Ready(Some(Err(UpstreamBodyError(
                        this.upstream.clone(),
                        "read-timeout".into(),
                    ))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

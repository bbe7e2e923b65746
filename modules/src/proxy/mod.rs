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
//! HTTP/1.1 connections ([`client`]). Request and response bodies stream both ways
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
//! that no server got (no connection could be had) goes to the next one,
//! with or without a body; one whose body was taken is never sent again. An upstream that breaks off
//! mid-body makes the client's connection close without a proper end, so the
//! response never looks complete.

mod client;
mod forward;
mod tunnel;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::module::ContentFuture;
use tessera_core::request_body::BodyError;
use tessera_core::response::error_response;
use tessera_core::upstream::pool::{pool, PoolOwner};
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
    /// Keeps the configuration's per-worker pools (shared with every module
    /// table that uses the same upstream) for as long as the instance lives.
    pools: PoolOwner,
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
                    // sent as the Host of `host = "upstream"`, unchecked
                    HeaderValue::from_str(a).map_err(|_| {
                        format!("upstream \"{}\": {a:?} is not a valid host", upstream.name)
                    })?;
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
            // a host name or IP literal with an optional port (RFC 9110
            // §7.2), as a client's Host is checked: no space, tab or
            // control character reaches the upstream's head
            if !tessera_core::vhost::valid_host(h) {
                return Err(format!("host: {h:?} is not a valid Host"));
            }
        }
        Ok(Proxy {
            inner: Some(Inner {
                upstream,
                addrs,
                map_path,
                host: cfg.host,
                forwarded: cfg.forwarded,
                pools: cx.upstreams.pool_owner().clone(),
            }),
        })
    }
}

impl Inner {
    /// The path of the request line sent upstream. With a `map-path` entry
    /// for the path the rules matched, that path mapped (keys and
    /// replacements are decoded paths) and encoded again, as nginx's
    /// `proxy_pass` with a URI part replaces the prefix of the normalized
    /// URI; otherwise the target as the client sent it where it decodes to
    /// the matched path (`proxy_pass` without a URI: `%2F` keeps its
    /// meaning; see [`tessera_core::path::as_sent`]), else the matched path
    /// encoded again (after a rewrite, or where the form sent hides dot
    /// segments). A path that needs neither mapping nor encoding is
    /// borrowed.
    fn target_path<'c>(&self, cx: &'c Ctx<'_>) -> std::borrow::Cow<'c, str> {
        let path = cx.path();
        if self.map_entry(path).is_some() {
            let mapped = self.map(path);
            if let std::borrow::Cow::Owned(s) = tessera_core::path::encode(&mapped) {
                return std::borrow::Cow::Owned(s);
            }
            return mapped;
        }
        tessera_core::path::as_sent(cx.req.uri().path(), path)
            .unwrap_or_else(|| tessera_core::path::encode(path))
    }

    /// The index of the `map-path` entry whose prefix starts `path` (the
    /// one [`Inner::map`] applies).
    fn map_entry(&self, path: &str) -> Option<usize> {
        self.map_path
            .iter()
            .position(|(from, _)| path.starts_with(from.as_str()))
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
        // a request without framing has no body (RFC 9112 §6.3), whatever
        // payload object the connection gave it; without a payload (most
        // requests) the framing is not looked at
        let mut body = cx.take_body();
        let mut length = None;
        if let Some(b) = body.as_mut() {
            use tessera_core::request_body::Framing;
            match b.framing(req).await {
                Framing::Length(n) if n > 0 => length = Some(n),
                Framing::Unknown => {}
                Framing::Length(_) | Framing::None => body = None,
            }
        }
        let has_body = body.is_some();
        let path = self.target_path(cx);
        // the query as received, or the one an internal redirect named
        let query = Some(cx.query()).filter(|q| !q.is_empty());
        if let Some(up) = req.headers().get(header::UPGRADE) {
            use tessera_core::actix_web::HttpMessage;
            if !has_body
                && req
                    .extensions()
                    .contains::<tessera_core::upgrade::CanUpgrade>()
            {
                let headers = forward::request_headers(
                    cx.headers(),
                    req,
                    &self.host,
                    self.forwarded,
                    self.upstream_host(0),
                );
                let mut target = path.into_owned();
                if let Some(q) = query {
                    target.push('?');
                    target.push_str(q);
                }
                return self
                    .upgrade(req, cx.method(), &target, headers, up.clone())
                    .await;
            }
        }
        let client_ip: Option<IpAddr> = req.peer_addr().map(|a| a.ip());
        // the method as received, or GET after an internal redirect
        let head_only = *cx.method() == tessera_core::actix_web::http::Method::HEAD;
        let mut tried: smallvec::SmallVec<[usize; 4]> = smallvec::SmallVec::new();
        let idempotent = is_idempotent(cx.method());
        let mut stale_retried = false;
        // when every server has failed, the last failure's status: a connect
        // timeout is 504 as in nginx, not "no server left" (502)
        let mut last = StatusCode::BAD_GATEWAY;
        loop {
            let Some(pick) = self.upstream.pick(client_ip, &tried) else {
                return error_response(last);
            };
            tried.push(pick.index);
            let head = self.request_head(cx, (&path, query), pick.index);
            let pool = pool(&self.pools, &self.upstream, pick.index, Proxy::NAME);
            let server = &self.upstream.servers[pick.index].address;
            let sent = client::exchange(
                &pool,
                self.addrs[pick.index],
                &head,
                &mut body,
                length,
                head_only,
                cx.prebuilt_fields_ok(),
            )
            .await;
            let failure = match sent {
                Ok(res) => {
                    pick.succeeded();
                    return respond(res);
                }
                Err(f) => f,
            };
            // the client's body failed (over max-body-size, cut short): not
            // the server's fault
            if let client::Failure::Body(e) = &failure {
                tracing::info!(upstream = %self.upstream.name, %server, "proxy: {e}");
                return error_response(match e {
                    BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                    BodyError::Incomplete(_) => StatusCode::BAD_REQUEST,
                });
            }
            // a kept-alive connection the server had closed: one more try,
            // not counted against the server (nginx does the same for a
            // cached connection)
            if matches!(failure, client::Failure::Stale)
                && idempotent
                && !has_body
                && !stale_retried
            {
                tracing::debug!(upstream = %self.upstream.name, %server, "proxy: {failure}; retrying");
                stale_retried = true;
                tried.pop();
                continue;
            }
            let (status, retry) = classify(&failure, idempotent);
            tracing::error!(
                upstream = %self.upstream.name,
                %server,
                "proxy: {failure} ({} {})",
                req.method(),
                req.uri()
            );
            // Tessera's own max-connections is not the server's fault
            // (fastcgi does the same): no mark against its health
            if !matches!(failure, client::Failure::Busy) {
                pick.failed();
            }
            // a body not yet taken (no connection could be had) may go to
            // the next server, as nginx passes a request on that no server
            // got; one partly sent never does
            if retry && (!has_body || body.is_some()) {
                last = status;
                continue;
            }
            return error_response(status);
        }
    }

    /// The request head for server `i`: request line (the target is the
    /// mapped path and the query), the fields of
    /// [`forward::write_request_fields`] (Host per `host`: the server's
    /// `host:port` for `host = "upstream"`), `Connection: close` without
    /// keep-alive, and the blank line (framing fields are added by the
    /// client).
    fn request_head(&self, cx: &Ctx<'_>, (path, query): (&str, Option<&str>), i: usize) -> Vec<u8> {
        let method = cx.method().as_str();
        let mut head = Vec::with_capacity(512 + path.len() + query.map_or(0, str::len));
        head.extend_from_slice(method.as_bytes());
        head.push(b' ');
        head.extend_from_slice(path.as_bytes());
        if let Some(q) = query {
            head.push(b'?');
            head.extend_from_slice(q.as_bytes());
        }
        head.extend_from_slice(b" HTTP/1.1\r\n");
        forward::write_request_fields(
            &mut head,
            cx.headers(),
            cx.req,
            &self.host,
            self.forwarded,
            self.upstream_host(i),
        );
        if self.upstream.config.keepalive == 0 {
            head.extend_from_slice(b"connection: close\r\n");
        }
        head.extend_from_slice(b"\r\n");
        head
    }

    /// An `Upgrade` request (WebSocket): its own connection to a server, and
    /// the tunnel after a 101 (see [`tunnel`]). `method` is the request's, or
    /// GET after an internal redirect ([`Ctx::method`]).
    async fn upgrade(
        &self,
        req: &tessera_core::actix_web::HttpRequest,
        method: &tessera_core::actix_web::http::Method,
        target: &str,
        mut headers: HeaderMap,
        upgrade: HeaderValue,
    ) -> HttpResponse {
        let u = &self.upstream.config;
        // a server that cannot be reached (refused, connect-timeout, or at
        // max-connections) got nothing: the next one is tried, as for any
        // request; when none is left, the last one's status answers
        let client = req.peer_addr().map(|a| a.ip());
        let mut tried: smallvec::SmallVec<[usize; 2]> = smallvec::SmallVec::new();
        let mut last = StatusCode::BAD_GATEWAY;
        let (pick, up) = loop {
            let Some(pick) = self.upstream.pick(client, &tried) else {
                return error_response(last);
            };
            tried.push(pick.index);
            let pool = pool(&self.pools, &self.upstream, pick.index, Proxy::NAME);
            let resolved = self.addrs[pick.index];
            match pick.lease(&pool, resolved, "proxy: upgrade").await {
                Ok(leased) => break leased,
                Err(status) => last = status,
            }
        };
        if let HostMode::Upstream = self.host {
            if let Ok(v) = HeaderValue::from_str(self.upstream_host(pick.index)) {
                headers.insert(header::HOST, v);
            }
        }
        let mut head = Vec::with_capacity(512);
        head.extend_from_slice(method.as_str().as_bytes());
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
        let idle = Duration::from_secs(u.read_timeout);
        let head_only = *method == tessera_core::actix_web::http::Method::HEAD;
        match tokio::time::timeout(idle, tunnel::upgrade(up, head, idle, head_only)).await {
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

    /// The server's `host:port`, as the Host of [`HostMode::Upstream`]
    /// (`localhost` for a Unix socket); no allocation per request.
    fn upstream_host(&self, i: usize) -> &str {
        match &self.upstream.servers[i].address {
            Address::Tcp(a) => a,
            Address::Unix(_) => "localhost",
        }
    }
}

/// The client's response from the server's: status, end-to-end fields
/// (the client left the hop-by-hop ones out), and the body streaming with
/// its length when known.
fn respond(res: client::Response) -> HttpResponse {
    use tessera_core::actix_web::body::{BodyStream, BoxBody, SizedStream};
    let client::Response {
        status,
        head: r,
        length,
        lines,
        mut body,
    } = res;
    if let Some(lines) = lines {
        tessera_core::body::set_prebuilt(lines);
    }
    let body = match length {
        // a body that came whole with its head: sent as bytes, and the
        // connection is back in the pool before the client gets it
        Some(n) if n > 0 => match body.take_whole() {
            Some(whole) => BoxBody::new(whole),
            None => BoxBody::new(SizedStream::new(n, body)),
        },
        // HEAD, 204, 304, or an empty body: the fields say what a GET would get
        Some(_) => BoxBody::new(()),
        None if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED => {
            BoxBody::new(())
        }
        None => BoxBody::new(BodyStream::new(body)),
    };
    r.set_body(body)
}

/// The status for a failed exchange, and whether another server may be
/// tried: nothing reached the server, or (idempotent requests, RFC 9110
/// §9.2.2) the server closed without an answer.
fn classify(f: &client::Failure, idempotent: bool) -> (StatusCode, bool) {
    use client::Failure as F;
    match f {
        F::ConnectTimeout => (StatusCode::GATEWAY_TIMEOUT, true),
        F::Connect(_) => (StatusCode::BAD_GATEWAY, true),
        F::Busy => (StatusCode::SERVICE_UNAVAILABLE, true),
        F::Stale => (StatusCode::BAD_GATEWAY, idempotent),
        F::ReadTimeout => (StatusCode::GATEWAY_TIMEOUT, false),
        F::Send(_) | F::BadResponse(_) => (StatusCode::BAD_GATEWAY, false),
        F::Body(_) => (StatusCode::BAD_REQUEST, false),
    }
}

/// GET, HEAD, OPTIONS, TRACE, PUT, DELETE (RFC 9110 §9.2.2).
fn is_idempotent(m: &tessera_core::actix_web::http::Method) -> bool {
    use tessera_core::actix_web::http::Method;
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

impl Module for Proxy {
    fn hooks(&self) -> Hooks {
        Hooks::ASYNC
    }

    fn content_async<'a>(&'a self, cx: &'a mut Ctx<'_>) -> Option<ContentFuture<'a>> {
        let inner = self.inner.as_ref()?;
        let f = inner.forward(cx);
        Some(Box::pin(f))
    }

    /// `upstream "app", server 10.0.0.1:80 (…), GET /users?x=1`: where
    /// `content_async` would send the request, and the target it would send.
    fn explain(&self, cx: &Ctx<'_>) -> Option<String> {
        let inner = self.inner.as_ref()?;
        let mut target = inner.target_path(cx).into_owned();
        if !cx.query().is_empty() {
            target.push('?');
            target.push_str(cx.query());
        }
        let client = cx.req.peer_addr().map(|a| a.ip());
        Some(format!(
            "{}, {} {target}",
            inner.upstream.describe(client),
            cx.method()
        ))
    }
}

//! The `[server]` table: listeners, workers, limits and timeouts, logging,
//! TLS and the switches of the engine, with their defaults.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The `[server]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerSettings {
    /// Addresses to listen on, `"IP:PORT"` (`"[::1]:8080"` for IPv6); port 0 asks
    /// the OS for a free port. Default `["127.0.0.1:8080"]`; may be `[]` when
    /// `listen-tls` is not (a TLS-only server).
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    /// Worker threads; 0 (the default) means one per CPU core (nginx
    /// `worker_processes auto`).
    #[serde(default)]
    pub workers: usize,
    /// Keep-alive timeout in seconds; 0 disables keep-alive. Default 5
    /// (lighttpd `server.max-keep-alive-idle`, nginx `keepalive_timeout`).
    #[serde(default = "default_keep_alive", alias = "keep_alive")]
    pub keep_alive: u64,
    /// Seconds a client has to send a request head, from its first byte (the
    /// first request of a connection: from the connection's start), on every
    /// request of a keep-alive connection; bytes of an unread request body
    /// that trickle in after the response are timed the same way. The
    /// connection is closed when it runs out. 0 disables the limit. Default 5
    /// (lighttpd `server.max-read-idle`, nginx `client_header_timeout`).
    #[serde(default = "default_header_timeout", alias = "client_header_timeout")]
    pub client_header_timeout: u64,
    /// Seconds a response write may wait for a client that does not read
    /// before the connection is closed; 0 disables the limit. Default 60
    /// (nginx `send_timeout`, lighttpd `server.max-write-idle`).
    #[serde(default = "default_send_timeout", alias = "send_timeout")]
    pub send_timeout: u64,
    /// Seconds in-flight requests get to finish on a graceful shutdown. Default 30.
    #[serde(default = "default_shutdown_timeout", alias = "shutdown_timeout")]
    pub shutdown_timeout: u64,
    /// Maximum concurrent connections per worker. Default 25,000
    /// (nginx `worker_connections`).
    #[serde(default = "default_max_connections", alias = "max_connections")]
    pub max_connections: usize,
    /// Diagnostics level (`error`, `warn`, `info`, `debug`, `trace`, or a
    /// `tracing` filter); `RUST_LOG` overrides it. Default `info`.
    #[serde(default = "default_log_level", alias = "log_level")]
    pub log_level: String,
    /// Open a `tracing` span per request (tracing-actix-web). Default false: it
    /// costs an allocation and a request id per request.
    #[serde(default, alias = "request_spans")]
    pub request_spans: bool,
    /// Keep a request running when its client closes the connection (or
    /// half-closes it) before the answer, as nginx's
    /// `proxy_ignore_client_abort on` (and `fastcgi_`, `scgi_`, `uwsgi_`)
    /// does. Default false: on Tessera's HTTP/1.1 engine the request ends
    /// at once, its back-end connection closes, and it is logged as 499
    /// (nginx's default). actix-http (TLS, HTTP/2, `http1-engine =
    /// "actix"`) does not watch: it ends a request only when the
    /// connection fails, whatever this says.
    #[serde(default, alias = "ignore_client_abort")]
    pub ignore_client_abort: bool,
    /// Accept a connection only once its first bytes (the request, a TLS
    /// ClientHello or a PROXY header) have arrived (Linux
    /// `TCP_DEFER_ACCEPT`, 1 s as nginx's `listen ... deferred` sets it;
    /// h2o's default): the kernel completes the handshake alone, and the
    /// worker wakes once, to accept and read together. A connection that
    /// sends nothing is handed over after about a second (a SYN-ACK
    /// retransmission), and only then counts in `max-connections` and
    /// `client-header-timeout`. Default true; applies to every listener;
    /// ignored where the system has no such option. Restart to change.
    #[serde(default = "default_true", alias = "defer_accept")]
    pub defer_accept: bool,
    /// Addresses to listen on with TLS (`"IP:PORT"`); HTTP/2 is negotiated by
    /// ALPN. Default none. Needs certificates: `[server.tls]` and/or the vhosts'
    /// `tls-certificate`/`tls-key`.
    #[serde(default, alias = "listen_tls")]
    pub listen_tls: Vec<String>,
    /// The default certificate, for clients whose SNI names no vhost with a
    /// certificate of its own. Without it, the default vhost's (or the first)
    /// vhost certificate is used.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Longest request target (path and query) in bytes; longer is 414
    /// (RFC 9110 §15.5.15). Default 8192 (nginx's large header buffer); at
    /// most 65,534 (a configuration error beyond).
    #[serde(default = "default_max_uri", alias = "max_uri_length")]
    pub max_uri_length: usize,
    /// Largest request head (request line and header fields) in bytes; larger
    /// is 431 (RFC 6585 §5). Default 16384. Beyond 128 KiB or 96 fields the
    /// HTTP parser answers 431 by itself.
    #[serde(default = "default_max_head", alias = "max_request_header_size")]
    pub max_request_header_size: usize,
    /// Largest request body announced by Content-Length, in bytes; larger is 413
    /// (RFC 9110 §15.5.14). Default 1 MiB (nginx `client_max_body_size`).
    /// Applies to bodies read by content handlers (`proxy`, `fastcgi`, ...)
    /// as they stream, chunked ones included.
    #[serde(default = "default_max_body", alias = "max_body_size")]
    pub max_body_size: u64,
    /// Proxies and load balancers whose word on the client address is
    /// trusted: IP addresses and CIDR networks. For a request from one of
    /// them, the client address that `access`, `remote-ip` rules, `%h` in the
    /// access log and `X-Forwarded-For` to upstreams see is taken from
    /// `real-ip-header`; from anyone else that header is ignored. Also the
    /// only sources allowed on `listen-proxy-protocol` listeners. Default
    /// `[]` (lighttpd `extforward.forwarder`, nginx `set_real_ip_from`).
    #[serde(default)]
    pub trusted_proxies: crate::realip::TrustedProxies,
    /// `"x-forwarded-for"` (default) or `"forwarded"` (RFC 7239): where
    /// trusted proxies put the client address (lighttpd
    /// `extforward.headers`, nginx `real_ip_header`).
    #[serde(default)]
    pub real_ip_header: crate::realip::RealIpHeader,
    /// Entries of `listen` whose connections start with a PROXY protocol
    /// header (v1 text or v2 binary, HAProxy's), which gives the client
    /// address. A connection from outside `trusted-proxies`, or without a
    /// valid header within `client-header-timeout`, is closed. Needs the
    /// Tessera HTTP/1.1 engine. Default `[]` (nginx `listen ...
    /// proxy_protocol`, lighttpd `extforward.hap-PROXY`).
    #[serde(default)]
    pub listen_proxy_protocol: Vec<String>,
    /// Most header fields in a request head; more is 431 (RFC 6585 §5).
    /// Default 100, at most 256 (nginx has no count, only buffer sizes;
    /// lighttpd `server.max-request-field-size` caps bytes). Applies to the
    /// Tessera engine; actix-http's own cap is 96.
    #[serde(default = "default_max_headers", alias = "max_request_headers")]
    pub max_request_headers: usize,
    /// The HTTP/1.x engine of plain-TCP listeners: `"tessera"` (default, Tessera's
    /// own connection engine, `core/src/h1`) or `"actix"` (actix-http's
    /// dispatcher, for comparison). TLS listeners and HTTP/2 always use
    /// actix-http.
    #[serde(default, alias = "http1_engine")]
    pub http1_engine: Http1Engine,
    /// A path (`"/livez"`) answered 200 on every listener, for any Host, by
    /// the server itself while it runs: the liveness probe of Kubernetes
    /// and load balancers. Never in the access logs. Default: none.
    #[serde(default)]
    pub liveness_path: Option<String>,
    /// A path (`"/readyz"`) answered 200 while the server takes requests and
    /// 503 from the moment SIGTERM arrives (the readiness probe). Never in
    /// the access logs. Default: none.
    #[serde(default)]
    pub readiness_path: Option<String>,
    /// Seconds between SIGTERM and the start of the graceful shutdown, while
    /// the server keeps serving and `readiness-path` answers 503, so that a
    /// load balancer stops sending requests first (Kubernetes' preStop
    /// convention). SIGINT, SIGQUIT or a second SIGTERM end the delay.
    /// Default 0.
    #[serde(default)]
    pub drain_delay: u64,
    /// Clients allowed to ask for an explanation of their request with the
    /// header `X-Tessera-Explain: 1` (`tessera explain` from the running
    /// server; see [`crate::explain`]): IP addresses and CIDR networks,
    /// compared with the client address as `access` sees it (after
    /// `trusted-proxies`). The answer is then the explanation as JSON instead
    /// of the response. Default `[]`: nobody, and the header costs nothing.
    #[serde(default, alias = "explain_from")]
    pub explain_from: crate::realip::TrustedProxies,
}

/// `[server] http1-engine`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Http1Engine {
    /// Tessera's own engine ([`crate::h1`]).
    #[default]
    Tessera,
    /// actix-http's HTTP/1 dispatcher.
    Actix,
}

/// `[server.tls]`: the default certificate.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// PEM certificate chain, relative to the configuration file.
    pub certificate: PathBuf,
    /// PEM private key, relative to the configuration file.
    pub key: PathBuf,
}

fn default_true() -> bool {
    true
}

fn default_max_uri() -> usize {
    8192
}
fn default_max_head() -> usize {
    16384
}
fn default_max_body() -> u64 {
    1 << 20
}

fn default_max_headers() -> usize {
    100
}
fn default_listen() -> Vec<String> {
    vec!["127.0.0.1:8080".into()]
}
fn default_keep_alive() -> u64 {
    5
}
fn default_header_timeout() -> u64 {
    5
}
fn default_send_timeout() -> u64 {
    60
}
fn default_shutdown_timeout() -> u64 {
    30
}
fn default_max_connections() -> usize {
    25_000
}
fn default_log_level() -> String {
    "info".into()
}

impl Default for ServerSettings {
    fn default() -> Self {
        serde_json::from_value(Value::Object(Map::new())).expect("all fields have defaults")
    }
}

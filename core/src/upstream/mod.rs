//! Upstreams: named groups of back-end servers declared once (`[[upstream]]`)
//! and used by any module that talks to a back end (`proxy` today; FastCGI,
//! SCGI and uwsgi next). This is nginx's `upstream` block, lighttpd's
//! `proxy.server` host lists with `proxy.balance`, and Cherokee's balancers.
//!
//! The core keeps what every protocol shares: the server list, the choice of
//! a server (balancing), passive health (a server that fails `max-fails`
//! times is down for `fail-timeout` seconds, nginx's semantics), and the
//! counters the `status` module shows. Transport and connection pools belong
//! to the module that speaks the protocol.

pub mod pool;
pub mod spawn;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

/// How a server is chosen for each request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// In turn (nginx's default, lighttpd `proxy.balance = "round-robin"`,
    /// Cherokee `round_robin`).
    #[default]
    RoundRobin,
    /// The server with the fewest requests in flight (nginx `least_conn`,
    /// lighttpd `"fair"`).
    LeastConn,
    /// By client address, so a client keeps its server while it is up (nginx
    /// `ip_hash`, lighttpd `"sticky"`, Cherokee `ip_hash`; lighttpd's
    /// `"hash"` hashes the URL instead, which Tessera approximates with this).
    IpHash,
    /// The first server that is up: failover in order (Cherokee `failover`,
    /// nginx `backup` servers).
    First,
}

/// One `[[upstream]]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct UpstreamConfig {
    /// The name modules refer to (`upstream = "app"`). Required, unique.
    pub name: String,
    /// Servers as `host:port` (a name is resolved at start and reload) or
    /// `unix:/path/to/socket`. Required, at least one.
    pub servers: Vec<String>,
    /// Default `round-robin`.
    #[serde(default)]
    pub balance: Balance,
    /// Failures (refused or timed-out connections, timeouts) after which a
    /// server is down. Default 1 (nginx `max_fails`); 0 never marks it down.
    #[serde(default = "one")]
    pub max_fails: u32,
    /// Seconds a failed server stays down. Default 10 (nginx `fail_timeout`).
    #[serde(default = "ten")]
    pub fail_timeout: u64,
    /// Seconds to establish a connection. Default 5.
    #[serde(default = "five")]
    pub connect_timeout: u64,
    /// Seconds to wait for the response head, and between two reads of its
    /// body. Default 60 (nginx `proxy_read_timeout`).
    #[serde(default = "sixty")]
    pub read_timeout: u64,
    /// Seconds a write of the request may stall. Default 60 (nginx
    /// `proxy_send_timeout`).
    #[serde(default = "sixty")]
    pub send_timeout: u64,
    /// Seconds an idle kept-alive connection to a server is kept; each
    /// worker closes those past it every half of it (at least every 0.5 s).
    /// Default 60 (nginx `keepalive_timeout` in an upstream).
    #[serde(default = "sixty")]
    pub keepalive_timeout: u64,
    /// Idle kept-alive connections kept per worker and server, shared by
    /// every module table that uses the upstream; 0 closes each connection
    /// after its request. Default 32 (nginx `keepalive`, per upstream block).
    #[serde(default = "thirty_two")]
    pub keepalive: usize,
    /// Connections per worker to each server of this upstream, busy and
    /// idle, shared by every module table that uses it. Default 100 (nginx
    /// `max_conns` without a `zone`).
    #[serde(default = "hundred")]
    pub max_connections: usize,
    /// Active health check: a path (`"/healthz"`) requested from every server
    /// each `health-interval` seconds with `GET path HTTP/1.0`. A server
    /// that does not answer 2xx or 3xx within `connect-timeout` plus
    /// `read-timeout` is down until a check passes; one that passes is up
    /// (its passive failures are forgotten). Default: none (passive health
    /// only). For HTTP upstreams (`proxy`).
    #[serde(default)]
    pub health_check: Option<String>,
    /// Seconds between active checks. Default 5.
    #[serde(default = "five")]
    pub health_interval: u64,
    /// Processes Tessera starts and keeps running for this upstream
    /// (lighttpd `bin-path`); it then needs exactly one server, the first
    /// of the processes' addresses. Default: none (the servers run on
    /// their own).
    #[serde(default)]
    pub spawn: Option<spawn::SpawnConfig>,
}

fn one() -> u32 {
    1
}
fn five() -> u64 {
    5
}
fn ten() -> u64 {
    10
}
fn thirty_two() -> usize {
    32
}
fn sixty() -> u64 {
    60
}
fn hundred() -> usize {
    100
}

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `host:port` as configured (`host` may be a name).
    Tcp(String),
    /// A Unix socket path.
    Unix(std::path::PathBuf),
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Tcp(a) => f.write_str(a),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// One server of an upstream, with its health and counters (shared by all
/// workers, lock-free).
#[derive(Debug)]
pub struct Server {
    /// Its address.
    pub address: Address,
    fails: AtomicU32,
    /// Milliseconds since [`epoch`] until which it is down; 0: up.
    down_until: AtomicU64,
    in_flight: AtomicUsize,
    /// Requests sent to it: counted when a connection is leased for one,
    /// reused or about to be opened ([`pool::Pool`]; a connect that fails
    /// counts, as it counts in `failures`), so each attempt of a retried
    /// request counts and a request that gave up waiting at
    /// `max-connections` (503, or its client left) does not.
    pub requests: AtomicU64,
    /// Requests that failed at it (connect, timeout, broken response).
    pub failures: AtomicU64,
    /// Connections open to it, busy and idle, all workers (kept by the
    /// module that speaks its protocol).
    pub open_connections: AtomicUsize,
    /// Of those, idle ones waiting in the workers' pools.
    pub idle_connections: AtomicUsize,
}

impl Server {
    /// Whether it is up now (not marked down, or its time is over).
    pub fn is_up(&self) -> bool {
        let d = self.down_until.load(Ordering::Relaxed);
        d == 0 || now_ms() >= d
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// A configured upstream.
#[derive(Debug)]
pub struct Upstream {
    /// Its name.
    pub name: String,
    /// Its servers, in configured order.
    pub servers: Vec<Server>,
    /// Its settings.
    pub config: UpstreamConfig,
    next: AtomicUsize,
}

/// A server chosen for one request: counts it in flight until dropped, and
/// records how the request went.
pub struct Pick<'a> {
    /// The upstream.
    pub upstream: &'a Upstream,
    /// Index of the server in `upstream.servers`.
    pub index: usize,
}

impl Pick<'_> {
    /// The chosen server.
    pub fn server(&self) -> &Server {
        &self.upstream.servers[self.index]
    }

    /// A new connection of its own to the chosen server, leased from `pool`
    /// (the server's pool for the module, [`pool::pool`];
    /// [`pool::Pool::lease_new`]) and never given back: it counts against `max-connections` and in the status's open
    /// connections until it is dropped. `resolved`: the server's TCP address
    /// resolved at start. On failure the error is logged with `who` (the
    /// module), the upstream and the server, and the status to answer comes
    /// back: 504 when `connect-timeout` passed, 502 for a refused or failed
    /// connect (both count against the server's health; nginx
    /// `proxy_connect_timeout`, lighttpd's `connect-timeout`), 503 when
    /// `max-connections` stayed busy for `connect-timeout` (Tessera's own
    /// limit, not the server's fault).
    pub async fn lease(
        self,
        pool: &std::rc::Rc<pool::Pool>,
        resolved: Option<std::net::SocketAddr>,
        who: &str,
    ) -> Result<(Self, pool::Lease), actix_web::http::StatusCode> {
        use actix_web::http::StatusCode;
        match pool.lease_new(resolved).await {
            Ok(c) => Ok((self, c)),
            Err(e) => {
                let address = &self.server().address;
                tracing::error!(upstream = %self.upstream.name, server = %address, "{who}: {e}");
                Err(match e {
                    pool::LeaseError::Busy => StatusCode::SERVICE_UNAVAILABLE,
                    pool::LeaseError::ConnectTimeout => {
                        self.failed();
                        StatusCode::GATEWAY_TIMEOUT
                    }
                    pool::LeaseError::Connect(_) => {
                        self.failed();
                        StatusCode::BAD_GATEWAY
                    }
                })
            }
        }
    }

    /// The request got a response from the server: its failure count resets.
    pub fn succeeded(self) {
        self.server().fails.store(0, Ordering::Relaxed);
    }

    /// The server failed (refused, timed out, broke off): after `max-fails`
    /// such failures it is down for `fail-timeout` seconds.
    pub fn failed(self) {
        let s = self.server();
        s.failures.fetch_add(1, Ordering::Relaxed);
        let max = self.upstream.config.max_fails;
        if max == 0 {
            return;
        }
        if s.fails.fetch_add(1, Ordering::Relaxed) + 1 >= max {
            s.fails.store(0, Ordering::Relaxed);
            let until = now_ms() + self.upstream.config.fail_timeout * 1000;
            s.down_until.store(until.max(1), Ordering::Relaxed);
            tracing::warn!(
                upstream = %self.upstream.name,
                server = %s.address,
                "server marked down for {} s",
                self.upstream.config.fail_timeout
            );
        }
    }
}

impl Drop for Pick<'_> {
    fn drop(&mut self) {
        self.server().in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Upstream {
    /// Chooses a server by the balance method, skipping servers that are
    /// down and those in `tried` (indices already tried for this request).
    /// `None`: every server was tried, or every untried one is down; the
    /// caller answers 502 at once, as nginx does ("no live upstreams").
    /// The one server of a single-server upstream is always tried, down or
    /// not (nginx ignores `max_fails` there).
    pub fn pick(&self, client: Option<IpAddr>, tried: &[usize]) -> Option<Pick<'_>> {
        let rr = match self.config.balance {
            Balance::RoundRobin | Balance::LeastConn => self.next.fetch_add(1, Ordering::Relaxed),
            Balance::First | Balance::IpHash => 0,
        };
        let Some(chosen) = self.choose(client, tried, rr) else {
            if tried.is_empty() {
                tracing::error!(upstream = %self.name, "no live server: every server is down");
            }
            return None;
        };
        self.servers[chosen]
            .in_flight
            .fetch_add(1, Ordering::Relaxed);
        Some(Pick {
            upstream: self,
            index: chosen,
        })
    }

    /// The server [`Upstream::pick`] would choose for a first attempt now,
    /// without counting or advancing anything (`tessera explain`).
    pub fn peek(&self, client: Option<IpAddr>) -> Option<&Server> {
        let rr = self.next.load(Ordering::Relaxed);
        self.choose(client, &[], rr).map(|i| &self.servers[i])
    }

    /// `upstream "app", server 10.0.0.1:80 (up; next in turn for round-robin)`:
    /// the server a first attempt for `client` would go to now, for
    /// `tessera explain` (see [`Upstream::peek`]).
    pub fn describe(&self, client: Option<IpAddr>) -> String {
        let how = match self.config.balance {
            Balance::RoundRobin => "next in turn for round-robin",
            Balance::LeastConn => "fewest requests in flight now",
            Balance::IpHash => "this client's server by ip-hash",
            Balance::First => "first server up",
        };
        match self.peek(client) {
            Some(s) => format!(
                "upstream \"{}\", server {} ({}; {how})",
                self.name,
                s.address,
                if s.is_up() { "up" } else { "down" }
            ),
            None => format!("upstream \"{}\" (no server)", self.name),
        }
    }

    /// The index `pick` takes, `rr` being the round-robin counter's value.
    fn choose(&self, client: Option<IpAddr>, tried: &[usize], rr: usize) -> Option<usize> {
        let n = self.servers.len();
        let untried = |i: &usize| !tried.contains(i);
        let up = |i: &usize| untried(i) && self.servers[*i].is_up();
        let start = match self.config.balance {
            Balance::RoundRobin => rr % n,
            Balance::First => 0,
            Balance::IpHash => client.map_or(0, |ip| (hash_ip(ip) % n as u64) as usize),
            Balance::LeastConn => {
                let best = (0..n)
                    .map(|k| (rr + k) % n)
                    .filter(up)
                    .min_by_key(|i| self.servers[*i].in_flight());
                best.unwrap_or(rr % n)
            }
        };
        (0..n)
            .map(|k| (start + k) % n)
            .find(up)
            .or_else(|| (n == 1).then_some(0).filter(untried))
    }

    /// Seconds as a `Duration`, for the timeouts.
    pub fn timeout(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }
}

/// Starts the active health checks of `upstreams` that have a
/// `health-check` path, on the current actix-rt arbiter. Each check task
/// holds only a weak reference: it ends when its configuration is dropped
/// (after a reload).
pub fn start_health_checks(upstreams: &Upstreams) {
    for u in upstreams.all() {
        let Some(path) = u.config.health_check.clone() else {
            continue;
        };
        let weak = Arc::downgrade(u);
        let every = Duration::from_secs(u.config.health_interval.max(1));
        actix_rt::spawn(async move {
            let mut tick = actix_rt::time::interval(every);
            loop {
                tick.tick().await;
                let Some(u) = weak.upgrade() else {
                    return;
                };
                for s in &u.servers {
                    let limit =
                        Duration::from_secs(u.config.connect_timeout + u.config.read_timeout);
                    let ok = matches!(
                        actix_rt::time::timeout(limit, check(&s.address, &path)).await,
                        Ok(Ok(true))
                    );
                    let was_up = s.is_up();
                    if ok {
                        s.fails.store(0, Ordering::Relaxed);
                        s.down_until.store(0, Ordering::Relaxed);
                    } else {
                        s.down_until.store(u64::MAX, Ordering::Relaxed);
                    }
                    if was_up != ok {
                        tracing::warn!(
                            upstream = %u.name,
                            server = %s.address,
                            "health check {path}: server {}",
                            if ok { "up" } else { "down" }
                        );
                    }
                }
            }
        });
    }
}

/// One `GET path HTTP/1.0`: `Ok(true)` for a 2xx or 3xx status line.
async fn check(address: &Address, path: &str) -> std::io::Result<bool> {
    use tokio::io::AsyncWriteExt;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: localhost\r\nUser-Agent: tessera-health-check\r\n\r\n"
    );
    let mut head = [0u8; 16];
    // the caller bounds the whole check
    let mut io = Connection::connect_now(address, None).await?;
    io.write_all(request.as_bytes()).await?;
    let n = read_at_least(&mut io, &mut head, 12).await?;
    // "HTTP/1.x 2xx" or 3xx
    Ok(n >= 12 && head.starts_with(b"HTTP/1.") && matches!(head[9], b'2' | b'3'))
}

async fn read_at_least<R: tokio::io::AsyncRead + Unpin>(
    io: &mut R,
    buf: &mut [u8],
    want: usize,
) -> std::io::Result<usize> {
    use tokio::io::AsyncReadExt;
    let mut n = 0;
    while n < want {
        let k = io.read(&mut buf[n..]).await?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(n)
}

/// A connection to a server, over TCP or a Unix socket (the transport every
/// back-end protocol shares).
#[derive(Debug)]
pub enum Connection {
    /// TCP.
    Tcp(actix_rt::net::TcpStream),
    /// A Unix stream socket.
    Unix(actix_rt::net::UnixStream),
}

impl Connection {
    /// Connects to `address` within `limit`; `resolved` is its TCP address
    /// resolved at start (skips the name lookup). TCP connections get
    /// `TCP_NODELAY`. Errors: the connect's, or `TimedOut` after `limit`.
    pub async fn connect(
        address: &Address,
        resolved: Option<std::net::SocketAddr>,
        limit: Duration,
    ) -> std::io::Result<Connection> {
        match actix_rt::time::timeout(limit, Self::connect_now(address, resolved)).await {
            Ok(r) => r,
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        }
    }

    async fn connect_now(
        address: &Address,
        resolved: Option<std::net::SocketAddr>,
    ) -> std::io::Result<Connection> {
        Ok(match (address, resolved) {
            (_, Some(a)) => {
                let s = actix_rt::net::TcpStream::connect(a).await?;
                let _ = s.set_nodelay(true);
                Connection::Tcp(s)
            }
            (Address::Unix(p), None) => Connection::Unix(connect_unix(p).await?),
            (Address::Tcp(a), None) => {
                let s = actix_rt::net::TcpStream::connect(a.as_str()).await?;
                let _ = s.set_nodelay(true);
                Connection::Tcp(s)
            }
        })
    }

    /// Writes what the socket takes at once, without waiting, and returns
    /// how many bytes that was (the rest is for `AsyncWrite`). A new
    /// connection's first bytes leave at once so: tokio would first wait for
    /// the socket's first writable event, a round of the event loop in which
    /// the application has already woken to an empty socket (php-fpm's
    /// workers then sleep and wake a second time). Errors: the send's, except
    /// would-block.
    pub fn write_now(&self, buf: &[u8]) -> std::io::Result<usize> {
        let sock = match self {
            Connection::Tcp(s) => socket2::SockRef::from(s),
            Connection::Unix(s) => socket2::SockRef::from(s),
        };
        let mut done = 0;
        while done < buf.len() {
            match sock.send(&buf[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Whether the server closed it, or sent bytes unasked, while it was
    /// idle (then it cannot be reused): one `recv(MSG_PEEK)`, every time.
    /// tokio's readiness alone would save the syscall, but a connection
    /// released and reused within one turn of the event loop (a pipelined
    /// request) has not had its events read yet, and an upstream's unasked
    /// bytes would then be taken as the next request's answer (a hostile
    /// review measured that); nginx has the same window. A peek narrows it
    /// to bytes still in flight.
    pub fn went_bad(&self) -> bool {
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        let r = match self {
            Connection::Tcp(s) => socket2::SockRef::from(s).peek(&mut probe),
            Connection::Unix(s) => socket2::SockRef::from(s).peek(&mut probe),
        };
        !matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

/// Connects to the Unix socket `path`. On Linux a non-blocking `connect`
/// completes at once (or fails: `EAGAIN` when the listen backlog is full,
/// which nginx reports as a 502 too), so the connection is used at once,
/// without the writable event and `SO_ERROR` check tokio's connect waits for;
/// elsewhere tokio's connect.
async fn connect_unix(path: &std::path::Path) -> std::io::Result<actix_rt::net::UnixStream> {
    #[cfg(target_os = "linux")]
    {
        use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
        let fd = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )?;
        rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
        actix_rt::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(fd))
    }
    #[cfg(not(target_os = "linux"))]
    {
        actix_rt::net::UnixStream::connect(path).await
    }
}

impl tokio::io::AsyncRead for Connection {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Tcp(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Connection::Unix(s) => std::pin::Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Connection {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Connection::Tcp(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Connection::Unix(s) => std::pin::Pin::new(s).poll_write(cx, buf),
        }
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Tcp(s) => std::pin::Pin::new(s).poll_flush(cx),
            Connection::Unix(s) => std::pin::Pin::new(s).poll_flush(cx),
        }
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Connection::Tcp(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Connection::Unix(s) => std::pin::Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// FNV-1a over the address bytes: stable across restarts and workers.
fn hash_ip(ip: IpAddr) -> u64 {
    let bytes: Vec<u8> = match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => v4.octets().to_vec(),
            None => a.octets().to_vec(),
        },
    };
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_millis() as u64)
}

/// All upstreams of a configuration, by name.
#[derive(Debug, Default)]
pub struct Upstreams {
    by_name: HashMap<String, Arc<Upstream>>,
    order: Vec<Arc<Upstream>>,
    owner: pool::PoolOwner,
}

impl Upstreams {
    /// Builds them from the `[[upstream]]` tables. Errors: `(key, reason)`
    /// for a missing or duplicate name, an empty or malformed server list.
    pub fn build(configs: Vec<UpstreamConfig>) -> Result<Upstreams, (String, String)> {
        let mut out = Upstreams::default();
        for (i, c) in configs.into_iter().enumerate() {
            let at = |k: &str| format!("upstream[{i}].{k}");
            if c.name.is_empty() {
                return Err((at("name"), "must not be empty".into()));
            }
            if out.by_name.contains_key(&c.name) {
                return Err((at("name"), format!("\"{}\" is declared twice", c.name)));
            }
            if c.servers.is_empty() {
                return Err((at("servers"), "needs at least one server".into()));
            }
            let mut addresses = Vec::new();
            for s in &c.servers {
                addresses.push(parse_address(s).map_err(|r| (at("servers"), r))?);
            }
            if let Some(spawn) = &c.spawn {
                if addresses.len() != 1 {
                    return Err((
                        at("servers"),
                        "with spawn, give exactly one server: the first process's address".into(),
                    ));
                }
                addresses = spawn
                    .addresses(&addresses[0])
                    .map_err(|(k, r)| (at(&k), r))?;
            }
            let mut servers = Vec::new();
            for address in addresses {
                servers.push(Server {
                    address,
                    fails: AtomicU32::new(0),
                    down_until: AtomicU64::new(0),
                    in_flight: AtomicUsize::new(0),
                    requests: AtomicU64::new(0),
                    failures: AtomicU64::new(0),
                    open_connections: AtomicUsize::new(0),
                    idle_connections: AtomicUsize::new(0),
                });
            }
            let u = Arc::new(Upstream {
                name: c.name.clone(),
                servers,
                config: c,
                next: AtomicUsize::new(0),
            });
            out.by_name.insert(u.name.clone(), u.clone());
            out.order.push(u);
        }
        Ok(out)
    }

    /// The upstream named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.by_name.get(name)
    }

    /// All upstreams, in file order.
    pub fn all(&self) -> &[Arc<Upstream>] {
        &self.order
    }

    /// The token that keeps this configuration's connection pools (see
    /// [`pool::pool`]): a module that leases connections keeps a clone for
    /// its lifetime; once the configuration and all its modules are gone, the
    /// workers' pools of its upstreams close their idle connections.
    pub fn pool_owner(&self) -> &pool::PoolOwner {
        &self.owner
    }

    /// The declared names, for error messages.
    pub fn names(&self) -> Vec<&str> {
        self.order.iter().map(|u| u.name.as_str()).collect()
    }
}

/// Parses `host:port` or `unix:/path`.
fn parse_address(s: &str) -> Result<Address, String> {
    if let Some(p) = s.strip_prefix("unix:") {
        if !p.starts_with('/') {
            return Err(format!("\"{s}\": a Unix socket path must be absolute"));
        }
        return Ok(Address::Unix(p.into()));
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("\"{s}\" is not host:port or unix:/path"));
    };
    if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(format!("\"{s}\" is not host:port or unix:/path"));
    }
    if s.contains('/') || s.contains(' ') {
        return Err(format!("\"{s}\" is not host:port (no scheme or path)"));
    }
    Ok(Address::Tcp(s.to_owned()))
}

#[cfg(test)]
mod tests;

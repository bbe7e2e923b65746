//! Keep-alive connection pools to upstream servers, one per server of an
//! upstream in each worker, shared by every module table that uses the
//! upstream (nginx `keepalive` in an `upstream` block): idle connections are reused while younger than
//! `keepalive-timeout` and still quiet, at most `keepalive` of them are kept,
//! and at most `max-connections` are open at once. Shared by every module
//! that talks to back ends (`proxy`, `fastcgi` with `FCGI_KEEP_CONN`).
//!
//! Pools live in a thread-local table: a worker never locks to lease a
//! connection. A pool whose configuration is gone (a reload replaced it, and
//! its last request is over) closes its connections instead of keeping them.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::{Connection, Server, Upstream};

/// The settings of one upstream, in the units the pools use.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `connect-timeout`.
    pub connect: Duration,
    /// `read-timeout`.
    pub read: Duration,
    /// `send-timeout`.
    pub send: Duration,
    /// `keepalive`: idle connections kept per server and worker (0: none).
    pub keepalive: usize,
    /// `keepalive-timeout`.
    pub keepalive_timeout: Duration,
    /// `max-connections` per server and worker.
    pub max_connections: usize,
}

impl Limits {
    /// The limits `upstream` is configured with.
    pub fn of(upstream: &Upstream) -> Limits {
        let c = &upstream.config;
        Limits {
            connect: Duration::from_secs(c.connect_timeout),
            read: Duration::from_secs(c.read_timeout),
            send: Duration::from_secs(c.send_timeout),
            keepalive: c.keepalive,
            keepalive_timeout: Duration::from_secs(c.keepalive_timeout),
            max_connections: c.max_connections.max(1),
        }
    }
}

/// What keeps a configuration's pools: [`Upstreams::pool_owner`] hands it
/// out, and a module that leases connections keeps a clone. When every
/// clone is gone, the pools it keyed close their connections.
///
/// [`Upstreams::pool_owner`]: super::Upstreams::pool_owner
#[derive(Debug, Clone, Default)]
pub struct PoolOwner(Arc<OwnerToken>);

/// What [`PoolOwner`]s share: a channel whose value turns true when the
/// configuration is retired ([`PoolOwner::retire`]) and which closes when
/// the last owner is dropped; each worker's pools watch it.
#[derive(Debug)]
struct OwnerToken(tokio::sync::watch::Sender<bool>);

impl Default for OwnerToken {
    fn default() -> Self {
        OwnerToken(tokio::sync::watch::Sender::new(false))
    }
}

impl PoolOwner {
    /// The configuration was replaced (a reload): its pools close their
    /// idle connections now and keep none from here on, though its
    /// requests in flight still lease connections (each closed after its
    /// exchange), as nginx's old workers stop caching upstream connections.
    pub fn retire(&self) {
        self.0 .0.send_replace(true);
    }
}

/// The pool of one server of one upstream, in one worker.
pub struct Pool {
    idle: RefCell<Vec<(Instant, Connection)>>,
    open: Cell<usize>,
    limits: Limits,
    upstream: Arc<Upstream>,
    index: usize,
    /// The configuration whose upstream it is; gone after a reload.
    owner: Weak<OwnerToken>,
    /// Its configuration was retired: nothing is kept idle.
    retired: Cell<bool>,
    /// Signalled when a connection is given back or closed, for a lease
    /// waiting at `max-connections`.
    freed: tokio::sync::Notify,
}

/// A pool's key: the upstream's address, the server's index, the protocol.
type Key = (usize, usize, &'static str);

thread_local! {
    /// Pools by (upstream, server index, protocol).
    static POOLS: RefCell<HashMap<Key, Rc<Pool>, foldhash::fast::RandomState>> =
        RefCell::new(HashMap::default());
}

/// Why no connection could be leased.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Refused or unreachable.
    #[error("connect: {0}")]
    Connect(std::io::Error),
    /// `connect-timeout` passed.
    #[error("connect: timed out (connect-timeout)")]
    ConnectTimeout,
    /// `max-connections` are open to this server in this worker.
    #[error("max-connections reached")]
    Busy,
}

/// The pool of server `index` of `upstream` on this worker for
/// `protocol` (the module's name: connections of one protocol are never
/// handed to another), which every module table of the configuration that
/// speaks it to `upstream` shares (nginx's `keepalive` and `max_conns`
/// count per upstream block, not per `location`). `owner`: the
/// configuration's [`PoolOwner`], from [`Upstreams::pool_owner`].
///
/// [`Upstreams::pool_owner`]: super::Upstreams::pool_owner
pub fn pool(
    owner: &PoolOwner,
    upstream: &Arc<Upstream>,
    index: usize,
    protocol: &'static str,
) -> Rc<Pool> {
    let key = (Arc::as_ptr(upstream) as usize, index, protocol);
    POOLS.with(|p| {
        // only a module of the pool's own configuration asks for its key
        // (the pool keeps its upstream, so the address is not reused)
        if let Some(found) = p.borrow().get(&key) {
            return found.clone();
        }
        let mut pools = p.borrow_mut();
        // pools of configurations that are gone, which their tasks have
        // not yet forgotten, leave the table
        pools.retain(|_, pool| pool.owner.strong_count() > 0);
        let mut watch = owner.0 .0.subscribe();
        let pool = Rc::new(Pool {
            idle: RefCell::new(Vec::new()),
            open: Cell::new(0),
            limits: Limits::of(upstream),
            upstream: upstream.clone(),
            index,
            owner: Arc::downgrade(&owner.0),
            retired: Cell::new(*watch.borrow_and_update()),
            freed: tokio::sync::Notify::new(),
        });
        pools.insert(key, pool.clone());
        // every half keepalive-timeout, idle connections past it close (as
        // nginx's keepalive_timeout timer closes them), though no lease
        // comes; when the configuration is retired, the pool closes its
        // idle connections at once; once it is gone (its last module and
        // request ended), the table forgets the pool
        let weak = Rc::downgrade(&pool);
        let every = (pool.limits.keepalive_timeout / 2).max(Duration::from_millis(500));
        actix_rt::spawn(async move {
            while !*watch.borrow_and_update() {
                match actix_rt::time::timeout(every, watch.changed()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => break,
                    Err(_) => match weak.upgrade() {
                        Some(pool) => pool.close_expired(),
                        None => return,
                    },
                }
            }
            if let Some(pool) = weak.upgrade() {
                pool.retire();
            }
            while watch.changed().await.is_ok() {}
            POOLS.with(|p| {
                p.borrow_mut()
                    .retain(|_, pool| pool.owner.strong_count() > 0)
            });
        });
        pool
    })
}

/// A connection checked out of a pool for one exchange. Dropped, it is
/// closed; [`Lease::release`] gives it back for reuse.
pub struct Lease {
    conn: Option<Connection>,
    pool: Rc<Pool>,
    reused: bool,
}

impl Lease {
    /// The connection.
    pub fn conn(&mut self) -> &mut Connection {
        self.conn
            .as_mut()
            .expect("a lease holds its connection until released")
    }

    /// Whether it was an idle connection used before (the server may have
    /// closed it meanwhile: a failure before any answer may be retried).
    pub fn reused(&self) -> bool {
        self.reused
    }

    /// The exchange is over and the connection is clean: back to the pool
    /// (closed instead when the pool is full or its instance is gone).
    pub fn release(mut self) {
        if let Some(c) = self.conn.take() {
            self.pool.give_back(c);
        }
    }
}

/// Reads from the leased connection.
impl tokio::io::AsyncRead for Lease {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(self.conn()).poll_read(cx, buf)
    }
}

/// Writes to the leased connection.
impl tokio::io::AsyncWrite for Lease {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(self.conn()).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(self.conn()).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(self.conn()).poll_shutdown(cx)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.pool.closed();
        }
    }
}

/// A connection counted open before its connect: uncounted when dropped
/// unless [`Reserved::keep`] (the connect failed, or its future was
/// dropped while connecting).
struct Reserved<'a>(Option<&'a Rc<Pool>>);

impl Reserved<'_> {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if let Some(pool) = self.0 {
            pool.closed();
        }
    }
}

/// A pool that goes (its configuration replaced) closes its idle
/// connections and stops counting them.
impl Drop for Pool {
    fn drop(&mut self) {
        let idle = std::mem::take(self.idle.get_mut());
        for _ in &idle {
            self.server()
                .idle_connections
                .fetch_sub(1, Ordering::Relaxed);
            self.server()
                .open_connections
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Pool {
    fn server(&self) -> &Server {
        &self.upstream.servers[self.index]
    }

    /// The address of the pool's server (for log lines).
    pub fn address(&self) -> &super::Address {
        &self.server().address
    }

    /// The pool's limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// An idle connection that is still good, or a new one (to `resolved`,
    /// the server's TCP address resolved at start, when given). At
    /// `max-connections` it waits for a connection to be given back or
    /// closed, up to `connect-timeout` (a FastCGI application with a fixed
    /// number of workers, php-fpm's `pm.max_children`, serves no more
    /// connections than that at once: more would wait in its backlog).
    ///
    /// # Errors
    /// [`LeaseError`]: refused, timed out, or still at `max-connections`
    /// after `connect-timeout`.
    pub async fn lease(
        self: &Rc<Self>,
        resolved: Option<std::net::SocketAddr>,
    ) -> Result<Lease, LeaseError> {
        self.lease_with(resolved, false).await
    }

    /// A new connection, never an idle one: for a connection that is never
    /// given back (a WebSocket tunnel, a protocol with one request per
    /// connection), whose failure on a connection the server closed while
    /// idle could not be told from the server's and retried. At
    /// `max-connections` an idle connection is closed to make room, else it
    /// waits as [`Pool::lease`] does.
    ///
    /// # Errors
    /// As [`Pool::lease`].
    pub async fn lease_new(
        self: &Rc<Self>,
        resolved: Option<std::net::SocketAddr>,
    ) -> Result<Lease, LeaseError> {
        self.lease_with(resolved, true).await
    }

    async fn lease_with(
        self: &Rc<Self>,
        resolved: Option<std::net::SocketAddr>,
        new: bool,
    ) -> Result<Lease, LeaseError> {
        // the exchange's timeouts (connect, send, read) then wake no one
        crate::timer_floor::touch();
        // the clock is read only when the pool is full
        let mut deadline = None;
        loop {
            if !new {
                if let Some(l) = self.reuse() {
                    return Ok(l);
                }
            }
            if self.open.get() < self.limits.max_connections {
                break;
            }
            if new {
                let popped = self.idle.borrow_mut().pop();
                if popped.is_some() {
                    self.server()
                        .idle_connections
                        .fetch_sub(1, Ordering::Relaxed);
                    self.closed();
                    continue;
                }
            }
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + self.limits.connect);
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero()
                || actix_rt::time::timeout(left, self.freed.notified())
                    .await
                    .is_err()
            {
                return Err(LeaseError::Busy);
            }
        }
        // counted before the connect, so that leases connecting at the same
        // time never pass max-connections together; uncounted if the
        // connect fails or its future is dropped
        self.open.set(self.open.get() + 1);
        self.server().requests.fetch_add(1, Ordering::Relaxed);
        self.server()
            .open_connections
            .fetch_add(1, Ordering::Relaxed);
        let reserved = Reserved(Some(self));
        let address = &self.server().address;
        let conn = match Connection::connect(address, resolved, self.limits.connect).await {
            Ok(c) => c,
            Err(e) => {
                return Err(if e.kind() == std::io::ErrorKind::TimedOut {
                    LeaseError::ConnectTimeout
                } else {
                    LeaseError::Connect(e)
                });
            }
        };
        reserved.keep();
        Ok(Lease {
            conn: Some(conn),
            pool: self.clone(),
            reused: false,
        })
    }

    /// An idle connection, at once, if one is young enough and still quiet
    /// (see [`Pool::lease`]); `None`: [`Pool::lease`] connects or waits. A
    /// caller that tries this first need not keep `lease`'s larger future
    /// (a connect, a wait at `max-connections`) for the usual request.
    pub fn lease_idle(self: &Rc<Self>) -> Option<Lease> {
        crate::timer_floor::touch();
        self.reuse()
    }

    /// An idle connection that is young enough and still quiet; stale ones
    /// are closed on the way.
    fn reuse(self: &Rc<Self>) -> Option<Lease> {
        loop {
            let popped = self.idle.borrow_mut().pop();
            let (since, conn) = popped?;
            self.server()
                .idle_connections
                .fetch_sub(1, Ordering::Relaxed);
            if since.elapsed() < self.limits.keepalive_timeout && !conn.went_bad() {
                self.server().requests.fetch_add(1, Ordering::Relaxed);
                return Some(Lease {
                    conn: Some(conn),
                    pool: self.clone(),
                    reused: true,
                });
            }
            self.closed();
        }
    }

    /// Closes the idle connections older than `keepalive-timeout`.
    fn close_expired(&self) {
        let limit = self.limits.keepalive_timeout;
        let expired: Vec<_> = {
            let mut idle = self.idle.borrow_mut();
            // given back in turn (and reused from the end): the oldest
            // come first
            let end = idle
                .iter()
                .position(|(since, _)| since.elapsed() < limit)
                .unwrap_or(idle.len());
            idle.drain(..end).collect()
        };
        for _ in expired {
            self.server()
                .idle_connections
                .fetch_sub(1, Ordering::Relaxed);
            self.closed();
        }
    }

    /// Its configuration was retired: idle connections close now, and
    /// none is kept from here on.
    fn retire(&self) {
        self.retired.set(true);
        let idle = std::mem::take(&mut *self.idle.borrow_mut());
        for _ in idle {
            self.server()
                .idle_connections
                .fetch_sub(1, Ordering::Relaxed);
            self.closed();
        }
    }

    fn give_back(&self, conn: Connection) {
        let mut idle = self.idle.borrow_mut();
        // a pool of a configuration that was replaced keeps nothing
        if idle.len() >= self.limits.keepalive
            || self.retired.get()
            || self.owner.strong_count() == 0
        {
            drop(idle);
            self.closed();
            return;
        }
        idle.push((Instant::now(), conn));
        self.server()
            .idle_connections
            .fetch_add(1, Ordering::Relaxed);
        self.freed.notify_one();
    }

    fn closed(&self) {
        self.open.set(self.open.get().saturating_sub(1));
        self.server()
            .open_connections
            .fetch_sub(1, Ordering::Relaxed);
        self.freed.notify_one();
    }
}

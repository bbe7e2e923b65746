//! Keep-alive connection pools to upstream servers, one per server and
//! module instance in each worker (nginx `keepalive` in an `upstream`
//! block): idle connections are reused while younger than
//! `keepalive-timeout` and still quiet, at most `keepalive` of them are kept,
//! and at most `max-connections` are open at once. Shared by every module
//! that talks to back ends (`proxy`, `fastcgi` with `FCGI_KEEP_CONN`).
//!
//! Pools live in a thread-local table: a worker never locks to lease a
//! connection. A pool whose module instance is gone (a reload replaced the
//! configuration) closes its connections instead of keeping them.

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

/// The pool of one server for one module instance, in one worker.
pub struct Pool {
    idle: RefCell<Vec<(Instant, Connection)>>,
    open: Cell<usize>,
    limits: Limits,
    upstream: Arc<Upstream>,
    index: usize,
    /// The module instance that uses the pool; gone after a reload.
    owner: Weak<()>,
}

thread_local! {
    /// Pools by (module instance, server index).
    static POOLS: RefCell<HashMap<(usize, usize), Rc<Pool>>> = RefCell::new(HashMap::new());
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

/// The pool of server `index` of `upstream` for the module instance `owner`
/// (an `Arc` the instance keeps for its lifetime) on this worker.
pub fn pool(owner: &Arc<()>, upstream: &Arc<Upstream>, index: usize) -> Rc<Pool> {
    let key = (Arc::as_ptr(owner) as usize, index);
    POOLS.with(|p| {
        let mut pools = p.borrow_mut();
        if !pools.contains_key(&key) {
            // a new instance (a reload): pools whose instance is gone close
            // their idle connections
            pools.retain(|_, pool| pool.owner.strong_count() > 0);
        }
        pools
            .entry(key)
            .or_insert_with(|| {
                Rc::new(Pool {
                    idle: RefCell::new(Vec::new()),
                    open: Cell::new(0),
                    limits: Limits::of(upstream),
                    upstream: upstream.clone(),
                    index,
                    owner: Arc::downgrade(owner),
                })
            })
            .clone()
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

impl Drop for Lease {
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.pool.closed();
        }
    }
}

impl Pool {
    fn server(&self) -> &Server {
        &self.upstream.servers[self.index]
    }

    /// The pool's limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// An idle connection that is still good, or a new one (to `resolved`,
    /// the server's TCP address resolved at start, when given).
    ///
    /// # Errors
    /// [`LeaseError`]: refused, timed out, or `max-connections` reached.
    pub async fn lease(
        self: &Rc<Self>,
        resolved: Option<std::net::SocketAddr>,
    ) -> Result<Lease, LeaseError> {
        loop {
            let popped = self.idle.borrow_mut().pop();
            let Some((since, conn)) = popped else {
                break;
            };
            self.server()
                .idle_connections
                .fetch_sub(1, Ordering::Relaxed);
            if since.elapsed() < self.limits.keepalive_timeout && !conn.went_bad() {
                return Ok(Lease {
                    conn: Some(conn),
                    pool: self.clone(),
                    reused: true,
                });
            }
            self.closed();
        }
        if self.open.get() >= self.limits.max_connections {
            return Err(LeaseError::Busy);
        }
        let address = &self.server().address;
        let conn = match Connection::connect(address, resolved, self.limits.connect).await {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                return Err(LeaseError::ConnectTimeout)
            }
            Err(e) => return Err(LeaseError::Connect(e)),
        };
        self.open.set(self.open.get() + 1);
        self.server()
            .open_connections
            .fetch_add(1, Ordering::Relaxed);
        Ok(Lease {
            conn: Some(conn),
            pool: self.clone(),
            reused: false,
        })
    }

    fn give_back(&self, conn: Connection) {
        let mut idle = self.idle.borrow_mut();
        // a pool of a configuration that was replaced keeps nothing
        if idle.len() >= self.limits.keepalive || self.owner.strong_count() == 0 {
            drop(idle);
            self.closed();
            return;
        }
        idle.push((Instant::now(), conn));
        self.server()
            .idle_connections
            .fetch_add(1, Ordering::Relaxed);
    }

    fn closed(&self) {
        self.open.set(self.open.get().saturating_sub(1));
        self.server()
            .open_connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

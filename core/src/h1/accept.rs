//! Per-worker accept for the engine's plain-TCP listeners: each worker thread
//! owns one listening socket per address and accepts for itself, with no
//! acceptor thread and no cross-thread hand-off (nginx `listen ... reuseport`,
//! h2o's per-thread listeners). On Linux the sockets of one address form a
//! `SO_REUSEPORT` group, so the kernel spreads connections over the workers;
//! elsewhere every worker polls one shared socket (the portable fallback).
//!
//! The production behaviours of actix-server are kept: `max-connections` per
//! worker (beyond it connections wait in the backlog), a 500 ms pause after an
//! accept error such as EMFILE, and a graceful shutdown that stops accepting,
//! closes idle connections and gives the others `shutdown-timeout` to finish.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use actix_http::body::BoxBody;
use actix_http::{Request, Response};
use actix_service::Service;
use tokio::sync::{oneshot, watch, Notify};

use super::conn::{serve, Settings};

/// Pause after an accept error other than a client's reset (EMFILE, ENFILE,
/// ENOMEM, ENOBUFS), as actix-server and nginx (`ngx_event_accept`) do.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(500);

/// The shutdown broadcast: idle connections close and accept loops stop once
/// [`ShutdownTx::start`] is called. Cloning is cheap (an `Arc`).
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// The sending side of [`Shutdown`] (clones share one channel).
#[derive(Clone)]
pub struct ShutdownTx(std::sync::Arc<watch::Sender<bool>>);

impl Shutdown {
    /// A new broadcast, not started.
    pub fn new() -> (ShutdownTx, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTx(std::sync::Arc::new(tx)), Shutdown(rx))
    }

    /// Completes once shutdown has started (at once if it already has).
    pub async fn notified(&self) {
        let mut rx = self.0.clone();
        // an error means the sender is gone: the process is ending
        let _ = rx.wait_for(|started| *started).await;
    }

    /// Whether shutdown has started.
    pub fn started(&self) -> bool {
        *self.0.borrow()
    }
}

/// A worker's view of the shutdown broadcast, for the waits that happen
/// once per request (an idle keep-alive connection, the next accept): a
/// waiting task registers its waker once, and a wait costs a `Cell` read,
/// with no lock and no atomic (the watch channel of [`Shutdown`] takes both
/// at every wait). One per worker thread; [`worker`] starts it.
pub(super) struct Idle {
    started: Cell<bool>,
    wakers: std::cell::RefCell<slab::Slab<std::task::Waker>>,
}

impl Idle {
    fn new() -> Self {
        Idle {
            started: Cell::new(false),
            wakers: std::cell::RefCell::new(slab::Slab::new()),
        }
    }

    /// Shutdown started: every registered waiter wakes (and finds it so).
    fn start(&self) {
        self.started.set(true);
        for (_, w) in self.wakers.borrow().iter() {
            w.wake_by_ref();
        }
    }
}

/// One task's registration with its worker's [`Idle`]: the waker is kept
/// from the first wait until the registration is dropped.
pub(super) struct IdleWait {
    idle: Rc<Idle>,
    key: Cell<Option<usize>>,
}

impl IdleWait {
    pub(super) fn new(idle: Rc<Idle>) -> Self {
        IdleWait {
            idle,
            key: Cell::new(None),
        }
    }

    /// Completes once shutdown has started (at once if it already has).
    pub(super) fn wait(&self) -> impl std::future::Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.idle.started.get() {
                return std::task::Poll::Ready(());
            }
            let mut wakers = self.idle.wakers.borrow_mut();
            match self.key.get() {
                Some(k) => {
                    if !wakers[k].will_wake(cx.waker()) {
                        wakers[k] = cx.waker().clone();
                    }
                }
                None => self.key.set(Some(wakers.insert(cx.waker().clone()))),
            }
            std::task::Poll::Pending
        })
    }
}

impl Drop for IdleWait {
    fn drop(&mut self) {
        if let Some(k) = self.key.get() {
            self.idle.wakers.borrow_mut().remove(k);
        }
    }
}

impl ShutdownTx {
    /// Starts a graceful shutdown: accept loops stop, idle connections close.
    pub fn start(&self) {
        self.0.send_replace(true);
    }
}

/// One listening address: a socket per worker (the same socket, cloned, where
/// `SO_REUSEPORT` is not used).
pub struct Group {
    /// The bound address (the real port when port 0 was asked for).
    pub addr: SocketAddr,
    sockets: Vec<std::net::TcpListener>,
    /// Connections start with a PROXY protocol header
    /// (`[server] listen-proxy-protocol`).
    pub proxy_protocol: bool,
}

/// Binds `addr` for `workers` workers (SO_REUSEADDR, backlog 1024,
/// non-blocking; `TCP_DEFER_ACCEPT` when `defer`, see [`defer_accept`]).
/// Errors: the address is in use (also by another process that uses
/// `SO_REUSEPORT`: a probe bind without it runs first), or the bind is
/// refused.
pub fn bind(addr: SocketAddr, workers: usize, defer: bool) -> std::io::Result<Group> {
    #[cfg(target_os = "linux")]
    {
        // SO_REUSEPORT would silently share the port with another process of
        // the same user; a plain bind first reports that as "in use"
        if addr.port() != 0 {
            drop(socket(addr, false, false)?);
        }
        let first = socket(addr, true, defer)?;
        let addr = first.local_addr()?;
        let mut sockets = vec![first];
        for _ in 1..workers {
            sockets.push(socket(addr, true, defer)?);
        }
        Ok(Group {
            addr,
            sockets,
            proxy_protocol: false,
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let first = socket(addr, false, defer)?;
        let addr = first.local_addr()?;
        let mut sockets = Vec::with_capacity(workers);
        for _ in 1..workers {
            sockets.push(first.try_clone()?);
        }
        sockets.push(first);
        Ok(Group {
            addr,
            sockets,
            proxy_protocol: false,
        })
    }
}

/// Sets `TCP_DEFER_ACCEPT` on a listening socket (`[server]
/// defer-accept`) when `on`, clears it otherwise: connections reach
/// `accept` once their first bytes have arrived, or after one SYN-ACK
/// retransmission (1 s, the value nginx's `listen ... deferred` sets). A
/// no-op where Linux's option is missing.
///
/// # Errors
/// The `setsockopt` call failed.
pub fn defer_accept(socket: &socket2::Socket, on: bool) -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::fd::AsRawFd;
        let secs: libc::c_int = i32::from(on);
        // SAFETY: a valid socket descriptor, and a c_int option of its size
        #[allow(unsafe_code)]
        let r = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                std::ptr::from_ref(&secs).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = (socket, on);
    Ok(())
}

fn socket(
    addr: SocketAddr,
    reuse_port: bool,
    defer: bool,
) -> std::io::Result<std::net::TcpListener> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    s.set_reuse_address(true)?;
    #[cfg(target_os = "linux")]
    {
        if reuse_port {
            s.set_reuse_port(true)?;
        }
        // accepted sockets inherit TCP_NODELAY on Linux: no setsockopt each
        s.set_tcp_nodelay(true)?;
    }
    #[cfg(not(target_os = "linux"))]
    let _ = reuse_port;
    defer_accept(&s, defer)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// What each worker needs, besides its sockets.
#[derive(Clone)]
pub struct WorkerSettings {
    /// The connection settings.
    pub conn: Settings,
    /// Concurrent connections per worker (`[server] max-connections`).
    pub max_connections: usize,
    /// How long open connections get after shutdown starts.
    pub shutdown_timeout: Duration,
    /// The only peers allowed on PROXY protocol listeners (`[server]
    /// trusted-proxies`, as at start).
    pub trusted: crate::realip::TrustedProxies,
}

/// The running workers: each reports on one channel once its app services
/// are built and it accepts, and on another once it has stopped accepting
/// and its connections have finished (or the timeout passed).
pub struct Running {
    ready: Vec<oneshot::Receiver<()>>,
    done: Vec<oneshot::Receiver<()>>,
}

impl Running {
    /// Waits until every worker accepts (or has given up: a worker whose
    /// app service failed to start counts as ready).
    pub async fn ready(&mut self) {
        for r in self.ready.drain(..) {
            let _ = r.await;
        }
    }

    /// Waits until every worker has finished its graceful shutdown and
    /// dropped its connections (those still open at the timeout included,
    /// so that their unanswered requests are logged before the logs' last
    /// flush; a blocking plugin hook still running is not waited for).
    pub async fn finished(self) {
        for d in self.done {
            let _ = d.await;
        }
    }
}

/// Starts `workers` arbiters (threads with their own runtime, like
/// actix-server's workers). `service(addr)` builds, on the worker's thread,
/// the app service for the listener bound at `addr`. Must be called inside an
/// actix-rt `System`.
pub fn start<F, Fut, S>(
    groups: Vec<Group>,
    workers: usize,
    service: F,
    settings: WorkerSettings,
    shutdown: Shutdown,
) -> Running
where
    F: Fn(SocketAddr) -> Fut + Send + Clone + 'static,
    Fut: std::future::Future<Output = Result<S, ()>> + 'static,
    S: Service<Request, Response = Response<BoxBody>, Error = actix_web::Error> + 'static,
{
    let mut per_worker: Vec<Vec<(SocketAddr, bool, std::net::TcpListener)>> =
        (0..workers).map(|_| Vec::new()).collect();
    for g in groups {
        for (i, s) in g.sockets.into_iter().enumerate() {
            per_worker[i].push((g.addr, g.proxy_protocol, s));
        }
    }
    let mut done = Vec::with_capacity(workers);
    let mut ready = Vec::with_capacity(workers);
    for (n, sockets) in per_worker.into_iter().enumerate() {
        let (tx, rx) = oneshot::channel();
        done.push(rx);
        let (ready_tx, ready_rx) = oneshot::channel();
        ready.push(ready_rx);
        let arbiter = actix_rt::Arbiter::with_tokio_rt(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a worker runtime")
        });
        let service = service.clone();
        let settings = settings.clone();
        let shutdown = shutdown.clone();
        // the closure is sent; the worker future is built on the thread
        arbiter.spawn_fn(move || {
            // `top -H` and `ps -L` show the workers as tessera-w0, tessera-w1, ...
            #[cfg(target_os = "linux")]
            if let Ok(name) = std::ffi::CString::new(format!("tessera-w{n}")) {
                let _ = rustix::thread::set_name(&name);
            }
            crate::stats::claim_shard();
            actix_rt::spawn(async move {
                worker(sockets, service, settings, shutdown, ready_tx, tx).await;
                actix_rt::Arbiter::current().stop();
            });
        });
    }
    Running { ready, done }
}

/// A worker's open connections, and a wake-up when one closes.
struct Load {
    open: Cell<usize>,
    /// Someone waits on `freed` (at the limit, or draining): the common
    /// close then costs no lock.
    watched: Cell<bool>,
    freed: Notify,
    /// Dropped with the last reference: the worker's future and every
    /// connection (each holds an [`Open`]) are gone, those dropped by the
    /// worker's runtime as it stops included ([`Running::finished`]).
    _done: oneshot::Sender<()>,
}

/// One open connection counted in its worker's [`Load`]; dropping it (the
/// connection's task ended, normally or by a panic that unwound it) gives
/// the slot back, so a request that panics never shrinks max-connections.
pub(super) struct Open(Rc<Load>);

impl Open {
    fn count(load: &Rc<Load>) -> Open {
        load.open.set(load.open.get() + 1);
        Open(load.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let load = &self.0;
        load.open.set(load.open.get() - 1);
        if load.watched.get() {
            load.freed.notify_waiters();
        }
    }
}

async fn worker<F, Fut, S>(
    sockets: Vec<(SocketAddr, bool, std::net::TcpListener)>,
    service: F,
    settings: WorkerSettings,
    shutdown: Shutdown,
    ready: oneshot::Sender<()>,
    done: oneshot::Sender<()>,
) where
    F: Fn(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = Result<S, ()>>,
    S: Service<Request, Response = Response<BoxBody>, Error = actix_web::Error> + 'static,
{
    let load = Rc::new(Load {
        open: Cell::new(0),
        watched: Cell::new(false),
        freed: Notify::new(),
        _done: done,
    });
    let conn = Rc::new(settings.conn);
    let trusted = Rc::new(settings.trusted);
    // the broadcast reaches this worker's waiters through one task
    let idle = Rc::new(Idle::new());
    let relay = {
        let (idle, shutdown) = (idle.clone(), shutdown.clone());
        actix_rt::spawn(async move {
            shutdown.notified().await;
            idle.start();
        })
    };
    let mut loops = Vec::new();
    for (addr, proxy_protocol, lst) in sockets {
        let Ok(svc) = service(addr).await else {
            return;
        };
        let lst = match tokio::net::TcpListener::from_std(lst) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("cannot poll the listener on {addr}: {e}");
                return;
            }
        };
        let proxied = proxy_protocol.then(|| trusted.clone());
        loops.push(actix_rt::spawn(accept_loop(
            lst,
            Rc::new(svc),
            conn.clone(),
            load.clone(),
            (settings.max_connections, proxied),
            idle.clone(),
        )));
    }
    let _ = ready.send(());
    for l in loops {
        let _ = l.await;
    }
    relay.abort();
    // the listeners are closed; open connections get the shutdown timeout
    let deadline = tokio::time::Instant::now() + settings.shutdown_timeout;
    load.watched.set(true);
    while load.open.get() > 0 {
        if tokio::time::timeout_at(deadline, load.freed.notified())
            .await
            .is_err()
        {
            break;
        }
    }
}

async fn accept_loop<S>(
    lst: tokio::net::TcpListener,
    svc: Rc<S>,
    conn: Rc<Settings>,
    load: Rc<Load>,
    (max, proxied): (usize, Option<Rc<crate::realip::TrustedProxies>>),
    idle: Rc<Idle>,
) where
    S: Service<Request, Response = Response<BoxBody>, Error = actix_web::Error> + 'static,
{
    let shutdown = IdleWait::new(idle.clone());
    loop {
        // beyond max-connections, new connections wait in the backlog
        while load.open.get() >= max {
            load.watched.set(true);
            tokio::select! {
                () = load.freed.notified() => {}
                () = shutdown.wait() => return,
            }
        }
        let accepted = tokio::select! {
            r = lst.accept() => r,
            () = shutdown.wait() => return,
        };
        match accepted {
            Ok((io, peer)) => {
                #[cfg(not(target_os = "linux"))]
                let _ = io.set_nodelay(true);
                let open = Open::count(&load);
                let (svc, conn, idle) = (svc.clone(), conn.clone(), idle.clone());
                let proxied = proxied.clone();
                // the task's future is all an idle connection costs
                actix_rt::spawn(serve(io, peer, proxied, svc, conn, idle, open));
            }
            Err(e) if client_error(&e) => {}
            Err(e) => {
                tracing::error!("cannot accept a connection: {e}; pausing 500 ms");
                tokio::select! {
                    () = actix_rt::time::sleep(ACCEPT_ERROR_BACKOFF) => {}
                    () = shutdown.wait() => return,
                }
            }
        }
    }
}

/// The client address a PROXY protocol header gives, read within the
/// header timeout; `None` (the connection is then closed): the peer is not
/// a trusted proxy, or the header is missing or invalid (logged).
pub(super) async fn proxy_header(
    io: &mut tokio::net::TcpStream,
    peer: SocketAddr,
    trusted: &crate::realip::TrustedProxies,
    st: &Settings,
) -> Option<SocketAddr> {
    if !trusted.contains(peer.ip()) {
        tracing::warn!(%peer, "PROXY protocol listener: peer is not in trusted-proxies; closed");
        return None;
    }
    match tokio::time::timeout(st.header_timeout, super::proxy_protocol::read(io)).await {
        Ok(Ok(source)) => Some(source.unwrap_or(peer)),
        Ok(Err(e)) => {
            tracing::warn!(%peer, "PROXY protocol header refused: {e}");
            None
        }
        Err(_) => {
            tracing::warn!(%peer, "PROXY protocol header timed out");
            None
        }
    }
}

/// Errors that concern one connection only (the client reset it before it
/// was accepted), not the listener.
fn client_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an idle connection costs is its task's future: the state of a
    /// request in progress must stay out of it (it lives in a pooled slot
    /// while the request runs). 2,264 bytes in a release build when it was
    /// inline; the target is under 2 KiB per idle connection in
    /// all, with tokio's task header and socket registration.
    #[actix_rt::test]
    async fn an_idle_connection_holds_no_request_state() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (io, peer) = l.accept().unwrap();
        io.set_nonblocking(true).unwrap();
        let io = actix_rt::net::TcpStream::from_std(io).unwrap();
        let svc = Rc::new(actix_service::fn_service(|_: Request| async {
            Ok::<_, actix_web::Error>(Response::ok().map_into_boxed_body())
        }));
        let st = Rc::new(Settings {
            limits: Default::default(),
            keep_alive: Some(Duration::from_secs(5)),
            header_timeout: Duration::from_secs(5),
            send_timeout: Duration::from_secs(5),
            drain_limit: 0,
            watch_client: true,
        });
        let load = Rc::new(Load {
            open: Cell::new(0),
            watched: Cell::new(false),
            freed: Notify::new(),
            _done: oneshot::channel().0,
        });
        let open = Open::count(&load);
        let conn = serve(io, peer, None, svc, st, Rc::new(Idle::new()), open);
        let size = std::mem::size_of_val(&conn);
        // 472 bytes in a debug build
        assert!(size <= 512, "a connection's future is {size} bytes");
        drop((conn, client));
        assert_eq!(
            load.open.get(),
            0,
            "dropping the connection frees its count"
        );
    }
}

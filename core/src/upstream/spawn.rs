//! Back-end processes Tessera starts and keeps running (lighttpd's
//! `bin-path` in `fastcgi.server`, Cherokee's `interpreter` sources).
//!
//! ```toml
//! [[upstream]]
//! name = "php"
//! servers = ["unix:/run/tessera/php.sock"]
//! [upstream.spawn]
//! bin-path = "/usr/bin/php-cgi"
//! max-procs = 2
//! bin-environment = { PHP_FCGI_CHILDREN = "4", PHP_FCGI_MAX_REQUESTS = "1000" }
//! ```
//!
//! As lighttpd does, Tessera creates each process's listening socket itself
//! and hands it over as the process's standard input (the FastCGI
//! convention, `FCGI_LISTENSOCK_FILENO` = 0), so the application needs no
//! address option. With `max-procs = N` and the server `unix:/p` the sockets
//! are `/p-0` ... `/p-(N-1)`; with `127.0.0.1:9000` the ports 9000 ...
//! 9000+N-1. The upstream's servers become those N addresses, balanced as
//! configured.
//!
//! - Each process runs in its own process group (with the children it
//!   forks, such as php-cgi's `PHP_FCGI_CHILDREN`), with Tessera's
//!   environment, or only the `bin-copy-environment` variables when that is
//!   set, plus `bin-environment`. Its standard error is Tessera's.
//! - A process that exits is started again after a back-off that doubles
//!   from 100 ms to 30 s, and starts over at 100 ms once a process ran for
//!   10 s (so a crashing application does not spin).
//! - A reload keeps the processes whose address and `spawn` table did not
//!   change, starts new ones and retires the others: a retired process gets
//!   no new connection and is stopped the old `shutdown-timeout` seconds
//!   later, the time a graceful shutdown gives requests in flight (as
//!   lighttpd's graceful restart lets its old back ends finish). A new
//!   process on a Unix socket path that a retired one listens on gets a
//!   socket bound at a temporary name and renamed over the old file, so
//!   that a connect always finds one of the two; one on the same TCP port
//!   cannot bind beside it, so the retired one is stopped first. A socket
//!   that cannot be bound after a reload is retried with the back-off. On
//!   shutdown every process group, retired ones too, gets SIGTERM, and
//!   SIGKILL after 3 s.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{Address, Upstreams};

/// The `[upstream.spawn]` table.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SpawnConfig {
    /// The command line: the program (an absolute path) and its arguments,
    /// split on whitespace (lighttpd `bin-path`). Required.
    pub bin_path: String,
    /// Processes to start, 1 to 64. Default 1 (lighttpd `max-procs`).
    #[serde(default = "one")]
    pub max_procs: usize,
    /// Variables set for the processes (lighttpd `bin-environment`).
    #[serde(default)]
    pub bin_environment: BTreeMap<String, String>,
    /// When not empty, only these of Tessera's variables are passed on;
    /// otherwise all are (lighttpd `bin-copy-environment`).
    #[serde(default)]
    pub bin_copy_environment: Vec<String>,
}

fn one() -> usize {
    1
}

/// Back-off after a process exits: doubles from this...
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// ...up to this.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A process that ran this long starts the back-off over.
const RAN_WELL: Duration = Duration::from_secs(10);
/// SIGTERM, then SIGKILL after this.
const STOP_GRACE: Duration = Duration::from_secs(3);

impl SpawnConfig {
    /// Checks the table against the upstream's one `server` and gives the
    /// addresses of the processes. Errors: the key and what is wrong.
    pub fn addresses(&self, server: &Address) -> Result<Vec<Address>, (String, String)> {
        let program = self.bin_path.split_whitespace().next().unwrap_or("");
        if !program.starts_with('/') {
            return Err((
                "spawn.bin-path".into(),
                format!(
                    "\"{}\": the program must be an absolute path",
                    self.bin_path
                ),
            ));
        }
        match std::fs::metadata(program) {
            Ok(m)
                if m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0 => {}
            Ok(_) => {
                return Err((
                    "spawn.bin-path".into(),
                    format!("{program} is not an executable file"),
                ))
            }
            Err(e) => return Err(("spawn.bin-path".into(), format!("{program}: {e}"))),
        }
        if !(1..=64).contains(&self.max_procs) {
            return Err((
                "spawn.max-procs".into(),
                format!("{} is not between 1 and 64", self.max_procs),
            ));
        }
        let n = self.max_procs;
        match server {
            Address::Unix(p) => Ok((0..n)
                .map(|i| {
                    let mut s = p.clone().into_os_string();
                    s.push(format!("-{i}"));
                    Address::Unix(s.into())
                })
                .collect()),
            Address::Tcp(a) => {
                // a name (lighttpd's "host" => "localhost") is resolved now:
                // Tessera binds the address itself
                let addr: std::net::SocketAddr = match a.parse() {
                    Ok(x) => x,
                    Err(_) => {
                        use std::net::ToSocketAddrs;
                        let all: Vec<_> = a
                            .to_socket_addrs()
                            .map(Iterator::collect)
                            .unwrap_or_default();
                        all.iter()
                            .find(|x| x.is_ipv4())
                            .or(all.first())
                            .copied()
                            .ok_or_else(|| {
                                (
                                    "servers".to_string(),
                                    format!(
                                        "\"{a}\": cannot resolve it to bind the spawned server"
                                    ),
                                )
                            })?
                    }
                };
                if usize::from(addr.port()) + n - 1 > usize::from(u16::MAX) {
                    return Err(("spawn.max-procs".into(), format!("too many ports from {a}")));
                }
                Ok((0..n)
                    .map(|i| {
                        let mut x = addr;
                        x.set_port(addr.port() + i as u16);
                        Address::Tcp(x.to_string())
                    })
                    .collect())
            }
        }
    }
}

/// One supervised process: what it runs and where it listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    address: String,
    spawn: SpawnConfig,
}

/// The shared state of a supervisor thread.
#[derive(Default)]
struct State {
    stop: bool,
    /// The running process's id (its process group's id too).
    pid: Option<i32>,
    /// The supervisor thread is done.
    finished: bool,
    /// Replaced by a reload: serves what it accepted, is not started
    /// again if it exits, and is stopped later.
    retiring: bool,
    /// A newer process's socket file took its path: never removed by this
    /// supervisor (inode numbers are reused, so the file's identity alone
    /// cannot tell).
    path_taken: bool,
}

#[derive(Clone)]
struct Supervised {
    state: Arc<(Mutex<State>, Condvar)>,
    /// Where its process listens, as configured.
    address: String,
}

fn table() -> &'static Mutex<HashMap<Key, Supervised>> {
    static T: OnceLock<Mutex<HashMap<Key, Supervised>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// Makes the running processes match `upstreams`: starts those missing,
/// keeps unchanged ones, and stops the rest, at once (`retire_after`
/// `None`: at start) or, after a reload, `retire_after` later (the old
/// `shutdown-timeout`), so that the requests they are answering finish.
///
/// # Errors
/// A socket that cannot be bound, naming the upstream and address; the
/// caller decides whether that stops the start (it does at start; a reload
/// logs it and the supervisor keeps trying).
pub fn reconcile(upstreams: &Upstreams, retire_after: Option<Duration>) -> Result<(), String> {
    let mut wanted: Vec<(Key, String)> = Vec::new();
    for u in upstreams.all() {
        let Some(spawn) = &u.config.spawn else {
            continue;
        };
        for s in &u.servers {
            wanted.push((
                Key {
                    address: s.address.to_string(),
                    spawn: spawn.clone(),
                },
                u.name.clone(),
            ));
        }
    }
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    let gone: Vec<Key> = t
        .keys()
        .filter(|k| !wanted.iter().any(|(w, _)| w == *k))
        .cloned()
        .collect();
    let gone: Vec<Supervised> = gone.iter().filter_map(|k| t.remove(k)).collect();
    match retire_after {
        None => stop(gone),
        Some(after) => retire(gone, after),
    }
    let mut first_error = None;
    for (key, upstream) in wanted {
        if t.contains_key(&key) {
            continue;
        }
        let address = parse(&key.address);
        // bind now, so that a bad address is an error at start; the
        // socket file's identity is taken here, under the table's lock
        let bound = bind_for(&key.address, &address);
        let (listener, identity) = match bound {
            Ok((l, id)) => (Some(l), id),
            Err(e) => {
                first_error.get_or_insert(format!(
                    "upstream \"{upstream}\": spawn: cannot listen on {}: {e}",
                    key.address
                ));
                // at start this stops everything; after a reload the
                // supervisor keeps trying to listen, with its back-off
                if retire_after.is_none() {
                    continue;
                }
                (None, None)
            }
        };
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let st = state.clone();
        let k = key.clone();
        let spawned = std::thread::Builder::new()
            .name("tessera-spawn".into())
            .spawn(move || supervise(&k, &upstream, listener, identity, &st));
        if let Err(e) = spawned {
            first_error.get_or_insert(format!("spawn: {e}"));
            continue;
        }
        t.insert(
            key.clone(),
            Supervised {
                state,
                address: key.address,
            },
        );
    }
    first_error.map_or(Ok(()), Err)
}

/// Binds `address` (configured as `text`) for a new process, taking over
/// the socket of a retired process that still listens there (see
/// [`give_up_retired`]).
fn bind_for(text: &str, address: &Address) -> std::io::Result<(Listener, Option<(u64, u64)>)> {
    if give_up_retired(text) {
        Listener::bind_replacing(address)
    } else {
        Listener::bind(address)
    }
}

/// Makes way for a new process at `address` where a retired one still
/// listens: a TCP port is given up (that process is stopped now); a Unix
/// socket path is then replaced (true), the old process keeping the
/// connections it accepted.
fn give_up_retired(address: &str) -> bool {
    let mut r = retiring().lock().unwrap_or_else(|e| e.into_inner());
    if !r.iter().any(|s| s.address == address) {
        return false;
    }
    match parse(address) {
        Address::Unix(_) => {
            for s in r.iter().filter(|s| s.address == address) {
                s.state
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .path_taken = true;
            }
            true
        }
        Address::Tcp(_) => {
            let (here, others): (Vec<_>, Vec<_>) = r.drain(..).partition(|s| s.address == address);
            *r = others;
            drop(r);
            stop(here);
            false
        }
    }
}

/// Stops every process (at shutdown): SIGTERM to each process group,
/// SIGKILL to those still there after 3 s.
pub fn stop_all() {
    let mut all: Vec<Supervised> = table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .map(|(_, v)| v)
        .collect();
    all.extend(
        retiring()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..),
    );
    stop(all);
}

/// The processes a reload retired that still run (stopped by [`stop_all`]
/// too).
fn retiring() -> &'static Mutex<Vec<Supervised>> {
    static R: OnceLock<Mutex<Vec<Supervised>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// Stops `list` `after` from now, on a thread of its own.
fn retire(list: Vec<Supervised>, after: Duration) {
    if list.is_empty() {
        return;
    }
    for s in &list {
        s.state.0.lock().unwrap_or_else(|e| e.into_inner()).retiring = true;
    }
    retiring()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(list.iter().cloned());
    tracing::info!(
        processes = list.len(),
        "spawn: replaced processes finish their requests and stop in {} s",
        after.as_secs()
    );
    let spawned = std::thread::Builder::new()
        .name("tessera-retire".into())
        .spawn(move || {
            std::thread::sleep(after);
            // listed until stopped, so that a shutdown meanwhile waits
            // for them too
            stop(list.clone());
            retiring()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|r| !list.iter().any(|l| Arc::ptr_eq(&l.state, &r.state)));
        });
    if let Err(e) = spawned {
        tracing::error!("spawn: cannot start the thread that retires old processes: {e}");
    }
}

fn stop(list: Vec<Supervised>) {
    if list.is_empty() {
        return;
    }
    for s in &list {
        let (m, cv) = &*s.state;
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        st.stop = true;
        if let Some(pid) = st.pid {
            signal_group(pid, rustix::process::Signal::TERM);
        }
        cv.notify_all();
    }
    let deadline = Instant::now() + STOP_GRACE;
    for s in &list {
        let (m, cv) = &*s.state;
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        while !st.finished {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if let Some(pid) = st.pid {
                    signal_group(pid, rustix::process::Signal::KILL);
                }
                // the supervisor reaps it and finishes
                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st = cv
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Whether any process of the group `pid` still exists (zombies count
/// until reaped).
fn group_alive(pid: i32) -> bool {
    rustix::process::Pid::from_raw(pid)
        .is_some_and(|p| rustix::process::test_kill_process_group(p).is_ok())
}

fn signal_group(pid: i32, sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process_group(p, sig);
    }
}

/// The device and inode of the file at `p`, not following a symbolic link.
fn file_identity(p: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

fn parse(address: &str) -> Address {
    match address.strip_prefix("unix:") {
        Some(p) => Address::Unix(p.into()),
        None => Address::Tcp(address.to_string()),
    }
}

/// A bound listening socket, handed to the process as its standard input.
enum Listener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

impl Listener {
    /// Binds `address`; with the socket file's device and inode for a
    /// Unix socket (see [`file_identity`]).
    fn bind(address: &Address) -> std::io::Result<(Listener, Option<(u64, u64)>)> {
        match address {
            Address::Tcp(a) => Ok((
                Listener::Tcp(std::net::TcpListener::bind(a.as_str())?),
                None,
            )),
            Address::Unix(p) => {
                // a socket file left by an earlier run is removed (lighttpd
                // does it too), but not one that something still listens on
                if std::fs::symlink_metadata(p)
                    .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
                {
                    if std::os::unix::net::UnixStream::connect(p).is_ok() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::AddrInUse,
                            "another process listens on this socket",
                        ));
                    }
                    let _ = std::fs::remove_file(p);
                }
                let l = std::os::unix::net::UnixListener::bind(p)?;
                Ok((Listener::Unix(l), file_identity(p)))
            }
        }
    }

    /// Binds a Unix socket path that a retired process of ours still
    /// listens on: a new socket at a temporary name, renamed over the old
    /// file, so that a connect always finds one of the two. A TCP address
    /// is bound as by [`Listener::bind`].
    fn bind_replacing(address: &Address) -> std::io::Result<(Listener, Option<(u64, u64)>)> {
        let Address::Unix(p) = address else {
            return Listener::bind(address);
        };
        // a name of this process and call, so that nothing left at an
        // older one is in the way
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tmp = p.as_os_str().to_owned();
        tmp.push(format!(".tessera-new-{}-{n}", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp);
        let _ = std::fs::remove_file(&tmp);
        let l = std::os::unix::net::UnixListener::bind(&tmp)?;
        if let Err(e) = std::fs::rename(&tmp, p) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok((Listener::Unix(l), file_identity(p)))
    }

    fn into_stdio(self) -> Stdio {
        match self {
            Listener::Tcp(l) => Stdio::from(std::os::fd::OwnedFd::from(l)),
            Listener::Unix(l) => Stdio::from(std::os::fd::OwnedFd::from(l)),
        }
    }
}

/// The supervisor thread of one process: start, wait, restart with
/// back-off, until told to stop.
fn supervise(
    key: &Key,
    upstream: &str,
    mut listener: Option<Listener>,
    identity: Option<(u64, u64)>,
    state: &Arc<(Mutex<State>, Condvar)>,
) {
    let (m, cv) = &**state;
    let address = parse(&key.address);
    let mut backoff = BACKOFF_MIN;
    // the socket file this supervisor bound last (device, inode)
    let mut bound = identity;
    loop {
        {
            let st = m.lock().unwrap_or_else(|e| e.into_inner());
            if st.stop || st.retiring {
                break;
            }
        }
        let l = match listener.take().map_or_else(
            || {
                bind_for(&key.address, &address).map(|(l, id)| {
                    bound = id;
                    l
                })
            },
            Ok,
        ) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(upstream, address = %key.address, "spawn: cannot listen: {e}");
                if wait(m, cv, backoff) {
                    break;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let started = Instant::now();
        let child = {
            let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
            if st.stop {
                break;
            }
            match command(&key.spawn).stdin(l.into_stdio()).spawn() {
                Ok(c) => {
                    st.pid = Some(c.id() as i32);
                    tracing::info!(upstream, address = %key.address, pid = c.id(), "spawn: started {}", key.spawn.bin_path);
                    Some(c)
                }
                Err(e) => {
                    tracing::error!(upstream, address = %key.address, "spawn: {}: {e}", key.spawn.bin_path);
                    None
                }
            }
        };
        if let Some(mut c) = child {
            let status = c.wait();
            // the children it forked (php-cgi's) go with it, and are gone
            // (or left to be reaped) before this returns: at most 1 s
            signal_group(c.id() as i32, rustix::process::Signal::KILL);
            for _ in 0..100 {
                if !group_alive(c.id() as i32) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
            st.pid = None;
            if st.stop || st.retiring {
                break;
            }
            drop(st);
            tracing::warn!(
                upstream,
                address = %key.address,
                "spawn: {} exited ({}); starting it again in {} ms",
                key.spawn.bin_path,
                status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                backoff.as_millis()
            );
        }
        if started.elapsed() >= RAN_WELL {
            backoff = BACKOFF_MIN;
        }
        if wait(m, cv, backoff) {
            break;
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    // only its own socket file: a reload's new process may have bound
    // another at the same path
    let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
    if let (Address::Unix(p), Some(id), false) = (&address, bound, st.path_taken) {
        if file_identity(p) == Some(id) {
            let _ = std::fs::remove_file(p);
        }
    }
    st.finished = true;
    cv.notify_all();
}

/// Waits `d` or until told to stop; true when told to stop.
fn wait(m: &Mutex<State>, cv: &Condvar, d: Duration) -> bool {
    let deadline = Instant::now() + d;
    let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
    while !st.stop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        st = cv
            .wait_timeout(st, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    true
}

/// The command of `spawn`: its own process group, its environment, stdout
/// to nothing, stderr to Tessera's, and on Linux SIGTERM when the thread that
/// started it (its supervisor) dies with Tessera.
fn command(spawn: &SpawnConfig) -> Command {
    let mut words = spawn.bin_path.split_whitespace();
    let mut c = Command::new(words.next().unwrap_or_default());
    c.args(words);
    if !spawn.bin_copy_environment.is_empty() {
        c.env_clear();
        for k in &spawn.bin_copy_environment {
            if let Some(v) = std::env::var_os(k) {
                c.env(k, v);
            }
        }
    }
    c.envs(&spawn.bin_environment);
    c.stdout(Stdio::null()).process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe; nothing else runs in the hook.
    #[allow(unsafe_code)]
    unsafe {
        c.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
                .map_err(std::io::Error::from)
        });
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: usize) -> SpawnConfig {
        SpawnConfig {
            bin_path: "/bin/sh -c true".into(),
            max_procs: n,
            bin_environment: BTreeMap::new(),
            bin_copy_environment: Vec::new(),
        }
    }

    #[test]
    fn addresses_follow_lighttpd() {
        let unix = cfg(2)
            .addresses(&Address::Unix("/run/php.sock".into()))
            .unwrap();
        assert_eq!(
            unix,
            [
                Address::Unix("/run/php.sock-0".into()),
                Address::Unix("/run/php.sock-1".into())
            ]
        );
        let tcp = cfg(3)
            .addresses(&Address::Tcp("127.0.0.1:9000".into()))
            .unwrap();
        assert_eq!(tcp[2], Address::Tcp("127.0.0.1:9002".into()));
    }

    #[test]
    fn bad_tables_are_refused() {
        let at = Address::Tcp("127.0.0.1:9000".into());
        assert!(cfg(0).addresses(&at).is_err());
        assert!(cfg(65).addresses(&at).is_err());
        assert_eq!(
            cfg(1)
                .addresses(&Address::Tcp("localhost:9000".into()))
                .unwrap(),
            [Address::Tcp("127.0.0.1:9000".into())]
        );
        assert!(cfg(1)
            .addresses(&Address::Tcp("no-such-host.invalid:9000".into()))
            .is_err());
        let mut c = cfg(1);
        c.bin_path = "php-cgi".into();
        assert_eq!(c.addresses(&at).unwrap_err().0, "spawn.bin-path");
        c.bin_path = "/nonexistent/php-cgi".into();
        assert!(c.addresses(&at).is_err());
        c.bin_path = "/etc/passwd".into();
        assert!(c.addresses(&at).is_err());
        assert!(cfg(2)
            .addresses(&Address::Tcp("127.0.0.1:65535".into()))
            .is_err());
    }

    /// A new process that takes over a retired one's Unix socket path
    /// marks it so that the retired supervisor never removes the file
    /// (a hostile review saw ext4 give the new file the old one's inode
    /// number, which fooled the identity check alone), and replaces the
    /// file without a moment in which the path is missing.
    #[test]
    fn a_retired_process_s_path_taken_over_is_marked_and_replaced_in_place() {
        let dir = std::env::temp_dir().join(format!("spawn-takeover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("php.sock-0");
        let address = Address::Unix(path.clone());
        let text = format!("unix:{}", path.display());
        let (old, old_id) = Listener::bind(&address).unwrap();
        let state = Arc::new((Mutex::new(State::default()), Condvar::new()));
        retiring().lock().unwrap().push(Supervised {
            state: state.clone(),
            address: text.clone(),
        });
        // a directory at a fixed temporary name would be in the way
        std::fs::create_dir_all(dir.join("php.sock-0.tessera-new")).unwrap();
        let (new, new_id) = bind_for(&text, &address).unwrap();
        assert!(
            state.0.lock().unwrap().path_taken,
            "the retired one is marked"
        );
        assert_ne!(new_id, old_id);
        assert_eq!(file_identity(&path), new_id);
        // a connect reaches the new socket
        std::os::unix::net::UnixStream::connect(&path).unwrap();
        retiring()
            .lock()
            .unwrap()
            .retain(|r| !Arc::ptr_eq(&r.state, &state));
        drop((old, new));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

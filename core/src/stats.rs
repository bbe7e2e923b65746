//! Counters since the process started, kept across configuration reloads (for
//! the `status` module, like lighttpd mod_status and nginx stub_status).
//!
//! Everything a request touches is an atomic add on a counter that the
//! configuration resolved once (no lookup, no lock per request).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Per-vhost request counters.
#[derive(Debug, Default)]
pub struct VhostCounters {
    /// Responses by status class: index 0 = 1xx ... 4 = 5xx.
    pub by_class: [AtomicU64; 5],
    /// Response body bytes announced (Content-Length of sized bodies; HEAD
    /// and 304 count 0).
    pub bytes: AtomicU64,
}

impl VhostCounters {
    /// Counts one response.
    pub fn record(&self, status: u16, body_bytes: u64) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.by_class[class].fetch_add(1, Ordering::Relaxed);
        if body_bytes > 0 {
            self.bytes.fetch_add(body_bytes, Ordering::Relaxed);
        }
    }
}

/// Per-access-log-file counters (kept by path, across reloads).
#[derive(Debug, Default)]
pub struct LogCounters {
    /// Lines written to the file.
    pub written: AtomicU64,
    /// Lines dropped (the writer fell behind its buffer cap, or a write failed).
    pub dropped: AtomicU64,
}

/// The process-wide counters.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    /// Configuration generation: 1 at start, +1 per successful reload.
    pub generation: AtomicU64,
    /// Open client connections.
    pub connections: AtomicI64,
    /// Connections closed by `client-header-timeout` or `send-timeout`
    /// (see [`crate::conn`]).
    pub timeouts: AtomicU64,
    vhosts: Mutex<Vec<(String, Arc<VhostCounters>)>>,
    logs: Mutex<HashMap<PathBuf, Arc<LogCounters>>>,
}

/// The counters of this process.
pub fn global() -> &'static Stats {
    static S: OnceLock<Stats> = OnceLock::new();
    S.get_or_init(|| Stats {
        started: Instant::now(),
        generation: AtomicU64::new(1),
        connections: AtomicI64::new(0),
        timeouts: AtomicU64::new(0),
        vhosts: Mutex::default(),
        logs: Mutex::default(),
    })
}

impl Stats {
    /// Seconds since the process started.
    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// The counters of the vhost labelled `label` (created on first use).
    pub fn vhost(&self, label: &str) -> Arc<VhostCounters> {
        let mut v = self.vhosts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = v.iter().find(|(l, _)| l == label) {
            return c.clone();
        }
        let c = Arc::new(VhostCounters::default());
        v.push((label.to_owned(), c.clone()));
        c
    }

    /// The counters of the access-log file at `path` (created on first use).
    pub fn log_file(&self, path: &Path) -> Arc<LogCounters> {
        let mut m = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(path.to_owned()).or_default().clone()
    }

    /// A snapshot: (vhost label, requests by class, bytes), in first-use order.
    pub fn vhosts(&self) -> Vec<(String, [u64; 5], u64)> {
        let v = self.vhosts.lock().unwrap_or_else(|e| e.into_inner());
        v.iter()
            .map(|(l, c)| {
                let mut by = [0; 5];
                for (i, a) in c.by_class.iter().enumerate() {
                    by[i] = a.load(Ordering::Relaxed);
                }
                (l.clone(), by, c.bytes.load(Ordering::Relaxed))
            })
            .collect()
    }

    /// A snapshot: (log file, lines written, lines dropped), sorted by path.
    pub fn log_files(&self) -> Vec<(PathBuf, u64, u64)> {
        let m = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = m
            .iter()
            .map(|(p, c)| {
                (
                    p.clone(),
                    c.written.load(Ordering::Relaxed),
                    c.dropped.load(Ordering::Relaxed),
                )
            })
            .collect();
        v.sort();
        v
    }
}

/// Held in each connection's extensions: counts open connections.
pub struct ConnectionGuard(());

impl ConnectionGuard {
    /// Counts a new connection; dropping the guard counts it closed.
    pub fn new() -> Self {
        global().connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(())
    }
}

impl Default for ConnectionGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        global().connections.fetch_sub(1, Ordering::Relaxed);
    }
}

//! Counters since the process started, kept across configuration reloads (for
//! the `status` module, like lighttpd mod_status and nginx stub_status).
//!
//! Everything a request touches is an atomic add on a counter that the
//! configuration resolved once (no lookup, no lock per request).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Upper bounds of the request-duration buckets, in microseconds: from
/// 50 µs (a cached small file) to 10 s (a slow back end), the last bucket
/// (+Inf) beyond. Prometheus `le` labels give them in seconds.
pub const DURATION_BOUNDS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// A histogram of request durations: counts per bucket of
/// [`DURATION_BOUNDS_US`] (not cumulative; the last is +Inf) and the sum in
/// microseconds. Lock-free: one add to a bucket and one to the sum.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; DURATION_BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
}

impl Histogram {
    /// Counts one duration.
    pub fn observe(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = DURATION_BOUNDS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(DURATION_BOUNDS_US.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// A snapshot: counts per bucket (not cumulative) and the sum in µs.
    pub fn snapshot(&self) -> ([u64; DURATION_BOUNDS_US.len() + 1], u64) {
        let mut b = [0; DURATION_BOUNDS_US.len() + 1];
        for (o, a) in b.iter_mut().zip(&self.buckets) {
            *o = a.load(Ordering::Relaxed);
        }
        (b, self.sum_us.load(Ordering::Relaxed))
    }
}

/// Per-vhost request counters.
#[derive(Debug, Default)]
pub struct VhostCounters {
    /// Responses by status class: index 0 = 1xx ... 4 = 5xx.
    pub by_class: [AtomicU64; 5],
    /// Response body bytes announced (Content-Length of sized bodies; HEAD
    /// and 304 count 0).
    pub bytes: AtomicU64,
    /// Time from the request's dispatch to its response head (the content
    /// handler's answer, a back end's included).
    pub duration: Histogram,
}

impl VhostCounters {
    /// Counts one response, its body size and how long it took.
    pub fn record(&self, status: u16, body_bytes: u64, took: Duration) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.by_class[class].fetch_add(1, Ordering::Relaxed);
        if body_bytes > 0 {
            self.bytes.fetch_add(body_bytes, Ordering::Relaxed);
        }
        self.duration.observe(took);
    }
}

/// One vhost's counters at one moment ([`Stats::vhosts`]).
#[derive(Debug, Clone)]
pub struct VhostSnapshot {
    /// The vhost's label (its first server name, or `#N`).
    pub label: String,
    /// Responses by status class (1xx ... 5xx).
    pub by_class: [u64; 5],
    /// Response body bytes.
    pub bytes: u64,
    /// Request durations per bucket of [`DURATION_BOUNDS_US`], not
    /// cumulative, the last +Inf.
    pub duration_buckets: [u64; DURATION_BOUNDS_US.len() + 1],
    /// Sum of the durations, µs.
    pub duration_sum_us: u64,
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

    /// A snapshot of every vhost's counters, in first-use order.
    pub fn vhosts(&self) -> Vec<VhostSnapshot> {
        let v = self.vhosts.lock().unwrap_or_else(|e| e.into_inner());
        v.iter()
            .map(|(l, c)| {
                let mut by = [0; 5];
                for (i, a) in c.by_class.iter().enumerate() {
                    by[i] = a.load(Ordering::Relaxed);
                }
                let (duration_buckets, duration_sum_us) = c.duration.snapshot();
                VhostSnapshot {
                    label: l.clone(),
                    by_class: by,
                    bytes: c.bytes.load(Ordering::Relaxed),
                    duration_buckets,
                    duration_sum_us,
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_fall_in_their_buckets() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(30));
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_micros(51));
        h.observe(Duration::from_secs(60));
        let (b, sum) = h.snapshot();
        assert_eq!(b[0], 2, "<= 50 µs");
        assert_eq!(b[1], 1, "<= 100 µs");
        assert_eq!(b[DURATION_BOUNDS_US.len()], 1, "+Inf");
        assert_eq!(sum, 30 + 50 + 51 + 60_000_000);
    }
}

//! Counters since the process started, kept across configuration reloads (for
//! the `status` module, like lighttpd mod_status and nginx stub_status).
//!
//! Everything a request touches is an atomic add on a counter that the
//! configuration resolved once (no lookup, no lock per request), in the
//! shard of the worker's own thread (no cache line shared between workers).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
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

/// Per-vhost request counters, sharded: each thread adds to its own shard
/// (a worker's is its own; [`claim_shard`]), so that workers never contend
/// for one cache line per request; a snapshot sums the shards.
#[derive(Debug)]
pub struct VhostCounters {
    shards: Box<[Shard]>,
}

/// One shard of [`VhostCounters`], on cache lines of its own (128 bytes:
/// the pair of lines the adjacent-line prefetcher fetches together).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    /// Responses by status class: index 0 = 1xx ... 4 = 5xx.
    by_class: [AtomicU64; 5],
    /// Response body bytes announced (Content-Length of sized bodies; HEAD
    /// and 304 count 0).
    bytes: AtomicU64,
    /// Time from the request's dispatch to its response head (the content
    /// handler's answer, a back end's included).
    duration: Histogram,
}

/// Shards per vhost: the machine's cores rounded up to a power of two, at
/// most 16 (threads beyond share shards; an add stays atomic).
fn shard_count() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 16)
            .next_power_of_two()
    })
}

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard number (taken in turn on first use; modulo the
    /// shard count).
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed);
}

/// Takes this thread's shard now: workers call it as they start, so that
/// each has one of its own before any other thread counts a request.
pub fn claim_shard() {
    SHARD.with(|_| ());
}

impl Default for VhostCounters {
    fn default() -> Self {
        VhostCounters {
            shards: (0..shard_count()).map(|_| Shard::default()).collect(),
        }
    }
}

impl VhostCounters {
    /// Counts one response, its body size and how long it took.
    pub fn record(&self, status: u16, body_bytes: u64, took: Duration) {
        let n = SHARD.with(|n| *n) & (self.shards.len() - 1);
        let s = &self.shards[n];
        let class = (status / 100).clamp(1, 5) as usize - 1;
        s.by_class[class].fetch_add(1, Ordering::Relaxed);
        if body_bytes > 0 {
            s.bytes.fetch_add(body_bytes, Ordering::Relaxed);
        }
        s.duration.observe(took);
    }

    /// The sums over the shards: responses by class, body bytes, duration
    /// buckets and the durations' sum (µs).
    fn totals(&self) -> ([u64; 5], u64, [u64; DURATION_BOUNDS_US.len() + 1], u64) {
        let mut by = [0; 5];
        let mut bytes = 0;
        let mut buckets = [0; DURATION_BOUNDS_US.len() + 1];
        let mut sum = 0;
        for s in self.shards.iter() {
            for (o, a) in by.iter_mut().zip(&s.by_class) {
                *o += a.load(Ordering::Relaxed);
            }
            bytes += s.bytes.load(Ordering::Relaxed);
            let (b, us) = s.duration.snapshot();
            for (o, n) in buckets.iter_mut().zip(b) {
                *o += n;
            }
            sum += us;
        }
        (by, bytes, buckets, sum)
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
                let (by_class, bytes, duration_buckets, duration_sum_us) = c.totals();
                VhostSnapshot {
                    label: l.clone(),
                    by_class,
                    bytes,
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

/// Connections open now, on every listener (both engines).
pub fn open_connections() -> i64 {
    global().connections.load(Ordering::Relaxed)
}

/// Held by each connection's stream (Tessera's engine: its task): counts
/// open connections.
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

    #[test]
    fn a_vhost_s_shards_add_up() {
        let c = VhostCounters::default();
        c.record(200, 10, Duration::from_micros(30));
        std::thread::scope(|t| {
            for _ in 0..3 {
                t.spawn(|| c.record(404, 5, Duration::from_micros(60)));
            }
        });
        let (by, bytes, buckets, sum) = c.totals();
        assert_eq!(by, [0, 1, 0, 3, 0]);
        assert_eq!(bytes, 25);
        assert_eq!((buckets[0], buckets[1]), (1, 3));
        assert_eq!(sum, 30 + 3 * 60);
    }
}

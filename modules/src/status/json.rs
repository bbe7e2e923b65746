//! The JSON form of the status counters (`format=json`), which the
//! dashboard polls:
//!
//! ```json
//! { "uptime": 12, "generation": 1, "connections": 3, "timeouts": 0,
//!   "duration_bounds_us": [50, 100, ...],
//!   "vhosts": [ { "name": "localhost", "requests": [0, 10, 0, 1, 0],
//!                 "bytes": 1510,
//!                 "duration": { "buckets": [4, 6, 1, ...], "sum_us": 812, "count": 11 } } ],
//!   "upstreams": [ { "name": "app", "servers": [ { "address": "127.0.0.1:8081",
//!                    "up": true, "requests": 5, "failures": 0, "in_flight": 0,
//!                    "open": 1, "idle": 1 } ] } ],
//!   "access_logs": [ { "file": "/var/log/access.log", "written": 11, "dropped": 0 } ] }
//! ```
//!
//! `requests` are by status class (1xx to 5xx); duration `buckets` count
//! requests per bucket of `duration_bounds_us` (not cumulative, the last one
//! beyond the last bound). All counters run since the process started.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Value};
use tessera_core::stats::DURATION_BOUNDS_US;
use tessera_core::upstream::Upstream;

/// The counters and the servers of `upstreams` as one JSON object.
pub(super) fn render(upstreams: &[Arc<Upstream>]) -> String {
    let st = tessera_core::stats::global();
    let vhosts: Vec<Value> = st
        .vhosts()
        .into_iter()
        .map(|v| {
            json!({
                "name": v.label,
                "requests": v.by_class,
                "bytes": v.bytes,
                "duration": {
                    "buckets": v.duration_buckets.to_vec(),
                    "sum_us": v.duration_sum_us,
                    "count": v.duration_buckets.iter().sum::<u64>(),
                },
            })
        })
        .collect();
    let upstreams: Vec<Value> = upstreams
        .iter()
        .map(|u| {
            json!({
                "name": u.name,
                "servers": u.servers.iter().map(|s| json!({
                    "address": s.address.to_string(),
                    "up": s.is_up(),
                    "requests": s.requests.load(Ordering::Relaxed),
                    "failures": s.failures.load(Ordering::Relaxed),
                    "in_flight": s.in_flight(),
                    "open": s.open_connections.load(Ordering::Relaxed),
                    "idle": s.idle_connections.load(Ordering::Relaxed),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let logs: Vec<Value> = st
        .log_files()
        .into_iter()
        .map(|(p, w, d)| json!({ "file": p.display().to_string(), "written": w, "dropped": d }))
        .collect();
    json!({
        "uptime": st.uptime_secs(),
        "generation": st.generation.load(Ordering::Relaxed),
        "connections": st.connections.load(Ordering::Relaxed).max(0),
        "timeouts": st.timeouts.load(Ordering::Relaxed),
        "duration_bounds_us": DURATION_BOUNDS_US,
        "vhosts": vhosts,
        "upstreams": upstreams,
        "access_logs": logs,
    })
    .to_string()
}

//! Vhost selection by Host (`VhostTable::select`): exact names among 88 (46 vhosts), a
//! wildcard, a regular expression, the default vhost.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

mod common;

fn select(c: &mut Criterion) {
    let cfg = common::config();
    let mut g = c.benchmark_group("vhost_select");
    for (name, host) in [
        ("exact", Some("site17.example.org")),
        ("exact_port_upper", Some("WWW.Site17.example.org:8080")),
        ("wildcard", Some("img.cdn.example.com")),
        ("regex", Some("app12.example.net")),
        ("unknown", Some("unknown.test")),
        ("no_host", None),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| black_box(cfg.vhosts.select(black_box(host))).info.index)
        });
    }
    g.finish();
}

criterion_group!(benches, select);
criterion_main!(benches);

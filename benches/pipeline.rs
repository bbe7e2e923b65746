//! The path and the rules: percent-decoding and normalization of the request
//! path (`path::normalize`) and rule resolution into the active modules
//! (`Pipeline::resolve`) for the demo vhost with three rules.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tessera_core::rule::MatchInput;

mod common;

fn normalize(c: &mut Criterion) {
    let mut g = c.benchmark_group("path_normalize");
    for (name, p) in [
        ("normal", "/img/logo.png"),
        ("escapes_and_dots", "/a/./b/../c%20d//e.html"),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| tessera_core::path::normalize(black_box(p)).map(|c| c.len()))
        });
    }
    g.finish();
}

fn resolve(c: &mut Criterion) {
    let cfg = common::config();
    let vhost = cfg.vhosts.select(Some("localhost"));
    let mut g = c.benchmark_group("rule_resolve");
    for (name, p) in [
        ("no_rule_matches", "/index.html"),
        ("prefix_rule", "/img/logo.png"),
        ("regex_rule", "/api/v2/items"),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let input = MatchInput {
                    path: black_box(p),
                    req: None,
                    document_root: &vhost.info.document_root,
                    internal: false,
                };
                vhost.pipeline.resolve(&input).len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, normalize, resolve);
criterion_main!(benches);

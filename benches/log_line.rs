//! Formatting one access-log line in the Combined Log Format
//! (`LogFormat::write_line`), with the per-worker `%t` cache.

use std::time::{Instant, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::test::TestRequest;
use tessera_core::vhost::VhostInfo;
use tessera_core::LogRecord;
use tessera_modules::access_log::format::{LogFormat, TimeCache};

fn combined(c: &mut Criterion) {
    let vhost = VhostInfo {
        index: 0,
        names: vec!["site.test".into()],
        document_root: "/srv".into(),
    };
    let req = TestRequest::get()
        .uri("/img/logo.png?v=3")
        .peer_addr("192.0.2.1:41234".parse().unwrap())
        .insert_header(("host", "site.test"))
        .insert_header(("referer", "http://site.test/index.html"))
        .insert_header((
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        ))
        .to_http_request();
    let notes = Default::default();
    let ext = Default::default();
    let mut g = c.benchmark_group("log_line");
    for (name, spec) in [("combined", "combined"), ("common", "common")] {
        let format = LogFormat::compile(spec).unwrap();
        let mut clock = TimeCache::default();
        let mut line = Vec::with_capacity(512);
        g.bench_function(name, |b| {
            b.iter(|| {
                let rec = LogRecord {
                    req: &req,
                    vhost: &vhost,
                    vhost_label: "site.test",
                    status: StatusCode::OK,
                    body_bytes: 23_619,
                    start_time: SystemTime::now(),
                    started: Instant::now(),
                    user: None,
                    complete: true,
                    notes: &notes,
                    ext: &ext,
                };
                line.clear();
                format.write_line(black_box(&rec), &mut clock, &mut line);
                line.len()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, combined);
criterion_main!(benches);

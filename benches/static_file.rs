//! static-file's hot functions: Range parsing, MIME lookup, building the
//! validators and header values of a file, resolving a path under the symlink
//! policy, and the whole content handler with the open-file cache off, on
//! (one `stat` per request) and on with `open-file-cache-valid = 1000`.

use std::borrow::Cow;

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use tessera_core::actix_web::test::TestRequest;
use tessera_core::rule::MatchInput;
use tessera_core::{Ctx, Hooks};
use tessera_modules::static_file::mime::MimeTable;
use tessera_modules::static_file::resolve::{self, SymlinkPolicy};
use tessera_modules::static_file::{range, FileInfo};

mod common;

fn range_parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("range_parse");
    for (name, h) in [
        ("single", "bytes=0-99"),
        ("suffix", "bytes=-500"),
        ("multiple", "bytes=0-0,2-2,4-4"),
    ] {
        g.bench_function(name, |b| b.iter(|| range::parse(black_box(h), 104_857_600)));
    }
    g.finish();
}

fn headers(c: &mut Criterion) {
    let dir = common::fixture_dir();
    let meta = std::fs::metadata(dir.join("www/img/logo.png")).unwrap();
    let mime = MimeTable::new([]).unwrap();
    c.bench_function("mime_lookup", |b| {
        b.iter(|| mime.lookup(black_box(Some("png"))))
    });
    c.bench_function("file_info_new", |b| {
        b.iter(|| FileInfo::new(black_box(&meta), mime.lookup(Some("png")), true, "").size)
    });
}

fn resolve_open(c: &mut Criterion) {
    let dir = common::fixture_dir();
    let root = std::fs::canonicalize(dir.join("www")).unwrap();
    let full = root.join("img/logo.png");
    c.bench_function("resolve_open_inside_root", |b| {
        b.iter(|| {
            matches!(
                resolve::open(&root, black_box(&full), SymlinkPolicy::InsideRoot),
                resolve::Resolved::File(..)
            )
        })
    });
}

fn content(c: &mut Criterion) {
    let cfg = common::config();
    let mut g = c.benchmark_group("static_file_content");
    for (name, host) in [
        ("cache_off", "nocache.test"),
        ("cache_stat", "cache.test"),
        ("cache_valid_1s", "cachevalid.test"),
    ] {
        let vhost = cfg.vhosts.select(Some(host));
        let req = TestRequest::get()
            .uri("/img/logo.png")
            .insert_header(("host", host))
            .to_http_request();
        let input = MatchInput {
            path: "/img/logo.png",
            req: Some(&req),
            document_root: &vhost.info.document_root,
            internal: false,
        };
        let active = vhost.pipeline.resolve(&input);
        let (_, module) = active
            .iter()
            .find(|(h, _)| h.contains(Hooks::CONTENT))
            .unwrap();
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut cx = Ctx::new(&req, &vhost.info, Cow::Borrowed("/img/logo.png"));
                let r = module.content(&mut cx).unwrap();
                assert_eq!(r.status(), 200);
                r
            })
        });
    }
    g.finish();
}

criterion_group!(benches, range_parse, headers, resolve_open, content);
criterion_main!(benches);

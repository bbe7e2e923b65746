//! Property tests over real HTTP (proptest): every byte range served is the
//! same slice of the file, and the server answers conditional requests as
//! `conditional::evaluate` decides (whose RFC 9110 §13.2.2 model test is in
//! modules/src/static_file/conditional.rs) for GET and HEAD, while a method the
//! file does not allow gets 405 whatever the preconditions (§13.2.1).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tessera_core::actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use tessera_modules::static_file::conditional::{evaluate, Precondition};

use crate::util::{Response, Server};

/// File sizes: tiny, small, and one above `SMALL_FILE` (sent from the file).
const SIZES: [u64; 4] = [1, 10, 1000, 200 * 1024];

fn content(size: u64) -> Vec<u8> {
    (0..size).map(|i| (i * 7 % 251) as u8).collect()
}

fn server() -> Server {
    Server::site("\"static-file\"", "", |d| {
        for n in SIZES {
            d.write(&format!("www/f{n}.bin"), content(n));
        }
    })
}

/// One range-spec of RFC 9110 §14.1.2.
#[derive(Debug, Clone)]
enum Spec {
    FromTo(u64, u64),
    From(u64),
    Suffix(u64),
}

/// What the response must be: the whole file, 416, or these inclusive ranges.
#[derive(Debug, PartialEq)]
enum Expect {
    Full,
    Unsatisfiable,
    Parts(Vec<(u64, u64)>),
}

/// RFC 9110 §14.1.2 and §14.2, with the server's documented choices: an
/// invalid spec or several ranges adding up to more than the file are ignored.
fn expect(size: u64, specs: &[Spec]) -> Expect {
    let mut parts = Vec::new();
    for s in specs {
        match *s {
            Spec::FromTo(a, b) if b < a => return Expect::Full,
            Spec::FromTo(a, _) | Spec::From(a) if a >= size => {}
            Spec::FromTo(a, b) => parts.push((a, b.min(size - 1))),
            Spec::From(a) => parts.push((a, size - 1)),
            Spec::Suffix(0) => {}
            Spec::Suffix(n) => parts.push((size - n.min(size), size - 1)),
        }
    }
    let total: u64 = parts.iter().map(|(a, b)| b - a + 1).sum();
    match parts.len() {
        0 => Expect::Unsatisfiable,
        n if n > 1 && total > size => Expect::Full,
        _ => Expect::Parts(parts),
    }
}

/// The inclusive range of a `Content-Range: bytes A-B/LEN` value.
fn content_range(v: &str, size: u64) -> (u64, u64) {
    let (ab, len) = v.strip_prefix("bytes ").unwrap().split_once('/').unwrap();
    assert_eq!(len.parse::<u64>().unwrap(), size, "{v}");
    let (a, b) = ab.split_once('-').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The ranges and bodies of a 206 response, single or multipart.
fn served(r: &Response, size: u64) -> Vec<((u64, u64), Vec<u8>)> {
    let ct = r.header("content-type").unwrap_or("");
    let Some(boundary) = ct.strip_prefix("multipart/byteranges; boundary=") else {
        let range = content_range(r.header("content-range").unwrap(), size);
        return vec![(range, r.body.clone())];
    };
    let delim = format!("--{boundary}");
    let mut rest = &r.body[..];
    let mut out = Vec::new();
    assert!(rest.starts_with(delim.as_bytes()));
    rest = &rest[delim.len()..];
    while !rest.starts_with(b"--") {
        let head_end = find(rest, b"\r\n\r\n").unwrap();
        let head = std::str::from_utf8(&rest[..head_end]).unwrap();
        let cr = head
            .split("\r\n")
            .find_map(|l| l.strip_prefix("Content-Range: "))
            .unwrap();
        let range = content_range(cr, size);
        let data = &rest[head_end + 4..];
        let end = find(data, format!("\r\n{delim}").as_bytes()).unwrap();
        out.push((range, data[..end].to_vec()));
        rest = &data[end + 2 + delim.len()..];
    }
    out
}

fn spec(max: u64) -> impl Strategy<Value = Spec> {
    prop_oneof![
        (0..max, 0..max).prop_map(|(a, b)| Spec::FromTo(a, b)),
        (0..max).prop_map(Spec::From),
        (0..max).prop_map(Spec::Suffix),
    ]
}

#[test]
fn every_byte_range_served_is_the_same_slice_of_the_file() {
    let s = server();
    let cases = (0..SIZES.len()).prop_flat_map(|i| {
        (
            Just(SIZES[i]),
            prop::collection::vec(spec(SIZES[i] + 20), 1..5),
        )
    });
    let mut runner = TestRunner::new(Config::with_cases(64));
    runner
        .run(&cases, |(size, specs)| {
            let file = content(size);
            let value = specs
                .iter()
                .map(|s| match s {
                    Spec::FromTo(a, b) => format!("{a}-{b}"),
                    Spec::From(a) => format!("{a}-"),
                    Spec::Suffix(n) => format!("-{n}"),
                })
                .collect::<Vec<_>>()
                .join(",");
            let r = s.req(
                "GET",
                &format!("/f{size}.bin"),
                &[&format!("Range: bytes={value}")],
            );
            match expect(size, &specs) {
                Expect::Full => {
                    prop_assert_eq!(r.status, 200, "{}", value);
                    prop_assert!(r.body == file, "{}", value);
                }
                Expect::Unsatisfiable => {
                    prop_assert_eq!(r.status, 416, "{}", value);
                    let want = format!("bytes */{size}");
                    prop_assert_eq!(r.header("content-range"), Some(want.as_str()));
                }
                Expect::Parts(want) => {
                    prop_assert_eq!(r.status, 206, "{}", value);
                    let got = served(&r, size);
                    let ranges: Vec<(u64, u64)> = got.iter().map(|(rg, _)| *rg).collect();
                    prop_assert_eq!(&ranges, &want, "{}", value);
                    for ((a, b), body) in got {
                        prop_assert!(body == file[a as usize..=b as usize], "{}", value);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Values for each precondition field: absent, or one of these.
fn field(values: Vec<String>) -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop::sample::select(values))
}

#[test]
fn preconditions_are_applied_as_evaluated_and_ignored_for_other_methods() {
    let s = server();
    let first = s.get("/f10.bin");
    let etag = first.header("etag").unwrap().to_owned();
    let lm = first.header("last-modified").unwrap().to_owned();
    let lm_time = httpdate::parse_http_date(&lm).unwrap();
    let date = |d: i64| {
        httpdate::fmt_http_date(if d < 0 {
            lm_time - std::time::Duration::from_secs(d.unsigned_abs())
        } else {
            lm_time + std::time::Duration::from_secs(d as u64)
        })
    };
    let tags = vec![
        etag.clone(),
        format!("W/{etag}"),
        "\"other\"".to_owned(),
        format!("\"other\", {etag}"),
        "*".to_owned(),
    ];
    let dates = vec![date(-1), lm.clone(), date(1), "garbage".to_owned()];
    let cases = (
        field(tags.clone()),
        field(dates.clone()),
        field(tags),
        field(dates),
    );
    let mut runner = TestRunner::new(Config::with_cases(48));
    runner
        .run(&cases, |(im, ius, inm, ims)| {
            let names = [
                "if-match",
                "if-unmodified-since",
                "if-none-match",
                "if-modified-since",
            ];
            let fields: Vec<(&str, String)> = names
                .iter()
                .zip([im, ius, inm, ims])
                .filter_map(|(n, v)| v.map(|v| (*n, v)))
                .collect();
            let lines: Vec<String> = fields.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
            let mut map = HeaderMap::new();
            for (n, v) in &fields {
                map.append(
                    HeaderName::from_static(n),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            let want = match evaluate(&map, &etag, Some(lm_time)) {
                Precondition::Proceed => 200,
                Precondition::NotModified => 304,
                Precondition::Failed => 412,
            };
            for method in ["GET", "HEAD"] {
                let r = s.req(method, "/f10.bin", &lines);
                prop_assert_eq!(r.status, want, "{} {:?}", method, lines);
            }
            let r = s.req("POST", "/f10.bin", &lines);
            prop_assert_eq!(r.status, 405, "POST {:?}", lines);
            Ok(())
        })
        .unwrap();
}

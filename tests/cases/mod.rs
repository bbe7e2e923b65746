//! One test per case of `/work/shared/cases/static-file-cases.md` (static-file
//! edge cases from public bug reports), named after the case id. Each test sets
//! up the files the case describes, sends the case's request exactly as written
//! (raw path, no normalisation) and asserts the behaviour the case calls correct,
//! pinned to what Tessera does where several answers would be correct.

mod access_log;
mod changing;
mod headers;
mod paths;
mod ranges;

use std::fs::File;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::util::{Response, Server, TempDir};

const SF: &str = "\"static-file\"";
const LOG_SF: &str = "\"access-log\", \"static-file\"";

fn sf(extra: &str, setup: impl FnOnce(&TempDir)) -> Server {
    Server::site(SF, extra, setup)
}

fn set_mtime(p: &Path, t: SystemTime) {
    File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

fn http_date(s: &str) -> SystemTime {
    httpdate::parse_http_date(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn unix(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs_f64().ceil() as i64),
    }
}

/// The body is framed by an exact Content-Length (no chunking) and every
/// announced byte arrived.
#[track_caller]
fn assert_framed(r: &Response) {
    assert_eq!(r.header("transfer-encoding"), None, "{r:?}");
    let cl: usize = r
        .header("content-length")
        .unwrap_or_else(|| panic!("no Content-Length: {r:?}"))
        .parse()
        .unwrap();
    assert_eq!(cl, r.raw_body.len(), "Content-Length vs bytes received");
}

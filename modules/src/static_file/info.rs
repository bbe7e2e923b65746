//! What static-file knows of one version of a file: its validators
//! (`Last-Modified`, a strong `ETag`; RFC 9110 §8.8) and Content-Type, with
//! their header values computed once and, for a file the open-file cache
//! keeps, its header lines prebuilt for Tessera's engine.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tessera_core::actix_web::http::header::{self, HeaderValue};
use tessera_core::actix_web::HttpResponse;

use super::BYTES;

/// The modification time as an HTTP-date, truncated to seconds (RFC 9110 §8.8.2);
/// `None` when it is before 1970 or after 9999 and cannot be written (case B12).
fn last_modified(meta: &Metadata) -> Option<SystemTime> {
    let secs = meta.mtime();
    (0..253_402_300_800)
        .contains(&secs)
        .then(|| UNIX_EPOCH + Duration::from_secs(secs as u64))
}

/// A strong ETag from modification time (seconds and nanoseconds) and size, in
/// hex, with `suffix` before the closing quote: `"65f1a2b3.1d2e3f-1f4"`, or
/// `"65f1a2b3.1d2e3f-1f4-br"` for suffix `-br`. It changes whenever a write
/// changes the mtime.
fn etag(meta: &Metadata, suffix: &str) -> String {
    format!(
        "\"{:x}.{:x}-{:x}{suffix}\"",
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
        meta.len()
    )
}

/// Validators and header values of one version of a file, computed once (and
/// kept by the open-file cache).
pub struct FileInfo {
    /// Size in bytes.
    pub size: u64,
    /// The modification time truncated to seconds; `None` when it cannot be
    /// written as an HTTP-date (RFC 9110 §8.8.2).
    pub last_modified: Option<SystemTime>,
    last_modified_value: Option<HeaderValue>,
    /// The strong ETag with its quotes, `""` when ETags are off (§8.8.3).
    pub etag: String,
    etag_value: Option<HeaderValue>,
    /// The Content-Type.
    pub content_type: HeaderValue,
    /// The full response's Content-Type, Accept-Ranges, ETag and
    /// Last-Modified as header lines, for Tessera's engine; built when the
    /// open-file cache keeps the file ([`FileInfo::prebuild`]).
    pub(super) fields: Option<Bytes>,
}

impl FileInfo {
    /// The validators of the file `meta` describes; the ETag gets `etag_suffix`
    /// inside its quotes, and is left out when `etag` is false.
    pub fn new(meta: &Metadata, content_type: HeaderValue, etag: bool, etag_suffix: &str) -> Self {
        let tag = if etag {
            self::etag(meta, etag_suffix)
        } else {
            String::new()
        };
        let lm = last_modified(meta);
        FileInfo {
            size: meta.len(),
            last_modified: lm,
            last_modified_value: lm
                .and_then(|t| HeaderValue::from_str(&httpdate::fmt_http_date(t)).ok()),
            etag_value: (!tag.is_empty())
                .then(|| HeaderValue::from_str(&tag).ok())
                .flatten(),
            etag: tag,
            content_type,
            fields: None,
        }
    }

    /// Builds the header lines a full response carries (see
    /// [`tessera_core::body::PrebuiltFields`]): done once, for a file the
    /// open-file cache keeps, instead of four map insertions and their
    /// encoding per request.
    pub(super) fn prebuild(mut self) -> Self {
        let mut b = Vec::with_capacity(160);
        let mut line = |name: &[u8], value: &HeaderValue| {
            b.extend_from_slice(name);
            b.extend_from_slice(b": ");
            b.extend_from_slice(value.as_bytes());
            b.extend_from_slice(b"\r\n");
        };
        line(b"content-type", &self.content_type);
        line(b"accept-ranges", &BYTES);
        if let Some(v) = &self.etag_value {
            line(b"etag", v);
        }
        if let Some(v) = &self.last_modified_value {
            line(b"last-modified", v);
        }
        self.fields = Some(Bytes::from(b));
        self
    }

    /// Adds ETag and Last-Modified to `r`, a response built here that has
    /// neither yet.
    pub(super) fn validators(&self, r: &mut HttpResponse) {
        let h = r.headers_mut();
        if let Some(v) = &self.etag_value {
            h.append(header::ETAG, v.clone());
        }
        if let Some(v) = &self.last_modified_value {
            h.append(header::LAST_MODIFIED, v.clone());
        }
    }
}

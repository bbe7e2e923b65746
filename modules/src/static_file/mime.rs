//! MIME types by file extension: a per-vhost table built once from mime_guess and
//! the vhost's overrides (lighttpd `mimetype.assign`, nginx `types`), with
//! `charset=utf-8` on text types (RFC 9110 §8.3.2, case B28).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tessera_core::actix_web::http::header::HeaderValue;

/// Extensions whose types are precomputed, so that common files need no
/// lookup in mime_guess and no allocation per request.
const COMMON: &[&str] = &[
    "html",
    "htm",
    "css",
    "js",
    "mjs",
    "json",
    "xml",
    "txt",
    "md",
    "csv",
    "svg",
    "png",
    "jpg",
    "jpeg",
    "gif",
    "webp",
    "avif",
    "ico",
    "bmp",
    "woff",
    "woff2",
    "ttf",
    "otf",
    "eot",
    "pdf",
    "zip",
    "gz",
    "tgz",
    "bz2",
    "xz",
    "zst",
    "br",
    "tar",
    "mp4",
    "webm",
    "ogg",
    "mp3",
    "wav",
    "flac",
    "m4a",
    "mov",
    "wasm",
    "map",
    "rss",
    "atom",
    "xhtml",
    "webmanifest",
    "deb",
    "iso",
];

/// The type for an extension mime_guess does not know (RFC 9110 §8.3: a sender
/// that cannot determine the type may use `application/octet-stream`).
pub const DEFAULT_TYPE: &str = "application/octet-stream";

/// True for types that carry text and get `; charset=utf-8`.
fn is_text(t: &str) -> bool {
    t.starts_with("text/")
        || matches!(
            t,
            "application/javascript"
                | "application/json"
                | "application/xml"
                | "application/xhtml+xml"
                | "application/manifest+json"
                | "application/ld+json"
                | "application/rss+xml"
                | "application/atom+xml"
                | "image/svg+xml"
        )
}

/// `t` with `; charset=utf-8` appended for text types without parameters.
pub fn with_charset(t: &str) -> String {
    if is_text(t) && !t.contains(';') {
        format!("{t}; charset=utf-8")
    } else {
        t.to_owned()
    }
}

/// Each vhost's static-file MIME table, by vhost index, kept in the
/// configuration's shared state: compress serves precompressed sidecars with
/// the Content-Type static-file would give the original file, `mime-types`
/// overrides included. A cell is filled when the vhost's static-file table
/// (not a rule's) is built; compress, built earlier in the list, reads it per
/// request without a lock.
#[derive(Debug, Default)]
pub struct VhostMimeTables(Mutex<HashMap<usize, Arc<OnceLock<Arc<MimeTable>>>>>);

impl VhostMimeTables {
    /// The cell of vhost `index` (created empty on first use).
    pub fn cell(&self, index: usize) -> Arc<OnceLock<Arc<MimeTable>>> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(index).or_default().clone()
    }
}

/// A vhost's extension -> Content-Type table.
#[derive(Debug)]
pub struct MimeTable {
    by_ext: HashMap<Box<str>, HeaderValue>,
    default: HeaderValue,
}

impl MimeTable {
    /// Builds the table from overrides (`ext -> type`, extensions without the dot,
    /// compared case-insensitively). Override types are used as written (add a
    /// charset yourself if you want one).
    ///
    /// # Errors
    /// A type that is not a valid header value, naming the extension.
    pub fn new<'a>(
        overrides: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, String> {
        let mut by_ext = HashMap::new();
        for ext in COMMON {
            if let Some(t) = mime_guess::from_ext(ext).first_raw() {
                let v =
                    HeaderValue::from_str(&with_charset(t)).expect("mime_guess types are ASCII");
                by_ext.insert((*ext).into(), v);
            }
        }
        for (ext, t) in overrides {
            let ext = ext.trim_start_matches('.').to_ascii_lowercase();
            let v = HeaderValue::from_str(t)
                .map_err(|_| format!("mime-types.{ext}: \"{t}\" is not a valid Content-Type"))?;
            by_ext.insert(ext.into(), v);
        }
        Ok(MimeTable {
            by_ext,
            default: HeaderValue::from_static(DEFAULT_TYPE),
        })
    }

    /// The Content-Type for a file name's extension.
    pub fn lookup(&self, ext: Option<&str>) -> HeaderValue {
        let Some(ext) = ext else {
            return self.default.clone();
        };
        let mut buf = [0u8; 16];
        if ext.len() <= buf.len() {
            let b = &mut buf[..ext.len()];
            b.copy_from_slice(ext.as_bytes());
            b.make_ascii_lowercase();
            if let Some(v) = std::str::from_utf8(b).ok().and_then(|k| self.by_ext.get(k)) {
                return v.clone();
            }
        }
        match mime_guess::from_ext(ext).first_raw() {
            Some(t) => {
                HeaderValue::from_str(&with_charset(t)).unwrap_or_else(|_| self.default.clone())
            }
            None => self.default.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_gets_charset() {
        let t = MimeTable::new([("md", "text/markdown; charset=utf-8")]).unwrap();
        assert_eq!(t.lookup(Some("txt")), "text/plain; charset=utf-8");
        assert_eq!(t.lookup(Some("HTML")), "text/html; charset=utf-8");
        assert_eq!(t.lookup(Some("css")), "text/css; charset=utf-8");
        assert!(t
            .lookup(Some("js"))
            .to_str()
            .unwrap()
            .ends_with("javascript; charset=utf-8"));
        assert_eq!(t.lookup(Some("md")), "text/markdown; charset=utf-8");
        assert_eq!(t.lookup(Some("png")), "image/png");
        assert_eq!(t.lookup(Some("qqzz")), DEFAULT_TYPE);
        assert_eq!(t.lookup(None), DEFAULT_TYPE);
    }

    #[test]
    fn bad_override() {
        assert!(MimeTable::new([("x", "bad\nvalue")])
            .unwrap_err()
            .contains("mime-types.x"));
    }
}

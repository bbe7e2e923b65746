//! `compress`: content-coding of responses (lighttpd mod_deflate, Cherokee's
//! gzip/deflate encoders, nginx `gzip` and `gzip_static`, h2o
//! `file.send-compressed`).
//!
//! ```toml
//! [vhost]
//! modules = ["compress", "static-file"]    # compress before static-file
//! [vhost.compress]
//! precompressed = ["br", "zstd", "gzip"]   # serve X.br, X.zst, X.gz when accepted
//! encodings = ["br", "zstd", "gzip"]       # compress on the fly
//! ```
//!
//! Two jobs:
//!
//! 1. **Precompressed sidecars** (content phase; list `compress` before
//!    `static-file`). For a GET or HEAD of a file `X` whose client accepts one of
//!    `precompressed` ([`accept::ranked`]), the first existing sidecar
//!    (`X.br`, `X.zst`, `X.gz`) not older than `X` is served with
//!    [`crate::static_file::serve_file`]: its own bytes, the Content-Type
//!    static-file gives `X` (the vhost's static-file `mime-types` included),
//!    `Content-Encoding: br|zstd|gzip` (the token, never the file
//!    suffix, case B31), `Vary: Accept-Encoding`, and the sidecar's ETag with
//!    `-br`/`-zstd`/`-gzip` inside the quotes. Conditional requests and Range
//!    apply to the encoded bytes (RFC 9110 §14.1.2). For a directory path the
//!    `index-files` are tried as static-file does. Hidden paths, and paths with
//!    a symbolic link in any component (of `X` or the sidecar), are left to
//!    `static-file`, so a sidecar never bypasses its symlink or hidden-file
//!    policy.
//! 2. **On the fly** (response phase): a `200` answer to a GET whose
//!    Content-Type is in `mime-types`, whose body is between `min-size` and
//!    `max-size` bytes and has a known length, which has no `Content-Encoding`
//!    yet (case B30) and no `Cache-Control: no-transform`, is compressed with
//!    the best coding of `encodings` the client accepts. Never a 206 (case B32),
//!    304, HEAD or error. The ETag gets the coding's suffix inside the quotes, a
//!    matching `If-None-Match` on it gives 304, `Accept-Ranges` is removed (Range
//!    requests get identity 206 answers). A body that is one buffer (static-file
//!    sends files up to 128 KiB that way) is compressed in memory and sent with
//!    Content-Length; a streamed body (larger files) is compressed chunk by
//!    chunk and sent chunked. With an ETag, the result is kept in a bounded
//!    cache keyed by path, ETag and coding ([`cache`]), so a hot file is
//!    compressed once per version. The access log's `%b` counts the compressed
//!    bytes.
//!
//! `Vary: Accept-Encoding` is merged into the response's Vary (one field line)
//! on every 200, 206 and 304 of a compressible type, the identity answers
//! included (case B33), and on every sidecar answer.
//!
//! Compression runs on the worker thread. `deflate` is not offered (its
//! zlib-vs-raw ambiguity makes it unreliable; every client that sends it also
//! accepts gzip).

pub mod accept;
pub mod cache;
pub mod encode;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use tessera_core::actix_web::body::{BodySize, BoxBody, MessageBody};
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use tessera_core::actix_web::http::{Method, StatusCode};
use tessera_core::actix_web::HttpResponse;
use tessera_core::rule::extension;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

use crate::static_file::conditional::{self, Precondition};
use crate::static_file::mime::MimeTable;
use crate::static_file::resolve::{self, has_hidden_segment, Resolved, SymlinkPolicy};
use crate::static_file::{serve_file, Representation};
pub use accept::Coding;
use cache::{CacheKey, CompressedCache};
use encode::{CacheFill, EncodedBody, Encoder, Levels};

const ACCEPT_ENCODING: HeaderValue = HeaderValue::from_static("Accept-Encoding");

/// Options of `[vhost.compress]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CompressConfig {
    /// Sidecar codings to look for, in order of preference among equally
    /// wanted ones: `"br"` (`X.br`), `"zstd"` (`X.zst`), `"gzip"` (`X.gz`)
    /// (nginx `gzip_static`, h2o `file.send-compressed`). Default `[]` (off).
    #[serde(default)]
    pub precompressed: Vec<Coding>,
    /// Codings produced on the fly, in order of preference among equally
    /// wanted ones (lighttpd `deflate.allowed-encodings`). Default
    /// `["br", "zstd", "gzip"]`; `[]` turns on-the-fly compression off.
    #[serde(default = "default_encodings")]
    pub encodings: Vec<Coding>,
    /// Compressible MIME types: an entry ending in `/` is a prefix
    /// (`"text/"`), others match the type without parameters exactly,
    /// case-insensitively (lighttpd `deflate.mimetypes`, nginx `gzip_types`).
    /// Default: `text/`, JavaScript, JSON, XML, SVG, WebAssembly, `.ico` and
    /// uncompressed font types.
    #[serde(default = "default_mime_types")]
    pub mime_types: Vec<String>,
    /// Smallest body compressed on the fly, bytes (nginx `gzip_min_length`,
    /// lighttpd `deflate.min-compress-size`). Default 1024.
    #[serde(default = "default_min_size")]
    pub min_size: u64,
    /// Largest body compressed on the fly, bytes (lighttpd
    /// `deflate.max-compress-size`); larger ones go out as they are. Default
    /// 8 MiB (8388608).
    #[serde(default = "default_max_size")]
    pub max_size: u64,
    /// Bytes of compressed bodies kept per instance (least recently used out
    /// first; one body at most a quarter of it); 0 disables the cache.
    /// Default 16 MiB (16777216).
    #[serde(default = "default_cache_size")]
    pub cache_size: u64,
    /// gzip level, 1 to 9 (nginx `gzip_comp_level`, lighttpd
    /// `deflate.compression-level`). Default 6.
    #[serde(default = "default_gzip_level")]
    pub gzip_level: u32,
    /// Brotli quality, 0 to 11. Default 5.
    #[serde(default = "default_brotli_level")]
    pub brotli_level: u32,
    /// zstd level, 1 to 19. Default 3.
    #[serde(default = "default_zstd_level")]
    pub zstd_level: i32,
    /// Index files tried for a directory path when looking for sidecars;
    /// keep it equal to static-file's `index-files`. Default
    /// `["index.html", "index.htm"]`.
    #[serde(default = "default_index")]
    pub index_files: Vec<String>,
}

fn default_encodings() -> Vec<Coding> {
    vec![Coding::Br, Coding::Zstd, Coding::Gzip]
}
fn default_mime_types() -> Vec<String> {
    [
        "text/",
        "application/javascript",
        "application/x-javascript",
        "application/json",
        "application/ld+json",
        "application/manifest+json",
        "application/xml",
        "application/xhtml+xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/wasm",
        "image/svg+xml",
        "image/x-icon",
        "image/vnd.microsoft.icon",
        "font/ttf",
        "font/otf",
        "application/vnd.ms-fontobject",
    ]
    .map(String::from)
    .to_vec()
}
fn default_min_size() -> u64 {
    1024
}
fn default_max_size() -> u64 {
    8 * 1024 * 1024
}
fn default_cache_size() -> u64 {
    16 * 1024 * 1024
}
fn default_gzip_level() -> u32 {
    6
}
fn default_brotli_level() -> u32 {
    5
}
fn default_zstd_level() -> i32 {
    3
}
fn default_index() -> Vec<String> {
    vec!["index.html".into(), "index.htm".into()]
}

impl Default for CompressConfig {
    fn default() -> Self {
        CompressConfig {
            precompressed: Vec::new(),
            encodings: default_encodings(),
            mime_types: default_mime_types(),
            min_size: default_min_size(),
            max_size: default_max_size(),
            cache_size: default_cache_size(),
            gzip_level: default_gzip_level(),
            brotli_level: default_brotli_level(),
            zstd_level: default_zstd_level(),
            index_files: default_index(),
        }
    }
}

/// Marks a response served from a sidecar (response extensions), so that the
/// response phase adds Vary to its 304 too.
struct FromSidecar;

/// The `compress` module instance of one vhost or rule.
pub struct Compress {
    precompressed: Vec<Coding>,
    encodings: Vec<Coding>,
    prefixes: Vec<String>,
    exact: Vec<String>,
    min_size: u64,
    max_size: u64,
    levels: Levels,
    index_files: Vec<String>,
    /// The default table, for a vhost without static-file.
    mime: MimeTable,
    /// The vhost's static-file table (its `mime-types` overrides).
    static_mime: Arc<std::sync::OnceLock<Arc<MimeTable>>>,
    cache: Arc<CompressedCache>,
}

fn no_duplicates(key: &str, list: &[Coding]) -> Result<(), String> {
    for (i, c) in list.iter().enumerate() {
        if list[..i].contains(c) {
            return Err(format!("{key}[{i}]: \"{}\" is listed twice", c.token()));
        }
    }
    Ok(())
}

impl ModuleDecl for Compress {
    const NAME: &'static str = "compress";
    type Config = CompressConfig;

    fn build(cfg: CompressConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        no_duplicates("precompressed", &cfg.precompressed)?;
        no_duplicates("encodings", &cfg.encodings)?;
        let (mut prefixes, mut exact) = (Vec::new(), Vec::new());
        for (i, t) in cfg.mime_types.iter().enumerate() {
            let t = t.trim().to_ascii_lowercase();
            if t.is_empty() || t.contains(';') || !t.contains('/') {
                return Err(format!(
                    "mime-types[{i}]: {:?} is not a MIME type (\"text/css\") or prefix (\"text/\")",
                    cfg.mime_types[i]
                ));
            }
            if t.ends_with('/') {
                prefixes.push(t);
            } else {
                exact.push(t);
            }
        }
        if cfg.min_size > cfg.max_size {
            return Err(format!(
                "min-size: {} is larger than max-size {}",
                cfg.min_size, cfg.max_size
            ));
        }
        if !(1..=9).contains(&cfg.gzip_level) {
            return Err(format!("gzip-level: {} is not in 1..=9", cfg.gzip_level));
        }
        if cfg.brotli_level > 11 {
            return Err(format!(
                "brotli-level: {} is not in 0..=11",
                cfg.brotli_level
            ));
        }
        if !(1..=19).contains(&cfg.zstd_level) {
            return Err(format!("zstd-level: {} is not in 1..=19", cfg.zstd_level));
        }
        for (i, f) in cfg.index_files.iter().enumerate() {
            if f.is_empty() || f.contains('/') || f == "." || f == ".." || f.contains('\0') {
                return Err(format!(
                    "index-files[{i}]: \"{f}\" must be a plain file name"
                ));
            }
        }
        Ok(Compress {
            precompressed: cfg.precompressed,
            encodings: cfg.encodings,
            prefixes,
            exact,
            min_size: cfg.min_size,
            max_size: cfg.max_size,
            levels: Levels {
                gzip: cfg.gzip_level,
                brotli: cfg.brotli_level,
                zstd: cfg.zstd_level,
            },
            index_files: cfg.index_files,
            mime: MimeTable::new([])?,
            static_mime: cx
                .shared
                .get_or_init(crate::static_file::mime::VhostMimeTables::default)
                .cell(cx.vhost.index),
            cache: Arc::new(CompressedCache::new(
                usize::try_from(cfg.cache_size).unwrap_or(usize::MAX),
            )),
        })
    }
}

/// Merges `Accept-Encoding` into the response's Vary as one field line
/// (RFC 9110 §12.5.5); nothing to do when it, or `*`, is already there.
pub fn merge_vary(headers: &mut HeaderMap) {
    let mut elems: Vec<&[u8]> = Vec::new();
    let mut present = false;
    let mut lines = 0;
    for v in headers.get_all(header::VARY) {
        lines += 1;
        for e in v.as_bytes().split(|&b| b == b',') {
            let e = e.trim_ascii();
            if e.is_empty() {
                continue;
            }
            present |= e == b"*" || e.eq_ignore_ascii_case(b"accept-encoding");
            elems.push(e);
        }
    }
    if present && lines <= 1 {
        return;
    }
    if elems.is_empty() {
        headers.insert(header::VARY, ACCEPT_ENCODING);
        return;
    }
    let mut out = elems.join(&b", "[..]);
    if !present {
        out.extend_from_slice(b", Accept-Encoding");
    }
    if let Ok(v) = HeaderValue::from_bytes(&out) {
        headers.insert(header::VARY, v);
    }
}

/// True when any Cache-Control line has `no-transform` (RFC 9111 §5.2.2.6).
fn no_transform(headers: &HeaderMap) -> bool {
    headers.get_all(header::CACHE_CONTROL).any(|v| {
        v.as_bytes()
            .split(|&b| b == b',')
            .any(|d| d.trim_ascii().eq_ignore_ascii_case(b"no-transform"))
    })
}

/// `tag` with `suffix` inserted before its closing quote (`"x"` -> `"x-gzip"`,
/// `W/"x"` -> `W/"x-gzip"`); `None` for a malformed tag.
fn suffixed_etag(tag: &str, suffix: &str) -> Option<String> {
    let opaque = tag.strip_prefix("W/").unwrap_or(tag);
    if opaque.len() < 2 || !opaque.starts_with('"') || !opaque.ends_with('"') {
        return None;
    }
    let mut s = String::with_capacity(tag.len() + suffix.len());
    s.push_str(&tag[..tag.len() - 1]);
    s.push_str(suffix);
    s.push('"');
    Some(s)
}

impl Compress {
    /// The MIME table static-file uses for this vhost, or the default one.
    fn mime(&self) -> &MimeTable {
        self.static_mime.get().map_or(&self.mime, |m| m)
    }

    /// True when the MIME type `t` (parameters ignored) is compressible.
    fn type_matches(&self, t: &str) -> bool {
        let essence = t.split(';').next().unwrap_or("").trim();
        self.exact.iter().any(|e| e.eq_ignore_ascii_case(essence))
            || self
                .prefixes
                .iter()
                .any(|p| essence.len() >= p.len() && essence[..p.len()].eq_ignore_ascii_case(p))
    }

    /// Whether the resource behind `res` is of a compressible type: from its
    /// Content-Type for 200 and single-range 206 answers, else (304,
    /// multipart 206) from the path's extension (`text/html` for a directory).
    fn compressible(&self, cx: &Ctx<'_>, res: &HttpResponse) -> bool {
        let ct = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        match ct {
            Some(t) if res.status() != StatusCode::NOT_MODIFIED && !t.starts_with("multipart/") => {
                self.type_matches(t)
            }
            _ => {
                let path = cx.path();
                if path.ends_with('/') {
                    self.type_matches("text/html")
                } else {
                    let v = self.mime().lookup(extension(path));
                    self.type_matches(v.to_str().unwrap_or(""))
                }
            }
        }
    }

    /// The file a path names for sidecar purposes: the path itself, or for a
    /// directory path the first index file present. `None` when it is hidden,
    /// not a regular file, or has a symbolic link in any component.
    fn original(&self, cx: &Ctx<'_>) -> Option<(PathBuf, std::fs::Metadata)> {
        // below the request's document root (the vhost's, or one set by
        // alias, userdir or mass-vhost)
        let path = cx.path_in_root();
        if has_hidden_segment(path) {
            return None;
        }
        let root = cx.document_root();
        let full = root.join(path.trim_start_matches('/'));
        if path.ends_with('/') {
            for name in &self.index_files {
                let p = full.join(name);
                match resolve::open(root, &p, SymlinkPolicy::Never) {
                    Resolved::File(_, m) => return Some((p, m)),
                    Resolved::NotFound if std::fs::symlink_metadata(&p).is_err() => {}
                    // present but a directory, refused or a link: static-file decides
                    _ => return None,
                }
            }
            return None;
        }
        match resolve::open(root, &full, SymlinkPolicy::Never) {
            Resolved::File(_, m) => Some((full, m)),
            _ => None,
        }
    }

    /// Content phase: serves a sidecar when the client accepts one and it
    /// exists; `None` passes the request on.
    fn sidecar(&self, cx: &Ctx<'_>) -> Option<HttpResponse> {
        let m = cx.method();
        if *m != Method::GET && *m != Method::HEAD {
            return None;
        }
        let ranked = accept::ranked(cx.req.headers(), &self.precompressed);
        if ranked.is_empty() {
            return None;
        }
        let (orig, orig_meta) = self.original(cx)?;
        let root = cx.document_root();
        let name = orig.file_name()?.to_str()?;
        // Only sidecars of compressible types: never a `.php.gz` or other
        // source that static-file would not serve as a document.
        let original_type = self.mime().lookup(extension(name));
        if !self.type_matches(original_type.to_str().unwrap_or("")) {
            return None;
        }
        for coding in ranked {
            let mut side = orig.clone().into_os_string();
            side.push(coding.file_suffix());
            let side = PathBuf::from(side);
            let Resolved::File(file, meta) = resolve::open(root, &side, SymlinkPolicy::Never)
            else {
                continue;
            };
            if mtime(&meta) < mtime(&orig_meta) {
                tracing::debug!(sidecar = %side.display(), "older than its original; not served");
                continue;
            }
            let headers: [(HeaderName, HeaderValue); 2] = [
                (header::CONTENT_ENCODING, coding.header_value()),
                (header::VARY, ACCEPT_ENCODING),
            ];
            let mut r = serve_file(
                cx,
                file,
                &meta,
                &Representation {
                    content_type: original_type.clone(),
                    etag: true,
                    etag_suffix: coding.etag_suffix(),
                    headers: &headers,
                },
            );
            r.extensions_mut().insert(FromSidecar);
            return Some(r);
        }
        None
    }

    /// Response phase: Vary, and on-the-fly compression when it applies.
    fn encode(&self, cx: &Ctx<'_>, res: &mut HttpResponse) {
        if res.extensions().contains::<FromSidecar>() {
            merge_vary(res.headers_mut());
            return;
        }
        let status = res.status();
        if !matches!(status.as_u16(), 200 | 206 | 304)
            || res.headers().contains_key(header::CONTENT_ENCODING)
            || (self.encodings.is_empty() && self.precompressed.is_empty())
            || !self.compressible(cx, res)
        {
            return;
        }
        merge_vary(res.headers_mut());
        if status != StatusCode::OK
            || cx.method() != Method::GET
            || self.encodings.is_empty()
            || no_transform(res.headers())
        {
            return;
        }
        match res.body().size() {
            BodySize::Sized(n) if n >= self.min_size && n <= self.max_size => {}
            _ => return,
        }
        let Some(&coding) = accept::ranked(cx.req.headers(), &self.encodings).first() else {
            return;
        };
        // The tag of the encoded variant; a malformed tag is dropped rather
        // than shared by two representations.
        let tags = match res.headers().get(header::ETAG).map(|v| v.to_str()) {
            None => None,
            Some(Ok(t)) => suffixed_etag(t, coding.etag_suffix()).map(|n| (t.to_owned(), n)),
            Some(Err(_)) => None,
        };
        if tags.is_none() {
            res.headers_mut().remove(header::ETAG);
        }
        if let Some((_, new)) = &tags {
            if cx.req.headers().contains_key(header::IF_NONE_MATCH)
                && conditional::evaluate(cx.req.headers(), new, None) == Precondition::NotModified
            {
                *res = not_modified(res, new);
                return;
            }
        }
        // the path, or with a document root set by a module, root and path
        let key = tags
            .as_ref()
            .zip(cx.resource_key())
            .map(|((old, _), path)| CacheKey::new(&path, old, coding));
        let cached = key.as_ref().and_then(|k| self.cache.get(k));
        let old = std::mem::replace(res, HttpResponse::new(StatusCode::OK));
        let (head, body) = old.into_parts();
        let body: BoxBody = if let Some(hit) = cached {
            BoxBody::new(hit)
        } else {
            match body.try_into_bytes() {
                Ok(bytes) => match encode::compress(&bytes, coding, self.levels) {
                    Ok(z) => {
                        let z = Bytes::from(z);
                        if let Some(k) = key {
                            self.cache.insert(k, z.clone());
                        }
                        BoxBody::new(z)
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, coding = coding.token(), "compression failed");
                        *res = head.set_body(BoxBody::new(bytes));
                        return;
                    }
                },
                Err(body) => match Encoder::new(coding, self.levels) {
                    Ok(enc) => {
                        let fill = key.map(|key| CacheFill {
                            cache: Arc::clone(&self.cache),
                            key,
                            collected: Some(Vec::new()),
                        });
                        BoxBody::new(EncodedBody::new(body, enc, fill))
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, coding = coding.token(), "compression failed");
                        *res = head.set_body(body);
                        return;
                    }
                },
            }
        };
        *res = head.set_body(body);
        let h = res.headers_mut();
        h.insert(header::CONTENT_ENCODING, coding.header_value());
        h.remove(header::CONTENT_LENGTH);
        h.remove(header::ACCEPT_RANGES);
        if let Some((_, new)) = tags {
            if let Ok(v) = HeaderValue::from_str(&new) {
                h.insert(header::ETAG, v);
            }
        }
    }
}

/// Modification time as (seconds, nanoseconds), for comparing sidecars.
fn mtime(m: &std::fs::Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (m.mtime(), m.mtime_nsec())
}

/// A 304 for the encoded variant with tag `etag`: the 200's fields without the
/// content ones (RFC 9110 §15.4.5).
fn not_modified(res: &HttpResponse, etag: &str) -> HttpResponse {
    let mut r = HttpResponse::NotModified().finish();
    let h = r.headers_mut();
    for (k, v) in res.headers() {
        if *k != header::CONTENT_TYPE
            && *k != header::CONTENT_LENGTH
            && *k != header::ACCEPT_RANGES
            && *k != header::CONTENT_ENCODING
        {
            h.append(k.clone(), v.clone());
        }
    }
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    r
}

impl Module for Compress {
    fn hooks(&self) -> Hooks {
        if self.precompressed.is_empty() {
            Hooks::RESPONSE
        } else {
            Hooks::CONTENT | Hooks::RESPONSE
        }
    }

    fn content(&self, cx: &mut Ctx<'_>) -> Option<HttpResponse> {
        self.sidecar(cx)
    }

    fn on_response(&self, cx: &mut Ctx<'_>, res: &mut HttpResponse) {
        self.encode(cx, res);
    }
}

#[cfg(test)]
mod tests;

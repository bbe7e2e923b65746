//! `static-file`: the content handler that serves files from the document root
//! (lighttpd mod_staticfile + mod_indexfile, nginx's static module, Cherokee's
//! `file` handler).
//!
//! GET and HEAD (HEAD: the same headers, no body); OPTIONS answers with `Allow`;
//! other methods get 405 with `Allow` (RFC 9110 §15.5.6). Index files; a directory
//! asked for without its trailing slash gets 301 to the slash form with the query
//! kept (case B25). `Last-Modified` and a strong `ETag`, conditional requests
//! (RFC 9110 §13), Range (§14) with multipart/byteranges, If-Range and 416.
//!
//! Requests are answered from an open-file cache ([`cache`]) when they can be:
//! validators, header values and the bytes of small files are computed once per
//! file version, and a changed file is picked up within a documented bound.
//!
//! Not built on actix-files: its `Files` service canonicalizes and stats the path
//! several times per request, answers a whole-file range with 200 (B07) and has no
//! symlink policy, multipart ranges, or §13.2.2 precedence; this module keeps its
//! shape (one concept per file) instead.

pub mod body;
pub mod cache;
pub mod conditional;
pub mod mime;
pub mod range;
pub mod resolve;

use std::collections::BTreeMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::Deserialize;
use smallvec::smallvec;
use tessera_core::actix_web::http::header::{self, HeaderName, HeaderValue};
use tessera_core::actix_web::http::{Method, StatusCode};
use tessera_core::actix_web::HttpResponse;
use tessera_core::body::PrebuiltFields;
use tessera_core::response::{error_response, redirect_to_slash};
use tessera_core::rule::extension;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

pub use body::{FileBody, HeadBody, Segment, Source};
use cache::{Entry, FileCache, Identity};
use conditional::Precondition;
use mime::MimeTable;
use range::RangeRequest;
pub use resolve::SymlinkPolicy;
use resolve::{has_hidden_segment, Resolved};

/// Files up to this size (128 KiB) are read whole on the worker and sent as one
/// buffer with the headers; larger ones are streamed in chunks.
pub const SMALL_FILE: u64 = 128 * 1024;

const ALLOW: HeaderValue = HeaderValue::from_static("GET, HEAD, OPTIONS");
const BYTES: HeaderValue = HeaderValue::from_static("bytes");

/// Options of `[vhost.static-file]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StaticFileConfig {
    /// Index files tried in order for a directory (lighttpd `index-file.names`,
    /// nginx `index`). Default `["index.html", "index.htm"]`.
    #[serde(default = "default_index")]
    pub index_files: Vec<String>,
    /// Serve hidden files and directories (names starting with `.`). Default
    /// `false`: they are 404, except `/.well-known/` (RFC 8615).
    #[serde(default)]
    pub hidden_files: bool,
    /// Symlink policy: `inside-root` (default), `always`, `never`, `owner-match`
    /// (lighttpd `server.follow-symlink`, nginx `disable_symlinks`).
    #[serde(default)]
    pub follow_symlinks: SymlinkPolicy,
    /// Extra or overriding MIME types by extension (without the dot), e.g.
    /// `{ md = "text/markdown; charset=utf-8" }` (lighttpd `mimetype.assign`).
    /// Default: none; the built-in table gives text types `charset=utf-8`.
    #[serde(default)]
    pub mime_types: BTreeMap<String, String>,
    /// Send `ETag` and honour entity-tag conditions. Default `true`
    /// (lighttpd `static-file.etags`, nginx `etag`).
    #[serde(default = "default_true")]
    pub etag: bool,
    /// Extensions (without the dot) this module never serves: it passes them on
    /// (lighttpd `static-file.exclude-extensions`). Default none.
    #[serde(default)]
    pub exclude_extensions: Vec<String>,
    /// Most paths kept in the open-file cache of this vhost (or rule); `0`
    /// turns the cache off (nginx `open_file_cache max=N`). Default `10000`.
    #[serde(default = "default_cache_entries")]
    pub open_file_cache: usize,
    /// Milliseconds a cached entry is trusted before the next request checks it
    /// with one `stat` (nginx `open_file_cache_valid`, lighttpd's 1 s stat
    /// cache). A changed file is served as it is on disk at most this long
    /// after the change. Default `0`: every request checks, and a change is seen
    /// by the next request.
    #[serde(default)]
    pub open_file_cache_valid: u64,
    /// Bytes of file content (files up to 128 KiB) the open-file cache may hold
    /// in memory. Default `67108864` (64 MiB); `0` keeps no content.
    #[serde(default = "default_memory_cache")]
    pub memory_cache_size: usize,
}

fn default_cache_entries() -> usize {
    10_000
}
fn default_memory_cache() -> usize {
    64 << 20
}

fn default_index() -> Vec<String> {
    vec!["index.html".into(), "index.htm".into()]
}
fn default_true() -> bool {
    true
}

impl Default for StaticFileConfig {
    fn default() -> Self {
        StaticFileConfig {
            index_files: default_index(),
            hidden_files: false,
            follow_symlinks: SymlinkPolicy::default(),
            mime_types: BTreeMap::new(),
            etag: true,
            exclude_extensions: Vec::new(),
            open_file_cache: default_cache_entries(),
            open_file_cache_valid: 0,
            memory_cache_size: default_memory_cache(),
        }
    }
}

/// The `static-file` module instance of one vhost or rule.
pub struct StaticFile {
    root: PathBuf,
    index_files: Vec<String>,
    hidden_files: bool,
    symlinks: SymlinkPolicy,
    mime: Arc<MimeTable>,
    etag: bool,
    exclude: Vec<String>,
    cache: Option<FileCache>,
}

impl ModuleDecl for StaticFile {
    const NAME: &'static str = "static-file";
    type Config = StaticFileConfig;

    fn build(cfg: StaticFileConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        for (i, f) in cfg.index_files.iter().enumerate() {
            if f.is_empty() || f.contains('/') || f == "." || f == ".." || f.contains('\0') {
                return Err(format!(
                    "index-files[{i}]: \"{f}\" must be a plain file name"
                ));
            }
        }
        let mime = Arc::new(MimeTable::new(
            cfg.mime_types.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )?);
        if cx.rule_match.is_none() {
            let _ = cx
                .shared
                .get_or_init(mime::VhostMimeTables::default)
                .cell(cx.vhost.index)
                .set(mime.clone());
        }
        // An index file with an excluded extension is never served either
        // (lighttpd checks the index file's own name too).
        let excluded = |name: &str| {
            extension(name).is_some_and(|e| {
                cfg.exclude_extensions
                    .iter()
                    .any(|x| x.trim_start_matches('.').eq_ignore_ascii_case(e))
            })
        };
        let index_files: Vec<String> = cfg
            .index_files
            .iter()
            .filter(|f| !excluded(f))
            .cloned()
            .collect();
        Ok(StaticFile {
            root: cx.vhost.document_root.clone(),
            index_files,
            hidden_files: cfg.hidden_files,
            symlinks: cfg.follow_symlinks,
            mime,
            etag: cfg.etag,
            exclude: cfg
                .exclude_extensions
                .iter()
                .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                .collect(),
            cache: (cfg.open_file_cache > 0).then(|| {
                FileCache::new(
                    cfg.open_file_cache,
                    cfg.memory_cache_size,
                    Duration::from_millis(cfg.open_file_cache_valid),
                    cfg.follow_symlinks == SymlinkPolicy::Never,
                )
            }),
        })
    }
}

impl Module for StaticFile {
    fn hooks(&self) -> Hooks {
        Hooks::CONTENT
    }

    fn sends_files(&self) -> bool {
        true
    }

    fn content(&self, cx: &mut Ctx<'_>) -> Option<HttpResponse> {
        // Below the request's document root: the vhost's, or the one a
        // request-phase module (alias, userdir, mass-vhost) set.
        let path = cx.path_in_root();
        if !self.hidden_files && has_hidden_segment(path) {
            return Some(error_response(StatusCode::NOT_FOUND));
        }
        if !self.exclude.is_empty() {
            if let Some(ext) = extension(path) {
                if self.exclude.iter().any(|e| e.eq_ignore_ascii_case(ext)) {
                    return None;
                }
            }
        }
        let key = self.cache.as_ref().and_then(|_| cx.resource_key());
        if let (Some(cache), Some(key)) = (&self.cache, &key) {
            if let Some(r) = self.cached_response(cache, cx, key, cx.prebuilt_fields_ok()) {
                return Some(r);
            }
        }
        let root = cx.document_root();
        let full = root.join(path.trim_start_matches('/'));
        match resolve::open(root, &full, self.symlinks) {
            Resolved::NotFound => None,
            Resolved::Forbidden => Some(error_response(StatusCode::FORBIDDEN)),
            Resolved::Unavailable => Some(unavailable()),
            Resolved::File(file, meta) => {
                if path.ends_with('/') {
                    return None;
                }
                let ext = extension(path);
                Some(self.serve(cx, key.as_deref(), full, None, file, &meta, ext))
            }
            Resolved::Dir => {
                if let Some(r) = method_check(cx) {
                    return Some(r);
                }
                if !cx.path().ends_with('/') {
                    return Some(redirect_to_slash(cx));
                }
                for (i, name) in self.index_files.iter().enumerate() {
                    let index = full.join(name);
                    match resolve::open(root, &index, self.symlinks) {
                        Resolved::File(file, meta) => {
                            // A later index file is served only while no earlier
                            // one exists: a cached entry also checks the directory.
                            let dir = if i == 0 {
                                None
                            } else {
                                std::fs::metadata(&full)
                                    .ok()
                                    .map(|m| (full.clone(), Identity::of(&m)))
                            };
                            let ext = extension(name);
                            return Some(self.serve(
                                cx,
                                key.as_deref(),
                                index,
                                dir,
                                file,
                                &meta,
                                ext,
                            ));
                        }
                        Resolved::Forbidden => return Some(error_response(StatusCode::FORBIDDEN)),
                        Resolved::Unavailable => return Some(unavailable()),
                        _ => {}
                    }
                }
                // No index file: 403 unless a later handler (dir-listing)
                // answers, as lighttpd and nginx without autoindex do.
                drop(key);
                cx.set_fallback_status(StatusCode::FORBIDDEN);
                None
            }
        }
    }

    /// The file it answered with: `file /srv/www/a.css`, `index file
    /// /srv/www/docs/index.html`; or what it answered for instead.
    fn explain(&self, cx: &Ctx<'_>) -> Option<String> {
        let path = cx.path_in_root();
        let full = cx.document_root().join(path.trim_start_matches('/'));
        Some(match std::fs::metadata(&full) {
            Ok(m) if m.is_file() => format!("file {}", full.display()),
            Ok(m) if m.is_dir() && !cx.path().ends_with('/') => {
                format!("directory {}, asked for without its slash", full.display())
            }
            Ok(m) if m.is_dir() => match self
                .index_files
                .iter()
                .map(|n| full.join(n))
                .find(|p| p.is_file())
            {
                Some(p) => format!("index file {}", p.display()),
                None => format!("directory {} without an index file", full.display()),
            },
            _ => format!("no file served for {}", full.display()),
        })
    }
}

/// 405 with `Allow` for methods other than GET, HEAD and OPTIONS; 200 with
/// `Allow` for OPTIONS (RFC 9110 §9.3.7, §15.5.6).
fn method_check(cx: &Ctx<'_>) -> Option<HttpResponse> {
    let m = cx.method();
    if m == Method::GET || m == Method::HEAD {
        return None;
    }
    let mut r = if m == Method::OPTIONS {
        HttpResponse::Ok().finish()
    } else {
        error_response(StatusCode::METHOD_NOT_ALLOWED)
    };
    r.headers_mut().insert(header::ALLOW, ALLOW);
    Some(r)
}

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

fn boundary() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("tessera{:016x}{:08x}", t ^ 0x9e37_79b9_7f4a_7c15, n)
}

/// How [`serve_file`] labels the file it sends.
pub struct Representation<'a> {
    /// The Content-Type (for a precompressed sidecar, the type of the original
    /// name, not `application/gzip`).
    pub content_type: HeaderValue,
    /// Send an `ETag` and honour entity-tag conditions (static-file's `etag`).
    pub etag: bool,
    /// Appended to the ETag inside its quotes (`"-br"` gives `"…-br"`), so that
    /// each content-coding of a resource has its own tag (RFC 9110 §8.8.3);
    /// `""` for none.
    pub etag_suffix: &'a str,
    /// Fields added to the 200 and 206 responses (HEAD included), for example
    /// `Content-Encoding`; not to 304, 412 or 416.
    pub headers: &'a [(HeaderName, HeaderValue)],
}

impl StaticFile {
    /// An instance serving `root` with the default options (open-file cache
    /// included), for files other modules name by path: X-Sendfile of the
    /// CGI-family back ends (lighttpd `x-sendfile-docroot`).
    pub fn for_directory(root: PathBuf) -> StaticFile {
        let cfg = StaticFileConfig::default();
        StaticFile {
            root,
            index_files: Vec::new(),
            hidden_files: true,
            symlinks: cfg.follow_symlinks,
            mime: Arc::new(MimeTable::new([]).expect("no overrides, no errors")),
            etag: cfg.etag,
            exclude: Vec::new(),
            cache: Some(FileCache::new(
                cfg.open_file_cache,
                cfg.memory_cache_size,
                Duration::from_millis(cfg.open_file_cache_valid),
                cfg.follow_symlinks == SymlinkPolicy::Never,
            )),
        }
    }

    /// Serves the regular file at `path` (normalized, starting with `/`)
    /// under this instance's root, as the content handler would: open-file
    /// cache, validators, conditional requests and Range. `None` when there
    /// is no regular file there (a directory included); 403 when the symlink
    /// policy refuses it.
    pub fn serve_at(&self, cx: &Ctx<'_>, path: &str) -> Option<HttpResponse> {
        if let Some(cache) = &self.cache {
            // (no prebuilt fields: the caller adds its own, X-Sendfile's Content-Type)
            if let Some(r) = self.cached_response(cache, cx, path, false) {
                return Some(r);
            }
        }
        let full = self.root.join(path.trim_start_matches('/'));
        match resolve::open(&self.root, &full, self.symlinks) {
            Resolved::File(file, meta) => {
                Some(self.serve(cx, Some(path), full, None, file, &meta, extension(path)))
            }
            Resolved::Forbidden => Some(error_response(StatusCode::FORBIDDEN)),
            Resolved::Unavailable => Some(unavailable()),
            Resolved::NotFound | Resolved::Dir => None,
        }
    }

    /// Answers from the open-file cache; `None` when the path is not cached or
    /// its entry is out of date (the caller resolves it afresh). `prebuilt`:
    /// see [`respond`].
    fn cached_response(
        &self,
        cache: &FileCache,
        cx: &Ctx<'_>,
        key: &str,
        prebuilt: bool,
    ) -> Option<HttpResponse> {
        let e = cache.get(key)?;
        if let Some(r) = method_check(cx) {
            return Some(r);
        }
        let source = match &e.content {
            Some(b) => Source::Memory(b.clone()),
            None => {
                // Not in memory: open it by the cached path (non-blocking, as
                // resolve::open does: a FIFO swapped in cannot hang a worker),
                // and make sure it is still the version the entry describes.
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&e.path)
                    .ok()?;
                let meta = file.metadata().ok()?;
                if Identity::of(&meta) != e.id {
                    cache.remove(key, &e);
                    return None;
                }
                Source::File(file)
            }
        };
        Some(respond(cx, &e.info, source, &[], prebuilt))
    }

    /// Answers for a file resolved without the cache (`path` is its full path;
    /// `dir` the directory to check too, for a later index file), and caches
    /// it under `key` ([`Ctx::resource_key`]; `None`: not cached) unless it
    /// changed less than [`cache::RACY`] ago.
    #[allow(clippy::too_many_arguments)]
    fn serve(
        &self,
        cx: &Ctx<'_>,
        key: Option<&str>,
        path: PathBuf,
        dir: Option<(PathBuf, Identity)>,
        file: File,
        meta: &Metadata,
        ext: Option<&str>,
    ) -> HttpResponse {
        let info = FileInfo::new(meta, self.mime.lookup(ext), self.etag, "");
        let (Some(cache), Some(key)) = (&self.cache, key) else {
            return respond(cx, &info, Source::File(file), &[], false);
        };
        let id = Identity::of(meta);
        if id.is_racy(SystemTime::now()) {
            return respond(cx, &info, Source::File(file), &[], false);
        }
        let mut content = None;
        if meta.len() <= SMALL_FILE && cache.max_bytes() > 0 {
            match read_whole(&file, meta.len()) {
                // The bytes read are the version `meta` describes only if the
                // file still has that identity afterwards.
                Ok(buf)
                    if buf.len() as u64 == meta.len()
                        && file.metadata().is_ok_and(|m| Identity::of(&m) == id) =>
                {
                    content = Some(Bytes::from(buf));
                }
                _ => return respond(cx, &info, Source::File(file), &[], false),
            }
        }
        let source = match &content {
            Some(b) => Source::Memory(b.clone()),
            None => Source::File(file),
        };
        let r = respond(cx, &info, source, &[], false);
        cache.insert(key, Entry::new(path, dir, id, info.prebuild(), content));
        r
    }
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
    fields: Option<Bytes>,
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
    fn prebuild(mut self) -> Self {
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

    fn validators(&self, r: &mut HttpResponse) {
        let h = r.headers_mut();
        if let Some(v) = &self.etag_value {
            h.insert(header::ETAG, v.clone());
        }
        if let Some(v) = &self.last_modified_value {
            h.insert(header::LAST_MODIFIED, v.clone());
        }
    }
}

/// In the extensions of a 304 from static-file: the Content-Type the 200 would
/// have carried. A 304 sends none (RFC 9110 §15.4.5), but response-phase
/// modules that choose by type (expires `mime-types`) must still apply, so
/// that the cache's stored Cache-Control and Expires are refreshed (RFC 9111
/// §4.3.4).
#[derive(Debug, Clone)]
pub struct NotModifiedType(pub HeaderValue);

/// The first `size` bytes of `file`, read with `pread` from offset 0.
fn read_whole(file: &File, size: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; size as usize];
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// Answers a GET or HEAD for an open regular `file` with metadata `meta` (of the
/// open descriptor): 405/OPTIONS handling, `Last-Modified` and `ETag`,
/// conditional requests (RFC 9110 §13.2.2: 304, 412), Range (§14: 206, multipart,
/// If-Range, 416), and 200 otherwise, with `Accept-Ranges: bytes`. Files up to
/// [`SMALL_FILE`] bytes are read into one buffer; larger ones are streamed.
/// This is the `static-file` content handler's response; other modules (the
/// `compress` module's precompressed sidecars) call it for files they chose.
pub fn serve_file(
    cx: &Ctx<'_>,
    file: File,
    meta: &Metadata,
    rep: &Representation<'_>,
) -> HttpResponse {
    let info = FileInfo::new(meta, rep.content_type.clone(), rep.etag, rep.etag_suffix);
    respond(cx, &info, Source::File(file), rep.headers, false)
}

/// 503 with `Retry-After: 1`: the file could not be opened for want of
/// descriptors or memory (it may well exist; a 404 would be a lie that caches
/// and crawlers keep).
pub fn unavailable() -> HttpResponse {
    let mut r = error_response(StatusCode::SERVICE_UNAVAILABLE);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// A response with a file body whose `sendfile(2)` handle rides in the
/// extensions, for the HTTP/1.1 engine ([`tessera_core::body`]).
fn with_sendfile(
    mut builder: tessera_core::actix_web::HttpResponseBuilder,
    body: FileBody,
) -> HttpResponse {
    let handle = body.sendfile();
    let mut r = builder.body(body);
    if let Some(h) = handle {
        r.extensions_mut().insert(h);
    }
    r
}

/// The response for a file described by `info` whose bytes come from `source`
/// (see [`serve_file`]); `extra` is added to 200 and 206 responses.
/// `prebuilt`: a full response may carry `info`'s prebuilt fields instead
/// of map entries ([`Ctx::prebuilt_fields_ok`], for the pipeline's own
/// content phase only).
fn respond(
    cx: &Ctx<'_>,
    info: &FileInfo,
    source: Source,
    extra: &[(HeaderName, HeaderValue)],
    prebuilt: bool,
) -> HttpResponse {
    if let Some(r) = method_check(cx) {
        return r;
    }
    let size = info.size;
    let lm = info.last_modified;
    let headers = cx.req.headers();
    // With ETags off, entity-tag conditions compare against a tag that never
    // matches a well-formed one.
    let cmp_tag = if info.etag.is_empty() {
        "\"\u{0}\""
    } else {
        info.etag.as_str()
    };
    match conditional::evaluate(headers, cmp_tag, lm) {
        Precondition::NotModified => {
            let mut r = HttpResponse::NotModified().finish();
            info.validators(&mut r);
            r.extensions_mut()
                .insert(NotModifiedType(info.content_type.clone()));
            return r;
        }
        Precondition::Failed => return error_response(StatusCode::PRECONDITION_FAILED),
        Precondition::Proceed => {}
    }
    let ctype = info.content_type.clone();
    let is_get = cx.method() == Method::GET;
    let ranges = match headers.get(header::RANGE) {
        Some(v) if is_get && conditional::if_range(headers, cmp_tag, lm) => {
            range::parse(v.to_str().unwrap_or(""), size)
        }
        _ => RangeRequest::Ignore,
    };
    let mut r = match ranges {
        RangeRequest::Unsatisfiable => {
            let mut r = error_response(StatusCode::RANGE_NOT_SATISFIABLE);
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            r.headers_mut().insert(header::ACCEPT_RANGES, BYTES);
            return r;
        }
        RangeRequest::Ranges(rs) if rs.len() == 1 => {
            let br = rs[0];
            let mut r = match source {
                Source::Memory(b) => HttpResponse::PartialContent()
                    .body(b.slice(br.start as usize..(br.start + br.len) as usize)),
                Source::File(file) => with_sendfile(
                    HttpResponse::PartialContent(),
                    FileBody::new(
                        file,
                        smallvec![Segment::File {
                            offset: br.start,
                            len: br.len
                        }],
                    ),
                ),
            };
            if let Ok(v) =
                HeaderValue::from_str(&format!("bytes {}-{}/{size}", br.start, br.last()))
            {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            r.headers_mut().insert(header::CONTENT_TYPE, ctype);
            r
        }
        RangeRequest::Ranges(rs) => {
            let b = boundary();
            let mut segs = smallvec::SmallVec::new();
            for (i, br) in rs.iter().enumerate() {
                let head = format!(
                    "{}--{b}\r\nContent-Type: {}\r\nContent-Range: bytes {}-{}/{size}\r\n\r\n",
                    if i == 0 { "" } else { "\r\n" },
                    ctype.to_str().unwrap_or(mime::DEFAULT_TYPE),
                    br.start,
                    br.last()
                );
                segs.push(Segment::Bytes(Bytes::from(head)));
                segs.push(Segment::File {
                    offset: br.start,
                    len: br.len,
                });
            }
            segs.push(Segment::Bytes(Bytes::from(format!("\r\n--{b}--\r\n"))));
            let mut r = with_sendfile(
                HttpResponse::PartialContent(),
                FileBody::with_source(source, segs),
            );
            if let Ok(v) = HeaderValue::from_str(&format!("multipart/byteranges; boundary={b}")) {
                r.headers_mut().insert(header::CONTENT_TYPE, v);
            }
            r
        }
        RangeRequest::Ignore => {
            let mut r = if !is_get {
                HttpResponse::Ok().body(HeadBody(size))
            } else {
                match source {
                    Source::Memory(b) => HttpResponse::Ok().body(b),
                    Source::File(file) if size <= SMALL_FILE => match read_whole(&file, size) {
                        Ok(buf) => HttpResponse::Ok().body(buf),
                        Err(e) => {
                            tracing::warn!(path = %cx.path(), error = %e, "read failed");
                            return error_response(StatusCode::INTERNAL_SERVER_ERROR);
                        }
                    },
                    Source::File(file) => with_sendfile(
                        HttpResponse::Ok(),
                        FileBody::new(
                            file,
                            smallvec![Segment::File {
                                offset: 0,
                                len: size
                            }],
                        ),
                    ),
                }
            };
            if let (true, Some(fields), true) = (prebuilt, &info.fields, extra.is_empty()) {
                r.extensions_mut().insert(PrebuiltFields(fields.clone()));
                return r;
            }
            r.headers_mut().insert(header::CONTENT_TYPE, ctype);
            r
        }
    };
    r.headers_mut().insert(header::ACCEPT_RANGES, BYTES);
    info.validators(&mut r);
    for (k, v) in extra {
        r.headers_mut().insert(k.clone(), v.clone());
    }
    r
}

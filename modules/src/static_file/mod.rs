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
mod info;
pub mod mime;
pub mod range;
pub mod resolve;
mod respond;

use std::collections::BTreeMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde::Deserialize;
use tessera_core::actix_web::http::header::HeaderValue;
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::response::{error_response, redirect_to_slash};
use tessera_core::rule::extension;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

pub use body::{FileBody, HeadBody, Segment, Source};
use cache::{Entry, FileCache, Identity};
pub use info::FileInfo;
use mime::MimeTable;
pub use resolve::SymlinkPolicy;
use resolve::{has_hidden_segment, Resolved};
use respond::{method_check, read_whole, respond, Mode};
pub use respond::{serve_file, unavailable, NotModifiedType, Representation};

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
    /// Suffixes of file names this module never serves: a file whose name
    /// ends with one of them, compared ASCII case-insensitively, is passed on
    /// to the next module (lighttpd `static-file.exclude-extensions`, which
    /// matches each entry as a plain suffix). `".php"` and `"php"` both
    /// exclude `x.php` (`"php"` also `xphp`), `"~"` excludes `notes.txt~`;
    /// `""` excludes every file. When no later module answers, such a file
    /// that exists is 403 (lighttpd's answer), a missing one 404. An index
    /// file whose name ends with one is
    /// never served either, and a directory where one exists is 403, never
    /// passed on to a listing (lighttpd's mod_indexfile picks it and
    /// mod_staticfile refuses it). Each entry is a string without `/`;
    /// default none.
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
    /// Index files left out by `exclude-extensions` (`index.php`): one that
    /// exists makes its directory 403, never a listing.
    excluded_index: Vec<String>,
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
        for (i, x) in cfg.exclude_extensions.iter().enumerate() {
            if x.contains('/') || x.contains('\0') {
                return Err(format!(
                    "exclude-extensions[{i}]: \"{x}\" must be a suffix of a file name (no '/')"
                ));
            }
        }
        // An index file with an excluded suffix is never served either
        // (lighttpd checks the index file's own name too).
        let (excluded_index, index_files): (Vec<String>, Vec<String>) = cfg
            .index_files
            .iter()
            .cloned()
            .partition(|f| has_excluded_suffix(f, &cfg.exclude_extensions));
        Ok(StaticFile {
            root: cx.vhost.document_root.clone(),
            index_files,
            excluded_index,
            hidden_files: cfg.hidden_files,
            symlinks: cfg.follow_symlinks,
            mime,
            etag: cfg.etag,
            exclude: cfg.exclude_extensions.clone(),
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

/// Whether the file name `name` ends with one of `suffixes`, compared ASCII
/// case-insensitively (`exclude-extensions`; lighttpd's
/// `static-file.exclude-extensions` compares the same suffixes
/// case-sensitively). An empty suffix matches every name.
fn has_excluded_suffix(name: &str, suffixes: &[String]) -> bool {
    let name = name.as_bytes();
    suffixes.iter().any(|s| {
        let s = s.as_bytes();
        s.len() <= name.len() && name[name.len() - s.len()..].eq_ignore_ascii_case(s)
    })
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
            let name = &path[path.rfind('/').map_or(0, |i| i + 1)..];
            if has_excluded_suffix(name, &self.exclude) {
                // passed on; when no later handler answers, a file that
                // exists is 403, as lighttpd's mod_staticfile refuses it
                // (a missing one stays 404)
                let full = cx.document_root().join(path.trim_start_matches('/'));
                if std::fs::metadata(full).is_ok_and(|m| m.is_file()) {
                    cx.set_fallback_status(StatusCode::FORBIDDEN);
                }
                return None;
            }
        }
        let key = self.cache.as_ref().and_then(|_| cx.resource_key());
        if let (Some(cache), Some(key)) = (&self.cache, &key) {
            if let Some(r) = self.cached_response(
                cache,
                cx,
                key,
                Mode::Request {
                    prebuilt: cx.prebuilt_fields_ok(),
                },
            ) {
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
                Some(self.serve(
                    cx,
                    key.as_deref(),
                    full,
                    None,
                    file,
                    &meta,
                    ext,
                    Mode::Request { prebuilt: false },
                ))
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
                                Mode::Request { prebuilt: false },
                            ));
                        }
                        Resolved::Forbidden => return Some(error_response(StatusCode::FORBIDDEN)),
                        Resolved::Unavailable => return Some(unavailable()),
                        _ => {}
                    }
                }
                // An index file that exists but is excluded (`index.php`
                // where no back end took the request): 403, as lighttpd's
                // mod_indexfile picks it and mod_staticfile refuses it; a
                // listing of the directory would show what its index hides.
                if self
                    .excluded_index
                    .iter()
                    .any(|name| std::fs::metadata(full.join(name)).is_ok_and(|m| m.is_file()))
                {
                    return Some(error_response(StatusCode::FORBIDDEN));
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

impl StaticFile {
    /// An instance serving `root` with the default options (open-file cache
    /// included), for files other modules name by path: X-Sendfile of the
    /// CGI-family back ends (lighttpd `x-sendfile-docroot`).
    pub fn for_directory(root: PathBuf) -> StaticFile {
        let cfg = StaticFileConfig::default();
        StaticFile {
            root,
            index_files: Vec::new(),
            excluded_index: Vec::new(),
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
    /// under this instance's root through the open-file cache: as the
    /// content handler would (validators, conditional requests and Range),
    /// or with `whole` the whole file as a 200 whatever the method,
    /// conditions and Range (a body for a status the caller sets). `None`
    /// when there is no regular file there (a directory included); 403 when
    /// the symlink policy refuses it.
    pub fn serve_at(&self, cx: &Ctx<'_>, path: &str, whole: bool) -> Option<HttpResponse> {
        // (no prebuilt fields: the caller adds its own, X-Sendfile's Content-Type)
        let mode = if whole {
            Mode::Whole
        } else {
            Mode::Request { prebuilt: false }
        };
        if let Some(cache) = &self.cache {
            if let Some(r) = self.cached_response(cache, cx, path, mode) {
                return Some(r);
            }
        }
        let full = self.root.join(path.trim_start_matches('/'));
        match resolve::open(&self.root, &full, self.symlinks) {
            Resolved::File(file, meta) => Some(self.serve(
                cx,
                Some(path),
                full,
                None,
                file,
                &meta,
                extension(path),
                mode,
            )),
            Resolved::Forbidden => Some(error_response(StatusCode::FORBIDDEN)),
            Resolved::Unavailable => Some(unavailable()),
            Resolved::NotFound | Resolved::Dir => None,
        }
    }

    /// Answers from the open-file cache; `None` when the path is not cached or
    /// its entry is out of date (the caller resolves it afresh).
    fn cached_response(
        &self,
        cache: &FileCache,
        cx: &Ctx<'_>,
        key: &str,
        mode: Mode,
    ) -> Option<HttpResponse> {
        let e = cache.get(key)?;
        if mode != Mode::Whole {
            if let Some(r) = method_check(cx) {
                return Some(r);
            }
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
        Some(respond(cx, &e.info, source, &[], mode))
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
        mode: Mode,
    ) -> HttpResponse {
        let info = FileInfo::new(meta, self.mime.lookup(ext), self.etag, "");
        let (Some(cache), Some(key)) = (&self.cache, key) else {
            return respond(cx, &info, Source::File(file), &[], mode);
        };
        let id = Identity::of(meta);
        if id.is_racy(SystemTime::now()) {
            return respond(cx, &info, Source::File(file), &[], mode);
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
                _ => return respond(cx, &info, Source::File(file), &[], mode),
            }
        }
        let source = match &content {
            Some(b) => Source::Memory(b.clone()),
            None => Source::File(file),
        };
        let r = respond(cx, &info, source, &[], mode);
        cache.insert(key, Entry::new(path, dir, id, info.prebuild(), content));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(json: serde_json::Value) -> Result<StaticFile, String> {
        crate::testing::build(json)
    }

    /// `exclude-extensions` entries are suffixes of the file name, as in
    /// lighttpd (ASCII case-insensitive here): undotted entries and `~`
    /// exclude too, and a dotted entry matches as it always did.
    #[test]
    fn exclude_extensions_are_file_name_suffixes() {
        let x = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let ex = x(&["php", ".inc", "~"]);
        for name in ["x.php", "X.PHP", "a.inc", "notes.txt~", "xphp"] {
            assert!(has_excluded_suffix(name, &ex), "{name}");
        }
        for name in ["a.html", "php.txt", "inc", "a.php.txt", ""] {
            assert!(!has_excluded_suffix(name, &ex), "{name}");
        }
        let dotted = x(&[".php"]);
        assert!(has_excluded_suffix("index.php", &dotted));
        assert!(has_excluded_suffix("a.Php", &dotted));
        assert!(!has_excluded_suffix("aphp", &dotted));
        assert!(has_excluded_suffix("a", &x(&[""])));
        assert!(has_excluded_suffix("caf\u{e9}", &x(&["\u{e9}"])));
    }

    /// An index file with an excluded suffix is never tried; an entry with a
    /// `/` is refused, naming its position.
    #[test]
    fn exclude_extensions_filter_index_files_and_refuse_slashes() {
        let s = build(serde_json::json!({
            "index-files": ["index.php", "index.html", "index.htm~"],
            "exclude-extensions": ["php", "~"],
        }))
        .unwrap();
        assert_eq!(s.index_files, ["index.html"]);
        let e = build(serde_json::json!({ "exclude-extensions": [".php", "a/b"] }))
            .err()
            .unwrap();
        assert!(
            e.contains("exclude-extensions[1]") && e.contains("a/b"),
            "{e}"
        );
    }
}

//! `dir-listing`: an index page for a directory that has no index file (lighttpd
//! mod_dirlisting, Cherokee's `dirlist` handler, nginx `autoindex`).
//!
//! ```toml
//! [[vhost]]
//! modules = ["static-file", "dir-listing"]     # after static-file
//! [vhost.dir-listing]
//! hidden-files = false
//! format = "html"                              # or "json"
//! header-file = "HEADER.txt"
//! readme-file = "README.html"
//! max-entries = 10000
//! ```
//!
//! A content handler: it answers GET and HEAD for a path ending in `/` that names
//! a directory under the document root, and passes everything else on. It does
//! not look for index files; put it after `static-file` in `modules`, which
//! serves the index file when there is one and passes the directory on when
//! there is none. A directory asked for without its trailing slash is
//! redirected by `static-file`. Off unless named in `modules` (lighttpd
//! `dir-listing.activate = "disable"` is the default too).
//!
//! # What is listed
//! Directories first, then files, each group sorted by name (byte order, like
//! lighttpd); for each its name, modification time (UTC, `YYYY-MM-DD HH:MM:SS`)
//! and size in bytes (directories: `-`). Left out: names starting with `.`
//! (unless `hidden-files = true`), names that are not UTF-8 (they cannot be
//! asked for), entries that are neither regular files nor directories, and
//! symbolic links the `follow-symlinks` policy refuses (as static-file would
//! answer 403 for them) or that dangle. At most `max-entries` entries are read,
//! in directory order, then sorted; the page then says "listing truncated".
//!
//! # Safety
//! The directory is opened with [`crate::static_file::resolve::open`]: a path with a
//! hidden segment is 404 (unless `hidden-files`), a directory reached through a
//! link outside the document root is 403 under `inside-root`. Names are
//! HTML-escaped in text and, in links, percent-encoded with
//! [`tessera_core::path::encode`] (plus `'`) and then HTML-escaped, so
//! `<script>.html`, `a"b`, `x#y`, `q?` or `100%` cannot inject markup and each
//! link leads back to its file. Links are absolute paths, so a name such as
//! `javascript:x` is never read as a scheme.
//!
//! # JSON
//! With `format = "json"`, `application/json`:
//! `{"path":"/dir/","entries":[{"name":"sub","type":"directory","size":null,"mtime":1700000000},
//! {"name":"a.txt","type":"file","size":12,"mtime":1700000000}],"truncated":false}`
//! (`mtime` in seconds since the Unix epoch, `null` when unknown). Header and
//! readme files are not included. To offer both forms, give a rule its own table,
//! e.g. `match = { query = "^format=json$" }` with `[vhost.rule.dir-listing]
//! format = "json"`.

use std::fmt::Write as _;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tessera_core::actix_web::http::header::{self, HeaderValue};
use tessera_core::actix_web::http::{Method, StatusCode};
use tessera_core::actix_web::HttpResponse;
use tessera_core::response::{error_response, TEXT_HTML};
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

use crate::static_file::resolve::{self, has_hidden_segment, Resolved, SymlinkPolicy};

const ALLOW: HeaderValue = HeaderValue::from_static("GET, HEAD, OPTIONS");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Header and readme files larger than this (64 KiB) are left out of the page.
pub const MAX_NOTICE_FILE: u64 = 64 * 1024;

/// The form of the listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// An HTML page (default).
    #[default]
    Html,
    /// A JSON document (see the module documentation).
    Json,
}

/// Options of `[vhost.dir-listing]` (or of a rule's `dir-listing` table).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DirListingConfig {
    /// List names starting with `.`, and list directories with such a segment in
    /// their path. Default `false` (lighttpd `dir-listing.hide-dotfiles`, Cherokee
    /// `hidden = 0`); `/.well-known/` itself can always be listed.
    #[serde(default)]
    pub hidden_files: bool,
    /// Symlink policy for the directory and its entries, as static-file's:
    /// `inside-root` (default), `always`, `never`, `owner-match`.
    #[serde(default)]
    pub follow_symlinks: SymlinkPolicy,
    /// `"html"` (default) or `"json"`.
    #[serde(default)]
    pub format: Format,
    /// Name of a file in the listed directory whose content is shown above the
    /// listing (lighttpd `dir-listing.show-header`, Cherokee `notice_files`):
    /// inserted as is when it ends in `.html`/`.htm`, else HTML-escaped in a
    /// `<pre>`. Left out when missing or larger than [`MAX_NOTICE_FILE`].
    /// Default: none.
    #[serde(default)]
    pub header_file: Option<String>,
    /// As `header-file`, shown below the listing (lighttpd
    /// `dir-listing.show-readme`). Default: none.
    #[serde(default)]
    pub readme_file: Option<String>,
    /// Most entries listed; more are left out and the page says "listing
    /// truncated". At least 1. Default 10000.
    #[serde(default = "default_max_entries")]
    pub max_entries: usize,
}

fn default_max_entries() -> usize {
    10_000
}

impl Default for DirListingConfig {
    fn default() -> Self {
        DirListingConfig {
            hidden_files: false,
            follow_symlinks: SymlinkPolicy::default(),
            format: Format::default(),
            header_file: None,
            readme_file: None,
            max_entries: default_max_entries(),
        }
    }
}

/// The `dir-listing` module instance of one vhost or rule.
pub struct DirListing {
    hidden_files: bool,
    symlinks: SymlinkPolicy,
    format: Format,
    header_file: Option<NoticeFile>,
    readme_file: Option<NoticeFile>,
    max_entries: usize,
}

/// A header or readme file name, and whether it is inserted as HTML.
struct NoticeFile {
    name: String,
    is_html: bool,
}

impl NoticeFile {
    fn new(key: &str, name: Option<String>) -> Result<Option<NoticeFile>, String> {
        let Some(name) = name else { return Ok(None) };
        if name.is_empty() || name.contains(['/', '\0']) || name == "." || name == ".." {
            return Err(format!("{key}: \"{name}\" must be a plain file name"));
        }
        let lower = name.to_ascii_lowercase();
        Ok(Some(NoticeFile {
            is_html: lower.ends_with(".html") || lower.ends_with(".htm"),
            name,
        }))
    }
}

impl ModuleDecl for DirListing {
    const NAME: &'static str = "dir-listing";
    type Config = DirListingConfig;

    /// # Errors
    /// One line naming the key: `max-entries: must be at least 1`,
    /// `header-file`/`readme-file`: not a plain file name.
    fn build(cfg: DirListingConfig, _cx: &BuildContext<'_>) -> Result<Self, String> {
        if cfg.max_entries == 0 {
            return Err("max-entries: must be at least 1".into());
        }
        Ok(DirListing {
            hidden_files: cfg.hidden_files,
            symlinks: cfg.follow_symlinks,
            format: cfg.format,
            header_file: NoticeFile::new("header-file", cfg.header_file)?,
            readme_file: NoticeFile::new("readme-file", cfg.readme_file)?,
            max_entries: cfg.max_entries,
        })
    }
}

/// One listed entry.
#[derive(Debug, Serialize, PartialEq, Eq)]
struct Entry {
    name: String,
    #[serde(rename = "type")]
    kind: Kind,
    size: Option<u64>,
    mtime: Option<i64>,
}

#[derive(Debug, Serialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Directory,
    File,
}

#[derive(Serialize)]
struct JsonListing<'a> {
    path: &'a str,
    entries: &'a [Entry],
    truncated: bool,
}

impl Module for DirListing {
    fn hooks(&self) -> Hooks {
        Hooks::CONTENT
    }

    fn content(&self, cx: &mut Ctx<'_>) -> Option<HttpResponse> {
        // `path` is shown; the directory is the one below the request's
        // document root (the vhost's, or one set by alias, userdir, mass-vhost)
        let path = cx.path();
        if !path.ends_with('/') {
            return None;
        }
        let rel = cx.path_in_root();
        if !self.hidden_files && has_hidden_segment(rel) {
            return Some(error_response(StatusCode::NOT_FOUND));
        }
        let root = cx.document_root();
        let dir = root.join(rel.trim_start_matches('/'));
        match resolve::open(root, &dir, self.symlinks) {
            Resolved::Dir => {}
            Resolved::Forbidden => return Some(error_response(StatusCode::FORBIDDEN)),
            Resolved::Unavailable => return Some(crate::static_file::unavailable()),
            Resolved::NotFound | Resolved::File(..) => return None,
        }
        let m = cx.method();
        if m == Method::OPTIONS {
            let mut r = HttpResponse::Ok().finish();
            r.headers_mut().insert(header::ALLOW, ALLOW);
            return Some(r);
        }
        if m != Method::GET && m != Method::HEAD {
            let mut r = error_response(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut().insert(header::ALLOW, ALLOW);
            return Some(r);
        }
        let (entries, truncated) = match self.read(root, &dir) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "dir-listing: cannot read");
                let status = if e.kind() == std::io::ErrorKind::PermissionDenied {
                    StatusCode::FORBIDDEN
                } else {
                    StatusCode::INTERNAL_SERVER_ERROR
                };
                return Some(error_response(status));
            }
        };
        let mut r = match self.format {
            Format::Json => {
                let body = serde_json::to_string(&JsonListing {
                    path,
                    entries: &entries,
                    truncated,
                })
                .expect("plain data serializes");
                let mut r = HttpResponse::Ok().body(body);
                r.headers_mut().insert(header::CONTENT_TYPE, JSON);
                r
            }
            Format::Html => {
                let header = self.notice(root, &dir, self.header_file.as_ref());
                let readme = self.notice(root, &dir, self.readme_file.as_ref());
                let body = render_html(
                    path,
                    &entries,
                    truncated,
                    header.as_deref(),
                    readme.as_deref(),
                );
                let mut r = HttpResponse::Ok().body(body);
                r.headers_mut().insert(header::CONTENT_TYPE, TEXT_HTML);
                r
            }
        };
        // A listing changes whenever the directory does; caches must revalidate.
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Some(r)
    }
}

impl DirListing {
    /// Reads up to `max_entries` listable entries of `dir` (below the document
    /// root `root`), sorted; the flag says whether more were left out.
    fn read(&self, root: &Path, dir: &Path) -> std::io::Result<(Vec<Entry>, bool)> {
        let mut entries = Vec::new();
        let mut truncated = false;
        for de in std::fs::read_dir(dir)? {
            let Ok(de) = de else { continue };
            let Ok(name) = de.file_name().into_string() else {
                continue;
            };
            if !self.hidden_files && name.starts_with('.') {
                continue;
            }
            let Some(meta) = self.entry_meta(root, &de.path()) else {
                continue;
            };
            let kind = if meta.is_dir() {
                Kind::Directory
            } else if meta.is_file() {
                Kind::File
            } else {
                continue;
            };
            if entries.len() == self.max_entries {
                truncated = true;
                break;
            }
            entries.push(Entry {
                name,
                kind,
                size: (kind == Kind::File).then_some(meta.len()),
                mtime: Some(meta.mtime()),
            });
        }
        entries.sort_unstable_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        Ok((entries, truncated))
    }

    /// The metadata to show for an entry, following a symbolic link only when the
    /// policy allows it; `None` when the entry is left out.
    fn entry_meta(&self, root: &Path, p: &Path) -> Option<Metadata> {
        let l = std::fs::symlink_metadata(p).ok()?;
        if !l.file_type().is_symlink() {
            return Some(l);
        }
        let allowed = match self.symlinks {
            SymlinkPolicy::Always => true,
            SymlinkPolicy::Never => false,
            SymlinkPolicy::InsideRoot => {
                std::fs::canonicalize(p).is_ok_and(|c| c.starts_with(root))
            }
            SymlinkPolicy::OwnerMatch => std::fs::metadata(p).is_ok_and(|t| t.uid() == l.uid()),
        };
        if !allowed {
            return None;
        }
        std::fs::metadata(p).ok()
    }

    /// The header or readme block, ready to insert; `None` when not configured,
    /// missing, refused, too large or not UTF-8.
    fn notice(&self, root: &Path, dir: &Path, f: Option<&NoticeFile>) -> Option<String> {
        let f = f?;
        let Resolved::File(file, meta) = resolve::open(root, &dir.join(&f.name), self.symlinks)
        else {
            return None;
        };
        if meta.len() > MAX_NOTICE_FILE {
            return None;
        }
        let mut s = String::with_capacity(meta.len() as usize);
        file.take(MAX_NOTICE_FILE).read_to_string(&mut s).ok()?;
        Some(if f.is_html {
            s
        } else {
            let mut out = String::with_capacity(s.len() + 16);
            out.push_str("<pre>");
            escape_html(&mut out, &s);
            out.push_str("</pre>");
            out
        })
    }
}

/// Appends `s` with `&`, `<`, `>`, `"` and `'` escaped (HTML text and quoted
/// attribute values).
fn escape_html(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// Appends the link to the decoded path `p`: percent-encoded (with `'` too),
/// then HTML-escaped for a quoted attribute.
fn push_href(out: &mut String, p: &str) {
    let enc = tessera_core::path::encode(p);
    escape_html(out, &enc.replace('\'', "%27"));
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em}\
table{border-collapse:collapse}th,td{padding:.2em 1em .2em 0;text-align:left}\
td.s{text-align:right}";

fn render_html(
    path: &str,
    entries: &[Entry],
    truncated: bool,
    header: Option<&str>,
    readme: Option<&str>,
) -> String {
    let mut o = String::with_capacity(512 + entries.len() * 160);
    o.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
    escape_html(&mut o, path);
    o.push_str("</title><style>");
    o.push_str(STYLE);
    o.push_str("</style></head>\n<body>\n<h1>Index of ");
    escape_html(&mut o, path);
    o.push_str("</h1>\n");
    if let Some(h) = header {
        o.push_str("<div class=\"header\">");
        o.push_str(h);
        o.push_str("</div>\n");
    }
    o.push_str(
        "<table>\n<thead><tr><th>Name</th><th>Last modified (UTC)</th><th>Size</th></tr></thead>\n<tbody>\n",
    );
    if path != "/" {
        let parent = &path[..path[..path.len() - 1].rfind('/').map_or(1, |i| i + 1)];
        o.push_str("<tr><td><a href=\"");
        push_href(&mut o, parent);
        o.push_str("\">../</a></td><td></td><td class=\"s\">-</td></tr>\n");
    }
    let mut full = String::with_capacity(path.len() + 64);
    for e in entries {
        full.clear();
        full.push_str(path);
        full.push_str(&e.name);
        if e.kind == Kind::Directory {
            full.push('/');
        }
        o.push_str("<tr><td><a href=\"");
        push_href(&mut o, &full);
        o.push_str("\">");
        escape_html(&mut o, &e.name);
        if e.kind == Kind::Directory {
            o.push('/');
        }
        o.push_str("</a></td><td>");
        if let Some(t) = e.mtime {
            push_time(&mut o, t);
        }
        o.push_str("</td><td class=\"s\">");
        match e.size {
            Some(n) => {
                let _ = write!(o, "{n}");
            }
            None => o.push('-'),
        }
        o.push_str("</td></tr>\n");
    }
    o.push_str("</tbody>\n</table>\n");
    if truncated {
        let _ = writeln!(
            o,
            "<p class=\"truncated\">listing truncated: the first {} entries are shown</p>",
            entries.len()
        );
    }
    if let Some(r) = readme {
        o.push_str("<div class=\"readme\">");
        o.push_str(r);
        o.push_str("</div>\n");
    }
    o.push_str("<hr><address>tessera</address>\n</body></html>\n");
    o
}

/// Appends `secs` (Unix time) as `YYYY-MM-DD HH:MM:SS` in UTC (proleptic
/// Gregorian calendar; H. Hinnant's `civil_from_days`).
fn push_time(out: &mut String, secs: i64) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use tessera_core::actix_web::body::MessageBody;
    use tessera_core::actix_web::test::TestRequest;
    use tessera_core::registry::SharedState;
    use tessera_core::vhost::VhostInfo;

    struct Tmp(PathBuf);
    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let p = std::env::temp_dir().join(format!("tessera-dl-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Tmp(std::fs::canonicalize(&p).unwrap())
        }
    }
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn build(root: &Path, json: serde_json::Value) -> Result<DirListing, String> {
        let cfg: DirListingConfig = serde_json::from_value(json).map_err(|e| e.to_string())?;
        let v = VhostInfo {
            index: 0,
            names: vec![],
            document_root: root.to_path_buf(),
        };
        let shared = SharedState::default();
        let cx = BuildContext {
            vhost: &v,
            config_dir: Path::new("."),
            shared: &shared,
            rule_match: None,
            upstreams: &tessera_core::upstream::Upstreams::default(),
        };
        DirListing::build(cfg, &cx)
    }

    fn get(m: &DirListing, root: &Path, method: Method, uri: &str) -> Option<(u16, String)> {
        let req = TestRequest::default()
            .method(method)
            .uri(uri)
            .to_http_request();
        let v = VhostInfo {
            index: 0,
            names: vec![],
            document_root: root.to_path_buf(),
        };
        let path = tessera_core::path::normalize(req.path())
            .unwrap()
            .into_owned();
        let mut cx = Ctx::new(&req, &v, path.into());
        let r = m.content(&mut cx)?;
        let status = r.status().as_u16();
        let body = r.into_body().try_into_bytes().ok().unwrap();
        Some((status, String::from_utf8(body.to_vec()).unwrap()))
    }

    #[test]
    fn time_format() {
        let mut s = String::new();
        push_time(&mut s, 0);
        assert_eq!(s, "1970-01-01 00:00:00");
        s.clear();
        push_time(&mut s, 951_782_400); // leap day
        assert_eq!(s, "2000-02-29 00:00:00");
        s.clear();
        push_time(&mut s, 1_700_000_000);
        assert_eq!(s, "2023-11-14 22:13:20");
        s.clear();
        push_time(&mut s, -1);
        assert_eq!(s, "1969-12-31 23:59:59");
    }

    #[test]
    fn hostile_names_are_escaped_and_encoded() {
        let mut o = String::new();
        escape_html(&mut o, "<script>&\"'");
        assert_eq!(o, "&lt;script&gt;&amp;&quot;&#39;");
        for (name, href) in [
            ("<script>.html", "/d/%3Cscript%3E.html"),
            ("a\"b", "/d/a%22b"),
            ("x#y", "/d/x%23y"),
            ("q?", "/d/q%3F"),
            ("100%", "/d/100%25"),
            ("it's", "/d/it%27s"),
            ("a&b", "/d/a&amp;b"),
            ("javascript:x", "/d/javascript:x"),
        ] {
            let mut o = String::new();
            push_href(&mut o, &format!("/d/{name}"));
            assert_eq!(o, href, "{name}");
        }
    }

    #[test]
    fn listing_sorted_hidden_left_out() {
        let t = Tmp::new("sort");
        std::fs::create_dir_all(t.0.join("d/zdir")).unwrap();
        std::fs::create_dir_all(t.0.join("d/adir")).unwrap();
        std::fs::write(t.0.join("d/b.txt"), "12345").unwrap();
        std::fs::write(t.0.join("d/a.txt"), "1").unwrap();
        std::fs::write(t.0.join("d/.secret"), "s").unwrap();
        let m = build(&t.0, serde_json::json!({"format": "json"})).unwrap();
        let (st, body) = get(&m, &t.0, Method::GET, "/d/").unwrap();
        assert_eq!(st, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let names: Vec<_> = v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["adir", "zdir", "a.txt", "b.txt"]);
        assert_eq!(v["entries"][3]["size"], 5);
        assert_eq!(v["entries"][0]["type"], "directory");
        assert_eq!(v["entries"][0]["size"], serde_json::Value::Null);
        assert_eq!(v["truncated"], false);
        assert_eq!(v["path"], "/d/");
        // hidden-files = true shows it
        let m = build(
            &t.0,
            serde_json::json!({"format": "json", "hidden-files": true}),
        )
        .unwrap();
        assert!(get(&m, &t.0, Method::GET, "/d/")
            .unwrap()
            .1
            .contains(".secret"));
    }

    #[test]
    fn passes_on_and_refuses() {
        let t = Tmp::new("pass");
        std::fs::create_dir_all(t.0.join("d")).unwrap();
        std::fs::create_dir_all(t.0.join(".git")).unwrap();
        std::fs::write(t.0.join("f.txt"), "x").unwrap();
        let m = build(&t.0, serde_json::json!({})).unwrap();
        assert!(get(&m, &t.0, Method::GET, "/d").is_none());
        assert!(get(&m, &t.0, Method::GET, "/f.txt").is_none());
        assert!(get(&m, &t.0, Method::GET, "/f.txt/").is_none());
        assert!(get(&m, &t.0, Method::GET, "/missing/").is_none());
        assert_eq!(get(&m, &t.0, Method::GET, "/.git/").unwrap().0, 404);
        assert_eq!(get(&m, &t.0, Method::POST, "/d/").unwrap().0, 405);
        assert_eq!(get(&m, &t.0, Method::OPTIONS, "/d/").unwrap().0, 200);
    }

    #[test]
    fn truncation_and_notices() {
        let t = Tmp::new("trunc");
        for i in 0..5 {
            std::fs::write(t.0.join(format!("f{i}")), "x").unwrap();
        }
        std::fs::write(t.0.join("HEADER.txt"), "<b>hi</b>").unwrap();
        std::fs::write(t.0.join("README.html"), "<i>readme</i>").unwrap();
        let m = build(
            &t.0,
            serde_json::json!({"max-entries": 3, "header-file": "HEADER.txt", "readme-file": "README.html"}),
        )
        .unwrap();
        let (_, body) = get(&m, &t.0, Method::GET, "/").unwrap();
        assert_eq!(body.matches("<tr><td><a").count(), 3, "{body}");
        assert!(body.contains("listing truncated"));
        assert!(body.contains("<pre>&lt;b&gt;hi&lt;/b&gt;</pre>"));
        assert!(body.contains("<i>readme</i>"));
        assert!(!body.contains("../"), "no parent link at the root");
    }

    #[test]
    fn build_errors() {
        let t = Tmp::new("err");
        let e = |j| build(&t.0, j).err().unwrap();
        assert_eq!(
            e(serde_json::json!({"max-entries": 0})),
            "max-entries: must be at least 1"
        );
        assert!(e(serde_json::json!({"header-file": "../x"})).starts_with("header-file:"));
        assert!(e(serde_json::json!({"readme-file": ".."})).starts_with("readme-file:"));
        assert!(e(serde_json::json!({"format": "xml"})).contains("unknown variant"));
        assert!(e(serde_json::json!({"hide-dotfiles": true})).contains("unknown field"));
    }
}

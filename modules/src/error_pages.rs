//! `error-pages`: custom bodies for error responses (lighttpd
//! `server.errorfile-prefix`, Cherokee `error_handler` / `custom_error`, nginx
//! `error_page`).
//!
//! ```toml
//! [vhost.error-pages]
//! pages = { "404" = "errors/404.html", "5xx" = "/srv/errors/5xx.html" }
//! prefix = "errors/status-"          # errors/status-403.html, … (lighttpd style)
//! ```
//!
//! Response phase: for every response with a status from 400 to 599 (those of
//! other modules and the core's own, such as 400 for a bad path or 404 when no
//! content handler answered), the body is replaced by the first of these files
//! that can be read: the page for the exact code in `pages`, the page for its
//! class (`"4xx"`, `"5xx"`), then `prefix` + code + `.html`. The status is kept,
//! and so are the other header fields (`Allow`, `WWW-Authenticate`,
//! `Content-Range`, …); `Content-Type` is set from the file's extension
//! (mime_guess; text types get `charset=utf-8`, unknown extensions
//! `application/octet-stream`), `Content-Length` follows the new body and a
//! `Content-Encoding` of the old body is removed. 1xx, 2xx and 3xx responses are
//! never touched. HEAD responses get the same headers and no body.
//!
//! Files are read on every error response, so they can be edited while the server
//! runs; errors are not the hot path. A file in `pages` that cannot be read (or is
//! larger than [`MAX_PAGE`]) leaves the original body and logs a warning, once
//! per file; a missing `prefix` file is silent (most codes have none).
//!
//! Relative paths are resolved against the vhost's document root
//! (`errors/404.html` is `<document-root>/errors/404.html`, and so reachable by
//! URL too, as with lighttpd); absolute paths are used as they are.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use smallvec::SmallVec;
use tessera_core::actix_web::body::BoxBody;
use tessera_core::actix_web::http::header::{self, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

/// Error page files larger than this (1 MiB) are not sent.
pub const MAX_PAGE: u64 = 1024 * 1024;

/// Options of `[vhost.error-pages]` (or of a rule's `error-pages` table). At
/// least one of `pages` and `prefix` must be set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ErrorPagesConfig {
    /// Status -> file: keys are codes from `"400"` to `"599"` or the classes
    /// `"4xx"` and `"5xx"` (an exact code wins over its class); values are
    /// paths, relative to the document root or absolute (nginx `error_page`,
    /// Cherokee `error_handler`). Default: empty.
    #[serde(default)]
    pub pages: BTreeMap<String, String>,
    /// lighttpd `server.errorfile-prefix`: the file for status N is
    /// `prefix + N + ".html"` (relative to the document root unless absolute),
    /// tried after `pages`. Default: none.
    #[serde(default)]
    pub prefix: Option<String>,
}

/// One candidate file.
#[derive(Debug)]
struct Page {
    path: PathBuf,
    content_type: HeaderValue,
    /// Configured in `pages` (warn when unreadable) rather than by `prefix`.
    explicit: bool,
    warned: AtomicBool,
}

/// The `error-pages` module instance of one vhost or rule.
pub struct ErrorPages {
    /// Candidates per status 400..=599, in the order they are tried.
    table: Box<[SmallVec<[Arc<Page>; 3]>]>,
}

/// True for types that carry text and get `; charset=utf-8`.
fn is_text(t: &str) -> bool {
    t.starts_with("text/")
        || matches!(
            t,
            "application/json" | "application/xhtml+xml" | "application/xml" | "image/svg+xml"
        )
}

fn content_type(path: &Path) -> HeaderValue {
    match mime_guess::from_path(path).first_raw() {
        Some(t) if is_text(t) => HeaderValue::from_str(&format!("{t}; charset=utf-8"))
            .unwrap_or(HeaderValue::from_static("application/octet-stream")),
        Some(t) => {
            HeaderValue::from_str(t).unwrap_or(HeaderValue::from_static("application/octet-stream"))
        }
        None => HeaderValue::from_static("application/octet-stream"),
    }
}

fn page(root: &Path, path: &str, explicit: bool) -> Arc<Page> {
    let path = root.join(path);
    Arc::new(Page {
        content_type: content_type(&path),
        path,
        explicit,
        warned: AtomicBool::new(false),
    })
}

/// Which statuses a `pages` key covers.
fn parse_key(k: &str) -> Option<std::ops::RangeInclusive<u16>> {
    match k.to_ascii_lowercase().as_str() {
        "4xx" => Some(400..=499),
        "5xx" => Some(500..=599),
        s if s.len() == 3 && s.bytes().all(|c| c.is_ascii_digit()) => {
            let n: u16 = s.parse().ok()?;
            (400..=599).contains(&n).then_some(n..=n)
        }
        _ => None,
    }
}

impl ModuleDecl for ErrorPages {
    const NAME: &'static str = "error-pages";
    type Config = ErrorPagesConfig;

    /// Resolves every path and builds the per-status table.
    ///
    /// # Errors
    /// One line naming the key: `pages.<key>` that is not a code 400–599 or
    /// `4xx`/`5xx`, an empty path, or neither `pages` nor `prefix` set.
    fn build(cfg: ErrorPagesConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        if cfg.pages.is_empty() && cfg.prefix.is_none() {
            return Err("set `pages` or `prefix`".into());
        }
        let root = &cx.vhost.document_root;
        let mut exact: Vec<Option<Arc<Page>>> = vec![None; 200];
        let mut class: [Option<Arc<Page>>; 2] = [None, None];
        for (k, v) in &cfg.pages {
            let Some(range) = parse_key(k) else {
                return Err(format!(
                    "pages.{k}: not a status from 400 to 599 or \"4xx\"/\"5xx\""
                ));
            };
            if v.is_empty() || v.contains('\0') {
                return Err(format!(
                    "pages.{k}: \"{}\" is not a path",
                    v.escape_default()
                ));
            }
            let p = page(root, v, true);
            if range.start() == range.end() {
                exact[usize::from(range.start() - 400)] = Some(p);
            } else {
                class[usize::from((range.start() - 400) / 100)] = Some(p);
            }
        }
        if let Some(prefix) = &cfg.prefix {
            if prefix.is_empty() || prefix.contains('\0') {
                return Err(format!(
                    "prefix: \"{}\" is not a path prefix",
                    prefix.escape_default()
                ));
            }
        }
        let table = (0..200u16)
            .map(|i| {
                let mut c: SmallVec<[Arc<Page>; 3]> = SmallVec::new();
                c.extend(exact[usize::from(i)].clone());
                c.extend(class[usize::from(i / 100)].clone());
                if let Some(prefix) = &cfg.prefix {
                    c.push(page(root, &format!("{prefix}{}.html", 400 + i), false));
                }
                c
            })
            .collect();
        Ok(ErrorPages { table })
    }
}

/// Reads a page, refusing anything larger than [`MAX_PAGE`] or not a file.
fn read_page(path: &Path) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > MAX_PAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file of at most 1 MiB",
        ));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_PAGE).read_to_end(&mut buf)?;
    Ok(buf)
}

impl Module for ErrorPages {
    fn hooks(&self) -> Hooks {
        Hooks::RESPONSE
    }

    fn on_response(&self, _cx: &mut Ctx<'_>, res: &mut HttpResponse) {
        let code = res.status().as_u16();
        if !(400..=599).contains(&code) {
            return;
        }
        for page in &self.table[usize::from(code - 400)] {
            match read_page(&page.path) {
                Ok(body) => {
                    let old = std::mem::replace(res, HttpResponse::new(StatusCode::OK));
                    let mut new = old.set_body(BoxBody::new(Bytes::from(body)));
                    let h = new.headers_mut();
                    h.insert(header::CONTENT_TYPE, page.content_type.clone());
                    h.remove(header::CONTENT_LENGTH);
                    h.remove(header::CONTENT_ENCODING);
                    *res = new;
                    return;
                }
                Err(e) => {
                    if page.explicit && !page.warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            file = %page.path.display(),
                            error = %e,
                            "error-pages: cannot read the page, sending the default body \
                             (logged once)"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::actix_web::body::MessageBody;
    use tessera_core::actix_web::test::TestRequest;
    use tessera_core::registry::SharedState;
    use tessera_core::response::error_response;
    use tessera_core::vhost::VhostInfo;

    struct Tmp(PathBuf);
    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let p = std::env::temp_dir().join(format!("tessera-ep-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(p.join("errors")).unwrap();
            Tmp(p)
        }
    }
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn build(root: &Path, json: serde_json::Value) -> Result<ErrorPages, String> {
        let cfg: ErrorPagesConfig = serde_json::from_value(json).map_err(|e| e.to_string())?;
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
        ErrorPages::build(cfg, &cx)
    }

    fn run(m: &ErrorPages, mut res: HttpResponse) -> (HttpResponse<()>, String) {
        let req = TestRequest::default().to_http_request();
        let v = VhostInfo {
            index: 0,
            names: vec![],
            document_root: std::env::temp_dir(),
        };
        let mut cx = Ctx::new(&req, &v, "/".into());
        m.on_response(&mut cx, &mut res);
        let (res, body) = res.into_parts();
        let body = body.try_into_bytes().ok().unwrap();
        (res, String::from_utf8(body.to_vec()).unwrap())
    }

    #[test]
    fn exact_class_prefix_order() {
        let t = Tmp::new("order");
        std::fs::write(t.0.join("errors/404.html"), "custom 404").unwrap();
        std::fs::write(t.0.join("errors/4xx.txt"), "any 4xx").unwrap();
        std::fs::write(t.0.join("errors/status-500.html"), "prefix 500").unwrap();
        let m = build(
            &t.0,
            serde_json::json!({
                "pages": {"404": "errors/404.html", "4xx": "errors/4xx.txt", "410": "errors/missing.html"},
                "prefix": "errors/status-"
            }),
        )
        .unwrap();
        let (r, b) = run(&m, error_response(StatusCode::NOT_FOUND));
        assert_eq!((r.status().as_u16(), b.as_str()), (404, "custom 404"));
        assert_eq!(
            r.headers().get("content-type").unwrap(),
            "text/html; charset=utf-8"
        );
        let (r, b) = run(&m, error_response(StatusCode::FORBIDDEN));
        assert_eq!((r.status().as_u16(), b.as_str()), (403, "any 4xx"));
        assert_eq!(
            r.headers().get("content-type").unwrap(),
            "text/plain; charset=utf-8"
        );
        // the exact page is missing: the class page is next
        let (_, b) = run(&m, error_response(StatusCode::GONE));
        assert_eq!(b, "any 4xx");
        let (r, b) = run(&m, error_response(StatusCode::INTERNAL_SERVER_ERROR));
        assert_eq!((r.status().as_u16(), b.as_str()), (500, "prefix 500"));
        // no file for 502: the original body
        let (_, b) = run(&m, error_response(StatusCode::BAD_GATEWAY));
        assert!(b.contains("502 Bad Gateway"), "{b}");
    }

    #[test]
    fn keeps_status_and_headers_never_touches_success() {
        let t = Tmp::new("keep");
        std::fs::write(t.0.join("e.html"), "E").unwrap();
        let m = build(
            &t.0,
            serde_json::json!({"pages": {"4xx": "e.html", "5xx": "e.html"}}),
        )
        .unwrap();
        let mut res = error_response(StatusCode::RANGE_NOT_SATISFIABLE);
        res.headers_mut().insert(
            header::CONTENT_RANGE,
            HeaderValue::from_static("bytes */10"),
        );
        res.headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let (r, b) = run(&m, res);
        assert_eq!(r.status().as_u16(), 416);
        assert_eq!(b, "E");
        assert_eq!(r.headers().get("content-range").unwrap(), "bytes */10");
        assert!(r.headers().get("content-encoding").is_none());
        for s in [200u16, 206, 301, 304] {
            let res = HttpResponse::with_body(StatusCode::from_u16(s).unwrap(), "orig")
                .map_into_boxed_body();
            let (r, b) = run(&m, res);
            assert_eq!((r.status().as_u16(), b.as_str()), (s, "orig"));
        }
    }

    #[test]
    fn absolute_paths_and_edits_are_seen() {
        let t = Tmp::new("abs");
        let abs = t.0.join("abs.html");
        std::fs::write(&abs, "one").unwrap();
        let m = build(
            Path::new("/nonexistent"),
            serde_json::json!({"pages": {"500": abs.to_str().unwrap()}}),
        )
        .unwrap();
        assert_eq!(
            run(&m, error_response(StatusCode::INTERNAL_SERVER_ERROR)).1,
            "one"
        );
        std::fs::write(&abs, "two").unwrap();
        assert_eq!(
            run(&m, error_response(StatusCode::INTERNAL_SERVER_ERROR)).1,
            "two"
        );
    }

    #[test]
    fn build_errors() {
        let t = Tmp::new("err");
        let e = |j| build(&t.0, j).err().unwrap();
        assert_eq!(e(serde_json::json!({})), "set `pages` or `prefix`");
        for k in ["399", "600", "200", "4x", "44", "abc", "3xx"] {
            assert!(
                e(serde_json::json!({"pages": {k: "x.html"}})).starts_with(&format!("pages.{k}:")),
                "{k}"
            );
        }
        assert!(e(serde_json::json!({"pages": {"404": ""}})).starts_with("pages.404:"));
        assert!(e(serde_json::json!({"prefix": ""})).starts_with("prefix:"));
        assert!(e(serde_json::json!({"page": {}})).contains("unknown field"));
        assert!(build(&t.0, serde_json::json!({"pages": {"5XX": "x.html"}})).is_ok());
    }
}

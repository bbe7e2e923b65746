//! What the CGI-family back ends share (`fastcgi`, `scgi`, `uwsgi`, `cgi`):
//! which script a path names, the CGI/1.1 meta-variables (RFC 3875 §4.1),
//! the request body as the back end needs it, the CGI response head
//! (RFC 3875 §6), internal redirects for a local `Location`, and X-Sendfile.
//!
//! Each back-end module keeps only its wire protocol: it builds a
//! [`ScriptMap`] at configuration time, asks it for the [`Script`] of a
//! request, writes [`environment`] in its own encoding, sends the [`Input`],
//! and hands the back end's output to [`head::Head::parse`] and
//! [`respond`].

pub mod config;
pub mod head;
pub mod sendfile;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use tessera_core::actix_web::body::{BodyStream, MessageBody};
use tessera_core::actix_web::http::header::{self, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::request_body::{BodyError, RequestBody};
use tessera_core::response::error_response;
use tessera_core::Ctx;

pub use head::Head;
pub use sendfile::XSendfile;

/// Which paths a back end takes and which script each names: the script
/// extensions (lighttpd `fastcgi.server` keyed by ".php", `cgi.assign`), or
/// a mount point (`script-name`: lighttpd's prefix keys, Cherokee's handler
/// on a directory rule), the index files of a directory path, and
/// lighttpd's `check-local`.
#[derive(Debug, Clone)]
pub struct ScriptMap {
    extensions: Vec<String>,
    script_name: Option<String>,
    check_local: bool,
    index_files: Vec<String>,
}

impl ScriptMap {
    /// True when scripts are the document root's files, found by extension
    /// (not an application mounted at `script-name`).
    pub fn runs_files(&self) -> bool {
        self.script_name.is_none() && !self.extensions.is_empty()
    }
}

/// The script one request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// `SCRIPT_NAME`: the URL path of the script (`""` for an application
    /// mounted at `/`).
    pub name: String,
    /// `PATH_INFO`: the rest of the path after the script, `""` for none.
    pub path_info: String,
    /// `SCRIPT_FILENAME`: the script's file under the document root.
    pub filename: PathBuf,
}

impl ScriptMap {
    /// Checks the options: extensions like `.php` (or `""`: every file is a
    /// script, lighttpd's `cgi.assign = ( "" => "" )` for a `cgi-bin`
    /// directory), index files as plain names, a `script-name` that is `""`
    /// or starts with `/` and does not end with one. Errors: the key and
    /// what is wrong, for the configuration error.
    pub fn new(
        extensions: Vec<String>,
        script_name: Option<String>,
        check_local: bool,
        index_files: Vec<String>,
    ) -> Result<ScriptMap, String> {
        for e in &extensions {
            if !e.is_empty() && (!e.starts_with('.') || e.len() < 2 || e.contains('/')) {
                return Err(format!("extensions: \"{e}\" is not like \".php\""));
            }
        }
        for i in &index_files {
            if i.is_empty() || i.contains('/') || i == "." || i == ".." {
                return Err(format!("index-files: \"{i}\" is not a file name"));
            }
        }
        if let Some(s) = &script_name {
            if !(s.is_empty() || s.starts_with('/') && !s.ends_with('/')) {
                return Err(format!(
                    "script-name: \"{s}\" must be \"\" or a path like \"/app\" without a final /"
                ));
            }
        }
        Ok(ScriptMap {
            extensions,
            script_name,
            check_local,
            index_files,
        })
    }

    /// Whether `name` ends with a script extension (`""` does not count
    /// here: see [`ScriptMap::any_file`]).
    pub fn is_script(&self, name: &str) -> bool {
        self.extensions
            .iter()
            .any(|e| !e.is_empty() && name.ends_with(e.as_str()))
    }

    /// Whether every file is a script (an extension `""`).
    pub fn any_file(&self) -> bool {
        self.extensions.iter().any(String::is_empty)
    }

    /// The script `path` names under `root`, or `None` when this back end
    /// does not take the request (no script extension; a directory without
    /// an index script).
    ///
    /// - With `script-name`, every path: the script is the mount point and
    ///   `PATH_INFO` the rest of the path.
    /// - A directory path (`/`, `/a/`) runs its first existing index file,
    ///   if that is a script.
    /// - Otherwise the path up to the first segment that ends with an
    ///   extension is the script, the rest `PATH_INFO`. A path is never split
    ///   at a segment without the extension: `/uploads/evil.jpg/x.php` names
    ///   the script `/uploads/evil.jpg/x.php`, so `evil.jpg` never runs
    ///   (the `cgi.fix_pathinfo` hole of nginx with PHP).
    /// - With the extension `""` (every file a script), a path without one
    ///   is split after its first segment that is a regular file, as
    ///   lighttpd finds the file of a `cgi-bin` path: `/cgi-bin/app/x/y`
    ///   runs `/cgi-bin/app` with `PATH_INFO=/x/y`.
    pub fn resolve(&self, path: &str, root: &Path) -> Option<Script> {
        self.resolve_at(path, root, "")
    }

    /// The script of the request `cx`, under the request's document root
    /// ([`Ctx::document_root`]: the vhost's, or one `alias`, `userdir` or
    /// `mass-vhost` set): as [`ScriptMap::resolve`] for the path below that
    /// root, with `SCRIPT_NAME` in URL form (the replaced prefix first:
    /// `/~alice/x.php` is the file `~alice/public_html/x.php` with
    /// `SCRIPT_NAME=/~alice/x.php`, as lighttpd sets them). A `script-name`
    /// mount is matched against the whole path.
    pub fn resolve_request(&self, cx: &Ctx<'_>) -> Option<Script> {
        if self.script_name.is_some() {
            return self.resolve(cx.path(), cx.document_root());
        }
        self.resolve_at(cx.path_in_root(), cx.document_root(), cx.root_prefix())
    }

    /// [`ScriptMap::resolve`] for `path` below `root`, whose URL prefix is
    /// `prefix` (`SCRIPT_NAME` starts with it).
    fn resolve_at(&self, path: &str, root: &Path, prefix: &str) -> Option<Script> {
        let at = |name: &str, info: &str| Script {
            name: [prefix, name].concat(),
            path_info: info.to_string(),
            filename: join(root, name.trim_start_matches('/')),
        };
        if let Some(mount) = &self.script_name {
            let info = path.strip_prefix(mount.as_str()).unwrap_or(path);
            let info = if info.is_empty() || info.starts_with('/') {
                info
            } else {
                path
            };
            return Some(at(mount, info));
        }
        if path.ends_with('/') {
            let found = self
                .index_files
                .iter()
                .find(|i| is_file(&root.join(format!("{}{i}", &path[1..]))))?;
            return self
                .is_script(found)
                .then(|| at(&format!("{path}{found}"), ""));
        }
        let mut end = 0;
        for seg in path.split_inclusive('/') {
            end += seg.len();
            let name = seg.trim_end_matches('/');
            if self.is_script(name) {
                let cut = end - (seg.len() - name.len());
                return Some(at(&path[..cut], &path[cut..]));
            }
        }
        if self.any_file() {
            let mut end = 0;
            for seg in path.split_inclusive('/') {
                end += seg.len();
                let cut = end - usize::from(seg.ends_with('/'));
                let file = root.join(path[..cut].trim_start_matches('/'));
                match std::fs::metadata(&file) {
                    Ok(m) if m.is_file() => return Some(at(&path[..cut], &path[cut..])),
                    Ok(m) if m.is_dir() => continue,
                    _ => return None,
                }
            }
        }
        None
    }

    /// lighttpd's `check-local`: with it on (and no `script-name`), a script
    /// that is not a regular file is 404 without calling the back end. The
    /// answer is remembered for a second per worker ([`is_file`]).
    pub fn missing(&self, script: &Script) -> bool {
        self.check_local && self.script_name.is_none() && !is_file(&script.filename)
    }

    /// With `check-local`, whether the script path names a directory
    /// (`/app.php` for the directory `app.php/`): then the back end does not
    /// take the request, and static-file answers 301 to `/app.php/`, whose
    /// index script then runs. lighttpd's physical-path check redirects so
    /// before mod_fastcgi's `check-local` looks (nginx's usual `try_files
    /// $uri =404` answers 404). Only a missing script is looked at again.
    pub fn declines(&self, script: &Script) -> bool {
        script.path_info.is_empty() && self.missing(script) && script.filename.is_dir()
    }

    /// For `tessera explain` (a back end's [`tessera_core::Module::explain`]):
    /// where the request's script would go, `to` naming the back end, or the
    /// 404 `check-local` gives without calling it; `None` when the request
    /// names no script (the handler passes it on).
    pub fn explain(&self, cx: &Ctx<'_>, to: impl FnOnce() -> String) -> Option<String> {
        let script = self.resolve_request(cx)?;
        if self.missing(&script) {
            return Some(format!(
                "404: the script {} is not a file (check-local); the back end is not called",
                script.filename.display()
            ));
        }
        Some(format!(
            "script {} (SCRIPT_NAME \"{}\", PATH_INFO \"{}\") to {}",
            script.filename.display(),
            script.name,
            script.path_info,
            to()
        ))
    }
}

/// How long [`is_file`] trusts an answer, milliseconds: lighttpd's stat
/// cache and nginx's `open_file_cache_valid` (as the benchmarks configure it)
/// check a file again after a second too.
const FILE_CHECK_VALID_MS: u64 = 1000;
/// Paths [`is_file`] remembers per worker; the memory is emptied when full.
const FILE_CHECK_KEEP: usize = 4096;
/// The bytes of paths [`is_file`] remembers per worker (1 MiB): long
/// distinct paths (a client may send thousands) empty it sooner.
const FILE_CHECK_BYTES: usize = 1 << 20;

/// [`is_file`]'s answers: path (its bytes: `Path` hashes component by
/// component) -> (checked at, per `static_file::cache::now_ms`; a file), and the bytes of the
/// paths held.
type FileChecks = (
    HashMap<Box<[u8]>, (u64, bool), foldhash::fast::RandomState>,
    usize,
);

/// `root` joined with `rel` (relative), allocated once at its final size
/// (`Path::join` copies `root`, then grows the copy for `rel`).
fn join(root: &Path, rel: &str) -> PathBuf {
    let mut p = PathBuf::with_capacity(root.as_os_str().len() + 1 + rel.len());
    p.push(root);
    p.push(rel);
    p
}

thread_local! {
    static FILE_CHECKS: std::cell::RefCell<FileChecks> =
        std::cell::RefCell::new((HashMap::default(), 0));
}

/// Whether `path` is a regular file (following symbolic links), from one
/// `stat` at most once a second per path and worker: a script created or
/// removed is seen within [`FILE_CHECK_VALID_MS`]. A script that was removed
/// meanwhile reaches the back end, which answers 404 itself (php-fpm's "File
/// not found.").
pub fn is_file(path: &Path) -> bool {
    let now = crate::static_file::cache::now_ms();
    let key = path.as_os_str().as_encoded_bytes();
    let known = FILE_CHECKS.with(|c| {
        c.borrow()
            .0
            .get(key)
            .filter(|(at, _)| now.saturating_sub(*at) < FILE_CHECK_VALID_MS)
            .map(|(_, file)| *file)
    });
    if let Some(file) = known {
        return file;
    }
    let file = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    FILE_CHECKS.with(|c| {
        let (map, bytes) = &mut *c.borrow_mut();
        if !map.contains_key(key) {
            if map.len() >= FILE_CHECK_KEEP || *bytes + key.len() > FILE_CHECK_BYTES {
                map.clear();
                *bytes = 0;
            }
            *bytes += key.len();
        }
        map.insert(key.into(), (now, file));
    });
    file
}

/// Extra variables from the configuration (nginx `fastcgi_param`), sorted
/// by name so that the back end sees them in a stable order.
pub fn params(table: HashMap<String, String>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = table.into_iter().collect();
    v.sort();
    v
}

/// Writes the CGI/1.1 meta-variables of the request (RFC 3875 §4.1) with
/// `put(name, value)`: `GATEWAY_INTERFACE`, `SERVER_SOFTWARE`, `SERVER_NAME`,
/// `SERVER_PORT`, `SERVER_ADDR`, `SERVER_PROTOCOL`, `REQUEST_METHOD`,
/// `REQUEST_URI`, `QUERY_STRING`, `SCRIPT_NAME`, `SCRIPT_FILENAME`,
/// `PATH_INFO` and `PATH_TRANSLATED` (when there is a path info),
/// `DOCUMENT_ROOT`, `REMOTE_ADDR`, `REMOTE_PORT`, `HTTPS=on` over TLS,
/// `REQUEST_SCHEME`, `CONTENT_TYPE`, `CONTENT_LENGTH` (when `length` is
/// `Some`), `REDIRECT_STATUS=200` (php-cgi's `cgi.force_redirect`),
/// `REMOTE_USER` after authentication, `HTTP_*` for each request field
/// except `Proxy` (the "httpoxy" attack) and names with `_` (they would
/// pose as their `-` twins), a repeated field as one variable (RFC 3875
/// §4.1.18: its values joined with `, `, a Cookie's with `; ` as nginx
/// does), then `extra` (which may replace
/// earlier ones: the back end sees the last value).
pub fn environment(
    cx: &Ctx<'_>,
    script: &Script,
    length: Option<u64>,
    extra: &[(String, String)],
    put: &mut dyn FnMut(&[u8], &[u8]),
) {
    let req = cx.req;
    let root = cx.document_root();
    let host = cx
        .host()
        .map(tessera_core::vhost::strip_port)
        .unwrap_or_default();
    let local = req.app_config().local_addr();
    let mut num = itoa::Buffer::new();
    put(b"GATEWAY_INTERFACE", b"CGI/1.1");
    put(b"SERVER_SOFTWARE", b"tessera");
    put(b"SERVER_NAME", host.as_bytes());
    put(b"SERVER_PORT", num.format(local.port()).as_bytes());
    let mut ip = tessera_core::realip::IpText::default();
    put(b"SERVER_ADDR", ip.format(local.ip()));
    let protocol: &[u8] = match req.version() {
        tessera_core::actix_web::http::Version::HTTP_10 => b"HTTP/1.0",
        tessera_core::actix_web::http::Version::HTTP_2 => b"HTTP/2.0",
        _ => b"HTTP/1.1",
    };
    put(b"SERVER_PROTOCOL", protocol);
    // GET after an internal redirect (the body went to the first script)
    put(b"REQUEST_METHOD", cx.method().as_str().as_bytes());
    put(
        b"REQUEST_URI",
        req.uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .as_bytes(),
    );
    // an internal redirect's target may bring its own query
    put(b"QUERY_STRING", cx.query().as_bytes());
    put(b"SCRIPT_NAME", script.name.as_bytes());
    put(
        b"SCRIPT_FILENAME",
        script.filename.as_os_str().as_encoded_bytes(),
    );
    put(b"DOCUMENT_ROOT", root.as_os_str().as_encoded_bytes());
    if !script.path_info.is_empty() {
        put(b"PATH_INFO", script.path_info.as_bytes());
        let translated = root.join(script.path_info.trim_start_matches('/'));
        put(
            b"PATH_TRANSLATED",
            translated.as_os_str().as_encoded_bytes(),
        );
    }
    if let Some(p) = req.peer_addr() {
        put(b"REMOTE_ADDR", ip.format(p.ip()));
        put(b"REMOTE_PORT", num.format(p.port()).as_bytes());
    }
    let secure = req.app_config().secure();
    if secure {
        put(b"HTTPS", b"on");
    }
    put(b"REQUEST_SCHEME", if secure { b"https" } else { b"http" });
    if let Some(t) = req.headers().get(header::CONTENT_TYPE) {
        put(b"CONTENT_TYPE", t.as_bytes());
    }
    if let Some(n) = length {
        put(b"CONTENT_LENGTH", num.format(n).as_bytes());
    }
    put(b"REDIRECT_STATUS", b"200");
    if let Some(u) = &cx.user {
        put(b"REMOTE_USER", u.as_bytes());
    }
    let mut key = Vec::with_capacity(64);
    let mut joined = Vec::new();
    let headers = cx.headers();
    for k in headers.keys() {
        let name = k.as_str();
        // `Proxy` is the "httpoxy" attack; a name with any byte but a
        // letter, digit or `-` could collide with a twin in HTTP_* (`X_User`
        // or `X.User` forging `X-User`, as PHP maps `.` to `_` too):
        // dropped, as nginx (`ignore_invalid_headers`,
        // `underscores_in_headers off`) and Apache (`http2env`) do
        if matches!(name, "content-type" | "content-length" | "proxy")
            || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
        {
            continue;
        }
        key.clear();
        key.extend_from_slice(b"HTTP_");
        key.extend(name.bytes().map(|c| match c {
            b'-' => b'_',
            c => c.to_ascii_uppercase(),
        }));
        // RFC 3875 §4.1.18: repeated fields become one variable, joined as
        // nginx joins them (`; ` for Cookie, RFC 6265 §5.4; `, ` otherwise)
        let mut values = headers.get_all(k);
        let Some(first) = values.next() else {
            continue;
        };
        match values.next() {
            None => put(&key, first.as_bytes()),
            Some(second) => {
                let sep: &[u8] = if *k == header::COOKIE { b"; " } else { b", " };
                joined.clear();
                joined.extend_from_slice(first.as_bytes());
                for v in std::iter::once(second).chain(values) {
                    joined.extend_from_slice(sep);
                    joined.extend_from_slice(v.as_bytes());
                }
                put(&key, &joined);
            }
        }
    }
    for (k, v) in extra {
        put(k.as_bytes(), v.as_bytes());
    }
}

/// The request body as a back end gets it: CGI needs `CONTENT_LENGTH`
/// before the body, so a body of unknown length (chunked, or HTTP/2 DATA
/// without Content-Length) is collected first (at most `max-body-size`
/// bytes), and a Content-Length body streams.
pub enum Input {
    /// No body (`CONTENT_LENGTH` is left out).
    None,
    /// A body of this many bytes, streamed as it comes.
    Stream(Box<RequestBody>, u64),
    /// A chunked body, collected.
    Whole(Bytes),
}

impl Input {
    /// Takes the request's body. Errors: the response to send instead, 413
    /// for a chunked body over `max-body-size`, 400 for one cut short.
    pub async fn take(cx: &mut Ctx<'_>) -> Result<Input, HttpResponse> {
        use tessera_core::request_body::Framing;
        let Some(mut body) = cx.take_body() else {
            return Ok(
                if cx.req.headers().contains_key(header::TRANSFER_ENCODING) {
                    Input::Whole(Bytes::new())
                } else {
                    Input::None
                },
            );
        };
        match body.framing(cx.req).await {
            Framing::Length(n) if n > 0 => return Ok(Input::Stream(body, n)),
            Framing::Length(_) => return Ok(Input::Whole(Bytes::new())),
            Framing::None => return Ok(Input::None),
            Framing::Unknown => {}
        }
        let mut all = BytesMut::new();
        loop {
            match next(&mut body).await {
                Some(Ok(chunk)) => all.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(body_error(&e)),
                None => return Ok(Input::Whole(all.freeze())),
            }
        }
    }

    /// `CONTENT_LENGTH`: `None` when the request has no body.
    pub fn length(&self) -> Option<u64> {
        match self {
            Input::None => None,
            Input::Stream(_, n) => Some(*n),
            Input::Whole(b) => Some(b.len() as u64),
        }
    }
}

/// The next piece of a request body.
pub async fn next(body: &mut RequestBody) -> Option<Result<Bytes, BodyError>> {
    std::future::poll_fn(|c| Pin::new(&mut *body).poll_next(c)).await
}

/// The answer to a request body that failed while it was read: 413 over
/// `max-body-size`, 400 otherwise (cut short, malformed chunks).
pub fn body_error(e: &BodyError) -> HttpResponse {
    error_response(match e {
        BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::BAD_REQUEST,
    })
}

/// What a back end's answer becomes (RFC 3875 §6.2).
pub enum Reply {
    /// A response for the client (a document, a client redirect, an error,
    /// or a file named by X-Sendfile).
    Response(HttpResponse),
    /// A local redirect: the core serves this path instead, as a GET (the
    /// back end's body is dropped).
    Internal,
}

/// Turns a parsed head and the body stream into the response:
///
/// - a local `Location` (a path, with no `Status`) is an internal redirect
///   (RFC 3875 §6.2.2): the path is set on `cx` and the core resolves it
///   again, as lighttpd does;
/// - with `x-sendfile` on, `X-Accel-Redirect` is an internal redirect too,
///   and `X-Sendfile` serves the file it names ([`XSendfile`]);
/// - otherwise the status and fields of the head, with `body`: a stream
///   ([`streamed`]), or the whole answer when it came at once (then sent
///   with its Content-Length).
pub fn respond<B>(cx: &mut Ctx<'_>, head: Head, body: B, sendfile: &XSendfile) -> Reply
where
    B: MessageBody + 'static,
{
    let accel = head.accel_redirect.as_ref().filter(|_| sendfile.is_on());
    if let Some(path) = head.local_redirect.as_ref().or(accel) {
        return match cx.redirect_internally(path) {
            Ok(()) => Reply::Internal,
            Err(_) => Reply::Response(error_response(StatusCode::INTERNAL_SERVER_ERROR)),
        };
    }
    if let Some(r) = sendfile.serve(cx, &head) {
        return Reply::Response(r);
    }
    let mut r = HttpResponse::build(head.status).body(body);
    // the back end's Content-Type, not the builder's default
    r.headers_mut().remove(header::CONTENT_TYPE);
    for (k, v) in head.fields {
        r.headers_mut().append(k, v);
    }
    Reply::Response(r)
}

/// Whether the back end's own body goes to the client after `head`, so
/// that its declared `Content-Length` must hold (RFC 9112 §6.3): not in
/// answer to HEAD (no body, RFC 9110 §9.3.2), nor for 1xx, 204 and 304
/// (RFC 9110 §6.4.1), a local redirect, or an answer that X-Sendfile or
/// X-Accel-Redirect replaces.
pub fn body_follows(cx: &Ctx<'_>, head: &Head, sendfile: &XSendfile) -> bool {
    *cx.method() != tessera_core::actix_web::http::Method::HEAD
        && !head.status.is_informational()
        && !matches!(
            head.status,
            StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED
        )
        && head.local_redirect.is_none()
        && !(sendfile.is_on() && (head.sendfile.is_some() || head.accel_redirect.is_some()))
}

/// A back end's body stream as a response body (chunked, or closed at its
/// end for HTTP/1.0), for [`respond`].
pub fn streamed<S, E>(body: S) -> BodyStream<S>
where
    S: Stream<Item = Result<Bytes, E>> + 'static,
    E: Into<Box<dyn std::error::Error>> + 'static,
{
    BodyStream::new(body)
}

impl Reply {
    /// The response to return from the content handler: an internal
    /// redirect's placeholder is never sent (the core sees the new path).
    pub fn into_response(self) -> HttpResponse {
        match self {
            Reply::Response(r) => r,
            Reply::Internal => HttpResponse::Ok()
                .insert_header((header::CONTENT_LENGTH, HeaderValue::from_static("0")))
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn php() -> ScriptMap {
        ScriptMap::new(vec![".php".into()], None, true, vec!["index.php".into()]).unwrap()
    }

    #[test]
    fn a_path_splits_only_after_a_script_extension() {
        let m = php();
        let root = Path::new("/srv");
        let r = |p| m.resolve(p, root).map(|s| (s.name, s.path_info));
        assert_eq!(r("/index.php"), Some(("/index.php".into(), String::new())));
        assert_eq!(
            r("/a/index.php/more/x"),
            Some(("/a/index.php".into(), "/more/x".into()))
        );
        // never at evil.jpg
        assert_eq!(
            r("/uploads/evil.jpg/x.php"),
            Some(("/uploads/evil.jpg/x.php".into(), String::new()))
        );
        assert_eq!(r("/style.css"), None);
        assert_eq!(
            m.resolve("/a/b.php", root).unwrap().filename,
            Path::new("/srv/a/b.php")
        );
    }

    #[test]
    fn a_mounted_application_takes_every_path() {
        let m = ScriptMap::new(vec![], Some("/app".into()), true, vec![]).unwrap();
        let s = m.resolve("/app/users/1", Path::new("/srv")).unwrap();
        assert_eq!(
            (s.name.as_str(), s.path_info.as_str()),
            ("/app", "/users/1")
        );
        assert!(!m.missing(&s), "no check-local for a mount");
        let root = ScriptMap::new(vec![], Some(String::new()), true, vec![]).unwrap();
        let s = root.resolve("/x", Path::new("/srv")).unwrap();
        assert_eq!((s.name.as_str(), s.path_info.as_str()), ("", "/x"));
        // a path outside the mount (another rule sent it here) is all path info
        let s = m.resolve("/application", Path::new("/srv")).unwrap();
        assert_eq!(s.path_info, "/application");
    }

    #[test]
    fn every_file_of_a_cgi_bin_is_a_script() {
        let root = std::env::temp_dir().join(format!("gw-any-{}", std::process::id()));
        std::fs::create_dir_all(root.join("cgi-bin")).unwrap();
        std::fs::write(root.join("cgi-bin/app"), "#!/bin/sh\n").unwrap();
        let m = ScriptMap::new(vec![String::new()], None, true, vec![]).unwrap();
        let s = m.resolve("/cgi-bin/app/x/y", &root).unwrap();
        assert_eq!(
            (s.name.as_str(), s.path_info.as_str()),
            ("/cgi-bin/app", "/x/y")
        );
        let s = m.resolve("/cgi-bin/app", &root).unwrap();
        assert_eq!(
            (s.name.as_str(), s.path_info.as_str()),
            ("/cgi-bin/app", "")
        );
        assert!(m.resolve("/cgi-bin/none", &root).is_none());
        assert!(m.resolve("/cgi-bin/", &root).is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_file_check_is_remembered_for_a_second() {
        let dir = std::env::temp_dir().join(format!("gw-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("late.php");
        let began = std::time::Instant::now();
        assert!(!is_file(&f));
        std::fs::write(&f, "<?php\n").unwrap();
        let cached = is_file(&f);
        // within the second the first answer stands (one stat per second)
        if began.elapsed().as_millis() < u128::from(FILE_CHECK_VALID_MS) / 2 {
            assert!(!cached, "the answer was not remembered");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn long_distinct_paths_never_hold_more_than_the_byte_cap() {
        let long = "a".repeat(8000);
        for i in 0..300 {
            is_file(Path::new(&format!("/nonexistent-{i}-{long}.php")));
        }
        let (n, bytes) = FILE_CHECKS.with(|c| (c.borrow().0.len(), c.borrow().1));
        assert!(bytes <= FILE_CHECK_BYTES, "{bytes} bytes in {n} paths");
        assert!(n < 300, "the memory was emptied on the way: {n}");
    }

    #[test]
    fn bad_options_are_refused() {
        assert!(ScriptMap::new(vec!["php".into()], None, true, vec![]).is_err());
        assert!(ScriptMap::new(vec![], None, true, vec!["a/b".into()]).is_err());
        assert!(ScriptMap::new(vec![], Some("/app/".into()), true, vec![]).is_err());
        assert!(ScriptMap::new(vec![], Some("app".into()), true, vec![]).is_err());
    }
}

//! Per-request state handed to module hooks.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use std::any::Any;

use actix_web::http::header::HeaderMap;
use actix_web::http::{Method, StatusCode};
use actix_web::HttpRequest;
use smallvec::SmallVec;

use crate::vhost::VhostInfo;

/// The request as modules see it during the request, content and response phases.
pub struct Ctx<'a> {
    /// The request (method, URI, headers, peer address).
    pub req: &'a HttpRequest,
    /// The vhost that serves it.
    pub vhost: &'a VhostInfo,
    path: Cow<'a, str>,
    /// The authenticated user, once a module established one (logged as `%u`).
    pub user: Option<String>,
    rewritten: bool,
    /// An internal redirect turned the request into a GET.
    as_get: bool,
    /// The query of an internal redirect's target (replacing the request's).
    query: Option<Box<str>>,
    headers: Option<HeaderMap>,
    fallback: StatusCode,
    /// Notes for the access log (`%{name}n`, Apache's module notes).
    pub notes: Notes,
    /// Per-request state of modules, kept until the log phase is over.
    pub ext: Extensions,
    // boxed: most requests have none, and an inline one would take 136
    // bytes of every asynchronous request's future
    body: Option<Box<crate::request_body::RequestBody>>,
    root: Option<RootOverride>,
    prebuilt_fields: bool,
    /// See [`Ctx::may_have_conditions`].
    conditions: bool,
}

/// A document root set for one request by [`Ctx::set_document_root`]: the
/// directory, and how many leading bytes of the path it replaces.
struct RootOverride {
    root: Arc<Path>,
    strip: usize,
}

/// Why [`Ctx::set_document_root`] refused a prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{prefix}\" is not a path prefix of \"{path}\" ending at a segment boundary")]
pub struct PrefixMismatch {
    /// The prefix given.
    pub prefix: String,
    /// The request's path.
    pub path: String,
}

/// Name/value notes modules leave for the log (`%{name}n`).
#[derive(Default, Debug)]
pub struct Notes(SmallVec<[(Box<str>, Box<str>); 2]>);

impl Notes {
    /// Sets a note, replacing one of the same name.
    pub fn set(&mut self, name: &str, value: &str) {
        match self.0.iter_mut().find(|(n, _)| &**n == name) {
            Some((_, v)) => *v = value.into(),
            None => self.0.push((name.into(), value.into())),
        }
    }
    /// The note's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| &**n == name).map(|(_, v)| &**v)
    }
}

/// Per-request values keyed by the owning module instance's address; dropped
/// after the log phase (so a Drop impl there runs exactly once per request,
/// also when the client went away).
#[derive(Default)]
pub struct Extensions(SmallVec<[(usize, Box<dyn Any>); 1]>);

impl Extensions {
    /// The value stored under `key`.
    pub fn get<T: 'static>(&self, key: usize) -> Option<&T> {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.downcast_ref())
    }
    /// The value stored under `key`, mutably.
    pub fn get_mut<T: 'static>(&mut self, key: usize) -> Option<&mut T> {
        self.0
            .iter_mut()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.downcast_mut())
    }
    /// Stores a value under `key` (replacing none: call `get` first).
    pub fn insert(&mut self, key: usize, value: Box<dyn Any>) {
        self.0.push((key, value));
    }
}

impl<'a> Ctx<'a> {
    /// A context for `req` on `vhost` with the decoded, normalized `path`
    /// (see [`crate::path::normalize`]).
    pub fn new(req: &'a HttpRequest, vhost: &'a VhostInfo, path: Cow<'a, str>) -> Self {
        Ctx {
            req,
            vhost,
            path,
            user: None,
            rewritten: false,
            as_get: false,
            query: None,
            headers: None,
            fallback: StatusCode::NOT_FOUND,
            notes: Notes::default(),
            ext: Extensions::default(),
            body: None,
            root: None,
            prebuilt_fields: false,
            conditions: true,
        }
    }

    /// False when the request carries none of If-Match, If-None-Match,
    /// If-Modified-Since, If-Unmodified-Since, If-Range and Range (RFC 9110
    /// §13.1, §14.2), so a content handler can skip looking each one up;
    /// true when it carries one, when a module edited the request's fields
    /// ([`Ctx::headers_mut`]), and when the core did not check (a context
    /// built outside the request path).
    pub fn may_have_conditions(&self) -> bool {
        self.conditions || self.headers.is_some()
    }

    pub(crate) fn set_conditions(&mut self, present: bool) {
        self.conditions = present;
    }

    /// Whether a content handler may put header fields it prebuilt
    /// ([`crate::body::PrebuiltFields`], handed over with
    /// [`crate::body::set_prebuilt`]) instead of the header map: the request came through Tessera's
    /// HTTP/1.1 engine, which writes them, and no module of the pipeline
    /// that answers it has a response phase (which would read or change the
    /// map). Set by the core before the handlers run; false for an
    /// explanation (`X-Tessera-Explain`, `tessera explain`), which shows the
    /// map.
    pub fn prebuilt_fields_ok(&self) -> bool {
        self.prebuilt_fields
    }

    pub(crate) fn set_prebuilt_fields_ok(&mut self, ok: bool) {
        self.prebuilt_fields = ok;
    }

    /// The document root files of this request are served from: the vhost's
    /// `document-root` (absolute and canonical), unless a request-phase module
    /// set another with [`Ctx::set_document_root`]. Content handlers join it
    /// with [`Ctx::path_in_root`], never with [`Ctx::path`].
    pub fn document_root(&self) -> &Path {
        match &self.root {
            Some(o) => &o.root,
            None => &self.vhost.document_root,
        }
    }

    /// The part of [`Ctx::path`] below [`Ctx::document_root`]: the whole path
    /// unless a module set a document root for a prefix; then the path without
    /// that prefix (`/icons/x.png` with `/icons/` mapped to a directory gives
    /// `/x.png`). It starts with `/`, except that it is `""` when the path names
    /// the mapped prefix itself without a trailing slash (`/icons`), so that a
    /// content handler sees a directory asked for without its slash.
    pub fn path_in_root(&self) -> &str {
        match &self.root {
            Some(o) => &self.path[o.strip..],
            None => &self.path,
        }
    }

    /// The URL prefix the document root replaces: `""` unless a module set one
    /// with [`Ctx::set_document_root`], then that prefix without its trailing
    /// slash (`/icons`, `/~alice`). [`Ctx::root_prefix`] + [`Ctx::path_in_root`]
    /// is always [`Ctx::path`]; a CGI `SCRIPT_NAME` is the prefix followed by the
    /// script's path below the root.
    pub fn root_prefix(&self) -> &str {
        match &self.root {
            Some(o) => &self.path[..o.strip],
            None => "",
        }
    }

    /// True when a module set the document root of this request with
    /// [`Ctx::set_document_root`].
    pub fn has_root_override(&self) -> bool {
        self.root.is_some()
    }

    /// The key under which caches of files and their derivatives (static-file's
    /// open-file cache, compress's compressed bodies) keep this request's
    /// resource: the path itself (borrowed, no allocation), or, once a module
    /// set the document root, `"\0ROOT\0PATH-BELOW-ROOT"`. A request path
    /// never holds NUL, so the two kinds never collide, and one URL path served
    /// from two roots (two hosts of `mass-vhost`) gets two keys. `None` when
    /// that root is not UTF-8: do not cache then.
    pub fn resource_key(&self) -> Option<Cow<'_, str>> {
        match &self.root {
            None => Some(Cow::Borrowed(&self.path)),
            Some(o) => Some(Cow::Owned(format!(
                "\0{}\0{}",
                o.root.to_str()?,
                &self.path[o.strip..]
            ))),
        }
    }

    /// Serves this request from `root` instead of the vhost's document root,
    /// with `prefix` of the path replaced by it: lighttpd's `physical.basedir`
    /// as mod_alias, mod_userdir and mod_evhost set it, nginx `alias` and
    /// `root` in a location, Cherokee's per-rule `document_root`. With
    /// `prefix = "/icons/"` and `root = /usr/share/icons`, `/icons/x.png` is
    /// the file `/usr/share/icons/x.png`; with `""` or `"/"` nothing is
    /// replaced (`/x.png` is `root/x.png`, mass virtual hosting).
    ///
    /// `root` must be an absolute, canonical directory (no symbolic link, `.`
    /// or `..` in it): the symlink policies of static-file compare the opened
    /// file's real path with it. `prefix`, without its trailing slash, must be
    /// the path itself or a prefix of it followed by `/` (a whole number of
    /// segments: `/icons` never matches `/icons../x`).
    ///
    /// The path, the rules and the request phase are left as they are (unlike
    /// [`Ctx::set_path`], nothing is resolved again); a later
    /// [`Ctx::set_path`] drops the override, and the restarted request phase
    /// may set it again. Costs nothing for requests that never call it.
    ///
    /// # Errors
    /// [`PrefixMismatch`] when `prefix` is not such a prefix of the path; the
    /// document root is then unchanged.
    pub fn set_document_root(
        &mut self,
        root: Arc<Path>,
        prefix: &str,
    ) -> Result<(), PrefixMismatch> {
        if crate::path::strip_segment_prefix(&self.path, prefix).is_none() {
            return Err(PrefixMismatch {
                prefix: prefix.to_owned(),
                path: self.path.to_string(),
            });
        }
        self.root = Some(RootOverride {
            root,
            strip: prefix.trim_end_matches('/').len(),
        });
        Ok(())
    }

    /// Gives the request body to [`Ctx::take_body`] (the core does this for
    /// requests of vhosts with an asynchronous content handler).
    pub fn set_body(&mut self, body: crate::request_body::RequestBody) {
        self.body = Some(Box::new(body));
    }

    /// The request body as a stream, once; `None` when it was taken already
    /// or this request has none to give. A handler that does not take it
    /// leaves it to the core, which discards a bounded amount to keep the
    /// connection alive. Boxed, so that the futures that carry it stay
    /// small (one allocation per request that has a body).
    pub fn take_body(&mut self) -> Option<Box<crate::request_body::RequestBody>> {
        self.body.take()
    }

    /// The decoded, normalized path: starts with `/`, no `.`/`..` segments, a
    /// trailing `/` when one was asked for.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Replaces the path (an internal rewrite, lighttpd `url.rewrite`, Cherokee
    /// internal redirection). The new path is normalized the same way as a
    /// request path; it is not percent-decoded again. When a request-phase hook
    /// rewrites the path, the core resolves the rules again for the new path and
    /// restarts the request phase, at most [`MAX_REWRITES`] times (then 500).
    /// A document root set with [`Ctx::set_document_root`] is dropped.
    ///
    /// # Errors
    /// [`crate::path::PathError`] when it does not start with `/` or climbs above
    /// the root.
    pub fn set_path(&mut self, path: &str) -> Result<(), crate::path::PathError> {
        let encoded = crate::path::encode(path);
        let normal = crate::path::normalize(&encoded)?.into_owned();
        self.replace_path(normal);
        Ok(())
    }

    /// The one place the path changes after [`Ctx::new`]: the document root
    /// a module set belongs to the old path (its prefix length would cut the
    /// new one anywhere), so it goes, and the rules are resolved again.
    fn replace_path(&mut self, normal: String) {
        self.path = Cow::Owned(normal);
        self.root = None;
        self.rewritten = true;
        self.fallback = StatusCode::NOT_FOUND;
    }

    /// An internal redirect to `location`, a URL path as a back end sends it
    /// (percent-encoded, with its query, which replaces the request's in
    /// [`Ctx::query`]): a CGI "local
    /// redirect response" (RFC 3875 §6.2.2) or nginx's `X-Accel-Redirect`.
    /// The request continues as a GET (HEAD stays HEAD) for the new path:
    /// the core resolves the rules again, as for [`Ctx::set_path`], also
    /// when a content handler asked for it.
    ///
    /// # Errors
    /// [`crate::path::PathError`] when the path is malformed or climbs above
    /// the root.
    pub fn redirect_internally(&mut self, location: &str) -> Result<(), crate::path::PathError> {
        let (path, query) = location.split_once('?').unwrap_or((location, ""));
        let normal = crate::path::normalize(path)?.into_owned();
        self.replace_path(normal);
        self.as_get = true;
        self.query = Some(query.into());
        Ok(())
    }

    /// Whether the request reached its path by an internal redirect
    /// ([`Ctx::redirect_internally`]; the `internal` rule matcher).
    pub fn redirected(&self) -> bool {
        self.as_get
    }

    /// The request method as modules should answer it: the request's, or
    /// GET after an internal redirect ([`Ctx::redirect_internally`]).
    pub fn method(&self) -> &Method {
        static GET: Method = Method::GET;
        let m = self.req.method();
        if self.as_get && m != Method::HEAD {
            &GET
        } else {
            m
        }
    }

    /// The status of the answer when no content handler answers: 404 unless a
    /// module said otherwise with [`Ctx::set_fallback_status`].
    pub fn fallback_status(&self) -> StatusCode {
        self.fallback
    }

    /// Sets the status for when no content handler answers, letting a later
    /// handler still take the request. static-file uses 403 for a directory
    /// without an index file, so that dir-listing after it may still list the
    /// directory, and otherwise the client gets 403 as from lighttpd and nginx
    /// (`autoindex off`). Reset by [`Ctx::set_path`].
    pub fn set_fallback_status(&mut self, status: StatusCode) {
        self.fallback = status;
    }

    /// True once after [`Ctx::set_path`] was called (used by the core to restart
    /// rule resolution).
    pub fn take_rewritten(&mut self) -> bool {
        std::mem::take(&mut self.rewritten)
    }

    /// The query string (still percent-encoded), `""` when absent: as
    /// received, or the one an internal redirect named.
    pub fn query(&self) -> &str {
        self.query
            .as_deref()
            .unwrap_or_else(|| self.req.query_string())
    }

    /// The host the request named (request-target authority, else the Host
    /// header), as sent, port included; `None` for HTTP/1.0 without Host.
    pub fn host(&self) -> Option<&str> {
        request_host(self.req)
    }

    /// The request headers, with changes made by modules (plugins may set
    /// request headers in the request phase).
    pub fn headers(&self) -> &HeaderMap {
        self.headers.as_ref().unwrap_or_else(|| self.req.headers())
    }

    /// The request headers for changing; copied from the request on first use.
    pub fn headers_mut(&mut self) -> &mut HeaderMap {
        let req = self.req;
        self.headers.get_or_insert_with(|| req.headers().clone())
    }

    pub(crate) fn into_parts(self) -> (Option<String>, Notes, Extensions) {
        (self.user, self.notes, self.ext)
    }
}

/// How many internal rewrites one request may go through before it is answered
/// with 500 (loop protection, like lighttpd's and Cherokee's limits).
pub const MAX_REWRITES: usize = 10;

/// The host a request named: the authority of an absolute-form target wins over
/// the Host header (RFC 9112 §3.2.2); `None` when neither is present.
pub fn request_host(req: &HttpRequest) -> Option<&str> {
    if let Some(a) = req.uri().authority() {
        return Some(a.as_str());
    }
    req.headers()
        .get(actix_web::http::header::HOST)
        .and_then(|h| h.to_str().ok())
}

/// What the log phase knows about a finished request.
pub struct LogRecord<'a> {
    /// The request.
    pub req: &'a HttpRequest,
    /// The vhost that served it.
    pub vhost: &'a VhostInfo,
    /// The vhost's first server name (`%v`).
    pub vhost_label: &'a str,
    /// The final status sent.
    pub status: StatusCode,
    /// Body bytes sent, after any content-coding, without chunk framing (`%b`).
    pub body_bytes: u64,
    /// When the request started (wall clock, for `%t`).
    pub start_time: SystemTime,
    /// When the request started (monotonic, for `%D` and `%T`).
    pub started: Instant,
    /// The authenticated user, if any (`%u`).
    pub user: Option<&'a str>,
    /// Whether the whole body was sent (false when the client went away).
    pub complete: bool,
    /// Notes left by modules (`%{name}n`).
    pub notes: &'a Notes,
    /// Per-request module state.
    pub ext: &'a Extensions,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vhost() -> VhostInfo {
        VhostInfo {
            index: 0,
            names: vec![],
            document_root: "/srv/www".into(),
        }
    }

    #[test]
    fn document_root_defaults_to_the_vhost() {
        let req = actix_web::test::TestRequest::default().to_http_request();
        let v = vhost();
        let cx = Ctx::new(&req, &v, "/icons/x.png".into());
        assert_eq!(cx.document_root(), Path::new("/srv/www"));
        assert_eq!(cx.path_in_root(), "/icons/x.png");
        assert_eq!(cx.root_prefix(), "");
        assert!(!cx.has_root_override());
        assert!(matches!(
            cx.resource_key(),
            Some(Cow::Borrowed("/icons/x.png"))
        ));
    }

    #[test]
    fn set_document_root_replaces_a_whole_segment_prefix() {
        let req = actix_web::test::TestRequest::default().to_http_request();
        let v = vhost();
        let icons: Arc<Path> = Path::new("/usr/share/icons").into();
        let mut cx = Ctx::new(&req, &v, "/icons/a/x.png".into());
        cx.set_document_root(icons.clone(), "/icons/").unwrap();
        assert_eq!(cx.document_root(), Path::new("/usr/share/icons"));
        assert_eq!(cx.path_in_root(), "/a/x.png");
        assert_eq!(cx.root_prefix(), "/icons");
        assert_eq!(cx.path(), "/icons/a/x.png");
        assert!(cx.has_root_override());
        assert_eq!(
            cx.resource_key().as_deref(),
            Some("\0/usr/share/icons\0/a/x.png")
        );
        // the prefix itself, without its slash
        let mut cx = Ctx::new(&req, &v, "/icons".into());
        cx.set_document_root(icons.clone(), "/icons/").unwrap();
        assert_eq!((cx.root_prefix(), cx.path_in_root()), ("/icons", ""));
        // nothing replaced
        let mut cx = Ctx::new(&req, &v, "/x".into());
        cx.set_document_root(icons.clone(), "").unwrap();
        assert_eq!((cx.root_prefix(), cx.path_in_root()), ("", "/x"));
        cx.set_document_root(icons.clone(), "/").unwrap();
        assert_eq!(cx.path_in_root(), "/x");
    }

    #[test]
    fn set_document_root_refuses_a_partial_segment() {
        let req = actix_web::test::TestRequest::default().to_http_request();
        let v = vhost();
        let mut cx = Ctx::new(&req, &v, "/icons../x".into());
        let root: Arc<Path> = Path::new("/usr/share/icons").into();
        assert!(cx.set_document_root(root.clone(), "/icons").is_err());
        assert!(cx.set_document_root(root, "/other/").is_err());
        assert_eq!(cx.document_root(), Path::new("/srv/www"));
        assert_eq!(cx.path_in_root(), "/icons../x");
    }

    #[test]
    fn an_internal_redirect_drops_the_document_root() {
        let req = actix_web::test::TestRequest::default().to_http_request();
        let v = vhost();
        let mut cx = Ctx::new(&req, &v, "/aliascg/loc.sh".into());
        cx.set_document_root(Path::new("/srv/cg").into(), "/aliascg")
            .unwrap();
        // shorter than the prefix: the old prefix length must not cut it
        cx.redirect_internally("/").unwrap();
        assert_eq!(cx.document_root(), Path::new("/srv/www"));
        assert_eq!(cx.path_in_root(), "/");
        cx.set_document_root(Path::new("/srv/cg").into(), "/")
            .unwrap();
        cx.redirect_internally("/aaaaaaa../up.sh").unwrap();
        assert_eq!(cx.path_in_root(), "/aaaaaaa../up.sh");
        assert_eq!(cx.root_prefix(), "");
    }

    #[test]
    fn an_internal_redirect_brings_its_query() {
        let req = actix_web::test::TestRequest::with_uri("/a.php?x=1").to_http_request();
        let v = vhost();
        let mut cx = Ctx::new(&req, &v, "/a.php".into());
        assert_eq!(cx.query(), "x=1");
        cx.redirect_internally("/b.php?y=2").unwrap();
        assert_eq!((cx.path(), cx.query()), ("/b.php", "y=2"));
        cx.redirect_internally("/c.html").unwrap();
        assert_eq!(cx.query(), "", "the target's query, none here");
    }

    #[test]
    fn set_path_drops_the_document_root() {
        let req = actix_web::test::TestRequest::default().to_http_request();
        let v = vhost();
        let mut cx = Ctx::new(&req, &v, "/icons/x".into());
        cx.set_document_root(Path::new("/usr/share/icons").into(), "/icons")
            .unwrap();
        cx.set_path("/y").unwrap();
        assert_eq!(cx.document_root(), Path::new("/srv/www"));
        assert_eq!(cx.path_in_root(), "/y");
    }
}

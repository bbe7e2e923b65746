//! Per-request state handed to module hooks.

use std::borrow::Cow;
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
    headers: Option<HeaderMap>,
    fallback: StatusCode,
    /// Notes for the access log (`%{name}n`, Apache's module notes).
    pub notes: Notes,
    /// Per-request state of modules, kept until the log phase is over.
    pub ext: Extensions,
    body: Option<crate::request_body::RequestBody>,
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
            headers: None,
            fallback: StatusCode::NOT_FOUND,
            notes: Notes::default(),
            ext: Extensions::default(),
            body: None,
        }
    }

    /// Gives the request body to [`Ctx::take_body`] (the core does this for
    /// requests of vhosts with an asynchronous content handler).
    pub fn set_body(&mut self, body: crate::request_body::RequestBody) {
        self.body = Some(body);
    }

    /// The request body as a stream, once; `None` when it was taken already
    /// or this request has none to give. A handler that does not take it
    /// leaves it to the core, which discards a bounded amount to keep the
    /// connection alive.
    pub fn take_body(&mut self) -> Option<crate::request_body::RequestBody> {
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
    ///
    /// # Errors
    /// [`crate::path::PathError`] when it does not start with `/` or climbs above
    /// the root.
    pub fn set_path(&mut self, path: &str) -> Result<(), crate::path::PathError> {
        let encoded = crate::path::encode(path);
        let normal = crate::path::normalize(&encoded)?.into_owned();
        self.path = Cow::Owned(normal);
        self.rewritten = true;
        self.fallback = StatusCode::NOT_FOUND;
        Ok(())
    }

    /// An internal redirect to `location`, a URL path as a back end sends it
    /// (percent-encoded, an optional query is ignored): a CGI "local
    /// redirect response" (RFC 3875 §6.2.2) or nginx's `X-Accel-Redirect`.
    /// The request continues as a GET (HEAD stays HEAD) for the new path:
    /// the core resolves the rules again, as for [`Ctx::set_path`], also
    /// when a content handler asked for it.
    ///
    /// # Errors
    /// [`crate::path::PathError`] when the path is malformed or climbs above
    /// the root.
    pub fn redirect_internally(&mut self, location: &str) -> Result<(), crate::path::PathError> {
        let path = location.split_once('?').map_or(location, |(p, _)| p);
        let normal = crate::path::normalize(path)?.into_owned();
        self.path = Cow::Owned(normal);
        self.rewritten = true;
        self.as_get = true;
        self.fallback = StatusCode::NOT_FOUND;
        Ok(())
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

    /// The query string as received (still percent-encoded), `""` when absent.
    pub fn query(&self) -> &str {
        self.req.query_string()
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

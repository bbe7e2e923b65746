//! Per-request state handed to module hooks.

use std::borrow::Cow;
use std::time::{Instant, SystemTime};

use actix_web::http::StatusCode;
use actix_web::HttpRequest;

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
        }
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
        Ok(())
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

    pub(crate) fn into_user(self) -> Option<String> {
        self.user
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
}

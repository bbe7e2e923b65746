//! Liveness and readiness endpoints, and the drain before a graceful
//! shutdown (the Kubernetes probe and preStop conventions; nginx and
//! lighttpd have no equivalent, operators point probes at a static file).
//!
//! `[server] liveness-path` answers 200 while the process serves.
//! `readiness-path` answers 200 until SIGTERM, then 503 for the
//! `drain-delay` seconds the server keeps serving before its graceful
//! shutdown starts, so that a load balancer that polls it stops sending new
//! requests first. Both are answered before vhost selection, for any Host,
//! as GET or HEAD, and never reach a module or an access log.

use std::sync::atomic::{AtomicBool, Ordering};

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::{HttpRequest, HttpResponse};

use crate::config::ServerSettings;

static DRAINING: AtomicBool = AtomicBool::new(false);

/// SIGTERM arrived: readiness answers 503 from now on.
pub fn start_draining() {
    DRAINING.store(true, Ordering::Relaxed);
}

/// Whether SIGTERM arrived.
pub fn draining() -> bool {
    DRAINING.load(Ordering::Relaxed)
}

/// The answer to a probe, or `None` when `req` is not one (or no probe
/// path is configured: then this costs two `None` checks).
pub fn answer(s: &ServerSettings, req: &HttpRequest) -> Option<HttpResponse> {
    if s.liveness_path.is_none() && s.readiness_path.is_none() {
        return None;
    }
    let path = req.path();
    let (status, body) = if s.liveness_path.as_deref() == Some(path) {
        (StatusCode::OK, "alive\n")
    } else if s.readiness_path.as_deref() == Some(path) {
        if draining() {
            (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
        } else {
            (StatusCode::OK, "ready\n")
        }
    } else {
        return None;
    };
    let m = req.method();
    let mut r = if m == Method::GET || m == Method::HEAD {
        HttpResponse::build(status)
            .insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/plain")))
            .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
            .body(body)
    } else {
        let mut r = crate::response::error_response(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        r
    };
    r.headers_mut()
        .insert(header::SERVER, HeaderValue::from_static("tessera"));
    Some(r)
}

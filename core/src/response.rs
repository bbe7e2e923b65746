//! Responses the core and modules share: error pages with the right status.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;

/// `text/html; charset=utf-8`, the type of generated pages.
pub const TEXT_HTML: HeaderValue = HeaderValue::from_static("text/html; charset=utf-8");

/// A small HTML error page for `status`: `<h1>404 Not Found</h1>`, with
/// `Content-Type: text/html; charset=utf-8` and an exact Content-Length. The
/// `error-pages` module may replace the body in the response phase.
pub fn error_response(status: StatusCode) -> HttpResponse {
    let reason = status.canonical_reason().unwrap_or("");
    let body = format!(
        "<!DOCTYPE html>\n<html><head><title>{code} {reason}</title></head>\
         <body><h1>{code} {reason}</h1><hr><address>tessera</address></body></html>\n",
        code = status.as_u16()
    );
    let mut res = HttpResponse::with_body(status, body).map_into_boxed_body();
    res.headers_mut().insert(header::CONTENT_TYPE, TEXT_HTML);
    res
}

/// 301 to the request's path with a trailing slash, the query kept (case
/// B25), the path percent-encoded (case B26): what lighttpd, nginx and
/// Cherokee answer for a directory asked for without its slash (static-file),
/// and lighttpd mod_userdir for `/~user`. The `Location` is absolute with the
/// request's own host (not the listen address) and scheme, relative when the
/// request named no host (HTTP/1.0).
pub fn redirect_to_slash(cx: &crate::Ctx<'_>) -> HttpResponse {
    let mut loc = String::new();
    push_origin(cx, &mut loc);
    loc.push_str(&crate::path::encode(cx.path()));
    loc.push('/');
    let q = cx.query();
    if !q.is_empty() {
        loc.push('?');
        loc.push_str(q);
    }
    let mut r = error_response(StatusCode::MOVED_PERMANENTLY);
    if let Ok(v) = HeaderValue::from_str(&loc) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// Appends the request's own origin to `loc`: `http://HOST` or
/// `https://HOST` (TLS), HOST as the request named it, port included; nothing
/// when the request named no host (HTTP/1.0 without `Host`), so that the
/// `Location` built on it stays relative. For `Location`s of redirects
/// (static-file's slash redirect, `redirect`, `userdir`).
pub fn push_origin(cx: &crate::Ctx<'_>, loc: &mut String) {
    if let Some(host) = cx.host() {
        loc.push_str(if cx.req.app_config().secure() {
            "https://"
        } else {
            "http://"
        });
        loc.push_str(host);
    }
}

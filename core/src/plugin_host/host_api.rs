//! The host side of the plugin ABI: the `Req` handle a hook gets and the
//! callbacks of [`HostApi`] (request and response fields, path, status,
//! notes, logging), each checking its arguments and catching panics, so
//! that a plugin's bad call costs one request and never the server.

#![allow(unsafe_code)] // the plugin boundary: FFI calls and raw pointers

use std::panic::{catch_unwind, AssertUnwindSafe};

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use tessera_plugin_abi as abi;
use tessera_plugin_abi::{ErrSink, HostApi, Req, Str};

use crate::context::{Ctx, LogRecord};

/// The host side of an opaque `Req` handle.
pub(super) struct HostReq<'r, 'c> {
    cx: Option<&'r mut Ctx<'c>>,
    res: Option<&'r mut HttpResponse>,
    staged: Option<&'r mut Option<HttpResponse>>,
    rec: Option<&'r LogRecord<'r>>,
    scratch: String,
}

impl<'r, 'c> HostReq<'r, 'c> {
    pub(super) fn live(
        cx: &'r mut Ctx<'c>,
        res: Option<&'r mut HttpResponse>,
        staged: Option<&'r mut Option<HttpResponse>>,
    ) -> Self {
        HostReq {
            cx: Some(cx),
            res,
            staged,
            rec: None,
            scratch: String::new(),
        }
    }

    pub(super) fn log(rec: &'r LogRecord<'r>) -> Self {
        HostReq {
            cx: None,
            res: None,
            staged: None,
            rec: Some(rec),
            scratch: String::new(),
        }
    }

    fn http_req(&self) -> &actix_web::HttpRequest {
        match (&self.cx, self.rec) {
            (Some(cx), _) => cx.req,
            (None, Some(rec)) => rec.req,
            (None, None) => unreachable!("a HostReq has a context or a record"),
        }
    }

    /// The response a header or status call acts on.
    fn response(&mut self) -> Option<&mut HttpResponse> {
        if let Some(r) = self.res.as_deref_mut() {
            return Some(r);
        }
        self.staged.as_deref_mut().and_then(|s| s.as_mut())
    }
}

pub(super) struct Sink(pub(super) String);

pub(super) fn sink_ptr(s: &mut Sink) -> *mut ErrSink {
    s as *mut Sink as *mut ErrSink
}

/// # Safety
/// `req` must be the handle the host passed to the current hook.
unsafe fn host_req<'a>(req: *const Req) -> Option<&'a mut HostReq<'a, 'a>> {
    // SAFETY: by the caller's contract; null is refused.
    unsafe { (req as *mut HostReq<'a, 'a>).as_mut() }
}

/// # Safety
/// `s` must be a valid borrowed string for this call.
unsafe fn bytes<'a>(s: Str) -> &'a [u8] {
    if s.len > 0 && s.ptr.is_null() {
        return &[];
    }
    // SAFETY: by the caller's contract.
    unsafe { s.as_bytes() }
}

fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

fn out_str(s: &str) -> Str {
    Str::new(s.as_bytes())
}

unsafe extern "C" fn cb_log(level: u32, msg: Str) {
    guard((), || {
        // SAFETY: borrowed for this call.
        let m = String::from_utf8_lossy(unsafe { bytes(msg) });
        match level {
            abi::LOG_ERROR => tracing::error!(target: "plugin", "{m}"),
            abi::LOG_WARN => tracing::warn!(target: "plugin", "{m}"),
            abi::LOG_INFO => tracing::info!(target: "plugin", "{m}"),
            _ => tracing::debug!(target: "plugin", "{m}"),
        }
    })
}

unsafe extern "C" fn cb_err_write(sink: *mut ErrSink, msg: Str) {
    guard((), || {
        // SAFETY: the sink is the one we passed for this call.
        if let Some(s) = unsafe { (sink as *mut Sink).as_mut() } {
            // SAFETY: borrowed for this call.
            let text = String::from_utf8_lossy(unsafe { bytes(msg) });
            if s.0.len() < 4096 {
                s.0.push_str(&text.replace('\n', " "));
            }
        }
    })
}

macro_rules! getter {
    ($name:ident, |$hr:ident| $body:expr) => {
        unsafe extern "C" fn $name(req: *const Req) -> Str {
            guard(Str::EMPTY, || {
                // SAFETY: the handle of the current hook.
                let Some($hr) = (unsafe { host_req(req) }) else {
                    return Str::EMPTY;
                };
                $body
            })
        }
    };
}

getter!(cb_method, |hr| out_str(hr.http_req().method().as_str()));
getter!(cb_path, |hr| match &hr.cx {
    Some(cx) => out_str(cx.path()),
    None => out_str(hr.http_req().path()),
});
getter!(cb_query, |hr| out_str(hr.http_req().query_string()));
getter!(cb_vhost, |hr| match (&hr.cx, hr.rec) {
    (Some(cx), _) => out_str(cx.vhost.names.first().map_or("", String::as_str)),
    (None, Some(rec)) => out_str(rec.vhost_label),
    _ => Str::EMPTY,
});
getter!(cb_peer, |hr| {
    hr.scratch = hr
        .http_req()
        .peer_addr()
        .map(|a| crate::rule::canonical_ip(a.ip()).to_string())
        .unwrap_or_default();
    out_str(&hr.scratch)
});

/// A status code from a plugin: 100 to 999 (RFC 9110 §15), else `None`.
fn status_code(status: u32) -> Option<StatusCode> {
    u16::try_from(status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
}

fn header_name(name: Str) -> Option<HeaderName> {
    // SAFETY: borrowed for the current call.
    HeaderName::from_bytes(unsafe { bytes(name) }).ok()
}

fn header_value(value: Str) -> Option<HeaderValue> {
    // SAFETY: borrowed for the current call.
    HeaderValue::from_bytes(unsafe { bytes(value) }).ok()
}

fn get_line(
    map: &actix_web::http::header::HeaderMap,
    name: &HeaderName,
    idx: usize,
    out: *mut Str,
) -> usize {
    let mut n = 0;
    for (i, v) in map.get_all(name).enumerate() {
        if i == idx && !out.is_null() {
            // SAFETY: `out` is the plugin's valid place for one Str.
            unsafe { *out = Str::new(v.as_bytes()) };
        }
        n += 1;
    }
    n
}

unsafe extern "C" fn cb_req_header_get(
    req: *const Req,
    name: Str,
    idx: usize,
    out: *mut Str,
) -> usize {
    guard(0, || {
        // SAFETY: the handle of the current hook.
        let (Some(hr), Some(name)) = (unsafe { host_req(req) }, header_name(name)) else {
            return 0;
        };
        match &hr.cx {
            Some(cx) => get_line(cx.headers(), &name, idx, out),
            None => get_line(hr.http_req().headers(), &name, idx, out),
        }
    })
}

#[derive(Clone, Copy)]
enum Op {
    Set,
    Append,
    Remove,
}

fn edit(map: &mut actix_web::http::header::HeaderMap, op: Op, name: Str, value: Str) -> u32 {
    let Some(n) = header_name(name) else {
        return abi::HOST_INVALID;
    };
    match op {
        Op::Remove => {
            map.remove(n);
        }
        Op::Set | Op::Append => {
            let Some(v) = header_value(value) else {
                return abi::HOST_INVALID;
            };
            if matches!(op, Op::Set) {
                map.insert(n, v);
            } else {
                map.append(n, v);
            }
        }
    }
    abi::HOST_OK
}

fn req_edit(req: *mut Req, op: Op, name: Str, value: Str) -> u32 {
    guard(abi::HOST_INVALID, || {
        // SAFETY: the handle of the current hook.
        let Some(hr) = (unsafe { host_req(req) }) else {
            return abi::HOST_INVALID;
        };
        // Only in the request phase (a staged-answer slot exists there).
        match (hr.staged.is_some(), hr.cx.as_deref_mut()) {
            (true, Some(cx)) => edit(cx.headers_mut(), op, name, value),
            _ => abi::HOST_INVALID,
        }
    })
}

unsafe extern "C" fn cb_req_header_set(req: *mut Req, name: Str, value: Str) -> u32 {
    req_edit(req, Op::Set, name, value)
}
unsafe extern "C" fn cb_req_header_append(req: *mut Req, name: Str, value: Str) -> u32 {
    req_edit(req, Op::Append, name, value)
}
unsafe extern "C" fn cb_req_header_remove(req: *mut Req, name: Str, value: Str) -> u32 {
    req_edit(req, Op::Remove, name, value)
}

unsafe extern "C" fn cb_set_path(req: *mut Req, path: Str) -> u32 {
    guard(abi::HOST_INVALID, || {
        // SAFETY: the handle of the current hook.
        let Some(hr) = (unsafe { host_req(req) }) else {
            return abi::HOST_INVALID;
        };
        // SAFETY: borrowed for this call.
        let Ok(p) = std::str::from_utf8(unsafe { bytes(path) }) else {
            return abi::HOST_INVALID;
        };
        match (hr.staged.is_some(), hr.cx.as_deref_mut()) {
            (true, Some(cx)) => match cx.set_path(p) {
                Ok(()) => abi::HOST_OK,
                Err(_) => abi::HOST_INVALID,
            },
            _ => abi::HOST_INVALID,
        }
    })
}

unsafe extern "C" fn cb_resp_status(req: *const Req) -> u32 {
    guard(0, || {
        // SAFETY: the handle of the current hook.
        let Some(hr) = (unsafe { host_req(req) }) else {
            return 0;
        };
        if let Some(rec) = hr.rec {
            return rec.status.as_u16() as u32;
        }
        hr.response().map_or(0, |r| r.status().as_u16() as u32)
    })
}

unsafe extern "C" fn cb_resp_set_status(req: *mut Req, status: u32) -> u32 {
    guard(abi::HOST_INVALID, || {
        // SAFETY: the handle of the current hook.
        let Some(hr) = (unsafe { host_req(req) }) else {
            return abi::HOST_INVALID;
        };
        let Some(code) = status_code(status) else {
            return abi::HOST_INVALID;
        };
        match hr.response() {
            Some(r) => {
                *r.status_mut() = code;
                abi::HOST_OK
            }
            None => abi::HOST_INVALID,
        }
    })
}

unsafe extern "C" fn cb_resp_header_get(
    req: *const Req,
    name: Str,
    idx: usize,
    out: *mut Str,
) -> usize {
    guard(0, || {
        // SAFETY: the handle of the current hook.
        let (Some(hr), Some(name)) = (unsafe { host_req(req) }, header_name(name)) else {
            return 0;
        };
        hr.response()
            .map_or(0, |r| get_line(r.headers(), &name, idx, out))
    })
}

fn resp_edit(req: *mut Req, op: Op, name: Str, value: Str) -> u32 {
    guard(abi::HOST_INVALID, || {
        // SAFETY: the handle of the current hook.
        let Some(hr) = (unsafe { host_req(req) }) else {
            return abi::HOST_INVALID;
        };
        match hr.response() {
            Some(r) => edit(r.headers_mut(), op, name, value),
            None => abi::HOST_INVALID,
        }
    })
}

unsafe extern "C" fn cb_resp_header_set(req: *mut Req, name: Str, value: Str) -> u32 {
    resp_edit(req, Op::Set, name, value)
}
unsafe extern "C" fn cb_resp_header_append(req: *mut Req, name: Str, value: Str) -> u32 {
    resp_edit(req, Op::Append, name, value)
}
unsafe extern "C" fn cb_resp_header_remove(req: *mut Req, name: Str, value: Str) -> u32 {
    resp_edit(req, Op::Remove, name, value)
}

unsafe extern "C" fn cb_respond(req: *mut Req, status: u32, body: Str) -> u32 {
    guard(abi::HOST_INVALID, || {
        // SAFETY: the handle of the current hook.
        let Some(hr) = (unsafe { host_req(req) }) else {
            return abi::HOST_INVALID;
        };
        let Some(code) = status_code(status) else {
            return abi::HOST_INVALID;
        };
        let Some(slot) = hr.staged.as_deref_mut() else {
            return abi::HOST_INVALID;
        };
        // SAFETY: borrowed for this call; copied.
        let body = actix_web::web::Bytes::copy_from_slice(unsafe { bytes(body) });
        *slot = Some(HttpResponse::with_body(code, body).map_into_boxed_body());
        abi::HOST_OK
    })
}

unsafe extern "C" fn cb_note_set(req: *mut Req, name: Str, value: Str) -> u32 {
    guard(abi::HOST_INVALID, || {
        // SAFETY: the handle of the current hook.
        let Some(hr) = (unsafe { host_req(req) }) else {
            return abi::HOST_INVALID;
        };
        // SAFETY: borrowed for this call.
        let (n, v) = unsafe { (bytes(name), bytes(value)) };
        match (
            hr.cx.as_deref_mut(),
            std::str::from_utf8(n),
            std::str::from_utf8(v),
        ) {
            (Some(cx), Ok(n), Ok(v)) => {
                cx.notes.set(n, v);
                abi::HOST_OK
            }
            _ => abi::HOST_INVALID,
        }
    })
}

/// The callbacks every plugin gets.
pub(super) static HOST_API: HostApi = HostApi {
    size: std::mem::size_of::<HostApi>(),
    abi_major: abi::ABI_MAJOR,
    abi_minor: abi::ABI_MINOR,
    log: cb_log,
    err_write: cb_err_write,
    method: cb_method,
    path: cb_path,
    query: cb_query,
    vhost: cb_vhost,
    peer: cb_peer,
    req_header_get: cb_req_header_get,
    req_header_set: cb_req_header_set,
    req_header_append: cb_req_header_append,
    req_header_remove: cb_req_header_remove,
    set_path: cb_set_path,
    resp_status: cb_resp_status,
    resp_set_status: cb_resp_set_status,
    resp_header_get: cb_resp_header_get,
    resp_header_set: cb_resp_header_set,
    resp_header_append: cb_resp_header_append,
    resp_header_remove: cb_resp_header_remove,
    respond: cb_respond,
    note_set: cb_note_set,
};

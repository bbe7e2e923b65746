//! The boundary between the Tessera server and a run-time plugin (a `cdylib`).
//!
//! Nothing Rust-specific crosses it: only `#[repr(C)]` structs of integers,
//! borrowed byte slices ([`Str`]) and `extern "C"` function pointers, so host and
//! plugin may be built by different compilers and use different global
//! allocators. The design follows Envoy's dynamic modules and nginx's module
//! signature check (see `shared/docs/plugin-abi.md`):
//!
//! - A plugin exports one static [`Descriptor`] under the symbol
//!   [`DESCRIPTOR_SYMBOL`]. Its first fields ([`DescriptorHeader`]) never change:
//!   magic, ABI major and minor, and the descriptor's size. The host checks them,
//!   the [`ABI_FINGERPRINT`], the flags and the vtable size before it calls any
//!   plugin function.
//! - The [`VTable`] only grows at its end; its `size` field tells the host which
//!   hooks an older plugin has.
//! - The plugin reaches the request only through [`HostApi`] callbacks on an
//!   opaque [`Req`] handle.
//! - Every return code is a `u32` ([`ST_CONTINUE`], ...); the host treats an
//!   unknown value as an error and never transmutes it.
//!
//! Ownership: each side frees only what it allocated. A [`Str`] handed from one
//! side to the other is borrowed for the duration of that one call; the receiver
//! copies what it keeps.

#![no_std]
#![allow(unsafe_code)] // the boundary itself: raw pointers, documented below

use core::ffi::c_void;

/// First 8 bytes of every descriptor.
pub const MAGIC: [u8; 8] = *b"TESSERA\x01";
/// ABI major version: a plugin with another major is refused.
pub const ABI_MAJOR: u16 = 0;
/// ABI minor version: a plugin with a higher minor (newer than the host) is
/// refused; a lower one loads, its missing hooks are skipped.
pub const ABI_MINOR: u16 = 1;
/// The exported symbol, NUL-terminated: a `static Descriptor`.
pub const DESCRIPTOR_SYMBOL: &[u8] = b"TESSERA_PLUGIN_DESCRIPTOR\0";

/// FNV-1a hash of this file's source: while the ABI is 0.x, any change to it
/// changes the fingerprint and the host refuses plugins built against another
/// revision (Envoy's ABI hash idea).
pub const ABI_FINGERPRINT: u64 = fnv1a(include_bytes!("lib.rs"));

const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

/// Flag: the plugin was built with `panic = "unwind"`, so its panics can be caught
/// at the boundary. Plugins without it are refused (a panic would abort the
/// server).
pub const FLAG_PANIC_UNWIND: u32 = 1;
/// Flag: the plugin's hooks may block (I/O, sleeps). The host then handles the
/// requests of vhosts using it off the worker threads (its blocking pool).
pub const FLAG_MAY_BLOCK: u32 = 2;

/// Hook result: go on (request phase: pass to the next module).
pub const ST_CONTINUE: u32 = 0;
/// Hook result: the plugin staged a response with [`HostApi::respond`].
pub const ST_RESPOND: u32 = 1;
/// Hook result: the plugin failed; the message is in the error sink.
pub const ST_ERROR: u32 = 2;
/// Hook result: the plugin panicked; the SDK caught it and wrote the message.
pub const ST_PANIC: u32 = 3;

/// Host callback result: done.
pub const HOST_OK: u32 = 0;
/// Host callback result: not allowed in this phase, or an invalid name/value.
pub const HOST_INVALID: u32 = 1;

/// Log levels for [`HostApi::log`].
pub const LOG_ERROR: u32 = 1;
/// Warning level.
pub const LOG_WARN: u32 = 2;
/// Info level.
pub const LOG_INFO: u32 = 3;
/// Debug level.
pub const LOG_DEBUG: u32 = 4;

/// Borrowed bytes: valid only during the call that passes them.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Str {
    /// First byte; may be dangling when `len` is 0.
    pub ptr: *const u8,
    /// Length in bytes.
    pub len: usize,
}

impl Str {
    /// A `Str` borrowing `s`.
    pub const fn new(s: &[u8]) -> Str {
        Str {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// The empty string.
    pub const EMPTY: Str = Str::new(b"");

    /// The bytes, for the duration of the call that received this `Str`.
    ///
    /// # Safety
    /// `ptr` must point to `len` readable bytes that outlive `'a`.
    pub unsafe fn as_bytes<'a>(self) -> &'a [u8] {
        if self.len == 0 {
            &[]
        } else {
            // SAFETY: guaranteed by the caller.
            unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
        }
    }
}

/// The frozen first fields of a [`Descriptor`]. Never changes, in any version.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DescriptorHeader {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// The plugin's [`ABI_MAJOR`].
    pub abi_major: u16,
    /// The plugin's [`ABI_MINOR`].
    pub abi_minor: u16,
    /// `size_of::<Descriptor>()` as compiled into the plugin, bytes.
    pub descriptor_size: u32,
}

/// What a plugin exports under [`DESCRIPTOR_SYMBOL`].
#[repr(C)]
pub struct Descriptor {
    /// Magic, versions, size.
    pub header: DescriptorHeader,
    /// The [`ABI_FINGERPRINT`] the plugin was built with.
    pub abi_fingerprint: u64,
    /// [`FLAG_PANIC_UNWIND`], [`FLAG_MAY_BLOCK`].
    pub flags: u32,
    /// Module name, kebab-case ASCII (`[a-z0-9-]+`), as used in `modules = [...]`.
    pub name: Str,
    /// The plugin's own version, e.g. `"1.2.0"` (diagnostics).
    pub version: Str,
    /// Build information, e.g. `"rustc 1.95.0, sdk 0.1.0"` (diagnostics).
    pub build_info: Str,
    /// The hooks.
    pub vtable: *const VTable,
}

// SAFETY: a descriptor is immutable static data: pointers to static strings and
// a static vtable.
unsafe impl Sync for Descriptor {}

/// Opaque request handle owned by the host.
#[repr(C)]
pub struct Req {
    _private: [u8; 0],
}

/// Opaque error sink owned by the host; written with [`HostApi::err_write`].
#[repr(C)]
pub struct ErrSink {
    _private: [u8; 0],
}

/// `init(host, config_json, err, out_instance) -> ST_*`: validate the JSON
/// configuration and create an instance (`ST_CONTINUE` and `*out` set), or write
/// a message to `err` and return `ST_ERROR`.
pub type InitFn = unsafe extern "C" fn(
    host: *const HostApi,
    config: Str,
    err: *mut ErrSink,
    out: *mut *mut c_void,
) -> u32;
/// `destroy(instance)`: called once when the configuration is retired.
pub type DestroyFn = unsafe extern "C" fn(instance: *mut c_void);
/// `request_begin(instance) -> state`: per-request state (may be null).
pub type BeginFn = unsafe extern "C" fn(instance: *const c_void) -> *mut c_void;
/// `request_end(instance, state)`: exactly once per begun request.
pub type EndFn = unsafe extern "C" fn(instance: *const c_void, state: *mut c_void);
/// A phase hook: `(instance, state, request, err) -> ST_*`.
pub type HookFn = unsafe extern "C" fn(
    instance: *const c_void,
    state: *mut c_void,
    req: *mut Req,
    err: *mut ErrSink,
) -> u32;

/// The plugin's hooks. Append-only: new hooks go at the end, and `size` tells the
/// host how much of the table the plugin has. A `None` hook is not called.
#[repr(C)]
pub struct VTable {
    /// `size_of::<VTable>()` as compiled into the plugin, bytes.
    pub size: usize,
    /// Required.
    pub init: Option<InitFn>,
    /// Required.
    pub destroy: Option<DestroyFn>,
    /// Optional per-request state.
    pub request_begin: Option<BeginFn>,
    /// Required when `request_begin` is set.
    pub request_end: Option<EndFn>,
    /// Request phase: `ST_CONTINUE` or `ST_RESPOND`.
    pub on_request: Option<HookFn>,
    /// Response phase: change status and headers; `ST_CONTINUE`.
    pub on_response: Option<HookFn>,
    /// Log phase: the response was sent or the client went away.
    pub on_log: Option<HookFn>,
}

/// The smallest vtable a host of this major accepts: through `on_request`.
pub const MIN_VTABLE_SIZE: usize = core::mem::offset_of!(VTable, on_response);

/// Reads a header field (request or response) by name: the `idx`-th line (0-based)
/// is stored in `*out`; returns the number of lines of that field (0: absent).
pub type HeaderGetFn =
    unsafe extern "C" fn(req: *const Req, name: Str, idx: usize, out: *mut Str) -> usize;
/// Sets, appends (`name`, `value`) or removes (`value` ignored) a header field.
pub type HeaderSetFn = unsafe extern "C" fn(req: *mut Req, name: Str, value: Str) -> u32;

/// Callbacks the host offers to plugins. Strings returned are borrowed until the
/// hook returns or the same field is changed; strings passed are copied.
#[repr(C)]
pub struct HostApi {
    /// `size_of::<HostApi>()` in the host, bytes (append-only).
    pub size: usize,
    /// The host's [`ABI_MAJOR`].
    pub abi_major: u16,
    /// The host's [`ABI_MINOR`].
    pub abi_minor: u16,
    /// Writes a diagnostics line at `level` ([`LOG_ERROR`]...).
    pub log: unsafe extern "C" fn(level: u32, msg: Str),
    /// Appends to an error message (init and hook failures).
    pub err_write: unsafe extern "C" fn(sink: *mut ErrSink, msg: Str),
    /// The request method.
    pub method: unsafe extern "C" fn(req: *const Req) -> Str,
    /// The decoded, normalized path (after rewrites).
    pub path: unsafe extern "C" fn(req: *const Req) -> Str,
    /// The raw query string without `?`.
    pub query: unsafe extern "C" fn(req: *const Req) -> Str,
    /// The vhost's name.
    pub vhost: unsafe extern "C" fn(req: *const Req) -> Str,
    /// The client address as text, e.g. `127.0.0.1` (no port).
    pub peer: unsafe extern "C" fn(req: *const Req) -> Str,
    /// Request header lines.
    pub req_header_get: HeaderGetFn,
    /// Request header set (request phase only).
    pub req_header_set: HeaderSetFn,
    /// Request header append (request phase only).
    pub req_header_append: HeaderSetFn,
    /// Request header remove (request phase only).
    pub req_header_remove: HeaderSetFn,
    /// Rewrites the path (request phase only); the host re-resolves the rules.
    pub set_path: unsafe extern "C" fn(req: *mut Req, path: Str) -> u32,
    /// The response status (response and log phases; 0 before).
    pub resp_status: unsafe extern "C" fn(req: *const Req) -> u32,
    /// Sets the response status (response phase).
    pub resp_set_status: unsafe extern "C" fn(req: *mut Req, status: u32) -> u32,
    /// Response header lines (response and log phases, and of a staged answer).
    pub resp_header_get: HeaderGetFn,
    /// Response header set (response phase, or on a staged answer).
    pub resp_header_set: HeaderSetFn,
    /// Response header append.
    pub resp_header_append: HeaderSetFn,
    /// Response header remove.
    pub resp_header_remove: HeaderSetFn,
    /// Stages an answer (request phase): status and body; add headers with
    /// `resp_header_set`; then return [`ST_RESPOND`].
    pub respond: unsafe extern "C" fn(req: *mut Req, status: u32, body: Str) -> u32,
    /// Sets a note for the access log (`%{name}n`, Apache's notes).
    pub note_set: unsafe extern "C" fn(req: *mut Req, name: Str, value: Str) -> u32,
}

//! The SDK for Tessera plugins: implement [`Plugin`] for a type and export it with
//! [`export_plugin!`]; build the crate as a `cdylib`; name the library in
//! `conf/server.toml`.
//!
//! ```
//! use tessera_plugin_sdk::{export_plugin, Action, Host, Plugin, Request, HOOK_REQUEST};
//!
//! #[derive(serde::Deserialize)]
//! #[serde(deny_unknown_fields)]
//! pub struct Config { greeting: String }
//!
//! pub struct Hello { greeting: String }
//!
//! impl Plugin for Hello {
//!     const NAME: &'static str = "hello";
//!     const VERSION: &'static str = "1.0.0";
//!     const HOOKS: u32 = HOOK_REQUEST;
//!     type Config = Config;
//!     type State = ();
//!     fn new(cfg: Config, _host: &Host) -> Result<Self, String> {
//!         Ok(Hello { greeting: cfg.greeting })
//!     }
//!     fn on_request(&self, _: &mut (), req: &mut Request<'_>) -> Result<Action, String> {
//!         if req.path() == b"/hello" {
//!             req.respond(200, self.greeting.as_bytes());
//!             req.set_response_header("content-type", "text/plain");
//!             return Ok(Action::Respond);
//!         }
//!         Ok(Action::Continue)
//!     }
//! }
//! export_plugin!(Hello);
//! ```
//!
//! What the SDK guarantees (see `tessera-plugin-abi` for the boundary):
//! - every exported function catches panics (`catch_unwind`) and reports them as
//!   `ST_PANIC` with the panic message, so a panicking hook costs one request;
//! - the configuration table arrives as JSON and is deserialized into
//!   [`Plugin::Config`] (use `#[serde(deny_unknown_fields)]`): errors stop the
//!   server at start with your message;
//! - per-request [`Plugin::State`] is created before the first hook of a request
//!   and dropped exactly once after its last (also when the client went away);
//! - strings from the host are borrowed for one hook: copy what you keep; host
//!   and plugin never free each other's memory, so any global allocator works;
//! - the descriptor records whether the plugin was built with `panic = "unwind"`
//!   (required: the host refuses `panic = "abort"` builds).
//!
//! Hooks are synchronous and run concurrently: the plugin type must be
//! `Send + Sync` and must not use an async runtime of its own from a hook. They
//! run on the server's worker threads and must not block, unless the plugin sets
//! [`Plugin::MAY_BLOCK`]: then requests of the vhosts that use it are handled on
//! the server's blocking thread pool.

#![allow(unsafe_code)] // the SDK wraps the C boundary; every block says why it is sound

pub use tessera_plugin_abi as abi;

use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};

use abi::{ErrSink, HostApi, Req, Str};

/// The plugin joins the request phase.
pub const HOOK_REQUEST: u32 = 1;
/// The plugin joins the response phase.
pub const HOOK_RESPONSE: u32 = 2;
/// The plugin joins the log phase.
pub const HOOK_LOG: u32 = 4;

/// What the request phase decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Pass on to the next module.
    Continue,
    /// Answer with the response staged by [`Request::respond`].
    Respond,
}

/// A Tessera module implemented in a plugin.
pub trait Plugin: Sized + Send + Sync + 'static {
    /// Module name, kebab-case (`[a-z0-9-]+`): used in `modules = [...]` and as
    /// the name of its table.
    const NAME: &'static str;
    /// The plugin's version (diagnostics).
    const VERSION: &'static str;
    /// Which hooks to export: a combination of [`HOOK_REQUEST`],
    /// [`HOOK_RESPONSE`], [`HOOK_LOG`]. Hooks not listed are never called.
    const HOOKS: u32;
    /// The hooks may block (file or network I/O, sleeps, slow hashing). The
    /// server then handles requests of vhosts using this plugin on its blocking
    /// thread pool instead of the worker threads. Default `false`.
    const MAY_BLOCK: bool = false;
    /// Options, deserialized from the module's table (JSON of the TOML table;
    /// `{}` when the module has no table).
    type Config: serde::de::DeserializeOwned;
    /// Per-request state, created with `Default` for each request.
    type State: Default + 'static;

    /// Validates the configuration and builds an instance (one per vhost or rule
    /// table). `Err` stops the server start with this message.
    fn new(config: Self::Config, host: &Host) -> Result<Self, String>;

    /// Request phase. `Err` answers 500 and logs the message.
    fn on_request(
        &self,
        _state: &mut Self::State,
        _req: &mut Request<'_>,
    ) -> Result<Action, String> {
        Ok(Action::Continue)
    }

    /// Response phase: change the status and headers. `Err` answers 500.
    fn on_response(&self, _state: &mut Self::State, _req: &mut Request<'_>) -> Result<(), String> {
        Ok(())
    }

    /// Log phase, after the response was sent or the client went away.
    fn on_log(&self, _state: &mut Self::State, _req: &Request<'_>) {}
}

static HOST: AtomicPtr<HostApi> = AtomicPtr::new(std::ptr::null_mut());

fn host_api() -> &'static HostApi {
    let p = HOST.load(Ordering::Acquire);
    assert!(!p.is_null(), "tessera host API used before init");
    // SAFETY: the host passes a pointer to a static HostApi in `init`, valid for
    // the life of the process.
    unsafe { &*p }
}

/// Services of the host outside a request.
pub struct Host {
    api: &'static HostApi,
}

impl Host {
    /// Writes a line to the server's diagnostics at `level`
    /// (`abi::LOG_ERROR` ... `abi::LOG_DEBUG`).
    pub fn log(&self, level: u32, msg: &str) {
        // SAFETY: host callback with a borrowed string.
        unsafe { (self.api.log)(level, Str::new(msg.as_bytes())) }
    }
}

/// A request as a plugin sees it, valid for one hook call.
pub struct Request<'a> {
    api: &'static HostApi,
    req: *mut Req,
    _hook: std::marker::PhantomData<&'a mut ()>,
}

fn s(x: &str) -> Str {
    Str::new(x.as_bytes())
}

impl<'a> Request<'a> {
    fn get(&self, f: unsafe extern "C" fn(*const Req) -> Str) -> &[u8] {
        // SAFETY: the host returns bytes valid until the hook returns or the
        // field changes; the borrow of `self` ties them to this hook call.
        unsafe { f(self.req).as_bytes() }
    }

    /// The method, e.g. `GET`.
    pub fn method(&self) -> &[u8] {
        self.get(self.api.method)
    }
    /// The decoded, normalized path.
    pub fn path(&self) -> &[u8] {
        self.get(self.api.path)
    }
    /// The raw query string without `?` (empty when absent).
    pub fn query(&self) -> &[u8] {
        self.get(self.api.query)
    }
    /// The vhost's name.
    pub fn vhost(&self) -> &[u8] {
        self.get(self.api.vhost)
    }
    /// The client address (no port).
    pub fn peer(&self) -> &[u8] {
        self.get(self.api.peer)
    }

    fn header_from(&self, f: abi::HeaderGetFn, name: &str) -> Option<&[u8]> {
        let mut out = Str::EMPTY;
        // SAFETY: `out` is a valid place; the returned bytes live as `path()`.
        let n = unsafe { f(self.req, s(name), 0, &mut out) };
        // SAFETY: as above.
        (n > 0).then(|| unsafe { out.as_bytes() })
    }

    /// The first line of a request header, if present.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.header_from(self.api.req_header_get, name)
    }
    /// Sets a request header (request phase). Returns false if refused.
    pub fn set_header(&mut self, name: &str, value: &str) -> bool {
        // SAFETY: host callback with borrowed strings.
        unsafe { (self.api.req_header_set)(self.req, s(name), s(value)) == abi::HOST_OK }
    }
    /// Removes a request header (request phase).
    pub fn remove_header(&mut self, name: &str) -> bool {
        // SAFETY: host callback with borrowed strings.
        unsafe { (self.api.req_header_remove)(self.req, s(name), Str::EMPTY) == abi::HOST_OK }
    }
    /// Rewrites the path (request phase): the server resolves its rules again.
    pub fn set_path(&mut self, path: &str) -> bool {
        // SAFETY: host callback with a borrowed string.
        unsafe { (self.api.set_path)(self.req, s(path)) == abi::HOST_OK }
    }
    /// The response status (response and log phases; 0 before).
    pub fn status(&self) -> u16 {
        // SAFETY: host callback.
        unsafe { (self.api.resp_status)(self.req) as u16 }
    }
    /// Sets the response status (response phase).
    pub fn set_status(&mut self, status: u16) -> bool {
        // SAFETY: host callback.
        unsafe { (self.api.resp_set_status)(self.req, status as u32) == abi::HOST_OK }
    }
    /// The first line of a response header.
    pub fn response_header(&self, name: &str) -> Option<&[u8]> {
        self.header_from(self.api.resp_header_get, name)
    }
    /// Sets a response header (response phase, or after [`Request::respond`]).
    pub fn set_response_header(&mut self, name: &str, value: &str) -> bool {
        // SAFETY: host callback with borrowed strings.
        unsafe { (self.api.resp_header_set)(self.req, s(name), s(value)) == abi::HOST_OK }
    }
    /// Appends a response header line.
    pub fn append_response_header(&mut self, name: &str, value: &str) -> bool {
        // SAFETY: host callback with borrowed strings.
        unsafe { (self.api.resp_header_append)(self.req, s(name), s(value)) == abi::HOST_OK }
    }
    /// Removes a response header.
    pub fn remove_response_header(&mut self, name: &str) -> bool {
        // SAFETY: host callback with borrowed strings.
        unsafe { (self.api.resp_header_remove)(self.req, s(name), Str::EMPTY) == abi::HOST_OK }
    }
    /// Stages an answer (request phase); return [`Action::Respond`] after it.
    pub fn respond(&mut self, status: u16, body: &[u8]) -> bool {
        // SAFETY: host callback with a borrowed body.
        unsafe { (self.api.respond)(self.req, status as u32, Str::new(body)) == abi::HOST_OK }
    }
    /// Sets a note for the access log (`%{name}n`).
    pub fn set_note(&mut self, name: &str, value: &str) -> bool {
        // SAFETY: host callback with borrowed strings.
        unsafe { (self.api.note_set)(self.req, s(name), s(value)) == abi::HOST_OK }
    }
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panic: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panic: {s}")
    } else {
        "panic".to_owned()
    }
}

fn write_err(sink: *mut ErrSink, msg: &str) {
    if !sink.is_null() {
        // SAFETY: the sink comes from the host for this call.
        unsafe { (host_api().err_write)(sink, s(msg)) }
    }
}

#[doc(hidden)]
pub mod __private {
    use super::*;

    /// # Safety
    /// Called by the host through the vtable with valid pointers.
    pub unsafe extern "C" fn init<P: Plugin>(
        host: *const HostApi,
        config: Str,
        err: *mut ErrSink,
        out: *mut *mut c_void,
    ) -> u32 {
        if host.is_null() || out.is_null() {
            return abi::ST_ERROR;
        }
        HOST.store(host as *mut HostApi, Ordering::Release);
        let r = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the host lends the JSON for this call.
            let bytes = unsafe { config.as_bytes() };
            let cfg: P::Config = parse_config(bytes)?;
            P::new(cfg, &Host { api: host_api() })
        }));
        match r {
            Ok(Ok(p)) => {
                // SAFETY: `out` checked non-null above.
                unsafe { *out = Box::into_raw(Box::new(p)) as *mut c_void };
                abi::ST_CONTINUE
            }
            Ok(Err(msg)) => {
                write_err(err, &msg);
                abi::ST_ERROR
            }
            Err(p) => {
                write_err(err, &panic_message(&*p));
                abi::ST_PANIC
            }
        }
    }

    /// # Safety
    /// `inst` came from `init` and is destroyed once.
    pub unsafe extern "C" fn destroy<P: Plugin>(inst: *mut c_void) {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: allocated by `init` as Box<P>.
            drop(unsafe { Box::from_raw(inst as *mut P) });
        }));
    }

    /// # Safety
    /// Called by the host with an instance from `init`.
    pub unsafe extern "C" fn request_begin<P: Plugin>(_inst: *const c_void) -> *mut c_void {
        catch_unwind(|| Box::into_raw(Box::new(P::State::default())) as *mut c_void)
            .unwrap_or(std::ptr::null_mut())
    }

    /// # Safety
    /// `state` came from `request_begin` and is ended once.
    pub unsafe extern "C" fn request_end<P: Plugin>(_inst: *const c_void, state: *mut c_void) {
        if state.is_null() {
            return;
        }
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: allocated by `request_begin` as Box<P::State>.
            drop(unsafe { Box::from_raw(state as *mut P::State) });
        }));
    }

    fn call<P: Plugin>(
        inst: *const c_void,
        state: *mut c_void,
        req: *mut Req,
        err: *mut ErrSink,
        f: impl FnOnce(&P, &mut P::State, &mut Request<'_>) -> Result<u32, String>,
    ) -> u32 {
        if inst.is_null() || state.is_null() || req.is_null() {
            return abi::ST_ERROR;
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the host passes the instance from `init` and the state from
            // `request_begin`; hooks of one request never run concurrently.
            let (p, st) = unsafe { (&*(inst as *const P), &mut *(state as *mut P::State)) };
            let mut rq = Request {
                api: host_api(),
                req,
                _hook: std::marker::PhantomData,
            };
            f(p, st, &mut rq)
        }));
        match r {
            Ok(Ok(code)) => code,
            Ok(Err(msg)) => {
                write_err(err, &msg);
                abi::ST_ERROR
            }
            Err(p) => {
                write_err(err, &panic_message(&*p));
                abi::ST_PANIC
            }
        }
    }

    /// # Safety
    /// Host calling convention of `HookFn`.
    pub unsafe extern "C" fn on_request<P: Plugin>(
        inst: *const c_void,
        state: *mut c_void,
        req: *mut Req,
        err: *mut ErrSink,
    ) -> u32 {
        call::<P>(inst, state, req, err, |p, st, rq| {
            Ok(match p.on_request(st, rq)? {
                Action::Continue => abi::ST_CONTINUE,
                Action::Respond => abi::ST_RESPOND,
            })
        })
    }

    /// # Safety
    /// Host calling convention of `HookFn`.
    pub unsafe extern "C" fn on_response<P: Plugin>(
        inst: *const c_void,
        state: *mut c_void,
        req: *mut Req,
        err: *mut ErrSink,
    ) -> u32 {
        call::<P>(inst, state, req, err, |p, st, rq| {
            p.on_response(st, rq)?;
            Ok(abi::ST_CONTINUE)
        })
    }

    /// # Safety
    /// Host calling convention of `HookFn`.
    pub unsafe extern "C" fn on_log<P: Plugin>(
        inst: *const c_void,
        state: *mut c_void,
        req: *mut Req,
        err: *mut ErrSink,
    ) -> u32 {
        call::<P>(inst, state, req, err, |p, st, rq| {
            p.on_log(st, rq);
            Ok(abi::ST_CONTINUE)
        })
    }

    /// The vtable for `P`, with only the hooks `P::HOOKS` lists.
    pub const fn vtable<P: Plugin>() -> abi::VTable {
        abi::VTable {
            size: std::mem::size_of::<abi::VTable>(),
            init: Some(init::<P>),
            destroy: Some(destroy::<P>),
            request_begin: Some(request_begin::<P>),
            request_end: Some(request_end::<P>),
            on_request: if P::HOOKS & HOOK_REQUEST != 0 {
                Some(on_request::<P>)
            } else {
                None
            },
            on_response: if P::HOOKS & HOOK_RESPONSE != 0 {
                Some(on_response::<P>)
            } else {
                None
            },
            on_log: if P::HOOKS & HOOK_LOG != 0 {
                Some(on_log::<P>)
            } else {
                None
            },
        }
    }

    /// The descriptor for `P`; `unwind` is `cfg!(panic = "unwind")` evaluated in
    /// the plugin crate.
    pub const fn descriptor<P: Plugin>(
        vtable: &'static abi::VTable,
        unwind: bool,
        build_info: &'static str,
    ) -> abi::Descriptor {
        abi::Descriptor {
            header: abi::DescriptorHeader {
                magic: abi::MAGIC,
                abi_major: abi::ABI_MAJOR,
                abi_minor: abi::ABI_MINOR,
                descriptor_size: std::mem::size_of::<abi::Descriptor>() as u32,
            },
            abi_fingerprint: abi::ABI_FINGERPRINT,
            flags: (if unwind { abi::FLAG_PANIC_UNWIND } else { 0 })
                | (if P::MAY_BLOCK { abi::FLAG_MAY_BLOCK } else { 0 }),
            name: Str::new(P::NAME.as_bytes()),
            version: Str::new(P::VERSION.as_bytes()),
            build_info: Str::new(build_info.as_bytes()),
            vtable,
        }
    }
}

/// Exports a [`Plugin`] type as the library's Tessera module: defines the static
/// descriptor symbol `TESSERA_PLUGIN_DESCRIPTOR` and the vtable. Use it once per
/// `cdylib`.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        static __TESSERA_VTABLE: $crate::abi::VTable = $crate::__private::vtable::<$plugin>();
        /// The Tessera plugin descriptor (read by the server's loader).
        #[allow(unsafe_code)]
        #[no_mangle]
        pub static TESSERA_PLUGIN_DESCRIPTOR: $crate::abi::Descriptor =
            $crate::__private::descriptor::<$plugin>(
                &__TESSERA_VTABLE,
                cfg!(panic = "unwind"),
                concat!(
                    "sdk ",
                    env!("CARGO_PKG_VERSION"),
                    ", ",
                    env!("CARGO_PKG_NAME")
                ),
            );
    };
}

/// The module's table, as the host passed it (JSON), into the plugin's typed
/// configuration. Errors name the key inside the table (`header: invalid type:
/// integer `5`, expected a string`), never a line and column of the host's
/// internal JSON text: the host adds the file, vhost and table.
#[doc(hidden)]
pub fn parse_config<C: serde::de::DeserializeOwned>(json: &[u8]) -> Result<C, String> {
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| format!("the host passed invalid JSON: {e}"))?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            format!("configuration: {}", e.inner())
        } else {
            format!("configuration key `{path}`: {}", e.inner())
        }
    })
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Cfg {
        header: String,
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn config_errors_name_the_key_not_a_json_position() {
        let e = super::parse_config::<Cfg>(br#"{"header": 5}"#).unwrap_err();
        assert!(
            e.starts_with("configuration key `header`: invalid type"),
            "{e}"
        );
        let e = super::parse_config::<Cfg>(br#"{"header": "x", "inner": {"n": "a"}}"#).unwrap_err();
        assert!(e.starts_with("configuration key `inner.n`"), "{e}");
        let e = super::parse_config::<Cfg>(br#"{"header": "x", "bogus": 1}"#).unwrap_err();
        assert!(
            e.contains("unknown field `bogus`") && !e.contains("line"),
            "{e}"
        );
        assert!(super::parse_config::<Cfg>(br#"{"header": "x"}"#).is_ok());
    }
}

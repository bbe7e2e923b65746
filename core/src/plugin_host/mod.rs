//! Loading run-time plugins (`cdylib`s built with `tessera-plugin-sdk`) and
//! adapting them to [`Module`], so that they stand in the pipeline like built-in
//! modules.
//!
//! Loading (each step refuses with a [`PluginError`] naming the library path):
//! 1. the file must exist; it is opened once per process with `RTLD_NOW` (so
//!    unresolved symbols fail here) and never closed while the server runs;
//! 2. the symbol `TESSERA_PLUGIN_DESCRIPTOR` must exist;
//! 3. its frozen header is read before anything else: magic, ABI major (must be
//!    equal), ABI minor (must not be newer than the host), descriptor size;
//! 4. then the ABI fingerprint, the flags (`panic = "unwind"` required), the
//!    name, and the vtable size (hooks outside it are treated as absent).
//!
//! No plugin function runs before all of this passed; then `init` gets the
//! module's table as JSON, once per vhost or rule table that uses it.
//!
//! At run time every hook's return code is checked as an integer. A hook that
//! fails or panics (the SDK catches the panic) answers that request with 500 and
//! logs vhost, module and hook; the plugin's hooks are not called again for that
//! request, and `request_end` still runs exactly once.

#![allow(unsafe_code)] // the plugin boundary: FFI calls and raw pointers

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use tessera_plugin_abi as abi;
use tessera_plugin_abi::{Req, Str};

use crate::context::{Ctx, LogRecord};
use crate::module::{BuildContext, Hooks, Module, Outcome};
use crate::registry::{BuildError, ModuleFactory};
use crate::response::error_response;

mod host_api;
use host_api::{sink_ptr, HostReq, Sink, HOST_API};

/// Why a library was refused. Each message names the library path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The file does not exist.
    #[error("{0}: no such file")]
    NotFound(PathBuf),
    /// `dlopen` failed (not a shared object, wrong architecture, missing
    /// dependency, unresolved symbol): the dlerror text.
    #[error("{path}: not a loadable library: {reason}")]
    Open {
        /// Library path.
        path: PathBuf,
        /// The dlerror text.
        reason: String,
    },
    /// No `TESSERA_PLUGIN_DESCRIPTOR` symbol.
    #[error("{0}: no symbol TESSERA_PLUGIN_DESCRIPTOR: not a Tessera plugin")]
    NoSymbol(PathBuf),
    /// The descriptor does not start with the magic bytes.
    #[error("{0}: wrong magic in the plugin descriptor: not a Tessera plugin")]
    BadMagic(PathBuf),
    /// Another ABI major version.
    #[error("{path}: built for plugin ABI {plugin}.x, this server speaks ABI {host}.x")]
    AbiMajor {
        /// Library path.
        path: PathBuf,
        /// The plugin's major.
        plugin: u16,
        /// The host's major.
        host: u16,
    },
    /// The plugin needs a newer host (its minor is higher).
    #[error("{path}: built for plugin ABI {major}.{plugin}, newer than this server's {major}.{host}: upgrade the server")]
    AbiTooNew {
        /// Library path.
        path: PathBuf,
        /// The common major.
        major: u16,
        /// The plugin's minor.
        plugin: u16,
        /// The host's minor.
        host: u16,
    },
    /// The ABI fingerprint differs (0.x: any change of the ABI crate).
    #[error("{path}: ABI fingerprint {plugin:016x} differs from this server's {host:016x} (plugin built with {build_info}): rebuild it against this server's tessera-plugin-sdk")]
    Fingerprint {
        /// Library path.
        path: PathBuf,
        /// The plugin's fingerprint.
        plugin: u64,
        /// The host's fingerprint.
        host: u64,
        /// The plugin's build information.
        build_info: String,
    },
    /// Descriptor or vtable too short, null pointers, a bad name.
    #[error("{path}: malformed plugin descriptor: {what}")]
    Malformed {
        /// Library path.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Built with `panic = "abort"`: its panics cannot be contained.
    #[error("{0}: built with panic = \"abort\", so a panic would abort the server: build it with panic = \"unwind\"")]
    PanicAbort(PathBuf),
    /// The library file changed since this process loaded it (a library is
    /// never reloaded in a running server).
    #[error("{0}: the file changed on disk since the server loaded it; a plugin library cannot be replaced in a running server: restart it")]
    ChangedRestartRequired(PathBuf),
    /// The configured name differs from the library's.
    #[error("{path}: the library's module is \"{found}\", not \"{configured}\"")]
    NameMismatch {
        /// Library path.
        path: PathBuf,
        /// Name in the configuration.
        configured: String,
        /// Name in the descriptor.
        found: String,
    },
}

#[derive(Clone, Copy)]
struct Hookset {
    init: abi::InitFn,
    destroy: abi::DestroyFn,
    begin: Option<abi::BeginFn>,
    end: Option<abi::EndFn>,
    on_request: Option<abi::HookFn>,
    on_response: Option<abi::HookFn>,
    on_log: Option<abi::HookFn>,
}

/// An opened, checked plugin library. Never unloaded.
pub struct PluginLibrary {
    /// Canonical path.
    pub path: PathBuf,
    /// Module name from the descriptor.
    pub name: String,
    /// Plugin version from the descriptor.
    pub version: String,
    /// Build information from the descriptor.
    pub build_info: String,
    /// The plugin declared blocking hooks (`FLAG_MAY_BLOCK`).
    pub may_block: bool,
    /// (device, inode, size, mtime ns) of the file when it was loaded.
    identity: (u64, u64, u64, i128),
    hooks: Hookset,
    _lib: libloading::os::unix::Library,
}

fn libraries() -> &'static Mutex<HashMap<PathBuf, Arc<PluginLibrary>>> {
    static LIBS: OnceLock<Mutex<HashMap<PathBuf, Arc<PluginLibrary>>>> = OnceLock::new();
    LIBS.get_or_init(Default::default)
}

/// How many distinct libraries this process has opened (each exactly once).
pub fn loaded_count() -> usize {
    libraries().lock().map(|m| m.len()).unwrap_or(0)
}

/// Opens and checks the library at `path` (once per process; later calls return
/// the same library).
///
/// # Errors
/// Every refusal listed in [`PluginError`].
pub fn load(path: &Path) -> Result<Arc<PluginLibrary>, PluginError> {
    let canonical =
        std::fs::canonicalize(path).map_err(|_| PluginError::NotFound(path.to_owned()))?;
    if !canonical.is_file() {
        return Err(PluginError::NotFound(path.to_owned()));
    }
    let id = file_identity(&canonical);
    let mut libs = libraries().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = libs.get(&canonical) {
        if l.identity != id {
            return Err(PluginError::ChangedRestartRequired(canonical));
        }
        return Ok(l.clone());
    }
    let mut lib = open_checked(&canonical)?;
    lib.identity = id;
    let lib = Arc::new(lib);
    libs.insert(canonical, lib.clone());
    Ok(lib)
}

fn file_identity(p: &Path) -> (u64, u64, u64, i128) {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).map_or((0, 0, 0, 0), |m| {
        (
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        )
    })
}

fn str_field(s: Str, what: &str, path: &Path) -> Result<String, PluginError> {
    if s.len > 4096 || (s.len > 0 && s.ptr.is_null()) {
        return Err(PluginError::Malformed {
            path: path.to_owned(),
            what: format!("{what} is not a valid string"),
        });
    }
    // SAFETY: checked non-null above; the descriptor's strings are static data
    // of the library, which is never unloaded.
    let bytes = unsafe { s.as_bytes() };
    String::from_utf8(bytes.to_vec()).map_err(|_| PluginError::Malformed {
        path: path.to_owned(),
        what: format!("{what} is not UTF-8"),
    })
}

fn open_checked(path: &Path) -> Result<PluginLibrary, PluginError> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    let p = path.to_owned();
    let malformed = |what: &str| PluginError::Malformed {
        path: p.clone(),
        what: what.to_owned(),
    };
    // SAFETY: opening a library runs its ELF constructors (Rust emits none).
    // This is the one piece of plugin code that runs before the checks.
    let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
        PluginError::Open {
            path: p.clone(),
            reason: e.to_string().replace('\n', " "),
        }
    })?;
    // SAFETY: we only take the symbol's address; nothing is called.
    let sym = unsafe { lib.get::<*const u8>(abi::DESCRIPTOR_SYMBOL) }
        .map_err(|_| PluginError::NoSymbol(p.clone()))?;
    let addr: *const u8 = *sym;
    if addr.is_null() {
        return Err(PluginError::NoSymbol(p.clone()));
    }
    // SAFETY: the symbol is at least as large as the frozen header in every
    // version of the ABI; read unaligned, copy out.
    let header = unsafe { std::ptr::read_unaligned(addr as *const abi::DescriptorHeader) };
    if header.magic != abi::MAGIC {
        return Err(PluginError::BadMagic(p.clone()));
    }
    if header.abi_major != abi::ABI_MAJOR {
        return Err(PluginError::AbiMajor {
            path: p.clone(),
            plugin: header.abi_major,
            host: abi::ABI_MAJOR,
        });
    }
    if header.abi_minor > abi::ABI_MINOR {
        return Err(PluginError::AbiTooNew {
            path: p.clone(),
            major: abi::ABI_MAJOR,
            plugin: header.abi_minor,
            host: abi::ABI_MINOR,
        });
    }
    if (header.descriptor_size as usize) < std::mem::size_of::<abi::Descriptor>() {
        return Err(malformed(&format!(
            "descriptor is {} bytes, at least {} expected",
            header.descriptor_size,
            std::mem::size_of::<abi::Descriptor>()
        )));
    }
    // SAFETY: the header says the descriptor is at least this large.
    let desc = unsafe { std::ptr::read_unaligned(addr as *const abi::Descriptor) };
    let build_info = str_field(desc.build_info, "build_info", path)?;
    if desc.abi_fingerprint != abi::ABI_FINGERPRINT {
        return Err(PluginError::Fingerprint {
            path: p.clone(),
            plugin: desc.abi_fingerprint,
            host: abi::ABI_FINGERPRINT,
            build_info,
        });
    }
    if desc.flags & abi::FLAG_PANIC_UNWIND == 0 {
        return Err(PluginError::PanicAbort(p.clone()));
    }
    let name = str_field(desc.name, "name", path)?;
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(malformed(&format!(
            "name \"{name}\" is not kebab-case ([a-z0-9-]+)"
        )));
    }
    let version = str_field(desc.version, "version", path)?;
    if desc.vtable.is_null() {
        return Err(malformed("null vtable"));
    }
    // SAFETY: non-null; the first field of every vtable version is its size.
    let vt_size = unsafe { std::ptr::read_unaligned(desc.vtable as *const usize) };
    if vt_size < abi::MIN_VTABLE_SIZE {
        return Err(malformed(&format!(
            "vtable is {vt_size} bytes, at least {} expected",
            abi::MIN_VTABLE_SIZE
        )));
    }
    // Copy as much of the plugin's vtable as it has; the rest stays None.
    let mut vt = abi::VTable {
        size: 0,
        init: None,
        destroy: None,
        request_begin: None,
        request_end: None,
        on_request: None,
        on_response: None,
        on_log: None,
    };
    let n = vt_size.min(std::mem::size_of::<abi::VTable>());
    // SAFETY: the plugin's vtable has `vt_size` bytes; we copy at most that many
    // into a zero-initialised (all-None) table of the host's layout. Option of a
    // function pointer is nullable, so any copied bit pattern from a valid table
    // is a valid value.
    unsafe {
        std::ptr::copy_nonoverlapping(
            desc.vtable as *const u8,
            &mut vt as *mut abi::VTable as *mut u8,
            n,
        );
    }
    let (Some(init), Some(destroy)) = (vt.init, vt.destroy) else {
        return Err(malformed("init or destroy missing"));
    };
    if vt.request_begin.is_some() != vt.request_end.is_some() {
        return Err(malformed(
            "request_begin and request_end must come together",
        ));
    }
    Ok(PluginLibrary {
        path: p,
        name,
        version,
        build_info,
        may_block: desc.flags & abi::FLAG_MAY_BLOCK != 0,
        identity: (0, 0, 0, 0),
        hooks: Hookset {
            init,
            destroy,
            begin: vt.request_begin,
            end: vt.request_end,
            on_request: vt.on_request,
            on_response: vt.on_response,
            on_log: vt.on_log,
        },
        _lib: lib,
    })
}

/// Builds module instances of one plugin library (registered in the
/// [`crate::Registry`] under the library's name).
pub struct PluginFactory {
    lib: Arc<PluginLibrary>,
}

impl PluginFactory {
    /// A factory for `lib`.
    pub fn new(lib: Arc<PluginLibrary>) -> Self {
        PluginFactory { lib }
    }
}

impl ModuleFactory for PluginFactory {
    fn name(&self) -> &str {
        &self.lib.name
    }

    fn build(
        &self,
        table: &serde_json::Value,
        cx: &BuildContext<'_>,
    ) -> Result<Arc<dyn Module>, BuildError> {
        let json = if table.is_null() {
            "{}".to_owned()
        } else {
            table.to_string()
        };
        let mut sink = Sink(String::new());
        let mut inst: *mut c_void = std::ptr::null_mut();
        let path = self.lib.path.display();
        // SAFETY: the library passed every check; init gets the static host
        // API, a JSON string borrowed for the call, our sink and an out pointer.
        let code = unsafe {
            (self.lib.hooks.init)(
                &HOST_API,
                Str::new(json.as_bytes()),
                sink_ptr(&mut sink),
                &mut inst,
            )
        };
        let fail = |reason: String| BuildError {
            key: String::new(),
            reason,
        };
        match code {
            abi::ST_CONTINUE if !inst.is_null() => {}
            abi::ST_CONTINUE => return Err(fail(format!("{path}: init returned no instance"))),
            abi::ST_ERROR => return Err(fail(format!("{path}: init failed: {}", sink.0))),
            abi::ST_PANIC => return Err(fail(format!("{path}: init panicked: {}", sink.0))),
            other => return Err(fail(format!("{path}: init returned unknown code {other}"))),
        }
        let h = &self.lib.hooks;
        let mut hooks = Hooks::NONE;
        if h.on_request.is_some() {
            hooks = hooks | Hooks::REQUEST;
        }
        if h.on_response.is_some() {
            hooks = hooks | Hooks::RESPONSE;
        }
        if h.on_log.is_some() {
            hooks = hooks | Hooks::LOG;
        }
        if self.lib.may_block {
            hooks = hooks | Hooks::BLOCKING;
        }
        Ok(Arc::new(PluginModule {
            lib: self.lib.clone(),
            inst,
            hooks,
            vhost: cx.vhost.label(),
        }))
    }
}

/// One plugin instance (per vhost or rule table), adapted to [`Module`].
pub struct PluginModule {
    lib: Arc<PluginLibrary>,
    inst: *mut c_void,
    hooks: Hooks,
    vhost: String,
}

// SAFETY: the SDK requires plugin types to be Send + Sync; the instance pointer
// is only passed back to the plugin.
unsafe impl Send for PluginModule {}
// SAFETY: as above.
unsafe impl Sync for PluginModule {}

impl Drop for PluginModule {
    fn drop(&mut self) {
        // SAFETY: the instance came from init and is destroyed exactly once.
        unsafe { (self.lib.hooks.destroy)(self.inst) }
    }
}

/// Per-request plugin state; `request_end` runs when it is dropped (after the
/// log phase, or when the request ends without one).
struct RequestState {
    lib: Arc<PluginLibrary>,
    inst: *const c_void,
    state: *mut c_void,
    failed: bool,
}

impl Drop for RequestState {
    fn drop(&mut self) {
        if let Some(end) = self.lib.hooks.end {
            // SAFETY: state came from request_begin of this instance; ended once.
            unsafe { end(self.inst, self.state) }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum HookName {
    Request,
    Response,
    Log,
}

impl HookName {
    fn as_str(self) -> &'static str {
        match self {
            HookName::Request => "request",
            HookName::Response => "response",
            HookName::Log => "log",
        }
    }
}

impl PluginModule {
    fn key(&self) -> usize {
        self as *const PluginModule as usize
    }

    /// The state pointer for this request (begun on first use), or `None` when
    /// an earlier hook of this request failed.
    fn state(&self, cx: &mut Ctx<'_>) -> Option<*mut c_void> {
        if let Some(s) = cx.ext.get::<RequestState>(self.key()) {
            return (!s.failed).then_some(s.state);
        }
        let state = match self.lib.hooks.begin {
            // SAFETY: instance from init.
            Some(begin) => unsafe { begin(self.inst) },
            None => std::ptr::null_mut(),
        };
        cx.ext.insert(
            self.key(),
            Box::new(RequestState {
                lib: self.lib.clone(),
                inst: self.inst,
                state,
                failed: false,
            }),
        );
        Some(state)
    }

    fn mark_failed(&self, cx: &mut Ctx<'_>) {
        if let Some(s) = cx.ext.get_mut::<RequestState>(self.key()) {
            s.failed = true;
        }
    }

    fn report(&self, hook: HookName, code: u32, msg: &str) {
        let what = match code {
            abi::ST_ERROR => "failed",
            abi::ST_PANIC => "panicked",
            _ => "returned an unknown code",
        };
        tracing::error!(
            vhost = %self.vhost,
            module = %self.lib.name,
            hook = hook.as_str(),
            code,
            "plugin {what}: {msg}"
        );
    }

    fn call(&self, f: abi::HookFn, state: *mut c_void, hr: &mut HostReq<'_, '_>) -> (u32, String) {
        let mut sink = Sink(String::new());
        // SAFETY: instance from init, state from request_begin, the request
        // handle and sink live for this call only.
        let code = unsafe {
            f(
                self.inst,
                state,
                hr as *mut HostReq as *mut Req,
                sink_ptr(&mut sink),
            )
        };
        (code, sink.0)
    }
}

impl Module for PluginModule {
    fn hooks(&self) -> Hooks {
        self.hooks
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        let Some(f) = self.lib.hooks.on_request else {
            return Outcome::Continue;
        };
        let Some(state) = self.state(cx) else {
            return Outcome::Continue;
        };
        let mut staged = None;
        let (code, msg) = {
            let mut hr = HostReq::live(cx, None, Some(&mut staged));
            self.call(f, state, &mut hr)
        };
        match code {
            abi::ST_CONTINUE => Outcome::Continue,
            abi::ST_RESPOND => match staged {
                Some(r) => Outcome::Respond(r),
                None => {
                    self.report(
                        HookName::Request,
                        code,
                        "answered without staging a response",
                    );
                    self.mark_failed(cx);
                    Outcome::Respond(error_response(StatusCode::INTERNAL_SERVER_ERROR))
                }
            },
            _ => {
                self.report(HookName::Request, code, &msg);
                self.mark_failed(cx);
                Outcome::Respond(error_response(StatusCode::INTERNAL_SERVER_ERROR))
            }
        }
    }

    fn on_response(&self, cx: &mut Ctx<'_>, res: &mut HttpResponse) {
        let Some(f) = self.lib.hooks.on_response else {
            return;
        };
        let Some(state) = self.state(cx) else {
            return;
        };
        let (code, msg) = {
            let mut hr = HostReq::live(cx, Some(res), None);
            self.call(f, state, &mut hr)
        };
        if code != abi::ST_CONTINUE {
            self.report(HookName::Response, code, &msg);
            self.mark_failed(cx);
            *res = error_response(StatusCode::INTERNAL_SERVER_ERROR);
        }
    }

    fn on_log(&self, rec: &LogRecord<'_>) {
        let Some(f) = self.lib.hooks.on_log else {
            return;
        };
        let existing = rec.ext.get::<RequestState>(self.key());
        if existing.is_some_and(|s| s.failed) {
            return;
        }
        // A plugin with only a log hook gets its state begun and ended here.
        let temp = match existing {
            Some(_) => None,
            None => Some(RequestState {
                lib: self.lib.clone(),
                inst: self.inst,
                state: match self.lib.hooks.begin {
                    // SAFETY: instance from init.
                    Some(begin) => unsafe { begin(self.inst) },
                    None => std::ptr::null_mut(),
                },
                failed: false,
            }),
        };
        let state = existing
            .or(temp.as_ref())
            .map_or(std::ptr::null_mut(), |s| s.state);
        let mut hr = HostReq::log(rec);
        let (code, msg) = self.call(f, state, &mut hr);
        if code != abi::ST_CONTINUE {
            self.report(HookName::Log, code, &msg);
        }
        drop(temp);
    }
}

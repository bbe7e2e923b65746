//! The `Module` trait: the phases a module can join, and the uniform declaration
//! (`ModuleDecl`) every built-in module gives.
//!
//! Phases follow nginx's phase handlers and pingora's `HttpModule`: each hook has a
//! no-op default, and a module states which hooks it overrides in [`Hooks`], so the
//! pipeline never calls a hook a module does not implement.

use actix_web::HttpResponse;
use serde::de::DeserializeOwned;

use crate::context::{Ctx, LogRecord};
use crate::vhost::VhostInfo;

/// The future of an asynchronous content handler ([`Module::content_async`]).
pub type ContentFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = HttpResponse> + 'a>>;

/// What a request-phase hook decided (nginx `NGX_DECLINED` / `NGX_OK`).
pub enum Outcome {
    /// Pass the request on to the next module.
    Continue,
    /// Answer now with this response; later request and content hooks are skipped,
    /// response and log hooks still run.
    Respond(HttpResponse),
}

/// The set of phases a module joins, as bit flags.
///
/// The pipeline builds one list per phase from these flags when the configuration
/// is loaded, so a hook a module does not implement costs nothing per request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hooks(u8);

impl Hooks {
    /// No hooks.
    pub const NONE: Hooks = Hooks(0);
    /// [`Module::on_request`]: may answer (an access check, a redirect) or pass on.
    pub const REQUEST: Hooks = Hooks(1);
    /// [`Module::content`]: the content handler; the first that answers wins.
    pub const CONTENT: Hooks = Hooks(2);
    /// [`Module::on_response`]: may change status and headers before they are sent.
    pub const RESPONSE: Hooks = Hooks(4);
    /// [`Module::on_log`]: after the body was sent or the client went away.
    pub const LOG: Hooks = Hooks(8);
    /// Not a phase: the module's hooks may block, so requests of vhosts that
    /// use it are handled on the blocking thread pool, off the workers.
    pub const BLOCKING: Hooks = Hooks(16);
    /// [`Module::content_async`]: a content handler that may answer later
    /// (an upstream). Requests of vhosts that use one run as a future on the
    /// worker; the others stay synchronous, with no allocation for it.
    pub const ASYNC: Hooks = Hooks(32);

    /// True when every flag in `other` is set in `self`.
    pub const fn contains(self, other: Hooks) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Hooks {
    type Output = Hooks;
    fn bitor(self, rhs: Hooks) -> Hooks {
        Hooks(self.0 | rhs.0)
    }
}

/// A configured module instance, shared by all workers (`Send + Sync`).
///
/// One instance exists per vhost or rule table that configures the module; it is
/// built once from that table and never changes while the configuration is live.
pub trait Module: Send + Sync + 'static {
    /// The phases this instance joins. Hooks outside this set are never called.
    fn hooks(&self) -> Hooks;

    /// Request phase: runs before the content handler, in pipeline order.
    fn on_request(&self, _cx: &mut Ctx<'_>) -> Outcome {
        Outcome::Continue
    }

    /// Content phase: return `Some` to answer the request; `None` passes to the next
    /// content handler. When none answers the request gets 404.
    fn content(&self, _cx: &mut Ctx<'_>) -> Option<HttpResponse> {
        None
    }

    /// Content phase, asynchronous (with [`Hooks::ASYNC`]): `Some(future)`
    /// answers the request when the future completes; `None` passes to the next
    /// content handler. Runs in pipeline order with [`Module::content`]. The
    /// future runs on the worker thread and must not block it; it may take the
    /// request body with [`Ctx::take_body`]. The response phase runs after it.
    fn content_async<'a>(&'a self, _cx: &'a mut Ctx<'_>) -> Option<ContentFuture<'a>> {
        None
    }

    /// Response phase: may change the status and headers of any response, the
    /// core's own error responses included (nginx header filters).
    fn on_response(&self, _cx: &mut Ctx<'_>, _res: &mut HttpResponse) {}

    /// Log phase: runs once per request after the response body was sent or the
    /// client went away (lighttpd `handle_request_done`, nginx log phase).
    fn on_log(&self, _rec: &LogRecord<'_>) {}

    /// True when this instance's content handler answers with the document
    /// root's files as they are (static-file). Default false.
    fn sends_files(&self) -> bool {
        false
    }

    /// True when this instance's content handler runs files of the document
    /// root (CGI scripts, `.php` by extension). Such a module must come
    /// before one that [`Module::sends_files`], or the scripts' text is sent:
    /// the configuration refuses it set only in rules behind one. Default
    /// false.
    fn runs_files(&self) -> bool {
        false
    }

    /// `tessera explain` only, never per request: what this instance does
    /// with the request, in a few words, without doing it. For an
    /// asynchronous content handler ([`Hooks::ASYNC`]) it is called instead
    /// of [`Module::content_async`], so that an explanation never reaches a
    /// back end: `Some` says which back end would get the request (`"upstream
    /// app, server 10.0.0.1:80, GET /users"`), `None` that the handler would
    /// pass it on, exactly as `content_async` would. For any other module it
    /// is called after its hook answered, to name what answered (the file
    /// static-file served). Default `None`.
    fn explain(&self, _cx: &Ctx<'_>) -> Option<String> {
        None
    }

    /// Called once when the server stops, after all requests finished: flush
    /// buffers. Must not block for long (it runs on the main thread).
    fn on_shutdown(&self) {}

    /// Called on SIGUSR1: reopen log files (the logrotate convention of nginx
    /// and lighttpd). Runs on the main thread; must not block for long.
    fn on_reopen(&self) {}
}

/// What a module's `build` gets besides its own configuration table.
pub struct BuildContext<'a> {
    /// The vhost being built: names and document root.
    pub vhost: &'a VhostInfo,
    /// Directory of the configuration file; relative paths in module options
    /// (log files, error pages) are resolved against it.
    pub config_dir: &'a std::path::Path,
    /// Shared, per-configuration state a module keeps across its instances
    /// (for example one log writer per file shared by several vhosts).
    pub shared: &'a crate::registry::SharedState,
    /// For a table inside a `[[vhost.rule]]`: that rule's match, so that a module
    /// can reuse its regular expression's captures (`%1` in lighttpd's
    /// `url.redirect` and `url.rewrite`). `None` for vhost tables.
    pub rule_match: Option<&'a crate::rule::Matcher>,
    /// The configuration's `[[upstream]]` declarations, for modules that talk
    /// to back ends (`upstream = "name"`).
    pub upstreams: &'a crate::upstream::Upstreams,
}

/// The uniform declaration of a built-in module, in the order nginx's
/// `ngx_module_t` and lighttpd's `plugin` give it: name, configuration, build.
///
/// ```
/// use tessera_core::module::{BuildContext, Hooks, Module, ModuleDecl};
/// #[derive(serde::Deserialize, Default)]
/// #[serde(deny_unknown_fields)]
/// struct NopConfig {}
/// struct Nop;
/// impl Module for Nop { fn hooks(&self) -> Hooks { Hooks::NONE } }
/// impl ModuleDecl for Nop {
///     const NAME: &'static str = "nop";
///     type Config = NopConfig;
///     fn build(_: NopConfig, _: &BuildContext<'_>) -> Result<Self, String> { Ok(Nop) }
/// }
/// let mut reg = tessera_core::Registry::new();
/// reg.register::<Nop>().unwrap();
/// assert!(reg.contains("nop"));
/// ```
pub trait ModuleDecl: Module + Sized {
    /// The module's name in `modules = [...]` lists, which is also the name of its
    /// table (`[vhost.<name>]`). Kebab-case, for example `static-file`.
    const NAME: &'static str;
    /// The module's options, deserialized from its table with unknown keys
    /// rejected (`#[serde(deny_unknown_fields)]`). A module named in `modules`
    /// without a table gets `Config::default()`.
    type Config: DeserializeOwned + Default;
    /// Validates the options and builds the instance. An `Err` is a one-line reason
    /// that the core prefixes with file, vhost and key.
    fn build(cfg: Self::Config, cx: &BuildContext<'_>) -> Result<Self, String>;
}

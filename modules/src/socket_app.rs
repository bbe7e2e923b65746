//! What `scgi` and `uwsgi` share: an application behind an `[[upstream]]`
//! that reads one request per connection (a header block of CGI variables
//! in the protocol's encoding, then the body) and answers with CGI output or
//! an HTTP status line and fields, ending the answer by closing the
//! connection. Each protocol gives only its encoding ([`Protocol`]); the
//! script routing, variables, body, head and X-Sendfile are
//! [`crate::gateway`]'s, the reading of the answer `eof_output.rs`'s.

use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::module::ContentFuture;
use tessera_core::response::error_response;
use tessera_core::upstream::pool::PoolOwner;
use tessera_core::upstream::Upstream;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

use crate::eof_output;
use crate::gateway::config::{BackendConfig, Kind};
use crate::gateway::{self, Head, Input, Script, ScriptMap, XSendfile};

/// A wire protocol of an application that answers until EOF.
pub trait Protocol: Send + Sync + 'static {
    /// The module's name (and its table's).
    const NAME: &'static str;
    /// The module, for [`BackendConfig::build`]: its defaults and its own
    /// keys.
    const KIND: Kind;

    /// The request's header block: the CGI variables of [`Vars`] in this
    /// protocol's encoding.
    ///
    /// # Errors
    /// Why the variables cannot be encoded (too long for the protocol), for
    /// the error log; the client gets 431.
    fn encode(vars: &Vars<'_, '_>) -> Result<Bytes, String>;
}

/// The variables of one request, for [`Protocol::encode`].
pub struct Vars<'a, 'c> {
    cx: &'a Ctx<'c>,
    script: &'a Script,
    /// The body's length, bytes; `None`: no body.
    pub length: Option<u64>,
    params: &'a [(String, String)],
    /// The configured `modifier1` (0 when not set).
    pub modifier1: u8,
}

impl Vars<'_, '_> {
    /// Writes every variable with `put(name, value)`
    /// ([`gateway::environment`], then `params`).
    pub fn write(&self, put: &mut dyn FnMut(&[u8], &[u8])) {
        gateway::environment(self.cx, self.script, self.length, self.params, put);
    }
}

/// A configured `scgi` or `uwsgi` instance.
pub struct SocketApp<P> {
    upstream: Arc<Upstream>,
    scripts: ScriptMap,
    params: Vec<(String, String)>,
    sendfile: XSendfile,
    modifier1: u8,
    /// Keeps the configuration's per-worker pools, which count this
    /// module's connections against `max-connections`.
    pools: PoolOwner,
    protocol: PhantomData<P>,
}

impl<P: Protocol> ModuleDecl for SocketApp<P> {
    const NAME: &'static str = P::NAME;
    type Config = BackendConfig;

    fn build(cfg: BackendConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        let b = cfg.build(P::KIND, cx)?;
        Ok(SocketApp {
            upstream: b.upstream,
            scripts: b.scripts,
            params: b.params,
            sendfile: b.sendfile,
            modifier1: b.modifier1,
            pools: cx.upstreams.pool_owner().clone(),
            protocol: PhantomData,
        })
    }
}

impl<P: Protocol> Module for SocketApp<P> {
    fn hooks(&self) -> Hooks {
        Hooks::ASYNC
    }

    fn runs_files(&self) -> bool {
        self.scripts.runs_files()
    }

    fn content_async<'a>(&'a self, cx: &'a mut Ctx<'_>) -> Option<ContentFuture<'a>> {
        let script = self.scripts.resolve_request(cx)?;
        if self.scripts.declines(&script) {
            return None;
        }
        Some(Box::pin(self.run(cx, script)))
    }

    /// The script and the upstream server it would go to, without calling it.
    fn explain(&self, cx: &Ctx<'_>) -> Option<String> {
        self.scripts.explain(cx, || {
            format!(
                "{} {}",
                P::NAME,
                self.upstream.describe(cx.req.peer_addr().map(|a| a.ip()))
            )
        })
    }
}

impl<P: Protocol> SocketApp<P> {
    async fn run(&self, cx: &mut Ctx<'_>, script: Script) -> HttpResponse {
        if self.scripts.missing(&script) {
            return error_response(StatusCode::NOT_FOUND);
        }
        let input = match Input::take(cx).await {
            Ok(i) => i,
            Err(r) => return r,
        };
        let vars = Vars {
            cx,
            script: &script,
            length: input.length(),
            params: &self.params,
            modifier1: self.modifier1,
        };
        let request = match P::encode(&vars) {
            Ok(r) => r,
            Err(why) => {
                tracing::error!(upstream = %self.upstream.name, "{}: {why}", P::NAME);
                return error_response(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
            }
        };
        let client = cx.req.peer_addr().map(|p| p.ip());
        let (head, mut out) = match eof_output::exchange(
            &self.upstream,
            &self.pools,
            client,
            request,
            input,
            P::NAME,
        )
        .await
        {
            Ok(r) => r,
            Err(r) => return r,
        };
        let declared = match eof_output::declared_length(&head) {
            Ok(d) => d,
            Err(why) => {
                tracing::error!(upstream = %self.upstream.name, "{}: {why}", P::NAME);
                return error_response(StatusCode::BAD_GATEWAY);
            }
        };
        match Head::parse(&head) {
            Ok(head) => {
                if let Some(n) =
                    declared.filter(|_| gateway::body_follows(cx, &head, &self.sendfile))
                {
                    out.expect(n);
                }
                gateway::respond(cx, head, gateway::streamed(out), &self.sendfile).into_response()
            }
            Err(why) => {
                tracing::error!(upstream = %self.upstream.name, "{}: {why}", P::NAME);
                error_response(StatusCode::BAD_GATEWAY)
            }
        }
    }
}

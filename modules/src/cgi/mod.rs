//! `cgi`: CGI scripts, one process per request (lighttpd mod_cgi
//! `cgi.assign`, Cherokee's `cgi` handler, Apache mod_cgi; RFC 3875).
//!
//! ```toml
//! [[vhost.rule]]
//! match = { path-prefix = "/cgi-bin/" }
//! [vhost.rule.cgi]
//! assign = { ".pl" = "/usr/bin/perl", ".cgi" = "" }
//! timeout = 30
//! ```
//!
//! An asynchronous content handler for paths whose script segment ends
//! with an `assign` extension (other paths pass on), or, with
//! `script-name`, for every path (the script is that file).
//!
//! - **The script** is resolved by [`crate::gateway::ScriptMap`] as for
//!   `fastcgi`: never split at a segment without an extension, so
//!   `/uploads/evil.jpg/x.cgi` never runs `evil.jpg`. A missing script is
//!   404 and nothing is started.
//! - **Running it**: with an interpreter (`".pl" = "/usr/bin/perl"`) as
//!   `interpreter script`; with `""` the file itself, which must have an
//!   execute bit: otherwise 403 (the file exists and may not run; its source
//!   is never sent), decided before anything is spawned. A spawn that fails
//!   (a missing interpreter, a file the kernel cannot execute) is 500 and
//!   logged. The working directory is the script's (lighttpd, Apache), the
//!   process runs in its own process group (`cgi/process.rs`), its environment
//!   is the CGI variables ([`crate::gateway::environment`]; `HTTP_*` without
//!   `HTTP_PROXY`), `PATH` and `LD_LIBRARY_PATH` from Tessera's, then
//!   `params`.
//! - **The body** goes to stdin while the output is read (up to
//!   [`FEED_BUFFER`] bytes of it are kept until the body is in, since the
//!   engine discards a body the handler left unread); a chunked body is
//!   collected first (up to `max-body-size`: `CONTENT_LENGTH` is needed).
//! - **The output**: a CGI header block (`Status:`, `Location:`, other
//!   fields; a local `Location` is an internal redirect; an HTTP status
//!   line is accepted too) or, for scripts named `nph-*` (RFC 3875 §5), an
//!   HTTP status line and fields, which must be there (otherwise 500); then
//!   the body, streamed as it comes until stdout closes. Tessera frames the
//!   body itself (chunked or by length), as for every answer; the status and
//!   fields are the script's. No header block is 500. A
//!   declared `Content-Length` the output does not reach makes the client's
//!   connection close without a proper end. stderr goes to the error log.
//! - **Limits**: `timeout` seconds for the whole run (then the process group
//!   is killed: 504 before the header block, a broken-off body after), a
//!   client that goes away kills the group too (noticed when the next output
//!   cannot be written to it), and at most `max-processes`
//!   scripts run at once in the server (503 with `Retry-After: 1` beyond).

mod process;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use serde::Deserialize;
use tessera_core::actix_web::http::header::{self, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::module::ContentFuture;
use tessera_core::response::error_response;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};
use tokio::process::ChildStdout;
use tokio::time::Instant;

use crate::eof_output::{declared_length, Limit, Output, OutputError};
use crate::gateway::{self, Head, Input, Script, ScriptMap, XSendfile};
use process::{feed, Process, Slots, Spawn};

/// Output kept from a script while its request body is still being written
/// to it, at most, bytes; beyond it the script waits (its pipe fills) until
/// the body is in, which for a script that must read more of its input to go
/// on ends at its `timeout` (504).
pub const FEED_BUFFER: usize = 1024 * 1024;

/// Options of `[vhost.cgi]` (or a rule's `cgi` table).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CgiConfig {
    /// Script extension (with its dot) → interpreter path; `""` executes
    /// the file itself. Paths matching no entry pass on. Default `{}`
    /// (lighttpd `cgi.assign`).
    #[serde(default)]
    pub assign: BTreeMap<String, String>,
    /// The script, as a URL path under the document root (`"/cgi-bin/app"`):
    /// every request reaching the module runs it, `SCRIPT_NAME` is this
    /// value and `PATH_INFO` the rest of the request path (Cherokee's `cgi`
    /// handler on a rule whose target is one file). Its interpreter is the
    /// `assign` entry of its extension, if any. Default: none.
    #[serde(default)]
    pub script_name: Option<String>,
    /// Scripts tried for a directory path. Default `[]`.
    #[serde(default)]
    pub index_files: Vec<String>,
    /// Extra environment variables after the standard ones, which they may
    /// replace (lighttpd `setenv.add-environment`).
    #[serde(default)]
    pub params: std::collections::HashMap<String, String>,
    /// Honour `X-Sendfile`, `X-LIGHTTPD-send-file` and `X-Accel-Redirect`
    /// in the output. Default false (lighttpd `cgi.x-sendfile`).
    #[serde(default)]
    pub x_sendfile: bool,
    /// Directories X-Sendfile may serve files from, relative ones from the
    /// configuration's directory. Default: the vhost's document root
    /// (lighttpd `cgi.x-sendfile-docroot`).
    #[serde(default)]
    pub x_sendfile_docroot: Vec<PathBuf>,
    /// Seconds a script may run, its output included; then its process
    /// group is killed. Default 60.
    #[serde(default = "sixty")]
    pub timeout: u64,
    /// Scripts running at once in the server (all vhosts of this
    /// configuration); beyond it 503. Default 32.
    #[serde(default = "thirty_two")]
    pub max_processes: usize,
}

impl Default for CgiConfig {
    fn default() -> Self {
        CgiConfig {
            assign: BTreeMap::new(),
            script_name: None,
            index_files: Vec::new(),
            params: std::collections::HashMap::new(),
            x_sendfile: false,
            x_sendfile_docroot: Vec::new(),
            timeout: sixty(),
            max_processes: thirty_two(),
        }
    }
}

fn sixty() -> u64 {
    60
}
fn thirty_two() -> usize {
    32
}

/// A configured `cgi` instance.
pub struct Cgi {
    scripts: ScriptMap,
    /// `(extension, interpreter)`; `None`: the file itself.
    assign: Vec<(String, Option<PathBuf>)>,
    /// `PATH` (and `LD_LIBRARY_PATH`) from Tessera's environment.
    inherited: Vec<(OsString, OsString)>,
    /// `params`, sorted.
    params: Vec<(OsString, OsString)>,
    sendfile: XSendfile,
    timeout: Duration,
    max_processes: usize,
    slots: Arc<Slots>,
}

impl ModuleDecl for Cgi {
    const NAME: &'static str = "cgi";
    type Config = CgiConfig;

    fn build(cfg: CgiConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        if cfg.timeout == 0 {
            return Err("timeout: must be at least 1 (seconds)".into());
        }
        if cfg.max_processes == 0 {
            return Err("max-processes: must be at least 1".into());
        }
        let mut assign = Vec::with_capacity(cfg.assign.len());
        for (ext, interpreter) in &cfg.assign {
            let interpreter = match interpreter.as_str() {
                "" => None,
                i if Path::new(i).is_absolute() => Some(PathBuf::from(i)),
                i => {
                    return Err(format!(
                        "assign.\"{ext}\": \"{i}\" is not an absolute path (or \"\" to execute the file)"
                    ))
                }
            };
            assign.push((ext.clone(), interpreter));
        }
        // the longest extension first: ".tar.cgi" before ".cgi"
        assign.sort_by_key(|a| std::cmp::Reverse(a.0.len()));
        let scripts = ScriptMap::new(
            cfg.assign.into_keys().collect(),
            cfg.script_name,
            true,
            cfg.index_files,
        )
        .map_err(|e| e.replacen("extensions:", "assign:", 1))?;
        let path =
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let mut inherited = vec![(OsString::from("PATH"), path)];
        if let Some(v) = std::env::var_os("LD_LIBRARY_PATH") {
            inherited.push(("LD_LIBRARY_PATH".into(), v));
        }
        let params = gateway::params(cfg.params)
            .into_iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect();
        Ok(Cgi {
            scripts,
            assign,
            inherited,
            params,
            sendfile: XSendfile::new(
                cfg.x_sendfile,
                &cfg.x_sendfile_docroot,
                &cx.vhost.document_root,
                cx.config_dir,
            )?,
            timeout: Duration::from_secs(cfg.timeout),
            max_processes: cfg.max_processes,
            slots: cx.shared.get_or_init(Slots::default),
        })
    }
}

impl Module for Cgi {
    fn hooks(&self) -> Hooks {
        Hooks::ASYNC
    }

    fn runs_files(&self) -> bool {
        // by extension or mounted at script-name, a script is a file
        true
    }

    fn content_async<'a>(&'a self, cx: &'a mut Ctx<'_>) -> Option<ContentFuture<'a>> {
        let script = self.scripts.resolve_request(cx)?;
        if self.scripts.declines(&script) {
            return None;
        }
        Some(Box::pin(self.run(cx, script)))
    }

    /// The script and the program that would run it, without running it.
    fn explain(&self, cx: &Ctx<'_>) -> Option<String> {
        let script = self.scripts.resolve_request(cx)?;
        if !std::fs::metadata(&script.filename).is_ok_and(|m| m.is_file()) {
            return Some(format!(
                "404: the script {} is not a file; nothing is run",
                script.filename.display()
            ));
        }
        let how = match self.interpreter(&script.name).unwrap_or(None) {
            Some(i) => format!("run by {}", i.display()),
            None => "executed itself".to_owned(),
        };
        Some(format!(
            "CGI script {} (SCRIPT_NAME \"{}\", PATH_INFO \"{}\"), {how}",
            script.filename.display(),
            script.name,
            script.path_info
        ))
    }
}

impl Cgi {
    /// The interpreter of `script`: `Some(None)` to execute it directly,
    /// `None` when no `assign` entry matches (with `script-name`).
    fn interpreter(&self, script: &str) -> Option<Option<&Path>> {
        self.assign
            .iter()
            .find(|(ext, _)| script.ends_with(ext.as_str()))
            .map(|(_, i)| i.as_deref())
    }

    async fn run(&self, cx: &mut Ctx<'_>, script: Script) -> HttpResponse {
        // never spawn for what is not a file (check-local always holds)
        let meta = match std::fs::metadata(&script.filename) {
            Ok(m) if m.is_file() => m,
            _ => return error_response(StatusCode::NOT_FOUND),
        };
        let interpreter = self.interpreter(&script.name).unwrap_or(None);
        if interpreter.is_none() && meta.permissions().mode() & 0o111 == 0 {
            tracing::warn!(script = %script.filename.display(), "cgi: not executable (no execute bit, no interpreter in assign)");
            return error_response(StatusCode::FORBIDDEN);
        }
        let input = match Input::take(cx).await {
            Ok(i) => i,
            Err(r) => return r,
        };
        let Some(slot) = self.slots.take(self.max_processes) else {
            tracing::warn!(max = self.max_processes, "cgi: max-processes running, 503");
            let mut r = error_response(StatusCode::SERVICE_UNAVAILABLE);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return r;
        };
        let mut env = Vec::with_capacity(48 + self.params.len());
        env.extend_from_slice(&self.inherited);
        gateway::environment(cx, &script, input.length(), &[], &mut |k, v| {
            env.push((
                OsString::from_vec(k.to_vec()),
                OsString::from_vec(v.to_vec()),
            ))
        });
        // last: they may replace the standard ones
        env.extend_from_slice(&self.params);
        let deadline = Instant::now() + self.timeout;
        let spawn = Spawn {
            interpreter,
            script: &script.filename,
            env,
            stdin: input.length().is_some_and(|n| n > 0),
            deadline,
        };
        let mut p = match Process::spawn(spawn, slot) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(script = %script.filename.display(), "cgi: cannot start: {e}");
                return error_response(StatusCode::INTERNAL_SERVER_ERROR);
            }
        };
        let mut out = Output::new(p.take_stdout(), Limit::Deadline(deadline), "cgi");
        // the whole body goes in before the response is returned (the engine
        // discards what a handler left unread), while the output is read
        let stdin = p.take_stdin();
        let fed = tokio::time::timeout_at(deadline, async {
            let mut feeding = std::pin::pin!(feed(stdin, input, p.script()));
            tokio::select! {
                biased;
                r = &mut feeding => r,
                // the cap, the end of the output, or an error (seen again below)
                _ = out.fill(FEED_BUFFER) => feeding.await,
            }
        })
        .await;
        match fed {
            Ok(Ok(())) => {}
            Ok(Err(r)) => return r,
            Err(_) => {
                tracing::error!(script = %p.script(), "cgi: killed at its timeout while reading its input");
                return error_response(StatusCode::GATEWAY_TIMEOUT);
            }
        }
        let head = match out.head().await {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(script = %p.script(), "{e}");
                return error_response(match e {
                    OutputError::TimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                });
            }
        };
        let declared = match declared_length(&head) {
            Ok(d) => d,
            Err(why) => {
                tracing::error!(script = %p.script(), "cgi: {why}");
                return error_response(StatusCode::INTERNAL_SERVER_ERROR);
            }
        };
        // a non-parsed-header script gives the status line itself (RFC 3875
        // §5); it is parsed like the rest, and the engine frames the body
        let nph = script
            .filename
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"nph-"));
        if nph && !head.starts_with(b"HTTP/") {
            tracing::error!(script = %p.script(), "cgi: an nph- script whose output does not start with a status line");
            return error_response(StatusCode::INTERNAL_SERVER_ERROR);
        }
        let head = match Head::parse(&head) {
            Ok(h) => h,
            Err(why) => {
                tracing::error!(script = %p.script(), "cgi: {why}");
                return error_response(StatusCode::INTERNAL_SERVER_ERROR);
            }
        };
        if let Some(n) = declared.filter(|_| gateway::body_follows(cx, &head, &self.sendfile)) {
            out.expect(n);
        }
        let body = CgiBody { out, process: p };
        gateway::respond(cx, head, gateway::streamed(body), &self.sendfile).into_response()
    }
}

/// The body of a CGI response: the process's stdout after its head. The
/// process lives as long as this stream: dropped before the end (the client
/// went away, or the time is up), its process group is killed.
struct CgiBody {
    out: Output<ChildStdout>,
    process: Process,
}

impl Stream for CgiBody {
    type Item = Result<Bytes, OutputError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.out).poll_next(cx);
        if let Poll::Ready(Some(Err(e))) = &r {
            tracing::error!(script = %this.process.script(), "{e}");
        }
        if this.out.ended() {
            this.process.finished();
        }
        r
    }
}

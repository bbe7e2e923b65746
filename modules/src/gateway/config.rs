//! The options `fastcgi`, `scgi` and `uwsgi` share (issue 14's
//! specification: the same keys with the same meaning), and what each
//! module builds from them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use tessera_core::upstream::Upstream;
use tessera_core::BuildContext;

use super::{ScriptMap, XSendfile};

/// Options of `[vhost.fastcgi]`, `[vhost.scgi]` and `[vhost.uwsgi]` (or a
/// rule's table of that name).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BackendConfig {
    /// The `[[upstream]]` of the application. Required.
    #[serde(default)]
    pub upstream: String,
    /// Script extensions, with their dot: paths whose script segment ends
    /// with one go to the application. Default `[".php"]` for `fastcgi`,
    /// `[]` for `scgi` and `uwsgi` (lighttpd's `fastcgi.server` and
    /// `scgi.server` keyed by an extension).
    #[serde(default)]
    pub extensions: Option<Vec<String>>,
    /// The application is mounted at this prefix (`"/app"`, `""` for the
    /// root) and takes every request that reaches the module: `SCRIPT_NAME`
    /// is the prefix, `PATH_INFO` the rest of the path (lighttpd's
    /// `fastcgi.server`/`scgi.server` keyed by a prefix, and
    /// `fix-root-scriptname` for `""`; a Cherokee handler on a directory
    /// rule; nginx `*_pass` in a `location`). `extensions` and `check-local`
    /// are then not used. Default: none.
    #[serde(default)]
    pub script_name: Option<String>,
    /// A script that is not a file under the document root is 404 without
    /// calling the application. Default true (lighttpd `check-local`).
    #[serde(default)]
    pub check_local: Option<bool>,
    /// Scripts tried for a directory path. Default `["index.php"]`.
    #[serde(default)]
    pub index_files: Option<Vec<String>>,
    /// Extra variables after the standard ones, which they may replace
    /// (nginx `fastcgi_param`, `scgi_param`, `uwsgi_param`).
    #[serde(default)]
    pub params: HashMap<String, String>,
    /// Honour `X-Sendfile`, `X-LIGHTTPD-send-file` and `X-Accel-Redirect`
    /// in answers. Default false (lighttpd `x-sendfile`, Cherokee
    /// `xsendfile`).
    #[serde(default)]
    pub x_sendfile: bool,
    /// Directories X-Sendfile may serve files from, relative ones from the
    /// configuration's directory. Default: the vhost's document root
    /// (lighttpd `x-sendfile-docroot`).
    #[serde(default)]
    pub x_sendfile_docroot: Vec<PathBuf>,
    /// `fastcgi` only: keep connections to the application open between
    /// requests (`FCGI_KEEP_CONN`, nginx `fastcgi_keep_conn`), in the
    /// upstream's pools. Default false, as nginx: an application with a
    /// fixed number of workers (php-fpm's `pm.max_children`, php-cgi's
    /// `PHP_FCGI_CHILDREN`) gives each kept connection a worker of its own,
    /// so the upstream's `max-connections` times Tessera's workers must not
    /// exceed them (requests beyond wait for a connection, see the pool).
    #[serde(default)]
    pub keep_conn: Option<bool>,
    /// `uwsgi` only: the packet's `modifier1`, 0–255. Default 0 (Python
    /// WSGI; nginx `uwsgi_modifier1`, Cherokee's `modifier1`).
    #[serde(default)]
    pub modifier1: Option<u8>,
}

/// The module that reads a [`BackendConfig`]: its defaults and the keys
/// only it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `fastcgi`: extensions `[".php"]`; `keep-conn`.
    FastCgi,
    /// `scgi`: extensions `[]`.
    Scgi,
    /// `uwsgi`: extensions `[]`; `modifier1`.
    Uwsgi,
}

/// What a back-end module builds from a [`BackendConfig`].
pub struct Backend {
    /// The `[[upstream]]`.
    pub upstream: Arc<Upstream>,
    /// Which paths go to it, and their scripts.
    pub scripts: ScriptMap,
    /// `params`, sorted by name.
    pub params: Vec<(String, String)>,
    /// The X-Sendfile settings.
    pub sendfile: XSendfile,
    /// `keep-conn` (false when not set).
    pub keep_conn: bool,
    /// `modifier1` (0 when not set).
    pub modifier1: u8,
}

impl BackendConfig {
    /// Checks the options for the module `kind`.
    ///
    /// # Errors
    /// The key and what is wrong, for the configuration error: a missing
    /// or undeclared upstream, a malformed extension, index file,
    /// `script-name` or `x-sendfile-docroot`, or a key of another module
    /// (`keep-conn` outside `fastcgi`, `modifier1` outside `uwsgi`).
    pub fn build(self, kind: Kind, cx: &BuildContext<'_>) -> Result<Backend, String> {
        if self.keep_conn.is_some() && kind != Kind::FastCgi {
            return Err("keep-conn: an option of fastcgi only".into());
        }
        if self.modifier1.is_some() && kind != Kind::Uwsgi {
            return Err("modifier1: an option of uwsgi only".into());
        }
        let extensions = match kind {
            Kind::FastCgi => vec![".php".to_string()],
            Kind::Scgi | Kind::Uwsgi => Vec::new(),
        };
        Ok(Backend {
            upstream: upstream(&self.upstream, cx)?,
            scripts: ScriptMap::new(
                self.extensions.unwrap_or(extensions),
                self.script_name,
                self.check_local.unwrap_or(true),
                self.index_files.unwrap_or_else(|| vec!["index.php".into()]),
            )?,
            params: super::params(self.params),
            sendfile: XSendfile::new(
                self.x_sendfile,
                &self.x_sendfile_docroot,
                &cx.vhost.document_root,
                cx.config_dir,
            )?,
            keep_conn: self.keep_conn.unwrap_or(false),
            modifier1: self.modifier1.unwrap_or(0),
        })
    }
}

/// The `[[upstream]]` named by a module's required `upstream` key. Errors:
/// the key and why (empty, or not declared: the declared names follow).
pub fn upstream(name: &str, cx: &BuildContext<'_>) -> Result<Arc<Upstream>, String> {
    if name.is_empty() {
        return Err("upstream: required (the name of an [[upstream]])".into());
    }
    match cx.upstreams.get(name) {
        Some(u) => Ok(u.clone()),
        None => Err(format!(
            "upstream: \"{name}\" is not declared (declared: {})",
            cx.upstreams.names().join(", ")
        )),
    }
}

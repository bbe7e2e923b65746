//! Configuration: `conf/server.toml` loaded through the `config` crate (the file,
//! then `TESSERA_`-prefixed environment overrides such as
//! `TESSERA_SERVER__WORKERS=4`), checked strictly, and built into an immutable
//! [`Config`]: vhosts, rules and module pipelines.
//!
//! Unknown keys are errors. A vhost table holds the keys below plus one table per
//! module, named after the module (`[vhost.expires]`); a key that is neither is
//! refused like nginx's "unknown directive". Relative paths are resolved against
//! the directory of the configuration file.

mod error;
pub mod inherit;
mod server;
pub mod source;
mod vhost;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

pub use error::ConfigError;
pub use server::{Http1Engine, ServerSettings, TlsFiles};

use crate::registry::{Registry, SharedState};
use crate::vhost::{Vhost, VhostTable};

/// A `[[plugin]]` table: a run-time module loaded from a shared library.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginDecl {
    /// The module name the library must declare; used in `modules = [...]`.
    pub name: String,
    /// The library (`.so`), relative to the configuration file's directory.
    pub path: PathBuf,
}

/// A loaded, validated configuration, immutable while it serves.
pub struct Config {
    /// The file it was loaded from.
    pub file: PathBuf,
    /// The `[server]` table.
    pub server: ServerSettings,
    /// Vhosts with their pipelines.
    pub vhosts: VhostTable,
    /// State shared by module instances (log writers).
    pub shared: SharedState,
    /// TLS certificates by server name.
    pub tls: Arc<crate::tls::CertTable>,
    /// The `[[plugin]]` libraries loaded, in file order (for `tessera -t`).
    pub plugins: Vec<LoadedPlugin>,
    /// The `[[upstream]]` declarations with their health and counters.
    pub upstreams: Arc<crate::upstream::Upstreams>,
    /// The line of each table in the file, for `tessera explain` (empty when
    /// built from a tree by [`build`]).
    pub sources: source::SourceMap,
}

/// A `[[plugin]]` library that was loaded and checked.
#[derive(Debug, Clone)]
pub struct LoadedPlugin {
    /// Module name (the descriptor's, equal to the configured one).
    pub name: String,
    /// Plugin version from the descriptor.
    pub version: String,
    /// Canonical path of the library.
    pub path: PathBuf,
}

impl Config {
    fn each_instance(&self, mut f: impl FnMut(&Arc<dyn crate::Module>)) {
        let mut seen: Vec<*const ()> = Vec::new();
        for v in self.vhosts.all() {
            for m in v.pipeline.instances() {
                let p = Arc::as_ptr(m) as *const ();
                if !seen.contains(&p) {
                    seen.push(p);
                    f(m);
                }
            }
        }
    }

    /// Runs every module instance's shutdown hook once (flushes access logs).
    pub fn shutdown(&self) {
        self.each_instance(|m| m.on_shutdown());
    }

    /// Runs every module instance's reopen hook once (SIGUSR1: log rotation).
    pub fn reopen(&self) {
        self.each_instance(|m| m.on_reopen());
    }
}

struct Err<'a> {
    file: &'a Path,
    vhost: Option<String>,
}

impl Err<'_> {
    fn at(&self, key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            vhost: self.vhost.clone(),
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// Reads `file` and the `TESSERA_` environment overrides into one JSON tree.
///
/// # Errors
/// A missing or unreadable file, or TOML syntax errors (with the parser's line and
/// column).
pub fn load_value(file: &Path) -> Result<Value, ConfigError> {
    let e = Err { file, vhost: None };
    if !file.is_file() {
        return Err(e.at("", "no such file"));
    }
    with_env(
        &e,
        config::File::from(file).format(config::FileFormat::Toml),
    )
}

/// As [`load_value`], with the TOML `text` standing for the contents of `file`
/// (which is not read).
///
/// # Errors
/// TOML syntax errors (with the parser's line and column).
pub fn load_value_str(file: &Path, text: &str) -> Result<Value, ConfigError> {
    let e = Err { file, vhost: None };
    with_env(&e, config::File::from_str(text, config::FileFormat::Toml))
}

/// `source` with the `TESSERA_` environment overrides on top, as one JSON tree.
fn with_env(
    e: &Err<'_>,
    source: impl config::Source + Send + Sync + 'static,
) -> Result<Value, ConfigError> {
    let cfg = config::Config::builder()
        .add_source(source)
        .add_source(
            config::Environment::with_prefix("TESSERA")
                .prefix_separator("_")
                .separator("__")
                .try_parsing(true)
                // TESSERA_SERVER__LISTEN=127.0.0.1:8081,[::1]:8081
                .list_separator(",")
                .with_list_parse_key("server.listen")
                .with_list_parse_key("server.listen_tls")
                .with_list_parse_key("server.listen-tls")
                .with_list_parse_key("server.listen_proxy_protocol")
                .with_list_parse_key("server.listen-proxy-protocol")
                .with_list_parse_key("server.trusted_proxies")
                .with_list_parse_key("server.trusted-proxies")
                .with_list_parse_key("server.explain_from")
                .with_list_parse_key("server.explain-from"),
        )
        .build()
        .map_err(|err| e.at("", one_line(&err.to_string())))?;
    cfg.try_deserialize::<Value>()
        .map_err(|err| e.at("", one_line(&err.to_string())))
}

/// The `[server]` table with `_` in its keys (and `[server.tls]`'s) written
/// `-`: environment overrides name keys with `_` (`TESSERA_SERVER__MAX_BODY_SIZE`),
/// and the file's `max-body-size` must not then count as a second field. The
/// `_` form wins, as the environment does.
fn dashed_keys(v: &Value) -> Value {
    let Some(m) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    let (dashed, underscored): (Vec<_>, Vec<_>) = m.iter().partition(|(k, _)| !k.contains('_'));
    for (k, val) in dashed.into_iter().chain(underscored) {
        let val = if k == "tls" {
            dashed_keys(val)
        } else {
            val.clone()
        };
        out.insert(k.replace('_', "-"), val);
    }
    Value::Object(out)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Loads and builds the configuration in `file` with the modules in `registry`.
///
/// # Errors
/// The first problem found, naming file, vhost, key and reason: syntax, unknown
/// keys or modules, wrong types, a missing document root, an invalid regular
/// expression, two vhosts claiming one name, a module's own validation.
pub fn load(file: &Path, registry: &Registry) -> Result<Config, ConfigError> {
    let value = load_value(file)?;
    let mut cfg = build(file, &value, registry)?;
    if let Ok(text) = std::fs::read_to_string(file) {
        cfg.sources = source::SourceMap::parse(&text);
    }
    Ok(cfg)
}

/// Builds a configuration from an already parsed tree (see [`load`]).
///
/// # Errors
/// As [`load`].
pub fn build(file: &Path, value: &Value, registry: &Registry) -> Result<Config, ConfigError> {
    let e = Err { file, vhost: None };
    let dir = file
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .unwrap_or(Path::new("."))
        .to_owned();
    // Absolute, so that messages name the paths that were really tried.
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let top = value.as_object().ok_or_else(|| e.at("", "not a table"))?;
    let mut server = None;
    let mut vhost_values: &[Value] = &[];
    let mut plugin_values: &[Value] = &[];
    let mut upstream_configs = Vec::new();
    for (k, v) in top {
        match k.as_str() {
            "server" => {
                let v = &dashed_keys(v);
                server = Some(
                    serde_path_to_error::deserialize::<_, ServerSettings>(v).map_err(|err| {
                        e.at(format!("server.{}", err.path()), err.inner().to_string())
                    })?,
                )
            }
            "vhost" => {
                vhost_values = v
                    .as_array()
                    .ok_or_else(|| e.at("vhost", "must be an array of tables ([[vhost]])"))?
            }
            "upstream" => {
                let list = v
                    .as_array()
                    .ok_or_else(|| e.at("upstream", "must be an array of tables ([[upstream]])"))?;
                for (i, u) in list.iter().enumerate() {
                    upstream_configs.push(
                        serde_path_to_error::deserialize::<_, crate::upstream::UpstreamConfig>(u)
                            .map_err(|err| {
                            e.at(
                                format!("upstream[{i}].{}", err.path()),
                                err.inner().to_string(),
                            )
                        })?,
                    );
                }
            }
            "plugin" => {
                plugin_values = v
                    .as_array()
                    .ok_or_else(|| e.at("plugin", "must be an array of tables ([[plugin]])"))?
            }
            other => {
                return Err(e.at(
                    other,
                    "unknown key (expected `server`, `upstream`, `plugin` or `vhost`)",
                ))
            }
        }
    }
    let mut server = server.unwrap_or_default();
    // a list from the environment may carry spaces after its commas
    for a in server.listen.iter_mut().chain(server.listen_tls.iter_mut()) {
        *a = a.trim().to_owned();
    }
    validate_server(&server, &e)?;
    if vhost_values.is_empty() {
        return Err(e.at("vhost", "no [[vhost]] is configured"));
    }
    let upstreams = crate::upstream::Upstreams::build(upstream_configs)
        .map_err(|(key, reason)| e.at(key, reason))?;
    let (registry, plugins) = load_plugins(file, &dir, plugin_values, vhost_values, registry)?;
    let registry = &registry;
    let shared = SharedState::default();
    let mut vhosts = Vec::with_capacity(vhost_values.len());
    let mut default = None;
    let mut claimed: HashMap<String, String> = HashMap::new();
    let mut certs = Vec::new();
    for (i, v) in vhost_values.iter().enumerate() {
        let (vh, is_default, cert) =
            vhost::build_vhost(file, &dir, i, v, registry, &shared, &upstreams)?;
        if let Some(c) = cert {
            certs.push((i, vh.info.names.clone(), c));
        }
        let ve = Err {
            file,
            vhost: Some(vh.label.clone()),
        };
        for n in &vh.info.names {
            if let Some(prev) = claimed.insert(n.clone(), vh.label.clone()) {
                return Err(ve.at(
                    "server-names",
                    format!("\"{n}\" is already claimed by vhost \"{prev}\""),
                ));
            }
        }
        if is_default {
            if let Some(d) = default {
                let d: &Vhost = &vhosts[d];
                return Err(ve.at(
                    "default",
                    format!("vhost \"{}\" is already the default", d.label),
                ));
            }
            default = Some(i);
        }
        vhosts.push(vh);
    }
    let default = default.unwrap_or(0);
    if !vhosts[default].listen.is_empty() {
        return Err(Err {
            file,
            vhost: Some(vhosts[default].label.clone()),
        }
        .at(
            "listen",
            "the first vhost is the default (no vhost has default = true), which answers on every listener: it cannot have listen; mark another vhost default = true",
        ));
    }
    let mut table = crate::tls::CertTable::default();
    for (_, names, c) in &certs {
        table.add(names, c.clone());
    }
    if let Some(t) = &server.tls {
        let files = crate::tls::CertFiles {
            certificate: crate::tls::resolve_path(&dir, &t.certificate),
            key: crate::tls::resolve_path(&dir, &t.key),
        };
        table.set_default(crate::tls::load_cert(&files).map_err(|r| e.at("server.tls", r))?);
    } else if let Some((_, _, c)) = certs
        .iter()
        .find(|(i, _, _)| *i == default)
        .or(certs.first())
    {
        table.set_default(c.clone());
    }
    if !server.listen_tls.is_empty() && !table.has_default() {
        return Err(e.at(
            "server.listen-tls",
            "TLS listeners need a certificate: set [server.tls] or a vhost's tls-certificate and tls-key",
        ));
    }
    Ok(Config {
        file: file.to_owned(),
        server,
        vhosts: VhostTable::new(vhosts, default),
        shared,
        tls: Arc::new(table),
        plugins,
        upstreams: Arc::new(upstreams),
        sources: source::SourceMap::default(),
    })
}

/// The label of the first vhost that names module `name` (in `modules` or a
/// rule table), for error messages.
fn first_user(vhost_values: &[Value], name: &str) -> Option<String> {
    vhost_values.iter().enumerate().find_map(|(i, v)| {
        let uses = v
            .get("modules")
            .and_then(Value::as_array)
            .is_some_and(|m| m.iter().any(|x| x.as_str() == Some(name)))
            || v.get("rule")
                .and_then(Value::as_array)
                .is_some_and(|rs| rs.iter().any(|r| r.get(name).is_some()));
        uses.then(|| {
            v.get("server-names")
                .and_then(Value::as_array)
                .and_then(|n| n.first())
                .and_then(Value::as_str)
                .map_or_else(|| format!("#{i}"), str::to_ascii_lowercase)
        })
    })
}

fn load_plugins(
    file: &Path,
    dir: &Path,
    plugin_values: &[Value],
    vhost_values: &[Value],
    registry: &Registry,
) -> Result<(Registry, Vec<LoadedPlugin>), ConfigError> {
    let mut reg = registry.clone();
    let mut loaded = Vec::with_capacity(plugin_values.len());
    for (i, pv) in plugin_values.iter().enumerate() {
        let decl: PluginDecl = serde_path_to_error::deserialize(pv).map_err(|err| ConfigError {
            file: file.to_owned(),
            vhost: None,
            key: format!("plugin[{i}].{}", err.path()),
            reason: err.inner().to_string(),
        })?;
        let e = Err {
            file,
            vhost: first_user(vhost_values, &decl.name),
        };
        let key = format!("plugin[{i}] (module \"{}\")", decl.name);
        let path = dir.join(&decl.path);
        let lib = crate::plugin_host::load(&path).map_err(|err| e.at(&key, err.to_string()))?;
        if lib.name != decl.name {
            return Err(e.at(
                &key,
                crate::plugin_host::PluginError::NameMismatch {
                    path: lib.path.clone(),
                    configured: decl.name.clone(),
                    found: lib.name.clone(),
                }
                .to_string(),
            ));
        }
        if reg.contains(&decl.name) {
            return Err(e.at(
                &key,
                format!(
                    "{}: the name \"{}\" is already taken by a built-in module or another plugin",
                    lib.path.display(),
                    decl.name
                ),
            ));
        }
        loaded.push(LoadedPlugin {
            name: lib.name.clone(),
            version: lib.version.clone(),
            path: lib.path.clone(),
        });
        reg.register_factory(Arc::new(crate::plugin_host::PluginFactory::new(lib)))
            .map_err(|err| e.at(&key, err.to_string()))?;
    }
    Ok((reg, loaded))
}

fn validate_server(s: &ServerSettings, e: &Err<'_>) -> Result<(), ConfigError> {
    for (key, p) in [
        ("server.liveness-path", &s.liveness_path),
        ("server.readiness-path", &s.readiness_path),
    ] {
        if let Some(p) = p {
            if !p.starts_with('/') || p.contains(['?', '#', ' ']) {
                return Err(e.at(key, format!("\"{p}\" is not a path like \"/readyz\"")));
            }
        }
    }
    if s.liveness_path.is_some() && s.liveness_path == s.readiness_path {
        return Err(e.at("server.readiness-path", "must differ from liveness-path"));
    }
    if s.max_request_headers == 0 || s.max_request_headers > crate::h1::head::MAX_HEADERS {
        return Err(e.at(
            "server.max-request-headers",
            format!("must be from 1 to {}", crate::h1::head::MAX_HEADERS),
        ));
    }
    if s.max_uri_length == 0 || s.max_uri_length > crate::h1::head::MAX_TARGET {
        return Err(e.at(
            "server.max-uri-length",
            format!(
                "must be from 1 to {} bytes (the longest target the HTTP stack holds)",
                crate::h1::head::MAX_TARGET
            ),
        ));
    }
    for p in &s.listen_proxy_protocol {
        if !s.listen.iter().any(|l| l.trim() == p.trim()) {
            return Err(e.at(
                "server.listen-proxy-protocol",
                format!("\"{p}\" is not an entry of server.listen"),
            ));
        }
        if s.http1_engine != Http1Engine::Tessera {
            return Err(e.at(
                "server.listen-proxy-protocol",
                "needs http1-engine = \"tessera\" (actix-http does not read the PROXY protocol)",
            ));
        }
        if s.trusted_proxies.is_empty() {
            return Err(e.at(
                "server.listen-proxy-protocol",
                "set server.trusted-proxies: only they may send a PROXY header",
            ));
        }
    }
    if s.listen.is_empty() && s.listen_tls.is_empty() {
        return Err(e.at(
            "server.listen",
            "no listen address (and no server.listen-tls)",
        ));
    }
    for (i, a) in s.listen.iter().enumerate() {
        if a.parse::<std::net::SocketAddr>().is_err() {
            return Err(e.at(
                format!("server.listen[{i}]"),
                format!("\"{a}\" is not IP:PORT (use [::1]:PORT for IPv6)"),
            ));
        }
        if !a.ends_with(":0") && s.listen[..i].contains(a) {
            return Err(e.at(
                format!("server.listen[{i}]"),
                format!("\"{a}\" is listed twice"),
            ));
        }
    }
    for (i, a) in s.listen_tls.iter().enumerate() {
        if a.parse::<std::net::SocketAddr>().is_err() {
            return Err(e.at(
                format!("server.listen-tls[{i}]"),
                format!("\"{a}\" is not IP:PORT (use [::1]:PORT for IPv6)"),
            ));
        }
        if !a.ends_with(":0") && (s.listen.contains(a) || s.listen_tls[..i].contains(a)) {
            return Err(e.at(
                format!("server.listen-tls[{i}]"),
                format!("\"{a}\" is listed twice"),
            ));
        }
    }
    if s.max_connections == 0 {
        return Err(e.at("server.max-connections", "must be at least 1"));
    }
    Ok(())
}

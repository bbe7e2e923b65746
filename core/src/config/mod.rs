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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};

pub use error::ConfigError;
pub use server::{Http1Engine, ServerSettings, TlsFiles};

use crate::module::BuildContext;
use crate::pipeline::{Pipeline, Slot};
use crate::registry::{Registry, SharedState};
use crate::rule::{MatchSpec, Matcher, Rule};
use crate::vhost::{Vhost, VhostInfo, VhostTable};

/// A `[[plugin]]` table: a run-time module loaded from a shared library.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginDecl {
    /// The module name the library must declare; used in `modules = [...]`.
    pub name: String,
    /// The library (`.so`), relative to the configuration file's directory.
    pub path: PathBuf,
}

/// The keys of a `[[vhost]]` table other than module tables.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum VhostKey {
    ServerNames,
    Default,
    DocumentRoot,
    Modules,
    Rule,
    TlsCertificate,
    TlsKey,
    HttpsRedirect,
    Listen,
    NamesSeePort,
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
                .with_list_parse_key("server.listen-tls"),
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
        let (vh, is_default, cert) = build_vhost(file, &dir, i, v, registry, &shared, &upstreams)?;
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

/// Parses a vhost's `listen` key: listener addresses `"IP:PORT"`, port not 0
/// (a port-0 listener's address is only known once bound).
fn listen_restriction(val: &Value, e: &Err<'_>) -> Result<Vec<std::net::SocketAddr>, ConfigError> {
    let list: Vec<String> = serde_json::from_value(val.clone())
        .map_err(|err| e.at("listen", format!("must be a list of \"IP:PORT\": {err}")))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, a) in list.iter().enumerate() {
        let addr: std::net::SocketAddr = a.parse().map_err(|_| {
            e.at(
                format!("listen[{i}]"),
                format!("\"{a}\" is not IP:PORT (use [::1]:PORT for IPv6)"),
            )
        })?;
        if addr.port() == 0 {
            return Err(e.at(
                format!("listen[{i}]"),
                format!("\"{a}\": a listener on port 0 cannot be named (give it a fixed port)"),
            ));
        }
        out.push(addr);
    }
    Ok(out)
}

fn build_vhost(
    file: &Path,
    dir: &Path,
    index: usize,
    v: &Value,
    registry: &Registry,
    shared: &SharedState,
    upstreams: &crate::upstream::Upstreams,
) -> Result<(Vhost, bool, Option<Arc<rustls::sign::CertifiedKey>>), ConfigError> {
    let table = v.as_object().ok_or_else(|| ConfigError {
        file: file.to_owned(),
        vhost: Some(format!("#{index}")),
        key: String::new(),
        reason: "must be a table".into(),
    })?;
    let names: Vec<String> = match table.get("server-names") {
        None => Vec::new(),
        Some(n) => serde_json::from_value::<Vec<String>>(n.clone()).map_err(|err| ConfigError {
            file: file.to_owned(),
            vhost: Some(format!("#{index}")),
            key: "server-names".into(),
            reason: err.to_string(),
        })?,
    };
    let names: Vec<String> = names
        .iter()
        .map(|n| {
            if n.starts_with('~') {
                n.clone()
            } else {
                n.to_ascii_lowercase()
            }
        })
        .collect();
    let label = names
        .first()
        .cloned()
        .unwrap_or_else(|| format!("#{index}"));
    let e = Err {
        file,
        vhost: Some(label.clone()),
    };
    let names_see_port = match table.get("names-see-port") {
        None => false,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| e.at("names-see-port", "must be true or false"))?,
    };
    for n in &names {
        if let Some(re) = n.strip_prefix('~') {
            if let Err(err) = fancy_regex::Regex::new(re) {
                return Err(e.at(
                    "server-names",
                    format!(
                        "\"{n}\": invalid regular expression: {}",
                        one_line(&err.to_string())
                    ),
                ));
            }
            continue;
        }
        let bare = n
            .strip_prefix("*.")
            .or_else(|| n.strip_prefix('.'))
            .unwrap_or(n);
        let has_port = crate::vhost::strip_port(bare).len() != bare.len();
        let port_ok = names_see_port && !n.starts_with('*') && !n.starts_with('.');
        if bare.is_empty()
            || bare.contains('*')
            || !crate::vhost::valid_host(bare)
            || (has_port && !port_ok)
        {
            return Err(e.at(
                "server-names",
                format!("\"{n}\" is not a host name, `*.suffix`, `.suffix` or `~regex` (no port; `host:port` with names-see-port)"),
            ));
        }
    }
    let mut is_default = false;
    let mut tls_cert: Option<PathBuf> = None;
    let mut tls_key: Option<PathBuf> = None;
    let mut https_redirect = false;
    let mut listen: Vec<std::net::SocketAddr> = Vec::new();
    let mut document_root = None;
    let mut modules: Vec<String> = Vec::new();
    let mut rules_value: &[Value] = &[];
    let mut module_tables: Vec<(&str, &Value)> = Vec::new();
    for (k, val) in table {
        match serde_json::from_value::<VhostKey>(Value::String(k.clone())) {
            Ok(VhostKey::ServerNames) => {}
            Ok(VhostKey::Default) => {
                is_default = val.as_bool().ok_or_else(|| e.at("default", "must be true or false"))?
            }
            Ok(VhostKey::DocumentRoot) => {
                let s = val
                    .as_str()
                    .ok_or_else(|| e.at("document-root", "must be a string (a directory)"))?;
                document_root = Some(s.to_owned());
            }
            Ok(VhostKey::Modules) => {
                modules = serde_json::from_value(val.clone())
                    .map_err(|err| e.at("modules", format!("must be a list of module names: {err}")))?;
            }
            Ok(VhostKey::TlsCertificate) => {
                tls_cert = Some(PathBuf::from(val.as_str().ok_or_else(|| e.at("tls-certificate", "must be a string (a PEM file)"))?));
            }
            Ok(VhostKey::TlsKey) => {
                tls_key = Some(PathBuf::from(val.as_str().ok_or_else(|| e.at("tls-key", "must be a string (a PEM file)"))?));
            }
            Ok(VhostKey::HttpsRedirect) => {
                https_redirect = val.as_bool().ok_or_else(|| e.at("https-redirect", "must be true or false"))?;
            }
            Ok(VhostKey::Listen) => listen = listen_restriction(val, &e)?,
            Ok(VhostKey::NamesSeePort) => {}
            Ok(VhostKey::Rule) => {
                rules_value = val
                    .as_array()
                    .ok_or_else(|| e.at("rule", "must be an array of tables ([[vhost.rule]])"))?
            }
            Err(_) if registry.contains(k) => module_tables.push((k, val)),
            Err(_) => {
                return Err(e.at(
                    k.as_str(),
                    format!(
                        "unknown key or module (keys: server-names, default, document-root, modules, rule, tls-certificate, tls-key, https-redirect, listen, names-see-port; modules: {}; a plugin module needs a top-level [[plugin]] declaration)",
                        registry.names().join(", ")
                    ),
                ))
            }
        }
    }
    let root = document_root.ok_or_else(|| e.at("document-root", "missing"))?;
    if root.trim().is_empty() {
        return Err(e.at("document-root", "is empty: name the directory of the files"));
    }
    let root_path = dir.join(&root);
    let document_root = std::fs::canonicalize(&root_path).map_err(|err| {
        e.at(
            "document-root",
            format!("\"{}\": {}", root_path.display(), err),
        )
    })?;
    if !document_root.is_dir() {
        return Err(e.at(
            "document-root",
            format!("\"{}\" is not a directory", document_root.display()),
        ));
    }
    // The configuration directory holds server.toml, htpasswd files and keys:
    // a root at or above it would serve them.
    if std::fs::canonicalize(dir).is_ok_and(|d| d.starts_with(&document_root)) {
        return Err(e.at(
            "document-root",
            format!(
                "\"{}\" contains the configuration directory \"{}\", whose files it would serve",
                document_root.display(),
                dir.display()
            ),
        ));
    }
    for (i, m) in modules.iter().enumerate() {
        if !registry.contains(m) {
            return Err(e.at(
                format!("modules[{i}]"),
                format!(
                    "unknown module \"{m}\" (known: {}); a plugin must be declared first, in a top-level [[plugin]] table with name = \"{m}\" and the path of its library",
                    registry.names().join(", ")
                ),
            ));
        }
        if modules[..i].contains(m) {
            return Err(e.at(format!("modules[{i}]"), format!("\"{m}\" is listed twice")));
        }
    }
    for (name, _) in &module_tables {
        if !modules.iter().any(|m| m == name) {
            return Err(e.at(
                *name,
                format!(
                    "a table for module \"{name}\", which is not in this vhost's `modules` list"
                ),
            ));
        }
    }
    let tls = match (tls_cert, tls_key) {
        (None, None) => None,
        (Some(c), Some(k)) => {
            let files = crate::tls::CertFiles {
                certificate: crate::tls::resolve_path(dir, &c),
                key: crate::tls::resolve_path(dir, &k),
            };
            Some(crate::tls::load_cert(&files).map_err(|r| e.at("tls-certificate", r))?)
        }
        (Some(_), None) => return Err(e.at("tls-key", "missing (tls-certificate is set)")),
        (None, Some(_)) => return Err(e.at("tls-certificate", "missing (tls-key is set)")),
    };
    let info = VhostInfo {
        index,
        names,
        document_root,
    };
    let build_module =
        |name: &str, table: &Value, key_prefix: &str, rule_match: Option<&Matcher>| {
            let cx = BuildContext {
                vhost: &info,
                config_dir: dir,
                shared,
                rule_match,
                upstreams,
            };
            let f = registry.get(name).expect("checked above");
            f.build(table, &cx).map_err(|err| {
                let key = if err.key.is_empty() {
                    format!("{key_prefix}{name}")
                } else {
                    format!("{key_prefix}{name}.{}", err.key)
                };
                e.at(key, err.reason)
            })
        };
    let mut slots: Vec<Slot> = Vec::new();
    for m in &modules {
        let table = module_tables
            .iter()
            .find(|(n, _)| n == m)
            .map(|(_, v)| *v)
            .unwrap_or(&Value::Null);
        slots.push(Slot {
            name: m.clone(),
            vhost_instance: Some(build_module(m, table, "", None)?),
            rule_instances: Vec::new(),
            vhost_table: Some(table.clone()),
            rule_tables: Vec::new(),
        });
    }
    let mut rules = Vec::with_capacity(rules_value.len());
    for (ri, rv) in rules_value.iter().enumerate() {
        let prefix = format!("rule[{ri}].");
        let rt = rv
            .as_object()
            .ok_or_else(|| e.at(format!("rule[{ri}]"), "must be a table"))?;
        let mut matcher = Matcher::Always;
        let mut is_final = true;
        let mut label = format!("rule[{ri}]");
        for (k, val) in rt {
            match k.as_str() {
                "match" => {
                    let spec: MatchSpec = serde_path_to_error::deserialize(val).map_err(|err| {
                        let p = err.path().to_string();
                        let key = if p == "." {
                            format!("{prefix}match")
                        } else {
                            format!("{prefix}match.{p}")
                        };
                        e.at(key, err.inner().to_string())
                    })?;
                    matcher = Matcher::compile(&spec)
                        .map_err(|(k, r)| e.at(format!("{prefix}match.{k}"), r))?;
                }
                "final" => {
                    is_final = val
                        .as_bool()
                        .ok_or_else(|| e.at(format!("{prefix}final"), "must be true or false"))?
                }
                "name" => {
                    label = val
                        .as_str()
                        .ok_or_else(|| e.at(format!("{prefix}name"), "must be a string"))?
                        .to_owned()
                }
                m if registry.contains(m) => {}
                other => {
                    return Err(e.at(
                        format!("{prefix}{other}"),
                        format!(
                            "unknown key or module (keys: match, final, name; modules: {}; a plugin module needs a top-level [[plugin]] declaration)",
                            registry.names().join(", ")
                        ),
                    ))
                }
            }
        }
        for (m, val) in rt.iter().filter(|(k, _)| registry.contains(k)) {
            let vhost_table = module_tables.iter().find(|(n, _)| n == m).map(|(_, v)| *v);
            let (table, mode) = inherit::effective(vhost_table, val)
                .map_err(|r| e.at(format!("{prefix}{m}.{}", inherit::KEY), r))?;
            let inst = build_module(m, &table, &prefix, Some(&matcher))?;
            match slots.iter_mut().find(|s| &s.name == m) {
                Some(s) => {
                    s.rule_instances.push((ri, inst));
                    s.rule_tables.push((ri, mode, table));
                }
                None => slots.push(Slot {
                    name: m.to_owned(),
                    vhost_instance: None,
                    rule_instances: vec![(ri, inst)],
                    vhost_table: None,
                    rule_tables: vec![(ri, mode, table)],
                }),
            }
        }
        rules.push(Rule {
            label,
            matcher,
            is_final,
        });
    }
    if is_default && !listen.is_empty() {
        return Err(e.at(
            "listen",
            "the default vhost answers on every listener: it cannot have listen",
        ));
    }
    // a module that runs the document root's files must come before the
    // vhost's module that sends them as they are (their source): after it
    // in `modules`, or set only in rules (which run after the vhost's
    // modules), it would never see them
    if let Some(at) = slots
        .iter()
        .position(|s| s.vhost_instance.as_ref().is_some_and(|m| m.sends_files()))
    {
        let sender = &slots[at].name;
        for s in &slots[at + 1..] {
            let key = if s.vhost_instance.as_ref().is_some_and(|m| m.runs_files()) {
                "modules".to_owned()
            } else if let Some((ri, _)) = s.rule_instances.iter().find(|(_, m)| m.runs_files()) {
                format!("rule[{ri}].{}", s.name)
            } else {
                continue;
            };
            let place = if s.vhost_instance.is_some() {
                "comes after it in modules"
            } else {
                "is set only in rules, so it would run after it"
            };
            return Err(e.at(
                key,
                format!(
                    "\"{name}\" runs the document root's scripts but {place}, and \"{sender}\" sends those scripts as files (their source): list \"{name}\" in the vhost's modules before \"{sender}\" (with the vhost table it needs)",
                    name = s.name
                ),
            ));
        }
    }
    let pipeline = Pipeline::new(rules, slots);
    if pipeline.may_block && pipeline.may_async {
        // such a vhost's requests run on the blocking pool, where nothing
        // can wait for an upstream: every request would be a 500
        return Err(e.at(
            "modules",
            format!(
                "{} may block (a plugin with FLAG_MAY_BLOCK) and {} answers asynchronously: \
                 they cannot share a vhost (an asynchronous content handler cannot run on \
                 the blocking pool); put them in separate vhosts",
                pipeline
                    .names_with(crate::module::Hooks::BLOCKING)
                    .join(", "),
                pipeline.names_with(crate::module::Hooks::ASYNC).join(", "),
            ),
        ));
    }
    Ok((
        Vhost {
            info,
            counters: crate::stats::global().vhost(&label),
            https_redirect,
            listen: listen.into(),
            names_see_port,
            label,
            pipeline,
        },
        is_default,
        tls,
    ))
}

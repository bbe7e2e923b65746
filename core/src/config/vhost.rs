//! One `[[vhost]]` table built into a [`Vhost`]: its names, document root,
//! listeners, TLS files, module pipeline and rules, each checked with errors
//! that name the file, the vhost and the key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::{inherit, one_line, ConfigError, Err};
use crate::module::BuildContext;
use crate::pipeline::{Pipeline, Slot};
use crate::registry::{Registry, SharedState};
use crate::rule::{MatchSpec, Matcher, Rule};
use crate::vhost::{Vhost, VhostInfo};

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

pub(super) fn build_vhost(
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
    // lower-case, and without the one trailing dot of a fully qualified
    // name, as request hosts are compared (`example.com.` names the same
    // vhost as `example.com`)
    let names: Vec<String> = names
        .iter()
        .map(|n| {
            if n.starts_with('~') {
                n.clone()
            } else {
                let n = n.to_ascii_lowercase();
                let host = crate::vhost::strip_port(&n);
                match host.strip_suffix('.') {
                    Some(bare) if !bare.is_empty() => format!("{bare}{}", &n[host.len()..]),
                    _ => n,
                }
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

//! Helpers for the modules' unit tests: a module built from its table as the
//! configuration loader builds it, for a test vhost.

use std::path::Path;

use tessera_core::vhost::VhostInfo;
use tessera_core::{BuildContext, ModuleDecl};

/// Builds `M` from its table, given as JSON, for a vhost named `site.test`
/// whose document root is `root`, with `config_dir` as the configuration's
/// directory. Errors: the table's (an unknown key, a wrong type) or the
/// module's own, as one line.
pub(crate) fn build_in<M: ModuleDecl>(
    json: serde_json::Value,
    root: &Path,
    config_dir: &Path,
) -> Result<M, String> {
    let cfg: M::Config = serde_json::from_value(json).map_err(|e| e.to_string())?;
    let vhost = VhostInfo {
        index: 0,
        names: vec!["site.test".into()],
        document_root: root.to_path_buf(),
    };
    M::build(
        cfg,
        &BuildContext {
            vhost: &vhost,
            config_dir,
            shared: &Default::default(),
            rule_match: None,
            upstreams: &Default::default(),
        },
    )
}

/// [`build_in`] with the system's temporary directory as the document root
/// and `.` as the configuration's directory.
pub(crate) fn build<M: ModuleDecl>(json: serde_json::Value) -> Result<M, String> {
    build_in(json, &std::env::temp_dir(), Path::new("."))
}

//! `ConfigError`: one message that names the file, the vhost, the key and what is
//! wrong, in the manner of nginx's `"\"%s\" directive %s in %s:%ui"`.

use std::fmt;
use std::path::PathBuf;

/// A configuration error. Nothing is started when one is returned.
///
/// Displays as `FILE: vhost "NAME": KEY: REASON`, leaving out the vhost part for
/// errors outside any vhost and the key part for errors about the whole file, e.g.
/// `conf/server.toml: vhost "example.org": expires.url./img/: "3 mounths" is not a duration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The configuration file.
    pub file: PathBuf,
    /// The vhost's first server name (or `#N`, its 0-based position), if any.
    pub vhost: Option<String>,
    /// Dotted key path, e.g. `rule[1].match.path-regex`; empty for the whole file.
    pub key: String,
    /// What is wrong, in one line.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(v) = &self.vhost {
            write!(f, ": vhost \"{v}\"")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

//! `alias`: URL prefixes served from other directories (lighttpd mod_alias
//! `alias.url`, nginx `alias` in a `location`, Cherokee's per-rule
//! `document_root`).
//!
//! ```toml
//! [vhost.alias]
//! paths = { "/icons/" = "/usr/share/icons/", "/icons/big/" = "/srv/big-icons" }
//! ```
//!
//! In the request phase, the longest prefix that matches the path on a segment
//! boundary sets the request's document root
//! ([`tessera_core::Ctx::set_document_root`]): `/icons/x.png` is the file
//! `/usr/share/icons/x.png`, `/icons/big/y.png` is `/srv/big-icons/y.png`.
//! `/icons` (without its slash) names the directory itself, and static-file
//! redirects it to `/icons/`. The path is not changed and the rules are not
//! resolved again, so every module of the request still sees `/icons/x.png`.
//!
//! The traversal rules of static-file apply inside the alias directory as in a
//! document root: the path was decoded and normalized before (`/icons/../x` is
//! `/x`, outside the alias), hidden files, the symlink policy (`inside-root`
//! means inside the alias directory) and the open-file cache, keyed by the
//! alias directory too. A prefix matches whole segments only: `/icons` never
//! matches `/icons../x` (nginx's `location /icons { alias /d/; }` would open
//! `/d/../x`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use tessera_core::path::strip_segment_prefix;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl, Outcome};

/// Options of `[vhost.alias]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AliasConfig {
    /// URL prefix (decoded, starting with `/`; a trailing `/` is optional) ->
    /// directory (relative to the configuration file's directory unless
    /// absolute; must exist), e.g. `{ "/icons/" = "/usr/share/icons/" }`
    /// (lighttpd `alias.url`). The longest matching prefix wins. Default none:
    /// every request passes on unchanged.
    #[serde(default)]
    pub paths: BTreeMap<String, String>,
}

/// The `alias` module instance of one vhost or rule.
pub struct Alias {
    /// (prefix without its trailing slash, canonical directory), longest
    /// prefix first.
    entries: Vec<(Box<str>, Arc<Path>)>,
}

impl ModuleDecl for Alias {
    const NAME: &'static str = "alias";
    type Config = AliasConfig;

    /// # Errors
    /// One line naming the entry: a prefix that does not start with `/` or
    /// has an empty, `.` or `..` segment; two prefixes equal but for a
    /// trailing slash; a directory that is missing, not a directory, or
    /// contains the configuration file's directory.
    fn build(cfg: AliasConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        let mut entries: Vec<(Box<str>, Arc<Path>)> = Vec::new();
        for (prefix, dir) in &cfg.paths {
            let key = format!("paths.\"{prefix}\"");
            check_prefix(prefix).map_err(|reason| format!("{key}: {reason}"))?;
            let trimmed = prefix.trim_end_matches('/');
            if entries.iter().any(|(p, _)| **p == *trimmed) {
                return Err(format!(
                    "{key}: the same prefix as another entry (a trailing slash does not count)"
                ));
            }
            let root = crate::doc_root::configured(&key, dir, cx.config_dir)?;
            entries.push((trimmed.into(), root));
        }
        entries.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
        Ok(Alias { entries })
    }
}

/// A prefix is a decoded, normalized path: `/`, then segments that are not
/// empty, `.` or `..`, with an optional trailing `/`.
fn check_prefix(prefix: &str) -> Result<(), &'static str> {
    let Some(rest) = prefix.strip_prefix('/') else {
        return Err("must start with '/'");
    };
    if prefix.contains('\0') {
        return Err("must not contain NUL");
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Ok(());
    }
    if rest
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err("must be a normalized path (no empty, '.' or '..' segment)");
    }
    Ok(())
}

impl Alias {
    /// The entry for `path`: the longest prefix matching whole segments.
    fn lookup(&self, path: &str) -> Option<&(Box<str>, Arc<Path>)> {
        self.entries
            .iter()
            .find(|(prefix, _)| strip_segment_prefix(path, prefix).is_some())
    }
}

impl Module for Alias {
    fn hooks(&self) -> Hooks {
        Hooks::REQUEST
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        if let Some((prefix, root)) = self.lookup(cx.path()) {
            // cannot fail: the prefix matched the path just now
            let _ = cx.set_document_root(root.clone(), prefix);
        }
        Outcome::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc_root::testing;

    fn build(dir: &Path, paths: &[(&str, &str)]) -> Result<Alias, String> {
        let cfg = AliasConfig {
            paths: paths
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        testing::build(cfg, dir)
    }

    fn tmp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tessera-alias-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for sub in ["www", "icons", "big", "conf"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::canonicalize(d).unwrap()
    }

    /// (document root, path below it) after the request phase.
    fn run(a: &Alias, dir: &Path, path: &str) -> (std::path::PathBuf, String) {
        testing::request(a, dir, path).expect("alias never answers")
    }

    #[test]
    fn longest_prefix_wins_on_segment_boundaries() {
        let d = tmp("longest");
        let a = build(&d, &[("/icons/", "icons"), ("/icons/big", "big/")]).unwrap();
        assert_eq!(
            run(&a, &d, "/icons/x.png"),
            (d.join("icons"), "/x.png".into())
        );
        assert_eq!(
            run(&a, &d, "/icons/big/y.png"),
            (d.join("big"), "/y.png".into())
        );
        assert_eq!(
            run(&a, &d, "/icons/bigger"),
            (d.join("icons"), "/bigger".into())
        );
        assert_eq!(run(&a, &d, "/icons"), (d.join("icons"), "".into()));
        assert_eq!(
            run(&a, &d, "/icons../x"),
            (d.join("www"), "/icons../x".into())
        );
        assert_eq!(run(&a, &d, "/other"), (d.join("www"), "/other".into()));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn configuration_errors_name_the_entry() {
        let d = tmp("errors");
        let err = |paths: &[(&str, &str)]| build(&d, paths).err().unwrap();
        assert!(err(&[("icons/", "icons")]).starts_with("paths.\"icons/\": must start with '/'"));
        assert!(err(&[("/a/../b/", "icons")]).contains("normalized"));
        assert!(err(&[("/a//b/", "icons")]).contains("normalized"));
        assert!(err(&[("/a/", "missing")]).starts_with("paths.\"/a/\": \"missing\": "));
        assert!(err(&[("/a", "icons"), ("/a/", "big")]).contains("same prefix"));
        assert!(err(&[("/a/", "")]).contains("must not be empty"));
        std::fs::write(d.join("file"), "x").unwrap();
        assert!(err(&[("/a/", "file")]).contains("is not a directory"));
        // a directory holding the configuration would serve server.toml
        assert!(err(&[("/a/", ".")]).contains("contains the configuration"));
        assert!(build(&d, &[("/", "icons")]).is_ok());
        let _ = std::fs::remove_dir_all(&d);
    }
}

//! Document roots that modules set per request
//! ([`tessera_core::Ctx::set_document_root`]): directories named in the
//! configuration ([`configured`]), and the canonical forms of roots computed
//! per request (`userdir`'s `~/public_html`, `mass-vhost`'s `path-pattern`),
//! checked with one `stat` ([`RootCache`]).
//!
//! A root handed to [`tessera_core::Ctx::set_document_root`] must be canonical
//! (static-file's symlink policies compare the opened file's real path with
//! it), but `realpath` costs one `lstat` per component. This cache keeps, per
//! computed path, the directory's identity (device and inode, as `stat`
//! follows links) and its canonical form: a lookup `stat`s the path once and
//! reuses the canonical form while the identity is unchanged. A directory
//! replaced, or a link retargeted (`www.example.org -> example.org`), changes
//! the identity, and the canonical form is computed again.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// The directory `value` of the option `key`, relative to `config_dir` unless
/// absolute, in canonical form (what [`tessera_core::Ctx::set_document_root`]
/// wants). Refused like a vhost's `document-root`: missing, not a directory,
/// or containing the configuration file's directory (it would serve
/// `server.toml`, htpasswd files and keys).
///
/// # Errors
/// One line naming `key` and `value`: `paths."/icons/": "/nope": No such file
/// or directory (os error 2)`.
pub fn configured(key: &str, value: &str, config_dir: &Path) -> Result<Arc<Path>, String> {
    if value.is_empty() {
        return Err(format!("{key}: must not be empty"));
    }
    let dir = std::fs::canonicalize(config_dir.join(value))
        .map_err(|e| format!("{key}: \"{value}\": {e}"))?;
    if !dir.is_dir() {
        return Err(format!("{key}: \"{value}\" is not a directory"));
    }
    if std::fs::canonicalize(config_dir).is_ok_and(|c| c.starts_with(&dir)) {
        return Err(format!(
            "{key}: \"{}\" contains the configuration file's directory",
            dir.display()
        ));
    }
    Ok(dir.into())
}

/// Most paths kept (4096); when full, the cache is emptied and refills.
pub const MAX_ROOTS: usize = 4096;

/// What is kept of one computed root: device, inode, canonical form.
type Known = (u64, u64, Arc<Path>);

/// Computed document root -> (device, inode, canonical form), shared by the
/// workers of one module instance.
#[derive(Default)]
pub struct RootCache {
    map: RwLock<HashMap<PathBuf, Known>>,
}

impl RootCache {
    /// The canonical form of `path` when it is a directory (symbolic links
    /// followed); `None` when it is missing, not a directory or unreadable.
    /// One `stat` when `path` was seen before with the same identity; a
    /// `realpath` besides otherwise.
    pub fn lookup(&self, path: &Path) -> Option<Arc<Path>> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_dir() {
            return None;
        }
        let id = (meta.dev(), meta.ino());
        {
            let map = self.map.read().unwrap_or_else(|e| e.into_inner());
            if let Some((dev, ino, canon)) = map.get(path) {
                if (*dev, *ino) == id {
                    return Some(canon.clone());
                }
            }
        }
        let canon: Arc<Path> = std::fs::canonicalize(path).ok()?.into();
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_ROOTS {
            map.clear();
        }
        map.insert(path.to_path_buf(), (id.0, id.1, canon.clone()));
        Some(canon)
    }

    /// Number of paths kept (for tests).
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when no path is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_follows_a_retargeted_link() {
        let base = std::env::temp_dir().join(format!("tessera-rootcache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("a")).unwrap();
        std::fs::create_dir_all(base.join("b")).unwrap();
        std::fs::write(base.join("file"), "x").unwrap();
        let base = std::fs::canonicalize(&base).unwrap();
        std::os::unix::fs::symlink("a", base.join("link")).unwrap();
        let c = RootCache::default();
        assert_eq!(
            c.lookup(&base.join("link")).as_deref(),
            Some(&*base.join("a"))
        );
        assert_eq!(c.len(), 1);
        // the same identity: the kept form
        assert_eq!(
            c.lookup(&base.join("link")).as_deref(),
            Some(&*base.join("a"))
        );
        std::fs::remove_file(base.join("link")).unwrap();
        std::os::unix::fs::symlink("b", base.join("link")).unwrap();
        assert_eq!(
            c.lookup(&base.join("link")).as_deref(),
            Some(&*base.join("b"))
        );
        assert!(c.lookup(&base.join("file")).is_none(), "not a directory");
        assert!(c.lookup(&base.join("missing")).is_none());
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// Helpers for the unit tests of the modules that set document roots.
#[cfg(test)]
pub(crate) mod testing {
    use std::borrow::Cow;
    use std::path::{Path, PathBuf};

    use tessera_core::vhost::VhostInfo;
    use tessera_core::{BuildContext, Ctx, Module, ModuleDecl, Outcome};

    fn vhost(dir: &Path) -> VhostInfo {
        VhostInfo {
            index: 0,
            names: vec![],
            document_root: dir.join("www"),
        }
    }

    /// Builds `M` from `cfg` for a vhost whose document root is `dir/www`,
    /// with `dir` as the configuration's directory.
    pub(crate) fn build<M: ModuleDecl>(cfg: M::Config, dir: &Path) -> Result<M, String> {
        M::build(
            cfg,
            &BuildContext {
                vhost: &vhost(dir),
                config_dir: dir,
                shared: &Default::default(),
                rule_match: None,
                upstreams: &Default::default(),
            },
        )
    }

    /// Runs the request phase of `m` for `path` on that vhost: the status
    /// when it answers, else the request's document root and the path below
    /// it (the path itself is checked to be unchanged).
    pub(crate) fn request(
        m: &dyn Module,
        dir: &Path,
        path: &str,
    ) -> Result<(PathBuf, String), u16> {
        let req = tessera_core::actix_web::test::TestRequest::default().to_http_request();
        let v = vhost(dir);
        let mut cx = Ctx::new(&req, &v, Cow::Owned(path.to_owned()));
        match m.on_request(&mut cx) {
            Outcome::Respond(r) => Err(r.status().as_u16()),
            Outcome::Continue => {
                assert_eq!(cx.path(), path, "the path is never changed");
                Ok((cx.document_root().to_path_buf(), cx.path_in_root().into()))
            }
        }
    }
}

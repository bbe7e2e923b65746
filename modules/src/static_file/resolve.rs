//! From a decoded, normalized request path to an open file under the document
//! root, with the symlink policy applied to every component (case B22).

use std::fs::{File, Metadata};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// When symbolic links are followed (lighttpd `server.follow-symlink`, nginx
/// `disable_symlinks`, Apache `SymLinksIfOwnerMatch`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SymlinkPolicy {
    /// Follow links whose final target stays inside the document root (default).
    #[default]
    InsideRoot,
    /// Follow every link, wherever it points.
    Always,
    /// Refuse any path with a link in any component.
    Never,
    /// Follow a link only when the link and its target have the same owner.
    OwnerMatch,
}

/// What a path resolves to.
#[derive(Debug)]
pub enum Resolved {
    /// Nothing there (or a file asked for as a directory).
    NotFound,
    /// There, but refused: symlink policy, permissions, or not a regular file.
    Forbidden,
    /// Could not be opened for want of resources (`EMFILE`, `ENFILE`,
    /// `ENOMEM`): a 503, never a 404 for a file that exists.
    Unavailable,
    /// A directory.
    Dir,
    /// A regular file, opened, with the metadata of the open descriptor (so that
    /// size and validators describe the bytes that will be sent, case B42).
    File(File, Metadata),
}

fn io_refusal(e: &std::io::Error) -> Resolved {
    match (e.kind(), e.raw_os_error()) {
        (ErrorKind::PermissionDenied, _) => Resolved::Forbidden,
        (_, Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)) => Resolved::Unavailable,
        _ => Resolved::NotFound,
    }
}

/// Opens `full` (= `root` joined with the request path), applying `policy`.
/// `root` must be canonical.
///
/// `never` lets the kernel refuse links while it opens: `openat2` with
/// `RESOLVE_NO_SYMLINKS` (Linux 5.6+), else an `O_NOFOLLOW` walk from the root
/// (nginx `disable_symlinks on`). No path is read back, so a file replaced by
/// write-then-rename while it is opened is served, never refused (case B42).
/// The other policies check the file that was actually opened (its path as the
/// kernel resolved it, `/proc/self/fd/N`), not a path looked up before the
/// open: a symlink swapped between a check and the open cannot leak a file.
/// Every open is non-blocking, so a FIFO in the document root cannot hang a
/// worker.
pub fn open(root: &Path, full: &Path, policy: SymlinkPolicy) -> Resolved {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = match policy {
        SymlinkPolicy::Never => no_symlinks::open(root, full),
        _ => std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(full),
    };
    let file = match opened {
        Ok(f) => f,
        Err(e) => return io_refusal(&e),
    };
    if matches!(
        policy,
        SymlinkPolicy::InsideRoot | SymlinkPolicy::OwnerMatch
    ) {
        let real = match opened_path(&file, full) {
            Ok(c) => c,
            Err(e) => return io_refusal(&e),
        };
        let allowed = if policy == SymlinkPolicy::InsideRoot {
            real.starts_with(root)
        } else {
            real == full || owners_match(root, full)
        };
        if !allowed {
            return Resolved::Forbidden;
        }
    }
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return io_refusal(&e),
    };
    if meta.is_dir() {
        Resolved::Dir
    } else if meta.is_file() {
        Resolved::File(file, meta)
    } else {
        Resolved::Forbidden
    }
}

/// The path of the open file as the kernel resolved it (Linux `/proc/self/fd`),
/// or, where that is unavailable, the canonical form of `full`.
fn opened_path(file: &File, full: &Path) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(p) => Ok(p),
        Err(_) => std::fs::canonicalize(full),
    }
}

/// Opening with no symbolic link in any component below the root. A link is
/// `ELOOP` (or `EXDEV`), reported as `PermissionDenied` so that it is a 403.
mod no_symlinks {
    use std::fs::File;
    use std::io;
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Component, Path};

    use rustix::fs::{Mode, OFlags, CWD};
    use rustix::io::Errno;

    const FILE_FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::NONBLOCK)
        .union(OFlags::CLOEXEC)
        .union(OFlags::NOFOLLOW);

    fn refusal(e: Errno) -> io::Error {
        if e == Errno::LOOP || e == Errno::XDEV || e == Errno::MLINK {
            io::Error::from(io::ErrorKind::PermissionDenied)
        } else {
            e.into()
        }
    }

    /// Opens `full` (inside the canonical `root`) refusing every link.
    pub(super) fn open(root: &Path, full: &Path) -> io::Result<File> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Some(r) = openat2(full) {
            return r;
        }
        walk(root, full)
    }

    /// `openat2(RESOLVE_NO_SYMLINKS)`; `None` where the kernel lacks it
    /// (remembered, so that an old kernel costs one failed call per process).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn openat2(full: &Path) -> Option<io::Result<File>> {
        use rustix::fs::ResolveFlags;
        use std::sync::atomic::{AtomicBool, Ordering};
        static MISSING: AtomicBool = AtomicBool::new(false);
        if MISSING.load(Ordering::Relaxed) {
            return None;
        }
        match rustix::fs::openat2(
            CWD,
            full,
            FILE_FLAGS,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => Some(Ok(File::from(fd))),
            // no openat2 (before Linux 5.6), or a seccomp filter refusing it
            Err(Errno::NOSYS) | Err(Errno::PERM) => {
                MISSING.store(true, Ordering::Relaxed);
                None
            }
            // openat2 may ask to be retried when a rename raced the lookup
            Err(Errno::AGAIN) => None,
            Err(e) => Some(Err(refusal(e))),
        }
    }

    /// The portable form: each component below `root` opened with
    /// `O_NOFOLLOW` relative to its parent's descriptor.
    pub(super) fn walk(root: &Path, full: &Path) -> io::Result<File> {
        let rel = full
            .strip_prefix(root)
            .map_err(|_| io::Error::from(io::ErrorKind::PermissionDenied))?;
        // `components()` forgets a trailing slash, which must still mean "a
        // directory" (a file asked for as `f/` is not found)
        let dir_wanted = full.as_os_str().as_bytes().ends_with(b"/");
        let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let mut fd = rustix::fs::openat(CWD, root, dir_flags, Mode::empty()).map_err(refusal)?;
        // No O_DIRECTORY below the root: with O_NOFOLLOW it would turn a link
        // into ENOTDIR; without it a link is ELOOP and a file used as a
        // directory fails at the next component with ENOTDIR.
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Err(io::Error::from(io::ErrorKind::PermissionDenied));
            };
            fd = rustix::fs::openat(&fd, name, FILE_FLAGS, Mode::empty()).map_err(refusal)?;
        }
        if dir_wanted
            && !rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode).is_dir()
        {
            return Err(Errno::NOTDIR.into());
        }
        Ok(File::from(fd))
    }
}

/// True when every symlink among the components of `full` below `root` has the
/// same owner as its target.
fn owners_match(root: &Path, full: &Path) -> bool {
    let Ok(rel) = full.strip_prefix(root) else {
        return false;
    };
    let mut p = PathBuf::from(root);
    for c in rel.components() {
        p.push(c);
        let Ok(l) = std::fs::symlink_metadata(&p) else {
            return false;
        };
        if l.file_type().is_symlink() {
            match std::fs::metadata(&p) {
                Ok(t) if t.uid() == l.uid() => {}
                _ => return false,
            }
        }
    }
    true
}

/// True when a path segment names a hidden file (starts with `.`), except
/// `/.well-known/` as the first segment (RFC 8615, ACME HTTP-01; case B23).
pub fn has_hidden_segment(path: &str) -> bool {
    // most paths have no dot right after a slash: one byte scan, no
    // splitting (str::contains costs twice as much on paths this short)
    let b = path.as_bytes();
    if b.first() != Some(&b'.') && !b.windows(2).any(|w| w == b"/.") {
        return false;
    }
    path.split('/')
        .filter(|s| !s.is_empty())
        .enumerate()
        .any(|(i, s)| s.starts_with('.') && !(i == 0 && s == ".well-known"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden() {
        assert!(has_hidden_segment("/.env"));
        assert!(has_hidden_segment("/.git/"));
        assert!(has_hidden_segment("/a/.htpasswd"));
        assert!(!has_hidden_segment("/.well-known/acme-challenge/t1"));
        assert!(has_hidden_segment("/a/.well-known/x"));
        assert!(!has_hidden_segment("/a.b/c"));
        assert!(!has_hidden_segment("/index.html"));
        assert!(has_hidden_segment(".env"));
        assert!(has_hidden_segment("a/.x"));
        assert!(has_hidden_segment("//a//.x"));
        assert!(!has_hidden_segment("//.well-known//t"));
        assert!(!has_hidden_segment("/a./b."));
    }

    /// The byte scan in front answers as the split alone would, for every
    /// path of up to 8 characters over `/`, `.` and `a`, and with
    /// `.well-known` in each place.
    #[test]
    fn the_fast_path_agrees_with_the_split() {
        fn split_only(path: &str) -> bool {
            path.split('/')
                .filter(|s| !s.is_empty())
                .enumerate()
                .any(|(i, s)| s.starts_with('.') && !(i == 0 && s == ".well-known"))
        }
        let mut paths = vec![String::new()];
        let mut level = vec![String::new()];
        for _ in 0..8 {
            level = level
                .iter()
                .flat_map(|p| ["/", ".", "a"].map(|c| format!("{p}{c}")))
                .collect();
            paths.extend(level.iter().cloned());
        }
        for p in paths.clone() {
            if p.len() <= 4 {
                paths.push(format!("{p}.well-known{p}"));
                paths.push(format!("/.well-known{p}"));
            }
        }
        for p in &paths {
            assert_eq!(has_hidden_segment(p), split_only(p), "{p:?}");
        }
    }

    #[test]
    fn swapped_symlink_never_leaks_a_file_outside_the_root() {
        use std::io::Read;
        let base = std::env::temp_dir().join(format!("tessera-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("inside")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(root.join("inside/f"), "in").unwrap();
        std::fs::write(base.join("outside/f"), "OUT").unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let link = root.join("race");
        std::os::unix::fs::symlink("inside", &link).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                let tmp = root.join("race.tmp");
                for i in 0..20_000 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let target = if i % 2 == 0 { "../outside" } else { "inside" };
                    let _ = std::fs::remove_file(&tmp);
                    std::os::unix::fs::symlink(target, &tmp).unwrap();
                    std::fs::rename(&tmp, &link).unwrap();
                }
            });
            for _ in 0..20_000 {
                if let Resolved::File(mut f, _) =
                    open(&root, &root.join("race/f"), SymlinkPolicy::InsideRoot)
                {
                    let mut s = String::new();
                    f.read_to_string(&mut s).unwrap();
                    assert_eq!(s, "in", "a file outside the root was opened");
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn symlink_policies() {
        let base = std::env::temp_dir().join(format!("tessera-resolve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(base.join("outside.txt"), "x").unwrap();
        std::fs::write(root.join("d/in.txt"), "y").unwrap();
        std::os::unix::fs::symlink(base.join("outside.txt"), root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("d/in.txt"), root.join("in")).unwrap();
        std::os::unix::fs::symlink(root.join("d"), root.join("dl")).unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let o = |p: &str, pol| open(&root, &root.join(p), pol);
        use SymlinkPolicy::*;
        assert!(matches!(o("out", InsideRoot), Resolved::Forbidden));
        assert!(matches!(o("in", InsideRoot), Resolved::File(..)));
        assert!(matches!(o("dl/in.txt", InsideRoot), Resolved::File(..)));
        assert!(matches!(o("out", Always), Resolved::File(..)));
        assert!(matches!(o("in", Never), Resolved::Forbidden));
        assert!(matches!(o("dl/in.txt", Never), Resolved::Forbidden));
        assert!(matches!(o("d/in.txt", Never), Resolved::File(..)));
        assert!(matches!(o("out", OwnerMatch), Resolved::File(..)));
        assert!(matches!(o("d", InsideRoot), Resolved::Dir));
        assert!(matches!(o("nope", InsideRoot), Resolved::NotFound));
        assert!(matches!(o("d/in.txt/", InsideRoot), Resolved::NotFound));
        assert!(matches!(o("d/in.txt/", Never), Resolved::NotFound));
        assert!(matches!(o("d", Never), Resolved::Dir));
        assert!(matches!(o("", Never), Resolved::Dir));
        assert!(matches!(o("nope", Never), Resolved::NotFound));
        // the portable walk answers as openat2 does
        let w = |p: &str| no_symlinks::walk(&root, &root.join(p)).map_err(|e| e.kind());
        use std::io::ErrorKind::{NotADirectory, NotFound, PermissionDenied};
        assert!(w("d/in.txt").is_ok());
        assert!(w("d").is_ok());
        assert_eq!(w("in").err(), Some(PermissionDenied));
        assert_eq!(w("dl/in.txt").err(), Some(PermissionDenied));
        assert_eq!(w("nope").err(), Some(NotFound));
        assert_eq!(w("d/in.txt/").err(), Some(NotADirectory));
        let _ = std::fs::remove_dir_all(&base);
    }
}

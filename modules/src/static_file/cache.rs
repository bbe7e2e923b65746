//! The open-file cache (nginx `open_file_cache`, lighttpd's stat cache): what
//! a request path resolved to, with its validators and header values computed
//! once per file version, and the bytes of small files held in memory.
//!
//! # What an entry holds
//! Keyed by the decoded, normalized request path of one `static-file`
//! instance (or, for a request whose document root a module such as `alias`,
//! `userdir` or `mass-vhost` set, by that root and the path below it, so an
//! entry is never served for another root), an entry holds the file it resolved to (index files included),
//! the file's identity (device, inode, size, modification and change times),
//! the `Content-Type`, `ETag` and `Last-Modified` header values, and, for files
//! up to [`SMALL_FILE`](super::SMALL_FILE) bytes while the memory cap allows,
//! the file's bytes as shared [`Bytes`]. Larger files are opened per request
//! (open, `fstat` to check the identity, `pread`), without the path walk of the
//! symlink policy. Paths that resolve to nothing, to a directory or that are
//! refused are never cached.
//!
//! # How long a change can go unseen (the bound)
//! - An entry is trusted for `open-file-cache-valid` milliseconds after it was
//!   last checked; then the next request checks it with one `stat` of the path
//!   (and of the directory, for an index file that is not the first of
//!   `index-files`) and drops it when the identity changed. A changed file (a
//!   write, a truncation, an atomic rename over it, a deletion) is therefore
//!   served as it is on disk at most `open-file-cache-valid` ms after the change.
//!   With `0` (the default) every request makes that `stat`, and a change is
//!   seen by the next request.
//! - A file whose change time is less than [`RACY`] old is never cached: writes
//!   within one tick of the file system's clock keep the same times, so only a
//!   file that has been left alone for a while is known by its identity. This is
//!   git's "racily clean" rule; it also means that a file being rewritten is
//!   always read afresh.
//! - The symlink policy and the whole path are checked again (the full
//!   resolution of an uncached request) at least every [`RESOLVE_EVERY`]; in
//!   between, a path component replaced by a link to a directory that holds the
//!   very same file (same device and inode) goes unnoticed.
//!
//! # Size
//! At most `open-file-cache` entries per `static-file` instance (each vhost, and
//! each rule with its own `static-file` table, has one) (when full, the
//! least recently used eighth is dropped) and `memory-cache-size` bytes of file
//! content (when full, new entries keep only their metadata and header values,
//! and their files are read per request).

use std::collections::HashMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::FileInfo;

/// A file changed less than this long ago (2 s) is not cached (see the module
/// documentation). Above the coarsest time stamp granularity of Linux file
/// systems in use for web roots (1 s; FAT's 2 s only for mtime).
pub const RACY: Duration = Duration::from_secs(2);

/// An entry's path is resolved again in full (symlink policy, every
/// component) at least this often (5 s).
pub const RESOLVE_EVERY: Duration = Duration::from_secs(5);

/// What identifies one version of a file: a write, truncation, rename over it,
/// `touch` or `chmod` changes at least the change time; replacing the file
/// changes the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

impl Identity {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &Metadata) -> Self {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            mode: meta.mode(),
        }
    }

    /// True when the file changed less than [`RACY`] before `now`, or its
    /// change time is in the future.
    pub fn is_racy(&self, now: SystemTime) -> bool {
        let ctime = if self.ctime.0 >= 0 {
            UNIX_EPOCH
                + Duration::new(
                    self.ctime.0 as u64,
                    self.ctime.1.clamp(0, 999_999_999) as u32,
                )
        } else {
            return false;
        };
        match now.duration_since(ctime) {
            Ok(age) => age < RACY,
            Err(_) => true,
        }
    }
}

/// Milliseconds since the first call (a monotonic clock for entry ages;
/// `gateway`'s check-local memory uses it too).
pub(crate) fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// One cached path.
pub struct Entry {
    /// The file served (for a directory path: its index file).
    pub path: PathBuf,
    /// For an index file other than the first of `index-files`: the directory
    /// and its identity, checked too (a new, earlier index file changes it).
    pub dir: Option<(PathBuf, Identity)>,
    /// The file's identity when it was read.
    pub id: Identity,
    /// Validators and header values.
    pub info: FileInfo,
    /// The file's bytes, when it is small and the memory cap allowed.
    pub content: Option<Bytes>,
    checked: AtomicU64,
    resolved: u64,
    used: AtomicU64,
}

impl Entry {
    /// A fresh entry, resolved and checked now.
    pub fn new(
        path: PathBuf,
        dir: Option<(PathBuf, Identity)>,
        id: Identity,
        info: FileInfo,
        content: Option<Bytes>,
    ) -> Self {
        let now = now_ms();
        Entry {
            path,
            dir,
            id,
            info,
            content,
            checked: AtomicU64::new(now),
            resolved: now,
            used: AtomicU64::new(now),
        }
    }
}

struct Inner {
    // foldhash, seeded per process: SipHash cost 200 instructions a lookup
    // (callgrind); the keys are paths of existing files only
    map: HashMap<Box<str>, Arc<Entry>, foldhash::quality::RandomState>,
    /// Bytes of `content` held by the entries in `map`.
    bytes: usize,
}

/// The open-file cache of one `static-file` instance, shared by all workers.
pub struct FileCache {
    inner: RwLock<Inner>,
    max_entries: usize,
    max_bytes: usize,
    valid_ms: u64,
    lstat: bool,
}

impl FileCache {
    /// A cache of at most `max_entries` entries and `max_bytes` bytes of file
    /// content, whose entries are trusted for `valid` after each check. With
    /// `lstat`, the final path component is checked without following a
    /// symbolic link (the `never` symlink policy).
    pub fn new(max_entries: usize, max_bytes: usize, valid: Duration, lstat: bool) -> Self {
        FileCache {
            inner: RwLock::new(Inner {
                map: HashMap::default(),
                bytes: 0,
            }),
            max_entries,
            max_bytes,
            valid_ms: valid.as_millis() as u64,
            lstat,
        }
    }

    /// The bytes of file content the cache may hold.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The entry for `path`, checked as the module documentation describes;
    /// `None` when there is none or it is out of date (it is then dropped).
    pub fn get(&self, path: &str) -> Option<Arc<Entry>> {
        let e = {
            let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
            inner.map.get(path)?.clone()
        };
        let now = now_ms();
        // Written at most once a second: workers on other cores read the same
        // entry, and a store per request would bounce its cache line.
        if now.saturating_sub(e.used.load(Ordering::Relaxed)) >= 1000 {
            e.used.store(now, Ordering::Relaxed);
        }
        if now.saturating_sub(e.resolved) >= RESOLVE_EVERY.as_millis() as u64 {
            self.remove(path, &e);
            return None;
        }
        if now.saturating_sub(e.checked.load(Ordering::Relaxed)) < self.valid_ms {
            return Some(e);
        }
        if self.unchanged(&e) {
            e.checked.store(now, Ordering::Relaxed);
            Some(e)
        } else {
            self.remove(path, &e);
            None
        }
    }

    /// One `stat` (two for an index file with a directory check): true when
    /// the file on disk is still the one cached.
    fn unchanged(&self, e: &Entry) -> bool {
        let meta = if self.lstat {
            std::fs::symlink_metadata(&e.path)
        } else {
            std::fs::metadata(&e.path)
        };
        if !meta.is_ok_and(|m| Identity::of(&m) == e.id) {
            return false;
        }
        match &e.dir {
            None => true,
            Some((dir, id)) => std::fs::metadata(dir).is_ok_and(|m| Identity::of(&m) == *id),
        }
    }

    /// Drops the entry for `path` if it is still `e`.
    pub fn remove(&self, path: &str, e: &Arc<Entry>) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if inner.map.get(path).is_some_and(|cur| Arc::ptr_eq(cur, e)) {
            if let Some(old) = inner.map.remove(path) {
                inner.bytes -= old.content.as_ref().map_or(0, Bytes::len);
            }
        }
    }

    /// Caches `entry` for `path`, replacing any entry there. While the entry
    /// count is at its limit, the least recently used eighth of the entries is
    /// dropped first; when the entry's content would exceed the memory cap, the
    /// entry is kept without it (its file is then read per request).
    pub fn insert(&self, path: &str, mut entry: Entry) {
        if self.max_entries == 0 {
            return;
        }
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = inner.map.remove(path) {
            inner.bytes -= old.content.as_ref().map_or(0, Bytes::len);
        }
        while inner.map.len() >= self.max_entries {
            evict(&mut inner);
        }
        let size = entry.content.as_ref().map_or(0, Bytes::len);
        if inner.bytes + size > self.max_bytes {
            entry.content = None;
        } else {
            inner.bytes += size;
        }
        inner.map.insert(path.into(), Arc::new(entry));
    }

    /// Number of entries (for tests and statistics).
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }

    /// True when the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Drops the least recently used eighth (at least one) of the entries.
fn evict(inner: &mut Inner) {
    let mut by_age: Vec<(u64, Box<str>)> = inner
        .map
        .iter()
        .map(|(k, e)| (e.used.load(Ordering::Relaxed), k.clone()))
        .collect();
    let n = (by_age.len() / 8).max(1);
    by_age.select_nth_unstable_by_key(n - 1, |(used, _)| *used);
    for (_, k) in by_age.into_iter().take(n) {
        if let Some(old) = inner.map.remove(&k) {
            inner.bytes -= old.content.as_ref().map_or(0, Bytes::len);
        }
    }
}

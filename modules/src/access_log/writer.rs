//! The log file writer: lines are appended to a pending batch under a short
//! lock on the request path, and a [`Writer`] actor on its own thread (an actix
//! [`SyncArbiter`] with one thread) writes whole batches to the file, so blocking
//! file I/O never runs on an HTTP worker (nginx's buffered `access_log … buffer=`,
//! lighttpd's `accesslog` buffer flushed by the server, not by the request).
//!
//! One [`LogFile`] exists per file and configuration, shared by every vhost and
//! rule that names the file ([`LogFiles`]), so lines from several vhosts never
//! interleave inside a line.
//!
//! Ordering and completeness: the pending batch (`buf`) and the file (`out`) sit
//! behind two mutexes. Whoever writes — the actor on [`Flush`], [`Sync`] or
//! [`Reopen`], or the shutdown path ([`LogFile::write_pending`]) — takes `out`
//! first, then swaps the batch out of `buf` and writes it while still holding
//! `out`. Batches therefore reach the file whole and in the order they were
//! logged, and when `write_pending` returns every line appended before the call
//! is in the file (or counted as dropped after a write error).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use actix::{Actor, Addr, Handler, Message, SyncArbiter, SyncContext};

/// How long the writer lets lines gather after the first line of a batch
/// before it writes them (50 ms; nginx `access_log … buffer= flush=`): under
/// load that is one `write` per batch instead of one write and one writer
/// wake-up per few requests. A line reaches the file at most this long after it
/// was logged (at once on shutdown, reopen or sync).
pub const FLUSH_DELAY: Duration = Duration::from_millis(50);

/// The most bytes a file's pending batch may hold (8 MiB). A line that would
/// make the batch larger is dropped and counted in [`LogFile::lines_dropped`]:
/// the server keeps serving when the disk cannot keep up, as nginx does when its
/// log writes fail.
pub const MAX_PENDING: usize = 8 << 20;

/// A batch buffer larger than this (1 MiB) is freed after it was written, so that
/// a burst does not pin memory for the life of the configuration.
const KEEP_CAPACITY: usize = 1 << 20;

/// The open file and the spare batch buffer, owned by whoever holds the lock.
struct Output {
    file: File,
    /// The batch being written; swapped with the pending one, so that the two
    /// buffers alternate and steady-state logging does not allocate.
    spare: Vec<u8>,
    /// True after a failed write, until a write succeeds (warn once per episode).
    failing: bool,
}

/// State shared by the request path, the actor and the shutdown path.
struct Shared {
    path: PathBuf,
    /// Lines appended but not yet written, each ending in `\n`.
    buf: Mutex<Vec<u8>>,
    /// The file. Always locked before `buf` when both are held.
    out: Mutex<Output>,
    /// Kept by path in the process-wide stats, so they survive reloads.
    counters: Arc<tessera_core::stats::LogCounters>,
    warned_full: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain bytes behind: keep logging.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().append(true).create(true).open(path)
}

impl Shared {
    /// Writes the pending batch. Blocks on file I/O.
    fn write_pending(&self) {
        let mut out = lock(&self.out);
        self.write_locked(&mut out);
    }

    fn write_locked(&self, out: &mut Output) {
        {
            let mut buf = lock(&self.buf);
            if buf.is_empty() {
                return;
            }
            std::mem::swap(&mut *buf, &mut out.spare);
        }
        // SIMD search: a byte-by-byte count cost about 475 instructions per
        // Combined line (callgrind), a quarter of the logging's cost
        let lines = memchr::memchr_iter(b'\n', &out.spare).count() as u64;
        match out.file.write_all(&out.spare) {
            Ok(()) => {
                self.counters.written.fetch_add(lines, Ordering::Relaxed);
                if out.failing {
                    out.failing = false;
                    tracing::info!(path = %self.path.display(), "access log writable again");
                }
            }
            Err(e) => {
                self.counters.dropped.fetch_add(lines, Ordering::Relaxed);
                if !out.failing {
                    out.failing = true;
                    tracing::error!(path = %self.path.display(), error = %e, "cannot write access log; dropping lines");
                }
            }
        }
        out.spare.clear();
        if out.spare.capacity() > KEEP_CAPACITY {
            out.spare = Vec::new();
        }
    }

    /// Writes pending lines to the current file, then reopens the file by path.
    fn reopen(&self) -> io::Result<()> {
        let mut out = lock(&self.out);
        self.write_locked(&mut out);
        out.file = open_append(&self.path)?;
        out.failing = false;
        Ok(())
    }
}

/// One access log file: the pending batch, the counters, and the address of its
/// [`Writer`] actor. Shared (`Arc`) by every module instance that logs to the file.
///
/// Dropping the last handle writes what is still pending and lets the actor's
/// thread end.
pub struct LogFile {
    shared: Arc<Shared>,
    /// `None` when the file was opened outside a running actix System: lines are
    /// then written by the logging thread itself.
    addr: Option<Addr<Writer>>,
}

impl LogFile {
    /// Opens `path` for append (created if missing; its parent must exist) and,
    /// when called inside a running actix System, starts its [`Writer`] on a
    /// dedicated thread. Outside a System (some tests, tools) every
    /// [`append`](Self::append) writes synchronously instead.
    ///
    /// # Errors
    /// The OS error from opening the file.
    pub fn open(path: PathBuf) -> io::Result<LogFile> {
        let file = open_append(&path)?;
        let counters = tessera_core::stats::global().log_file(&path);
        let shared = Arc::new(Shared {
            path,
            buf: Mutex::new(Vec::new()),
            out: Mutex::new(Output {
                file,
                spare: Vec::new(),
                failing: false,
            }),
            counters,
            warned_full: AtomicBool::new(false),
        });
        let addr = actix::System::try_current().map(|_| {
            let s = Arc::clone(&shared);
            SyncArbiter::start(1, move || Writer {
                shared: Arc::clone(&s),
            })
        });
        Ok(LogFile { shared, addr })
    }

    /// The file's path, absolute.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The writer actor's address (`None` outside an actix System).
    pub fn addr(&self) -> Option<&Addr<Writer>> {
        self.addr.as_ref()
    }

    /// Lines written to the file since the process started.
    pub fn lines_written(&self) -> u64 {
        self.shared.counters.written.load(Ordering::Relaxed)
    }

    /// Lines dropped so far: the pending batch was full ([`MAX_PENDING`]) or a
    /// write failed.
    pub fn lines_dropped(&self) -> u64 {
        self.shared.counters.dropped.load(Ordering::Relaxed)
    }

    /// Queues `line` (one or more whole lines, each ending in `\n`). Called on the
    /// request path: takes the batch lock only to copy the bytes, and wakes the
    /// actor with a [`Flush`] when the batch was empty. Drops the line when the
    /// batch would exceed [`MAX_PENDING`].
    pub fn append(&self, line: &[u8]) {
        let was_empty = {
            let mut buf = lock(&self.shared.buf);
            if buf.len() + line.len() > MAX_PENDING {
                drop(buf);
                self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
                if !self.shared.warned_full.swap(true, Ordering::Relaxed) {
                    tracing::warn!(path = %self.shared.path.display(), "access log batch full; dropping lines");
                }
                return;
            }
            let was_empty = buf.is_empty();
            buf.extend_from_slice(line);
            was_empty
        };
        if was_empty {
            match &self.addr {
                Some(addr) => addr.do_send(Flush),
                None => self.shared.write_pending(),
            }
        }
    }

    /// Writes every pending line now, on the calling thread, and returns when
    /// they are in the file. Waits for a batch the actor is writing. This is the
    /// shutdown path: it blocks on file I/O, so it is not for the request path.
    pub fn write_pending(&self) {
        self.shared.write_pending();
    }

    /// Resolves when every line appended before the call is in the file (sends
    /// [`Sync`] to the actor).
    pub async fn sync(&self) {
        match &self.addr {
            Some(addr) => {
                if addr.send(Sync).await.is_err() {
                    self.shared.write_pending();
                }
            }
            None => self.shared.write_pending(),
        }
    }

    /// Asks the writer to write pending lines to the current file and then
    /// reopen the file by its path, without waiting (SIGUSR1). Lines appended
    /// after this call go to the new file.
    pub fn reopen_soon(&self) {
        match &self.addr {
            Some(addr) => addr.do_send(Reopen),
            None => {
                if let Err(e) = self.shared.reopen() {
                    tracing::error!(path = %self.shared.path.display(), "cannot reopen access log: {e}");
                }
            }
        }
    }

    /// Writes pending lines to the current file, then reopens the file by its
    /// path (log rotation: rename the file, then reopen, as on nginx's SIGUSR1).
    ///
    /// # Errors
    /// The OS error from opening the file; the old file stays in use then.
    pub async fn reopen(&self) -> io::Result<()> {
        match &self.addr {
            Some(addr) => match addr.send(Reopen).await {
                Ok(r) => r,
                Err(_) => self.shared.reopen(),
            },
            None => self.shared.reopen(),
        }
    }
}

impl Drop for LogFile {
    fn drop(&mut self) {
        self.shared.write_pending();
    }
}

/// The actor that owns the file's writes: runs on its own thread (a
/// [`SyncArbiter`] of one), so `write(2)` blocking on a slow disk never stalls an
/// HTTP worker.
pub struct Writer {
    shared: Arc<Shared>,
}

impl Actor for Writer {
    type Context = SyncContext<Self>;
}

/// Write the pending batch. Sent by [`LogFile::append`] when a line lands in an
/// empty batch; several lines logged before the actor runs go out in one write.
#[derive(Debug, Clone, Copy)]
pub struct Flush;

impl Message for Flush {
    type Result = ();
}

/// Write pending lines to the current file, then reopen the file by path (for
/// log rotation). Replies with the OS error of the open, if any; the old file
/// stays in use on error.
#[derive(Debug, Clone, Copy)]
pub struct Reopen;

impl Message for Reopen {
    type Result = io::Result<()>;
}

/// Write pending lines and reply `()`: awaiting the reply means every line
/// appended before the message was sent is in the file.
#[derive(Debug, Clone, Copy)]
pub struct Sync;

impl Message for Sync {
    type Result = ();
}

impl Handler<Flush> for Writer {
    type Result = ();
    fn handle(&mut self, _: Flush, _: &mut SyncContext<Self>) {
        // Sent for the first line of a batch: let the batch fill first.
        std::thread::sleep(FLUSH_DELAY);
        self.shared.write_pending();
    }
}

impl Handler<Reopen> for Writer {
    type Result = io::Result<()>;
    fn handle(&mut self, _: Reopen, _: &mut SyncContext<Self>) -> io::Result<()> {
        let r = self.shared.reopen();
        match &r {
            Ok(()) => tracing::info!(path = %self.shared.path.display(), "access log reopened"),
            Err(e) => {
                tracing::error!(path = %self.shared.path.display(), "cannot reopen access log, still writing to the old file: {e}")
            }
        }
        r
    }
}

impl Handler<Sync> for Writer {
    type Result = ();
    fn handle(&mut self, _: Sync, _: &mut SyncContext<Self>) {
        self.shared.write_pending();
    }
}

/// The log files of one configuration, keyed by absolute path, so that vhosts
/// and rules naming the same file share one [`LogFile`] and one writer. Kept in
/// the configuration's [`tessera_core::SharedState`].
#[derive(Default)]
pub struct LogFiles {
    map: Mutex<Vec<Arc<LogFile>>>,
}

impl LogFiles {
    /// The log file at `path` (absolute, parent directory canonical), opened on
    /// first use.
    ///
    /// # Errors
    /// The OS error from opening the file.
    pub fn get_or_open(&self, path: &Path) -> io::Result<Arc<LogFile>> {
        let mut map = lock(&self.map);
        if let Some(f) = map.iter().find(|f| f.path() == path) {
            return Ok(Arc::clone(f));
        }
        let f = Arc::new(LogFile::open(path.to_owned())?);
        map.push(Arc::clone(&f));
        Ok(f)
    }

    /// Every log file opened so far (for reopening them all on SIGUSR1).
    pub fn all(&self) -> Vec<Arc<LogFile>> {
        lock(&self.map).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `access.log` in a fresh directory that is removed on drop.
    pub(crate) struct TempLog(PathBuf);

    impl std::ops::Deref for TempLog {
        type Target = PathBuf;
        fn deref(&self) -> &PathBuf {
            &self.0
        }
    }

    impl AsRef<std::path::Path> for TempLog {
        fn as_ref(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for TempLog {
        fn drop(&mut self) {
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    pub(crate) fn temp_path(name: &str) -> TempLog {
        let dir = std::env::temp_dir().join(format!(
            "tessera-access-log-{}-{}",
            std::process::id(),
            name
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempLog(dir.join("access.log"))
    }

    fn count_lines(p: &Path) -> usize {
        let s = std::fs::read_to_string(p).unwrap();
        assert!(s.is_empty() || s.ends_with('\n'));
        s.lines().count()
    }

    #[test]
    fn lines_from_many_threads_are_all_written_by_the_shutdown_path() {
        let path = temp_path("threads");
        actix::System::new().block_on(async {
            let f = Arc::new(LogFile::open(path.clone()).unwrap());
            assert!(f.addr().is_some());
            let threads: Vec<_> = (0..4)
                .map(|t| {
                    let f = Arc::clone(&f);
                    std::thread::spawn(move || {
                        for i in 0..2500 {
                            f.append(
                                format!("thread {t} line {i} {}\n", "x".repeat(i % 97)).as_bytes(),
                            );
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            f.write_pending();
            assert_eq!(count_lines(&path), 10_000);
            assert_eq!(f.lines_written(), 10_000);
            assert_eq!(f.lines_dropped(), 0);
            let text = std::fs::read_to_string(&path).unwrap();
            for l in text.lines() {
                let mut w = l.split(' ');
                assert_eq!(w.next(), Some("thread"), "torn line {l:?}");
                let i: usize = w.nth(2).unwrap().parse().unwrap();
                assert_eq!(w.next().map_or(0, str::len), i % 97, "torn line {l:?}");
            }
        });
    }

    #[test]
    fn sync_waits_for_the_actor_and_reopen_follows_rotation() {
        let path = temp_path("rotate");
        actix::System::new().block_on(async {
            let f = LogFile::open(path.clone()).unwrap();
            for i in 0..100 {
                f.append(format!("before {i}\n").as_bytes());
            }
            f.sync().await;
            assert_eq!(count_lines(&path), 100);
            f.append(b"pending at rotation\n");
            let rotated = path.with_extension("log.1");
            std::fs::rename(&path, &rotated).unwrap();
            f.reopen().await.unwrap();
            f.append(b"after\n");
            f.sync().await;
            assert_eq!(count_lines(&rotated), 101);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "after\n");
        });
    }

    #[test]
    fn without_a_system_lines_are_written_synchronously() {
        let path = temp_path("nosystem");
        let f = LogFile::open(path.clone()).unwrap();
        assert!(f.addr().is_none());
        f.append(b"one\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\n");
    }

    #[test]
    fn a_full_batch_drops_lines_and_counts_them() {
        let path = temp_path("full");
        // Outside a System the batch is written at once, so fill it by hand.
        let f = LogFile::open(path.clone()).unwrap();
        lock(&f.shared.buf).resize(MAX_PENDING - 3, b'x');
        f.append(b"toolong\n");
        assert_eq!(f.lines_dropped(), 1);
        lock(&f.shared.buf).clear();
    }

    #[test]
    fn same_path_shares_one_file() {
        let path = temp_path("shared");
        let files = LogFiles::default();
        let a = files.get_or_open(&path).unwrap();
        let b = files.get_or_open(&path).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(files.all().len(), 1);
    }
}

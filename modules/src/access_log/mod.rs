//! The `access-log` module: one line per request in the Common or Combined Log
//! Format, or a custom Apache-style format (Apache `mod_log_config`, lighttpd
//! `mod_accesslog`, nginx `access_log`).
//!
//! ```toml
//! [vhost.access-log]
//! path = "logs/access.log"   # default; relative to the configuration file
//! format = "combined"        # default; or "common", or "%h %t \"%r\" %>s %D"
//! ```
//!
//! The line is formatted on the HTTP worker in the log phase (after the body was
//! sent or the client went away) into a per-thread buffer, then appended to the
//! file's pending batch; a writer actor on its own thread writes batches to the
//! file ([`writer`]). Lines are never lost on a clean shutdown: `on_shutdown`
//! writes whatever is still pending before it returns.
//!
//! - [`format`]: compiling the format string and writing a line (escaping, `%t`).
//! - [`writer`]: the per-file batch, the [`writer::Writer`] actor and its messages.

pub mod format;
pub mod writer;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tessera_core::{BuildContext, Hooks, LogRecord, Module, ModuleDecl};

use self::format::{LogFormat, TimeCache};
use self::writer::{LogFile, LogFiles};

/// Options of `[vhost.access-log]` (also allowed in a rule table).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AccessLogConfig {
    /// The log file. A relative path is resolved against the directory of the
    /// configuration file; missing parent directories are created; the file is
    /// opened for append (created with the process umask) when the
    /// configuration is built, so `tessera -t` reports an unwritable path like
    /// `nginx -t` does. Vhosts and rules naming the same file share one writer.
    /// Default `"logs/access.log"`.
    pub path: PathBuf,
    /// `"combined"` (default; Apache/nginx Combined Log Format), `"common"`
    /// (Common Log Format, lighttpd's default), or a format string of Apache
    /// `LogFormat` directives, for example `"%h %t \"%r\" %>s %b %D"`. See
    /// [`format::LogFormat`] for the directives. An unknown directive, or
    /// `%{Name}o` (response headers are not available), is a configuration error.
    pub format: String,
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        AccessLogConfig {
            path: PathBuf::from("logs/access.log"),
            format: "combined".to_owned(),
        }
    }
}

/// The access log module: writes one line per request (log phase) to its file.
pub struct AccessLog {
    format: LogFormat,
    file: Arc<LogFile>,
}

impl AccessLog {
    /// The log file this instance writes to (shared with other instances naming
    /// the same file): counters, [`LogFile::sync`], [`LogFile::reopen`].
    pub fn log_file(&self) -> &Arc<LogFile> {
        &self.file
    }
}

/// Resolves `path` against `config_dir`, creates its parent directories, and
/// returns it with the parent canonical (symlinks and `..` resolved), so that
/// two spellings of one file give the same key.
fn resolve(path: &Path, config_dir: &Path) -> Result<PathBuf, String> {
    if path.as_os_str().is_empty() {
        return Err("path: must name a file".to_owned());
    }
    let full = config_dir.join(path);
    let (Some(parent), Some(name)) = (full.parent(), full.file_name()) else {
        return Err(format!("path: \"{}\" does not name a file", full.display()));
    };
    std::fs::create_dir_all(parent).map_err(|e| {
        format!(
            "path: cannot create directory \"{}\" for the access log: {e}",
            parent.display()
        )
    })?;
    let parent = parent.canonicalize().map_err(|e| {
        format!(
            "path: cannot resolve directory \"{}\" of the access log: {e}",
            parent.display()
        )
    })?;
    Ok(parent.join(name))
}

impl ModuleDecl for AccessLog {
    const NAME: &'static str = "access-log";
    type Config = AccessLogConfig;

    /// Compiles the format and opens (or shares) the file.
    ///
    /// # Errors
    /// The format's [`format::FormatError`]; a path that cannot be created or
    /// opened, naming the path and the OS error.
    fn build(cfg: AccessLogConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        let format = LogFormat::compile(&cfg.format).map_err(|e| format!("format: {e}"))?;
        let path = resolve(&cfg.path, cx.config_dir)?;
        let file = cx
            .shared
            .get_or_init(LogFiles::default)
            .get_or_open(&path)
            .map_err(|e| {
                format!(
                    "path: cannot open access log \"{}\" for append: {e}",
                    path.display()
                )
            })?;
        Ok(AccessLog { format, file })
    }
}

/// Per-worker scratch space: the line being formatted and the `%t` cache.
#[derive(Default)]
struct Scratch {
    line: Vec<u8>,
    clock: TimeCache,
}

/// A line buffer that grew past this (64 KiB, a request with huge headers) is
/// freed after use.
const SCRATCH_KEEP: usize = 64 << 10;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl AccessLog {
    fn log_into(&self, rec: &LogRecord<'_>, s: &mut Scratch) {
        s.line.clear();
        self.format.write_line(rec, &mut s.clock, &mut s.line);
        s.line.push(b'\n');
        self.file.append(&s.line);
        if s.line.capacity() > SCRATCH_KEEP {
            s.line = Vec::new();
        }
    }
}

impl Module for AccessLog {
    fn hooks(&self) -> Hooks {
        Hooks::LOG
    }

    /// Formats the line on the calling worker into a reused per-thread buffer and
    /// queues it for the writer; never blocks on file I/O.
    fn on_log(&self, rec: &LogRecord<'_>) {
        SCRATCH.with(|s| match s.try_borrow_mut() {
            Ok(mut s) => self.log_into(rec, &mut s),
            Err(_) => self.log_into(rec, &mut Scratch::default()),
        });
    }

    /// Writes every line logged so far to the file before returning (blocking,
    /// on the calling thread; waits for a batch the writer is writing).
    fn on_shutdown(&self) {
        self.file.write_pending();
    }

    /// SIGUSR1: pending lines go to the old file, later ones to a new file at
    /// the same path (logrotate's `create` then signal, as with nginx).
    fn on_reopen(&self) {
        self.file.reopen_soon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Instant, SystemTime};
    use tessera_core::actix_web::http::StatusCode;
    use tessera_core::actix_web::test::TestRequest;
    use tessera_core::vhost::VhostInfo;
    use tessera_core::SharedState;

    /// A fresh directory, removed on drop.
    struct TempDir(PathBuf);

    impl std::ops::Deref for TempDir {
        type Target = PathBuf;
        fn deref(&self) -> &PathBuf {
            &self.0
        }
    }

    impl AsRef<std::path::Path> for TempDir {
        fn as_ref(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp_dir(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "tessera-access-log-mod-{}-{}",
            std::process::id(),
            name
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn vhost() -> VhostInfo {
        VhostInfo {
            index: 0,
            names: vec!["site.test".into()],
            document_root: "/srv".into(),
        }
    }

    fn build(
        dir: &Path,
        shared: &SharedState,
        toml_like: serde_json::Value,
    ) -> Result<AccessLog, String> {
        let vh = vhost();
        let cx = BuildContext {
            vhost: &vh,
            config_dir: dir,
            shared,
            rule_match: None,
            upstreams: &tessera_core::upstream::Upstreams::default(),
        };
        let cfg: AccessLogConfig = serde_json::from_value(toml_like).map_err(|e| e.to_string())?;
        AccessLog::build(cfg, &cx)
    }

    #[test]
    fn defaults() {
        let c: AccessLogConfig = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(c.path, Path::new("logs/access.log"));
        assert_eq!(c.format, "combined");
        assert!(
            serde_json::from_value::<AccessLogConfig>(serde_json::json!({"buffer": 1})).is_err()
        );
    }

    #[test]
    fn n_requests_give_n_lines_after_shutdown() {
        const N: usize = 1000;
        let dir = temp_dir("n-lines");
        actix::System::new().block_on(async {
            let shared = SharedState::default();
            let m = build(&dir, &shared, serde_json::json!({})).unwrap();
            let path = dir.join("logs/access.log");
            assert!(path.exists(), "opened at build time, parents created");
            let vh = vhost();
            let req = TestRequest::default()
                .uri("/index.html?q=1")
                .peer_addr("192.0.2.1:1234".parse().unwrap())
                .insert_header(("host", "site.test"))
                .insert_header(("user-agent", "evil\tline"))
                .to_http_request();
            for i in 0..N {
                m.on_log(&LogRecord {
                    req: &req,
                    vhost: &vh,
                    vhost_label: "site.test",
                    status: StatusCode::OK,
                    body_bytes: i as u64,
                    start_time: SystemTime::now(),
                    started: Instant::now(),
                    user: None,
                    complete: true,
                    notes: &Default::default(),
                    ext: &Default::default(),
                });
            }
            m.on_shutdown();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.lines().count(), N);
            assert!(text.ends_with("\"-\" \"evil\\x09line\"\n"), "{text:.200}");
            assert!(text.starts_with("192.0.2.1 - - ["));
            assert!(text.contains("\"GET /index.html?q=1 HTTP/1.1\" 200 - "));
            assert_eq!(m.log_file().lines_written(), N as u64);
        });
    }

    #[test]
    fn same_file_is_shared_and_errors_name_the_problem() {
        let dir = temp_dir("shared");
        let shared = SharedState::default();
        let a = build(&dir, &shared, serde_json::json!({"path": "x/a.log"})).unwrap();
        let b = build(
            &dir,
            &shared,
            serde_json::json!({"path": dir.join("x/../x/a.log"), "format": "common"}),
        )
        .unwrap();
        assert!(Arc::ptr_eq(a.log_file(), b.log_file()));
        let c = build(&dir, &shared, serde_json::json!({"path": "x/c.log"})).unwrap();
        assert!(!Arc::ptr_eq(a.log_file(), c.log_file()));

        let e = build(&dir, &shared, serde_json::json!({"format": "%h %Q"}))
            .err()
            .unwrap();
        assert!(e.contains("%Q"), "{e}");
        let e = build(&dir, &shared, serde_json::json!({"format": "%{Server}o"}))
            .err()
            .unwrap();
        assert!(
            e.contains("%{Server}o") && e.contains("response header"),
            "{e}"
        );
        std::fs::create_dir_all(dir.join("isdir")).unwrap();
        let e = build(&dir, &shared, serde_json::json!({"path": "isdir"}))
            .err()
            .unwrap();
        assert!(e.contains("isdir") && e.contains("cannot open"), "{e}");
    }
}

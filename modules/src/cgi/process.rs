//! One CGI process per request: spawned in its own process group with an
//! empty environment apart from the CGI variables, its stdin fed from the
//! request body, its stderr sent to the error log, and its whole process
//! group killed when its time is up or the client goes away.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustix::process::{Pid, Signal};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

use tessera_core::actix_web::HttpResponse;
use tessera_core::request_body::BodyError;

use crate::gateway::{self, Input};

/// The running CGI processes of one configuration (all vhosts), counted
/// against each instance's `max-processes`.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    running: AtomicUsize,
}

impl Slots {
    /// A slot, unless `max` processes are running already.
    pub(crate) fn take(self: &Arc<Self>, max: usize) -> Option<Slot> {
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.clone()))
    }
}

/// One running process counted in [`Slots`]; released on drop.
#[derive(Debug)]
pub(crate) struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What to run.
pub(crate) struct Spawn<'a> {
    /// The interpreter (lighttpd `cgi.assign` value), or `None` to execute
    /// the script itself.
    pub(crate) interpreter: Option<&'a Path>,
    /// The script's absolute path.
    pub(crate) script: &'a Path,
    /// The environment: the CGI variables, `PATH` and the configured `params`.
    pub(crate) env: Vec<(OsString, OsString)>,
    /// Whether a request body will be written to stdin (otherwise stdin is
    /// `/dev/null`).
    pub(crate) stdin: bool,
    /// When the process group is killed.
    pub(crate) deadline: Instant,
}

/// A running CGI process: its stdout, and the guard that kills its process
/// group when dropped before the process ended on its own.
pub(crate) struct Process {
    child: Option<Child>,
    /// Its process group (= its pid, `process_group(0)`).
    group: Option<Pid>,
    stdout: Option<ChildStdout>,
    stdin: Option<ChildStdin>,
    deadline: Instant,
    /// Set once stdout ended: the process may finish on its own until its
    /// deadline.
    finished: bool,
    slot: Option<Slot>,
    /// The script, for the log.
    script: Arc<str>,
}

impl Process {
    /// Starts the script in its directory (lighttpd's and Apache's working
    /// directory), in a new process group, with stdout and stderr piped.
    /// stderr lines go to the error log (`warn`, with the script's path).
    ///
    /// # Errors
    /// The spawn's (`ENOENT` for a missing interpreter, `EACCES`, `ENOEXEC`
    /// for a file that is no executable and has no `#!` line).
    pub(crate) fn spawn(s: Spawn<'_>, slot: Slot) -> std::io::Result<Process> {
        let mut cmd = match s.interpreter {
            Some(i) => {
                let mut c = Command::new(i);
                c.arg(s.script);
                c
            }
            None => Command::new(s.script),
        };
        let dir = s
            .script
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
        cmd.env_clear()
            .envs(s.env)
            .current_dir(dir)
            .stdin(if s.stdin {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            // its own group: a timeout or a disconnect kills what it started too
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let group = child.id().and_then(|id| Pid::from_raw(id as i32));
        let script: Arc<str> = s.script.to_string_lossy().into();
        if let Some(err) = child.stderr.take() {
            let script = script.clone();
            tokio::task::spawn_local(log_stderr(err, script));
        }
        let stdout = child.stdout.take().expect("piped");
        let stdin = child.stdin.take();
        Ok(Process {
            child: Some(child),
            group,
            stdout: Some(stdout),
            stdin,
            deadline: s.deadline,
            finished: false,
            slot: Some(slot),
            script,
        })
    }

    /// The process's stdin (`None` without a request body), once.
    pub(crate) fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The process's stdout, once.
    pub(crate) fn take_stdout(&mut self) -> ChildStdout {
        self.stdout.take().expect("taken once")
    }

    /// Its stdout ended: on drop, the process may end on its own (it is
    /// still killed at its deadline).
    pub(crate) fn finished(&mut self) {
        self.finished = true;
    }

    /// The script's path, for the log.
    pub(crate) fn script(&self) -> &str {
        &self.script
    }
}

/// Writes the request body to a script's stdin, then closes it. Run it
/// while the output is read ([`crate::eof_output::Output::fill`]): a script
/// may answer before it has read everything.
///
/// # Errors
/// The answer for a client whose body failed on the way (413, 400). A
/// script that stops reading (it exited: `EPIPE`) is no error; the engine
/// discards the rest of the body.
pub(crate) async fn feed(
    stdin: Option<ChildStdin>,
    input: Input,
    script: &str,
) -> Result<(), HttpResponse> {
    let Some(mut stdin) = stdin else {
        return Ok(());
    };
    let written: std::io::Result<()> = async {
        match input {
            Input::None => {}
            Input::Whole(b) => stdin.write_all(&b).await?,
            Input::Stream(mut b, _) => {
                while let Some(chunk) = gateway::next(&mut b).await {
                    match chunk {
                        Ok(c) => stdin.write_all(&c).await?,
                        Err(e) => return Err(std::io::Error::other(e)),
                    }
                }
            }
        }
        stdin.shutdown().await
    }
    .await;
    match written {
        Ok(()) => Ok(()),
        Err(e) => match e.get_ref().and_then(|e| e.downcast_ref::<BodyError>()) {
            Some(body) => Err(gateway::body_error(body)),
            None => {
                tracing::debug!(%script, "cgi: stdin: {e}");
                Ok(())
            }
        },
    }
}

/// Kills `group` with SIGKILL (ESRCH: it is gone already).
fn kill_group(group: Option<Pid>) {
    if let Some(g) = group {
        let _ = rustix::process::kill_process_group(g, Signal::KILL);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let mut child = self.child.take().expect("taken only here");
        let slot = self.slot.take();
        let group = self.group;
        if let Ok(Some(_)) = child.try_wait() {
            // it exited; its group may not have: lighttpd and Apache leave
            // what a script started in the background, and so does Tessera
            // when the script ended its output
            if !self.finished {
                kill_group(group);
            }
            return;
        }
        let runtime = tokio::runtime::Handle::try_current();
        match runtime {
            Ok(rt) if self.finished => {
                // stdout closed: wait for the exit until the deadline, and
                // keep counting the process until then
                let deadline = self.deadline;
                let script = self.script.clone();
                rt.spawn(async move {
                    if tokio::time::timeout_at(deadline, child.wait())
                        .await
                        .is_err()
                    {
                        tracing::warn!(%script, "cgi: killed at its timeout after its output");
                        kill_group(group);
                    }
                    drop(child);
                    drop(slot);
                });
            }
            _ => {
                // the client went away, the time is up, or the output broke
                // off: the whole group goes; tokio reaps the child
                // (kill_on_drop)
                kill_group(group);
            }
        }
    }
}

/// Logs the lines of a process's stderr (at most 4 KiB a line) at `warn`.
async fn log_stderr(err: tokio::process::ChildStderr, script: Arc<str>) {
    let mut r = tokio::io::BufReader::with_capacity(4096, err);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        let n = match (&mut r).take(4096).read_until(b'\n', &mut line).await {
            Ok(n) => n,
            Err(_) => return,
        };
        if n == 0 {
            return;
        }
        let text = String::from_utf8_lossy(&line);
        tracing::warn!(%script, "cgi stderr: {}", text.trim_end());
    }
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("group", &self.group)
            .field("script", &self.script)
            .finish()
    }
}

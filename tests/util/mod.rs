//! Test harness: starts the real `tessera` binary on 127.0.0.1 port 0 with a
//! fixture configuration in a fresh temporary directory, and speaks raw HTTP/1.1
//! to it over TCP (so that paths, Host lines and headers go out exactly as
//! written).

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

static N: AtomicUsize = AtomicUsize::new(0);

/// A fresh, empty directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf, pub bool);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "tessera-test-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            tag
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p, false)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// Writes `content` to `rel`, creating parent directories.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.1 {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The binary under test: the one cargo built, or `TEST_TESSERA_BIN` (a
/// copy taken right after the build; not `TESSERA_*`, which the server
/// reads as configuration overrides, when several work trees share one
/// target directory and may rebuild it during a run).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("TEST_TESSERA_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tessera").into())
    })
}

/// Runs `tessera -t -c FILE` and returns its output.
pub fn check_config(file: impl AsRef<std::path::Path>) -> std::process::Output {
    let text = std::fs::read_to_string(file.as_ref()).unwrap_or_default();
    std::process::Command::new(bin())
        .arg("-t")
        .arg("-c")
        .arg(file.as_ref())
        // the CI pass on actix-http's engine sets this variable; a
        // configuration with PROXY protocol listeners needs Tessera's engine
        .env_remove(if text.contains("listen-proxy-protocol") {
            "TESSERA_SERVER__HTTP1_ENGINE"
        } else {
            "TESSERA_NO_SUCH_VARIABLE"
        })
        .output()
        .unwrap()
}

/// A running server. Killed on drop; `stop` shuts it down gracefully.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub dir: TempDir,
    stderr_path: PathBuf,
}

/// Runs `cmd` to its end: the exit code (-1 for a signal) and stdout
/// followed by stderr.
pub fn status_and_output(cmd: &mut std::process::Command) -> (i32, String) {
    let o = cmd.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    )
}

/// Fixture: the document root `www/` of the vhost `site.test` (default vhost)
/// with the given module list and extra TOML appended to the vhost.
pub fn site_config(modules: &str, vhost_extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 2\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [{modules}]\n{vhost_extra}\n"
    )
}

/// A port on 127.0.0.1 that was free a moment ago (bound to port 0 and
/// released), for a listener whose address a configuration must name in
/// advance (a vhost's `listen`, lighttpd's `$SERVER["socket"]`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `POST path` request with `body` and its Content-Length, `Host:
/// site.test` and `Connection: close`.
pub fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: site.test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// As [`post`], with `body` sent chunked, `piece` bytes a chunk.
pub fn post_chunked(path: &str, body: &[u8], piece: usize) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for part in body.chunks(piece) {
        r.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        r.extend_from_slice(part);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"0\r\n\r\n");
    r
}

/// Sends SIGTERM to `child` (a graceful stop) and waits for it to exit.
pub fn terminate(child: &mut std::process::Child) -> ExitStatus {
    let st = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(st.success());
    child.wait().unwrap()
}

impl Server {
    /// Starts tessera with `config` written to `DIR/server.toml`; `setup` fills
    /// the directory first (document roots are relative to it).
    pub fn start(config: &str, setup: impl FnOnce(&TempDir)) -> Server {
        Server::start_with_env(config, &[], setup)
    }

    /// As [`Server::start`], with extra environment variables for the server.
    pub fn start_with_env(
        config: &str,
        env: &[(&str, &str)],
        setup: impl FnOnce(&TempDir),
    ) -> Server {
        let dir = TempDir::new("srv");
        dir.mkdir("www");
        setup(&dir);
        let conf = dir.write("server.toml", config);
        let stderr_path = dir.path().join("stderr.txt");
        let mut child = Command::new(bin())
            .arg("-c")
            .arg(&conf)
            .env_remove("RUST_LOG")
            // CI runs the suite a second time on actix-http's engine through
            // this variable; a configuration that names its engine keeps it
            .env_remove(if config.contains("http1-engine") {
                "TESSERA_SERVER__HTTP1_ENGINE"
            } else {
                "TESSERA_NO_SUCH_VARIABLE"
            })
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("spawn tessera");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let Some(addr) = line.trim().strip_prefix("tessera: listening on http://") else {
            let _ = child.wait();
            panic!(
                "server did not start: stdout {line:?}, stderr {:?}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        };
        let addr = addr.parse().unwrap();
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = out.read_to_end(&mut sink);
        });
        Server {
            child,
            addr,
            dir,
            stderr_path,
        }
    }

    /// Starts the common fixture: vhost `site.test` with `modules` and `extra`.
    pub fn site(modules: &str, extra: &str, setup: impl FnOnce(&TempDir)) -> Server {
        Server::start(&site_config(modules, extra), setup)
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("www")
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn stop(mut self) -> ExitStatus {
        terminate(&mut self.child)
    }

    /// Like `stop`, but leaves the temporary directory on disk (the caller
    /// reads files from it and removes it).
    pub fn stop_keep_dir(mut self) -> ExitStatus {
        self.dir.1 = true;
        self.stop()
    }

    /// Waits (polling, at most `limit`) for the process to exit by itself.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let until = std::time::Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                std::time::Instant::now() < until,
                "still running after {limit:?}: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes `config` (when given) over `server.toml`, sends SIGHUP, and
    /// waits (polling its log, at most 10 s) until the reload is logged.
    pub fn reload(&self, config: Option<&str>) {
        let done = |s: &str| s.matches("configuration reloaded").count();
        let before = done(&self.stderr());
        if let Some(c) = config {
            self.dir.write("server.toml", c);
        }
        assert!(Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success());
        for _ in 0..500 {
            if done(&self.stderr()) > before {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no reload logged: {}", self.stderr());
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends raw bytes on a new connection and reads until the server closes it.
    pub fn raw(&self, request: &[u8]) -> Vec<u8> {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(request).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        buf
    }

    /// One request with `Connection: close`: `METHOD PATH HTTP/1.1`, `Host:
    /// site.test` unless `headers` has a Host line, then `headers` (lines
    /// without CRLF).
    pub fn req(&self, method: &str, path: &str, headers: &[&str]) -> Response {
        let mut r = format!("{method} {path} HTTP/1.1\r\n");
        if !headers
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("host:"))
        {
            r.push_str("Host: site.test\r\n");
        }
        for h in headers {
            r.push_str(h);
            r.push_str("\r\n");
        }
        r.push_str("Connection: close\r\n\r\n");
        Response::parse(&self.raw(r.as_bytes()), method == "HEAD")
    }

    pub fn get(&self, path: &str) -> Response {
        self.req("GET", path, &[])
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A parsed HTTP/1.1 response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Bytes after the head exactly as received (before de-chunking).
    pub raw_body: Vec<u8>,
}

impl Response {
    pub fn parse(raw: &[u8], head_request: bool) -> Response {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(raw)));
        let head = std::str::from_utf8(&raw[..end]).unwrap();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.trim().to_ascii_lowercase(), v.trim().to_string())
            })
            .collect();
        let raw_body = raw[end + 4..].to_vec();
        let mut r = Response {
            status,
            headers,
            body: Vec::new(),
            raw_body: raw_body.clone(),
        };
        if head_request {
            return r;
        }
        r.body = if r
            .header("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"))
        {
            dechunk(&raw_body)
        } else if let Some(n) = r.header("content-length") {
            let n: usize = n.parse().unwrap();
            raw_body[..n.min(raw_body.len())].to_vec()
        } else {
            raw_body
        };
        r
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .filter(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(i) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_str = std::str::from_utf8(&b[..i]).unwrap();
        let size = usize::from_str_radix(size_str.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[i + 2..i + 2 + size]);
        b = &b[i + 2 + size + 2..];
    }
}

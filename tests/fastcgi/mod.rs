//! The `fastcgi` module (issue 14, begun) against Debian's php-cgi, which the
//! tests start as a FastCGI server on 127.0.0.1 (`php-cgi -b`).

mod fpm;
mod php_cgi;
mod sendfile;
mod spawn;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::{Response, Server};

/// A running `php-cgi -b 127.0.0.1:PORT` (also used by tests/userdir.rs).
pub(crate) struct Php {
    child: Child,
    pub(crate) port: u16,
}

impl Php {
    pub(crate) fn start() -> Option<Php> {
        if Command::new("php-cgi").arg("-v").output().is_err() {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        use std::os::unix::process::CommandExt;
        let child = Command::new("php-cgi")
            .args([
                "-d",
                "log_errors=1",
                "-d",
                "display_errors=0",
                "-d",
                "session.save_path=/tmp",
            ])
            .args(["-d", "upload_max_filesize=16M", "-d", "post_max_size=16M"])
            .arg("-b")
            .arg(format!("127.0.0.1:{port}"))
            .env("PHP_FCGI_CHILDREN", "2")
            // its own process group: its children are killed with it
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("php-cgi");
        let php = Php { child, port };
        wait_for(&format!("php-cgi on port {port}"), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Some(php)
    }
}

impl Drop for Php {
    fn drop(&mut self) {
        // php-cgi and the PHP_FCGI_CHILDREN it forked
        kill_group(&mut self.child);
    }
}

/// Kills `child` and the processes of its process group (it was started
/// with `process_group(0)`), and reaps it.
pub(crate) fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// Polls `ready` every 20 ms for at most 5 s (a back end starting up).
pub(crate) fn wait_for(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..250 {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} did not come up");
}

fn md5_hex(data: &[u8]) -> String {
    use std::io::Write;
    let mut c = Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(data).unwrap();
    String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()[..32].to_string()
}

fn var<'a>(r: &'a Response, k: &str) -> &'a str {
    let text = std::str::from_utf8(&r.body).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{k}=")))
        .unwrap_or_else(|| panic!("no {k} in {text}"))
}

/// A running php-fpm (Debian's php-fpm package) on a Unix socket in `dir`.
struct Fpm {
    child: Child,
    socket: std::path::PathBuf,
}

impl Fpm {
    fn start(dir: &crate::util::TempDir) -> Fpm {
        use std::os::unix::process::CommandExt;
        let bin = std::fs::read_dir("/usr/sbin")
            .ok()
            .and_then(|d| {
                d.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("php-fpm"))
                })
            })
            .expect("php-fpm is not installed (apt-get install php-fpm)");
        let socket = dir.path().join("fpm.sock");
        let conf = dir.write(
            "fpm.conf",
            format!(
                "[global]\nerror_log = {d}/fpm.log\ndaemonize = no\npid = {d}/fpm.pid\n\n[www]\nlisten = {s}\npm = static\npm.max_children = 2\nclear_env = no\ncatch_workers_output = yes\n",
                d = dir.path().display(),
                s = socket.display()
            ),
        );
        let child = Command::new(bin)
            .arg("-y")
            .arg(&conf)
            .args(["-R", "-F"])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("php-fpm");
        let fpm = Fpm { child, socket };
        wait_for("php-fpm", || {
            std::os::unix::net::UnixStream::connect(&fpm.socket).is_ok()
        });
        fpm
    }
}

impl Drop for Fpm {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}

/// A php-fpm site with the status module on `/server-status`; `upstream`
/// holds extra `[[upstream]]` keys and `fastcgi` extra `[vhost.fastcgi]` keys.
fn fpm_site(fpm: &Fpm, upstream: &str, fastcgi: &str) -> Server {
    Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:{}\"]\n{upstream}\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\n{fastcgi}\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/server-status\" }}\n[vhost.rule.status]\nallow = [\"127.0.0.1\"]\n",
            fpm.socket.display()
        ),
        |w| {
            w.write("www/hello.php", "<?php echo 'hello';");
            w.write("www/plain.txt", "plain text\n");
            w.write(
                "www/send.php",
                "<?php header('X-Sendfile: ' . $_GET['f']); header('Content-Disposition: attachment; filename=\"f.bin\"'); header('ETag: \"from-php\"'); header('Last-Modified: Mon, 01 Jan 2001 00:00:00 GMT'); header('Cache-Control: max-age=60'); header('Content-Encoding: gzip'); echo 'BODY FROM PHP';",
            );
            w.write(
                "www/gone.php",
                "<?php http_response_code(404); header('X-Sendfile: ' . $_GET['f']); header('Cache-Control: no-store'); echo 'BODY FROM PHP';",
            );
            w.write(
                "www/reset.php",
                "<?php http_response_code(205); header('X-Sendfile: ' . $_GET['f']);",
            );
            w.write(
                "www/down.php",
                "<?php http_response_code(503); header('X-Sendfile: ' . $_GET['f']);",
            );
            w.write(
                "www/accel.php",
                "<?php header('X-Accel-Redirect: /plain.txt'); echo 'BODY FROM PHP';",
            );
            w.write(
                "www/local.php",
                "<?php header('Location: /plain.txt', true, 200); echo 'dropped';",
            );
            w.write("www/loop.php", "<?php header('Location: /loop.php', true, 200);");
            w.write("www/slow.php", "<?php usleep(4000000); echo 'late';");
            let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            w.write("files/big.bin", data);
            w.write("secret/key.txt", "secret");
        },
    )
}

//! `tessera import` (issue 7), black-box: every legacy configuration in
//! `../shared/legacy-configs` imports and its output passes `tessera -t`, and
//! Debian's lighttpd and Tessera, started on a configuration and on its
//! import over the same document roots, answer the same requests alike
//! (status, Content-Type, Cache-Control, Expires, the headers the
//! configuration sets, Location).

mod applied;
mod check;
mod like_lighttpd;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::{bin, free_port, Response, Server, TempDir};

const LIGHTTPD: &str = "/usr/sbin/lighttpd";

/// The legacy configurations: `../shared/legacy-configs` beside the clone when
/// present (the project's shared test data), else the copy kept in the
/// repository (`import/tests/data/legacy-configs`, identical), so that a fresh
/// clone tests the same files.
pub(crate) fn legacy_dir() -> PathBuf {
    let shared = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/legacy-configs"
    ));
    let copy = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/import/tests/data/legacy-configs"
    ));
    let d = if shared.is_dir() { shared } else { copy };
    assert!(
        d.is_dir(),
        "{} is missing: the legacy configurations are test data",
        d.display()
    );
    d
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Runs `tessera import SOURCE FILE -o OUT`; returns the exit code and stdout.
pub(crate) fn import(source: &str, file: &Path, out: &Path) -> (i32, String) {
    run_import(source, file, out, &[])
}

/// `tessera import SOURCE FILE -o OUT ARGS…` (no `TESSERA_TEST_UNSET_VARIABLE`
/// in its environment); the exit code and stdout followed by stderr.
fn run_import(source: &str, file: &Path, out: &Path, args: &[&str]) -> (i32, String) {
    crate::util::status_and_output(
        Command::new(bin())
            .args(["import", source])
            .arg(file)
            .arg("-o")
            .arg(out)
            .args(args)
            .env_remove("TESSERA_TEST_UNSET_VARIABLE"),
    )
}

/// Moves every absolute path the output names (document roots, log files,
/// user files) under `dir`, creating them, and listens on port 0, so that
/// `tessera -t` can check the rest on any machine.
pub(crate) fn relocate(toml_text: &str, dir: &Path) -> String {
    let mut v: toml::Table = toml::from_str(toml_text).unwrap();
    let map = |p: &str| -> String {
        if p.starts_with('/') {
            dir.join(p.trim_start_matches('/')).display().to_string()
        } else {
            p.to_owned()
        }
    };
    if let Some(s) = v.get_mut("server").and_then(|s| s.as_table_mut()) {
        s.insert(
            "listen".into(),
            toml::Value::Array(vec!["127.0.0.1:0".into()]),
        );
        // PROXY protocol listeners are listen addresses too.
        if s.contains_key("listen-proxy-protocol") {
            s.insert(
                "listen-proxy-protocol".into(),
                toml::Value::Array(vec!["127.0.0.1:0".into()]),
            );
        }
    }
    fn fix_tables(t: &mut toml::Table, map: &dyn Fn(&str) -> String) {
        if let Some(al) = t.get_mut("access-log").and_then(|a| a.as_table_mut()) {
            if let Some(p) = al.get("path").and_then(|p| p.as_str()).map(map) {
                std::fs::create_dir_all(Path::new(&p).parent().unwrap()).unwrap();
                al.insert("path".into(), p.into());
            }
        }
        // directories the back-end and path modules check at start
        let dirs: [(&str, &str); 7] = [
            ("alias", "paths"),
            ("userdir", "basepath"),
            ("mass-vhost", "default-root"),
            ("fastcgi", "x-sendfile-docroot"),
            ("scgi", "x-sendfile-docroot"),
            ("uwsgi", "x-sendfile-docroot"),
            ("cgi", "x-sendfile-docroot"),
        ];
        for (module, key) in dirs {
            let Some(v) = t
                .get_mut(module)
                .and_then(|m| m.as_table_mut())
                .and_then(|m| m.get_mut(key))
            else {
                continue;
            };
            let mut fix = |v: &mut toml::Value| {
                if let Some(p) = v.as_str().map(map) {
                    std::fs::create_dir_all(&p).unwrap();
                    *v = p.into();
                }
            };
            match v {
                toml::Value::Table(paths) => paths.iter_mut().for_each(|(_, v)| fix(v)),
                toml::Value::Array(list) => list.iter_mut().for_each(&mut fix),
                v => fix(v),
            }
        }
        if let Some(ab) = t.get_mut("auth-basic").and_then(|a| a.as_table_mut()) {
            if let Some(p) = ab.get("user-file").and_then(|p| p.as_str()).map(map) {
                std::fs::create_dir_all(Path::new(&p).parent().unwrap()).unwrap();
                std::fs::write(&p, "").unwrap();
                ab.insert("user-file".into(), p.into());
            }
        }
    }
    for vh in v
        .get_mut("vhost")
        .and_then(|x| x.as_array_mut())
        .unwrap()
        .iter_mut()
    {
        let vt = vh.as_table_mut().unwrap();
        let root = map(vt["document-root"].as_str().unwrap());
        std::fs::create_dir_all(&root).unwrap();
        vt.insert("document-root".into(), root.into());
        fix_tables(vt, &map);
        if let Some(rules) = vt.get_mut("rule").and_then(|r| r.as_array_mut()) {
            for r in rules {
                fix_tables(r.as_table_mut().unwrap(), &map);
            }
        }
    }
    toml::to_string(&v).unwrap()
}

/// The report's "dropped" lines about lighttpd's `proxy.*`, `extforward.*`,
/// `server.max-request-size` or their modules, or a Cherokee `proxy`
/// handler.
fn proxy_drops(report: &str) -> Vec<&str> {
    let mut in_dropped = false;
    let mut out = Vec::new();
    for line in report.lines() {
        if !line.starts_with(' ') {
            in_dropped = line.starts_with("dropped (");
            continue;
        }
        // `  FILE:LINE: WHAT: MESSAGE`
        let rest = line.trim_start().split(": ").nth(1).unwrap_or("");
        if in_dropped
            && (rest.starts_with("proxy.")
                || rest.starts_with("extforward.")
                || rest.starts_with("server.max-request-size")
                || line.contains("mod_proxy:")
                || line.contains("mod_extforward:")
                || line.contains("\"proxy\" handler"))
        {
            out.push(line);
        }
    }
    out
}

/// Debian's lighttpd on a configuration file, killed on drop.
struct Lighttpd {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Drop for Lighttpd {
    fn drop(&mut self) {
        // SIGTERM first: lighttpd then stops the back ends it spawned
        // (php-cgi), which a SIGKILL would leave running
        // quiet: lighttpd may have exited already
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(std::process::Stdio::null())
            .status();
        for _ in 0..250 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0")
}

/// Lines that make lighttpd drop root for `nobody` (it opens its logs first).
pub(crate) fn unprivileged() -> &'static str {
    if is_root() {
        "server.username = \"nobody\"\nserver.groupname = \"nogroup\"\n"
    } else {
        ""
    }
}

fn start_lighttpd(conf: &Path, port: u16, dir: &Path) -> Lighttpd {
    start_lighttpd_env(conf, port, dir, &[])
}

/// lighttpd with its times in UTC (its `%t` is local time), as Tessera's.
fn start_lighttpd_tz(conf: &Path, port: u16, dir: &Path) -> Lighttpd {
    start_lighttpd_env(conf, port, dir, &[("TZ", "UTC")])
}

fn start_lighttpd_env(conf: &Path, port: u16, dir: &Path, env: &[(&str, &str)]) -> Lighttpd {
    assert!(
        Path::new(LIGHTTPD).exists(),
        "Debian's lighttpd is required for this test: apt-get install -y lighttpd (.ci/run does it)"
    );
    let log = dir.join("lighttpd.stderr");
    let child = Command::new(LIGHTTPD)
        .envs(env.iter().copied())
        .arg("-D")
        .arg("-f")
        .arg(conf)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(dir.join("lighttpd.stderr2")).unwrap())
        .spawn()
        .expect("spawn lighttpd");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut l = Lighttpd { child, addr, log };
    // Wait for the port: bounded connection attempts.
    for _ in 0..200 {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return l;
        }
        if let Ok(Some(st)) = l.child.try_wait() {
            panic!(
                "lighttpd exited with {st}: {}{}",
                std::fs::read_to_string(&l.log).unwrap_or_default(),
                std::fs::read_to_string(dir.join("lighttpd.stderr2")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("lighttpd did not listen on {addr}");
}

/// One request on a new connection (`Connection: close`), HTTP/1.1 or 1.0.
fn send(addr: SocketAddr, path: &str, host: &str, http10: bool) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let v = if http10 { "1.0" } else { "1.1" };
    write!(
        s,
        "GET {path} HTTP/{v}\r\nHost: {host}\r\nUser-Agent: import-test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    Response::parse(&buf, false)
}

fn norm_type(t: Option<&str>) -> Option<String> {
    t.map(|t| {
        t.split(';')
            .map(|p| p.trim().to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join(";")
    })
}

/// The headers a configuration sets (`X-…`), sorted, multi-line fields joined.
fn x_headers(r: &Response) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .cloned()
        .collect();
    v.sort();
    v
}

fn location_path(r: &Response) -> Option<String> {
    r.header("location").map(|l| match l.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/".into(), |i| rest[i..].to_owned()),
        None => l.to_owned(),
    })
}

/// Compares lighttpd's and Tessera's answers to the same request.
fn same(what: &str, l: &Response, t: &Response, http10: bool) -> Vec<String> {
    let mut diffs = Vec::new();
    let d = |diffs: &mut Vec<String>, k: &str, a: String, b: String| {
        if a != b {
            diffs.push(format!("{what}: {k}: lighttpd {a} / tessera {b}"));
        }
    };
    d(
        &mut diffs,
        "status",
        l.status.to_string(),
        t.status.to_string(),
    );
    if (200..300).contains(&l.status) {
        d(
            &mut diffs,
            "body",
            String::from_utf8_lossy(&l.body).into_owned(),
            String::from_utf8_lossy(&t.body).into_owned(),
        );
        d(
            &mut diffs,
            "content-type",
            format!("{:?}", norm_type(l.header("content-type"))),
            format!("{:?}", norm_type(t.header("content-type"))),
        );
    }
    if http10 {
        // lighttpd 1.4.60+ sends Expires (only) to HTTP/1.0 clients.
        match (l.header("expires"), t.header("expires")) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                let a = httpdate::parse_http_date(a).unwrap();
                let b = httpdate::parse_http_date(b).unwrap();
                let diff = a
                    .duration_since(b)
                    .or_else(|_| b.duration_since(a))
                    .unwrap();
                if diff > Duration::from_secs(5) {
                    diffs.push(format!("{what}: expires differ by {diff:?}"));
                }
            }
            (a, b) => diffs.push(format!("{what}: expires: lighttpd {a:?} / tessera {b:?}")),
        }
    } else {
        // lighttpd 1.4.60+ sends Cache-Control (only) to HTTP/1.1 clients.
        d(
            &mut diffs,
            "cache-control",
            format!("{:?}", l.header("cache-control")),
            format!("{:?}", t.header("cache-control")),
        );
    }
    d(
        &mut diffs,
        "x-headers",
        format!("{:?}", x_headers(l)),
        format!("{:?}", x_headers(t)),
    );
    d(
        &mut diffs,
        "location",
        format!("{:?}", location_path(l)),
        format!("{:?}", location_path(t)),
    );
    diffs
}

/// Imports `conf` (which must succeed) into `dir/imported.toml`; returns it
/// parsed, listening on 127.0.0.1 port 0 instead (same configuration, any free
/// port for Tessera), its text as imported, and the report.
fn import_on_any_port(source: &str, conf: &Path, dir: &Path) -> (toml::Table, String, String) {
    let out = dir.join("imported.toml");
    let (code, report) = import(source, conf, &out);
    assert!(code == 0 || code == 1, "import failed: {report}");
    let imported = std::fs::read_to_string(&out).unwrap();
    let mut tv: toml::Table = toml::from_str(&imported).unwrap();
    tv["server"].as_table_mut().unwrap().insert(
        "listen".into(),
        toml::Value::Array(vec!["127.0.0.1:0".into()]),
    );
    (tv, imported, report)
}

/// Starts lighttpd on `conf_text` (with `PORT` replaced), imports it, starts
/// Tessera on the import, and compares the answers to every (host, path).
///
/// A configuration naming `PORT2` (a second listener, `$SERVER["socket"] ==
/// "127.0.0.1:PORT2"`) gets two free ports; Tessera then listens on two
/// other free ports in their place (the import's addresses renamed, socket
/// matchers and vhost `listen` included), and every request goes to both.
fn compare(dir: &TempDir, conf_text: &str, requests: &[(&str, &str)]) {
    compare_edited(dir, conf_text, requests, |t| t);
}

/// [`compare`], with `edit` applied to the imported configuration's text
/// before Tessera starts on it (a back end's socket moved aside, so that
/// lighttpd's and Tessera's spawned processes do not share a path).
pub(crate) fn compare_edited(
    dir: &TempDir,
    conf_text: &str,
    requests: &[(&str, &str)],
    edit: impl Fn(String) -> String,
) {
    let port = free_port();
    let port2 = conf_text.contains("PORT2").then(free_port);
    let conf = dir.write(
        "lighttpd.conf",
        conf_text
            .replace("PORT2", &port2.unwrap_or(0).to_string())
            .replace("PORT", &port.to_string()),
    );
    let (tv, imported, report) = import_on_any_port("lighttpd", &conf, dir.path());
    let tv: toml::Table = toml::from_str(&edit(toml::to_string(&tv).unwrap())).unwrap();
    let imported = edit(imported);
    let l = start_lighttpd(&conf, port, dir.path());
    let (_server, pairs) = match port2 {
        None => {
            let t = Server::start(&toml::to_string(&tv).unwrap(), |_| {});
            let a = t.addr;
            (t, vec![(l.addr, a)])
        }
        Some(p2) => {
            let (t1, t2) = (free_port(), free_port());
            let text = imported
                .replace(
                    &format!("\"127.0.0.1:{port}\""),
                    &format!("\"127.0.0.1:{t1}\""),
                )
                .replace(
                    &format!("\"127.0.0.1:{p2}\""),
                    &format!("\"127.0.0.1:{t2}\""),
                );
            let t = Server::start(&text, |_| {});
            assert_eq!(t.addr.port(), t1, "{text}");
            let at = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
            (t, vec![(l.addr, at(t1)), (at(p2), at(t2))])
        }
    };
    let mut diffs = Vec::new();
    for (host, path) in requests {
        for (n, &(la, ta)) in pairs.iter().enumerate() {
            for http10 in [false, true] {
                let what = format!(
                    "{host} {path} HTTP/{}{}",
                    if http10 { "1.0" } else { "1.1" },
                    if n == 0 { "" } else { " (second listener)" }
                );
                let a = send(la, path, host, http10);
                let b = send(ta, path, host, http10);
                let mut d = same(&what, &a, &b, http10);
                // The difference the README's migration guide lists, checked to
                // be exactly that: lighttpd's url.access-deny 403 carries no
                // setenv headers (Tessera's headers module runs on every response).
                if a.status == 403 && b.status == 403 && x_headers(&a).is_empty() {
                    d.retain(|x| !x.contains(": x-headers:"));
                }
                diffs.extend(d);
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "lighttpd and Tessera differ:\n{}\n\nimported configuration:\n{imported}\n\nreport:\n{report}",
        diffs.join("\n")
    );
}

/// The first lines of an equivalence test's lighttpd configuration:
/// `var.root` (the test directory), the document root `root + "/www"`, port
/// `PORT` on 127.0.0.1, the user, and `server.modules` with `modules`.
fn equiv_head(dir: &TempDir, modules: &str) -> String {
    format!(
        "var.root = \"{}\"\nserver.document-root = root + \"/www\"\nserver.port = PORT\nserver.bind = \"127.0.0.1\"\n{}server.modules = ( {modules} )",
        dir.path().display(),
        unprivileged()
    )
}

/// Debian's own /etc/lighttpd/lighttpd.conf (the legacy copy when the
/// package is not configured here), with its port, pid file, logs and user
/// pointed at the test's directory and its document root at `dir/html`;
/// with `enabled`, its `conf-enabled` include names that directory instead
/// (the modules `lighty-enable-mod` would have linked there).
pub(crate) fn debian_conf(dir: &TempDir, enabled: Option<&Path>) -> String {
    let installed = Path::new("/etc/lighttpd/lighttpd.conf");
    let source = if installed.exists() {
        installed.to_owned()
    } else {
        legacy_dir().join("lighttpd/debian-1.4.69/lighttpd.conf")
    };
    let text = std::fs::read_to_string(&source).unwrap();
    let root = dir.path().display().to_string();
    let mut conf = String::new();
    for line in text.lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        let replaced = match key {
            "server.document-root" => format!("server.document-root = \"{root}/html\""),
            "server.port" => "server.port = PORT\nserver.bind = \"127.0.0.1\"".to_owned(),
            // Errors to stderr; no pid file (lighttpd may have dropped root).
            "server.errorlog" | "server.pid-file" => continue,
            "server.upload-dirs" => format!("server.upload-dirs = ( \"{root}\" )"),
            "server.username" | "server.groupname" => continue,
            _ if line.contains("use-ipv6.pl") => continue,
            _ if line.starts_with("include \"/etc/lighttpd/conf-enabled/") && enabled.is_some() => {
                format!("include \"{}/*.conf\"", enabled.unwrap().display())
            }
            _ => line.to_owned(),
        };
        conf.push_str(&replaced);
        conf.push('\n');
    }
    conf.push_str(unprivileged());
    conf
}

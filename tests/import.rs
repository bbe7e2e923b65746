//! `tessera import` (issue 7), black-box: every legacy configuration in
//! `../shared/legacy-configs` imports and its output passes `tessera -t`, and
//! Debian's lighttpd and Tessera, started on a configuration and on its
//! import over the same document roots, answer the same requests alike
//! (status, Content-Type, Cache-Control, Expires, the headers the
//! configuration sets, Location).

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

#[test]
fn every_legacy_configuration_imports_and_passes_check() {
    let mut files = Vec::new();
    files_under(&legacy_dir(), &mut files);
    assert!(
        files.len() > 40,
        "expected the whole legacy set, found {}",
        files.len()
    );
    let tmp = TempDir::new("legacy");
    for (i, f) in files.iter().enumerate() {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let source = if f.to_string_lossy().contains("/cherokee/") {
            "cherokee"
        } else {
            "lighttpd"
        };
        let out = tmp.path().join(format!("{i}.toml"));
        let (code, report) = import(source, f, &out);
        if name.starts_with("README") {
            // Documentation, not a configuration: a failure naming the place.
            assert_eq!(code, 2, "{}: {report}", f.display());
            assert!(report.contains(&format!("{}:", f.display())), "{report}");
            continue;
        }
        if code == 2 && report.contains("lighttpd refuses to start") {
            // An include missing on this machine (the upstream example's
            // /etc/lighttpd/modules.conf): refused as lighttpd refuses it.
            assert!(report.contains(&format!("{}:", f.display())), "{report}");
            continue;
        }
        assert!(
            code == 0 || code == 1,
            "{}: exit {code}: {report}",
            f.display()
        );
        assert!(report.contains("summary: "), "{}: {report}", f.display());
        // Issue 13: the HTTP proxy, mod_extforward and the request size
        // limit are translated, never dropped.
        let drops = proxy_drops(&report);
        assert!(drops.is_empty(), "{}: {drops:?}", f.display());
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("[[vhost]]"), "{}", f.display());
        let root = tmp.path().join(format!("fs{i}"));
        let checked = tmp.path().join(format!("{i}-checked.toml"));
        std::fs::write(&checked, relocate(&text, &root)).unwrap();
        let t = Command::new(bin())
            .arg("-t")
            .arg("-c")
            .arg(&checked)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert!(
            t.status.success(),
            "{}: tessera -t failed on the import: {}\n{}",
            f.display(),
            String::from_utf8_lossy(&t.stderr),
            text
        );
    }
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
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
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

#[test]
fn imported_lighttpd_configuration_behaves_like_lighttpd() {
    let dir = TempDir::new("equiv");
    dir.write("www/index.html", "<h1>one</h1>\n");
    dir.write("www/style.css", "body { color: black }\n");
    dir.write("www/img/a.png", "PNG");
    dir.write("www/admin/x.txt", "admin text\n");
    dir.write("www/admin/index.html", "<p>admin</p>\n");
    dir.write("www/docs/a.txt", "docs\n");
    dir.write("www/secret.inc", "secret\n");
    // Not in mimetype.assign: lighttpd sends application/octet-stream.
    dir.write("www/data.json", "{}\n");
    dir.write("www/logo.svg", "<svg/>\n");
    dir.write("www2/index.html", "<h1>two</h1>\n");
    dir.write("www2/style.css", "p {}\n");
    dir.write("www2/admin/x.txt", "two admin\n");
    let conf = format!(
        r#"{head}
index-file.names = ( "index.html" )
mimetype.assign = (
  ".html" => "text/html",
  ".css" => "text/css;charset=utf-8",
  ".png" => "image/png",
  ".txt" => "text/plain;charset=utf-8",
)
url.access-deny = ( "~", ".inc" )
setenv.add-response-header = ( "X-Global" => "1" )
expire.url = ( "/img/" => "access plus 1 days" )
expire.mimetypes = ( "text/css" => "access plus 2 hours" )
$HTTP["url"] =^ "/admin/" {{
  setenv.add-response-header += ( "X-Admin" => "yes" )
  expire.url = ( "" => "access plus 5 minutes" )
  $HTTP["url"] =~ "\.txt$" {{
    setenv.set-response-header = ( "X-Text" => "admin" )
  }}
}}
else $HTTP["url"] =~ "^/docs/" {{
  setenv.add-response-header = ( "X-Docs" => "1" )
}}
$HTTP["useragent"] =~ "^import-" {{
  $HTTP["url"] =$ ".css" {{
    setenv.set-response-header = ( "X-Css" => "tested" )
  }}
}}
$HTTP["host"] == "two.test" {{
  server.document-root = root + "/www2"
  setenv.add-response-header += ( "X-Site" => "two" )
  expire.mimetypes = ( "text/" => "access plus 1 hours" )
}}
$HTTP["remoteip"] == "127.0.0.1" {{
  $HTTP["url"] =^ "/admin/" {{
    setenv.set-response-header = ( "X-Local" => "1" )
  }}
}}
url.redirect = ( "^/old/(.*)$" => "/new/$1" )
url.rewrite-once = ( "^/latest/(.*)$" => "/docs/$1" )
"#,
        head = equiv_head(
            &dir,
            r#""mod_access", "mod_setenv", "mod_expire", "mod_redirect", "mod_rewrite""#
        )
    );
    let mut requests = Vec::new();
    for host in ["site.test", "two.test"] {
        for path in [
            "/",
            "/index.html",
            "/style.css",
            "/img/a.png",
            "/admin/",
            "/admin/x.txt",
            "/docs/a.txt",
            "/latest/a.txt",
            "/old/page?x=1",
            "/secret.inc",
            "/missing.html",
            "/data.json",
            "/logo.svg",
        ] {
            requests.push((host, path));
        }
    }
    compare(&dir, &conf, &requests);
}

/// Issue 11 #3: what a `$SERVER["socket"]` block holds applies on that
/// listener only, in lighttpd and in the import (a host block in it becomes a
/// vhost with `listen`); Host headers with ports get lighttpd's answers.
#[test]
fn socket_blocks_and_host_ports_behave_like_lighttpd() {
    let dir = TempDir::new("equiv-socket");
    for d in ["www", "admin", "ported", "suffix", "regex"] {
        dir.write(&format!("{d}/index.html"), format!("<h1>{d}</h1>\n"));
        dir.write(&format!("{d}/a.txt"), format!("{d} a\n"));
    }
    std::fs::remove_file(dir.path().join("ported/a.txt")).unwrap();
    let conf = format!(
        r#"{head}
mimetype.assign = ( ".html" => "text/html", ".txt" => "text/plain" )
$SERVER["socket"] == "127.0.0.1:PORT2" {{
  setenv.add-response-header = ( "X-Listener" => "second" )
  $HTTP["host"] == "admin.test" {{
    server.document-root = root + "/admin"
  }}
}}
$HTTP["host"] == "ported.test:8080" {{
  server.document-root = root + "/ported"
}}
$HTTP["host"] =$ ".suffix.test" {{
  server.document-root = root + "/suffix"
}}
$HTTP["host"] =~ "^(www\.)?regex\.test$" {{
  server.document-root = root + "/regex"
}}
$HTTP["host"] == "main.test" {{
  setenv.add-response-header = ( "X-Main" => "1" )
}}
$HTTP["host"] =$ "main.test" {{
  setenv.add-response-header = ( "X-Main-Suffix" => "1" )
}}
"#,
        head = equiv_head(&dir, r#""mod_setenv""#)
    );
    let mut requests = Vec::new();
    for host in [
        "admin.test",
        "admin.test:8443",
        "main.test",
        "main.test:8080",
        "main.test:80",
        "ported.test",
        "ported.test:8080",
        "ported.test:9090",
        "ported.test:80",
        "a.suffix.test",
        "a.suffix.test:8080",
        "regex.test",
        "www.regex.test:8080",
    ] {
        for path in ["/", "/a.txt"] {
            requests.push((host, path));
        }
    }
    compare(&dir, &conf, &requests);
}

/// Host tests decided per request see the host as lighttpd's
/// `$HTTP["host"]` does (a trailing dot, `:80` and upper case normalized
/// away), so a deny under a host regex cannot be walked around; and two
/// tests that name the same vhost (`=^ "admin."`, `=~ "^admin\."`) both keep
/// their blocks (a hostile review found both open).
#[test]
fn host_tests_see_the_normalized_host_and_same_named_tests_both_apply() {
    let dir = TempDir::new("equiv-host-tests");
    dir.write("www/index.html", "<h1>www</h1>\n");
    let conf = format!(
        r#"{head}
mimetype.assign = ( ".html" => "text/html" )
$HTTP["host"] == "www.example.com" {{ setenv.add-response-header = ( "X-Www" => "1" ) }}
$HTTP["host"] =~ "(^|\.)example\.com$" {{ url.access-deny = ( "" ) }}
$HTTP["host"] =^ "admin." {{ setenv.add-response-header = ( "X-Admin" => "1" ) }}
$HTTP["host"] =~ "^admin\." {{ url.access-deny = ( "" ) }}
$HTTP["host"] =$ "shop.test" {{ setenv.add-response-header = ( "X-Shop" => "1" ) }}
$HTTP["host"] =~ "shop\.test$" {{ url.access-deny = ( ".html" ) }}
"#,
        head = equiv_head(&dir, r#""mod_setenv", "mod_access""#)
    );
    let mut requests = Vec::new();
    for host in [
        "www.example.com",
        "www.example.com.",
        "www.example.com:80",
        "WWW.EXAMPLE.COM.",
        "example.com",
        "other.test",
        "admin.x",
        "admin.example.org",
        "ADMIN.x.",
        "a.shop.test",
        "a.shop.test.:80",
    ] {
        requests.push((host, "/index.html"));
    }
    compare(&dir, &conf, &requests);
}

/// What a hostile review found open after an import, answered as lighttpd
/// answers: a deny under a grouped `remoteip` regex, a host block under a
/// `$SERVER["socket"] !=` (no vhost of its own), and `auth.require` whose
/// backend has no user file (401 for everyone, not an open door).
#[test]
fn imported_restrictions_fail_closed_like_lighttpd() {
    let dir = TempDir::new("equiv-fail-closed");
    dir.write("www/index.html", "<h1>www</h1>\n");
    dir.write("www/admin/index.html", "<h1>admin</h1>\n");
    dir.write("www/lan/index.html", "<h1>lan</h1>\n");
    dir.write("www/lan2/index.html", "<h1>lan2</h1>\n");
    let conf = format!(
        r#"{head}
mimetype.assign = ( ".html" => "text/html" )
auth.backend = "htpasswd"
auth.backend.plain.userfile = root + "/nowhere"
auth.require = ( "/admin/" => ( "method" => "basic", "realm" => "x", "require" => "valid-user" ) )
$HTTP["remoteip"] =~ "^(127\.0\.0\.1|10\.0\.0\.5)$" {{
  $HTTP["url"] =^ "/lan/" {{ url.access-deny = ( "" ) }}
}}
$HTTP["remoteip"] =~ "^127\.0\.0\.[0-9]$" {{
  $HTTP["url"] =^ "/lan2/" {{ url.access-deny = ( "" ) }}
}}
$SERVER["socket"] == "127.0.0.1:PORT2" {{ }}
$SERVER["socket"] != "127.0.0.1:PORT2" {{
  $HTTP["host"] == "intranet.example" {{ url.access-deny = ( "" ) }}
}}
"#,
        head = equiv_head(&dir, r#""mod_access", "mod_auth", "mod_authn_file""#)
    );
    let mut requests = Vec::new();
    for host in ["intranet.example", "other.example"] {
        for path in [
            "/index.html",
            "/admin/index.html",
            "/lan/index.html",
            "/lan2/index.html",
        ] {
            requests.push((host, path));
        }
    }
    compare(&dir, &conf, &requests);
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

#[test]
fn debian_default_configuration_behaves_like_lighttpd() {
    // Debian's lighttpd.conf, its document root holding a copy of Debian's
    // placeholder page.
    let dir = TempDir::new("debian");
    dir.write(
        "html/index.lighttpd.html",
        "<html><body>placeholder</body></html>\n",
    );
    dir.write("html/index.html", "<html><body>Debian</body></html>\n");
    dir.write("html/notes.txt", "notes\n");
    dir.write("html/style.css", "p {}\n");
    dir.write("html/data.json", "{}\n");
    dir.write("html/app.js", "1;\n");
    dir.write("html/old.html~", "backup\n");
    dir.write("html/sub/readme.txt", "sub\n");
    let conf = debian_conf(&dir, None);
    let requests: Vec<(&str, &str)> = [
        "/",
        "/index.html",
        "/notes.txt",
        "/style.css",
        "/data.json",
        "/app.js",
        "/old.html~",
        "/sub/readme.txt",
        "/missing",
    ]
    .iter()
    .map(|p| ("localhost", *p))
    .collect();
    compare(&dir, &conf, &requests);
}

/// Issue 11 #10: `-o` never replaces an existing file unless `--force` is
/// given; the refused file is left byte for byte as it was.
#[test]
fn a_missing_alias_directory_is_a_warning_naming_it() {
    // lighttpd alias.url: the one directory that is missing is named
    let dir = TempDir::new("import-alias");
    let present = dir.path().join("present");
    std::fs::create_dir(&present).unwrap();
    let gone = dir.path().join("gone");
    // lighttpd also aliases single files
    let file = dir.write("favicon.ico", "icon");
    let conf = dir.write(
        "lighttpd.conf",
        format!(
            "server.document-root = \"{}\"\nserver.port = 8080\nserver.modules = (\"mod_alias\")\n\
             alias.url = ( \"/a/\" => \"{}/\", \"/b/\" => \"{}/\", \"/favicon.ico\" => \"{}\" )\n",
            dir.path().display(),
            present.display(),
            gone.display(),
            file.display()
        ),
    );
    let (_, report) = import("lighttpd", &conf, &dir.path().join("out.toml"));
    assert!(
        report.contains(&format!(
            "{}/ does not exist on this machine",
            gone.display()
        )),
        "{report}"
    );
    for there in [
        format!("{}/", present.display()),
        file.display().to_string(),
    ] {
        assert!(
            !report.contains(&format!("{there} does not exist")),
            "{report}"
        );
    }
    // Cherokee: a rule's own document_root (sahana-eden's static files)
    let conf = legacy_dir().join("cherokee/sahana-eden/cherokee.conf");
    let (_, report) = import("cherokee", &conf, &dir.path().join("out2.toml"));
    assert!(
        report.contains("/home/web2py/applications/eden/static/ does not exist on this machine"),
        "{report}"
    );
}

#[test]
fn output_refuses_to_overwrite_without_force() {
    let dir = TempDir::new("import-force");
    let root = dir.mkdir("www");
    let conf = dir.write(
        "lighttpd.conf",
        format!(
            "server.document-root = \"{}\"\nserver.port = 8081\n",
            root.display()
        ),
    );
    let out = dir.write("server.toml", "# the shipped configuration\n");
    let (code, msg) = import("lighttpd", &conf, &out);
    assert_eq!(code, 2, "{msg}");
    assert!(
        msg.contains(&format!("{}: the file exists", out.display())) && msg.contains("--force"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "# the shipped configuration\n"
    );
    let (code, msg) = run_import("lighttpd", &conf, &out, &["--force"]);
    assert!(code == 0 || code == 1, "{msg}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("0.0.0.0:8081"), "{text}");
    // A new file is written without --force.
    let fresh = dir.path().join("imported.toml");
    let (code, msg) = import("lighttpd", &conf, &fresh);
    assert!(code == 0 || code == 1, "{msg}");
    assert!(std::fs::read_to_string(&fresh)
        .unwrap()
        .contains("[[vhost]]"));
}

/// Issue 11 #1 and #6: what lighttpd refuses to start with (an empty
/// document root, a missing include file, an undefined `env.` variable) fails
/// the import with exit 2, naming file and line, and writes nothing.
#[test]
fn configurations_lighttpd_refuses_fail_naming_file_and_line() {
    let dir = TempDir::new("import-refused");
    let root = dir.mkdir("www");
    let root = root.display();
    let cases = [
        (
            "empty-root.conf",
            "server.port = 8081\nserver.document-root = \"\"\n".to_owned(),
            2,
            "server.document-root is empty",
        ),
        (
            "missing-include.conf",
            format!("server.document-root = \"{root}\"\ninclude \"not-there.conf\"\n"),
            2,
            "include \"not-there.conf\"",
        ),
        (
            "undefined-env.conf",
            format!(
                "server.port = 8081\nserver.document-root = \"{root}\"\n$HTTP[\"host\"] == \"a.test\" {{\n  server.document-root = env.TESSERA_TEST_UNSET_VARIABLE + \"/a\"\n}}\n"
            ),
            4,
            "env.TESSERA_TEST_UNSET_VARIABLE",
        ),
    ];
    for (name, text, line, what) in cases {
        let conf = dir.write(name, text);
        let out = dir.path().join(format!("{name}.toml"));
        let (code, err) = import("lighttpd", &conf, &out);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.contains(&format!("{}:{line}: ", conf.display())) && err.contains(what),
            "{name}: {err}"
        );
        assert!(!out.exists(), "{name}: nothing is written");
    }
}

/// One request with `method` on a new connection, HTTP/1.1, `Connection: close`.
fn send_method(addr: SocketAddr, method: &str, target: &str, host: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: import-test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    buf
}

/// Seconds of the day of `[dd/Mon/yyyy:hh:mm:ss +0000]`.
fn clf_seconds(t: &str) -> i64 {
    assert!(
        t.len() == 28 && t.starts_with('[') && t.ends_with(" +0000]"),
        "not a UTC CLF time: {t}"
    );
    let n = |a: usize| t[a..a + 2].parse::<i64>().unwrap();
    n(13) * 3600 + n(16) * 60 + n(19)
}

/// Issue 11 #5: the access-log line of an imported `accesslog.format` holds,
/// directive by directive, what Debian's lighttpd writes for the same
/// requests (times within a few seconds, durations rounded up, ports each
/// server's own; byte counts only where both send the same body).
#[test]
fn imported_access_log_lines_match_lighttpd() {
    // lighttpd allows one strftime %t (or %{sec}t) per format: three runs.
    compare_access_logs(&[
        "%h",
        "%a",
        "%l",
        "%u",
        "%V",
        "%r",
        "%s",
        "%>s",
        "%b",
        "%B",
        "%H",
        "%m",
        "%U",
        "%q",
        "%{User-Agent}i",
        "%{Referer}i",
        "%A",
        "%p",
        "%{remote}p",
        "%T",
        "%{ms}T",
        "%{us}T",
        "%D",
        "%{msec}t",
        "%t",
    ]);
    compare_access_logs(&["%{%d/%b/%Y:%H:%M:%S %z}t", "%{local}p", "%{usec}t", "%{s}T"]);
    compare_access_logs(&["%{sec}t", "%{msec}T", "%{usec}T"]);
}

fn compare_access_logs(fields: &[&str]) {
    let dir = TempDir::new("equiv-log");
    let root = dir.path().display().to_string();
    dir.write("www/index.html", "<h1>one</h1>\n");
    // lighttpd opens its log after dropping root for nobody.
    let logs = dir.mkdir("logs");
    std::fs::set_permissions(&logs, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let port = free_port();
    let conf = dir.write(
        "lighttpd.conf",
        format!(
            "server.document-root = \"{root}/www\"\nserver.port = {port}\nserver.bind = \"127.0.0.1\"\n{user}server.modules = ( \"mod_accesslog\" )\nmimetype.assign = ( \".html\" => \"text/html\" )\naccesslog.filename = \"{root}/logs/lighttpd.log\"\naccesslog.format = \"{fmt}\"\n",
            user = unprivileged(),
            fmt = fields.join("|").replace('"', "\\\"")
        ),
    );
    let (mut tv, _, report) = import_on_any_port("lighttpd", &conf, dir.path());
    let vh = tv["vhost"].as_array_mut().unwrap()[0]
        .as_table_mut()
        .unwrap();
    let tlog = dir.path().join("tessera.log");
    vh["access-log"]
        .as_table_mut()
        .unwrap()
        .insert("path".into(), tlog.display().to_string().into());
    let l = start_lighttpd_tz(&conf, port, dir.path());
    let t = Server::start(&toml::to_string(&tv).unwrap(), |_| {});
    let requests = [
        ("GET", "/index.html"),
        ("HEAD", "/index.html"),
        ("GET", "/index.html?x=1&y=2"),
        ("GET", "/missing.html"),
    ];
    for (m, p) in requests {
        send_method(l.addr, m, p, &format!("site.test:{port}"));
        send_method(t.addr, m, p, &format!("site.test:{port}"));
    }
    // Graceful stops flush both logs.
    let mut l = l;
    crate::util::terminate(&mut l.child);
    let t_port = t.addr.port();
    assert!(t.stop().success());
    let ll = std::fs::read_to_string(dir.path().join("logs/lighttpd.log")).unwrap();
    let tl = std::fs::read_to_string(&tlog).unwrap();
    let ll: Vec<&str> = ll.lines().collect();
    let tl: Vec<&str> = tl.lines().collect();
    assert_eq!(ll.len(), requests.len(), "lighttpd: {ll:#?}");
    assert_eq!(tl.len(), requests.len(), "tessera: {tl:#?}");
    let mut diffs = Vec::new();
    for (i, (a, b)) in ll.iter().zip(&tl).enumerate() {
        let fa: Vec<&str> = a.split('|').collect();
        let fb: Vec<&str> = b.split('|').collect();
        assert_eq!(fa.len(), fields.len(), "{a}");
        assert_eq!(fb.len(), fields.len(), "{b}");
        let missing = requests[i].1 == "/missing.html";
        for (k, d) in fields.iter().enumerate() {
            let (x, y) = (fa[k], fb[k]);
            let num = |v: &str| v.parse::<i64>().unwrap_or(-1);
            let ok = match *d {
                "%{local}p" => num(x) == i64::from(port) && num(y) == i64::from(t_port),
                "%{s}T" => (0..=1).contains(&num(x)) && (0..=1).contains(&num(y)),
                "%{usec}t" => {
                    (num(x) - num(y)).abs() <= 5_000_000 && x.len() == 16 && y.len() == 16
                }
                // Error pages differ in size between the servers.
                "%b" | "%B" if missing => num(x) > 0 && num(y) > 0,
                "%p" => num(x) == i64::from(port) && num(y) == i64::from(t_port),
                "%{remote}p" => num(x) > 0 && num(y) > 0,
                // Rounded up: at least 1 for any request, never 0.
                "%{ms}T" | "%{us}T" | "%{msec}T" | "%{usec}T" | "%D" => num(x) >= 1 && num(y) >= 1,
                // lighttpd takes %T from a clock it caches once a second,
                // which may lag the request's start: -1 happens there
                "%T" => (-1..=1).contains(&num(x)) && (0..=1).contains(&num(y)),
                "%{sec}t" => (num(x) - num(y)).abs() <= 5,
                "%{msec}t" => (num(x) - num(y)).abs() <= 5000 && x.len() == 13 && y.len() == 13,
                "%t" => (clf_seconds(x) - clf_seconds(y)).abs() <= 5,
                "%{%d/%b/%Y:%H:%M:%S %z}t" => {
                    (clf_seconds(&format!("[{x}]")) - clf_seconds(&format!("[{y}]"))).abs() <= 5
                }
                _ => x == y,
            };
            if !ok {
                diffs.push(format!(
                    "{} {}: {d}: lighttpd {x:?} / tessera {y:?}",
                    requests[i].0, requests[i].1
                ));
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "{}\nlighttpd:\n{}\ntessera:\n{}\nreport:\n{report}",
        diffs.join("\n"),
        ll.join("\n"),
        tl.join("\n")
    );
}

/// Issue 11 #4: a Cherokee rule with `expiration = time` keeps its lifetime
/// beside caching options (one line `max-age=N, public, …` and `Expires`, as
/// Cherokee's `cherokee_connection_add_expiration_header` writes them) and
/// beside a `Cache-Control` header operation (which replaces that line, as
/// Cherokee's `header_op` `add` does, while `Expires` stays).
#[test]
fn cherokee_expiration_time_keeps_its_lifetime() {
    let dir = TempDir::new("cherokee-exp");
    let root = dir.mkdir("www");
    dir.write("www/cached/a.txt", "a\n");
    dir.write("www/ops/b.txt", "b\n");
    dir.write("www/plain.txt", "p\n");
    let conf = dir.write(
        "cherokee.conf",
        format!(
            "server!bind!1!port = 8081\n\
             vserver!1!nick = default\n\
             vserver!1!document_root = {root}\n\
             vserver!1!rule!1!match = default\n\
             vserver!1!rule!1!handler = file\n\
             vserver!1!rule!20!match = directory\n\
             vserver!1!rule!20!match!directory = /cached\n\
             vserver!1!rule!20!match!final = 0\n\
             vserver!1!rule!20!expiration = time\n\
             vserver!1!rule!20!expiration!time = 1h\n\
             vserver!1!rule!20!expiration!caching = public\n\
             vserver!1!rule!20!expiration!caching!must-revalidate = 1\n\
             vserver!1!rule!30!match = directory\n\
             vserver!1!rule!30!match!directory = /ops\n\
             vserver!1!rule!30!match!final = 0\n\
             vserver!1!rule!30!expiration = time\n\
             vserver!1!rule!30!expiration!time = 2h\n\
             vserver!1!rule!30!header_op!1!type = add\n\
             vserver!1!rule!30!header_op!1!header = Cache-Control\n\
             vserver!1!rule!30!header_op!1!value = no-transform\n",
            root = root.display()
        ),
    );
    let (tv, _, report) = import_on_any_port("cherokee", &conf, dir.path());
    let t = Server::start(&toml::to_string(&tv).unwrap(), |_| {});
    let expires_in = |r: &Response| -> u64 {
        let e = httpdate::parse_http_date(r.header("expires").expect("Expires")).unwrap();
        e.duration_since(std::time::SystemTime::now())
            .unwrap_or_default()
            .as_secs()
    };
    let a = t.get("/cached/a.txt");
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header_all("cache-control"),
        ["max-age=3600, public, must-revalidate"],
        "{report}"
    );
    assert!((3590..=3600).contains(&expires_in(&a)), "{:?}", a.headers);
    let b = t.get("/ops/b.txt");
    assert_eq!(b.header_all("cache-control"), ["no-transform"], "{report}");
    assert!((7190..=7200).contains(&expires_in(&b)), "{:?}", b.headers);
    let p = t.get("/plain.txt");
    assert_eq!(p.header("cache-control"), None);
    assert_eq!(p.header("expires"), None);
}

/// A lighttpd configuration using every directive of issue 13 that maps to
/// `[server]` (`server.max-request-size`, mod_extforward), imported and
/// served: `tessera -t` accepts it, and the request size limit is lighttpd's
/// (8192 KiB): a 4 MiB upload is not refused, a 9 MiB one is (413).
#[test]
fn imported_request_size_and_trusted_proxies_apply() {
    let dir = TempDir::new("import-extforward");
    dir.mkdir("www");
    dir.write("www/index.html", "hello\n");
    let conf = dir.write(
        "lighttpd.conf",
        format!(
            "server.document-root = \"{}/www\"\nserver.port = 8080\n\
             server.modules = ( \"mod_extforward\" )\n\
             server.max-request-size = 8192\n\
             extforward.forwarder = ( \"127.0.0.1\" => \"trust\", \"10.0.0.0/8\" => \"trust\" )\n\
             extforward.headers = ( \"X-Forwarded-For\" )\n",
            dir.path().display()
        ),
    );
    let (tv, imported, report) = import_on_any_port("lighttpd", &conf, dir.path());
    assert!(proxy_drops(&report).is_empty(), "{report}");
    let s = tv["server"].as_table().unwrap();
    assert_eq!(
        s["max-body-size"].as_integer(),
        Some(8192 * 1024),
        "{imported}"
    );
    assert_eq!(
        s["trusted-proxies"].as_array().unwrap().len(),
        2,
        "{imported}"
    );
    assert_eq!(s["real-ip-header"].as_str(), Some("x-forwarded-for"));
    let checked = dir.write("checked.toml", toml::to_string(&tv).unwrap());
    let t = crate::util::check_config(&checked);
    assert!(
        t.status.success(),
        "tessera -t: {}\n{imported}",
        String::from_utf8_lossy(&t.stderr)
    );
    let server = Server::start(&toml::to_string(&tv).unwrap(), |_| {});
    let post = |len: usize| -> u16 {
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let head = format!(
            "POST /index.html HTTP/1.1\r\nHost: site.test\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        // The server may answer (and close) before the body is sent.
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0;
        while sent < len {
            let n = chunk.len().min(len - sent);
            if s.write_all(&chunk[..n]).is_err() {
                break;
            }
            sent += n;
        }
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        Response::parse(&buf, false).status
    };
    assert_ne!(post(4 << 20), 413, "a 4 MiB body is within 8192 KiB");
    assert_eq!(post(9 << 20), 413, "a 9 MiB body is over 8192 KiB");
}

/// lighttpd and Cherokee proxy configurations (every form of issue 13's
/// importer section) import without a dropped proxy line, and `tessera -t`
/// accepts the output.
///
/// NEEDS THE `proxy` MODULE: on this branch's base it is not registered yet,
/// so `tessera -t` refuses `[vhost.proxy]` as an unknown module. Written
/// against the issue's specification of `[[upstream]]` and `proxy`; run it
#[test]
fn imported_proxy_configurations_pass_check() {
    let dir = TempDir::new("import-proxy");
    dir.mkdir("www");
    let root = format!("{}/www", dir.path().display());
    let lighttpd = format!(
        "server.document-root = \"{root}\"\nserver.port = 8080\n\
         server.modules = ( \"mod_proxy\", \"mod_extforward\" )\n\
         server.max-request-size = 8192\n\
         extforward.forwarder = ( \"10.0.0.1\" => \"trust\" )\n\
         extforward.headers = ( \"Forwarded\" )\n\
         extforward.hap-PROXY = \"enable\"\n\
         proxy.balance = \"fair\"\n\
         proxy.server = ( \"/api/\" => ( ( \"host\" => \"127.0.0.1\", \"port\" => 8081 ), ( \"host\" => \"127.0.0.1\", \"port\" => 8082 ) ),\n\
           \".jsp\" => ( \"tomcat\" => ( \"host\" => \"127.0.0.1\", \"port\" => 8083, \"connect-timeout\" => 3 ) ),\n\
           \"/sock/\" => ( ( \"socket\" => \"/run/app.sock\" ) ) )\n\
         proxy.header = ( \"map-urlpath\" => ( \"/api/\" => \"/\" ), \"map-host-request\" => ( \"-\" => \"app.internal\" ), \"upgrade\" => \"enable\" )\n\
         proxy.forwarded = ( \"for\" => 1, \"proto\" => 1, \"host\" => 1 )\n\
         $HTTP[\"host\"] == \"www.example.com\" {{\n\
           proxy.balance = \"sticky\"\n\
           proxy.server = ( \"\" => ( ( \"host\" => \"127.0.0.1\", \"port\" => 8084 ), ( \"host\" => \"127.0.0.1\", \"port\" => 8085 ) ) )\n\
         }}\n\
         $HTTP[\"url\"] =~ \"^/legacy/\" {{\n\
           proxy.balance = \"round-robin\"\n\
           proxy.server = ( \"/\" => ( ( \"host\" => \"127.0.0.1\", \"port\" => 8086 ), ( \"host\" => \"127.0.0.1\", \"port\" => 8087 ) ) )\n\
         }}\n"
    );
    let cherokee = format!(
        "server!bind!1!port = 8080\n\
         vserver!1!nick = default\n\
         vserver!1!document_root = {root}\n\
         vserver!1!rule!1!match = default\n\
         vserver!1!rule!1!handler = file\n\
         vserver!1!rule!100!match = directory\n\
         vserver!1!rule!100!match!directory = /app\n\
         vserver!1!rule!100!handler = proxy\n\
         vserver!1!rule!100!handler!balancer = ip_hash\n\
         vserver!1!rule!100!handler!balancer!source!1 = 1\n\
         vserver!1!rule!100!handler!balancer!source!2 = 2\n\
         vserver!1!rule!200!match = extensions\n\
         vserver!1!rule!200!match!extensions = php\n\
         vserver!1!rule!200!handler = proxy\n\
         vserver!1!rule!200!handler!balancer = failover\n\
         vserver!1!rule!200!handler!balancer!source!1 = 1\n\
         vserver!1!rule!200!handler!balancer!source!2 = 2\n\
         vserver!1!rule!200!handler!in_preserve_host = 1\n\
         source!1!type = host\n\
         source!1!host = 127.0.0.1:8081\n\
         source!2!type = host\n\
         source!2!host = 127.0.0.1:8082\n"
    );
    for (source, name, text) in [
        ("lighttpd", "lighttpd.conf", lighttpd),
        ("cherokee", "cherokee.conf", cherokee),
    ] {
        let conf = dir.write(name, text);
        let out = dir.path().join(format!("{source}.toml"));
        let (code, report) = import(source, &conf, &out);
        assert!(code == 0 || code == 1, "{report}");
        assert!(proxy_drops(&report).is_empty(), "{report}");
        let imported = std::fs::read_to_string(&out).unwrap();
        assert!(imported.contains("[[upstream]]"), "{imported}");
        let checked = dir.write(
            &format!("{source}-checked.toml"),
            relocate(&imported, &dir.path().join(format!("fs-{source}"))),
        );
        let t = crate::util::check_config(&checked);
        assert!(
            t.status.success(),
            "{source}: tessera -t: {}\n{imported}",
            String::from_utf8_lossy(&t.stderr)
        );
    }
}

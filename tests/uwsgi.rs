//! The `uwsgi` module (issue 14) against Debian's uwsgi with its python3
//! plugin, running tests/upstream/wsgi_app.py. The same server speaks SCGI
//! for tests/scgi.rs (`--scgi-socket`).

use std::process::{Child, Command, Stdio};

use crate::fastcgi::{kill_group, wait_for};
use crate::proxy::sha256_hex;
use crate::util::{post, post_chunked, Response, Server, TempDir};

/// A running uWSGI master with one worker, in its own process group.
pub(crate) struct Uwsgi {
    child: Child,
    /// `127.0.0.1:PORT` or `unix:/path`, as an `[[upstream]]` server.
    pub(crate) server: String,
    _dir: TempDir,
}

impl Uwsgi {
    /// Starts the WSGI app with `--uwsgi-socket` (`protocol` "uwsgi") or
    /// `--scgi-socket` ("scgi"), on a TCP port or (`unix`) a socket file.
    pub(crate) fn start(protocol: &str, unix: bool) -> Uwsgi {
        use std::os::unix::process::CommandExt;
        assert!(
            Command::new("uwsgi").arg("--version").output().is_ok(),
            "uwsgi is not installed (apt-get install uwsgi uwsgi-plugin-python3)"
        );
        let dir = TempDir::new("uwsgi");
        let (bind, server, probe) = if unix {
            let p = dir.path().join("app.sock");
            (
                p.display().to_string(),
                format!("unix:{}", p.display()),
                p.display().to_string(),
            )
        } else {
            let port = crate::util::free_port();
            let a = format!("127.0.0.1:{port}");
            (a.clone(), a.clone(), a)
        };
        let app = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/upstream/wsgi_app.py");
        let child = Command::new("uwsgi")
            .args(["--plugin", "python3", "--master", "--processes", "1"])
            .arg(format!("--{protocol}-socket"))
            .arg(&bind)
            .arg("--wsgi-file")
            .arg(app)
            .args([
                "--die-on-term",
                "--disable-logging",
                "--buffer-size",
                "16384",
            ])
            .arg("--logto")
            .arg(dir.path().join("uwsgi.log"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("uwsgi");
        let u = Uwsgi {
            child,
            server,
            _dir: dir,
        };
        wait_for(&format!("uwsgi on {probe}"), || {
            if unix {
                std::os::unix::net::UnixStream::connect(&probe).is_ok()
            } else {
                std::net::TcpStream::connect(&probe).is_ok()
            }
        });
        u
    }

    /// The uWSGI log (the app's stderr).
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("uwsgi.log")).unwrap_or_default()
    }
}

impl Drop for Uwsgi {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}

/// A site whose `/app/` goes to `server` through `module` (`uwsgi` or
/// `scgi`) mounted at `/app`.
pub(crate) fn site(module: &str, server: &str) -> Server {
    Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nmax-body-size = 4194304\n\n[[upstream]]\nname = \"py\"\nservers = [\"{server}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/app/\" }}\n[vhost.rule.{module}]\nupstream = \"py\"\nscript-name = \"/app\"\nparams = {{ \"APP_ENV\" = \"test\" }}\n"
        ),
        |d| {
            d.write("www/plain.txt", "static");
        },
    )
}

fn var<'a>(r: &'a Response, k: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(&r.body).unwrap();
    text.lines().find_map(|l| l.strip_prefix(&format!("{k}=")))
}

/// The checks tests/uwsgi.rs and tests/scgi.rs share: variables, a POST
/// body, status and headers, a redirect, a large answer.
pub(crate) fn check_app(s: &Server) {
    let r = s.req(
        "GET",
        "/app/env/x?a=1&b=2",
        &["X-Test: yes", "Proxy: http://evil.example/"],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(var(&r, "SCRIPT_NAME"), Some("/app"));
    assert_eq!(var(&r, "PATH_INFO"), Some("/env/x"));
    assert_eq!(var(&r, "QUERY_STRING"), Some("a=1&b=2"));
    assert_eq!(var(&r, "REQUEST_METHOD"), Some("GET"));
    assert_eq!(var(&r, "REQUEST_URI"), Some("/app/env/x?a=1&b=2"));
    assert_eq!(var(&r, "HTTP_X_TEST"), Some("yes"));
    assert_eq!(var(&r, "HTTP_HOST"), Some("site.test"));
    assert_eq!(var(&r, "APP_ENV"), Some("test"));
    assert_eq!(var(&r, "HTTP_PROXY"), None, "httpoxy");
    assert_eq!(r.header_all("content-type"), ["text/plain"]);
    // a POST body
    let data: Vec<u8> = (0..500_000u32).map(|i| (i % 247) as u8).collect();
    let r = Response::parse(&s.raw(&post("/app/post", &data)), false);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), format!("{} {}", data.len(), sha256_hex(&data)));
    // chunked: collected, sent with its length
    let r = Response::parse(
        &s.raw(&post_chunked("/app/post", &data[..100_000], 30_000)),
        false,
    );
    assert_eq!(r.text(), format!("100000 {}", sha256_hex(&data[..100_000])));
    // status and headers
    let r = s.get("/app/status");
    assert_eq!((r.status, r.text().as_str()), (418, "tea"));
    assert_eq!(r.header("x-app"), Some("teapot"));
    let r = s.get("/app/redirect");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("https://example.org/there"));
    let r = s.get("/app/nothing");
    assert_eq!((r.status, r.text().as_str()), (404, "no such path"));
    // a large answer streams whole
    let r = s.get("/app/big?n=3000000");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 3_000_000);
    // outside /app/: the files
    assert_eq!(s.get("/plain.txt").text(), "static");
}

#[test]
fn uwsgi_runs_a_wsgi_app_over_tcp() {
    let app = Uwsgi::start("uwsgi", false);
    let s = site("uwsgi", &app.server);
    check_app(&s);
    // the app's stderr stays in uWSGI's log, never in the answer
    let r = s.get("/app/stderr");
    assert_eq!(r.text(), "ok");
    wait_for("the app's stderr in uWSGI's log", || {
        app.log().contains("oops from wsgi")
    });
}

#[test]
fn uwsgi_runs_a_wsgi_app_on_a_unix_socket() {
    let app = Uwsgi::start("uwsgi", true);
    let s = site("uwsgi", &app.server);
    check_app(&s);
}

#[test]
fn a_uwsgi_backend_that_is_down_is_502() {
    let s = site("uwsgi", &format!("127.0.0.1:{}", crate::util::free_port()));
    assert_eq!(s.get("/app/env").status, 502);
}

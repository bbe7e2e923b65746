//! The `proxy` module and upstreams (issue 13): real upstreams are the small
//! Python app in tests/upstream/app.py, started on 127.0.0.1 port 0.

mod abort;
mod bodies;
mod headers;
mod protocols;
mod upstreams;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use crate::util::{Response, Server};

/// A running tests/upstream/app.py.
struct App {
    child: Child,
    port: u16,
}

impl App {
    fn start(name: &str) -> App {
        App::start_on(name, None)
    }

    /// On a Unix socket at `socket`, when given.
    fn start_on(name: &str, socket: Option<&std::path::Path>) -> App {
        let mut child = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/upstream/app.py"
            ))
            .arg(name)
            .args(socket)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the app's port");
        App { child, port }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server whose `/api/` goes to an upstream of `servers` (map-path strips
/// `/api`), the rest static; `extra_upstream` and `extra_server` are TOML
/// lines.
fn proxy_server(servers: &[String], extra_upstream: &str, extra_server: &str) -> Server {
    let list = servers
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n{extra_server}\n\n[[upstream]]\nname = \"app\"\nservers = [{list}]\n{extra_upstream}\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"access-log\", \"static-file\"]\n[vhost.access-log]\npath = \"access.log\"\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/api/\" }}\n[vhost.rule.proxy]\nupstream = \"app\"\nmap-path = {{ \"/api/\" = \"/\" }}\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/server-status\" }}\n[vhost.rule.status]\nallow = [\"127.0.0.1\"]\n"
        ),
        |d| {
            d.write("www/local.txt", "local");
        },
    )
}

fn json(r: &Response) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|_| panic!("not JSON: {}", r.text()))
}

fn upstream_header<'a>(j: &'a serde_json::Value, name: &str) -> Vec<&'a str> {
    j["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p[0] == name)
        .map(|p| p[1].as_str().unwrap())
        .collect()
}

pub(crate) fn sha256_hex(data: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(data)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

//! The `cgi` module (issue 14): sh and Python scripts written into the
//! document root, one process per request.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::fastcgi::wait_for;
use crate::proxy::sha256_hex;
use crate::util::{post, post_chunked, Response, Server, TempDir};

/// Writes an executable script.
fn script(d: &TempDir, rel: &str, text: &str) {
    let p = d.write(rel, text);
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn config(cgi_extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nmax-body-size = 4194304\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"cgi\", \"static-file\"]\n[vhost.cgi]\nassign = {{ \".cgi\" = \"\", \".py\" = \"/usr/bin/python3\" }}\nparams = {{ \"APP_ENV\" = \"test\" }}\n{cgi_extra}\n"
    )
}

/// The scripts of the common site; `pids` is where the long-running ones
/// write their process ids.
fn scripts(d: &TempDir) {
    let pids = d.mkdir("pids");
    let pids = pids.display();
    script(
        d,
        "www/env.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nenv\necho \"CWD=$(pwd)\"\n",
    );
    // not executable: the interpreter runs it
    d.write(
        "www/sub/env.py",
        "import os, sys\nsys.stdout.write('Content-Type: text/plain\\n\\n')\nfor k, v in sorted(os.environ.items()):\n    sys.stdout.write('%s=%s\\n' % (k, v))\nsys.stdout.write('CWD=%s\\n' % os.getcwd())\n",
    );
    d.write(
        "www/echo.py",
        "import os, sys, hashlib\nn = int(os.environ.get('CONTENT_LENGTH') or 0)\ndata = sys.stdin.buffer.read(n)\nsys.stdout.write('Content-Type: text/plain\\n\\n%d %s' % (len(data), hashlib.sha256(data).hexdigest()))\n",
    );
    // writes while it reads: a body larger than the pipes needs both ways
    // to flow at once
    // the length of its GET body, and no body for HEAD (RFC 3875 §4.3.3)
    script(
        d,
        "www/head.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\nContent-Length: 5\\r\\n\\r\\n'\n[ \"$REQUEST_METHOD\" = HEAD ] || printf hello\n",
    );
    script(
        d,
        "www/cat.cgi",
        "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\n\\n'\nexec cat\n",
    );
    script(
        d,
        "www/status.cgi",
        "#!/bin/sh\nprintf 'Status: 418 I am a teapot\\nContent-Type: text/plain\\nX-Script: yes\\n\\ntea'\n",
    );
    script(
        d,
        "www/redirect.cgi",
        "#!/bin/sh\nprintf 'Location: https://example.org/there\\n\\n'\n",
    );
    script(
        d,
        "www/stderr.cgi",
        "#!/bin/sh\necho 'oops from cgi' >&2\nprintf 'Content-Type: text/plain\\n\\nok'\n",
    );
    script(
        d,
        "www/nph-status.cgi",
        "#!/bin/sh\nprintf 'HTTP/1.1 201 Created\\r\\nContent-Type: text/plain\\r\\nX-Nph: yes\\r\\n\\r\\nnph body'\n",
    );
    // the head, then output forever until killed
    script(
        d,
        "www/ticks.cgi",
        &format!("#!/bin/sh\necho $$ > {pids}/ticks.tmp && mv {pids}/ticks.tmp {pids}/ticks\nprintf 'Content-Type: text/plain\\n\\n'\nwhile :; do echo tick; sleep 0.1; done\n"),
    );
    // the head, then waits (bounded) for the test's go
    script(
        d,
        "www/hold.cgi",
        &format!("#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nheld\\n'\ni=0\nwhile [ ! -e {pids}/release ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\necho released\n"),
    );
    script(
        d,
        "www/nph-bad.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nno status line'\n",
    );
    script(d, "www/nohead.cgi", "#!/bin/sh\nexit 3\n");
    script(
        d,
        "www/local.cgi",
        "#!/bin/sh\nprintf 'Location: /plain.txt\\n\\n'\n",
    );
    d.write("www/plain.txt", "static");
    // no extension: run through script-name
    script(
        d,
        "www/tool",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho \"SCRIPT_NAME=$SCRIPT_NAME\"\necho \"PATH_INFO=$PATH_INFO\"\n",
    );
    // declares more than it writes, then dies
    script(
        d,
        "www/short.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\nContent-Length: 100000\\n\\nonly this'\nkill -9 $$\n",
    );
    // a file that may not run: no x bit and no interpreter for .cgi
    d.write("www/noexec.cgi", "#!/bin/sh\necho never\n");
    // an upload named like a script directory: must never run
    script(
        d,
        "www/uploads/evil.jpg",
        &format!(
            "#!/bin/sh\ntouch {pids}/evil-ran\nprintf 'Content-Type: text/plain\\n\\nEXECUTED'\n"
        ),
    );
}

fn var<'a>(r: &'a Response, k: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(&r.body).unwrap();
    text.lines().find_map(|l| l.strip_prefix(&format!("{k}=")))
}

/// Whether process `pid` is gone (or a zombie: killed, not yet reaped).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // "pid (comm) S ...": the state follows the last ')'
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// Reads the pid a script wrote to `file`, waiting for it at most 5 s.
fn read_pid(file: &Path) -> u32 {
    wait_for(&format!("{}", file.display()), || file.exists());
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn cgi_scripts_see_the_cgi_variables() {
    let s = Server::start(&config(""), scripts);
    let r = s.req(
        "GET",
        "/env.cgi/extra/path?a=1&b=2",
        &[
            "X-Test: yes",
            "Proxy: http://evil.example/",
            "X_Test: forged",
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(var(&r, "SCRIPT_NAME"), Some("/env.cgi"));
    assert_eq!(var(&r, "PATH_INFO"), Some("/extra/path"));
    assert_eq!(var(&r, "QUERY_STRING"), Some("a=1&b=2"));
    assert_eq!(var(&r, "REQUEST_METHOD"), Some("GET"));
    assert_eq!(var(&r, "GATEWAY_INTERFACE"), Some("CGI/1.1"));
    assert_eq!(var(&r, "HTTP_X_TEST"), Some("yes"));
    assert_eq!(var(&r, "APP_ENV"), Some("test"));
    assert_eq!(var(&r, "HTTP_PROXY"), None, "httpoxy");
    assert_eq!(var(&r, "HTTP_X_TEST"), Some("yes"));
    assert!(var(&r, "SCRIPT_FILENAME")
        .unwrap()
        .ends_with("/www/env.cgi"));
    // lighttpd's working directory: the script's
    assert_eq!(
        var(&r, "CWD").map(Path::new),
        Some(s.root().canonicalize().unwrap().as_path())
    );
    assert_eq!(r.header_all("content-type"), ["text/plain"]);
    // Python through its interpreter (the file is not executable)
    let r = Response::parse(
        &s.raw(b"POST /sub/env.py HTTP/1.1\r\nHost: site.test\r\nX-Test: py\r\nX.Forged: forged\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"),
        false,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(var(&r, "SCRIPT_NAME"), Some("/sub/env.py"));
    assert_eq!(var(&r, "REQUEST_METHOD"), Some("POST"));
    assert_eq!(var(&r, "CONTENT_LENGTH"), Some("3"));
    assert_eq!(var(&r, "CONTENT_TYPE"), Some("text/plain"));
    assert_eq!(var(&r, "HTTP_X_TEST"), Some("py"));
    // a name with a byte other than a letter, digit or `-` could pose as
    // its twin (PHP reads `.` as `_`): dropped (dash drops such variables
    // itself; Python shows them)
    assert_eq!(var(&r, "HTTP_X.FORGED"), None);
    assert!(var(&r, "CWD").unwrap().ends_with("/www/sub"));
}

#[test]
fn cgi_bodies_reach_the_script() {
    let s = Server::start(&config(""), scripts);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let r = Response::parse(&s.raw(&post("/echo.py", &data)), false);
    assert_eq!(r.status, 200, "{}", r.text());
    let sha = sha256_hex(&data);
    assert_eq!(r.text(), format!("{} {sha}", data.len()));
    // chunked: collected first (CONTENT_LENGTH is needed)
    let chunked = post_chunked("/echo.py", &data, 70_000);
    let r = Response::parse(&s.raw(&chunked), false);
    assert_eq!(r.text(), format!("{} {sha}", data.len()));
    // 600 KB through `cat`, which answers as it reads: far more than the
    // pipes hold, so the output is read while the body is written
    let big: Vec<u8> = (0..600_000u32).map(|i| (i % 241) as u8).collect();
    let r = Response::parse(&s.raw(&post("/cat.cgi", &big)), false);
    assert_eq!(r.status, 200);
    assert!(r.body == big, "echoed {} bytes", r.body.len());
}

#[test]
fn cgi_status_location_nph_and_stderr() {
    let s = Server::start(&config(""), scripts);
    let r = s.get("/status.cgi");
    assert_eq!((r.status, r.text().as_str()), (418, "tea"));
    assert_eq!(r.header("x-script"), Some("yes"));
    let r = s.get("/redirect.cgi");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("location"), Some("https://example.org/there"));
    let r = s.get("/stderr.cgi");
    assert_eq!(r.text(), "ok");
    wait_for("the script's stderr in the error log", || {
        s.stderr().contains("oops from cgi")
    });
    let r = s.get("/nph-status.cgi");
    assert_eq!((r.status, r.text().as_str()), (201, "nph body"));
    assert_eq!(r.header("x-nph"), Some("yes"));
    // an nph- script must start with its status line
    assert_eq!(s.get("/nph-bad.cgi").status, 500);
    // no header block at all: 500
    assert_eq!(s.get("/nohead.cgi").status, 500);
    // a local Location without Status: what that path serves (RFC 3875 §6.2.2)
    let r = s.get("/local.cgi");
    assert_eq!((r.status, r.text().as_str()), (200, "static"));
}

#[test]
fn a_cgi_script_named_by_script_name_takes_its_prefix() {
    let s = Server::start(
        &format!(
            "{}\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/tool/\" }}\n[vhost.rule.cgi]\nscript-name = \"/tool\"\n",
            config("")
        ),
        scripts,
    );
    let r = s.get("/tool/a/b?x=1");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(var(&r, "SCRIPT_NAME"), Some("/tool"));
    assert_eq!(var(&r, "PATH_INFO"), Some("/a/b"));
}

#[test]
fn cgi_scripts_that_cannot_run_never_run() {
    let s = Server::start(&config(""), scripts);
    // a missing script: 404 (nothing spawned)
    assert_eq!(s.get("/missing.cgi").status, 404);
    // never split at a segment that is no script
    let r = s.get("/uploads/evil.jpg/x.cgi");
    assert_eq!(r.status, 404);
    assert!(!r.text().contains("EXECUTED"));
    assert!(!s.dir.path().join("pids/evil-ran").exists());
    // not executable, no interpreter: refused
    let r = s.get("/noexec.cgi");
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(!r.text().contains("never"));
}

#[test]
fn a_cgi_script_that_breaks_off_never_looks_complete() {
    let s = Server::start(&config(""), scripts);
    let raw = s.raw(b"GET /short.cgi HTTP/1.1\r\nHost: site.test\r\n\r\n");
    let text = String::from_utf8_lossy(&raw);
    // actix-http (the "actix" engine) may close before it sent the head;
    // either way the response never looks complete
    if raw.is_empty() {
        assert_eq!(
            std::env::var("TESSERA_SERVER__HTTP1_ENGINE").as_deref(),
            Ok("actix"),
            "Tessera's engine sends the head and the bytes it got"
        );
        return;
    }
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("only this"), "{text}");
    // no chunked end, and no Content-Length the bytes would satisfy
    assert!(!text.ends_with("0\r\n\r\n"), "{text}");
    let r = Response::parse(&raw, false);
    if let Some(n) = r.header("content-length") {
        assert!(r.raw_body.len() < n.parse::<usize>().unwrap());
    }
}

#[test]
fn a_cgi_script_past_its_timeout_is_killed() {
    let s = Server::start(&config("timeout = 1"), |d| {
        scripts(d);
        let pids = d.path().join("pids");
        script(
            d,
            "www/sleep.cgi",
            &format!(
                "#!/bin/sh\nsleep 30 &\necho $! > {p}/child.tmp && mv {p}/child.tmp {p}/child\necho $$ > {p}/sleep.tmp && mv {p}/sleep.tmp {p}/sleep\nwait\n",
                p = pids.display()
            ),
        );
    });
    let start = Instant::now();
    let r = s.get("/sleep.cgi");
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(start.elapsed() < Duration::from_secs(10));
    let pids = s.dir.path().join("pids");
    let (script, child) = (read_pid(&pids.join("sleep")), read_pid(&pids.join("child")));
    wait_for("the script and its child to be killed", || {
        gone(script) && gone(child)
    });
    // a script still writing at its timeout: cut off, never complete
    let raw = s.raw(b"GET /ticks.cgi HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n");
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.contains("tick"),
        "{text}"
    );
    assert!(!text.ends_with("0\r\n\r\n"), "{text}");
    let ticks = read_pid(&pids.join("ticks"));
    wait_for("the ticking script to be killed", || gone(ticks));
}

#[test]
fn a_cgi_script_is_killed_when_its_client_goes_away() {
    let s = Server::start(&config(""), scripts);
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /ticks.cgi HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("tick") {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let pid = read_pid(&s.dir.path().join("pids/ticks"));
    assert!(!gone(pid));
    drop(c);
    wait_for("the script to be killed after the disconnect", || gone(pid));
}

#[test]
fn cgi_processes_over_max_processes_get_503() {
    let s = Server::start(&config("max-processes = 1"), scripts);
    // one script holds the only slot
    let mut held = TcpStream::connect(s.addr).unwrap();
    held.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    held.write_all(b"GET /hold.cgi HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("held") {
        let n = held.read(&mut buf).unwrap();
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    let r = s.get("/status.cgi");
    assert_eq!(r.status, 503);
    assert!(r.header("retry-after").is_some());
    // the slot comes back once the script is done
    std::fs::write(s.dir.path().join("pids/release"), "").unwrap();
    let _ = held.read_to_end(&mut seen);
    assert!(String::from_utf8_lossy(&seen).contains("released"));
    wait_for("a free slot", || s.get("/status.cgi").status == 418);
}

/// Debian's `10-cgi.conf` as imported: every file under `/cgi-bin/` runs
/// itself (`cgi.assign = ( "" => "" )`), the path after it is `PATH_INFO`.
#[test]
fn every_file_of_a_cgi_bin_runs_itself() {
    let s = Server::start(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"cgi\", \"static-file\"]\n[vhost.cgi]\nassign = {}\n\n[[vhost.rule]]\nmatch = { path-prefix = \"/cgi-bin/\" }\n[vhost.rule.cgi]\nassign = { \"\" = \"\" }\n",
        |d| {
            script(
                d,
                "www/cgi-bin/hello",
                "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nhello %s %s' \"$SCRIPT_NAME\" \"$PATH_INFO\"\n",
            );
            d.write("www/cgi-bin/readme.txt", "not executable\n");
            d.write("www/plain.txt", "plain\n");
        },
    );
    assert_eq!(s.get("/cgi-bin/hello").text(), "hello /cgi-bin/hello ");
    assert_eq!(
        s.get("/cgi-bin/hello/a/b").text(),
        "hello /cgi-bin/hello /a/b"
    );
    // a file without the execute bit is refused, never shown
    assert_eq!(s.get("/cgi-bin/readme.txt").status, 403);
    assert_eq!(s.get("/cgi-bin/missing").status, 404);
    assert_eq!(s.get("/plain.txt").text(), "plain\n");
}

/// An internal redirect from a script under an `alias` prefix is resolved
/// from the vhost's root again: the alias's prefix length never cuts the
/// new path (a worker panicked, and `/aaaaaaa../up.sh` ran a script above
/// the alias directory).
#[test]
fn an_internal_redirect_from_an_alias_starts_from_the_vhost_root() {
    let s = Server::start(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nmax-connections = 3\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"alias\", \"cgi\", \"static-file\"]\n[vhost.alias]\npaths = { \"/aliascg/\" = \"www/cg\" }\n[vhost.cgi]\nassign = { \".sh\" = \"\" }\n",
        |d| {
            script(
                d,
                "www/cg/loc.sh",
                "#!/bin/sh\nprintf 'Location: %s\\n\\n' \"${QUERY_STRING:-/}\"\n",
            );
            script(d, "www/up.sh", "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nESCAPED'\n");
            script(
                d,
                "www/cg/toq.sh",
                "#!/bin/sh\nprintf 'Location: /aliascg/q.sh?b=2\\n\\n'\n",
            );
            script(
                d,
                "www/cg/q.sh",
                "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nquery %s %s' \"$QUERY_STRING\" \"$REQUEST_METHOD\"\n",
            );
            d.write("www/index.html", "home\n");
        },
    );
    for _ in 0..4 {
        // more than max-connections: a connection lost to a panic would
        // show as a server that stops answering
        let r = s.get("/aliascg/loc.sh?/");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "home\n"),
            "{}",
            s.stderr()
        );
    }
    assert_eq!(s.get("/aliascg/loc.sh?/index.html").text(), "home\n");
    // the target's query reaches the script it names (RFC 3875 §6.2.2)
    let r = s.get("/aliascg/toq.sh?a=1");
    assert_eq!(r.text(), "query b=2 GET", "{}", s.stderr());
    // a POST continues as a GET: its body went to the first script
    let r = s.req("POST", "/aliascg/toq.sh?a=1", &["Content-Length: 0"]);
    assert_eq!(r.text(), "query b=2 GET", "{}", s.stderr());
    let r = s.get("/aliascg/loc.sh?/aaaaaaa../up.sh");
    assert_ne!(r.text(), "ESCAPED");
    assert!(!s.stderr().contains("panicked"), "{}", s.stderr());
}

/// A script that answers HEAD as RFC 3875 §4.3.3 asks (its GET's
/// Content-Length, no body) is not cut off as short: the connection goes
/// on to the next request.
#[test]
fn a_head_answer_without_its_body_keeps_the_connection() {
    let s = Server::start(&config(""), scripts);
    let out = s.raw(
        b"HEAD /head.cgi HTTP/1.1\r\nHost: site.test\r\n\r\nGET /head.cgi HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_eq!(text.matches("HTTP/1.1 200").count(), 2, "{text}");
    assert!(text.contains("hello"), "{text}");
}

//! Run-time plugins over the C ABI: loading, every loader refusal, failure
//! isolation, per-request state, allocators, concurrency, parity with a
//! built-in. The fixtures in `plugins/fixtures/` are built here, once per test
//! run, into `target/plugin-tests/`; a build failure fails the tests.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::util::{Server, TempDir};

/// Builds the plugins and fixtures once; returns the directory of the libraries.
fn libs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let target = root.join("target/plugin-tests");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let build = |args: &[&str], dir: &Path| {
            let st = Command::new(&cargo)
                .args(["build", "--quiet"])
                .args(args)
                .arg("--target-dir")
                .arg(dir)
                .current_dir(root)
                .env_remove("CARGO_TARGET_DIR")
                .status()
                .expect("run cargo");
            assert!(st.success(), "cargo build {args:?} failed");
        };
        build(
            &[
                "-p",
                "tessera-plugin-request-id",
                "-p",
                "tessera-plugin-secure-download",
                "-p",
                "tessera-plugin-maintenance",
                "-p",
                "tessera-fixture-echo",
                "-p",
                "tessera-fixture-custom-alloc",
                "-p",
                "tessera-fixture-blocking",
            ],
            &target,
        );
        let out = target.join("debug");
        for feature in [
            "bad-magic",
            "major-plus-one",
            "minor-plus-one",
            "bad-fingerprint",
            "old-minor",
            "no-symbol",
            "unknown-code",
            "short-vtable",
        ] {
            build(
                &["-p", "tessera-fixture-raw", "--features", feature],
                &target,
            );
            std::fs::copy(
                out.join("libtessera_fixture_raw.so"),
                out.join(format!("raw-{feature}.so")),
            )
            .unwrap();
        }
        let abort_target = root.join("target/plugin-tests-abort");
        build(
            &["--manifest-path", "plugins/fixtures/panic-abort/Cargo.toml"],
            &abort_target,
        );
        std::fs::copy(
            abort_target.join("debug/libtessera_fixture_panic_abort.so"),
            out.join("panic-abort.so"),
        )
        .unwrap();
        out
    })
}

fn lib(name: &str) -> String {
    let file = if name.ends_with(".so") {
        name.to_string()
    } else {
        format!("lib{}.so", name.replace('-', "_"))
    };
    let p = libs().join(file);
    assert!(p.is_file(), "fixture missing: {}", p.display());
    p.display().to_string()
}

/// A config with one vhost `site.test` using `modules`, plugin declarations
/// `plugins` = [(name, library)], and extra vhost TOML.
fn config(plugins: &[(&str, String)], modules: &str, extra: &str) -> String {
    let mut c = String::from("[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 2\n\n");
    for (name, path) in plugins {
        c.push_str(&format!(
            "[[plugin]]\nname = \"{name}\"\npath = \"{path}\"\n\n"
        ));
    }
    c.push_str(&format!(
        "[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [{modules}]\n{extra}\n"
    ));
    c
}

fn echo_server(extra: &str) -> Server {
    Server::start(
        &config(
            &[("echo", lib("tessera-fixture-echo"))],
            "\"echo\", \"static-file\"",
            extra,
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
            d.write("www/index.html", "home");
        },
    )
}

/// Runs `tessera -t` on a config; returns (success, stderr).
fn check(cfg: &str) -> (bool, String) {
    let d = TempDir::new("plug");
    d.mkdir("www");
    let f = d.write("server.toml", cfg);
    let out = crate::util::check_config(&f);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn refused(name: &str, library: String, expect: &str) {
    let (ok, err) = check(&config(
        &[(name, library.clone())],
        &format!("\"{name}\", \"static-file\""),
        "",
    ));
    assert!(!ok, "accepted {library}");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    for part in [
        "server.toml",
        "vhost \"site.test\"",
        &format!("module \"{name}\""),
        &library,
        expect,
    ] {
        assert!(err.contains(part), "missing {part:?} in: {err}");
    }
}

#[test]
fn loader_refuses_every_bad_library() {
    refused(
        "x",
        libs().join("nope.so").display().to_string(),
        "no such file",
    );
    let d = TempDir::new("notlib");
    let text = d.write("text.so", "this is not ELF").display().to_string();
    refused("x", text, "not a loadable library");
    refused(
        "raw",
        lib("raw-no-symbol.so"),
        "no symbol TESSERA_PLUGIN_DESCRIPTOR",
    );
    refused("raw", lib("raw-bad-magic.so"), "wrong magic");
    refused(
        "raw",
        lib("raw-major-plus-one.so"),
        "built for plugin ABI 1.x, this server speaks ABI 0.x",
    );
    refused(
        "raw",
        lib("raw-minor-plus-one.so"),
        "newer than this server's 0.1",
    );
    refused("raw", lib("raw-bad-fingerprint.so"), "ABI fingerprint");
    refused(
        "raw",
        lib("raw-short-vtable.so"),
        "malformed plugin descriptor: vtable is",
    );
    refused("panic-abort", lib("panic-abort.so"), "panic = \"abort\"");
}

#[test]
fn name_clash_and_mismatch_are_refused() {
    refused(
        "static-file",
        lib("tessera-fixture-echo"),
        "the library's module is \"echo\", not \"static-file\"",
    );
    let cfg = config(
        &[
            ("echo", lib("tessera-fixture-echo")),
            ("echo", lib("tessera-fixture-echo")),
        ],
        "\"echo\"",
        "",
    );
    let (ok, err) = check(&cfg);
    assert!(!ok && err.contains("already taken"), "{err}");
}

#[test]
fn init_failure_and_panic_stop_the_start_with_the_plugins_message() {
    for (opt, expect) in [
        ("fail = true", "init failed: the fixture was told to fail"),
        (
            "panic = true",
            "init panicked: panic: the fixture was told to panic in init",
        ),
    ] {
        let (ok, err) = check(&config(
            &[("echo", lib("tessera-fixture-echo"))],
            "\"echo\"",
            &format!("[vhost.echo]\n{opt}\n"),
        ));
        assert!(!ok);
        assert!(
            err.contains(expect) && err.contains("vhost \"site.test\": echo:"),
            "{err}"
        );
    }
    let (ok, err) = check(&config(
        &[("echo", lib("tessera-fixture-echo"))],
        "\"echo\"",
        "[vhost.echo]\nbogus = 1\n",
    ));
    assert!(!ok && err.contains("unknown field `bogus`"), "{err}");
}

#[test]
fn old_minor_with_short_vtable_loads_and_skips_absent_hooks() {
    let s = Server::start(
        &config(
            &[("raw", lib("raw-old-minor.so"))],
            "\"raw\", \"static-file\"",
            "",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    // on_response lies outside its vtable and would abort the process if called.
    for _ in 0..3 {
        assert_eq!(s.get("/ten.txt").status, 200);
    }
}

#[test]
fn unknown_return_code_is_a_500_not_undefined_behaviour() {
    let s = Server::start(
        &config(
            &[("raw", lib("raw-unknown-code.so"))],
            "\"raw\", \"static-file\"",
            "",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    assert_eq!(s.get("/ten.txt").status, 500);
    assert!(
        s.stderr().contains("returned an unknown code"),
        "{}",
        s.stderr()
    );
}

#[test]
fn configuration_reaches_the_plugin_as_json() {
    let s = echo_server(
        "[vhost.echo]\ntag = \"t1\"\nnested = { a = [1, 2.5, true], b = { c = \"d\" } }\n",
    );
    let r = s.req("GET", "/ten.txt", &["X-Echo-Config: 1"]);
    let v: serde_json::Value = serde_json::from_str(r.header("x-config").unwrap()).unwrap();
    assert_eq!(v["tag"], "t1");
    assert_eq!(v["nested"]["a"], serde_json::json!([1, 2.5, true]));
    assert_eq!(v["nested"]["b"]["c"], "d");
}

#[test]
fn hooks_see_and_change_the_request() {
    let s = echo_server("[vhost.echo]\ntag = \"t\"\n");
    let r = s.req(
        "GET",
        "/ten.txt?q=1",
        &["X-Copy: original", "X-Remove-Me: no"],
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"0123456789");
    assert_eq!(r.header("x-echo-path"), Some("/ten.txt"));
    assert_eq!(r.header("x-echo-method"), Some("GET"));
    assert_eq!(r.header("x-echo-peer"), Some("127.0.0.1"));
    assert_eq!(r.header("x-echo-vhost"), Some("site.test"));
    assert_eq!(r.header("x-echo-query"), Some("q=1"));
    assert_eq!(r.header("x-echo-status"), Some("200"));
    // copied in on_request, header overwritten since: the copy is intact
    assert_eq!(r.header("x-copied"), Some("original"));
    assert_eq!(r.header("x-copy-now"), Some("overwritten"));
    // answering from the request phase
    let r = s.get("/respond");
    assert_eq!(
        (r.status, r.text().as_str()),
        (202, "answered by the plugin")
    );
    // rewriting the path: static-file serves the new one
    let r = s.get("/rewrite");
    assert_eq!((r.status, r.text().as_str()), (200, "0123456789"));
    // changing the status in the response phase
    assert_eq!(s.get("/teapot").status, 418);
}

#[test]
fn panicking_hooks_cost_one_request_and_the_server_keeps_serving() {
    let s = echo_server("");
    for p in [
        "/panic-request",
        "/panic-response",
        "/error",
        "/respond-unstaged",
    ] {
        assert_eq!(s.get(p).status, 500, "{p}");
    }
    // a panic in the log phase does not touch the response
    assert_eq!(s.get("/panic-log").status, 404);
    let err = s.stderr();
    assert!(
        err.contains("module=echo")
            && err.contains("hook=\"request\"")
            && err.contains("boom in on_request"),
        "{err}"
    );
    assert!(
        err.contains("hook=\"response\"") && err.contains("boom in on_response"),
        "{err}"
    );
    assert!(
        err.contains("hook=\"log\"") && err.contains("boom in on_log"),
        "{err}"
    );
    for i in 0..1000 {
        let r = s.get("/ten.txt");
        assert_eq!(r.status, 200, "request {i} after the panics");
    }
}

#[test]
fn request_end_runs_exactly_once_per_request() {
    let s = echo_server("");
    let counts = |s: &Server| {
        let r = s.get("/ten.txt");
        let b: u64 = r.header("x-begun").unwrap().parse().unwrap();
        let e: u64 = r.header("x-ended").unwrap().parse().unwrap();
        (b, e)
    };
    let (b0, e0) = counts(&s);
    // This request is begun and not yet ended while its response is built.
    assert_eq!(b0, e0 + 1);
    for p in [
        "/ten.txt",
        "/respond",
        "/panic-request",
        "/panic-response",
        "/error",
        "/panic-log",
        "/missing",
    ] {
        s.get(p);
    }
    // A client that goes away in the middle of a large response.
    s.dir.write("www/big.bin", vec![7u8; 8 << 20]);
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(s.addr).unwrap();
        c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: site.test\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 1024];
        let _ = c.read(&mut buf).unwrap();
    }
    // Wait (bounded) until the server noticed the disconnect: each probe is a
    // real request; the counts converge once the aborted body was dropped.
    let mut last = (0, 0);
    for _ in 0..200 {
        last = counts(&s);
        if last.0 == last.1 + 1 {
            break;
        }
        std::thread::yield_now();
    }
    assert_eq!(last.0, last.1 + 1, "begun {} ended {}", last.0, last.1);
    assert!(last.0 >= b0 + 9, "{last:?}");
}

#[test]
fn custom_allocator_passes_strings_both_ways() {
    let s = Server::start(
        &config(
            &[("custom-alloc", lib("tessera-fixture-custom-alloc"))],
            "\"custom-alloc\", \"access-log\", \"static-file\"",
            "[vhost.custom-alloc]\ngreeting = \"Hello\"\n[vhost.access-log]\npath = \"a.log\"\nformat = \"%{greeting}n\"\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    for _ in 0..50 {
        let r = s.req("GET", "/greet", &["X-Name: Ada"]);
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "Hello, Ada!\n".repeat(100));
        assert_eq!(r.header("x-greeting"), Some("Hello, Ada"));
        let r = s.req("GET", "/ten.txt", &["X-Name: Bob"]);
        assert_eq!(r.header("x-seen-type"), Some("text/plain; charset=utf-8"));
    }
    let dir = s.dir.path().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let log = std::fs::read_to_string(dir.join("a.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(log.lines().filter(|l| *l == "Hello, Ada").count(), 50);
}

#[test]
fn many_concurrent_requests_through_a_plugin() {
    let s = echo_server("");
    std::thread::scope(|sc| {
        for t in 0..8 {
            let s = &s;
            sc.spawn(move || {
                for i in 0..150 {
                    let r = s.req(
                        "GET",
                        &format!("/ten.txt?t={t}&i={i}"),
                        &[&format!("X-Copy: {t}-{i}")],
                    );
                    assert_eq!(r.status, 200);
                    assert_eq!(r.header("x-copied"), Some(format!("{t}-{i}").as_str()));
                }
            });
        }
    });
}

#[test]
fn one_library_is_opened_once_and_instances_are_independent() {
    let path = lib("tessera-fixture-echo");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[plugin]]\nname = \"echo\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"a.test\"]\ndocument-root = \"www\"\nmodules = [\"echo\", \"static-file\"]\n[vhost.echo]\ntag = \"A\"\n\n\
         [[vhost]]\nserver-names = [\"b.test\"]\ndocument-root = \"www\"\nmodules = [\"echo\", \"static-file\"]\n[vhost.echo]\ntag = \"B\"\n\n\
         [[vhost]]\nserver-names = [\"c.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n"
    );
    let s = Server::start(&cfg, |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let tag = |h: &str| {
        s.req("GET", "/ten.txt", &[h])
            .header("x-echo-tag")
            .map(str::to_owned)
    };
    assert_eq!(tag("Host: a.test").as_deref(), Some("A"));
    assert_eq!(tag("Host: b.test").as_deref(), Some("B"));
    // a module enabled only on a and b never runs on the default vhost
    assert_eq!(tag("Host: c.test"), None);
    assert_eq!(tag("Host: other.test"), None);
}

#[test]
fn builtin_and_plugin_give_the_same_responses() {
    // The echo fixture sets x-echo-tag in its response phase; the built-in
    // headers module does the same with `set`. Everything else must match.
    let files = |d: &TempDir| {
        d.write("www/ten.txt", "0123456789");
        d.write("www/index.html", "home");
        d.mkdir("www/dir");
    };
    let plugin = Server::start(
        &config(
            &[("echo", lib("tessera-fixture-echo"))],
            "\"echo\", \"static-file\"",
            "[vhost.echo]\ntag = \"same\"\n",
        ),
        files,
    );
    let builtin = Server::start(
        &config(
            &[],
            "\"headers\", \"static-file\"",
            "[vhost.headers]\nset = { \"X-Echo-Tag\" = \"same\" }\n",
        ),
        files,
    );
    for (m, p, h) in [
        ("GET", "/ten.txt", vec![]),
        ("HEAD", "/ten.txt", vec![]),
        ("GET", "/ten.txt", vec!["Range: bytes=2-4"]),
        ("GET", "/", vec![]),
        ("GET", "/dir", vec![]),
        ("GET", "/missing", vec![]),
        ("POST", "/ten.txt", vec!["Content-Length: 0"]),
        ("GET", "/ten.txt", vec!["If-None-Match: *"]),
    ] {
        let a = plugin.req(m, p, &h);
        let b = builtin.req(m, p, &h);
        assert_eq!(a.status, b.status, "{m} {p}");
        assert_eq!(a.body, b.body, "{m} {p}");
        assert_eq!(a.header("x-echo-tag"), b.header("x-echo-tag"), "{m} {p}");
        for k in [
            "content-type",
            "content-length",
            "content-range",
            "allow",
            "location",
        ] {
            assert_eq!(a.header(k), b.header(k), "{m} {p} {k}");
        }
        // the two servers' files have different mtimes, so only presence
        assert_eq!(
            a.header("etag").is_some(),
            b.header("etag").is_some(),
            "{m} {p}"
        );
    }
}

#[test]
fn example_request_id() {
    let s = Server::start(
        &config(
            &[("request-id", lib("tessera-plugin-request-id"))],
            "\"request-id\", \"access-log\", \"static-file\"",
            "[vhost.access-log]\npath = \"a.log\"\nformat = \"%{request-id}n %{X-Request-Id}i %U\"\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    let r = s.get("/ten.txt");
    let id = r.header("x-request-id").unwrap().to_string();
    assert_eq!(id.len(), 32);
    assert_ne!(s.get("/ten.txt").header("x-request-id"), Some(id.as_str()));
    let r = s.req("GET", "/ten.txt", &["X-Request-Id: abc-123"]);
    assert_eq!(r.header("x-request-id"), Some("abc-123"));
    let r = s.req("GET", "/ten.txt", &["X-Request-Id: bad id\""]);
    assert_ne!(r.header("x-request-id"), Some("bad id\""));
    let dir = s.dir.path().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let log = std::fs::read_to_string(dir.join("a.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        log.lines().any(|l| l == format!("{id} - /ten.txt")),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l == "abc-123 abc-123 /ten.txt"),
        "{log}"
    );
}

#[test]
fn example_maintenance() {
    let mk = |allow: &str| {
        Server::start(
            &config(
                &[("maintenance", lib("tessera-plugin-maintenance"))],
                "\"maintenance\", \"static-file\"",
                &format!("[vhost.maintenance]\nretry-after = 120\npage = \"<h1>Soon</h1>\"\nallow = [{allow}]\n"),
            ),
            |d| {
                d.write("www/ten.txt", "0123456789");
            },
        )
    };
    let s = mk("\"10.0.0.0/8\"");
    let r = s.get("/ten.txt");
    assert_eq!((r.status, r.text().as_str()), (503, "<h1>Soon</h1>"));
    assert_eq!(r.header("retry-after"), Some("120"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let s = mk("\"127.0.0.0/8\", \"::1\"");
    assert_eq!(s.get("/ten.txt").status, 200);
}

#[test]
fn example_secure_download() {
    let s = Server::start(
        &config(
            &[("secure-download", lib("tessera-plugin-secure-download"))],
            "\"secure-download\", \"static-file\"",
            "[vhost.secure-download]\nsecret = \"verysecret\"\nalgorithm = \"md5\"\ntimeout = 60\n",
        ),
        |d| {
            d.write("www/protected/report.pdf", "PDFDATA");
            d.write("www/public.txt", "public");
        },
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let link = |ts: u64, rel: &str, secret: &str| {
        let ts_hex = format!("{ts:x}");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s' '{secret}{rel}{ts_hex}' | md5sum"))
            .output()
            .unwrap();
        let mac = String::from_utf8(out.stdout).unwrap()[..32].to_string();
        format!("/dl/{mac}/{ts_hex}{rel}")
    };
    let r = s.get(&link(now, "/report.pdf", "verysecret"));
    assert_eq!((r.status, r.text().as_str()), (200, "PDFDATA"));
    assert_eq!(s.get(&link(now, "/report.pdf", "wrongsecret")).status, 403);
    assert_eq!(
        s.get(&link(now - 3600, "/report.pdf", "verysecret")).status,
        410
    );
    assert_eq!(s.get("/dl/garbage").status, 403);
    // the protected files are reachable only through signed links
    assert_eq!(s.get("/protected/report.pdf").status, 403);
    assert_eq!(s.get("/public.txt").text(), "public");
    // a signed link cannot climb out of the protected directory
    let r = s.get(&link(now, "/../public.txt", "verysecret"));
    assert_ne!(r.text(), "public");
}

#[test]
fn blocking_hooks_run_off_the_worker_threads() {
    let d_marker = TempDir::new("marker");
    let marker = d_marker.path().join("go");
    let path = lib("tessera-fixture-blocking");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"slow.test\"]\ndocument-root = \"www\"\nmodules = [\"blocking\", \"static-file\"]\n[vhost.blocking]\nwait-for = \"{}\"\n\n\
         [[vhost]]\nserver-names = [\"fast.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n",
        marker.display()
    );
    let s = Server::start(&cfg.replace("wait-for", "wait_for"), |d| {
        d.write("www/ten.txt", "0123456789");
    });
    std::thread::scope(|sc| {
        // Three requests whose hooks block until the marker exists.
        let slow: Vec<_> = (0..3)
            .map(|_| sc.spawn(|| s.req("GET", "/ten.txt", &["Host: slow.test"])))
            .collect();
        // With one worker, these are served only if the blocking hooks do not
        // run on it.
        for _ in 0..20 {
            let r = s.req("GET", "/ten.txt", &["Host: fast.test"]);
            assert_eq!(r.status, 200);
        }
        assert!(
            slow.iter().all(|h| !h.is_finished()),
            "slow requests did not wait"
        );
        std::fs::write(&marker, "").unwrap();
        for h in slow {
            let r = h.join().unwrap();
            assert_eq!((r.status, r.text().as_str()), (200, "0123456789"));
        }
    });
}

#[test]
fn blocking_hooks_and_an_asynchronous_handler_in_one_vhost_are_refused() {
    // a vhost whose plugins may block runs its requests on tokio's blocking
    // pool, where an asynchronous content handler cannot wait for its
    // upstream: `tessera -t` refuses the vhost, naming both modules
    let path = lib("tessera-fixture-blocking");
    let d = TempDir::new("blockasync");
    let f = d.write(
        "server.toml",
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n\n\
             [[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\n\n\
             [[vhost]]\nserver-names = [\"slow.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"blocking\", \"static-file\"]\n[vhost.blocking]\nwait_for = \"go\"\n\n\
             [[vhost.rule]]\nmatch = {{ path-prefix = \"/api/\" }}\n[vhost.rule.proxy]\nupstream = \"app\"\n"
        ),
    );
    d.mkdir("www");
    let out = crate::util::check_config(&f);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("vhost \"slow.test\"")
            && err.contains("modules")
            && err.contains("blocking may block")
            && err.contains("proxy answers asynchronously"),
        "{err}"
    );
}

#[test]
fn reload_keeps_old_config_when_a_library_changed_on_disk() {
    // A private copy of the echo fixture, so that changing it touches no other test.
    let d = TempDir::new("plugcopy");
    let so = d.path().join("echo.so");
    std::fs::copy(lib("tessera-fixture-echo"), &so).unwrap();
    let cfg = config(
        &[("echo", so.display().to_string())],
        "\"echo\", \"static-file\"",
        "[vhost.echo]\ntag = \"one\"\n",
    );
    let s = Server::start(&cfg, |d| {
        d.write("www/ten.txt", "0123456789");
    });
    assert_eq!(s.get("/ten.txt").header("x-echo-tag"), Some("one"));
    // Replace the library file (a new inode) and ask for a reload.
    let tmp = d.path().join("echo.so.new");
    std::fs::copy(lib("tessera-fixture-echo"), &tmp).unwrap();
    std::fs::rename(&tmp, &so).unwrap();
    std::fs::write(
        s.dir.path().join("server.toml"),
        cfg.replace("tag = \"one\"", "tag = \"two\""),
    )
    .unwrap();
    assert!(Command::new("kill")
        .arg("-HUP")
        .arg(s.child.id().to_string())
        .status()
        .unwrap()
        .success());
    let mut logged = false;
    for _ in 0..2000 {
        assert_eq!(s.get("/ten.txt").header("x-echo-tag"), Some("one"));
        if s.stderr().contains("changed on disk") {
            logged = true;
            break;
        }
    }
    assert!(logged, "{}", s.stderr());
}

#[test]
fn clients_leaving_during_a_blocking_hook_are_cleaned_up_on_their_worker() {
    let d_marker = TempDir::new("marker2");
    let marker = d_marker.path().join("go");
    let path = lib("tessera-fixture-blocking");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"slow.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"blocking\", \"access-log\", \"static-file\"]\n[vhost.blocking]\nwait_for = \"{}\"\n[vhost.access-log]\npath = \"a.log\"\n",
        marker.display()
    );
    let s = Server::start(&cfg, |d| {
        d.write("www/ten.txt", "0123456789");
    });
    use std::io::Write;
    for _ in 0..3 {
        // Clients that send a request and leave while its hook blocks.
        let mut gone = Vec::new();
        for _ in 0..30 {
            let mut c = std::net::TcpStream::connect(s.addr).unwrap();
            c.write_all(b"GET /ten.txt HTTP/1.1\r\nHost: slow.test\r\n\r\n")
                .unwrap();
            gone.push(c);
        }
        drop(gone);
        std::fs::write(&marker, "").unwrap();
        // The next requests are answered; the abandoned ones were dropped.
        for _ in 0..20 {
            assert_eq!(s.get("/ten.txt").status, 200);
        }
        std::fs::remove_file(&marker).unwrap();
    }
    std::fs::write(&marker, "").unwrap();
    assert_eq!(s.get("/ten.txt").status, 200);
    let err = s.stderr();
    assert!(
        !err.contains("panicked") && !err.contains("already borrowed"),
        "{err}"
    );
}

#[test]
fn a_request_pipelined_behind_a_slow_handler_is_not_cut_off() {
    // client-header-timeout times request heads, not the server's own work:
    // bytes that arrive while a blocking hook runs (a pipelined request, a
    // body) must not start the clock that closes the connection.
    let d_marker = TempDir::new("marker");
    let marker = d_marker.path().join("go");
    let path = lib("tessera-fixture-blocking");
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nclient-header-timeout = 1\n\n\
         [[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n\n\
         [[vhost]]\nserver-names = [\"slow.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"blocking\", \"static-file\"]\n[vhost.blocking]\nwait_for = \"{}\"\n",
        marker.display()
    );
    let s = Server::start(&cfg, |d| {
        d.write("www/ten.txt", "0123456789");
    });
    let mut c = std::net::TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let req = b"GET /ten.txt HTTP/1.1\r\nHost: slow.test\r\n\r\n";
    c.write_all(req).unwrap();
    // The scenario: the client pipelines its next request a moment later and
    // the backend takes longer than client-header-timeout.
    std::thread::sleep(std::time::Duration::from_millis(300));
    c.write_all(req).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    std::fs::write(&marker, "").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.windows(10).filter(|w| w == b"0123456789").count() < 2 {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert_eq!(
        text.matches("HTTP/1.1 200 OK").count(),
        2,
        "both pipelined requests answered: {text:?}"
    );
}

#[test]
fn http2_requests_to_a_blocking_handler_count_in_flight_and_outlive_keep_alive() {
    use crate::lifecycle::{block_on, h2_connect, h2_get, h2_server_with};
    let d = TempDir::new("h2block");
    let marker = d.path().join("go");
    let path = lib("tessera-fixture-blocking");
    let (_s, tls, der) = h2_server_with(
        &d,
        "keep-alive = 2\nsend-timeout = 2",
        &format!("[[plugin]]\nname = \"blocking\"\npath = \"{path}\"\n"),
        &format!(
            "modules = [\"blocking\", \"static-file\"]\n[vhost.blocking]\nwait_for = \"{}\"\n",
            marker.display()
        ),
    );
    block_on(async {
        let (mut client, conn) = h2_connect(tls, &der, 65_535).await;
        let conn = tokio::spawn(conn);
        // 128 requests whose handlers block: they are in flight.
        let mut waiting = Vec::new();
        for _ in 0..128 {
            client = client.ready().await.unwrap();
            waiting.push(client.send_request(h2_get("/ten.txt"), true).unwrap().0);
        }
        client = client.ready().await.unwrap();
        let (extra, _) = client.send_request(h2_get("/ten.txt"), true).unwrap();
        let extra = tokio::time::timeout(Duration::from_secs(10), extra)
            .await
            .expect("the 129th request was not answered at once")
            .unwrap();
        assert_eq!(extra.status(), 503);
        // The handlers take longer than keep-alive and send-timeout: server
        // work, not an idle or stalled client.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            !conn.is_finished(),
            "the connection was closed while its handlers ran"
        );
        std::fs::write(&marker, "").unwrap();
        for resp in waiting {
            let r = tokio::time::timeout(Duration::from_secs(20), resp)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(r.status(), 200);
        }
    });
}

/// A plugin's configuration error names the file, the vhost and the table,
/// and the key inside it, never a position in the host's internal JSON.
#[test]
fn plugin_config_errors_name_file_table_and_key() {
    let (ok, err) = check(&config(
        &[("request-id", lib("tessera-plugin-request-id"))],
        "\"request-id\"",
        "[vhost.request-id]\nheader = 5\n",
    ));
    assert!(!ok);
    assert!(
        err.contains("server.toml: vhost \"site.test\": request-id"),
        "{err}"
    );
    assert!(
        err.contains("configuration key `header`: invalid type"),
        "{err}"
    );
    assert!(!err.contains("line 1") && !err.contains("column"), "{err}");
}

/// A plugin named in `modules` without a `[[plugin]]` block: the error hints
/// at the missing declaration.
#[test]
fn undeclared_plugin_hints_at_the_declaration() {
    let (ok, err) = check(&config(&[], "\"request-id\", \"static-file\"", ""));
    assert!(!ok);
    assert!(err.contains("unknown module \"request-id\""), "{err}");
    assert!(err.contains("[[plugin]]"), "{err}");
}

/// `tessera -t` lists the loaded plugins with version and path.
#[test]
fn check_lists_the_loaded_plugins() {
    let d = TempDir::new("plug");
    d.mkdir("www");
    let path = lib("tessera-plugin-request-id");
    let f = d.write(
        "server.toml",
        config(&[("request-id", path.clone())], "\"request-id\"", ""),
    );
    let out = crate::util::check_config(&f);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let canonical = std::fs::canonicalize(&path).unwrap();
    assert!(
        stdout.contains(&format!(
            "plugin \"request-id\" 0.1.0 ({})",
            canonical.display()
        )),
        "{stdout}"
    );
}

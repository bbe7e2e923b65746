//! Run-time plugins over the C ABI: loading, every loader refusal, failure
//! isolation, per-request state, allocators, concurrency, parity with a
//! built-in. The fixtures in `plugins/fixtures/` are built here, once per test
//! run, into `target/plugin-tests/`; a build failure fails the tests.

mod examples;
mod loading;
mod requests;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

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

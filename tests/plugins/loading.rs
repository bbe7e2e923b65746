//! Loading plugins: loader refusals, init failures, old ABI minors, configuration, reload.

use std::process::Command;

use crate::util::{Server, TempDir};

use super::*;

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

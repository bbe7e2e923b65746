//! Configuration errors: one clear message naming file, vhost, key and reason,
//! non-zero exit, nothing bound. `tessera -t` prints the pipelines.

use std::process::Command;

use crate::util::{bin, site_config, TempDir};

/// Runs `tessera -t -c FILE` with `config`; returns (success, stdout, stderr).
fn check(config: &str, setup: impl FnOnce(&TempDir)) -> (bool, String, String, TempDir) {
    let d = TempDir::new("cfg");
    d.mkdir("www");
    setup(&d);
    let f = d.write("server.toml", config);
    let out = crate::util::check_config(&f);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        d,
    )
}

fn error(config: &str) -> String {
    let (ok, _, err, d) = check(config, |_| {});
    assert!(!ok, "accepted: {config}");
    let file = d.path().join("server.toml");
    assert!(
        err.contains(&file.display().to_string()),
        "no file name in {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    err
}

#[test]
fn shipped_configuration_is_valid() {
    let conf = concat!(env!("CARGO_MANIFEST_DIR"), "/conf/server.toml");
    let out = crate::util::check_config(conf);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("vhost \"localhost\" (default)"), "{stdout}");
    assert!(stdout.contains("vhost \"static.localhost\""), "{stdout}");
    assert!(
        stdout.contains("access-log -> headers -> expires -> proxy -> static-file"),
        "{stdout}"
    );
    assert!(stdout.contains("is ok"), "{stdout}");
}

#[test]
fn unknown_module() {
    let e = error(&site_config("\"static-file\", \"expirse\"", ""));
    assert!(
        e.contains("vhost \"site.test\": modules[1]: unknown module \"expirse\""),
        "{e}"
    );
}

#[test]
fn missing_document_root() {
    let cfg = site_config("\"static-file\"", "").replace("\"www\"", "\"nope\"");
    let e = error(&cfg);
    assert!(
        e.contains("vhost \"site.test\": document-root:") && e.contains("nope"),
        "{e}"
    );
}

#[test]
fn bad_duration() {
    let e = error(&site_config(
        "\"expires\", \"static-file\"",
        "[vhost.expires]\nurl = { \"/img/\" = \"access plus 3 mounths\" }\n",
    ));
    assert!(
        e.contains("vhost \"site.test\": expires") && e.contains("mounths"),
        "{e}"
    );
}

#[test]
fn two_vhosts_claim_one_name() {
    let cfg = format!(
        "{}\n[[vhost]]\nserver-names = [\"other.test\", \"SITE.test\"]\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n",
        site_config("\"static-file\"", "")
    );
    let e = error(&cfg);
    assert!(e.contains("vhost \"other.test\": server-names: \"site.test\" is already claimed by vhost \"site.test\""), "{e}");
}

#[test]
fn unknown_keys_are_refused() {
    let e = error(&site_config("\"static-file\"", "documentroot = \"www\"\n"));
    assert!(
        e.contains("vhost \"site.test\": documentroot: unknown key or module"),
        "{e}"
    );
    let e = error(&site_config(
        "\"static-file\"",
        "[vhost.static-file]\nindex-file = [\"a\"]\n",
    ));
    assert!(
        e.contains("static-file.index-file") && e.contains("unknown field"),
        "{e}"
    );
    let e = error(&site_config("\"static-file\"", "").replace("workers = 2", "wrokers = 2"));
    assert!(e.contains("server.wrokers") || e.contains("wrokers"), "{e}");
}

#[test]
fn bad_rule_regex_names_the_rule() {
    let e = error(&site_config(
        "\"static-file\"",
        "[[vhost.rule]]\nmatch = { any = [{ path-prefix = \"/a\" }, { path-regex = \"(\" }] }\n",
    ));
    assert!(
        e.contains("rule[0].match.any[1].path-regex: invalid regular expression"),
        "{e}"
    );
}

#[test]
fn toml_syntax_error() {
    let e = error("[server\nlisten = 1\n");
    assert!(
        e.to_lowercase().contains("line") || e.contains("expected"),
        "{e}"
    );
}

#[test]
fn nothing_is_bound_on_error() {
    let d = TempDir::new("nobind");
    let f = d.write(
        "server.toml",
        site_config("\"static-file\"", "")
            .replace("127.0.0.1:0", "127.0.0.1:1")
            .replace("\"www\"", "\"missing\""),
    );
    let out = Command::new(bin()).arg("-c").arg(&f).output().unwrap();
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("document-root"));
}

#[test]
fn environment_overrides() {
    let d = TempDir::new("env");
    d.mkdir("www");
    let f = d.write("server.toml", site_config("\"static-file\"", ""));
    let out = Command::new(bin())
        .arg("-t")
        .arg("-c")
        .arg(&f)
        .env("TESSERA_SERVER__LISTEN", "not-an-address")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server.listen[0]"), "{err}");
}

/// `listen` from the environment: one address or a comma-separated list (it
/// once failed with "expected a sequence").
#[test]
fn environment_sets_listen_addresses() {
    let d = TempDir::new("env");
    d.mkdir("www");
    let f = d.write("server.toml", site_config("\"static-file\"", ""));
    let t = |v: &str| {
        let out = Command::new(bin())
            .arg("-t")
            .arg("-c")
            .arg(&f)
            .env("TESSERA_SERVER__LISTEN", v)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{v}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout.lines().next().unwrap_or_default().to_owned()
    };
    assert_eq!(t("127.0.0.1:19500"), "listen: 127.0.0.1:19500");
    // and the engine, also from the environment
    let out = Command::new(bin())
        .arg("-t")
        .arg("-c")
        .arg(&f)
        .env("TESSERA_SERVER__HTTP1_ENGINE", "actix")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nhttp1-engine: actix\n"));
    assert_eq!(
        t("127.0.0.1:19500,[::1]:19500, 127.0.0.2:19501"),
        "listen: 127.0.0.1:19500, [::1]:19500, 127.0.0.2:19501"
    );
    // the other address lists too (they failed with "expected a sequence")
    for (key, v) in [
        ("TESSERA_SERVER__TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1"),
        ("TESSERA_SERVER__EXPLAIN_FROM", "127.0.0.1,::1"),
    ] {
        let out = Command::new(bin())
            .arg("-t")
            .arg("-c")
            .arg(&f)
            .env(key, v)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{key}={v}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // and the server really binds it
    let s = crate::util::Server::start_with_env(
        &site_config("\"static-file\"", "").replace("127.0.0.1:0", "127.0.0.1:1"),
        &[("TESSERA_SERVER__LISTEN", "127.0.0.1:0")],
        |d| {
            d.write("www/a.txt", "a");
        },
    );
    assert_eq!(s.get("/a.txt").status, 200);
}

/// An empty document root once resolved to the configuration directory and
/// served server.toml and htpasswd files with 200; so did `"."`.
#[test]
fn document_root_empty_or_containing_the_configuration_is_refused() {
    let e = error(
        &site_config("\"static-file\"", "")
            .replace("document-root = \"www\"", "document-root = \"\""),
    );
    assert!(e.contains("vhost \"site.test\""), "{e}");
    assert!(e.contains("document-root") && e.contains("empty"), "{e}");
    for root in [".", "..", "www/.."] {
        let e = error(&site_config("\"static-file\"", "").replace(
            "document-root = \"www\"",
            &format!("document-root = \"{root}\""),
        ));
        assert!(
            e.contains("document-root") && e.contains("contains the configuration directory"),
            "{root}: {e}"
        );
    }
    // a sibling or a child of the configuration directory is fine
    let (ok, _, err, _d) = check(&site_config("\"static-file\"", ""), |_| {});
    assert!(ok, "{err}");
}

/// `tessera -t` prints each rule's effective module tables with how they
/// combined with the vhost's.
#[test]
fn check_prints_effective_rule_tables() {
    let extra = "[vhost.headers]\nset = { \"X-Frame-Options\" = \"DENY\" }\n\n[[vhost.rule]]\nname = \"docs\"\nmatch = { path-prefix = \"/docs/\" }\n[vhost.rule.headers]\ninherit = \"extend\"\nset = { \"X-Section\" = \"docs\" }\n";
    let (ok, out, err, _d) = check(&site_config("\"headers\", \"static-file\"", extra), |_| {});
    assert!(ok, "{err}");
    assert!(
        out.contains(r#"    headers (inherit = "extend"): {"set":{"X-Frame-Options":"DENY","X-Section":"docs"}}"#),
        "{out}"
    );
    let e = error(&site_config(
        "\"headers\", \"static-file\"",
        "[[vhost.rule]]\n[vhost.rule.headers]\ninherit = \"append\"\n",
    ));
    assert!(
        e.contains("rule[0].headers.inherit") && e.contains("\"extend\""),
        "{e}"
    );
}

/// `tessera -t | head -1`: a closed pipe ends the command quietly.
#[test]
fn check_into_a_closed_pipe_is_quiet() {
    use std::process::Stdio;
    let d = TempDir::new("cfg");
    d.mkdir("www");
    // enough vhosts that the summary is larger than a pipe buffer
    let mut conf = site_config("\"static-file\"", "");
    for i in 0..2000 {
        conf.push_str(&format!(
            "\n[[vhost]]\nserver-names = [\"v{i}.test\"]\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n"
        ));
    }
    let f = d.write("server.toml", conf);
    let mut child = Command::new(bin())
        .arg("-t")
        .arg("-c")
        .arg(&f)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // read one line, then close the pipe, as `head -1` does
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("listen: "), "{line}");
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

/// Issue 11 #11: a format name beside other fields would log the literal
/// word; it is an error naming file, vhost, key and the fix.
#[test]
fn access_log_format_name_must_stand_alone() {
    let e = error(&site_config(
        "\"access-log\", \"static-file\"",
        "[vhost.access-log]\npath = \"logs/a.log\"\nformat = \"combined %{request-id}n\"\n",
    ));
    assert!(
        e.contains("vhost \"site.test\": access-log: format:")
            && e.contains("\"combined\" is a format name")
            && e.contains("%{combined}"),
        "{e}"
    );
}

/// A vhost's `listen` names listeners with fixed ports, and the default
/// vhost (which answers every listener) has none.
#[test]
fn vhost_listen_errors() {
    let e = error(&site_config(
        "\"static-file\"",
        "listen = [\"127.0.0.1:0\"]\n",
    ));
    assert!(
        e.contains("vhost \"site.test\": listen[0]: \"127.0.0.1:0\": a listener on port 0"),
        "{e}"
    );
    let e = error(&site_config(
        "\"static-file\"",
        "listen = [\"127.0.0.1:8443\"]\n",
    ));
    assert!(
        e.contains("vhost \"site.test\": listen: the default vhost answers on every listener"),
        "{e}"
    );
    let e = error(&site_config(
        "\"static-file\"",
        "listen = [\"localhost:8443\"]\n",
    ));
    assert!(
        e.contains("listen[0]: \"localhost:8443\" is not IP:PORT"),
        "{e}"
    );
}

/// An environment override of a key the file also sets (`max-body-size` in
/// the file, `TESSERA_SERVER__MAX_BODY_SIZE` in the environment) replaces it;
/// it was refused as a duplicate field.
#[test]
fn environment_overrides_a_key_the_file_sets() {
    let d = TempDir::new("env");
    d.mkdir("www");
    let f = d.write(
        "server.toml",
        site_config("\"static-file\"", "")
            .replace("workers = 2", "workers = 2\nmax-body-size = 10"),
    );
    let s = crate::util::Server::start_with_env(
        &std::fs::read_to_string(&f).unwrap(),
        &[("TESSERA_SERVER__MAX_BODY_SIZE", "20")],
        |d| {
            d.write("www/a.txt", "a");
        },
    );
    assert_eq!(s.req("POST", "/a.txt", &["Content-Length: 15"]).status, 405);
    assert_eq!(s.req("POST", "/a.txt", &["Content-Length: 21"]).status, 413);
}

#[test]
fn a_proxy_host_that_is_not_a_valid_host_is_refused() {
    let conf = |host: &str| {
        site_config(
            "\"proxy\"",
            &format!(
                "[vhost.proxy]\nupstream = \"u\"\nhost = {host:?}\n\n[[upstream]]\nname = \"u\"\nservers = [\"127.0.0.1:9\"]\n"
            ),
        )
    };
    for bad in ["a b", "a\tb", " lead", "\u{fc}.example"] {
        let e = error(&conf(bad));
        assert!(e.contains("is not a valid Host"), "{bad:?}: {e}");
        assert!(!e.contains('\t'), "a raw tab echoed: {e}");
    }
    let (ok, _, err, _) = check(&conf("app.example:8080"), |_| {});
    assert!(ok, "{err}");
}

/// A module that runs the document root's scripts, set only in rules, would
/// run after the vhost's static-file, which would send the scripts' source:
/// refused, naming the rule and the fix. Listed in `modules`, or mounted at
/// a `script-name` (no files), it is accepted.
#[test]
fn a_script_module_set_only_in_rules_behind_static_file_is_refused() {
    let rule = |table: &str| {
        format!("\n[[upstream]]\nname = \"php\"\nservers = [\"127.0.0.1:9\"]\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/x/\" }}\n{table}\n")
    };
    let cgi = "[vhost.rule.cgi]\nassign = { \".py\" = \"/usr/bin/python3\" }";
    let php = "[vhost.rule.fastcgi]\nupstream = \"php\"\nextensions = [\".php\"]";
    for (table, name) in [(cgi, "cgi"), (php, "fastcgi")] {
        let e = error(&site_config("\"static-file\"", &rule(table)));
        assert!(e.contains(&format!("rule[0].{name}")), "{e}");
        assert!(
            e.contains(&format!(
                "list \"{name}\" in the vhost's modules before \"static-file\""
            )),
            "{e}"
        );
        let vhost_table = if name == "fastcgi" {
            "[vhost.fastcgi]\nupstream = \"php\"\nextensions = [\".php\"]\n"
        } else {
            ""
        };
        let listed = site_config(
            &format!("\"{name}\", \"static-file\""),
            &format!("{vhost_table}{}", rule(table)),
        );
        let (ok, _, err, _) = check(&listed, |_| {});
        assert!(ok, "{name} listed first: {err}");
    }
    // after static-file in modules: the same
    let e = error(&site_config("\"static-file\", \"cgi\"", &rule(cgi)));
    assert!(e.contains("comes after it in modules"), "{e}");
    // a cgi mounted at one script is a file too
    let e = error(&site_config(
        "\"static-file\"",
        &rule("[vhost.rule.cgi]\nscript-name = \"/x/run.cgi\""),
    ));
    assert!(e.contains("rule[0].cgi"), "{e}");
    let mounted = "[vhost.rule.fastcgi]\nupstream = \"php\"\nscript-name = \"/x\"";
    let (ok, _, err, _) = check(&site_config("\"static-file\"", &rule(mounted)), |_| {});
    assert!(ok, "a mounted application: {err}");
}

//! `tessera explain` (issue 15), black-box: the binary on the demo
//! configuration and on an imported lighttpd configuration, and the running
//! server's `X-Tessera-Explain` header from a trusted and an untrusted
//! address.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{bin, Server, TempDir};

fn demo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/conf/server.toml"))
}

/// `tessera explain -c FILE ARGS…`: exit code, stdout, stderr.
fn explain(file: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin())
        .arg("explain")
        .arg("-c")
        .arg(file)
        .args(args)
        .env_remove("TESSERA_SERVER__HTTP1_ENGINE")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn explain_json(file: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let (code, out, err) = explain(file, &a);
    assert_eq!(code, 0, "{out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The 1-based line of the `n`th (0-based) line of `text` equal to `line`.
fn line_of(text: &str, line: &str, n: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == line)
        .nth(n)
        .unwrap_or_else(|| panic!("no {n}th {line}"))
        .0
        + 1
}

fn module<'a>(e: &'a Value, name: &str) -> &'a Value {
    e["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no module {name} in {e:#}"))
}

fn header<'a>(e: &'a Value, name: &str) -> Option<&'a str> {
    e["answer"]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

/// The demo configuration, as text: vhost by exact name with its line, each
/// rule with what decided it, the module tables with file and line
/// (inherited, merged), the file and the head static-file, headers and
/// expires give it.
#[test]
fn explain_demo_request_as_text() {
    let conf = std::fs::read_to_string(demo()).unwrap();
    let (code, out, err) = explain(&demo(), &["http://localhost:8080/docs/notes.txt"]);
    assert_eq!(code, 0, "{out}{err}");
    let file = demo().display().to_string();
    let vhost = line_of(&conf, "[[vhost]]", 0);
    assert!(
        out.contains(&format!(
            "vhost: \"localhost\" ({file}:{vhost}): exact name \"localhost\""
        )),
        "{out}"
    );
    let rule = |n| line_of(&conf, "[[vhost.rule]]", n);
    for expected in [
        format!("1. \"app\" ({file}:{}, final): not matched, by path-prefix = \"/app/\"", rule(0)),
        format!("2. \"docs\" ({file}:{}, not final): matched, by path-prefix = \"/docs/\"", rule(1)),
        format!("3. \"text files\" ({file}:{}, final): matched, by extensions = [\"txt\", \"md\"]; later rules are not evaluated", rule(2)),
        format!("4. \"status\" ({file}:{}, final): not evaluated", rule(3)),
        format!(
            "rule \"docs\" table ({file}:{}), merged into the vhost's table (line {})",
            line_of(&conf, "[vhost.rule.headers]", 0),
            line_of(&conf, "[vhost.headers]", 0)
        ),
        format!(
            "rule \"text files\" table ({file}:{}), unset keys inherited from the vhost's table (line {})",
            line_of(&conf, "[vhost.rule.expires]", 0),
            line_of(&conf, "[vhost.expires]", 0)
        ),
        format!("static-file  [content]            vhost table ({file}:{})", line_of(&conf, "[vhost.static-file]", 0)),
        "  response headers -> expires -> error-pages".to_owned(),
        "answer: static-file (content phase): file ".to_owned(),
        "conf/www/docs/notes.txt\n  200 OK\n".to_owned(),
        "  x-section: docs\n".to_owned(),
        "  x-frame-options: SAMEORIGIN\n".to_owned(),
        "  content-type: text/plain; charset=utf-8\n".to_owned(),
    ] {
        assert!(out.contains(&expected), "missing {expected:?} in\n{out}");
    }
    // expires' "modification plus 1 hours" from the rule: at most an hour
    let cc = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("cache-control: max-age="))
        .unwrap_or_else(|| panic!("no Cache-Control in\n{out}"));
    assert!(cc.parse::<u64>().unwrap() <= 3600, "{out}");
}

/// `--json`: the same data; a combination names its deciding condition, a
/// wildcard vhost its suffix, `--from` and `-H` reach the modules, a rewrite
/// is followed, and a back end is described, not called.
#[test]
fn explain_demo_requests_as_json() {
    let e = explain_json(&demo(), &["http://localhost/notes/a.html"]);
    let rules = e["rules"].as_array().unwrap();
    assert_eq!(rules[2]["outcome"], "matched");
    assert_eq!(rules[2]["decided_by"], "path-regex = \"^/notes/\"");
    assert_eq!(e["answer"]["by"], "core");
    assert_eq!(e["answer"]["status"], 404);

    let e = explain_json(
        &demo(),
        &["http://a.static.localhost/private/x", "--from", "10.1.1.1"],
    );
    assert_eq!(e["vhost"]["kind"], "wildcard");
    assert_eq!(e["vhost"]["name"], ".static.localhost");
    assert_eq!(e["answer"]["by"], "access");
    assert_eq!(e["answer"]["phase"], "request");
    assert_eq!(e["answer"]["status"], 403);
    let e = explain_json(
        &demo(),
        &[
            "http://a.static.localhost/private/x",
            "-H",
            "Authorization: Basic ZGVtbzp3cm9uZw==",
        ],
    );
    assert_eq!(e["answer"]["by"], "auth-basic");
    assert_eq!(e["answer"]["status"], 401);
    assert_eq!(module(&e, "auth-basic")["source"], "rule");
    assert_eq!(module(&e, "auth-basic")["inherit"], "replaced");

    let e = explain_json(&demo(), &["http://localhost/latest/notes.txt"]);
    assert_eq!(e["rewrites"], serde_json::json!(["/docs/notes.txt"]));
    assert_eq!(e["path"], "/docs/notes.txt");
    assert_eq!(e["answer"]["by"], "static-file");

    let e = explain_json(&demo(), &["http://localhost/app/x?y=1", "-X", "POST"]);
    assert_eq!(e["answer"]["by"], "proxy");
    assert_eq!(e["answer"]["back_end"], true);
    assert_eq!(e["answer"]["status"], Value::Null);
    let d = e["answer"]["detail"].as_str().unwrap();
    assert!(
        d.starts_with("upstream \"demo-app\", server 127.0.0.1:8081 (")
            && d.ends_with("POST /x?y=1"),
        "{d}"
    );

    let (code, _, err) = explain(&demo(), &["localhost/x"]);
    assert_eq!(code, 1);
    assert!(err.contains("is not a URL"), "{err}");
}

/// An imported lighttpd configuration: explain names the lighttpd file and
/// lines of the `$HTTP["url"]` block that decided each rule and table.
#[test]
fn explain_names_the_lighttpd_block_that_decided() {
    let d = TempDir::new("explain-lighttpd");
    let root = d.mkdir("www");
    d.write("www/img/a.png", "png");
    d.write("www/notes/a.txt", "text");
    let conf = format!(
        "server.document-root = \"{}\"\n\
         server.port = 8080\n\
         server.modules += ( \"mod_expire\", \"mod_setenv\" )\n\
         mimetype.assign = ( \".png\" => \"image/png\", \".txt\" => \"text/plain\" )\n\
         \n\
         $HTTP[\"url\"] =~ \"^/img/\" {{\n\
         \x20   expire.url = ( \"\" => \"access plus 7 days\" )\n\
         }}\n\
         \n\
         $HTTP[\"url\"] =~ \"^/notes/\" {{\n\
         \x20   setenv.add-response-header = ( \"X-Block\" => \"notes\" )\n\
         }}\n",
        root.display()
    );
    let lconf = d.write("lighttpd.conf", conf);
    let out = d.path().join("server.toml");
    let o = Command::new(bin())
        .args(["import", "lighttpd"])
        .arg(&lconf)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let e = explain_json(&out, &["http://example.test/img/a.png"]);
    // import names the file as it was given, here an absolute path
    let l = lconf.display();
    let img = format!("when {l}:6-8 $HTTP[\"url\"] =~ \"^/img/\"");
    let matched: Vec<&Value> = e["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] == "matched")
        .collect();
    assert_eq!(matched.len(), 1, "{e:#}");
    assert_eq!(matched[0]["from"][0], img.as_str());
    let expires = module(&e, "expires");
    assert_eq!(expires["source"], "rule");
    assert_eq!(expires["from"][0], img.as_str());
    assert_eq!(expires["from"][1], format!("options from {l}:7").as_str());
    assert_eq!(header(&e, "cache-control"), Some("max-age=604800"));

    let (code, text, err) = explain(&out, &["http://example.test/notes/a.txt"]);
    assert_eq!(code, 0, "{err}");
    let notes = format!("# when {l}:10-12 $HTTP[\"url\"] =~ \"^/notes/\"");
    let rule = text
        .lines()
        .position(|l| l.contains(": matched, by path-regex = \"^/notes/\""))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        text.lines().nth(rule + 1).map(str::trim),
        Some(notes.as_str()),
        "{text}"
    );
    let headers = text
        .lines()
        .position(|l| l.trim_start().starts_with("headers "))
        .unwrap_or_else(|| panic!("{text}"));
    let below: Vec<&str> = text
        .lines()
        .skip(headers + 1)
        .take(2)
        .map(str::trim)
        .collect();
    let options = format!("# options from {l}:11");
    assert_eq!(below, [notes.as_str(), options.as_str()], "{text}");
    assert!(text.contains("  x-block: notes\n"), "{text}");
}

fn explain_server(server_extra: &str) -> Server {
    Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n{server_extra}\n\n\
             [[vhost]]\nserver-names = [\"site.test\"]\ndocument-root = \"www\"\n\
             modules = [\"headers\", \"static-file\"]\n\
             [vhost.headers]\nset = {{ X-Site = \"1\" }}\n"
        ),
        |d| {
            d.write("www/a.txt", "hello\n");
        },
    )
}

/// The running server answers `X-Tessera-Explain: 1` with the explanation
/// as JSON only for `explain-from` clients (after `trusted-proxies`); for
/// anyone else, and by default, the header changes nothing.
#[test]
fn explain_header_only_from_trusted_addresses() {
    let s = explain_server("explain-from = [\"127.0.0.1\"]");
    let r = s.req("GET", "/a.txt", &["X-Tessera-Explain: 1"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let e: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(e["vhost"]["label"], "site.test");
    assert_eq!(e["vhost"]["kind"], "exact");
    assert_eq!(e["vhost"]["line"], 6);
    assert_eq!(e["request"]["client"], "127.0.0.1");
    assert_eq!(e["answer"]["by"], "static-file");
    assert_eq!(e["answer"]["status"], 200);
    assert_eq!(header(&e, "x-site"), Some("1"));
    // without the header: the file
    assert_eq!(s.get("/a.txt").text(), "hello\n");

    for extra in [
        "explain-from = [\"10.9.9.9\"]",
        "",
        // a trusted proxy's X-Forwarded-For names a client outside the list
        "explain-from = [\"10.9.9.9\"]\ntrusted-proxies = [\"127.0.0.1\"]",
    ] {
        let s = explain_server(extra);
        let r = s.req(
            "GET",
            "/a.txt",
            &["X-Tessera-Explain: 1", "X-Forwarded-For: 10.1.1.1"],
        );
        assert_eq!(r.status, 200, "{extra}");
        assert_eq!(r.text(), "hello\n", "{extra}");
        assert_eq!(r.header("x-site"), Some("1"));
    }
    // the client a trusted proxy names is the one compared
    let s = explain_server("explain-from = [\"10.9.9.9\"]\ntrusted-proxies = [\"127.0.0.1\"]");
    let r = s.req(
        "GET",
        "/a.txt",
        &["X-Tessera-Explain: 1", "X-Forwarded-For: 10.9.9.9"],
    );
    let e: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(e["request"]["client"], "10.9.9.9");
}

/// A FastCGI script is named with the upstream server that would run it,
/// which is not contacted (nothing listens there).
#[test]
fn explain_describes_a_fastcgi_back_end() {
    let d = TempDir::new("explain-fastcgi");
    d.write("www/x.php", "<?php echo 1;");
    let conf = d.write(
        "server.toml",
        "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[upstream]]\nname = \"php\"\nservers = [\"127.0.0.1:9\"]\n\n\
         [[vhost]]\nserver-names = [\"site.test\"]\ndocument-root = \"www\"\n\
         modules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
    );
    let e = explain_json(&conf, &["http://site.test/x.php/more?a=1"]);
    assert_eq!(e["answer"]["by"], "fastcgi");
    assert_eq!(e["answer"]["back_end"], true);
    let detail = e["answer"]["detail"].as_str().unwrap();
    let script = d.path().join("www/x.php").canonicalize().unwrap();
    assert!(
        detail.starts_with(&format!(
            "script {} (SCRIPT_NAME \"/x.php\", PATH_INFO \"/more\") to upstream \"php\", server 127.0.0.1:9 (",
            script.display()
        )),
        "{detail}"
    );
    let e = explain_json(&conf, &["http://site.test/gone.php"]);
    assert!(
        e["answer"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("404: the script"),
        "{e:#}"
    );
}

/// `-c` is where it acts: `explain` takes it before or after its name, the
/// server before any subcommand, and `import` (which reads no server.toml)
/// neither lists nor accepts it.
#[test]
fn the_configuration_option_belongs_to_the_server_and_explain_only() {
    let run = |args: &[&str]| {
        crate::util::status_and_output(
            Command::new(bin())
                .args(args)
                .env_remove("TESSERA_SERVER__HTTP1_ENGINE"),
        )
    };
    let conf = demo();
    let conf = conf.to_str().unwrap();
    let (before, out_before) = run(&["-c", conf, "explain", "/", "--json"]);
    let (after, out_after) = run(&["explain", "-c", conf, "/", "--json"]);
    assert_eq!((before, after), (0, 0), "{out_before}{out_after}");
    // the same, but for the dates (Expires moves with the clock: two runs
    // may fall on either side of a second)
    let undated = |s: &str| {
        s.lines()
            .filter(|l| !l.ends_with(" GMT\""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(undated(&out_before), undated(&out_after));
    // a file that does not exist, named after `explain`, is the one read
    let (code, out) = run(&["explain", "-c", "/nonexistent/x.toml", "/"]);
    assert_ne!(code, 0);
    assert!(out.contains("/nonexistent/x.toml"), "{out}");
    let (code, help) = run(&["import", "--help"]);
    assert_eq!(code, 0);
    assert!(!help.contains("--config"), "{help}");
    let (code, _) = run(&["import", "-c", conf, "lighttpd", "/dev/null"]);
    assert_eq!(code, 2, "import accepted -c");
    // given where they do nothing: refused, not ignored
    for args in [
        &["-c", conf, "import", "lighttpd", "/dev/null"][..],
        &["-t", "import", "lighttpd", "/dev/null"],
        &["-c", conf, "explain", "-c", conf, "/"],
        &["-t", "-c", conf, "explain", "/"],
        &["-t", "--pid-file", "/tmp/x.pid", "-c", conf],
    ] {
        let (code, out) = run(args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains("tessera: "), "{out}");
    }
}

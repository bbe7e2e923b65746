//! `access` over real HTTP from 127.0.0.1: suffix denial on the decoded path,
//! address rules in order, and refused configurations.

use crate::util::{site_config, Server};

const MODS: &str = "\"access\", \"static-file\"";

fn server(table: &str) -> Server {
    Server::site(MODS, &format!("[vhost.access]\n{table}\n"), |d| {
        d.write("www/index.html", "home");
        d.write("www/db.inc", "secret");
        d.write("www/notes.txt~", "backup");
        d.write("www/ok.txt", "ok");
        d.write("www/dir/page.html", "page");
    })
}

#[test]
fn deny_suffixes_on_the_decoded_path() {
    let s = server("deny-suffixes = [\"~\", \".inc\"]");
    assert_eq!(s.get("/ok.txt").text(), "ok");
    assert_eq!(s.get("/").status, 200);
    for p in [
        "/db.inc",
        "/db.INC",
        "/db%2einc",
        "/db.in%63",
        "/notes.txt~",
        "/notes.txt%7E",
        "/dir/../db.inc",
        "//db.inc",
        "/db.inc?x=1",
        "/missing.inc",
    ] {
        let r = s.get(p);
        assert_eq!(r.status, 403, "{p}");
        assert!(!r.text().contains("secret"), "{p}");
    }
    // every method is refused, not only GET
    assert_eq!(s.req("HEAD", "/db.inc", &[]).status, 403);
    assert_eq!(s.req("POST", "/db.inc", &["Content-Length: 0"]).status, 403);
}

#[test]
fn empty_suffix_denies_everything() {
    let s = server("deny-suffixes = [\"\"]");
    assert_eq!(s.get("/").status, 403);
    assert_eq!(s.get("/ok.txt").status, 403);
}

#[test]
fn rules_first_match_wins() {
    // the client is 127.0.0.1
    let cases = [
        ("[{ allow = \"127.0.0.1\" }, { deny = \"all\" }]", 200),
        ("[{ allow = \"127.0.0.2/32\" }, { deny = \"all\" }]", 403),
        ("[{ allow = \"127.0.0.0/8\" }, { deny = \"all\" }]", 200),
        ("[{ deny = \"127.0.0.1/32\" }, { allow = \"all\" }]", 403),
        ("[{ deny = \"127.0.0.2\" }]", 200),
        ("[{ deny = \"10.0.0.0/8\" }, { deny = \"::1\" }]", 200),
        ("[{ deny = \"0.0.0.0/0\" }]", 403),
        ("[{ deny = \"::/0\" }]", 200),
        ("[{ deny = \"::ffff:127.0.0.0/104\" }]", 403),
        (
            "[{ allow = \"::ffff:127.0.0.1\" }, { deny = \"all\" }]",
            200,
        ),
        ("[{ allow = \"127.0.0.1\" }, { deny = \"127.0.0.1\" }]", 200),
        ("[{ deny = \"all\" }, { allow = \"127.0.0.1\" }]", 403),
        ("[]", 200),
    ];
    for (rules, want) in cases {
        let s = server(&format!("rules = {rules}"));
        let r = s.get("/ok.txt");
        assert_eq!(r.status, want, "{rules}");
        if want == 403 {
            assert!(r.text().contains("403 Forbidden"), "{rules}");
        }
    }
}

#[test]
fn per_rule_tables() {
    let s = Server::site(
        MODS,
        "[[vhost.rule]]\nmatch = { path-prefix = \"/dir/\" }\n[vhost.rule.access]\nrules = [{ deny = \"all\" }]\n",
        |d| {
            d.write("www/ok.txt", "ok");
            d.write("www/dir/page.html", "page");
        },
    );
    assert_eq!(s.get("/ok.txt").status, 200);
    assert_eq!(s.get("/dir/page.html").status, 403);
    assert_eq!(s.get("/dir/../ok.txt").status, 200);
}

#[test]
fn bad_configurations_are_refused() {
    for (table, key) in [
        ("rules = [{ allow = \"10.0.0.1/33\" }]", "rules[0].allow"),
        ("rules = [{ deny = \"nope\" }]", "rules[0].deny"),
        ("rules = [{ permit = \"all\" }]", "rules"),
        ("deny-suffix = [\"~\"]", "deny-suffix"),
    ] {
        let d = crate::util::TempDir::new("access-conf");
        d.mkdir("www");
        let f = d.write(
            "server.toml",
            site_config(MODS, &format!("[vhost.access]\n{table}\n")),
        );
        let out = std::process::Command::new(crate::util::bin())
            .arg("-t")
            .arg("-c")
            .arg(&f)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{table}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{table}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
}

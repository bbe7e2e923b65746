//! `rewrite` over real HTTP: internal rewrites, rewrite once (no loops),
//! `if-not-file`, rules resolved again for the new path, captures from the query
//! that try to leave the document root.

use crate::util::{site_config, Server, TempDir};

fn server(rules: &str) -> Server {
    let extra = format!(
        r#"
[vhost.rewrite]
rules = [
{rules}
]

[[vhost.rule]]
name = "real"
match = {{ path-prefix = "/real/" }}
[vhost.rule.headers]
set = {{ "X-Rule" = "real" }}
"#
    );
    Server::site("\"rewrite\", \"static-file\"", &extra, |d| {
        d.write("www/index.html", "home");
        d.write("www/app/index.html", "app shell");
        d.write("www/app/style.css", "css");
        d.write("www/x/a.txt", "x/a");
        d.write("www/x/x/a.txt", "x/x/a");
        d.write("www/a.txt", "a");
        d.write("www/real/f.txt", "real f");
        d.write("www/data/ok.txt", "data ok");
        d.write("www/secret.txt", "root secret");
        d.write("www/.env", "hidden");
        d.write("outside.txt", "outside");
    })
}

#[test]
fn internal_rewrite_keeps_url_and_status() {
    let s = server(r#"{ regex = "^/latest/(.*)$", target = "/real/$1" }"#);
    let r = s.get("/latest/f.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "real f"));
    assert!(r.header("location").is_none());
    // the rules were resolved again for /real/: the rule's headers table applies
    assert_eq!(r.header("x-rule"), Some("real"));
    assert_eq!(s.get("/a.txt").text(), "a");
}

#[test]
fn rewrite_once_no_loop() {
    // every path matches again after the rewrite; rewrite-once stops at one
    let s = server(r#"{ regex = "^/(.*)$", target = "/x/$1" }"#);
    let r = s.get("/a.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "x/a"));
    let r = s.get("/x/a.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "x/x/a"));
    assert!(
        !s.stderr().contains("too many internal rewrites"),
        "{}",
        s.stderr()
    );
    // keep-alive: the mark does not leak into the next request on the connection
    let raw = s.raw(
        b"GET /a.txt HTTP/1.1\r\nHost: site.test\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&raw);
    assert_eq!(text.matches("\r\n\r\nx/a").count(), 2, "{text}");
}

#[test]
fn if_not_file_single_page_app() {
    let s = server(r#"{ regex = "^/app/", target = "/app/index.html", if-not-file = true }"#);
    assert_eq!(s.get("/app/style.css").text(), "css");
    assert_eq!(s.get("/app/users/42").text(), "app shell");
    assert_eq!(s.get("/app/").text(), "app shell");
    assert_eq!(s.get("/app/users/42?tab=1").text(), "app shell");
}

#[test]
fn target_query_is_ignored() {
    let s = server(r#"{ regex = "^/go/(.*)$", target = "/index.html?path=$1" }"#);
    let r = s.get("/go/some/where?x=1");
    assert_eq!((r.status, r.text().as_str()), (200, "home"));
}

#[test]
fn hostile_captures_stay_inside_the_root() {
    let s = server(r#"{ regex = "^/dl\\?f=(.*)$", target = "/data/$1", match-query = true }"#);
    assert_eq!(s.get("/dl?f=ok.txt").text(), "data ok");
    for q in [
        "../../outside.txt",
        "..%2F..%2Foutside.txt",
        "%2e%2e/%2e%2e/outside.txt",
        "a%00b",
        "%ff",
    ] {
        let r = s.get(&format!("/dl?f={q}"));
        assert_eq!(r.status, 400, "{q}");
        assert!(!r.text().contains("outside"), "{q}");
    }
    // ".." that stays inside the root is just a path
    assert_eq!(s.get("/dl?f=../secret.txt").text(), "root secret");
    // hidden files stay hidden after a rewrite
    assert_eq!(s.get("/dl?f=../.env").status, 404);
    // CR/LF in a capture is data, not a header line
    let r = s.get("/dl?f=x%0D%0AX-Injected:%201");
    assert_eq!(r.status, 404);
    assert!(r.header("x-injected").is_none());
}

#[test]
fn once_across_tables() {
    // two rewrite tables (vhost and rule) still rewrite once in total
    let extra = r#"
[vhost.rewrite]
rules = [{ regex = "^/a/(.*)$", target = "/b/$1" }]

[[vhost.rule]]
match = { path-prefix = "/b/" }
[vhost.rule.rewrite]
rules = [{ regex = "^/b/(.*)$", target = "/a/$1" }]
"#;
    let s = Server::site("\"rewrite\", \"static-file\"", extra, |d| {
        d.write("www/a/f.txt", "in a");
        d.write("www/b/f.txt", "in b");
    });
    assert_eq!(s.get("/a/f.txt").text(), "in b");
    assert_eq!(s.get("/b/f.txt").text(), "in a");
}

#[test]
fn config_errors_name_the_key() {
    for (table, want) in [
        (
            "rules = [{ regex = \"^/\", target = \"https://x.example/\" }]",
            "rewrite: rules[0].target: \"https://x.example/\" must be a path",
        ),
        (
            "rules = [{ regex = \"^/(a)\", target = \"/$2\" }]",
            "rewrite: rules[0].target: $2, but the regex has 1 group(s)",
        ),
        ("rules = []", "rewrite: rules: the list is empty"),
        (
            "rules = [{ regex = \"^/\", target = \"/x\", if-not-exists = true }]",
            "unknown field `if-not-exists`",
        ),
    ] {
        let d = TempDir::new("rwcfg");
        d.mkdir("www");
        let f = d.write(
            "server.toml",
            site_config(
                "\"rewrite\", \"static-file\"",
                &format!("[vhost.rewrite]\n{table}\n"),
            ),
        );
        let out = crate::util::check_config(&f);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{table}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{table}: {err}");
    }
}

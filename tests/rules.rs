//! How `[[vhost.rule]]` tables combine (the README's "Rules" section), observed
//! through the `headers` module: each table sets `X-Table` to its own name.

use crate::util::Server;

fn server() -> Server {
    let extra = r#"
[vhost.headers]
set = { "X-Table" = "vhost" }

[vhost.static-file]
index-files = ["index.html"]

[[vhost.rule]]
name = "a, not final"
match = { path-prefix = "/a/" }
final = false
[vhost.rule.headers]
set = { "X-Table" = "rule-a" }

[[vhost.rule]]
name = "a/b, final"
match = { path-prefix = "/a/b/" }
[vhost.rule.headers]
set = { "X-Table" = "rule-ab" }
[vhost.rule.expires]
url = { "/" = "access plus 1 hours" }
[vhost.rule.static-file]
index-files = ["other.html"]

[[vhost.rule]]
name = "never reached for /a/b/"
match = { path-regex = "^/a/b/" }
[vhost.rule.expires]
url = { "/" = "access plus 2 hours" }

[[vhost.rule]]
name = "png"
match = { all = [{ extensions = ["png"] }, { not = { path-prefix = "/a/" } }] }
[vhost.rule.headers]
set = { "X-Table" = "rule-png" }
"#;
    Server::site("\"headers\", \"static-file\"", extra, |d| {
        d.write("www/x.txt", "x");
        d.write("www/p.png", "p");
        d.write("www/a/x.txt", "ax");
        d.write("www/a/b/x.txt", "abx");
        d.write("www/a/b/index.html", "index");
        d.write("www/a/b/other.html", "other");
    })
}

fn table(s: &Server, path: &str) -> (Option<String>, Option<String>) {
    let r = s.get(path);
    assert_eq!(r.status, 200, "{path}");
    (
        r.header("x-table").map(str::to_owned),
        r.header("cache-control").map(str::to_owned),
    )
}

#[test]
fn vhost_tables_apply_when_no_rule_matches() {
    let s = server();
    assert_eq!(table(&s, "/x.txt"), (Some("vhost".into()), None));
}

#[test]
fn earlier_matching_rule_wins_per_module() {
    let s = server();
    // rule-a (not final) sets headers first; rule-ab still contributes expires.
    assert_eq!(
        table(&s, "/a/b/x.txt"),
        (Some("rule-a".into()), Some("max-age=3600".into()))
    );
    assert_eq!(table(&s, "/a/x.txt"), (Some("rule-a".into()), None));
}

#[test]
fn final_rule_stops_evaluation() {
    let s = server();
    // the third rule also matches /a/b/ but rule-ab is final: 1 hour, not 2.
    assert_eq!(table(&s, "/a/b/x.txt").1.as_deref(), Some("max-age=3600"));
}

#[test]
fn module_only_in_a_rule_runs_only_when_it_matches() {
    let s = server();
    assert_eq!(table(&s, "/x.txt").1, None);
    assert_eq!(table(&s, "/a/b/x.txt").1.as_deref(), Some("max-age=3600"));
}

#[test]
fn list_option_in_rule_replaces_inherited_list() {
    let s = server();
    assert_eq!(s.get("/a/b/").text(), "other");
}

#[test]
fn combined_matchers() {
    let s = server();
    assert_eq!(table(&s, "/p.png").0.as_deref(), Some("rule-png"));
}

/// Each matcher of issue 6, observed through `headers` setting `X-Rule`.
#[test]
fn request_matchers() {
    let extra = r#"
[[vhost.rule]]
match = { client = ["10.0.0.0/8", "::1"] }
final = false
[vhost.rule.headers]
set = { "X-Client" = "private" }

[[vhost.rule]]
match = { client = ["127.0.0.0/8"] }
final = false
[vhost.rule.expires]
url = { "/" = "access plus 1 hours" }

[[vhost.rule]]
match = { method = ["HEAD"] }
[vhost.rule.headers]
set = { "X-Rule" = "head" }

[[vhost.rule]]
match = { header = { name = "User-Agent", regex = "(?i)^curl/" } }
[vhost.rule.headers]
set = { "X-Rule" = "curl" }

[[vhost.rule]]
match = { header = { name = "X-Debug" } }
[vhost.rule.headers]
set = { "X-Rule" = "debug-header" }

[[vhost.rule]]
match = { query = "(^|&)preview=1(&|$)" }
[vhost.rule.headers]
set = { "X-Rule" = "preview" }

[[vhost.rule]]
match = { all = [{ file-exists = false }, { path-prefix = "/app/" }] }
[vhost.rule.headers]
set = { "X-Rule" = "missing-file" }

[[vhost.rule]]
match = { path-regex = "^/(?!static/).*\\.txt$" }
[vhost.rule.headers]
set = { "X-Rule" = "lookahead" }
"#;
    let s = Server::site("\"headers\", \"static-file\"", extra, |d| {
        d.write("www/x.bin", "x");
        d.write("www/static/a.txt", "a");
        d.write("www/b.txt", "b");
    });
    let rule = |m: &str, p: &str, h: &[&str]| s.req(m, p, h).header("x-rule").map(str::to_owned);
    assert_eq!(rule("HEAD", "/x.bin", &[]).as_deref(), Some("head"));
    assert_eq!(
        rule("GET", "/x.bin", &["User-Agent: CURL/8.0"]).as_deref(),
        Some("curl")
    );
    assert_eq!(rule("GET", "/x.bin", &["User-Agent: wget"]), None);
    assert_eq!(
        rule("GET", "/x.bin", &["X-Debug: "]).as_deref(),
        Some("debug-header")
    );
    assert_eq!(
        rule("GET", "/x.bin?a=2&preview=1", &[]).as_deref(),
        Some("preview")
    );
    assert_eq!(rule("GET", "/x.bin?preview=10", &[]), None);
    assert_eq!(s.get("/app/route").header("x-rule"), Some("missing-file"));
    assert_eq!(rule("GET", "/b.txt", &[]).as_deref(), Some("lookahead"));
    assert_eq!(rule("GET", "/static/a.txt", &[]), None);
    // client: 127.0.0.1 is in 127.0.0.0/8 and not in 10.0.0.0/8 or ::1
    let r = s.get("/x.bin");
    assert_eq!(r.header("x-client"), None);
    assert_eq!(r.header("cache-control"), Some("max-age=3600"));
}

/// `client-regex` tests the client address as text (lighttpd's
/// `$HTTP["remoteip"] =~`).
#[test]
fn client_regex_matcher_tests_the_address_text() {
    let extra = r#"
[[vhost.rule]]
match = { all = [{ path-prefix = "/a/" }, { client-regex = "^127\\.0\\.0\\.[0-9]$" }] }
[vhost.rule.access]
rules = [{ deny = "all" }]

[[vhost.rule]]
match = { all = [{ path-prefix = "/b/" }, { client-regex = "^10\\." }] }
[vhost.rule.access]
rules = [{ deny = "all" }]
"#;
    let s = Server::site("\"access\", \"static-file\"", extra, |d| {
        d.write("www/a/x.txt", "a");
        d.write("www/b/x.txt", "b");
    });
    assert_eq!(s.get("/a/x.txt").status, 403);
    assert_eq!(s.get("/b/x.txt").status, 200);
}

/// The `host` matcher sees the host as vhost selection does: from an
/// absolute-form target before `Host`, lower-cased, without a trailing dot
/// or the default port (lighttpd `$HTTP["host"]`); a `header` test of `Host`
/// would see each of these as sent and let them past the deny.
#[test]
fn host_matcher_sees_the_normalized_host() {
    let extra = r#"
[[vhost.rule]]
match = { host = "(^|\\.)example\\.com$" }
[vhost.rule.access]
rules = [{ deny = "all" }]
"#;
    let s = Server::site("\"access\", \"static-file\"", extra, |d| {
        d.write("www/a.txt", "a");
    });
    let status = |h: &str| s.req("GET", "/a.txt", &[&format!("Host: {h}")]).status;
    for h in [
        "www.example.com",
        "www.example.com.",
        "www.example.com:80",
        "WWW.EXAMPLE.COM.",
        "example.com",
    ] {
        assert_eq!(status(h), 403, "{h}");
    }
    for h in [
        "www.example.com:8080",
        "example.org",
        "example.com.evil.test",
    ] {
        assert_eq!(status(h), 200, "{h}");
    }
    // the absolute-form target's host, not the Host field
    let r = s.req("GET", "http://www.example.com/a.txt", &["Host: other.test"]);
    assert_eq!(r.status, 403);
}

#[test]
fn socket_matcher() {
    let free = |ip: &str| {
        std::net::TcpListener::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (p1, p2) = (free("127.0.0.1"), free("127.0.0.2"));
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:{p1}\", \"127.0.0.2:{p2}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndocument-root = \"www\"\nmodules = [\"headers\", \"static-file\"]\n\
         [[vhost.rule]]\nmatch = {{ socket = \"127.0.0.1:{p1}\" }}\n[vhost.rule.headers]\nset = {{ \"X-Socket\" = \"first\" }}\n"
    );
    let s = crate::util::Server::start(&cfg, |d| {
        d.write("www/x.bin", "x");
    });
    assert_eq!(s.get("/x.bin").header("x-socket"), Some("first"));
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.2", p2)).unwrap();
    c.write_all(b"GET /x.bin HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    c.read_to_end(&mut buf).unwrap();
    let r = crate::util::Response::parse(&buf, false);
    assert_eq!((r.status, r.header("x-socket")), (200, None));
}

fn inherit_server(rule_headers: &str, rule_expires: &str) -> Server {
    let extra = format!(
        r#"
[vhost.headers]
set = {{ "X-Frame-Options" = "DENY", "Cache-Control" = "public" }}

[vhost.expires]
existing-cache-control = "merge"
url = {{ "/" = "access plus 1 hours" }}

[[vhost.rule]]
match = {{ path-prefix = "/docs/" }}
[vhost.rule.headers]
{rule_headers}
[vhost.rule.expires]
{rule_expires}
"#
    );
    Server::site("\"headers\", \"expires\", \"static-file\"", &extra, |d| {
        d.write("www/docs/a.txt", "a");
    })
}

/// A rule's table inherits the keys it does not set (lighttpd's model); a key
/// it sets replaces the vhost's value; `inherit = "extend"` merges maps.
#[test]
fn rule_tables_inherit_unset_keys_and_extend_on_request() {
    // `add` only: `set` (X-Frame-Options) comes from the vhost
    let s = inherit_server(
        r#"add = { "X-Section" = "docs" }"#,
        r#"url = { "/" = "access plus 2 hours" }"#,
    );
    let r = s.get("/docs/a.txt");
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    assert_eq!(r.header("x-section"), Some("docs"));
    // expires inherits existing-cache-control = "merge": max-age joins public
    assert_eq!(r.header("cache-control"), Some("public, max-age=7200"));
    drop(s);
    // `set` in the rule replaces the vhost's map ...
    let s = inherit_server(r#"set = { "X-Section" = "docs" }"#, "");
    let r = s.get("/docs/a.txt");
    assert_eq!(r.header("x-frame-options"), None);
    assert_eq!(r.header("x-section"), Some("docs"));
    drop(s);
    // ... unless the rule extends it
    let s = inherit_server(
        "inherit = \"extend\"\nset = { \"X-Section\" = \"docs\" }",
        "inherit = \"none\"\nurl = { \"/\" = \"access plus 2 hours\" }",
    );
    let r = s.get("/docs/a.txt");
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    assert_eq!(r.header("x-section"), Some("docs"));
    // `none`: existing-cache-control is the default "keep"
    assert_eq!(r.header("cache-control"), Some("public"));
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// The shipped demo: `/docs/` adds `X-Section` and keeps the site's
/// `X-Frame-Options` (it once lost it: nginx's `add_header` pitfall).
#[test]
fn demo_docs_keep_the_vhost_headers() {
    let conf_dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/conf"));
    let conf = std::fs::read_to_string(conf_dir.join("server.toml"))
        .unwrap()
        .replace(
            "listen = [\"127.0.0.1:8080\"]",
            "listen = [\"127.0.0.1:0\"]",
        );
    let s = Server::start(&conf, |d| {
        for sub in ["www", "static"] {
            copy_tree(&conf_dir.join(sub), &d.path().join(sub));
        }
        std::fs::copy(conf_dir.join("htpasswd"), d.path().join("htpasswd")).unwrap();
        d.mkdir("logs");
    });
    let r = s.req("GET", "/docs/", &["Host: localhost"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-section"), Some("docs"));
    assert_eq!(r.header("x-frame-options"), Some("SAMEORIGIN"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
}

//! `redirect` over real HTTP: first match wins, statuses, captures from the rule
//! and from the enclosing `[[vhost.rule]]`, the query, and hostile paths that
//! try to send the client off-site or inject header lines.

use crate::util::{site_config, Response, Server, TempDir};

fn server() -> Server {
    let extra = r#"
[vhost.redirect]
rules = [
  { regex = "^/old/(.*)$", target = "/new/$1" },
  { regex = "^/old/", target = "/never" },
  { regex = "^/moved$", target = "/here", status = 308 },
  { regex = "^/see$", target = "/other?x=1", status = 303 },
  { regex = "^/search\\?q=(.*)$", target = "/find/$1", match-query = true, status = 302 },
  { regex = "^/blog/(.*)$", target = "https://blog.example.org/posts/$1", status = 307 },
  { regex = "^/r(.*)$", target = "/$1" },
]

[[vhost.rule]]
name = "languages"
match = { path-regex = "^/lang/(en|de)/" }
[vhost.rule.redirect]
rules = [{ regex = "^/lang/[a-z]+/(.*)$", target = "/%1/docs/$1" }]
"#;
    Server::site("\"redirect\", \"static-file\"", extra, |d| {
        d.write("www/new/page.html", "new page");
        d.write("www/keep.txt", "kept");
    })
}

fn loc(r: &Response) -> &str {
    r.header("location").unwrap_or("")
}

#[test]
fn first_match_wins() {
    let s = server();
    let r = s.get("/old/a/page.html");
    assert_eq!(r.status, 301);
    assert_eq!(loc(&r), "http://site.test/new/a/page.html");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    // no rule matches: the request passes on
    let r = s.get("/keep.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "kept"));
    assert_eq!(s.get("/new/page.html").text(), "new page");
}

#[test]
fn statuses_and_absolute_targets() {
    let s = server();
    let r = s.req("POST", "/moved", &["Content-Length: 0"]);
    assert_eq!((r.status, loc(&r)), (308, "http://site.test/here"));
    let r = s.get("/see?y=2");
    assert_eq!((r.status, loc(&r)), (303, "http://site.test/other?x=1"));
    let r = s.get("/blog/2024/hello%20world");
    assert_eq!(
        (r.status, loc(&r)),
        (307, "https://blog.example.org/posts/2024/hello%20world")
    );
}

#[test]
fn own_host_port_and_http10() {
    let s = server();
    let r = s.req("GET", "/old/x", &["Host: www.example.org:8443"]);
    assert_eq!(loc(&r), "http://www.example.org:8443/new/x");
    // HTTP/1.0 without Host: a relative Location
    let r = Response::parse(&s.raw(b"GET /old/x HTTP/1.0\r\n\r\n"), false);
    assert_eq!((r.status, loc(&r)), (301, "/new/x"));
}

#[test]
fn query_kept_or_matched() {
    let s = server();
    assert_eq!(loc(&s.get("/old/x?a=1&b")), "http://site.test/new/x?a=1&b");
    let r = s.get("/search?q=rust%20web");
    assert_eq!(
        (r.status, loc(&r)),
        (302, "http://site.test/find/rust%20web")
    );
    // the query capture cannot start a new query, fragment or header line
    let r = s.get("/search?q=a?b=c");
    assert_eq!(loc(&r), "http://site.test/find/a%3Fb=c");
}

#[test]
fn rule_captures() {
    let s = server();
    let r = s.get("/lang/de/intro.html");
    assert_eq!(
        (r.status, loc(&r)),
        (301, "http://site.test/de/docs/intro.html")
    );
    // the rule does not match other languages: the vhost table applies
    assert_eq!(s.get("/lang/fr/x").status, 404);
}

#[test]
fn never_off_site() {
    let s = server();
    for (path, want) in [
        ("/r//evil.example", "http://site.test/evil.example"),
        ("/r/%2F%2Fevil.example", "http://site.test/evil.example"),
        ("/r/%5Cevil.example", "http://site.test/%5Cevil.example"),
        (
            "/r/%5C%5Cevil.example",
            "http://site.test/%5C%5Cevil.example",
        ),
        ("/r/%2F%5Cevil.example", "http://site.test/%5Cevil.example"),
        ("/r/@evil.example", "http://site.test/@evil.example"),
    ] {
        let r = s.get(path);
        assert_eq!((r.status, loc(&r)), (301, want), "{path}");
    }
    // without a Host, the Location is relative: it must not become "//host"
    for (path, want) in [
        ("/r//evil.example", "/evil.example"),
        ("/r/%2F%2Fevil.example", "/evil.example"),
        ("/r/%5Cevil.example", "/%5Cevil.example"),
        ("/r/%2F%5C%2Fevil.example", "/%5C/evil.example"),
    ] {
        let req = format!("GET {path} HTTP/1.0\r\n\r\n");
        let r = Response::parse(&s.raw(req.as_bytes()), false);
        let l = loc(&r);
        assert_eq!(l, want, "{path}");
        assert!(!l.starts_with("//") && !l.starts_with("/\\"), "{l}");
    }
}

#[test]
fn no_header_injection() {
    let s = server();
    let r = s.get("/r/%0D%0ASet-Cookie:%20a=b%0D%0A");
    assert_eq!(r.status, 301);
    assert!(r.header("set-cookie").is_none(), "{:?}", r.headers);
    assert_eq!(loc(&r), "http://site.test/%0D%0ASet-Cookie:%20a=b%0D%0A");
    let r = s.get("/r/%22%3E%3Cscript%3E");
    assert_eq!(loc(&r), "http://site.test/%22%3E%3Cscript%3E");
    assert!(!r.text().contains("<script>"));
    // a name with '?' and '#' stays in the path
    assert_eq!(loc(&s.get("/r/a%3Fb%23c")), "http://site.test/a%3Fb%23c");
}

#[test]
fn config_errors_name_the_key() {
    for (table, want) in [
        (
            "rules = [{ regex = \"^/\", target = \"/x\", status = 200 }]",
            "redirect: rules[0].status: 200 is not a redirect status",
        ),
        (
            "rules = [{ regex = \"(\", target = \"/x\" }]",
            "redirect: rules[0].regex: invalid regular expression",
        ),
        (
            "rules = [{ regex = \"^/(.*)\", target = \"//evil.example/$1\" }]",
            "redirect: rules[0].target:",
        ),
        (
            "rules = [{ regex = \"^/(.*)\", target = \"https://$1.example.org/\" }]",
            "captures are not allowed in the scheme or host",
        ),
        (
            "rules = [{ regex = \"^/a\", target = \"/b%20c\" }]",
            "redirect: rules[0].target: %2 needs a [[vhost.rule]]",
        ),
        ("rules = []", "redirect: rules: the list is empty"),
        (
            "rules = [{ regex = \"^/\", target = \"/x\", code = 301 }]",
            "unknown field `code`",
        ),
    ] {
        let d = TempDir::new("redircfg");
        d.mkdir("www");
        let f = d.write(
            "server.toml",
            site_config(
                "\"redirect\", \"static-file\"",
                &format!("[vhost.redirect]\n{table}\n"),
            ),
        );
        let out = crate::util::check_config(&f);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{table}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{table}: {err}");
    }
}

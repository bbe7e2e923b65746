//! `error-pages` over real HTTP: exact, class and prefix pages, kept status and
//! headers, HEAD, the core's own errors, untouched successes, a missing page
//! (original body, one warning), edits seen without a restart.

use crate::util::{site_config, Server, TempDir};

const PAGE_404: &str = "<h1>custom not found</h1>";

fn server() -> Server {
    let extra = r#"
[vhost.error-pages]
pages = { "404" = "errors/404.html", "5xx" = "errors/5xx.txt", "410" = "errors/missing.html" }
prefix = "errors/status-"
"#;
    Server::site("\"static-file\", \"error-pages\"", extra, |d| {
        d.write("www/errors/404.html", PAGE_404);
        d.write("www/errors/5xx.txt", "server trouble");
        d.write("www/errors/status-405.html", "<p>method</p>");
        d.write("www/errors/status-416.html", "<p>range</p>");
        d.write("www/errors/status-400.html", "<p>bad</p>");
        d.write("www/ten.txt", "0123456789");
        d.mkdir("www/dir");
    })
}

#[test]
fn custom_404_keeps_status() {
    let s = server();
    let r = s.get("/missing.html");
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), PAGE_404);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(
        r.header("content-length"),
        Some(PAGE_404.len().to_string().as_str())
    );
}

#[test]
fn head_gets_headers_only() {
    let s = server();
    let r = s.req("HEAD", "/missing.html", &[]);
    assert_eq!(r.status, 404);
    assert!(r.raw_body.is_empty(), "HEAD sent a body");
    assert_eq!(
        r.header("content-length"),
        Some(PAGE_404.len().to_string().as_str())
    );
}

#[test]
fn prefix_pages_keep_headers() {
    let s = server();
    let r = s.req("POST", "/ten.txt", &["Content-Length: 0"]);
    assert_eq!((r.status, r.text().as_str()), (405, "<p>method</p>"));
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
    let r = s.req("GET", "/ten.txt", &["Range: bytes=50-60"]);
    assert_eq!((r.status, r.text().as_str()), (416, "<p>range</p>"));
    assert_eq!(r.header("content-range"), Some("bytes */10"));
}

#[test]
fn core_errors_get_pages_too() {
    let s = server();
    // a malformed escape: the core's own 400
    let r = s.get("/%zz");
    assert_eq!((r.status, r.text().as_str()), (400, "<p>bad</p>"));
}

#[test]
fn successes_and_redirects_untouched() {
    let s = server();
    let r = s.get("/ten.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "0123456789"));
    let r = s.get("/dir");
    assert_eq!(r.status, 301);
    assert!(r.text().contains("301 Moved Permanently"));
    let r = s.req("GET", "/ten.txt", &["Range: bytes=0-1"]);
    assert_eq!((r.status, r.text().as_str()), (206, "01"));
}

#[test]
fn missing_page_keeps_body_and_warns_once() {
    let extra = "[vhost.error-pages]\npages = { \"404\" = \"errors/gone.html\" }\n";
    let s = Server::site("\"static-file\", \"error-pages\"", extra, |_| {});
    for _ in 0..3 {
        let r = s.get("/nothing");
        assert_eq!(r.status, 404);
        assert!(r.text().contains("<h1>404 Not Found</h1>"), "{}", r.text());
    }
    let log = s.stderr();
    assert_eq!(log.matches("error-pages: cannot read").count(), 1, "{log}");
}

#[test]
fn pages_are_read_per_response() {
    let s = server();
    assert_eq!(s.get("/nope").text(), PAGE_404);
    std::fs::write(s.root().join("errors/404.html"), "edited").unwrap();
    assert_eq!(s.get("/nope").text(), "edited");
}

#[test]
fn page_content_is_not_a_path_trick() {
    // a request for the error page itself is an ordinary file request
    let s = server();
    let r = s.get("/errors/404.html");
    assert_eq!((r.status, r.text().as_str()), (200, PAGE_404));
    // dot segments are resolved before anything else
    let r = s.get("/errors/../errors/nope.html");
    assert_eq!((r.status, r.text().as_str()), (404, PAGE_404));
}

#[test]
fn config_errors_name_the_key() {
    for (table, want) in [
        (
            "pages = { \"399\" = \"x.html\" }",
            "error-pages: pages.399: not a status from 400 to 599",
        ),
        (
            "pages = { \"3xx\" = \"x.html\" }",
            "error-pages: pages.3xx:",
        ),
        ("prefix = \"\"", "error-pages: prefix:"),
        ("", "error-pages: set `pages` or `prefix`"),
        ("page = {}", "unknown field `page`"),
    ] {
        let d = TempDir::new("epcfg");
        d.mkdir("www");
        let f = d.write(
            "server.toml",
            site_config(
                "\"static-file\", \"error-pages\"",
                &format!("[vhost.error-pages]\n{table}\n"),
            ),
        );
        let out = crate::util::check_config(&f);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{table}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{table}: {err}");
    }
}

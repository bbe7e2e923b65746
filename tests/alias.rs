//! `alias` over real HTTP: URL prefixes served from other directories, the
//! longest prefix winning, and static-file's traversal rules (normalized
//! path, hidden files, symlink policy) applied inside the alias directory;
//! dir-listing and compress's sidecars honour the alias too.

use crate::util::{check_config, site_config, Server, TempDir};

const MODULES: &str = "\"alias\", \"compress\", \"static-file\", \"dir-listing\"";

fn server() -> Server {
    let extra = r#"
[vhost.alias]
paths = { "/icons/" = "icons", "/icons/big" = "big/", "/docs" = "manual", "/exact/" = "exact" }
[vhost.compress]
precompressed = ["gzip"]
"#;
    Server::site(MODULES, extra, |d| {
        d.write("icons/x.png", "ICON");
        d.write("icons/.hidden", "HIDDEN");
        d.write("icons/sub/f.txt", "SUB");
        d.write("icons/app.css", "body { color: red }");
        d.write("icons/app.css.gz", b"\x1f\x8b not really gzip");
        d.write("big/y.png", "BIG");
        d.write("manual/index.html", "MANUAL");
        d.mkdir("exact");
        d.write("exact/a.txt", "A");
        d.write("www/icons/x.png", "SHADOWED");
        d.write("www/secret.txt", "VHOST");
        // what nginx's `location /icons { alias …/icons; }` would open for
        // `/icons../x.png`: the parent of the alias directory
        d.write("x.png", "LEAK");
        d.write("outside/secret", "OUTSIDE");
        std::os::unix::fs::symlink("../outside/secret", d.path().join("icons/out")).unwrap();
        std::os::unix::fs::symlink("../www/secret.txt", d.path().join("icons/inwww")).unwrap();
        std::os::unix::fs::symlink("sub", d.path().join("icons/link")).unwrap();
    })
}

#[test]
fn prefixes_map_to_their_directories() {
    let s = server();
    let r = s.get("/icons/x.png");
    assert_eq!((r.status, r.text().as_str()), (200, "ICON"));
    // the longest prefix wins, with or without a trailing slash in the key
    assert_eq!(s.get("/icons/big/y.png").text(), "BIG");
    assert_eq!(s.get("/icons/sub/f.txt").text(), "SUB");
    // the vhost's own files stay where they are
    assert_eq!(s.get("/secret.txt").text(), "VHOST");
    // static-file's machinery applies: Range and conditional requests
    let r = s.req("GET", "/icons/x.png", &["Range: bytes=1-2"]);
    assert_eq!((r.status, r.text().as_str()), (206, "CO"));
    let etag = s.get("/icons/x.png").header("etag").unwrap().to_owned();
    let r = s.req("GET", "/icons/x.png", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);
}

#[test]
fn the_prefix_itself_is_a_directory() {
    let s = server();
    // `/docs` names the alias directory: 301 to the slash form, index file
    let r = s.get("/docs?q=1");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("http://site.test/docs/?q=1"));
    assert_eq!(s.get("/docs/").text(), "MANUAL");
    assert_eq!(s.get("/docs/index.html").text(), "MANUAL");
    let r = s.get("/exact");
    assert_eq!(r.header("location"), Some("http://site.test/exact/"));
}

#[test]
fn dir_listing_lists_the_alias_directory() {
    let s = server();
    let r = s.get("/icons/sub/");
    assert_eq!(r.status, 200);
    let body = r.text();
    assert!(body.contains("f.txt"), "{body}");
    assert!(
        body.contains("/icons/sub/"),
        "the URL path is shown: {body}"
    );
    let body = s.get("/icons/").text();
    assert!(
        body.contains("x.png") && !body.contains("SHADOWED"),
        "{body}"
    );
    // links out of the alias directory are not listed
    assert!(
        !body.contains("\"out\"") && !body.contains(">out<"),
        "{body}"
    );
}

#[test]
fn compress_finds_sidecars_in_the_alias_directory() {
    let s = server();
    let r = s.req("GET", "/icons/app.css", &["Accept-Encoding: gzip"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.body, b"\x1f\x8b not really gzip");
}

#[test]
fn traversal_never_leaves_the_alias_directory() {
    let s = server();
    // normalized before the alias applies: above the root is 400 ...
    for p in [
        "/icons/../../etc/passwd",
        "/icons/..%2f..%2fetc/passwd",
        "/icons/%2e%2e/%2e%2e/etc/passwd",
        "/icons/big/../../../x.png",
    ] {
        assert_eq!(s.get(p).status, 400, "{p}");
    }
    // ... and inside it, the path no longer names the alias
    assert_eq!(s.get("/icons/../secret.txt").text(), "VHOST");
    assert_eq!(s.get("/icons/%2e%2e/secret.txt").text(), "VHOST");
    // a prefix matches whole segments only
    let r = s.get("/icons../x.png");
    assert_eq!(r.status, 404);
    assert_ne!(r.text(), "LEAK");
    assert_eq!(s.get("/iconsx.png").status, 404);
    // hidden files
    assert_eq!(s.get("/icons/.hidden").status, 404);
}

#[test]
fn symlinks_out_of_the_alias_directory_are_refused() {
    let s = server();
    // inside-root (default) means inside the alias directory
    assert_eq!(s.get("/icons/out").status, 403);
    assert_eq!(
        s.get("/icons/inwww").status,
        403,
        "not even into the vhost's root"
    );
    assert_eq!(s.get("/icons/link/f.txt").text(), "SUB");
    // `never`: no link at all
    let extra = r#"
[vhost.alias]
paths = { "/icons/" = "icons" }
[vhost.static-file]
follow-symlinks = "never"
"#;
    let s = Server::site("\"alias\", \"static-file\"", extra, |d| {
        d.write("icons/sub/f.txt", "SUB");
        std::os::unix::fs::symlink("sub", d.path().join("icons/link")).unwrap();
    });
    assert_eq!(s.get("/icons/sub/f.txt").text(), "SUB");
    assert_eq!(s.get("/icons/link/f.txt").status, 403);
}

#[test]
fn rule_tables_alias_only_where_the_rule_matches() {
    let extra = r#"
[[vhost.rule]]
match = { method = ["GET"] }
[vhost.rule.alias]
paths = { "/a/" = "a" }
"#;
    let s = Server::site("\"alias\", \"static-file\"", extra, |d| {
        d.write("a/f.txt", "ALIASED");
        d.write("www/a/f.txt", "PLAIN");
    });
    assert_eq!(s.get("/a/f.txt").text(), "ALIASED");
    assert_eq!(
        s.req("HEAD", "/a/f.txt", &[]).header("content-length"),
        Some("5")
    );
}

#[test]
fn configuration_errors_name_the_entry() {
    for (paths, want) in [
        (
            r#"{ "/a/" = "missing" }"#,
            "alias: paths.\"/a/\": \"missing\": ",
        ),
        (
            r#"{ "a/" = "www" }"#,
            "alias: paths.\"a/\": must start with '/'",
        ),
        (r#"{ "/a/../b" = "www" }"#, "normalized"),
        (
            r#"{ "/a/" = "." }"#,
            "contains the configuration file's directory",
        ),
    ] {
        let d = TempDir::new("alias-cfg");
        d.mkdir("www");
        let f = d.write(
            "server.toml",
            site_config("\"alias\"", &format!("[vhost.alias]\npaths = {paths}\n")),
        );
        let out = check_config(&f);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{paths} accepted");
        assert!(err.contains(want), "{paths}: {err}");
        assert!(err.contains("vhost \"site.test\""), "{err}");
    }
}

//! `dir-listing` over real HTTP: the index page, order, hidden files, hostile
//! names (escaped text, links that lead back), JSON through a rule, truncation,
//! header/readme files, symlinks and the document root.

use crate::util::{site_config, Server, TempDir};

const MODULES: &str = "\"static-file\", \"dir-listing\"";

/// Names that must neither inject markup nor break their link.
const HOSTILE: &[&str] = &[
    "<script>.html",
    "<img src=x onerror=alert(1)>",
    "a\"b",
    "x#y",
    "q?",
    "100%",
    "it's",
    "a&amp;b",
    "sp ace",
    "javascript:alert(1)",
    "ünï.txt",
];

fn server(extra: &str) -> Server {
    Server::site(MODULES, extra, |d| {
        d.write("www/pub/b.txt", "bee");
        d.write("www/pub/a.txt", "a");
        d.mkdir("www/pub/zdir");
        d.mkdir("www/pub/adir");
        d.write("www/pub/.secret", "s");
        d.mkdir("www/pub/.git");
        d.write("www/pub/HEADER.txt", "<b>bold?</b>");
        d.write("www/pub/README.html", "<p id=\"readme\">read me</p>");
        d.write("www/withindex/index.html", "the index");
        d.write("www/withindex/other.txt", "o");
        for (i, n) in HOSTILE.iter().enumerate() {
            d.write(&format!("www/evil/{n}"), format!("file {i}"));
        }
        d.write("www/.hidden/x.txt", "x");
        for i in 0..30 {
            d.write(&format!("www/many/f{i:02}"), "");
        }
        d.write("outside/secret.txt", "outside");
        std::os::unix::fs::symlink(d.path().join("outside"), d.path().join("www/out")).unwrap();
        std::os::unix::fs::symlink(
            d.path().join("outside/secret.txt"),
            d.path().join("www/pub/link-out.txt"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            d.path().join("www/pub/a.txt"),
            d.path().join("www/pub/link-in.txt"),
        )
        .unwrap();
    })
}

/// The `href` values of a page, HTML-unescaped, in order.
fn hrefs(body: &str) -> Vec<String> {
    body.split("<a href=\"")
        .skip(1)
        .map(|s| {
            s[..s.find('"').unwrap()]
                .replace("&#39;", "'")
                .replace("&quot;", "\"")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .collect()
}

#[test]
fn html_index_sorted_dirs_first() {
    let s = server("");
    let r = s.get("/pub/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let body = r.text();
    assert!(body.contains("<title>Index of /pub/</title>"), "{body}");
    assert_eq!(
        hrefs(&body),
        [
            "/",
            "/pub/adir/",
            "/pub/zdir/",
            "/pub/HEADER.txt",
            "/pub/README.html",
            "/pub/a.txt",
            "/pub/b.txt",
            "/pub/link-in.txt",
        ]
    );
    // size of b.txt and a modification time
    assert!(body.contains(">b.txt</a></td><td>20"), "{body}");
    assert!(body.contains("<td class=\"s\">3</td>"), "{body}");
}

#[test]
fn hidden_files_left_out_and_hidden_dirs_404() {
    let s = server("");
    let body = s.get("/pub/").text();
    assert!(
        !body.contains(".secret") && !body.contains(".git"),
        "{body}"
    );
    assert_eq!(s.get("/.hidden/").status, 404);
    assert_eq!(s.get("/pub/.git/").status, 404);
    let s = server("[vhost.dir-listing]\nhidden-files = true\n");
    let body = s.get("/pub/").text();
    assert!(
        body.contains(">.secret</a>") && body.contains(">.git/</a>"),
        "{body}"
    );
}

#[test]
fn hostile_names_are_escaped_and_their_links_lead_back() {
    let s = server("");
    let r = s.get("/evil/");
    assert_eq!(r.status, 200);
    let body = r.text();
    assert!(!body.contains("<script>"), "{body}");
    assert!(body.contains(">&lt;script&gt;.html</a>"), "{body}");
    assert!(!body.contains("<img"), "{body}");
    assert!(!body.contains("href=\"javascript:"), "{body}");
    let links: Vec<String> = hrefs(&body).into_iter().skip(1).collect();
    assert_eq!(links.len(), HOSTILE.len(), "{body}");
    for link in &links {
        assert!(link.starts_with("/evil/"), "{link}");
        assert!(
            !link.contains(['"', '\'', '<', '>', '#', '?', ' ']),
            "unencoded character in {link}"
        );
        let r = s.get(link);
        assert_eq!(r.status, 200, "{link}");
        let i: usize = r.text().strip_prefix("file ").unwrap().parse().unwrap();
        assert!(link.ends_with(&*tessera_core_encode(HOSTILE[i])), "{link}");
    }
}

/// What the listing's link for `name` must end with (tessera_core::path::encode
/// plus `'`), recomputed here independently.
fn tessera_core_encode(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&()*+,=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[test]
fn index_file_wins_and_slash_redirect() {
    let s = server("");
    assert_eq!(s.get("/withindex/").text(), "the index");
    let r = s.get("/pub");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("http://site.test/pub/"));
    assert_eq!(s.get("/nope/").status, 404);
    assert_eq!(s.get("/pub/a.txt").text(), "a");
}

#[test]
fn a_directory_whose_index_is_excluded_is_403_not_a_listing() {
    // lighttpd: mod_indexfile picks index.php, mod_staticfile refuses it
    // (403); a listing would show what the index hides
    let s = Server::site(
        MODULES,
        "[vhost.static-file]\nindex-files = [\"index.php\", \"index.html\"]\nexclude-extensions = [\".php\"]\n",
        |d| {
            d.write("www/app/index.php", "<?php echo 'secret';");
            d.write("www/app/config.inc", "password");
            d.write("www/open/a.txt", "a");
            d.write("www/both/index.php", "<?php");
            d.write("www/both/index.html", "html index");
        },
    );
    let r = s.get("/app/");
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(!r.text().contains("config.inc"), "{}", r.text());
    // an excluded file no other module takes is refused, as by lighttpd;
    // a missing one is not found
    assert_eq!(s.get("/app/index.php").status, 403);
    assert_eq!(s.get("/app/missing.php").status, 404);
    // a directory without any index is still listed
    let r = s.get("/open/");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("a.txt"), "{}", r.text());
    // a servable index is served, as before
    assert_eq!(s.get("/both/").text(), "html index");
}

#[test]
fn head_and_methods() {
    let s = server("");
    let g = s.get("/pub/");
    let h = s.req("HEAD", "/pub/", &[]);
    assert_eq!(h.status, 200);
    assert!(h.raw_body.is_empty(), "HEAD sent a body");
    assert_eq!(h.header("content-length"), g.header("content-length"));
    assert_eq!(h.header("content-type"), g.header("content-type"));
    let r = s.req("POST", "/pub/", &["Content-Length: 0"]);
    assert_eq!(r.status, 405);
    assert!(r.header("allow").is_some());
}

#[test]
fn document_root_and_symlinks() {
    let s = server("");
    // a directory reached through a link outside the document root
    assert_eq!(s.get("/out/").status, 403);
    // a link entry pointing outside is not listed, one inside is
    let body = s.get("/pub/").text();
    assert!(!body.contains("link-out"), "{body}");
    assert!(body.contains("link-in.txt"), "{body}");
    for p in ["/../", "/%2e%2e/", "/pub/..%2f..%2f", "/..%5c/"] {
        let st = s.get(p).status;
        assert!(st == 400 || st == 404, "{p}: {st}");
    }
    let s = server("[vhost.dir-listing]\nfollow-symlinks = \"never\"\n");
    assert!(!s.get("/pub/").text().contains("link-in"));
}

#[test]
fn header_and_readme_files() {
    let s = server(
        "[vhost.dir-listing]\nheader-file = \"HEADER.txt\"\nreadme-file = \"README.html\"\n",
    );
    let body = s.get("/pub/").text();
    let h = body
        .find("<pre>&lt;b&gt;bold?&lt;/b&gt;</pre>")
        .expect(&body);
    let table = body.find("<table>").unwrap();
    let readme = body.find("<p id=\"readme\">read me</p>").expect(&body);
    assert!(h < table && table < readme, "{body}");
    // a directory without them still lists
    assert_eq!(s.get("/evil/").status, 200);
}

#[test]
fn truncated_listing() {
    let s = server("[vhost.dir-listing]\nmax-entries = 10\n");
    let body = s.get("/many/").text();
    assert_eq!(hrefs(&body).len(), 1 + 10, "{body}");
    assert!(body.contains("listing truncated"), "{body}");
    assert!(!s.get("/pub/").text().contains("listing truncated"));
}

#[test]
fn json_through_a_rule() {
    let s = server(
        "[[vhost.rule]]\nmatch = { query = \"^format=json$\" }\n[vhost.rule.dir-listing]\nformat = \"json\"\n",
    );
    let r = s.get("/pub/?format=json");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let body = r.text();
    assert!(
        body.starts_with("{\"path\":\"/pub/\",\"entries\":[{\"name\":\"adir\",\"type\":\"directory\",\"size\":null,\"mtime\":"),
        "{body}"
    );
    assert!(
        body.contains("{\"name\":\"b.txt\",\"type\":\"file\",\"size\":3,"),
        "{body}"
    );
    assert!(body.ends_with("\"truncated\":false}"), "{body}");
    let r = s.get("/evil/?format=json");
    assert!(r.text().contains("\"name\":\"a\\\"b\""), "{}", r.text());
    // without the query: HTML
    assert!(s.get("/pub/").text().starts_with("<!DOCTYPE html>"));
}

#[test]
fn off_unless_named() {
    let s = Server::site("\"static-file\"", "", |d| {
        d.mkdir("www/d");
        d.write("www/d/f.txt", "f");
    });
    assert_eq!(s.get("/d/").status, 403);
}

#[test]
fn config_errors_name_the_key() {
    for (extra, want) in [
        (
            "max-entries = 0",
            "dir-listing: max-entries: must be at least 1",
        ),
        ("header-file = \"../x\"", "dir-listing: header-file:"),
        ("format = \"xml\"", "dir-listing.format"),
        ("hide-dotfiles = true", "dir-listing.hide-dotfiles"),
    ] {
        let d = TempDir::new("dlcfg");
        d.mkdir("www");
        let f = d.write(
            "server.toml",
            site_config(MODULES, &format!("[vhost.dir-listing]\n{extra}\n")),
        );
        let out = crate::util::check_config(&f);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{extra}: {err}");
    }
}

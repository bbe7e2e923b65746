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

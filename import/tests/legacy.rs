//! Every configuration in `shared/legacy-configs` (beside the repository)
//! imports with a report and without a panic, and the important outcomes are
//! checked file by file: vhosts, document roots, headers, expiry rules, log
//! formats, listeners, and what the report says about the rest.
#![allow(missing_docs)]

mod util;

use std::path::{Path, PathBuf};

use tessera_import::{import, Options, Outcome, Source};
use toml::Value;
use util::{c, import_lighttpd_text, l, legacy, strs, Out};

#[test]
fn every_file_imports_or_fails_cleanly() {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&legacy(), &mut files);
    files.sort();
    assert!(files.len() > 40);
    for f in files {
        let source = if f.to_string_lossy().contains("/cherokee/") {
            Source::Cherokee
        } else {
            Source::Lighttpd
        };
        let r = import(source, &f, &Options::default());
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("README") {
            let e = r.expect_err("a README is not a configuration");
            assert!(
                e.to_string().starts_with(&format!("{}:", f.display())),
                "{e}"
            );
            continue;
        }
        if let Err(e) = &r {
            // lighttpd refuses a file including one that is missing here
            // (the upstream example includes /etc/lighttpd/modules.conf).
            let e = e.to_string();
            if e.contains("lighttpd refuses to start") {
                assert!(e.starts_with(&format!("{}:", f.display())), "{e}");
                continue;
            }
        }
        let i = r.unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let t: toml::Table = toml::from_str(&i.toml).unwrap();
        assert!(!t["vhost"].as_array().unwrap().is_empty());
        assert!(i.report.to_string().contains("summary: "));
        assert!(i.exit_code() <= 1);
    }
}

#[test]
fn debian_default() {
    let o = l("debian-1.4.69/lighttpd.conf");
    // use-ipv6.pl's [::]:80 takes IPv4 too, so 0.0.0.0:80 is left out.
    assert_eq!(o.listen(), vec!["[::]:80"]);
    assert_eq!(o.vhosts().len(), 1);
    let v = o.default_vhost();
    assert_eq!(v["document-root"].as_str(), Some("/var/www/html"));
    // The file includes /etc/lighttpd/conf-enabled/*.conf of this machine,
    // which may add modules (99-unconfigured adds an index file).
    let mods = strs(&v["modules"]);
    assert!(
        mods.contains(&"access") && mods.contains(&"static-file"),
        "{mods:?}"
    );
    assert_eq!(
        strs(&v["static-file"]["index-files"])[..2],
        ["index.php", "index.html"]
    );
    assert_eq!(
        strs(&v["static-file"]["exclude-extensions"]),
        vec![".php", ".pl", ".fcgi"]
    );
    assert_eq!(strs(&v["access"]["deny-suffixes"]), vec!["~", ".inc"]);
    assert!(o.has(Outcome::NotNeeded, "server.username"));
    assert!(o.has(Outcome::NotNeeded, "server.http-parseopts"));
    assert!(o.imported.report.find("create-mime.conf.pl").count() == 1);
    if Path::new("/etc/mime.types").exists() {
        // lighttpd's text/html has no charset, Tessera's built-in one has.
        let m = v["static-file"]["mime-types"].as_table().unwrap();
        assert_eq!(m["html"].as_str(), Some("text/html"));
        assert!(!m.contains_key("png"), "png is the same in both tables");
    }
}

#[test]
fn debian_fragments() {
    let o = l("debian-1.4.69/conf-available/90-debian-doc.conf");
    let v = o.default_vhost();
    let rules = o.rules(v);
    assert_eq!(rules.len(), 1);
    let m = rules[0]["match"]["all"].as_array().unwrap();
    assert_eq!(m[0]["path-regex"].as_str(), Some("^/doc/|^/images/"));
    assert_eq!(strs(&m[1]["client"]), vec!["127.0.0.1", "::1"]);
    assert!(rules[0].contains_key("dir-listing"));
    assert!(o.has(Outcome::Dropped, "alias.url"));
    assert!(o.has(Outcome::Dropped, "cgi.assign"));

    let o = l("debian-1.4.69/conf-available/10-no-www.conf");
    assert_eq!(o.vhosts().len(), 2);
    assert_eq!(strs(&o.vhost(1)["server-names"]), vec!["~^www\\.(.*)"]);
    // The fragment does not load mod_redirect, so lighttpd ignores it.
    assert!(o.has(Outcome::Dropped, "mod_redirect is not in server.modules"));
    // With mod_redirect loaded, %1 (a capture of the host test) cannot be kept.
    let text = format!(
        "server.modules = ( \"mod_redirect\" )\n{}",
        std::fs::read_to_string(
            legacy().join("lighttpd/debian-1.4.69/conf-available/10-no-www.conf")
        )
        .unwrap()
    );
    let i = tessera_import::import_text(
        Source::Lighttpd,
        "no-www.conf",
        &text,
        Path::new("/"),
        &Options::default(),
    )
    .unwrap();
    assert!(i.report.find("%N refers to captures of a host").count() == 1);

    let o = l("debian-1.4.69/conf-available/10-ssl.conf");
    assert_eq!(o.listen(), vec!["0.0.0.0:80"]);
    assert!(o.has(Outcome::Dropped, "TLS listener"));
    assert!(o.has(Outcome::Dropped, "ssl.pemfile"));

    let o = l("debian-1.4.69/conf-available/10-accesslog.conf");
    let al = &o.default_vhost()["access-log"];
    assert_eq!(al["path"].as_str(), Some("/var/log/lighttpd/access.log"));
    assert_eq!(
        al["format"].as_str(),
        Some(r#"%h %V %u %t "%r" %>s %B "%{Referer}i" "%{User-Agent}i""#)
    );

    let o = l("debian-1.4.69/conf-available/10-dir-listing.conf");
    assert!(o.default_vhost().contains_key("dir-listing"));
    assert!(o.has(Outcome::Translated, "server.dir-listing"));

    let o = l("debian-1.4.69/conf-available/20-deflate.conf");
    let cmp = &o.default_vhost()["compress"];
    assert_eq!(
        strs(&cmp["mime-types"]),
        vec![
            "application/javascript",
            "text/css",
            "text/html",
            "text/plain"
        ]
    );
    assert!(o.has(Outcome::Approximated, "deflate.cache-dir"));

    let o = l("debian-1.4.69/conf-available/99-unconfigured.conf");
    assert_eq!(
        strs(&o.default_vhost()["static-file"]["index-files"]),
        vec!["index.php", "index.html", "index.lighttpd.html"]
    );

    // Back ends and computed document roots (issue 14): tests/backends.rs.
}

#[test]
fn pihole() {
    let o = l("pihole/lighttpd.conf.debian");
    let v = o.default_vhost();
    assert_eq!(v["document-root"].as_str(), Some("/var/www/html"));
    assert_eq!(
        v["expires"]["url"]["/"].as_str(),
        Some("access plus 0 seconds")
    );
    assert_eq!(
        v["expires"]["existing-cache-control"].as_str(),
        Some("keep")
    );
    assert_eq!(v["access-log"]["format"].as_str(), Some("%t|%V|%r|%>s|%B"));
    assert_eq!(
        v["access-log"]["path"].as_str(),
        Some("/var/log/lighttpd/access-pihole.log")
    );
    assert!(o.has(Outcome::Approximated, "%{%s}t becomes %t"));
    // mod_expire comes before mod_setenv in server.modules.
    let mods = strs(&v["modules"]);
    let pos = |m| mods.iter().position(|x| *x == m).unwrap();
    assert!(pos("expires") < pos("headers"));
    let rules = o.rules(v);
    // The nested referer block replaces the /admin/ list (lighttpd's merge):
    // it comes first, with only its own header.
    let referer = rules
        .iter()
        .position(|r| r["match"].to_string().contains("Referer"))
        .unwrap();
    let admin = rules
        .iter()
        .position(|r| r["match"].get("path-regex").and_then(Value::as_str) == Some("^/admin/"))
        .unwrap();
    assert!(referer < admin);
    assert_eq!(
        rules[referer]["headers"]["add"].as_table().unwrap().len(),
        1
    );
    assert_eq!(
        rules[admin]["headers"]["add"]["X-Frame-Options"].as_str(),
        Some("DENY")
    );
    let dot = rules
        .iter()
        .find(|r| r["match"].get("path-regex").and_then(Value::as_str) == Some(r"^/admin/\.(.*)"))
        .unwrap();
    assert_eq!(strs(&dot["access"]["deny-suffixes"]), vec![""]);
    assert!(o.has(Outcome::Dropped, "cat external.conf"));
    assert!(o.has(Outcome::Dropped, "server.error-handler-404"));

    let o = l("pihole/pihole-admin.conf");
    assert_eq!(o.vhosts().len(), 2);
    let pi = o.vhost(1);
    assert_eq!(strs(&pi["server-names"]), vec!["pi.hole"]);
    let r0 = o.rules(pi)[0];
    assert_eq!(r0["match"]["path-regex"].as_str(), Some("^/$"));
    assert_eq!(
        r0["redirect"]["rules"][0]["target"].as_str(),
        Some("/admin/")
    );
    let log_rule = o
        .rules(o.default_vhost())
        .into_iter()
        .find(|r| r.contains_key("access-log"))
        .unwrap();
    assert_eq!(log_rule["match"]["path-regex"].as_str(), Some("^/admin/"));
    assert_eq!(
        log_rule["access-log"]["format"].as_str(),
        Some("%t|%h|%V|%r|%>s|%B")
    );
    // Its fastcgi.server: tests/backends.rs.
    assert!(!o.has(Outcome::Dropped, "fastcgi.server"));

    let o = l("pihole/lighttpd.conf-2016");
    let v = o.default_vhost();
    let rules = o.rules(v);
    // PCRE look-ahead is kept (fancy-regex).
    assert_eq!(
        rules[0]["match"]["path-regex"].as_str(),
        Some("^(?!/admin)/.*")
    );
    assert_eq!(
        strs(&v["compress"]["mime-types"]),
        vec![
            "application/javascript",
            "text/css",
            "text/html",
            "text/plain"
        ]
    );
    assert_eq!(
        v["error-pages"]["pages"]["404"].as_str(),
        Some("pihole/index.html")
    );
    assert!(o.has(Outcome::Dropped, "the target must start with '/'"));
    assert!(o.has(Outcome::Translated, "include-conf-enabled.pl"));
}

#[test]
fn upstream_lighttpd() {
    // It includes conf_dir + "/modules.conf", conf_dir being /etc/lighttpd:
    // missing here, so lighttpd would refuse to start, and the import fails
    // naming the line.
    let path = legacy().join("lighttpd/upstream/lighttpd.annotated.conf");
    let e = import(Source::Lighttpd, &path, &Options::default()).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "{}:78: include \"/etc/lighttpd/modules.conf\"",
            path.display()
        )),
        "{e}"
    );
    // With conf_dir pointing at a copy of the upstream directory (its
    // debug.conf, absent from the copy, empty), it imports.
    let dir = std::env::temp_dir().join(format!("tessera-legacy-up-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    let up = legacy().join("lighttpd/upstream");
    std::fs::copy(up.join("modules.conf"), dir.join("modules.conf")).unwrap();
    for e in std::fs::read_dir(up.join("conf.d")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join("conf.d").join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(dir.join("conf.d/debug.conf"), "").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let line = "var.conf_dir    = \"/etc/lighttpd\"";
    assert!(text.contains(line));
    let text = text.replace(line, &format!("var.conf_dir    = \"{}\"", dir.display()));
    let imported = tessera_import::import_text(
        Source::Lighttpd,
        "lighttpd.annotated.conf",
        &text,
        &dir,
        &Options::default(),
    )
    .unwrap();
    let toml = toml::from_str(&imported.toml).unwrap();
    let o = Out { imported, toml };
    let _ = std::fs::remove_dir_all(&dir);
    let v = o.default_vhost();
    assert_eq!(v["document-root"].as_str(), Some("/srv/www/htdocs"));
    assert_eq!(
        strs(&v["static-file"]["index-files"]),
        vec![
            "index.xhtml",
            "index.html",
            "index.htm",
            "default.htm",
            "index.php"
        ]
    );
    assert_eq!(
        strs(&v["static-file"]["exclude-extensions"]),
        vec![".php", ".pl", ".fcgi", ".scgi"]
    );
    // modules.conf loads mod_access, so url.access-deny is imported.
    assert!(o.has(Outcome::Translated, "modules.conf"));
    assert_eq!(strs(&v["access"]["deny-suffixes"]), vec!["~", ".inc"]);
    assert!(o.has(Outcome::NotNeeded, "server.max-fds"));

    let o = l("upstream/conf.d/mime.conf");
    let m = o.default_vhost()["static-file"]["mime-types"]
        .as_table()
        .unwrap();
    assert!(m.contains_key("html"));
    assert!(o.has(Outcome::Approximated, ".tar.gz"));

    let o = l("upstream/conf.d/access_log.conf");
    assert!(o.has(Outcome::Dropped, "log_root is not defined"));

    let o = l("upstream/conf.d/deflate.conf");
    assert_eq!(
        strs(&o.default_vhost()["compress"]["encodings"]),
        vec!["br", "gzip"]
    );
    assert!(o.has(Outcome::Approximated, "deflate not produced"));

    let o = l("upstream/conf.d/dirlisting.conf");
    assert!(o.has(Outcome::Dropped, "dir-listing.exclude"));
}

#[test]
fn cherokee_sample() {
    let o = c("upstream/cherokee.conf.sample.pre");
    assert_eq!(o.listen(), vec!["0.0.0.0:80"]);
    assert_eq!(o.vhosts().len(), 1);
    let v = o.default_vhost();
    assert_eq!(v["document-root"].as_str(), Some("/var/www"));
    assert!(o.has(Outcome::Approximated, "%wwwroot% becomes /var/www"));
    let rules = o.rules(v);
    // Everything but /about and /cgi-bin (unsupported handlers) is served.
    let sf = rules
        .iter()
        .find(|r| r.contains_key("static-file"))
        .unwrap();
    assert_eq!(strs(&sf["static-file"]["index-files"]), vec!["index.html"]);
    let lst = rules
        .iter()
        .find(|r| r.contains_key("dir-listing"))
        .unwrap();
    let excluded = lst["match"].to_string();
    assert!(excluded.contains("cherokee_icons") && excluded.contains("cherokee_themes"));
    let about = rules.iter().find(|r| r.contains_key("compress")).unwrap();
    assert_eq!(strs(&about["compress"]["encodings"]), vec!["gzip"]);
    // The logger lives on every rule that serves (not undone by final).
    let logged = rules.iter().any(|r| r.contains_key("access-log")) || v.contains_key("access-log");
    assert!(logged);
    assert!(o.has(Outcome::NotNeeded, "buffsize"));
    assert!(o.has(Outcome::Dropped, "\"server_info\" handler"));

    let o = c("upstream/performance.conf.sample.pre");
    let v = o.default_vhost();
    assert!(v.contains_key("static-file"));
    assert!(!v.contains_key("dir-listing"));
}

#[test]
fn cherokee_ctk_and_sahana() {
    let o = c("upstream/ctk-tests-cherokee.conf.orig");
    assert_eq!(o.listen(), vec!["0.0.0.0:9091"]);
    let v = o.default_vhost();
    let exp = o
        .rules(v)
        .into_iter()
        .find(|r| r.get("expires").and_then(|e| e.get("url")).is_some())
        .unwrap();
    assert_eq!(
        exp["expires"]["url"]["/"].as_str(),
        Some("access plus 1 hours")
    );
    assert!(exp["match"]["path-regex"]
        .as_str()
        .unwrap()
        .contains("favicon"));
    // The scgi handler and the rule's document root (an alias): tests/backends.rs.
    assert!(o.has(Outcome::Translated, "scgi: an [[upstream]]"));
    assert!(o.has(Outcome::Translated, "\"/CTK/\" = \"/var/www/static/\""));

    let o = c("sahana-eden/cherokee.conf");
    // vserver 30 matches every host (domain *): the default; 20 and 10 are
    // unreachable.
    assert_eq!(o.vhosts().len(), 1);
    assert!(o.has(Outcome::Dropped, "vserver!20 (\"maintenance\")"));
    assert!(o.has(Outcome::Dropped, "vserver!10 (\"default\")"));
    let v = o.default_vhost();
    assert_eq!(v["document-root"].as_str(), Some("/var/www"));
    assert_eq!(
        v["error-pages"]["pages"]["503"].as_str(),
        Some("maintenance.html")
    );
    let rules = o.rules(v);
    let img = rules
        .iter()
        .find(|r| r["match"].to_string().contains("img") && r.contains_key("expires"))
        .unwrap();
    assert_eq!(
        img["expires"]["url"]["/"].as_str(),
        Some("access plus 1 weeks")
    );
    // Merged into expires' `max-age` line, as Cherokee writes one line
    // (issue 11 #4: a set field made expires leave out max-age and Expires).
    assert_eq!(
        img["headers"]["add"]["Cache-Control"].as_str(),
        Some("public")
    );
    let mods = strs(&v["modules"]);
    let pos = |m: &str| mods.iter().position(|x| *x == m);
    assert!(
        pos("expires").is_some() && pos("expires") < pos("headers"),
        "{mods:?}"
    );
    assert_eq!(strs(&img["compress"]["encodings"]), Vec::<&str>::new());
    let maint = rules
        .iter()
        .find(|r| r["match"].to_string().contains("maintenance") && r.contains_key("headers"))
        .unwrap();
    assert_eq!(
        maint["headers"]["set"]["Expires"].as_str(),
        Some("Tue, 01 Jan 1970 00:00:01 GMT")
    );
    assert_eq!(
        maint["headers"]["set"]["Cache-Control"].as_str(),
        Some("public, must-revalidate, proxy-revalidate")
    );
    // Rule 300 (/eden/static/) is final: the default rule's dir listing never
    // applies below it, and its priority puts it after rule 400 (img).
    let pos = |needle: &str| {
        rules
            .iter()
            .position(|r| r["match"].to_string().contains(needle))
            .unwrap()
    };
    assert!(pos("img") < pos("^/eden/static(/|$)"));
    assert_eq!(v["access-log"]["format"].as_str(), Some("combined"));
    assert_eq!(
        v["access-log"]["path"].as_str(),
        Some("/var/log/cherokee/cherokee.access")
    );
}

/// Whether a report entry is a drop of a directive of the HTTP proxy,
/// mod_extforward or the request size limit (issue 13: none in the files
/// that use them).
fn proxy_drop(e: &tessera_import::Entry) -> bool {
    e.outcome == Outcome::Dropped
        && (e.what.starts_with("proxy.")
            || e.what.starts_with("extforward.")
            || e.what == "server.max-request-size"
            || e.message.contains("mod_proxy")
            || e.message.contains("mod_extforward")
            || (e.what.contains("!handler") && e.message.contains("\"proxy\"")))
}

/// The text of a legacy file with its commented-out examples of these
/// directives switched on: lines whose text after `#` starts a proxy or
/// extforward statement, a conditional, or the continuation of a list.
fn uncommented(rel: &str) -> String {
    let text = std::fs::read_to_string(legacy().join(rel)).unwrap();
    text.lines()
        .map(|l| {
            let body = l.trim_start().strip_prefix('#').unwrap_or("");
            let t = body.trim_start();
            let code = !body.starts_with('#')
                && ["proxy.", "extforward.", "(", ")", "\"", "$HTTP", "}"]
                    .iter()
                    .any(|p| t.starts_with(p));
            if code {
                body.to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn proxy_extforward_and_request_size_files_import_without_drops() {
    // Every file that mentions them (most only load the module; the
    // examples are commented out).
    for o in [
        l("debian-1.4.69/conf-available/10-proxy.conf"),
        l("debian-1.4.69/conf-available/11-extforward.conf"),
        l("upstream/conf.d/proxy.conf"),
        l("upstream/modules.conf"),
        c("upstream/ctk-tests-cherokee.conf.orig"),
        c("sahana-eden/cherokee.conf"),
    ] {
        let drops: Vec<_> = o
            .imported
            .report
            .entries
            .iter()
            .filter(|e| proxy_drop(e))
            .collect();
        assert!(drops.is_empty(), "{drops:#?}");
    }
    // Cherokee's balancers there serve scgi and uwsgi handlers (issue 14):
    // their sources are the servers of those upstreams (tests/backends.rs).
    let o = c("sahana-eden/cherokee.conf");
    assert!(o.has(Outcome::Translated, "uwsgi: an [[upstream]]"));

    // Debian's examples, switched on.
    let o = import_lighttpd_text(
        "10-proxy.conf",
        &uncommented("lighttpd/debian-1.4.69/conf-available/10-proxy.conf"),
    );
    assert!(
        !o.imported.report.entries.iter().any(proxy_drop),
        "{}",
        o.imported.report
    );
    let ups = o.toml["upstream"].as_array().unwrap();
    assert_eq!(ups.len(), 2, "{}", o.imported.toml);
    assert_eq!(ups[0]["name"].as_str(), Some("default-php"));
    assert_eq!(strs(&ups[0]["servers"]), vec!["192.168.0.101:80"]);
    assert_eq!(ups[1]["name"].as_str(), Some("www.example.com-root"));
    assert_eq!(
        strs(&ups[1]["servers"]),
        vec![
            "10.0.0.10:80",
            "10.0.0.11:80",
            "10.0.0.12:80",
            "10.0.0.13:80"
        ]
    );
    // lighttpd's "hash" is by URL, Tessera's ip-hash by client: reported.
    assert_eq!(ups[1]["balance"].as_str(), Some("ip-hash"));
    assert!(o.has(Outcome::Approximated, "proxy.balance"));
    let php = o.rules(o.default_vhost())[0];
    assert_eq!(php["match"]["path-regex"].as_str(), Some("\\.php$"));
    assert_eq!(php["proxy"]["upstream"].as_str(), Some("default-php"));
    let www = o.vhost(1);
    assert_eq!(strs(&www["server-names"]), vec!["www.example.com"]);
    assert_eq!(
        www["proxy"]["upstream"].as_str(),
        Some("www.example.com-root")
    );
    assert_eq!(strs(&www["modules"])[0], "proxy");

    // lighttpd's own example: the named back end form.
    let o = import_lighttpd_text(
        "proxy.conf",
        &uncommented("lighttpd/upstream/conf.d/proxy.conf"),
    );
    assert!(!o.imported.report.entries.iter().any(proxy_drop));
    assert!(o.has(Outcome::NotNeeded, "proxy.debug"));
    let ups = o.toml["upstream"].as_array().unwrap();
    assert_eq!(ups[0]["name"].as_str(), Some("default-jsp"));
    assert_eq!(strs(&ups[0]["servers"]), vec!["192.168.0.101:80"]);

    // Debian's extforward example: the forwarder is trusted; the header it
    // names is one Tessera cannot read the address from (reported).
    let o = import_lighttpd_text(
        "11-extforward.conf",
        &uncommented("lighttpd/debian-1.4.69/conf-available/11-extforward.conf"),
    );
    assert_eq!(
        strs(&o.toml["server"]["trusted-proxies"]),
        vec!["10.0.0.232"]
    );
    assert!(o.has(Outcome::Dropped, "X-Cluster-Client-Ip"));
}

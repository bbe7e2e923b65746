//! Issue 14's mappings on the real legacy configurations: FastCGI (PHP),
//! SCGI, uwsgi and CGI back ends, alias, userdir and mass virtual hosting.
//! The assertions are on the emitted TOML keys (the modules are checked by
//! their own tests).
#![allow(missing_docs)]

mod util;

use tessera_import::Outcome;
use util::{c, import_cherokee_text, import_lighttpd_text, l, legacy, strs, upstream, Out};

/// Debian's lighttpd.conf with the given conf-available files enabled (in
/// place of this machine's /etc/lighttpd/conf-enabled).
fn debian_with(enabled: &[&str]) -> Out {
    let dir = legacy().join("lighttpd/debian-1.4.69");
    let main = std::fs::read_to_string(dir.join("lighttpd.conf")).unwrap();
    let includes: Vec<String> = enabled
        .iter()
        .map(|f| {
            format!(
                "include \"{}\"",
                dir.join("conf-available").join(f).display()
            )
        })
        .collect();
    let text = main.replace(
        "include \"/etc/lighttpd/conf-enabled/*.conf\"",
        &includes.join("\n"),
    );
    assert_ne!(text, main);
    import_lighttpd_text("lighttpd.conf", &text)
}

fn no_backend_drops(o: &Out) {
    let drops: Vec<_> = o
        .imported
        .report
        .entries
        .iter()
        .filter(|e| {
            e.outcome == Outcome::Dropped
                && [
                    "fastcgi",
                    "scgi",
                    "cgi.",
                    "alias",
                    "userdir",
                    "evhost",
                    "simple-vhost",
                ]
                .iter()
                .any(|k| e.what.contains(k) || e.message.contains(k))
        })
        .collect();
    assert!(drops.is_empty(), "{drops:#?}");
}

#[test]
fn debian_php_with_php_cgi_spawned() {
    let o = debian_with(&["10-fastcgi.conf", "15-fastcgi-php.conf"]);
    no_backend_drops(&o);
    let up = upstream(&o, "default-php");
    assert_eq!(strs(&up["servers"]), vec!["unix:/run/lighttpd/php.socket"]);
    let spawn = up["spawn"].as_table().unwrap();
    assert_eq!(spawn["bin-path"].as_str(), Some("/usr/bin/php-cgi"));
    assert_eq!(spawn["max-procs"].as_integer(), Some(1));
    assert_eq!(
        spawn["bin-environment"]["PHP_FCGI_CHILDREN"].as_str(),
        Some("4")
    );
    assert_eq!(
        strs(&spawn["bin-copy-environment"]),
        vec!["PATH", "SHELL", "USER"]
    );
    let v = o.default_vhost();
    let mods = strs(&v["modules"]);
    let pos = |m: &str| mods.iter().position(|x| *x == m).unwrap();
    assert!(pos("fastcgi") < pos("static-file"), "{mods:?}");
    let f = v["fastcgi"].as_table().unwrap();
    assert_eq!(f["upstream"].as_str(), Some("default-php"));
    assert_eq!(strs(&f["extensions"]), vec![".php"]);
    // index-file.names = ("index.php", "index.html"): lighttpd runs index.php.
    assert_eq!(strs(&f["index-files"]), vec!["index.php"]);
    assert_eq!(
        strs(&v["static-file"]["exclude-extensions"]),
        vec![".php", ".pl", ".fcgi"]
    );
    assert!(o.has(Outcome::NotNeeded, "broken-scriptfilename"));
}

#[test]
fn debian_php_fpm_and_fragments() {
    let o = debian_with(&["10-fastcgi.conf", "15-fastcgi-php-fpm.conf"]);
    no_backend_drops(&o);
    let up = upstream(&o, "default-php");
    assert_eq!(strs(&up["servers"]), vec!["unix:/run/php/php-fpm.sock"]);
    assert!(!up.contains_key("spawn"));

    // Alone, the fragment relies on Debian's "depends: fastcgi": reported.
    let o = l("debian-1.4.69/conf-available/15-fastcgi-php.conf");
    assert!(o.has(Outcome::Approximated, "lighty-enable-mod"));
    assert_eq!(
        o.default_vhost()["fastcgi"]["upstream"].as_str(),
        Some("default-php")
    );
    // 10-fastcgi.conf only loads the module: nothing to write.
    let o = l("debian-1.4.69/conf-available/10-fastcgi.conf");
    assert!(!o.default_vhost().contains_key("fastcgi"));
}

#[test]
fn debian_cgi_and_aliases() {
    let o = debian_with(&["10-cgi.conf", "90-javascript-alias.conf"]);
    no_backend_drops(&o);
    let v = o.default_vhost();
    assert_eq!(
        v["alias"]["paths"]["/javascript"].as_str(),
        Some("/usr/share/javascript")
    );
    // cgi only under /cgi-bin/, but listed before static-file with a table
    // that passes every request on (so a script is never sent as a file).
    let mods = strs(&v["modules"]);
    assert!(
        mods.iter().position(|m| *m == "cgi") < mods.iter().position(|m| *m == "static-file"),
        "{mods:?}"
    );
    assert!(v["cgi"]["assign"].as_table().unwrap().is_empty());
    let rule = o
        .rules(v)
        .into_iter()
        .find(|r| r.contains_key("cgi"))
        .unwrap();
    assert_eq!(rule["match"]["path-regex"].as_str(), Some("^/cgi-bin/"));
    assert_eq!(rule["cgi"]["assign"][""].as_str(), Some(""));
    // alias.url += inside the block copies the global list as it stands
    // there (before 90-javascript-alias.conf adds to it), as lighttpd does.
    let paths = rule["alias"]["paths"].as_table().unwrap();
    assert_eq!(paths["/cgi-bin/"].as_str(), Some("/usr/lib/cgi-bin/"));
    assert_eq!(paths.len(), 1);
    // lighttpd would run the directory's index files through CGI there.
    assert_eq!(
        strs(&rule["cgi"]["index-files"]),
        vec!["index.php", "index.html"]
    );
}

#[test]
fn mass_vhosts_and_userdir() {
    let o = l("debian-1.4.69/conf-available/10-simple-vhost.conf");
    no_backend_drops(&o);
    let m = o.default_vhost()["mass-vhost"].as_table().unwrap();
    assert_eq!(m["path-pattern"].as_str(), Some("/srv/%_/htdocs"));
    assert_eq!(
        m["default-root"].as_str(),
        Some("/srv/www.example.com/htdocs")
    );
    let o = l("debian-1.4.69/conf-available/10-evhost.conf");
    no_backend_drops(&o);
    assert_eq!(
        o.default_vhost()["mass-vhost"]["path-pattern"].as_str(),
        Some("/srv/%_/htdocs")
    );
    let o = l("debian-1.4.69/conf-available/10-userdir.conf");
    no_backend_drops(&o);
    let u = o.default_vhost()["userdir"].as_table().unwrap();
    assert_eq!(u["path"].as_str(), Some("public_html"));
    assert_eq!(strs(&u["exclude-user"]), vec!["root", "postmaster"]);
    // lighttpd's own examples need vhosts_dir from the main file.
    let o = l("upstream/conf.d/userdir.conf");
    assert!(o.default_vhost().contains_key("userdir"));
}

#[test]
fn pihole_php() {
    let dir = legacy().join("lighttpd/pihole");
    let main = std::fs::read_to_string(dir.join("lighttpd.conf.debian")).unwrap();
    let find = main
        .lines()
        .find(|l| l.starts_with("include_shell \"find /etc/lighttpd/conf-enabled"))
        .unwrap();
    let text = main.replace(
        find,
        &format!("include \"{}\"", dir.join("pihole-admin.conf").display()),
    );
    let o = import_lighttpd_text("lighttpd.conf", &text);
    no_backend_drops(&o);
    let up = upstream(&o, "default-php");
    assert_eq!(
        strs(&up["servers"]),
        vec!["unix:/run/lighttpd/pihole-php-fastcgi.socket"]
    );
    assert_eq!(up["spawn"]["bin-path"].as_str(), Some("/usr/bin/php-cgi"));
    let v = o.default_vhost();
    let admin = o
        .rules(v)
        .into_iter()
        .find(|r| r.contains_key("fastcgi"))
        .unwrap();
    assert_eq!(admin["match"]["path-regex"].as_str(), Some("^/admin/"));
    assert_eq!(admin["fastcgi"]["upstream"].as_str(), Some("default-php"));
    // index-file.names of the main file: /admin/ runs index.php.
    assert_eq!(strs(&admin["fastcgi"]["index-files"]), vec!["index.php"]);
    // The vhost's own fastcgi table passes every other request on.
    assert!(strs(&v["fastcgi"]["extensions"]).is_empty());
}

#[test]
fn gateways_in_lighttpd_syntax() {
    let o = import_lighttpd_text(
        "backends.conf",
        r#"
server.document-root = "/srv/www"
server.modules = ( "mod_fastcgi", "mod_scgi", "mod_cgi" )
index-file.names = ( "index.html", "index.php", "index.py" )
fastcgi.balance = "round-robin"
fastcgi.server = (
  ".php" => ( ( "host" => "127.0.0.1", "port" => 9000 ), ( "host" => "127.0.0.1", "port" => 9001 ) ),
  "/app/" => ( ( "socket" => "/run/app.sock", "check-local" => "disable", "x-sendfile" => "enable",
                 "x-sendfile-docroot" => ( "/srv/files" ) ) ),
  ".auth" => ( ( "host" => "127.0.0.1", "port" => 9100, "mode" => "authorizer" ) ),
)
scgi.server = ( "/py" => ( ( "host" => "127.0.0.1", "port" => 3031, "proto" => "uwsgi" ) ),
                ".scgi" => ( ( "socket" => "/run/scgi.sock" ) ) )
cgi.assign = ( ".pl" => "/usr/bin/perl", ".cgi" => "" )
$HTTP["host"] == "php.example" {
  fastcgi.server = ( "/" => ( ( "host" => "127.0.0.1", "port" => 9200, "fix-root-scriptname" => "enable" ) ) )
}
"#,
    );
    let v = o.default_vhost();
    // The .php entry: two servers balanced round-robin; index.php only.
    let f = v["fastcgi"].as_table().unwrap();
    assert_eq!(strs(&f["extensions"]), vec![".php"]);
    assert_eq!(strs(&f["index-files"]), vec!["index.php"]);
    let up = upstream(&o, f["upstream"].as_str().unwrap());
    assert_eq!(
        strs(&up["servers"]),
        vec!["127.0.0.1:9000", "127.0.0.1:9001"]
    );
    assert_eq!(up["balance"].as_str(), Some("round-robin"));
    // The /app/ prefix: a rule with script-name.
    let rules = o.rules(v);
    let app = rules
        .iter()
        .find(|r| {
            r.get("match")
                .and_then(|m| m.get("path-prefix"))
                .and_then(|p| p.as_str())
                == Some("/app/")
                && r.contains_key("fastcgi")
        })
        .unwrap();
    assert_eq!(app["fastcgi"]["script-name"].as_str(), Some("/app"));
    assert_eq!(app["fastcgi"]["x-sendfile"].as_bool(), Some(true));
    assert_eq!(
        strs(&app["fastcgi"]["x-sendfile-docroot"]),
        vec!["/srv/files"]
    );
    // The authorizer is reported and left out.
    assert!(o.has(Outcome::Dropped, "only the FastCGI responder role"));
    // scgi "proto" => "uwsgi": the uwsgi module.
    let py = rules.iter().find(|r| r.contains_key("uwsgi")).unwrap();
    assert_eq!(py["uwsgi"]["script-name"].as_str(), Some("/py"));
    assert_eq!(strs(&v["scgi"]["extensions"]), vec![".scgi"]);
    // cgi.assign, and the index files it would run.
    let cgi = v["cgi"].as_table().unwrap();
    assert_eq!(cgi["assign"][".pl"].as_str(), Some("/usr/bin/perl"));
    assert_eq!(cgi["assign"][".cgi"].as_str(), Some(""));
    // The host block: its own vhost, the application at the root.
    let php = o
        .vhosts()
        .iter()
        .map(|v| v.as_table().unwrap())
        .find(|v| {
            v.get("server-names")
                .is_some_and(|n| strs(n) == vec!["php.example"])
        })
        .unwrap();
    assert_eq!(php["fastcgi"]["script-name"].as_str(), Some(""));
    assert!(!o.has(
        Outcome::Approximated,
        "without it lighttpd sends the whole path"
    ));
}

#[test]
fn cherokee_samples() {
    // The sample: /cgi-bin is an alias for the CGI directory, every file run.
    let o = c("upstream/cherokee.conf.sample.pre");
    let v = o.default_vhost();
    let cgi = o
        .rules(v)
        .into_iter()
        .find(|r| r.contains_key("cgi"))
        .unwrap();
    assert_eq!(cgi["cgi"]["assign"][""].as_str(), Some(""));
    assert_eq!(
        cgi["alias"]["paths"]["/cgi-bin/"].as_str(),
        Some("/usr/lib/cgi-bin/")
    );
    // The CTK tests: an SCGI interpreter source spawned by Tessera.
    let o = c("upstream/ctk-tests-cherokee.conf.orig");
    let v = o.default_vhost();
    let r = o
        .rules(v)
        .into_iter()
        .find(|r| r.contains_key("scgi"))
        .unwrap();
    assert_eq!(r["scgi"]["script-name"].as_str(), Some(""));
    assert_eq!(r["scgi"]["x-sendfile"].as_bool(), Some(true));
    let up = upstream(&o, r["scgi"]["upstream"].as_str().unwrap());
    assert_eq!(strs(&up["servers"]), vec!["localhost:8000"]);
    assert_eq!(up["spawn"]["bin-path"].as_str(), Some("/usr/bin/true"));
    // Sahana Eden: web2py under uwsgi at /, its static files aliased.
    let o = c("sahana-eden/cherokee.conf");
    let v = o.default_vhost();
    let rules = o.rules(v);
    let u = rules.iter().find(|r| r.contains_key("uwsgi")).unwrap();
    assert_eq!(u["uwsgi"]["script-name"].as_str(), Some(""));
    let up = upstream(&o, u["uwsgi"]["upstream"].as_str().unwrap());
    assert_eq!(strs(&up["servers"]), vec!["127.0.0.1:59025"]);
    assert!(!up.contains_key("spawn"), "a host source is not started");
    assert!(rules.iter().any(|r| r
        .get("alias")
        .is_some_and(|a| a["paths"].get("/eden/static/").is_some())));
    assert!(!o.has(Outcome::Dropped, "handler"));
}

#[test]
fn cherokee_fcgi_php_and_evhost() {
    let o = import_cherokee_text(
        "cherokee.conf",
        "server!bind!1!port = 80
vserver!1!nick = default
vserver!1!document_root = /var/www
vserver!1!directory_index = index.php,index.html
vserver!1!evhost = evhost
vserver!1!evhost!tpl_document_root = /srv/${root_domain}/${subdomain1}
vserver!1!rule!1!match = default
vserver!1!rule!1!handler = common
vserver!1!rule!10!match = extensions
vserver!1!rule!10!match!extensions = php
vserver!1!rule!10!handler = fcgi
vserver!1!rule!10!handler!check_file = 1
vserver!1!rule!10!handler!balancer = round_robin
vserver!1!rule!10!handler!balancer!source!1 = 1
vserver!2!nick = md5.example
vserver!2!document_root = /var/www
vserver!2!evhost = evhost
vserver!2!evhost!tpl_document_root = /srv/${domain_md5}
vserver!2!rule!1!match = default
vserver!2!rule!1!handler = common
source!1!type = interpreter
source!1!host = /run/php-cgi.sock
source!1!interpreter = /usr/bin/php-cgi
source!1!env!PHP_FCGI_CHILDREN = 4
",
    );
    let v = o.default_vhost();
    assert_eq!(v["mass-vhost"]["path-pattern"].as_str(), Some("/srv/%0/%3"));
    let r = o
        .rules(v)
        .into_iter()
        .find(|r| r.contains_key("fastcgi"))
        .unwrap();
    assert_eq!(strs(&r["fastcgi"]["extensions"]), vec![".php"]);
    assert_eq!(r["fastcgi"]["check-local"].as_bool(), Some(true));
    let up = upstream(&o, r["fastcgi"]["upstream"].as_str().unwrap());
    assert_eq!(strs(&up["servers"]), vec!["unix:/run/php-cgi.sock"]);
    assert_eq!(up["spawn"]["bin-path"].as_str(), Some("/usr/bin/php-cgi"));
    assert_eq!(
        up["spawn"]["bin-environment"]["PHP_FCGI_CHILDREN"].as_str(),
        Some("4")
    );
    assert!(o.has(Outcome::Dropped, "${domain_md5}"));
}

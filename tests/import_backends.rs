//! Imported configurations with dynamic back ends run as they ran under
//! lighttpd (issue 14): Debian's lighttpd with PHP enabled
//! (`lighty-enable-mod fastcgi-php`) against Tessera on its import, both
//! spawning Debian's php-cgi themselves.

use std::path::Path;

use crate::import::{compare_edited, debian_conf, legacy_dir};
use crate::util::TempDir;

/// Debian's `conf-available/NAME`, from this machine or the legacy copy.
fn debian_available(name: &str) -> String {
    let installed = Path::new("/etc/lighttpd/conf-available").join(name);
    std::fs::read_to_string(&installed).unwrap_or_else(|_| {
        std::fs::read_to_string(
            legacy_dir()
                .join("lighttpd/debian-1.4.69/conf-available")
                .join(name),
        )
        .unwrap()
    })
}

#[test]
fn debian_php_configuration_behaves_like_lighttpd() {
    assert!(
        Path::new("/usr/bin/php-cgi").exists(),
        "php-cgi is not installed (apt-get install php-cgi)"
    );
    let dir = TempDir::new("debian-php");
    let enabled = dir.mkdir("conf-enabled");
    // lighttpd drops root (unprivileged()) before it spawns php-cgi
    let run = dir.mkdir("run");
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let socket = run.join("php.socket");
    dir.write(
        "conf-enabled/10-fastcgi.conf",
        debian_available("10-fastcgi.conf"),
    );
    dir.write(
        "conf-enabled/15-fastcgi-php.conf",
        debian_available("15-fastcgi-php.conf")
            .replace("/run/lighttpd/php.socket", &socket.display().to_string()),
    );
    // PATH_TRANSLATED only with a PATH_INFO (RFC 3875 §4.1.6): without one
    // Tessera leaves it unset, where Debian's "broken-scriptfilename" makes
    // PHP report the document root (the README's migration notes)
    let vars = "foreach (['SCRIPT_NAME','SCRIPT_FILENAME','PATH_INFO','PATH_TRANSLATED','QUERY_STRING','REQUEST_METHOD','REQUEST_URI','DOCUMENT_ROOT','GATEWAY_INTERFACE','SERVER_PROTOCOL','HTTP_HOST','REDIRECT_STATUS','PHP_SELF'] as $k) if ($k !== 'PATH_TRANSLATED' || isset($_SERVER['PATH_INFO'])) echo $k, '=', $_SERVER[$k] ?? '(unset)', \"\\n\";";
    dir.write(
        "html/index.php",
        format!("<?php echo \"index.php ran\\n\"; {vars}"),
    );
    dir.write("html/index.html", "<html>not this one</html>\n");
    dir.write(
        "html/info.php",
        format!("<?php header('Content-Type: text/plain'); {vars}"),
    );
    dir.write("html/sub/index.php", format!("<?php {vars}"));
    dir.write(
        "html/teapot.php",
        "<?php header('Status: 418 I am a teapot'); echo 'tea';",
    );
    dir.write(
        "html/go.php",
        "<?php header('Location: http://localhost/there.html'); echo 'moved';",
    );
    dir.write(
        "html/json.php",
        "<?php header('Content-Type: application/json'); header('X-App: demo'); echo json_encode(['a' => 1, 'q' => $_GET]);",
    );
    dir.write(
        "html/stderr.php",
        "<?php error_log('to the error log'); echo 'ok';",
    );
    dir.write("html/plain.txt", "plain\n");
    dir.write("html/lib.inc", "<?php secret");
    let conf = debian_conf(&dir, Some(&enabled));
    let requests: Vec<(&str, &str)> = [
        "/",
        "/index.php",
        "/info.php",
        "/info.php?a=1&b=two",
        "/info.php/extra/path",
        "/sub/",
        "/teapot.php",
        "/go.php",
        "/json.php?x=y",
        "/stderr.php",
        "/missing.php",
        "/plain.txt",
        "/lib.inc",
    ]
    .iter()
    .map(|p| ("localhost", *p))
    .collect();
    // Tessera spawns its own php-cgi beside lighttpd's, on another socket
    compare_edited(&dir, &conf, &requests, |t| {
        t.replace("php.socket", "php-tessera.socket")
    });
}

#[test]
fn pihole_admin_php_behaves_like_lighttpd() {
    assert!(
        Path::new("/usr/bin/php-cgi").exists(),
        "php-cgi is not installed (apt-get install php-cgi)"
    );
    let dir = TempDir::new("pihole-php");
    let enabled = dir.mkdir("conf-enabled");
    let run = dir.mkdir("run");
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let root = dir.path().display().to_string();
    let admin = std::fs::read_to_string(legacy_dir().join("lighttpd/pihole/pihole-admin.conf"))
        .unwrap()
        .replace("/run/lighttpd/", &format!("{}/", run.display()))
        .replace("/var/www/html", &format!("{root}/html"))
        .replace(
            "/var/log/lighttpd/access-pihole.log",
            &format!("{}/access-pihole.log", run.display()),
        )
        .lines()
        .filter(|l| !l.starts_with("server.errorlog"))
        .collect::<Vec<_>>()
        .join("\n");
    dir.write(
        "conf-enabled/10-fastcgi.conf",
        debian_available("10-fastcgi.conf"),
    );
    dir.write(
        "conf-enabled/10-accesslog.conf",
        debian_available("10-accesslog.conf").replace(
            "/var/log/lighttpd/access.log",
            &format!("{}/access.log", run.display()),
        ),
    );
    dir.write(
        "conf-enabled/05-setenv.conf",
        debian_available("05-setenv.conf"),
    );
    dir.write("conf-enabled/15-pihole-admin.conf", admin);
    dir.write(
        "html/admin/index.php",
        "<?php echo 'dashboard ', $_SERVER['SCRIPT_NAME'], ' ', $_GET['tab'] ?? '-';",
    );
    dir.write("html/admin/settings.php", "<?php echo 'settings';");
    dir.write("html/admin/style.css", "body {}\n");
    dir.write("html/admin/.git/config", "[core]\n");
    dir.write("html/index.html", "<html>pi</html>\n");
    let conf = debian_conf(&dir, Some(&enabled));
    let requests: Vec<(&str, &str)> = [
        "/",
        "/admin/",
        "/admin/index.php?tab=dns",
        "/admin/settings.php",
        "/admin/style.css",
        "/admin/.git/config",
        "/admin/missing.php",
    ]
    .iter()
    .map(|p| ("pi.hole", *p))
    .collect();
    compare_edited(&dir, &conf, &requests, |t| {
        t.replace("pihole-php-fastcgi.socket", "pihole-tessera.socket")
            .replace("access-pihole.log", "access-pihole-tessera.log")
            .replace("/access.log", "/access-tessera.log")
    });
}

/// Imports a legacy Cherokee configuration, moves its paths under `dir`
/// (as the legacy check does) with `edit` applied to the TOML first, and
/// starts Tessera on it.
fn start_imported_cherokee(
    dir: &TempDir,
    legacy: &str,
    edit: impl Fn(String) -> String,
    setup: impl FnOnce(&Path),
) -> crate::util::Server {
    let out = dir.path().join("imported.toml");
    let (code, report) = crate::import::import("cherokee", &legacy_dir().join(legacy), &out);
    assert!(code == 0 || code == 1, "import failed: {report}");
    let text = edit(std::fs::read_to_string(&out).unwrap());
    let relocated = crate::import::relocate(&text, dir.path());
    setup(dir.path());
    crate::util::Server::start(&relocated, |_| {})
}

#[test]
fn cherokee_sample_cgi_bin_runs_its_scripts() {
    // the sample's rule 4: /cgi-bin is %cgiroot% (Debian's /usr/lib/cgi-bin)
    // with the cgi handler: every file there runs itself
    let dir = TempDir::new("cherokee-cgi");
    let s = start_imported_cherokee(
        &dir,
        "cherokee/upstream/cherokee.conf.sample.pre",
        |t| t,
        |root| {
            let script = root.join("usr/lib/cgi-bin/hello");
            std::fs::create_dir_all(script.parent().unwrap()).unwrap();
            std::fs::write(
                &script,
                "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nhello from %s%s' \"$SCRIPT_NAME\" \"$PATH_INFO\"\n",
            )
            .unwrap();
            std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            std::fs::write(root.join("var/www/index.html"), "home\n").unwrap();
        },
    );
    let r = s.get("/cgi-bin/hello/x");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "hello from /cgi-bin/hello/x"),
        "{}",
        s.stderr()
    );
    assert_eq!(s.get("/").text(), "home\n");
}

#[test]
fn sahana_eden_uwsgi_application_answers_through_the_import() {
    // Sahana Eden's vserver sends everything but its static files to a
    // uWSGI source on 127.0.0.1:59025; here a real uWSGI on a free port
    let app = crate::uwsgi::Uwsgi::start("uwsgi", false);
    let dir = TempDir::new("cherokee-uwsgi");
    let s = start_imported_cherokee(
        &dir,
        "cherokee/sahana-eden/cherokee.conf",
        |t| t.replace("127.0.0.1:59025", &app.server),
        |root| {
            std::fs::create_dir_all(root.join("home/web2py/applications/eden/static")).unwrap();
            std::fs::write(
                root.join("home/web2py/applications/eden/static/app.css"),
                "body {}\n",
            )
            .unwrap();
        },
    );
    let r = s.req("GET", "/env/eden?x=1", &["Host: eden.example"]);
    assert_eq!(r.status, 200, "{} {}", r.text(), s.stderr());
    let body = r.text();
    assert!(body.contains("PATH_INFO=/env/eden"), "{body}");
    assert!(body.contains("QUERY_STRING=x=1"), "{body}");
    // its static files stay on disk (the alias of rule 300)
    assert_eq!(s.get("/eden/static/app.css").text(), "body {}\n");
}

#[test]
fn debian_cgi_configuration_behaves_like_lighttpd() {
    // `lighty-enable-mod cgi`: every file of /cgi-bin/ (aliased to
    // /usr/lib/cgi-bin/, here a directory of the test) runs itself
    let dir = TempDir::new("debian-cgi");
    let enabled = dir.mkdir("conf-enabled");
    let bin = dir.mkdir("cgi-bin");
    dir.write(
        "conf-enabled/10-cgi.conf",
        debian_available("10-cgi.conf")
            .replace("/usr/lib/cgi-bin/", &format!("{}/", bin.display())),
    );
    let exec = |rel: &str, text: &str| {
        let p = dir.write(rel, text);
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    exec(
        "cgi-bin/hello",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nhello %s|%s|%s|%s' \"$SCRIPT_NAME\" \"$PATH_INFO\" \"$QUERY_STRING\" \"$REQUEST_METHOD\"\n",
    );
    exec(
        "cgi-bin/teapot",
        "#!/bin/sh\nprintf 'Status: 418 Teapot\\nContent-Type: text/plain\\nX-Script: yes\\n\\ntea'\n",
    );
    exec(
        "cgi-bin/away",
        "#!/bin/sh\nprintf 'Location: http://localhost/elsewhere\\n\\n'\n",
    );
    dir.write("html/index.html", "<html>home</html>\n");
    let conf = debian_conf(&dir, Some(&enabled));
    let requests: Vec<(&str, &str)> = [
        "/",
        "/cgi-bin/hello",
        "/cgi-bin/hello/more/path?q=1",
        "/cgi-bin/teapot",
        "/cgi-bin/away",
        "/cgi-bin/missing",
    ]
    .iter()
    .map(|p| ("localhost", *p))
    .collect();
    compare_edited(&dir, &conf, &requests, |t| t);
}

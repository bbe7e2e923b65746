//! `userdir` over real HTTP: `/~user/` from `basepath/user/public_html`
//! (and `letterhomes`), exclude and include lists, the 301 for `/~user`,
//! hostile names, static-file's rules inside the user's directory, and the
//! password database when there is no `basepath`.

use crate::util::Server;

const MODULES: &str = "\"userdir\", \"static-file\", \"dir-listing\"";

fn server() -> Server {
    let extra = r#"
[vhost.userdir]
basepath = "homes"
exclude-user = ["root"]
"#;
    Server::site(MODULES, extra, |d| {
        d.write("homes/alice/public_html/index.html", "ALICE");
        d.write("homes/alice/public_html/a b.txt", "SPACE");
        d.write("homes/alice/public_html/.secret", "DOT");
        d.write("homes/alice/notes.txt", "PRIVATE");
        d.write("homes/root/public_html/x.txt", "ROOT");
        d.write("homes/bob/public_html/sub/f.txt", "BOB");
        d.write("homes/index.html", "HOMES");
        d.write("www/index.html", "WWW");
        std::os::unix::fs::symlink(
            "../notes.txt",
            d.path().join("homes/alice/public_html/notes"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            "../../bob/public_html/sub/f.txt",
            d.path().join("homes/alice/public_html/bobs"),
        )
        .unwrap();
    })
}

#[test]
fn user_directories_are_served() {
    let s = server();
    assert_eq!(s.get("/~alice/").text(), "ALICE");
    assert_eq!(s.get("/~alice/index.html").text(), "ALICE");
    assert_eq!(s.get("/~alice/a%20b.txt").text(), "SPACE");
    assert_eq!(s.get("/~bob/sub/f.txt").text(), "BOB");
    // a directory without index file: dir-listing, with the URL path
    let body = s.get("/~bob/sub/").text();
    assert!(
        body.contains("f.txt") && body.contains("/~bob/sub/"),
        "{body}"
    );
    // the vhost's root for everything else
    assert_eq!(s.get("/").text(), "WWW");
}

#[test]
fn user_without_slash_gets_301() {
    let s = server();
    let r = s.get("/~alice");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("http://site.test/~alice/"));
    let r = s.get("/~alice?x=1");
    assert_eq!(r.header("location"), Some("http://site.test/~alice/?x=1"));
    // and inside it, static-file's own slash redirect keeps the prefix
    let r = s.get("/~bob/sub");
    assert_eq!(r.header("location"), Some("http://site.test/~bob/sub/"));
}

#[test]
fn excluded_unknown_and_invalid_users_pass_on() {
    let s = server();
    // root is excluded: its public_html is never served
    for p in ["/~root/x.txt", "/~root/", "/~root"] {
        let r = s.get(p);
        assert_eq!(r.status, 404, "{p}");
        assert_ne!(r.text(), "ROOT");
    }
    assert_eq!(s.get("/~carol/").status, 404, "no such directory");
    // names that would climb or hide: the vhost's root, where nothing is
    for p in [
        "/~../",
        "/~..",
        "/~%2e%2e/",
        "/~../index.html",
        "/~./index.html",
        "/~.alice/",
        "/~-x/",
        "/~/",
    ] {
        let r = s.get(p);
        assert!(r.status == 404 || r.status == 400, "{p}: {}", r.status);
        assert_ne!(r.text(), "HOMES", "{p}");
    }
}

#[test]
fn static_file_rules_apply_inside_the_user_directory() {
    let s = server();
    assert_eq!(s.get("/~alice/.secret").status, 404, "hidden file");
    // a link out of public_html, even to the user's own home or another
    // user's public_html, is refused under inside-root
    assert_eq!(s.get("/~alice/notes").status, 403);
    assert_eq!(s.get("/~alice/bobs").status, 403);
    // normalized before userdir applies
    assert_eq!(s.get("/~alice/../alice/notes.txt").status, 404);
    assert_eq!(s.get("/~alice/%2e%2e/notes.txt").status, 404);
    assert_eq!(s.get("/~alice/../../etc/passwd").status, 400);
}

#[test]
fn include_list_and_letterhomes() {
    let extra = r#"
[vhost.userdir]
basepath = "homes"
letterhomes = true
include-user = ["alice"]
path = "web"
"#;
    let s = Server::site("\"userdir\", \"static-file\"", extra, |d| {
        d.write("homes/a/alice/web/f.txt", "ALICE");
        d.write("homes/b/bob/web/f.txt", "BOB");
    });
    assert_eq!(s.get("/~alice/f.txt").text(), "ALICE");
    assert_eq!(s.get("/~bob/f.txt").status, 404, "not included");
    assert_eq!(
        s.get("/~bob").status,
        404,
        "not included: no redirect either"
    );
}

/// A user from the password database whose home directory holds a small
/// regular file that is not hidden: (user, file name, content).
fn passwd_user_with_a_file() -> Option<(String, String, Vec<u8>)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    for line in passwd.lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 7 || f[0].starts_with(['.', '-']) || f[0].is_empty() || f[5] == "/" {
            continue;
        }
        let Ok(dir) = std::fs::read_dir(f[5]) else {
            continue;
        };
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(m) = std::fs::metadata(e.path()) else {
                continue;
            };
            if name.starts_with('.') || !m.is_file() || m.len() > 1 << 20 {
                continue;
            }
            if !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            {
                continue;
            }
            if let Ok(content) = std::fs::read(e.path()) {
                return Some((f[0].to_owned(), name, content));
            }
        }
    }
    None
}

#[test]
fn password_database_gives_the_home() {
    // Debian's system users have homes such as /bin (user `sync`, with
    // /bin/sync) or /usr/sbin; serve one with `path = ""` (the home itself),
    // following links as the home may be one (/bin -> usr/bin)
    let Some((user, file, content)) = passwd_user_with_a_file() else {
        eprintln!("no user with a readable home in /etc/passwd: skipped");
        return;
    };
    let extra = format!(
        "[vhost.userdir]\npath = \"\"\ninclude-user = [\"{user}\"]\n\
         [vhost.static-file]\nfollow-symlinks = \"always\"\n"
    );
    let s = Server::site("\"userdir\", \"static-file\"", &extra, |_| {});
    let r = s.get(&format!("/~{user}/{file}"));
    assert_eq!(r.status, 200, "/~{user}/{file}");
    assert!(r.body == content, "/~{user}/{file}: not the home's file");
    assert_eq!(s.get("/~no-such-user-tessera/").status, 404);
}

#[test]
fn fastcgi_runs_scripts_from_the_user_directory() {
    // lighttpd's classic: PHP in ~/public_html. SCRIPT_NAME keeps the
    // `/~user` prefix, SCRIPT_FILENAME and DOCUMENT_ROOT are in the home.
    let Some(php) = crate::fastcgi::Php::start() else {
        panic!("php-cgi is not installed (apt-get install php-cgi)");
    };
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n\
         [[upstream]]\nname = \"php\"\nservers = [\"127.0.0.1:{}\"]\n\n\
         [[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\n\
         modules = [\"userdir\", \"fastcgi\", \"static-file\"]\n\
         [vhost.userdir]\nbasepath = \"homes\"\n\
         [vhost.fastcgi]\nupstream = \"php\"\n",
        php.port
    );
    let s = Server::start(&config, |d| {
        d.write(
            "homes/alice/public_html/info.php",
            "<?php header('Content-Type: text/plain'); foreach (['SCRIPT_NAME','SCRIPT_FILENAME','DOCUMENT_ROOT','PATH_INFO','PATH_TRANSLATED'] as $k) echo $k, '=', $_SERVER[$k] ?? '', \"\\n\";",
        );
        d.write(
            "homes/alice/public_html/index.php",
            "<?php echo 'alice index';",
        );
        // where check-local would look with the vhost's root
        d.write("www/~alice/missing.php", "<?php echo 'WRONG ROOT';");
    });
    let home = std::fs::canonicalize(s.dir.path().join("homes/alice/public_html")).unwrap();
    let home = home.display();
    let r = s.get("/~alice/info.php/more");
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    let var = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {text}"))
            .to_owned()
    };
    assert_eq!(var("SCRIPT_NAME"), "/~alice/info.php");
    assert_eq!(var("SCRIPT_FILENAME"), format!("{home}/info.php"));
    assert_eq!(var("DOCUMENT_ROOT"), home.to_string());
    assert_eq!(var("PATH_INFO"), "/more");
    assert_eq!(var("PATH_TRANSLATED"), format!("{home}/more"));
    // the directory's index.php is looked up in the user's directory
    assert_eq!(s.get("/~alice/").text(), "alice index");
    // check-local looks there too
    assert_eq!(s.get("/~alice/missing.php").status, 404);
}

#[test]
fn system_accounts_and_the_root_directory_are_never_served() {
    // `path = ""` serves homes themselves: a system account's home (root's
    // /root, a daemon's /usr/sbin) or a home that is / would expose the
    // machine (helper attack: /~systemd-network/etc/shadow)
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let slash_home = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 7 && f[5] == "/" && !f[0].is_empty())
        .map(|f| f[0].to_owned());
    let include = slash_home.as_ref().map_or(String::new(), |u| {
        format!("include-user = [\"root\", \"{u}\"]\n")
    });
    // without include-user, root (uid 0) has no user directory
    let s = Server::site(
        "\"userdir\", \"static-file\"",
        "[vhost.userdir]\npath = \"\"\n",
        |_| {},
    );
    assert_eq!(s.get("/~root/").status, 404);
    drop(s);
    if let Some(u) = slash_home {
        // even named by include-user, a home that is / is refused
        let s = Server::site(
            "\"userdir\", \"static-file\"",
            &format!("[vhost.userdir]\npath = \"\"\n{include}"),
            |_| {},
        );
        let r = s.get(&format!("/~{u}/etc/passwd"));
        assert_eq!(r.status, 404, "{}", r.text());
        assert!(!r.text().contains("root:x:0:0"));
        assert!(s.stderr().contains("userdir: refused"), "{}", s.stderr());
    }
}

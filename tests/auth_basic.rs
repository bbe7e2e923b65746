//! `auth-basic` over real HTTP: the 401 challenge, every supported hash, hostile
//! Authorization headers (always 401, never 400/500), `require`, `%u` in the
//! access log, reloading the user file, and refused configurations.

use std::time::{Duration, Instant};

use crate::util::{site_config, Server, TempDir};

const MODS: &str = "\"access-log\", \"auth-basic\", \"static-file\"";
const CHALLENGE: &str = "Basic realm=\"Staff \\\"only\\\"\", charset=\"UTF-8\"";

// openssl passwd -apr1 / -5 / -6 -salt saltsalt secret
const APR1: &str = "$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0";
const SHA256: &str = "$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA";
const SHA512: &str = "$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq.H91p5hVO1";

fn b64(raw: &[u8]) -> String {
    // RFC 4648 base64, written out so the tests do not depend on the module's crate.
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in raw.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn basic(user: &str, pw: &str) -> String {
    format!(
        "Authorization: Basic {}",
        b64(format!("{user}:{pw}").as_bytes())
    )
}

fn users() -> String {
    let bc = bcrypt::hash("hunter2", 4).unwrap();
    format!("# users\nalice:{APR1}\nbob:{bc}\ncarol:{SHA256}\ndave:{SHA512}\n")
}

fn server(extra: &str) -> Server {
    let users = users();
    Server::site(
        MODS,
        &format!(
            "[vhost.auth-basic]\nrealm = 'Staff \"only\"'\nuser-file = \"htpasswd\"\n{extra}\n\
             [vhost.access-log]\npath = \"logs/access.log\"\nformat = \"%u %>s %U\"\n"
        ),
        move |d| {
            d.write("htpasswd", &users);
            d.write("www/index.html", "secret page");
        },
    )
}

#[track_caller]
fn assert_401(s: &Server, headers: &[&str]) {
    let r = s.req("GET", "/", headers);
    assert_eq!(r.status, 401, "{headers:?}");
    assert_eq!(r.header_all("www-authenticate"), [CHALLENGE], "{headers:?}");
    assert!(!r.text().contains("secret page"));
}

#[test]
fn challenge_and_every_hash() {
    let s = server("");
    assert_401(&s, &[]);
    let r = s.req("HEAD", "/", &[]);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some(CHALLENGE));
    for (u, pw) in [
        ("alice", "secret"),
        ("bob", "hunter2"),
        ("carol", "secret"),
        ("dave", "secret"),
    ] {
        let r = s.req("GET", "/", &[&basic(u, pw)]);
        assert_eq!(r.status, 200, "{u}");
        assert_eq!(r.text(), "secret page");
        // again: bcrypt's result is cached, the answer is the same
        assert_eq!(s.req("GET", "/", &[&basic(u, pw)]).status, 200, "{u}");
        assert_401(&s, &[&basic(u, "wrong")]);
        assert_401(&s, &[&basic(u, &format!("{pw} "))]);
    }
    assert_401(&s, &[&basic("mallory", "secret")]);
    assert_401(&s, &[&basic("Alice", "secret")]);
    assert_401(&s, &[&basic("", "")]);
}

#[test]
fn hostile_authorization_headers() {
    let s = server("");
    let huge = format!("Authorization: Basic {}", "QUFB".repeat(3000));
    let not_utf8 = format!("Authorization: Basic {}", b64(b"\xff\xfe:secret"));
    let ctl = format!("Authorization: Basic {}", b64(b"ali\x01ce:secret"));
    let no_colon = format!("Authorization: Basic {}", b64(b"alicesecret"));
    let good = basic("alice", "secret");
    for h in [
        "Authorization: Bearer abc",
        "Authorization: Basic",
        "Authorization: Basic ",
        "Authorization: Basic !!!!",
        "Authorization: Basic YWxpY2U6c2VjcmV0 YWxpY2U6c2VjcmV0",
        "Authorization: Digest username=\"alice\"",
        "Authorization: Basic YWxpY2U6c2VjcmV0=====",
        huge.as_str(),
        not_utf8.as_str(),
        ctl.as_str(),
        no_colon.as_str(),
    ] {
        assert_401(&s, &[h]);
    }
    // two Authorization lines, even if both are right
    assert_401(&s, &[&good, &good]);
    // raw bytes that are not ASCII in the field value
    let raw = s.raw(
        b"GET / HTTP/1.1\r\nHost: site.test\r\nAuthorization: Basic \xc3\xa9\xff\r\nConnection: close\r\n\r\n",
    );
    let r = crate::util::Response::parse(&raw, false);
    assert_eq!(r.status, 401);
    // the server is still fine
    assert_eq!(s.req("GET", "/", &[&good]).status, 200);
    // the scheme is case-insensitive, padding optional
    assert_eq!(
        s.req("GET", "/", &["Authorization: bAsIc YWxpY2U6c2VjcmV0"])
            .status,
        200
    );
}

#[test]
fn require_list() {
    let s = server("require = [\"bob\", \"dave\"]");
    assert_401(&s, &[&basic("alice", "secret")]);
    assert_eq!(s.req("GET", "/", &[&basic("bob", "hunter2")]).status, 200);
    assert_eq!(s.req("GET", "/", &[&basic("dave", "secret")]).status, 200);
}

#[test]
fn user_in_access_log() {
    let s = server("");
    assert_eq!(s.req("GET", "/", &[&basic("alice", "secret")]).status, 200);
    assert_eq!(s.req("GET", "/", &[&basic("alice", "nope")]).status, 401);
    assert_eq!(
        s.req("GET", "/index.html", &[&basic("bob", "hunter2")])
            .status,
        200
    );
    let path = s.dir.path().join("logs/access.log");
    let dir = s.dir.path().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let log = std::fs::read_to_string(path).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines, ["alice 200 /", "- 401 /", "bob 200 /index.html"]);
}

#[test]
fn user_file_reloads_and_survives_a_broken_edit() {
    let s = server("");
    let f = s.dir.path().join("htpasswd");
    assert_eq!(s.req("GET", "/", &[&basic("alice", "secret")]).status, 200);
    // replace alice's password: the change shows within about a second
    std::fs::write(&f, format!("alice:{SHA256}\nerin:{APR1}\n")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if s.req("GET", "/", &[&basic("erin", "secret")]).status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "user file not reloaded");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.req("GET", "/", &[&basic("alice", "secret")]).status, 200);
    assert_eq!(s.req("GET", "/", &[&basic("bob", "hunter2")]).status, 401);
    // a file that does not parse keeps the users loaded before
    std::fs::write(&f, "erin:plain-text-password\nfrank:\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert_eq!(
            s.req("GET", "/", &[&basic("erin", "secret")]).status,
            200,
            "old table kept"
        );
        if s.stderr().contains("not reloaded") {
            break;
        }
        assert!(Instant::now() < deadline, "no warning: {}", s.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.req("GET", "/", &[&basic("erin", "secret")]).status, 200);
}

#[test]
fn expires_does_not_cache_the_challenge() {
    let users = users();
    let s = Server::site(
        "\"auth-basic\", \"expires\", \"static-file\"",
        "[vhost.auth-basic]\nuser-file = \"htpasswd\"\n\
         [vhost.expires]\nmime-types = { \"text/html\" = \"access plus 1 days\" }\n",
        move |d| {
            d.write("htpasswd", &users);
            d.write("www/index.html", "secret page");
        },
    );
    let r = s.get("/");
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"Restricted\", charset=\"UTF-8\"")
    );
    assert!(r
        .header_all("cache-control")
        .iter()
        .all(|v| !v.contains("max-age=86400")));
    assert_eq!(r.header("expires"), None);
    let r = s.req("GET", "/", &[&basic("alice", "secret")]);
    assert_eq!(r.status, 200);
    let cc = r.header("cache-control").unwrap();
    assert!(
        cc.contains("max-age=86400") && !cc.contains("public"),
        "{cc}"
    );
}

fn config_error(table: &str, files: &[(&str, &str)]) -> Option<String> {
    let d = TempDir::new("auth-conf");
    d.mkdir("www");
    for (n, c) in files {
        d.write(n, c);
    }
    let f = d.write(
        "server.toml",
        site_config(MODS, &format!("[vhost.auth-basic]\n{table}\n")),
    );
    let out = crate::util::check_config(&f);
    if out.status.success() {
        return None;
    }
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    Some(err)
}

#[test]
fn bad_configurations_are_refused() {
    let plain = [("htpasswd", "alice:secret\n")];
    let e = config_error("user-file = \"htpasswd\"", &plain).unwrap();
    assert!(
        e.contains("user-file") && e.contains("line 1") && e.contains("plain-text"),
        "{e}"
    );
    assert_eq!(
        config_error("user-file = \"htpasswd\"\nallow-plain = true", &plain),
        None
    );
    let sha1 = [("htpasswd", "alice:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n")];
    let e = config_error("user-file = \"htpasswd\"\nallow-plain = true", &sha1).unwrap();
    assert!(e.contains("{SHA}"), "{e}");
    let e = config_error("realm = \"x\"", &[]).unwrap();
    assert!(e.contains("user-file"), "{e}");
    let e = config_error("user-file = \"missing\"", &[]).unwrap();
    assert!(e.contains("user-file") && e.contains("missing"), "{e}");
    let good = [("htpasswd", "alice:$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0\n")];
    let e = config_error("user-file = \"htpasswd\"\nrequire = \"anyone\"", &good).unwrap();
    assert!(e.contains("require"), "{e}");
    let e = config_error("user-file = \"htpasswd\"\nrealms = \"x\"", &good).unwrap();
    assert!(e.contains("realms"), "{e}");
}

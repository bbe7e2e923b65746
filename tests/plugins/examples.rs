//! The example plugins in `plugins/`: request-id, maintenance, secure-download.

use std::process::Command;

use crate::util::Server;

use super::*;

#[test]
fn example_request_id() {
    let s = Server::start(
        &config(
            &[("request-id", lib("tessera-plugin-request-id"))],
            "\"request-id\", \"access-log\", \"static-file\"",
            "[vhost.access-log]\npath = \"a.log\"\nformat = \"%{request-id}n %{X-Request-Id}i %U\"\n",
        ),
        |d| {
            d.write("www/ten.txt", "0123456789");
        },
    );
    let r = s.get("/ten.txt");
    let id = r.header("x-request-id").unwrap().to_string();
    assert_eq!(id.len(), 32);
    assert_ne!(s.get("/ten.txt").header("x-request-id"), Some(id.as_str()));
    let r = s.req("GET", "/ten.txt", &["X-Request-Id: abc-123"]);
    assert_eq!(r.header("x-request-id"), Some("abc-123"));
    let r = s.req("GET", "/ten.txt", &["X-Request-Id: bad id\""]);
    assert_ne!(r.header("x-request-id"), Some("bad id\""));
    let dir = s.dir.path().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let log = std::fs::read_to_string(dir.join("a.log")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        log.lines().any(|l| l == format!("{id} - /ten.txt")),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l == "abc-123 abc-123 /ten.txt"),
        "{log}"
    );
}

#[test]
fn example_maintenance() {
    let mk = |allow: &str| {
        Server::start(
            &config(
                &[("maintenance", lib("tessera-plugin-maintenance"))],
                "\"maintenance\", \"static-file\"",
                &format!("[vhost.maintenance]\nretry-after = 120\npage = \"<h1>Soon</h1>\"\nallow = [{allow}]\n"),
            ),
            |d| {
                d.write("www/ten.txt", "0123456789");
            },
        )
    };
    let s = mk("\"10.0.0.0/8\"");
    let r = s.get("/ten.txt");
    assert_eq!((r.status, r.text().as_str()), (503, "<h1>Soon</h1>"));
    assert_eq!(r.header("retry-after"), Some("120"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let s = mk("\"127.0.0.0/8\", \"::1\"");
    assert_eq!(s.get("/ten.txt").status, 200);
}

#[test]
fn example_secure_download() {
    let s = Server::start(
        &config(
            &[("secure-download", lib("tessera-plugin-secure-download"))],
            "\"secure-download\", \"static-file\"",
            "[vhost.secure-download]\nsecret = \"verysecret\"\nalgorithm = \"md5\"\ntimeout = 60\n",
        ),
        |d| {
            d.write("www/protected/report.pdf", "PDFDATA");
            d.write("www/public.txt", "public");
        },
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let link = |ts: u64, rel: &str, secret: &str| {
        let ts_hex = format!("{ts:x}");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s' '{secret}{rel}{ts_hex}' | md5sum"))
            .output()
            .unwrap();
        let mac = String::from_utf8(out.stdout).unwrap()[..32].to_string();
        format!("/dl/{mac}/{ts_hex}{rel}")
    };
    let r = s.get(&link(now, "/report.pdf", "verysecret"));
    assert_eq!((r.status, r.text().as_str()), (200, "PDFDATA"));
    assert_eq!(s.get(&link(now, "/report.pdf", "wrongsecret")).status, 403);
    assert_eq!(
        s.get(&link(now - 3600, "/report.pdf", "verysecret")).status,
        410
    );
    assert_eq!(s.get("/dl/garbage").status, 403);
    // the protected files are reachable only through signed links
    assert_eq!(s.get("/protected/report.pdf").status, 403);
    assert_eq!(s.get("/public.txt").text(), "public");
    // a signed link cannot climb out of the protected directory
    let r = s.get(&link(now, "/../public.txt", "verysecret"));
    assert_ne!(r.text(), "public");
}

//! Imported settings take effect: Cherokee's expiration, the request size limit, trusted proxies.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::util::{Response, Server, TempDir};

use super::*;

/// Issue 11 #4: a Cherokee rule with `expiration = time` keeps its lifetime
/// beside caching options (one line `max-age=N, public, …` and `Expires`, as
/// Cherokee's `cherokee_connection_add_expiration_header` writes them) and
/// beside a `Cache-Control` header operation (which replaces that line, as
/// Cherokee's `header_op` `add` does, while `Expires` stays).
#[test]
fn cherokee_expiration_time_keeps_its_lifetime() {
    let dir = TempDir::new("cherokee-exp");
    let root = dir.mkdir("www");
    dir.write("www/cached/a.txt", "a\n");
    dir.write("www/ops/b.txt", "b\n");
    dir.write("www/plain.txt", "p\n");
    let conf = dir.write(
        "cherokee.conf",
        format!(
            "server!bind!1!port = 8081\n\
             vserver!1!nick = default\n\
             vserver!1!document_root = {root}\n\
             vserver!1!rule!1!match = default\n\
             vserver!1!rule!1!handler = file\n\
             vserver!1!rule!20!match = directory\n\
             vserver!1!rule!20!match!directory = /cached\n\
             vserver!1!rule!20!match!final = 0\n\
             vserver!1!rule!20!expiration = time\n\
             vserver!1!rule!20!expiration!time = 1h\n\
             vserver!1!rule!20!expiration!caching = public\n\
             vserver!1!rule!20!expiration!caching!must-revalidate = 1\n\
             vserver!1!rule!30!match = directory\n\
             vserver!1!rule!30!match!directory = /ops\n\
             vserver!1!rule!30!match!final = 0\n\
             vserver!1!rule!30!expiration = time\n\
             vserver!1!rule!30!expiration!time = 2h\n\
             vserver!1!rule!30!header_op!1!type = add\n\
             vserver!1!rule!30!header_op!1!header = Cache-Control\n\
             vserver!1!rule!30!header_op!1!value = no-transform\n",
            root = root.display()
        ),
    );
    let (tv, _, report) = import_on_any_port("cherokee", &conf, dir.path());
    let t = Server::start(&toml::to_string(&tv).unwrap(), |_| {});
    let expires_in = |r: &Response| -> u64 {
        let e = httpdate::parse_http_date(r.header("expires").expect("Expires")).unwrap();
        e.duration_since(std::time::SystemTime::now())
            .unwrap_or_default()
            .as_secs()
    };
    let a = t.get("/cached/a.txt");
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header_all("cache-control"),
        ["max-age=3600, public, must-revalidate"],
        "{report}"
    );
    assert!((3590..=3600).contains(&expires_in(&a)), "{:?}", a.headers);
    let b = t.get("/ops/b.txt");
    assert_eq!(b.header_all("cache-control"), ["no-transform"], "{report}");
    assert!((7190..=7200).contains(&expires_in(&b)), "{:?}", b.headers);
    let p = t.get("/plain.txt");
    assert_eq!(p.header("cache-control"), None);
    assert_eq!(p.header("expires"), None);
}

/// A lighttpd configuration using every directive of issue 13 that maps to
/// `[server]` (`server.max-request-size`, mod_extforward), imported and
/// served: `tessera -t` accepts it, and the request size limit is lighttpd's
/// (8192 KiB): a 4 MiB upload is not refused, a 9 MiB one is (413).
#[test]
fn imported_request_size_and_trusted_proxies_apply() {
    let dir = TempDir::new("import-extforward");
    dir.mkdir("www");
    dir.write("www/index.html", "hello\n");
    let conf = dir.write(
        "lighttpd.conf",
        format!(
            "server.document-root = \"{}/www\"\nserver.port = 8080\n\
             server.modules = ( \"mod_extforward\" )\n\
             server.max-request-size = 8192\n\
             extforward.forwarder = ( \"127.0.0.1\" => \"trust\", \"10.0.0.0/8\" => \"trust\" )\n\
             extforward.headers = ( \"X-Forwarded-For\" )\n",
            dir.path().display()
        ),
    );
    let (tv, imported, report) = import_on_any_port("lighttpd", &conf, dir.path());
    assert!(proxy_drops(&report).is_empty(), "{report}");
    let s = tv["server"].as_table().unwrap();
    assert_eq!(
        s["max-body-size"].as_integer(),
        Some(8192 * 1024),
        "{imported}"
    );
    assert_eq!(
        s["trusted-proxies"].as_array().unwrap().len(),
        2,
        "{imported}"
    );
    assert_eq!(s["real-ip-header"].as_str(), Some("x-forwarded-for"));
    let checked = dir.write("checked.toml", toml::to_string(&tv).unwrap());
    let t = crate::util::check_config(&checked);
    assert!(
        t.status.success(),
        "tessera -t: {}\n{imported}",
        String::from_utf8_lossy(&t.stderr)
    );
    let server = Server::start(&toml::to_string(&tv).unwrap(), |_| {});
    let post = |len: usize| -> u16 {
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let head = format!(
            "POST /index.html HTTP/1.1\r\nHost: site.test\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        // The server may answer (and close) before the body is sent.
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0;
        while sent < len {
            let n = chunk.len().min(len - sent);
            if s.write_all(&chunk[..n]).is_err() {
                break;
            }
            sent += n;
        }
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        Response::parse(&buf, false).status
    };
    assert_ne!(post(4 << 20), 413, "a 4 MiB body is within 8192 KiB");
    assert_eq!(post(9 << 20), 413, "a 9 MiB body is over 8192 KiB");
}

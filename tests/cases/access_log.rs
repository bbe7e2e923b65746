//! The access log: Common Log Format fields, bytes sent, escaping (b37–b39).

use crate::util::{Response, Server, TempDir};

use super::*;

fn log_server(format: &str, setup: impl FnOnce(&TempDir)) -> Server {
    Server::site(
        LOG_SF,
        &format!("[vhost.access-log]\npath = \"access.log\"\nformat = {format:?}\n"),
        setup,
    )
}

/// Stops the server gracefully (which flushes the log) and returns the lines.
fn stop_and_read_log(s: Server) -> Vec<String> {
    let dir = s.dir.path().to_path_buf();
    let status = s.stop_keep_dir();
    let text = std::fs::read(dir.join("access.log"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "exit status {status:?}");
    let text = String::from_utf8(text.expect("access.log")).expect("log lines are ASCII");
    text.lines().map(str::to_owned).collect()
}

/// Splits a CLF/combined line into its fields: bare words, `[date]`, and
/// `"quoted"` fields with Apache escapes (`\"`, `\\`, `\xHH`) undone.
fn log_fields(line: &str) -> Vec<Vec<u8>> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let mut f = Vec::new();
        match b[i] {
            b'"' => {
                i += 1;
                loop {
                    match b.get(i) {
                        None => panic!("unterminated quoted field in {line}"),
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') => {
                            match b.get(i + 1) {
                                Some(b'"') => f.push(b'"'),
                                Some(b'\\') => f.push(b'\\'),
                                Some(b'x') => {
                                    let h = std::str::from_utf8(&b[i + 2..i + 4]).unwrap();
                                    f.push(u8::from_str_radix(h, 16).unwrap());
                                    i += 2;
                                }
                                other => panic!("bad escape {other:?} in {line}"),
                            }
                            i += 2;
                        }
                        Some(&c) => {
                            f.push(c);
                            i += 1;
                        }
                    }
                }
            }
            b'[' => {
                let end = i + line[i..].find(']').expect("]");
                f.extend_from_slice(&b[i + 1..end]);
                i = end + 1;
            }
            _ => {
                while i < b.len() && b[i] != b' ' {
                    f.push(b[i]);
                    i += 1;
                }
            }
        }
        out.push(f);
        match b.get(i) {
            None => {}
            Some(b' ') => i += 1,
            Some(c) => panic!("field not followed by a space ({}) in {line}", *c as char),
        }
    }
    out
}

fn st(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap()
}

/// `10/Oct/2000:13:55:36 +0000`
#[track_caller]
fn assert_clf_date(d: &str) {
    let b = d.as_bytes();
    assert_eq!(b.len(), 26, "{d}");
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    assert!(months.contains(&&d[3..6]), "{d}");
    for (i, c) in d.char_indices() {
        let ok = match i {
            2 | 6 => c == '/',
            11 | 14 | 17 => c == ':',
            20 => c == ' ',
            21 => c == '+' || c == '-',
            3..=5 => true,
            _ => c.is_ascii_digit(),
        };
        assert!(ok, "{d} at {i}");
    }
}

#[test]
fn b37_common_log_format_fields() {
    let setup = |d: &TempDir| {
        d.write("www/index.html", "hello");
    };
    let s = log_server("common", setup);
    assert_eq!(s.get("/").status, 200);
    let lines = stop_and_read_log(s);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let f = log_fields(&lines[0]);
    assert_eq!(f.len(), 7, "{}", lines[0]);
    assert_eq!(st(&f[0]), "127.0.0.1");
    assert_eq!(st(&f[1]), "-");
    assert_eq!(st(&f[2]), "-");
    assert_clf_date(st(&f[3]));
    assert_eq!(
        lines[0],
        format!("127.0.0.1 - - [{}] \"GET / HTTP/1.1\" 200 5", st(&f[3]))
    );

    // combined: referer and user agent, `-` when missing; %b is `-` for 304 and HEAD
    let s = log_server("combined", setup);
    let etag = s.get("/?first").header("etag").unwrap().to_string();
    assert_eq!(
        s.req("GET", "/?nm", &[&format!("If-None-Match: {etag}")])
            .status,
        304
    );
    assert_eq!(s.req("HEAD", "/?head", &[]).status, 200);
    let lines = stop_and_read_log(s);
    assert_eq!(lines.len(), 3, "{lines:?}");
    let find = |q: &str| {
        let l = lines
            .iter()
            .find(|l| l.contains(&format!(" /?{q} HTTP/1.1\"")))
            .unwrap_or_else(|| panic!("{q}: {lines:?}"));
        let f = log_fields(l);
        assert_eq!(f.len(), 9, "{l}");
        assert_eq!((st(&f[1]), st(&f[2])), ("-", "-"), "{l}");
        assert_clf_date(st(&f[3]));
        assert_eq!((st(&f[7]), st(&f[8])), ("-", "-"), "{l}");
        assert!(l.ends_with(" \"-\" \"-\""), "{l}");
        (st(&f[5]).to_owned(), st(&f[6]).to_owned())
    };
    assert_eq!(find("first"), ("200".into(), "5".into()));
    assert_eq!(find("nm"), ("304".into(), "-".into()));
    assert_eq!(find("head"), ("200".into(), "-".into()));

    // %B prints 0 where %b prints -
    let s = log_server("%h %l %u %t \"%r\" %>s %B", setup);
    assert_eq!(s.req("HEAD", "/", &[]).status, 200);
    let lines = stop_and_read_log(s);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].ends_with("\"HEAD / HTTP/1.1\" 200 0"),
        "{}",
        lines[0]
    );
}

#[test]
fn b38_bytes_sent_not_file_size() {
    // static-file alone here; with on-the-fly gzip (compress) at the end.
    let css = b"a{color:red}".repeat(100_000 / 12 + 1)[..100_000].to_vec();
    let css2 = css.clone();
    let s = log_server("common", move |d| {
        d.write("www/big.css", &css2);
    });
    let full = s.req("GET", "/big.css?full", &["Accept-Encoding: gzip"]);
    assert_eq!(full.status, 200);
    let sent_full = full.raw_body.len();
    let etag = full.header("etag").unwrap().to_string();
    let part = s.req("GET", "/big.css?part", &["Range: bytes=100-199"]);
    assert_eq!(part.status, 206);
    let multi = s.req("GET", "/big.css?multi", &["Range: bytes=0-9,50-59"]);
    assert_eq!(multi.status, 206);
    let multi_len = multi.raw_body.len();
    assert_framed(&multi);
    let nm = s.req("GET", "/big.css?nm", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(nm.status, 304);
    assert_eq!(s.req("HEAD", "/big.css?head", &[]).status, 200);
    let lines = stop_and_read_log(s);
    assert_eq!(lines.len(), 5, "{lines:?}");
    let b = |q: &str| {
        let l = lines
            .iter()
            .find(|l| l.contains(&format!("/big.css?{q} HTTP/1.1\"")))
            .unwrap_or_else(|| panic!("{q}: {lines:?}"));
        let f = log_fields(l);
        (st(&f[5]).to_owned(), st(&f[6]).to_owned())
    };
    let code_bytes = |c: &str, n: usize| (c.to_owned(), n.to_string());
    assert_eq!(b("full"), code_bytes("200", sent_full));
    assert_eq!(b("part"), code_bytes("206", 100));
    assert_eq!(b("multi"), code_bytes("206", multi_len));
    assert_eq!(b("nm"), ("304".into(), "-".into()));
    assert_eq!(b("head"), ("200".into(), "-".into()));

    // With compress: %b is the gzip body's length, far below the file's size.
    let s = Server::site(
        "\"access-log\", \"compress\", \"static-file\"",
        "[vhost.access-log]\npath = \"access.log\"\nformat = \"common\"\n",
        move |d| {
            d.write("www/big.css", &css);
        },
    );
    let gz = s.req("GET", "/big.css?gz", &["Accept-Encoding: gzip"]);
    assert_eq!(gz.status, 200);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    let sent = gz.raw_body.len();
    assert!(sent < 10_000, "{sent}");
    let part = s.req(
        "GET",
        "/big.css?part",
        &["Accept-Encoding: gzip", "Range: bytes=100-199"],
    );
    assert_eq!(part.status, 206);
    let lines = stop_and_read_log(s);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let f = log_fields(&lines[0]);
    assert_eq!((st(&f[5]), st(&f[6])), ("200", sent.to_string().as_str()));
    let f = log_fields(&lines[1]);
    assert_eq!((st(&f[5]), st(&f[6])), ("206", "100"));
}

#[test]
fn b39_log_escaping() {
    let s = log_server("combined", |d| {
        d.write("www/index.html", "x");
    });
    let r = s.req(
        "GET",
        "/a%22b",
        &["User-Agent: Demo\" 200 999 \"forged", "Referer: x\\y"],
    );
    assert_eq!(r.status, 404);
    // a tab and obs-text (UTF-8 é) in a header value
    let raw = s.raw(
        "GET /ctl HTTP/1.1\r\nHost: site.test\r\nUser-Agent: tab\there é\r\nReferer: q\"\r\nConnection: close\r\n\r\n"
            .as_bytes(),
    );
    assert_eq!(Response::parse(&raw, false).status, 404);
    let lines = stop_and_read_log(s);
    assert_eq!(lines.len(), 2, "one line per request: {lines:?}");
    for l in &lines {
        assert!(
            l.bytes().all(|c| (0x20..0x7f).contains(&c)),
            "raw byte in {l:?}"
        );
    }
    let l = lines.iter().find(|l| l.contains("/a%22b")).unwrap();
    let f = log_fields(l);
    assert_eq!(f.len(), 9, "{l}");
    assert_eq!(st(&f[4]), "GET /a%22b HTTP/1.1", "request line as received");
    assert_eq!(st(&f[5]), "404");
    assert_eq!(st(&f[7]), "x\\y");
    assert_eq!(st(&f[8]), "Demo\" 200 999 \"forged");
    let l = lines.iter().find(|l| l.contains("/ctl")).unwrap();
    let f = log_fields(l);
    assert_eq!(f.len(), 9, "{l}");
    assert_eq!(f[7], b"q\"");
    assert_eq!(f[8], "tab\there é".as_bytes());
}

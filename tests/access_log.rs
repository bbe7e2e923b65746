//! `access-log` over real HTTP: Combined/Common Log Format lines, escaping, a
//! shared file, `%b`, and no line lost on a clean shutdown.

use crate::util::Server;

const MODS: &str = "\"access-log\", \"static-file\"";

fn log_server(format: &str) -> Server {
    Server::site(
        MODS,
        &format!("[vhost.access-log]\npath = \"logs/access.log\"\nformat = {format:?}\n"),
        |d| {
            d.write("www/index.html", "0123456789");
        },
    )
}

/// Stops the server gracefully and returns the log lines.
fn stop_and_read(s: Server) -> Vec<String> {
    let path = s.dir.path().join("logs/access.log");
    let dir = s.dir.path().to_path_buf();
    let status = s.stop_keep_dir();
    assert!(status.success(), "exit status {status:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    text.lines().map(str::to_owned).collect()
}

#[test]
fn combined_log_format_lines() {
    let s = log_server("combined");
    s.req(
        "GET",
        "/index.html?x=1",
        &["Referer: http://ref.test/", "User-Agent: curl/8"],
    );
    s.req("GET", "/missing", &[]);
    let lines = stop_and_read(s);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let re = regex_lite(&lines[0]);
    assert!(re, "{}", lines[0]);
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{}", lines[0]);
    assert!(
        lines[0]
            .contains("] \"GET /index.html?x=1 HTTP/1.1\" 200 10 \"http://ref.test/\" \"curl/8\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"GET /missing HTTP/1.1\" 404 "),
        "{}",
        lines[1]
    );
    assert!(lines[1].ends_with(" \"-\" \"-\""), "{}", lines[1]);
}

/// `[dd/Mon/yyyy:hh:mm:ss +0000]` in the line.
fn regex_lite(line: &str) -> bool {
    let Some(start) = line.find('[') else {
        return false;
    };
    let t = &line[start + 1..];
    let Some(end) = t.find(']') else { return false };
    let t = &t[..end];
    t.len() == 26
        && &t[2..3] == "/"
        && &t[6..7] == "/"
        && &t[11..12] == ":"
        && t.ends_with(" +0000")
}

#[test]
fn common_format_and_zero_bytes_as_dash() {
    let s = log_server("common");
    let etag = s.get("/index.html").header("etag").unwrap().to_string();
    s.req("GET", "/index.html", &[&format!("If-None-Match: {etag}")]);
    s.req("HEAD", "/index.html", &[]);
    s.req("GET", "/index.html", &["Range: bytes=0-3"]);
    let lines = stop_and_read(s);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0].ends_with("\"GET /index.html HTTP/1.1\" 200 10"),
        "{}",
        lines[0]
    );
    assert!(lines[1].ends_with("\" 304 -"), "{}", lines[1]);
    assert!(
        lines[2].ends_with("\"HEAD /index.html HTTP/1.1\" 200 -"),
        "{}",
        lines[2]
    );
    assert!(lines[3].ends_with("\" 206 4"), "{}", lines[3]);
    // seven fields: host ident user [date time] "request" status bytes
    assert_eq!(lines[0].split(' ').count(), 10, "{}", lines[0]);
}

#[test]
fn hostile_values_cannot_forge_a_line() {
    let s = log_server("combined");
    s.req(
        "GET",
        "/a%22b",
        &["User-Agent: Demo\" 200 999 \"forged", "Referer: x\\y\té"],
    );
    let lines = stop_and_read(s);
    assert_eq!(lines.len(), 1);
    let l = &lines[0];
    assert!(l.contains("\"Demo\\\" 200 999 \\\"forged\""), "{l}");
    assert!(l.contains("\"x\\\\y\\x09\\xC3\\xA9\""), "{l}");
    assert!(l.contains("\"GET /a%22b HTTP/1.1\" 404"), "{l}");
}

#[test]
fn custom_format() {
    let s = log_server("%v %V %m %U %q %>s %B %{X-Custom}i %D");
    s.req("GET", "/index.html?k=v", &["X-Custom: yes"]);
    let lines = stop_and_read(s);
    let f: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(
        &f[..8],
        [
            "site.test",
            "site.test",
            "GET",
            "/index.html",
            "?k=v",
            "200",
            "10",
            "yes"
        ]
    );
    assert!(f[8].parse::<u64>().is_ok(), "{}", lines[0]);
}

#[test]
fn no_line_lost_on_clean_shutdown() {
    let s = log_server("common");
    let n = 400;
    std::thread::scope(|sc| {
        for t in 0..4 {
            let s = &s;
            sc.spawn(move || {
                for i in 0..n / 4 {
                    assert_eq!(s.get(&format!("/index.html?t={t}&i={i}")).status, 200);
                }
            });
        }
    });
    let lines = stop_and_read(s);
    assert_eq!(lines.len(), n);
    for t in 0..4 {
        for i in 0..n / 4 {
            let needle = format!("?t={t}&i={i} ");
            assert_eq!(
                lines.iter().filter(|l| l.contains(&needle)).count(),
                1,
                "{needle}"
            );
        }
    }
}

#[test]
fn two_vhosts_share_one_file() {
    let cfg = r#"
[server]
listen = ["127.0.0.1:0"]

[[vhost]]
server-names = ["a.test"]
document-root = "www"
modules = ["access-log", "static-file"]
[vhost.access-log]
path = "shared.log"
format = "%v %U"

[[vhost]]
server-names = ["b.test"]
document-root = "www"
modules = ["access-log", "static-file"]
[vhost.access-log]
path = "./shared.log"
format = "%v %U"
"#;
    let s = Server::start(cfg, |d| {
        d.write("www/index.html", "x");
    });
    let path = s.dir.path().join("shared.log");
    for i in 0..20 {
        s.req("GET", &format!("/{i}"), &["Host: a.test"]);
        s.req("GET", &format!("/{i}"), &["Host: b.test"]);
    }
    let dir = s.dir.path().to_path_buf();
    assert!(s.stop_keep_dir().success());
    let text = std::fs::read_to_string(path).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    assert_eq!(text.lines().count(), 40);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("a.test ")).count(),
        20
    );
    assert!(text.lines().any(|l| l == "b.test /19"));
}

/// Issue 11 #11: `%{combined}` inserts the Combined fields before more
/// directives (the request-id note is `-` without the plugin).
#[test]
fn combined_expands_among_other_directives() {
    let s = log_server("%{combined} %{request-id}n");
    let r = s.req("GET", "/index.html", &["User-Agent: t/1"]);
    assert_eq!(r.status, 200);
    let lines = stop_and_read(s);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        regex_lite(lines[0].strip_suffix(" -").unwrap()),
        "{lines:?}"
    );
    assert!(
        lines[0].contains("\"GET /index.html HTTP/1.1\" 200 10 \"-\" \"t/1\" -"),
        "{lines:?}"
    );
}

use super::*;
use std::time::{Duration, Instant};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::test::TestRequest;
use tessera_core::actix_web::HttpRequest;
use tessera_core::vhost::VhostInfo;

fn vhost() -> VhostInfo {
    VhostInfo {
        index: 0,
        names: vec!["site.test".into()],
        document_root: "/srv".into(),
    }
}

/// 2000-10-10T13:55:36Z, Apache's documentation example.
fn apache_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(971_186_136)
}

fn line(fmt: &str, req: &HttpRequest, status: u16, bytes: u64, user: Option<&str>) -> String {
    let vh = vhost();
    let rec = LogRecord {
        req,
        vhost: &vh,
        vhost_label: "site.test",
        status: StatusCode::from_u16(status).unwrap(),
        body_bytes: bytes,
        start_time: apache_time(),
        started: Instant::now(),
        user,
        complete: true,
        notes: &Default::default(),
        ext: &Default::default(),
    };
    let mut out = Vec::new();
    LogFormat::compile(fmt)
        .unwrap()
        .write_line(&rec, &mut TimeCache::default(), &mut out);
    String::from_utf8(out).expect("escaped lines are ASCII")
}

fn get(uri: &str) -> TestRequest {
    TestRequest::default()
        .uri(uri)
        .peer_addr("192.0.2.7:51234".parse().unwrap())
        .insert_header(("host", "site.test"))
}

#[test]
fn common_and_combined_compile_to_the_clf_fields() {
    assert_eq!(
        LogFormat::compile("common").unwrap(),
        LogFormat::compile(COMMON).unwrap()
    );
    assert_eq!(
        LogFormat::compile("combined").unwrap().pieces[..13],
        LogFormat::compile(COMMON).unwrap().pieces[..]
    );
    let c = LogFormat::compile("combined").unwrap();
    assert_eq!(
        c.pieces[0..4],
        [
            Piece::ClientIp,
            Piece::Literal(" ".into()),
            Piece::Ident,
            Piece::Literal(" ".into())
        ]
    );
    assert!(c
        .pieces
        .contains(&Piece::RequestHeader(HeaderName::from_static("user-agent"))));
}

#[test]
fn b37_common_line_has_seven_fields_with_dashes() {
    let req = get("/").to_http_request();
    assert_eq!(
        line("common", &req, 404, 14, None),
        r#"192.0.2.7 - - [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1" 404 14"#
    );
    assert_eq!(
        line("combined", &req, 200, 5, Some("ann")),
        r#"192.0.2.7 - ann [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1" 200 5 "-" "-""#
    );
}

#[test]
fn b38_bytes_dash_for_zero_and_zero_for_capital_b() {
    let req = get("/").to_http_request();
    assert_eq!(line("%b|%B", &req, 304, 0, None), "-|0");
    assert_eq!(line("%b|%B", &req, 200, 1234, None), "1234|1234");
}

#[test]
fn b39_hostile_user_agent_cannot_forge_fields() {
    let req = get("/a%22b")
        .insert_header(("user-agent", r#"Demo" 200 999 "forged"#))
        .insert_header(("referer", r"x\y"))
        .to_http_request();
    assert_eq!(
        line("combined", &req, 200, 1, None),
        r#"192.0.2.7 - - [10/Oct/2000:13:55:36 +0000] "GET /a%22b HTTP/1.1" 200 1 "x\\y" "Demo\" 200 999 \"forged""#
    );
}

#[test]
fn escaping_of_control_and_non_ascii_bytes() {
    let mut out = Vec::new();
    escape_into(&mut out, b"a\tb\x01\x7f\"\\ok");
    assert_eq!(out, br#"a\x09b\x01\x7F\"\\ok"#);
    out.clear();
    escape_into(&mut out, "é€".as_bytes());
    assert_eq!(out, br"\xC3\xA9\xE2\x82\xAC");
    out.clear();
    escape_into(&mut out, b"\r\nGET / HTTP/1.1");
    assert_eq!(out, br"\x0D\x0AGET / HTTP/1.1");
    // Header values with obs-text reach the log escaped.
    let req = get("/")
        .insert_header((
            "user-agent",
            tessera_core::actix_web::http::header::HeaderValue::from_bytes(b"caf\xE9\tx").unwrap(),
        ))
        .to_http_request();
    assert_eq!(line("%{User-Agent}i", &req, 200, 0, None), r"caf\xE9\x09x");
    // A user name is a request value too.
    assert_eq!(line("%u", &req, 200, 0, Some("a\"b\nc")), r#"a\"b\x0Ac"#);
}

/// `%r` writes the target as `Uri`'s `Display` does (the origin-form
/// path skips the formatter), and `%b`, `%p`, `%h` their numbers and
/// addresses as `Display` does.
#[test]
fn request_line_and_numbers_match_display() {
    for uri in [
        "/",
        "/a/b.html?x=1&y=%22z%22",
        "/%7Euser/?",
        "*",
        "http://site.test/p?q",
        "https://site.test:8443/",
    ] {
        let req = get(uri).to_http_request();
        let want = format!("GET {} HTTP/1.1", req.uri()).replace('"', "\\x22");
        assert_eq!(line("%r", &req, 200, 0, None), want, "{uri}");
    }
    let req = get("/").to_http_request();
    assert_eq!(
        line("%h %{remote}p %b %B", &req, 200, u64::MAX, None),
        format!("192.0.2.7 51234 {} {}", u64::MAX, u64::MAX)
    );
}

#[test]
fn custom_format_directives() {
    let req = TestRequest::default()
        .uri("http://Site.test:8080/p/a%20th?x=1&y=%22")
        .peer_addr("[::ffff:198.51.100.1]:9".parse().unwrap())
        .method(tessera_core::actix_web::http::Method::HEAD)
        .insert_header(("x-multi", "one"))
        .append_header(("x-multi", "two"))
        .to_http_request();
    assert_eq!(
        line(
            "%a %v %V %m %U%q %H %s %<s %{X-MULTI}i %{x-none}i %% 100%%\t%D",
            &req,
            301,
            0,
            None
        )
        .rsplit_once('\t')
        .unwrap()
        .0,
        "198.51.100.1 site.test Site.test:8080 HEAD /p/a%20th?x=1&y=%22 HTTP/1.1 301 301 one, two - % 100%"
    );
    assert_eq!(
        line("%r", &req, 200, 0, None),
        "HEAD http://Site.test:8080/p/a%20th?x=1&y=%22 HTTP/1.1"
    );
    let plain = TestRequest::default()
        .uri("/x")
        .peer_addr("[2001:db8::1]:443".parse().unwrap())
        .to_http_request();
    assert_eq!(
        line("%h %V [%q] %T", &plain, 200, 0, None),
        "2001:db8::1 - [] 0"
    );
    let no_peer = TestRequest::default().uri("/").to_http_request();
    assert_eq!(line("%h", &no_peer, 200, 0, None), "-");
}

#[test]
fn unknown_and_unsupported_directives_are_config_errors() {
    assert_eq!(
        LogFormat::compile("%h %Z"),
        Err(FormatError::UnknownDirective("%Z".into()))
    );
    assert_eq!(
        LogFormat::compile("%>b"),
        Err(FormatError::UnknownDirective("%>b".into()))
    );
    assert_eq!(
        LogFormat::compile("%{%d/%b}t"),
        Err(FormatError::UnknownDirective("%{%d/%b}t".into()))
    );
    let e = LogFormat::compile(r#""%{Content-Type}o""#).unwrap_err();
    assert_eq!(e, FormatError::ResponseHeader("%{Content-Type}o".into()));
    assert!(e.to_string().contains("response header"), "{e}");
    assert_eq!(
        LogFormat::compile("%h %"),
        Err(FormatError::Incomplete("%".into()))
    );
    assert_eq!(
        LogFormat::compile("%{Referer"),
        Err(FormatError::Unterminated(0))
    );
    assert_eq!(
        LogFormat::compile("%{Bad Name}i"),
        Err(FormatError::BadHeaderName("%{Bad Name}i".into()))
    );
    assert_eq!(
        LogFormat::compile("%h\n%u"),
        Err(FormatError::ControlChar(2, b'\n'))
    );
    assert!(LogFormat::compile("%h\t%u é").is_ok());
}

/// Issue 11 #11: a format name beside other fields is refused, and
/// `%{combined}` inserts the fields.
#[test]
fn format_names_stand_alone_or_expand() {
    assert_eq!(
        LogFormat::compile("combined %{request-id}n"),
        Err(FormatError::KeywordNotAlone("combined".into()))
    );
    assert_eq!(
        LogFormat::compile("%h COMMON"),
        Err(FormatError::KeywordNotAlone("common".into()))
    );
    assert_eq!(
        LogFormat::compile("comon"),
        Err(FormatError::UnknownKeyword("comon".into()))
    );
    let e = LogFormat::compile("combined %{request-id}n").unwrap_err();
    assert!(e.to_string().contains("%{combined}"), "{e}");
    assert_eq!(
        LogFormat::compile("%{combined} %{request-id}n").unwrap(),
        LogFormat::compile(&format!("{COMBINED} %{{request-id}}n")).unwrap()
    );
    // Followed by a letter it is a directive's argument, not the name.
    assert_eq!(
        LogFormat::compile("%{combined}n").unwrap().pieces,
        [Piece::Note("combined".into())]
    );
    let req = get("/").to_http_request();
    assert_eq!(
        line("%{common}|%{common}", &req, 200, 3, None),
        [r#"192.0.2.7 - - [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1" 200 3"#; 2].join("|")
    );
    // Words that are not format names are text.
    assert!(LogFormat::compile("host=%h combinedX").is_ok());
}

/// Issue 11 #5: the directives Cherokee templates and lighttpd formats
/// import into, with the source servers' values.
#[test]
fn source_server_time_and_socket_directives() {
    let req = get("/p?a=1").to_http_request();
    let bare = get("/p").to_http_request();
    // Cherokee ${now}: no brackets.
    assert_eq!(
        line("[%{%d/%b/%Y:%H:%M:%S %z}t]", &req, 200, 0, None),
        "[10/Oct/2000:13:55:36 +0000]"
    );
    // ${time_secs}, ${time_msecs}, lighttpd %{usec}t: numbers since the
    // epoch at the end of the request (here a few µs after the start).
    let v = |f: &str| line(f, &req, 200, 0, None).parse::<u128>().unwrap();
    assert_eq!(v("%{sec}t"), 971_186_136);
    let ms = v("%{msec}t");
    assert!((971_186_136_001..971_186_137_000).contains(&ms), "{ms}");
    let us = v("%{usec}t");
    assert!(
        (971_186_136_000_001..971_186_137_000_000).contains(&us),
        "{us}"
    );
    // lighttpd rounds durations up: a request of 1.5 ms is 2 ms, not 1.
    let vh = vhost();
    let rec = LogRecord {
        req: &req,
        vhost: &vh,
        vhost_label: "site.test",
        status: StatusCode::OK,
        body_bytes: 0,
        start_time: apache_time(),
        started: Instant::now() - Duration::from_micros(1500),
        user: None,
        complete: true,
        notes: &Default::default(),
        ext: &Default::default(),
    };
    let mut out = Vec::new();
    LogFormat::compile("%{ms}T %D %T").unwrap().write_line(
        &rec,
        &mut TimeCache::default(),
        &mut out,
    );
    let out = String::from_utf8(out).unwrap();
    let f: Vec<u128> = out.split(' ').map(|x| x.parse().unwrap()).collect();
    assert!(f[0] >= 2 && f[0] < 1000, "{out}");
    assert!(f[1] > 1500 && f[1] <= f[0] * 1000, "{out}");
    assert_eq!(f[2], 0, "{out}");
    // Listener address and port (the test request's default 127.0.0.1:8080),
    // the client's port, and lighttpd's and Cherokee's raw query.
    assert_eq!(
        line(
            "%A %p %{local}p %{remote}p [%{raw}q] [%{raw-or-dash}q]",
            &req,
            200,
            0,
            None
        ),
        "127.0.0.1 8080 8080 51234 [a=1] [a=1]"
    );
    assert_eq!(
        line("[%{raw}q] [%{raw-or-dash}q]", &bare, 200, 0, None),
        "[] [-]"
    );
    let ported = TestRequest::default()
        .uri("/")
        .insert_header(("host", "Site.test:8080"))
        .to_http_request();
    assert_eq!(
        line("%V %{no-port}V", &ported, 200, 0, None),
        "Site.test:8080 Site.test"
    );
    assert_eq!(
        LogFormat::compile("%{%Y}t"),
        Err(FormatError::UnknownDirective("%{%Y}t".into()))
    );
}

#[test]
fn time_is_clf_utc() {
    let mut c = TimeCache::default();
    assert_eq!(c.get(apache_time()), b"[10/Oct/2000:13:55:36 +0000]");
    assert_eq!(c.get(UNIX_EPOCH), b"[01/Jan/1970:00:00:00 +0000]");
    // Leap day and the last second of a leap year.
    let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
    assert_eq!(c.get(t), b"[29/Feb/2000:00:00:00 +0000]");
    let t = UNIX_EPOCH + Duration::from_secs(1_735_689_599);
    assert_eq!(c.get(t), b"[31/Dec/2024:23:59:59 +0000]");
    // Checked against httpdate for a spread of days.
    for day in (0..40_000u64).step_by(37) {
        let secs = day * 86_400 + 45_296;
        let http = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
        // "Sun, 06 Nov 1994 08:49:37 GMT"
        let p: Vec<&str> = http.split([' ', ',']).filter(|s| !s.is_empty()).collect();
        let want = format!("[{}/{}/{}:{} +0000]", p[1], p[2], p[3], p[4]);
        assert_eq!(
            std::str::from_utf8(c.get(UNIX_EPOCH + Duration::from_secs(secs))).unwrap(),
            want
        );
    }
}

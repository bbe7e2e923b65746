use super::*;
use std::borrow::Cow;
use tessera_core::actix_web::http::header::HeaderName;
use tessera_core::actix_web::test::TestRequest;
use tessera_core::vhost::VhostInfo;
use tessera_core::SharedState;

const MIN: u32 = 60;
const HOUR: u32 = 3_600;
const DAY: u32 = 86_400;

fn ok(s: &str) -> (ExpireBase, u32) {
    let spec = parse_expire(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    (spec.base, spec.seconds)
}

fn secs(s: &str) -> u32 {
    ok(s).1
}

fn err(s: &str) -> ExpireParseError {
    parse_expire(s).expect_err(s)
}

#[test]
fn every_unit_singular_and_plural() {
    let units = [
        ("second", 1),
        ("minute", MIN),
        ("hour", HOUR),
        ("day", DAY),
        ("week", 7 * DAY),
        ("month", 30 * DAY),
        ("year", 365 * DAY),
    ];
    for (unit, mult) in units {
        assert_eq!(secs(&format!("access plus 1 {unit}")), mult, "{unit}");
        assert_eq!(secs(&format!("access plus 1 {unit}s")), mult, "{unit}s");
        assert_eq!(secs(&format!("access plus 3 {unit}s")), 3 * mult, "{unit}s");
    }
    assert_eq!(secs("access plus 1 months"), 2_592_000);
    assert_eq!(secs("access plus 1 years"), 31_536_000);
    // lighttpd's abbreviations.
    assert_eq!(secs("access plus 2 sec"), 2);
    assert_eq!(secs("access plus 2 secs"), 2);
    assert_eq!(secs("access plus 2 min"), 2 * MIN);
    assert_eq!(secs("access plus 2 mins"), 2 * MIN);
}

#[test]
fn several_pairs_are_summed() {
    assert_eq!(secs("access plus 1 months 2 days"), 32 * DAY);
    assert_eq!(
        secs("access plus 1 years 2 weeks 3 days 4 hours 5 minutes 6 seconds"),
        365 * DAY + 14 * DAY + 3 * DAY + 4 * HOUR + 5 * MIN + 6
    );
    assert_eq!(secs("access plus 1 hours 1 hours"), 2 * HOUR);
    assert_eq!(secs("access plus 2min1sec"), 2 * MIN + 1);
}

#[test]
fn bases() {
    assert_eq!(ok("access plus 1 hours"), (ExpireBase::Access, HOUR));
    assert_eq!(ok("now plus 1 hours"), (ExpireBase::Access, HOUR));
    assert_eq!(
        ok("modification plus 1 hours"),
        (ExpireBase::Modification, HOUR)
    );
    assert_eq!(ok("access plus 0 seconds"), (ExpireBase::Access, 0));
}

#[test]
fn plus_is_optional_as_in_lighttpd() {
    assert_eq!(ok("access 1 days"), (ExpireBase::Access, DAY));
    assert_eq!(ok("now 1 day"), (ExpireBase::Access, DAY));
    assert_eq!(
        ok("modification 2 hours"),
        (ExpireBase::Modification, 2 * HOUR)
    );
}

#[test]
fn extra_whitespace() {
    assert_eq!(secs("  access   plus  1   months  2 days  "), 32 * DAY);
    assert_eq!(secs("access\tplus\t1\tdays"), DAY);
}

#[test]
fn empty() {
    assert!(matches!(err(""), ExpireParseError::Empty { .. }));
    assert!(matches!(err("   "), ExpireParseError::Empty { .. }));
    assert_eq!(
        err("").to_string(),
        "\"\": empty, expected \"<base> plus <number> <unit> ...\""
    );
}

#[test]
fn unknown_base() {
    assert_eq!(
        err("later plus 1 days"),
        ExpireParseError::UnknownBase {
            input: "later plus 1 days".into(),
            base: "later".into()
        }
    );
    assert!(matches!(
        err("plus 1 days"),
        ExpireParseError::UnknownBase { .. }
    ));
    assert!(matches!(
        err("Access plus 1 days"),
        ExpireParseError::UnknownBase { .. }
    ));
    assert!(matches!(
        err("1 days"),
        ExpireParseError::UnknownBase { .. }
    ));
}

#[test]
fn missing_duration() {
    for s in ["access", "access plus", "now plus   ", "modification"] {
        assert!(
            matches!(err(s), ExpireParseError::MissingDuration { .. }),
            "{s}"
        );
    }
}

#[test]
fn bad_number() {
    for (s, word) in [
        ("access plus x days", "x"),
        ("access plus -1 days", "-1"),
        ("access plus 1.5 days", "1.5"),
        ("access plus days", "days"),
        ("access plus 1 days plus 2 hours", "plus"),
    ] {
        assert_eq!(
            err(s),
            ExpireParseError::BadNumber {
                input: s.into(),
                number: word.into()
            },
            "{s}"
        );
    }
}

#[test]
fn missing_unit() {
    assert_eq!(
        err("access plus 1"),
        ExpireParseError::MissingUnit {
            input: "access plus 1".into(),
            number: "1".into()
        }
    );
    assert!(matches!(
        err("access plus 1 2 days"),
        ExpireParseError::MissingUnit { .. }
    ));
    assert!(matches!(
        err("access plus 1 days 3"),
        ExpireParseError::MissingUnit { .. }
    ));
}

#[test]
fn unknown_unit() {
    let e = err("access plus 1 mounths");
    assert_eq!(
        e,
        ExpireParseError::UnknownUnit {
            input: "access plus 1 mounths".into(),
            unit: "mounths".into()
        }
    );
    assert!(e
        .to_string()
        .starts_with("\"access plus 1 mounths\": unknown unit \"mounths\""));
    assert!(matches!(
        err("access plus 1 Days"),
        ExpireParseError::UnknownUnit { .. }
    ));
    assert!(matches!(
        err("access plus 1 d"),
        ExpireParseError::UnknownUnit { .. }
    ));
    assert!(matches!(
        err("access plus 1 fortnights"),
        ExpireParseError::UnknownUnit { .. }
    ));
    assert_eq!(
        err("access plus 1 days, 2 hours"),
        ExpireParseError::UnknownUnit {
            input: "access plus 1 days, 2 hours".into(),
            unit: "days,".into()
        }
    );
}

#[test]
fn too_long() {
    assert_eq!(secs("access plus 2147483648 seconds"), MAX_EXPIRE_SECONDS);
    for s in [
        "access plus 2147483649 seconds",
        "access plus 69 years",
        "access plus 99999999999999999999999 seconds",
        "access plus 18446744073709551615 years",
    ] {
        assert!(matches!(err(s), ExpireParseError::TooLong { .. }), "{s}");
    }
}

// ---- the module ----

fn vhost() -> VhostInfo {
    VhostInfo {
        index: 0,
        names: vec!["site.test".into()],
        document_root: std::env::temp_dir(),
    }
}

fn build(json: serde_json::Value) -> Result<Expires, String> {
    let cfg: ExpiresConfig = serde_json::from_value(json).map_err(|e| e.to_string())?;
    let v = vhost();
    let shared = SharedState::default();
    let cx = BuildContext {
        vhost: &v,
        config_dir: std::path::Path::new("."),
        shared: &shared,
        rule_match: None,
        upstreams: &tessera_core::upstream::Upstreams::default(),
    };
    Expires::build(cfg, &cx)
}

fn response(status: u16, headers: &[(&str, &str)]) -> HttpResponse {
    let mut res = HttpResponse::new(StatusCode::from_u16(status).unwrap());
    for (n, v) in headers {
        res.headers_mut().append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    res
}

fn run_method(m: &Expires, method: Method, path: &str, res: &mut HttpResponse) {
    let req = TestRequest::default()
        .method(method)
        .uri(path)
        .to_http_request();
    let v = vhost();
    let mut cx = Ctx::new(&req, &v, Cow::Owned(path.to_owned()));
    m.on_response(&mut cx, res);
}

fn run(m: &Expires, path: &str, res: &mut HttpResponse) {
    run_method(m, Method::GET, path, res);
}

fn values(res: &HttpResponse, name: &str) -> Vec<String> {
    res.headers()
        .get_all(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

fn cache_control(res: &HttpResponse) -> Option<String> {
    let v = values(res, "cache-control");
    assert!(v.len() <= 1, "one Cache-Control line: {v:?}");
    v.into_iter().next()
}

fn expires_at(res: &HttpResponse) -> u64 {
    let v = res
        .headers()
        .get("expires")
        .expect("Expires")
        .to_str()
        .unwrap();
    assert!(v.ends_with(" GMT") && v.len() == 29, "IMF-fixdate: {v}");
    unix_secs(httpdate::parse_http_date(v).unwrap())
}

fn now() -> u64 {
    unix_secs(SystemTime::now())
}

/// Expires must equal now + max-age (allowing the clock to tick once).
fn assert_agree(res: &HttpResponse, before: u64) {
    let cc = cache_control(res).unwrap();
    let age: u64 = cc.rsplit("max-age=").next().unwrap().parse().unwrap();
    let at = expires_at(res);
    assert!(at >= before + age && at <= now() + age, "{cc} vs {at}");
}

#[test]
fn url_rules_first_match_in_file_order() {
    let m = build(serde_json::json!({
        "url": {"/images/": "access plus 1 months", "/": "access plus 1 hours"},
        "mime-types": {"image/": "access plus 1 days"},
    }))
    .unwrap();
    let before = now();
    let mut res = response(200, &[("content-type", "image/png")]);
    run(&m, "/images/logo.png", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=2592000"));
    assert_agree(&res, before);

    let mut res = response(200, &[("content-type", "image/png")]);
    run(&m, "/logo.png", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=3600"));
    assert_agree(&res, before);
}

#[test]
fn mime_rules_after_url_rules() {
    let m = build(serde_json::json!({
        "url": {"/static/": "access plus 1 weeks"},
        "mime-types": {
            "text/css": "access plus 2 hours",
            "image/": "access plus 1 days",
            "text/*": "access plus 1 minutes",
        },
    }))
    .unwrap();
    for (ct, expect) in [
        ("text/css; charset=utf-8", Some("max-age=7200")),
        ("TEXT/CSS", Some("max-age=7200")),
        ("image/svg+xml", Some("max-age=86400")),
        ("text/html", Some("max-age=60")),
        ("text/cssx", Some("max-age=60")),
        ("application/json", None),
    ] {
        let mut res = response(200, &[("content-type", ct)]);
        run(&m, "/a", &mut res);
        assert_eq!(cache_control(&res).as_deref(), expect, "{ct}");
    }
    let mut res = response(200, &[("content-type", "text/css")]);
    run(&m, "/static/a.css", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=604800"));
    // No Content-Type: only a catch-all key would match.
    let mut res = response(200, &[]);
    run(&m, "/a.css", &mut res);
    assert_eq!(cache_control(&res), None);
}

#[test]
fn catch_all_mime_key() {
    let m = build(serde_json::json!({"mime-types": {"": "access plus 5 seconds"}})).unwrap();
    let mut res = response(200, &[]);
    run(&m, "/x", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=5"));
}

#[test]
fn not_modified_uses_the_path_type() {
    let m = build(serde_json::json!({"mime-types": {"image/": "access plus 1 days"}})).unwrap();
    let mut res = response(304, &[]);
    run(&m, "/logo.png", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=86400"));
    assert!(res.headers().contains_key("expires"));
}

#[test]
fn only_2xx_and_304() {
    // B40: a 401 challenge or a 404 gets no long max-age.
    let m = build(serde_json::json!({"url": {"/": "access plus 1 days"}})).unwrap();
    for (code, applied) in [
        (200, true),
        (204, true),
        (206, true),
        (304, true),
        (301, false),
        (401, false),
        (403, false),
        (404, false),
        (500, false),
    ] {
        let mut res = response(code, &[]);
        run(&m, "/secret.html", &mut res);
        assert_eq!(cache_control(&res).is_some(), applied, "{code}");
        assert_eq!(res.headers().contains_key("expires"), applied, "{code}");
    }
}

#[test]
fn only_get_and_head() {
    let m = build(serde_json::json!({"url": {"/": "access plus 1 days"}})).unwrap();
    for (method, applied) in [
        (Method::GET, true),
        (Method::HEAD, true),
        (Method::POST, false),
        (Method::PUT, false),
    ] {
        let mut res = response(200, &[]);
        run_method(&m, method.clone(), "/a", &mut res);
        assert_eq!(cache_control(&res).is_some(), applied, "{method}");
    }
}

#[test]
fn never_adds_public() {
    let m = build(serde_json::json!({"url": {"/": "access plus 1 days"}})).unwrap();
    let mut res = response(200, &[]);
    run(&m, "/secret.html", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=86400"));
}

#[test]
fn existing_merge_appends_to_the_same_field() {
    // B41: one Cache-Control field, max-age merged with the extra directives.
    let m = build(
        serde_json::json!({"url": {"/": "access plus 30 days"}, "existing-cache-control": "merge"}),
    )
    .unwrap();
    let before = now();
    let mut res = response(200, &[("cache-control", "public, must-revalidate")]);
    run(&m, "/logo.png", &mut res);
    assert_eq!(
        cache_control(&res).as_deref(),
        Some("public, must-revalidate, max-age=2592000")
    );
    // The default leaves an existing Cache-Control (and Expires) alone.
    let keep = build(serde_json::json!({"url": {"/": "access plus 30 days"}})).unwrap();
    let mut kept = response(200, &[("cache-control", "public, must-revalidate")]);
    run(&keep, "/logo.png", &mut kept);
    assert_eq!(
        cache_control(&kept).as_deref(),
        Some("public, must-revalidate")
    );
    assert_agree(&res, before);

    let mut res = response(
        200,
        &[
            ("cache-control", "public"),
            ("cache-control", "must-revalidate"),
        ],
    );
    run(&m, "/logo.png", &mut res);
    assert_eq!(
        cache_control(&res).as_deref(),
        Some("public, must-revalidate, max-age=2592000")
    );
}

#[test]
fn existing_merge_leaves_explicit_policies() {
    let m = build(serde_json::json!({"url": {"/": "access plus 30 days"}})).unwrap();
    for cc in [
        "max-age=60",
        "no-store",
        "No-Cache",
        "private, no-cache=\"Set-Cookie\"",
    ] {
        let mut res = response(200, &[("cache-control", cc)]);
        run(&m, "/a", &mut res);
        assert_eq!(cache_control(&res).as_deref(), Some(cc));
        assert!(!res.headers().contains_key("expires"), "{cc}");
    }
}

#[test]
fn existing_keep_and_replace() {
    let keep = build(serde_json::json!({
        "url": {"/": "access plus 1 days"},
        "existing-cache-control": "keep",
    }))
    .unwrap();
    let mut res = response(
        200,
        &[
            ("cache-control", "public"),
            ("expires", "Thu, 01 Jan 1970 00:00:00 GMT"),
        ],
    );
    run(&keep, "/a", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("public"));
    assert_eq!(values(&res, "expires"), ["Thu, 01 Jan 1970 00:00:00 GMT"]);
    // keep only concerns responses that already have Cache-Control.
    let mut res = response(200, &[]);
    run(&keep, "/a", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=86400"));

    let replace = build(serde_json::json!({
        "url": {"/": "access plus 1 days"},
        "existing-cache-control": "replace",
    }))
    .unwrap();
    let mut res = response(200, &[("cache-control", "max-age=5, public")]);
    run(&replace, "/a", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=86400"));
    assert_eq!(values(&res, "expires").len(), 1);
}

#[test]
fn modification_base() {
    let m = build(serde_json::json!({"url": {"/": "modification plus 1 hours"}})).unwrap();
    // Modified 10 minutes ago: 50 minutes left.
    let before = now();
    let lm = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(before - 600));
    let mut res = response(200, &[("last-modified", &lm)]);
    run(&m, "/a", &mut res);
    let cc = cache_control(&res).unwrap();
    let age: u64 = cc.strip_prefix("max-age=").unwrap().parse().unwrap();
    assert!((3000 - 1..=3000).contains(&age), "{cc}");
    assert_agree(&res, before);
    assert_eq!(expires_at(&res), before - 600 + 3600);
}

#[test]
fn modification_in_the_past_gives_max_age_zero() {
    let m = build(serde_json::json!({"url": {"/": "modification plus 1 days"}})).unwrap();
    let mut res = response(200, &[("last-modified", "Sun, 06 Nov 1994 08:49:37 GMT")]);
    run(&m, "/a", &mut res);
    assert_eq!(cache_control(&res).as_deref(), Some("max-age=0"));
    assert_eq!(values(&res, "expires"), ["Mon, 07 Nov 1994 08:49:37 GMT"]);
}

#[test]
fn modification_without_last_modified_sets_nothing() {
    let m = build(serde_json::json!({"url": {"/": "modification plus 1 days"}})).unwrap();
    for headers in [&[][..], &[("last-modified", "yesterday")][..]] {
        let mut res = response(200, headers);
        run(&m, "/a", &mut res);
        assert_eq!(cache_control(&res), None);
        assert!(!res.headers().contains_key("expires"));
    }
}

#[test]
fn expires_replaces_an_existing_expires() {
    let m = build(serde_json::json!({"url": {"/": "access plus 1 hours"}})).unwrap();
    let before = now();
    let mut res = response(200, &[("expires", "0")]);
    run(&m, "/a", &mut res);
    assert_eq!(values(&res, "expires").len(), 1);
    assert_agree(&res, before);
}

#[test]
fn expires_value_is_cached_and_correct() {
    let a = expires_value(784_111_777);
    assert_eq!(a, "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(expires_value(784_111_777), a);
    assert_eq!(expires_value(784_111_778), "Sun, 06 Nov 1994 08:49:38 GMT");
    assert_eq!(
        expires_value(MAX_HTTP_DATE),
        "Fri, 31 Dec 9999 23:59:59 GMT"
    );
    assert_eq!(
        max_age_value(u64::from(MAX_EXPIRE_SECONDS)),
        "max-age=2147483648"
    );
}

#[test]
fn build_errors_name_the_key() {
    let e = build(serde_json::json!({"url": {"/images/": "access plus 1 mounths"}}))
        .err()
        .unwrap();
    assert!(
        e.starts_with(r#"url./images/: "access plus 1 mounths": unknown unit "mounths""#),
        "{e}"
    );
    let e = build(serde_json::json!({"mime-types": {"text/css": "later 1 days"}}))
        .err()
        .unwrap();
    assert!(
        e.starts_with(r#"mime-types.text/css: "later 1 days": unknown base"#),
        "{e}"
    );
    let e = build(serde_json::json!({"url": {"images/": "access plus 1 days"}}))
        .err()
        .unwrap();
    assert!(
        e.starts_with("url.images/: a URL path prefix must start"),
        "{e}"
    );
    let e = build(serde_json::json!({"mime-types": {"image": "access plus 1 days"}}))
        .err()
        .unwrap();
    assert!(
        e.starts_with("mime-types.image: expected a MIME type"),
        "{e}"
    );
    let e = build(serde_json::json!({"mime-types": {"text/html; charset=utf-8": "access 1 days"}}))
        .err()
        .unwrap();
    assert!(e.contains("without parameters"), "{e}");
    let e = build(serde_json::json!({"existing-cache-control": "overwrite"}))
        .err()
        .unwrap();
    assert!(e.contains("unknown variant `overwrite`"), "{e}");
    let e = build(serde_json::json!({"mimetypes": {}})).err().unwrap();
    assert!(e.contains("unknown field `mimetypes`"), "{e}");
}

#[test]
fn hooks_none_without_rules() {
    assert_eq!(build(serde_json::json!({})).unwrap().hooks(), Hooks::NONE);
    assert_eq!(
        build(serde_json::json!({"url": {"/": "now 1 day"}}))
            .unwrap()
            .hooks(),
        Hooks::RESPONSE
    );
}

//! `headers`: remove, set and add response header fields per vhost or rule.
//!
//! Mirrors lighttpd `setenv.set-response-header` / `setenv.add-response-header`,
//! nginx `add_header … always` and Cherokee `header_op`. It runs in the response
//! phase, so it also changes the core's own error responses unless `status`
//! restricts it.
//!
//! ```toml
//! [vhost.headers]
//! remove = ["X-Powered-By"]
//! set = { "X-Frame-Options" = "DENY", "X-Content-Type-Options" = "nosniff" }
//! add = { "Vary" = "Accept-Language", "Link" = "</app.css>; rel=preload; as=style" }
//! status = ["2xx", "3xx", "404"]
//! ```
//!
//! Everything (names, values, the status set) is parsed when the configuration is
//! loaded; a request only clones prebuilt [`HeaderName`]s and [`HeaderValue`]s,
//! except when `add` merges into an existing `Vary` or `Cache-Control` field.

use std::fmt;

use bytes::Bytes;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use smallvec::SmallVec;
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use tessera_core::actix_web::HttpResponse;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

/// Options of `[vhost.headers]` (or of a rule's `headers` table).
///
/// Operations run in this order on every response the module applies to:
/// `remove`, then `set`, then `add`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HeadersConfig {
    /// Fields to insert, replacing every existing line of the same name
    /// (lighttpd `setenv.set-response-header`). A table of field name to value,
    /// applied in file order; names are case-insensitive and may appear once.
    /// Default: empty.
    #[serde(default, deserialize_with = "ordered_table")]
    pub set: Vec<(String, String)>,
    /// Field lines to append, keeping existing ones (lighttpd
    /// `setenv.add-response-header`, nginx `add_header`). A table of field name
    /// to value, in file order. `Vary` and `Cache-Control` are list fields
    /// (RFC 9110 §5.3, §12.5.5; RFC 9111 §5.2): their elements are merged into
    /// the existing field as one comma-separated line, and elements already
    /// present (same token or directive name, case-insensitive) are not repeated.
    /// Default: empty.
    #[serde(default, deserialize_with = "ordered_table")]
    pub add: Vec<(String, String)>,
    /// Field names whose lines are all removed. Default: empty.
    #[serde(default)]
    pub remove: Vec<String>,
    /// Statuses the module applies to: classes (`"2xx"`) or exact codes
    /// (`"404"` or `404`). Default (absent): every status, like nginx
    /// `add_header … always`. An empty list is a build error.
    #[serde(default)]
    pub status: Option<Vec<StatusPattern>>,
}

/// One entry of `status`: a status class or one exact status code.
///
/// Written `"2xx"` (class 1xx–5xx, `x` or `X`) or `"404"` / `404` (100–599,
/// RFC 9110 §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusPattern {
    /// Every code of the class `N`xx, `N` in 1..=5.
    Class(u8),
    /// Exactly this code, 100..=599.
    Code(u16),
}

impl StatusPattern {
    /// Parses `"2xx"` or `"404"`.
    ///
    /// # Errors
    /// A one-line reason quoting `s` when it is neither a class 1xx–5xx nor a
    /// code 100–599.
    pub fn parse(s: &str) -> Result<Self, String> {
        let b = s.as_bytes();
        let bad = || {
            format!(
                "invalid status {s:?}: expected a code 100-599 (\"404\") or a class 1xx-5xx (\"2xx\")"
            )
        };
        if b.len() != 3 || !(b'1'..=b'5').contains(&b[0]) {
            return Err(bad());
        }
        if b[1..].eq_ignore_ascii_case(b"xx") {
            return Ok(StatusPattern::Class(b[0] - b'0'));
        }
        match s.parse::<u16>() {
            Ok(code) if b.iter().all(u8::is_ascii_digit) => Ok(StatusPattern::Code(code)),
            _ => Err(bad()),
        }
    }

    /// True when `code` is in this class or is this code.
    pub fn matches(self, code: u16) -> bool {
        match self {
            StatusPattern::Class(c) => code / 100 == u16::from(c),
            StatusPattern::Code(c) => code == c,
        }
    }
}

impl<'de> Deserialize<'de> for StatusPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StatusPattern;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a status code (404 or \"404\") or class (\"2xx\")")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StatusPattern, E> {
                StatusPattern::parse(s).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<StatusPattern, E> {
                match u16::try_from(n) {
                    Ok(c) if (100..=599).contains(&c) => Ok(StatusPattern::Code(c)),
                    _ => Err(E::custom(format!(
                        "invalid status {n}: expected a code 100-599"
                    ))),
                }
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<StatusPattern, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::custom(format!(
                        "invalid status {n}: expected a code 100-599"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Deserializes a table of strings keeping its file order (serde_json is built
/// with `preserve_order`).
fn ordered_table<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of header field names to string values")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut v = Vec::with_capacity(m.size_hint().unwrap_or(0));
            while let Some(entry) = m.next_entry::<String, String>()? {
                v.push(entry);
            }
            Ok(v)
        }
    }
    d.deserialize_map(V)
}

/// Set of status codes 0..640 as a bitmap, one bit per code.
#[derive(Debug, Clone)]
struct StatusSet([u64; 10]);

impl StatusSet {
    fn new(patterns: &[StatusPattern]) -> Self {
        let mut bits = [0u64; 10];
        for code in 100u16..600 {
            if patterns.iter().any(|p| p.matches(code)) {
                bits[usize::from(code / 64)] |= 1 << (code % 64);
            }
        }
        StatusSet(bits)
    }

    fn contains(&self, code: u16) -> bool {
        self.0
            .get(usize::from(code / 64))
            .is_some_and(|w| w & (1 << (code % 64)) != 0)
    }
}

/// A prebuilt `add` operation.
struct AddOp {
    name: HeaderName,
    value: HeaderValue,
    /// For `Vary` and `Cache-Control`: the elements of `value`, merged into the
    /// existing field instead of appending a second line.
    merge: Option<Box<[Box<[u8]>]>>,
}

/// The `headers` module: see the [module documentation](self).
pub struct Headers {
    status: Option<StatusSet>,
    remove: Box<[HeaderName]>,
    set: Box<[(HeaderName, HeaderValue)]>,
    add: Box<[AddOp]>,
}

/// Fields this module refuses to touch: message framing and connection-specific
/// fields belong to the server (RFC 9112 §6, RFC 9110 §7.6.1); a configured
/// `Content-Length` would corrupt streamed responses.
const MANAGED: [HeaderName; 8] = [
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::UPGRADE,
    header::TE,
    header::TRAILER,
    HeaderName::from_static("proxy-connection"),
];

fn parse_name(op: &str, name: &str) -> Result<HeaderName, String> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("{op}: {name:?}: invalid header name"))?;
    if MANAGED.contains(&n) {
        return Err(format!(
            "{op}: {name:?}: managed by the server (message framing or connection), cannot be changed"
        ));
    }
    Ok(n)
}

fn parse_value(op: &str, name: &str, value: &str) -> Result<HeaderValue, String> {
    let v = value.trim_matches([' ', '\t']);
    if v.is_empty() {
        return Err(format!(
            "{op}: {name:?}: empty value (use `remove` to drop a field)"
        ));
    }
    HeaderValue::from_str(v).map_err(|_| format!("{op}: {name:?}: invalid header value {value:?}"))
}

impl ModuleDecl for Headers {
    const NAME: &'static str = "headers";
    type Config = HeadersConfig;

    /// Parses every name and value.
    ///
    /// # Errors
    /// One line naming the operation and the field: an invalid name
    /// (`set: "X Bad": invalid header name`), an invalid or empty value, a
    /// framing or connection field (`Content-Length`, `Transfer-Encoding`,
    /// `Connection`, …), a name given twice in `set`, or an empty `status`.
    fn build(cfg: HeadersConfig, _cx: &BuildContext<'_>) -> Result<Self, String> {
        let status = match cfg.status {
            None => None,
            Some(p) if p.is_empty() => {
                return Err(
                    "status: empty list matches no response (omit it to apply to every status)"
                        .to_owned(),
                )
            }
            Some(p) => Some(StatusSet::new(&p)),
        };
        let remove = cfg
            .remove
            .iter()
            .map(|n| parse_name("remove", n))
            .collect::<Result<_, _>>()?;
        let mut set: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(cfg.set.len());
        for (n, v) in &cfg.set {
            let name = parse_name("set", n)?;
            if set.iter().any(|(s, _)| *s == name) {
                return Err(format!(
                    "set: {n:?}: given twice (field names are case-insensitive)"
                ));
            }
            set.push((name, parse_value("set", n, v)?));
        }
        let mut add = Vec::with_capacity(cfg.add.len());
        for (n, v) in &cfg.add {
            let name = parse_name("add", n)?;
            let value = parse_value("add", n, v)?;
            let merge = (name == header::VARY || name == header::CACHE_CONTROL).then(|| {
                Elements::new(value.as_bytes())
                    .map(Box::<[u8]>::from)
                    .collect()
            });
            add.push(AddOp { name, value, merge });
        }
        Ok(Headers {
            status,
            remove,
            set: set.into(),
            add: add.into(),
        })
    }
}

impl Module for Headers {
    /// [`Hooks::RESPONSE`], or [`Hooks::NONE`] when nothing is configured.
    fn hooks(&self) -> Hooks {
        if self.remove.is_empty() && self.set.is_empty() && self.add.is_empty() {
            Hooks::NONE
        } else {
            Hooks::RESPONSE
        }
    }

    /// Applies `remove`, `set`, `add` in that order when the status matches.
    fn on_response(&self, _cx: &mut Ctx<'_>, res: &mut HttpResponse) {
        if let Some(s) = &self.status {
            if !s.contains(res.status().as_u16()) {
                return;
            }
        }
        let headers = res.headers_mut();
        for name in self.remove.iter() {
            headers.remove(name);
        }
        for (name, value) in self.set.iter() {
            headers.insert(name.clone(), value.clone());
        }
        for op in self.add.iter() {
            match &op.merge {
                None => headers.append(op.name.clone(), op.value.clone()),
                Some(elems) => merge_list(headers, op, elems),
            }
        }
    }
}

/// Merges `elems` into the list field `op.name` as one line: the existing lines'
/// elements in order, then those of `elems` whose key is not present yet.
fn merge_list(headers: &mut HeaderMap, op: &AddOp, elems: &[Box<[u8]>]) {
    let lines = headers.get_all(&op.name).len();
    if lines == 0 {
        headers.insert(op.name.clone(), op.value.clone());
        return;
    }
    let present = |key: &[u8]| {
        headers
            .get_all(&op.name)
            .flat_map(|v| Elements::new(v.as_bytes()))
            .any(|e| element_key(e).eq_ignore_ascii_case(key))
    };
    let missing: SmallVec<[&[u8]; 4]> = elems
        .iter()
        .map(|e| &e[..])
        .filter(|e| !present(element_key(e)))
        .collect();
    if missing.is_empty() && lines == 1 {
        return;
    }
    let mut buf = Vec::with_capacity(128);
    let existing = headers
        .get_all(&op.name)
        .flat_map(|v| Elements::new(v.as_bytes()));
    for e in existing.chain(missing.iter().copied()) {
        if !buf.is_empty() {
            buf.extend_from_slice(b", ");
        }
        buf.extend_from_slice(e);
    }
    if let Ok(v) = HeaderValue::from_maybe_shared(Bytes::from(buf)) {
        headers.insert(op.name.clone(), v);
    }
}

/// The elements of a list-valued field line (RFC 9110 §5.6.1): split at commas
/// outside quoted strings, optional whitespace trimmed, empty elements skipped.
struct Elements<'a> {
    rest: &'a [u8],
}

impl<'a> Elements<'a> {
    fn new(line: &'a [u8]) -> Self {
        Elements { rest: line }
    }
}

impl<'a> Iterator for Elements<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        while !self.rest.is_empty() {
            let r = self.rest;
            let mut i = 0;
            let mut quoted = false;
            while i < r.len() {
                match r[i] {
                    b'\\' if quoted => i += 1,
                    b'"' => quoted = !quoted,
                    b',' if !quoted => break,
                    _ => {}
                }
                i += 1;
            }
            let end = i.min(r.len());
            self.rest = r.get(end + 1..).unwrap_or(&[]);
            let e = trim_ows(&r[..end]);
            if !e.is_empty() {
                return Some(e);
            }
        }
        None
    }
}

/// The key of a list element: a `Vary` field name, or a `Cache-Control`
/// directive name (before `=`).
fn element_key(e: &[u8]) -> &[u8] {
    let end = e.iter().position(|&b| b == b'=').unwrap_or(e.len());
    trim_ows(&e[..end])
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use tessera_core::actix_web::http::StatusCode;
    use tessera_core::actix_web::test::TestRequest;
    use tessera_core::vhost::VhostInfo;
    use tessera_core::SharedState;

    fn vhost() -> VhostInfo {
        VhostInfo {
            index: 0,
            names: vec!["site.test".into()],
            document_root: std::env::temp_dir(),
        }
    }

    fn build(json: serde_json::Value) -> Result<Headers, String> {
        let cfg: HeadersConfig = serde_json::from_value(json).map_err(|e| e.to_string())?;
        let v = vhost();
        let shared = SharedState::default();
        let cx = BuildContext {
            vhost: &v,
            config_dir: std::path::Path::new("."),
            shared: &shared,
            rule_match: None,
            upstreams: &tessera_core::upstream::Upstreams::default(),
        };
        Headers::build(cfg, &cx)
    }

    fn run(m: &Headers, res: &mut HttpResponse) {
        let req = TestRequest::get().uri("/x").to_http_request();
        let v = vhost();
        let mut cx = Ctx::new(&req, &v, Cow::Borrowed("/x"));
        m.on_response(&mut cx, res);
    }

    fn values(res: &HttpResponse, name: &str) -> Vec<String> {
        res.headers()
            .get_all(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
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

    #[test]
    fn set_replaces_every_line() {
        let m = build(serde_json::json!({"set": {"X-Frame-Options": "DENY"}})).unwrap();
        let mut res = response(
            200,
            &[
                ("x-frame-options", "SAMEORIGIN"),
                ("x-frame-options", "ALLOW"),
            ],
        );
        run(&m, &mut res);
        assert_eq!(values(&res, "x-frame-options"), ["DENY"]);
    }

    #[test]
    fn add_appends_a_line() {
        let m = build(serde_json::json!({"add": {"Link": "</a.css>; rel=preload"}})).unwrap();
        let mut res = response(200, &[("link", "</b.js>; rel=preload")]);
        run(&m, &mut res);
        assert_eq!(
            values(&res, "link"),
            ["</b.js>; rel=preload", "</a.css>; rel=preload"]
        );
    }

    #[test]
    fn remove_drops_all_lines() {
        let m = build(serde_json::json!({"remove": ["X-Powered-By"]})).unwrap();
        let mut res = response(200, &[("x-powered-by", "a"), ("x-powered-by", "b")]);
        run(&m, &mut res);
        assert!(values(&res, "x-powered-by").is_empty());
    }

    #[test]
    fn order_is_remove_set_add() {
        let m = build(serde_json::json!({
            "add": {"X-A": "added"},
            "set": {"X-A": "set"},
            "remove": ["X-A"],
        }))
        .unwrap();
        let mut res = response(200, &[("x-a", "old")]);
        run(&m, &mut res);
        assert_eq!(values(&res, "x-a"), ["set", "added"]);
    }

    #[test]
    fn add_vary_merges_into_one_line() {
        // B33: appending to an existing Vary must merge, not emit a second line.
        let m = build(serde_json::json!({"add": {"Vary": "Accept-Language, accept-encoding"}}))
            .unwrap();
        let mut res = response(200, &[("vary", "Accept-Encoding"), ("vary", "Origin")]);
        run(&m, &mut res);
        assert_eq!(
            values(&res, "vary"),
            ["Accept-Encoding, Origin, Accept-Language"]
        );
    }

    #[test]
    fn add_vary_without_existing_inserts() {
        let m = build(serde_json::json!({"add": {"Vary": "Accept-Encoding"}})).unwrap();
        let mut res = response(200, &[]);
        run(&m, &mut res);
        assert_eq!(values(&res, "vary"), ["Accept-Encoding"]);
    }

    #[test]
    fn add_vary_already_present_is_unchanged() {
        let m = build(serde_json::json!({"add": {"Vary": "accept-encoding"}})).unwrap();
        let mut res = response(200, &[("vary", "Accept-Encoding")]);
        run(&m, &mut res);
        assert_eq!(values(&res, "vary"), ["Accept-Encoding"]);
    }

    #[test]
    fn add_cache_control_merges_and_keeps_existing_directives() {
        // B41: one Cache-Control field, not two lines.
        let m = build(
            serde_json::json!({"add": {"Cache-Control": "public, must-revalidate, max-age=60"}}),
        )
        .unwrap();
        let mut res = response(200, &[("cache-control", "max-age=2592000")]);
        run(&m, &mut res);
        assert_eq!(
            values(&res, "cache-control"),
            ["max-age=2592000, public, must-revalidate"]
        );
    }

    #[test]
    fn merge_respects_quoted_commas() {
        let m = build(serde_json::json!({"add": {"Cache-Control": "private"}})).unwrap();
        let mut res = response(200, &[("cache-control", "no-cache=\"Set-Cookie, X-A\"")]);
        run(&m, &mut res);
        assert_eq!(
            values(&res, "cache-control"),
            ["no-cache=\"Set-Cookie, X-A\", private"]
        );
    }

    #[test]
    fn status_filter() {
        let m = build(serde_json::json!({
            "set": {"X-A": "1"},
            "status": ["2xx", "404", 301],
        }))
        .unwrap();
        for (code, applied) in [
            (200, true),
            (204, true),
            (404, true),
            (301, true),
            (302, false),
            (401, false),
            (500, false),
        ] {
            let mut res = response(code, &[]);
            run(&m, &mut res);
            assert_eq!(res.headers().contains_key("x-a"), applied, "{code}");
        }
    }

    #[test]
    fn default_applies_to_every_status() {
        let m = build(serde_json::json!({"set": {"X-A": "1"}})).unwrap();
        for code in [200, 304, 401, 404, 500, 503] {
            let mut res = response(code, &[]);
            run(&m, &mut res);
            assert!(res.headers().contains_key("x-a"), "{code}");
        }
    }

    #[test]
    fn status_patterns_parse() {
        assert_eq!(StatusPattern::parse("2xx"), Ok(StatusPattern::Class(2)));
        assert_eq!(StatusPattern::parse("5XX"), Ok(StatusPattern::Class(5)));
        assert_eq!(StatusPattern::parse("404"), Ok(StatusPattern::Code(404)));
        for bad in ["6xx", "0xx", "2x", "99", "600", "+40", "40x", "", "2xxx"] {
            assert!(StatusPattern::parse(bad).is_err(), "{bad}");
        }
        let e = build(serde_json::json!({"set": {"X-A": "1"}, "status": ["6xx"]}))
            .err()
            .unwrap();
        assert!(e.contains("invalid status \"6xx\""), "{e}");
        let e = build(serde_json::json!({"set": {"X-A": "1"}, "status": [700]}))
            .err()
            .unwrap();
        assert!(e.contains("invalid status 700"), "{e}");
    }

    #[test]
    fn build_errors_name_the_field() {
        let e = build(serde_json::json!({"set": {"X Bad": "1"}}))
            .err()
            .unwrap();
        assert_eq!(e, "set: \"X Bad\": invalid header name");
        let e = build(serde_json::json!({"add": {"X-A": "a\nb"}}))
            .err()
            .unwrap();
        assert_eq!(e, "add: \"X-A\": invalid header value \"a\\nb\"");
        let e = build(serde_json::json!({"remove": ["Bad:Name"]}))
            .err()
            .unwrap();
        assert_eq!(e, "remove: \"Bad:Name\": invalid header name");
        let e = build(serde_json::json!({"set": {"X-A": "  "}}))
            .err()
            .unwrap();
        assert!(e.starts_with("set: \"X-A\": empty value"), "{e}");
        let e = build(serde_json::json!({"set": {"Content-Length": "5"}}))
            .err()
            .unwrap();
        assert!(e.starts_with("set: \"Content-Length\": managed"), "{e}");
        let e = build(serde_json::json!({"set": {"X-A": "1", "x-a": "2"}}))
            .err()
            .unwrap();
        assert!(e.starts_with("set: \"x-a\": given twice"), "{e}");
        let e = build(serde_json::json!({"status": []})).err().unwrap();
        assert!(e.starts_with("status: empty list"), "{e}");
        let e = build(serde_json::json!({"sett": {}})).err().unwrap();
        assert!(e.contains("unknown field `sett`"), "{e}");
    }

    #[test]
    fn values_are_trimmed() {
        let m = build(serde_json::json!({"set": {"X-A": "  v  "}})).unwrap();
        let mut res = response(200, &[]);
        run(&m, &mut res);
        assert_eq!(values(&res, "x-a"), ["v"]);
    }

    #[test]
    fn add_keeps_file_order() {
        let m = build(serde_json::json!({"add": {"X-Z": "1", "x-z": "2", "X-Y": "3"}})).unwrap();
        let mut res = response(200, &[]);
        run(&m, &mut res);
        assert_eq!(values(&res, "x-z"), ["1", "2"]);
    }

    #[test]
    fn hooks_none_when_empty() {
        assert_eq!(build(serde_json::json!({})).unwrap().hooks(), Hooks::NONE);
        assert_eq!(
            build(serde_json::json!({"remove": ["X-A"]}))
                .unwrap()
                .hooks(),
            Hooks::RESPONSE
        );
    }

    #[test]
    fn elements_split() {
        let v: Vec<&[u8]> = Elements::new(b" a, ,b=\"x,\\\"y\" ,c,").collect();
        assert_eq!(v, [&b"a"[..], b"b=\"x,\\\"y\"", b"c"]);
        assert_eq!(element_key(b"max-age = 5"), b"max-age");
        assert_eq!(Elements::new(b"\"unterminated, x\\").count(), 1);
    }
}

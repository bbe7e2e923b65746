//! `expires`: `Cache-Control: max-age` and `Expires` by URL path prefix or MIME
//! type, with lighttpd mod_expire's rule grammar (`expire.url`,
//! `expire.mimetypes`; nginx `expires`).
//!
//! ```toml
//! [vhost.expires]
//! url = { "/images/" = "access plus 1 months", "/" = "access plus 1 hours" }
//! mime-types = { "image/" = "access plus 1 days", "text/css" = "modification plus 2 hours" }
//! existing-cache-control = "merge"
//! ```
//!
//! A matching `GET` or `HEAD` response with status 2xx or 304 gets
//! `Cache-Control: max-age=N` (RFC 9111 §5.2.2.1) and `Expires: <now + N>` as an
//! IMF-fixdate (RFC 9111 §5.3, RFC 9110 §5.6.7), so both always agree. Other
//! statuses (a 401 challenge, a 404) are left alone (case B40), and `public` is
//! never added: RFC 9111 §3.5 keeps shared caches from reusing responses to
//! requests with `Authorization` unless the response opts in.
//!
//! Rules are parsed when the configuration is loaded; for an `access` rule the
//! `max-age=N` value is prebuilt and the `Expires` value is cached per thread and
//! second, so a request does not allocate unless a `Cache-Control` must be merged.

use std::cell::RefCell;
use std::fmt;
use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderValue};
use tessera_core::actix_web::http::{Method, StatusCode};
use tessera_core::actix_web::HttpResponse;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

/// Longest lifetime a rule may give: 2^31 seconds (about 68 years), the largest
/// delta-seconds caches must handle (RFC 9111 §1.2.2).
pub const MAX_EXPIRE_SECONDS: u32 = 1 << 31;

/// Last second an IMF-fixdate can express: 9999-12-31T23:59:59Z.
const MAX_HTTP_DATE: u64 = 253_402_300_799;

/// What a rule's lifetime is counted from (lighttpd mod_expire `<base>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireBase {
    /// `access` or `now`: the time the response is sent.
    Access,
    /// `modification`: the response's `Last-Modified` time.
    Modification,
}

/// A parsed rule such as `"access plus 1 months 2 days"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpireSpec {
    /// The time the lifetime counts from.
    pub base: ExpireBase,
    /// The lifetime in seconds, at most [`MAX_EXPIRE_SECONDS`].
    pub seconds: u32,
}

/// Why an expire rule could not be parsed. Each message quotes the whole input,
/// for example `"access plus 1 mounths": unknown unit "mounths"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpireParseError {
    /// The rule is empty or only whitespace.
    #[error("{input:?}: empty, expected \"<base> plus <number> <unit> ...\"")]
    Empty {
        /// The rule as given.
        input: String,
    },
    /// The first word is not `access`, `now` or `modification`.
    #[error("{input:?}: unknown base {base:?}, expected access, now or modification")]
    UnknownBase {
        /// The rule as given.
        input: String,
        /// The offending word.
        base: String,
    },
    /// No `<number> <unit>` pair follows the base.
    #[error("{input:?}: no \"<number> <unit>\" pair")]
    MissingDuration {
        /// The rule as given.
        input: String,
    },
    /// A number is not a plain decimal integer (`-1`, `1.5`, `x`).
    #[error("{input:?}: bad number {number:?}, expected decimal digits")]
    BadNumber {
        /// The rule as given.
        input: String,
        /// The offending word.
        number: String,
    },
    /// A number has no unit after it.
    #[error("{input:?}: missing unit after {number:?}")]
    MissingUnit {
        /// The rule as given.
        input: String,
        /// The number without a unit.
        number: String,
    },
    /// A unit is not one of seconds, minutes, hours, days, weeks, months, years.
    #[error(
        "{input:?}: unknown unit {unit:?}, expected seconds, minutes, hours, days, weeks, months or years"
    )]
    UnknownUnit {
        /// The rule as given.
        input: String,
        /// The offending word.
        unit: String,
    },
    /// The total exceeds [`MAX_EXPIRE_SECONDS`].
    #[error("{input:?}: longer than 2147483648 seconds (about 68 years, RFC 9111 §1.2.2)")]
    TooLong {
        /// The rule as given.
        input: String,
    },
}

/// Seconds per unit word (lighttpd mod_expire): singular, plural, and lighttpd's
/// `sec`/`secs`/`min`/`mins`. A month is 30 days, a year 365 days.
fn unit_seconds(unit: &str) -> Option<u64> {
    Some(match unit {
        "second" | "seconds" | "sec" | "secs" => 1,
        "minute" | "minutes" | "min" | "mins" => 60,
        "hour" | "hours" => 3_600,
        "day" | "days" => 86_400,
        "week" | "weeks" => 604_800,
        "month" | "months" => 2_592_000,
        "year" | "years" => 31_536_000,
        _ => return None,
    })
}

/// Parses a lighttpd mod_expire rule: `<base> [plus] (<number> <unit>)+`.
///
/// `<base>` is `access`, `now` (the same) or `modification`; `plus` is optional,
/// as in lighttpd and Apache mod_expires; `<number>` is a decimal integer;
/// `<unit>` is `second(s)`, `minute(s)`, `hour(s)`, `day(s)`, `week(s)`,
/// `month(s)` (30 days), `year(s)` (365 days), or lighttpd's `sec(s)`/`min(s)`.
/// Words are case-sensitive and separated by any whitespace; a unit may follow
/// its number directly (`2min1sec`), as lighttpd allows. The pairs are summed.
///
/// ```
/// use tessera_modules::expires::{parse_expire, ExpireBase};
/// let s = parse_expire("access plus 1 months 2 days").unwrap();
/// assert_eq!((s.base, s.seconds), (ExpireBase::Access, 30 * 86400 + 2 * 86400));
/// ```
///
/// # Errors
/// [`ExpireParseError`] quoting the input: empty, unknown base, no pair, bad
/// number, missing or unknown unit, or a total over [`MAX_EXPIRE_SECONDS`].
pub fn parse_expire(s: &str) -> Result<ExpireSpec, ExpireParseError> {
    let input = || s.to_owned();
    let rest = s.trim_start();
    if rest.is_empty() {
        return Err(ExpireParseError::Empty { input: input() });
    }
    let (base_word, mut rest) = split_word(rest);
    let base = match base_word {
        "access" | "now" => ExpireBase::Access,
        "modification" => ExpireBase::Modification,
        _ => {
            return Err(ExpireParseError::UnknownBase {
                input: input(),
                base: base_word.to_owned(),
            })
        }
    };
    rest = rest.trim_start();
    if let ("plus", after) = split_word(rest) {
        rest = after.trim_start();
    }
    if rest.is_empty() {
        return Err(ExpireParseError::MissingDuration { input: input() });
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        // <number>: the run up to whitespace or the first letter.
        let end = rest
            .find(|c: char| c.is_whitespace() || c.is_alphabetic())
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(end);
        if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
            let word = if num.is_empty() {
                split_word(rest).0
            } else {
                num
            };
            return Err(ExpireParseError::BadNumber {
                input: input(),
                number: word.to_owned(),
            });
        }
        let n: u64 = num
            .parse()
            .map_err(|_| ExpireParseError::TooLong { input: input() })?;
        // <unit>: the run up to whitespace or the next digit.
        let after = after.trim_start();
        let end = after
            .find(|c: char| c.is_whitespace() || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(end);
        if unit.is_empty() {
            return Err(ExpireParseError::MissingUnit {
                input: input(),
                number: num.to_owned(),
            });
        }
        let mult = unit_seconds(unit).ok_or_else(|| ExpireParseError::UnknownUnit {
            input: input(),
            unit: unit.to_owned(),
        })?;
        total = n
            .checked_mul(mult)
            .and_then(|x| x.checked_add(total))
            .filter(|&t| t <= u64::from(MAX_EXPIRE_SECONDS))
            .ok_or_else(|| ExpireParseError::TooLong { input: input() })?;
        rest = after.trim_start();
    }
    Ok(ExpireSpec {
        base,
        seconds: u32::try_from(total).expect("checked against MAX_EXPIRE_SECONDS"),
    })
}

/// The first whitespace-delimited word of `s` (which starts with a non-space)
/// and the rest.
fn split_word(s: &str) -> (&str, &str) {
    s.split_at(s.find(char::is_whitespace).unwrap_or(s.len()))
}

/// What to do when the response already has `Cache-Control`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExistingCacheControl {
    /// Leave it alone if it has `max-age`, `no-store` or `no-cache`; otherwise
    /// append `max-age=N` to the same single field (`public, must-revalidate,
    /// max-age=2592000`, case B41) and set `Expires`.
    Merge,
    /// Leave `Cache-Control` and `Expires` alone entirely (lighttpd's
    /// behaviour). The default.
    #[default]
    Keep,
    /// Replace it with `max-age=N` and set `Expires`.
    Replace,
}

/// Options of `[vhost.expires]` (or of a rule's `expires` table).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ExpiresConfig {
    /// URL path prefix to rule (lighttpd `expire.url`), tried in file order
    /// against the decoded, normalized path; the first match wins. Prefixes
    /// start with `/` and compare case-sensitively. Default: empty.
    #[serde(default, deserialize_with = "ordered_table")]
    pub url: Vec<(String, String)>,
    /// MIME type or prefix to rule (lighttpd `expire.mimetypes`), tried in file
    /// order after the `url` rules against the response's `Content-Type` without
    /// parameters, case-insensitively (RFC 9110 §8.3.1). A key ending in `/` or
    /// `*` is a prefix (`image/`, `image/*`), `""` or `*/*` matches every
    /// response (even one without `Content-Type`), any other key (`text/css`)
    /// matches exactly. A 304 without `Content-Type` is matched by the type its
    /// path's extension suggests. Default: empty.
    #[serde(default, deserialize_with = "ordered_table")]
    pub mime_types: Vec<(String, String)>,
    /// What to do when the response already has `Cache-Control`:
    /// `"keep"` (default), `"merge"` or `"replace"`; see [`ExistingCacheControl`].
    #[serde(default)]
    pub existing_cache_control: ExistingCacheControl,
}

/// Deserializes a table of strings keeping its file order (serde_json is built
/// with `preserve_order`).
fn ordered_table<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of keys to expire rules (\"access plus 1 days\")")
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

/// A rule ready for requests.
struct Rule {
    spec: ExpireSpec,
    /// `max-age=N`, prebuilt for `access` rules.
    max_age: Option<HeaderValue>,
}

impl Rule {
    fn new(table: &str, key: &str, text: &str) -> Result<Self, String> {
        let spec = parse_expire(text).map_err(|e| format!("{table}.{key}: {e}"))?;
        let max_age = (spec.base == ExpireBase::Access).then(|| max_age_value(spec.seconds.into()));
        Ok(Rule { spec, max_age })
    }
}

/// How a `mime-types` key matches a MIME type.
enum MimeMatch {
    /// Every response.
    Any,
    /// Types starting with this (lower-case).
    Prefix(Box<str>),
    /// Exactly this type (lower-case).
    Exact(Box<str>),
}

impl MimeMatch {
    fn new(key: &str) -> Result<Self, String> {
        let k = key.to_ascii_lowercase();
        if k.contains(|c: char| c.is_whitespace() || c == ';' || c == ',') {
            return Err(format!(
                "mime-types.{key}: expected a MIME type without parameters (\"text/css\") or a prefix (\"image/\")"
            ));
        }
        if k.is_empty() || k == "*" || k == "*/*" {
            return Ok(MimeMatch::Any);
        }
        if let Some(p) = k.strip_suffix('*') {
            return Ok(MimeMatch::Prefix(p.into()));
        }
        if k.ends_with('/') {
            return Ok(MimeMatch::Prefix(k.into()));
        }
        if !k.contains('/') {
            return Err(format!(
                "mime-types.{key}: expected a MIME type (\"text/css\"), a prefix (\"image/\") or \"\" for any"
            ));
        }
        Ok(MimeMatch::Exact(k.into()))
    }

    /// Whether `mime` (a media type's bytes, without parameters) matches.
    fn matches(&self, mime: Option<&[u8]>) -> bool {
        match (self, mime) {
            (MimeMatch::Any, _) => true,
            (_, None) => false,
            (MimeMatch::Prefix(p), Some(m)) => m
                .get(..p.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(p.as_bytes())),
            (MimeMatch::Exact(e), Some(m)) => m.eq_ignore_ascii_case(e.as_bytes()),
        }
    }
}

/// The `expires` module: see the [module documentation](self).
pub struct Expires {
    url: Box<[(Box<str>, Rule)]>,
    mime: Box<[(MimeMatch, Rule)]>,
    existing: ExistingCacheControl,
}

impl ModuleDecl for Expires {
    const NAME: &'static str = "expires";
    type Config = ExpiresConfig;

    /// Parses every rule and key.
    ///
    /// # Errors
    /// One line naming the key: a bad rule
    /// (`url./images/: "access plus 1 mounths": unknown unit "mounths"`), a `url`
    /// key not starting with `/`, or a `mime-types` key that is not a MIME type
    /// or prefix.
    fn build(cfg: ExpiresConfig, _cx: &BuildContext<'_>) -> Result<Self, String> {
        let mut url = Vec::with_capacity(cfg.url.len());
        for (k, v) in &cfg.url {
            if !k.starts_with('/') {
                return Err(format!("url.{k}: a URL path prefix must start with \"/\""));
            }
            url.push((Box::from(k.as_str()), Rule::new("url", k, v)?));
        }
        let mut mime = Vec::with_capacity(cfg.mime_types.len());
        for (k, v) in &cfg.mime_types {
            mime.push((MimeMatch::new(k)?, Rule::new("mime-types", k, v)?));
        }
        Ok(Expires {
            url: url.into(),
            mime: mime.into(),
            existing: cfg.existing_cache_control,
        })
    }
}

impl Module for Expires {
    /// [`Hooks::RESPONSE`], or [`Hooks::NONE`] when there are no rules.
    fn hooks(&self) -> Hooks {
        if self.url.is_empty() && self.mime.is_empty() {
            Hooks::NONE
        } else {
            Hooks::RESPONSE
        }
    }

    /// Sets `Cache-Control: max-age=N` and `Expires` on a matching `GET`/`HEAD`
    /// 2xx or 304 response; see [`ExpiresConfig`] and [`ExistingCacheControl`].
    fn on_response(&self, cx: &mut Ctx<'_>, res: &mut HttpResponse) {
        let status = res.status();
        if !(status.is_success() || status == StatusCode::NOT_MODIFIED) {
            return;
        }
        let method = cx.method();
        if method != Method::GET && method != Method::HEAD {
            return;
        }
        let Some(rule) = self.rule_for(cx.path(), res) else {
            return;
        };
        let headers = res.headers_mut();
        let merge = match (headers.contains_key(header::CACHE_CONTROL), self.existing) {
            (false, _) | (true, ExistingCacheControl::Replace) => false,
            (true, ExistingCacheControl::Keep) => return,
            (true, ExistingCacheControl::Merge) => {
                if has_directive(headers, &[b"max-age", b"no-store", b"no-cache"]) {
                    return;
                }
                true
            }
        };
        let now = unix_secs(SystemTime::now());
        let seconds = u64::from(rule.spec.seconds);
        let (max_age, expires_at) = match rule.spec.base {
            ExpireBase::Access => (seconds, now + seconds),
            ExpireBase::Modification => {
                let Some(modified) = headers
                    .get(header::LAST_MODIFIED)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| httpdate::parse_http_date(v).ok())
                else {
                    return;
                };
                let at = unix_secs(modified) + seconds;
                if at <= now {
                    (0, at)
                } else {
                    let age = (at - now).min(u64::from(MAX_EXPIRE_SECONDS));
                    (age, now + age)
                }
            }
        };
        // An IMF-fixdate ends with year 9999; keep max-age and Expires in step.
        let (max_age, expires_at) = if expires_at > MAX_HTTP_DATE {
            (MAX_HTTP_DATE.saturating_sub(now), MAX_HTTP_DATE)
        } else {
            (max_age, expires_at)
        };
        let cache_control = if merge {
            match merged_cache_control(headers, max_age) {
                Some(v) => v,
                None => return,
            }
        } else {
            match &rule.max_age {
                Some(v) if max_age == seconds => v.clone(),
                _ => max_age_value(max_age),
            }
        };
        headers.insert(header::CACHE_CONTROL, cache_control);
        headers.insert(header::EXPIRES, expires_value(expires_at));
    }
}

impl Expires {
    /// The first `url` rule whose prefix starts `path`, else the first
    /// `mime-types` rule matching the response's MIME type.
    fn rule_for(&self, path: &str, res: &HttpResponse) -> Option<&Rule> {
        if let Some((_, r)) = self.url.iter().find(|(p, _)| path.starts_with(&**p)) {
            return Some(r);
        }
        if self.mime.is_empty() {
            return None;
        }
        // the extensions (a map) are looked at only when the field is absent
        let ext;
        // a multipart 206 is of the type of its parts (RFC 9110 §15.3.7.2)
        let ct = match res.headers().get(header::CONTENT_TYPE) {
            Some(v)
                if !(res.status() == StatusCode::PARTIAL_CONTENT
                    && v.as_bytes().starts_with(b"multipart/byteranges")) =>
            {
                Some(v)
            }
            _ => {
                ext = res.extensions();
                ext.get::<crate::static_file::NotModifiedType>()
                    .map(|t| &t.0)
            }
        };
        let mime = match ct {
            Some(v) => {
                let v = v.as_bytes();
                let end = v.iter().position(|&b| b == b';').unwrap_or(v.len());
                Some(v[..end].trim_ascii())
            }
            // A 304 has no Content-Type (RFC 9110 §15.4.5): static-file says
            // which the 200 would have had; otherwise the path's extension.
            None if res.status() == StatusCode::NOT_MODIFIED => {
                mime_guess::from_path(path).first_raw().map(str::as_bytes)
            }
            None => None,
        };
        self.mime
            .iter()
            .find(|(m, _)| m.matches(mime))
            .map(|(_, r)| r)
    }
}

/// True when any `Cache-Control` line has one of `names` as a directive.
fn has_directive(headers: &HeaderMap, names: &[&[u8]]) -> bool {
    headers
        .get_all(header::CACHE_CONTROL)
        .flat_map(|v| Elements::new(v.as_bytes()))
        .any(|e| {
            let key = directive_name(e);
            names.iter().any(|n| key.eq_ignore_ascii_case(n))
        })
}

/// The existing `Cache-Control` lines joined as one, with `max-age=N` appended.
fn merged_cache_control(headers: &HeaderMap, max_age: u64) -> Option<HeaderValue> {
    let mut buf = Vec::with_capacity(96);
    for e in headers
        .get_all(header::CACHE_CONTROL)
        .flat_map(|v| Elements::new(v.as_bytes()))
    {
        buf.extend_from_slice(e);
        buf.extend_from_slice(b", ");
    }
    write!(buf, "max-age={max_age}").ok()?;
    HeaderValue::from_maybe_shared(Bytes::from(buf)).ok()
}

/// `max-age=N` (RFC 9111 §5.2.2.1).
fn max_age_value(seconds: u64) -> HeaderValue {
    let mut buf = [0u8; 32];
    let mut w = &mut buf[..];
    write!(w, "max-age={seconds}").expect("fits: at most 28 bytes");
    let len = 32 - w.len();
    HeaderValue::from_bytes(&buf[..len]).expect("ASCII")
}

thread_local! {
    /// The last `Expires` value built on this thread, by its Unix second.
    static EXPIRES_CACHE: RefCell<Option<(u64, HeaderValue)>> = const { RefCell::new(None) };
}

/// `at` (Unix seconds, at most [`MAX_HTTP_DATE`]) as an IMF-fixdate, cached per
/// thread for the last second asked.
fn expires_value(at: u64) -> HeaderValue {
    EXPIRES_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if let Some((s, v)) = &*c {
            if *s == at {
                return v.clone();
            }
        }
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(at));
        let v = HeaderValue::try_from(date).expect("an HTTP-date is ASCII");
        *c = Some((at, v.clone()));
        v
    })
}

/// Whole seconds since the Unix epoch, 0 before it.
fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
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

/// A `Cache-Control` directive's name (before `=`).
fn directive_name(e: &[u8]) -> &[u8] {
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
mod tests;

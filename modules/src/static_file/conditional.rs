//! Conditional requests (RFC 9110 §13): ETag comparison (§8.8.3.2) and the
//! evaluation order of §13.2.2.

use std::time::SystemTime;

use tessera_core::actix_web::http::header::{self, HeaderMap};

/// The outcome of evaluating the preconditions of a GET or HEAD.
#[derive(Debug, PartialEq, Eq)]
pub enum Precondition {
    /// Serve the representation (Range may still apply).
    Proceed,
    /// 304 Not Modified (§15.4.5).
    NotModified,
    /// 412 Precondition Failed (§15.5.13).
    Failed,
}

/// Iterates the entity-tags of a list-valued field over all its lines:
/// `(weak, opaque)` where `opaque` includes the quotes. Stops at the first malformed
/// element (the rest of that field is ignored). Works on bytes: an entity-tag
/// may carry obs-text (RFC 9110 §8.8.3), which `to_str` refuses.
fn tags(headers: &HeaderMap, name: header::HeaderName) -> impl Iterator<Item = (bool, &[u8])> {
    headers
        .get_all(name)
        .flat_map(|v| TagIter { rest: v.as_bytes() })
}

struct TagIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for TagIter<'a> {
    type Item = (bool, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let skip = self
            .rest
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b','))
            .count();
        let s = &self.rest[skip..];
        if s.is_empty() {
            return None;
        }
        let (weak, s) = match s.strip_prefix(b"W/") {
            Some(t) => (true, t),
            None => (false, s),
        };
        if !s.starts_with(b"\"") {
            self.rest = b"";
            return None;
        }
        let end = s[1..].iter().position(|&c| c == b'"')? + 2;
        self.rest = &s[end..];
        Some((weak, &s[..end]))
    }
}

fn is_star(headers: &HeaderMap, name: header::HeaderName) -> bool {
    headers
        .get(name)
        .is_some_and(|v| v.as_bytes().trim_ascii() == b"*")
}

/// Parses an HTTP-date (RFC 9110 §5.6.7: IMF-fixdate and the two obsolete forms);
/// `None` when malformed, in which case the condition is ignored (§13.1.3, §13.1.4).
fn date(headers: &HeaderMap, name: header::HeaderName) -> Option<SystemTime> {
    let v = headers.get(name)?.to_str().ok()?;
    httpdate::parse_http_date(v.trim()).ok()
}

/// True when `tag` is `etag` or the tag of one of its content-coded variants
/// (`"…-gzip"`, `"…-br"`, `"…-zstd"`, as the `compress` module makes them): the
/// same file version, so If-Match holds for it (RFC 9110 §13.1.1 compares with
/// the selected representation's tag).
fn same_version(tag: &[u8], etag: &str) -> bool {
    let etag = etag.as_bytes();
    if tag == etag {
        return true;
    }
    let (Some(t), Some(e)) = (tag.strip_suffix(b"\""), etag.strip_suffix(b"\"")) else {
        return false;
    };
    t.strip_prefix(e)
        .is_some_and(|suffix| matches!(suffix, b"-gzip" | b"-br" | b"-zstd"))
}

/// Evaluates If-Match, If-Unmodified-Since, If-None-Match and If-Modified-Since in
/// the order of RFC 9110 §13.2.2, for a GET or HEAD of an existing representation.
///
/// `etag` is the current strong ETag with quotes; `last_modified` the modification
/// time truncated to whole seconds (`None` when it cannot be expressed as an
/// HTTP-date). If-None-Match makes If-Modified-Since ignored and If-Match makes
/// If-Unmodified-Since ignored; an If-Modified-Since later than the file's time still
/// gives 304 (§13.1.3); a malformed date is ignored, never 412, and so are both
/// dates when `last_modified` is `None`.
pub fn evaluate(
    headers: &HeaderMap,
    etag: &str,
    last_modified: Option<SystemTime>,
) -> Precondition {
    // Step 1: If-Match, strong comparison.
    if headers.contains_key(header::IF_MATCH) {
        let ok = is_star(headers, header::IF_MATCH)
            || tags(headers, header::IF_MATCH).any(|(weak, t)| !weak && same_version(t, etag));
        if !ok {
            return Precondition::Failed;
        }
    } else if let (Some(d), Some(lm)) = (date(headers, header::IF_UNMODIFIED_SINCE), last_modified)
    {
        // Step 2: If-Unmodified-Since, only without If-Match, and ignored
        // without a modification date (§13.1.4).
        if lm > d {
            return Precondition::Failed;
        }
    }
    // Step 3: If-None-Match, weak comparison.
    if headers.contains_key(header::IF_NONE_MATCH) {
        let matched = is_star(headers, header::IF_NONE_MATCH)
            || tags(headers, header::IF_NONE_MATCH).any(|(_, t)| t == etag.as_bytes());
        return if matched {
            Precondition::NotModified
        } else {
            Precondition::Proceed
        };
    }
    // Step 4: If-Modified-Since, only without If-None-Match.
    if let (Some(d), Some(lm)) = (date(headers, header::IF_MODIFIED_SINCE), last_modified) {
        if lm <= d {
            return Precondition::NotModified;
        }
    }
    Precondition::Proceed
}

/// If-Range (§13.1.5): true when the Range header should be honoured. An
/// entity-tag must match strongly; a date must equal the Last-Modified exactly.
/// Without If-Range, true.
pub fn if_range(headers: &HeaderMap, etag: &str, last_modified: Option<SystemTime>) -> bool {
    let Some(v) = headers.get(header::IF_RANGE).and_then(|v| v.to_str().ok()) else {
        return headers.get(header::IF_RANGE).is_none();
    };
    let v = v.trim();
    if v.starts_with('"') || v.starts_with("W/") {
        return v == etag;
    }
    match (httpdate::parse_http_date(v), last_modified) {
        (Ok(d), Some(lm)) => d == lm,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};
    use tessera_core::actix_web::http::header::{HeaderName, HeaderValue};

    const TAG: &str = "\"abc\"";

    fn h(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        m
    }

    fn lm() -> Option<SystemTime> {
        Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
    }

    fn at(secs: u64) -> String {
        httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn none_match_lists_and_weak() {
        let e = |v| evaluate(&h(&[("if-none-match", v)]), TAG, lm());
        assert_eq!(e("\"x\", \"abc\""), Precondition::NotModified);
        assert_eq!(e("W/\"abc\""), Precondition::NotModified);
        assert_eq!(e("*"), Precondition::NotModified);
        assert_eq!(e("\"x\""), Precondition::Proceed);
        assert_eq!(e("\"a,b\", \"abc\""), Precondition::NotModified);
        // two field lines combine
        let two = h(&[("if-none-match", "\"x\""), ("if-none-match", "\"abc\"")]);
        assert_eq!(evaluate(&two, TAG, lm()), Precondition::NotModified);
    }

    #[test]
    fn lists_with_obs_text_tags_still_match() {
        // An entity-tag may carry obs-text (RFC 9110 §8.8.3): its field line
        // is not ignored.
        let m = h(&[("if-match", "\"abc\", \"caf\u{e9}\"")]);
        assert_eq!(evaluate(&m, TAG, lm()), Precondition::Proceed);
        let m = h(&[("if-none-match", "\"\u{e9}\", \"abc\"")]);
        assert_eq!(evaluate(&m, TAG, lm()), Precondition::NotModified);
    }

    #[test]
    fn if_match_strong() {
        let e = |v| evaluate(&h(&[("if-match", v)]), TAG, lm());
        assert_eq!(e("\"abc\""), Precondition::Proceed);
        assert_eq!(e("*"), Precondition::Proceed);
        assert_eq!(e("W/\"abc\""), Precondition::Failed);
        // the tag of a content-coded variant of the same version
        assert_eq!(e("\"abc-gzip\""), Precondition::Proceed);
        assert_eq!(e("\"abc-other\""), Precondition::Failed);
        assert_eq!(e("\"x\""), Precondition::Failed);
    }

    #[test]
    fn precedence_13_2_2() {
        // If-None-Match present: If-Modified-Since ignored.
        let m = h(&[
            ("if-none-match", "\"x\""),
            ("if-modified-since", &at(1_800_000_000)),
        ]);
        assert_eq!(evaluate(&m, TAG, lm()), Precondition::Proceed);
        // If-Match present: If-Unmodified-Since ignored.
        let m = h(&[("if-match", TAG), ("if-unmodified-since", &at(1_000))]);
        assert_eq!(evaluate(&m, TAG, lm()), Precondition::Proceed);
        let m = h(&[("if-unmodified-since", &at(1_000))]);
        assert_eq!(evaluate(&m, TAG, lm()), Precondition::Failed);
    }

    #[test]
    fn modified_since() {
        let e = |v: &str| evaluate(&h(&[("if-modified-since", v)]), TAG, lm());
        assert_eq!(e(&at(1_700_000_000)), Precondition::NotModified);
        assert_eq!(e(&at(1_800_000_000)), Precondition::NotModified);
        assert_eq!(e(&at(1_600_000_000)), Precondition::Proceed);
        assert_eq!(e("yesterday"), Precondition::Proceed);
        let m = h(&[("if-unmodified-since", "garbage")]);
        assert_eq!(evaluate(&m, TAG, lm()), Precondition::Proceed);
    }

    #[test]
    fn if_range_forms() {
        assert!(if_range(&h(&[]), TAG, lm()));
        assert!(if_range(&h(&[("if-range", TAG)]), TAG, lm()));
        assert!(!if_range(&h(&[("if-range", "W/\"abc\"")]), TAG, lm()));
        assert!(if_range(&h(&[("if-range", &at(1_700_000_000))]), TAG, lm()));
        assert!(!if_range(
            &h(&[("if-range", &at(1_700_000_001))]),
            TAG,
            lm()
        ));
        assert!(!if_range(&h(&[("if-range", "junk")]), TAG, lm()));
    }

    #[test]
    fn unmodified_since_is_ignored_without_a_modification_date() {
        // RFC 9110 §13.1.4: ignored when the resource has no modification date.
        let m = h(&[("if-unmodified-since", &at(1_000))]);
        assert_eq!(evaluate(&m, TAG, None), Precondition::Proceed);
    }

    mod model {
        //! RFC 9110 §13.2.2 written out as a reference model, compared with
        //! [`evaluate`] for every combination of the four fields.
        use super::*;
        use proptest::prelude::*;

        /// One element of an entity-tag list.
        #[derive(Debug, Clone)]
        enum Tag {
            Current,
            Weak,
            /// The tag of a content-coded variant of the same file version.
            Variant,
            Other(String),
        }

        /// An If-Match or If-None-Match field.
        #[derive(Debug, Clone)]
        enum List {
            Star,
            Tags(Vec<Tag>),
        }

        /// An HTTP-date field relative to the file's modification time.
        #[derive(Debug, Clone, Copy)]
        enum Date {
            Before,
            Equal,
            After,
            Malformed,
        }

        const LM: u64 = 1_700_000_000;

        fn tag() -> impl Strategy<Value = Tag> {
            prop_oneof![
                Just(Tag::Current),
                Just(Tag::Weak),
                Just(Tag::Variant),
                "[a-z0-9]{0,4}".prop_map(|s| Tag::Other(format!("o{s}"))),
            ]
        }

        fn list() -> impl Strategy<Value = Option<List>> {
            prop_oneof![
                Just(None),
                Just(Some(List::Star)),
                prop::collection::vec(tag(), 1..4).prop_map(|t| Some(List::Tags(t))),
            ]
        }

        fn date() -> impl Strategy<Value = Option<Date>> {
            prop_oneof![
                Just(None),
                Just(Some(Date::Before)),
                Just(Some(Date::Equal)),
                Just(Some(Date::After)),
                Just(Some(Date::Malformed)),
            ]
        }

        fn show_list(l: &List) -> String {
            match l {
                List::Star => "*".into(),
                List::Tags(t) => t
                    .iter()
                    .map(|t| match t {
                        Tag::Current => TAG.to_owned(),
                        Tag::Weak => format!("W/{TAG}"),
                        Tag::Variant => "\"abc-gzip\"".to_owned(),
                        Tag::Other(s) => format!("\"{s}\""),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        }

        fn show_date(d: Date) -> String {
            match d {
                Date::Before => at(LM - 1),
                Date::Equal => at(LM),
                Date::After => at(LM + 1),
                Date::Malformed => "not a date".into(),
            }
        }

        /// §13.1.1: `*`, or a strong match (a variant's tag counts as the
        /// same version, see `same_version`).
        fn if_match_true(l: &List) -> bool {
            match l {
                List::Star => true,
                List::Tags(t) => t.iter().any(|t| matches!(t, Tag::Current | Tag::Variant)),
            }
        }

        /// §13.1.2: false for `*` or a weak match.
        fn if_none_match_true(l: &List) -> bool {
            match l {
                List::Star => false,
                List::Tags(t) => !t.iter().any(|t| matches!(t, Tag::Current | Tag::Weak)),
            }
        }

        /// §13.1.3 and §13.1.4: a date field with the modification date;
        /// `None` when the field is ignored (malformed, or no date to compare).
        fn not_after(d: Option<Date>, has_lm: bool) -> Option<bool> {
            match d? {
                _ if !has_lm => None,
                Date::Malformed => None,
                Date::Before => Some(false),
                Date::Equal | Date::After => Some(true),
            }
        }

        /// §13.2.2 for GET and HEAD.
        fn model(
            im: Option<&List>,
            ius: Option<Date>,
            inm: Option<&List>,
            ims: Option<Date>,
            has_lm: bool,
        ) -> Precondition {
            // Steps 1 and 2.
            match im {
                Some(l) if !if_match_true(l) => return Precondition::Failed,
                Some(_) => {}
                None => {
                    // "unmodified since": the modification date is not after it.
                    if not_after(ius, has_lm) == Some(false) {
                        return Precondition::Failed;
                    }
                }
            }
            // Steps 3 and 4.
            match inm {
                Some(l) if !if_none_match_true(l) => Precondition::NotModified,
                Some(_) => Precondition::Proceed,
                None if not_after(ims, has_lm) == Some(true) => Precondition::NotModified,
                None => Precondition::Proceed,
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn precedence_matches_the_rfc(
                im in list(), ius in date(), inm in list(), ims in date(), has_lm in any::<bool>()
            ) {
                let mut fields = Vec::new();
                if let Some(l) = &im { fields.push(("if-match", show_list(l))); }
                if let Some(d) = ius { fields.push(("if-unmodified-since", show_date(d))); }
                if let Some(l) = &inm { fields.push(("if-none-match", show_list(l))); }
                if let Some(d) = ims { fields.push(("if-modified-since", show_date(d))); }
                let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let lm = if has_lm { Some(UNIX_EPOCH + Duration::from_secs(LM)) } else { None };
                prop_assert_eq!(
                    evaluate(&h(&pairs), TAG, lm),
                    model(im.as_ref(), ius, inm.as_ref(), ims, has_lm),
                    "{:?}", pairs
                );
            }
        }
    }
}

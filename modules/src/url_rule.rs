//! What `redirect` and `rewrite` share: a rule's regular expression, the subject
//! it is matched against, and its target with captures (lighttpd `url.redirect`
//! and `url.rewrite-*` syntax, Cherokee `redir` `$N`).
//!
//! # Regex
//! fancy-regex syntax (PCRE-like: look-around and backreferences allowed), with
//! the `s` flag set: `.` also matches a newline, which a decoded path may hold
//! (`%0A`), so `^/old/(.*)$` matches every path under `/old/`.
//!
//! # Target syntax
//! - `$0`…`$9`: a capture of the rule's own `regex` (`$0` is the whole match);
//! - `%0`…`%9`: a capture of the `path-regex` of the `[[vhost.rule]]` whose table
//!   holds the module (lighttpd's `%N` for `$HTTP["url"] =~` captures), re-run on
//!   the decoded path; empty when that regex does not match (for example when an
//!   `any` match held through another branch);
//! - `$$` and `%%`: a literal `$` and `%`. Any other `$` or `%` is literal, so a
//!   percent-escape in a target must be written `%%2F` when a digit follows the
//!   `%` (as in lighttpd);
//! - everything else is literal, written in URL form (already percent-encoded);
//!   spaces, `"`, `<`, `>`, `\`, `` ` `` and non-ASCII characters in it are
//!   percent-encoded when the configuration is loaded; control characters are a
//!   build error.
//!
//! # What a capture becomes
//! The path is matched decoded, so a capture taken from it is percent-encoded when
//! it is substituted: with [`tessera_core::path::encode`] before the target's first
//! `?` (a file called `a?b` stays one path segment, `%` becomes `%25`), and as a
//! query value after it (`&`, `=`, `+`, `#` are escaped too). A capture taken from
//! the query (with `match-query = true`) is already encoded: it is copied, with
//! only bytes that may not appear in a URL (controls, space, `"`, `<`, `>`, `\`,
//! `#`, …) escaped, and `?` escaped when it lands in the path. So no capture can
//! bring CR/LF into a `Location`, start a new query or fragment, or turn a path
//! into a network-path reference.

// Absolute targets and Location helpers are only used by `redirect`.
#![cfg_attr(not(feature = "redirect"), allow(dead_code))]

use std::borrow::Cow;

use fancy_regex::{Captures, Regex};
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS, NON_ALPHANUMERIC};
use tessera_core::path::PATH_ENCODE_SET;

/// A decoded capture placed in the query part: RFC 3986 unreserved, `/`, `:`
/// and `@` stay, everything else (`&`, `=`, `+`, `#`, `%`, …) is escaped.
const QUERY_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/')
    .remove(b':')
    .remove(b'@');

/// Already-encoded text (the raw query) placed in the query part: only what may
/// not appear in a URL is escaped; `%` stays.
const RAW_IN_QUERY: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Already-encoded text placed in the path part: as [`RAW_IN_QUERY`], and `?`.
const RAW_IN_PATH: &AsciiSet = &RAW_IN_QUERY.add(b'?');

/// Literal target text: what may not appear in a URL, `%` kept (the text is
/// already in URL form).
const LITERAL: &AsciiSet = RAW_IN_QUERY;

/// Which part of the target a capture lands in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dest {
    /// Before the target's first literal `?` or `#`.
    Path,
    /// After it.
    Query,
}

#[derive(Debug)]
enum Part {
    Lit(Box<str>),
    Own(usize, Dest),
    Rule(usize, Dest),
}

/// A parsed target: literal text and captures, validated against the regexes
/// when the configuration is loaded.
#[derive(Debug)]
pub(crate) struct Target {
    parts: Box<[Part]>,
    /// The target has a literal `?` (it sets the query itself).
    has_query: bool,
    /// The target starts with `scheme://`.
    absolute: bool,
}

/// The text a rule's regex is matched against: the decoded path, or the decoded
/// path, `?` and the raw query when `match-query = true` and the query is not
/// empty.
pub(crate) struct Subject<'a> {
    text: Cow<'a, str>,
    /// Length of the path prefix of `text`.
    path_len: usize,
}

impl<'a> Subject<'a> {
    /// The subject for `path` (decoded) and `query` (raw, without `?`).
    pub(crate) fn new(path: &'a str, query: &str, match_query: bool) -> Self {
        let text = if match_query && !query.is_empty() {
            Cow::Owned(format!("{path}?{query}"))
        } else {
            Cow::Borrowed(path)
        };
        Subject {
            text,
            path_len: path.len(),
        }
    }
}

/// One configured rule: regex, target, and whether the regex sees the query.
#[derive(Debug)]
pub(crate) struct UrlRule {
    regex: Regex,
    pub(crate) target: Target,
    pub(crate) match_query: bool,
}

/// Compiles `regex` with `.` matching newlines too; the error names `key`.
fn compile(key: &str, regex: &str) -> Result<Regex, String> {
    // `(?s)`: `.` also matches a newline, which a decoded path may hold (`%0A`).
    Regex::new(&format!("(?s){regex}")).map_err(|e| {
        let msg = e.to_string().replace('\n', " ");
        format!("{key}: invalid regular expression \"{regex}\": {msg}")
    })
}

/// True for `scheme://` at the start of `s` (RFC 3986 §3.1 scheme).
fn scheme_len(s: &str) -> Option<usize> {
    let colon = s.find("://")?;
    let scheme = &s[..colon];
    let mut b = scheme.bytes();
    let first_ok = b.next().is_some_and(|c| c.is_ascii_alphabetic());
    (first_ok && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))
        .then_some(colon + 3)
}

impl Target {
    /// Parses a target (see the module documentation). `allow_absolute`: whether
    /// `scheme://host/...` is allowed (redirect) or only a path (rewrite).
    ///
    /// # Errors
    /// One line naming `key`: a control character; a target that is neither a
    /// path starting with a single `/` nor (when allowed) `scheme://host…`; a
    /// capture inside the scheme or host.
    fn parse(key: &str, s: &str, allow_absolute: bool) -> Result<Target, String> {
        if s.chars().any(char::is_control) {
            return Err(format!(
                "{key}: \"{}\" contains a control character",
                s.escape_default()
            ));
        }
        let absolute = match scheme_len(s) {
            Some(n) if allow_absolute => {
                let rest = &s[n..];
                let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
                let host = &rest[..host_end];
                if host.is_empty() {
                    return Err(format!("{key}: \"{s}\" has no host"));
                }
                if host.contains(['$', '%']) {
                    return Err(format!(
                        "{key}: \"{s}\": captures are not allowed in the scheme or host; \
                         put them after the first '/'"
                    ));
                }
                true
            }
            Some(_) => {
                return Err(format!(
                    "{key}: \"{s}\" must be a path starting with '/' (internal rewrite)"
                ))
            }
            None if s.starts_with("//") || s.starts_with("/\\") => {
                return Err(format!(
                    "{key}: \"{s}\" is a network-path reference; write \"https://host/...\""
                ))
            }
            None if s.starts_with('/') => false,
            None if allow_absolute => {
                return Err(format!(
                    "{key}: \"{s}\" must start with '/' or with a scheme (\"https://\")"
                ))
            }
            None => return Err(format!("{key}: \"{s}\" must start with '/'")),
        };
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut dest = Dest::Path;
        let mut has_query = false;
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, chars.peek().copied()) {
                ('$' | '%', Some(n)) if n == c => {
                    chars.next();
                    lit.push(c);
                }
                ('$' | '%', Some(d @ '0'..='9')) => {
                    chars.next();
                    if !lit.is_empty() {
                        parts.push(Part::Lit(encode_literal(&lit)));
                        lit.clear();
                    }
                    let n = d as usize - '0' as usize;
                    parts.push(if c == '$' {
                        Part::Own(n, dest)
                    } else {
                        Part::Rule(n, dest)
                    });
                }
                _ => {
                    if c == '?' || c == '#' {
                        has_query |= c == '?';
                        dest = Dest::Query;
                    }
                    lit.push(c);
                }
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(encode_literal(&lit)));
        }
        Ok(Target {
            parts: parts.into(),
            has_query,
            absolute,
        })
    }

    /// True when the target starts with `scheme://`.
    pub(crate) fn is_absolute(&self) -> bool {
        self.absolute
    }

    /// True when the target has a literal `?`: it sets the query itself.
    pub(crate) fn has_query(&self) -> bool {
        self.has_query
    }

    fn max_own(&self) -> Option<usize> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Own(n, _) => Some(*n),
                _ => None,
            })
            .max()
    }

    fn max_rule(&self) -> Option<usize> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Rule(n, _) => Some(*n),
                _ => None,
            })
            .max()
    }

    /// True when the target uses `%N`.
    fn uses_rule(&self) -> bool {
        self.max_rule().is_some()
    }
}

fn encode_literal(s: &str) -> Box<str> {
    Cow::from(utf8_percent_encode(s, LITERAL)).into()
}

fn push_decoded(out: &mut String, s: &str, dest: Dest) {
    let set = match dest {
        Dest::Path => PATH_ENCODE_SET,
        Dest::Query => QUERY_VALUE,
    };
    out.extend(utf8_percent_encode(s, set));
}

fn push_raw(out: &mut String, s: &str, dest: Dest) {
    let set = match dest {
        Dest::Path => RAW_IN_PATH,
        Dest::Query => RAW_IN_QUERY,
    };
    out.extend(utf8_percent_encode(s, set));
}

/// The raw query with bytes that may not appear in a URL escaped (for copying a
/// request's query into a `Location`).
pub(crate) fn push_query(out: &mut String, query: &str) {
    out.extend(utf8_percent_encode(query, RAW_IN_QUERY));
}

impl UrlRule {
    /// Compiles rule `rules[i]`. `rule_regex` is the `path-regex` of the
    /// enclosing `[[vhost.rule]]`, if any (for `%N`).
    ///
    /// # Errors
    /// One line naming `rules[i].regex` or `rules[i].target`: an invalid regular
    /// expression, a malformed target (see [`Target::parse`]), a `$N` above the
    /// regex's groups, a `%N` without a rule `path-regex` or above its groups.
    pub(crate) fn new(
        i: usize,
        regex: &str,
        target: &str,
        match_query: bool,
        rule_regex: Option<&Regex>,
        allow_absolute: bool,
    ) -> Result<UrlRule, String> {
        let rkey = format!("rules[{i}].regex");
        let tkey = format!("rules[{i}].target");
        let regex = compile(&rkey, regex)?;
        let target = Target::parse(&tkey, target, allow_absolute)?;
        if let Some(n) = target.max_own() {
            let groups = regex.captures_len() - 1;
            if n > groups {
                return Err(format!("{tkey}: ${n}, but the regex has {groups} group(s)"));
            }
        }
        if let Some(n) = target.max_rule() {
            let Some(rr) = rule_regex else {
                return Err(format!(
                    "{tkey}: %{n} needs a [[vhost.rule]] whose match has a path-regex \
                     (write %% for a literal '%')"
                ));
            };
            let groups = rr.captures_len() - 1;
            if n > groups {
                return Err(format!(
                    "{tkey}: %{n}, but the rule's path-regex \"{}\" has {groups} group(s) \
                     (write %% for a literal '%')",
                    rr.as_str()
                ));
            }
        }
        Ok(UrlRule {
            regex,
            target,
            match_query,
        })
    }

    /// When the rule matches `path` (decoded) / `query` (raw), writes the expanded
    /// target into `out` (cleared first) and returns true. `rule_regex` is the
    /// enclosing rule's `path-regex` (for `%N`), run on `path`. A regex that
    /// gives up (fancy-regex's backtracking limit) counts as no match.
    pub(crate) fn apply(
        &self,
        path: &str,
        query: &str,
        rule_regex: Option<&Regex>,
        out: &mut String,
    ) -> bool {
        let subject = Subject::new(path, query, self.match_query);
        let Ok(Some(own)) = self.regex.captures(&subject.text) else {
            return false;
        };
        let rule_caps = match rule_regex {
            Some(r) if self.target.uses_rule() => r.captures(path).ok().flatten(),
            _ => None,
        };
        out.clear();
        self.expand(&own, &subject, rule_caps.as_ref(), out);
        true
    }

    fn expand(
        &self,
        own: &Captures<'_>,
        subject: &Subject<'_>,
        rule: Option<&Captures<'_>>,
        out: &mut String,
    ) {
        let text: &str = &subject.text;
        let plen = subject.path_len;
        for part in self.target.parts.iter() {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Own(n, dest) => {
                    let Some(m) = own.get(*n) else { continue };
                    let (s, e) = (m.start(), m.end());
                    if s < plen {
                        push_decoded(out, &text[s..e.min(plen)], *dest);
                    }
                    if s <= plen && e > plen {
                        // the '?' between path and query
                        out.push('?');
                    }
                    if e > plen + 1 {
                        push_raw(out, &text[s.max(plen + 1)..e], *dest);
                    }
                }
                Part::Rule(n, dest) => {
                    if let Some(m) = rule.and_then(|c| c.get(*n)) {
                        push_decoded(out, m.as_str(), *dest);
                    }
                }
            }
        }
    }
}

/// Removes every leading `/` and `\` of a host-relative result and puts back
/// one `/`, so that captures cannot turn it into a network-path reference
/// (`//evil.example`, `/\evil.example`, RFC 3986 §4.2).
pub(crate) fn collapse_leading_slashes(s: &str) -> Cow<'_, str> {
    let rest = s.trim_start_matches(['/', '\\']);
    if rest.len() + 1 == s.len() && s.starts_with('/') {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("/{rest}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(regex: &str, target: &str) -> UrlRule {
        UrlRule::new(0, regex, target, false, None, true).unwrap()
    }

    fn run(r: &UrlRule, path: &str, query: &str) -> Option<String> {
        let mut out = String::new();
        r.apply(path, query, None, &mut out).then_some(out)
    }

    #[test]
    fn own_captures_are_encoded_by_destination() {
        let r = rule("^/old/(.*)$", "/new/$1?from=$1");
        assert_eq!(
            run(&r, "/old/a b/c?d#e%f&g=h", "").unwrap(),
            "/new/a%20b/c%3Fd%23e%25f&g=h?from=a%20b/c%3Fd%23e%25f%26g%3Dh"
        );
        assert_eq!(run(&r, "/other", ""), None);
        assert_eq!(
            run(&r, "/old/\r\nX: y", "").unwrap(),
            "/new/%0D%0AX:%20y?from=%0D%0AX:%20y"
        );
    }

    #[test]
    fn escapes_and_literals() {
        let r = rule("^/(a)$", "/x$$1%%2F/$1 ü\"<>");
        assert_eq!(run(&r, "/a", "").unwrap(), "/x$1%2F/a%20%C3%BC%22%3C%3E");
        let r = rule("^/(a)$", "/50%/$");
        assert_eq!(run(&r, "/a", "").unwrap(), "/50%/$");
    }

    #[test]
    fn query_subject() {
        let r = UrlRule::new(0, "^/s\\?q=(.*)$", "/find/$1", true, None, true).unwrap();
        assert_eq!(run(&r, "/s", "q=a%20b?c").unwrap(), "/find/a%20b%3Fc");
        assert_eq!(run(&r, "/s", ""), None);
        let r = UrlRule::new(0, "^/s(.*)$", "/t$1", true, None, true).unwrap();
        assert_eq!(run(&r, "/s x", "a=<1>").unwrap(), "/t%20x?a=%3C1%3E");
        // without match-query the query is not part of the subject
        let r = rule("^/s(.*)$", "/t$1");
        assert_eq!(run(&r, "/s", "a=1").unwrap(), "/t");
    }

    #[test]
    fn rule_captures() {
        let rr = Regex::new("^/r/([a-z]+)").unwrap();
        let r = UrlRule::new(0, "^/r/(.*)$", "/x/%1/$1", false, Some(&rr), true).unwrap();
        let mut out = String::new();
        assert!(r.apply("/r/abc/d e", "", Some(&rr), &mut out));
        assert_eq!(out, "/x/abc/abc/d%20e");
        // the rule regex does not match: %1 is empty
        let r = UrlRule::new(0, "^/(.*)$", "/x/%1/$1", false, Some(&rr), true).unwrap();
        assert!(r.apply("/Z", "", Some(&rr), &mut out));
        assert_eq!(out, "/x//Z");
    }

    #[test]
    fn build_errors_name_the_key() {
        let e = |re: &str, t: &str, abs| UrlRule::new(2, re, t, false, None, abs).unwrap_err();
        assert!(e("(", "/x", true).starts_with("rules[2].regex: invalid regular expression"));
        assert!(e("^/(a)$", "/x/$2", true).starts_with("rules[2].target: $2"));
        assert!(e("^/(a)$", "/x/%20", true).contains("%2 needs a [[vhost.rule]]"));
        assert!(e("^/", "x/y", true).contains("must start with '/' or with a scheme"));
        assert!(e("^/", "//evil.example/", true).contains("network-path"));
        assert!(e("^/", "/\\evil.example/", true).contains("network-path"));
        assert!(e("^/(.*)$", "https://$1.example.org/", true).contains("scheme or host"));
        assert!(e("^/(.*)$", "https://example.org$1", true).contains("scheme or host"));
        assert!(e("^/", "https:///x", true).contains("no host"));
        assert!(e("^/", "/x\r\nSet-Cookie: a", true).contains("control character"));
        assert!(e("^/", "https://example.org/", false).contains("must be a path"));
        let rr = Regex::new("^/(a)").unwrap();
        let err = UrlRule::new(0, "^/", "/%2", false, Some(&rr), true).unwrap_err();
        assert!(err.contains("%2, but the rule's path-regex"), "{err}");
    }

    #[test]
    fn absolute_targets() {
        let r = rule("^/(.*)$", "https://example.org/$1");
        assert!(r.target.is_absolute());
        assert_eq!(
            run(&r, "//evil.example", "").unwrap(),
            "https://example.org//evil.example"
        );
    }

    #[test]
    fn collapse() {
        assert_eq!(collapse_leading_slashes("/a//b"), "/a//b");
        assert_eq!(collapse_leading_slashes("//evil.example"), "/evil.example");
        assert_eq!(collapse_leading_slashes("/\\evil.example"), "/evil.example");
        assert_eq!(collapse_leading_slashes("/\\/\\x"), "/x");
        assert_eq!(collapse_leading_slashes("/"), "/");
    }
}

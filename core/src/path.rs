//! The request path as modules and rules see it: percent-decoded exactly once
//! (RFC 3986 §2.1, §2.4) and normalized so that it can never name anything above
//! the document root.
//!
//! - `%XX` is decoded once; `%25` gives a literal `%` that is never decoded again.
//!   A malformed escape (`%4`, `%zz`) or a decoded NUL is an error (400).
//! - A decoded `%2F` is a `/` like any other (the consensus for static servers:
//!   `/docs%2F` is the directory `docs/`).
//! - Empty segments and `.` are dropped, `..` removes the previous segment; a `..`
//!   that would climb above the root is an error (400, as nginx answers).
//! - A trailing `/` is kept: it is how a directory is asked for.
//! - `\` is an ordinary character on Unix, so `..\..\x` names a file literally
//!   called that, inside the root.
//! - The result must be UTF-8 (non-UTF-8 names are not served).

use std::borrow::Cow;

/// Why a request path was refused. Every variant maps to 400 Bad Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path does not start with `/` (origin-form, RFC 9112 §3.2.1).
    #[error("path does not start with '/'")]
    NotAbsolute,
    /// `%` not followed by two hex digits.
    #[error("malformed percent-escape")]
    BadEscape,
    /// A decoded NUL byte.
    #[error("NUL byte in path")]
    Nul,
    /// The decoded bytes are not UTF-8.
    #[error("path is not UTF-8")]
    NotUtf8,
    /// `..` above the root.
    #[error("path climbs above the root")]
    AboveRoot,
}

/// Decodes and normalizes a raw request path (no query). Borrows the input when it
/// is already in normal form (the common case: no allocation).
///
/// # Errors
/// See [`PathError`].
pub fn normalize(raw: &str) -> Result<Cow<'_, str>, PathError> {
    let b = raw.as_bytes();
    if b.first() != Some(&b'/') {
        return Err(PathError::NotAbsolute);
    }
    if is_normal(b) {
        return Ok(Cow::Borrowed(raw));
    }
    let decoded = decode(b)?;
    let mut out = String::with_capacity(decoded.len());
    let ends_with_slash = decoded.ends_with('/');
    for seg in decoded.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                let cut = out.rfind('/').ok_or(PathError::AboveRoot)?;
                out.truncate(cut);
            }
            s => {
                out.push('/');
                out.push_str(s);
            }
        }
    }
    if out.is_empty() || ends_with_slash || decoded.ends_with("/.") || decoded.ends_with("/..") {
        out.push('/');
    }
    Ok(Cow::Owned(out))
}

/// True when the path has no escapes, no empty, `.` or `..` segments.
fn is_normal(b: &[u8]) -> bool {
    if b.contains(&b'%') {
        return false;
    }
    let mut prev_slash = false;
    for (i, &c) in b.iter().enumerate() {
        if c == b'/' {
            if prev_slash {
                return false;
            }
            prev_slash = true;
        } else {
            if prev_slash && c == b'.' {
                let rest = &b[i..];
                if rest == b"."
                    || rest.starts_with(b"./")
                    || rest == b".."
                    || rest.starts_with(b"../")
                {
                    return false;
                }
            }
            prev_slash = false;
        }
    }
    true
}

/// The raw request path as a proxy passes it on: dot segments and empty
/// segments removed, escapes of unreserved characters (`%41`, `%2E`)
/// decoded (RFC 3986 §6.2.2), and `;` escaped (`%3B`), while every other
/// escape (`%2F`, `%20`) stays as the client sent it, as nginx's
/// `proxy_pass` without a URI and lighttpd's mod_proxy keep them.
/// `Some` only when that form, decoded once, is `normal`, the path the
/// rules matched: not after a rewrite, nor where an escaped `/` would give
/// the upstream a dot or empty segment to resolve (`/admin%2F..%2Fx`,
/// checked as `/x`). A literal `;` is escaped because servlet containers
/// cut path parameters before resolving dots (`/x/..;/admin`, `/admin;/s`
/// would reach paths the rules never saw).
/// Borrows `raw` when it is already in that form (no allocation).
pub fn as_sent<'a>(raw: &'a str, normal: &str) -> Option<Cow<'a, str>> {
    if raw == normal && !raw.contains(';') {
        return Some(Cow::Borrowed(raw));
    }
    let b = raw.as_bytes();
    if b.first() != Some(&b'/') {
        return None;
    }
    // escapes of unreserved characters decoded, others kept
    let mut text = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let c = match (
                b.get(i + 1).and_then(|&x| hex(x)),
                b.get(i + 2).and_then(|&x| hex(x)),
            ) {
                (Some(h), Some(l)) => h << 4 | l,
                _ => return None,
            };
            if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
                text.push(char::from(c));
            } else {
                text.push_str(&raw[i..i + 3]);
            }
            i += 3;
        } else if b[i] == b';' {
            text.push_str("%3B");
            i += 1;
        } else {
            let n = raw[i..].chars().next().map_or(1, char::len_utf8);
            text.push_str(&raw[i..i + n]);
            i += n;
        }
    }
    let mut out = String::with_capacity(text.len());
    for seg in text.split('/') {
        match seg {
            "" | "." => {}
            ".." => out.truncate(out.rfind('/')?),
            s => {
                out.push('/');
                out.push_str(s);
            }
        }
    }
    if out.is_empty() || text.ends_with('/') || text.ends_with("/.") || text.ends_with("/..") {
        out.push('/');
    }
    (decode(out.as_bytes()).ok()? == normal).then_some(Cow::Owned(out))
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn decode(b: &[u8]) -> Result<String, PathError> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'%' {
            let (h, l) = match (
                b.get(i + 1).and_then(|&x| hex(x)),
                b.get(i + 2).and_then(|&x| hex(x)),
            ) {
                (Some(h), Some(l)) => (h, l),
                _ => return Err(PathError::BadEscape),
            };
            out.push(h << 4 | l);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    if out.contains(&0) {
        return Err(PathError::Nul);
    }
    String::from_utf8(out).map_err(|_| PathError::NotUtf8)
}

/// Characters left as they are when a decoded path is percent-encoded again for a
/// `Location` or a link: RFC 3986 `pchar` minus `%`, `?`, `#`, `;` and the
/// characters a browser treats specially, plus `/`.
pub const PATH_ENCODE_SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// Percent-encodes a decoded path for use in a URL (a `Location` header, a link).
/// `/folder]` -> `/folder%5D`, `/q?` -> `/q%3F`, `/a%b` -> `/a%25b`.
pub fn encode(path: &str) -> Cow<'_, str> {
    percent_encoding::utf8_percent_encode(path, PATH_ENCODE_SET).into()
}

/// The rest of `path` after `prefix` when the prefix ends at a segment
/// boundary: `prefix` without its trailing `/` must be `path` itself (rest
/// `""`) or be followed by `/` in it (rest `"/…"`). `("/icons/x", "/icons/")`
/// gives `"/x"`, `("/icons", "/icons/")` gives `""`, `("/icons../x", "/icons")`
/// gives `None` (the nginx `alias` off-by-slash hole cannot happen), and the
/// prefixes `""` and `"/"` match every path whole.
pub fn strip_segment_prefix<'p>(path: &'p str, prefix: &str) -> Option<&'p str> {
    let rest = path.strip_prefix(prefix.trim_end_matches('/'))?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_pass_on_as_sent_where_they_mean_the_checked_path() {
        let sent = |raw: &str| {
            let normal = normalize(raw).unwrap();
            as_sent(raw, &normal).map(Cow::into_owned)
        };
        // as sent: reserved escapes, lower-case hex; `;` escaped
        assert_eq!(sent("/a/b;c=d/x").as_deref(), Some("/a/b%3Bc=d/x"));
        assert_eq!(sent("/x/..;/admin/s").as_deref(), Some("/x/..%3B/admin/s"));
        assert_eq!(
            sent("/api/group%2Fproject").as_deref(),
            Some("/api/group%2Fproject")
        );
        assert_eq!(sent("/a%2fb/%20x").as_deref(), Some("/a%2fb/%20x"));
        assert!(matches!(
            as_sent("/plain", "/plain"),
            Some(Cow::Borrowed(_))
        ));
        // unreserved escapes decoded, dot and empty segments removed
        assert_eq!(
            sent("/echo/%41/%2e%2e/b//c/./").as_deref(),
            Some("/echo/b/c/")
        );
        assert_eq!(sent("/a/..").as_deref(), Some("/"));
        // an escaped `/` that a `..` would cross names another path than
        // the one the rules saw: not passed on as sent
        assert_eq!(sent("/a%2Fb/../c"), None);
        // nor where the upstream would find dot or empty segments that
        // the rules never saw
        for hidden in [
            "/admin%2F..%2Fok",
            "/admin%2F%2E%2E%2Fok",
            "/a%2F%2Fb",
            "/a%2F.%2Fb",
        ] {
            assert_eq!(sent(hidden), None, "{hidden}");
        }
        // a rewritten path is not the client's
        assert_eq!(as_sent("/old/x", "/new/x"), None);
    }

    #[test]
    fn segment_prefixes() {
        assert_eq!(strip_segment_prefix("/icons/x", "/icons/"), Some("/x"));
        assert_eq!(strip_segment_prefix("/icons/x", "/icons"), Some("/x"));
        assert_eq!(strip_segment_prefix("/icons", "/icons/"), Some(""));
        assert_eq!(strip_segment_prefix("/icons/", "/icons"), Some("/"));
        assert_eq!(strip_segment_prefix("/icons../x", "/icons"), None);
        assert_eq!(strip_segment_prefix("/iconsx", "/icons/"), None);
        assert_eq!(strip_segment_prefix("/x", "/icons/"), None);
        assert_eq!(strip_segment_prefix("/x", "/"), Some("/x"));
        assert_eq!(strip_segment_prefix("/x", ""), Some("/x"));
    }

    #[test]
    fn normal_paths_borrow() {
        for p in [
            "/",
            "/a",
            "/a/b/",
            "/a.b/c..d",
            "/.well-known/x",
            "/a..",
            "/..a",
        ] {
            assert!(matches!(normalize(p), Ok(Cow::Borrowed(_))), "{p}");
        }
    }

    #[test]
    fn decoding_and_dots() {
        let n = |p| normalize(p).map(|c| c.into_owned());
        assert_eq!(n("/a%20b.txt").unwrap(), "/a b.txt");
        assert_eq!(n("/a+b").unwrap(), "/a+b");
        assert_eq!(n("/pkg_1%253a9.deb").unwrap(), "/pkg_1%3a9.deb");
        assert_eq!(n("/docs%2F").unwrap(), "/docs/");
        assert_eq!(n("//a//b").unwrap(), "/a/b");
        assert_eq!(n("/a/./b/../c").unwrap(), "/a/c");
        assert_eq!(n("/a/..").unwrap(), "/");
        assert_eq!(n("/a/b/.").unwrap(), "/a/b/");
        assert_eq!(n("/%2e%2e%5c..%5cetc").unwrap(), "/..\\..\\etc");
        assert_eq!(n("/%252e%252e/x").unwrap(), "/%2e%2e/x");
        assert_eq!(n("/%C3%BCn%C3%AF.txt").unwrap(), "/ünï.txt");
    }

    #[test]
    fn refusals() {
        assert_eq!(normalize("/../etc/passwd"), Err(PathError::AboveRoot));
        assert_eq!(
            normalize("/..%2f..%2fetc/passwd"),
            Err(PathError::AboveRoot)
        );
        assert_eq!(
            normalize("/%2e%2e/%2e%2e/etc/passwd"),
            Err(PathError::AboveRoot)
        );
        assert_eq!(normalize("/a/../../b"), Err(PathError::AboveRoot));
        assert_eq!(normalize("/%@.exe"), Err(PathError::BadEscape));
        assert_eq!(normalize("/abc%"), Err(PathError::BadEscape));
        assert_eq!(normalize("/abc%4"), Err(PathError::BadEscape));
        assert_eq!(normalize("/a%00b"), Err(PathError::Nul));
        assert_eq!(normalize("/%ff"), Err(PathError::NotUtf8));
        assert_eq!(normalize("*"), Err(PathError::NotAbsolute));
    }

    #[test]
    fn encode_round_trip() {
        assert_eq!(encode("/folder]/"), "/folder%5D/");
        assert_eq!(encode("/snow☃"), "/snow%E2%98%83");
        assert_eq!(encode("/q?"), "/q%3F");
        assert_eq!(encode("/a%b #1"), "/a%25b%20%231");
        for p in ["/a b/ü?#%x", "/x;y"] {
            assert_eq!(normalize(&encode(p)).unwrap(), p);
        }
    }

    mod never_leaves_the_root {
        use super::*;
        use proptest::prelude::*;
        use std::path::{Component, Path};

        /// Path segments, plain and percent-encoded, that a traversal attempt uses.
        const SEGMENTS: &[&str] = &[
            "a",
            "b.txt",
            "",
            ".",
            "..",
            "%2e",
            "%2E%2e",
            ".%2e",
            "%2e%2e%2f",
            "..%2F",
            "%2f",
            "%252e%252e",
            "..\\",
            "%5c..",
            "...",
            ".a",
            "a..",
            "%20",
            "%C3%BC",
        ];

        /// The depth below the root after each decoded segment; `None` when a
        /// `..` would climb above it (the reference model of the rules above).
        fn model_climbs_out(raw: &str) -> bool {
            let decoded = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
            let mut depth = 0i32;
            for seg in decoded.split('/') {
                match seg {
                    "" | "." => {}
                    ".." => {
                        depth -= 1;
                        if depth < 0 {
                            return true;
                        }
                    }
                    _ => depth += 1,
                }
            }
            false
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]
            #[test]
            fn normalized_paths_stay_under_the_root(
                segs in prop::collection::vec(prop::sample::select(SEGMENTS), 0..8),
                slash in any::<bool>(),
            ) {
                let raw = format!("/{}{}", segs.join("/"), if slash { "/" } else { "" });
                let root = Path::new("/srv/www");
                match normalize(&raw) {
                    Ok(n) => {
                        prop_assert!(!model_climbs_out(&raw), "{raw:?} -> {n:?}");
                        let full = root.join(n.trim_start_matches('/'));
                        prop_assert!(full.starts_with(root), "{raw:?} -> {n:?}");
                        prop_assert!(
                            full.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
                            "{raw:?} -> {n:?}"
                        );
                    }
                    Err(e) => prop_assert_eq!(e == PathError::AboveRoot, model_climbs_out(&raw), "{:?}", raw),
                }
            }
        }
    }
}

//! Entry points shared by the fuzz targets in `fuzz/` and the corpus replay
//! test: each takes the fuzzer's bytes and panics when an invariant breaks.
//! Inputs with several fields are text, one field per line, so that corpus
//! files can be read and written by hand.

#[cfg(any(feature = "static-file", feature = "compress", feature = "auth-basic"))]
use tessera_core::actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};

/// Text lines of `data`, or `None` when it is not UTF-8.
fn lines(data: &[u8]) -> Option<std::str::Lines<'_>> {
    std::str::from_utf8(data).ok().map(str::lines)
}

/// A header map with one field line `name: v` per value; `None` when a value
/// cannot be a field value.
#[cfg(any(feature = "static-file", feature = "compress", feature = "auth-basic"))]
fn header_map<'a>(fields: impl IntoIterator<Item = (HeaderName, &'a str)>) -> Option<HeaderMap> {
    let mut m = HeaderMap::new();
    for (name, v) in fields {
        m.append(name, HeaderValue::from_str(v).ok()?);
    }
    Some(m)
}

/// `Range` ([`crate::static_file::range::parse`]). Input: the representation
/// size in decimal, a newline, the field value. Every range lies within the
/// size and is not empty; a set of several adds up to at most the size.
#[cfg(feature = "static-file")]
pub fn range(data: &[u8]) {
    use crate::static_file::range::{parse, RangeRequest, MAX_RANGES};
    let Some(mut l) = lines(data) else { return };
    let Some(size) = l.next().and_then(|s| s.parse::<u64>().ok()) else {
        return;
    };
    let header = l.next().unwrap_or("");
    match parse(header, size) {
        RangeRequest::Ranges(rs) => {
            assert!(!rs.is_empty() && rs.len() <= MAX_RANGES, "{header:?}");
            let mut total = 0u128;
            for r in &rs {
                assert!(r.len > 0, "{header:?} {size}: {r:?}");
                let end = r.start.checked_add(r.len).expect("range end overflows");
                assert!(end <= size, "{header:?} {size}: {r:?}");
                assert_eq!(r.last(), end - 1);
                total += u128::from(r.len);
            }
            assert!(rs.len() == 1 || total <= u128::from(size), "{header:?}");
        }
        RangeRequest::Unsatisfiable => assert!(size > 0, "{header:?}"),
        RangeRequest::Ignore => {}
    }
}

/// The expires grammar ([`crate::expires::parse_expire`]): an accepted rule is
/// at most [`crate::expires::MAX_EXPIRE_SECONDS`] long and reads back the same
/// when written as `<base> plus N seconds`.
#[cfg(feature = "expires")]
pub fn expires(data: &[u8]) {
    use crate::expires::{parse_expire, ExpireBase, MAX_EXPIRE_SECONDS};
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(spec) = parse_expire(s) else { return };
    assert!(spec.seconds <= MAX_EXPIRE_SECONDS, "{s:?}");
    let base = match spec.base {
        ExpireBase::Access => "access",
        ExpireBase::Modification => "modification",
    };
    let again = format!("{base} plus {} seconds", spec.seconds);
    assert_eq!(parse_expire(&again), Ok(spec), "{s:?}");
}

/// The access-log format parser ([`crate::access_log::format::LogFormat`]): a
/// compiled format written back as a format string compiles to the same
/// format, and no literal text carries a control character other than tab.
#[cfg(feature = "access-log")]
pub fn access_log_format(data: &[u8]) {
    use crate::access_log::format::{LogFormat, Piece};
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(f) = LogFormat::compile(s) else { return };
    let mut spec = String::new();
    for p in &f.pieces {
        let text = match p {
            Piece::Literal(t) => {
                assert!(
                    !t.chars().any(|c| c.is_ascii_control() && c != '\t'),
                    "{s:?}"
                );
                spec.push_str(&t.replace('%', "%%"));
                continue;
            }
            Piece::RequestHeader(n) => format!("%{{{n}}}i"),
            Piece::Note(n) => format!("%{{{n}}}n"),
            Piece::ClientIp => "%h".into(),
            Piece::Ident => "%l".into(),
            Piece::User => "%u".into(),
            Piece::Time => "%t".into(),
            Piece::RequestLine => "%r".into(),
            Piece::Status => "%>s".into(),
            Piece::BytesClf => "%b".into(),
            Piece::Bytes => "%B".into(),
            Piece::Micros => "%D".into(),
            Piece::Millis => "%{ms}T".into(),
            Piece::Seconds => "%T".into(),
            Piece::VhostLabel => "%v".into(),
            Piece::Host => "%V".into(),
            Piece::Path => "%U".into(),
            Piece::Query => "%q".into(),
            Piece::Method => "%m".into(),
            Piece::Protocol => "%H".into(),
            Piece::TimeBare => "%{%d/%b/%Y:%H:%M:%S %z}t".into(),
            Piece::Epoch(u) => format!("%{{{}}}t", u.name()),
            Piece::LocalIp => "%A".into(),
            Piece::LocalPort => "%p".into(),
            Piece::RemotePort => "%{remote}p".into(),
            Piece::RawQuery => "%{raw}q".into(),
            Piece::RawQueryOrDash => "%{raw-or-dash}q".into(),
            Piece::HostNoPort => "%{no-port}V".into(),
        };
        spec.push_str(&text);
    }
    assert_eq!(
        LogFormat::compile(&spec).as_ref(),
        Ok(&f),
        "{s:?} -> {spec:?}"
    );
}

/// `Accept-Encoding` ([`crate::compress::accept::ranked`]), one field line per
/// input line: the answer is a subset of the offer without repeats, and
/// offering fewer codings leaves the others' order unchanged.
#[cfg(feature = "compress")]
pub fn accept_encoding(data: &[u8]) {
    use crate::compress::accept::ranked;
    use crate::compress::Coding;
    use tessera_core::actix_web::http::header::ACCEPT_ENCODING;
    let Some(l) = lines(data) else { return };
    let Some(h) = header_map(l.map(|v| (ACCEPT_ENCODING, v))) else {
        return;
    };
    let all = [Coding::Br, Coding::Zstd, Coding::Gzip];
    let best = ranked(&h, &all);
    for (i, c) in best.iter().enumerate() {
        assert!(!best[i + 1..].contains(c), "{best:?}");
    }
    for skip in all {
        let offered: Vec<Coding> = all.iter().copied().filter(|&c| c != skip).collect();
        let want: Vec<Coding> = best.iter().copied().filter(|&c| c != skip).collect();
        assert_eq!(ranked(&h, &offered).to_vec(), want, "without {skip:?}");
    }
}

/// `Authorization: Basic` ([`crate::auth_basic::header::credentials`]), one field
/// line per input line: accepted credentials come from a single line, have a
/// user-id without colon or control characters, and are read back the same
/// from a freshly encoded header.
#[cfg(feature = "auth-basic")]
pub fn authorization(data: &[u8]) {
    use crate::auth_basic::header::{credentials, MAX_AUTHORIZATION};
    use base64::Engine as _;
    use tessera_core::actix_web::http::header::AUTHORIZATION;
    let Some(l) = lines(data) else { return };
    let Some(h) = header_map(l.map(|v| (AUTHORIZATION, v))) else {
        return;
    };
    let Some(c) = credentials(&h) else { return };
    assert_eq!(h.get_all(AUTHORIZATION).count(), 1);
    assert!(!c.user.contains(':') && !c.user.chars().any(char::is_control));
    let token =
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.user, c.password));
    let value = format!("Basic {token}");
    if value.len() <= MAX_AUTHORIZATION {
        let again = header_map([(AUTHORIZATION, value.as_str())]);
        assert_eq!(again.as_ref().and_then(credentials), Some(c));
    }
}

/// htpasswd files ([`crate::auth_basic::htpasswd::Table::parse`]): plain-text
/// entries verify their own password, nothing is plain text unless allowed,
/// and the first line of a user wins.
#[cfg(feature = "auth-basic")]
pub fn htpasswd(data: &[u8]) {
    use crate::auth_basic::htpasswd::{PasswordHash, Table};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = Table::parse(text, false) {
        for line in text.lines() {
            if let Some(e) = line.split_once(':').and_then(|(u, _)| t.get(u)) {
                assert!(!matches!(e.hash, PasswordHash::Plain(_)), "{line:?}");
            }
        }
    }
    let Ok(t) = Table::parse(text, true) else {
        return;
    };
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((user, pw)) = line.split_once(':') else {
            continue;
        };
        if !seen.insert(user) {
            continue;
        }
        let e = t
            .get(user)
            .expect("every user of an accepted file is in the table");
        let pw = match pw.strip_prefix("{PLAIN}") {
            Some(p) => p,
            None if pw.starts_with('$') => continue,
            None => pw,
        };
        assert!(e.hash.verify(pw.as_bytes()), "{line:?}");
    }
}

/// `If-Match` and `If-None-Match` lists with the dates of RFC 9110 §13.2.2
/// ([`crate::static_file::conditional::evaluate`]). Input lines: the current
/// entity-tag's opaque text, If-Match, If-None-Match, If-Unmodified-Since,
/// If-Modified-Since (an empty line leaves the field out). A list that starts
/// with the current tag matches it; a failed If-Match is 412 whatever follows;
/// a match needs `*` or the tag's text in the field.
#[cfg(feature = "static-file")]
pub fn conditional(data: &[u8]) {
    use crate::static_file::conditional::{evaluate, Precondition};
    use std::time::{Duration, UNIX_EPOCH};
    use tessera_core::actix_web::http::header::{
        IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_UNMODIFIED_SINCE,
    };
    let Some(mut l) = lines(data) else { return };
    let opaque = l.next().unwrap_or("");
    if opaque.contains('"') {
        return;
    }
    let etag = format!("\"{opaque}\"");
    if HeaderValue::from_str(&etag).is_err() {
        return;
    }
    let f: Vec<&str> = l.take(4).collect();
    let field = |i: usize| f.get(i).copied().filter(|v| !v.is_empty());
    let names = [
        IF_MATCH,
        IF_NONE_MATCH,
        IF_UNMODIFIED_SINCE,
        IF_MODIFIED_SINCE,
    ];
    let present = || (0..4).filter_map(|i| field(i).map(|v| (names[i].clone(), v)));
    let Some(h) = header_map(present()) else {
        return;
    };
    let lm = Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let got = evaluate(&h, &etag, lm);
    let names_tag = |v: &str| v.trim() == "*" || v.contains(&etag[..etag.len() - 1]);
    if let Some(im) = field(0) {
        if !names_tag(im) {
            assert_eq!(got, Precondition::Failed, "{data:?}");
        }
        // A list that starts with the tag holds, whatever follows.
        let first = format!("{etag}, {im}");
        let mut h2 = h.clone();
        h2.insert(
            IF_MATCH,
            HeaderValue::from_str(&first).expect("a valid value"),
        );
        assert_ne!(evaluate(&h2, &etag, lm), Precondition::Failed, "{data:?}");
    }
    if got == Precondition::Failed {
        return;
    }
    if let Some(inm) = field(1) {
        let matched = names_tag(inm);
        if !matched {
            assert_eq!(got, Precondition::Proceed, "{data:?}");
        }
        let first = format!("{etag}, {inm}");
        let mut h2 = h.clone();
        h2.insert(
            IF_NONE_MATCH,
            HeaderValue::from_str(&first).expect("a valid value"),
        );
        assert_eq!(
            evaluate(&h2, &etag, lm),
            Precondition::NotModified,
            "{data:?}"
        );
    }
}

/// Loading `server.toml` ([`tessera_core::config::load_value_str`] and
/// [`tessera_core::config::build`]) with every built-in module, the file taken
/// to be in an empty temporary directory (so `document-root = "."` exists). A
/// document with `[[plugin]]` (it would load shared libraries) or mentioning
/// `access-log` (it would open log files for writing) is skipped. An accepted
/// configuration has at least one vhost and a default among them.
pub fn server_toml(data: &[u8]) {
    use std::sync::OnceLock;
    use tessera_core::Registry;
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains("access-log") {
        return;
    }
    let dir = DIR.get_or_init(|| {
        let d = std::env::temp_dir().join("tessera-fuzz-config");
        std::fs::create_dir_all(&d).expect("a temporary directory");
        d
    });
    let file = dir.join("server.toml");
    let Ok(value) = tessera_core::config::load_value_str(&file, text) else {
        return;
    };
    if value.get("plugin").is_some() {
        return;
    }
    let mut reg = Registry::new();
    crate::register_all(&mut reg).expect("built-in modules register once");
    if let Ok(cfg) = tessera_core::config::build(&file, &value, &reg) {
        let all = cfg.vhosts.all();
        assert!(!all.is_empty());
        let d = cfg.vhosts.default_vhost().info.index;
        assert!(d < all.len());
        cfg.shutdown();
    }
}

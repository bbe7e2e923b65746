//! Content codings and `Accept-Encoding` negotiation (RFC 9110 §8.4.1,
//! §12.5.3).

use serde::Deserialize;
use smallvec::SmallVec;
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderValue};

/// A content coding Tessera produces or serves from sidecar files. The
/// configuration names them by their registered tokens (`"br"`, `"zstd"`,
/// `"gzip"`), never by file suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Coding {
    /// Brotli (RFC 7932), token `br`, sidecar suffix `.br`.
    Br,
    /// Zstandard (RFC 8878), token `zstd`, sidecar suffix `.zst`.
    Zstd,
    /// gzip (RFC 9110 §8.4.1.3), token `gzip` (`x-gzip` accepted as an
    /// alias), sidecar suffix `.gz`.
    Gzip,
}

impl Coding {
    /// The registered token, as sent in `Content-Encoding` (case B31).
    pub fn token(self) -> &'static str {
        match self {
            Coding::Br => "br",
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }

    /// The token as a header value.
    pub fn header_value(self) -> HeaderValue {
        HeaderValue::from_static(self.token())
    }

    /// The suffix of a precompressed sidecar file: `.br`, `.zst`, `.gz`.
    pub fn file_suffix(self) -> &'static str {
        match self {
            Coding::Br => ".br",
            Coding::Zstd => ".zst",
            Coding::Gzip => ".gz",
        }
    }

    /// What is appended inside the ETag's quotes for this coding: `-br`,
    /// `-zstd`, `-gzip` (RFC 9110 §8.8.3: each coding is its own
    /// representation, so strong tags must differ).
    pub fn etag_suffix(self) -> &'static str {
        match self {
            Coding::Br => "-br",
            Coding::Zstd => "-zstd",
            Coding::Gzip => "-gzip",
        }
    }

    fn from_token(t: &str) -> Option<Coding> {
        if t.eq_ignore_ascii_case("br") {
            Some(Coding::Br)
        } else if t.eq_ignore_ascii_case("zstd") {
            Some(Coding::Zstd)
        } else if t.eq_ignore_ascii_case("gzip") || t.eq_ignore_ascii_case("x-gzip") {
            Some(Coding::Gzip)
        } else {
            None
        }
    }
}

/// At most this many list elements of `Accept-Encoding` are read (over all
/// field lines); later ones are ignored.
pub const MAX_ELEMENTS: usize = 64;

/// A qvalue (RFC 9110 §12.4.2) in thousandths: `"0.5"` is 500. `None` when
/// malformed (more than three decimals, above 1, not a number).
fn qvalue(s: &str) -> Option<u16> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths: u16 = 0;
    for (i, b) in frac.bytes().enumerate() {
        thousandths += u16::from(b - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// The weights an `Accept-Encoding` field gives: per coding, for `identity` and
/// for `*`, each `None` when not listed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Weights {
    present: bool,
    codings: [Option<u16>; 3],
    identity: Option<u16>,
    star: Option<u16>,
}

fn slot(c: Coding) -> usize {
    match c {
        Coding::Br => 0,
        Coding::Zstd => 1,
        Coding::Gzip => 2,
    }
}

fn weights(headers: &HeaderMap) -> Weights {
    let mut w = Weights::default();
    let mut n = 0;
    for line in headers.get_all(header::ACCEPT_ENCODING) {
        w.present = true;
        let Ok(line) = line.to_str() else { continue };
        for elem in line.split(',') {
            n += 1;
            if n > MAX_ELEMENTS {
                return w;
            }
            let mut parts = elem.split(';');
            let token = parts.next().unwrap_or("").trim();
            if token.is_empty() {
                continue;
            }
            let mut q = Some(1000);
            for p in parts {
                if let Some((k, v)) = p.split_once('=') {
                    if k.trim().eq_ignore_ascii_case("q") {
                        q = qvalue(v);
                    }
                }
            }
            // A malformed qvalue drops the element.
            let Some(q) = q else { continue };
            let target = if token == "*" {
                &mut w.star
            } else if token.eq_ignore_ascii_case("identity") {
                &mut w.identity
            } else if let Some(c) = Coding::from_token(token) {
                &mut w.codings[slot(c)]
            } else {
                continue;
            };
            // The first mention of a coding counts.
            target.get_or_insert(q);
        }
    }
    w
}

/// The codings of `offered` the request accepts, best first: by qvalue, then in
/// the order of `offered` (the server's preference). Empty means "send the
/// identity coding".
///
/// Per RFC 9110 §12.5.3: no `Accept-Encoding` field means identity here (as
/// nginx, lighttpd and Caddy do, though the RFC would allow any coding); a
/// coding is acceptable when listed, or covered by `*`, with a qvalue above 0;
/// `identity` is acceptable unless `identity;q=0`, or `*;q=0` without an
/// `identity` entry. A coding whose qvalue is below the one the field gives
/// identity (itself or through `*`) is left out, so `gzip;q=0.5, identity`
/// gives identity while `gzip;q=0.5` alone gives gzip. When nothing is acceptable, not even
/// identity, the caller still sends identity (406 is optional, §15.5.7).
pub fn ranked(headers: &HeaderMap, offered: &[Coding]) -> SmallVec<[Coding; 3]> {
    let w = weights(headers);
    let mut out: SmallVec<[(Coding, u16); 3]> = SmallVec::new();
    if !w.present {
        return SmallVec::new();
    }
    // Identity competes only when the field weighs it (itself or through `*`).
    let identity = w.identity.or(w.star).unwrap_or(0);
    for &c in offered {
        let q = w.codings[slot(c)].or(w.star).unwrap_or(0);
        if q > 0 && q >= identity && !out.iter().any(|(o, _)| *o == c) {
            out.push((c, q));
        }
    }
    // Stable: equal weights keep the server's order.
    out.sort_by_key(|&(_, q)| std::cmp::Reverse(q));
    out.into_iter().map(|(c, _)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::actix_web::http::header::HeaderName;

    const ALL: [Coding; 3] = [Coding::Br, Coding::Zstd, Coding::Gzip];

    fn r(lines: &[&str], offered: &[Coding]) -> Vec<&'static str> {
        let mut m = HeaderMap::new();
        for l in lines {
            m.append(
                HeaderName::from_static("accept-encoding"),
                HeaderValue::from_str(l).unwrap(),
            );
        }
        ranked(&m, offered).iter().map(|c| c.token()).collect()
    }

    #[test]
    fn qvalues() {
        assert_eq!(qvalue("1"), Some(1000));
        assert_eq!(qvalue("1.000"), Some(1000));
        assert_eq!(qvalue("0"), Some(0));
        assert_eq!(qvalue("0.5"), Some(500));
        assert_eq!(qvalue("0.05"), Some(50));
        assert_eq!(qvalue("0.001"), Some(1));
        assert_eq!(qvalue(" 0.8 "), Some(800));
        for bad in ["1.001", "2", "0.0001", "-0", "x", "", "0.a", "00.5", ".5"] {
            assert_eq!(qvalue(bad), None, "{bad}");
        }
    }

    #[test]
    fn plain_lists_keep_server_order() {
        assert_eq!(
            r(&["gzip, deflate, br, zstd"], &ALL),
            ["br", "zstd", "gzip"]
        );
        assert_eq!(r(&["gzip"], &ALL), ["gzip"]);
        assert_eq!(r(&["GZIP"], &ALL), ["gzip"]);
        assert_eq!(r(&["x-gzip"], &ALL), ["gzip"]);
        assert_eq!(r(&["zstd"], &[Coding::Gzip]), Vec::<&str>::new());
        // two field lines combine
        assert_eq!(r(&["gzip", "br"], &ALL), ["br", "gzip"]);
    }

    #[test]
    fn absent_or_empty_means_identity() {
        assert!(r(&[], &ALL).is_empty());
        assert!(r(&[""], &ALL).is_empty());
        assert!(r(&["identity"], &ALL).is_empty());
        assert!(r(&["deflate, compress"], &ALL).is_empty());
    }

    #[test]
    fn q_values_rank_and_refuse() {
        assert_eq!(r(&["gzip;q=1.0, br;q=0.5"], &ALL), ["gzip", "br"]);
        assert_eq!(r(&["br;q=0.1"], &ALL), ["br"]);
        assert_eq!(
            r(&["br;q=0.5, zstd;q=0.9, gzip;q=0.7"], &ALL),
            ["zstd", "gzip", "br"]
        );
        assert!(r(&["gzip;q=0"], &ALL).is_empty());
        assert_eq!(r(&["gzip;q=0, br"], &ALL), ["br"]);
        assert_eq!(r(&["gzip ; Q=0.5"], &ALL), ["gzip"]);
        // first mention wins
        assert!(r(&["gzip;q=0, gzip"], &ALL).is_empty());
        // a malformed q drops the element
        assert!(r(&["gzip;q=2"], &ALL).is_empty());
        assert_eq!(r(&["gzip;q=abc, br"], &ALL), ["br"]);
    }

    #[test]
    fn identity_and_star() {
        // a coding less wanted than identity loses to it
        assert!(r(&["gzip;q=0.5, identity"], &ALL).is_empty());
        assert_eq!(r(&["gzip;q=0.5, identity;q=0.5"], &ALL), ["gzip"]);
        assert_eq!(r(&["gzip;q=0.001, identity;q=0"], &ALL), ["gzip"]);
        // identity refused and nothing else listed: empty (the caller sends identity)
        assert!(r(&["identity;q=0"], &ALL).is_empty());
        // * covers unlisted codings
        assert_eq!(r(&["*"], &ALL), ["br", "zstd", "gzip"]);
        assert_eq!(r(&["*;q=0.5, gzip"], &ALL), ["gzip", "br", "zstd"]);
        assert!(r(&["*;q=0"], &ALL).is_empty());
        assert_eq!(r(&["*;q=0, br"], &ALL), ["br"]);
        assert_eq!(r(&["br;q=0, *"], &ALL), ["zstd", "gzip"]);
        // *;q=0 refuses identity unless identity is listed
        assert_eq!(
            r(&["*;q=0, identity;q=0.5, gzip;q=0.4"], &ALL),
            Vec::<&str>::new()
        );
        assert_eq!(
            r(&["*;q=0.6, identity;q=0.5"], &ALL),
            ["br", "zstd", "gzip"]
        );
    }

    #[test]
    fn hostile_lists() {
        let long = "x,".repeat(10_000) + "gzip";
        assert!(
            r(&[&long], &ALL).is_empty(),
            "elements past the limit are ignored"
        );
        assert!(r(&[",,,;;;===,;q=,q"], &ALL).is_empty());
        assert_eq!(r(&[" , gzip;;q=1;foo=bar , "], &ALL), ["gzip"]);
        let mut m = HeaderMap::new();
        m.append(
            HeaderName::from_static("accept-encoding"),
            HeaderValue::from_bytes(b"gzip\xff, br").unwrap(),
        );
        assert!(ranked(&m, &ALL).is_empty(), "non-ASCII line ignored");
    }
}

//! `Range: bytes=...` parsing (RFC 9110 §14.1.2, §14.2).
//!
//! A syntactically invalid header, an unknown unit, or an empty range set is
//! ignored (the full 200 is sent, §14.2). A valid set in which no range overlaps the
//! representation is unsatisfiable (416 with `Content-Range: bytes */LEN`,
//! §15.5.17). A last-pos at or past the end means "to the end" (case B01).

use smallvec::SmallVec;

/// At most this many ranges are honoured; a longer set is ignored (200), a guard
/// against many-small-ranges denial of service (§14.2 allows ignoring Range).
pub const MAX_RANGES: usize = 64;

/// One satisfiable byte range: `start` and `len` in bytes, `len > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte offset.
    pub start: u64,
    /// Number of bytes.
    pub len: u64,
}

impl ByteRange {
    /// Last byte offset (inclusive), as written in `Content-Range`.
    pub fn last(&self) -> u64 {
        self.start + self.len - 1
    }
}

/// What a Range header asks of a representation of a given size.
#[derive(Debug, PartialEq, Eq)]
pub enum RangeRequest {
    /// Serve the whole representation with 200.
    Ignore,
    /// No range overlaps the representation: 416.
    Unsatisfiable,
    /// Serve these ranges, in request order, with 206.
    Ranges(SmallVec<[ByteRange; 2]>),
}

/// Parses a Range field value against a representation of `size` bytes.
///
/// Also ignored: a zero-length representation (no byte range can describe it),
/// more than [`MAX_RANGES`] ranges, and sets whose ranges add up to more than
/// `size` bytes (overlapping ranges, §14.3 lets a server refuse them).
pub fn parse(header: &str, size: u64) -> RangeRequest {
    let Some((unit, set)) = header.trim().split_once('=') else {
        return RangeRequest::Ignore;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") || size == 0 {
        return RangeRequest::Ignore;
    }
    let mut out: SmallVec<[ByteRange; 2]> = SmallVec::new();
    let mut specs = 0usize;
    for spec in set.split(',') {
        let spec = spec.trim_matches(|c| c == ' ' || c == '\t');
        if spec.is_empty() {
            continue;
        }
        specs += 1;
        if specs > MAX_RANGES {
            return RangeRequest::Ignore;
        }
        let Some((first, last)) = spec.split_once('-') else {
            return RangeRequest::Ignore;
        };
        if first.is_empty() {
            // suffix-range: the last N bytes
            let Some(n) = digits(last) else {
                return RangeRequest::Ignore;
            };
            if n == 0 {
                continue;
            }
            let len = n.min(size);
            out.push(ByteRange {
                start: size - len,
                len,
            });
        } else {
            let Some(a) = digits(first) else {
                return RangeRequest::Ignore;
            };
            let end = if last.is_empty() {
                size - 1
            } else {
                let Some(b) = digits(last) else {
                    return RangeRequest::Ignore;
                };
                if b < a {
                    return RangeRequest::Ignore;
                }
                b.min(size - 1)
            };
            if a >= size {
                continue;
            }
            out.push(ByteRange {
                start: a,
                len: end - a + 1,
            });
        }
    }
    if specs == 0 {
        return RangeRequest::Ignore;
    }
    if out.is_empty() {
        return RangeRequest::Unsatisfiable;
    }
    let total: u128 = out.iter().map(|r| r.len as u128).sum();
    if out.len() > 1 && total > size as u128 {
        return RangeRequest::Ignore;
    }
    RangeRequest::Ranges(out)
}

/// A run of ASCII digits as u64; `None` for empty or non-digits. A number past
/// u64 saturates to `u64::MAX`: a first-pos that large is beyond any file
/// (416), a suffix that large means the whole file (RFC 9110 §14.1.2).
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.parse().unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(v: &[(u64, u64)]) -> RangeRequest {
        RangeRequest::Ranges(
            v.iter()
                .map(|&(start, len)| ByteRange { start, len })
                .collect(),
        )
    }

    #[test]
    fn single_forms() {
        assert_eq!(parse("bytes=0-9", 100), r(&[(0, 10)]));
        assert_eq!(parse("bytes=90-", 100), r(&[(90, 10)]));
        assert_eq!(parse("bytes=-10", 100), r(&[(90, 10)]));
        assert_eq!(parse("bytes=-1000", 100), r(&[(0, 100)]));
        assert_eq!(parse("BYTES = 5-5", 100), r(&[(5, 1)]));
        // B01: last-pos past the end means to the end
        assert_eq!(parse("bytes=0-3145727", 1000), r(&[(0, 1000)]));
        assert_eq!(parse("bytes=0-", 100), r(&[(0, 100)]));
    }

    #[test]
    fn multiple() {
        assert_eq!(parse("bytes=0-0,2-2,4-4", 10), r(&[(0, 1), (2, 1), (4, 1)]));
        assert_eq!(parse("bytes=0-0, ,-1", 10), r(&[(0, 1), (9, 1)]));
        // one unsatisfiable part is dropped
        assert_eq!(parse("bytes=0-0,50-60", 10), r(&[(0, 1)]));
        // overlapping beyond the size: ignored
        assert_eq!(parse("bytes=0-,0-", 10), RangeRequest::Ignore);
        let many = format!("bytes={}", vec!["0-0"; MAX_RANGES + 1].join(","));
        assert_eq!(parse(&many, 10), RangeRequest::Ignore);
    }

    #[test]
    fn ignored_and_unsatisfiable() {
        for h in [
            "",
            "bytes=",
            "bytes",
            "items=0-3",
            "bytes=a-b",
            "bytes=5-1",
            "bytes=--1",
            "bytes=1",
        ] {
            assert_eq!(parse(h, 100), RangeRequest::Ignore, "{h:?}");
        }
        assert_eq!(parse("bytes=10-20", 3), RangeRequest::Unsatisfiable);
        assert_eq!(parse("bytes=-0", 3), RangeRequest::Unsatisfiable);
        assert_eq!(parse("bytes=0-", 0), RangeRequest::Ignore);
        // beyond u64: first-pos past any file, suffix covering the whole file
        assert_eq!(
            parse("bytes=99999999999999999999999-", 100),
            RangeRequest::Unsatisfiable
        );
        assert_eq!(parse("bytes=-99999999999999999999999", 100), r(&[(0, 100)]));
    }

    #[test]
    fn large_files() {
        let size = 5u64 << 30;
        assert_eq!(
            parse("bytes=4294967296-", size),
            r(&[(1 << 32, size - (1 << 32))])
        );
    }
}

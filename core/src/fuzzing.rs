//! Entry points shared by the fuzz targets in `fuzz/` and the corpus replay
//! test: each takes the fuzzer's bytes and panics when an invariant breaks.

use crate::path::{encode, normalize};

/// Path decoding and normalization ([`normalize`]): an accepted path starts with
/// `/`, has no empty, `.` or `..` segment, and comes back unchanged through
/// [`encode`] and [`normalize`] again.
pub fn path(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(n) = normalize(raw) else {
        return;
    };
    assert!(n.starts_with('/'), "{raw:?} -> {n:?}");
    assert!(!n.contains("//"), "{raw:?} -> {n:?}");
    let body = n.strip_suffix('/').unwrap_or(&n);
    for seg in body.split('/').skip(1) {
        assert!(!matches!(seg, "" | "." | ".."), "{raw:?} -> {n:?}");
    }
    // A raw NUL is refused earlier, by the request-target parser.
    if !raw.contains('\0') {
        assert_eq!(normalize(&encode(&n)).as_deref(), Ok(&*n), "{raw:?}");
    }
}

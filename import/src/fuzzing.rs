//! Entry points shared by the fuzz targets in `fuzz/` and the corpus replay
//! test: each takes the fuzzer's bytes and panics when an invariant breaks.
//!
//! Inputs naming `/dev`, `/proc` or `/sys` are skipped: an include of a device
//! can block or never end, which is the file's doing, not the parser's.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::{import_text, ImportError, Options, Source};

/// The text of `data` when it is UTF-8 and names no device or kernel file.
fn text(data: &[u8]) -> Option<&str> {
    let t = std::str::from_utf8(data).ok()?;
    (!["/dev", "/proc", "/sys"].iter().any(|d| t.contains(d))).then_some(t)
}

/// An empty directory for relative includes (never written to).
fn basedir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join("tessera-fuzz-import");
        std::fs::create_dir_all(&d).expect("a temporary directory");
        d
    })
}

/// The number of lines of `t`, counting a last line without newline.
fn line_count(t: &str) -> u32 {
    u32::try_from(t.matches('\n').count() + 1).unwrap_or(u32::MAX)
}

/// A parse error about the main file names one of its lines.
fn check_error(e: &ImportError, name: &str, t: &str) {
    if let ImportError::Parse { file, line, .. } = e {
        if file == name {
            assert!(*line >= 1 && *line <= line_count(t), "{e}");
        }
    }
}

/// Imports `t` as `source` twice: the result is the same both times.
fn import_twice(source: Source, name: &str, t: &str) {
    let opts = Options {
        mime_types: PathBuf::from("/nonexistent/mime.types"),
    };
    match import_text(source, name, t, basedir(), &opts) {
        Ok(a) => {
            let b = import_text(source, name, t, basedir(), &opts).expect("the same input");
            assert_eq!(a.toml, b.toml);
        }
        Err(e) => check_error(&e, name, t),
    }
}

/// The lighttpd lexer, parser and translation: token and error lines lie in
/// the file, and importing is deterministic.
pub fn lighttpd(data: &[u8]) {
    const NAME: &str = "lighttpd.conf";
    let Some(t) = text(data) else { return };
    match crate::lighttpd::lexer::tokenize(NAME, t) {
        Ok(toks) => {
            let n = line_count(t);
            assert!(toks.iter().all(|k| k.line >= 1 && k.line <= n));
            assert!(toks.windows(2).all(|w| w[0].line <= w[1].line));
        }
        Err(e) => check_error(&e, NAME, t),
    }
    import_twice(Source::Lighttpd, NAME, t);
}

/// The Cherokee tree parser and translation: every leaf comes from a line of the
/// file, and importing is deterministic.
pub fn cherokee(data: &[u8]) {
    const NAME: &str = "cherokee.conf";
    let Some(t) = text(data) else { return };
    match crate::cherokee::tree::parse_text(NAME, t) {
        Ok(tree) => {
            let n = line_count(t);
            for (key, _, src) in tree.leaves() {
                if src.file == NAME {
                    assert!(src.line >= 1 && src.line <= n, "{key} at {}", src.line);
                }
            }
        }
        Err(e) => check_error(&e, NAME, t),
    }
    import_twice(Source::Cherokee, NAME, t);
}

//! mod_deflate and mod_compress (`deflate.*`, `compress.*`) as Tessera's
//! compress module.

use super::{Arg, Tr};
use crate::model::{Opt, V};
use crate::report::Report;

impl Tr<'_> {
    /// The options of mod_deflate and mod_compress.
    pub(super) fn compress_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { key, src, val, .. } = *a;
        let opt = |module, k, v| a.opt(module, k, v);
        Some(match key {
            "deflate.mimetypes" | "compress.filetype" => {
                report.translated(src, key, "compress mime-types");
                vec![opt("compress", "mime-types", V::strs(val.as_list()))]
            }
            "deflate.allowed-encodings" | "compress.allowed-encodings" => {
                let mut enc = Vec::new();
                let mut dropped = Vec::new();
                let list = val.as_list();
                for want in ["br", "zstd", "gzip"] {
                    if list.iter().any(|e| match e.as_str() {
                        "br" | "brotli" => want == "br",
                        "zstd" => want == "zstd",
                        "gzip" | "x-gzip" => want == "gzip",
                        _ => false,
                    }) {
                        enc.push(want);
                    }
                }
                for e in &list {
                    if !matches!(e.as_str(), "br" | "brotli" | "zstd" | "gzip" | "x-gzip") {
                        dropped.push(e.clone());
                    }
                }
                if dropped.is_empty() {
                    report.translated(src, key, "compress encodings");
                } else {
                    report.approximated(
                        src,
                        key,
                        format!(
                            "compress encodings {enc:?}; {} not produced by Tessera",
                            dropped.join(", ")
                        ),
                    );
                }
                vec![opt("compress", "encodings", V::strs(enc))]
            }
            "deflate.max-compress-size" | "compress.max-filesize" => {
                let kib = val
                    .as_string()
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(0);
                report.translated(src, key, "compress max-size (KiB -> bytes)");
                vec![opt("compress", "max-size", V::Int(kib * 1024))]
            }
            "deflate.min-compress-size" => {
                let b = val
                    .as_string()
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(0);
                report.translated(src, key, "compress min-size");
                vec![opt("compress", "min-size", V::Int(b))]
            }
            "deflate.compression-level" => {
                let l = val
                    .as_string()
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(6);
                report.translated(src, key, "compress gzip-level");
                vec![opt("compress", "gzip-level", V::Int(l.clamp(1, 9)))]
            }
            "deflate.cache-dir" | "compress.cache-dir" => {
                report.approximated(
                    src,
                    key,
                    "Tessera keeps compressed bodies in memory (compress cache-size), not on disk",
                );
                Vec::new()
            }
            _ => return None,
        })
    }
}

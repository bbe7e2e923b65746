//! `mass-vhost`: the document root from the host name (lighttpd
//! mod_simple_vhost and mod_evhost `evhost.path-pattern`, Cherokee's `evhost`,
//! nginx `root /srv/$host/htdocs`).
//!
//! ```toml
//! [vhost.mass-vhost]
//! path-pattern = "/srv/vhosts/%_/htdocs"   # lighttpd simple-vhost
//! default-root = "/srv/vhosts/default/htdocs"
//! ```
//!
//! In the request phase the host the request named is validated, the pattern
//! is expanded with its parts, and when that directory exists it becomes the
//! request's document root ([`tessera_core::Ctx::set_document_root`], nothing
//! of the path replaced). Otherwise the request gets `default-root`, or
//! without it the vhost's `document-root` (lighttpd
//! `simple-vhost.default-host`).
//!
//! # The pattern (lighttpd evhost syntax)
//! For `www.example.org:8080`: `%_` is the whole host name, port removed
//! (`www.example.org`); `%0` the domain name and top-level domain
//! (`example.org`; the single label of a one-label host); `%1` the top-level
//! domain (`org`); `%2` the domain name (`example`); `%3` the first
//! subdomain (`www`), `%4` the next, up to `%9`; `%%` is `%`. A pattern that
//! names a part the host does not have (`%3` for `example.org`) gives the
//! default root (lighttpd would put an empty string there). `%0` knows no
//! public suffixes: for `www.example.co.uk` it is `co.uk`, as in lighttpd.
//! lighttpd's character ranges (`%{3.1}`) are not supported (a configuration
//! error).
//!
//! # Host validation
//! Before a host becomes part of a path it is lowercased, its port and one
//! trailing dot are removed, and it must be at most 253 bytes of labels of
//! `a-z`, `0-9` and `-`, 1 to 63 bytes each, separated by single dots. So a
//! host can never hold `/`, `..`, `%`, `\` or NUL, and no label is empty. A
//! host that fails is answered **400 Bad Request** (as lighttpd's strict host
//! parsing does), never mapped to a path. A request without a host (HTTP/1.0)
//! and an IP literal (`[::1]`) get the default root.
//!
//! # Cost
//! One `stat` of the expanded directory per request; its canonical form is
//! kept per directory and reused while the directory's device and inode are
//! unchanged ([`crate::doc_root::RootCache`]).

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use tessera_core::actix_web::http::StatusCode;
use tessera_core::response::error_response;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl, Outcome};

use crate::doc_root::RootCache;

/// Longest host name accepted, in bytes, without port and trailing dot
/// (RFC 1035 §2.3.4 gives 255 octets on the wire, 253 characters written).
pub const MAX_HOST: usize = 253;

/// Longest label, in bytes (RFC 1035 §2.3.4).
pub const MAX_LABEL: usize = 63;

/// Options of `[vhost.mass-vhost]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MassVhostConfig {
    /// The document root pattern, lighttpd evhost syntax (`%_`, `%0`–`%9`,
    /// `%%`; see the module documentation); relative to the configuration
    /// file's directory unless absolute. Required. lighttpd's
    /// `simple-vhost.server-root` + host + `simple-vhost.document-root` is
    /// `"<server-root>/%_/<document-root>"`.
    #[serde(default)]
    pub path_pattern: Option<String>,
    /// The root of a host whose directory does not exist (lighttpd
    /// `simple-vhost.default-host`'s directory); relative to the configuration
    /// file's directory unless absolute; must exist. Default: the vhost's
    /// `document-root`.
    #[serde(default)]
    pub default_root: Option<String>,
}

/// One piece of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Literal text.
    Text(String),
    /// `%_`: the whole host name.
    Host,
    /// `%0`: domain name and top-level domain.
    Domain,
    /// `%N` (1 to 9): the N-th label from the right.
    Label(usize),
}

/// The `mass-vhost` module instance of one vhost or rule.
pub struct MassVhost {
    pattern: Vec<Piece>,
    default_root: Option<Arc<Path>>,
    roots: RootCache,
}

impl ModuleDecl for MassVhost {
    const NAME: &'static str = "mass-vhost";
    type Config = MassVhostConfig;

    /// # Errors
    /// One line naming the key: `path-pattern` missing, with an unknown `%`
    /// sequence, or naming no part of the host; `default-root` missing, not a
    /// directory, or containing the configuration file's directory.
    fn build(cfg: MassVhostConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        let Some(raw) = cfg.path_pattern else {
            return Err("path-pattern: missing".into());
        };
        let mut pattern = parse_pattern(&raw).map_err(|e| format!("path-pattern: {e}"))?;
        if !raw.starts_with('/') {
            let dir = cx.config_dir.to_str().ok_or_else(|| {
                "path-pattern: relative, and the configuration's directory is not UTF-8".to_owned()
            })?;
            pattern.insert(0, Piece::Text(format!("{}/", dir.trim_end_matches('/'))));
        }
        let default_root = match &cfg.default_root {
            Some(d) => Some(crate::doc_root::configured(
                "default-root",
                d,
                cx.config_dir,
            )?),
            None => None,
        };
        Ok(MassVhost {
            pattern,
            default_root,
            roots: RootCache::default(),
        })
    }
}

/// Compiles an evhost pattern.
fn parse_pattern(raw: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        let piece = match chars.next() {
            Some('%') => {
                text.push('%');
                continue;
            }
            Some('_') => Piece::Host,
            Some('0') => Piece::Domain,
            Some(d @ '1'..='9') => Piece::Label(d as usize - '0' as usize),
            Some(other) => {
                return Err(format!("\"{raw}\": \"%{other}\" is not %_, %0 to %9 or %%"))
            }
            None => return Err(format!("\"{raw}\": ends with a lone '%' (write %%)")),
        };
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
        out.push(piece);
    }
    if raw.contains('\0') {
        return Err(format!("\"{raw}\": must not contain NUL"));
    }
    if !out.iter().any(|p| !matches!(p, Piece::Text(_))) {
        return Err(format!(
            "\"{raw}\": names no part of the host (%_, %0 to %9)"
        ));
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// What a request's host is, for mapping.
#[derive(Debug, PartialEq, Eq)]
pub enum HostName<'a> {
    /// A valid host name: lowercase, no port, no trailing dot.
    Name(Cow<'a, str>),
    /// An IP literal in brackets (`[::1]`): no directory is looked up.
    IpLiteral,
    /// Anything else: answered with 400.
    Invalid,
}

/// Validates the host a request named (`Host` or the absolute-form target's
/// authority, port included) as the module documentation says: lowercased,
/// port and one trailing dot removed, at most [`MAX_HOST`] bytes of labels of
/// `a-z0-9-`, 1 to [`MAX_LABEL`] bytes each. Allocates only when the host has
/// uppercase letters.
pub fn host_name(host: &str) -> HostName<'_> {
    if host.starts_with('[') {
        return HostName::IpLiteral;
    }
    let h = tessera_core::vhost::strip_port(host);
    let h = h.strip_suffix('.').unwrap_or(h);
    if h.is_empty() || h.len() > MAX_HOST {
        return HostName::Invalid;
    }
    let labels_ok = h.split('.').all(|l| {
        !l.is_empty()
            && l.len() <= MAX_LABEL
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    });
    if !labels_ok {
        return HostName::Invalid;
    }
    if h.bytes().any(|b| b.is_ascii_uppercase()) {
        HostName::Name(Cow::Owned(h.to_ascii_lowercase()))
    } else {
        HostName::Name(Cow::Borrowed(h))
    }
}

impl MassVhost {
    /// The pattern expanded for the valid host name `host`; `None` when it
    /// names a label the host does not have.
    fn expand(&self, host: &str) -> Option<String> {
        let mut out = String::with_capacity(64 + 2 * host.len());
        let label = |n: usize| host.rsplit('.').nth(n - 1);
        for p in &self.pattern {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Host => out.push_str(host),
                Piece::Domain => {
                    // the last two labels, or the only one
                    let start = match host.rmatch_indices('.').nth(1) {
                        Some((i, _)) => i + 1,
                        None => 0,
                    };
                    out.push_str(&host[start..]);
                }
                Piece::Label(n) => out.push_str(label(*n)?),
            }
        }
        Some(out)
    }

    /// The default root for this request.
    fn default_root(&self, cx: &mut Ctx<'_>) -> Outcome {
        if let Some(root) = &self.default_root {
            // cannot fail: "" replaces nothing
            let _ = cx.set_document_root(root.clone(), "");
        }
        Outcome::Continue
    }
}

impl Module for MassVhost {
    fn hooks(&self) -> Hooks {
        Hooks::REQUEST
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        let Some(host) = cx.host() else {
            return self.default_root(cx);
        };
        let dir = match host_name(host) {
            HostName::Invalid => return Outcome::Respond(error_response(StatusCode::BAD_REQUEST)),
            HostName::IpLiteral => return self.default_root(cx),
            HostName::Name(h) => self.expand(&h),
        };
        match dir.and_then(|d| self.roots.lookup(Path::new(&d))) {
            Some(root) => {
                // cannot fail: "" replaces nothing
                let _ = cx.set_document_root(root, "");
                Outcome::Continue
            }
            None => self.default_root(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(pattern: &str) -> MassVhost {
        MassVhost {
            pattern: parse_pattern(pattern).unwrap(),
            default_root: None,
            roots: RootCache::default(),
        }
    }

    #[test]
    fn host_validation() {
        let name = |h: &'static str| HostName::Name(Cow::Borrowed(h));
        assert_eq!(host_name("example.org"), name("example.org"));
        assert_eq!(
            host_name("WWW.Example.ORG:8080"),
            HostName::Name(Cow::Owned("www.example.org".into()))
        );
        assert_eq!(host_name("example.org."), name("example.org"));
        assert_eq!(host_name("a-b.c0"), name("a-b.c0"));
        assert_eq!(host_name("127.0.0.1:80"), name("127.0.0.1"));
        assert_eq!(host_name("[::1]:8080"), HostName::IpLiteral);
        let long_label = "a".repeat(64);
        let long_host = ["abcdefghi"; 26].join("."); // 259 bytes
        for bad in [
            "",
            ".",
            "..",
            "...",
            "a..b",
            ".a",
            "a/b",
            "%2e%2e",
            "a%2fb",
            "a_b",
            "a b",
            "a\\b",
            "a:b",
            "a.com:x",
            "é.com",
            &long_label,
            &long_host,
        ] {
            assert_eq!(host_name(bad), HostName::Invalid, "{bad:?}");
        }
        assert!(matches!(
            host_name(&["abcdefghi"; 25].join(".")),
            HostName::Name(_)
        ));
    }

    #[test]
    fn patterns() {
        let m = module("/srv/%0/%1/%2/%3/%_/%%");
        assert_eq!(
            m.expand("www.example.org").as_deref(),
            Some("/srv/example.org/org/example/www/www.example.org/%")
        );
        assert_eq!(m.expand("example.org"), None, "no %3");
        let m = module("/srv/%0/%1");
        assert_eq!(
            m.expand("localhost").as_deref(),
            Some("/srv/localhost/localhost")
        );
        assert_eq!(module("/v/%4").expand("a.b.c.d").as_deref(), Some("/v/a"));
        assert_eq!(parse_pattern("/srv/%_/htdocs").unwrap().len(), 3);
        for (bad, why) in [
            ("/srv/%x", "is not"),
            ("/srv/%{3.1}", "is not"),
            ("/srv/%", "lone"),
            ("/srv/htdocs", "names no part"),
            ("/srv/%%", "names no part"),
        ] {
            let e = parse_pattern(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}

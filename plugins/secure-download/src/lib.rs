//! `secure-download`: time-limited signed links, compatible with lighttpd's
//! mod_secdownload (secret, URI prefix, timeout; MD5, HMAC-SHA1 and HMAC-SHA256).
//!
//! A link is `<uri-prefix><mac>/<timestamp><rel-path>`, the timestamp being the
//! Unix time in hex, the rel-path starting with `/`:
//! - `md5`: `mac` = hex(MD5(secret + rel-path + timestamp)), 32 digits;
//! - `hmac-sha1`: `mac` = base64url(HMAC-SHA1(secret, "/" + timestamp + rel-path)),
//!   27 characters, no padding;
//! - `hmac-sha256`: the same with SHA-256, 43 characters.
//!
//! A valid link within `timeout` seconds of its timestamp is rewritten to
//! `<protected-prefix><rel-path>` and served by `static-file`; a bad MAC or a
//! malformed link is 403, an expired one 410 (lighttpd's answers). Direct
//! requests below `protected-prefix` are 403, so the files are reachable only
//! through signed links.
//!
//! ```toml
//! [vhost.secure-download]
//! secret = "change me"
//! uri-prefix = "/dl/"             # default
//! protected-prefix = "/protected" # default
//! timeout = 60                    # seconds, default
//! algorithm = "md5"               # md5 | hmac-sha1 | hmac-sha256
//! ```

use base64::Engine;
use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tessera_plugin_sdk::{export_plugin, Action, Host, Plugin, Request, HOOK_REQUEST};

/// The MAC algorithm (lighttpd `secdownload.algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// MD5 of secret, path and timestamp (lighttpd's default).
    Md5,
    /// HMAC-SHA1.
    HmacSha1,
    /// HMAC-SHA256.
    HmacSha256,
}

/// Options of `[vhost.secure-download]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// The shared secret (lighttpd `secdownload.secret`). Required.
    pub secret: String,
    /// Prefix of signed links (`secdownload.uri-prefix`). Default `/dl/`.
    #[serde(default = "default_prefix")]
    pub uri_prefix: String,
    /// Where the protected files are under the document root. Default
    /// `/protected`.
    #[serde(default = "default_protected")]
    pub protected_prefix: String,
    /// Seconds a link stays valid around its timestamp
    /// (`secdownload.timeout`). Default 60.
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    /// `md5` (default), `hmac-sha1` or `hmac-sha256`
    /// (`secdownload.algorithm`).
    #[serde(default = "default_alg")]
    pub algorithm: Algorithm,
}

fn default_prefix() -> String {
    "/dl/".into()
}
fn default_protected() -> String {
    "/protected".into()
}
fn default_timeout() -> u64 {
    60
}
fn default_alg() -> Algorithm {
    Algorithm::Md5
}

/// The plugin instance.
pub struct SecureDownload {
    secret: Vec<u8>,
    uri_prefix: String,
    protected_prefix: String,
    timeout: u64,
    algorithm: Algorithm,
}

/// Per-request state: the path this plugin rewrote to, so that the rewritten
/// request (the core runs the request phase again) passes the protection.
#[derive(Default)]
pub struct State {
    rewritten_to: Option<String>,
}

/// What a link check found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not a signed link.
    NotALink,
    /// Valid: serve this rel-path.
    Valid(String),
    /// Malformed or wrong MAC: 403.
    Forbidden,
    /// Outside the timeout: 410.
    Expired,
}

impl SecureDownload {
    /// The MAC of a link, as it appears in the URL.
    pub fn mac(&self, rel_path: &str, ts_hex: &str) -> String {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        match self.algorithm {
            Algorithm::Md5 => {
                let mut h = Md5::new();
                h.update(&self.secret);
                h.update(rel_path.as_bytes());
                h.update(ts_hex.as_bytes());
                h.finalize().iter().map(|b| format!("{b:02x}")).collect()
            }
            Algorithm::HmacSha1 => {
                let mut m =
                    Hmac::<sha1::Sha1>::new_from_slice(&self.secret).expect("any key length");
                m.update(b"/");
                m.update(ts_hex.as_bytes());
                m.update(rel_path.as_bytes());
                b64.encode(m.finalize().into_bytes())
            }
            Algorithm::HmacSha256 => {
                let mut m =
                    Hmac::<sha2::Sha256>::new_from_slice(&self.secret).expect("any key length");
                m.update(b"/");
                m.update(ts_hex.as_bytes());
                m.update(rel_path.as_bytes());
                b64.encode(m.finalize().into_bytes())
            }
        }
    }

    /// Checks `path` at Unix time `now` (seconds).
    pub fn check(&self, path: &str, now: u64) -> Verdict {
        let Some(rest) = path.strip_prefix(&self.uri_prefix) else {
            return Verdict::NotALink;
        };
        let Some((mac, rest)) = rest.split_once('/') else {
            return Verdict::Forbidden;
        };
        let Some(slash) = rest.find('/') else {
            return Verdict::Forbidden;
        };
        let (ts_hex, rel) = rest.split_at(slash);
        if ts_hex.is_empty() || ts_hex.len() > 16 || rel.len() < 2 {
            return Verdict::Forbidden;
        }
        let Ok(ts) = u64::from_str_radix(ts_hex, 16) else {
            return Verdict::Forbidden;
        };
        let want = self.mac(rel, ts_hex);
        if !bool::from(want.as_bytes().ct_eq(mac.as_bytes())) {
            return Verdict::Forbidden;
        }
        if now.abs_diff(ts) > self.timeout {
            return Verdict::Expired;
        }
        Verdict::Valid(rel.to_owned())
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn answer(req: &mut Request<'_>, status: u16, text: &str) -> Action {
    req.respond(status, text.as_bytes());
    req.set_response_header("content-type", "text/plain; charset=utf-8");
    Action::Respond
}

impl Plugin for SecureDownload {
    const NAME: &'static str = "secure-download";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const HOOKS: u32 = HOOK_REQUEST;
    type Config = Config;
    type State = State;

    fn new(cfg: Config, _host: &Host) -> Result<Self, String> {
        if cfg.secret.is_empty() {
            return Err("secret: must not be empty".into());
        }
        if !cfg.uri_prefix.starts_with('/') || !cfg.uri_prefix.ends_with('/') {
            return Err(format!(
                "uri-prefix: \"{}\" must start and end with '/'",
                cfg.uri_prefix
            ));
        }
        if !cfg.protected_prefix.starts_with('/') || cfg.protected_prefix.ends_with('/') {
            return Err(format!(
                "protected-prefix: \"{}\" must start with '/' and not end with it",
                cfg.protected_prefix
            ));
        }
        Ok(SecureDownload {
            secret: cfg.secret.into_bytes(),
            uri_prefix: cfg.uri_prefix,
            protected_prefix: cfg.protected_prefix,
            timeout: cfg.timeout,
            algorithm: cfg.algorithm,
        })
    }

    fn on_request(&self, st: &mut State, req: &mut Request<'_>) -> Result<Action, String> {
        let path = String::from_utf8_lossy(req.path()).into_owned();
        if st.rewritten_to.as_deref() == Some(path.as_str()) {
            return Ok(Action::Continue);
        }
        let protected = path == self.protected_prefix
            || path
                .strip_prefix(&self.protected_prefix)
                .is_some_and(|r| r.starts_with('/'));
        if protected {
            return Ok(answer(req, 403, "Forbidden\n"));
        }
        match self.check(&path, now()) {
            Verdict::NotALink => Ok(Action::Continue),
            Verdict::Forbidden => Ok(answer(req, 403, "Forbidden\n")),
            Verdict::Expired => Ok(answer(req, 410, "Gone: the link has expired\n")),
            Verdict::Valid(rel) => {
                let target = format!("{}{rel}", self.protected_prefix);
                if !req.set_path(&target) {
                    return Ok(answer(req, 403, "Forbidden\n"));
                }
                // The host normalizes the path; remember what it made of it.
                st.rewritten_to = Some(String::from_utf8_lossy(req.path()).into_owned());
                Ok(Action::Continue)
            }
        }
    }
}

export_plugin!(SecureDownload);

#[cfg(test)]
mod tests {
    use super::*;

    fn sd(alg: Algorithm) -> SecureDownload {
        SecureDownload {
            secret: b"verysecret".to_vec(),
            uri_prefix: "/dl/".into(),
            protected_prefix: "/protected".into(),
            timeout: 60,
            algorithm: alg,
        }
    }

    #[test]
    fn macs_match_lighttpd_formulas() {
        // Computed with md5sum and `openssl dgst -sha1 -hmac`, base64url.
        let s = sd(Algorithm::Md5);
        assert_eq!(
            s.mac("/secret-file.txt", "4a5f3b2c"),
            "2cbef76f00e9c82b8606f4dca184d733"
        );
        let s = sd(Algorithm::HmacSha1);
        assert_eq!(
            s.mac("/secret-file.txt", "4a5f3b2c"),
            "MWXIhElPzcxtc3rfAw_OmcTTN0Y"
        );
    }

    #[test]
    fn verdicts() {
        for alg in [Algorithm::Md5, Algorithm::HmacSha1, Algorithm::HmacSha256] {
            let s = sd(alg);
            let ts = 0x6000_0000u64;
            let ts_hex = format!("{ts:x}");
            let mac = s.mac("/f.txt", &ts_hex);
            let link = format!("/dl/{mac}/{ts_hex}/f.txt");
            assert_eq!(
                s.check(&link, ts + 10),
                Verdict::Valid("/f.txt".into()),
                "{alg:?}"
            );
            assert_eq!(s.check(&link, ts + 61), Verdict::Expired);
            assert_eq!(
                s.check(&link.replace("f.txt", "g.txt"), ts),
                Verdict::Forbidden
            );
            assert_eq!(s.check("/dl/zz/1", ts), Verdict::Forbidden);
            assert_eq!(s.check("/other", ts), Verdict::NotALink);
        }
        assert_eq!(sd(Algorithm::HmacSha1).mac("/a", "1").len(), 27);
        assert_eq!(sd(Algorithm::HmacSha256).mac("/a", "1").len(), 43);
    }
}

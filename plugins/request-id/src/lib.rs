//! `request-id`: gives every request an id in `X-Request-Id` (keeping a valid
//! incoming one), on the request (so later modules see it) and on the response,
//! and offers it to the access log as the note `%{request-id}n`.
//!
//! ```toml
//! [[plugin]]
//! name = "request-id"
//! path = "../target/release/libtessera_plugin_request_id.so"
//!
//! [[vhost]]
//! modules = ["request-id", "access-log", "static-file"]
//! [vhost.request-id]
//! header = "X-Request-Id"   # default
//! trust-incoming = true     # default: keep a valid incoming id
//! ```

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use tessera_plugin_sdk::{
    export_plugin, Action, Host, Plugin, Request, HOOK_REQUEST, HOOK_RESPONSE,
};

/// Options of `[vhost.request-id]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// The header carrying the id. Default `X-Request-Id`.
    #[serde(default = "default_header")]
    pub header: String,
    /// Keep an incoming id that is 1 to 128 characters of `[A-Za-z0-9._-]`.
    /// Default `true`; `false` always makes a new one.
    #[serde(default = "default_true")]
    pub trust_incoming: bool,
}

fn default_header() -> String {
    "X-Request-Id".into()
}
fn default_true() -> bool {
    true
}

/// The plugin instance.
pub struct RequestId {
    header: String,
    trust_incoming: bool,
    seed: RandomState,
    counter: AtomicU64,
}

/// True for an id worth keeping: 1..=128 characters of `[A-Za-z0-9._-]`.
pub fn valid_id(v: &[u8]) -> bool {
    !v.is_empty()
        && v.len() <= 128
        && v.iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
}

impl RequestId {
    /// A new 128-bit id as 32 lower-case hex digits: a per-instance random key
    /// hashed with a counter (unique within the process, unpredictable outside).
    fn new_id(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let a = self.seed.hash_one((n, 0u8));
        let b = self.seed.hash_one((n, 1u8));
        format!("{a:016x}{b:016x}")
    }
}

impl Plugin for RequestId {
    const NAME: &'static str = "request-id";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const HOOKS: u32 = HOOK_REQUEST | HOOK_RESPONSE;
    type Config = Config;
    type State = String;

    fn new(cfg: Config, _host: &Host) -> Result<Self, String> {
        if cfg.header.is_empty()
            || !cfg
                .header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(format!("header: \"{}\" is not a header name", cfg.header));
        }
        Ok(RequestId {
            header: cfg.header,
            trust_incoming: cfg.trust_incoming,
            seed: RandomState::new(),
            counter: AtomicU64::new(0),
        })
    }

    fn on_request(&self, id: &mut String, req: &mut Request<'_>) -> Result<Action, String> {
        if !id.is_empty() {
            // Called again after an internal rewrite: keep the id.
            return Ok(Action::Continue);
        }
        *id = match req.header(&self.header) {
            Some(v) if self.trust_incoming && valid_id(v) => {
                String::from_utf8_lossy(v).into_owned()
            }
            _ => self.new_id(),
        };
        req.set_header(&self.header, id);
        req.set_note("request-id", id);
        Ok(Action::Continue)
    }

    fn on_response(&self, id: &mut String, req: &mut Request<'_>) -> Result<(), String> {
        if !id.is_empty() {
            req.set_response_header(&self.header, id);
        }
        Ok(())
    }
}

export_plugin!(RequestId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(valid_id(b"abc-123_x.y"));
        assert!(!valid_id(b""));
        assert!(!valid_id(b"a b"));
        assert!(!valid_id(b"a\"b"));
        assert!(!valid_id(&[b'a'; 129]));
        let p = RequestId {
            header: default_header(),
            trust_incoming: true,
            seed: RandomState::new(),
            counter: AtomicU64::new(0),
        };
        let (a, b) = (p.new_id(), p.new_id());
        assert_eq!(a.len(), 32);
        assert!(valid_id(a.as_bytes()));
        assert_ne!(a, b);
    }
}

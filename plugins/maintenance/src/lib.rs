//! `maintenance`: answers every request of a vhost with a 503 page and
//! `Retry-After` (RFC 9110 §10.2.3, §15.6.4), except for allowed client
//! addresses, which are served normally. It shows a request phase answering on
//! its own.
//!
//! ```toml
//! [vhost.maintenance]
//! retry-after = 600                      # seconds; default 3600
//! page = "<h1>Back soon</h1>"            # HTML body; default a short notice
//! page-file = "/srv/maintenance.html"    # or: a file read at start (overrides `page`)
//! allow = ["127.0.0.1", "10.0.0.0/8", "::1"]
//! ```

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;
use tessera_plugin_sdk::{export_plugin, Action, Host, Plugin, Request, HOOK_REQUEST};

/// Options of `[vhost.maintenance]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// `Retry-After` in seconds. Default 3600.
    #[serde(default = "default_retry")]
    pub retry_after: u64,
    /// The HTML page. Default: a short notice.
    #[serde(default)]
    pub page: Option<String>,
    /// A file with the HTML page, read once at start (absolute, or relative to
    /// the server's working directory). Overrides `page`.
    #[serde(default)]
    pub page_file: Option<String>,
    /// Client addresses or CIDR ranges (IPv4 and IPv6) served normally.
    #[serde(default)]
    pub allow: Vec<String>,
}

fn default_retry() -> u64 {
    3600
}

/// The plugin instance.
pub struct Maintenance {
    retry_after: String,
    page: Vec<u8>,
    allow: Vec<IpNet>,
}

/// Parses an address or CIDR range.
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>()
        .map(|n| n.trunc())
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("allow: \"{s}\" is not an IP address or CIDR range"))
}

impl Maintenance {
    fn allowed(&self, peer: &[u8]) -> bool {
        let Some(ip) = std::str::from_utf8(peer)
            .ok()
            .and_then(|p| p.parse::<IpAddr>().ok())
        else {
            return false;
        };
        self.allow.iter().any(|n| n.contains(&ip))
    }
}

impl Plugin for Maintenance {
    const NAME: &'static str = "maintenance";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const HOOKS: u32 = HOOK_REQUEST;
    type Config = Config;
    type State = ();

    fn new(cfg: Config, _host: &Host) -> Result<Self, String> {
        let page = match (&cfg.page_file, cfg.page) {
            (Some(f), _) => std::fs::read(f).map_err(|e| format!("page-file: \"{f}\": {e}"))?,
            (None, Some(p)) => p.into_bytes(),
            (None, None) => b"<!DOCTYPE html>\n<html><head><title>503 Service Unavailable</title></head><body><h1>Down for maintenance</h1><p>Please try again later.</p></body></html>\n".to_vec(),
        };
        Ok(Maintenance {
            retry_after: cfg.retry_after.to_string(),
            page,
            allow: cfg
                .allow
                .iter()
                .map(|a| parse_net(a))
                .collect::<Result<_, _>>()?,
        })
    }

    fn on_request(&self, _: &mut (), req: &mut Request<'_>) -> Result<Action, String> {
        if self.allowed(req.peer()) {
            return Ok(Action::Continue);
        }
        req.respond(503, &self.page);
        req.set_response_header("content-type", "text/html; charset=utf-8");
        req.set_response_header("retry-after", &self.retry_after);
        req.set_response_header("cache-control", "no-store");
        Ok(Action::Respond)
    }
}

export_plugin!(Maintenance);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list() {
        let m = Maintenance {
            retry_after: "1".into(),
            page: vec![],
            allow: ["10.0.0.0/8", "::1", "192.0.2.7"]
                .iter()
                .map(|a| parse_net(a).unwrap())
                .collect(),
        };
        assert!(m.allowed(b"10.9.8.7"));
        assert!(m.allowed(b"::1"));
        assert!(m.allowed(b"192.0.2.7"));
        assert!(!m.allowed(b"192.0.2.8"));
        assert!(!m.allowed(b"11.0.0.1"));
        assert!(!m.allowed(b"garbage"));
        assert!(parse_net("10.0.0.0/33").is_err());
    }
}

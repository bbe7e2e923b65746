//! `access`: refuse requests by path suffix or client address with 403
//! (lighttpd mod_access `url.access-deny` and `$HTTP["remoteip"]`, nginx
//! `allow`/`deny`, Cherokee `allow_from`).
//!
//! ```toml
//! [vhost.access]
//! deny-suffixes = ["~", ".inc"]
//! rules = [{ allow = "127.0.0.1" }, { allow = "10.0.0.0/8" }, { allow = "::1" }, { deny = "all" }]
//! ```
//!
//! Request phase. `deny-suffixes` is tested first, against the decoded,
//! normalized path (so `/a.inc%20`-style tricks and `%2e` cannot dodge it, and a
//! path rewritten by `rewrite` is checked again). Then `rules` run in order and
//! the first whose address or CIDR range contains the client address decides, as
//! nginx's `allow`/`deny` do; when no rule matches, the request is allowed. The
//! client address is the TCP peer (`X-Forwarded-For` is not consulted); an
//! IPv4-mapped IPv6 peer (`::ffff:10.1.2.3`) is compared as IPv4, and so are
//! rules written as IPv4-mapped ranges. A refusal is `403 Forbidden` with the
//! core's error page.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net};
use serde::Deserialize;
use tessera_core::actix_web::http::StatusCode;
use tessera_core::module::Outcome;
use tessera_core::response::error_response;
use tessera_core::rule::{canonical_ip, parse_cidr};
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};

/// Options of `[vhost.access]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AccessConfig {
    /// Path suffixes that are refused with 403, compared ASCII
    /// case-insensitively with the end of the decoded path (lighttpd
    /// `url.access-deny`); `""` refuses every path. Default: none.
    #[serde(default)]
    pub deny_suffixes: Vec<String>,
    /// Address rules, evaluated in order; the first that contains the client
    /// address decides (nginx `allow`/`deny`). Default: none (everyone is
    /// allowed).
    #[serde(default)]
    pub rules: Vec<AccessRuleSpec>,
}

/// One rule as written: `{ allow = "10.0.0.0/8" }` or `{ deny = "all" }`.
///
/// The value is an IPv4 or IPv6 address (`"192.0.2.7"`, `"::1"`, a /32 or /128),
/// a CIDR range (`"10.0.0.0/8"`, `"2001:db8::/32"`; host bits are ignored), or
/// `"all"`, which matches every client, IPv4 and IPv6.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub enum AccessRuleSpec {
    /// Allow clients in this range (nginx `allow`).
    Allow(String),
    /// Refuse clients in this range with 403 (nginx `deny`).
    Deny(String),
}

/// What a compiled rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRange {
    /// `"all"`: every client.
    All,
    /// One network (IPv4-mapped IPv6 ranges are stored as IPv4).
    Net(IpNet),
}

impl ClientRange {
    /// Parses `"all"`, an address or a CIDR range.
    ///
    /// # Errors
    /// The reason, quoting the input: `"10.0.0.1/33" is not an IP address or CIDR range`.
    pub fn parse(s: &str) -> Result<ClientRange, String> {
        if s.trim().eq_ignore_ascii_case("all") {
            return Ok(ClientRange::All);
        }
        let net = parse_cidr(s)?;
        Ok(ClientRange::Net(canonical_net(net)))
    }

    /// True when `ip` (already passed through [`canonical_ip`]) is in the range.
    pub fn contains(&self, ip: Option<IpAddr>) -> bool {
        match self {
            ClientRange::All => true,
            ClientRange::Net(n) => ip.is_some_and(|ip| n.contains(&ip)),
        }
    }
}

/// An IPv6 range inside `::ffff:0:0/96` (IPv4-mapped) as the IPv4 range it
/// denotes, so that it matches peers after [`canonical_ip`]; others unchanged.
fn canonical_net(net: IpNet) -> IpNet {
    if let IpNet::V6(v6) = net {
        if v6.prefix_len() >= 96 {
            if let Some(v4) = v6.network().to_ipv4_mapped() {
                let v4: Ipv4Addr = v4;
                if let Ok(n) = Ipv4Net::new(v4, v6.prefix_len() - 96) {
                    return IpNet::V4(n);
                }
            }
        }
    }
    net
}

/// A compiled rule: allow (`true`) or deny, and its range.
#[derive(Debug, Clone, Copy)]
struct Rule {
    allow: bool,
    range: ClientRange,
}

/// The `access` module instance of one vhost or rule.
pub struct Access {
    deny_suffixes: Box<[Box<str>]>,
    rules: Box<[Rule]>,
}

impl ModuleDecl for Access {
    const NAME: &'static str = "access";
    type Config = AccessConfig;

    fn build(cfg: AccessConfig, _cx: &BuildContext<'_>) -> Result<Self, String> {
        let rules = cfg
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let (allow, key, v) = match r {
                    AccessRuleSpec::Allow(v) => (true, "allow", v),
                    AccessRuleSpec::Deny(v) => (false, "deny", v),
                };
                ClientRange::parse(v)
                    .map(|range| Rule { allow, range })
                    .map_err(|e| format!("rules[{i}].{key}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Access {
            deny_suffixes: cfg
                .deny_suffixes
                .iter()
                .map(|s| s.as_str().into())
                .collect(),
            rules,
        })
    }
}

impl Access {
    /// True when the path ends with one of `deny-suffixes` (ASCII case-insensitive).
    fn suffix_denied(&self, path: &str) -> bool {
        let p = path.as_bytes();
        self.deny_suffixes.iter().any(|s| {
            let s = s.as_bytes();
            p.len() >= s.len() && p[p.len() - s.len()..].eq_ignore_ascii_case(s)
        })
    }

    /// The decision of the first rule containing `ip`; `true` (allow) when none does.
    fn client_allowed(&self, ip: Option<IpAddr>) -> bool {
        let ip = ip.map(canonical_ip);
        match self.rules.iter().find(|r| r.range.contains(ip)) {
            Some(r) => r.allow,
            None => true,
        }
    }
}

impl Module for Access {
    fn hooks(&self) -> Hooks {
        Hooks::REQUEST
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        if self.suffix_denied(cx.path()) || !self.client_allowed(cx.req.peer_addr().map(|a| a.ip()))
        {
            return Outcome::Respond(error_response(StatusCode::FORBIDDEN));
        }
        Outcome::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use tessera_core::actix_web::test::TestRequest;
    use tessera_core::vhost::VhostInfo;

    fn build(json: serde_json::Value) -> Result<Access, String> {
        crate::testing::build(json)
    }

    fn rules(r: serde_json::Value) -> Access {
        build(serde_json::json!({ "rules": r })).unwrap()
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn first_match_wins_and_default_allows() {
        let a = rules(serde_json::json!([{"allow": "10.0.0.0/8"}, {"deny": "all"}]));
        assert!(a.client_allowed(ip("10.0.0.0")));
        assert!(a.client_allowed(ip("10.255.255.255")));
        assert!(!a.client_allowed(ip("11.0.0.0")));
        assert!(!a.client_allowed(ip("9.255.255.255")));
        assert!(!a.client_allowed(ip("::1")));
        assert!(!a.client_allowed(None));
        let a = rules(serde_json::json!([{"deny": "10.1.0.0/16"}, {"allow": "10.0.0.0/8"}]));
        assert!(!a.client_allowed(ip("10.1.2.3")));
        assert!(a.client_allowed(ip("10.2.2.3")));
        // no rule matched: allowed
        assert!(a.client_allowed(ip("192.0.2.1")));
        assert!(a.client_allowed(None));
        assert!(rules(serde_json::json!([])).client_allowed(ip("192.0.2.1")));
    }

    #[test]
    fn cidr_edges() {
        // /0 covers its whole family, and only it
        let a = rules(serde_json::json!([{"deny": "0.0.0.0/0"}]));
        assert!(!a.client_allowed(ip("0.0.0.0")));
        assert!(!a.client_allowed(ip("255.255.255.255")));
        assert!(a.client_allowed(ip("2001:db8::1")));
        let a = rules(serde_json::json!([{"deny": "::/0"}]));
        assert!(!a.client_allowed(ip("2001:db8::1")));
        assert!(a.client_allowed(ip("192.0.2.1")));
        // /32 and a bare address are one host
        for r in ["192.0.2.7/32", "192.0.2.7"] {
            let a = rules(serde_json::json!([{"deny": r}]));
            assert!(!a.client_allowed(ip("192.0.2.7")), "{r}");
            assert!(a.client_allowed(ip("192.0.2.6")), "{r}");
            assert!(a.client_allowed(ip("192.0.2.8")), "{r}");
        }
        // /128
        let a = rules(serde_json::json!([{"deny": "2001:db8::1/128"}]));
        assert!(!a.client_allowed(ip("2001:db8::1")));
        assert!(a.client_allowed(ip("2001:db8::2")));
        assert!(a.client_allowed(ip("2001:db8::")));
        // boundaries of a /23, host bits in the rule ignored
        let a = rules(serde_json::json!([{"deny": "192.0.3.77/23"}]));
        assert!(!a.client_allowed(ip("192.0.2.0")));
        assert!(!a.client_allowed(ip("192.0.3.255")));
        assert!(a.client_allowed(ip("192.0.1.255")));
        assert!(a.client_allowed(ip("192.0.4.0")));
        // IPv6 /64 boundaries
        let a = rules(serde_json::json!([{"deny": "2001:db8:0:1::/64"}]));
        assert!(!a.client_allowed(ip("2001:db8:0:1:ffff:ffff:ffff:ffff")));
        assert!(a.client_allowed(ip("2001:db8:0:2::")));
        assert!(a.client_allowed(ip("2001:db8:0:0:ffff:ffff:ffff:ffff")));
    }

    #[test]
    fn ipv4_mapped_clients_and_rules() {
        let a = rules(serde_json::json!([{"allow": "10.0.0.0/8"}, {"deny": "all"}]));
        assert!(a.client_allowed(ip("::ffff:10.1.2.3")));
        assert!(!a.client_allowed(ip("::ffff:11.1.2.3")));
        // an IPv6 client is not in an IPv4 rule, whatever its bits
        assert!(!a.client_allowed(ip("a00::1")));
        assert!(!a.client_allowed(ip("::10.1.2.3")));
        // a rule written as IPv4-mapped matches IPv4 and mapped clients
        let a = rules(serde_json::json!([{"deny": "::ffff:192.0.2.0/120"}]));
        assert!(!a.client_allowed(ip("192.0.2.200")));
        assert!(!a.client_allowed(ip("::ffff:192.0.2.1")));
        assert!(a.client_allowed(ip("192.0.3.1")));
        assert_eq!(
            ClientRange::parse("::ffff:0.0.0.0/96").unwrap(),
            ClientRange::Net("0.0.0.0/0".parse().unwrap())
        );
        // "all" matches both families
        let a = rules(serde_json::json!([{"deny": "ALL"}]));
        assert!(!a.client_allowed(ip("::1")) && !a.client_allowed(ip("127.0.0.1")));
    }

    #[test]
    fn suffixes() {
        let a = build(serde_json::json!({"deny-suffixes": ["~", ".inc"]})).unwrap();
        assert!(a.suffix_denied("/index.html~"));
        assert!(a.suffix_denied("/lib/db.inc"));
        assert!(a.suffix_denied("/lib/db.INC"));
        assert!(!a.suffix_denied("/lib/db.inc.php"));
        assert!(!a.suffix_denied("/"));
        assert!(!a.suffix_denied("/inc"));
        let all = build(serde_json::json!({"deny-suffixes": [""]})).unwrap();
        assert!(all.suffix_denied("/") && all.suffix_denied("/x"));
    }

    #[test]
    fn build_errors_name_the_key() {
        let e = build(serde_json::json!({"rules": [{"allow": "::1"}, {"deny": "10.0.0.1/33"}]}))
            .err()
            .unwrap();
        assert!(e.starts_with("rules[1].deny: "), "{e}");
        assert!(e.contains("10.0.0.1/33"), "{e}");
        assert!(build(serde_json::json!({"rules": [{"permit": "all"}]})).is_err());
        assert!(build(serde_json::json!({"rules": [{"allow": "all", "deny": "all"}]})).is_err());
        assert!(build(serde_json::json!({"deny-suffix": ["~"]})).is_err());
    }

    #[test]
    fn hook_answers_403() {
        let a = rules(serde_json::json!([{"deny": "192.0.2.0/24"}]));
        let v = VhostInfo {
            index: 0,
            names: vec![],
            document_root: std::env::temp_dir(),
        };
        let run = |peer: &str, path: &'static str| {
            let req = TestRequest::get()
                .uri(path)
                .peer_addr(peer.parse().unwrap())
                .to_http_request();
            let mut cx = Ctx::new(&req, &v, Cow::Borrowed(path));
            match a.on_request(&mut cx) {
                Outcome::Continue => None,
                Outcome::Respond(r) => Some(r.status()),
            }
        };
        assert_eq!(run("192.0.2.9:1234", "/"), Some(StatusCode::FORBIDDEN));
        assert_eq!(
            run("[::ffff:192.0.2.9]:1234", "/"),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(run("198.51.100.1:1234", "/"), None);
    }
}

//! Rules inside a vhost (`[[vhost.rule]]`): Cherokee's rule model, into which
//! lighttpd's `$HTTP["url"]` conditionals and nginx's locations translate.
//!
//! A rule has a match and module tables. Rules are evaluated top-down in file order;
//! a rule with `final = true` (the default, as in Cherokee) stops the evaluation.
//! How matching rules combine into a pipeline is described in [`crate::pipeline`].
//!
//! Regular expressions use `fancy-regex` (look-around and backreferences, as in
//! PCRE, which lighttpd and Cherokee use); patterns without those features run on
//! the `regex` crate's engine.

use std::net::IpAddr;
use std::path::Path;

use actix_web::HttpRequest;
use fancy_regex::Regex;
use ipnet::IpNet;
use serde::Deserialize;

/// A match as written in the configuration (`match = { path-prefix = "/img/" }`).
///
/// Externally tagged, kebab-case keys: `path-prefix`, `path-regex`, `extensions`,
/// `all`, `any`, `not`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum MatchSpec {
    /// The decoded, normalized path starts with this string (nginx `location /x/`,
    /// Cherokee `directory`, lighttpd `$HTTP["url"] =^`).
    PathPrefix(String),
    /// The decoded path matches this regular expression (unanchored unless the
    /// pattern anchors itself; nginx `location ~`, Cherokee `request`,
    /// lighttpd `$HTTP["url"] =~`). Syntax: the `regex` crate.
    PathRegex(String),
    /// The last path segment ends in `.EXT` for one of these extensions,
    /// compared case-insensitively, without the dot (Cherokee `extensions`).
    Extensions(Vec<String>),
    /// Every inner match holds (Cherokee `and`).
    All(Vec<MatchSpec>),
    /// At least one inner match holds (Cherokee `or`).
    Any(Vec<MatchSpec>),
    /// The inner match does not hold (Cherokee `not`).
    Not(Box<MatchSpec>),
    /// The client address is one of these addresses or CIDR ranges, IPv4 or
    /// IPv6 (`"10.0.0.0/8"`, `"::1"`; lighttpd `$HTTP["remoteip"]`, Cherokee
    /// `from`). IPv4-mapped IPv6 peers compare as IPv4.
    Client(Vec<String>),
    /// The client address, as text (`192.0.2.1`, `2001:db8::1`; IPv4-mapped
    /// IPv6 peers as IPv4), matches this regular expression: lighttpd's
    /// `$HTTP["remoteip"] =~`, which tests the text, for the patterns that
    /// are no list of ranges (`^10\.0\.0\.[5-9]$`). The same address as
    /// `client` (after `trusted-proxies`).
    ClientRegex(String),
    /// The request method is one of these (case-sensitive, RFC 9110 §9.1;
    /// Cherokee `method`).
    Method(Vec<String>),
    /// A request header exists, or matches a regular expression (lighttpd
    /// `$HTTP["useragent"]`, Cherokee `header`).
    Header(HeaderSpec),
    /// The request's host matches this regular expression: the host of an
    /// absolute-form target, or else of `Host`, normalized as lighttpd's
    /// `$HTTP["host"]` sees it ([`crate::vhost::normalize_host`], as for
    /// `names-see-port` vhost names: lower-cased, no trailing dot, no
    /// default port; other ports stay), `""` when there is none. A `header`
    /// test of `Host` sees `a.test.` and `a.test:80` as sent.
    Host(String),
    /// The raw query string (without `?`) matches this regular expression
    /// (lighttpd `$HTTP["querystring"]`).
    Query(String),
    /// Whether the path names an existing file or directory under the
    /// document root (Cherokee `exists`, lighttpd `url.rewrite-if-not-file`).
    /// Costs one `stat` per evaluation.
    FileExists(bool),
    /// The request came in on this listening socket, `"IP:PORT"` (lighttpd
    /// `$SERVER["socket"]`, Cherokee `bind`).
    Socket(String),
    /// `true`: the request reached this path by an internal redirect (a
    /// back end's local `Location` or `X-Accel-Redirect`); `false`: it asked
    /// for it itself. nginx's `internal` location: with
    /// `{ not = { internal = true } }` and `access`, a path only back ends
    /// can hand out.
    Internal(bool),
}

/// The `header` matcher: `{ name = "User-Agent", regex = "curl" }`; without
/// `regex`, the header only has to be present.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct HeaderSpec {
    /// Header name, case-insensitive.
    pub name: String,
    /// Pattern tested against each field line's value; any line may match.
    #[serde(default)]
    pub regex: Option<String>,
}

/// What a matcher sees of a request.
pub struct MatchInput<'a> {
    /// The decoded, normalized path.
    pub path: &'a str,
    /// The request (method, headers, query, peer and local addresses).
    pub req: Option<&'a HttpRequest>,
    /// The vhost's document root, for [`MatchSpec::FileExists`].
    pub document_root: &'a Path,
    /// The request reached this path by an internal redirect
    /// ([`MatchSpec::Internal`]).
    pub internal: bool,
}

impl<'a> MatchInput<'a> {
    /// Input with only a path (no request): request-based matchers do not match.
    pub fn path_only(path: &'a str) -> Self {
        MatchInput {
            path,
            req: None,
            document_root: Path::new("/nonexistent"),
            internal: false,
        }
    }
}

/// A compiled match, evaluated per request against the decoded path.
#[derive(Debug)]
pub enum Matcher {
    /// Matches every request (a rule without `match`, Cherokee's `default`).
    Always,
    /// See [`MatchSpec::PathPrefix`].
    PathPrefix(Box<str>),
    /// See [`MatchSpec::PathRegex`].
    PathRegex(Regex),
    /// Lower-cased extensions without the dot; see [`MatchSpec::Extensions`].
    Extensions(Box<[Box<str>]>),
    /// See [`MatchSpec::All`].
    All(Box<[Matcher]>),
    /// See [`MatchSpec::Any`].
    Any(Box<[Matcher]>),
    /// See [`MatchSpec::Not`].
    Not(Box<Matcher>),
    /// See [`MatchSpec::Client`].
    Client(Box<[IpNet]>),
    /// See [`MatchSpec::ClientRegex`].
    ClientRegex(Regex),
    /// See [`MatchSpec::Method`].
    Method(Box<[actix_web::http::Method]>),
    /// See [`MatchSpec::Header`].
    Header(actix_web::http::header::HeaderName, Option<Regex>),
    /// See [`MatchSpec::Host`].
    Host(Regex),
    /// See [`MatchSpec::Query`].
    Query(Regex),
    /// See [`MatchSpec::FileExists`].
    FileExists(bool),
    /// See [`MatchSpec::Socket`].
    Socket(std::net::SocketAddr),
    /// See [`MatchSpec::Internal`].
    Internal(bool),
}

fn compile_regex(key: &str, r: &str) -> Result<Regex, (String, String)> {
    Regex::new(r).map_err(|e| {
        let msg = e.to_string().replace('\n', " ");
        (
            key.to_string(),
            format!("invalid regular expression \"{r}\": {msg}"),
        )
    })
}

/// Parses `"10.0.0.0/8"` or a bare address (a /32 or /128).
pub fn parse_cidr(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    if let Ok(n) = s.parse::<IpNet>() {
        return Ok(n.trunc());
    }
    s.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("\"{s}\" is not an IP address or CIDR range"))
}

/// The client address with IPv4-mapped IPv6 (`::ffff:a.b.c.d`) turned into IPv4.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl Matcher {
    /// Compiles a match. Errors carry the key path below `match` and the reason
    /// (an invalid regular expression, an empty extension list).
    pub fn compile(spec: &MatchSpec) -> Result<Matcher, (String, String)> {
        Ok(match spec {
            MatchSpec::PathPrefix(p) => {
                if !p.starts_with('/') {
                    return Err(("path-prefix".into(), format!("\"{p}\" must start with '/'")));
                }
                Matcher::PathPrefix(p.as_str().into())
            }
            MatchSpec::PathRegex(r) => Matcher::PathRegex(Regex::new(r).map_err(|e| {
                let msg = e.to_string().replace('\n', " ");
                (
                    "path-regex".to_string(),
                    format!("invalid regular expression: {msg}"),
                )
            })?),
            MatchSpec::Extensions(exts) => {
                if exts.is_empty() {
                    return Err(("extensions".into(), "the list is empty".into()));
                }
                Matcher::Extensions(
                    exts.iter()
                        .map(|e| e.trim_start_matches('.').to_ascii_lowercase().into())
                        .collect(),
                )
            }
            MatchSpec::All(v) => Matcher::All(compile_list("all", v)?),
            MatchSpec::Any(v) => Matcher::Any(compile_list("any", v)?),
            MatchSpec::Not(m) => Matcher::Not(Box::new(
                Matcher::compile(m).map_err(|(k, r)| (format!("not.{k}"), r))?,
            )),
            MatchSpec::Client(list) => {
                if list.is_empty() {
                    return Err(("client".into(), "the list is empty".into()));
                }
                Matcher::Client(
                    list.iter()
                        .enumerate()
                        .map(|(i, c)| parse_cidr(c).map_err(|e| (format!("client[{i}]"), e)))
                        .collect::<Result<_, _>>()?,
                )
            }
            MatchSpec::ClientRegex(r) => Matcher::ClientRegex(compile_regex("client-regex", r)?),
            MatchSpec::Method(list) => {
                if list.is_empty() {
                    return Err(("method".into(), "the list is empty".into()));
                }
                Matcher::Method(
                    list.iter()
                        .enumerate()
                        .map(|(i, m)| {
                            actix_web::http::Method::from_bytes(m.as_bytes()).map_err(|_| {
                                (
                                    format!("method[{i}]"),
                                    format!("\"{m}\" is not a method token"),
                                )
                            })
                        })
                        .collect::<Result<_, _>>()?,
                )
            }
            MatchSpec::Header(h) => Matcher::Header(
                actix_web::http::header::HeaderName::from_bytes(h.name.as_bytes()).map_err(
                    |_| {
                        (
                            "header.name".to_string(),
                            format!("\"{}\" is not a header name", h.name),
                        )
                    },
                )?,
                h.regex
                    .as_deref()
                    .map(|r| compile_regex("header.regex", r))
                    .transpose()?,
            ),
            MatchSpec::Host(r) => Matcher::Host(compile_regex("host", r)?),
            MatchSpec::Query(r) => Matcher::Query(compile_regex("query", r)?),
            MatchSpec::FileExists(b) => Matcher::FileExists(*b),
            MatchSpec::Socket(s) => Matcher::Socket(
                s.parse()
                    .map_err(|_| ("socket".to_string(), format!("\"{s}\" is not IP:PORT")))?,
            ),
            MatchSpec::Internal(b) => Matcher::Internal(*b),
        })
    }

    /// True when the request matches. A regular expression that gives up (the
    /// backtracking limit of fancy-regex) counts as no match. The same
    /// evaluation as [`Matcher::decide`], which also says why.
    #[inline]
    pub fn matches(&self, input: &MatchInput<'_>) -> bool {
        self.decide(input).matched
    }

    /// Evaluates the match and names the condition that decided it (for
    /// `tessera explain`; [`Matcher::matches`] is this without the reason):
    /// in `all`, the first condition that fails (or the last, when all hold);
    /// in `any`, the first that holds (or the last, when none does); in `not`,
    /// its inner condition. Conditions after the deciding one are not
    /// evaluated, as per request.
    pub fn decide(&self, input: &MatchInput<'_>) -> Decision<'_> {
        let leaf = |matched| Decision { matched, by: self };
        let path = input.path;
        match self {
            Matcher::Always => leaf(true),
            Matcher::PathPrefix(p) => leaf(path.starts_with(&**p)),
            Matcher::PathRegex(r) => leaf(r.is_match(path).unwrap_or(false)),
            Matcher::Extensions(exts) => leaf(match extension(path) {
                Some(ext) => exts.iter().any(|e| e.eq_ignore_ascii_case(ext)),
                None => false,
            }),
            Matcher::All(v) => first_deciding(v, input, false),
            Matcher::Any(v) => first_deciding(v, input, true),
            Matcher::Not(m) => {
                let d = m.decide(input);
                Decision {
                    matched: !d.matched,
                    by: d.by,
                }
            }
            Matcher::Client(nets) => leaf(input.req.and_then(|r| r.peer_addr()).is_some_and(|a| {
                let ip = canonical_ip(a.ip());
                nets.iter().any(|n| n.contains(&ip))
            })),
            Matcher::ClientRegex(re) => {
                leaf(input.req.and_then(|r| r.peer_addr()).is_some_and(|a| {
                    let mut text = crate::realip::IpText::default();
                    let ip = text.format(canonical_ip(a.ip()));
                    // an address's text is ASCII
                    std::str::from_utf8(ip).is_ok_and(|s| re.is_match(s).unwrap_or(false))
                }))
            }
            Matcher::Method(ms) => leaf(input.req.is_some_and(|r| ms.contains(r.method()))),
            Matcher::Header(name, re) => leaf(input.req.is_some_and(|r| {
                let mut values = r.headers().get_all(name).peekable();
                match re {
                    None => values.peek().is_some(),
                    Some(re) => {
                        values.any(|v| v.to_str().is_ok_and(|s| re.is_match(s).unwrap_or(false)))
                    }
                }
            })),
            Matcher::Host(re) => leaf(input.req.is_some_and(|r| {
                let mut buf = [0u8; crate::vhost::HOST_BUF];
                let host = crate::context::request_host(r)
                    .and_then(|h| {
                        crate::vhost::normalize_host(h, r.app_config().secure(), &mut buf)
                    })
                    .map_or("", |(full, _)| full);
                re.is_match(host).unwrap_or(false)
            })),
            Matcher::Query(re) => leaf(
                input
                    .req
                    .is_some_and(|r| re.is_match(r.query_string()).unwrap_or(false)),
            ),
            Matcher::FileExists(want) => {
                let p = input.document_root.join(path.trim_start_matches('/'));
                leaf(std::fs::metadata(p).is_ok() == *want)
            }
            Matcher::Socket(addr) => leaf(
                input
                    .req
                    .is_some_and(|r| r.app_config().local_addr() == *addr),
            ),
            Matcher::Internal(want) => leaf(input.internal == *want),
        }
    }

    /// The condition as written in the configuration, for a single condition
    /// (`path-prefix = "/img/"`); combinations are written whole.
    pub fn describe(&self) -> String {
        let q = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
        let list = |v: &[Matcher]| {
            v.iter()
                .map(|m| format!("{{ {} }}", m.describe()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Matcher::Always => "no match (every request)".to_owned(),
            Matcher::PathPrefix(p) => format!("path-prefix = {}", q(p)),
            Matcher::PathRegex(r) => format!("path-regex = {}", q(r.as_str())),
            Matcher::Extensions(e) => format!(
                "extensions = [{}]",
                e.iter().map(|x| q(x)).collect::<Vec<_>>().join(", ")
            ),
            Matcher::All(v) => format!("all = [{}]", list(v)),
            Matcher::Any(v) => format!("any = [{}]", list(v)),
            Matcher::Not(m) => format!("not = {{ {} }}", m.describe()),
            Matcher::Client(n) => format!(
                "client = [{}]",
                n.iter()
                    .map(|x| q(&x.to_string()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Matcher::ClientRegex(r) => format!("client-regex = {}", q(r.as_str())),
            Matcher::Method(m) => format!(
                "method = [{}]",
                m.iter()
                    .map(|x| q(x.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Matcher::Header(n, None) => format!("header = {{ name = {} }}", q(n.as_str())),
            Matcher::Header(n, Some(r)) => format!(
                "header = {{ name = {}, regex = {} }}",
                q(n.as_str()),
                q(r.as_str())
            ),
            Matcher::Host(r) => format!("host = {}", q(r.as_str())),
            Matcher::Query(r) => format!("query = {}", q(r.as_str())),
            Matcher::FileExists(b) => format!("file-exists = {b}"),
            Matcher::Socket(a) => format!("socket = {}", q(&a.to_string())),
            Matcher::Internal(b) => format!("internal = {b}"),
        }
    }

    /// The first `path-regex` inside this match (depth first), for modules that
    /// substitute its captures (`%1` in `redirect` and `rewrite`, as in
    /// lighttpd).
    pub fn path_regex(&self) -> Option<&Regex> {
        match self {
            Matcher::PathRegex(r) => Some(r),
            Matcher::All(v) | Matcher::Any(v) => v.iter().find_map(Matcher::path_regex),
            _ => None,
        }
    }
}

/// The outcome of [`Matcher::decide`]: whether the match holds, and the
/// single condition (never `all`, `any` or `not`) that decided it.
#[derive(Debug, Clone, Copy)]
pub struct Decision<'m> {
    /// The match holds.
    pub matched: bool,
    /// The condition that decided.
    pub by: &'m Matcher,
}

/// `all` (`stop_on` false) and `any` (`stop_on` true): the first inner
/// condition whose outcome is `stop_on` decides, else the last one.
fn first_deciding<'m>(v: &'m [Matcher], input: &MatchInput<'_>, stop_on: bool) -> Decision<'m> {
    let mut last = None;
    for m in v {
        let d = m.decide(input);
        if d.matched == stop_on {
            return d;
        }
        last = Some(d);
    }
    // compiled lists are never empty
    last.unwrap_or(Decision {
        matched: !stop_on,
        by: &Matcher::Always,
    })
}

fn compile_list(key: &str, v: &[MatchSpec]) -> Result<Box<[Matcher]>, (String, String)> {
    if v.is_empty() {
        return Err((key.into(), "the list is empty".into()));
    }
    v.iter()
        .enumerate()
        .map(|(i, s)| Matcher::compile(s).map_err(|(k, r)| (format!("{key}[{i}].{k}"), r)))
        .collect()
}

/// The extension of the last path segment, without the dot; `None` for a name
/// without one, a dotfile such as `.env`, or a path ending in `/`.
pub fn extension(path: &str) -> Option<&str> {
    let name = &path[path.rfind('/').map_or(0, |i| i + 1)..];
    match name.rfind('.') {
        Some(0) | None => None,
        Some(i) => Some(&name[i + 1..]),
    }
}

/// One compiled rule of a vhost.
#[derive(Debug)]
pub struct Rule {
    /// A label for `tessera -t` and errors: the `name` key, or `rule[N]`.
    pub label: String,
    /// When the rule applies.
    pub matcher: Matcher,
    /// Whether a match stops the evaluation of later rules (default `true`).
    pub is_final: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(toml_like: serde_json::Value) -> PathOnly {
        PathOnly(Matcher::compile(&serde_json::from_value(toml_like).unwrap()).unwrap())
    }

    struct PathOnly(Matcher);
    impl PathOnly {
        fn matches(&self, p: &str) -> bool {
            self.0.matches(&MatchInput::path_only(p))
        }
    }

    #[test]
    fn lookahead_compiles() {
        let r = m(serde_json::json!({"path-regex": "^/(?!static/).*\\.php$"}));
        assert!(r.matches("/a.php"));
        assert!(!r.matches("/static/a.php"));
    }

    #[test]
    fn cidr() {
        let n = parse_cidr("10.0.0.0/8").unwrap();
        assert!(n.contains(&"10.1.2.3".parse::<IpAddr>().unwrap()));
        assert!(parse_cidr("::1")
            .unwrap()
            .contains(&"::1".parse::<IpAddr>().unwrap()));
        assert!(parse_cidr("10.0.0.1/33").is_err());
        assert!(parse_cidr("nope").is_err());
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(canonical_ip(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn prefix_regex_extensions() {
        assert!(m(serde_json::json!({"path-prefix": "/img/"})).matches("/img/a.png"));
        assert!(!m(serde_json::json!({"path-prefix": "/img/"})).matches("/imgx"));
        assert!(m(serde_json::json!({"path-regex": "\\.php$"})).matches("/a/b.php"));
        let e = m(serde_json::json!({"extensions": ["PNG", ".jpg"]}));
        assert!(e.matches("/a/b.png") && e.matches("/x.JPG"));
        assert!(!e.matches("/png") && !e.matches("/a.png/") && !e.matches("/.png"));
    }

    #[test]
    fn combinations() {
        let c = m(serde_json::json!({"all": [
            {"path-prefix": "/a/"},
            {"not": {"extensions": ["txt"]}},
            {"any": [{"path-regex": "x"}, {"path-regex": "y"}]}
        ]}));
        assert!(c.matches("/a/x.png"));
        assert!(!c.matches("/a/x.txt"));
        assert!(!c.matches("/a/z.png"));
        assert!(!c.matches("/b/x.png"));
    }

    /// `decide` names the condition that decided, inside combinations.
    #[test]
    fn decide_names_the_deciding_condition() {
        let c = Matcher::compile(
            &serde_json::from_value(serde_json::json!({"all": [
                {"path-prefix": "/a/"},
                {"not": {"extensions": ["txt"]}},
                {"any": [{"path-regex": "x"}, {"path-regex": "y"}]}
            ]}))
            .unwrap(),
        )
        .unwrap();
        let why = |p: &str| {
            let d = c.decide(&MatchInput::path_only(p));
            (d.matched, d.by.describe())
        };
        assert_eq!(why("/b/x.png"), (false, "path-prefix = \"/a/\"".into()));
        assert_eq!(why("/a/x.txt"), (false, "extensions = [\"txt\"]".into()));
        assert_eq!(why("/a/y.png"), (true, "path-regex = \"y\"".into()));
        assert_eq!(why("/a/z.png"), (false, "path-regex = \"y\"".into()));
    }

    #[test]
    fn errors_name_the_key() {
        let spec: MatchSpec =
            serde_json::from_value(serde_json::json!({"all": [{"path-regex": "("}]})).unwrap();
        let (k, r) = Matcher::compile(&spec).unwrap_err();
        assert_eq!(k, "all[0].path-regex");
        assert!(r.contains("invalid regular expression"), "{r}");
        let bad: Result<MatchSpec, _> =
            serde_json::from_value(serde_json::json!({"pathprefix": "/"}));
        assert!(bad.is_err());
    }
}

//! Virtual host selection by the request's host (RFC 9110 §7.2, RFC 9112 §3.2).
//!
//! Names compare case-insensitively (RFC 3986 §3.2.2), a port and one trailing dot
//! (RFC 1034 §3.1) are ignored; exact names win over wildcards, and among
//! wildcards (`*.example.com`, as in nginx's `server_name`) the longest wins. Any
//! other host, and an HTTP/1.0 request without one, goes to the default vhost.
//!
//! Name forms (nginx `server_name`; lighttpd `$HTTP["host"]` conditions translate
//! into them):
//! - `example.com`: exact;
//! - `*.example.com`: any subdomain, not `example.com` itself;
//! - `.example.com`: `example.com` and any subdomain (lighttpd `=$ "example.com"`);
//! - `~REGEX`: a regular expression on the lower-cased host without port and
//!   trailing dot (lighttpd `=~`). It is unanchored: `~example` also matches
//!   `notexample.org`; write `~^(www\.)?example\.com$` to anchor it. Tried after
//!   exact names and wildcards, in file order. A port never makes a match fail.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::pipeline::Pipeline;

/// What modules may know about the vhost they serve.
#[derive(Debug, Clone)]
pub struct VhostInfo {
    /// Position of the vhost in the configuration file (0-based).
    pub index: usize,
    /// `server-names`, lower-cased, as configured (wildcards kept).
    pub names: Vec<String>,
    /// The document root, absolute and canonical (symlinks resolved).
    pub document_root: PathBuf,
}

impl VhostInfo {
    /// The name used in logs (`%v`) and messages: the first server name, or
    /// `#N` for a vhost without names.
    pub fn label(&self) -> String {
        self.names
            .first()
            .cloned()
            .unwrap_or_else(|| format!("#{}", self.index))
    }
}

/// A vhost: its information and its pipeline.
pub struct Vhost {
    /// Names and document root.
    pub info: VhostInfo,
    /// The first server name, for `%v`.
    pub label: String,
    /// Rules and module slots.
    pub pipeline: Pipeline,
    /// Request counters (kept across reloads by label).
    pub counters: std::sync::Arc<crate::stats::VhostCounters>,
    /// Answer plain-HTTP requests with 301 to `https://` (key `https-redirect`).
    pub https_redirect: bool,
    /// Key `listen`: the vhost is selected only for connections accepted by
    /// a listener bound to one of these addresses (lighttpd's
    /// `$SERVER["socket"]` around a host block); empty: every listener.
    pub listen: Box<[std::net::SocketAddr]>,
    /// Key `names-see-port`: the names are compared with the host as sent,
    /// port included (lighttpd's `$HTTP["host"]` regexes, prefixes and
    /// suffixes see the port): `h` matches only a Host without port, `h:8080`
    /// only that port, `*.x` and `~REGEX` see `a.x:8080`.
    pub names_see_port: bool,
}

/// All vhosts of a configuration and the lookup tables over their names.
pub struct VhostTable {
    vhosts: Vec<Vhost>,
    exact: HashMap<Box<str>, usize, foldhash::fast::RandomState>,
    /// Exact names of `names-see-port` vhosts, port included if any.
    exact_port: HashMap<Box<str>, usize, foldhash::fast::RandomState>,
    /// (suffix including the leading dot, vhost index, sees the port),
    /// longest suffix first.
    wildcards: Vec<(Box<str>, usize, bool)>,
    /// `~REGEX` names, in file order, and whether they see the port.
    regexes: Vec<(fancy_regex::Regex, usize, bool)>,
    default: usize,
    /// No `names-see-port`, wildcard or regex names: a lower-case host the
    /// exact table lacks goes to the default at once.
    only_exact: bool,
}

/// Longest host name handled without allocation; longer ones go to the default
/// vhost (DNS names are at most 253 bytes, RFC 1035 §2.3.4).
const MAX_HOST: usize = 255;

impl VhostTable {
    /// Builds the table. `default` is the index of the default vhost. Names must be
    /// lower-case and unique (checked by the configuration loader).
    pub fn new(vhosts: Vec<Vhost>, default: usize) -> Self {
        let mut exact = HashMap::default();
        let mut exact_port = HashMap::default();
        let mut wildcards = Vec::new();
        let mut regexes = Vec::new();
        for (i, v) in vhosts.iter().enumerate() {
            let port = v.names_see_port;
            let ex = if port { &mut exact_port } else { &mut exact };
            for n in &v.info.names {
                if let Some(re) = n.strip_prefix('~') {
                    // Validated by the configuration loader.
                    if let Ok(r) = fancy_regex::Regex::new(re) {
                        regexes.push((r, i, port));
                    }
                } else if let Some(suffix) = n.strip_prefix('*') {
                    wildcards.push((suffix.into(), i, port));
                } else if let Some(base) = n.strip_prefix('.') {
                    ex.entry(base.into()).or_insert(i);
                    wildcards.push((n.as_str().into(), i, port));
                } else {
                    ex.insert(n.as_str().into(), i);
                }
            }
        }
        wildcards.sort_by_key(|w: &(Box<str>, usize, bool)| std::cmp::Reverse(w.0.len()));
        let only_exact = exact_port.is_empty() && wildcards.is_empty() && regexes.is_empty();
        VhostTable {
            only_exact,
            vhosts,
            exact,
            exact_port,
            wildcards,
            regexes,
            default,
        }
    }

    /// All vhosts, in file order.
    pub fn all(&self) -> &[Vhost] {
        &self.vhosts
    }

    /// True when some vhost's pipeline has a module with blocking hooks.
    pub fn any_may_block(&self) -> bool {
        self.vhosts.iter().any(|v| v.pipeline.may_block)
    }

    /// True when some vhost's pipeline has an asynchronous content handler.
    pub fn any_may_async(&self) -> bool {
        self.vhosts.iter().any(|v| v.pipeline.may_async)
    }

    /// The default vhost.
    pub fn default_vhost(&self) -> &Vhost {
        &self.vhosts[self.default]
    }

    /// Whether vhost `i` answers on the listener bound to `listener`.
    fn listens_on(&self, i: usize, listener: Option<std::net::SocketAddr>) -> bool {
        let l = &self.vhosts[i].listen;
        l.is_empty() || listener.is_some_and(|a| l.contains(&a))
    }

    /// Selects the vhost for a host as sent in Host or the request target's
    /// authority (`Example.COM:8080`, `example.com.`, `[::1]:80`) with no
    /// listener known: vhosts with `listen` are passed over. `None` (no host)
    /// gives the default vhost. See [`VhostTable::select_on`].
    pub fn select(&self, host: Option<&str>) -> &Vhost {
        self.select_on(host, None, false)
    }

    /// [`VhostTable::select`] for a connection accepted by the listener bound
    /// to `listener` (the address as bound: `0.0.0.0:80` for a wildcard
    /// listener, as lighttpd's `$SERVER["socket"]` names it). A vhost whose
    /// `listen` does not name that listener is passed over, as if it had no
    /// names; this costs a comparison per candidate and no allocation.
    /// `tls`: the connection is TLS, so `:443` (else `:80`) is the default
    /// port, which `names-see-port` names do not see (lighttpd normalizes
    /// the host so).
    #[inline]
    pub fn select_on(
        &self,
        host: Option<&str>,
        listener: Option<std::net::SocketAddr>,
        tls: bool,
    ) -> &Vhost {
        self.select_why(host, listener, tls).0
    }

    /// [`VhostTable::select_on`], which it is, with the reason for the choice
    /// (for `tessera explain`).
    pub fn select_why(
        &self,
        host: Option<&str>,
        listener: Option<std::net::SocketAddr>,
        tls: bool,
    ) -> (&Vhost, Selected<'_>) {
        let default = (self.default_vhost(), Selected::Default);
        let Some(host) = host else {
            return (self.default_vhost(), Selected::NoHost);
        };
        let stripped = strip_port(host);
        let name = stripped.strip_suffix('.').unwrap_or(stripped);
        if name.is_empty() || name.len() > MAX_HOST {
            return default;
        }
        // the common case first: a lower-case host that names a vhost, looked
        // up as sent, without the copy below
        if !name.bytes().any(|b| b.is_ascii_uppercase()) {
            if let Some((n, &i)) = self.exact.get_key_value(name) {
                if self.listens_on(i, listener) {
                    return (&self.vhosts[i], Selected::Exact(n));
                }
            }
            // what follows would look the same name up again, and nothing
            // else (a port, a suffix, a pattern) could match it
            if self.only_exact {
                return default;
            }
        }
        let mut buf = [0u8; HOST_BUF];
        let Some((full, name_len)) = normalize_host(host, tls, &mut buf) else {
            return default;
        };
        let lower = &full[..name_len];
        let seen = |sees_port: bool| if sees_port { full } else { lower };
        if let Some((n, &i)) = self.exact.get_key_value(lower) {
            if self.listens_on(i, listener) {
                return (&self.vhosts[i], Selected::Exact(n));
            }
        }
        if let Some((n, &i)) = self.exact_port.get_key_value(full) {
            if self.listens_on(i, listener) {
                return (&self.vhosts[i], Selected::Exact(n));
            }
        }
        for (suffix, i, sees_port) in &self.wildcards {
            let h = seen(*sees_port);
            if h.len() > suffix.len() && h.ends_with(&**suffix) && self.listens_on(*i, listener) {
                return (&self.vhosts[*i], Selected::Wildcard(suffix));
            }
        }
        for (re, i, sees_port) in &self.regexes {
            if self.listens_on(*i, listener) && re.is_match(seen(*sees_port)).unwrap_or(false) {
                return (&self.vhosts[*i], Selected::Regex(re.as_str()));
            }
        }
        default
    }
}

/// Why [`VhostTable::select_why`] chose its vhost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selected<'t> {
    /// The host equals this name (lower-cased; with its port for a
    /// `names-see-port` vhost).
    Exact(&'t str),
    /// The host ends with this suffix (`.example.com`, from `*.example.com`
    /// or `.example.com`).
    Wildcard(&'t str),
    /// The host matches this regular expression (a `~REGEX` name).
    Regex(&'t str),
    /// The request named no host (HTTP/1.0 without `Host`, or a request the
    /// protocol checks refused): the default vhost.
    NoHost,
    /// No name matched the host: the default vhost.
    Default,
}

/// The bytes of a reg-name (RFC 3986 §3.2.2: unreserved, pct-encoded's `%`,
/// sub-delims), a table built at compile time: one load per byte of every
/// request's Host.
static HOST_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'%'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            );
        c += 1;
    }
    t
};

/// The size of the buffer [`normalize_host`] writes into: the longest host
/// name and a `:port`.
pub const HOST_BUF: usize = MAX_HOST + 6;

/// A request's host as vhost selection and the `host` rule matcher see it
/// (lighttpd's `http_request_host_normalize`): lower-cased, without a
/// trailing dot, with its `:port` as a number unless it is the scheme's
/// default (80, or 443 with `tls`): `A.test.:080` is `a.test`,
/// `a.test:8080` stays so; digits over 65535 become a bare `:` (no name
/// with a port matches it), and a `:` before anything else is part of the
/// name. Written into `buf`; returns the whole
/// and the length of the name without the port. `None` for an empty name
/// or one over 255 bytes.
pub fn normalize_host<'b>(
    host: &str,
    tls: bool,
    buf: &'b mut [u8; HOST_BUF],
) -> Option<(&'b str, usize)> {
    let stripped = strip_port(host);
    let name = stripped.strip_suffix('.').unwrap_or(stripped);
    if name.is_empty() || name.len() > MAX_HOST {
        return None;
    }
    buf[..name.len()].copy_from_slice(name.as_bytes());
    buf[..name.len()].make_ascii_lowercase();
    let mut all = name.len();
    let port = host[stripped.len()..]
        .strip_prefix(':')
        .map(str::parse::<u16>);
    match port {
        Some(Ok(p)) if p != if tls { 443 } else { 80 } => {
            buf[all] = b':';
            all += 1;
            let mut digits = [0u8; 5];
            let mut n = 0;
            let mut v = p;
            loop {
                digits[n] = b'0' + (v % 10) as u8;
                n += 1;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            for d in digits[..n].iter().rev() {
                buf[all] = *d;
                all += 1;
            }
        }
        Some(Err(_)) => {
            buf[all] = b':';
            all += 1;
        }
        _ => {}
    }
    // ASCII lower-casing keeps UTF-8 valid; a port is ASCII digits.
    let full = std::str::from_utf8(&buf[..all]).ok()?;
    Some((full, name.len()))
}

/// The host without its port: `a.b:80` -> `a.b`, `[::1]:8080` -> `[::1]`.
pub fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(i) => &host[..=i],
            None => host,
        };
    }
    // bytes, not `rfind`: a host is short, and this runs per request
    match host.bytes().rposition(|b| b == b':') {
        Some(i) if host.as_bytes()[i + 1..].iter().all(u8::is_ascii_digit) => &host[..i],
        _ => host,
    }
}

/// True when `host` is a syntactically valid `uri-host [ ":" port ]`
/// (RFC 9110 §7.2, RFC 3986 §3.2.2): reg-name characters, or an IP literal in
/// brackets, then an optional decimal port. RFC 9112 §3.2: an invalid Host is 400.
pub fn valid_host(host: &str) -> bool {
    valid_host_bytes(host.as_bytes())
}

/// [`valid_host`] on a field value's bytes, in one pass (it runs on every
/// request): bytes outside ASCII are never valid.
pub fn valid_host_bytes(b: &[u8]) -> bool {
    let mut i = 0;
    if b.first() == Some(&b'[') {
        // an IP literal: an IPv6 address (RFC 3986 §3.2.2; IPvFuture is
        // not accepted)
        i = 1;
        while i < b.len() && (b[i].is_ascii_hexdigit() || b[i] == b':' || b[i] == b'.') {
            i += 1;
        }
        if b.get(i) != Some(&b']')
            || std::str::from_utf8(&b[1..i])
                .ok()
                .and_then(|a| a.parse::<std::net::Ipv6Addr>().ok())
                .is_none()
        {
            return false;
        }
        i += 1;
    } else {
        // RFC 9110 §4.2.1: an empty host is invalid; so is an empty label
        // (a leading dot, "..", a lone "."), as nginx and lighttpd refuse
        // it: only the one trailing dot of a fully qualified name may end
        // a name
        let mut after_dot = true;
        while i < b.len() && HOST_BYTE[usize::from(b[i])] {
            let dot = b[i] == b'.';
            if dot && after_dot {
                return false;
            }
            after_dot = dot;
            i += 1;
        }
        if i == 0 {
            return false;
        }
    }
    match b[i..].split_first() {
        None => true,
        // the port is a 16-bit decimal number (leading zeros allowed)
        Some((b':', digits)) if !digits.is_empty() => {
            let mut port = 0u32;
            for &d in digits {
                if !d.is_ascii_digit() {
                    return false;
                }
                port = port * 10 + u32::from(d - b'0');
                if port > u32::from(u16::MAX) {
                    return false;
                }
            }
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn normalize_host_as_lighttpd() {
        let mut buf = [0u8; HOST_BUF];
        let mut n =
            |h: &str, tls: bool| normalize_host(h, tls, &mut buf).map(|(f, l)| (f.to_owned(), l));
        assert_eq!(n("A.Test.", false), Some(("a.test".into(), 6)));
        assert_eq!(n("a.test:80", false), Some(("a.test".into(), 6)));
        assert_eq!(n("a.test:080", false), Some(("a.test".into(), 6)));
        assert_eq!(n("a.test:443", true), Some(("a.test".into(), 6)));
        assert_eq!(n("a.test:443", false), Some(("a.test:443".into(), 6)));
        assert_eq!(n("a.test.:8080", false), Some(("a.test:8080".into(), 6)));
        // not a port: part of the name (no vhost name has a colon)
        assert_eq!(n("a.test:x", false), Some(("a.test:x".into(), 8)));
        assert_eq!(n("a.test:99999", false), Some(("a.test:".into(), 6)));
        assert_eq!(n("[::1]:80", false), Some(("[::1]".into(), 5)));
        assert_eq!(n("", false), None);
        assert_eq!(n(".", false), None);
        assert_eq!(n(&"a".repeat(256), false), None);
    }
    use super::*;
    use crate::pipeline::Pipeline;

    fn table(names: &[&[&str]], default: usize) -> VhostTable {
        let vs = names
            .iter()
            .enumerate()
            .map(|(i, n)| Vhost {
                info: VhostInfo {
                    index: i,
                    names: n.iter().map(|s| s.to_string()).collect(),
                    document_root: PathBuf::from("/"),
                },
                label: String::new(),
                pipeline: Pipeline::new(vec![], vec![]),
                counters: Default::default(),
                https_redirect: false,
                listen: Box::new([]),
                names_see_port: false,
            })
            .collect();
        VhostTable::new(vs, default)
    }

    /// `names-see-port` vhosts compare their names with the port as sent.
    #[test]
    fn names_that_see_the_port() {
        let mut t = table(
            &[
                &["default.test"],
                &["ported.test", "ported.test:8080"],
                &["*.suffix.test"],
                &["~^(www\\.)?regex\\.test$"],
                &["plain.test"],
            ],
            0,
        );
        for i in 1..4 {
            t.vhosts[i].names_see_port = true;
        }
        let t = VhostTable::new(t.vhosts, 0);
        let sel = |h: &str| t.select(Some(h)).info.index;
        assert_eq!(sel("ported.test"), 1);
        assert_eq!(sel("Ported.Test:8080"), 1);
        assert_eq!(sel("ported.test.:8080"), 1);
        assert_eq!(sel("ported.test:9090"), 0);
        assert_eq!(sel("ported.test:80"), 1);
        assert_eq!(sel("ported.test:08080"), 1);
        assert_eq!(
            t.select_on(Some("ported.test:443"), None, true).info.index,
            1
        );
        assert_eq!(
            t.select_on(Some("ported.test:443"), None, false).info.index,
            0
        );
        assert_eq!(sel("a.suffix.test"), 2);
        assert_eq!(sel("a.suffix.test:8080"), 0);
        assert_eq!(sel("www.regex.test"), 3);
        assert_eq!(sel("www.regex.test:81"), 0);
        assert_eq!(sel("plain.test:81"), 4);
    }

    /// A vhost with `listen` is passed over on other listeners: its names
    /// then go to the next match, else the default vhost.
    #[test]
    fn listen_restricts_a_vhost_to_its_listeners() {
        let mut t = table(
            &[&["main.test"], &["admin.test", "*.admin.test"], &["*.test"]],
            0,
        );
        let admin: std::net::SocketAddr = "0.0.0.0:8443".parse().unwrap();
        let main: std::net::SocketAddr = "0.0.0.0:80".parse().unwrap();
        t.vhosts[1].listen = Box::new([admin]);
        let sel = |h: &str, l| t.select_on(Some(h), Some(l), false).info.index;
        assert_eq!(sel("admin.test", admin), 1);
        assert_eq!(sel("x.admin.test", admin), 1);
        assert_eq!(sel("admin.test", main), 2);
        assert_eq!(sel("x.admin.test:80", main), 2);
        assert_eq!(sel("main.test", admin), 0);
        assert_eq!(t.select(Some("admin.test")).info.index, 2);
    }

    #[test]
    fn selection_order() {
        let t = table(
            &[
                &["default.test"],
                &["site.test", "[::1]"],
                &["*.example.com"],
                &["*.a.example.com"],
                &["www.example.com"],
                &[".suffix.test", "~^app[0-9]+\\.test$"],
            ],
            0,
        );
        assert_eq!(t.select(Some("suffix.test:81")).info.index, 5);
        assert_eq!(t.select(Some("a.b.suffix.test")).info.index, 5);
        assert_eq!(t.select(Some("APP12.test:8080")).info.index, 5);
        assert_eq!(t.select(Some("app.test")).info.index, 0);
        let sel = |h: &str| t.select(Some(h)).info.index;
        assert_eq!(sel("site.test"), 1);
        assert_eq!(sel("SITE.Test:8080"), 1);
        assert_eq!(sel("site.test."), 1);
        assert_eq!(sel("site.test.:80"), 1);
        assert_eq!(sel("[::1]:8080"), 1);
        assert_eq!(sel("www.example.com"), 4);
        assert_eq!(sel("x.example.com"), 2);
        assert_eq!(sel("x.a.example.com"), 3);
        assert_eq!(sel("example.com"), 0);
        assert_eq!(sel("other"), 0);
        assert_eq!(t.select(None).info.index, 0);
    }

    /// `select_why` gives the vhost `select_on` gives, with the reason.
    #[test]
    fn selection_reasons() {
        let t = table(
            &[
                &["default.test"],
                &["*.example.com"],
                &["~^app[0-9]+\\.test$"],
            ],
            0,
        );
        let why = |h: Option<&str>| {
            let (v, w) = t.select_why(h, None, false);
            assert_eq!(v.info.index, t.select(h).info.index);
            (v.info.index, w)
        };
        assert_eq!(
            why(Some("Default.test:80")),
            (0, Selected::Exact("default.test"))
        );
        assert_eq!(
            why(Some("a.example.com")),
            (1, Selected::Wildcard(".example.com"))
        );
        assert_eq!(
            why(Some("app7.test")),
            (2, Selected::Regex("^app[0-9]+\\.test$"))
        );
        assert_eq!(why(Some("other.test")), (0, Selected::Default));
        assert_eq!(why(None), (0, Selected::NoHost));
    }

    #[test]
    fn host_syntax() {
        for ok in [
            "a.b",
            "a.b:80",
            "[::1]",
            "[2001:db8::7]:443",
            "[::ffff:1.2.3.4]",
            "[::1]:8080",
            "127.0.0.1:1",
            "x_y",
            "a.b.",
            "a.b.:80",
        ] {
            assert!(valid_host(ok), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "a/b",
            "a.b:",
            "a.b:x",
            "[::1",
            "[zz]",
            "a@b",
            "a:1:2",
            ".",
            "..",
            "a..b",
            ".a",
            "a.b..",
            "..:80",
            ".:80",
            "[.]",
            "[:]",
            "[..]",
            "[1.2.3.4]",
            "[::1::]",
        ] {
            assert!(!valid_host(bad), "{bad}");
        }
        // the one-pass check agrees with the field syntax it replaced
        // (name up to the first ':', then a u16 port)
        fn reference(host: &str) -> bool {
            let (name, port) = if let Some(rest) = host.strip_prefix('[') {
                let Some(i) = rest.find(']') else {
                    return false;
                };
                let inner = &rest[..i];
                if inner.parse::<std::net::Ipv6Addr>().is_err() {
                    return false;
                }
                ("[", &rest[i + 1..])
            } else {
                match host.find(':') {
                    Some(i) => (&host[..i], &host[i..]),
                    None => (host, ""),
                }
            };
            let port_ok = port.is_empty()
                || (port.len() > 1
                    && port.starts_with(':')
                    && port[1..].bytes().all(|c| c.is_ascii_digit())
                    && port[1..].parse::<u16>().is_ok());
            let name_ok = !name.is_empty()
                && (name == "["
                    || (name.bytes().all(|c| HOST_BYTE[usize::from(c)])
                        && !name.starts_with('.')
                        && !name.contains("..")));
            port_ok && name_ok
        }
        let parts = [
            "", "a", "B.c", "[", "]", "::1", ":", "80", "65535", "65536", "0080", "x", ".", "é",
            " ", "[::1]", "%", "@",
        ];
        for a in parts {
            for b in parts {
                for c in ["", ":", ":80", ":000000000000080", ":99999", "]"] {
                    let h = format!("{a}{b}{c}");
                    assert_eq!(valid_host(&h), reference(&h), "{h:?}");
                }
            }
        }
        assert_eq!(strip_port("a:80"), "a");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("a"), "a");
    }
}

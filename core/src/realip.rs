//! The real client address behind proxies and load balancers: a list of
//! trusted proxies (CIDR), and the address they report in `X-Forwarded-For`
//! or `Forwarded` (RFC 7239) — lighttpd mod_extforward, nginx realip
//! (`set_real_ip_from`, `real_ip_header`, `real_ip_recursive on`).
//!
//! From anyone else those headers are ignored.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer};

/// `[server] trusted-proxies`: addresses (`"10.0.0.1"`) and networks
/// (`"10.0.0.0/8"`, `"::1/128"`). Default empty: nobody is trusted.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl<'de> Deserialize<'de> for TrustedProxies {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let list = Vec::<String>::deserialize(d)?;
        let mut out = Vec::with_capacity(list.len());
        for s in list {
            let s = s.trim();
            let net = s
                .parse::<IpNet>()
                .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "\"{s}\" is not an IP address or a CIDR network (like 10.0.0.0/8)"
                    ))
                })?;
            out.push(net);
        }
        Ok(TrustedProxies(out))
    }
}

impl TrustedProxies {
    /// Whether `ip` is a trusted proxy (an IPv4-mapped IPv6 address counts
    /// as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `[server] real-ip-header`: where trusted proxies put the client address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RealIpHeader {
    /// `X-Forwarded-For` (the default; lighttpd `extforward.headers`' default).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=...` (RFC 7239 §5.2).
    Forwarded,
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The client address of a request that came from `peer` with these
/// header values (all `X-Forwarded-For` or all `Forwarded` field lines, in
/// order). When `peer` is trusted, the list is walked from the right and the
/// first address that is not a trusted proxy is the client (nginx
/// `real_ip_recursive on`); an unparsable element stops the walk at the last
/// good address. Otherwise `peer` itself.
pub fn client_address<'a>(
    peer: IpAddr,
    trusted: &TrustedProxies,
    header: RealIpHeader,
    values: impl DoubleEndedIterator<Item = &'a str>,
) -> IpAddr {
    if trusted.is_empty() || !trusted.contains(peer) {
        return peer;
    }
    let mut client = peer;
    for line in values.rev() {
        for elem in split_outside_quotes(line, ',').into_iter().rev() {
            let addr = match header {
                RealIpHeader::XForwardedFor => parse_node(elem.trim()),
                RealIpHeader::Forwarded => forwarded_for(elem),
            };
            let Some(addr) = addr else {
                return client;
            };
            client = addr;
            if !trusted.contains(addr) {
                return addr;
            }
        }
    }
    client
}

/// `s` split at `sep` where it is not inside a quoted string (RFC 9110
/// §5.6.4), so that a quoted `host="a,for=1.2.3.4"` stays one parameter.
fn split_outside_quotes(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

/// The `for=` node of one `Forwarded` element (RFC 7239 §4, §6).
fn forwarded_for(elem: &str) -> Option<IpAddr> {
    split_outside_quotes(elem, ';')
        .into_iter()
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            if !k.trim().eq_ignore_ascii_case("for") {
                return None;
            }
            parse_node(v.trim().trim_matches('"'))
        })
}

/// An address as proxies write it: `1.2.3.4`, `1.2.3.4:5678`, `[::1]`,
/// `[::1]:5678`, `::1`.
fn parse_node(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, _) = rest.split_once(']')?;
        return ip.parse().ok().map(canonical);
    }
    let (ip, port) = s.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    ip.parse().ok().map(canonical)
}

/// An IP address as text, without an allocation, for the forwarding fields
/// and CGI variables written per request (`REMOTE_ADDR`,
/// `X-Forwarded-For`): `192.0.2.1` by hand, IPv6 through `Display` into the
/// same 45-byte buffer (the longest form, `ffff:...:255.255.255.255`).
#[derive(Debug)]
pub struct IpText {
    buf: [u8; 45],
}

impl Default for IpText {
    fn default() -> Self {
        IpText { buf: [0; 45] }
    }
}

impl IpText {
    /// `ip` as `Display` writes it (`192.0.2.1`, `2001:db8::1`).
    pub fn format(&mut self, ip: std::net::IpAddr) -> &[u8] {
        use std::io::Write;
        let mut n = 0;
        match ip {
            std::net::IpAddr::V4(a) => {
                for (i, o) in a.octets().into_iter().enumerate() {
                    if i > 0 {
                        self.buf[n] = b'.';
                        n += 1;
                    }
                    if o >= 100 {
                        self.buf[n] = b'0' + o / 100;
                        n += 1;
                    }
                    if o >= 10 {
                        self.buf[n] = b'0' + o / 10 % 10;
                        n += 1;
                    }
                    self.buf[n] = b'0' + o % 10;
                    n += 1;
                }
            }
            std::net::IpAddr::V6(a) => {
                let mut w = &mut self.buf[..];
                let _ = write!(w, "{a}");
                n = 45 - w.len();
            }
        }
        &self.buf[..n]
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn addresses_are_written_as_display_writes_them() {
        let mut t = super::IpText::default();
        for ip in [
            "127.0.0.1",
            "10.200.3.45",
            "0.0.0.0",
            "9.99.100.255",
            "::1",
            "2001:db8::ff00:42:8329",
            "::ffff:1.2.3.4",
        ] {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            assert_eq!(t.format(ip), ip.to_string().as_bytes());
        }
    }

    use super::*;

    fn trusted(list: &[&str]) -> TrustedProxies {
        let v = serde_json::json!(list);
        TrustedProxies::deserialize(v).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_trusted_peers_are_believed() {
        let t = trusted(&["10.0.0.0/8"]);
        let xff = RealIpHeader::XForwardedFor;
        assert_eq!(
            client_address(ip("192.0.2.9"), &t, xff, ["6.6.6.6"].into_iter()),
            ip("192.0.2.9")
        );
        assert_eq!(
            client_address(
                ip("10.1.1.1"),
                &t,
                xff,
                ["6.6.6.6, 203.0.113.5"].into_iter()
            ),
            ip("203.0.113.5")
        );
    }

    #[test]
    fn the_walk_skips_trusted_hops_from_the_right() {
        let t = trusted(&["10.0.0.0/8", "127.0.0.1"]);
        let xff = RealIpHeader::XForwardedFor;
        let got = client_address(
            ip("127.0.0.1"),
            &t,
            xff,
            ["1.1.1.1, 203.0.113.5", "10.0.0.2"].into_iter(),
        );
        assert_eq!(got, ip("203.0.113.5"));
        // garbage stops the walk at the last good address
        let got = client_address(ip("127.0.0.1"), &t, xff, ["junk, 10.0.0.3"].into_iter());
        assert_eq!(got, ip("10.0.0.3"));
    }

    #[test]
    fn forwarded_for_nodes_parse() {
        let t = trusted(&["::1"]);
        let got = client_address(
            ip("::1"),
            &t,
            RealIpHeader::Forwarded,
            ["for=192.0.2.60;proto=http, for=\"[2001:db8:cafe::17]:4711\""].into_iter(),
        );
        assert_eq!(got, ip("2001:db8:cafe::17"));
    }

    #[test]
    fn a_quoted_comma_never_starts_an_element() {
        let t = trusted(&["127.0.0.1"]);
        let got = client_address(
            ip("127.0.0.1"),
            &t,
            RealIpHeader::Forwarded,
            ["for=127.0.0.1;proto=http;host=\"site.test,for=9.9.9.9\""].into_iter(),
        );
        assert_eq!(got, ip("127.0.0.1"));
    }

    #[test]
    fn bad_entries_are_refused() {
        let v = serde_json::json!(["10.0.0.0/33"]);
        assert!(TrustedProxies::deserialize(v).is_err());
    }
}

/// In a request's extensions when its client address was taken from a
/// trusted proxy's header: the proxy's own address (the `proxy` module
/// appends it to the chain it forwards), and the header trusted (only that
/// chain is passed on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViaProxy(pub IpAddr, pub RealIpHeader);

/// Sets the peer address of `req` to the client's when the peer is a trusted
/// proxy (see [`client_address`]), so that every module, rule and log sees
/// the client. Costs nothing when `trusted` is empty.
pub fn apply(req: &mut actix_web::dev::ServiceRequest, trusted: &TrustedProxies, h: RealIpHeader) {
    let Some(peer) = req.peer_addr() else {
        return;
    };
    if trusted.is_empty() || !trusted.contains(peer.ip()) {
        return;
    }
    let name = match h {
        RealIpHeader::XForwardedFor => "x-forwarded-for",
        RealIpHeader::Forwarded => "forwarded",
    };
    let values: Vec<&str> = req
        .headers()
        .get_all(name)
        .filter_map(|v| v.to_str().ok())
        .collect();
    if values.is_empty() {
        return;
    }
    let client = client_address(peer.ip(), trusted, h, values.into_iter());
    if client != canonical(peer.ip()) {
        req.head_mut().peer_addr = Some(std::net::SocketAddr::new(client, 0));
        actix_web::HttpMessage::extensions_mut(req).insert(ViaProxy(peer.ip(), h));
    }
}

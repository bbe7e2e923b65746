//! The header fields of a proxied request and response: hop-by-hop fields
//! removed (RFC 9110 §7.6.1), `Host` chosen, and the forwarding fields
//! (`X-Forwarded-*`, or `Forwarded` of RFC 7239) added.

use serde::{Deserialize, Deserializer};
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use tessera_core::actix_web::{HttpMessage, HttpRequest};

/// The `Host` sent upstream (`host = ...`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HostMode {
    /// `"client"` (the default): the client's `Host`, as lighttpd does.
    #[default]
    Client,
    /// `"upstream"`: the server's `host:port`, as nginx's default
    /// `proxy_set_header Host $proxy_host`.
    Upstream,
    /// Any other value: that host (nginx `proxy_set_header Host ...`).
    Set(String),
}

impl<'de> Deserialize<'de> for HostMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "client" => HostMode::Client,
            "upstream" => HostMode::Upstream,
            "" => return Err(serde::de::Error::custom("must not be empty")),
            _ => HostMode::Set(s),
        })
    }
}

/// The forwarding fields sent upstream (`forwarded = ...`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForwardedMode {
    /// `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` and
    /// `X-Real-IP` (the client address) (the default; nginx's usual
    /// `proxy_set_header` set, lighttpd's default plus nginx's
    /// `X-Real-IP $remote_addr`).
    #[default]
    XForwarded,
    /// `Forwarded: for=...;proto=...;host=...` (RFC 7239; lighttpd
    /// `proxy.forwarded`).
    Forwarded,
    /// Both.
    Both,
    /// None: the client's forwarding fields (`X-Real-IP` too) are removed.
    None,
}

/// Fields that are about one connection only (RFC 9110 §7.6.1 and the
/// legacy `Proxy-Connection`), and the framing fields the client's
/// connection used (the body is re-framed upstream and downstream). A
/// `static`: a `const` array is built and dropped at every use.
static HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    KEEP_ALIVE,
    PROXY_CONNECTION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::CONTENT_LENGTH,
    header::PROXY_AUTHENTICATE,
];

/// A name such as `X_Real_IP` or `Proxy_Authorization`: CGI-style
/// applications (WSGI, Rack, PHP) read `_` as `-`, so it would be a
/// forwarding field Tessera did not write, or one it strips (nginx drops every name with `_` by default,
/// `underscores_in_headers off`; here only these).
fn forwarding_in_disguise(name: &str) -> bool {
    name.contains('_')
        && [
            "x-forwarded-for",
            "x-forwarded-proto",
            "x-forwarded-host",
            "x-real-ip",
            "forwarded",
            "proxy-authorization",
        ]
        .iter()
        .any(|f| {
            f.len() == name.len()
                && f.bytes()
                    .zip(name.bytes())
                    .all(|(a, b)| a == b || (a == b'-' && b == b'_'))
        })
}

/// The two custom names of [`HOP_BY_HOP`] (compared as names: a standard
/// name differs at once, without its text being looked up).
const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// The forwarding fields' names, built once.
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// The field names the `Connection` fields of `from` list (RFC 9110
/// §7.6.1: hop-by-hop for this connection only), as sent; `close` and
/// `keep-alive` are left out (no field of the first name; the second is
/// dropped anyway). No allocation: compared with [`listed`].
fn connection_names(from: &HeaderMap) -> smallvec::SmallVec<[&[u8]; 4]> {
    let mut named = smallvec::SmallVec::new();
    for v in from.get_all(header::CONNECTION) {
        for t in v.as_bytes().split(|&b| b == b',') {
            let t = t.trim_ascii();
            if !t.is_empty()
                && !t.eq_ignore_ascii_case(b"close")
                && !t.eq_ignore_ascii_case(b"keep-alive")
            {
                named.push(t);
            }
        }
    }
    named
}

/// Whether `name` is one of the `named` tokens (field names compare without
/// case).
fn listed(named: &[&[u8]], name: &HeaderName) -> bool {
    named
        .iter()
        .any(|t| t.eq_ignore_ascii_case(name.as_str().as_bytes()))
}

/// The header fields of the request to the upstream, as a map (for the
/// `Upgrade` path; [`write_request_fields`] says which). Field values
/// share the client's bytes where they are the client's.
pub(super) fn request_headers(
    from: &HeaderMap,
    req: &HttpRequest,
    host: &HostMode,
    fwd: ForwardedMode,
    upstream_host: &str,
) -> HeaderMap {
    let mut lines = Vec::with_capacity(512);
    write_request_fields(&mut lines, from, req, host, fwd, upstream_host);
    let mut out = HeaderMap::with_capacity(from.len() + 4);
    for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        out.append(k, v);
    }
    out
}

/// Writes the header fields of the request to the upstream into `out`, as
/// `name: value` lines (each with its CRLF), straight from the client's
/// map (no map is built per request):
///
/// - the client's fields minus hop-by-hop ones (RFC 9110 §7.6.1), those its
///   `Connection` names, `Expect`, `Proxy-Authorization`, and its own
///   forwarding fields;
/// - `Host` per `host` (`upstream_host`: the server's `host:port` for
///   [`HostMode::Upstream`], and for a request without Host);
/// - per `fwd`, `X-Forwarded-For` (the chain the client sent is kept only
///   when the core took the client address from it, i.e. a trusted proxy
///   sent it), `X-Real-IP`, `X-Forwarded-Proto`, `X-Forwarded-Host`, or
///   `Forwarded` (RFC 7239); a client's own `X-Real-IP` is never passed on.
///
/// Values are not checked here: see the note at the top of the body.
pub(super) fn write_request_fields(
    out: &mut Vec<u8>,
    from: &HeaderMap,
    req: &HttpRequest,
    host: &HostMode,
    fwd: ForwardedMode,
    upstream_host: &str,
) {
    // every value written is a valid field value already: the client's are
    // values of its map (or its target's authority), a configured Host and
    // the servers' addresses are checked when the module is built, and the
    // rest is an IP address or a scheme (no byte check per request)
    let line = |out: &mut Vec<u8>, name: &[u8], value: &[u8]| {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    };
    let (xff, fw) = (&X_FORWARDED_FOR, header::FORWARDED);
    let named = connection_names(from);
    for (k, v) in from.iter() {
        let own = matches!(
            *k,
            header::HOST | header::EXPECT | header::PROXY_AUTHORIZATION | header::FORWARDED
        ) || *k == X_FORWARDED_FOR
            || *k == X_FORWARDED_PROTO
            || *k == X_FORWARDED_HOST
            || *k == X_REAL_IP;
        if own
            || is_hop_by_hop(k)
            || (!named.is_empty() && listed(&named, k))
            || forwarding_in_disguise(k.as_str())
        {
            continue;
        }
        // a value of the map is a valid field value already
        out.extend_from_slice(k.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let client_host = tessera_core::context::request_host(req).unwrap_or("");
    let host_value = match host {
        HostMode::Client => client_host,
        HostMode::Upstream => upstream_host,
        HostMode::Set(h) => h.as_str(),
    };
    // an HTTP/1.0 request without Host: the server's host:port
    let host_value = if host_value.is_empty() {
        upstream_host
    } else {
        host_value
    };
    line(out, b"host", host_value.as_bytes());
    let secure = req.app_config().secure();
    let proto = if secure { "https" } else { "http" };
    let client = req.peer_addr().map(|a| a.ip());
    let via = req
        .extensions()
        .get::<tessera_core::realip::ViaProxy>()
        .copied();
    // a received chain is passed on only when it is the one the client
    // address came from; otherwise it is the client's own word
    let trusted = |h| via.filter(|v| v.1 == h);
    let mut ip_text = tessera_core::realip::IpText::default();
    if matches!(fwd, ForwardedMode::XForwarded | ForwardedMode::Both) {
        match (
            trusted(tessera_core::realip::RealIpHeader::XForwardedFor),
            client,
        ) {
            (Some(via), _) => {
                let mut chain = Vec::with_capacity(64);
                for v in from.get_all(xff) {
                    if !chain.is_empty() {
                        chain.extend_from_slice(b", ");
                    }
                    chain.extend_from_slice(v.as_bytes());
                }
                if !chain.is_empty() {
                    chain.extend_from_slice(b", ");
                }
                chain.extend_from_slice(ip_text.format(via.0));
                line(out, b"x-forwarded-for", &chain);
            }
            (None, Some(ip)) => line(out, b"x-forwarded-for", ip_text.format(ip)),
            (None, None) => {}
        }
        // the client address, never the client's own word (an upstream
        // that reads X-Real-IP, as many behind nginx do, cannot be fooled)
        if let Some(ip) = client {
            line(out, b"x-real-ip", ip_text.format(ip));
        }
        line(out, b"x-forwarded-proto", proto.as_bytes());
        if !client_host.is_empty() {
            line(out, b"x-forwarded-host", client_host.as_bytes());
        }
    }
    if matches!(fwd, ForwardedMode::Forwarded | ForwardedMode::Both) {
        let mut value = Vec::with_capacity(128);
        let kept = trusted(tessera_core::realip::RealIpHeader::Forwarded);
        if kept.is_some() {
            for v in from.get_all(&fw) {
                value.extend_from_slice(v.as_bytes());
                value.extend_from_slice(b", ");
            }
        }
        value.extend_from_slice(b"for=");
        match kept.map(|v| v.0).or(client) {
            Some(a @ std::net::IpAddr::V6(_)) => {
                value.extend_from_slice(b"\"[");
                value.extend_from_slice(ip_text.format(a));
                value.extend_from_slice(b"]\"");
            }
            Some(a) => value.extend_from_slice(ip_text.format(a)),
            None => value.extend_from_slice(b"unknown"),
        }
        value.extend_from_slice(b";proto=");
        value.extend_from_slice(proto.as_bytes());
        if !client_host.is_empty() && !client_host.contains('"') {
            value.extend_from_slice(b";host=\"");
            value.extend_from_slice(client_host.as_bytes());
            value.push(b'"');
        }
        line(out, b"forwarded", &value);
    }
}

/// The upstream response's fields, minus hop-by-hop ones and those its
/// `Connection` names, become the client response's fields: the map moves
/// (values share the bytes of the upstream's response head), with any
/// field `to` had kept after them.
pub(super) fn response_headers(mut from: HeaderMap, to: &mut HeaderMap) {
    strip_hop_by_hop(&mut from);
    for (k, v) in to.iter() {
        from.append(k.clone(), v.clone());
    }
    *to = from;
}

/// Whether `name` is one of [`HOP_BY_HOP`].
pub(super) fn is_hop_by_hop(name: &HeaderName) -> bool {
    // a match on the standard names (one byte compare each), then the two
    // custom ones
    matches!(
        *name,
        header::CONNECTION
            | header::TE
            | header::TRAILER
            | header::TRANSFER_ENCODING
            | header::UPGRADE
            | header::CONTENT_LENGTH
            | header::PROXY_AUTHENTICATE
    ) || *name == KEEP_ALIVE
        || *name == PROXY_CONNECTION
}

/// Removes the hop-by-hop fields of a response (RFC 9110 §7.6.1) and those
/// its `Connection` names, in place.
pub(super) fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: smallvec::SmallVec<[HeaderName; 2]> = connection_names(h)
        .iter()
        .filter_map(|t| HeaderName::from_bytes(t).ok())
        .collect();
    for n in HOP_BY_HOP.iter().chain(&named) {
        h.remove(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::actix_web::test::TestRequest;

    #[test]
    fn is_hop_by_hop_knows_exactly_the_list() {
        for n in &HOP_BY_HOP {
            assert!(is_hop_by_hop(n), "{n}");
        }
        for n in [
            "host",
            "x-keep-alive",
            "proxy-authorization",
            "date",
            "upgrade-insecure-requests",
        ] {
            assert!(!is_hop_by_hop(&HeaderName::from_static(n)), "{n}");
        }
    }

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_are_dropped() {
        let req = TestRequest::default()
            .insert_header(("host", "site.test"))
            .insert_header(("connection", "keep-alive, X-Secret"))
            .insert_header(("x-secret", "1"))
            .insert_header(("keep-alive", "timeout=5"))
            .insert_header(("te", "trailers"))
            .insert_header(("upgrade", "h2c"))
            .insert_header(("x-kept", "yes"))
            .peer_addr("192.0.2.1:5000".parse().unwrap())
            .to_http_request();
        let h = request_headers(
            req.headers(),
            &req,
            &HostMode::Client,
            ForwardedMode::XForwarded,
            "up:1",
        );
        for gone in ["connection", "x-secret", "keep-alive", "te", "upgrade"] {
            assert!(h.get(gone).is_none(), "{gone} kept");
        }
        assert_eq!(h.get("x-kept").unwrap(), "yes");
        assert_eq!(h.get("host").unwrap(), "site.test");
        assert_eq!(h.get("x-forwarded-for").unwrap(), "192.0.2.1");
        assert_eq!(h.get("x-real-ip").unwrap(), "192.0.2.1");
        assert_eq!(h.get("x-forwarded-proto").unwrap(), "http");
        assert_eq!(h.get("x-forwarded-host").unwrap(), "site.test");
    }

    #[test]
    fn an_untrusted_clients_forwarding_fields_are_replaced() {
        let req = TestRequest::default()
            .insert_header(("host", "site.test"))
            .insert_header(("x-forwarded-for", "6.6.6.6"))
            .insert_header(("forwarded", "for=6.6.6.6"))
            .insert_header(("x-real-ip", "6.6.6.6"))
            .insert_header(("x_real_ip", "6.6.6.6"))
            .insert_header(("x_forwarded_for", "6.6.6.6"))
            .insert_header(("proxy_authorization", "Basic eDp5"))
            .insert_header(("x_other", "kept"))
            .peer_addr("192.0.2.1:5000".parse().unwrap())
            .to_http_request();
        for mode in [ForwardedMode::Forwarded, ForwardedMode::None] {
            let h = request_headers(req.headers(), &req, &HostMode::Upstream, mode, "up:1");
            assert!(h.get("x-real-ip").is_none(), "{mode:?}");
        }
        let h = request_headers(
            req.headers(),
            &req,
            &HostMode::Upstream,
            ForwardedMode::Both,
            "up:1",
        );
        assert_eq!(h.get_all("x-real-ip").collect::<Vec<_>>(), ["192.0.2.1"]);
        assert!(h.get("x_real_ip").is_none() && h.get("x_forwarded_for").is_none());
        assert!(h.get("proxy_authorization").is_none());
        assert_eq!(h.get("x_other").unwrap(), "kept");
        assert_eq!(h.get("x-forwarded-for").unwrap(), "192.0.2.1");
        assert_eq!(
            h.get("forwarded").unwrap(),
            "for=192.0.2.1;proto=http;host=\"site.test\""
        );
        assert_eq!(h.get("host").unwrap(), "up:1");
    }
}

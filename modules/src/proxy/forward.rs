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
    /// `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` (the
    /// default; nginx's usual `proxy_set_header` set, lighttpd's default).
    #[default]
    XForwarded,
    /// `Forwarded: for=...;proto=...;host=...` (RFC 7239; lighttpd
    /// `proxy.forwarded`).
    Forwarded,
    /// Both.
    Both,
    /// None: the client's forwarding fields are removed too.
    None,
}

/// Fields that are about one connection only (RFC 9110 §7.6.1 and the
/// legacy `Proxy-Connection`), and the framing fields the client's
/// connection used (the body is re-framed upstream and downstream).
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::CONTENT_LENGTH,
    header::PROXY_AUTHENTICATE,
];

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

/// Copies `from` minus hop-by-hop fields and those `Connection` names.
fn copy_end_to_end(from: &HeaderMap, to: &mut HeaderMap, extra_drop: &[HeaderName]) {
    let named = connection_names(from);
    for (k, v) in from.iter() {
        if HOP_BY_HOP.contains(k) || listed(&named, k) || extra_drop.contains(k) {
            continue;
        }
        to.append(k.clone(), v.clone());
    }
}

/// The header fields of the request to the upstream. `upstream_host` is the
/// server's `host:port` for [`HostMode::Upstream`] (replaced per server by
/// the caller).
pub(super) fn request_headers(
    from: &HeaderMap,
    req: &HttpRequest,
    host: &HostMode,
    fwd: ForwardedMode,
    upstream_host: &str,
) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(from.len() + 4);
    let xff = HeaderName::from_static("x-forwarded-for");
    let xfp = HeaderName::from_static("x-forwarded-proto");
    let xfh = HeaderName::from_static("x-forwarded-host");
    let fw = HeaderName::from_static("forwarded");
    let drop = [
        header::HOST,
        header::EXPECT,
        header::PROXY_AUTHORIZATION,
        xff.clone(),
        xfp.clone(),
        xfh.clone(),
        fw.clone(),
    ];
    copy_end_to_end(from, &mut out, &drop);
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
    if let Ok(v) = HeaderValue::from_str(host_value) {
        out.insert(header::HOST, v);
    }
    let secure = req.app_config().secure();
    let proto = if secure { "https" } else { "http" };
    let client = req.peer_addr().map(|a| a.ip());
    // the chain the client sent is kept only when the core took the client
    // address from it (a trusted proxy sent it): otherwise it may be forged
    let via = req
        .extensions()
        .get::<tessera_core::realip::ViaProxy>()
        .copied();
    // a received chain is passed on only when it is the one the client
    // address came from; otherwise it is the client's own word
    let trusted = |h| via.filter(|v| v.1 == h);
    let mut ip_text = crate::gateway::IpText::default();
    if matches!(fwd, ForwardedMode::XForwarded | ForwardedMode::Both) {
        let mut chain = String::new();
        let via_xff = trusted(tessera_core::realip::RealIpHeader::XForwardedFor);
        if let (None, Some(ip)) = (via_xff, client) {
            // the usual case: the client's address alone, without a String
            if let Ok(v) = HeaderValue::from_bytes(ip_text.format(ip)) {
                out.insert(xff.clone(), v);
            }
        } else if let Some(via) = via_xff {
            for v in from.get_all(&xff) {
                if let Ok(v) = v.to_str() {
                    if !chain.is_empty() {
                        chain.push_str(", ");
                    }
                    chain.push_str(v);
                }
            }
            if !chain.is_empty() {
                chain.push_str(", ");
            }
            chain.push_str(&via.0.to_string());
        }
        if !chain.is_empty() {
            if let Ok(v) = HeaderValue::from_str(&chain) {
                out.insert(xff, v);
            }
        }
        out.insert(xfp, HeaderValue::from_static(proto));
        if let Ok(v) = HeaderValue::from_str(client_host) {
            if !client_host.is_empty() {
                out.insert(xfh, v);
            }
        }
    }
    if matches!(fwd, ForwardedMode::Forwarded | ForwardedMode::Both) {
        let mut value = String::new();
        let kept = trusted(tessera_core::realip::RealIpHeader::Forwarded);
        if kept.is_some() {
            for v in from.get_all(&fw) {
                if let Ok(v) = v.to_str() {
                    value.push_str(v);
                    value.push_str(", ");
                }
            }
        }
        let node = match kept.map(|v| v.0).or(client) {
            Some(std::net::IpAddr::V6(a)) => format!("\"[{a}]\""),
            Some(a) => a.to_string(),
            None => "unknown".into(),
        };
        value.push_str("for=");
        value.push_str(&node);
        value.push_str(";proto=");
        value.push_str(proto);
        if !client_host.is_empty() && !client_host.contains('"') {
            value.push_str(";host=\"");
            value.push_str(client_host);
            value.push('"');
        }
        if let Ok(v) = HeaderValue::from_str(&value) {
            out.insert(fw, v);
        }
    }
    out
}

/// The upstream response's fields to send to the client. No value is
/// copied: a value shares the bytes of the upstream's response head (a
/// reference count), and iterating by reference costs a fifth of actix's
/// consuming iterator.
pub(super) fn response_headers(from: &HeaderMap, to: &mut HeaderMap) {
    let named = connection_names(from);
    to.reserve(from.len());
    for (k, v) in from.iter() {
        if HOP_BY_HOP.contains(k) || listed(&named, k) {
            continue;
        }
        to.append(k.clone(), v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::actix_web::test::TestRequest;

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
        assert_eq!(h.get("x-forwarded-proto").unwrap(), "http");
        assert_eq!(h.get("x-forwarded-host").unwrap(), "site.test");
    }

    #[test]
    fn an_untrusted_clients_forwarding_fields_are_replaced() {
        let req = TestRequest::default()
            .insert_header(("host", "site.test"))
            .insert_header(("x-forwarded-for", "6.6.6.6"))
            .insert_header(("forwarded", "for=6.6.6.6"))
            .peer_addr("192.0.2.1:5000".parse().unwrap())
            .to_http_request();
        let h = request_headers(
            req.headers(),
            &req,
            &HostMode::Upstream,
            ForwardedMode::Both,
            "up:1",
        );
        assert_eq!(h.get("x-forwarded-for").unwrap(), "192.0.2.1");
        assert_eq!(
            h.get("forwarded").unwrap(),
            "for=192.0.2.1;proto=http;host=\"site.test\""
        );
        assert_eq!(h.get("host").unwrap(), "up:1");
    }
}

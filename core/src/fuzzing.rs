//! Entry points shared by the fuzz targets in `fuzz/` and the corpus replay
//! test: each takes the fuzzer's bytes and panics when an invariant breaks.

use crate::path::{encode, normalize};

/// Path decoding and normalization ([`normalize`]): an accepted path starts with
/// `/`, has no empty, `.` or `..` segment, and comes back unchanged through
/// [`encode`] and [`normalize`] again.
pub fn path(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(n) = normalize(raw) else {
        return;
    };
    assert!(n.starts_with('/'), "{raw:?} -> {n:?}");
    assert!(!n.contains("//"), "{raw:?} -> {n:?}");
    let body = n.strip_suffix('/').unwrap_or(&n);
    for seg in body.split('/').skip(1) {
        assert!(!matches!(seg, "" | "." | ".."), "{raw:?} -> {n:?}");
    }
    // A raw NUL is refused earlier, by the request-target parser.
    if !raw.contains('\0') {
        assert_eq!(normalize(&encode(&n)).as_deref(), Ok(&*n), "{raw:?}");
    }
}

/// The HTTP/1.1 engine's request-head parser ([`crate::h1::head::parse`])
/// and chunked decoder ([`crate::h1::chunked`]):
/// - a head parses the same whatever prefix arrived first: a prefix shorter
///   than the head never completes, a longer one gives the same head;
/// - an accepted head agrees with a reference parse of the same bytes by
///   `httparse` itself (method, target, version, field count, length);
/// - a chunked body decodes the same in one piece and split in two, and
///   never yields more bytes than it consumed.
pub fn h1(data: &[u8]) {
    use crate::h1::{chunked, head};
    let limits = head::Limits::default();
    let parse = |bytes: &[u8], fields: &mut actix_http::header::HeaderMap| {
        head::parse(&mut bytes.to_vec(), &limits, fields)
    };
    let mut fields = actix_http::header::HeaderMap::new();
    let mut fields2 = actix_http::header::HeaderMap::new();
    if let Ok(Some((h, n))) = parse(data, &mut fields) {
        for k in [0, n / 2, n.saturating_sub(1)] {
            assert!(
                !matches!(parse(&data[..k], &mut fields2), Ok(Some(_))),
                "a {k}-byte prefix of a {n}-byte head completed"
            );
        }
        let Ok(Some((h2, n2))) = parse(&data[..n], &mut fields2) else {
            panic!("the head alone did not parse");
        };
        assert_eq!(
            (n2, &h2.method, &h2.uri, fields2.len()),
            (n, &h.method, &h.uri, fields.len())
        );
        // the reference: httparse on the same bytes (after the skipped empty
        // lines), unless a 1.x version was served as 1.1
        let skip = data
            .iter()
            .take_while(|b| **b == b'\r' || **b == b'\n')
            .count();
        let mut slots = [httparse::EMPTY_HEADER; crate::h1::head::MAX_HEADERS];
        let mut r = httparse::Request::new(&mut slots);
        if let Ok(httparse::Status::Complete(m)) = r.parse(&data[skip..]) {
            assert_eq!(skip + m, n, "length differs from httparse");
            assert_eq!(r.method, Some(h.method.as_str()));
            assert_eq!(
                r.path
                    .and_then(|p| p.parse::<actix_http::Uri>().ok())
                    .as_ref(),
                Some(&h.uri)
            );
            assert_eq!(r.headers.len(), fields.len());
        }
    }
    const MAX_BODY: u64 = 1 << 20;
    let whole = chunked::decode_all(data, MAX_BODY);
    if let Ok(Some((body, used))) = &whole {
        assert!(body.len() <= *used, "more data than input");
    }
    if data.len() > 1 {
        let cut = usize::from(data[0]) % data.len();
        let mut d = chunked::Decoder::new(MAX_BODY);
        let mut buf = data[..cut].to_vec();
        let mut rest = &data[cut..];
        let mut out = Vec::new();
        let mut used = 0;
        let split = loop {
            match d.step(&buf) {
                Err(e) => break Err(e),
                Ok(s) => {
                    out.extend_from_slice(&buf[s.data.0..s.data.1]);
                    buf.drain(..s.consumed);
                    used += s.consumed;
                    if s.done {
                        break Ok(Some((out, used)));
                    }
                    if s.consumed == 0 {
                        if rest.is_empty() {
                            break Ok(None);
                        }
                        buf.extend_from_slice(rest);
                        rest = &[];
                    }
                }
            }
        };
        match (&whole, &split) {
            (Ok(Some(a)), Ok(Some(b))) => assert_eq!(a, b),
            (Ok(None), Ok(None)) | (Err(_), Err(_)) => {}
            _ => panic!("split at {cut} decodes differently: {whole:?} / {split:?}"),
        }
    }
}

/// The PROXY protocol header parser ([`crate::h1::proxy_protocol::parse`]):
/// a header's length never exceeds the input, no shorter prefix of it
/// completes, and the header alone parses to the same result.
pub fn proxy_protocol(data: &[u8]) {
    use crate::h1::proxy_protocol::{parse, Parsed};
    let Parsed::Done { len, source } = parse(data) else {
        return;
    };
    assert!(len <= data.len(), "header of {len} bytes in {}", data.len());
    assert_eq!(parse(&data[..len]), Parsed::Done { len, source });
    for k in [0, len / 2, len.saturating_sub(1)] {
        assert!(
            !matches!(parse(&data[..k]), Parsed::Done { .. }),
            "a {k}-byte prefix of a {len}-byte header completed"
        );
    }
}

/// The client address from forwarding fields ([`crate::realip::client_address`]):
/// for a trusted peer the answer is the peer or an address written in the
/// fields; for an untrusted peer it is always the peer.
pub fn real_ip(data: &[u8]) {
    use crate::realip::{client_address, RealIpHeader, TrustedProxies};
    use serde::Deserialize;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines: Vec<&str> = text.split('\n').collect();
    let peer: std::net::IpAddr = "10.0.0.1".parse().expect("an address");
    let trusted =
        TrustedProxies::deserialize(serde_json::json!(["10.0.0.0/8"])).expect("a valid list");
    let nobody = TrustedProxies::default();
    for header in [RealIpHeader::XForwardedFor, RealIpHeader::Forwarded] {
        let got = client_address(peer, &trusted, header, lines.iter().copied());
        let written = got.to_string();
        // an IPv4-mapped IPv6 address counts as its IPv4 address
        let mapped = text.to_ascii_lowercase().contains(&format!(":{written}"));
        assert!(
            got == peer || text.contains(&written) || mapped,
            "{got} is neither the peer nor in {text:?}"
        );
        assert_eq!(
            client_address(peer, &nobody, header, lines.iter().copied()),
            peer
        );
    }
}

//! The head of a back end's answer: CGI header lines (RFC 3875 §6.3), or an
//! HTTP status line and fields (non-parsed-header CGI scripts, RFC 3875
//! §5; uwsgi applications).

use tessera_core::actix_web::http::header::{self, HeaderName, HeaderValue};
use tessera_core::actix_web::http::StatusCode;

/// The largest head read from a back end, bytes (lighttpd's limit).
pub const MAX_HEAD: usize = 64 * 1024;

/// A parsed head.
#[derive(Debug)]
pub struct Head {
    /// The status: from `Status:` or the status line; 302 for a `Location`
    /// without one; 200 otherwise.
    pub status: StatusCode,
    /// The fields to send, in order, without `Status`, the framing and
    /// hop-by-hop fields (`Connection`, `Keep-Alive`, `Proxy-Connection`,
    /// `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`, `Content-Length`:
    /// the server frames the body itself) and the X-Sendfile fields.
    pub fields: Vec<(HeaderName, HeaderValue)>,
    /// A local `Location` (a path, as sent: still percent-encoded) given
    /// without a status: an internal redirect (RFC 3875 §6.2.2).
    pub local_redirect: Option<String>,
    /// `X-Sendfile` or `X-LIGHTTPD-send-file`: a file path (lighttpd).
    pub sendfile: Option<String>,
    /// `X-Accel-Redirect`: a URL path to serve instead (nginx).
    pub accel_redirect: Option<String>,
}

/// The end of the head in `b`: `(end, separator length)`; lines may end
/// with CRLF or LF alone (RFC 3875 §6.2 allows either).
pub fn find_end(b: &[u8]) -> Option<(usize, usize)> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

impl Head {
    /// Parses a head (without its blank line). Errors: why it is malformed,
    /// for the error log (the client gets 502).
    pub fn parse(head: &[u8]) -> Result<Head, &'static str> {
        let text = std::str::from_utf8(head).map_err(|_| "the header block is not text")?;
        let mut status = None;
        let mut location: Option<&str> = None;
        let mut out = Head {
            status: StatusCode::OK,
            // one allocation: a field per line at most
            fields: Vec::with_capacity(head.iter().filter(|&&b| b == b'\n').count() + 1),
            local_redirect: None,
            sendfile: None,
            accel_redirect: None,
        };
        let mut lines = text
            .split('\n')
            .map(|l| l.trim_end_matches('\r'))
            .peekable();
        if let Some(first) = lines.peek() {
            if let Some(rest) = first.strip_prefix("HTTP/") {
                // "HTTP/1.1 200 OK"
                let code = rest
                    .split(' ')
                    .nth(1)
                    .ok_or("a status line without a code")?;
                status = Some(parse_status(code)?);
                lines.next();
            }
        }
        for line in lines {
            if line.is_empty() {
                continue;
            }
            // a continuation line (obs-fold): refused, as RFC 9112 §5.2
            // lets a gateway do, rather than read as a field of its own
            if line.starts_with([' ', '\t']) {
                return Err("a folded header line (obs-fold)");
            }
            let (k, v) = line
                .split_once(':')
                .ok_or("a header line without a colon")?;
            let v = v.trim();
            let k = k.trim();
            if k.eq_ignore_ascii_case("status") {
                let code = v.split(' ').next().unwrap_or("");
                status = Some(parse_status(code)?);
                continue;
            }
            if k.eq_ignore_ascii_case("x-sendfile")
                || k.eq_ignore_ascii_case("x-lighttpd-send-file")
            {
                out.sendfile = Some(v.to_string());
                continue;
            }
            if k.eq_ignore_ascii_case("x-accel-redirect") {
                out.accel_redirect = Some(v.to_string());
                continue;
            }
            let name =
                HeaderName::from_bytes(k.as_bytes()).map_err(|_| "an invalid header name")?;
            // framing and hop-by-hop fields are the server's (RFC 9110
            // §7.6.1), as the proxy drops them from an upstream's answer
            if matches!(
                name,
                header::CONNECTION
                    | header::TRANSFER_ENCODING
                    | header::CONTENT_LENGTH
                    | header::TE
                    | header::TRAILER
                    | header::UPGRADE
            ) || name == "keep-alive"
                || name == "proxy-connection"
            {
                continue;
            }
            let value = HeaderValue::from_str(v).map_err(|_| "an invalid header value")?;
            if name == header::LOCATION {
                location = Some(v);
            }
            out.fields.push((name, value));
        }
        let local = location.filter(|l| l.starts_with('/') && !l.starts_with("//"));
        out.status = match (status, location) {
            (Some(s), _) => s,
            (None, Some(_)) if local.is_some() => {
                out.local_redirect = local.map(str::to_string);
                StatusCode::OK
            }
            (None, Some(_)) => StatusCode::FOUND,
            (None, None) => StatusCode::OK,
        };
        Ok(out)
    }
}

fn parse_status(code: &str) -> Result<StatusCode, &'static str> {
    code.parse::<u16>()
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
        .filter(|s| s.as_u16() >= 200)
        .ok_or("a status without a valid code")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgi_heads_give_status_and_fields() {
        let h =
            Head::parse(b"Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-A: b").unwrap();
        assert_eq!(h.status, StatusCode::NOT_FOUND);
        assert_eq!(h.fields.len(), 2);
        let h = Head::parse(b"Location: https://example.org/\n").unwrap();
        assert_eq!(h.status, StatusCode::FOUND);
        assert!(h.local_redirect.is_none());
        assert!(Head::parse(b"garbage").is_err());
        assert!(Head::parse(b"Status: 99").is_err());
        assert_eq!(find_end(b"A: b\n\nbody"), Some((4, 2)));
        assert_eq!(find_end(b"A: b\r\n\r\nbody"), Some((4, 4)));
    }

    #[test]
    fn a_folded_line_is_refused() {
        for head in [
            &b"X-A: a\r\n Location: /files/a.txt"[..],
            b"X-A: a\r\n\tStatus: 403 Nope",
            b"X-Long: part1\n part2",
        ] {
            assert_eq!(
                Head::parse(head).err(),
                Some("a folded header line (obs-fold)")
            );
        }
    }

    #[test]
    fn a_local_location_without_status_is_an_internal_redirect() {
        let h = Head::parse(b"Location: /other.html?x=1").unwrap();
        assert_eq!(h.local_redirect.as_deref(), Some("/other.html?x=1"));
        // with a status it is the client's redirect (PHP's header('Location'))
        let h = Head::parse(b"Status: 302 Found\nLocation: /other.html").unwrap();
        assert!(h.local_redirect.is_none());
        assert_eq!(h.status, StatusCode::FOUND);
        // a network-path reference is not local
        let h = Head::parse(b"Location: //evil.example/").unwrap();
        assert!(h.local_redirect.is_none());
    }

    #[test]
    fn a_status_line_and_sendfile_fields() {
        let h = Head::parse(b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\nX-Sendfile: /srv/f")
            .unwrap();
        assert_eq!(h.status, StatusCode::CREATED);
        assert!(h.fields.is_empty(), "framing and X-Sendfile are not sent");
        assert_eq!(h.sendfile.as_deref(), Some("/srv/f"));
        let h = Head::parse(b"Keep-Alive: timeout=5\nUpgrade: h2c\nProxy-Connection: x\nX-A: b")
            .unwrap();
        assert_eq!(h.fields.len(), 1, "hop-by-hop fields are the server's");
        let h = Head::parse(b"X-Accel-Redirect: /protected/a").unwrap();
        assert_eq!(h.accel_redirect.as_deref(), Some("/protected/a"));
    }
}

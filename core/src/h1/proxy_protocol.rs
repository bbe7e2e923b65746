//! The PROXY protocol header (HAProxy's specification, versions 1 and 2)
//! that a load balancer sends before the first request of a connection, to
//! give the client's address (nginx `listen ... proxy_protocol`, lighttpd
//! `extforward.hap-PROXY`).
//!
//! Parsing is a pure function over bytes; [`read`] takes exactly the header
//! off the socket and leaves the HTTP bytes behind it unread.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use actix_rt::net::TcpStream;
use tokio::io::AsyncReadExt;

/// The version 2 signature.
const SIG_V2: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 line, CRLF included (the specification's 107).
const MAX_V1: usize = 107;
/// The largest version 2 header accepted, bytes (addresses and TLVs).
const MAX_V2: usize = 16 + 1024;

/// The result of parsing the start of a connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes are needed.
    Need,
    /// A header of `len` bytes; `source` is the client (`None` for `LOCAL`,
    /// `UNKNOWN` or a family other than TCP over IPv4 or IPv6: the
    /// connection's own peer stands).
    Done {
        /// Header length, bytes.
        len: usize,
        /// The client's address and port.
        source: Option<SocketAddr>,
    },
    /// Not a valid header (the reason).
    Invalid(&'static str),
}

/// Parses a PROXY header at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::Need;
    }
    if buf[0] == b'\r' {
        return parse_v2(buf);
    }
    if buf[0] == b'P' {
        return parse_v1(buf);
    }
    Parsed::Invalid("no PROXY protocol header")
}

fn parse_v1(buf: &[u8]) -> Parsed {
    let prefix = b"PROXY ";
    let n = buf.len().min(prefix.len());
    if buf[..n] != prefix[..n] {
        return Parsed::Invalid("no PROXY protocol header");
    }
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() >= MAX_V1 {
            Parsed::Invalid("PROXY v1 line too long")
        } else {
            Parsed::Need
        };
    };
    let len = end + 2;
    if len > MAX_V1 {
        return Parsed::Invalid("PROXY v1 line too long");
    }
    let Ok(line) = std::str::from_utf8(&buf[prefix.len()..end]) else {
        return Parsed::Invalid("PROXY v1 line is not text");
    };
    let parts: Vec<&str> = line.split(' ').collect();
    match parts.as_slice() {
        ["UNKNOWN", ..] => Parsed::Done { len, source: None },
        [fam @ ("TCP4" | "TCP6"), src, _dst, sport, _dport] => {
            let ip: Option<IpAddr> = match *fam {
                "TCP4" => src.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
                _ => src.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
            };
            match (ip, sport.parse::<u16>()) {
                (Some(ip), Ok(port)) => Parsed::Done {
                    len,
                    source: Some(SocketAddr::new(ip, port)),
                },
                _ => Parsed::Invalid("PROXY v1 address or port malformed"),
            }
        }
        _ => Parsed::Invalid("PROXY v1 line malformed"),
    }
}

fn parse_v2(buf: &[u8]) -> Parsed {
    let n = buf.len().min(SIG_V2.len());
    if buf[..n] != SIG_V2[..n] {
        return Parsed::Invalid("no PROXY protocol header");
    }
    if buf.len() < 16 {
        return Parsed::Need;
    }
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Parsed::Invalid("PROXY v2 version is not 2");
    }
    let cmd = ver_cmd & 0x0f;
    let fam = buf[13];
    let body = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    let len = 16 + body;
    if len > MAX_V2 {
        return Parsed::Invalid("PROXY v2 header too large");
    }
    if buf.len() < len {
        return Parsed::Need;
    }
    let a = &buf[16..len];
    let source = match (cmd, fam) {
        (0, _) => None,
        (1, 0x11) if a.len() >= 12 => Some(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
            u16::from_be_bytes([a[8], a[9]]),
        )),
        (1, 0x21) if a.len() >= 36 => {
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&a[..16]);
            Some(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::from(ip)),
                u16::from_be_bytes([a[32], a[33]]),
            ))
        }
        (1, 0x11 | 0x21) => return Parsed::Invalid("PROXY v2 address block too short"),
        (1, _) => None,
        _ => return Parsed::Invalid("PROXY v2 command unknown"),
    };
    Parsed::Done { len, source }
}

/// Reads the header off `io`, no byte beyond it. `Ok(None)`: a header
/// that names no client (the peer stands). Errors: invalid, or the
/// connection ended; the caller closes it.
pub async fn read(io: &mut TcpStream) -> std::io::Result<Option<SocketAddr>> {
    let bad = |why: &'static str| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    // the usual case: the whole header arrived in the first segment
    let mut peek = [0u8; 256];
    let n = io.peek(&mut peek).await?;
    if n == 0 {
        return Err(bad("closed before a PROXY header"));
    }
    if let Parsed::Done { len, source } = parse(&peek[..n]) {
        let mut sink = vec![0u8; len];
        io.read_exact(&mut sink).await?;
        return Ok(source);
    }
    // otherwise byte by byte (v1) or in its announced length (v2)
    let mut got = Vec::with_capacity(64);
    loop {
        match parse(&got) {
            Parsed::Done { source, .. } => return Ok(source),
            Parsed::Invalid(why) => return Err(bad(why)),
            Parsed::Need => {
                let want = if got.first() == Some(&b'\r') && got.len() >= 16 {
                    16 + u16::from_be_bytes([got[14], got[15]]) as usize - got.len()
                } else {
                    1
                };
                let start = got.len();
                got.resize(start + want, 0);
                io.read_exact(&mut got[start..]).await?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_lines_parse() {
        let h = b"PROXY TCP4 203.0.113.7 10.0.0.1 51234 80\r\nGET / HTTP/1.1\r\n";
        assert_eq!(
            parse(h),
            Parsed::Done {
                len: 42,
                source: Some("203.0.113.7:51234".parse().unwrap())
            }
        );
        let h = b"PROXY TCP6 2001:db8::1 ::1 4711 443\r\n";
        assert!(matches!(parse(h), Parsed::Done { source: Some(s), .. } if s.port() == 4711));
        assert!(matches!(
            parse(b"PROXY UNKNOWN\r\n"),
            Parsed::Done {
                source: None,
                len: 15
            }
        ));
        assert_eq!(parse(b"PROXY TCP4 1.2.3.4"), Parsed::Need);
        assert!(matches!(
            parse(b"PROXY TCP4 1.2.3.x 1.2.3.4 1 2\r\n"),
            Parsed::Invalid(_)
        ));
        assert!(matches!(parse(b"GET / HTTP/1.1\r\n"), Parsed::Invalid(_)));
        assert!(matches!(parse(&[b'P'; 200]), Parsed::Invalid(_)));
    }

    #[test]
    fn v2_headers_parse() {
        let mut h = SIG_V2.to_vec();
        h.extend_from_slice(&[
            0x21, 0x11, 0, 12, 198, 51, 100, 4, 10, 0, 0, 1, 0x1f, 0x90, 0, 80,
        ]);
        assert_eq!(
            parse(&h),
            Parsed::Done {
                len: 28,
                source: Some("198.51.100.4:8080".parse().unwrap())
            }
        );
        assert_eq!(parse(&h[..20]), Parsed::Need);
        let mut local = SIG_V2.to_vec();
        local.extend_from_slice(&[0x20, 0x00, 0, 0]);
        assert_eq!(
            parse(&local),
            Parsed::Done {
                len: 16,
                source: None
            }
        );
        let mut bad = SIG_V2.to_vec();
        bad.extend_from_slice(&[0x31, 0x11, 0, 0]);
        assert!(matches!(parse(&bad), Parsed::Invalid(_)));
        let mut short = SIG_V2.to_vec();
        short.extend_from_slice(&[0x21, 0x11, 0, 4, 1, 2, 3, 4]);
        assert!(matches!(parse(&short), Parsed::Invalid(_)));
    }
}

//! The SCGI request header (Neil Schemenauer's SCGI protocol, 2006): a
//! netstring `"<length>:<headers>,"` whose headers are NUL-terminated names
//! and values, `CONTENT_LENGTH` first and `SCGI` = `1` among them, followed
//! by exactly `CONTENT_LENGTH` body bytes. The answer is CGI output read until
//! the application closes the connection.

use bytes::{BufMut, Bytes, BytesMut};

/// Room kept before the headers for the netstring's length and colon: up to
/// 9 digits (a header block under 1 GB) and `:`.
const PREFIX: usize = 10;

/// The headers of one SCGI request, encoded as they are added.
///
/// ```text
/// 70:CONTENT_LENGTH\027\0SCGI\01\0REQUEST_METHOD\0POST\0REQUEST_URI\0/deepthought\0,
/// ```
pub(crate) struct Headers {
    buf: BytesMut,
}

impl Headers {
    /// Starts the headers with `CONTENT_LENGTH` (the body's length in bytes;
    /// the protocol requires it first, also when 0) and `SCGI` = `1`.
    /// `capacity`: the expected size of all headers, bytes.
    pub(crate) fn new(content_length: u64, capacity: usize) -> Headers {
        let mut buf = BytesMut::with_capacity(PREFIX + capacity + 48);
        buf.put_bytes(b' ', PREFIX);
        let mut h = Headers { buf };
        let mut digits = itoa_buf();
        h.raw_pair(b"CONTENT_LENGTH", itoa(content_length, &mut digits));
        h.raw_pair(b"SCGI", b"1");
        h
    }

    /// Adds one header. `CONTENT_LENGTH` and `SCGI` are ignored (they were
    /// set by [`Headers::new`]; the protocol allows no duplicate names), as
    /// is a name or value containing NUL, which the protocol cannot carry.
    pub(crate) fn push(&mut self, name: &[u8], value: &[u8]) {
        if name == b"CONTENT_LENGTH" || name == b"SCGI" || name.is_empty() {
            return;
        }
        if name.contains(&0) || value.contains(&0) {
            tracing::debug!(
                "scgi: header {:?} holds a NUL, not sent",
                String::from_utf8_lossy(name)
            );
            return;
        }
        self.raw_pair(name, value);
    }

    fn raw_pair(&mut self, name: &[u8], value: &[u8]) {
        self.buf.reserve(name.len() + value.len() + 2);
        self.buf.put_slice(name);
        self.buf.put_u8(0);
        self.buf.put_slice(value);
        self.buf.put_u8(0);
    }

    /// The netstring, ready to send before the body.
    pub(crate) fn finish(mut self) -> Bytes {
        let len = self.buf.len() - PREFIX;
        let mut digits = itoa_buf();
        let digits = itoa(len as u64, &mut digits);
        // the length and ':' end right before the headers
        let start = PREFIX - 1 - digits.len();
        self.buf[start..PREFIX - 1].copy_from_slice(digits);
        self.buf[PREFIX - 1] = b':';
        self.buf.put_u8(b',');
        self.buf.freeze().slice(start..)
    }
}

fn itoa_buf() -> [u8; 20] {
    [0; 20]
}

/// `n` in decimal, written at the end of `buf`.
fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_of_the_specification() {
        let mut h = Headers::new(27, 0);
        h.push(b"REQUEST_METHOD", b"POST");
        h.push(b"REQUEST_URI", b"/deepthought");
        assert_eq!(
            &h.finish()[..],
            &b"70:CONTENT_LENGTH\x0027\x00SCGI\x001\x00REQUEST_METHOD\x00POST\x00REQUEST_URI\x00/deepthought\x00,"[..]
        );
    }

    #[test]
    fn content_length_comes_once_and_first() {
        let mut h = Headers::new(0, 16);
        h.push(b"CONTENT_LENGTH", b"5");
        h.push(b"SCGI", b"2");
        h.push(b"A\0B", b"x");
        h.push(b"X", b"y");
        let out = h.finish();
        assert_eq!(
            &out[..],
            &b"28:CONTENT_LENGTH\x000\x00SCGI\x001\x00X\x00y\x00,"[..]
        );
    }

    #[test]
    fn long_header_blocks_get_their_whole_length() {
        let mut h = Headers::new(1, 0);
        let v = vec![b'v'; 123_456];
        h.push(b"BIG", &v);
        let out = h.finish();
        let colon = out.iter().position(|&b| b == b':').unwrap();
        let len: usize = std::str::from_utf8(&out[..colon]).unwrap().parse().unwrap();
        assert_eq!(len, out.len() - colon - 2);
        assert_eq!(out[out.len() - 1], b',');
        assert_eq!(itoa(0, &mut itoa_buf()), b"0");
        assert_eq!(itoa(u64::MAX, &mut itoa_buf()), b"18446744073709551615");
    }
}

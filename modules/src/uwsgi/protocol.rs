//! The uwsgi packet (uWSGI's binary protocol, "The uwsgi Protocol" in its
//! documentation): a 4-byte header — `modifier1` (u8), `datasize` (u16,
//! little-endian), `modifier2` (u8) — then `datasize` bytes of variables,
//! each `u16 LE key length, key, u16 LE value length, value`. The request
//! body follows the packet (its length is the `CONTENT_LENGTH` variable).

use bytes::{BufMut, Bytes, BytesMut};

/// The header's size, bytes.
const HEAD: usize = 4;

/// The variables of one request do not fit the protocol.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PacketError {
    /// A key or a value is longer than 65535 bytes (a 16-bit length).
    #[error("uwsgi variable {name} is {len} bytes long (at most 65535)")]
    VarTooLong {
        /// The variable's name (lossy UTF-8, at most 64 characters).
        name: String,
        /// Its key or value length, bytes.
        len: usize,
    },
    /// All variables together exceed 65535 bytes (the 16-bit `datasize`).
    /// uWSGI's own limit is lower: its `buffer-size` (default 4096).
    #[error("uwsgi variables take {0} bytes (at most 65535)")]
    TooLarge(usize),
}

/// The variables of one uwsgi request, encoded as they are added.
pub(crate) struct Packet {
    buf: BytesMut,
    error: Option<PacketError>,
}

impl Packet {
    /// An empty packet; `capacity`: the expected size of the variables.
    pub(crate) fn new(capacity: usize) -> Packet {
        let mut buf = BytesMut::with_capacity(HEAD + capacity + 64);
        buf.put_bytes(0, HEAD);
        Packet { buf, error: None }
    }

    /// Adds one variable. An over-long one is remembered as the error that
    /// [`Packet::finish`] returns.
    pub(crate) fn push(&mut self, name: &[u8], value: &[u8]) {
        for len in [name.len(), value.len()] {
            if len > u16::MAX as usize && self.error.is_none() {
                let name = String::from_utf8_lossy(&name[..name.len().min(64)]).into_owned();
                self.error = Some(PacketError::VarTooLong { name, len });
            }
        }
        if self.error.is_some() {
            return;
        }
        self.buf.reserve(4 + name.len() + value.len());
        self.buf.put_u16_le(name.len() as u16);
        self.buf.put_slice(name);
        self.buf.put_u16_le(value.len() as u16);
        self.buf.put_slice(value);
    }

    /// The packet with `modifier1` (0: Python/WSGI, uWSGI's default;
    /// 5: PSGI, 7: Lua, ...) and `modifier2` = 0.
    ///
    /// # Errors
    /// [`PacketError`] when a variable or all of them are too long.
    pub(crate) fn finish(mut self, modifier1: u8) -> Result<Bytes, PacketError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let size = self.buf.len() - HEAD;
        let size16 = u16::try_from(size).map_err(|_| PacketError::TooLarge(size))?;
        self.buf[0] = modifier1;
        self.buf[1..3].copy_from_slice(&size16.to_le_bytes());
        self.buf[3] = 0;
        Ok(self.buf.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_variables_are_little_endian() {
        let mut p = Packet::new(0);
        p.push(b"REQUEST_METHOD", b"GET");
        p.push(b"PATH_INFO", b"");
        let out = p.finish(0).unwrap();
        let vars = 2 + 14 + 2 + 3 + 2 + 9 + 2;
        assert_eq!(&out[..4], &[0, vars as u8, 0, 0]);
        assert_eq!(&out[4..8], b"\x0e\x00RE");
        assert_eq!(&out[4 + 16..4 + 21], b"\x03\x00GET");
        assert_eq!(&out[out.len() - 2..], b"\x00\x00");
        assert_eq!(out.len(), 4 + vars);
        let mut p = Packet::new(0);
        p.push(b"K", b"V");
        assert_eq!(
            &p.finish(5).unwrap()[..],
            b"\x05\x06\x00\x00\x01\x00K\x01\x00V"
        );
    }

    #[test]
    fn what_does_not_fit_16_bits_is_an_error() {
        let mut p = Packet::new(0);
        p.push(b"BIG", &vec![b'x'; 70_000]);
        p.push(b"OK", b"1");
        assert_eq!(
            p.finish(0),
            Err(PacketError::VarTooLong {
                name: "BIG".into(),
                len: 70_000
            })
        );
        let mut p = Packet::new(0);
        for _ in 0..3 {
            p.push(b"V", &vec![b'x'; 30_000]);
        }
        assert!(matches!(p.finish(0), Err(PacketError::TooLarge(n)) if n > 65535));
        // exactly 65535 bytes fit
        let mut p = Packet::new(0);
        p.push(b"V", &vec![b'x'; 65535 - 5]);
        assert_eq!(&p.finish(0).unwrap()[..4], &[0, 0xff, 0xff, 0]);
    }
}

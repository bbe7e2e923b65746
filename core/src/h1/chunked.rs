//! The chunked transfer coding of a request body (RFC 9112 §7.1), decoded
//! incrementally from whatever bytes have arrived, without copying: each step
//! names the slice of the input that is body data.

/// Longest chunk-size line with its extensions, bytes (nginx and h2o accept
/// extensions and ignore them; an endless line is refused).
pub const MAX_SIZE_LINE: usize = 4096;

/// Most bytes of trailer fields after the last chunk (discarded, RFC 9110
/// §6.5.1 lets a recipient drop them).
pub const MAX_TRAILERS: usize = 16384;

/// Why a chunked body is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChunkedError {
    /// 400: a malformed size line, a chunk not followed by CRLF, an endless
    /// size line or trailer section.
    #[error("malformed chunked body: {0}")]
    Invalid(&'static str),
    /// 413: the body grew past `max-body-size` (checked from each chunk's
    /// announced size, before its data is read).
    #[error("request body larger than max-body-size")]
    TooLarge,
}

/// One step of decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Bytes of the input used; the caller drops them before the next call.
    pub consumed: usize,
    /// The body data in the input, as `start..end` within it (empty: none).
    pub data: (usize, usize),
    /// The last chunk and the trailer section are complete; `consumed`
    /// includes them, and what follows is the next request.
    pub done: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailers(usize),
    Done,
}

/// The decoder of one body.
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
    received: u64,
    max_body: u64,
}

impl Decoder {
    /// A decoder refusing bodies above `max_body` bytes (`max-body-size`).
    pub fn new(max_body: u64) -> Decoder {
        Decoder {
            state: State::Size,
            received: 0,
            max_body,
        }
    }

    /// Body bytes announced so far (all chunk sizes).
    pub fn received(&self) -> u64 {
        self.received
    }

    /// True once the last chunk and the trailers were read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from the start of `buf`. A step with `consumed == 0` and not
    /// `done` needs more input. Call again with the rest after a step that
    /// consumed something.
    ///
    /// # Errors
    /// See [`ChunkedError`]; after an error the connection must close.
    pub fn step(&mut self, buf: &[u8]) -> Result<Step, ChunkedError> {
        let none = |consumed| Step {
            consumed,
            data: (0, 0),
            done: false,
        };
        match self.state {
            State::Done => Ok(Step {
                consumed: 0,
                data: (0, 0),
                done: true,
            }),
            State::Size => match size_line(buf) {
                Ok(Some((n, size))) => {
                    self.received = self
                        .received
                        .checked_add(size)
                        .filter(|r| *r <= self.max_body)
                        .ok_or(ChunkedError::TooLarge)?;
                    self.state = if size == 0 {
                        State::Trailers(0)
                    } else {
                        State::Data(size)
                    };
                    Ok(none(n))
                }
                Ok(None) if buf.len() > MAX_SIZE_LINE => {
                    Err(ChunkedError::Invalid("chunk-size line too long"))
                }
                Ok(None) => Ok(none(0)),
                Err(e) => Err(e),
            },
            State::Data(left) => {
                let k = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                let left = left - k as u64;
                self.state = if left == 0 {
                    State::DataEnd
                } else {
                    State::Data(left)
                };
                Ok(Step {
                    consumed: k,
                    data: (0, k),
                    done: false,
                })
            }
            State::DataEnd => match buf {
                [b'\r', b'\n', ..] => {
                    self.state = State::Size;
                    Ok(none(2))
                }
                [] | [b'\r'] => Ok(none(0)),
                _ => Err(ChunkedError::Invalid("chunk data not followed by CRLF")),
            },
            State::Trailers(seen) => {
                let Some(eol) = buf.iter().position(|&b| b == b'\n') else {
                    return if seen + buf.len() > MAX_TRAILERS {
                        Err(ChunkedError::Invalid("trailer section too long"))
                    } else {
                        Ok(none(0))
                    };
                };
                let line = &buf[..eol];
                let Some(line) = line.strip_suffix(b"\r") else {
                    return Err(ChunkedError::Invalid("bare LF in the trailer section"));
                };
                if line.contains(&b'\r') || line.contains(&0) {
                    return Err(ChunkedError::Invalid("bare CR or NUL in a trailer field"));
                }
                if line.is_empty() {
                    self.state = State::Done;
                    return Ok(Step {
                        consumed: eol + 1,
                        data: (0, 0),
                        done: true,
                    });
                }
                if seen + eol + 1 > MAX_TRAILERS {
                    return Err(ChunkedError::Invalid("trailer section too long"));
                }
                if line[0] == b' ' || line[0] == b'\t' || !line.contains(&b':') {
                    return Err(ChunkedError::Invalid("malformed trailer field"));
                }
                self.state = State::Trailers(seen + eol + 1);
                Ok(none(eol + 1))
            }
        }
    }
}

/// A chunk-size line (RFC 9112 §7.1): `1*HEXDIG [BWS] [";" extensions] CRLF`,
/// read strictly. The extensions are skipped, but a CR, LF or other control
/// byte in them is refused: a front end that ends lines at a bare LF would
/// frame the body differently (request smuggling; httparse's
/// `parse_chunk_size` lets any byte through). `None`: the line is incomplete.
fn size_line(buf: &[u8]) -> Result<Option<(usize, u64)>, ChunkedError> {
    let bad = |m| Err(ChunkedError::Invalid(m));
    let digits = buf.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == buf.len() {
        return if digits > 16 {
            bad("chunk size too long")
        } else {
            Ok(None)
        };
    }
    if digits == 0 {
        return bad("chunk size without a hex digit");
    }
    if digits > 16 {
        return bad("chunk size too long");
    }
    let size = buf[..digits]
        .iter()
        .try_fold(0u64, |n, &d| {
            let v = (d as char).to_digit(16)? as u64;
            n.checked_mul(16)?.checked_add(v)
        })
        .ok_or(ChunkedError::TooLarge)?;
    let mut i = digits;
    let mut in_ext = false;
    while i < buf.len() {
        match buf[i] {
            b'\r' => {
                return match buf.get(i + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((i + 2, size))),
                    Some(_) => bad("bare CR in a chunk-size line"),
                }
            }
            b';' => in_ext = true,
            b' ' | b'\t' => {}
            b'\n' => return bad("bare LF in a chunk-size line"),
            c if in_ext && (c >= 0x20 && c != 0x7f) => {}
            _ if in_ext => return bad("control byte in a chunk extension"),
            _ => return bad("invalid chunk size"),
        }
        i += 1;
    }
    Ok(None)
}

/// Decodes a whole body held in `input` (a test and fuzzing aid): the data and
/// the bytes consumed, or `None` if incomplete.
///
/// # Errors
/// As [`Decoder::step`].
pub fn decode_all(input: &[u8], max_body: u64) -> Result<Option<(Vec<u8>, usize)>, ChunkedError> {
    let mut d = Decoder::new(max_body);
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let s = d.step(&input[at..])?;
        out.extend_from_slice(&input[at + s.data.0..at + s.data.1]);
        at += s.consumed;
        if s.done {
            return Ok(Some((out, at)));
        }
        if s.consumed == 0 {
            return Ok(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_chunks_extensions_and_trailers() {
        let body = b"4\r\nWiki\r\n5;name=v\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Sum: 1\r\n\r\nGET /next";
        let (data, n) = decode_all(body, 1 << 20).unwrap().unwrap();
        assert_eq!(data, b"Wikipedia in\r\n\r\nchunks.");
        assert_eq!(&body[n..], b"GET /next");
    }

    #[test]
    fn any_split_gives_the_same_body() {
        let body = b"3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n";
        for cut in 0..body.len() {
            // feed the first `cut` bytes, then the rest appended
            let mut d = Decoder::new(100);
            let mut buf: Vec<u8> = body[..cut].to_vec();
            let mut rest = &body[cut..];
            let mut out = Vec::new();
            loop {
                let s = d.step(&buf).unwrap();
                out.extend_from_slice(&buf[s.data.0..s.data.1]);
                buf.drain(..s.consumed);
                if s.done {
                    break;
                }
                if s.consumed == 0 {
                    assert!(!rest.is_empty(), "stuck at cut {cut}");
                    buf.push(rest[0]);
                    rest = &rest[1..];
                }
            }
            assert_eq!(out, b"abc0123456789abcdef", "cut {cut}");
            assert!(buf.is_empty() && rest.is_empty());
        }
    }

    /// Found by a hostile review: a bare LF inside an extension let a body
    /// end where an LF-tolerant front end saw data (smuggling), and size
    /// lines without a digit passed as the last chunk.
    #[test]
    fn size_lines_are_strict() {
        use ChunkedError::Invalid;
        let e = |b: &[u8]| decode_all(b, 1 << 20).unwrap_err();
        assert_eq!(e(b"2;\nxx\r\n"), Invalid("bare LF in a chunk-size line"));
        assert_eq!(e(b"2\nxx\r\n"), Invalid("bare LF in a chunk-size line"));
        assert_eq!(e(b"\r\n\r\n"), Invalid("chunk size without a hex digit"));
        assert_eq!(e(b";x\r\n"), Invalid("chunk size without a hex digit"));
        assert_eq!(
            e(b"3;a\x00b\r\nabc\r\n"),
            Invalid("control byte in a chunk extension")
        );
        assert_eq!(e(b"3;a\rb\r\n"), Invalid("bare CR in a chunk-size line"));
        assert_eq!(e(b"3 x\r\n"), Invalid("invalid chunk size"));
        let ok = decode_all(b"3 ; name=\"v\"\r\nabc\r\n0\r\n\r\n", 100)
            .unwrap()
            .unwrap();
        assert_eq!(ok.0, b"abc");
    }

    #[test]
    fn refusals() {
        use ChunkedError::*;
        let e = |b: &[u8]| decode_all(b, 10).unwrap_err();
        assert_eq!(e(b"zz\r\n"), Invalid("chunk size without a hex digit"));
        assert_eq!(
            e(b"3\r\nabcX\r\n"),
            Invalid("chunk data not followed by CRLF")
        );
        assert_eq!(e(b"b\r\n"), TooLarge);
        assert_eq!(e(b"8\r\n12345678\r\n3\r\n"), TooLarge);
        assert_eq!(e(b"ffffffffffffffff\r\n"), TooLarge);
        assert_eq!(
            e(b"0\r\n bad: fold\r\n\r\n"),
            Invalid("malformed trailer field")
        );
        assert_eq!(
            e(b"0\r\nX: a\rb\r\n\r\n"),
            Invalid("bare CR or NUL in a trailer field")
        );
        let long = [b'1'; MAX_SIZE_LINE + 1];
        assert_eq!(
            Decoder::new(10).step(&long).unwrap_err(),
            Invalid("chunk size too long")
        );
        let mut ext = b"1;".to_vec();
        ext.extend(std::iter::repeat_n(b'x', MAX_SIZE_LINE));
        assert_eq!(
            Decoder::new(10).step(&ext).unwrap_err(),
            Invalid("chunk-size line too long")
        );
        assert_eq!(decode_all(b"3\r\nab", 10).unwrap(), None);
    }
}

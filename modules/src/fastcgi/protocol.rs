//! The FastCGI record layer (FastCGI 1.0 specification, §3 and §5): the
//! records of a Responder request, the name-value pairs of its parameters,
//! and the reader of the application's answer.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Record types used here (§8).
pub(super) const BEGIN_REQUEST: u8 = 1;
pub(super) const END_REQUEST: u8 = 3;
pub(super) const PARAMS: u8 = 4;
pub(super) const STDIN: u8 = 5;
pub(super) const STDOUT: u8 = 6;
pub(super) const STDERR: u8 = 7;
/// The Responder role.
const RESPONDER: u16 = 1;
/// The request id: one request at a time per connection.
const ID: u16 = 1;
/// The largest record content, bytes.
pub(super) const MAX_CONTENT: usize = 65535;

/// Appends one record with `content` (at most [`MAX_CONTENT`] bytes).
pub(super) fn record(out: &mut BytesMut, kind: u8, content: &[u8]) {
    debug_assert!(content.len() <= MAX_CONTENT);
    let pad = (8 - content.len() % 8) % 8;
    out.put_u8(1);
    out.put_u8(kind);
    out.put_u16(ID);
    out.put_u16(content.len() as u16);
    out.put_u8(pad as u8);
    out.put_u8(0);
    out.put_slice(content);
    out.put_bytes(0, pad);
}

/// Appends `content` as records of `kind`, split at [`MAX_CONTENT`].
pub(super) fn stream(out: &mut BytesMut, kind: u8, content: &[u8]) {
    for part in content.chunks(MAX_CONTENT) {
        record(out, kind, part);
    }
}

/// The BEGIN_REQUEST record of a Responder; with `keep_conn`
/// (`FCGI_KEEP_CONN`, §5.1) the application keeps the connection open after
/// END_REQUEST, for the next request.
pub(super) fn begin(out: &mut BytesMut, keep_conn: bool) {
    let mut body = [0u8; 8];
    body[..2].copy_from_slice(&RESPONDER.to_be_bytes());
    body[2] = u8::from(keep_conn);
    record(out, BEGIN_REQUEST, &body);
}

/// Appends the PARAMS stream that `write` produces (name-value pairs, with
/// [`pair`]) and its empty closing record. The pairs are written in place
/// behind a record header whose length is set afterwards; beyond
/// [`MAX_CONTENT`] bytes they are split into several records, between
/// pairs (php-fpm reads a pair whole from one record). Errors: one pair
/// larger than a record (a header field of about 64 KiB), which no record
/// split can carry to php-fpm (nginx refuses it too).
pub(super) fn params(
    out: &mut BytesMut,
    write: impl FnOnce(&mut BytesMut),
) -> Result<(), &'static str> {
    let start = out.len();
    out.put_bytes(0, 8);
    write(out);
    let len = out.len() - start - 8;
    if len <= MAX_CONTENT {
        let pad = (8 - len % 8) % 8;
        out[start] = 1;
        out[start + 1] = PARAMS;
        out[start + 2..start + 4].copy_from_slice(&ID.to_be_bytes());
        out[start + 4..start + 6].copy_from_slice(&(len as u16).to_be_bytes());
        out[start + 6] = pad as u8;
        out.put_bytes(0, pad);
    } else {
        // rare: more than 64 KiB of parameters, split between pairs
        let content = out.split_off(start + 8);
        out.truncate(start);
        let (mut from, mut at) = (0, 0);
        while at < content.len() {
            let n = pair_len(&content[at..]).ok_or("malformed parameters")?;
            if n > MAX_CONTENT {
                return Err("a parameter larger than a FastCGI record");
            }
            if at + n - from > MAX_CONTENT {
                record(out, PARAMS, &content[from..at]);
                from = at;
            }
            at += n;
        }
        record(out, PARAMS, &content[from..]);
    }
    record(out, PARAMS, &[]);
    Ok(())
}

/// The encoded length of the pair at the start of `b` (§3.4), if whole.
fn pair_len(b: &[u8]) -> Option<usize> {
    let mut at = 0;
    let mut total = 0;
    for _ in 0..2 {
        let first = *b.get(at)?;
        if first < 128 {
            total += usize::from(first);
            at += 1;
        } else {
            let v = u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?) & 0x7fff_ffff;
            total += v as usize;
            at += 4;
        }
    }
    let n = at + total;
    (n <= b.len()).then_some(n)
}

/// Appends one name-value pair (§3.4).
pub(super) fn pair(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    for len in [name.len(), value.len()] {
        if len < 128 {
            out.put_u8(len as u8);
        } else {
            out.put_u32(len as u32 | 0x8000_0000);
        }
    }
    out.put_slice(name);
    out.put_slice(value);
}

/// One record read from the application.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Record {
    /// STDOUT bytes (empty: the end of STDOUT).
    Stdout(Bytes),
    /// STDERR bytes.
    Stderr(Bytes),
    /// END_REQUEST: the request is complete.
    End,
    /// Any other type, ignored.
    Other,
}

/// Takes one whole record off the front of `buf`; `Ok(None)`: more bytes are
/// needed. A management record (request id 0) is [`Record::Other`].
///
/// # Errors
/// A version other than 1, or a record of another request than ours (id 1;
/// nginx "upstream sent unexpected FastCGI request id").
pub(super) fn next(buf: &mut BytesMut) -> Result<Option<Record>, &'static str> {
    if buf.len() < 8 {
        return Ok(None);
    }
    if buf[0] != 1 {
        return Err("not a FastCGI record (version is not 1)");
    }
    let kind = buf[1];
    let id = u16::from_be_bytes([buf[2], buf[3]]);
    if id != ID && id != 0 {
        return Err("a record of another request id");
    }
    let len = u16::from_be_bytes([buf[4], buf[5]]) as usize;
    let pad = buf[6] as usize;
    if buf.len() < 8 + len + pad {
        return Ok(None);
    }
    buf.advance(8);
    let content = buf.split_to(len).freeze();
    buf.advance(pad);
    if id == 0 {
        return Ok(Some(Record::Other));
    }
    Ok(Some(match kind {
        STDOUT => Record::Stdout(content),
        STDERR => Record::Stderr(content),
        END_REQUEST => Record::End,
        _ => Record::Other,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_padded_to_eight_bytes_and_read_back() {
        let mut out = BytesMut::new();
        record(&mut out, STDOUT, b"hello");
        assert_eq!(out.len(), 8 + 5 + 3);
        record(&mut out, END_REQUEST, &[0; 8]);
        assert_eq!(
            next(&mut out),
            Ok(Some(Record::Stdout(Bytes::from_static(b"hello"))))
        );
        assert_eq!(next(&mut out), Ok(Some(Record::End)));
        assert_eq!(next(&mut out), Ok(None));
    }

    #[test]
    fn long_pair_lengths_take_four_bytes() {
        let mut out = BytesMut::new();
        pair(&mut out, b"A", &[b'x'; 200]);
        assert_eq!(&out[..5], &[1, 0x80, 0, 0, 200]);
        assert_eq!(out.len(), 5 + 1 + 200);
    }

    #[test]
    fn params_are_framed_in_place() {
        let mut out = BytesMut::new();
        params(&mut out, |p| pair(p, b"A", b"bc")).unwrap();
        let mut expect = BytesMut::new();
        let mut content = BytesMut::new();
        pair(&mut content, b"A", b"bc");
        record(&mut expect, PARAMS, &content);
        record(&mut expect, PARAMS, &[]);
        assert_eq!(out, expect);
        // beyond one record's content: split between pairs, never inside one
        let mut out = BytesMut::new();
        let big = vec![b'x'; 40_000];
        params(&mut out, |p| {
            pair(p, b"A", &big);
            pair(p, b"B", &big);
        })
        .unwrap();
        let mut first = BytesMut::new();
        pair(&mut first, b"A", &big);
        let mut second = BytesMut::new();
        pair(&mut second, b"B", &big);
        let mut expect = BytesMut::new();
        record(&mut expect, PARAMS, &first);
        record(&mut expect, PARAMS, &second);
        record(&mut expect, PARAMS, &[]);
        assert_eq!(out, expect);
        // one pair larger than a record cannot be carried
        let mut out = BytesMut::new();
        assert!(params(&mut out, |p| pair(p, b"BIG", &vec![b'x'; 70_000])).is_err());
    }

    #[test]
    fn only_our_request_id_is_read() {
        let mut out = BytesMut::new();
        record(&mut out, STDOUT, b"ours");
        // a management record (id 0) is skipped
        let mut mgmt = BytesMut::new();
        record(&mut mgmt, STDOUT, b"mgmt");
        mgmt[2..4].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(next(&mut mgmt), Ok(Some(Record::Other)));
        // another request's record is refused
        out[2..4].copy_from_slice(&2u16.to_be_bytes());
        assert!(next(&mut out).is_err());
    }

    #[test]
    fn a_partial_record_waits() {
        let mut out = BytesMut::new();
        record(&mut out, STDOUT, b"abcdefghij");
        let mut part = out.split_to(12);
        assert_eq!(next(&mut part), Ok(None));
    }
}

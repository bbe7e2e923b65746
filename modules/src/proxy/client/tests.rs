use super::*;

#[test]
fn kind_knows_every_hop_by_hop_name_in_any_case() {
    use tessera_core::actix_web::http::header::HeaderName;
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "proxy-authenticate",
    ] {
        let n = HeaderName::from_static(name);
        assert!(super::super::forward::is_hop_by_hop(&n), "{name}");
        assert_ne!(
            kind(name.to_ascii_uppercase().as_bytes()),
            Kind::Other,
            "{name}"
        );
    }
    assert_eq!(kind(b"Server"), Kind::Server);
    assert_eq!(kind(b"DATE"), Kind::Date);
    for other in [
        "etag",
        "x-te",
        "content-type",
        "set-cookie",
        "upgrade-insecure",
    ] {
        assert_eq!(kind(other.as_bytes()), Kind::Other, "{other}");
    }
}

/// The kept fields of `raw`'s head, as [`read_head`] finds them.
fn kept(raw: &[u8]) -> (Vec<Kept>, usize) {
    let mut slots = [httparse::EMPTY_HEADER; 16];
    let mut res = httparse::Response::new(&mut slots);
    let n = match res.parse(raw).unwrap() {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => panic!("partial"),
    };
    let base = raw.as_ptr() as usize;
    let at = |p: &[u8]| p.as_ptr() as usize - base;
    let fields = res
        .headers
        .iter()
        .filter(|f| kind(f.name.as_bytes()) == Kind::Other)
        .map(|f| {
            let name = at(f.name.as_bytes());
            let end = name + f.name.len();
            Kept {
                name,
                name_len: f.name.len(),
                value: if f.value.is_empty() {
                    end..end
                } else {
                    at(f.value)..at(f.value) + f.value.len()
                },
            }
        })
        .collect();
    (fields, n)
}

#[test]
fn compact_writes_the_kept_lines_in_place() {
    let raw = b"HTTP/1.1 200 OK\r\nServer: x\r\nA: 1\r\nB:2\r\nConnection: close\r\nC:   three  \r\nD:\r\nE: 5\r\nF: 6\r\n\r\nbody";
    let mut head = raw.to_vec();
    let (fields, n) = kept(raw);
    let m = compact(&mut head[..n], &fields).unwrap();
    assert_eq!(
        &head[..m],
        b"A: 1\r\nB: 2\r\nC: three\r\nD: \r\nE: 5\r\nF: 6\r\n"
    );
    assert_eq!(&head[n..], b"body");
}

#[test]
fn compact_refuses_a_head_whose_lines_would_overtake_it() {
    // a short status line, then fields without the space and bare LFs:
    // each line written is longer than the one read
    let raw = b"HTTP/1.1 200\nA:1\nB:2\nC:3\nD:4\nE:5\nF:6\nG:7\nH:8\n\n";
    let mut head = raw.to_vec();
    let (fields, n) = kept(raw);
    assert_eq!(compact(&mut head[..n], &fields), None);
    assert_eq!(&head[..], raw, "unchanged");
}

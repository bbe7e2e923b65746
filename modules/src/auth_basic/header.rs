//! The `Authorization: Basic` request header (RFC 7617 §2, RFC 9110 §11.6.2)
//! and the `WWW-Authenticate` challenge.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use tessera_core::actix_web::http::header::{self, HeaderMap, HeaderValue};

/// Longest `Authorization` value looked at, in bytes (4 KiB); a longer one is
/// treated as malformed (401) without decoding it.
pub const MAX_AUTHORIZATION: usize = 4096;

/// Standard base64 (RFC 4648 §4), padding optional, as browsers and curl send it.
const B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// User name and password from a Basic `Authorization` header.
#[derive(Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The user-id (before the first colon).
    pub user: String,
    /// The password (after the first colon; may contain colons).
    pub password: String,
}

/// Reads Basic credentials from `headers`. `None` (answered with 401) when the
/// header is absent, appears more than once, is longer than
/// [`MAX_AUTHORIZATION`], is not ASCII, names another scheme, has a token that is
/// not base64, decodes to bytes that are not UTF-8 (the challenge announces
/// `charset="UTF-8"`, RFC 7617 §2.1), has no colon, or has a user-id with
/// control characters (RFC 7617 §2).
pub fn credentials(headers: &HeaderMap) -> Option<Credentials> {
    let mut all = headers.get_all(header::AUTHORIZATION);
    let value = all.next()?;
    if all.next().is_some() || value.len() > MAX_AUTHORIZATION {
        return None;
    }
    let value = value.to_str().ok()?.trim_matches([' ', '\t']);
    let (scheme, token) = value.split_once([' ', '\t'])?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let token = token.trim_matches([' ', '\t']);
    if token.is_empty() || token.contains([' ', '\t', ',']) {
        return None;
    }
    let decoded = B64.decode(token).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    if user.chars().any(char::is_control) {
        return None;
    }
    Some(Credentials {
        user: user.to_owned(),
        password: password.to_owned(),
    })
}

/// The challenge value `Basic realm="<realm>", charset="UTF-8"` (RFC 7617
/// §2.1), with `"` and `\` in the realm escaped as a quoted-string (RFC 9110
/// §5.6.4).
///
/// # Errors
/// When the realm has control characters or non-ASCII characters (a header
/// value cannot carry them portably).
pub fn challenge(realm: &str) -> Result<HeaderValue, String> {
    if realm.chars().any(|c| c.is_control() || !c.is_ascii()) {
        return Err(format!(
            "realm: {realm:?} must be printable ASCII (no control characters)"
        ));
    }
    let mut v = String::with_capacity(realm.len() + 32);
    v.push_str("Basic realm=\"");
    for c in realm.chars() {
        if c == '"' || c == '\\' {
            v.push('\\');
        }
        v.push(c);
    }
    v.push_str("\", charset=\"UTF-8\"");
    HeaderValue::from_str(&v).map_err(|_| format!("realm: {realm:?} is not a valid header value"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::actix_web::http::header::HeaderName;

    fn h(values: &[&[u8]]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for v in values {
            m.append(
                HeaderName::from_static("authorization"),
                HeaderValue::from_bytes(v).unwrap(),
            );
        }
        m
    }

    fn basic(raw: &[u8]) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
        .into_bytes()
    }

    #[test]
    fn good_forms() {
        let c = credentials(&h(&[b"Basic dXNlcjpwYXNz"])).unwrap();
        assert_eq!(c.user, "user");
        assert_eq!(c.password, "pass");
        // scheme case-insensitive, extra blanks, padding optional, colon in password
        let c = credentials(&h(&[b"bAsIc   dXNlcjpwYTpzcw"])).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("user", "pa:ss"));
        let c = credentials(&h(&[&basic("zoë:pässwörd".as_bytes())])).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("zoë", "pässwörd"));
        let c = credentials(&h(&[&basic(b":")])).unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("", ""));
    }

    #[test]
    fn hostile_forms_are_none() {
        let huge = basic(&vec![b'a'; MAX_AUTHORIZATION]);
        let cases: Vec<Vec<u8>> = vec![
            b"Bearer dXNlcjpwYXNz".to_vec(),
            b"Basic".to_vec(),
            b"Basic ".to_vec(),
            b"Basic !!!notbase64!!!".to_vec(),
            b"Basic dXNlcjpwYXNz dXNlcjpwYXNz".to_vec(),
            b"Basic dXNlcjpwYXNz, Basic eA==".to_vec(),
            b"Basic dXNlcnBhc3M=".to_vec(), // "userpass": no colon
            basic(b"\xff\xfe:pw"),          // not UTF-8
            basic(b"us\x01er:pw"),          // control character in the user-id
            b"Basic \xc3\xa9".to_vec(),     // obs-text in the header value
            b"Basic dXNlcjpwYXNz=====".to_vec(),
            huge,
        ];
        for c in &cases {
            assert_eq!(
                credentials(&h(&[c])),
                None,
                "{:?}",
                String::from_utf8_lossy(c)
            );
        }
        assert_eq!(credentials(&HeaderMap::new()), None);
        assert_eq!(
            credentials(&h(&[b"Basic dXNlcjpwYXNz", b"Basic dXNlcjpwYXNz"])),
            None,
            "two Authorization lines"
        );
    }

    #[test]
    fn challenge_quotes_the_realm() {
        assert_eq!(
            challenge("Staff only").unwrap(),
            "Basic realm=\"Staff only\", charset=\"UTF-8\""
        );
        assert_eq!(
            challenge("a\"b\\c").unwrap(),
            "Basic realm=\"a\\\"b\\\\c\", charset=\"UTF-8\""
        );
        assert!(challenge("line\nbreak").unwrap_err().starts_with("realm: "));
        assert!(challenge("Büro").is_err());
    }
}

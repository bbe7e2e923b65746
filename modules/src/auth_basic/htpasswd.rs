//! htpasswd files (Apache `htpasswd`, lighttpd `auth.backend = "htpasswd"`,
//! nginx `auth_basic_user_file`, Cherokee's htpasswd validator): one
//! `user:hash` per line, and the password hashes they may hold.
//!
//! Recognised hashes, by prefix:
//!
//! | prefix | scheme | made by |
//! |---|---|---|
//! | `$2y$`, `$2b$`, `$2a$` | bcrypt | `htpasswd -B` |
//! | `$5$`, `$6$` | SHA-256-crypt, SHA-512-crypt (`rounds=N$` optional) | `mkpasswd -m sha-512`, `openssl passwd -5/-6` |
//! | `$apr1$`, `$1$` | MD5-crypt (Apache's and the FreeBSD/glibc magic) | `htpasswd -m`, `openssl passwd -apr1` |
//! | `{PLAIN}` | plain text (nginx's RFC 2307 scheme) | by hand |
//!
//! Any other `$id$` or `{SCHEME}` prefix (`$y$` yescrypt, `$argon2id$`, `{SHA}`,
//! `{SSHA}`) is refused. An entry without a prefix is plain text, which is only
//! accepted with `allow-plain = true`; legacy DES `crypt()` hashes (13
//! characters, no prefix) are therefore not supported.

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::md5_crypt;

/// A password hash from one htpasswd line, parsed and checked for form when the
/// file is loaded, so that verifying never meets a malformed hash.
#[derive(Debug, Clone)]
pub enum PasswordHash {
    /// bcrypt, the whole `$2y$NN$<22 salt><31 hash>` string (60 bytes).
    Bcrypt(Box<str>),
    /// SHA-crypt (Ulrich Drepper's spec): `sha512` false for `$5$`, true for `$6$`.
    ShaCrypt {
        /// `$6$` (SHA-512) rather than `$5$` (SHA-256).
        sha512: bool,
        /// Rounds, clamped to 1000..=999_999_999 as the spec says; default 5000.
        rounds: u32,
        /// The salt, at most 16 bytes are used.
        salt: Box<str>,
        /// The encoded checksum (43 characters for SHA-256, 86 for SHA-512).
        checksum: Box<str>,
    },
    /// MD5-crypt: `$apr1$` (apr1 true) or `$1$`.
    Md5Crypt {
        /// `$apr1$` rather than `$1$`.
        apr1: bool,
        /// The salt, at most 8 bytes.
        salt: Box<str>,
        /// The 22-character encoded checksum.
        checksum: Box<str>,
    },
    /// Plain text (only with `allow-plain`): the SHA-256 of the password, so that
    /// the comparison takes the same time whatever the lengths.
    Plain([u8; 32]),
}

/// Why a password hash was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// A scheme Tessera does not implement (`$y$`, `{SHA}`, ...).
    #[error("unsupported password hash scheme \"{0}\" (use bcrypt: htpasswd -B)")]
    Unsupported(String),
    /// A known scheme whose string is malformed.
    #[error("malformed {0} hash")]
    Malformed(&'static str),
    /// Plain text while `allow-plain` is false.
    #[error("plain-text password (or a legacy DES crypt hash); set allow-plain = true to accept plain text, or use bcrypt (htpasswd -B)")]
    PlainRefused,
}

impl PasswordHash {
    /// Parses the hash field of an htpasswd line.
    ///
    /// # Errors
    /// [`HashError`]: unsupported scheme, malformed hash, or plain text without
    /// `allow_plain`.
    pub fn parse(s: &str, allow_plain: bool) -> Result<PasswordHash, HashError> {
        if let Some(rest) = s.strip_prefix("{PLAIN}") {
            return Self::plain(rest, allow_plain);
        }
        if s.starts_with('{') {
            let scheme = s.find('}').map_or(s, |i| &s[..=i]);
            return Err(HashError::Unsupported(scheme.chars().take(20).collect()));
        }
        if !s.starts_with('$') {
            return Self::plain(s, allow_plain);
        }
        let id = s[1..].split('$').next().unwrap_or("");
        match id {
            "2y" | "2b" | "2a" => parse_bcrypt(s),
            "5" | "6" => parse_sha_crypt(s, id == "6"),
            "apr1" | "1" => parse_md5_crypt(s, id == "apr1"),
            _ => Err(HashError::Unsupported(
                format!("${id}$").chars().take(20).collect(),
            )),
        }
    }

    fn plain(s: &str, allow_plain: bool) -> Result<PasswordHash, HashError> {
        if !allow_plain {
            return Err(HashError::PlainRefused);
        }
        Ok(PasswordHash::Plain(Sha256::digest(s.as_bytes()).into()))
    }

    /// The scheme's name, for logs and `tessera -t`.
    pub fn scheme(&self) -> &'static str {
        match self {
            PasswordHash::Bcrypt(_) => "bcrypt",
            PasswordHash::ShaCrypt { sha512: false, .. } => "sha256-crypt",
            PasswordHash::ShaCrypt { sha512: true, .. } => "sha512-crypt",
            PasswordHash::Md5Crypt { apr1: true, .. } => "apr1",
            PasswordHash::Md5Crypt { apr1: false, .. } => "md5-crypt",
            PasswordHash::Plain(_) => "plain",
        }
    }

    /// True when `password` matches. The final comparison is constant-time
    /// (subtle's `ct_eq`; bcrypt's own comparison is constant-time too). bcrypt
    /// truncates passwords to 72 bytes, as Apache's htpasswd does.
    pub fn verify(&self, password: &[u8]) -> bool {
        match self {
            PasswordHash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
            PasswordHash::ShaCrypt {
                sha512,
                rounds,
                salt,
                checksum,
            } => {
                let rounds = *rounds as usize;
                let computed = if *sha512 {
                    sha_crypt::Sha512Params::new(rounds)
                        .and_then(|p| sha_crypt::sha512_crypt_b64(password, salt.as_bytes(), &p))
                } else {
                    sha_crypt::Sha256Params::new(rounds)
                        .and_then(|p| sha_crypt::sha256_crypt_b64(password, salt.as_bytes(), &p))
                };
                computed.is_ok_and(|c| c.as_bytes().ct_eq(checksum.as_bytes()).into())
            }
            PasswordHash::Md5Crypt {
                apr1,
                salt,
                checksum,
            } => {
                let magic: &[u8] = if *apr1 { b"$apr1$" } else { b"$1$" };
                let c = md5_crypt::checksum(password, salt.as_bytes(), magic);
                c.as_bytes().ct_eq(checksum.as_bytes()).into()
            }
            PasswordHash::Plain(digest) => {
                let d: [u8; 32] = Sha256::digest(password).into();
                d.ct_eq(digest).into()
            }
        }
    }
}

/// `$2y$NN$` + 53 characters of bcrypt's base-64 alphabet (the same as crypt's,
/// in another order); cost 4..=31.
fn parse_bcrypt(s: &str) -> Result<PasswordHash, HashError> {
    let bad = HashError::Malformed("bcrypt");
    let parts: Vec<&str> = s.split('$').collect();
    if parts.len() != 4 || !parts[0].is_empty() {
        return Err(bad);
    }
    let cost: u32 = match parts[2] {
        c if c.len() == 2 && c.bytes().all(|b| b.is_ascii_digit()) => {
            c.parse().map_err(|_| bad.clone())?
        }
        _ => return Err(bad),
    };
    if !(4..=31).contains(&cost) || parts[3].len() != 53 || !md5_crypt::is_crypt64(parts[3]) {
        return Err(bad);
    }
    Ok(PasswordHash::Bcrypt(s.into()))
}

/// `$5$[rounds=N$]salt$checksum` (and `$6$`).
fn parse_sha_crypt(s: &str, sha512: bool) -> Result<PasswordHash, HashError> {
    let name = if sha512 {
        "sha512-crypt"
    } else {
        "sha256-crypt"
    };
    let bad = HashError::Malformed(name);
    let mut parts = s.split('$').skip(2);
    let mut next = parts.next().ok_or(bad.clone())?;
    let mut rounds = 5000u32;
    if let Some(r) = next.strip_prefix("rounds=") {
        if r.is_empty() || r.len() > 10 || !r.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad);
        }
        let n: u64 = r.parse().map_err(|_| bad.clone())?;
        rounds = n.clamp(1000, 999_999_999) as u32;
        next = parts.next().ok_or(bad.clone())?;
    }
    let salt = next;
    let checksum = parts.next().ok_or(bad.clone())?;
    let want = if sha512 { 86 } else { 43 };
    if parts.next().is_some()
        || salt.contains(':')
        || checksum.len() != want
        || !md5_crypt::is_crypt64(checksum)
    {
        return Err(bad);
    }
    // crypt uses at most 16 bytes of salt (cut at a character boundary).
    let mut end = salt.len().min(16);
    while !salt.is_char_boundary(end) {
        end -= 1;
    }
    Ok(PasswordHash::ShaCrypt {
        sha512,
        rounds,
        salt: salt[..end].into(),
        checksum: checksum.into(),
    })
}

/// `$apr1$salt$checksum` (and `$1$`).
fn parse_md5_crypt(s: &str, apr1: bool) -> Result<PasswordHash, HashError> {
    let bad = HashError::Malformed(if apr1 { "apr1" } else { "md5-crypt" });
    let parts: Vec<&str> = s.split('$').collect();
    if parts.len() != 4
        || parts[3].len() != md5_crypt::CHECKSUM_LEN
        || !md5_crypt::is_crypt64(parts[3])
    {
        return Err(bad);
    }
    Ok(PasswordHash::Md5Crypt {
        apr1,
        salt: parts[2].into(),
        checksum: parts[3].into(),
    })
}

/// One user's entry: the parsed hash and the hash string as written (used to
/// tell whether a cached verification still applies).
#[derive(Debug)]
pub struct Entry {
    /// The parsed hash.
    pub hash: PasswordHash,
    /// The field as it appeared in the file.
    pub raw: Arc<str>,
}

/// The users of one htpasswd file.
#[derive(Debug, Default)]
pub struct Table {
    users: HashMap<Box<str>, Entry>,
}

/// Why an htpasswd file was refused: the 1-based line and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it (names the user when there is one).
    pub reason: String,
}

impl Table {
    /// Parses an htpasswd file. Blank lines and lines starting with `#` are
    /// skipped; a trailing `\r` is ignored. A line is `user:hash`; for hashed
    /// entries a further `:field` is ignored (as Apache does), plain-text
    /// entries take the rest of the line. When a user appears twice, the first
    /// line wins (Apache's and lighttpd's lookup order).
    ///
    /// # Errors
    /// [`ParseError`] for the first bad line: no colon, an empty user name, a
    /// user name with control characters, or a refused hash ([`HashError`]).
    pub fn parse(text: &str, allow_plain: bool) -> Result<Table, ParseError> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |reason: String| ParseError {
                line: i + 1,
                reason,
            };
            let Some((user, rest)) = line.split_once(':') else {
                return Err(err("no ':' between user name and password hash".into()));
            };
            if user.is_empty() {
                return Err(err("empty user name".into()));
            }
            if user.chars().any(char::is_control) {
                return Err(err("control character in the user name".into()));
            }
            let field = if rest.starts_with('$') {
                rest.split(':').next().unwrap_or(rest)
            } else {
                rest
            };
            let hash = PasswordHash::parse(field, allow_plain)
                .map_err(|e| err(format!("user {user:?}: {e}")))?;
            users.entry(user.into()).or_insert(Entry {
                hash,
                raw: field.into(),
            });
        }
        Ok(Table { users })
    }

    /// The entry of `user` (exact, case-sensitive match).
    pub fn get(&self, user: &str) -> Option<&Entry> {
        self.users.get(user)
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// True when the file names no user.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // openssl passwd -apr1 / -5 / -6 -salt saltsalt secret
    const APR1: &str = "$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0";
    const SHA256: &str = "$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA";
    const SHA512: &str = "$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq.H91p5hVO1";
    // openssl passwd -5 / -6 -salt 'rounds=1000$abc' x
    const SHA256_R: &str = "$5$rounds=1000$abc$UxKib5kobt2BZp/yfOEWbjik.BPMiS9MzbXyO6zXMC0";
    const SHA512_R: &str = "$6$rounds=1000$abc$zaWpAwySRl8PX4W2aEMJwxpN82bCKtDZP0RBdOD6W7BQlilBqAsWnAZuS10iUyJZneS8Ob1gxs1BZkqJi1nTi.";
    // openssl passwd -5 -salt abcdefghijklmnopqrst x (salt cut to 16)
    const SHA256_LONG_SALT: &str =
        "$5$abcdefghijklmnopqrst$fiUnwzJyCDn7Dx53oezcP81DtfKy73q.P999JrS8fsB";

    fn ok(h: &str, pw: &str) -> bool {
        PasswordHash::parse(h, false).unwrap().verify(pw.as_bytes())
    }

    #[test]
    fn crypt_vectors() {
        for h in [APR1, SHA256, SHA512] {
            assert!(ok(h, "secret"), "{h}");
            assert!(!ok(h, "Secret"), "{h}");
            assert!(!ok(h, ""), "{h}");
            assert!(!ok(h, "secret\0"), "{h}");
        }
        assert!(ok(SHA256_R, "x") && ok(SHA512_R, "x"));
        assert!(!ok(SHA256_R, "y"));
        assert!(ok(SHA256_LONG_SALT, "x"));
        assert!(ok("$1$saltsalt$9xy1btjgzLYfb7hivXtC//", "secret"));
    }

    #[test]
    fn bcrypt_variants() {
        let h = bcrypt::hash("pw", 4).unwrap();
        for prefix in ["$2y$", "$2b$", "$2a$"] {
            let v = format!("{prefix}{}", &h[4..]);
            let p = PasswordHash::parse(&v, false).unwrap();
            assert_eq!(p.scheme(), "bcrypt");
            assert!(p.verify(b"pw"), "{v}");
            assert!(!p.verify(b"pW"), "{v}");
        }
        assert_eq!(
            PasswordHash::parse(&format!("$2x${}", &h[4..]), false).unwrap_err(),
            HashError::Unsupported("$2x$".into())
        );
        assert!(PasswordHash::parse("$2y$04$short", false).is_err());
        assert!(PasswordHash::parse(&format!("$2y$99${}", &h[7..]), false).is_err());
    }

    #[test]
    fn malformed_and_unsupported() {
        for bad in [
            "$5$",
            "$5$salt",
            "$5$rounds=$salt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA",
            "$5$rounds=x$salt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA",
            "$5$saltsalt$tooshort",
            "$6$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA",
            "$apr1$saltsalt$short",
            "$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0$extra",
            "$apr1$saltsalt$LrttParrLPdxvgutaSX!J0",
        ] {
            assert!(
                matches!(PasswordHash::parse(bad, true), Err(HashError::Malformed(_))),
                "{bad}"
            );
        }
        for (bad, scheme) in [
            ("$y$j9T$abc$def", "$y$"),
            ("$argon2id$v=19$m=1$x$y", "$argon2id$"),
            ("{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=", "{SHA}"),
            ("{SSHA}abc", "{SSHA}"),
        ] {
            assert_eq!(
                PasswordHash::parse(bad, true).unwrap_err(),
                HashError::Unsupported(scheme.into())
            );
        }
        // huge rounds are clamped, never overflow
        let h = PasswordHash::parse(
            "$5$rounds=99999999999$abc$UxKib5kobt2BZp/yfOEWbjik.BPMiS9MzbXyO6zXMC0",
            false,
        );
        assert!(h.is_err(), "more than 10 digits is malformed");
        let h = PasswordHash::parse(
            "$5$rounds=10$abc$UxKib5kobt2BZp/yfOEWbjik.BPMiS9MzbXyO6zXMC0",
            false,
        )
        .unwrap();
        assert!(h.verify(b"x"), "rounds below 1000 count as 1000");
    }

    #[test]
    fn plain_text_needs_allow_plain() {
        assert_eq!(
            PasswordHash::parse("secret", false).unwrap_err(),
            HashError::PlainRefused
        );
        assert_eq!(
            PasswordHash::parse("{PLAIN}secret", false).unwrap_err(),
            HashError::PlainRefused
        );
        for h in ["secret", "{PLAIN}secret"] {
            let p = PasswordHash::parse(h, true).unwrap();
            assert_eq!(p.scheme(), "plain");
            assert!(p.verify(b"secret"));
            assert!(!p.verify(b"secre"));
            assert!(!p.verify(b"secrett"));
        }
    }

    #[test]
    fn file_format() {
        let text = format!(
            "# comment\n\nalice:{APR1}\r\nbob:{SHA512}:extra field\ncarol:{{PLAIN}}pa:ss\nalice:{SHA256_R}\n"
        );
        assert!(Table::parse(&text, false).is_err());
        let t = Table::parse(&text, true).unwrap();
        assert_eq!(t.len(), 3);
        assert!(
            t.get("alice").unwrap().hash.verify(b"secret"),
            "first line wins"
        );
        assert_eq!(&*t.get("alice").unwrap().raw, APR1);
        assert!(t.get("bob").unwrap().hash.verify(b"secret"));
        assert!(t.get("carol").unwrap().hash.verify(b"pa:ss"));
        assert!(t.get("Alice").is_none());
        assert!(Table::parse("", false).unwrap().is_empty());
    }

    #[test]
    fn file_errors_name_the_line() {
        let e = Table::parse(&format!("alice:{APR1}\nbob\n"), false).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("line 2: no ':'"), "{e}");
        let e = Table::parse(":x\n", true).unwrap_err();
        assert_eq!(e.to_string(), "line 1: empty user name");
        let e = Table::parse("al\u{1}ice:{PLAIN}x\n", true).unwrap_err();
        assert!(e.reason.contains("control"), "{e}");
        let e = Table::parse(&format!("a:{APR1}\nbob:plain\n"), false).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 2: user \"bob\": plain-text"),
            "{e}"
        );
    }
}

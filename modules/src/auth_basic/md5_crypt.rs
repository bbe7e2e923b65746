//! MD5-crypt: Apache's `$apr1$` (htpasswd -m, the default before Apache 2.4)
//! and the FreeBSD/glibc `$1$` form, which differ only in the magic string
//! (Poul-Henning Kamp's algorithm; 1000 rounds of MD5 over password and salt).
//!
//! MD5-crypt is weak by today's standards; it is supported because existing
//! htpasswd files use it (lighttpd, nginx and Cherokee accept it too).

use md5::{Digest, Md5};

/// The alphabet of crypt's base-64 encoding (not RFC 4648's).
const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Longest salt MD5-crypt uses, in bytes; a longer salt is cut.
pub const MAX_SALT: usize = 8;

/// Length of the encoded checksum after the salt: 22 characters.
pub const CHECKSUM_LEN: usize = 22;

fn to64(out: &mut Vec<u8>, mut v: u32, n: usize) {
    for _ in 0..n {
        out.push(ITOA64[(v & 0x3f) as usize]);
        v >>= 6;
    }
}

/// The 22-character checksum of `password` with `salt` (at most [`MAX_SALT`]
/// bytes are used) and `magic` (`b"$apr1$"` or `b"$1$"`), as it appears after
/// `$apr1$<salt>$` in an htpasswd line.
///
/// ```
/// # use tessera_modules::auth_basic::md5_crypt::checksum;
/// // openssl passwd -apr1 -salt saltsalt secret
/// assert_eq!(checksum(b"secret", b"saltsalt", b"$apr1$"), "LrttParrLPdxvgutaSXWJ0");
/// ```
pub fn checksum(password: &[u8], salt: &[u8], magic: &[u8]) -> String {
    let salt = &salt[..salt.len().min(MAX_SALT)];
    let mut alt = Md5::new();
    alt.update(password);
    alt.update(salt);
    alt.update(password);
    let alt = alt.finalize();

    let mut ctx = Md5::new();
    ctx.update(password);
    ctx.update(magic);
    ctx.update(salt);
    let mut left = password.len();
    while left > 0 {
        let n = left.min(16);
        ctx.update(&alt[..n]);
        left -= n;
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(&password[..1]);
        }
        i >>= 1;
    }
    let mut fin = ctx.finalize();

    for i in 0..1000 {
        let mut c = Md5::new();
        if i & 1 == 1 {
            c.update(password);
        } else {
            c.update(fin);
        }
        if i % 3 != 0 {
            c.update(salt);
        }
        if i % 7 != 0 {
            c.update(password);
        }
        if i & 1 == 1 {
            c.update(fin);
        } else {
            c.update(password);
        }
        fin = c.finalize();
    }

    let f = |i: usize| u32::from(fin[i]);
    let mut out = Vec::with_capacity(CHECKSUM_LEN);
    to64(&mut out, (f(0) << 16) | (f(6) << 8) | f(12), 4);
    to64(&mut out, (f(1) << 16) | (f(7) << 8) | f(13), 4);
    to64(&mut out, (f(2) << 16) | (f(8) << 8) | f(14), 4);
    to64(&mut out, (f(3) << 16) | (f(9) << 8) | f(15), 4);
    to64(&mut out, (f(4) << 16) | (f(10) << 8) | f(5), 4);
    to64(&mut out, f(11), 2);
    String::from_utf8(out).expect("ITOA64 is ASCII")
}

/// True when `s` uses only crypt's base-64 alphabet.
pub fn is_crypt64(s: &str) -> bool {
    s.bytes().all(|b| ITOA64.contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_vectors() {
        // openssl passwd -apr1 -salt saltsalt secret
        assert_eq!(
            checksum(b"secret", b"saltsalt", b"$apr1$"),
            "LrttParrLPdxvgutaSXWJ0"
        );
        // openssl passwd -1 -salt saltsalt secret
        assert_eq!(
            checksum(b"secret", b"saltsalt", b"$1$"),
            "9xy1btjgzLYfb7hivXtC//"
        );
        // openssl passwd -apr1 -salt 'x/y.z' 'pä ss:word' (UTF-8, a colon, short salt)
        assert_eq!(
            checksum("pä ss:word".as_bytes(), b"x/y.z", b"$apr1$"),
            "IVagsl38.z.JMtBYJRnm31"
        );
    }

    #[test]
    fn long_salt_is_cut_and_empty_password_works() {
        assert_eq!(
            checksum(b"secret", b"saltsaltEXTRA", b"$apr1$"),
            checksum(b"secret", b"saltsalt", b"$apr1$")
        );
        // openssl passwd -apr1 -salt abc ''
        let c = checksum(b"", b"abc", b"$apr1$");
        assert_eq!(c, "BfqKdn9xFDWJPa3kcp/PH0");
        assert!(is_crypt64(&c));
    }
}

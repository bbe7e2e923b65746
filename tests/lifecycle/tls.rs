//! TLS with SNI, HTTP/2 over TLS, the HTTPS redirect and a renewed certificate.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use crate::util::TempDir;

use super::*;

/// Writes a self-signed certificate for `names` (first is the CN) into `dir`.
fn cert(dir: &Path, stem: &str, names: &[&str]) -> (String, String) {
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, names[0]);
    let key = rcgen::KeyPair::generate().unwrap();
    let c = params.self_signed(&key).unwrap();
    let (cp, kp) = (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&cp, c.pem()).unwrap();
    std::fs::write(&kp, key.serialize_pem()).unwrap();
    (cp.display().to_string(), kp.display().to_string())
}

/// The subject CN of the certificate served for `sni`.
fn served_cn(addr: SocketAddr, sni: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} -servername {sni} </dev/null 2>/dev/null | openssl x509 -noout -subject"
        ))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn tls_server(d: &TempDir) -> (String, KillOnDrop, SocketAddr, SocketAddr) {
    let dir = d.path();
    let (ac, ak) = cert(dir, "a", &["a.test"]);
    let (bc, bk) = cert(dir, "b", &["b.test", "*.b.test"]);
    let (dc, dk) = cert(dir, "default", &["default.test"]);
    d.write("a/index.html", "A");
    d.write("b/index.html", "B");
    let conf = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nlisten-tls = [\"127.0.0.1:0\"]\n[server.tls]\ncertificate = \"{dc}\"\nkey = \"{dk}\"\n\n\
         [[vhost]]\nserver-names = [\"a.test\"]\ndefault = true\ndocument-root = \"a\"\nmodules = [\"static-file\"]\ntls-certificate = \"{ac}\"\ntls-key = \"{ak}\"\n\n\
         [[vhost]]\nserver-names = [\"b.test\", \"*.b.test\"]\ndocument-root = \"b\"\nmodules = [\"static-file\"]\ntls-certificate = \"{bc}\"\ntls-key = \"{bk}\"\nhttps-redirect = true\n"
    );
    let f = d.write("server.toml", &conf);
    let mut child = Command::new(crate::util::bin())
        .arg("-c")
        .arg(&f)
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(dir.join("err.txt")).unwrap())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let child = KillOnDrop(child);
    let (mut plain, mut tls) = (None, None);
    for _ in 0..2 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let l = line.trim();
        if let Some(a) = l.strip_prefix("tessera: listening on https://") {
            tls = Some(a.parse().unwrap());
        } else if let Some(a) = l.strip_prefix("tessera: listening on http://") {
            plain = Some(a.parse().unwrap());
        }
    }
    let err = std::fs::read_to_string(dir.join("err.txt")).unwrap_or_default();
    (
        conf,
        child,
        plain.unwrap_or_else(|| panic!("plain listener: {err}")),
        tls.unwrap_or_else(|| panic!("TLS listener: {err}")),
    )
}

fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "10"])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn tls_sni_http2_redirect_and_renewed_certificate() {
    let d = TempDir::new("tls");
    let (_conf, child, plain, tls) = tls_server(&d);
    let port = tls.port();
    assert_eq!(served_cn(tls, "a.test"), "subject=CN = a.test");
    assert_eq!(served_cn(tls, "x.b.test"), "subject=CN = b.test");
    assert_eq!(served_cn(tls, "unknown.test"), "subject=CN = default.test");
    // HTTP/2 by ALPN, and the vhost chosen by :authority
    let v = curl(&[
        "--http2",
        "--resolve",
        &format!("b.test:{port}:127.0.0.1"),
        "-w",
        " %{http_version}",
        &format!("https://b.test:{port}/"),
    ]);
    assert_eq!(v, "B 2");
    let v = curl(&[
        "--http1.1",
        "--resolve",
        &format!("a.test:{port}:127.0.0.1"),
        "-w",
        " %{http_version}",
        &format!("https://a.test:{port}/"),
    ]);
    assert_eq!(v, "A 1.1");
    // Plain HTTP to b.test is redirected to https with host, path and query.
    let loc = curl(&[
        "-o",
        "/dev/null",
        "-H",
        "Host: b.test",
        "-w",
        "%{http_code} %{redirect_url}",
        &format!("http://{plain}/x/y?q=1"),
    ]);
    assert_eq!(loc, format!("301 https://b.test:{port}/x/y?q=1"));
    // a.test has no redirect
    assert_eq!(
        curl(&["-H", "Host: a.test", &format!("http://{plain}/")]),
        "A"
    );
    // Renew a.test's certificate and reload: new handshakes get the new one.
    cert(d.path(), "a", &["a.test", "renewed.a.test"]);
    let before = served_cn(tls, "a.test");
    let fp = |sni: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("openssl s_client -connect {tls} -servername {sni} </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let old_fp = fp("a.test");
    assert!(Command::new("kill")
        .arg("-HUP")
        .arg(child.0.id().to_string())
        .status()
        .unwrap()
        .success());
    let mut changed = false;
    for _ in 0..200 {
        if fp("a.test") != old_fp {
            changed = true;
            break;
        }
    }
    drop(child);
    assert_eq!(before, "subject=CN = a.test");
    assert!(
        changed,
        "renewed certificate not served: {}",
        std::fs::read_to_string(d.path().join("err.txt")).unwrap_or_default()
    );
}

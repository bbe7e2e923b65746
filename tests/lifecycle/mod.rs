//! Running it in production: reload (SIGHUP) under load, a broken reload, log
//! rotation (SIGUSR1), graceful shutdown, the pid file, limits and timeouts,
//! running out of descriptors, TLS with SNI and HTTP/2, the HTTPS redirect, and
//! the `status` module.

mod http2;
mod limits;
mod reload;
mod timeouts;
mod tls;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Command;

use crate::util::TempDir;

/// Spawns the prepared server command with stdout piped and returns it with
/// the address it printed (`tessera: listening on http://ADDR`).
fn spawn_listening(cmd: &mut Command) -> (std::process::Child, SocketAddr) {
    let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("//").next().unwrap().parse().unwrap();
    (child, addr)
}

fn site(extra_server: &str, vhost_extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 2\n{extra_server}\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\n{vhost_extra}\n"
    )
}

/// Kills the server when the test ends, also when an assertion fails.
pub(crate) struct KillOnDrop(std::process::Child);

impl KillOnDrop {
    /// Sends SIGTERM (a graceful stop) and waits for the exit.
    pub(crate) fn terminate(&mut self) -> std::process::ExitStatus {
        crate::util::terminate(&mut self.0)
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TLS server with one vhost `h2.test` (and `[server]` lines `extra`),
/// serving `ten.txt` and a 64 MiB `big.bin`; returns the server, its TLS
/// address and the certificate's DER.
fn h2_server(d: &TempDir, extra: &str) -> (KillOnDrop, SocketAddr, Vec<u8>) {
    h2_server_with(d, extra, "", "modules = [\"static-file\"]")
}

/// [`h2_server`] with `tables` (such as `[[plugin]]`) before the vhost and
/// `vhost` (its `modules` line and module tables) at the vhost's end.
pub(crate) fn h2_server_with(
    d: &TempDir,
    extra: &str,
    tables: &str,
    vhost: &str,
) -> (KillOnDrop, SocketAddr, Vec<u8>) {
    let mut params = rcgen::CertificateParams::new(vec!["h2.test".to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "h2.test");
    let key = rcgen::KeyPair::generate().unwrap();
    let c = params.self_signed(&key).unwrap();
    let cp = d.write("h2.pem", c.pem());
    let kp = d.write("h2.key", key.serialize_pem());
    d.write("www/ten.txt", "0123456789");
    std::fs::File::create(d.path().join("www/big.bin"))
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let conf = format!(
        "[server]\nlisten-tls = [\"127.0.0.1:0\"]\nlisten = []\nworkers = 1\n{extra}\n\n{tables}\n\
         [[vhost]]\nserver-names = [\"h2.test\"]\ndefault = true\ndocument-root = \"www\"\n\
         tls-certificate = \"{}\"\ntls-key = \"{}\"\n{vhost}\n",
        cp.display(),
        kp.display()
    );
    let f = d.write("server.toml", &conf);
    let mut child = Command::new(crate::util::bin())
        .arg("-c")
        .arg(&f)
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(d.path().join("err.txt")).unwrap())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let child = KillOnDrop(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let tls = line
        .trim()
        .strip_prefix("tessera: listening on https://")
        .unwrap_or_else(|| {
            panic!(
                "no TLS listener: {line:?} {}",
                std::fs::read_to_string(d.path().join("err.txt")).unwrap_or_default()
            )
        })
        .parse()
        .unwrap();
    (child, tls, c.der().to_vec())
}

pub(crate) type H2Conn =
    h2::client::Connection<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, bytes::Bytes>;

/// An HTTP/2 connection (ALPN h2) to `addr` trusting `der`; `window` is the
/// stream flow-control window the client grants (0 stalls every response).
pub(crate) async fn h2_connect(
    addr: SocketAddr,
    der: &[u8],
    window: u32,
) -> (h2::client::SendRequest<bytes::Bytes>, H2Conn) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.to_vec().into()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
        .connect("h2.test".try_into().unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    h2::client::Builder::new()
        .initial_window_size(window)
        .handshake(tls)
        .await
        .unwrap()
}

pub(crate) fn h2_get(path: &str) -> http::Request<()> {
    http::Request::get(format!("https://h2.test{path}"))
        .body(())
        .unwrap()
}

pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

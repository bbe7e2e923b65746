//! TLS with rustls: certificates per vhost chosen by SNI, a default certificate,
//! TLS 1.2 and 1.3 only, ALPN `h2` and `http/1.1` (added by actix-http).
//!
//! The resolver behind every TLS listener reads its certificate table through an
//! `ArcSwap`, so a configuration reload (SIGHUP) installs renewed certificates
//! for new handshakes without rebinding.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// A certificate chain and key in PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// PEM certificate chain, leaf first.
    pub certificate: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Loads and checks a certificate and key.
///
/// # Errors
/// A readable one-line reason: unreadable file, no certificate, no or
/// unsupported key, key not matching the certificate.
pub fn load_cert(files: &CertFiles) -> Result<Arc<CertifiedKey>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.certificate)
        .map_err(|e| format!("{}: {e}", files.certificate.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", files.certificate.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no certificate in the file",
            files.certificate.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("{}: {e}", files.key.display()))?;
    let provider = rustls::crypto::ring::default_provider();
    let ck = CertifiedKey::from_der(certs, key, &provider)
        .map_err(|e| format!("{}: {e}", files.key.display()))?;
    Ok(Arc::new(ck))
}

/// Certificates by server name, built from the configuration.
#[derive(Default, Debug)]
pub struct CertTable {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// (suffix with leading dot, cert), longest first.
    wildcard: Vec<(String, Arc<CertifiedKey>)>,
    default: Option<Arc<CertifiedKey>>,
}

impl CertTable {
    /// Adds a certificate for these vhost names (`*.x` and `.x` are wildcards;
    /// `~regex` names cannot be used for SNI and are skipped).
    pub fn add(&mut self, names: &[String], cert: Arc<CertifiedKey>) {
        for n in names {
            if let Some(s) = n.strip_prefix('*') {
                self.wildcard.push((s.to_owned(), cert.clone()));
            } else if let Some(base) = n.strip_prefix('.') {
                self.exact
                    .entry(base.to_owned())
                    .or_insert_with(|| cert.clone());
                self.wildcard.push((n.clone(), cert.clone()));
            } else if !n.starts_with('~') {
                self.exact.insert(n.clone(), cert.clone());
            }
        }
        self.wildcard.sort_by_key(|w| std::cmp::Reverse(w.0.len()));
    }

    /// Sets the certificate for names no vhost claims (and clients without SNI).
    pub fn set_default(&mut self, cert: Arc<CertifiedKey>) {
        self.default = Some(cert);
    }

    /// True when there is a default certificate.
    pub fn has_default(&self) -> bool {
        self.default.is_some()
    }

    fn pick(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        if let Some(name) = sni {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if let Some(c) = self.exact.get(&name) {
                return Some(c.clone());
            }
            for (suffix, c) in &self.wildcard {
                if name.len() > suffix.len() && name.ends_with(suffix.as_str()) {
                    return Some(c.clone());
                }
            }
        }
        self.default.clone()
    }
}

/// The SNI resolver shared by every TLS listener; [`SniResolver::replace`]
/// installs a new table (at reload).
#[derive(Debug, Default)]
pub struct SniResolver {
    table: ArcSwap<CertTable>,
}

impl SniResolver {
    /// A resolver serving `table`.
    pub fn new(table: Arc<CertTable>) -> Self {
        SniResolver {
            table: ArcSwap::new(table),
        }
    }

    /// Installs a new certificate table for later handshakes.
    pub fn replace(&self, table: Arc<CertTable>) {
        self.table.store(table);
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.table.load().pick(hello.server_name())
    }
}

/// A rustls server configuration: TLS 1.2 and 1.3, no client certificates,
/// certificates from `resolver`.
pub fn server_config(resolver: Arc<SniResolver>) -> rustls::ServerConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring supports TLS 1.2 and 1.3")
        .with_no_client_auth()
        .with_cert_resolver(resolver)
}

/// Resolves `p` against `dir` unless absolute.
pub fn resolve_path(dir: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        dir.join(p)
    }
}

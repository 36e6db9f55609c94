//! TLS for the web view (`convoy serve --http-tls CERT KEY`): rustls with
//! a PEM certificate chain and private key, offering HTTP/2 and HTTP/1.1
//! by ALPN.
//!
//! The identity is read again on [`Certificate::reload`] (SIGHUP), so a
//! renewed certificate (certbot, an ACME client) is served to every new
//! connection without a restart; connections already open keep theirs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// ALPN names, best first: a browser or curl that speaks HTTP/2 gets it.
pub const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// The web view's TLS identity, read from its two files, and replaceable.
#[derive(Debug)]
pub struct Certificate {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl Certificate {
    /// Reads both files; an error names the file and what is wrong.
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<Certificate>, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let current = read(cert, key, &provider)?;
        Ok(Arc::new(Certificate {
            cert: cert.to_owned(),
            key: key.to_owned(),
            provider,
            current: RwLock::new(Arc::new(current)),
        }))
    }

    /// Reads the files again; on an error the identity in use stays.
    /// Returns the new leaf certificate's size in bytes (for the log).
    pub fn reload(&self) -> Result<usize, String> {
        let fresh = read(&self.cert, &self.key, &self.provider)?;
        let size = fresh.cert[0].len();
        *self
            .current
            .write()
            .map_err(|_| "certificate lock poisoned")? = Arc::new(fresh);
        Ok(size)
    }

    /// The files it is read from.
    pub fn paths(&self) -> (&Path, &Path) {
        (&self.cert, &self.key)
    }
}

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.clone())
    }
}

/// A PEM chain (leaf first) and a PEM private key (PKCS#8, PKCS#1 or
/// SEC1) that belong together.
fn read(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("{}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{}: no PEM certificate in it", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    CertifiedKey::from_der(chain, key, provider)
        .map_err(|e| format!("the certificate and key do not make a TLS identity: {e}"))
}

/// A rustls server configuration that asks `identity` for its
/// certificate on every handshake.
pub fn server_config(identity: Arc<Certificate>) -> Result<Arc<rustls::ServerConfig>, String> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(identity.provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(identity);
    cfg.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()];
    Ok(Arc::new(cfg))
}

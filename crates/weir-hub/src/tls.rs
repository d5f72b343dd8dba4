//! TLS for the Hub's listener: a certificate chain and its private key from PEM files, served
//! with rustls (TLS 1.2 and 1.3, ring's cryptography).

use crate::error::{HubError, Result};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// The TLS side of the Hub's listener, built from PEM files.
#[derive(Clone)]
pub struct HubTls {
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for HubTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HubTls")
    }
}

fn tls_error(path: &Path, message: impl std::fmt::Display) -> HubError {
    HubError::Io {
        context: format!("TLS: {}", path.display()),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, message.to_string()),
    }
}

impl HubTls {
    /// Serves the certificate chain in `cert` (PEM, the Hub's certificate first) with the
    /// private key in `key` (PEM: PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    /// [`HubError::Io`] naming the file that cannot be read, holds no certificate or key, or
    /// whose key does not match the certificate.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<HubTls> {
        let chain = CertificateDer::pem_file_iter(cert)
            .map_err(|e| tls_error(cert, e))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| tls_error(cert, e))?;
        if chain.is_empty() {
            return Err(tls_error(cert, "no PEM certificate in it"));
        }
        let private = PrivateKeyDer::from_pem_file(key).map_err(|e| tls_error(key, e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error(cert, e))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| tls_error(key, e))?;
        Ok(HubTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// The acceptor that runs the handshake of each connection.
    pub(crate) fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}

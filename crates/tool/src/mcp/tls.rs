//! TLS of a package's Streamable HTTP server: the certificate chain and private key
//! files (PEM) given with `--tls-cert` and `--tls-key`, read once at start into a
//! rustls server configuration with the `ring` provider (the crypto library the
//! connectors already bring, so a packaged binary carries no second one), TLS 1.2 and
//! 1.3, HTTP/1.1 announced by ALPN. A file that cannot be read, or a key that does not
//! fit the certificate, stops the server before it listens.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The flag (after `--mcp-http ADDR`) naming the PEM file of the server's certificate
/// chain, leaf first; it needs [`TLS_KEY_FLAG`].
pub const TLS_CERT_FLAG: &str = "--tls-cert";
/// The flag (after `--mcp-http ADDR`) naming the PEM file of the server's private key
/// (PKCS#8, PKCS#1 or SEC1); it needs [`TLS_CERT_FLAG`].
pub const TLS_KEY_FLAG: &str = "--tls-key";

/// Why the TLS configuration cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The certificate file cannot be read as PEM certificates, or holds none.
    #[error("cannot read the TLS certificate chain {path}: {detail}")]
    Certificate {
        /// The file given with [`TLS_CERT_FLAG`].
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The key file cannot be read as one PEM private key.
    #[error("cannot read the TLS private key {path}: {detail}")]
    Key {
        /// The file given with [`TLS_KEY_FLAG`].
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// rustls refused the pair (the key does not match the certificate, or an
    /// unsupported key type).
    #[error("the TLS certificate and key cannot serve: {0}")]
    Config(#[from] rustls::Error),
}

/// The certificate chain and key files of a TLS server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// The PEM private key.
    pub key: PathBuf,
}

impl TlsFiles {
    /// Reads both files and builds the acceptor of TLS connections.
    pub fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let certificate = |detail: String| TlsError::Certificate {
            path: self.cert.clone(),
            detail,
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .map_err(|e| certificate(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| certificate(e.to_string()))?;
        if chain.is_empty() {
            return Err(certificate("no certificate in it".to_owned()));
        }
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| TlsError::Key {
            path: self.key.clone(),
            detail: e.to_string(),
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_or_empty_files_are_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let missing = TlsFiles {
            cert: dir.path().join("missing.pem"),
            key: empty.clone(),
        };
        let e = missing.acceptor().err().unwrap();
        assert!(matches!(e, TlsError::Certificate { .. }), "{e}");
        assert!(e.to_string().contains("missing.pem"), "{e}");
        let no_cert = TlsFiles {
            cert: empty.clone(),
            key: empty,
        };
        let e = no_cert.acceptor().err().unwrap();
        assert!(e.to_string().contains("no certificate"), "{e}");
    }

    #[test]
    fn a_matching_pair_serves_and_a_key_of_another_certificate_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str| {
            let certified =
                rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
            let cert = dir.path().join(format!("{name}-cert.pem"));
            let key = dir.path().join(format!("{name}-key.pem"));
            std::fs::write(&cert, certified.cert.pem()).unwrap();
            std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
            TlsFiles { cert, key }
        };
        let (one, other) = (write("one"), write("other"));
        assert!(one.acceptor().is_ok());
        let mismatched = TlsFiles {
            cert: one.cert,
            key: other.key,
        };
        let e = mismatched.acceptor().err().unwrap();
        assert!(matches!(e, TlsError::Config(_)), "{e}");
    }
}

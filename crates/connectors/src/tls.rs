//! TLS for the HTTP connectors: rustls with the `ring` provider and the platform's
//! certificate verifier, given to each client whole (no process-wide default provider,
//! no second crypto library in a tool binary). The platform verifier reads the system's
//! root certificates when it is made, which costs a whole call's budget on every process
//! start; here it is made on the first TLS handshake instead, so a process that makes no
//! TLS connection (a plain-HTTP deployment, a call answered locally) never reads them.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_platform_verifier::Verifier;

use crate::ConnectorError;

/// The platform verifier, made on first use; every check is the platform verifier's own.
#[derive(Debug)]
struct LazyPlatformVerifier {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<Arc<Verifier>, rustls::Error>>,
}

impl LazyPlatformVerifier {
    fn new(provider: Arc<CryptoProvider>) -> Self {
        LazyPlatformVerifier {
            provider,
            verifier: OnceLock::new(),
        }
    }

    fn inner(&self) -> Result<&Verifier, rustls::Error> {
        self.verifier
            .get_or_init(|| Verifier::new(self.provider.clone()).map(Arc::new))
            .as_ref()
            .map(|v| v.as_ref())
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyPlatformVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner()?
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        match self.inner() {
            Ok(verifier) => verifier.supported_verify_schemes(),
            // The handshake then fails in `verify_server_cert` with the reason.
            Err(_) => self
                .provider
                .signature_verification_algorithms
                .supported_schemes(),
        }
    }
}

/// The TLS configuration of the HTTP connectors' clients, and its verifier.
fn config() -> Result<(ClientConfig, Arc<LazyPlatformVerifier>), ConnectorError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(LazyPlatformVerifier::new(provider.clone()));
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConnectorError::Config(format!("cannot set up TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    Ok((config, verifier))
}

/// A client builder with this module's TLS. Every client of the connectors starts here:
/// a packaged binary links no process-wide default provider, so a client built from
/// `reqwest::Client::builder()` alone would panic when it is built.
pub(crate) fn client_builder() -> Result<reqwest::ClientBuilder, ConnectorError> {
    let (tls, _) = config()?;
    Ok(reqwest::Client::builder().tls_backend_preconfigured(tls))
}

/// The HTTP client of the HTTP connectors: redirects are never followed; TLS as the
/// module documentation says.
pub(crate) fn http_client() -> Result<reqwest::Client, ConnectorError> {
    client_builder()?
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(ConnectorError::from_reqwest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_certificates_are_read_on_the_first_handshake_only() {
        let (_config, verifier) = config().unwrap();
        assert!(verifier.verifier.get().is_none());
        assert!(http_client().is_ok());
        // The first check makes the platform verifier (the system's roots are there).
        assert!(!verifier.supported_verify_schemes().is_empty());
        assert!(matches!(verifier.verifier.get(), Some(Ok(_))));
    }
}

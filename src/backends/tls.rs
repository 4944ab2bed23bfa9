//! Trust for https peers: the system's roots plus operator-supplied PEM certificates.
//!
//! The system's certificate store is read at most once per process, and only when a peer is
//! first reached over https: a capsule that never speaks https to a peer never reads it, and
//! several configurations in one process (the binary's, the demo's two capsules and client)
//! share one copy.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A TLS client configuration trusting the system roots and every certificate in `extra_ca`
/// (PEM files). Certificates are always verified; there is no "insecure" switch. The files are
/// read and checked now; the system's store at the first https handshake.
///
/// # Errors
/// A message when an `extra_ca` file cannot be read, holds no certificate, or holds one that
/// cannot be a trust anchor.
pub fn client_config(extra_ca: &[&Path]) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut extra = Vec::new();
    for path in extra_ca {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("{}: no PEM certificate found", path.display()));
        }
        // Each must be usable as a trust anchor: an operator learns of a bad file at launch,
        // not at the first https fetch.
        let mut anchors = RootCertStore::empty();
        for cert in &certs {
            anchors
                .add(cert.clone())
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        extra.extend(certs);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(DeferredRoots {
        extra,
        provider: provider.clone(),
        verifier: OnceLock::new(),
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A TLS client configuration trusting exactly `roots` (tests build their own CA).
///
/// # Errors
/// A message when the protocol versions cannot be configured.
pub fn client_config_with_roots(roots: RootCertStore) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The system's trusted certificates, read once per process on first use. Certificates the
/// store holds but cannot parse are skipped, as a missing store is: the operator's
/// `--peer-ca` files still apply.
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let native = rustls_native_certs::load_native_certs();
        tracing::debug!(
            certificates = native.certs.len(),
            errors = native.errors.len(),
            "read the system's certificate store"
        );
        native.certs
    })
}

/// The webpki verifier over the system roots and the operator's, built at the first
/// certificate to verify. Every certificate is verified by rustls' own [`WebPkiServerVerifier`];
/// handshake signatures by rustls' own functions with the provider's algorithms, as that
/// verifier does. Only the moment the roots are read differs.
#[derive(Debug)]
struct DeferredRoots {
    extra: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<Arc<WebPkiServerVerifier>, String>>,
}

impl DeferredRoots {
    fn verifier(&self) -> Result<&Arc<WebPkiServerVerifier>, rustls::Error> {
        self.verifier
            .get_or_init(|| {
                let mut roots = RootCertStore::empty();
                let (_added, _ignored) =
                    roots.add_parsable_certificates(system_roots().iter().cloned());
                let (_added, _ignored) = roots.add_parsable_certificates(self.extra.clone());
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                    .build()
                    .map_err(|e| format!("no usable trusted certificates: {e}"))
            })
            .as_ref()
            .map_err(|e| rustls::Error::General(e.clone()))
    }
}

impl ServerCertVerifier for DeferredRoots {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // the tests write their own CA files
mod tests {
    use super::*;
    use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

    /// A CA and a server configuration presenting a certificate for `localhost` it signed.
    fn ca_and_server() -> (rcgen::Certificate, Arc<rustls::ServerConfig>) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "tls unit test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(params, ca_key);
        let mut leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        leaf.use_authority_key_identifier_extension = true;
        leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf_cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
        (ca, Arc::new(server))
    }

    /// Runs a handshake in memory between `client` and `server` for `localhost`.
    fn handshake(
        client: Arc<rustls::ClientConfig>,
        server: Arc<rustls::ServerConfig>,
    ) -> Result<(), rustls::Error> {
        let name = ServerName::try_from("localhost").unwrap();
        let mut client = rustls::ClientConnection::new(client, name)?;
        let mut server = rustls::ServerConnection::new(server)?;
        for _ in 0..16 {
            let mut wire = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut wire).unwrap();
            }
            server.read_tls(&mut wire.as_slice()).unwrap();
            server.process_new_packets()?;
            let mut wire = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut wire).unwrap();
            }
            client.read_tls(&mut wire.as_slice()).unwrap();
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn an_operator_ca_is_trusted_and_certificates_are_still_verified() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, server) = ca_and_server();
        let pem = dir.path().join("ca.pem");
        std::fs::write(&pem, ca.pem()).unwrap();
        let trusting = client_config(&[pem.as_path()]).expect("a readable CA file");
        handshake(trusting.clone(), server.clone()).expect("a peer signed by --peer-ca");
        // The verifier is built once and reused.
        handshake(trusting, server.clone()).expect("a second handshake");

        // Without the operator's CA the same peer is refused: the system's roots do not
        // hold it, and nothing is accepted unverified.
        let refused =
            handshake(client_config(&[]).unwrap(), server.clone()).expect_err("an unknown issuer");
        assert!(
            matches!(refused, rustls::Error::InvalidCertificate(_)),
            "{refused:?}"
        );
        // Another CA's certificate does not stand in for it.
        let (other_ca, _) = ca_and_server();
        let other = dir.path().join("other.pem");
        std::fs::write(&other, other_ca.pem()).unwrap();
        let refused =
            handshake(client_config(&[other.as_path()]).unwrap(), server).expect_err("another CA");
        assert!(
            matches!(refused, rustls::Error::InvalidCertificate(_)),
            "{refused:?}"
        );
    }

    #[test]
    fn unusable_ca_files_are_refused_when_the_configuration_is_built() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = client_config(&[missing.as_path()]).expect_err("a missing CA file");
        assert!(e.starts_with(&format!("{}: ", missing.display())), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config(&[empty.as_path()]).expect_err("no certificate");
        assert_eq!(e, format!("{}: no PEM certificate found", empty.display()));
    }
}

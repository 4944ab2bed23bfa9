//! A certificate authority of the test's own, minted in memory: the root a client trusts and
//! the server and client certificates it signs, so HTTPS runs end to end with no system root.

use resource_plane::backends::{ClientIdentity, PeerTls};
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// A self-signed CA, able to sign leaf certificates.
pub struct TestCa {
    cert: rcgen::Certificate,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    /// A new CA whose certificate's common name is `name`.
    pub fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let key = rcgen::KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            cert,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA's certificate as PEM: what a client is told to trust.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A server configuration presenting a certificate for `sans` signed by this CA, asking
    /// no client certificate.
    pub fn server_config(&self, sans: &[&str]) -> Arc<rustls::ServerConfig> {
        let (cert, key) = self.leaf(sans, rcgen::ExtendedKeyUsagePurpose::ServerAuth);
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], private_key(&key))
            .expect("server TLS config");
        Arc::new(config)
    }

    /// A TLS acceptor presenting a server certificate for `sans`, signed by this CA.
    pub fn acceptor(&self, sans: &[&str]) -> TlsAcceptor {
        TlsAcceptor::from(self.server_config(sans))
    }

    /// A TLS acceptor presenting a server certificate for `sans` signed by this CA, and
    /// requiring a client certificate signed by `clients`.
    pub fn acceptor_requiring_clients_of(&self, sans: &[&str], clients: &TestCa) -> TlsAcceptor {
        let (cert, key) = self.leaf(sans, rcgen::ExtendedKeyUsagePurpose::ServerAuth);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(clients.cert.der().clone()).expect("a client CA");
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .build()
        .expect("a client verifier");
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![cert.der().clone()], private_key(&key))
            .expect("server TLS config");
        TlsAcceptor::from(Arc::new(config))
    }

    /// A client identity named `name`, signed by this CA.
    pub fn client_identity(&self, name: &str) -> ClientIdentity {
        let (cert, key) = self.leaf(&[name], rcgen::ExtendedKeyUsagePurpose::ClientAuth);
        ClientIdentity::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
            .expect("a client identity")
    }

    /// A client configuration trusting exactly this CA.
    pub fn client_tls(&self) -> PeerTls {
        PeerTls::without_system_roots()
            .add_pem(self.pem().as_bytes())
            .expect("CA is a root")
    }

    /// A certificate for `sans` (the first also its common name) with `usage`, signed by this
    /// CA, and its key.
    fn leaf(
        &self,
        sans: &[&str],
        usage: rcgen::ExtendedKeyUsagePurpose,
    ) -> (rcgen::Certificate, rcgen::KeyPair) {
        let mut params =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("certificate names");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, sans[0]);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        (cert, key)
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn private_key(key: &rcgen::KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))
}

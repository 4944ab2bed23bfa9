//! Trust for https peers: the system's roots plus operator-supplied PEM certificates, and the
//! client certificate a capsule presents to peers that ask for one (mutual TLS), held as the
//! crate-owned [`PeerTls`] and [`ClientIdentity`] so no TLS library's type appears in a
//! capsule's configuration.
//!
//! The system's certificate store is read at most once per process, and only when a peer is
//! first reached over https: building a [`PeerTls`], a configuration or a capsule reads no file,
//! a capsule that never speaks https to a peer never reads the store, and several
//! configurations in one process (the binary's, the demo's two capsules and client) share one
//! copy.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Why trust for https peers could not be built: a CA file or PEM text that cannot be used.
/// Its text names the source (`<path>: …`, or `PEM text: …`). A bad CA file is learned of when
/// the trust is built, at launch, not at the first https fetch.
///
/// ```
/// use resource_plane::backends::{PeerTls, TlsError};
/// use std::path::Path;
///
/// let refused = PeerTls::without_system_roots().add_pem(b"no certificate here").unwrap_err();
/// assert_eq!(refused, TlsError::NoCertificate { origin: "PEM text".into() });
/// assert_eq!(refused.to_string(), "PEM text: no PEM certificate found");
///
/// let missing = PeerTls::system().add_pem_file(Path::new("/nonexistent/ca.pem")).unwrap_err();
/// assert!(matches!(missing, TlsError::Unreadable { .. }));
/// assert!(missing.to_string().starts_with("/nonexistent/ca.pem: "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsError {
    /// A CA file could not be read or its PEM could not be parsed.
    Unreadable {
        /// The file, or `PEM text` for bytes given in memory.
        origin: String,
        /// What went wrong.
        detail: String,
    },
    /// The source holds no PEM certificate.
    NoCertificate {
        /// The file, or `PEM text`.
        origin: String,
    },
    /// A certificate cannot be a trust anchor.
    NotAnAnchor {
        /// The file, or `PEM text`.
        origin: String,
        /// Why.
        detail: String,
    },
    /// The source of a client identity's key holds no PEM private key.
    NoPrivateKey {
        /// The file, or `PEM text`.
        origin: String,
    },
    /// The TLS library refused the configuration itself (a client key that does not match its
    /// certificate, a key of an unsupported type).
    Config {
        /// Why.
        detail: String,
    },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Unreadable { origin, detail } | TlsError::NotAnAnchor { origin, detail } => {
                write!(f, "{origin}: {detail}")
            }
            TlsError::NoCertificate { origin } => write!(f, "{origin}: no PEM certificate found"),
            TlsError::NoPrivateKey { origin } => write!(f, "{origin}: no PEM private key found"),
            TlsError::Config { detail } => write!(f, "TLS configuration: {detail}"),
        }
    }
}

impl std::error::Error for TlsError {}

/// What names PEM bytes given in memory in a [`TlsError`].
const PEM_TEXT: &str = "PEM text";

/// The trust a capsule's https peer connections (card fetches and redeems) verify against:
/// the system's roots (unless built [`without_system_roots`](Self::without_system_roots)) plus
/// the certificates added. Certificates are always verified; there is no "insecure" switch.
///
/// Construction reads nothing but the CA files named to
/// [`add_pem_file`](Self::add_pem_file); the system's store is read at the first https
/// handshake ([`roots_loaded`](Self::roots_loaded) tells whether that happened). Cheap to
/// clone; clones share the roots once loaded.
///
/// ```
/// use resource_plane::backends::PeerTls;
///
/// let trust = PeerTls::system();
/// assert!(!trust.roots_loaded(), "nothing is read at construction");
/// assert!(PeerTls::system().add_pem(b"not a certificate").is_err());
/// ```
#[derive(Clone)]
pub struct PeerTls {
    roots: Arc<DeferredRoots>,
    identity: Option<ClientIdentity>,
    config: Arc<rustls::ClientConfig>,
}

impl Default for PeerTls {
    /// [`PeerTls::system`].
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerTls")
            .field("system_roots", &self.roots.system)
            .field("added", &self.roots.extra.len())
            .field("roots_loaded", &self.roots_loaded())
            .field("client_identity", &self.identity.is_some())
            .finish()
    }
}

impl PeerTls {
    /// Trusts the system's roots, read at the first https handshake.
    pub fn system() -> Self {
        Self::with_roots(true, Vec::new(), None).expect("no client identity, nothing to refuse")
    }

    /// Trusts only the certificates added afterwards (a private CA, a test's own): the
    /// system's store is never read.
    pub fn without_system_roots() -> Self {
        Self::with_roots(false, Vec::new(), None).expect("no client identity, nothing to refuse")
    }

    /// Presents `identity` to https peers that ask for a client certificate (mutual TLS); a
    /// peer that does not ask never sees it. Replaces any identity set before.
    ///
    /// ```
    /// use resource_plane::backends::{ClientIdentity, PeerTls, TlsError};
    ///
    /// let key = rcgen::KeyPair::generate().unwrap();
    /// let cert = rcgen::CertificateParams::new(vec!["capsule-a".into()])
    ///     .unwrap()
    ///     .self_signed(&key)
    ///     .unwrap();
    /// let identity = ClientIdentity::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
    ///     .unwrap();
    /// let trust = PeerTls::without_system_roots().with_client_identity(identity).unwrap();
    /// assert!(format!("{trust:?}").contains("client_identity: true"));
    ///
    /// // A key that is not the certificate's is refused here, not at the first handshake.
    /// let other = rcgen::KeyPair::generate().unwrap();
    /// let mismatched =
    ///     ClientIdentity::from_pem(cert.pem().as_bytes(), other.serialize_pem().as_bytes()).unwrap();
    /// let refused = PeerTls::system().with_client_identity(mismatched).unwrap_err();
    /// assert!(matches!(refused, TlsError::Config { .. }), "{refused}");
    /// ```
    ///
    /// # Errors
    /// [`TlsError::Config`] when the TLS library refuses the key (one that does not match the
    /// chain's first certificate, or of a type it cannot sign with).
    pub fn with_client_identity(self, identity: ClientIdentity) -> Result<Self, TlsError> {
        Self::with_roots(self.roots.system, self.roots.extra.clone(), Some(identity))
    }

    /// Also trusts every certificate in `pem` (one or more `CERTIFICATE` blocks).
    ///
    /// # Errors
    /// [`TlsError::Unreadable`] when the PEM does not parse, [`TlsError::NoCertificate`] when
    /// it holds none, [`TlsError::NotAnAnchor`] when one cannot be a trust anchor; each names
    /// the source `PEM text`.
    pub fn add_pem(self, pem: &[u8]) -> Result<Self, TlsError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::Unreadable {
                origin: PEM_TEXT.into(),
                detail: e.to_string(),
            })?;
        self.adding(PEM_TEXT, certs)
    }

    /// Also trusts every certificate in the PEM file at `path`, read now, so a bad file is
    /// learned of at launch and not at the first https fetch.
    ///
    /// # Errors
    /// As [`add_pem`](Self::add_pem), each naming the file; [`TlsError::Unreadable`] also
    /// when it cannot be read.
    pub fn add_pem_file(self, path: &Path) -> Result<Self, TlsError> {
        let source = path.display().to_string();
        let unreadable = |e: rustls_pki_types::pem::Error| TlsError::Unreadable {
            origin: source.clone(),
            detail: e.to_string(),
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(unreadable)?
            .collect::<Result<_, _>>()
            .map_err(unreadable)?;
        self.adding(&source, certs)
    }

    /// [`add_pem_file`](Self::add_pem_file) for each of `paths`, in order.
    ///
    /// # Errors
    /// The first file's error.
    pub fn add_pem_files<P: AsRef<Path>>(self, paths: &[P]) -> Result<Self, TlsError> {
        paths
            .iter()
            .try_fold(self, |trust, path| trust.add_pem_file(path.as_ref()))
    }

    /// Whether the roots this trust verifies against have been loaded: the system's store
    /// read (when it is trusted) and the verifier built. False until the first https
    /// handshake of a connection using it.
    pub fn roots_loaded(&self) -> bool {
        self.roots.verifier.get().is_some()
    }

    /// The client configuration the crate's peer client connects with. Building it reads
    /// nothing.
    pub(crate) fn client_config(&self) -> Arc<rustls::ClientConfig> {
        self.config.clone()
    }

    fn adding(self, source: &str, certs: Vec<CertificateDer<'static>>) -> Result<Self, TlsError> {
        if certs.is_empty() {
            return Err(TlsError::NoCertificate {
                origin: source.to_owned(),
            });
        }
        // Each must be usable as a trust anchor: an operator learns of a bad file at launch,
        // not at the first https fetch.
        let mut anchors = RootCertStore::empty();
        for cert in &certs {
            anchors
                .add(cert.clone())
                .map_err(|e| TlsError::NotAnAnchor {
                    origin: source.to_owned(),
                    detail: e.to_string(),
                })?;
        }
        let mut extra = self.roots.extra.clone();
        extra.extend(certs);
        Self::with_roots(self.roots.system, extra, self.identity)
    }

    /// The trust of `system` roots and `extra` ones, presenting `identity` when asked.
    ///
    /// # Errors
    /// [`TlsError::Config`] when the TLS library refuses the identity's key.
    fn with_roots(
        system: bool,
        extra: Vec<CertificateDer<'static>>,
        identity: Option<ClientIdentity>,
    ) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(DeferredRoots {
            system,
            extra,
            provider: provider.clone(),
            verifier: OnceLock::new(),
        });
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring's default provider supports the safe default protocol versions")
            .dangerous()
            .with_custom_certificate_verifier(roots.clone());
        let config = match &identity {
            None => builder.with_no_client_auth(),
            Some(identity) => builder
                .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())
                .map_err(|e| TlsError::Config {
                    detail: format!("the client identity: {e}"),
                })?,
        };
        Ok(PeerTls {
            roots,
            identity,
            config: Arc::new(config),
        })
    }
}

/// The certificate chain and private key a capsule presents to https peers that ask for a
/// client certificate (mutual TLS), given to [`PeerTls::with_client_identity`]. Read from PEM:
/// the chain's first certificate is the capsule's own, the key one `PRIVATE KEY` (PKCS #8),
/// `RSA PRIVATE KEY` or `EC PRIVATE KEY` block. Its `Debug` never shows the key.
///
/// ```
/// use resource_plane::backends::{ClientIdentity, TlsError};
///
/// let key = rcgen::KeyPair::generate().unwrap();
/// let cert = rcgen::CertificateParams::new(vec!["capsule-a".into()])
///     .unwrap()
///     .self_signed(&key)
///     .unwrap();
/// let identity = ClientIdentity::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes());
/// assert!(!format!("{:?}", identity.unwrap()).contains("PRIVATE"));
///
/// let refused = ClientIdentity::from_pem(cert.pem().as_bytes(), b"no key here").unwrap_err();
/// assert_eq!(refused, TlsError::NoPrivateKey { origin: "PEM text".into() });
/// ```
#[derive(Clone)]
pub struct ClientIdentity {
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("certificates", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl ClientIdentity {
    /// The identity of the certificates in `chain_pem` (the capsule's own first) and the key in
    /// `key_pem`.
    ///
    /// # Errors
    /// [`TlsError::Unreadable`] when either PEM does not parse, [`TlsError::NoCertificate`]
    /// when `chain_pem` holds no certificate, [`TlsError::NoPrivateKey`] when `key_pem` holds
    /// no private key; each names the source `PEM text`. Whether the key matches the
    /// certificate is checked by [`PeerTls::with_client_identity`].
    pub fn from_pem(chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        let chain = CertificateDer::pem_slice_iter(chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Unreadable {
                origin: PEM_TEXT.into(),
                detail: e.to_string(),
            })?;
        let key = PrivateKeyDer::from_pem_slice(key_pem);
        Self::of(chain, key, PEM_TEXT, PEM_TEXT)
    }

    /// [`from_pem`](Self::from_pem) for the PEM files at `chain` and `key`, read now.
    ///
    /// # Errors
    /// As [`from_pem`](Self::from_pem), each naming its file; [`TlsError::Unreadable`] also
    /// when a file cannot be read.
    pub fn from_pem_files(chain: &Path, key: &Path) -> Result<Self, TlsError> {
        let (chain_origin, key_origin) = (chain.display().to_string(), key.display().to_string());
        let unreadable = |origin: &str| {
            let origin = origin.to_owned();
            move |e: rustls_pki_types::pem::Error| TlsError::Unreadable {
                origin,
                detail: e.to_string(),
            }
        };
        let certs = CertificateDer::pem_file_iter(chain)
            .map_err(unreadable(&chain_origin))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(unreadable(&chain_origin))?;
        let key = PrivateKeyDer::from_pem_file(key);
        Self::of(certs, key, &chain_origin, &key_origin)
    }

    fn of(
        chain: Vec<CertificateDer<'static>>,
        key: Result<PrivateKeyDer<'static>, rustls_pki_types::pem::Error>,
        chain_origin: &str,
        key_origin: &str,
    ) -> Result<Self, TlsError> {
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                origin: chain_origin.to_owned(),
            });
        }
        let key = match key {
            Ok(key) => key,
            Err(rustls_pki_types::pem::Error::NoItemsFound) => {
                return Err(TlsError::NoPrivateKey {
                    origin: key_origin.to_owned(),
                });
            }
            Err(e) => {
                return Err(TlsError::Unreadable {
                    origin: key_origin.to_owned(),
                    detail: e.to_string(),
                });
            }
        };
        Ok(ClientIdentity {
            chain,
            key: Arc::new(key),
        })
    }
}

/// A TLS client configuration trusting the system roots and every certificate in `extra_ca`
/// (PEM files): [`PeerTls::system`] with [`PeerTls::add_pem_files`], for a caller that
/// drives its own TLS client to peers. The files are read and
/// checked now; the system's store at the first https handshake.
///
/// # Errors
/// As [`PeerTls::add_pem_file`].
#[cfg(feature = "cli")]
pub(crate) fn client_config(extra_ca: &[&Path]) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    Ok(PeerTls::system().add_pem_files(extra_ca)?.client_config())
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

/// The webpki verifier over the system roots (when trusted) and the added ones, built at the
/// first certificate to verify. Every certificate is verified by rustls' own
/// [`WebPkiServerVerifier`]; handshake signatures by rustls' own functions with the provider's
/// algorithms, as that verifier does. Only the moment the roots are read differs.
#[derive(Debug)]
struct DeferredRoots {
    system: bool,
    extra: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<Arc<WebPkiServerVerifier>, String>>,
}

impl DeferredRoots {
    fn verifier(&self) -> Result<&Arc<WebPkiServerVerifier>, rustls::Error> {
        self.verifier
            .get_or_init(|| {
                let mut roots = RootCertStore::empty();
                if self.system {
                    let (_added, _ignored) =
                        roots.add_parsable_certificates(system_roots().iter().cloned());
                }
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
        assert!(
            matches!(&e, TlsError::Unreadable { origin, .. } if *origin == missing.display().to_string()),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("{}: ", missing.display())),
            "{e}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config(&[empty.as_path()]).expect_err("no certificate");
        assert_eq!(
            e,
            TlsError::NoCertificate {
                origin: empty.display().to_string()
            }
        );
        assert_eq!(
            e.to_string(),
            format!("{}: no PEM certificate found", empty.display())
        );
    }

    #[test]
    fn pem_text_is_refused_as_a_file_is_and_named_as_text() {
        let e = PeerTls::system()
            .add_pem(b"not a certificate\n")
            .expect_err("no certificate");
        assert_eq!(e.to_string(), "PEM text: no PEM certificate found");
        let truncated = b"-----BEGIN CERTIFICATE-----\nAAAA\n";
        let e = PeerTls::system()
            .add_pem(truncated)
            .expect_err("a block without its end");
        assert!(
            matches!(&e, TlsError::Unreadable { origin, .. } if origin == "PEM text"),
            "{e:?}"
        );
        // A well-formed block whose contents are no certificate cannot be an anchor.
        let junk = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let e = PeerTls::system()
            .add_pem(junk)
            .expect_err("not a certificate");
        assert!(matches!(e, TlsError::NotAnAnchor { .. }), "{e:?}");
    }

    /// A client identity's files are read at once and every refusal names its file; a key that
    /// is not the certificate's is refused when the identity joins a trust; an identity
    /// survives certificates added afterwards.
    #[test]
    fn client_identity_files_are_checked_when_read_and_joined() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["reader".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (chain, key_file, other_key) = (
            dir.path().join("chain.pem"),
            dir.path().join("key.pem"),
            dir.path().join("other.pem"),
        );
        std::fs::write(&chain, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        std::fs::write(
            &other_key,
            rcgen::KeyPair::generate().unwrap().serialize_pem(),
        )
        .unwrap();

        let identity = ClientIdentity::from_pem_files(&chain, &key_file).expect("a pair");
        let trust = PeerTls::without_system_roots()
            .with_client_identity(identity)
            .expect("a matching pair");
        let (ca, _) = ca_and_server();
        let trust = trust.add_pem(ca.pem().as_bytes()).unwrap();
        assert!(format!("{trust:?}").contains("client_identity: true"));

        let missing = dir.path().join("missing.pem");
        let e = ClientIdentity::from_pem_files(&missing, &key_file).unwrap_err();
        assert!(
            matches!(&e, TlsError::Unreadable { origin, .. } if *origin == missing.display().to_string()),
            "{e:?}"
        );
        let e = ClientIdentity::from_pem_files(&key_file, &key_file).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: no PEM certificate found", key_file.display())
        );
        let e = ClientIdentity::from_pem_files(&chain, &chain).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: no PEM private key found", chain.display())
        );
        let mismatched = ClientIdentity::from_pem_files(&chain, &other_key).unwrap();
        let e = PeerTls::system()
            .with_client_identity(mismatched)
            .unwrap_err();
        assert!(matches!(e, TlsError::Config { .. }), "{e:?}");
    }

    /// Nothing is read until the first handshake: then the roots are loaded, once, for every
    /// clone. A trust without system roots holds exactly what was added.
    #[test]
    fn roots_load_at_the_first_handshake_and_pem_bytes_are_trusted() {
        let (ca, server) = ca_and_server();
        let trust = PeerTls::without_system_roots()
            .add_pem(ca.pem().as_bytes())
            .expect("a CA in memory");
        let clone = trust.clone();
        assert!(!trust.roots_loaded(), "construction reads nothing");
        handshake(trust.client_config(), server.clone()).expect("a peer signed by the CA");
        assert!(trust.roots_loaded() && clone.roots_loaded());
        let debug = format!("{trust:?}");
        assert!(
            debug.contains("system_roots: false") && debug.contains("added: 1"),
            "{debug}"
        );

        let (_, other_server) = ca_and_server();
        let refused = handshake(trust.client_config(), other_server).expect_err("another CA");
        assert!(
            matches!(refused, rustls::Error::InvalidCertificate(_)),
            "{refused:?}"
        );
        // Trusting nothing refuses every peer, without reading the system's store.
        let nothing = PeerTls::without_system_roots();
        assert!(handshake(nothing.client_config(), server).is_err());
        assert!(nothing.roots_loaded());
    }
}

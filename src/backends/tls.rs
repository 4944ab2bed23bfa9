//! Trust for https peers: the system's roots plus operator-supplied PEM certificates.

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use std::path::Path;
use std::sync::Arc;

/// A TLS client configuration trusting the system roots and every certificate in `extra_ca`
/// (PEM files). Certificates are always verified; there is no "insecure" switch.
///
/// # Errors
/// A message when an `extra_ca` file cannot be read or holds no certificate.
pub fn client_config(extra_ca: &[&Path]) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    let (_added, _ignored) = roots.add_parsable_certificates(native.certs);
    for path in extra_ca {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("{}: no PEM certificate found", path.display()));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    client_config_with_roots(roots)
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

//! A capsule served over https that requires a client certificate (mutual TLS), and a peer
//! that fetches from it with the runtime's own trust roots and client identity, given through
//! the crate's own types (`PeerTls`, `ClientIdentity`: PEM in, no TLS library type in sight).
//!
//! The server side is the runtime's: it terminates TLS itself and hands each decrypted stream to
//! `serve_with` through a channel (an `mpsc::Receiver` is an `Accept`), so the handshakes run
//! beside each other and the listener's hardening applies to what is inside the TLS.
//!
//! It makes a private CA for the server and one for clients, serves capsule `a` on
//! `https://localhost:<port>`, has `a` share a file with `b` (whose card `b` serves over plain
//! http), has `b` fetch it over mutual TLS, shows that a `b` without the identity is refused at
//! the handshake, and exits.
//!
//! Run: `cargo run --example mutual_tls`
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets

use resource_plane::backends::{ClientIdentity, MemoryFilesystem, PeerTls, RecordingTraceSink};
use resource_plane::http::{ListenerConfig, serve_with};
use resource_plane::{Capsule, Manifest};
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use std::sync::Arc;

/// A private CA: its certificate (to trust) and what signs with it.
struct Ca {
    cert: rcgen::Certificate,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Result<Self, rcgen::Error> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca {
            cert,
            issuer: rcgen::Issuer::new(params, key),
        })
    }

    /// A certificate for `name` with `usage`, and its key.
    fn sign(
        &self,
        name: &str,
        usage: rcgen::ExtendedKeyUsagePurpose,
    ) -> Result<(rcgen::Certificate, rcgen::KeyPair), rcgen::Error> {
        let mut params = rcgen::CertificateParams::new(vec![name.to_owned()])?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let key = rcgen::KeyPair::generate()?;
        Ok((params.signed_by(&key, &self.issuer)?, key))
    }
}

/// The runtime's TLS server configuration: `localhost`, signed by `ca`, and a client
/// certificate signed by `clients` required.
fn server_tls(
    ca: &Ca,
    clients: &Ca,
) -> Result<Arc<rustls::ServerConfig>, Box<dyn std::error::Error>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(clients.cert.der().clone())?;
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()?;
    let (cert, key) = ca.sign("localhost", rcgen::ExtendedKeyUsagePurpose::ServerAuth)?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
    Ok(Arc::new(config))
}

fn launch(
    yaml: &str,
    url: &str,
    tls: PeerTls,
) -> Result<(Capsule, Arc<MemoryFilesystem>), Box<dyn std::error::Error>> {
    let fs = Arc::new(MemoryFilesystem::new());
    let capsule = Capsule::builder(&Manifest::from_yaml(yaml)?.manifest)
        .filesystem(fs.clone())
        .trace(Arc::new(RecordingTraceSink::new()))
        .advertised_url(url)
        .peer_tls(tls)
        .launch()?;
    Ok((capsule, fs))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (server_ca, client_ca) = (Ca::new("server CA")?, Ca::new("client CA")?);
    let tls_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let a_port = tls_listener.local_addr()?.port();
    let b_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let b_addr = b_listener.local_addr()?;

    // b trusts only the server CA and presents a certificate the client CA signed.
    let (client_cert, client_key) =
        client_ca.sign("b", rcgen::ExtendedKeyUsagePurpose::ClientAuth)?;
    let identity = ClientIdentity::from_pem(
        client_cert.pem().as_bytes(),
        client_key.serialize_pem().as_bytes(),
    )?;
    let trust = PeerTls::without_system_roots().add_pem(server_ca.cert.pem().as_bytes())?;
    let (b, b_fs) = launch(
        &format!(
            "name: b\ncapabilities: {{ peer_fetch: {{ allow: [\"https://localhost:{a_port}\"] }} }}\n"
        ),
        &format!("http://{b_addr}"),
        trust.clone().with_client_identity(identity)?,
    )?;
    let (a, a_fs) = launch(
        &format!(
            "name: a\nexports: {{ peer_files: {{ root: out/, max_ttl: 5m }} }}\n\
             capabilities: {{ network: {{ allow: [\"{b_addr}\"] }} }}\n"
        ),
        &format!("https://localhost:{a_port}"),
        PeerTls::without_system_roots(),
    )?;
    a_fs.add_file("out/report.md", "signed, sealed, delivered\n", 0);

    // a: TLS terminated by the runtime, each handshake on its own task, the decrypted streams
    // served by `serve_with` behind its hardening.
    let acceptor = tokio_rustls::TlsAcceptor::from(server_tls(&server_ca, &client_ca)?);
    let (streams, accepted) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = tls_listener.accept().await {
            let (acceptor, streams) = (acceptor.clone(), streams.clone());
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(tls) => {
                        let _ = streams.send(tls).await;
                    }
                    Err(e) => println!("a refused a TLS handshake: {e}"),
                }
            });
        }
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let stopped = async move {
        let _ = stopped.await;
    };
    let a_server = tokio::spawn(serve_with(
        accepted,
        a.router(),
        ListenerConfig::default(),
        stopped,
    ));
    // b: plain http, for its card.
    tokio::spawn(serve_with(
        b_listener,
        b.router(),
        ListenerConfig::default(),
        std::future::pending(),
    ));

    let shared = a
        .tools()
        .call(
            "share-file",
            json!({"path": "report.md", "peer": format!("http://{b_addr}")}),
        )
        .await?;
    println!("a shared report.md with {}", shared["audience"]);
    let peer = format!("https://localhost:{a_port}");
    let fetched = b
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": peer, "handle": shared["handle"]}),
        )
        .await?;
    println!("b fetched {} over mutual TLS", fetched["path"]);
    let landed = b_fs.file_bytes(fetched["path"].as_str().unwrap_or_default());
    assert_eq!(landed.as_deref(), Some(&b"signed, sealed, delivered\n"[..]));

    // The same fetch without the client identity never gets past the handshake.
    let (anonymous, _) = launch(
        &format!(
            "name: b\ncapabilities: {{ peer_fetch: {{ allow: [\"https://localhost:{a_port}\"] }} }}\n"
        ),
        &format!("http://{b_addr}"),
        trust,
    )?;
    let refused = anonymous
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": peer, "handle": shared["handle"]}),
        )
        .await
        .expect_err("no client certificate");
    println!("without a client certificate: {}", refused.code_str());
    assert_eq!(refused.code_str(), "peer_unreachable");

    let _ = stop.send(());
    a_server.await??;
    Ok(())
}

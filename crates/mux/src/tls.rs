//! Trunk security: TLS 1.3 (rustls, `ring` provider), mutually authenticated either by
//! certificates from a configured CA, or by a pre-shared key.
//!
//! rustls does not implement TLS 1.3 external PSKs, so PSK mode runs TLS with
//! throw-away self-signed certificates (encryption only) and then authenticates *inside*
//! the tunnel: each side sends `HMAC-SHA256(psk, role || exporter)` where `exporter`
//! is the RFC 8446 §7.5 keying-material exporter of this very connection. A
//! man-in-the-middle has two TLS connections with different exporters, so it cannot
//! relay a proof; a peer without the key cannot produce one.

use std::io;
use std::path::Path;
use std::sync::Arc;

use ring::hmac;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::config::{Auth, ConfigError};

/// A trunk connection after TLS (and the PSK proof).
pub type ClientStream = tokio_rustls::client::TlsStream<TcpStream>;
/// The core's side.
pub type ServerStream = tokio_rustls::server::TlsStream<TcpStream>;

const EXPORTER_LABEL: &[u8] = b"EXPORTER-thinwan-mux-psk";
const ALPN: &[u8] = b"thinwan-mux/1";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// The core's TLS acceptor plus what is needed to finish authentication.
#[derive(Clone)]
pub struct Acceptor {
    tls: TlsAcceptor,
    psk: Option<Arc<[u8]>>,
}

/// The edge's TLS connector.
#[derive(Clone)]
pub struct Connector {
    tls: TlsConnector,
    psk: Option<Arc<[u8]>>,
    server_name: ServerName<'static>,
}

impl Acceptor {
    /// Build from the configured authentication: read and check every file (certificate
    /// chain, key matching it, CA) exactly as the daemon will use them. `--check` calls
    /// this too, so a configuration it passes cannot fail here later; the error names
    /// the key and the file.
    pub fn new(auth: &Auth) -> Result<Acceptor, ConfigError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| ConfigError::new("auth", e.to_string()))?;
        let (mut cfg, psk) = match auth {
            Auth::Psk(k) => {
                let (chain, key) = self_signed("thinwan-core")?;
                let cfg = builder.with_no_client_auth().with_single_cert(chain, key);
                (cfg.map_err(|e| ConfigError::new("auth", e.to_string()))?, Some(k.as_slice().into()))
            }
            Auth::Certs { cert, key, ca } => {
                let roots = Arc::new(roots(ca)?);
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider())
                    .build()
                    .map_err(|e| ConfigError::new("auth.ca", format!("{}: {e}", ca.display())))?;
                let cfg =
                    builder.with_client_cert_verifier(verifier).with_single_cert(certs(cert)?, key_der(key)?);
                (cfg.map_err(|e| own_cert_error(e, cert, key))?, None)
            }
        };
        cfg.alpn_protocols = vec![ALPN.to_vec()];
        Ok(Acceptor { tls: TlsAcceptor::from(Arc::new(cfg)), psk })
    }

    /// TLS handshake and, in PSK mode, the key proof.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<ServerStream> {
        let mut s = self.tls.accept(tcp).await?;
        if let Some(psk) = &self.psk {
            let exporter = export(s.get_ref().1)?;
            let mut theirs = [0u8; 32];
            s.read_exact(&mut theirs).await?;
            verify(psk, b"edge", &exporter, &theirs)?;
            s.write_all(&proof(psk, b"core", &exporter)).await?;
            s.flush().await?;
        }
        Ok(s)
    }
}

impl Connector {
    /// Build from the configured authentication (files checked as in
    /// [`Acceptor::new`]); `server_name` is checked against the core's certificate in
    /// certificate mode.
    pub fn new(auth: &Auth, server_name: &str) -> Result<Connector, ConfigError> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| ConfigError::new("auth", e.to_string()))?;
        let (mut cfg, psk) = match auth {
            Auth::Psk(k) => {
                // Encryption only here; the HMAC proof below authenticates the core.
                let verifier = Arc::new(AnyServerCert(provider()));
                let cfg =
                    builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth();
                (cfg, Some(k.as_slice().into()))
            }
            Auth::Certs { cert, key, ca } => {
                let cfg = builder
                    .with_root_certificates(roots(ca)?)
                    .with_client_auth_cert(certs(cert)?, key_der(key)?);
                (cfg.map_err(|e| own_cert_error(e, cert, key))?, None)
            }
        };
        cfg.alpn_protocols = vec![ALPN.to_vec()];
        let server_name = ServerName::try_from(server_name.to_owned())
            .map_err(|e| ConfigError::new("trunk.server_name", e.to_string()))?;
        Ok(Connector { tls: TlsConnector::from(Arc::new(cfg)), psk, server_name })
    }

    /// TLS handshake and, in PSK mode, the key proof.
    pub async fn connect(&self, tcp: TcpStream) -> io::Result<ClientStream> {
        let mut s = self.tls.connect(self.server_name.clone(), tcp).await?;
        if let Some(psk) = &self.psk {
            let exporter = export(s.get_ref().1)?;
            s.write_all(&proof(psk, b"edge", &exporter)).await?;
            s.flush().await?;
            let mut theirs = [0u8; 32];
            s.read_exact(&mut theirs).await?;
            verify(psk, b"core", &exporter, &theirs)?;
        }
        Ok(s)
    }
}

fn export<D>(conn: &rustls::ConnectionCommon<D>) -> io::Result<[u8; 32]> {
    let mut out = [0u8; 32];
    conn.export_keying_material(&mut out, EXPORTER_LABEL, None).map_err(err)?;
    Ok(out)
}

fn proof(psk: &[u8], role: &[u8], exporter: &[u8; 32]) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, psk);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(role);
    ctx.update(exporter);
    ctx.sign().as_ref().to_vec()
}

fn verify(psk: &[u8], role: &[u8], exporter: &[u8; 32], tag: &[u8]) -> io::Result<()> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, psk);
    let mut msg = role.to_vec();
    msg.extend_from_slice(exporter);
    hmac::verify(&key, &msg, tag)
        .map_err(|_| io::Error::new(io::ErrorKind::PermissionDenied, "peer failed the pre-shared-key proof"))
}

fn self_signed(name: &str) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ConfigError> {
    let fail = |e: &dyn std::fmt::Display| ConfigError::new("auth", format!("throw-away certificate: {e}"));
    let ck = rcgen::generate_simple_self_signed(vec![name.to_owned()]).map_err(|e| fail(&e))?;
    let key = PrivateKeyDer::try_from(ck.key_pair.serialize_der()).map_err(|e| fail(&e))?;
    Ok((vec![ck.cert.der().clone()], key))
}

/// Why rustls refused our own chain and key, blamed on the file at fault. rustls parses
/// the key first, then the end-entity certificate, then compares their public keys.
fn own_cert_error(e: rustls::Error, cert: &Path, key: &Path) -> ConfigError {
    match e {
        rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
            ConfigError::new("auth.cert", format!("{}: not a usable certificate: {e}", cert.display()))
        }
        rustls::Error::InconsistentKeys(_) => ConfigError::new(
            "auth.key",
            format!("{}: does not match the certificate in auth.cert ({})", key.display(), cert.display()),
        ),
        e => ConfigError::new("auth.key", format!("{}: not a usable private key: {e}", key.display())),
    }
}

/// The certificates in the PEM file of `auth.cert` or `auth.ca` (`key`).
fn pem_certs(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let fail = |why: String| ConfigError::new(key, format!("{}: {why}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    let v: Vec<_> = rustls_pemfile::certs(&mut io::BufReader::new(file))
        .collect::<Result<_, _>>()
        .map_err(|e| fail(format!("not a PEM certificate file: {e}")))?;
    if v.is_empty() {
        return Err(fail("no PEM certificate (\"BEGIN CERTIFICATE\") in it".into()));
    }
    Ok(v)
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    pem_certs("auth.cert", path)
}

fn key_der(path: &Path) -> Result<PrivateKeyDer<'static>, ConfigError> {
    let fail = |why: String| ConfigError::new("auth.key", format!("{}: {why}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    rustls_pemfile::private_key(&mut io::BufReader::new(file))
        .map_err(|e| fail(format!("not a PEM key file: {e}")))?
        .ok_or_else(|| fail("no PEM private key in it".into()))
}

fn roots(path: &Path) -> Result<RootCertStore, ConfigError> {
    let mut store = RootCertStore::empty();
    for c in pem_certs("auth.ca", path)? {
        store.add(c).map_err(|e| {
            ConfigError::new("auth.ca", format!("{}: not a usable CA certificate: {e}", path.display()))
        })?;
    }
    Ok(store)
}

/// PSK mode only: accept the core's throw-away certificate (signatures are still
/// checked, so the handshake is sound); identity comes from the HMAC proof.
#[derive(Debug)]
struct AnyServerCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Write a CA plus core and edge certificates (for `thinwan-mux gen-certs` and tests).
/// Files: `ca.pem`, `core.pem`, `core.key`, `edge.pem`, `edge.key`.
pub fn generate_certs(dir: &Path, core_name: &str) -> io::Result<()> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    std::fs::create_dir_all(dir)?;
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "thinwan-mux CA");
    let ca = ca_params.self_signed(&ca_key).map_err(err)?;
    std::fs::write(dir.join("ca.pem"), ca.pem())?;
    for (file, name) in [("core", core_name), ("edge", "thinwan-edge")] {
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::new(vec![name.to_owned()]).map_err(err)?;
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &ca, &ca_key).map_err(err)?;
        std::fs::write(dir.join(format!("{file}.pem")), cert.pem())?;
        write_private(&dir.join(format!("{file}.key")), key.serialize_pem().as_bytes())?;
    }
    Ok(())
}

fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    io::Write::write_all(&mut f, data)
}

/// Keep the trait bounds readable at call sites.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

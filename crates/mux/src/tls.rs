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

use crate::config::Auth;

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
    /// Build from the configured authentication.
    pub fn new(auth: &Auth) -> io::Result<Acceptor> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(err)?;
        let (mut cfg, psk) = match auth {
            Auth::Psk(k) => {
                let (chain, key) = self_signed("thinwan-core")?;
                (
                    builder.with_no_client_auth().with_single_cert(chain, key).map_err(err)?,
                    Some(k.as_slice().into()),
                )
            }
            Auth::Certs { cert, key, ca } => {
                let roots = Arc::new(roots(ca)?);
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(roots, provider()).build().map_err(err)?;
                let cfg =
                    builder.with_client_cert_verifier(verifier).with_single_cert(certs(cert)?, key_der(key)?);
                (cfg.map_err(err)?, None)
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
    /// Build from the configured authentication; `server_name` is checked against the
    /// core's certificate in certificate mode.
    pub fn new(auth: &Auth, server_name: &str) -> io::Result<Connector> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(err)?;
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
                (cfg.map_err(err)?, None)
            }
        };
        cfg.alpn_protocols = vec![ALPN.to_vec()];
        let server_name = ServerName::try_from(server_name.to_owned()).map_err(err)?;
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

fn self_signed(name: &str) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_owned()]).map_err(err)?;
    let key = PrivateKeyDer::try_from(ck.key_pair.serialize_der()).map_err(err)?;
    Ok((vec![ck.cert.der().clone()], key))
}

fn certs(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let mut r = io::BufReader::new(std::fs::File::open(path)?);
    let v: Vec<_> = rustls_pemfile::certs(&mut r).collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(err(format!("no certificate in {}", path.display())));
    }
    Ok(v)
}

fn key_der(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    let mut r = io::BufReader::new(std::fs::File::open(path)?);
    rustls_pemfile::private_key(&mut r)?.ok_or_else(|| err(format!("no private key in {}", path.display())))
}

fn roots(path: &Path) -> io::Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    for c in certs(path)? {
        store.add(c).map_err(err)?;
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

//! Trunk-port soak (issue 15, item 16): floods of unauthenticated connections against
//! the real daemons on 127.0.0.1. Afterwards each daemon's RSS (`VmRSS`) is back within
//! 5 MB of its value at start, its descriptors are released, its warnings were
//! rate-limited, and an authenticated edge still carries a real stream through it.
//!
//! Measured on the 2-core CI machine (release build), before → after the fix:
//! - core, 5,000 sequential garbage connections: RSS 6.1 → 42.6 MB for good (every
//!   finished connection task was kept), 5,000 WARN lines; now 6.0 → 6.2 MB, 25 lines.
//! - this soak (numbers printed with `cargo test --release -p thinwan-mux --test soak --
//!   --nocapture`; three runs alike): trunk, 20,000 connections in 12.8 s, RSS 6.3 MB at
//!   start, 11.4 MB at the peak, 8.2 MB after, 142 WARN lines; metrics, 5,000 in 2.8 s,
//!   8.2 MB after; edge forward, 10,000 in 3.5 s, 6.7 → 7.2 MB, 43 WARN lines. The whole
//!   file takes ~19 s (the two tests run in parallel).
//!
//! Connections are opened at most [`CONCURRENCY`] at a time, which keeps this process
//! (and the daemons) far below the file-descriptor limit (`ulimit -n`, 1,024 on many
//! systems) without raising it.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{core_config, echo_eventually, echo_server, edge_config, scratch, write, Daemon};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// Connections in flight at once: below the core's `limits.max_handshakes` (256), so
/// nearly every attack gets a handshake slot and the soak measures what handshakes
/// cost; the refusal path beyond the limit is `hostile.rs::handshakes_are_capped_*`.
const CONCURRENCY: usize = 200;
/// How far RSS may stay above its value at start (issue 15).
const RSS_SLACK_KB: u64 = 5 * 1024;
/// The soak lowers `timeouts.handshake_timeout_ms` from its default (5000) so idle and
/// slow connections end within the test; what is measured — that their memory is
/// released — does not depend on the value.
/// 300 ms: a third of the connections (idle, slow hello, TLS without proof) hold a slot
/// until the timeout, so at the default the trunk flood would take ~40 s, here ~10 s.
const HANDSHAKE_TIMEOUT: &str = "[timeouts]\nhandshake_timeout_ms = 300\n";

/// Fewer streams than attackers in flight ([`CONCURRENCY`]), so the flood also meets the edge's refusals
/// (and their rate-limited warnings), not only streams that open and end.
const EDGE_LIMITS: &str = "[limits]\nmax_streams = 100\n";

/// Trunk port: 20,000 connections of six kinds (garbage, idle, half-closed, slow TLS
/// hello, reset, TLS without the key proof), then the metrics endpoint: 5,000 of six
/// kinds (scrape, garbage, idle, half-closed, slow header, oversized header).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_survives_unauthenticated_floods() {
    let dir = scratch("soak-core");
    let echo = echo_server().await;
    let extra = format!("{HANDSHAKE_TIMEOUT}[metrics]\nlisten = \"127.0.0.1:0\"\n");
    let core = Daemon::start("core", &write(&dir, "core.toml", &core_config(echo, &extra)));
    let trunk = core.addr("core listening");
    let metrics = core.addr("metrics endpoint");
    let (rss0, fds0) = (core.rss_kb(), core.fds());

    let hello = Arc::new(client_hello());
    let tls = tls_connector();
    let start = Start { rss: rss0, fds: fds0 };
    flood(&core, start, 20_000, move |i| {
        let (hello, tls) = (hello.clone(), tls.clone());
        async move { trunk_attack(trunk, i, &hello, &tls).await }
    })
    .await
    .check(&core, "trunk.listen", true);
    let scrape = http_get(metrics).await.unwrap();
    let (failed, refused) =
        (metric(&scrape, "trunk_failures_total"), metric(&scrape, "handshakes_refused_total"));
    eprintln!("soak core trunk: {failed} handshakes failed or timed out, {refused} refused at the limit");
    // Most attacks must reach the handshake, or the soak measures only the refusal path.
    assert!(failed >= 15_000, "only {failed} of 20,000 connections got a handshake slot");

    flood(&core, start, 5_000, move |i| metrics_attack(metrics, i)).await.check(
        &core,
        "metrics.listen",
        false,
    );
    let scrape = http_get(metrics).await.expect("the metrics endpoint still answers");
    assert!(scrape.contains("thinwan_mux_handshakes{role=\"core\"} 0"), "no handshake left: {scrape}");

    // An authenticated edge is still served: a real stream through the core.
    let edge = Daemon::start("edge", &write(&dir, "edge.toml", &edge_config(trunk, "")));
    let client = edge.addr("forwarding");
    echo_eventually(client, &pattern(7, 100_000), Duration::from_secs(10)).await;
    edge.stop();
    core.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Edge client listener (`forward[0].listen`): 10,000 connections of five kinds
/// (echoed garbage, idle then reset, reset at once, half-closed, slow writer), each a
/// real stream through the trunk to the core's target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_survives_client_floods() {
    let dir = scratch("soak-edge");
    let echo = echo_server().await;
    let core = Daemon::start("core", &write(&dir, "core.toml", &core_config(echo, "")));
    let trunk = core.addr("core listening");
    let edge = Daemon::start("edge", &write(&dir, "edge.toml", &edge_config(trunk, EDGE_LIMITS)));
    let client = edge.addr("forwarding");
    // "At start" = once the trunk is up and has carried one stream: the session and
    // its lanes are part of the edge's steady state, not of the flood.
    echo_eventually(client, &pattern(1, 1000), Duration::from_secs(10)).await;
    let (rss0, fds0) = (edge.rss_kb(), edge.fds());
    let core_rss0 = core.rss_kb();

    let start = Start { rss: rss0, fds: fds0 };
    flood(&edge, start, 10_000, move |i| client_attack(client, i)).await.check(
        &edge,
        "forward[0].listen",
        true,
    );
    let core_rss1 = settle(&core, core_rss0).await;
    eprintln!("soak core behind the edge: RSS {core_rss0} -> {core_rss1} kB");
    assert!(core_rss1 <= core_rss0 + RSS_SLACK_KB, "core RSS {core_rss0} -> {core_rss1} kB");

    echo_eventually(client, &pattern(2, 100_000), Duration::from_secs(10)).await;
    edge.stop();
    core.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A daemon's RSS (kB) and descriptors before a flood.
#[derive(Clone, Copy)]
struct Start {
    rss: u64,
    fds: usize,
}

/// What a flood did to a daemon.
struct Outcome {
    start: Start,
    connections: u64,
    secs: f64,
    peak_rss: u64,
    /// RSS once settled ([`settle`]).
    rss: u64,
    fds: usize,
    /// WARN lines the daemon logged during the flood.
    warns: usize,
}

/// Run `total` attacks, [`CONCURRENCY`] at a time, and let the daemon settle.
async fn flood<F, Fut>(d: &Daemon, start: Start, total: u64, attack: F) -> Outcome
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let warns0 = d.warn_count();
    let (peak, done) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
    let sampler = {
        let (peak, done, pid) = (peak.clone(), done.clone(), d.pid());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Some(kb) = rss_of(pid) {
                    peak.fetch_max(kb, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let t0 = Instant::now();
    let slots = Arc::new(Semaphore::new(CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        let permit = slots.clone().acquire_owned().await.unwrap();
        // Every attack is bounded: a daemon that never closes fails the soak here. 20 s,
        // not less: on a loaded CI machine each lost SYN costs a retry after 1 s, 2 s, 4 s.
        let a = tokio::time::timeout(Duration::from_secs(20), attack(i));
        tasks.spawn(async move {
            let r = a.await;
            drop(permit);
            r.map_err(|_| i)
        });
        while let Some(r) = tasks.try_join_next() {
            r.unwrap().unwrap_or_else(|i| panic!("attack {i} was not closed within 20 s"));
        }
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap().unwrap_or_else(|i| panic!("attack {i} was not closed within 20 s"));
    }
    let secs = t0.elapsed().as_secs_f64();
    let warns = d.warn_count() - warns0;
    let rss = settle(d, start.rss).await;
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak_rss = peak.load(Ordering::Relaxed);
    Outcome { start, connections: total, secs, peak_rss, rss, fds: d.fds(), warns }
}

/// RSS once the daemon had time to give freed memory back (it trims its heap within a
/// second of a burst's end: `guard::release_memory_after_bursts`), polled until within
/// the slack of `start` or for 5 s more.
async fn settle(d: &Daemon, start: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let kb = d.rss_kb();
        if kb <= start + RSS_SLACK_KB || Instant::now() > deadline {
            return kb;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Outcome {
    /// Print the numbers, then check: RSS and descriptors back; WARN lines within the
    /// rate limit; and, where the attacks cause per-connection warnings (`summarised`:
    /// not at the metrics endpoint, whose failed requests are not logged), a
    /// "suppressed" summary for `listener`.
    fn check(&self, d: &Daemon, listener: &str, summarised: bool) {
        let (s, secs) = (self.start, self.secs);
        eprintln!(
            "soak {listener}: {} connections in {secs:.1} s; RSS {} kB at start, peak {}, after {}; \
             fds {} -> {}; {} WARN lines",
            self.connections, s.rss, self.peak_rss, self.rss, s.fds, self.fds, self.warns
        );
        assert!(self.rss <= s.rss + RSS_SLACK_KB, "{listener}: RSS {} -> {} kB", s.rss, self.rss);
        assert!(self.fds <= s.fds + 2, "{listener}: descriptors {} -> {}", s.fds, self.fds);
        // 10 lines and one summary per second, and one more window for the rounding.
        let bound = 11 * (secs.ceil() as usize + 2);
        assert!(self.warns <= bound, "{listener}: {} WARN lines in {secs:.1} s (limit {bound})", self.warns);
        let suppressed: u64 = d
            .lines("per-connection warnings suppressed")
            .iter()
            .filter(|v| v["fields"]["listener"] == listener)
            .map(|v| v["fields"]["suppressed"].as_u64().unwrap_or(0))
            .sum();
        assert!(!summarised || suppressed > 0, "{listener}: the flood's warnings were summarised");
    }
}

fn rss_of(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// Deterministic bytes (xorshift seeded by the connection number).
fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Read until the peer closes (EOF or reset).
async fn drain(s: &mut TcpStream) {
    let mut b = [0u8; 4096];
    while let Ok(n) = s.read(&mut b).await {
        if n == 0 {
            return;
        }
    }
}

/// Close with RST (SO_LINGER 0), as a crashed or hostile client does.
fn reset(s: TcpStream) {
    thinwan_mux::driver::abort_socket(&s);
}

async fn trunk_attack(core: SocketAddr, i: u64, hello: &[u8], tls: &tokio_rustls::TlsConnector) {
    // The core resets refused connections, sometimes before `connect` returns.
    let Ok(mut s) = TcpStream::connect(core).await else { return };
    match i % 6 {
        // Garbage, then wait for the core to give up on it.
        0 => {
            let _ = s.write_all(&pattern(i, 64 + (i as usize * 37) % 2000)).await;
            drain(&mut s).await;
        }
        // Idle (never sends): held until the handshake timeout.
        1 => drain(&mut s).await,
        // Half-closed at once.
        2 => {
            let _ = s.shutdown().await;
            drain(&mut s).await;
        }
        // A real TLS ClientHello, 8 bytes every 250 ms (slowloris).
        3 => {
            for c in hello.chunks(8) {
                if s.write_all(c).await.is_err() {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                    _ = drain(&mut s) => return,
                }
            }
            drain(&mut s).await;
        }
        // Garbage, then reset.
        4 => {
            let _ = s.write_all(&pattern(i, 300)).await;
            reset(s);
        }
        // A full TLS handshake (PSK mode: throw-away certificate), then a wrong key
        // proof or nothing at all: the most an attacker without the key gets.
        _ => {
            let name = ServerName::try_from("thinwan-core").unwrap();
            let Ok(mut t) = tls.connect(name, s).await else { return };
            if i % 12 == 5 {
                let _ = t.write_all(&[0u8; 32]).await;
            }
            let mut b = [0u8; 64];
            while let Ok(n) = t.read(&mut b).await {
                if n == 0 {
                    break;
                }
            }
        }
    }
}

async fn metrics_attack(metrics: SocketAddr, i: u64) {
    let Ok(mut s) = TcpStream::connect(metrics).await else { return };
    match i % 6 {
        0 => {
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
            drain(&mut s).await;
        }
        1 => {
            let _ = s.write_all(&pattern(i, 500)).await;
            reset(s);
        }
        2 => drain(&mut s).await,
        3 => {
            let _ = s.shutdown().await;
            drain(&mut s).await;
        }
        4 => {
            for b in b"GET /metrics HTTP/1.1\r\nX: ".iter().cycle() {
                if s.write_all(&[*b]).await.is_err() {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = drain(&mut s) => return,
                }
            }
        }
        _ => {
            let _ = s.write_all(&vec![b'a'; 9000]).await;
            drain(&mut s).await;
        }
    }
}

async fn client_attack(edge: SocketAddr, i: u64) {
    let Ok(mut s) = TcpStream::connect(edge).await else { return };
    match i % 5 {
        // Garbage, echoed by the target through the tunnel.
        0 => {
            let _ = s.write_all(&pattern(i, 1 + (i as usize * 53) % 5000)).await;
            let _ = s.shutdown().await;
            drain(&mut s).await;
        }
        // Idle for a while, then reset.
        1 => {
            tokio::time::sleep(Duration::from_millis(i % 300)).await;
            reset(s);
        }
        2 => reset(s),
        3 => {
            let _ = s.shutdown().await;
            drain(&mut s).await;
        }
        // A slow writer that leaves without closing cleanly.
        _ => {
            for k in 0..4 {
                let _ = s.write_all(&pattern(i + k, 10)).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            reset(s);
        }
    }
}

async fn http_get(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

/// The value of `thinwan_mux_NAME{role=...}` in a scrape.
fn metric(scrape: &str, name: &str) -> u64 {
    let prefix = format!("thinwan_mux_{name}{{");
    let line = scrape.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{name}: {scrape}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The bytes of a real TLS 1.3 ClientHello (for the slow-hello attack).
fn client_hello() -> Vec<u8> {
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let mut c =
        rustls::ClientConnection::new(Arc::new(cfg), ServerName::try_from("thinwan-core").unwrap()).unwrap();
    let mut out = Vec::new();
    c.write_tls(&mut out).unwrap();
    out
}

/// A TLS client that accepts any server certificate: it completes the handshake with a
/// PSK-mode core but cannot prove the key.
fn tls_connector() -> tokio_rustls::TlsConnector {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider())))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"thinwan-mux/1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
}

#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

//! Shedding at the edge (docs/mux.md "Shedding") on 127.0.0.1: client → edge → either
//! the tunnel (core → target server) or, when the session says shed, a plain TCP splice
//! to the forward's `shed.direct` server. The two servers tag their replies, so the
//! client sees which path carried its bytes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thinwan_mux::config::parse;
use thinwan_mux::core::{Core, Registry};
use thinwan_mux::edge::Edge;
use thinwan_mux::{metrics, CoreConfig, Counters, EdgeConfig, Shared};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const AUTH: &str = "[auth]\npsk = \"test-psk-0123456789abcdef\"\n";
/// Pings every 100 ms, so a lane has a round trip (and shedding can decide) quickly.
const TIMEOUTS: &str = "[timeouts]\nping_interval_ms = 100\nidle_timeout_ms = 2000\n";

/// A server that writes `tag`, then echoes; counts its connections.
async fn tagged_echo(tag: u8) -> (SocketAddr, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let conns = Arc::new(AtomicU64::new(0));
    let c = conns.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                if w.write_all(&[tag]).await.is_ok() {
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                }
                let _ = w.shutdown().await;
            });
        }
    });
    (addr, conns)
}

struct Setup {
    client: SocketAddr,
    edge: Arc<Shared>,
    counters: Arc<Counters>,
    tunnel_conns: Arc<AtomicU64>,
    direct_conns: Arc<AtomicU64>,
    _stop: watch::Sender<bool>,
}

/// Core with target "echo" (tag `T`), a direct server (tag `D`), and an edge whose
/// forward carries `shed` (a TOML line, or "" for none; `{direct}` is replaced).
async fn start(shed: &str) -> Setup {
    let (target, tunnel_conns) = tagged_echo(b'T').await;
    let (direct, direct_conns) = tagged_echo(b'D').await;
    let core_l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let core_addr = core_l.local_addr().unwrap();
    let core = CoreConfig::try_from(
        parse(&format!(
            "[trunk]\nlisten = \"{core_addr}\"\n{AUTH}{TIMEOUTS}[[target]]\nname = \"echo\"\nconnect = \"{target}\"\n"
        ))
        .unwrap(),
    )
    .unwrap();
    let (stop, rx) = watch::channel(false);
    let registry: Registry = Default::default();
    tokio::spawn(Core::run(core, core_l, Arc::new(Counters::default()), registry, rx.clone()));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = l.local_addr().unwrap();
    let shed = shed.replace("{direct}", &direct.to_string());
    let edge = EdgeConfig::try_from(
        parse(&format!(
            "[trunk]\nconnect = \"{core_addr}\"\n{AUTH}{TIMEOUTS}[[forward]]\nname = \"echo\"\nlisten = \"{client}\"\n{shed}\n"
        ))
        .unwrap(),
    )
    .unwrap();
    let counters = Arc::new(Counters::default());
    let (tx, srx) = tokio::sync::oneshot::channel();
    tokio::spawn(Edge::run(edge, vec![l], counters.clone(), Some(tx), rx));
    let edge = srx.await.unwrap();
    // Until the lane is up and has a ping round trip, shedding cannot decide.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while edge.lock().session.shed_margin(0.0).is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the lane never got a ping round trip");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Setup { client, edge, counters, tunnel_conns, direct_conns, _stop: stop }
}

/// Send `data`, half-close, and read the reply: (the server's tag, the echo).
async fn exchange(addr: SocketAddr, data: &[u8]) -> std::io::Result<(u8, Vec<u8>)> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(data).await?;
    s.shutdown().await?;
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await??;
    let tag = *got.first().ok_or(std::io::ErrorKind::UnexpectedEof)?;
    Ok((tag, got.split_off(1)))
}

fn data() -> Vec<u8> {
    (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect()
}

#[tokio::test]
async fn a_negative_slack_forces_shedding_and_bytes_take_the_direct_path() {
    // On loopback the tunnel is never slower than direct; a slack of −10 s sheds anyway.
    let s = start("shed = { direct = \"{direct}\", slack_ms = -10000 }").await;
    let (tag, echo) = exchange(s.client, &data()).await.unwrap();
    assert_eq!(tag, b'D', "the direct server answered");
    assert_eq!(echo, data(), "every byte, once, in order");
    assert_eq!(s.direct_conns.load(Ordering::SeqCst), 1);
    assert_eq!(s.tunnel_conns.load(Ordering::SeqCst), 0);
    assert_eq!(s.edge.lock().session.stats().streams_opened, 0, "no stream for a shed client");
    assert_eq!(s.counters.streams_shed.load(Ordering::Relaxed), 1);
    // The splice counts its bytes when it ends (just after our read saw the end).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while s.counters.shed_bytes.load(Ordering::Relaxed) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "splice bytes never counted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.counters.shed_bytes.load(Ordering::Relaxed), 2 * 100_000 + 1);
    let text = metrics::render("edge", &s.counters, std::slice::from_ref(&s.edge));
    assert!(text.contains("thinwan_mux_streams_shed_total{role=\"edge\"} 1"), "{text}");
    assert!(text.contains("thinwan_mux_trunk_loss_ratio{role=\"edge\"} 0"), "{text}");
}

#[tokio::test]
async fn shedding_is_off_by_default_and_a_default_slack_keeps_a_fast_tunnel() {
    for shed in ["", "shed = { direct = \"{direct}\" }"] {
        let s = start(shed).await;
        let (tag, echo) = exchange(s.client, &data()).await.unwrap();
        assert_eq!(tag, b'T', "{shed:?}: the tunnel's target answered");
        assert_eq!(echo, data());
        assert_eq!(s.direct_conns.load(Ordering::SeqCst), 0, "{shed:?}");
        assert_eq!(s.tunnel_conns.load(Ordering::SeqCst), 1, "{shed:?}");
        assert_eq!(s.counters.streams_shed.load(Ordering::Relaxed), 0, "{shed:?}");
        assert_eq!(s.edge.lock().session.stats().streams_opened, 1, "{shed:?}");
    }
}

#[tokio::test]
async fn an_unreachable_direct_path_resets_the_shed_client() {
    // Bind and drop a listener: its port now refuses connections.
    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let s = start(&format!("shed = {{ direct = \"{dead}\", slack_ms = -10000 }}")).await;
    let r = exchange(s.client, b"hello").await;
    assert!(r.is_err(), "the client sees a reset, not a reply: {r:?}");
    assert_eq!(s.counters.shed_connect_failures.load(Ordering::Relaxed), 1);
    assert_eq!(s.tunnel_conns.load(Ordering::SeqCst) + s.direct_conns.load(Ordering::SeqCst), 0);
}

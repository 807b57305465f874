//! End-to-end tests on 127.0.0.1: client → edge → (chaos proxy) → core → echo server.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use thinwan_mux::config::{parse, MAX_LANES};
use thinwan_mux::core::{Core, Registry};
use thinwan_mux::driver::abort_socket;
use thinwan_mux::edge::Edge;
use thinwan_mux::{CoreConfig, Counters, EdgeConfig, Shared};
use thinwan_proto::mux::{FrameType, LaneRule};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const PSK: &str = "test-psk-0123456789abcdef";

async fn echo_server() -> (SocketAddr, Arc<std::sync::atomic::AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let conns = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = conns.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    (addr, conns)
}

/// A proxied socket and the task pumping it.
type Piped = (Arc<TcpStream>, tokio::task::AbortHandle);

/// Forwards edge→core trunk connections; `cut()` resets all of them.
#[derive(Clone, Default)]
struct Chaos {
    conns: Arc<Mutex<Vec<Piped>>>,
}

impl Chaos {
    async fn start(to: SocketAddr) -> (SocketAddr, Chaos) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let chaos = Chaos::default();
        let c = chaos.clone();
        tokio::spawn(async move {
            while let Ok((a, _)) = l.accept().await {
                let Ok(b) = TcpStream::connect(to).await else { continue };
                let (a, b) = (Arc::new(a), Arc::new(b));
                let (a2, b2) = (a.clone(), b.clone());
                let t = tokio::spawn(async move {
                    let f1 = pipe(a2.clone(), b2.clone());
                    let f2 = pipe(b2, a2);
                    tokio::join!(f1, f2);
                });
                c.conns.lock().unwrap().push((a, t.abort_handle()));
                c.conns.lock().unwrap().push((b, t.abort_handle()));
            }
        });
        (addr, chaos)
    }

    fn cut(&self) {
        for (s, t) in self.conns.lock().unwrap().drain(..) {
            abort_socket(&s);
            t.abort();
        }
    }
}

async fn pipe(from: Arc<TcpStream>, to: Arc<TcpStream>) {
    let mut buf = vec![0u8; 65536];
    loop {
        if from.readable().await.is_err() {
            return;
        }
        let n = match from.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        };
        let mut off = 0;
        while off < n {
            if to.writable().await.is_err() {
                return;
            }
            match to.try_write(&buf[off..n]) {
                Ok(k) => off += k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return,
            }
        }
    }
}

struct Harness {
    client_addrs: Vec<SocketAddr>,
    stop: watch::Sender<bool>,
    edge: Arc<Shared>,
    edge_counters: Arc<Counters>,
    core_counters: Arc<Counters>,
    registry: Registry,
    chaos: Chaos,
    echo_conns: Arc<std::sync::atomic::AtomicU64>,
}

/// Start echo server, core, chaos proxy and edge. `core_auth`/`edge_auth` are TOML
/// `[auth]` bodies; `forwards` names the edge's targets (the core has only "echo").
async fn start(core_auth: &str, edge_auth: &str, forwards: &[&str], extra: &str) -> Harness {
    start_with(core_auth, edge_auth, forwards, extra, "").await
}

/// [`start`] with extra `[trunk]` keys for the edge.
async fn start_with(
    core_auth: &str,
    edge_auth: &str,
    forwards: &[&str],
    extra: &str,
    edge_trunk: &str,
) -> Harness {
    let (echo, echo_conns) = echo_server().await;
    let core_l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let core_addr = core_l.local_addr().unwrap();
    let core_cfg = CoreConfig::try_from(
        parse(&format!(
            "[trunk]\nlisten = \"{core_addr}\"\n[auth]\n{core_auth}\n{extra}\n[[target]]\nname = \"echo\"\nconnect = \"{echo}\"\n"
        ))
        .unwrap(),
    )
    .unwrap();
    let (stop, rx) = watch::channel(false);
    let core_counters = Arc::new(Counters::default());
    let registry: Registry = Default::default();
    tokio::spawn(Core::run(core_cfg, core_l, core_counters.clone(), registry.clone(), rx.clone()));
    let (chaos_addr, chaos) = Chaos::start(core_addr).await;
    let mut fwd = String::new();
    let mut listeners = Vec::new();
    let mut client_addrs = Vec::new();
    for name in forwards {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        fwd += &format!("[[forward]]\nname = \"{name}\"\nlisten = \"{a}\"\n");
        listeners.push(l);
        client_addrs.push(a);
    }
    let edge_cfg = EdgeConfig::try_from(
        parse(&format!(
            "[trunk]\nconnect = \"{chaos_addr}\"\nconnections = 2\n{edge_trunk}\n[auth]\n{edge_auth}\n{extra}\n{fwd}"
        ))
        .unwrap(),
    )
    .unwrap();
    let edge_counters = Arc::new(Counters::default());
    let (tx, srx) = tokio::sync::oneshot::channel();
    tokio::spawn(Edge::run(edge_cfg, listeners, edge_counters.clone(), Some(tx), rx));
    let edge = srx.await.unwrap();
    Harness { client_addrs, stop, edge, edge_counters, core_counters, registry, chaos, echo_conns }
}

fn psk() -> String {
    format!("psk = \"{PSK}\"")
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Write `n` pattern bytes through the tunnel to the echo server and check that the
/// echo matches exactly (same bytes, same order, nothing extra).
async fn echo_roundtrip(addr: SocketAddr, seed: u64, n: usize, chunk: usize) -> std::io::Result<()> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let (mut r, mut w) = s.into_split();
    let data = pattern(seed, n);
    let d2 = data.clone();
    let writer = tokio::spawn(async move {
        for c in d2.chunks(chunk) {
            w.write_all(c).await?;
        }
        w.shutdown().await?;
        Ok::<_, std::io::Error>(())
    });
    let mut got = Vec::with_capacity(n);
    r.read_to_end(&mut got).await?;
    writer.await.unwrap()?;
    assert_eq!(got.len(), n, "stream {seed}: length");
    assert!(got == data, "stream {seed}: bytes differ");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_echo_through_the_tunnel() {
    let h = start(&psk(), &psk(), &["echo"], "").await;
    let mut tasks = Vec::new();
    for i in 0..50u64 {
        let a = h.client_addrs[0];
        let n = if i % 10 == 0 { 2_000_000 } else { 1 + (i as usize * 997) % 20_000 };
        tasks.push(tokio::spawn(async move { echo_roundtrip(a, i, n, 3000).await }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(h.edge.lock().session.stream_count(), 0, "finished streams are released");
    let _ = h.stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trunk_resets_lose_and_duplicate_nothing() {
    let h = start(&psk(), &psk(), &["echo"], "").await;
    let mut tasks = Vec::new();
    for i in 0..20u64 {
        let a = h.client_addrs[0];
        tasks.push(tokio::spawn(async move { echo_roundtrip(a, 100 + i, 3_000_000, 10_000).await }));
    }
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        h.chaos.cut();
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let g = h.edge.lock();
    assert!(g.session.stats().resumes >= 1, "lanes were resumed");
    assert_eq!(h.edge_counters.sessions_lost.load(Ordering::SeqCst), 0);
    drop(g);
    let _ = h.stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_psk_cannot_open_a_trunk() {
    let extra = "[timeouts]\nresume_timeout_ms = 1500";
    let h = start(&psk(), "psk = \"some-other-key-0123456789\"", &["echo"], extra).await;
    let r =
        tokio::time::timeout(Duration::from_secs(10), echo_roundtrip(h.client_addrs[0], 1, 100, 100)).await;
    assert!(matches!(r, Ok(Err(_))), "the client's stream fails: {r:?}");
    assert!(h.core_counters.trunk_failures.load(Ordering::SeqCst) >= 1);
    assert_eq!(h.core_counters.trunk_connects.load(Ordering::SeqCst), 0);
    assert!(h.registry.lock().unwrap().is_empty(), "no session was created");
    assert_eq!(h.echo_conns.load(Ordering::SeqCst), 0, "nothing reached the server");
    let _ = h.stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfigured_target_is_refused() {
    let h = start(&psk(), &psk(), &["echo", "ssh"], "").await;
    let r = echo_roundtrip(h.client_addrs[1], 1, 100, 100).await;
    assert!(r.is_err(), "stream to an unknown target fails at the client");
    assert_eq!(h.core_counters.unknown_targets.load(Ordering::SeqCst), 1);
    assert_eq!(h.echo_conns.load(Ordering::SeqCst), 0);
    // The tunnel still works for configured targets.
    echo_roundtrip(h.client_addrs[0], 2, 1000, 100).await.unwrap();
    let _ = h.stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_mutual_auth() {
    let dir = std::env::temp_dir().join(format!("thinwan-mux-certs-{}", std::process::id()));
    thinwan_mux::tls::generate_certs(&dir, "thinwan-core").unwrap();
    let other = dir.join("other");
    thinwan_mux::tls::generate_certs(&other, "thinwan-core").unwrap();
    let d = dir.display();
    let core = format!("cert = \"{d}/core.pem\"\nkey = \"{d}/core.key\"\nca = \"{d}/ca.pem\"");
    let edge = format!("cert = \"{d}/edge.pem\"\nkey = \"{d}/edge.key\"\nca = \"{d}/ca.pem\"");
    let h = start(&core, &edge, &["echo"], "").await;
    echo_roundtrip(h.client_addrs[0], 5, 100_000, 1000).await.unwrap();
    let _ = h.stop.send(true);
    // An edge whose certificate comes from another CA is refused.
    let o = other.display();
    let bad_edge = format!("cert = \"{o}/edge.pem\"\nkey = \"{o}/edge.key\"\nca = \"{d}/ca.pem\"");
    let extra = "[timeouts]\nresume_timeout_ms = 1500";
    let h = start(&core, &bad_edge, &["echo"], extra).await;
    let r =
        tokio::time::timeout(Duration::from_secs(10), echo_roundtrip(h.client_addrs[0], 1, 100, 100)).await;
    assert!(matches!(r, Ok(Err(_))), "{r:?}");
    assert_eq!(h.core_counters.trunk_connects.load(Ordering::SeqCst), 0);
    let _ = h.stop.send(true);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Adaptive lanes (issue 20) between the real daemons: the edge announces them in its
/// `Hello`, the core follows; lanes nobody wants stay undialed without failing the
/// session at the resume timeout, and trunk resets still lose nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_lanes_carry_streams_and_survive_resets() {
    let extra = "[timeouts]\nresume_timeout_ms = 1500";
    // The backlog rule, which keeps the base lanes (the held rule may go down to one).
    let trunk = "lanes = \"adaptive\"\nlane_rule = \"backlog\"\nmax_connections = 4\nbulk_limit = true";
    let h = start_with(&psk(), &psk(), &["echo"], extra, trunk).await;
    for round in 0..2u64 {
        let mut tasks = Vec::new();
        for i in 0..20u64 {
            let a = h.client_addrs[0];
            let n = if i % 5 == 0 { 1_000_000 } else { 1 + (i as usize * 997) % 20_000 };
            tasks.push(tokio::spawn(async move { echo_roundtrip(a, 1000 * round + i, n, 3000).await }));
        }
        if round == 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            h.chaos.cut();
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        // Longer than the resume timeout: undialed extra lanes must not fail the session.
        tokio::time::sleep(Duration::from_millis(2000)).await;
    }
    assert_eq!(h.edge_counters.sessions_lost.load(Ordering::SeqCst), 0);
    assert_eq!(h.core_counters.sessions_lost.load(Ordering::SeqCst), 0);
    let g = h.edge.lock();
    assert!(g.session.config().adaptive());
    assert!(g.session.lanes_up() >= 2, "the two base lanes are up");
    assert_eq!(g.session.bulk_inflight(), 0);
    drop(g);
    let _ = h.stop.send(true);
}

/// Idle extra lanes close by the `LaneClose` handshake between the real daemons: the
/// edge asks on the lane, the core answers there once nothing of its own is left on it,
/// and the edge closes the connection; the session goes on and loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_extra_lanes_close_by_handshake() {
    // The backlog rule's idle hold (the held rule closes lanes when calm, not idle).
    let trunk = "lanes = \"adaptive\"\nlane_rule = \"backlog\"\nmax_connections = 8\nlane_idle_hold_ms = 300";
    let h = start_with(&psk(), &psk(), &["echo"], "", trunk).await;
    // Bulk echoes both ways open lanes (on loopback a standing backlog is many RTTs).
    let mut most = 0;
    for round in 0..20u64 {
        let tasks: Vec<_> = (0..8u64)
            .map(|i| {
                let a = h.client_addrs[0];
                tokio::spawn(async move { echo_roundtrip(a, 100 * round + i, 2_000_000, 16_384).await })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        most = most.max(h.edge.lock().session.lanes_up());
        if most > 2 {
            break;
        }
    }
    assert!(most > 2, "bulk opened no extra lane (up: {most})");
    // Quiet: past the idle hold the extra lanes are given up, one at a time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while h.edge.lock().session.lanes_up() > 2 {
        assert!(tokio::time::Instant::now() < deadline, "extra lanes never closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let close = FrameType::LaneClose as usize;
    let core_session = h.registry.lock().unwrap().values().next().cloned().expect("the core's session");
    let edge = h.edge.lock().session.stats().clone();
    let core = core_session.lock().session.stats().clone();
    assert!(edge.frames_tx[close] > 0 && core.frames_rx[close] > 0, "the edge asked");
    assert!(core.frames_tx[close] > 0 && edge.frames_rx[close] > 0, "the core answered");
    echo_roundtrip(h.client_addrs[0], 7, 50_000, 3000).await.unwrap();
    assert_eq!(h.edge_counters.sessions_lost.load(Ordering::SeqCst), 0);
    assert_eq!(h.core_counters.sessions_lost.load(Ordering::SeqCst), 0);
    let _ = h.stop.send(true);
}

/// The held rule between the real daemons (`trunk.lane_rule = "held"`): the core follows
/// the edge's `Hello`, and a calm session (loopback holds no frame up) halves its two
/// starting lanes to one, closed by the handshake, while its streams go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calm_session_halves_its_lanes_under_the_held_rule() {
    let trunk = "lanes = \"adaptive\"\nmax_connections = 8\nlane_rule = \"held\"";
    let h = start_with(&psk(), &psk(), &["echo"], "", trunk).await;
    echo_roundtrip(h.client_addrs[0], 1, 50_000, 3000).await.unwrap();
    let core_session = h.registry.lock().unwrap().values().next().cloned().expect("the core's session");
    assert_eq!(core_session.lock().session.config().lane_rule, LaneRule::Held);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while h.edge.lock().session.lanes_up() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "the second lane never came up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Five calm windows of at least 0.5 s, then the close handshake.
    let mut round = 2;
    while h.edge.lock().session.lanes_up() > 1 {
        if tokio::time::Instant::now() >= deadline {
            let (es, cs) = (h.edge.lock(), core_session.lock());
            panic!(
                "the lanes never halved: wanted {} / {}, wants moved {:?} / {:?}",
                es.session.lanes_wanted(),
                cs.session.lanes_wanted(),
                (es.session.stats().lanes_opened, es.session.stats().lanes_closed),
                (cs.session.stats().lanes_opened, cs.session.stats().lanes_closed)
            );
        }
        echo_roundtrip(h.client_addrs[0], round, 2_000, 1000).await.unwrap();
        round += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let edge = h.edge.lock().session.stats().clone();
    assert!(edge.lanes_closed >= 1, "the edge's want fell: {edge:?}");
    assert!(edge.frames_rx[FrameType::LaneClose as usize] > 0, "the core answered");
    echo_roundtrip(h.client_addrs[0], 7, 50_000, 3000).await.unwrap();
    assert_eq!(h.edge_counters.sessions_lost.load(Ordering::SeqCst), 0);
    assert_eq!(h.core_counters.sessions_lost.load(Ordering::SeqCst), 0);
    let _ = h.stop.send(true);
}

/// Up to `MAX_LANES` lanes (issue 20: 200 thin streams at 5 % loss need more than 64):
/// the core takes a session whose `Hello` announces them, and the trunk sockets accept
/// `thin_linear_timeouts`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_more_than_64_lanes_is_taken() {
    let trunk = format!("lanes = \"adaptive\"\nmax_connections = {MAX_LANES}\nthin_linear_timeouts = true");
    let h = start_with(&psk(), &psk(), &["echo"], "", &trunk).await;
    echo_roundtrip(h.client_addrs[0], 7, 50_000, 3000).await.unwrap();
    assert_eq!(h.edge_counters.sessions_lost.load(Ordering::SeqCst), 0);
    assert_eq!(h.core_counters.sessions_lost.load(Ordering::SeqCst), 0);
    assert_eq!(h.edge.lock().session.lane_count(), MAX_LANES);
    let _ = h.stop.send(true);
}

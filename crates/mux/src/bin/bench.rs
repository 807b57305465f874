//! `thinwan-mux-bench`: loopback benchmark of edge + core (in one process, PSK/TLS 1.3).
//!
//! 1. latency: N concurrent thin streams each send a 100-byte message every `interval`
//!    and wait for its echo; the same through a direct connection. Added one-way delay of
//!    edge+core ≈ (tunnel RTT − direct RTT) / 2 (the echo crosses both twice).
//! 2. throughput: one bulk stream uploads `bulk_mb` MiB to a sink through the tunnel.
//! 3. isolation: thin-stream RTT with and without a concurrent full-speed bulk stream.
//!
//! Prints one JSON object. Clients, servers, edge and core share the machine's cores,
//! so numbers are conservative.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use thinwan_mux::config::parse;
use thinwan_mux::core::{Core, Registry};
use thinwan_mux::edge::Edge;
use thinwan_mux::{Counters, CoreConfig, EdgeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == &format!("--{name}"))
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let streams = arg("streams", 1000) as usize;
    let interval = Duration::from_millis(arg("interval-ms", 100));
    let secs = arg("seconds", 5);
    let bulk_mb = arg("bulk-mb", 2048);
    let threads = arg("threads", 2) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build().expect("runtime");
    rt.block_on(async move {
        let (echo, sink) = (echo_server().await, sink_server().await);
        let (stop, rx) = watch::channel(false);
        let (edge_echo, edge_sink) = tunnel(echo, sink, rx).await;
        tokio::time::sleep(Duration::from_millis(300)).await;

        let direct = thin_rtts(echo, streams, interval, secs).await;
        let tunneled = thin_rtts(edge_echo, streams, interval, secs).await;
        let gbps = bulk(edge_sink, bulk_mb << 20).await;
        let direct_gbps = bulk(sink, bulk_mb << 20).await;
        // Isolation: 50 thin streams, alone and next to a bulk upload.
        let alone = thin_rtts(edge_echo, 50, Duration::from_millis(20), secs).await;
        let bulk_task = tokio::spawn(bulk(edge_sink, 100u64 << 30));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let with_bulk = thin_rtts(edge_echo, 50, Duration::from_millis(20), secs).await;
        bulk_task.abort();
        let _ = stop.send(true);

        let (d50, d99) = (pct(&direct, 50.0), pct(&direct, 99.0));
        let (t50, t99) = (pct(&tunneled, 50.0), pct(&tunneled, 99.0));
        println!("{{");
        println!("  \"streams\": {streams}, \"interval_ms\": {}, \"seconds\": {secs}, \"samples\": {},", interval.as_millis(), tunneled.len());
        println!("  \"direct_rtt_us\": {{\"p50\": {d50:.1}, \"p99\": {d99:.1}}},");
        println!("  \"tunnel_rtt_us\": {{\"p50\": {t50:.1}, \"p99\": {t99:.1}}},");
        println!("  \"added_one_way_us\": {{\"p50\": {:.1}, \"p99\": {:.1}}},", (t50 - d50) / 2.0, (t99 - d99) / 2.0);
        println!("  \"tunnel_throughput_gbit_s\": {gbps:.2}, \"direct_throughput_gbit_s\": {direct_gbps:.2},");
        println!(
            "  \"thin_rtt_us_alone\": {{\"p50\": {:.1}, \"p99\": {:.1}}}, \"thin_rtt_us_with_bulk\": {{\"p50\": {:.1}, \"p99\": {:.1}}},",
            pct(&alone, 50.0), pct(&alone, 99.0), pct(&with_bulk, 50.0), pct(&with_bulk, 99.0)
        );
        println!("  \"bulk_raises_thin_p99_us\": {:.1}", pct(&with_bulk, 99.0) - pct(&alone, 99.0));
        println!("}}");
    });
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[((p / 100.0) * (s.len() - 1) as f64).round() as usize]
}

async fn tunnel(echo: SocketAddr, sink: SocketAddr, rx: watch::Receiver<bool>) -> (SocketAddr, SocketAddr) {
    let psk = "psk = \"bench-psk-0123456789abcdef\"";
    let core_l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let core_addr = core_l.local_addr().expect("addr");
    let core = CoreConfig::try_from(
        parse(&format!(
            "[trunk]\nlisten = \"{core_addr}\"\n[auth]\n{psk}\n[limits]\nmax_streams = 10000\n\
             [[target]]\nname = \"echo\"\nconnect = \"{echo}\"\n[[target]]\nname = \"sink\"\nconnect = \"{sink}\"\n"
        ))
        .expect("toml"),
    )
    .expect("core config");
    tokio::spawn(Core::run(core, core_l, Arc::new(Counters::default()), Registry::default(), rx.clone()));
    let (le, ls) = (TcpListener::bind("127.0.0.1:0").await.expect("bind"), TcpListener::bind("127.0.0.1:0").await.expect("bind"));
    let (ae, as_) = (le.local_addr().expect("addr"), ls.local_addr().expect("addr"));
    let edge = EdgeConfig::try_from(
        parse(&format!(
            "[trunk]\nconnect = \"{core_addr}\"\nconnections = {}\n[auth]\n{psk}\n[limits]\nmax_streams = 10000\n\
             [[forward]]\nname = \"echo\"\nlisten = \"{ae}\"\n[[forward]]\nname = \"sink\"\nlisten = \"{as_}\"\n",
            arg("lanes", 1)
        ))
        .expect("toml"),
    )
    .expect("edge config");
    tokio::spawn(Edge::run(edge, vec![le, ls], Arc::new(Counters::default()), None, rx));
    (ae, as_)
}

async fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let a = l.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    a
}

async fn sink_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let a = l.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 * 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                let _ = s.shutdown().await;
            });
        }
    });
    a
}

/// Echo round-trip times (µs) of `n` streams sending 100 B every `interval` for `secs`.
async fn thin_rtts(addr: SocketAddr, n: usize, interval: Duration, secs: u64) -> Vec<f64> {
    let mut tasks = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    for i in 0..n {
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let Ok(mut s) = TcpStream::connect(addr).await else { return out };
            let _ = s.set_nodelay(true);
            // Spread the streams' phases over the interval.
            tokio::time::sleep(interval.mul_f64(i as f64 / n as f64)).await;
            let mut tick = tokio::time::interval(interval);
            let msg = [0x5au8; 100];
            let mut back = [0u8; 100];
            while Instant::now() < end {
                tick.tick().await;
                let t0 = Instant::now();
                if s.write_all(&msg).await.is_err() || s.read_exact(&mut back).await.is_err() {
                    break;
                }
                out.push(t0.elapsed().as_secs_f64() * 1e6);
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap_or_default());
    }
    all
}

/// Upload `bytes` through `addr` and return Gbit/s (until the sink closed).
async fn bulk(addr: SocketAddr, bytes: u64) -> f64 {
    let Ok(s) = TcpStream::connect(addr).await else { return 0.0 };
    let (mut r, mut w) = s.into_split();
    let buf = vec![0xa5u8; 256 * 1024];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        let n = (bytes - sent).min(buf.len() as u64) as usize;
        if w.write_all(&buf[..n]).await.is_err() {
            break;
        }
        sent += n as u64;
    }
    let _ = w.shutdown().await;
    let mut x = Vec::new();
    let _ = r.read_to_end(&mut x).await;
    sent as f64 * 8.0 / t0.elapsed().as_secs_f64() / 1e9
}

//! `thinwan-mux-bench`: loopback benchmark of edge + core (in one process, PSK/TLS 1.3).
//!
//! 1. latency: N concurrent thin streams each send a 100-byte message every `interval`
//!    and wait for its echo; the same through a direct connection. Added one-way delay of
//!    edge+core ≈ (tunnel RTT − direct RTT) / 2 (the echo crosses both twice). Each
//!    stream's first exchange (which opens the stream end to end) is reported apart,
//!    as `setup_rtt_us`.
//! 2. throughput: one bulk stream uploads `bulk_mb` MiB to a sink through the tunnel.
//! 3. isolation: thin-stream RTT with and without a concurrent full-speed bulk stream.
//!
//! Each is also measured through two bare TCP relays (`relay_*`): the floor that any
//! two-hop user-space tunnel pays on this machine, without TLS or multiplexing, and
//! through OpenSSH local forwarding (`ssh_*`, [`SshPeer`]): one `ssh -N -L` connection
//! to a private `sshd` carrying every stream as a channel, as users deploy it (the
//! default cipher; `ssh -V` and the negotiated cipher are in the output), and through a
//! yamux-multiplexed forwarder (`yamux_*`, [`YamuxPeer`]). `--no-ssh` / `--no-yamux`
//! leave them out; without `ssh`/`sshd` or the peer binary they are reported as skipped.
//! `--bulk-limit` runs the tunnel with `trunk.bulk_limit = true` at both ends.
//!
//! Edge and core each run on their own thread and runtime, built as the daemons build
//! theirs (as if they were separate processes); clients and servers run on a third
//! runtime. Direct and tunnel are measured in the same run, one after the other, so
//! the differences compare like with like on a shared, noisy machine. All of it
//! shares the machine's cores, so numbers are conservative.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thinwan_mux::config::parse;
use thinwan_mux::core::{Core, Registry};
use thinwan_mux::edge::Edge;
use thinwan_mux::{CoreConfig, Counters, EdgeConfig};
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

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == format!("--{name}"))
}

fn text_arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == &format!("--{name}")).and_then(|i| args.get(i + 1)).cloned()
}

fn main() {
    let streams = arg("streams", 1000) as usize;
    let interval = Duration::from_millis(arg("interval-ms", 100));
    let secs = arg("seconds", 5);
    let bulk_mb = arg("bulk-mb", 2048);
    let threads = arg("threads", 2) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let (echo, sink) = (echo_server().await, sink_server().await);
        let (stop, rx) = watch::channel(false);
        let (edge_echo, edge_sink) = tunnel(echo, sink, rx);
        let (relay_echo, relay_sink) = (relay(relay(echo)), relay(relay(sink)));
        // Started on this (the main) thread: their children die with it (PR_SET_PDEATHSIG).
        let ssh = if flag("no-ssh") {
            Err("--no-ssh".to_owned())
        } else {
            SshPeer::start(echo, sink, text_arg("ssh-dir").map(PathBuf::from))
        };
        let yamux = if flag("no-yamux") { Err("--no-yamux".to_owned()) } else { YamuxPeer::start(echo, sink) };
        tokio::time::sleep(Duration::from_millis(300)).await;

        let direct = thin_rtts(echo, streams, interval, secs).await;
        let relayed = thin_rtts(relay_echo, streams, interval, secs).await;
        let tunneled = thin_rtts(edge_echo, streams, interval, secs).await;
        let (direct_setup, tunnel_setup) = (direct.setup, tunneled.setup);
        let (direct, relayed, tunneled) = (direct.steady, relayed.steady, tunneled.steady);
        let gbps = bulk(edge_sink, bulk_mb << 20).await;
        let direct_gbps = bulk(sink, bulk_mb << 20).await;
        let relay_gbps = bulk(relay_sink, bulk_mb << 20).await;
        let (alone, with_bulk) = isolation(edge_echo, edge_sink, secs).await;
        let (relay_alone, relay_with_bulk) = isolation(relay_echo, relay_sink, secs).await;
        let ssh_run = match &ssh {
            Ok(peer) => Ok(PeerRun::measure(peer.echo, peer.sink, peer.describe(), streams, interval, secs, bulk_mb).await),
            Err(why) => Err(why.clone()),
        };
        drop(ssh); // stops ssh, then sshd; removes its keys unless --ssh-dir was given
        let yamux_run = match &yamux {
            Ok(peer) => Ok(PeerRun::measure(peer.echo, peer.sink, YamuxPeer::describe(), streams, interval, secs, bulk_mb).await),
            Err(why) => Err(why.clone()),
        };
        drop(yamux);
        let _ = stop.send(true);

        let p = |v: &Vec<f64>| format!("{{\"p50\": {:.1}, \"p99\": {:.1}}}", pct(v, 50.0), pct(v, 99.0));
        let added = |v: &Vec<f64>| {
            let (a50, a99) = ((pct(v, 50.0) - pct(&direct, 50.0)) / 2.0, (pct(v, 99.0) - pct(&direct, 99.0)) / 2.0);
            format!("{{\"p50\": {a50:.1}, \"p99\": {a99:.1}}}")
        };
        let raise = |with: &Vec<f64>, alone: &Vec<f64>| pct(with, 99.0) - pct(alone, 99.0);
        println!("{{");
        println!("  \"streams\": {streams}, \"interval_ms\": {}, \"seconds\": {secs}, \"samples\": {},", interval.as_millis(), tunneled.len());
        println!("  \"bulk_limit\": {},", flag("bulk-limit"));
        println!("  \"direct_rtt_us\": {},", p(&direct));
        println!("  \"tunnel_rtt_us\": {},", p(&tunneled));
        println!("  \"added_one_way_us\": {},", added(&tunneled));
        println!("  \"relay_rtt_us\": {}, \"relay_added_one_way_us\": {},", p(&relayed), added(&relayed));
        println!("  \"setup_rtt_us\": {{\"direct\": {}, \"tunnel\": {}}},", p(&direct_setup), p(&tunnel_setup));
        println!("  \"tunnel_throughput_gbit_s\": {gbps:.2}, \"direct_throughput_gbit_s\": {direct_gbps:.2}, \"relay_throughput_gbit_s\": {relay_gbps:.2},");
        println!("  \"thin_rtt_us_alone\": {}, \"thin_rtt_us_with_bulk\": {},", p(&alone), p(&with_bulk));
        println!("  \"bulk_raises_thin_p99_us\": {:.1},", raise(&with_bulk, &alone));
        println!("  \"relay_thin_rtt_us_alone\": {}, \"relay_thin_rtt_us_with_bulk\": {},", p(&relay_alone), p(&relay_with_bulk));
        println!("  \"relay_bulk_raises_thin_p99_us\": {:.1},", raise(&relay_with_bulk, &relay_alone));
        for (name, run) in [("ssh", &ssh_run), ("yamux", &yamux_run)] {
            match run {
                Ok(r) => {
                    println!("  \"{name}\": {},", r.about);
                    println!("  \"{name}_rtt_us\": {}, \"{name}_added_one_way_us\": {},", p(&r.thin.steady), added(&r.thin.steady));
                    println!("  \"{name}_setup_rtt_us\": {},", p(&r.thin.setup));
                    println!("  \"{name}_throughput_gbit_s\": {:.2},", r.gbps);
                    println!("  \"{name}_thin_rtt_us_alone\": {}, \"{name}_thin_rtt_us_with_bulk\": {},", p(&r.alone), p(&r.with_bulk));
                    print!("  \"{name}_bulk_raises_thin_p99_us\": {:.1}", raise(&r.with_bulk, &r.alone));
                }
                Err(why) => print!("  \"{name}\": {{\"skipped\": {why:?}}}"),
            }
            println!("{}", if name == "yamux" { "" } else { "," });
        }
        println!("}}");
    });
}

/// One peer's measurements, as the tunnel's: thin streams, bulk, isolation.
struct PeerRun {
    thin: Rtts,
    gbps: f64,
    alone: Vec<f64>,
    with_bulk: Vec<f64>,
    /// What the peer is (JSON object).
    about: String,
}

impl PeerRun {
    async fn measure(
        echo: SocketAddr,
        sink: SocketAddr,
        about: String,
        streams: usize,
        interval: Duration,
        secs: u64,
        bulk_mb: u64,
    ) -> PeerRun {
        let thin = thin_rtts(echo, streams, interval, secs).await;
        let gbps = bulk(sink, bulk_mb << 20).await;
        let (alone, with_bulk) = isolation(echo, sink, secs).await;
        PeerRun { thin, gbps, alone, with_bulk, about }
    }
}

/// Thin-stream isolation: RTTs of 50 thin streams (100 B every 20 ms) through `echo`,
/// alone and next to a full-speed upload through `sink`.
async fn isolation(echo: SocketAddr, sink: SocketAddr, secs: u64) -> (Vec<f64>, Vec<f64>) {
    let alone = thin_rtts(echo, 50, Duration::from_millis(20), secs).await.steady;
    let bulk_task = tokio::spawn(bulk(sink, 100u64 << 30));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with_bulk = thin_rtts(echo, 50, Duration::from_millis(20), secs).await.steady;
    bulk_task.abort();
    (alone, with_bulk)
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[((p / 100.0) * (s.len() - 1) as f64).round() as usize]
}

/// Start core and edge, each on its own thread and daemon runtime. Returns the edge's
/// listeners for the echo and sink targets.
fn tunnel(echo: SocketAddr, sink: SocketAddr, rx: watch::Receiver<bool>) -> (SocketAddr, SocketAddr) {
    let psk = "psk = \"bench-psk-0123456789abcdef\"";
    // --bulk-limit: both ends bound unacknowledged bulk bytes (docs/mux.md "Bulk in flight").
    let bulk_limit = if flag("bulk-limit") { "bulk_limit = true\n" } else { "" };
    let bind = listener;
    let core_l = bind();
    let core_addr = core_l.local_addr().expect("addr");
    let core = CoreConfig::try_from(
        parse(&format!(
            "[trunk]\nlisten = \"{core_addr}\"\n{bulk_limit}[auth]\n{psk}\n[limits]\nmax_streams = 10000\n\
             [[target]]\nname = \"echo\"\nconnect = \"{echo}\"\n[[target]]\nname = \"sink\"\nconnect = \"{sink}\"\n"
        ))
        .expect("toml"),
    )
    .expect("core config");
    let core_rx = rx.clone();
    daemon("core", move || async move {
        let l = TcpListener::from_std(core_l).expect("listener");
        Core::run(core, l, Arc::new(Counters::default()), Registry::default(), core_rx).await
    });
    let (le, ls) = (bind(), bind());
    let (ae, as_) = (le.local_addr().expect("addr"), ls.local_addr().expect("addr"));
    let edge = EdgeConfig::try_from(
        parse(&format!(
            "[trunk]\nconnect = \"{core_addr}\"\nconnections = {}\n{bulk_limit}[auth]\n{psk}\n[limits]\nmax_streams = 10000\n\
             [[forward]]\nname = \"echo\"\nlisten = \"{ae}\"\n[[forward]]\nname = \"sink\"\nlisten = \"{as_}\"\n",
            arg("lanes", 1)
        ))
        .expect("toml"),
    )
    .expect("edge config");
    daemon("edge", move || async move {
        let ls =
            vec![TcpListener::from_std(le).expect("listener"), TcpListener::from_std(ls).expect("listener")];
        Edge::run(edge, ls, Arc::new(Counters::default()), None, rx).await
    });
    (ae, as_)
}

/// A listener to hand to another thread's runtime, with tokio's backlog (1024) rather
/// than std's 128: 1,000 clients connect at once, and an overflowing accept queue
/// delays their first bytes by SYN/data retransmissions (1–3 s).
fn listener() -> std::net::TcpListener {
    use std::os::fd::AsRawFd;
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    // SAFETY: a valid listening socket; listen() again only changes its backlog.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 1024) }, 0, "listen");
    l
}

/// Run a daemon on its own thread and runtime, as its own process would.
fn daemon<F, Fut>(name: &str, run: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = std::io::Result<()>>,
{
    let name = name.to_owned();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let rt = thinwan_mux::runtime().expect("runtime");
            if let Err(e) = rt.block_on(run()) {
                eprintln!("{name}: {e}");
            }
        })
        .expect("thread");
}

/// The floor for any two-hop tunnel: a bare user-space TCP relay (no TLS, no
/// multiplexing, one connection per client), on its own thread and daemon runtime.
/// Two of them in a row show what two extra user-space hops cost on this machine.
fn relay(to: SocketAddr) -> SocketAddr {
    let l = listener();
    let addr = l.local_addr().expect("addr");
    daemon("relay", move || async move {
        let l = TcpListener::from_std(l)?;
        loop {
            let (mut a, _) = l.accept().await?;
            tokio::spawn(async move {
                let Ok(mut b) = TcpStream::connect(to).await else { return };
                let _ = (a.set_nodelay(true), b.set_nodelay(true));
                let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
            });
        }
    });
    addr
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

/// Echo round-trip times (µs) of `n` streams sending 100 B every `interval` for `secs`:
/// steady state, and separately each stream's first exchange (it includes opening the
/// stream end to end, e.g. the core's connect to the target).
async fn thin_rtts(addr: SocketAddr, n: usize, interval: Duration, secs: u64) -> Rtts {
    let mut tasks = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    for i in 0..n {
        tasks.push(tokio::spawn(async move {
            let mut out = Rtts::default();
            // Spread the streams' phases over the interval, connects included: 1,000
            // simultaneous connects overflow accept queues, and the retransmissions
            // that follow are a property of the connection storm, not of the tunnel.
            tokio::time::sleep(interval.mul_f64(i as f64 / n as f64)).await;
            let Ok(mut s) = TcpStream::connect(addr).await else { return out };
            let _ = s.set_nodelay(true);
            let mut tick = tokio::time::interval(interval);
            let msg = [0x5au8; 100];
            let mut back = [0u8; 100];
            while Instant::now() < end {
                tick.tick().await;
                let t0 = Instant::now();
                if s.write_all(&msg).await.is_err() || s.read_exact(&mut back).await.is_err() {
                    break;
                }
                let rtt = t0.elapsed().as_secs_f64() * 1e6;
                if out.setup.is_empty() {
                    out.setup.push(rtt);
                } else {
                    out.steady.push(rtt);
                }
            }
            out
        }));
    }
    let mut all = Rtts::default();
    for t in tasks {
        let r = t.await.unwrap_or_default();
        all.steady.extend(r.steady);
        all.setup.extend(r.setup);
    }
    all
}

/// Round-trip samples, µs.
#[derive(Default)]
struct Rtts {
    /// Every exchange after a stream's first.
    steady: Vec<f64>,
    /// The first exchange of each stream.
    setup: Vec<f64>,
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

/// OpenSSH local forwarding as users deploy it: a private `sshd` on a free loopback port
/// (this run's host key and config only, `sshd -D -e -f`), and one `ssh -N -L` with a
/// forward to the echo and one to the sink target (`ssh -F none`, this run's user key
/// and known host only), so every stream is an RFC 4254 §7.2 `direct-tcpip` channel on
/// one SSH connection. The machine's sshd config, host keys and `~/.ssh` are not used.
/// The same set-up as the lab's (python/thinwan/substrates/lab/sshpeer.py).
struct SshPeer {
    /// The forward to the echo server.
    echo: SocketAddr,
    /// The forward to the sink.
    sink: SocketAddr,
    dir: PathBuf,
    remove_dir: bool,
    /// `ssh` first: stopping it ends the SSH connection and sshd's session child.
    children: Vec<Child>,
}

impl SshPeer {
    /// Keys and configs in `dir` (default: a fresh directory under the temp dir, removed
    /// on drop), then sshd and ssh; back once both forwards listen.
    fn start(echo: SocketAddr, sink: SocketAddr, dir: Option<PathBuf>) -> Result<SshPeer, String> {
        let sshd = ["/usr/sbin/sshd", "/usr/local/sbin/sshd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("sshd not found: install openssh-server (scripts/setup.sh as root)")?;
        let remove_dir = dir.is_none();
        let dir = dir.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("thinwan-bench-ssh-{}", std::process::id()))
        });
        let mut peer = SshPeer { echo, sink, dir, remove_dir, children: Vec::new() };
        std::fs::create_dir_all(&peer.dir).map_err(|e| format!("{}: {e}", peer.dir.display()))?;
        for (name, comment) in [("host_ed25519", "thinwan-sshd"), ("user_ed25519", "thinwan-ssh")] {
            let key = peer.dir.join(name);
            let _ = (std::fs::remove_file(&key), std::fs::remove_file(key.with_extension("pub")));
            run(Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
                .arg(&key))?;
        }
        let read =
            |name: &str| std::fs::read_to_string(peer.dir.join(name)).map_err(|e| format!("{name}: {e}"));
        let (host_pub, user_pub) = (read("host_ed25519.pub")?, read("user_ed25519.pub")?);
        let port = free_port();
        let (l_echo, l_sink) = (free_port(), free_port());
        let write = |name: &str, text: String| {
            std::fs::write(peer.dir.join(name), text).map_err(|e| format!("{name}: {e}"))
        };
        // RFC 4254 §7.2 direct-tcpip to the two targets only; no shell, pty, agent or X11.
        write(
            "authorized_keys",
            format!(
                "restrict,port-forwarding,permitopen=\"{echo}\",permitopen=\"{sink}\" {}",
                user_pub.trim()
            ),
        )?;
        let host_key: Vec<&str> = host_pub.split_whitespace().take(2).collect();
        write("known_hosts", format!("[127.0.0.1]:{port} {}\n", host_key.join(" ")))?;
        let d = peer.dir.display();
        write(
            "sshd_config",
            format!(
                "ListenAddress 127.0.0.1:{port}\nHostKey \"{d}/host_ed25519\"\nPidFile none\n\
                 AuthorizedKeysFile \"{d}/authorized_keys\"\nAuthenticationMethods publickey\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nStrictModes no\nAllowTcpForwarding local\n\
                 PermitOpen {echo} {sink}\nAllowAgentForwarding no\nAllowStreamLocalForwarding no\n\
                 X11Forwarding no\nPermitTTY no\nPermitTunnel no\nUseDNS no\nLogLevel VERBOSE\n"
            ),
        )?;
        // As root sshd needs its privilege-separation directory (Debian's service
        // creates it at start).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let log = |name: &str| std::fs::File::create(peer.dir.join(name)).map_err(|e| format!("{name}: {e}"));
        let sshd_log = log("sshd.log")?;
        let mut cmd = Command::new(sshd);
        cmd.args(["-D", "-e", "-f"]).arg(peer.dir.join("sshd_config")).stdout(Stdio::null()).stderr(sshd_log);
        peer.children.insert(0, spawn(cmd)?);
        wait_connect(SocketAddr::from(([127, 0, 0, 1], port)), &mut peer.children[0], "sshd")?;
        let mut cmd = Command::new("ssh");
        cmd.args(["-F", "none", "-N", "-v", "-E"]).arg(peer.dir.join("ssh.log"));
        cmd.args(["-p", &port.to_string(), "-i"]).arg(peer.dir.join("user_ed25519"));
        for o in [
            "IdentitiesOnly=yes".to_owned(),
            "IdentityAgent=none".to_owned(),
            "BatchMode=yes".to_owned(),
            "StrictHostKeyChecking=yes".to_owned(),
            format!("UserKnownHostsFile={d}/known_hosts"),
            "GlobalKnownHostsFile=/dev/null".to_owned(),
            "UpdateHostKeys=no".to_owned(),
            "ExitOnForwardFailure=yes".to_owned(),
            "ControlMaster=no".to_owned(),
            "ControlPath=none".to_owned(),
        ] {
            cmd.args(["-o", &o]);
        }
        cmd.args(["-L", &format!("127.0.0.1:{l_echo}:{echo}"), "-L", &format!("127.0.0.1:{l_sink}:{sink}")]);
        cmd.arg("127.0.0.1").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        peer.children.insert(0, spawn(cmd)?);
        peer.echo = SocketAddr::from(([127, 0, 0, 1], l_echo));
        peer.sink = SocketAddr::from(([127, 0, 0, 1], l_sink));
        // A probe connection through a forward reaches the echo / sink server, which
        // both take an extra client that closes at once.
        for addr in [peer.echo, peer.sink] {
            wait_connect(addr, &mut peer.children[0], "ssh -L")
                .map_err(|e| format!("{e}: {}", tail(&peer.dir.join("ssh.log"))))?;
        }
        Ok(peer)
    }

    /// `{"version": "OpenSSH_…", "cipher": "…"}` as JSON.
    fn describe(&self) -> String {
        let version = Command::new("ssh")
            .arg("-V")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
            .unwrap_or_default();
        let log = std::fs::read_to_string(self.dir.join("ssh.log")).unwrap_or_default();
        let cipher = log
            .lines()
            .find_map(|l| l.split("kex: client->server cipher: ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or("unknown");
        format!("{{\"version\": {version:?}, \"cipher\": {cipher:?}, \"connections\": 1}}")
    }
}

impl Drop for SshPeer {
    fn drop(&mut self) {
        for child in &mut self.children {
            // SAFETY: a child we spawned and have not reaped, so its pid is still ours.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = child.wait();
        }
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Spawn `cmd` so that it gets SIGTERM when this thread ends (Ctrl-C or a crash of the
/// benchmark included), not only when [`SshPeer`] is dropped.
fn spawn(mut cmd: Command) -> Result<Child, String> {
    let what = format!("{:?}", cmd.get_program());
    // SAFETY: prctl is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| format!("{what}: {e}"))
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{:?}: {}", cmd.get_program(), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// A loopback port free now (bound and released), each call a different one, taken below
/// the kernel's ephemeral range (`ip_local_port_range`): a port from that range can go to
/// any outgoing connection between our release and the peer's bind — ssh's own connection
/// to sshd took `ssh -L`'s listening port that way, and the forward failed.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .filter(|&p| p > 2048)
        .unwrap_or(32768);
    // Counting down from just below the range, over the unprivileged ports under it.
    let span = low - 1024;
    for _ in 0..span {
        let port = low - 1 - NEXT.fetch_add(1, Ordering::Relaxed) % span;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port below {low}")
}

/// Wait until `addr` accepts a connection, as long as `child` runs (10 s at most).
fn wait_connect(addr: SocketAddr, child: &mut Child, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("{what} exited ({status}) before listening on {addr}"));
        }
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("{what} not listening on {addr} within 10 s"))
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// A yamux-multiplexed forwarder (`thinwan-yamux-peer`, next to this binary): core and
/// edge as separate processes on free loopback ports, one TCP connection between them
/// carrying every stream (no TLS: the peer's own default, docs/mux.md "yamux as a peer").
struct YamuxPeer {
    /// The edge's forward to the echo server.
    echo: SocketAddr,
    /// The edge's forward to the sink.
    sink: SocketAddr,
    /// The edge first: its connection ends, then the core's session.
    children: Vec<Child>,
}

impl YamuxPeer {
    fn start(echo: SocketAddr, sink: SocketAddr) -> Result<YamuxPeer, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let bin = exe.with_file_name("thinwan-yamux-peer");
        if !bin.exists() {
            return Err(format!("{} not built (cargo build --release -p thinwan-mux)", bin.display()));
        }
        let core = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let (e, s) = (
            SocketAddr::from(([127, 0, 0, 1], free_port())),
            SocketAddr::from(([127, 0, 0, 1], free_port())),
        );
        let mut peer = YamuxPeer { echo: e, sink: s, children: Vec::new() };
        let mut cmd = Command::new(&bin);
        cmd.args(["core", "--listen", &core.to_string()]);
        cmd.args(["--target", &format!("echo={echo}"), "--target", &format!("sink={sink}")]);
        cmd.stdout(Stdio::null());
        peer.children.insert(0, spawn(cmd)?);
        wait_connect(core, &mut peer.children[0], "yamux core")?;
        let mut cmd = Command::new(&bin);
        cmd.args(["edge", "--connect", &core.to_string()]);
        cmd.args(["--forward", &format!("echo={e}"), "--forward", &format!("sink={s}")]);
        cmd.stdout(Stdio::null());
        peer.children.insert(0, spawn(cmd)?);
        for addr in [e, s] {
            wait_connect(addr, &mut peer.children[0], "yamux edge")?;
        }
        Ok(peer)
    }

    fn describe() -> String {
        "{\"implementation\": \"thinwan-yamux-peer (yamux crate 0.14, no TLS)\", \"connections\": 1}"
            .to_owned()
    }
}

impl Drop for YamuxPeer {
    fn drop(&mut self) {
        for child in &mut self.children {
            // SAFETY: a child we spawned and have not reaped, so its pid is still ours.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

//! `thinwan-net`: traffic pump, sink and UDP probes for the namespace lab.
//!
//! Run each inside its namespace (`ip netns exec NS thinwan-net …`). All times are
//! CLOCK_MONOTONIC nanoseconds, shared by every process on the host.

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use thinwan_net::config::parse_ms;
use thinwan_net::pump::{self, Peer, PumpOptions, SinkOptions, SockOpts, TrafficConfig};
use thinwan_proto::traffic::Model;
use thinwan_proto::Duration;

/// Traffic pump, sink and probes on real sockets.
#[derive(Parser, Debug)]
#[command(name = "thinwan-net", version)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Open (or accept) N connections to a sink and write the scenario's messages.
    Pump {
        /// Sink address, e.g. 198.18.2.1:5001.
        #[arg(long, required_unless_present = "listen", conflicts_with = "listen")]
        connect: Option<SocketAddr>,
        /// Accept the N connections here instead (each client sends its connection id,
        /// 4 bytes LE, first), e.g. behind a tunnel's core.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Connections.
        #[arg(long, default_value_t = 1)]
        conns: u32,
        /// Traffic model as JSON (the scenario's [traffic] keys + mss); default thin-client.
        #[arg(long)]
        traffic: Option<PathBuf>,
        /// Override the traffic model: thin-client | game | pcap | constant | bulk.
        #[arg(long, value_parser = parse_model)]
        model: Option<Model>,
        /// Seed (scenario seed + run).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Seconds during which sources write.
        #[arg(long, default_value_t = 10.0)]
        duration_s: f64,
        /// Seconds to wait after that before reading TCP_INFO and closing.
        #[arg(long, default_value_t = 2.0)]
        drain_s: f64,
        /// Connection i starts at i·stagger.
        #[arg(long, default_value = "0.25ms", value_parser = parse_ms)]
        stagger: f64,
        /// Time between connecting and the run start t0.
        #[arg(long, default_value = "200ms", value_parser = parse_ms)]
        start_delay: f64,
        /// With --connect: connection i binds local port BASE + i (fails, naming the
        /// port, if one is taken), so the link emulator knows each pair by port.
        #[arg(long, value_name = "BASE")]
        local_port_base: Option<u16>,
        /// TCP_NODELAY.
        #[arg(long)]
        nodelay: bool,
        /// TCP_NOTSENT_LOWAT bytes.
        #[arg(long)]
        notsent_lowat: Option<u32>,
        /// TCP_CONGESTION (e.g. reno, cubic).
        #[arg(long)]
        cc: Option<String>,
        /// SO_SNDBUF bytes.
        #[arg(long)]
        sndbuf: Option<u32>,
        /// Mark interactive messages on the wire: IP_TOS = DSCP CS4 (0x80) before each
        /// interactive write, 0 before bulk ones (for the emulator's label classifier).
        #[arg(long)]
        mark_interactive: bool,
        /// Message log (CSV).
        #[arg(long)]
        out: PathBuf,
        /// Connection log (JSON with TCP_INFO).
        #[arg(long)]
        conns_out: PathBuf,
    },
    /// Accept (or open) N connections and log each message's read time.
    Sink {
        /// Listen address, e.g. 0.0.0.0:5001.
        #[arg(long, required_unless_present = "connect", conflicts_with = "connect")]
        listen: Option<SocketAddr>,
        /// Open the N connections to this address instead (a pump with --listen, or a
        /// tunnel's edge in front of it).
        #[arg(long)]
        connect: Option<SocketAddr>,
        /// Connections to accept.
        #[arg(long, default_value_t = 1)]
        conns: u32,
        /// Set TCP_QUICKACK after every read.
        #[arg(long)]
        quickack: bool,
        /// SO_RCVBUF bytes.
        #[arg(long)]
        rcvbuf: Option<u32>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3600.0)]
        timeout_s: f64,
        /// Message log (CSV).
        #[arg(long)]
        out: PathBuf,
    },
    /// Send timestamped UDP probes.
    ProbeSend {
        /// Receiver address.
        #[arg(long)]
        to: SocketAddr,
        /// Probes.
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// Gap between probes.
        #[arg(long, default_value = "1ms", value_parser = parse_ms)]
        interval: f64,
        /// Datagram payload bytes (≥ 16).
        #[arg(long, default_value_t = 64)]
        size: usize,
    },
    /// Receive UDP probes and log one-way delays.
    ProbeRecv {
        /// Listen address.
        #[arg(long)]
        listen: SocketAddr,
        /// Stop after this many probes.
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// Stop after this long without a probe.
        #[arg(long, default_value = "2s", value_parser = parse_ms)]
        timeout: f64,
        /// Receive buffer bytes (SO_RCVBUFFORCE as root, else SO_RCVBUF); at high
        /// packet rates the default (~200 kB) overflows when the reader is descheduled.
        #[arg(long)]
        rcvbuf: Option<u32>,
        /// Output CSV.
        #[arg(long)]
        out: PathBuf,
    },
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    let args = Args::parse();
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || loop {
            if STOP.load(Ordering::Relaxed) {
                stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        });
    }
    match run(args.cmd, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("thinwan-net: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The peer of a pump or sink; clap guarantees exactly one of the two addresses.
fn peer(connect: Option<SocketAddr>, listen: Option<SocketAddr>) -> Peer {
    match (connect, listen) {
        (Some(a), _) => Peer::Connect(a),
        (None, Some(a)) => Peer::Listen(a),
        (None, None) => unreachable!("clap requires --connect or --listen"),
    }
}

fn ms(x: f64) -> Duration {
    Duration::from_millis_f64(x)
}

fn run(cmd: Cmd, stop: Arc<AtomicBool>) -> Result<(), Box<dyn std::error::Error>> {
    match cmd {
        Cmd::Pump {
            connect,
            listen,
            conns,
            traffic,
            model,
            seed,
            duration_s,
            drain_s,
            stagger,
            start_delay,
            local_port_base,
            nodelay,
            notsent_lowat,
            cc,
            sndbuf,
            mark_interactive,
            out,
            conns_out,
        } => {
            let mut t: TrafficConfig = match traffic {
                Some(p) => serde_json::from_str(
                    &std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?,
                )
                .map_err(|e| format!("{}: {e}", p.display()))?,
                None => TrafficConfig::default(),
            };
            if let Some(m) = model {
                t.model = m;
            }
            let o = PumpOptions {
                peer: peer(connect, listen),
                conns,
                traffic: t,
                seed,
                duration: Duration::from_secs_f64(duration_s),
                drain: Duration::from_secs_f64(drain_s),
                stagger: ms(stagger),
                local_port_base,
                start_delay: ms(start_delay),
                sock: SockOpts {
                    nodelay,
                    notsent_lowat,
                    congestion: cc,
                    sndbuf,
                    mark_interactive: mark_interactive.then_some(thinwan_net::config::INTERACTIVE_TOS),
                    ..Default::default()
                },
                out,
                conns_out,
            };
            pump::run_pump(&o, stop)?;
        }
        Cmd::Sink { listen, connect, conns, quickack, rcvbuf, timeout_s, out } => {
            let o = SinkOptions {
                peer: peer(connect, listen),
                conns,
                sock: SockOpts { quickack, rcvbuf, ..Default::default() },
                out,
                timeout: Duration::from_secs_f64(timeout_s),
            };
            pump::run_sink(&o, stop)?;
        }
        Cmd::ProbeSend { to, count, interval, size } => {
            let (sent, errors) = pump::probe_send(to, count, ms(interval), size)?;
            println!("{}", serde_json::json!({"sent": sent, "send_errors": errors}));
        }
        Cmd::ProbeRecv { listen, count, timeout, rcvbuf, out } => {
            let n = pump::probe_recv(listen, count, ms(timeout), rcvbuf, &out)?;
            eprintln!("thinwan-net: {n} probes received");
        }
    }
    Ok(())
}

/// A `traffic.model` name, as the scenario spells it.
fn parse_model(s: &str) -> Result<Model, String> {
    serde_json::from_value(serde_json::Value::String(s.into()))
        .map_err(|_| format!("unknown model {s:?} (thin-client, game, pcap, constant, bulk)"))
}

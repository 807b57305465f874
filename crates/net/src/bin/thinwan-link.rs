//! `thinwan-link`: the WAN link emulator between two TUN devices.
//!
//! ```text
//! server netns            root netns (this process)            client netns
//!  tws0 (TUN) ◀──fd──▶ [fwd: queue → rate → loss → delay] ──fd──▶ twc0 (TUN)
//!             ◀──fd── [rev: queue → rate → loss → delay] ◀──fd──
//! ```
//!
//! Prints one JSON line `{"ready": true, …}` on stdout once both devices are attached,
//! runs until SIGINT/SIGTERM, then writes the counters (JSON) to `--stats` and stdout.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use thinwan_net::config::{parse_jitter, parse_ms, parse_rate, GeConfig, LinkConfig};
use thinwan_net::emulator::{self, Options, Side};

/// WAN link emulator: rate, delay, jitter, loss and a queue discipline per direction,
/// between two TUN devices. Command-line link options apply to both directions and
/// override `--config`.
#[derive(Parser, Debug)]
#[command(name = "thinwan-link", version)]
struct Args {
    /// Server-side TUN as [NETNS:]IFNAME (input of the fwd direction).
    #[arg(long)]
    server: String,
    /// Client-side TUN as [NETNS:]IFNAME.
    #[arg(long)]
    client: String,
    /// Link configuration (JSON, see docs/lab.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Rate, e.g. 10mbit (0 = unshaped).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u64>,
    /// One-way delay, e.g. 20ms.
    #[arg(long, value_parser = parse_ms)]
    delay: Option<f64>,
    /// Jitter: none | uniform:10% | uniform:2ms | normal:1ms.
    #[arg(long, value_parser = check_jitter)]
    jitter: Option<String>,
    /// Let jitter reorder packets.
    #[arg(long)]
    reorder: bool,
    /// I.i.d. loss probability (0..1).
    #[arg(long)]
    loss: Option<f64>,
    /// Gilbert–Elliott loss: P,R[,LOSS_GOOD,LOSS_BAD].
    #[arg(long, value_parser = parse_ge)]
    ge: Option<GeConfig>,
    /// Queue limit in packets (0 = none).
    #[arg(long)]
    queue_packets: Option<u64>,
    /// Queue limit in bytes (0 = none).
    #[arg(long)]
    queue_bytes: Option<u64>,
    /// Queue discipline: droptail | priority.
    #[arg(long)]
    queue: Option<String>,
    /// Priority classifier: label (IP DSCP ≠ 0 is interactive) | gap[:MS] (per 5-tuple).
    #[arg(long)]
    classifier: Option<String>,
    /// Seed of the loss and jitter streams.
    #[arg(long)]
    seed: Option<u64>,
    /// Per-packet event log (binary, docs/lab.md).
    #[arg(long)]
    events: Option<PathBuf>,
    /// Directory for server.pcap and client.pcap.
    #[arg(long)]
    pcap_dir: Option<PathBuf>,
    /// Write the final counters (JSON) here too.
    #[arg(long)]
    stats: Option<PathBuf>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("thinwan-link: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let link = link_config(&args)?;
    let opts = Options {
        link,
        server: side(&args.server)?,
        client: side(&args.client)?,
        events: args.events.clone(),
        pcap_dir: args.pcap_dir.clone(),
    };
    install_signal_handlers();
    let (s, c) = emulator::attach(&opts)?;
    let ready = serde_json::json!({"ready": true, "pid": std::process::id(), "config": opts.link});
    println!("{ready}");
    // Flush so a parent reading our stdout sees readiness now.
    use std::io::Write;
    std::io::stdout().flush()?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !STOP.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    let report = emulator::run(&opts, s, c, stop)?;
    let _ = watcher.join();
    let text = serde_json::to_string(&report)?;
    if let Some(p) = &args.stats {
        std::fs::write(p, format!("{text}\n"))?;
    }
    println!("{text}");
    Ok(())
}

fn link_config(a: &Args) -> Result<LinkConfig, Box<dyn std::error::Error>> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            LinkConfig::from_json(&text).map_err(|e| format!("{}: {e}", p.display()))?
        }
        None => LinkConfig::default(),
    };
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    for d in [&mut cfg.fwd, &mut cfg.rev] {
        if let Some(r) = a.rate {
            d.rate_bps = r;
        }
        if let Some(x) = a.delay {
            d.delay_ms = x;
        }
        if let Some(j) = &a.jitter {
            d.jitter = j.clone();
        }
        d.reorder |= a.reorder;
        if let Some(l) = a.loss {
            d.loss = l;
        }
        if a.ge.is_some() {
            d.ge = a.ge;
        }
        if let Some(n) = a.queue_packets {
            d.queue.limit_packets = n;
        }
        if let Some(n) = a.queue_bytes {
            d.queue.limit_bytes = n;
        }
        if let Some(q) = &a.queue {
            d.queue.discipline = q.clone();
        }
        if let Some(c) = &a.classifier {
            let (kind, gap) = c.split_once(':').unwrap_or((c, ""));
            d.queue.priority_classifier = kind.to_string();
            if !gap.is_empty() {
                d.queue.classifier_gap_ms =
                    thinwan_net::config::parse_ms(gap).map_err(|e| format!("--classifier: {e}"))?;
            }
        }
    }
    cfg.validate()?;
    Ok(cfg)
}

fn side(spec: &str) -> Result<Side, String> {
    let (netns, ifname) = match spec.rsplit_once(':') {
        Some((ns, ifn)) => (Some(ns.to_string()), ifn.to_string()),
        None => (None, spec.to_string()),
    };
    if !thinwan_net::tun::valid_ifname(&ifname) {
        return Err(format!("bad interface name in {spec:?}"));
    }
    Ok(Side { ifname, netns })
}

fn check_jitter(s: &str) -> Result<String, String> {
    parse_jitter(s).map(|_| s.to_string())
}

fn parse_ge(s: &str) -> Result<GeConfig, String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("bad --ge {s:?} (P,R[,LOSS_GOOD,LOSS_BAD])"))?;
    match v.as_slice() {
        [p, r] => Ok(GeConfig { p: *p, r: *r, loss_good: 0.0, loss_bad: 1.0 }),
        [p, r, g, b] => Ok(GeConfig { p: *p, r: *r, loss_good: *g, loss_bad: *b }),
        _ => Err(format!("bad --ge {s:?} (P,R[,LOSS_GOOD,LOSS_BAD])")),
    }
}

fn install_signal_handlers() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

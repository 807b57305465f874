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
use thinwan_proto::qdisc::{ClassifierName, DisciplineName};

/// WAN link emulator: rate, delay, jitter, loss and a queue discipline per direction,
/// between two TUN devices. Command-line link options apply to both directions and
/// override `--config`.
#[derive(Parser, Debug)]
#[command(name = "thinwan-link", version, allow_negative_numbers = true)]
struct Args {
    /// Only check the link options: print the resolved link configuration as one JSON
    /// line and exit 0, or one line `thinwan-link: --FLAG: what is wrong` and exit 2.
    #[arg(long)]
    check: bool,
    /// Server-side TUN as [NETNS:]IFNAME (input of the fwd direction).
    #[arg(long, required_unless_present = "check")]
    server: Option<String>,
    /// Client-side TUN as [NETNS:]IFNAME.
    #[arg(long, required_unless_present = "check")]
    client: Option<String>,
    /// Link configuration (JSON, see docs/lab.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Rate, e.g. 10mbit (0 = unshaped).
    #[arg(long)]
    rate: Option<String>,
    /// One-way delay, e.g. 20ms.
    #[arg(long)]
    delay: Option<String>,
    /// Jitter: none | uniform:10% | uniform:2ms | normal:1ms.
    #[arg(long)]
    jitter: Option<String>,
    /// Let jitter reorder packets.
    #[arg(long)]
    reorder: bool,
    /// I.i.d. loss probability (0..1).
    #[arg(long)]
    loss: Option<String>,
    /// Gilbert–Elliott loss: P,R[,LOSS_GOOD,LOSS_BAD].
    #[arg(long)]
    ge: Option<String>,
    /// Queue limit in packets (0 = none).
    #[arg(long)]
    queue_packets: Option<String>,
    /// Queue limit in bytes (0 = none).
    #[arg(long)]
    queue_bytes: Option<String>,
    /// Queue discipline: droptail | priority | fq_codel | classes | qds (the last two need
    /// --rate; their keys, FQ-CoDel's and the QDS loop's come from --config). qds shapes
    /// the server → client direction only; the client → server one becomes droptail.
    #[arg(long)]
    queue: Option<String>,
    /// Priority classifier: label (IP DSCP ≠ 0 is interactive) | gap[:MS] (per 5-tuple).
    #[arg(long)]
    classifier: Option<String>,
    /// Seed of the loss and jitter streams.
    #[arg(long)]
    seed: Option<String>,
    /// Per-packet event log (binary, docs/lab.md).
    #[arg(long)]
    events: Option<PathBuf>,
    /// Directory for server.pcap and client.pcap.
    #[arg(long)]
    pcap_dir: Option<PathBuf>,
    /// With `--queue qds` (or fwd.queue.discipline = "qds"): the QDS control loop's log
    /// (binary, docs/lab.md "QDS log"); default: next to --events, as EVENTS.qds.bin.
    #[arg(long)]
    qds_log: Option<PathBuf>,
    /// Write the final counters (JSON) here too.
    #[arg(long)]
    stats: Option<PathBuf>,
}

/// A bad command line: the flag and what is wrong with it.
struct FlagError {
    flag: &'static str,
    why: String,
}

impl FlagError {
    fn new(flag: &'static str, why: impl std::fmt::Display) -> Self {
        FlagError { flag, why: why.to_string() }
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line, like every other error here (clap's own spans several).
            let text = e.to_string();
            let lines: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            eprintln!("thinwan-link: {}", lines.join(" ").trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let link = match link_config(&args) {
        Ok(link) => link,
        Err(e) => {
            eprintln!("thinwan-link: --{}: {}", e.flag, e.why);
            return ExitCode::from(2);
        }
    };
    if args.check {
        match serde_json::to_string(&link) {
            Ok(text) => {
                println!("{text}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("thinwan-link: error: {e}");
                return ExitCode::from(1);
            }
        }
    }
    match run(args, link) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("thinwan-link: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Args, link: LinkConfig) -> Result<(), Box<dyn std::error::Error>> {
    // clap makes both present unless --check, which never gets here.
    let (Some(server), Some(client)) = (&args.server, &args.client) else {
        return Err("--server and --client are required".into());
    };
    let opts = Options {
        link,
        server: side(server).map_err(|e| format!("--server: {e}"))?,
        client: side(client).map_err(|e| format!("--client: {e}"))?,
        events: args.events.clone(),
        pcap_dir: args.pcap_dir.clone(),
        qds_log: args.qds_log.clone().or_else(|| args.events.as_ref().map(|e| e.with_extension("qds.bin"))),
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

/// The link configuration: `--config` (or the defaults), then each link flag over both
/// directions. An error names the flag whose value is wrong.
fn link_config(a: &Args) -> Result<LinkConfig, FlagError> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| FlagError::new("config", format!("{}: {e}", p.display())))?;
            LinkConfig::from_json(&text)
                .map_err(|e| FlagError::new("config", format!("{}: {e}", p.display())))?
        }
        None => LinkConfig::default(),
    };
    if let Some(s) = &a.seed {
        cfg.seed = s
            .trim()
            .parse()
            .map_err(|_| FlagError::new("seed", format!("not an unsigned integer: {s:?}")))?;
    }
    let number = |flag: &'static str, s: &str| -> Result<f64, FlagError> {
        s.trim().parse::<f64>().map_err(|_| FlagError::new(flag, format!("not a number: {s:?}")))
    };
    let count = |flag: &'static str, s: &str| -> Result<u64, FlagError> {
        s.trim().parse::<u64>().map_err(|_| FlagError::new(flag, format!("not an unsigned integer: {s:?}")))
    };
    for (rev, d) in [(false, &mut cfg.fwd), (true, &mut cfg.rev)] {
        if let Some(s) = &a.rate {
            d.rate_bps = parse_rate(s).map_err(|e| FlagError::new("rate", e))?;
        }
        if let Some(s) = &a.delay {
            d.delay_ms = parse_ms(s).map_err(|e| FlagError::new("delay", e))?;
        }
        if let Some(s) = &a.jitter {
            parse_jitter(s).map_err(|e| FlagError::new("jitter", e))?;
            d.jitter = s.clone();
        }
        d.reorder |= a.reorder;
        if let Some(s) = &a.loss {
            d.loss = number("loss", s)?;
        }
        if let Some(s) = &a.ge {
            d.ge = Some(parse_ge(s).map_err(|e| FlagError::new("ge", e))?);
        }
        if let Some(s) = &a.queue_packets {
            d.queue.limit_packets = count("queue-packets", s)?;
        }
        if let Some(s) = &a.queue_bytes {
            d.queue.limit_bytes = count("queue-bytes", s)?;
        }
        if let Some(s) = &a.queue {
            d.queue.discipline = match s.trim() {
                "droptail" => DisciplineName::Droptail,
                "priority" => DisciplineName::Priority,
                "fq_codel" => DisciplineName::FqCodel,
                "classes" => DisciplineName::Classes,
                // The QDS loop shapes the downlink; the ACK direction stays a FIFO with the
                // same limits, as in the simulator.
                "qds" if rev => DisciplineName::Droptail,
                "qds" => DisciplineName::Qds,
                other => {
                    return Err(FlagError::new(
                        "queue",
                        format!("unknown discipline {other:?} (droptail, priority, fq_codel, classes, qds)"),
                    ))
                }
            };
        }
        if let Some(s) = &a.classifier {
            let bad = || FlagError::new("classifier", format!("expected label, gap or gap:MS, got {s:?}"));
            d.queue.priority_classifier = match s.trim().split_once(':') {
                None if s.trim() == "label" => ClassifierName::Label,
                None if s.trim() == "gap" => ClassifierName::Gap,
                Some(("gap", gap)) => {
                    d.queue.classifier_gap_ms = parse_ms(gap)
                        .map_err(|e| FlagError::new("classifier", format!("gap threshold: {e}")))?;
                    ClassifierName::Gap
                }
                _ => return Err(bad()),
            };
        }
    }
    // What a value does not allow (a loss of 2, a gap of 0 ms, no queue limit), blamed on
    // the flag that set the key, else on the file.
    if let Err(e) = cfg.validate() {
        let (key, why) = e.0.split_once(": ").unwrap_or((&e.0, ""));
        let key = key.trim_start_matches("fwd.").trim_start_matches("rev.");
        let flag = match key {
            "delay_ms" if a.delay.is_some() => "delay",
            "loss" if a.loss.is_some() => "loss",
            k if k.starts_with("ge.") && a.ge.is_some() => "ge",
            "jitter" if a.jitter.is_some() => "jitter",
            "queue.limit_bytes, limit_packets" if a.queue_packets.is_some() => "queue-packets",
            "queue.limit_bytes, limit_packets" if a.queue_bytes.is_some() => "queue-bytes",
            "queue.classifier_gap_ms" if a.classifier.is_some() => "classifier",
            "queue.discipline" if a.queue.is_some() => "queue",
            // `--queue qds` without a --config that names the classifier's model: the
            // key stays in the message.
            k if k.starts_with("qds.") && a.queue.is_some() && a.config.is_none() => {
                return Err(FlagError::new("queue", e));
            }
            // `--queue classes` without a --config that lists the classes.
            "queue.class_rate_shares" if a.queue.is_some() => "queue",
            _ => return Err(FlagError::new("config", e)),
        };
        return Err(FlagError::new(flag, why));
    }
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

fn parse_ge(s: &str) -> Result<GeConfig, String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("expected P,R[,LOSS_GOOD,LOSS_BAD], got {s:?}"))?;
    match v.as_slice() {
        [p, r] => Ok(GeConfig { p: *p, r: *r, loss_good: 0.0, loss_bad: 1.0 }),
        [p, r, g, b] => Ok(GeConfig { p: *p, r: *r, loss_good: *g, loss_bad: *b }),
        _ => Err(format!("expected P,R[,LOSS_GOOD,LOSS_BAD], got {s:?}")),
    }
}

fn install_signal_handlers() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

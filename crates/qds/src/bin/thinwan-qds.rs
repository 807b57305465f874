//! `thinwan-qds CONFIG.toml`: the QDS middlebox daemon (docs/qds-lab.md).
//!
//! Exit codes: 0 after SIGTERM/SIGINT with the interface restored; 1 when the daemon
//! cannot run (missing interface, a qdisc it could not restore, netlink refusing);
//! 2 for a bad configuration or command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Parser;
use thinwan_qds::config::{Config, ControllerKind};
use thinwan_qds::control::{Control, Static};
use thinwan_qds::daemon;
use thinwan_qds::engine::Qds;
use thinwan_qds::metrics::{self, Metrics};

/// QDS middlebox daemon: captures the middlebox's TCP flows, decides each flow's class
/// and the class rates every period, and programs Linux HTB on the downlink over
/// netlink. Restores the downlink's original qdisc on exit.
#[derive(Parser, Debug)]
#[command(name = "thinwan-qds", version)]
struct Args {
    /// Configuration file (TOML; every key in docs/qds-lab.md).
    config: PathBuf,
    /// Only validate the configuration: print it resolved as JSON and exit.
    #[arg(long)]
    check: bool,
    /// Only restore the downlink from a state file a killed run left, and exit.
    #[arg(long)]
    restore: bool,
    /// Write the run's counters (JSON) here at exit, as well as to stdout.
    #[arg(long)]
    stats: Option<PathBuf>,
    /// Write one CSV row per managed flow per period here (its RTT and halves, rate,
    /// type, class).
    #[arg(long)]
    flows_log: Option<PathBuf>,
    /// Benchmark: instead of running, time this many updates of all class rates (and
    /// of the filters of --bench-flows flows, a tenth of them moving each time), print
    /// the latency distribution (µs, JSON) and restore.
    #[arg(long)]
    bench_updates: Option<usize>,
    /// Flow filters installed for --bench-updates.
    #[arg(long, default_value_t = 0)]
    bench_flows: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("thinwan-qds: {e}");
            return ExitCode::from(2);
        }
    };
    // The decider is built from the configuration (the model file read and checked) before
    // anything else, so its errors are configuration errors too.
    let control = match build_control(&cfg) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("thinwan-qds: {}: {e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!("{}", serde_json::to_string(&cfg).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    match run(&args, &cfg, control) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("thinwan-qds: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &Args, cfg: &Config, mut control: Box<dyn Control>) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| format!("signal handler: {e}"))?;
    }
    if args.restore {
        return restore_only(cfg);
    }
    if let Some(n) = args.bench_updates {
        let q = daemon::bench(cfg, control.classes(), args.bench_flows, n, &stop)?;
        let out =
            serde_json::json!({"classes": control.classes(), "flows": args.bench_flows, "update_us": q});
        println!("{out}");
        return Ok(());
    }
    let m = Metrics::new();
    if let Some(addr) = cfg.metrics {
        let l = metrics::bind(addr).map_err(|e| format!("metrics: {addr}: {e}"))?;
        m.serve(l);
    }
    let stats = daemon::run(cfg, control.as_mut(), &m, &stop, args.flows_log.as_deref())?;
    let json = serde_json::to_string(&stats).unwrap_or_default();
    println!("{json}");
    if let Some(p) = &args.stats {
        std::fs::write(p, json + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

fn build_control(cfg: &Config) -> Result<Box<dyn Control>, String> {
    match cfg.controller {
        ControllerKind::Static => {
            let table = cfg.static_classes.clone().ok_or("static: missing [static] table")?;
            Ok(Box::new(Static::new(table, cfg.capacity_bytes())))
        }
        ControllerKind::Qds => Ok(Box::new(Qds::new(cfg)?)),
    }
}

fn restore_only(cfg: &Config) -> Result<(), String> {
    use thinwan_qds::{netlink::Socket, restore};
    let ifindex = daemon::ifindex(&cfg.downlink, "downlink")?;
    let path = cfg.state_file();
    let Some(state) = restore::load(&path).map_err(|e| format!("state file: {e}"))? else {
        eprintln!("thinwan-qds: no state file {}: nothing to restore", path.display());
        return Ok(());
    };
    let mut sock = Socket::open().map_err(|e| format!("netlink: {e}"))?;
    restore::restore(&mut sock, ifindex, &state.original)
        .map_err(|e| format!("netlink: {e}"))?
        .map_err(|e| format!("restoring {}: {e}", cfg.downlink))?;
    std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("thinwan-qds: restored {} (left by pid {})", cfg.downlink, state.pid);
    Ok(())
}

//! The daemon's life: restore what a killed run left, save the downlink's original
//! qdisc, install HTB, then loop — capture until the next period, decide, program —
//! until SIGTERM/SIGINT, and put the original qdisc back.
//!
//! One thread does capture and control (the metrics listener has its own): `poll(2)` on
//! the capture sockets' rings with the time left to the next period as its timeout.
//! Packets carry the kernel's arrival time, so when they are read does not matter; an
//! update (tens of µs) only delays reading, never drops: each ring holds 8 MiB.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;
use thinwan_proto::Instant;

use crate::capture::{realtime_ns, Capture, Toward};
use crate::config::Config;
use crate::control::{flow_of, Control, Decision};
use crate::htb::{Htb, Rate};
use crate::metrics::Metrics;
use crate::netlink::Socket;
use crate::restore::{self, State};
use crate::tc::FiveTuple;
use thinwan_proto::qds::classify::{Features, N_FEATURES};
use thinwan_proto::qds::monitor::Segment;

/// The longest a packet can sit in a ring block before the kernel hands it over (the
/// block timeout, plus a millisecond of margin for the timer).
const HANDOVER: thinwan_proto::Duration =
    thinwan_proto::Duration::from_millis(crate::ring::BLOCK_TIMEOUT_MS as u64 + 1);

/// What a run did (printed as JSON at exit, and written to `--stats`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    /// Packets read from the capture sockets.
    pub packets: u64,
    /// Of them, TCP packets of managed flows.
    pub managed_packets: u64,
    /// Periods run.
    pub updates: u64,
    /// Update latency distribution, µs.
    pub update_us: Quantiles,
    /// Netlink requests the kernel refused.
    pub netlink_errors: u64,
    /// Most flows managed at once.
    pub peak_flows: usize,
    /// Whether a state file of an earlier run was found and restored at start.
    pub restored_at_start: bool,
    /// CPU time of the process, seconds (user + system).
    pub cpu_s: f64,
    /// Of it, in the kernel (system calls: capture reads, netlink).
    pub cpu_sys_s: f64,
    /// Wall time of the loop, seconds.
    pub wall_s: f64,
}

/// Quantiles of a sample, in its unit.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Quantiles {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Quantiles {
    /// Nearest-rank quantiles of `v`.
    pub fn of(mut v: Vec<f64>) -> Quantiles {
        if v.is_empty() {
            return Quantiles::default();
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Quantiles {
            count: v.len(),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
        }
    }
}

/// A daemon error: the message to print; the exit code is 1.
pub type Error = String;

/// The interface index of `name`.
pub fn ifindex(name: &str, key: &str) -> Result<u32, Error> {
    let c = std::ffi::CString::new(name).map_err(|_| format!("{key}: {name:?} is not an interface name"))?;
    // SAFETY: c is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(format!("{key}: no interface {name:?} in this network namespace"));
    }
    Ok(i)
}

/// The downlink, claimed: its original qdisc saved and HTB installed. Dropping it
/// does not restore; call [`Claim::release`].
pub struct Claim {
    ifindex: u32,
    state: State,
    state_file: std::path::PathBuf,
    /// The netlink socket.
    pub sock: Socket,
    /// The installed tree.
    pub htb: Htb,
    /// Whether a previous run's state file was restored first.
    pub restored_at_start: bool,
}

impl Claim {
    /// Restore a killed run's leftovers, save the original, install HTB with `rates`.
    pub fn take(cfg: &Config, rates: &[Rate]) -> Result<Claim, Error> {
        let ifindex = ifindex(&cfg.downlink, "downlink")?;
        let mut sock = Socket::open().map_err(|e| format!("netlink: {e}"))?;
        let state_file = cfg.state_file();
        let nl = |e: io::Error| format!("netlink: {e}");
        let restored_at_start = match restore::load(&state_file).map_err(|e| format!("state file: {e}"))? {
            Some(old) if old.pid != std::process::id() && daemon_alive(old.pid) => {
                return Err(format!(
                    "another thinwan-qds (pid {}) manages {} (state file {}); stop it first",
                    old.pid,
                    cfg.downlink,
                    state_file.display()
                ));
            }
            Some(old) => {
                restore::restore(&mut sock, ifindex, &old.original).map_err(nl)?.map_err(|e| {
                    format!(
                        "restoring {} from {} (left by pid {}): {e}",
                        cfg.downlink,
                        state_file.display(),
                        old.pid
                    )
                })?;
                std::fs::remove_file(&state_file).map_err(|e| format!("{}: {e}", state_file.display()))?;
                eprintln!(
                    "thinwan-qds: restored {} from {} (left by pid {})",
                    cfg.downlink,
                    state_file.display(),
                    old.pid
                );
                true
            }
            None => false,
        };
        let original = restore::snapshot(&mut sock, ifindex, &cfg.downlink)
            .map_err(nl)?
            .map_err(|e| format!("refusing to start: {e}"))?;
        let state = State { interface: cfg.downlink.clone(), original, pid: std::process::id() };
        // Saved before the interface is touched: a kill at any later point is undone by
        // the next start.
        restore::save(&state_file, &state)
            .map_err(|e| format!("state file {}: {e}", state_file.display()))?;
        let htb = match Htb::install(&mut sock, ifindex, cfg.capacity_bytes(), rates, cfg.class_queue_packets)
            .map_err(nl)?
        {
            Ok(h) => h,
            Err(e) => {
                // Whatever part of the tree was created goes; the original comes back.
                // Should that fail too, the state file stays for the next start.
                if let Ok(Ok(())) = restore::restore(&mut sock, ifindex, &state.original) {
                    let _ = std::fs::remove_file(&state_file);
                }
                return Err(e);
            }
        };
        Ok(Claim { ifindex, state, state_file, sock, htb, restored_at_start })
    }

    /// Put the original qdisc back and remove the state file.
    pub fn release(mut self) -> Result<(), Error> {
        restore::restore(&mut self.sock, self.ifindex, &self.state.original)
            .map_err(|e| format!("netlink: {e}"))?
            .map_err(|e| {
                format!(
                    "restoring {}: {e} (the state file {} is kept: the next start retries)",
                    self.state.interface,
                    self.state_file.display()
                )
            })?;
        std::fs::remove_file(&self.state_file).map_err(|e| format!("{}: {e}", self.state_file.display()))
    }
}

/// Run until `stop` is set. Prints `{"ready":true,…}` once HTB is installed and the
/// captures are open.
pub fn run(
    cfg: &Config,
    control: &mut dyn Control,
    metrics: &Arc<Metrics>,
    stop: &AtomicBool,
    flows_log: Option<&std::path::Path>,
) -> Result<Stats, Error> {
    let mut log = match flows_log {
        Some(p) => Some(FlowLog::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let down = ifindex(&cfg.downlink, "downlink")?;
    let up = ifindex(&cfg.uplink, "uplink")?;
    let mut caps = [
        Capture::open(up, Toward::Client).map_err(|e| format!("capture on {}: {e}", cfg.uplink))?,
        Capture::open(down, Toward::Server).map_err(|e| format!("capture on {}: {e}", cfg.downlink))?,
    ];
    let mut claim = Claim::take(cfg, &control.initial_rates())?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        loop_until(cfg, control, metrics, stop, &mut caps, &mut claim, log.as_mut())
    }));
    let restored_at_start = claim.restored_at_start;
    let released = claim.release();
    let restored = || released.clone().err().unwrap_or_else(|| "the original qdisc was restored".into());
    let mut stats = match result {
        Ok(Ok(stats)) => stats,
        Ok(Err(e)) => return Err(format!("{e}; {}", restored())),
        Err(_) => return Err(format!("the control loop panicked; {}", restored())),
    };
    released?;
    stats.restored_at_start = restored_at_start;
    Ok(stats)
}

fn loop_until(
    cfg: &Config,
    control: &mut dyn Control,
    metrics: &Arc<Metrics>,
    stop: &AtomicBool,
    caps: &mut [Capture; 2],
    claim: &mut Claim,
    mut log: Option<&mut FlowLog>,
) -> Result<Stats, Error> {
    let start = std::time::Instant::now();
    let (cpu0, sys0) = cpu_times();
    let now = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let period = std::time::Duration::from_secs_f64(cfg.qds.period_ms / 1e3);
    let mut stats = Stats::default();
    let mut latencies = Vec::new();
    let mut next = start + period;
    let mut pfds: Vec<libc::pollfd> =
        caps.iter().map(|c| libc::pollfd { fd: c.raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    let mut batch = Vec::new();
    let mut held: Vec<Held> = Vec::new();
    let dir_label = |d: Toward| {
        vec![("direction", if d == Toward::Client { "to_client" } else { "to_server" }.to_string())]
    };
    println!(
        "{}",
        serde_json::json!({"ready": true, "downlink": cfg.downlink, "classes": claim.htb.classes(), "pid": std::process::id()})
    );
    while !stop.load(Ordering::Relaxed) {
        let wait = next.saturating_duration_since(std::time::Instant::now());
        if !wait.is_zero() {
            // SAFETY: pfds is a valid array of pollfd of the given length.
            let r = unsafe {
                libc::poll(
                    pfds.as_mut_ptr(),
                    pfds.len() as libc::nfds_t,
                    wait.as_millis().max(1) as libc::c_int,
                )
            };
            if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return Err(format!("poll: {}", io::Error::last_os_error()));
            }
            // Packets of both sockets are handed to the decider in arrival order: a round
            // observes those that arrived before it began less the ring's block timeout
            // (all of them have been handed over by now), and holds later ones, which the
            // other socket may not have caught up with.
            let cutoff = Instant::from_nanos(now().as_nanos().saturating_sub(HANDOVER.as_nanos()));
            for (cap, pfd) in caps.iter_mut().zip(&pfds) {
                if pfd.revents == 0 {
                    continue;
                }
                let mut n = 0u64;
                loop {
                    batch.clear();
                    let k = cap.recv_batch(&mut batch).map_err(|e| format!("capture: {e}"))?;
                    if k == 0 {
                        break;
                    }
                    n += k as u64;
                    // A packet's instant: now minus its age since the kernel stamped it
                    // (ages, not absolute wall-clock times, so a clock step does no harm).
                    let (t, wall) = (now(), realtime_ns());
                    for c in &batch {
                        let Some(p) = c.tcp else { continue };
                        if let Some(flow) = flow_of(cfg, cap.dir, &p) {
                            let age = if c.stamp_ns == 0 { 0 } else { wall.saturating_sub(c.stamp_ns) };
                            let at = Instant::from_nanos(t.as_nanos().saturating_sub(age));
                            held.push((at, flow, cap.dir, p.segment()));
                            stats.managed_packets += 1;
                        }
                    }
                }
                stats.packets += n;
                metrics.packets.get_or_create(&dir_label(cap.dir)).inc_by(n);
            }
            feed(control, &mut held, cutoff);
            continue;
        }
        next += period;
        // The picture is complete up to HANDOVER ago: decide as of then, so the decider
        // sees time only move forward.
        let t = Instant::from_nanos(now().as_nanos().saturating_sub(HANDOVER.as_nanos()));
        feed(control, &mut held, t);
        let decision = control.tick(t);
        let t0 = std::time::Instant::now();
        let class_of: Vec<(FiveTuple, usize)> = decision.flows.iter().map(|f| (f.flow, f.class)).collect();
        let report = claim
            .htb
            .update(&mut claim.sock, &class_of, &decision.rates)
            .map_err(|e| format!("netlink: {e}"))?;
        let dt = t0.elapsed().as_secs_f64();
        latencies.push(dt * 1e6);
        stats.updates += 1;
        stats.netlink_errors += report.errors.len() as u64;
        stats.peak_flows = stats.peak_flows.max(decision.flows.len());
        for e in report.errors.iter().take(3) {
            eprintln!("thinwan-qds: netlink: {e}");
        }
        publish(metrics, &decision, claim.htb.classes(), claim.htb.filters(), dt, report.errors.len());
        if let Some(l) = log.as_deref_mut() {
            l.write(t, &decision).map_err(|e| format!("flow log: {e}"))?;
        }
    }
    stats.update_us = Quantiles::of(latencies);
    stats.wall_s = start.elapsed().as_secs_f64();
    let (cpu1, sys1) = cpu_times();
    (stats.cpu_s, stats.cpu_sys_s) = (cpu1 - cpu0, sys1 - sys0);
    Ok(stats)
}

/// `--flows-log`: one CSV row per managed flow per period — what the daemon saw and
/// decided (times in ms; empty = not measured).
pub struct FlowLog {
    out: std::io::BufWriter<std::fs::File>,
}

impl FlowLog {
    /// The columns before the classifier's features (`Features::NAMES`, which follow).
    pub const HEADER: &'static str =
        "t_ms,server,server_port,client,client_port,app,class,rtt_ms,client_half_ms,server_half_ms,rate_bps";

    /// Create (truncate) `path` and write the header.
    pub fn create(path: &std::path::Path) -> io::Result<FlowLog> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(out, "{},{}", Self::HEADER, Features::NAMES.join(","))?;
        Ok(FlowLog { out })
    }

    /// The period at `t`.
    pub fn write(&mut self, t: Instant, d: &Decision) -> io::Result<()> {
        let ms = |x: Option<f64>| x.map(|s| format!("{:.3}", s * 1e3)).unwrap_or_default();
        for f in &d.flows {
            writeln!(
                self.out,
                "{:.1},{},{},{},{},{},{},{},{},{},{},{}",
                t.as_nanos() as f64 / 1e6,
                f.flow.server,
                f.flow.server_port,
                f.flow.client,
                f.flow.client_port,
                f.app.unwrap_or(""),
                f.class,
                ms(f.rtt),
                ms(f.halves.0),
                ms(f.halves.1),
                f.rate_bps.map(|r| format!("{r:.0}")).unwrap_or_default(),
                match &f.features {
                    Some(x) => x.iter().map(|v| format!("{v}")).collect::<Vec<_>>().join(","),
                    None => ",".repeat(N_FEATURES - 1),
                },
            )?;
        }
        // A reader (`tail -f`, a test) sees whole periods.
        self.out.flush()
    }
}

/// A captured packet of a managed flow, waiting to be observed in time order.
type Held = (Instant, FiveTuple, Toward, Segment);

/// Observe, in time order, the held packets that arrived up to `until`; keep the rest.
fn feed(control: &mut dyn Control, held: &mut Vec<Held>, until: Instant) {
    held.sort_by_key(|h| h.0);
    let n = held.partition_point(|h| h.0 <= until);
    for (at, flow, toward, seg) in held.drain(..n) {
        control.observe(at, flow, toward, &seg);
    }
}

fn publish(m: &Metrics, d: &Decision, classes: usize, filters: usize, dt: f64, errors: usize) {
    m.update_latency.observe(dt);
    m.netlink_errors.inc_by(errors as u64);
    m.filters.set(filters as i64);
    let mut per_class = vec![0i64; classes];
    let mut per_type = std::collections::BTreeMap::<&str, i64>::new();
    for f in &d.flows {
        per_class[f.class.min(classes - 1)] += 1;
        *per_type.entry(f.app.unwrap_or("unknown")).or_default() += 1;
        if let Some(r) = f.rtt {
            m.rtt.observe(r);
        }
    }
    for (k, n) in per_class.iter().enumerate() {
        m.flows.get_or_create(&vec![("class", k.to_string())]).set(*n);
    }
    for t in ["video", "audio", "data", "interactive", "unknown"] {
        m.flows_by_type
            .get_or_create(&vec![("type", t.to_string())])
            .set(per_type.get(t).copied().unwrap_or(0));
    }
    for (k, r) in d.rates.iter().enumerate() {
        m.class_rate.get_or_create(&vec![("class", k.to_string())]).set(r.rate as f64 * 8.0);
    }
}

/// Is `pid` a running thinwan-qds (not a recycled pid of another program)?
fn daemon_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == "thinwan-qds")
}

/// CPU time of this process: (user + system, system), seconds.
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (tv(ru.ru_utime) + tv(ru.ru_stime), tv(ru.ru_stime))
}

/// `--bench-updates`: install HTB, then `updates` updates of all class rates with
/// `flows` flow filters of which a tenth move class each time; the latency
/// distribution in µs. The original qdisc is restored afterwards.
pub fn bench(
    cfg: &Config,
    classes: usize,
    flows: usize,
    updates: usize,
    stop: &AtomicBool,
) -> Result<Quantiles, Error> {
    let cap = cfg.capacity_bytes();
    let even = vec![Rate { rate: cap / classes as u64, ceil: cap }; classes];
    let mut claim = Claim::take(cfg, &even)?;
    let result = bench_updates(&mut claim, cap, classes, flows, updates, stop);
    claim.release()?;
    result
}

fn bench_updates(
    claim: &mut Claim,
    cap: u64,
    classes: usize,
    flows: usize,
    updates: usize,
    stop: &AtomicBool,
) -> Result<Quantiles, Error> {
    let even = vec![Rate { rate: cap / classes as u64, ceil: cap }; classes];
    let base = FiveTuple {
        server: "198.18.1.1".parse().expect("literal"),
        server_port: 5000,
        client: "198.18.2.1".parse().expect("literal"),
        client_port: 40000,
    };
    let flow = |i: usize| FiveTuple {
        server_port: 5000 + (i % 1000) as u16,
        client_port: 40000 + (i / 1000) as u16,
        ..base
    };
    let mut lat = Vec::with_capacity(updates);
    let mut errors = 0;
    // A fixed LCG: the same sequence of rates and moves on every run.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x >> 33
    };
    let mut class_of: Vec<(FiveTuple, usize)> = (0..flows).map(|i| (flow(i), i % classes)).collect();
    claim.htb.update(&mut claim.sock, &class_of, &even).map_err(|e| format!("netlink: {e}"))?;
    for _ in 0..updates {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let w: Vec<u64> = (0..classes).map(|_| 1 + rnd() % 100).collect();
        let sum: u64 = w.iter().sum();
        let rates: Vec<Rate> = w.iter().map(|wk| Rate { rate: (cap * wk / sum).max(1), ceil: cap }).collect();
        for _ in 0..flows / 10 {
            let i = rnd() as usize % flows;
            class_of[i].1 = rnd() as usize % classes;
        }
        let t0 = std::time::Instant::now();
        let r = claim.htb.update(&mut claim.sock, &class_of, &rates).map_err(|e| format!("netlink: {e}"))?;
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
        errors += r.errors.len();
        if let Some(e) = r.errors.first() {
            eprintln!("thinwan-qds: netlink: {e}");
        }
    }
    if errors > 0 {
        return Err(format!("{errors} netlink requests were refused"));
    }
    Ok(Quantiles::of(lat))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Decision;

    /// Records the instants it observes.
    struct Recorder(Vec<u64>);

    impl Control for Recorder {
        fn classes(&self) -> usize {
            1
        }
        fn initial_rates(&self) -> Vec<Rate> {
            Vec::new()
        }
        fn observe(&mut self, now: Instant, _: FiveTuple, _: Toward, _: &Segment) {
            self.0.push(now.as_nanos());
        }
        fn tick(&mut self, _: Instant) -> Decision {
            Decision::default()
        }
    }

    #[test]
    fn packets_of_both_sockets_are_observed_in_arrival_order() {
        let f = FiveTuple {
            server: [1, 1, 1, 1].into(),
            server_port: 1,
            client: [2, 2, 2, 2].into(),
            client_port: 2,
        };
        let h = |t: u64, d| (Instant::from_nanos(t), f, d, Segment::default());
        // The uplink's batch was read first, then the downlink's, which holds an older ACK.
        let mut held =
            vec![h(30, Toward::Client), h(50, Toward::Client), h(20, Toward::Server), h(60, Toward::Server)];
        let mut r = Recorder(Vec::new());
        feed(&mut r, &mut held, Instant::from_nanos(40));
        assert_eq!(r.0, vec![20, 30], "up to the round's start, in time order");
        assert_eq!(held.len(), 2, "later packets wait for the next round");
        feed(&mut r, &mut held, Instant::from_nanos(100));
        assert_eq!(r.0, vec![20, 30, 50, 60]);
        assert!(held.is_empty());
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let q = Quantiles::of((1..=100).map(f64::from).collect());
        assert_eq!((q.count, q.p50, q.p90, q.p99, q.max), (100, 50.0, 90.0, 99.0, 100.0));
        assert_eq!(Quantiles::of(Vec::new()).count, 0);
    }
}

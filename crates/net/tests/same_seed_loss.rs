//! The same seed gives the same link losses and delays in the simulator and in the lab:
//! both build their bottleneck's loss and jitter from the core's `Impairment` on the
//! same random stream per direction (docs/model.md, "Random streams"). Fails when either
//! substrate numbers its streams, orders its draws or builds its loss model differently.

use serde_json::json;
use thinwan_net::config::DirConfig;
use thinwan_net::link::{Direction, EventKind};
use thinwan_proto::link::LinkDir;
use thinwan_proto::{DropReason, Duration, Instant};

const PACKETS: u64 = 3000;

/// The lab: packets every 2 ms through an unshaped direction; per packet, its arrival
/// time after the link or `None` if lost.
fn emulator(cfg: &DirConfig, seed: u64, dir: LinkDir) -> Vec<Option<Instant>> {
    let mut d = Direction::new(cfg, seed, dir).expect("valid configuration");
    let ip = [0x45, 0, 0, 20, 0, 0, 0, 0, 64, 253, 0, 0, 198, 18, 1, 1, 198, 18, 2, 1];
    let (mut events, mut out) = (Vec::new(), Vec::new());
    for k in 0..PACKETS {
        let now = Instant::from_nanos(k * 2_000_000);
        d.arrive(now, ip.to_vec(), &mut events);
        d.handle_timeout(now, &mut out, &mut events);
    }
    d.handle_timeout(Instant::MAX, &mut out, &mut events);
    let mut fate = vec![None; PACKETS as usize];
    for del in &out {
        fate[del.packet.id as usize] = Some(del.due);
    }
    let lost = events.iter().filter(|e| e.kind == EventKind::Drop).count();
    assert_eq!(lost + out.len(), PACKETS as usize);
    assert!(events.iter().filter(|e| e.kind == EventKind::Drop).all(|e| e.reason == Some(DropReason::Loss)));
    fate
}

/// The simulator: its WAN direction's impairment over the same packets.
fn simulator(scenario: &serde_json::Value, seed: u64, dir: LinkDir) -> Vec<Option<Instant>> {
    let cfg = thinwan_sim::Config::from_json(&scenario.to_string()).expect("valid scenario");
    let delay = Duration::from_millis_f64(cfg.topology.bottleneck_delay_ms);
    let mut imp =
        thinwan_sim::world::wan_impairment(&cfg, seed, dir).expect("a lossy link has an impairment");
    (0..PACKETS).map(|k| imp.transit(Instant::from_nanos(k * 2_000_000), delay).ok()).collect()
}

fn scenario(loss: f64, loss_rev: f64, jitter_pct: f64) -> serde_json::Value {
    let text = include_str!("../../sim/tests/data/default-scenario.json");
    let mut v: serde_json::Value = serde_json::from_str(text).expect("the shared default scenario");
    let t = &mut v["topology"];
    t["bottleneck_delay_ms"] = json!(20.0);
    t["bottleneck_loss"] = json!(loss);
    t["bottleneck_loss_rev"] = json!(loss_rev);
    t["bottleneck_jitter_pct"] = json!(jitter_pct);
    v
}

#[test]
fn same_seed_same_losses_in_simulator_and_emulator() {
    for seed in [1, 42] {
        let sim = scenario(0.05, 0.02, 0.0);
        let fwd = DirConfig { delay_ms: 20.0, loss: 0.05, ..Default::default() };
        let rev = DirConfig { delay_ms: 20.0, loss: 0.02, ..Default::default() };
        let (lab_fwd, lab_rev) = (emulator(&fwd, seed, LinkDir::Fwd), emulator(&rev, seed, LinkDir::Rev));
        assert_eq!(simulator(&sim, seed, LinkDir::Fwd), lab_fwd, "seed {seed}: forward losses differ");
        assert_eq!(simulator(&sim, seed, LinkDir::Rev), lab_rev, "seed {seed}: reverse losses differ");
        let lost = lab_fwd.iter().filter(|f| f.is_none()).count();
        assert!((100..200).contains(&lost), "about 5 % of 3000 lost, got {lost}");
    }
}

#[test]
fn same_seed_same_jittered_delays_in_simulator_and_emulator() {
    let sim = scenario(0.05, 0.0, 10.0);
    let lab = DirConfig { delay_ms: 20.0, loss: 0.05, jitter: "uniform:10%".into(), ..Default::default() };
    let (s, l) = (simulator(&sim, 9, LinkDir::Fwd), emulator(&lab, 9, LinkDir::Fwd));
    assert_eq!(s, l, "losses or jittered arrivals differ");
    let delays: Vec<u64> =
        s.iter().enumerate().filter_map(|(k, a)| a.map(|a| a.as_nanos() - k as u64 * 2_000_000)).collect();
    assert!(delays.iter().any(|&d| d != 20_000_000), "the delays vary");
}

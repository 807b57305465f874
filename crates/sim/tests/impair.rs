//! WAN link impairments (`topology.bottleneck_loss*`, `bottleneck_jitter_pct`): loss rate,
//! jitter bounds without reordering, determinism, and independence from the sources.

mod common;
use common::{base, set};
use serde_json::json;
use thinwan_sim::{simulate, RunRecords};

fn run(v: &serde_json::Value, run: u64) -> RunRecords {
    simulate(&v.to_string(), run).expect("valid scenario")
}

fn lossy(loss: f64, loss_rev: f64, jitter: f64) -> serde_json::Value {
    let mut v = base();
    set(&mut v, "topology.pairs", json!(10));
    set(&mut v, "scenario.duration_s", json!(60.0));
    set(&mut v, "topology.bottleneck_loss", json!(loss));
    set(&mut v, "topology.bottleneck_loss_rev", json!(loss_rev));
    set(&mut v, "topology.bottleneck_jitter_pct", json!(jitter));
    v
}

#[test]
fn measured_loss_rate_is_within_binomial_tolerance() {
    for (loss, loss_rev) in [(0.01, 0.0), (0.05, 0.02)] {
        let r = run(&lossy(loss, loss_rev, 0.0), 0);
        let p = &r.ports;
        for (port, want) in [(0, loss), (1, loss_rev)] {
            // packets_tx counts every packet serialised in the window, lost or not.
            let n = p.packets_tx[port] as f64;
            let lost = p.drops_loss[port] as f64;
            let sd = (n * want * (1.0 - want)).sqrt();
            // 4.5 σ plus a few packets for the run's end (serialised after the window).
            assert!(
                (lost - n * want).abs() <= 4.5 * sd + 5.0,
                "{}: {lost} of {n} lost, want p = {want}",
                p.port[port]
            );
        }
        assert_eq!(p.drops_overflow[0], 0, "the queue is large enough not to drop");
        let total: u64 = r.drops_by_reason.iter().filter(|(k, _)| k == "loss").map(|(_, n)| n).sum();
        assert_eq!(total, p.drops_loss.iter().sum::<u64>());
        // Losses are repaired: everything written is delivered.
        let c = &r.connections;
        assert_eq!(c.bytes_delivered, c.bytes_written);
        assert!(c.timeouts.iter().sum::<u32>() > 0 || c.fast_retransmits.iter().sum::<u32>() > 0);
        let k = r.packets;
        assert_eq!(k.created, k.arrived + k.dropped + k.in_flight);
    }
}

#[test]
fn jitter_stays_within_bounds_and_never_reorders() {
    let mut v = lossy(0.0, 0.0, 10.0);
    set(&mut v, "topology.bottleneck_delay_ms", json!(100.0));
    set(&mut v, "topology.access_delay_ms", json!(0.0));
    set(&mut v, "topology.pairs", json!(4));
    let r = run(&v, 0);
    let m = &r.messages;
    // t_arrive − t_deq = WAN propagation + the client access link's serialisation (≤ 1500 B
    // at 100 Mbit/s = 0.12 ms; the access links are otherwise idle).
    let (lo, hi) = (0.090, 0.110 + 0.000_13);
    let mut spread = (f64::MAX, f64::MIN);
    for i in 0..m.conn.len() {
        let d = m.t_arrive[i] - m.t_deq[i];
        assert!(d >= lo - 1e-9 && d <= hi + 1e-9, "WAN delay {d} outside ±10 %");
        spread = (spread.0.min(d), spread.1.max(d));
    }
    assert!(spread.0 < 0.0915 && spread.1 > 0.1085, "jitter does not use its range: {spread:?}");
    // No reordering: within a connection, a later departure never arrives earlier.
    for c in 0..4u32 {
        let mut rows: Vec<(f64, f64)> =
            (0..m.conn.len()).filter(|&i| m.conn[i] == c).map(|i| (m.t_deq[i], m.t_arrive[i])).collect();
        rows.sort_by(|a, b| a.partial_cmp(b).expect("no NaN: all delivered"));
        assert!(rows.windows(2).all(|w| w[1].1 >= w[0].1), "conn {c} reordered");
    }
}

#[test]
fn impaired_runs_are_deterministic_and_leave_the_sources_alone() {
    let v = lossy(0.05, 0.05, 10.0);
    let dbg = |r: &RunRecords| format!("{r:?}");
    let (a, b) = (run(&v, 0), run(&v, 0));
    assert!(dbg(&a) == dbg(&b), "same seed, different records");
    assert_ne!(a.ports.drops_loss, run(&v, 1).ports.drops_loss, "another seed, other losses");
    // The link's randomness is its own stream: the sources write exactly the same.
    let clean = run(&lossy(0.0, 0.0, 0.0), 0);
    assert_eq!(clean.messages.t_write, a.messages.t_write);
    assert_eq!(clean.ports.drops_loss, vec![0, 0]);
}

#[test]
fn out_of_range_impairments_are_rejected() {
    for (k, x) in [
        ("topology.bottleneck_loss", 1.5),
        ("topology.bottleneck_loss_rev", -0.1),
        ("topology.bottleneck_jitter_pct", 120.0),
    ] {
        let mut v = base();
        set(&mut v, k, json!(x));
        assert!(simulate(&v.to_string(), 0).unwrap_err().contains(k));
    }
}

//! The bottleneck's queue disciplines end to end: FQ-CoDel and the class scheduler on
//! the dumbbell (Ogawa's large-buffer set-up, shortened).

mod common;
use common::{base, set};
use serde_json::json;
use thinwan_sim::{simulate, RunRecords};

/// Ogawa 2011's large-buffer dumbbell (scenarios/ogawa2011/large-buffer.toml: 100
/// thin-client pairs, 10 Mbit/s, 20 ms, 2500 KB), 30 s, with `discipline`.
fn large_buffer(discipline: &str) -> serde_json::Value {
    let mut v = base();
    set(&mut v, "scenario.duration_s", json!(30.0));
    set(&mut v, "topology.pairs", json!(100));
    set(&mut v, "topology.access_rate_mbps", json!(100.0));
    set(&mut v, "topology.access_delay_ms", json!(1.0));
    set(&mut v, "topology.bottleneck_rate_mbps", json!(10.0));
    set(&mut v, "topology.bottleneck_delay_ms", json!(20.0));
    set(&mut v, "queue.discipline", json!(discipline));
    set(&mut v, "queue.limit_bytes", json!(2_500_000));
    set(&mut v, "queue.limit_packets", json!(0));
    set(&mut v, "tcp.recovery", json!("reno"));
    set(&mut v, "tcp.sack", json!(false));
    set(&mut v, "tcp.delayed_ack", json!(false));
    set(&mut v, "tcp.slow_start_restart", json!(false));
    v
}

/// Write-to-read delays of the interactive messages that were read, seconds, sorted.
fn interactive_delays(r: &RunRecords) -> Vec<f64> {
    let m = &r.messages;
    let mut d: Vec<f64> = (0..m.kind.len())
        .filter(|&i| m.kind[i] == 0 && m.t_read[i].is_finite())
        .map(|i| m.t_read[i] - m.t_write[i])
        .collect();
    d.sort_by(f64::total_cmp);
    d
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[test]
fn fq_codel_cuts_interactive_delay_against_a_big_droptail_buffer() {
    let run = |d: &str| simulate(&large_buffer(d).to_string(), 0).expect("valid scenario");
    let (fifo, fq) = (run("droptail"), run("fq_codel"));
    let (a, b) = (interactive_delays(&fifo), interactive_delays(&fq));
    assert!(a.len() > 1000 && b.len() > 1000, "{} and {} interactive messages", a.len(), b.len());
    let stat = |d: &[f64]| {
        (quantile(d, 0.5) * 1e3, quantile(d, 0.99) * 1e3, d.iter().sum::<f64>() / d.len() as f64 * 1e3)
    };
    let (fifo_s, fq_s) = (stat(&a), stat(&b));
    eprintln!(
        "interactive write→read delay (ms): droptail median {:.1} p99 {:.1} mean {:.1}; \
         fq_codel median {:.1} p99 {:.1} mean {:.1}",
        fifo_s.0, fifo_s.1, fifo_s.2, fq_s.0, fq_s.1, fq_s.2
    );
    // The median is the path's base delay under both (most echoes meet no queue); the
    // tail is where the 2500-KB FIFO hurts and FQ-CoDel's sparse-flow priority helps.
    assert!(fq_s.1 < 0.5 * fifo_s.1, "p99: fq_codel {:.1} ms vs droptail {:.1} ms", fq_s.1, fifo_s.1);
    assert!(fq_s.2 < fifo_s.2, "mean: fq_codel {:.1} ms vs droptail {:.1} ms", fq_s.2, fifo_s.2);
    // CoDel keeps the standing queue short: its drops are counted under their reason.
    let codel = fq.drops_by_reason.iter().find(|(k, _)| k == "codel").map(|(_, n)| *n);
    assert!(codel.is_some_and(|n| n > 0), "codel drops: {codel:?}");
    let fifo_codel = fifo.drops_by_reason.iter().find(|(k, _)| k == "codel").map(|(_, n)| *n);
    assert_eq!(fifo_codel, Some(0), "every run reports every queue reason");
}

#[test]
fn same_seed_same_records_with_the_new_disciplines() {
    for d in ["fq_codel", "qds"] {
        let mut v = base();
        set(&mut v, "topology.pairs", json!(20));
        set(&mut v, "queue.discipline", json!(d));
        let a = simulate(&v.to_string(), 0).expect("valid scenario");
        let b = simulate(&v.to_string(), 0).expect("valid scenario");
        assert!(format!("{a:?}") == format!("{b:?}"), "{d}: same seed, different records");
        assert!(a.packets.arrived > 0);
    }
}

#[test]
fn a_class_capped_below_the_link_holds_the_bottleneck_to_its_ceil() {
    // One static class with ceil = 40 % of the link: the greedy senders get 4 of the
    // 10 Mbit/s, and the port waits for tokens between packets (next_ready).
    let mut v = base();
    set(&mut v, "topology.pairs", json!(4));
    set(&mut v, "topology.bottleneck_rate_mbps", json!(10.0));
    set(&mut v, "traffic.model", json!("bulk"));
    set(&mut v, "queue.discipline", json!("classes"));
    set(&mut v, "queue.class_rate_shares", json!([0.2]));
    set(&mut v, "queue.class_ceil_shares", json!([0.4]));
    let r = simulate(&v.to_string(), 0).expect("valid scenario");
    let p = &r.ports;
    let mbps = p.bytes_tx[0] as f64 * 8.0 / p.window_s[0] / 1e6;
    assert!((mbps - 4.0).abs() < 0.2, "bottleneck carried {mbps:.3} Mbit/s, ceil 4");
    // Without the cap the same senders fill the link.
    set(&mut v, "queue.class_ceil_shares", json!([]));
    let r = simulate(&v.to_string(), 0).expect("valid scenario");
    let mbps = r.ports.bytes_tx[0] as f64 * 8.0 / r.ports.window_s[0] / 1e6;
    assert!(mbps > 9.0, "borrowing up to the link: {mbps:.3} Mbit/s");
}

//! The middlebox topology and the exact per-packet RTTs (`packet_rtt`, docs/records.md).
mod common;

use common::{base, set};
use serde_json::{json, Value};
use thinwan_sim::config::Config;
use thinwan_sim::records::RunRecords;

/// c = 20 Mbit/s, [3:9], the scenarios/qds base without its comments.
fn middlebox() -> Value {
    let mut v = base();
    for (k, x) in [
        ("topology.kind", json!("middlebox")),
        ("topology.pairs", json!(12)),
        ("topology.access_rate_mbps", json!(1000.0)),
        ("topology.access_delay_ms", json!(0.5)),
        ("topology.bottleneck_rate_mbps", json!(20.0)),
        ("topology.bottleneck_delay_ms", json!(0.0)),
        ("queue.limit_packets", json!(100)),
        ("tcp.delayed_ack", json!(false)),
        ("traffic.model", json!("mix")),
        ("traffic.mix", json!([["video", 3], ["data", 9]])),
        ("records.traces", json!(false)),
    ] {
        set(&mut v, k, x);
    }
    v
}

fn run(v: &Value, k: u64) -> RunRecords {
    thinwan_sim::simulate(&v.to_string(), k).expect("the scenario runs")
}

#[test]
fn client_delays_are_normal_clipped_and_seeded() {
    let cfg = Config::from_json(&middlebox().to_string()).unwrap();
    let d = thinwan_sim::world::client_delays(&cfg.topology, 1, 10_000).unwrap();
    assert!(d.iter().all(|&x| (5.0..=10.0).contains(&x)), "clipped to [5, 10] ms");
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64).sqrt();
    assert!((mean - 7.5).abs() < 0.05, "mean {mean}");
    // Clipping at ±2 sd trims the sd a little (to ≈ 0.88 · 1.25 ms).
    assert!((1.0..1.25).contains(&sd), "sd {sd}");
    assert_eq!(d, thinwan_sim::world::client_delays(&cfg.topology, 1, 10_000).unwrap());
    assert_ne!(d, thinwan_sim::world::client_delays(&cfg.topology, 2, 10_000).unwrap());
}

#[test]
fn packet_rtts_are_first_transmissions_labelled_and_above_the_base_rtt() {
    let v = middlebox();
    let r = run(&v, 0);
    let p = r.packet_rtt.as_ref().expect("the middlebox topology records packet_rtt");
    assert!(!p.conn.is_empty());
    // Rows are first transmissions: their bytes are what each connection sent less what
    // it retransmitted.
    for (i, &conn) in r.connections.conn.iter().enumerate() {
        let rows: u64 = p.conn.iter().zip(&p.bytes).filter(|(&c, _)| c == conn).map(|(_, &b)| b as u64).sum();
        let c = &r.connections;
        assert_eq!(rows, c.bytes_sent[i] - c.bytes_retransmitted[i], "conn {conn}");
    }
    // Labels: pairs 0–2 video (code 2), 3–11 data (code 3).
    for (&conn, &app) in p.conn.iter().zip(&p.app) {
        assert_eq!(app, if conn < 3 { 2 } else { 3 }, "conn {conn}");
    }
    // Every RTT is at least the path's: 2 · (0.5 ms + 5 ms) plus a segment's
    // serialisation at 20 Mbit/s; the queue (100 packets, 60 ms) and losses add to it.
    let min = p.rtt.iter().copied().filter(|x| !x.is_nan()).fold(f64::INFINITY, f64::min);
    assert!(min > 0.011, "min RTT {min}");
    let acked = p.rtt.iter().filter(|x| !x.is_nan()).count();
    assert!(acked as f64 > 0.99 * p.rtt.len() as f64, "almost all acknowledged by the end");
    assert!(p.retx.contains(&1), "a 20 % overload drops and retransmits");
    // The retransmitted ones waited for the recovery: on average longer.
    let mean = |flag: u8| {
        let v: Vec<f64> =
            p.rtt.iter().zip(&p.retx).filter(|(r, &x)| x == flag && !r.is_nan()).map(|(r, _)| *r).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    assert!(mean(1) > mean(0) + 0.02, "retransmitted {} vs {}", mean(1), mean(0));
    // Debug text: NaN (never acknowledged, no feature yet) equals NaN there.
    assert!(format!("{:?}", run(&v, 0)) == format!("{r:?}"), "deterministic");
}

#[test]
fn the_dumbbell_records_no_packet_rtts_unless_asked() {
    let mut v = base();
    assert!(run(&v, 0).packet_rtt.is_none());
    set(&mut v, "records.packet_rtt", json!(true));
    let p = run(&v, 0).packet_rtt.expect("asked for");
    assert!(p.app.iter().all(|&a| a == 0), "thin-client");
}

#[test]
fn a_changing_mix_changes_the_labels_inside_the_flows() {
    let mut v = middlebox();
    set(&mut v, "scenario.duration_s", json!(130.0));
    set(&mut v, "traffic.mix_change_s", json!(60.0));
    let r = run(&v, 0);
    let p = r.packet_rtt.unwrap();
    // Shift = 3: pair 0 is video, then data from 60 s (position 3), data from 120 s (6).
    // Pair 9 is data, then video from 60 s (position 12 mod 12 = 0), then data.
    let apps = |conn: u32, from: f64, to: f64| {
        let mut a: Vec<u8> = p
            .conn
            .iter()
            .zip(&p.app)
            .zip(&p.t_tx)
            .filter(|((&c, _), &t)| c == conn && (from..to).contains(&t))
            .map(|((_, &a), _)| a)
            .collect();
        a.dedup();
        a
    };
    assert_eq!(apps(0, 0.0, 59.0), [2]);
    assert_eq!(apps(9, 0.0, 59.0), [3]);
    assert_eq!(apps(9, 61.5, 119.0), [2], "data → video inside pair 9's connection");
    // Frames written before a change may still be sent long after it (an overloaded video
    // flow's backlog waits in its unlimited send buffer, ahead of the new type's bytes in
    // the same TCP stream): pair 0, video until 60 s, sends data later on.
    assert_eq!(apps(0, 0.0, 59.0), [2]);
    assert!(apps(0, 62.0, 130.0).contains(&3));
}

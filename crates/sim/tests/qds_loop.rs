//! The QDS control loop in the simulator (crates/sim `world/qds.rs`): the monitor's RTT
//! estimates against the exact per-packet RTTs, and the loop's effect on the downlink.
mod common;

use common::{qds_middlebox, set};
use serde_json::{json, Value};
use thinwan_sim::records::RunRecords;

/// scenarios/qds/base.toml: c = 20 Mbit/s, [3:9], 20 % overload, 60 s.
fn middlebox(discipline: &str) -> Value {
    qds_middlebox(60.0, discipline)
}

fn run(v: &Value, k: u64) -> RunRecords {
    thinwan_sim::simulate(&v.to_string(), k).expect("the scenario runs")
}

/// Per QDS period and flow with an estimate: (monitor's estimate, mean exact RTT of the
/// flow's last `n` packets acknowledged by then that were not retransmitted), seconds.
/// Rows of flows planned before their first sample (`rtt` NaN) have nothing to compare.
fn paired(r: &RunRecords, n: usize) -> Vec<(f64, f64)> {
    let p = r.packet_rtt.as_ref().unwrap();
    let (flows, _) = r.qds.as_ref().expect("the loop ran");
    // Per connection: (ack arrival, rtt) of clean rows, in ack order.
    let conns = r.connections.conn.len();
    let mut acked: Vec<Vec<(f64, f64)>> = vec![Vec::new(); conns];
    for i in 0..p.conn.len() {
        if p.retx[i] == 0 && !p.rtt[i].is_nan() {
            acked[p.conn[i] as usize].push((p.t_tx[i] + p.rtt[i], p.rtt[i]));
        }
    }
    for a in &mut acked {
        a.sort_by(|x, y| x.partial_cmp(y).unwrap());
    }
    let mut out = Vec::new();
    for i in (0..flows.t.len()).filter(|&i| !flows.rtt[i].is_nan()) {
        let a = &acked[flows.conn[i] as usize];
        let upto = a.partition_point(|&(t, _)| t <= flows.t[i]);
        if upto < n {
            continue;
        }
        let exact = a[upto - n..upto].iter().map(|x| x.1).sum::<f64>() / n as f64;
        out.push((flows.rtt[i], exact));
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[test]
fn the_monitors_rtt_is_the_exact_one_within_a_millisecond_at_the_median() {
    for (what, loss) in [("clean", 0.0), ("lossy", 0.01)] {
        let mut v = middlebox("qds");
        set(&mut v, "topology.bottleneck_loss", json!(loss));
        let r = run(&v, 0);
        let p = r.packet_rtt.as_ref().unwrap();
        let retx = p.retx.iter().filter(|&&x| x == 1).count();
        assert!(retx > 100, "{what}: retransmissions happen ({retx})");
        let pairs = paired(&r, 8);
        assert!(pairs.len() > 5000, "{what}: {} periods × flows", pairs.len());
        let diff = median(pairs.iter().map(|(m, e)| m - e).collect());
        let abs = {
            let mut a: Vec<f64> = pairs.iter().map(|(m, e)| (m - e).abs()).collect();
            a.sort_by(|x, y| x.partial_cmp(y).unwrap());
            [a[a.len() / 2], a[a.len() * 9 / 10], a[a.len() * 99 / 100]]
        };
        let est = median(pairs.iter().map(|x| x.0).collect());
        let above = pairs.iter().filter(|(m, e)| m - e > 0.1).count();
        let below = pairs.iter().filter(|(m, e)| e - m > 0.1).count();
        eprintln!("{what}: monitor > exact + 100 ms: {above}; < exact − 100 ms: {below}");
        let exact = median(pairs.iter().map(|x| x.1).collect());
        eprintln!(
            "{what}: median(monitor − exact) = {:.3} ms, |·| p50 {:.3} p90 {:.3} p99 {:.3} ms; medians {:.2} vs {:.2} ms; {} pairs, {retx} retransmitted rows",
            diff * 1e3,
            abs[0] * 1e3,
            abs[1] * 1e3,
            abs[2] * 1e3,
            est * 1e3,
            exact * 1e3,
            pairs.len()
        );
        // The untimed server half (2 × 0.1 ms + serialisation) is all that is missing.
        assert!(diff.abs() < 1e-3, "{what}: paired median difference {diff}");
        assert!((-0.5e-3..0.0).contains(&diff), "{what}: the server half is missing: {diff}");
        assert!(abs[0] < 1e-3, "{what}: half the estimates within 1 ms of the exact RTTs: {}", abs[0]);
        // The tail: segments sent once but held behind a repaired loss are timed to the
        // ACK that covers them, as the exact RTT is (Karn's rule discards only the
        // retransmitted segment's own sample). Measured p90 25.8 ms clean, 22.3 ms lossy
        // (17.6 and 20.2 ms before the loop planned untimed flows, 2026-11-27: the same
        // monitor on different traffic); discarding every pending sample above a
        // retransmission gave 111.5 and 222.1 ms.
        assert!(abs[1] < 35e-3, "{what}: 90 % of the estimates within 35 ms of the exact RTTs: {}", abs[1]);
    }
}

/// Share of first transmissions of type `app` sent in the window with RTT ≤ `qt` s, and
/// that type's acknowledged payload rate, Mbit/s.
fn share_and_rate(r: &RunRecords, app: u8, qt: f64) -> (f64, f64) {
    let p = r.packet_rtt.as_ref().unwrap();
    let rows: Vec<usize> = (0..p.conn.len()).filter(|&i| p.app[i] == app && p.t_tx[i] < 60.0).collect();
    let within = rows.iter().filter(|&&i| p.rtt[i] <= qt).count() as f64 / rows.len() as f64;
    let bytes: u64 = rows.iter().filter(|&&i| !p.rtt[i].is_nan()).map(|&i| p.bytes[i] as u64).sum();
    (within, bytes as f64 * 8.0 / 60.0 / 1e6)
}

#[test]
fn qds_buys_video_latency_with_data_latency_without_starving_data() {
    let fifo = run(&middlebox("droptail"), 0);
    let qds = run(&middlebox("qds"), 0);
    let (v_fifo, _) = share_and_rate(&fifo, 2, 0.050);
    let (v_qds, v_rate) = share_and_rate(&qds, 2, 0.050);
    let (d_fifo, _) = share_and_rate(&fifo, 3, 0.100);
    let (d_qds, d_rate) = share_and_rate(&qds, 3, 0.100);
    eprintln!("video within 50 ms: FIFO {v_fifo:.3}, QDS {v_qds:.3} ({v_rate:.2} Mbit/s); data within 100 ms: FIFO {d_fifo:.3}, QDS {d_qds:.3} ({d_rate:.2} Mbit/s)");
    assert!(v_qds > 0.8 && v_fifo < 0.3, "video: {v_fifo} → {v_qds}");
    assert!(d_qds < d_fifo, "data pays: {d_fifo} → {d_qds}");
    assert!(v_rate > 14.0, "video gets its 15 Mbit/s: {v_rate}");
    // No data flow starves: each one's payload is acknowledged at ≥ 100 kbit/s.
    let p = qds.packet_rtt.as_ref().unwrap();
    for conn in 3..12 {
        let b: u64 = (0..p.conn.len())
            .filter(|&i| p.conn[i] == conn && !p.rtt[i].is_nan())
            .map(|i| p.bytes[i] as u64)
            .sum();
        assert!(b as f64 * 8.0 / 60.0 > 1e5, "data flow {conn}: {b} bytes");
    }
}

#[test]
fn the_loop_records_every_period_and_sets_the_whole_link() {
    let v = middlebox("qds");
    let r = run(&v, 0);
    let (flows, classes) = r.qds.as_ref().unwrap();
    // Periods 0.1, 0.2, … 62.0 s (duration + drain), ten classes each.
    let periods = 620;
    assert_eq!(classes.t.len(), periods * 10);
    for k in 0..periods {
        let rows = k * 10..(k + 1) * 10;
        let sum: f64 = classes.rate_bps[rows.clone()].iter().sum();
        let flows_in: u32 = classes.flows[rows.clone()].iter().sum();
        let planned = flows.t.iter().filter(|&&t| t == classes.t[k * 10]).count() as u32;
        assert_eq!(flows_in, planned, "period {k}: every planned flow in one class");
        if planned > 0 {
            assert!((sum / 20e6 - 1.0).abs() < 1e-3, "period {k}: class rates sum to c ({sum})");
        }
    }
    assert!(flows.app.iter().zip(&flows.app_true).all(|(a, b)| a == b), "oracle: the true types");
    assert!(flows.app_true.iter().all(|&a| a == 0 || a == 2), "video (0) and data (2) only");
    // Debug text: NaN (never acknowledged, no feature yet) equals NaN there.
    assert!(format!("{:?}", run(&v, 0)) == format!("{r:?}"), "deterministic");
    // Without a model file the classifier is the shipped one; it names most flows right.
    let mut m = v.clone();
    set(&mut m, "qds.classifier", json!("model"));
    let (f, _) = run(&m, 0).qds.unwrap();
    let right = f.app.iter().zip(&f.app_true).filter(|(a, b)| a == b).count();
    assert!(right as f64 > 0.8 * f.app.len() as f64, "{right} of {}", f.app.len());
    set(&mut m, "qds.model", json!({"features": ["size"], "classes": []}));
    let err = thinwan_sim::simulate(&m.to_string(), 0).unwrap_err();
    assert!(err.contains("qds.model: the model was trained on features"), "{err}");
    // A model file the Python layer did not inline is refused (the simulator reads no file).
    let mut f = v.clone();
    set(&mut f, "qds.classifier", json!("model"));
    set(&mut f, "qds.model_file", json!("m.json"));
    let err = thinwan_sim::simulate(&f.to_string(), 0).unwrap_err();
    assert!(err.contains("qds.model_file: m.json: the simulator takes the model inline"), "{err}");
}

#[test]
fn one_60_s_qds_run_at_c_20_takes_well_under_two_seconds() {
    let v = middlebox("qds");
    let t = std::time::Instant::now();
    let r = run(&v, 0);
    let wall = t.elapsed().as_secs_f64();
    eprintln!("60-s QDS run, c = 20 Mbit/s, [3:9]: {wall:.3} s wall, {} events", r.events);
    assert!(wall < 2.0, "{wall} s");
}

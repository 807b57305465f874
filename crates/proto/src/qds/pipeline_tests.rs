//! Monitor → classifier → controller on synthetic packet traces: the features the
//! monitor computes tell the three kinds of traffic apart, and the plan ranks them; and
//! monitor → controller → class scheduler on virtual time: no flow starves.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::classify::{AppType, Confusion, Model};
use super::controller::{self, plan, FlowInput, QdsConfig, Variant};
use super::monitor::{FlowMonitor, MonitorConfig, Segment, Toward};
use crate::qdisc::{ClassControl, Classes, Dropped, Limits, QueueDisc, QueueItem};
use crate::time::{Duration, Instant};

const MSS: u32 = 1448;

/// Packets toward the client of one flow of `app` for 3 s: (µs, payload bytes).
///
/// - video: a frame every 40 ms (25/s) of 12–22 full packets 0.1 ms apart (≈ 5 Mbit/s);
/// - data: a page or document every 0.3–0.9 s, 30–90 full packets 1.2 ms apart (the
///   flow's share of a 10 Mbit/s link) ending in a partial one (≈ 1 Mbit/s);
/// - interactive: an update every 20–150 ms of one or two packets of 80–400 bytes.
fn trace(app: AppType, rng: &mut Xoshiro256PlusPlus) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut t = rng.gen_range(0..40_000u64);
    while t < 3_000_000 {
        match app {
            AppType::Video => {
                for i in 0..rng.gen_range(12..=22u64) {
                    out.push((t + i * 100, MSS));
                }
                t += 40_000 + rng.gen_range(0..2_000);
            }
            AppType::Data => {
                let n = rng.gen_range(30..=90u64);
                for i in 0..n {
                    out.push((t + i * 1_200, MSS));
                }
                out.push((t + n * 1_200, rng.gen_range(100..MSS)));
                t += rng.gen_range(300_000..900_000);
            }
            AppType::Interactive | AppType::Audio => {
                for i in 0..rng.gen_range(1..=2u64) {
                    out.push((t + i * 300, rng.gen_range(80..400)));
                }
                t += rng.gen_range(20_000..150_000);
            }
        }
    }
    out
}

/// Feed `flows` to a monitor: each packet toward the client, and the client's ACK of it
/// 20 ms later (one ACK per packet, no delayed ACK). Key = position in `flows`.
fn monitor_of(flows: &[Vec<(u64, u32)>]) -> FlowMonitor<usize> {
    let mut ev: Vec<(u64, usize, Toward, Segment)> = Vec::new();
    for (k, tr) in flows.iter().enumerate() {
        let mut seq = 1000u32;
        for &(t, len) in tr {
            let data = Segment {
                seq,
                ack: 1,
                has_ack: true,
                payload: len,
                wire_len: len + 52,
                ..Segment::default()
            };
            seq = seq.wrapping_add(len);
            let ack = Segment { seq: 1, ack: seq, has_ack: true, wire_len: 52, ..Segment::default() };
            ev.push((t, k, Toward::Client, data));
            ev.push((t + 20_000, k, Toward::Server, ack));
        }
    }
    ev.sort_by_key(|e| (e.0, e.1, e.2));
    let mut m = FlowMonitor::new(MonitorConfig::default());
    for (t, k, toward, seg) in ev {
        m.observe(Instant::from_nanos(t * 1_000), k, toward, &seg);
    }
    m
}

fn labelled(seed: u64, per_kind: usize) -> (FlowMonitor<usize>, Vec<AppType>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let kinds = [AppType::Video, AppType::Data, AppType::Interactive];
    let apps: Vec<AppType> = (0..per_kind * 3).map(|i| kinds[i % 3]).collect();
    let traces: Vec<_> = apps.iter().map(|&a| trace(a, &mut rng)).collect();
    (monitor_of(&traces), apps)
}

const END: Instant = Instant::from_nanos(3_000_000_000);

#[test]
fn monitor_features_train_a_classifier_that_names_held_out_flows() {
    let (m, apps) = labelled(1, 20);
    let train: Vec<_> = m.views(END).into_iter().map(|(k, v)| (v.features, apps[k])).collect();
    let model = Model::train(&train);
    let (m, apps) = labelled(2, 20);
    let test: Vec<_> = m.views(END).into_iter().map(|(k, v)| (v.features, apps[k])).collect();
    let c = Confusion::of(&model, &test);
    assert_eq!(c.total(), 60);
    assert!(c.accuracy() >= 0.95, "{:?}", c.counts);
}

#[test]
fn the_plan_puts_video_before_data_and_fills_the_link() {
    // One flow of each kind through the monitor: 20-ms client half, no server half
    // (one-way, no timestamps) → RTT 20 ms: video DB 30 → c_3, data DB 80 → c_8,
    // interactive (QT 50) DB 30 → c_3.
    let (m, apps) = labelled(3, 1);
    let inputs: Vec<FlowInput<usize>> = m
        .views(END)
        .into_iter()
        .map(|(k, v)| FlowInput { key: k, app: apps[k], rtt: v.rtt.unwrap(), rate_bps: v.rate_bps })
        .collect();
    assert!(inputs.iter().all(|f| f.rtt == Duration::from_millis(20)), "{inputs:?}");
    let p = plan(&QdsConfig::default(), &inputs, 20_000_000);
    assert_eq!(p.class_of, vec![(0, 2), (1, 7), (2, 2)]);
    assert!(p.weights[2] > p.weights[7], "{:?}", p.weights);
    let total: u64 = p.rates.iter().map(|r| r.rate_bps).sum();
    assert!((20_000_000 - 10..=20_000_000).contains(&total), "{total}");
}

/// A packet of the starvation test: (flow, sequence number of its first byte, bytes).
#[derive(Debug)]
struct Pkt(u64, u32, u32);

impl QueueItem for Pkt {
    fn wire_len(&self) -> u32 {
        self.2
    }
    fn flow(&self) -> u64 {
        self.0
    }
}

/// Monitor → [`controller::inputs`] → `plan` → the class scheduler on a 10-Mbit/s link,
/// every 100 ms, as the simulator's middlebox runs them. Flow 0 (video) sends 12 Mbit/s
/// from t = 0, flow 1 (data) 1 Mbit/s from t = `late_ms`; each packet is acknowledged
/// 20 ms after it leaves the link. Returns (packets flow 1 offered, packets it got
/// through) after 3 s.
fn overload_with_a_late_flow(variant: Variant, late_ms: u64) -> (u32, u32) {
    const CAP: u64 = 10_000_000;
    const LEN: u32 = 1500;
    let cfg = QdsConfig { variant, ..QdsConfig::default() };
    let apps = [AppType::Video, AppType::Data];
    let mut monitor = FlowMonitor::new(MonitorConfig::default());
    let first = plan::<usize>(&cfg, &[], CAP);
    // A buffer that never overflows in 3 s: only the scheduler decides who is served.
    let mut q: Classes<Pkt> = Classes::new(&first.rates, LEN, Limits { bytes: None, packets: Some(10_000) });
    let (mut next_seq, mut next_send) = ([1u32; 2], [0u64, late_ms * 1_000]);
    let gap_us = [1_000u64, 12_000]; // 1500 B every 1 ms = 12 Mbit/s; every 12 ms = 1 Mbit/s
    let (mut offered, mut delivered) = ([0u32; 2], [0u32; 2]);
    let mut acks: std::collections::VecDeque<(u64, usize, u32)> = Default::default();
    let (mut link_free, mut drops) = (0u64, Vec::<Dropped<Pkt>>::new());
    let tx_us = LEN as u64 * 8 * 1_000_000 / CAP; // 1,200 µs
    for t in (0..3_000_000u64).step_by(100) {
        let now = Instant::from_nanos(t * 1_000);
        for f in 0..2 {
            if t >= next_send[f] {
                let seg = Segment {
                    seq: next_seq[f],
                    has_ack: true,
                    payload: LEN - 52,
                    wire_len: LEN,
                    ..Default::default()
                };
                monitor.observe(now, f, Toward::Client, &seg);
                q.enqueue(now, Pkt(f as u64, next_seq[f], LEN), &mut drops);
                next_seq[f] = next_seq[f].wrapping_add(LEN - 52);
                next_send[f] += gap_us[f];
                offered[f] += 1;
            }
        }
        while acks.front().is_some_and(|a| a.0 <= t) {
            let (_, f, ack) = acks.pop_front().expect("checked");
            let seg = Segment { ack, has_ack: true, wire_len: 52, ..Default::default() };
            monitor.observe(now, f, Toward::Server, &seg);
        }
        if t >= link_free {
            if let Some(p) = q.dequeue(now) {
                delivered[p.0 as usize] += 1;
                acks.push_back((t + tx_us + 20_000, p.0 as usize, p.1.wrapping_add(p.2 - 52)));
                link_free = t + tx_us;
            }
        }
        if t > 0 && t % 100_000 == 0 {
            monitor.expire(now);
            let views = monitor.views(now);
            let p = plan(&cfg, &controller::inputs(&views, |&k, _| apps[k]), CAP);
            q.set_rates(now, &p.rates);
            for &(k, class) in &p.class_of {
                q.assign(k as u64, class);
            }
        }
    }
    assert!(drops.is_empty());
    (offered[1], delivered[1])
}

#[test]
fn a_flow_that_starts_after_the_first_period_is_served_under_overload() {
    // Spec "Algorithm": each period every flow goes to a class, and no flow may starve.
    // Flow 1 starts at 250 ms, after the first period; until a packet of it has left
    // and been acknowledged the monitor cannot time it. It enters the plan with RTT 0
    // (DB = QT = 100 ms, the last class) and its class gets a rate. Left out of the
    // plan, it would wait in the default class at rate 0 while flow 0's class holds the
    // whole link and is always backlogged: not one packet would leave.
    // Measured: bandwidth-aware 91, demand-first 219, delay-only 51 of 230 packets;
    // with the flow left out of the plan, 0 for all three.
    for variant in [Variant::BandwidthAware, Variant::DemandFirst, Variant::DelayOnly] {
        let (offered, delivered) = overload_with_a_late_flow(variant, 250);
        assert!(offered > 200, "{variant:?}: {offered}");
        assert!(
            delivered >= offered / 5,
            "{variant:?}: the late flow got {delivered} of its {offered} packets through"
        );
    }
    // Demand-first guarantees every flow its max-min share of the demands: all of its
    // 1 Mbit/s here (all but the packets still in flight at the end).
    let (offered, delivered) = overload_with_a_late_flow(Variant::DemandFirst, 250);
    assert!(delivered as f64 >= 0.9 * offered as f64, "{delivered} of {offered}");
}

//! Monitor → classifier → controller on synthetic packet traces: the features the
//! monitor computes tell the three kinds of traffic apart, and the plan ranks them.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::classify::{AppType, Confusion, Model};
use super::controller::{plan, FlowInput, QdsConfig};
use super::monitor::{FlowMonitor, MonitorConfig, Segment, Toward};
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

//! Train the QDS classifier on traffic the simulator generates, and report its accuracy
//! and confusion matrix on runs it was not trained on (docs/qds.md "Training").
//!
//! ```text
//! cargo run --release -p thinwan-sim --example qds_train -- crates/proto/data/qds-classifier.json
//! ```
//!
//! Samples: every (control period, flow) row of `qds_flows` — the monitor's features of a
//! flow over its window, labelled with the flow's true type — from oracle-mode QDS runs of
//! the middlebox topology (scenarios/qds/base.toml's settings) with mixes of video, data,
//! thin-client and game flows at c = 10, 20 and 30 Mbit/s. Rows from the first 2 s of a
//! run (windows still filling) are left out. Training: seeds 1..=4 of each setting;
//! test: seeds 101..=102.
use serde_json::{json, Value};
use thinwan_proto::qds::classify::{AppType, Confusion, Features, Model};

const DEFAULT_SCENARIO: &str = include_str!("../tests/data/default-scenario.json");

fn scenario(c: f64, mix: Value, pairs: u32, seed: u64) -> String {
    let mut v: Value = serde_json::from_str(DEFAULT_SCENARIO).expect("the shared default scenario");
    for (k, x) in [
        ("scenario.duration_s", json!(60.0)),
        ("scenario.drain_s", json!(0.0)),
        ("scenario.seed", json!(seed)),
        ("topology.kind", json!("middlebox")),
        ("topology.pairs", json!(pairs)),
        ("topology.access_rate_mbps", json!(1000.0)),
        ("topology.access_delay_ms", json!(0.1)),
        ("topology.bottleneck_rate_mbps", json!(c)),
        ("topology.bottleneck_delay_ms", json!(0.0)),
        ("queue.discipline", json!("qds")),
        ("queue.limit_packets", json!(100)),
        ("tcp.delayed_ack", json!(false)),
        ("traffic.model", json!("mix")),
        ("traffic.mix", mix),
        ("records.traces", json!(false)),
        ("qds.classifier", json!("oracle")),
    ] {
        let (s, key) = k.split_once('.').expect("section.key");
        v[s][key] = x;
    }
    v.to_string()
}

/// Labelled feature rows of the runs of every setting with these seeds.
fn samples(seeds: std::ops::RangeInclusive<u64>) -> Vec<(Features, AppType)> {
    let settings = [
        (20.0, json!([["video", 3], ["data", 9]]), 12),
        (20.0, json!([["video", 2], ["data", 14]]), 16),
        (10.0, json!([["video", 2], ["data", 2]]), 4),
        (30.0, json!([["video", 6], ["data", 6]]), 12),
        (20.0, json!([["video", 2], ["data", 6], ["thin-client", 4], ["game", 2]]), 14),
    ];
    let mut out = Vec::new();
    for seed in seeds {
        for (c, mix, pairs) in &settings {
            let r = thinwan_sim::simulate(&scenario(*c, mix.clone(), *pairs, 0), seed).expect("runs");
            let (f, _) = r.qds.expect("the QDS loop ran");
            for i in 0..f.t.len() {
                if f.t[i] < 2.0 {
                    continue;
                }
                let x = f.features[i];
                let features = Features {
                    size_mean: x[0],
                    size_sd: x[1],
                    iat_mean_us: x[2],
                    iat_sd_us: x[3],
                    rate_down_bps: x[4],
                    rate_up_bps: x[5],
                    full_share: x[6],
                    burst_pkts: x[7],
                };
                out.push((features, AppType::ALL[f.app_true[i] as usize]));
            }
        }
    }
    out
}

fn main() {
    let out = std::env::args().nth(1).expect("usage: qds_train OUT.json");
    let train = samples(1..=4);
    let model = Model::train(&train);
    let test = samples(101..=102);
    let c = Confusion::of(&model, &test);
    println!("trained on {} rows, tested on {} rows of other seeds", train.len(), test.len());
    println!("accuracy {:.4}", c.accuracy());
    println!("confusion (rows: true, columns: predicted; {:?}):", AppType::ALL.map(|a| a.name()));
    for (a, row) in AppType::ALL.iter().zip(c.counts) {
        println!("  {:<12} {row:?}", a.name());
    }
    let json = serde_json::to_string_pretty(&model).expect("a model is JSON");
    std::fs::write(&out, json + "\n").expect("write the model");
    println!("wrote {out}");
}

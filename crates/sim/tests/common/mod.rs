//! The scenario the tests start from: the Python scenario model's defaults, read from the
//! shared file that `tests/test_default_scenario_file.py` keeps equal to them (never a
//! hand copy), made shorter and smaller here.
use serde_json::{json, Value};

/// The default scenario as the simulator receives it (`Scenario().to_native_json()`).
pub const DEFAULT_SCENARIO: &str = include_str!("../data/default-scenario.json");

pub fn base() -> Value {
    let mut v: Value = serde_json::from_str(DEFAULT_SCENARIO).expect("the shared default scenario is JSON");
    // What every test runs unless it says otherwise: 4 pairs for 10 s.
    set(&mut v, "scenario.duration_s", json!(10.0));
    set(&mut v, "topology.pairs", json!(4));
    v
}

pub fn set(v: &mut Value, path: &str, x: Value) {
    let (sec, key) = path.split_once('.').expect("section.key");
    v[sec][key] = x;
}

/// One greedy flow through a buffer of about one bandwidth-delay product (10 Mbit/s ×
/// 44 ms) for 20 s: a window that grows as it should fills the bottleneck.
#[allow(dead_code)] // only some test binaries use it
pub fn greedy_one_flow() -> Value {
    let mut v = base();
    set(&mut v, "traffic.model", json!("bulk"));
    set(&mut v, "topology.pairs", json!(1));
    set(&mut v, "queue.limit_packets", json!(0));
    set(&mut v, "queue.limit_bytes", json!(62_500));
    set(&mut v, "scenario.duration_s", json!(20.0));
    set(&mut v, "scenario.drain_s", json!(0.0));
    v
}

/// scenarios/qds/base.toml made short: c = 20 Mbit/s, [3:9] video:data, 20 % overload,
/// `duration_s` seconds, `discipline` at the downlink, the true types (oracle).
#[allow(dead_code)] // only the QDS tests use it; every test binary compiles this module
pub fn qds_middlebox(duration_s: f64, discipline: &str) -> Value {
    let mut v = base();
    for (k, x) in [
        ("scenario.duration_s", json!(duration_s)),
        ("scenario.drain_s", json!(2.0)),
        ("topology.kind", json!("middlebox")),
        ("topology.pairs", json!(12)),
        ("topology.access_rate_mbps", json!(1000.0)),
        ("topology.access_delay_ms", json!(0.1)),
        ("topology.bottleneck_rate_mbps", json!(20.0)),
        ("topology.bottleneck_delay_ms", json!(0.0)),
        ("queue.discipline", json!(discipline)),
        ("queue.limit_packets", json!(100)),
        ("tcp.delayed_ack", json!(false)),
        ("traffic.model", json!("mix")),
        ("traffic.mix", json!([["video", 3], ["data", 9]])),
        ("records.traces", json!(false)),
        ("qds.classifier", json!("oracle")),
    ] {
        set(&mut v, k, x);
    }
    v
}

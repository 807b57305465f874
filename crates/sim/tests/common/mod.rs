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

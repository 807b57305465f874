//! QDS's deadline order (`queue.qds_order = "deadline"`, docs/qds.md "Deadline order")
//! end to end in the simulator: the QDS loop hands each flow's slack to the deadline
//! queue, which then orders the middlebox's downlink.
mod common;

use common::{qds_middlebox, set};
use serde_json::{json, Value};
use thinwan_sim::records::RunRecords;

/// The short QDS middlebox with the given service order and CoDel on lateness.
fn middlebox(order: &str, codel: bool) -> Value {
    let mut v = qds_middlebox(20.0, "qds");
    set(&mut v, "queue.qds_order", json!(order));
    set(&mut v, "queue.class_codel", json!(codel));
    v
}

fn run(v: &Value) -> RunRecords {
    thinwan_sim::simulate(&v.to_string(), 0).expect("the scenario runs")
}

/// Mean packet RTT (s) of type `app` (packet_rtt codes: 2 video, 3 data), acknowledged
/// payload per connection (bytes) of that type.
fn rtt_and_bytes(r: &RunRecords, app: u8) -> (f64, Vec<u64>) {
    let p = r.packet_rtt.as_ref().expect("the middlebox records packet RTTs");
    let rows: Vec<usize> = (0..p.conn.len()).filter(|&i| p.app[i] == app && !p.rtt[i].is_nan()).collect();
    let mean = rows.iter().map(|&i| p.rtt[i]).sum::<f64>() / rows.len() as f64;
    let mut bytes = vec![0u64; r.connections.conn.len()];
    rows.iter().for_each(|&i| bytes[p.conn[i] as usize] += p.bytes[i] as u64);
    (mean, bytes.into_iter().filter(|&b| b > 0).collect())
}

fn drops(r: &RunRecords, reason: &str) -> u64 {
    r.drops_by_reason.iter().filter(|(why, _)| why.eq_ignore_ascii_case(reason)).map(|(_, n)| n).sum()
}

#[test]
fn the_deadline_order_runs_end_to_end_and_serves_video_first() {
    let edf = run(&middlebox("deadline", false));
    let drr = run(&middlebox("drr", false));
    let (video, video_bytes) = rtt_and_bytes(&edf, 2);
    let (data, data_bytes) = rtt_and_bytes(&edf, 3);
    eprintln!("deadline order: video RTT {:.1} ms, data {:.1} ms", video * 1e3, data * 1e3);
    // Video's slack (50 ms − ~17 ms) is ~50 ms shorter than data's (100 − ~15 ms): its
    // packets go first, so its RTT is the lower one.
    assert!(video < data, "video {video} s, data {data} s");
    // Nobody starves: each of the 12 flows has its payload acknowledged at ≥ 100 kbit/s.
    assert_eq!(video_bytes.len() + data_bytes.len(), 12);
    for b in video_bytes.iter().chain(&data_bytes) {
        assert!(*b as f64 * 8.0 / 20.0 > 1e5, "a flow got {b} bytes through");
    }
    // The full buffer drops from the fattest flow (counted as overflow), never a push-out.
    assert!(drops(&edf, "overflow") > 0, "{:?}", edf.drops_by_reason);
    assert_eq!(drops(&edf, "pushed_out"), 0, "{:?}", edf.drops_by_reason);
    assert!(format!("{:?}", edf.packet_rtt) != format!("{:?}", drr.packet_rtt), "the order changes the run");
    assert!(format!("{:?}", run(&middlebox("deadline", false))) == format!("{edf:?}"), "deterministic");
    // With CoDel on lateness some drops are CoDel's.
    let codel = run(&middlebox("deadline", true));
    assert!(drops(&codel, "codel") > 0, "{:?}", codel.drops_by_reason);
}

#[test]
fn a_bad_order_names_its_key() {
    let err = thinwan_sim::simulate(&middlebox("fifo", false).to_string(), 0).unwrap_err();
    assert!(err.contains("qds_order") || err.contains("fifo"), "{err}");
}

//! `queue.class_change` end to end (docs/qds.md "ECN: marks instead of drops"): under
//! QDS-demand the controller moves flows between classes every period; leaving their
//! queued packets behind reorders them at the client, moving the queues with the flows
//! does not.
mod common;

use common::{qds_middlebox, set};
use serde_json::{json, Value};
use thinwan_sim::records::RunRecords;

/// QDS-demand (demand-first rates, CoDel in the classes) on the short middlebox, every
/// connection in the packet log, with `class_change`.
fn demand_first(class_change: &str) -> Value {
    let mut v = qds_middlebox(20.0, "qds");
    set(&mut v, "qds.variant", json!("demand_first"));
    set(&mut v, "queue.class_codel", json!(true));
    set(&mut v, "queue.class_change", json!(class_change));
    set(&mut v, "records.packet_log_conns", json!((0..12).collect::<Vec<u32>>()));
    v
}

fn run(v: &Value) -> RunRecords {
    thinwan_sim::simulate(&v.to_string(), 0).expect("the scenario runs")
}

/// First transmissions that arrive at their client below a byte of their connection
/// that arrived earlier: what the network reordered.
fn out_of_order_arrivals(r: &RunRecords) -> usize {
    let log = &r.packet_log;
    let mut highest = std::collections::BTreeMap::new();
    let mut n = 0;
    for i in (0..log.conn.len()).filter(|&i| log.event[i] == 2) {
        let top = highest.entry(log.conn[i]).or_insert(0u64);
        if log.retx[i] == 0 && log.seq[i] < *top {
            n += 1;
        }
        *top = (*top).max(log.seq[i] + log.len[i] as u64);
    }
    n
}

#[test]
fn moving_a_flows_queue_with_it_removes_the_schedulers_reordering() {
    let leave = run(&demand_first("leave"));
    let moved = run(&demand_first("move"));
    let (l, m) = (out_of_order_arrivals(&leave), out_of_order_arrivals(&moved));
    eprintln!("out-of-order first transmissions: leave {l}, move {m}");
    assert!(l > 0, "leaving queued packets behind reorders flows that change class");
    assert_eq!(m, 0, "a flow's packets never overtake each other when its queue moves with it");
    assert!(
        format!("{:?}", leave.packet_rtt) != format!("{:?}", moved.packet_rtt),
        "the key changes the run"
    );
    // The default is "leave": the same run as without the key.
    let mut default = demand_first("leave");
    default["queue"].as_object_mut().expect("a section").remove("class_change");
    assert!(format!("{:?}", run(&default)) == format!("{leave:?}"), "leave is the default");
}

#[test]
fn a_bad_class_change_names_its_key() {
    let err = thinwan_sim::simulate(&demand_first("carry").to_string(), 0).unwrap_err();
    assert!(err.contains("queue.class_change") && err.contains("carry"), "{err}");
}

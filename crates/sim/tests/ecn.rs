//! ECN end to end (RFC 3168 §6.1 at the endpoints, CoDel marking per RFC 8290 §5.2.7 at
//! the bottleneck): a CoDel-managed greedy flow is slowed by marks, not by drops.
mod common;

use common::{greedy_one_flow, qds_middlebox, set};
use serde_json::{json, Value};
use thinwan_sim::records::RunRecords;

fn run(v: &Value) -> RunRecords {
    thinwan_sim::simulate(&v.to_string(), 0).expect("the scenario runs")
}

fn drops(r: &RunRecords, reason: &str) -> u64 {
    r.drops_by_reason.iter().filter(|(why, _)| why.eq_ignore_ascii_case(reason)).map(|(_, n)| n).sum()
}

/// The greedy flow behind FQ-CoDel, with a buffer (1000 packets) CoDel keeps far from full.
fn greedy_fq_codel(ecn: bool) -> Value {
    let mut v = greedy_one_flow();
    set(&mut v, "queue.discipline", json!("fq_codel"));
    set(&mut v, "queue.limit_bytes", json!(0));
    set(&mut v, "queue.limit_packets", json!(1000));
    set(&mut v, "tcp.ecn", json!(ecn));
    set(&mut v, "queue.ecn", json!(ecn));
    v
}

#[test]
fn with_ecn_a_codel_managed_flow_sees_marks_and_no_codel_drops() {
    let without = run(&greedy_fq_codel(false));
    let with = run(&greedy_fq_codel(true));
    // Without ECN CoDel keeps the standing queue down by dropping (RFC 8289 §5.5).
    assert!(drops(&without, "codel") > 0, "{:?}", without.drops_by_reason);
    assert_eq!(without.ports.marks_ce.iter().sum::<u64>(), 0);
    assert_eq!(without.connections.ecn_reductions[0], 0);
    // With ECN the same decisions mark instead, and the sender halves on the echo.
    let marks: u64 = with.ports.marks_ce.iter().sum();
    eprintln!(
        "ecn: {marks} marks, {} reductions, {} bytes retransmitted; without: {} CoDel drops, {} bytes retransmitted",
        with.connections.ecn_reductions[0],
        with.connections.bytes_retransmitted[0],
        drops(&without, "codel"),
        without.connections.bytes_retransmitted[0],
    );
    assert!(marks > 0, "CoDel marks the ECT flow");
    assert_eq!(drops(&with, "codel"), 0, "an ECT packet is never a CoDel drop: {:?}", with.drops_by_reason);
    assert_eq!(drops(&with, "overflow"), 0, "the buffer never filled");
    let reductions = with.connections.ecn_reductions[0] as u64;
    assert!(
        reductions > 0 && reductions <= marks,
        "one reduction per window at most: {reductions} of {marks}"
    );
    assert_eq!(with.connections.bytes_retransmitted[0], 0, "no loss, so no retransmission");
    // Throughput stays: the window is halved as often, only nothing has to be resent.
    let (a, b) = (with.connections.bytes_delivered[0] as f64, without.connections.bytes_delivered[0] as f64);
    assert!(a > 0.9 * b, "ECN delivered {a}, drops {b}");
}

#[test]
fn qds_demand_marks_in_its_per_flow_codel() {
    let demand = |ecn: bool| {
        let mut v = qds_middlebox(20.0, "qds");
        set(&mut v, "qds.variant", json!("demand_first"));
        set(&mut v, "queue.class_codel", json!(true));
        set(&mut v, "tcp.ecn", json!(ecn));
        set(&mut v, "queue.ecn", json!(ecn));
        run(&v)
    };
    let (with, without) = (demand(true), demand(false));
    let marks: u64 = with.ports.marks_ce.iter().sum();
    let reductions: u64 = with.connections.ecn_reductions.iter().map(|&x| x as u64).sum();
    eprintln!(
        "qds-demand + ecn: {marks} marks, {reductions} reductions, drops {:?}; without ecn: drops {:?}",
        with.drops_by_reason, without.drops_by_reason
    );
    assert!(marks > 0 && reductions > 0);
    assert_eq!(without.ports.marks_ce.iter().sum::<u64>(), 0);
    // CoDel still drops what is not ECT: retransmissions (RFC 3168 §6.1.5) of the
    // overflow drops. Those are few; the marks replace most of the drops.
    assert!(drops(&with, "codel") * 10 < drops(&without, "codel"), "marks replace CoDel's drops");
}

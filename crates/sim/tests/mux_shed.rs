//! Shedding in the mux topology (`mux.shed`, docs/mux.md "Shedding"): a stream that
//! opens while the edge's session says so goes on its own direct connection across the
//! WAN for its whole life (connections role 5); one that opened before stays in the
//! tunnel.

mod common;
use common::{base, set};
use serde_json::json;
use thinwan_sim::{simulate, RunRecords};

const ROLE_LAST_HOP: u8 = 3;
const ROLE_SHED: u8 = 5;

/// `streams` game streams through the tunnel over a `delay_ms` WAN with `loss` both
/// ways; stream i starts at i × `stagger_ms`.
fn tunnel(streams: u32, stagger_ms: f64, delay_ms: f64, loss: f64) -> serde_json::Value {
    let mut v = base();
    for (k, x) in [
        ("topology.kind", json!("mux")),
        ("topology.pairs", json!(streams)),
        ("topology.bottleneck_rate_mbps", json!(100.0)),
        ("topology.bottleneck_delay_ms", json!(delay_ms)),
        ("topology.bottleneck_loss", json!(loss)),
        ("topology.bottleneck_loss_rev", json!(loss)),
        ("traffic.model", json!("game")),
        ("scenario.start_stagger_ms", json!(stagger_ms)),
        ("scenario.drain_s", json!(300.0)),
        ("records.traces", json!(false)),
        // scenarios/carlmar2011/base.toml: fast short access links, queues that never
        // drop, Linux's RTO formula and maximum.
        ("topology.access_rate_mbps", json!(1000.0)),
        ("topology.access_delay_ms", json!(0.0)),
        ("topology.access_queue_packets", json!(100_000)),
        ("queue.limit_packets", json!(100_000)),
        ("queue.limit_bytes", json!(0)),
        ("tcp.rto_formula", json!("linux")),
        ("tcp.max_rto_ms", json!(120_000.0)),
        ("mux.mode", json!("mux")),
        ("mux.shed", json!(true)),
    ] {
        set(&mut v, k, x);
    }
    v
}

fn run(v: &serde_json::Value) -> RunRecords {
    simulate(&v.to_string(), 0).expect("valid scenario")
}

/// The streams (= pairs = their connection ids) that were shed.
fn shed(r: &RunRecords, streams: u32) -> Vec<u32> {
    (0..streams).filter(|&s| r.connections.role[s as usize] == ROLE_SHED).collect()
}

#[test]
fn streams_opening_before_the_lanes_are_measured_stay_in_the_tunnel() {
    // The grid's openings (stream i at i ms): every stream opens before a trunk lane
    // has a ping round trip, so nothing can be decided and nothing is shed, even with
    // a slack that would shed a faster tunnel.
    let mut v = tunnel(50, 1.0, 100.0, 0.05);
    set(&mut v, "mux.shed_slack_ms", json!(-10_000.0));
    set(&mut v, "scenario.duration_s", json!(20.0));
    let r = run(&v);
    assert_eq!(&r.connections.role[..50], &[ROLE_LAST_HOP; 50][..]);
}

#[test]
fn once_measured_a_negative_slack_sheds_every_later_stream_onto_the_wan() {
    // One fixed lane on a clean 100-ms path; a slack of −10 s sheds as soon as the
    // lane has a ping round trip (the first ping leaves after 1 s): every stream that
    // opens after that, and no earlier one, goes direct.
    let streams = 20;
    let mut v = tunnel(streams, 500.0, 100.0, 0.0);
    set(&mut v, "mux.shed_slack_ms", json!(-10_000.0));
    set(&mut v, "scenario.duration_s", json!(20.0));
    let r = run(&v);
    let s = shed(&r, streams);
    let first = *s.first().expect("some streams are shed");
    assert!((2..=4).contains(&first), "first shed stream {first} (opens at {} s)", first as f64 * 0.5);
    assert_eq!(s, (first..streams).collect::<Vec<_>>(), "every stream opening later is shed");
    let m = &r.messages;
    for i in 0..m.conn.len() {
        let d = m.t_read[i] - m.t_write[i];
        assert!(d.is_finite(), "message {i} delivered");
        if s.contains(&m.conn[i]) {
            // A direct connection: its own TCP stamps, crossing the WAN bottleneck.
            assert!(m.t_first_tx[i] - m.t_write[i] < 1e-3, "no tunnel queue on a direct connection");
            assert!(m.t_enq[i] >= m.t_first_tx[i] && m.t_deq[i] > m.t_enq[i]);
            // WAN 100 ms + last hop 50 ms, without loss: the propagation.
            assert!((0.150..0.16).contains(&d), "direct delay {d}");
        }
    }
    let c = &r.connections;
    for &p in &s {
        assert_eq!(c.bytes_delivered[p as usize], c.bytes_written[p as usize]);
        assert!(c.bytes_written[p as usize] > 0);
    }
}

#[test]
fn a_backlogged_tunnel_sheds_later_streams_and_off_by_default_sheds_none() {
    // Streams arriving over 100 s on the grid's worst point (5 %, 300 ms): once all 16
    // adaptive lanes are up and still backlogged, new streams go direct.
    let streams = 200;
    let mut v = tunnel(streams, 500.0, 300.0, 0.05);
    set(&mut v, "mux.lanes", json!("adaptive"));
    set(&mut v, "mux.max_lanes", json!(16));
    set(&mut v, "scenario.duration_s", json!(120.0));
    let on = run(&v);
    let s = shed(&on, streams);
    assert!(s.len() >= 10, "{} streams shed", s.len());
    assert!(s[0] >= 40, "no stream is shed before the lanes are all up: first {}", s[0]);
    assert_eq!(run(&v).messages, on.messages, "same seed, same records");
    set(&mut v, "mux.shed", json!(false));
    let off = run(&v);
    assert!(shed(&off, streams).is_empty());
    assert!(off.connections.role[..streams as usize].iter().all(|&r| r == ROLE_LAST_HOP));
}

#[test]
fn adaptive_lanes_at_the_worst_grid_point_keep_every_message_in_time_order() {
    // A session deadline already past was once scheduled as is and turned the clock
    // back (then the bottleneck queue stood still for seconds). Every hop of every
    // message must follow the one before it.
    let mut v = tunnel(200, 1.0, 300.0, 0.05);
    set(&mut v, "mux.lanes", json!("adaptive"));
    set(&mut v, "mux.max_lanes", json!(16));
    set(&mut v, "mux.shed", json!(false));
    set(&mut v, "scenario.duration_s", json!(60.0));
    let r = run(&v);
    let m = &r.messages;
    let mut delivered = 0;
    for i in 0..m.conn.len() {
        if m.t_read[i].is_nan() {
            continue;
        }
        delivered += 1;
        let hops =
            [m.t_write[i], m.t_first_tx[i], m.t_tx[i], m.t_enq[i], m.t_deq[i], m.t_arrive[i], m.t_read[i]];
        assert!(hops.windows(2).all(|w| w[0] <= w[1]), "message {i}: {hops:?}");
    }
    assert!(delivered > m.conn.len() * 9 / 10, "{delivered} of {} delivered", m.conn.len());
}

//! Whole seeded simulations: determinism, conservation, limits, delivery.

mod common;
use common::{base, set};
use proptest::prelude::*;
use serde_json::json;
use thinwan_sim::{simulate, RunRecords};

fn run(v: &serde_json::Value, run: u64) -> RunRecords {
    simulate(&v.to_string(), run).expect("valid scenario")
}

#[test]
fn same_scenario_and_seed_give_identical_records() {
    let mut v = base();
    set(&mut v, "topology.pairs", json!(40));
    set(&mut v, "queue.limit_packets", json!(8)); // force losses
    let a = run(&v, 0);
    let b = run(&v, 0);
    assert!(a.packets.dropped > 0, "the scenario should drop packets");
    // Bit-for-bit, NaN included: compare the Debug renderings (NaN != NaN otherwise).
    let dbg = |r: &RunRecords| format!("{r:?}");
    assert!(dbg(&a) == dbg(&b), "same seed, different records");
    let c = run(&v, 1);
    assert_ne!(a.messages.t_write, c.messages.t_write, "another run uses another seed");
    assert_eq!(c.seed, 2);
}

#[test]
fn prefetching_does_not_change_the_records() {
    // Prefetching is only a hint (off below PREFETCH_MIN_CONNS connections): forced on
    // and off, a lossy run, one with RACK-TLP and separate connections, and a lossy
    // tunnel run each give the same records.
    use thinwan_sim::{world::World, Config};
    let mut lossy = base();
    set(&mut lossy, "topology.pairs", json!(40));
    set(&mut lossy, "queue.limit_packets", json!(8));
    let mut rack = lossy.clone();
    set(&mut rack, "tcp.rack_tlp", json!(true));
    set(&mut rack, "traffic.separate_connections", json!(true));
    let mut mux = base();
    set(&mut mux, "topology.kind", json!("mux"));
    set(&mut mux, "topology.pairs", json!(8));
    set(&mut mux, "topology.bottleneck_loss", json!(0.02));
    set(&mut mux, "traffic.model", json!("game"));
    set(&mut mux, "mux.mode", json!("mux"));
    for v in [lossy, rack, mux] {
        let cfg = || Config::from_json(&v.to_string()).expect("valid scenario");
        let with = |on| World::new(cfg(), 0).expect("builds").with_prefetch(on).run();
        let (on, off) = (with(true), with(false));
        assert!(on.packets.created > 0);
        assert!(format!("{on:?}") == format!("{off:?}"), "prefetching changed the records");
    }
}

#[test]
fn events_per_packet_do_not_grow_with_the_pair_count() {
    // The scaling benchmark's workload (bench_scaling.py): the bottleneck's rate and
    // buffer grow with the pairs. Ten times the pairs carry about ten times the packets
    // with the same number of events each: nothing in the model (timers, port events,
    // re-arms) does work per pair that its packets do not pay for.
    let scaled = |pairs: u32| {
        let mut v = base();
        set(&mut v, "topology.pairs", json!(pairs));
        set(&mut v, "topology.bottleneck_rate_mbps", json!(0.1 * pairs as f64));
        set(&mut v, "queue.limit_packets", json!(0));
        set(&mut v, "queue.limit_bytes", json!(25_000 * pairs));
        set(&mut v, "scenario.duration_s", json!(5.0));
        set(&mut v, "records.traces", json!(false));
        let r = run(&v, 0);
        (r.packets.created as f64, r.events as f64 / r.packets.created as f64)
    };
    let (small, large) = (scaled(50), scaled(500));
    assert!((8.0..12.0).contains(&(large.0 / small.0)), "packets {} -> {}", small.0, large.0);
    assert!((large.1 / small.1 - 1.0).abs() < 0.05, "events per packet {:.3} -> {:.3}", small.1, large.1);
}

#[test]
fn bad_json_names_the_problem() {
    let mut v = base();
    v["tcp"].as_object_mut().unwrap().remove("mss");
    let e = simulate(&v.to_string(), 0).unwrap_err();
    assert!(e.contains("mss"), "{e}");
    let mut v = base();
    set(&mut v, "queue.discipline", json!("red"));
    assert!(simulate(&v.to_string(), 0).unwrap_err().contains("queue.discipline"));
}

#[test]
fn greedy_flow_fills_the_bottleneck() {
    let r = run(&common::greedy_one_flow(), 0);
    let util = r.ports.bytes_tx[0] as f64 * 8.0 / (r.ports.rate_bps[0] * 20.0);
    assert!(util > 0.9, "utilisation {util}");
    assert!(r.ports.drops_overflow[0] > 0, "a greedy Reno flow overflows the buffer");
}

#[test]
fn writes_wait_only_behind_a_full_send_buffer() {
    // The default thin-client traffic: bulk blocks of many segments written at once.
    let unlimited = run(&common::base(), 0);
    let mut small = common::base();
    common::set(&mut small, "tcp.send_buffer_bytes", serde_json::json!(4096));
    let small = run(&small, 0);
    assert!(unlimited.connections.writes_waited.iter().all(|&n| n == 0), "nothing holds a write");
    let waited: u32 = small.connections.writes_waited.iter().sum();
    let written = small.messages.conn.len() as u32;
    assert!(waited > 0 && waited < written, "{waited} of {written} writes waited behind 4 KB");
    // Only the buffer holds a simulated write: every wait is a blocked write.
    assert_eq!(small.connections.writes_blocked, small.connections.writes_waited);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// On randomised scenarios: every byte written is delivered exactly once, in order;
    /// no queue exceeds its limit; packets are conserved.
    #[test]
    fn delivery_limits_and_conservation(
        pairs in 1u32..6, rate in 1.0f64..20.0, delay in 1.0f64..60.0,
        limit_bytes in 3_000u64..60_000, sack in any::<bool>(), reno in any::<bool>(),
        delayed in any::<bool>(), nagle in any::<bool>(), seed in 0u64..1000,
    ) {
        let mut v = base();
        set(&mut v, "topology.pairs", json!(pairs));
        set(&mut v, "topology.bottleneck_rate_mbps", json!(rate));
        set(&mut v, "topology.bottleneck_delay_ms", json!(delay));
        set(&mut v, "queue.limit_packets", json!(0));
        set(&mut v, "queue.limit_bytes", json!(limit_bytes));
        set(&mut v, "tcp.sack", json!(sack));
        set(&mut v, "tcp.recovery", json!(if reno { "reno" } else { "newreno" }));
        set(&mut v, "tcp.delayed_ack", json!(delayed));
        set(&mut v, "tcp.nagle", json!(nagle));
        set(&mut v, "scenario.seed", json!(seed));
        set(&mut v, "scenario.duration_s", json!(8.0));
        set(&mut v, "scenario.drain_s", json!(300.0));
        let r = run(&v, 0);
        let c = &r.connections;
        for i in 0..c.conn.len() {
            prop_assert_eq!(c.bytes_delivered[i], c.bytes_written[i], "conn {} delivered all, once", i);
        }
        // Reads happen in write order within a connection.
        let m = &r.messages;
        for w in 1..m.conn.len() {
            prop_assert!(!m.t_read[w].is_nan());
            if m.conn[w] == m.conn[w - 1] {
                prop_assert!(m.t_read[w] >= m.t_read[w - 1]);
                prop_assert!(m.t_write[w] >= m.t_write[w - 1]);
            }
        }
        prop_assert!(r.ports.max_queue_bytes[0] <= limit_bytes);
        let p = r.packets;
        prop_assert_eq!(p.created, p.arrived + p.dropped + p.in_flight);
        prop_assert_eq!(p.in_flight, 0);
    }
}

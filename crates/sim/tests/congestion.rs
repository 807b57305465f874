//! `tcp.congestion_control` and `tcp.cwnd_unit` in whole simulations: each combination
//! runs, is deterministic, and changes what the default (Reno in bytes) does.

mod common;
use common::{base, set};
use proptest::prelude::*;
use serde_json::json;
use thinwan_sim::{simulate, RunRecords};

fn run(v: &serde_json::Value, run: u64) -> RunRecords {
    simulate(&v.to_string(), run).expect("valid scenario")
}

/// 40 pairs through an 8-packet buffer: losses, recoveries and timeouts.
fn lossy(cc: &str, unit: &str) -> serde_json::Value {
    let mut v = base();
    set(&mut v, "topology.pairs", json!(40));
    set(&mut v, "queue.limit_packets", json!(8));
    set(&mut v, "records.traces", json!(true));
    set(&mut v, "tcp.congestion_control", json!(cc));
    set(&mut v, "tcp.cwnd_unit", json!(unit));
    v
}

#[test]
fn every_controller_and_unit_is_deterministic_and_takes_effect() {
    let dbg = |r: &RunRecords| format!("{r:?}");
    let reno_bytes = dbg(&run(&lossy("reno", "bytes"), 0));
    for (cc, unit) in [("cubic", "bytes"), ("reno", "packets"), ("cubic", "packets")] {
        let v = lossy(cc, unit);
        let (a, b) = (run(&v, 0), run(&v, 0));
        assert!(a.packets.dropped > 0, "{cc}/{unit}: the scenario should drop packets");
        assert!(a.connections.fast_retransmits.iter().any(|&n| n > 0), "{cc}/{unit}: no recovery ran");
        assert!(dbg(&a) == dbg(&b), "{cc}/{unit}: same seed, different records");
        assert!(dbg(&a) != reno_bytes, "{cc}/{unit}: records identical to reno/bytes");
        if unit == "packets" {
            // Traces report bytes: a packet-counted window is a whole number of segments.
            let mss = v["tcp"]["mss"].as_f64().expect("mss");
            assert!(
                a.conn_trace.cwnd.iter().all(|&c| c % mss == 0.0),
                "{cc}/{unit}: cwnd not segments × mss"
            );
        }
    }
}

#[test]
fn a_greedy_cubic_flow_fills_the_bottleneck() {
    for unit in ["bytes", "packets"] {
        let mut v = common::greedy_one_flow();
        set(&mut v, "tcp.congestion_control", json!("cubic"));
        set(&mut v, "tcp.cwnd_unit", json!(unit));
        let r = run(&v, 0);
        let util = r.ports.bytes_tx[0] as f64 * 8.0 / (r.ports.rate_bps[0] * 20.0);
        assert!(util > 0.9, "{unit}: utilisation {util}");
        assert!(r.ports.drops_overflow[0] > 0, "{unit}: a greedy CUBIC flow overflows the buffer too");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Every controller and unit, with each recovery and the recovery-side mechanisms
    /// (PRR, DSACK with RACK's adaptive reordering window, quick ACKs, Linux's RTO):
    /// every byte written is delivered exactly once and packets are conserved (a window
    /// that stops admitting segments would leave bytes undelivered).
    #[test]
    fn every_byte_is_delivered_whatever_the_controller(
        pairs in 1u32..6, rate in 1.0f64..20.0, delay in 1.0f64..60.0,
        limit_bytes in 3_000u64..60_000, recovery in 0u8..4, cubic in any::<bool>(),
        packets in any::<bool>(), linux in any::<bool>(), seed in 0u64..1000,
    ) {
        let mut v = base();
        set(&mut v, "topology.pairs", json!(pairs));
        set(&mut v, "topology.bottleneck_rate_mbps", json!(rate));
        set(&mut v, "topology.bottleneck_delay_ms", json!(delay));
        set(&mut v, "queue.limit_packets", json!(0));
        set(&mut v, "queue.limit_bytes", json!(limit_bytes));
        // 0 Reno, 1 NewReno, 2 SACK, 3 SACK + RACK-TLP.
        set(&mut v, "tcp.sack", json!(recovery >= 2));
        set(&mut v, "tcp.recovery", json!(if recovery == 0 { "reno" } else { "newreno" }));
        set(&mut v, "tcp.rack_tlp", json!(recovery == 3));
        set(&mut v, "tcp.congestion_control", json!(if cubic { "cubic" } else { "reno" }));
        set(&mut v, "tcp.cwnd_unit", json!(if packets { "packets" } else { "bytes" }));
        // The recovery-side mechanisms of the linux profile, where the recovery allows them.
        set(&mut v, "tcp.prr", json!(linux && recovery >= 2));
        set(&mut v, "tcp.dsack", json!(linux && recovery >= 2));
        set(&mut v, "tcp.rack_reo_wnd", json!(if linux && recovery == 3 { "adaptive" } else { "static" }));
        set(&mut v, "tcp.quick_ack", json!(linux));
        set(&mut v, "tcp.rto_formula", json!(if linux { "linux" } else { "rfc6298" }));
        set(&mut v, "scenario.seed", json!(seed));
        set(&mut v, "scenario.duration_s", json!(8.0));
        set(&mut v, "scenario.drain_s", json!(300.0));
        let r = run(&v, 0);
        let c = &r.connections;
        for i in 0..c.conn.len() {
            prop_assert_eq!(c.bytes_delivered[i], c.bytes_written[i], "conn {} delivered all, once", i);
        }
        let p = r.packets;
        prop_assert_eq!(p.created, p.arrived + p.dropped + p.in_flight);
        prop_assert_eq!(p.in_flight, 0);
    }
}

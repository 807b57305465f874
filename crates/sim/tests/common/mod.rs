//! A complete scenario JSON with the documented defaults (docs/scenario.md), for tests.
use serde_json::{json, Value};

pub fn base() -> Value {
    json!({
        "scenario": {"name": "test", "description": "", "duration_s": 10.0, "drain_s": 10.0, "runs": 1,
                      "seed": 1, "start_stagger_ms": 0.25},
        "topology": {"kind": "dumbbell", "pairs": 4, "access_rate_mbps": 100.0, "access_delay_ms": 1.0,
                      "access_queue_packets": 1000, "bottleneck_rate_mbps": 10.0, "bottleneck_delay_ms": 20.0,
                      "bottleneck_loss": 0.0, "bottleneck_loss_rev": 0.0, "bottleneck_jitter_pct": 0.0,
                      "last_hop_delay_ms": 50.0, "last_hop_rate_mbps": 100.0},
        "queue": {"discipline": "droptail", "limit_bytes": 0, "limit_packets": 1000,
                   "priority_classifier": "label", "classifier_gap_ms": 6.31},
        "tcp": {"recovery": "newreno", "sack": true, "mss": 1460, "header_bytes": 40, "initial_cwnd_segments": 10,
                 "nagle": false, "delayed_ack": true, "delayed_ack_ms": 40.0, "slow_start_restart": true,
                 "min_rto_ms": 200.0, "max_rto_ms": 60000.0, "initial_rto_ms": 1000.0, "clock_granularity_ms": 1.0,
                 "rwnd_bytes": 4194304, "send_buffer_bytes": 0, "dupthresh": 3, "rtt_gain": "rfc6298", "rto_formula": "rfc6298",
                 "rto_reset_after_idle": false, "sack_off_after_timeout": false, "rack_tlp": false,
                 "thin_linear_timeouts": false},
        "traffic": {"model": "thin-client", "p_interactive_to_bulk": 0.09, "p_bulk_to_interactive": 0.42,
                     "gap_ii_s": 0.27, "gap_ib_s": 0.22, "gap_bi_s": 0.24, "gap_bb_s": 0.11,
                     "gap_distribution": "lognormal", "gap_lognormal_sigma": 1.0, "interactive_bytes_mean": 137.2,
                     "bulk_bytes_mean": 936.2, "size_spread": 0.5, "bulk_packets_mean": 7.4, "bulk_packets_max": 1000,
                     "bulk_pareto_shape": 1.5, "intra_bulk_gap_ms": 0.36, "separate_connections": false},
        "records": {"traces": true, "trace_interval_ms": 10.0, "trace_connections": "all", "packet_log_conns": []},
        "mux": {"mode": "direct", "trunks": 1, "frame_payload_bytes": 16384, "notsent_lowat_bytes": 32768}
    })
}

pub fn set(v: &mut Value, path: &str, x: Value) {
    let (sec, key) = path.split_once('.').expect("section.key");
    v[sec][key] = x;
}

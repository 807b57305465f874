//! The mux topology (Carlmar 2011, docs/sources.md): direct TCP per stream vs the tunnel with
//! N trunks, game traffic, messages from server write to client read.

mod common;
use common::{base, set};
use serde_json::json;
use thinwan_sim::{simulate, RunRecords};

fn run(v: &serde_json::Value) -> RunRecords {
    simulate(&v.to_string(), 0).expect("valid scenario")
}

/// `streams` game streams over a 100-ms WAN and a 50-ms last hop.
fn grid(mode: &str, trunks: u32, streams: u32, loss: f64) -> serde_json::Value {
    let mut v = base();
    set(&mut v, "topology.kind", json!("mux"));
    set(&mut v, "topology.pairs", json!(streams));
    set(&mut v, "topology.bottleneck_rate_mbps", json!(100.0));
    set(&mut v, "topology.bottleneck_delay_ms", json!(100.0));
    set(&mut v, "topology.bottleneck_loss", json!(loss));
    set(&mut v, "topology.bottleneck_loss_rev", json!(loss));
    set(&mut v, "traffic.model", json!("game"));
    set(&mut v, "tcp.delayed_ack", json!(false));
    set(&mut v, "scenario.duration_s", json!(30.0));
    set(&mut v, "scenario.drain_s", json!(120.0));
    set(&mut v, "mux.mode", json!(mode));
    set(&mut v, "mux.trunks", json!(trunks));
    v
}

fn delays(r: &RunRecords) -> Vec<f64> {
    let m = &r.messages;
    let mut d: Vec<f64> = (0..m.conn.len()).map(|i| m.t_read[i] - m.t_write[i]).collect();
    d.sort_by(|a, b| a.partial_cmp(b).expect("every message delivered"));
    d
}

/// Every stream connection delivered all it was given and each stream read its messages
/// in order; lanes may end with a control frame (ping, ack) in flight.
fn assert_delivered_in_order(r: &RunRecords, what: &str) {
    let c = &r.connections;
    for k in 0..c.conn.len() {
        let slack = if c.role[k] == 2 || c.role[k] == 4 { 64 } else { 0 };
        assert!(c.bytes_written[k] - c.bytes_delivered[k] <= slack, "{what}: connection {k}");
    }
    let m = &r.messages;
    for i in 1..m.conn.len() {
        if m.conn[i] == m.conn[i - 1] {
            assert!(m.t_read[i] >= m.t_read[i - 1], "{what}: stream reads out of order");
        }
    }
}

/// Access (1 ms) + WAN (100 ms) + last hop (50 ms) one way.
const PROPAGATION: f64 = 0.151;

#[test]
fn direct_and_mux_carry_the_same_writes_and_deliver_them_all() {
    let direct = run(&grid("direct", 1, 20, 0.0));
    let mux = run(&grid("mux", 1, 20, 0.0));
    // The sources are the same: same writes, one message row per write, conn = stream.
    assert_eq!(direct.messages.t_write, mux.messages.t_write);
    assert_eq!(direct.messages.bytes, mux.messages.bytes);
    assert_eq!(direct.messages.conn, mux.messages.conn);
    assert!(mux.messages.conn.iter().all(|&c| c < 20));
    assert!(mux.messages.kind.iter().all(|&k| k == 0), "game writes are interactive");
    for r in [&direct, &mux] {
        let d = delays(r);
        assert!(d[0] >= PROPAGATION, "faster than light: {}", d[0]);
        // No loss, light load: the median is the propagation plus serialisation.
        assert!(d[d.len() / 2] < PROPAGATION + 0.005, "median {}", d[d.len() / 2]);
        let m = &r.messages;
        for i in 0..m.conn.len() {
            assert!(m.t_write[i] <= m.t_first_tx[i] && m.t_first_tx[i] <= m.t_tx[i]);
            assert!(m.t_enq[i] <= m.t_deq[i] && m.t_deq[i] < m.t_arrive[i] && m.t_arrive[i] <= m.t_read[i]);
        }
        let k = r.packets;
        assert_eq!(k.created, k.arrived + k.dropped + k.in_flight);
    }
    let c = &direct.connections;
    assert_eq!(c.role, vec![0; 20]);
    assert_eq!(c.bytes_delivered, c.bytes_written);
}

#[test]
fn trunk_lanes_carry_the_sessions_frames() {
    let r = run(&grid("mux", 4, 10, 0.0));
    let c = &r.connections;
    let roles = [vec![3u8; 10], vec![2u8; 4], vec![4u8; 4]].concat();
    assert_eq!(c.role, roles, "10 last-hop connections, 4 forward lanes, 4 reverse lanes");
    assert_eq!(&c.pair[10..], &[0, 1, 2, 3, 0, 1, 2, 3], "a lane connection's pair is its lane");
    let m = &r.messages;
    let stream_bytes: u64 = m.bytes.iter().map(|&b| b as u64).sum();
    for s in 0..10usize {
        let bytes: u64 =
            (0..m.conn.len()).filter(|&i| m.conn[i] as usize == s).map(|i| m.bytes[i] as u64).sum();
        assert_eq!(c.bytes_written[s], bytes, "stream {s}'s last hop carries exactly its writes");
        assert_eq!(c.bytes_delivered[s], bytes, "stream {s}: all delivered");
    }
    // The forward lanes carry the streams' bytes in 12-byte-header frames, plus the
    // core's acks and pings; at most one data frame per write (frames may coalesce).
    let forward: u64 = c.bytes_written[10..14].iter().sum();
    let writes = m.conn.len() as u64;
    assert!(forward > stream_bytes, "framing costs bytes");
    // Pings and pongs (20 bytes each way, a ping per lane per second each side).
    let pings = 4 * (150 + 1) * 2 * 20;
    assert!(forward <= stream_bytes + 12 * writes + pings, "forward {forward} vs {stream_bytes}");
    // Every lane is used (streams spread by id), and the edge answers on the reverse
    // lanes with acks (20-byte frames), far fewer bytes than the data.
    for k in 0..4 {
        assert!(c.bytes_written[10 + k] > stream_bytes / 10, "lane {k} carries streams");
        assert!(
            c.bytes_written[14 + k] > 0 && c.bytes_written[14 + k] < c.bytes_written[10 + k] / 2,
            "lane {k} reverse"
        );
    }
    // Without loss every lane byte but the last moments' control frames arrives.
    for k in 10..18 {
        assert!(c.bytes_written[k] - c.bytes_delivered[k] <= 64, "lane connection {k}");
    }
}

#[test]
fn thin_frames_overtake_a_bulk_backlog() {
    // Thin-client streams on one lane over a slow WAN whose small buffer keeps the
    // trunk's window small, so backlog waits in the core's session: while some streams
    // send bulk blocks (many frames), the others' keystroke frames are scheduled first,
    // so interactive messages wait less than behind a FIFO of everything (a socket that
    // takes all frames at once).
    let mut v = grid("mux", 1, 8, 0.0);
    set(&mut v, "traffic.model", json!("thin-client"));
    set(&mut v, "topology.bottleneck_rate_mbps", json!(2.0));
    set(&mut v, "queue.limit_packets", json!(30));
    set(&mut v, "scenario.duration_s", json!(60.0));
    set(&mut v, "mux.frame_payload_bytes", json!(1024));
    set(&mut v, "mux.notsent_lowat_bytes", json!(2048));
    let fine = run(&v);
    set(&mut v, "mux.notsent_lowat_bytes", json!(1 << 30)); // the socket holds everything: FIFO
    let fifo = run(&v);
    let p99 = |r: &RunRecords| {
        let m = &r.messages;
        let mut d: Vec<f64> =
            (0..m.conn.len()).filter(|&i| m.kind[i] == 0).map(|i| m.t_read[i] - m.t_write[i]).collect();
        d.sort_by(|a, b| a.partial_cmp(b).unwrap());
        d[d.len() * 99 / 100]
    };
    let (a, b) = (p99(&fine), p99(&fifo));
    assert!(a < 0.8 * b, "interactive p99 with the scheduler {a:.3} s vs socket FIFO {b:.3} s");
}

#[test]
fn under_loss_everything_arrives_in_order_and_runs_repeat() {
    for (mode, trunks) in [("direct", 1), ("mux", 1), ("mux", 3)] {
        let v = grid(mode, trunks, 30, 0.05);
        let (a, b) = (run(&v), run(&v));
        assert!(format!("{a:?}") == format!("{b:?}"), "{mode}-{trunks}: not deterministic");
        assert!(a.ports.drops_loss[0] > 0);
        assert_delivered_in_order(&a, &format!("{mode}-{trunks}"));
        let d = delays(&a);
        assert!(d[0] >= PROPAGATION);
        // A loss costs at least one more round trip to someone.
        assert!(d[d.len() - 1] > PROPAGATION + 0.2, "{mode}-{trunks}: max {}", d[d.len() - 1]);
    }
}

#[test]
fn mux_settings_are_checked() {
    let mut v = grid("mux", 1, 2, 0.0);
    set(&mut v, "mux.mode", json!("both"));
    assert!(simulate(&v.to_string(), 0).unwrap_err().contains("mux.mode"));
    // OpenSSH forwarding is a real program: only the lab runs it, and the error says so.
    for peer in ["ssh", "yamux"] {
        set(&mut v, "mux.mode", json!(peer));
        let e = simulate(&v.to_string(), 0).unwrap_err();
        assert!(e.contains("mux.mode") && e.contains(peer) && e.contains("only in the lab"), "{e}");
    }
    let mut v = grid("mux", 0, 2, 0.0);
    set(&mut v, "mux.trunks", json!(0));
    assert!(simulate(&v.to_string(), 0).unwrap_err().contains("mux.trunks"));
    let mut v = grid("mux", 1, 2, 0.0);
    set(&mut v, "traffic.separate_connections", json!(true));
    assert!(simulate(&v.to_string(), 0).is_err());
}

#[test]
fn writes_still_in_the_tunnel_at_the_end_are_rows_never_read() {
    for send_buffer in [0u64, 3000] {
        let mut direct = grid("direct", 1, 40, 0.05);
        set(&mut direct, "topology.bottleneck_delay_ms", json!(300.0));
        set(&mut direct, "scenario.drain_s", json!(0.0));
        set(&mut direct, "tcp.send_buffer_bytes", json!(send_buffer));
        let mut mux = direct.clone();
        set(&mut mux, "mux.mode", json!("mux"));
        // The trunk's send buffer holds back frames (blocked writes), the edge relays
        // onto last hops whose buffers may be full too.
        let (d, m) = (run(&direct), run(&mux));
        let mm = &m.messages;
        assert!(mm.t_read.iter().any(|t| t.is_nan()), "the run ends with frames in flight");
        // Every write has its row, stream by stream in write order, whatever its fate.
        let mut sorted_m: Vec<(u32, f64, u32)> =
            (0..mm.conn.len()).map(|i| (mm.conn[i], mm.t_write[i], mm.bytes[i])).collect();
        let dm = &d.messages;
        let mut sorted_d: Vec<(u32, f64, u32)> =
            (0..dm.conn.len()).map(|i| (dm.conn[i], dm.t_write[i], dm.bytes[i])).collect();
        for w in 1..mm.conn.len() {
            if mm.conn[w] == mm.conn[w - 1] {
                assert!(mm.t_write[w] >= mm.t_write[w - 1], "stream rows in write order");
                // Read in order: once a row is unread, so is every later one of its stream.
                let earlier_read = !mm.t_read[w - 1].is_nan();
                assert!(earlier_read || mm.t_read[w].is_nan(), "a later write read before an earlier one");
            }
        }
        // Unread rows carry nothing from the client side.
        for i in 0..mm.conn.len() {
            if mm.t_read[i].is_nan() {
                assert!(mm.t_arrive[i].is_nan());
            }
        }
        sorted_m.sort_by(|a, b| a.partial_cmp(b).unwrap());
        sorted_d.sort_by(|a, b| a.partial_cmp(b).unwrap());
        // The sources are the same: with an unlimited send buffer the application is
        // never blocked, so mux and direct have exactly the same rows. (With a limit,
        // a direct connection's writes still blocked at the end have no row: the
        // dumbbell's behaviour, kept as it is.)
        if send_buffer == 0 {
            assert_eq!(sorted_m, sorted_d, "mux rows = direct rows");
        }
    }
}

/// `mux.thin_linear_timeouts` (the daemons' `trunk.thin_linear_timeouts`): over a
/// 10 %-loss WAN the lanes' retransmission timeouts stop doubling. (At 30 % both reach
/// the 60-s ceiling: past six retries, or with four segments in flight, they double.)
#[test]
fn thin_linear_timeouts_hold_the_lanes_rto_down() {
    let lanes_rto = |tlt: bool| {
        let mut v = grid("mux", 4, 10, 0.1);
        set(&mut v, "records.trace_connections", json!("all"));
        set(&mut v, "mux.thin_linear_timeouts", json!(tlt));
        let r = run(&v);
        let (c, t) = (&r.connections, &r.conn_trace);
        let lane = |conn: usize| matches!(c.role[conn], 2 | 4);
        let most =
            (0..t.conn.len()).filter(|&i| lane(t.conn[i] as usize)).map(|i| t.rto[i]).fold(0.0, f64::max);
        let timeouts: u32 = (0..c.role.len()).filter(|&i| lane(i)).map(|i| c.timeouts[i]).sum();
        (most, timeouts)
    };
    let (backed_off, timeouts) = lanes_rto(false);
    let (linear, _) = lanes_rto(true);
    assert!(timeouts > 0, "the lanes time out at 10 % loss");
    assert!(linear < backed_off, "lanes' largest RTO: {linear} s with the option, {backed_off} s without");
}

/// `mux.rto_min_ms` (the daemons' `trunk.rto_min_ms`, Linux `TCP_RTO_MIN_US`): the lanes'
/// timeouts sit that much closer to their RTT, and the last hops keep `tcp.min_rto_ms`.
#[test]
fn rto_min_lowers_the_lanes_floor_only() {
    let smallest_rto = |rto_min: Option<u32>| {
        let mut v = grid("mux", 4, 10, 0.01);
        set(&mut v, "records.trace_connections", json!("all"));
        set(&mut v, "tcp.rto_formula", json!("linux"));
        set(&mut v, "mux.rto_min_ms", json!(rto_min));
        let r = run(&v);
        let (c, t) = (&r.connections, &r.conn_trace);
        let smallest = |lanes: bool| {
            (0..t.conn.len())
                .filter(|&i| matches!(c.role[t.conn[i] as usize], 2 | 4) == lanes)
                .map(|i| t.rto[i])
                .fold(f64::INFINITY, f64::min)
        };
        (smallest(true), smallest(false))
    };
    let (lanes, last_hops) = smallest_rto(None);
    let (lanes_50, last_hops_50) = smallest_rto(Some(50));
    // Linux's RTO is SRTT + max(4·RTTVAR, min): 150 ms less floor, 150 ms less timeout.
    assert!(lanes - lanes_50 > 0.1, "lanes' smallest RTO: {lanes_50} s with 50 ms, {lanes} s without");
    assert_eq!(last_hops, last_hops_50, "the last hops keep tcp.min_rto_ms");
}

/// The held rule (`mux.lane_rule = "held"`) halves the lanes of a calm session and
/// doubles them again when frames are held up, so the sessions close lanes by their
/// `LaneClose` handshake and dial them again during the run (the grid's 1 %/300 ms/10 %
/// point, where a single slot for a closing connection's tail once let the next
/// connection's core read frames before its `Hello`): every byte still arrives, each
/// stream in order, and runs repeat bit for bit.
#[test]
fn the_held_rule_closes_and_redials_lanes_and_loses_nothing() {
    let mut v = grid("mux", 16, 200, 0.01);
    set(&mut v, "topology.bottleneck_delay_ms", json!(300.0));
    set(&mut v, "topology.bottleneck_jitter_pct", json!(10.0));
    set(&mut v, "tcp.delayed_ack", json!(true));
    set(&mut v, "tcp.rto_formula", json!("linux"));
    // The whole run: the sessions halve 128 lanes after the sources stop, where a lane
    // closes again before the tail of its last connection arrived.
    set(&mut v, "scenario.duration_s", json!(120.0));
    set(&mut v, "mux.lanes", json!("adaptive"));
    set(&mut v, "mux.max_lanes", json!(128));
    set(&mut v, "mux.thin_linear_timeouts", json!(true));
    let backlog = run(&v);
    set(&mut v, "mux.lane_rule", json!("held"));
    let (a, b) = (run(&v), run(&v));
    assert!(format!("{a:?}") == format!("{b:?}"), "not deterministic");
    assert!(format!("{a:?}") != format!("{backlog:?}"), "the rule changed nothing");
    assert!(a.messages.t_read.iter().all(|t| t.is_finite()), "a message never arrived");
    assert_delivered_in_order(&a, "held");
}

//! Hand-made packet sequences with known times (ms) → exact operations.

use super::*;
use proptest::prelude::*;

const C: Dir = Dir::ClientToServer;
const S: Dir = Dir::ServerToClient;

fn ms(x: f64) -> Instant {
    Instant::from_nanos((x * 1e6).round() as u64)
}

/// `(t_ms, dir, payload)` → every operation, with a 100 ms idle gap.
fn split(pkts: &[(f64, Dir, u32)]) -> Vec<Operation> {
    let flagged: Vec<_> = pkts.iter().map(|&(t, d, n)| (t, d, n, false)).collect();
    split_resent(&flagged)
}

/// `(t_ms, dir, payload, resent)` → every operation, with a 100 ms idle gap.
fn split_resent(pkts: &[(f64, Dir, u32, bool)]) -> Vec<Operation> {
    let mut s = Splitter::new(Duration::from_millis(100));
    let mut out = Vec::new();
    for (i, &(t, dir, payload, resent)) in pkts.iter().enumerate() {
        out.extend(s.push(Packet {
            t: ms(t),
            dir,
            ip_len: 52 + payload,
            payload,
            resent,
            number: i as u64 + 1,
        }));
    }
    out.extend(s.finish());
    out
}

/// The measured case (x11vnc `fill` on `wan-loss-1`, docs/desktop.md): the update
/// request sent after the previous update was lost on the WAN; its retransmission left
/// 60.2 ms after the click was handed to TCP, the click itself at 126.8 ms, the update
/// ended at 216.1 ms. The input starts at the click: 89.3 ms, not 155.9 ms.
#[test]
fn a_resent_request_does_not_open_the_next_input() {
    let ops = split_resent(&[
        (0.0, C, 12, false),      // the previous click
        (40.0, S, 1400, false),   // its update
        (40.5, C, 10, false),     // the next update request (lost after the capture)
        (1060.2, C, 10, true),    // its retransmission, long after the idle gap
        (1090.0, S, 0, false),    // the server's ACK
        (1126.8, C, 12, false),   // the click, released by that ACK
        (1216.1, S, 1400, false), // the update
    ]);
    assert_eq!(ops.len(), 2, "the retransmission opens no operation of its own");
    let (prev, op) = (&ops[0], &ops[1]);
    assert_eq!(prev.latency(), Some(Duration::from_millis(40)));
    assert_eq!(prev.t_last, ms(40.5), "nor does it extend the previous one");
    assert_eq!(
        (prev.c2s.packets, prev.c2s.bytes, prev.c2s.payload),
        (3, 3 * 52 + 32, 22),
        "counted, not as payload"
    );
    assert_eq!(prev.s2c.packets, 2, "the ACK after it stays with the burst it follows");
    assert_eq!(op.t_input, Some(ms(1126.8)));
    assert_eq!(op.first_packet, 6);
    assert!(op.client_started);
    assert_eq!(op.latency(), Some(ms(1216.1).saturating_since(ms(1126.8))));
    assert_eq!((op.round_trips, op.direction_changes), (1, 1));
}

/// Inside a burst a resent client→server segment is no turn and no input either: the
/// first copy already was.
#[test]
fn a_resent_input_keeps_its_first_copy_as_the_start() {
    let ops = split_resent(&[
        (0.0, C, 10, false),
        (60.0, C, 10, true),
        (80.0, S, 500, false),
        (81.0, S, 500, true),
    ]);
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].t_input, Some(ms(0.0)));
    assert_eq!(ops[0].latency(), Some(Duration::from_millis(80)), "the resent update segment is not its end");
    assert_eq!((ops[0].round_trips, ops[0].direction_changes), (1, 1));
    assert_eq!((ops[0].c2s.packets, ops[0].s2c.packets, ops[0].s2c.payload), (2, 2, 500));
}

#[test]
fn a_resent_segment_before_any_burst_is_unattributed() {
    let mut s = Splitter::new(Duration::from_millis(100));
    let p = Packet { t: ms(0.0), dir: C, ip_len: 62, payload: 10, resent: true, number: 1 };
    assert!(s.push(p).is_none());
    assert!(s.finish().is_none());
    assert_eq!((s.unattributed().c2s.packets, s.unattributed().c2s.bytes), (1, 62));
}

#[test]
fn one_keystroke_one_update() {
    // key down/up at 1000 ms, the update 25 ms later in two packets, ACKs after.
    let ops = split(&[
        (1000.0, C, 20),
        (1000.5, C, 20),
        (1025.0, S, 1400),
        (1025.1, S, 300),
        (1025.2, C, 0),
        (1065.0, S, 0),
    ]);
    assert_eq!(ops.len(), 1);
    let op = &ops[0];
    assert_eq!(op.latency(), Some(Duration::from_nanos(25_100_000)), "last s→c payload − first c→s payload");
    assert_eq!(op.t_first_update, Some(ms(1025.0)));
    assert_eq!((op.c2s.packets, op.c2s.bytes, op.c2s.payload), (3, 52 * 3 + 40, 40));
    assert_eq!((op.s2c.packets, op.s2c.bytes, op.s2c.payload), (3, 52 * 3 + 1700, 1700));
    assert_eq!((op.round_trips, op.direction_changes), (1, 1));
    assert_eq!((op.first_packet, op.last_packet), (1, 4));
    assert!(op.client_started);
    assert_eq!(op.gap_before, None);
}

#[test]
fn idle_gap_separates_operations_and_acks_stay_with_theirs() {
    let ops = split(&[
        (0.0, C, 10),
        (50.0, S, 100),
        (120.0, C, 0),  // a delayed ACK 70 ms later: no payload, stays with op 1
        (149.9, C, 10), // 99.9 ms after the last payload: same burst
        (160.0, S, 100),
        (400.0, C, 10), // 240 ms of silence: a new operation
        (450.0, S, 100),
    ]);
    assert_eq!(ops.len(), 2);
    assert_eq!(ops[0].latency(), Some(Duration::from_millis(160)));
    assert_eq!(ops[0].round_trips, 2, "C S C S: two turns of the server answering");
    assert_eq!(ops[0].direction_changes, 3);
    assert_eq!(ops[0].c2s.packets, 3);
    assert_eq!(ops[1].latency(), Some(Duration::from_millis(50)));
    assert_eq!(ops[1].gap_before, Some(Duration::from_millis(240)));
}

#[test]
fn a_gap_of_exactly_idle_gap_splits() {
    let ops = split(&[(0.0, C, 1), (10.0, S, 1), (110.0, S, 1)]);
    assert_eq!(ops.len(), 2);
    assert!(!ops[1].client_started);
    assert_eq!(ops[1].latency(), None, "no input in a server-started burst");
}

#[test]
fn server_first_then_input_in_one_burst_counts_from_the_input() {
    let ops = split(&[(0.0, S, 5), (20.0, C, 5), (40.0, S, 5), (41.0, S, 5)]);
    assert_eq!(ops.len(), 1);
    assert!(!ops[0].client_started);
    assert_eq!(ops[0].latency(), Some(Duration::from_millis(21)));
    assert_eq!(ops[0].round_trips, 1);
    assert_eq!(ops[0].direction_changes, 1);
}

#[test]
fn input_without_update_has_no_latency() {
    let ops = split(&[(0.0, C, 5), (1.0, S, 0)]);
    assert_eq!(ops[0].latency(), None);
    assert_eq!(ops[0].s2c.packets, 1);
}

#[test]
fn packets_before_the_first_burst_are_unattributed() {
    let mut s = Splitter::new(Duration::from_millis(100));
    for (i, d) in [C, S, C].into_iter().enumerate() {
        assert!(s
            .push(Packet {
                t: ms(i as f64),
                dir: d,
                ip_len: 60,
                payload: 0,
                resent: false,
                number: i as u64 + 1
            })
            .is_none());
    }
    assert!(s.finish().is_none());
    assert_eq!(s.unattributed().c2s.packets, 2);
    assert_eq!(s.unattributed().s2c.bytes, 60);
}

proptest! {
    /// Whatever the sequence: every payload packet lands in exactly one operation,
    /// operations are in order, and a latency never exceeds the operation's span.
    #[test]
    fn payload_is_conserved(pkts in proptest::collection::vec((0u64..500_000_000, any::<bool>(), 0u32..2000, any::<bool>()), 0..200)) {
        let mut t = 0u64;
        let mut s = Splitter::new(Duration::from_millis(50));
        let mut ops = Vec::new();
        let mut payload = 0u64;
        let (mut packets, mut before) = (0u64, 0u64);
        for (i, (dt, c2s, len, resent)) in pkts.iter().enumerate() {
            t += dt;
            let dir = if *c2s { C } else { S };
            let out = s.push(Packet { t: Instant::from_nanos(t), dir, ip_len: len + 40, payload: *len, resent: *resent, number: i as u64 + 1 });
            ops.extend(out);
            packets += 1;
            if s.bursts() == 0 {
                before += 1;
            } else if !resent {
                // Retransmitted bytes are counted as packets, never as payload.
                payload += u64::from(*len);
            }
        }
        ops.extend(s.finish());
        let got: u64 = ops.iter().map(|o| o.c2s.payload + o.s2c.payload).sum();
        prop_assert_eq!(got, payload);
        let counted: u64 = ops.iter().map(|o| o.c2s.packets + o.s2c.packets).sum();
        prop_assert_eq!(counted + before, packets);
        let u = s.unattributed();
        prop_assert_eq!(u.c2s.packets + u.s2c.packets, before);
        prop_assert_eq!(ops.len() as u64, s.bursts());
        for w in ops.windows(2) {
            prop_assert!(w[0].last_packet < w[1].first_packet);
            prop_assert!(w[1].gap_before.unwrap() >= Duration::from_millis(50));
        }
        for o in &ops {
            if let Some(l) = o.latency() {
                prop_assert!(l <= o.t_last.saturating_since(o.t_start));
            }
        }
    }
}

//! RFC 3168 §6.1 transcripts on virtual time: what ECN adds to the sender (ECT on new
//! data, one window reduction per window of data, CWR, no retransmission) and to the
//! receiver (ECE from a CE arrival until CWR).

use super::mechanism_tests::{cfg, drain, ms, receiver};
use super::*;
use crate::time::Instant;

const MSS: u64 = 1000;

fn ecn_sender(cc: CongestionControl) -> Sender {
    let mut c = cfg(Mechanisms { ecn: true, ..Default::default() });
    c.congestion_control = cc;
    Sender::new(c)
}

/// Deliver `segs` (those at indices in `ce` marked CE on the way), and feed every ACK
/// back with its ECE flag. Returns the ECE flags of the ACKs, in order.
fn exchange(s: &mut Sender, r: &mut Receiver, now: Instant, segs: &[DataSegment], ce: &[usize]) -> Vec<bool> {
    let mut eces = Vec::new();
    for (i, seg) in segs.iter().enumerate() {
        let mut seg = *seg;
        if ce.contains(&i) {
            assert!(seg.ecn.ect, "only an ECT packet may be marked (RFC 3168 §5)");
            seg.ecn.ce = true;
        }
        r.handle_segment(now, &seg);
        if let Some(a) = r.poll_ack() {
            let ece = r.ece();
            s.handle_ack(now, &a);
            if ece {
                s.handle_ece(now);
            }
            eces.push(ece);
        }
    }
    eces
}

/// Grow the window out of slow start's first round: 10 segments sent and acknowledged.
fn warmed(cc: CongestionControl) -> (Sender, Receiver) {
    let (mut s, mut r) = (ecn_sender(cc), receiver());
    s.write(1 << 30);
    let segs = drain(&mut s, ms(0));
    assert_eq!(segs.len(), 10);
    assert!(segs.iter().all(|g| g.ecn.ect && !g.ecn.cwr), "§6.1.2: new data is ECT(0)");
    exchange(&mut s, &mut r, ms(100), &segs, &[]);
    (s, r)
}

#[test]
fn without_ecn_segments_carry_no_ect_and_ece_is_ignored() {
    let mut s = Sender::new(cfg(Mechanisms::default()));
    s.write(5000);
    let segs = drain(&mut s, ms(0));
    assert!(segs.iter().all(|g| g.ecn == SegmentEcn::default()), "a non-ECN sender is not-ECT");
    let before = s.cwnd();
    s.handle_ece(ms(1));
    assert_eq!(s.cwnd(), before, "ECE means nothing to a sender that did not negotiate ECN");
    assert_eq!(s.stats().ecn_reductions, 0);
}

#[test]
fn receiver_echoes_ece_from_ce_until_cwr() {
    let mut r = receiver();
    let seg = |seq: u64, ce: bool, cwr: bool| DataSegment {
        seq,
        len: MSS as u32,
        retransmission: false,
        ecn: SegmentEcn { ect: true, ce, cwr },
    };
    let mut ece_after = |g: DataSegment| {
        r.handle_segment(ms(0), &g);
        r.poll_ack().expect("an ACK per segment without delayed ACK");
        r.ece()
    };
    assert!(!ece_after(seg(0, false, false)));
    assert!(ece_after(seg(1000, true, false)), "§6.1.3: CE → ECE on the ACK");
    assert!(ece_after(seg(2000, false, false)), "§6.1.3: ECE on every ACK until CWR");
    assert!(ece_after(seg(3000, false, false)), "§6.1.3: … still");
    assert!(!ece_after(seg(4000, false, true)), "§6.1.3: CWR ends the echo");
    assert!(!ece_after(seg(5000, false, false)));
    assert!(ece_after(seg(6000, true, true)), "§6.1.3: CE with CWR keeps ECE (a new congestion)");
}

#[test]
fn ece_halves_reno_once_per_window_without_retransmitting() {
    let (mut s, mut r) = warmed(CongestionControl::Reno);
    assert_eq!(s.cwnd(), 20 * MSS, "slow start: 10 + 10");
    let segs = drain(&mut s, ms(100));
    assert_eq!(segs.len(), 20);
    let sent_before = s.stats().segments_sent;
    // Three segments of this window marked: one reduction for the window (§6.1.2).
    let eces = exchange(&mut s, &mut r, ms(200), &segs, &[2, 5, 9]);
    assert!(eces[2..].iter().all(|&e| e), "ECE from the first CE on (no CWR seen yet)");
    assert_eq!(s.stats().ecn_reductions, 1, "§6.1.2: at most once per window of data");
    // As for a loss, RFC 5681 (4): half the FlightSize when the ECE came — the third
    // ACK, 17 of the 20 segments outstanding.
    assert_eq!(s.ssthresh(), 17 * MSS / 2, "§6.1.2: Reno halves");
    assert_eq!(s.stats().fast_retransmits + s.stats().timeouts, 0);
    assert_eq!(s.stats().bytes_retransmitted, 0, "§6.1.2: a mark is not a loss: nothing is resent");
    assert_eq!(s.stats().segments_sent, sent_before, "nothing sent while the ACKs came back");
    // The next new segment carries CWR, the ones after it do not.
    let next = drain(&mut s, ms(200));
    assert!(!next.is_empty());
    assert!(next[0].ecn.cwr && next[0].ecn.ect, "§6.1.2: CWR on the first new data after the reduction");
    assert!(next[1..].iter().all(|g| !g.ecn.cwr), "CWR once");
    // Its ACK ends the echo; a CE in the new window is a new congestion and reduces again.
    let eces = exchange(&mut s, &mut r, ms(300), &next, &[1]);
    assert!(!eces[0], "CWR ends the echo");
    assert!(eces[1]);
    assert_eq!(s.stats().ecn_reductions, 2, "a mark in the next window of data reduces again");
}

#[test]
fn ece_uses_cubics_beta() {
    let (mut s, mut r) = warmed(CongestionControl::Cubic);
    let segs = drain(&mut s, ms(100));
    // The second ACK of the round carries ECE: the reduction is the one a loss would
    // make there, from the data still outstanding.
    exchange(&mut s, &mut r, ms(200), &segs[..2], &[1]);
    assert_eq!(s.stats().ecn_reductions, 1);
    let flight = (segs.len() as u64 - 2) * MSS;
    // RFC 9438 §4.6: × β_cubic = 0.7, not Reno's ½; cwnd = ssthresh (RFC 3168 §6.1.2
    // "as a loss").
    assert_eq!(s.ssthresh(), flight * 7 / 10, "β_cubic of the flight");
    assert_eq!(s.cwnd(), s.ssthresh());
}

#[test]
fn ece_during_loss_recovery_does_not_reduce_again() {
    let (mut s, mut r) = warmed(CongestionControl::Reno);
    let segs = drain(&mut s, ms(100));
    // Segment 0 is lost; 1..20 arrive, and 4 of them were marked CE on the way.
    exchange(&mut s, &mut r, ms(200), &segs[1..], &[5, 6]);
    assert!(s.in_recovery(), "three duplicate ACKs: fast recovery (RFC 6675)");
    assert_eq!(s.stats().fast_retransmits, 1);
    assert_eq!(s.stats().ecn_reductions, 0, "§6.1.2: the loss already reduced the window for this data");
    assert_eq!(s.ssthresh(), 10 * MSS, "one halving, not two");
}

//! Transcript tests of issue #21's RACK-TLP completion and Linux receiver details, on
//! virtual time: DSACK generation (RFC 2883 §4), RACK's reordering window (RFC 8985
//! §6.2 steps 3–4) and TLP's use of DSACK (§7.4.2), PRR in the sender (RFC 6937), and
//! Linux's quick-ACK mode (`tcp_event_data_recv`, `tcp_incr_quickack`).

use super::mechanism_tests::{cfg, ms};
use super::*;
use crate::time::{Duration, Instant};

fn seg(seq: u64, len: u32) -> DataSegment {
    DataSegment { seq, len, retransmission: false, ecn: SegmentEcn::default() }
}

fn rcv_cfg(delayed_ack: bool) -> ReceiverConfig {
    ReceiverConfig { rwnd: 1 << 20, delayed_ack, delayed_ack_timeout: Duration::from_millis(40), sack: true }
}

fn receiver(opts: ReceiverOptions) -> Receiver {
    Receiver::with_options(rcv_cfg(false), opts)
}

fn dsack_receiver() -> Receiver {
    receiver(ReceiverOptions { dsack: true, ..Default::default() })
}

fn drain(s: &mut Sender, now: Instant) -> Vec<DataSegment> {
    std::iter::from_fn(|| s.poll_transmit(now)).collect()
}

/// Deliver segments at `now`, feeding every ACK straight back.
fn exchange(s: &mut Sender, r: &mut Receiver, now: Instant, segs: &[DataSegment]) {
    for sg in segs {
        r.handle_segment(now, sg);
        if let Some(a) = r.poll_ack() {
            s.handle_ack(now, &a);
        }
    }
}

/// The ACK a single segment draws.
fn ack_of(r: &mut Receiver, now: Instant, sg: DataSegment) -> Option<Ack> {
    r.handle_segment(now, &sg);
    r.poll_ack()
}

mod dsack_generation {
    use super::*;

    #[test]
    fn duplicate_below_rcv_nxt_is_the_first_block_once() {
        let mut r = dsack_receiver();
        ack_of(&mut r, ms(0), seg(0, 1000));
        ack_of(&mut r, ms(1), seg(1000, 1000));
        let a = ack_of(&mut r, ms(2), seg(0, 1000)).expect("an old segment is ACKed at once");
        assert_eq!(a.ack, 2000);
        assert_eq!(a.sack.as_slice(), &[(0, 1000)], "RFC 2883 §4: the duplicate as the first block");
        let next = ack_of(&mut r, ms(3), seg(2000, 1000)).unwrap();
        assert!(next.sack.as_slice().is_empty(), "RFC 2883 §4: each duplicate is reported once");
    }

    #[test]
    fn partly_old_segment_reports_the_part_below_rcv_nxt() {
        let mut r = dsack_receiver();
        ack_of(&mut r, ms(0), seg(0, 1000));
        let a = ack_of(&mut r, ms(1), seg(500, 1000)).unwrap();
        assert_eq!(a.ack, 1500);
        assert_eq!(a.sack.as_slice(), &[(500, 1000)], "tcp_data_queue: tcp_dsack_set(seq, rcv_nxt)");
    }

    #[test]
    fn duplicate_inside_a_held_block_comes_first_then_the_block() {
        let mut r = dsack_receiver();
        ack_of(&mut r, ms(0), seg(0, 1000));
        ack_of(&mut r, ms(1), seg(2000, 1000)); // 1000..2000 missing
        ack_of(&mut r, ms(2), seg(3000, 1000));
        ack_of(&mut r, ms(3), seg(6000, 1000)); // a second block, now the most recent
        let a = ack_of(&mut r, ms(4), seg(3000, 1000)).unwrap();
        assert_eq!(a.ack, 1000);
        assert_eq!(
            a.sack.as_slice(),
            &[(3000, 4000), (2000, 4000), (6000, 7000)],
            "RFC 2883 §4: DSACK first, then the (larger) block that holds it, then the others"
        );
        let a = ack_of(&mut r, ms(5), seg(8000, 1000)).unwrap();
        assert_eq!(a.sack.as_slice(), &[(8000, 9000), (2000, 4000), (6000, 7000)], "reported once");
    }

    #[test]
    fn without_dsack_a_duplicate_is_only_an_immediate_ack() {
        let mut r = receiver(ReceiverOptions::default());
        ack_of(&mut r, ms(0), seg(0, 1000));
        let a = ack_of(&mut r, ms(1), seg(0, 1000)).unwrap();
        assert_eq!((a.ack, a.sack.as_slice()), (1000, &[][..]));
    }
}

mod reo_wnd {
    use super::*;

    fn rack(reo: ReoWnd) -> Mechanisms {
        Mechanisms { rack_tlp: true, dsack: true, rack_reo_wnd: reo, ..Default::default() }
    }

    /// Episode 1 shows reordering without a loss (a never-retransmitted segment delivered
    /// below RACK.fack); episode 2 reorders the first of five segments behind the other
    /// four. Returns the fast retransmits.
    fn two_reordering_episodes(reo: ReoWnd) -> (u64, bool) {
        let mut s = Sender::new(cfg(rack(reo)));
        let mut r = dsack_receiver();
        s.write(5000);
        let e1 = drain(&mut s, ms(0));
        // Two later segments first: 2 SACKed < DupThresh, reo_wnd = min_RTT/4 = 25 ms.
        exchange(&mut s, &mut r, ms(100), &e1[1..3]);
        assert_eq!(s.stats().rack_marked_lost, 0, "0 + 100 + 25 > 100");
        exchange(&mut s, &mut r, ms(110), &e1[..1]);
        exchange(&mut s, &mut r, ms(110), &e1[3..]);
        let seen = s.rack().reordering_seen();
        s.write(5000);
        let e2 = drain(&mut s, ms(200));
        // Four later segments first: DupThresh SACKed.
        exchange(&mut s, &mut r, ms(300), &e2[1..]);
        exchange(&mut s, &mut r, ms(310), &e2[..1]);
        (s.stats().fast_retransmits, seen)
    }

    #[test]
    fn reordering_seen_keeps_the_window_open_with_dupthresh_sacked() {
        let (frs, seen) = two_reordering_episodes(ReoWnd::Adaptive);
        assert!(seen, "RFC 8985 §6.2 step 3: segment 0 delivered below RACK.fack, never retransmitted");
        assert_eq!(frs, 0, "step 4: reordering seen → reo_wnd = min_RTT/4 even with DupThresh SACKed");
        let (frs, _) = two_reordering_episodes(ReoWnd::Static);
        assert_eq!(frs, 1, "static: reo_wnd = 0 once DupThresh segments are SACKed → spurious recovery");
    }

    #[test]
    fn a_spurious_retransmission_draws_a_dsack_that_grows_the_window() {
        let mut s = Sender::new(cfg(rack(ReoWnd::Adaptive)));
        let mut r = dsack_receiver();
        s.write(5000);
        let e = drain(&mut s, ms(0));
        exchange(&mut s, &mut r, ms(100), &e[1..]); // 4 SACKed, no reordering seen: reo_wnd 0
        assert!(s.in_recovery());
        let rtx = drain(&mut s, ms(100));
        assert_eq!(rtx[0].seq, 0, "segment 0 retransmitted (spuriously)");
        assert_eq!(s.rack().reo_wnd_mult(), 1);
        s.write(3000);
        let more = drain(&mut s, ms(100)); // keeps data outstanding: the round is open
        exchange(&mut s, &mut r, ms(150), &e[..1]); // the original arrives: ack 5000
        exchange(&mut s, &mut r, ms(200), &rtx[..1]); // the copy: DSACK (0, 1000)
        assert_eq!(s.rack().reo_wnd_mult(), 2, "RFC 8985 §6.2 step 4: reo_wnd_mult += 1 on a DSACK");
        // A second DSACK in the same round trip (SND.UNA below RACK.dsack_round) does not.
        exchange(&mut s, &mut r, ms(210), &rtx[..1]);
        assert_eq!(s.rack().reo_wnd_mult(), 2, "at most once per round trip");
        // Once SND.UNA passes the round's SND.NXT, the next DSACK grows it again.
        exchange(&mut s, &mut r, ms(250), &more);
        exchange(&mut s, &mut r, ms(260), &rtx[..1]);
        assert_eq!(s.rack().reo_wnd_mult(), 3, "a new round trip, a new DSACK");
    }
}

mod linux_dsack_gate {
    //! Linux `tcp_dsack_seen`: `if (tp->reord_seen && !(state->flag & FLAG_DSACK_TLP))
    //! tp->rack.dsack_seen = 1` — the DSACKs that may grow RACK's window
    //! ([`ReoWnd::Linux`]), against RFC 8985 §6.2 step 4's every DSACK
    //! ([`ReoWnd::Adaptive`]).
    use super::*;

    fn sender(reo: ReoWnd) -> Sender {
        let mut c = cfg(Mechanisms { rack_tlp: true, dsack: true, rack_reo_wnd: reo, ..Default::default() });
        c.rto.min = Duration::from_secs(1); // the probe, not the RTO, fires first
        Sender::new(c)
    }

    /// A spurious fast retransmission's DSACK, no reordering seen before. Returns
    /// `reo_wnd_mult` afterwards.
    fn dsack_without_reordering(reo: ReoWnd) -> u32 {
        let mut s = sender(reo);
        let mut r = dsack_receiver();
        s.write(5000);
        let e = drain(&mut s, ms(0));
        exchange(&mut s, &mut r, ms(100), &e[1..]); // 4 SACKed: recovery, 0 retransmitted
        let rtx = drain(&mut s, ms(100));
        assert_eq!(rtx[0].seq, 0);
        s.write(3000);
        drain(&mut s, ms(100));
        exchange(&mut s, &mut r, ms(150), &e[..1]); // the original: it was retransmitted
        exchange(&mut s, &mut r, ms(200), &rtx[..1]); // the copy: DSACK (0, 1000)
        assert!(!s.rack().reordering_seen(), "segment 0 had been retransmitted: no proof");
        s.rack().reo_wnd_mult()
    }

    #[test]
    fn a_dsack_before_any_reordering_grows_only_the_rfc_window() {
        assert_eq!(dsack_without_reordering(ReoWnd::Adaptive), 2);
        assert_eq!(dsack_without_reordering(ReoWnd::Linux), 1, "!tp->reord_seen");
    }

    /// Reordering seen first (segment 0 overtaken, never retransmitted), then a tail
    /// probe retransmits a segment whose ACK was only late, and the probe's duplicate
    /// draws a DSACK ending at TLP.end_seq. Returns `reo_wnd_mult` afterwards.
    fn probe_dsack_after_reordering(reo: ReoWnd) -> u32 {
        let mut s = sender(reo);
        let mut r = dsack_receiver();
        s.write(5000);
        let e = drain(&mut s, ms(0));
        exchange(&mut s, &mut r, ms(100), &e[1..3]);
        exchange(&mut s, &mut r, ms(110), &e[..1]);
        exchange(&mut s, &mut r, ms(110), &e[3..]);
        assert!(s.rack().reordering_seen());
        assert_eq!(s.stats().fast_retransmits, 0);
        s.write(500);
        let tail = drain(&mut s, ms(1000));
        let late_ack = ack_of(&mut r, ms(1050), tail[0]).unwrap();
        let pto = s.poll_timeout().expect("the probe timer");
        assert_eq!(s.handle_timeout(pto), None);
        let probe = drain(&mut s, pto);
        assert!(probe[0].retransmission, "no new data: the last segment again");
        s.handle_ack(pto + Duration::from_millis(50), &late_ack);
        let dup = ack_of(&mut r, pto + Duration::from_millis(100), probe[0]).unwrap();
        assert_eq!(dup.sack.as_slice(), &[(5000, 5500)], "the probe's DSACK");
        s.handle_ack(pto + Duration::from_millis(150), &dup);
        s.rack().reo_wnd_mult()
    }

    #[test]
    fn a_tail_probes_dsack_grows_only_the_rfc_window() {
        assert_eq!(probe_dsack_after_reordering(ReoWnd::Adaptive), 2);
        assert_eq!(probe_dsack_after_reordering(ReoWnd::Linux), 1, "FLAG_DSACK_TLP");
    }
}

mod tlp_dsack {
    use super::*;

    /// A tail probe retransmits a segment whose ACK was only late; the original's ACK
    /// and then the probe's DSACK come back. Returns ssthresh afterwards.
    fn spurious_probe(dsack: bool) -> u64 {
        let mut c = cfg(Mechanisms { rack_tlp: true, dsack, ..Default::default() });
        c.rto.min = Duration::from_secs(1);
        let mut s = Sender::new(c);
        let mut r = receiver(ReceiverOptions { dsack, ..Default::default() });
        s.write(1000);
        let first = drain(&mut s, ms(0));
        exchange(&mut s, &mut r, ms(100), &first); // SRTT 100 ms
        s.write(500);
        let tail = drain(&mut s, ms(1000));
        let late_ack = ack_of(&mut r, ms(1050), tail[0]).unwrap(); // delivered; ACK delayed
        assert_eq!(s.handle_timeout(ms(1400)), None, "the probe timer");
        let probe = drain(&mut s, ms(1400));
        assert!(probe[0].retransmission);
        s.handle_ack(ms(1450), &late_ack); // ACK of exactly TLP.end_seq
        let dup_ack = ack_of(&mut r, ms(1500), probe[0]).unwrap();
        assert_eq!(dup_ack.sack.as_slice().len(), dsack as usize);
        s.handle_ack(ms(1550), &dup_ack);
        s.ssthresh()
    }

    #[test]
    fn a_dsack_for_the_probe_says_it_was_spurious_and_keeps_the_window() {
        assert_eq!(
            spurious_probe(true),
            u64::MAX,
            "RFC 8985 §7.4.2: DSACK matching TLP.end_seq → no reduction"
        );
        assert!(spurious_probe(false) < u64::MAX, "without DSACK the episode ends in a reduction");
    }
}

mod prr {
    use super::*;

    /// 20 segments in flight, the first lost, the other 19 SACKed one ACK at a time
    /// (RFC 6937 §3.1's single-loss setting without limited transmit). Returns the
    /// number of segments sent after each ACK.
    fn single_loss(prr: bool) -> Vec<usize> {
        let mut c = cfg(Mechanisms { prr, ..Default::default() });
        c.initial_cwnd_segments = 20;
        let mut s = Sender::new(c);
        let mut r = receiver(ReceiverOptions::default());
        s.write(20_000);
        let w = drain(&mut s, ms(0));
        assert_eq!(w.len(), 20);
        s.write(100_000); // the application always has data
        let mut sent = Vec::new();
        for (i, sg) in w[1..].iter().enumerate() {
            let now = ms(100 + i as u64);
            let a = ack_of(&mut r, now, *sg).unwrap();
            s.handle_ack(now, &a);
            sent.push(drain(&mut s, now).len());
        }
        sent
    }

    #[test]
    fn prr_spreads_the_reduction_over_the_round_trip() {
        let rfc6675 = single_loss(false);
        let prr = single_loss(true);
        // RFC 6937 §3.1's RFC 6675 row exactly: two new segments on the first two
        // duplicate ACKs (pipe-based sending, as limited transmit), the retransmission on
        // the third, silence until pipe falls to cwnd = ssthresh, then one per ACK.
        assert_eq!(rfc6675, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
        // PRR: RecoverFS = 22 000 B, ssthresh = FlightSize/2 = 11 000 B, so sndcnt =
        // ⌈prr_delivered/2⌉ − prr_out bytes: a full segment every other ACK from ACK 6
        // (in bytes the half segment of ACK 5 waits; the segment-counted table of the RFC
        // sends on 5, see prr.rs), until pipe reaches ssthresh on ACK 16; then
        // ssthresh − pipe, one per ACK.
        assert_eq!(prr, [1, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1, 1]);
        assert_eq!(
            prr[2..].iter().sum::<usize>(),
            rfc6675[2..].iter().sum::<usize>(),
            "RFC 6937 §3.1: the same total, spread over the round trip"
        );
    }

    /// 20 segments in flight, the first 15 lost, ACKs of the last 5 arrive (RFC 6937
    /// §3.1's burst-loss setting), with RACK marking the losses. Segments sent per ACK.
    fn burst_loss_rack(prr: bool) -> Vec<usize> {
        let mut c = cfg(Mechanisms { rack_tlp: true, prr, ..Default::default() });
        c.initial_cwnd_segments = 20;
        let mut s = Sender::new(c);
        let mut r = receiver(ReceiverOptions::default());
        s.write(20_000);
        let w = drain(&mut s, ms(0));
        s.write(100_000);
        let mut sent = Vec::new();
        for (i, sg) in w[15..].iter().enumerate() {
            let now = ms(100 + i as u64);
            let a = ack_of(&mut r, now, *sg).unwrap();
            s.handle_ack(now, &a);
            sent.push(drain(&mut s, now).len());
        }
        sent
    }

    #[test]
    fn prr_ssrb_after_a_burst_loss_on_the_rack_path() {
        // RFC 6937 §3.1, 15 of 20 lost: N N on the first two ACKs; the third starts
        // recovery (RACK: DupThresh SACKed, reo_wnd 0) with pipe = 22 − 3 − 15 = 4 and
        // ssthresh = 11. RFC 6675 sends ssthresh − pipe = 7 at once, then 1 per ACK …
        assert_eq!(burst_loss_rack(false), [1, 1, 7, 1, 1], "RFC 6937 §3.1, RFC 6675 row: 7R R R");
        // … PRR-SSRB one more than delivered per ACK: 2, 2, 2 (pipe 4, 5, 6).
        assert_eq!(burst_loss_rack(true), [1, 1, 2, 2, 2], "RFC 6937 §3.1, PRR-SSRB row: 2R 2R 2R");
    }
}

mod quick_ack {
    use super::*;

    fn quick_receiver(rwnd: u64, quick_ack: bool) -> Receiver {
        let opts = ReceiverOptions { quick_ack, idle_rto: Duration::from_millis(300), ..Default::default() };
        Receiver::with_options(ReceiverConfig { rwnd, ..rcv_cfg(true) }, opts)
    }

    /// ACKs drawn by `n` in-order full segments from `from`, all at `now`.
    fn acks(r: &mut Receiver, now: Instant, from: u64, n: u64) -> usize {
        (0..n).filter_map(|k| ack_of(r, now, seg(from + k * 1000, 1000))).count()
    }

    #[test]
    fn sixteen_quick_acks_at_the_start_then_every_second_segment() {
        let mut r = quick_receiver(1 << 20, true);
        assert_eq!(acks(&mut r, ms(0), 0, 16), 16, "TCP_MAX_QUICKACKS: every segment ACKed");
        assert_eq!(r.quick_acks_left(), 0);
        assert_eq!(acks(&mut r, ms(1), 16_000, 4), 2, "then delayed ACK: every second segment");
        let mut plain = quick_receiver(1 << 20, false);
        assert_eq!(acks(&mut plain, ms(0), 0, 20), 10, "quick_ack off: today's delayed ACK");
    }

    #[test]
    fn idle_longer_than_the_receiver_rto_re_enters_quick_mode() {
        let mut r = quick_receiver(1 << 20, true);
        acks(&mut r, ms(0), 0, 20);
        assert_eq!(acks(&mut r, ms(200), 20_000, 4), 2, "idle 200 ms ≤ RTO 300 ms: still delayed");
        assert_eq!(acks(&mut r, ms(600), 24_000, 20), 16 + 2, "idle 400 ms > RTO: 16 quick ACKs again");
    }

    #[test]
    fn a_duplicate_segment_re_enters_quick_mode() {
        let mut r = quick_receiver(1 << 20, true);
        acks(&mut r, ms(0), 0, 20);
        assert!(ack_of(&mut r, ms(1), seg(0, 1000)).is_some(), "a duplicate is ACKed at once");
        assert_eq!(r.quick_acks_left(), 15, "tcp_enter_quickack_mode(16), one used by that ACK");
    }

    #[test]
    fn a_small_window_allows_fewer_quick_acks() {
        // tcp_incr_quickack: rcv_wnd / (2·rcv_mss) = 3000 / 2000 = 1.
        let mut r = quick_receiver(3000, true);
        assert_eq!(acks(&mut r, ms(0), 0, 3), 2, "1 quick ACK, then every second segment");
        // rcv_wnd / (2·rcv_mss) = 0 → 2.
        let mut r = quick_receiver(1500, true);
        ack_of(&mut r, ms(0), seg(0, 1000));
        assert_eq!(r.quick_acks_left(), 1, "2 quick ACKs, one used");
    }

    #[test]
    fn idle_rto_is_the_handshake_rto() {
        // SRTT = RTT, rttvar = max(2·RTT, 200 ms): 40 ms → 240 ms, 150 ms → 450 ms.
        let min = Duration::from_millis(200);
        assert_eq!(idle_rto_after_handshake(Duration::from_millis(40), min), Duration::from_millis(240));
        assert_eq!(idle_rto_after_handshake(Duration::from_millis(150), min), Duration::from_millis(450));
    }
}

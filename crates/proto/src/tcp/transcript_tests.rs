//! Transcript tests of the TCP endpoints on virtual time, grouped by situation
//! (smoltcp `socket/tcp.rs` style), and a two-endpoint pair that jumps to the next
//! wake-up (quinn `tests/util.rs` style) for whole-transfer checks.

use super::*;
use crate::time::{Duration, Instant};
use proptest::prelude::*;

const MSS: u32 = 1000;

fn ms(x: u64) -> Instant {
    Instant::from_nanos(x * 1_000_000)
}

fn scfg(recovery: Recovery) -> SenderConfig {
    SenderConfig {
        mss: MSS,
        initial_cwnd_segments: 2,
        nagle: false,
        slow_start_restart: false,
        recovery,
        dupthresh: 3,
        rto: RtoConfig { min: Duration::from_millis(200), ..Default::default() },
        send_buffer: None,
        mechanisms: Mechanisms::default(),
        ..Default::default()
    }
}

fn rcfg(sack: bool) -> ReceiverConfig {
    ReceiverConfig { rwnd: 1 << 20, delayed_ack: false, delayed_ack_timeout: Duration::from_millis(40), sack }
}

/// Everything the sender may send now.
fn drain(s: &mut Sender, now: Instant) -> Vec<DataSegment> {
    std::iter::from_fn(|| s.poll_transmit(now)).collect()
}

/// Deliver segments to the receiver, returning every ACK it sends.
fn deliver(r: &mut Receiver, now: Instant, segs: &[DataSegment]) -> Vec<Ack> {
    segs.iter()
        .filter_map(|seg| {
            r.handle_segment(now, seg);
            r.poll_ack()
        })
        .collect()
}

fn feed(s: &mut Sender, now: Instant, acks: &[Ack]) {
    for a in acks {
        s.handle_ack(now, a);
    }
}

fn seqs(segs: &[DataSegment]) -> Vec<u64> {
    segs.iter().map(|s| s.seq).collect()
}

mod rto {
    use super::*;

    #[test]
    fn first_sample_then_backoff_doubles_and_clamps() {
        let mut cfg = scfg(Recovery::NewReno);
        cfg.rto.max = Duration::from_secs(3);
        let mut s = Sender::new(cfg);
        let mut r = Receiver::new(rcfg(false));
        s.write(1000);
        let segs = drain(&mut s, ms(0));
        assert_eq!(s.poll_timeout(), Some(ms(1000)), "RFC 6298 (2.1): initial RTO 1 s");
        let acks = deliver(&mut r, ms(100), &segs);
        feed(&mut s, ms(100), &acks);
        assert_eq!(s.rtt().srtt(), Some(Duration::from_millis(100)));
        assert_eq!(s.current_rto(), Duration::from_millis(300)); // 100 + 4·50
        assert_eq!(s.poll_timeout(), None, "(5.2) stopped when all data is acked");

        s.write(1000);
        assert_eq!(drain(&mut s, ms(200)).len(), 1);
        assert_eq!(s.poll_timeout(), Some(ms(500)));
        // Lost. (5.4)–(5.6): retransmit, double, restart.
        assert_eq!(s.handle_timeout(ms(500)), Some(1000));
        assert_eq!(seqs(&drain(&mut s, ms(500))), vec![1000]);
        assert_eq!(s.poll_timeout(), Some(ms(1100)));
        assert_eq!(s.handle_timeout(ms(1100)), Some(1000));
        drain(&mut s, ms(1100));
        assert_eq!(s.poll_timeout(), Some(ms(2300)));
        s.handle_timeout(ms(2300));
        drain(&mut s, ms(2300));
        assert_eq!(s.poll_timeout(), Some(ms(4700)), "300 ms · 2³");
        s.handle_timeout(ms(4700));
        drain(&mut s, ms(4700));
        assert_eq!(s.poll_timeout(), Some(ms(7700)), "300 ms · 2⁴ clamped to max 3 s");
        assert_eq!(s.stats().timeouts, 4);
    }

    #[test]
    fn karn_no_sample_from_retransmitted_segment_and_backoff_kept() {
        let mut s = Sender::new(scfg(Recovery::NewReno));
        let mut r = Receiver::new(rcfg(false));
        s.write(1000);
        let segs = drain(&mut s, ms(0));
        // The segment is lost; the timeout retransmits it.
        s.handle_timeout(ms(1000));
        let rtx = drain(&mut s, ms(1000));
        assert!(rtx[0].retransmission);
        let _ = segs;
        let acks = deliver(&mut r, ms(1050), &rtx);
        feed(&mut s, ms(1050), &acks);
        assert_eq!(s.rtt().srtt(), None, "Karn: an ambiguous ACK gives no sample");
        // The next clean exchange gives the first sample and resets the backoff.
        s.write(1000);
        let segs = drain(&mut s, ms(2000));
        assert_eq!(s.current_rto(), Duration::from_secs(2), "backoff kept until a valid sample");
        let acks = deliver(&mut r, ms(2080), &segs);
        feed(&mut s, ms(2080), &acks);
        assert_eq!(s.rtt().srtt(), Some(Duration::from_millis(80)));
        assert_eq!(s.current_rto(), Duration::from_millis(240));
    }

    #[test]
    fn min_rto_applies() {
        let mut s = Sender::new(scfg(Recovery::NewReno));
        let mut r = Receiver::new(rcfg(false));
        s.write(1000);
        let segs = drain(&mut s, ms(0));
        feed(&mut s, ms(10), &deliver(&mut r, ms(10), &segs));
        assert_eq!(s.current_rto(), Duration::from_millis(200)); // 10 + 20 < 200
    }
}

mod congestion {
    use super::*;

    #[test]
    fn slow_start_doubles_per_rtt_then_linear_growth() {
        let mut cfg = scfg(Recovery::NewReno);
        cfg.initial_cwnd_segments = 1;
        let mut s = Sender::new(cfg);
        let mut r = Receiver::new(rcfg(false));
        s.write(1_000_000);
        let mut t = 0;
        let mut per_rtt = Vec::new();
        for _ in 0..5 {
            let segs = drain(&mut s, ms(t));
            per_rtt.push(segs.len());
            t += 50;
            feed(&mut s, ms(t), &deliver(&mut r, ms(t), &segs));
        }
        assert_eq!(per_rtt, vec![1, 2, 4, 8, 16], "RFC 5681 (2): +1 SMSS per ACK");
        assert_eq!(s.cwnd(), 32 * MSS as u64);
    }

    #[test]
    fn congestion_avoidance_adds_about_one_mss_per_rtt() {
        let mut s = Sender::new(scfg(Recovery::NewReno));
        let mut r = Receiver::new(rcfg(false));
        s.write(10_000_000);
        // Force CA: a loss episode sets ssthresh; simpler: grow then emulate with timeout.
        let segs = drain(&mut s, ms(0));
        s.handle_timeout(ms(1000)); // ssthresh = max(2000/2, 2000) = 2000, cwnd = 1000
        let _ = segs;
        let mut t = 1000;
        let acked_all = |s: &mut Sender, r: &mut Receiver, t: &mut u64| {
            let segs = drain(s, ms(*t));
            *t += 50;
            feed(s, ms(*t), &deliver(r, ms(*t), &segs));
        };
        acked_all(&mut s, &mut r, &mut t); // slow start: 1000 → 2000 (= ssthresh)
        assert_eq!(s.cwnd(), 2000);
        let before = s.cwnd();
        for _ in 0..10 {
            acked_all(&mut s, &mut r, &mut t);
        }
        let grown = s.cwnd() - before;
        // At most one MSS per window of ACKs, RFC 5681 (3); a bit less because only
        // ⌊cwnd/MSS⌋ segments (and so ACKs) fit in a window.
        assert!((8_000..=10_500).contains(&grown), "grew {grown}");
    }

    #[test]
    fn slow_start_restart_after_idle_longer_than_rto() {
        for ssr in [false, true] {
            let mut cfg = scfg(Recovery::NewReno);
            cfg.slow_start_restart = ssr;
            let mut s = Sender::new(cfg);
            let mut r = Receiver::new(rcfg(false));
            s.write(20_000);
            let mut t = 0;
            for _ in 0..4 {
                let segs = drain(&mut s, ms(t));
                t += 50;
                feed(&mut s, ms(t), &deliver(&mut r, ms(t), &segs));
            }
            let cwnd = s.cwnd();
            assert!(cwnd > 2 * MSS as u64);
            // Idle for 2 s (> RTO), then a burst larger than any window.
            s.write(100_000);
            let burst = drain(&mut s, ms(t + 2000));
            let expect = if ssr { 2 } else { (cwnd / MSS as u64) as usize };
            assert_eq!(burst.len(), expect, "ssr={ssr}");
        }
    }
}

mod recovery {
    use super::*;

    /// Send `n` segments, drop those at `lost` (indices), deliver the rest in order.
    fn window_with_losses(
        s: &mut Sender,
        r: &mut Receiver,
        n: usize,
        lost: &[usize],
        now: Instant,
    ) -> Vec<Ack> {
        s.write(n as u64 * MSS as u64);
        let segs = drain(s, now);
        assert_eq!(segs.len(), n);
        let kept: Vec<_> =
            segs.iter().enumerate().filter(|(i, _)| !lost.contains(i)).map(|(_, s)| *s).collect();
        deliver(r, now, &kept)
    }

    fn grown_sender(recovery: Recovery, sack: bool) -> (Sender, Receiver) {
        let mut cfg = scfg(recovery);
        cfg.initial_cwnd_segments = 10;
        let s = Sender::new(cfg);
        let r = Receiver::new(rcfg(sack));
        (s, r)
    }

    #[test]
    fn one_loss_fast_retransmit_and_newreno_exit() {
        let (mut s, mut r) = grown_sender(Recovery::NewReno, false);
        let acks = window_with_losses(&mut s, &mut r, 10, &[2], ms(0));
        // 2 new ACKs then 7 duplicates of 2000.
        feed(&mut s, ms(50), &acks[..4]); // 2 new + 2 dups
        assert!(!s.in_recovery());
        feed(&mut s, ms(50), &acks[4..5]); // third dup
        assert!(s.in_recovery());
        assert_eq!(s.stats().fast_retransmits, 1);
        // FlightSize was 8000 at the third dup → ssthresh 4000, cwnd 4000 + 3·1000.
        assert_eq!(s.ssthresh(), 4000);
        let out = drain(&mut s, ms(50));
        assert_eq!(out[0].seq, 2000);
        assert!(out[0].retransmission);
        feed(&mut s, ms(50), &acks[5..]); // 4 more dups inflate cwnd
        assert_eq!(s.cwnd(), 4000 + 7000);
        let full = deliver(&mut r, ms(100), &out[..1]);
        feed(&mut s, ms(100), &full);
        assert!(!s.in_recovery(), "a full ACK ends recovery");
        assert!(s.cwnd() <= 4000);
        assert_eq!(s.stats().timeouts, 0);
    }

    #[test]
    fn two_losses_newreno_partial_ack_retransmits_next_hole() {
        let (mut s, mut r) = grown_sender(Recovery::NewReno, false);
        let acks = window_with_losses(&mut s, &mut r, 10, &[2, 5], ms(0));
        feed(&mut s, ms(50), &acks);
        assert!(s.in_recovery());
        let first = drain(&mut s, ms(50));
        assert_eq!(first[0].seq, 2000);
        let partial = deliver(&mut r, ms(100), &first[..1]);
        assert_eq!(partial[0].ack, 5000);
        feed(&mut s, ms(100), &partial);
        assert!(s.in_recovery(), "RFC 6582: a partial ACK keeps fast recovery");
        let second = drain(&mut s, ms(100));
        assert_eq!(second[0].seq, 5000, "…and retransmits the next hole at once");
        feed(&mut s, ms(150), &deliver(&mut r, ms(150), &second[..1]));
        assert!(!s.in_recovery());
        assert_eq!(s.stats().fast_retransmits, 1);
        assert_eq!(s.stats().timeouts, 0);
        assert_eq!(r.rcv_nxt(), 10_000);
    }

    #[test]
    fn two_losses_reno_leaves_recovery_on_partial_ack() {
        let (mut s, mut r) = grown_sender(Recovery::Reno, false);
        let acks = window_with_losses(&mut s, &mut r, 10, &[2, 5], ms(0));
        feed(&mut s, ms(50), &acks);
        let first = drain(&mut s, ms(50));
        feed(&mut s, ms(100), &deliver(&mut r, ms(100), &first[..1]));
        assert!(!s.in_recovery(), "Reno: any new ACK ends fast recovery");
        // The second hole is not retransmitted at once.
        assert!(drain(&mut s, ms(100)).iter().all(|x| x.seq != 5000));
    }

    #[test]
    fn three_losses_with_sack_recovered_in_one_rtt() {
        let (mut s, mut r) = grown_sender(Recovery::Sack, true);
        let acks = window_with_losses(&mut s, &mut r, 10, &[1, 4, 7], ms(0));
        assert!(acks.iter().skip(1).all(|a| !a.sack.as_slice().is_empty()));
        feed(&mut s, ms(50), &acks);
        assert!(s.in_recovery());
        assert_eq!(s.stats().sack_recoveries, 1);
        let rtx = drain(&mut s, ms(50));
        let rseqs = seqs(&rtx);
        // The first hole at once; the others as pipe allows, all in this round.
        assert!(rseqs.contains(&1000) && rseqs.contains(&4000) && rseqs.contains(&7000), "{rseqs:?}");
        assert!(rtx.iter().all(|x| x.retransmission));
        feed(&mut s, ms(100), &deliver(&mut r, ms(100), &rtx));
        assert!(!s.in_recovery());
        assert_eq!(r.rcv_nxt(), 10_000);
        assert_eq!(s.stats().timeouts, 0);
        assert_eq!(s.stats().bytes_retransmitted, 3000, "only the holes are resent");
    }

    #[test]
    fn three_losses_without_sack_newreno_takes_one_rtt_per_hole() {
        let (mut s, mut r) = grown_sender(Recovery::NewReno, false);
        let acks = window_with_losses(&mut s, &mut r, 10, &[1, 4, 7], ms(0));
        feed(&mut s, ms(50), &acks);
        let mut t = 50;
        let mut rounds = 0;
        while s.in_recovery() {
            let out = drain(&mut s, ms(t));
            let hole: Vec<_> = out.iter().filter(|x| x.retransmission).copied().collect();
            assert_eq!(hole.len(), 1, "one hole per partial ACK");
            t += 50;
            feed(&mut s, ms(t), &deliver(&mut r, ms(t), &out));
            rounds += 1;
        }
        assert_eq!(rounds, 3);
        assert_eq!(s.stats().timeouts, 0);
    }

    #[test]
    fn recovery_by_timeout_when_too_few_dupacks() {
        // A thin stream: two segments in flight, the first lost → only one dupack.
        let (mut s, mut r) = grown_sender(Recovery::NewReno, false);
        let acks = window_with_losses(&mut s, &mut r, 2, &[0], ms(0));
        feed(&mut s, ms(50), &acks);
        assert!(!s.in_recovery());
        assert_eq!(s.poll_timeout(), Some(ms(1000)));
        assert_eq!(s.handle_timeout(ms(1000)), Some(0));
        assert_eq!(s.cwnd(), MSS as u64, "loss window");
        let out = drain(&mut s, ms(1000));
        assert_eq!(seqs(&out), vec![0]);
        feed(&mut s, ms(1050), &deliver(&mut r, ms(1050), &out));
        assert_eq!(s.snd_una(), 2000, "the receiver held the second segment");
        assert_eq!(s.stats().timeouts, 1);
    }

    #[test]
    fn after_timeout_go_back_n_does_not_enter_fast_recovery() {
        let (mut s, mut r) = grown_sender(Recovery::NewReno, false);
        s.write(10_000);
        let _lost = drain(&mut s, ms(0)); // all ten dropped
        s.handle_timeout(ms(1000));
        let mut t = 1000;
        for _ in 0..5 {
            let out = drain(&mut s, ms(t));
            t += 50;
            feed(&mut s, ms(t), &deliver(&mut r, ms(t), &out));
        }
        assert_eq!(r.rcv_nxt(), 10_000);
        assert_eq!(s.stats().fast_retransmits, 0);
    }
}

mod small_segments {
    use super::*;

    #[test]
    fn nagle_holds_small_writes_while_data_is_unacked() {
        for nagle in [false, true] {
            let mut cfg = scfg(Recovery::NewReno);
            cfg.nagle = nagle;
            let mut s = Sender::new(cfg);
            s.write(100);
            assert_eq!(drain(&mut s, ms(0)).len(), 1);
            s.write(100);
            s.write(100);
            let out = drain(&mut s, ms(1));
            if nagle {
                assert!(out.is_empty(), "Nagle: wait for the ACK");
                let mut r = Receiver::new(rcfg(false));
                let a = deliver(
                    &mut r,
                    ms(50),
                    &[DataSegment { seq: 0, len: 100, retransmission: false, ecn: SegmentEcn::default() }],
                );
                feed(&mut s, ms(50), &a);
                let out = drain(&mut s, ms(50));
                assert_eq!(out.len(), 1);
                assert_eq!(out[0].len, 200, "coalesced");
            } else {
                assert_eq!(out.len(), 1, "the two queued writes leave as one segment");
                assert_eq!(out[0].len, 200);
            }
        }
    }

    #[test]
    fn delayed_ack_every_second_segment_or_on_timer() {
        let mut cfg = rcfg(false);
        cfg.delayed_ack = true;
        let mut r = Receiver::new(cfg);
        let seg = |seq| DataSegment { seq, len: 1000, retransmission: false, ecn: SegmentEcn::default() };
        r.handle_segment(ms(0), &seg(0));
        assert_eq!(r.poll_ack(), None);
        assert_eq!(r.poll_timeout(), Some(ms(40)));
        r.handle_segment(ms(1), &seg(1000));
        assert_eq!(r.poll_ack().map(|a| a.ack), Some(2000), "every second segment");
        r.handle_segment(ms(2), &seg(2000));
        assert_eq!(r.poll_ack(), None);
        r.handle_timeout(ms(42));
        assert_eq!(r.poll_ack().map(|a| a.ack), Some(3000), "timer");
        // Out of order: at once, with no delay.
        r.handle_segment(ms(50), &seg(4000));
        let a = r.poll_ack().unwrap();
        assert_eq!(a.ack, 3000);
        // Filling the gap: at once.
        r.handle_segment(ms(51), &seg(3000));
        assert_eq!(r.poll_ack().map(|a| a.ack), Some(5000));
    }

    #[test]
    fn delayed_ack_off_acks_every_segment() {
        let mut r = Receiver::new(rcfg(false));
        for i in 0..3 {
            r.handle_segment(
                ms(i),
                &DataSegment { seq: i * 100, len: 100, retransmission: false, ecn: SegmentEcn::default() },
            );
            assert_eq!(r.poll_ack().map(|a| a.ack), Some((i + 1) * 100));
        }
    }

    #[test]
    fn sack_blocks_most_recent_first() {
        let mut r = Receiver::new(rcfg(true));
        let seg = |seq| DataSegment { seq, len: 100, retransmission: false, ecn: SegmentEcn::default() };
        for seq in [200, 600, 400] {
            r.handle_segment(ms(0), &seg(seq));
        }
        let a = r.poll_ack().unwrap();
        assert_eq!(a.sack.as_slice(), &[(400, 500), (600, 700), (200, 300)]);
        r.handle_segment(ms(0), &seg(500)); // joins 400..500 and 600..700
        let a = r.poll_ack().unwrap();
        assert_eq!(a.sack.as_slice(), &[(400, 700), (200, 300)]);
        assert_eq!(a.wnd, (1 << 20) - 400);
    }
}

/// Two endpoints joined by a fixed-delay path with a loss pattern; jumps to the next
/// wake-up. Returns the order in which bytes were delivered.
fn run_pair(
    recovery: Recovery,
    sack: bool,
    delayed_ack: bool,
    writes: &[(u64, u32)],
    mut drop_data: impl FnMut(u64) -> bool,
    mut drop_ack: impl FnMut(u64) -> bool,
) -> (Vec<(u64, u64)>, Sender) {
    let mut s = Sender::new(scfg(recovery));
    let mut rc = rcfg(sack);
    rc.delayed_ack = delayed_ack;
    let mut r = Receiver::new(rc);
    let delay = Duration::from_millis(20);
    let mut to_r: Vec<(Instant, DataSegment)> = Vec::new();
    let mut to_s: Vec<(Instant, Ack)> = Vec::new();
    let mut delivered = Vec::new();
    let mut wi = 0;
    let (mut nd, mut na) = (0u64, 0u64);
    let mut now = Instant::ZERO;
    for _ in 0..2_000_000 {
        while wi < writes.len() && Instant::from_nanos(writes[wi].0 * 1_000_000) <= now {
            s.write(writes[wi].1 as u64);
            wi += 1;
        }
        s.handle_timeout(now);
        r.handle_timeout(now);
        to_r.retain(|&(t, seg)| {
            if t > now {
                return true;
            }
            let d = r.handle_segment(now, &seg);
            if d.to > d.from {
                delivered.push((d.from, d.to));
            }
            false
        });
        to_s.retain(|&(t, a)| {
            if t > now {
                return true;
            }
            s.handle_ack(now, &a);
            false
        });
        while let Some(seg) = s.poll_transmit(now) {
            nd += 1;
            if !drop_data(nd) {
                to_r.push((now + delay, seg));
            }
        }
        while let Some(a) = r.poll_ack() {
            na += 1;
            if !drop_ack(na) {
                to_s.push((now + delay, a));
            }
        }
        let next = [
            s.poll_timeout(),
            r.poll_timeout(),
            to_r.iter().map(|x| x.0).min(),
            to_s.iter().map(|x| x.0).min(),
            writes.get(wi).map(|w| Instant::from_nanos(w.0 * 1_000_000)),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => now = t.max(now),
            None => break,
        }
    }
    (delivered, s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every byte written is delivered exactly once and in order, whatever is lost.
    #[test]
    fn every_byte_once_in_order(
        writes in proptest::collection::vec((0u64..2000, 1u32..3000), 1..60),
        loss in proptest::collection::vec(any::<bool>(), 64),
        ack_loss in proptest::collection::vec(any::<bool>(), 64),
        mode in 0u8..3, delayed in any::<bool>(),
    ) {
        let mut writes = writes;
        writes.sort();
        let total: u64 = writes.iter().map(|w| w.1 as u64).sum();
        let (recovery, sack) = match mode { 0 => (Recovery::Reno, false), 1 => (Recovery::NewReno, false), _ => (Recovery::Sack, true) };
        // Drop a pattern among the first 64 data packets / ACKs, then nothing.
        let (delivered, s) = run_pair(recovery, sack, delayed, &writes,
            |n| n <= 64 && loss[(n - 1) as usize] && n % 3 == 0,
            |n| n <= 64 && ack_loss[(n - 1) as usize] && n % 4 == 0);
        let mut next = 0;
        for (a, b) in delivered {
            prop_assert_eq!(a, next);
            prop_assert!(b > a);
            next = b;
        }
        prop_assert_eq!(next, total);
        prop_assert_eq!(s.snd_una(), total);
    }
}

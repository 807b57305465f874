//! Virtual-time tests of exactly the rule each optional mechanism adds (the mechanisms of
//! Ogawa §5, RFC 8985, Linux thin-stream linear timeouts).

use super::*;
use crate::time::{Duration, Instant};

/// The segment size of [`cfg`], which `linux_rack_tests` shares with [`ms`].
const MSS: u32 = 1000;

pub(super) fn ms(x: u64) -> Instant {
    Instant::from_nanos(x * 1_000_000)
}

/// A SACK sender with `m` on (the configuration every mechanism test starts from).
pub(super) fn cfg(m: Mechanisms) -> SenderConfig {
    SenderConfig {
        mss: MSS,
        initial_cwnd_segments: 10,
        nagle: false,
        slow_start_restart: false,
        recovery: Recovery::Sack,
        dupthresh: 3,
        rto: RtoConfig { min: Duration::from_millis(200), ..Default::default() },
        send_buffer: None,
        mechanisms: m,
        ..Default::default()
    }
}

pub(super) fn receiver() -> Receiver {
    Receiver::new(ReceiverConfig {
        rwnd: 1 << 20,
        delayed_ack: false,
        delayed_ack_timeout: Duration::from_millis(40),
        sack: true,
    })
}

pub(super) fn drain(s: &mut Sender, now: Instant) -> Vec<DataSegment> {
    std::iter::from_fn(|| s.poll_transmit(now)).collect()
}

/// Deliver segments and feed every resulting ACK back at `now`.
fn exchange(s: &mut Sender, r: &mut Receiver, now: Instant, segs: &[DataSegment]) {
    for seg in segs {
        r.handle_segment(now, seg);
        if let Some(a) = r.poll_ack() {
            s.handle_ack(now, &a);
        }
    }
}

#[test]
fn rto_reset_after_idle_reinitialises_srtt_and_keeps_cwnd() {
    let mut s = Sender::new(cfg(Mechanisms { rto_reset_after_idle: true, ..Default::default() }));
    let mut r = receiver();
    for i in 0..4 {
        s.write(4000);
        let segs = drain(&mut s, ms(i * 100));
        exchange(&mut s, &mut r, ms(i * 100 + 50), &segs);
    }
    assert_eq!(s.rtt().srtt(), Some(Duration::from_millis(50)));
    let cwnd = s.cwnd();
    // Idle 3 s (> RTO), then a write: the estimator forgets, cwnd does not change.
    s.write(1000);
    let segs = drain(&mut s, ms(3400));
    assert_eq!(segs.len(), 1);
    assert_eq!(s.rtt().srtt(), None, "SRTT/RTTVAR re-initialised");
    assert_eq!(s.cwnd(), cwnd, "cwnd left alone");
    assert_eq!(s.stats().rto_resets, 1);
    exchange(&mut s, &mut r, ms(3700), &segs); // a 300 ms sample after a queue built up
    assert_eq!(s.rtt().srtt(), Some(Duration::from_millis(300)), "treated as the first sample");
    assert_eq!(s.rtt().rttvar(), Some(Duration::from_millis(150)));
    // Without the mechanism the old estimate would have absorbed it with gain 1/8.
    let mut plain = Sender::new(cfg(Mechanisms::default()));
    let mut r = receiver();
    for i in 0..4 {
        plain.write(4000);
        let segs = drain(&mut plain, ms(i * 100));
        exchange(&mut plain, &mut r, ms(i * 100 + 50), &segs);
    }
    plain.write(1000);
    let segs = drain(&mut plain, ms(3400));
    exchange(&mut plain, &mut r, ms(3700), &segs);
    assert_eq!(plain.rtt().srtt(), Some(Duration::from_micros(81_250)));
}

/// Ten segments all lost, a timeout, then go-back-N where the second retransmission is
/// lost again and later ones arrive (three duplicate ACKs with SACK blocks).
fn timeout_then_dupacks(m: Mechanisms) -> (Sender, Vec<u64>, u64) {
    let mut s = Sender::new(cfg(m));
    let mut r = receiver();
    s.write(10_000);
    let _lost = drain(&mut s, ms(0));
    assert_eq!(s.handle_timeout(ms(1000)), Some(0));
    let first = drain(&mut s, ms(1000));
    assert_eq!(first.iter().map(|x| x.seq).collect::<Vec<_>>(), vec![0], "the ACK-pointed segment");
    exchange(&mut s, &mut r, ms(1100), &first); // ack 1000; slow start → cwnd 2000
    let mut sent = Vec::new();
    let burst = drain(&mut s, ms(1100));
    sent.extend(burst.iter().map(|x| x.seq));
    let cwnd_before = s.cwnd();
    // [1000, 2000) is lost again; [2000, 3000) arrives → a duplicate ACK with SACK.
    exchange(&mut s, &mut r, ms(1200), &burst[1..]);
    for t in [1201, 1202] {
        let more = drain(&mut s, ms(t));
        sent.extend(more.iter().map(|x| x.seq));
        exchange(&mut s, &mut r, ms(t), &more);
    }
    (s, sent, cwnd_before)
}

#[test]
fn sack_off_after_timeout_no_fast_recovery_and_growth_on_every_ack() {
    let (s, sent, cwnd_before) =
        timeout_then_dupacks(Mechanisms { sack_off_after_timeout: true, ..Default::default() });
    assert!(s.stats().fast_retransmits == 0 && !s.in_recovery(), "no fast recovery on dupacks");
    // Every duplicate ACK grew cwnd by one SMSS (slow start on every ACK).
    assert!(s.cwnd() >= cwnd_before + 3 * MSS as u64, "cwnd {} from {}", s.cwnd(), cwnd_before);
    // Go-back-N proceeds in order from the cumulative ACK, not from the scoreboard.
    assert!(sent.windows(2).all(|w| w[1] == w[0] + MSS as u64), "{sent:?}");
}

#[test]
fn plain_sack_after_timeout_grows_only_on_new_acks() {
    let (s, _, cwnd_before) = timeout_then_dupacks(Mechanisms::default());
    assert_eq!(s.cwnd(), cwnd_before, "duplicate ACKs do not grow cwnd");
}

#[test]
fn sack_off_ends_once_everything_outstanding_at_the_timeout_is_acked() {
    let mut s = Sender::new(cfg(Mechanisms { sack_off_after_timeout: true, ..Default::default() }));
    let mut r = receiver();
    s.write(3000);
    drain(&mut s, ms(0));
    s.handle_timeout(ms(1000));
    for t in [1000, 1100, 1200] {
        let segs = drain(&mut s, ms(t));
        exchange(&mut s, &mut r, ms(t + 50), &segs);
    }
    assert_eq!(s.snd_una(), 3000);
    // Grow the window again, then a loss with SACK info must start SACK recovery.
    for t in [2000, 2100, 2200] {
        s.write(8000);
        let segs = drain(&mut s, ms(t));
        exchange(&mut s, &mut r, ms(t + 50), &segs);
    }
    s.write(10_000);
    let segs = drain(&mut s, ms(3000));
    assert!(segs.len() >= 4, "window {}", segs.len());
    exchange(&mut s, &mut r, ms(3050), &segs[1..]);
    assert!(s.in_recovery() && s.stats().sack_recoveries == 1);
}

#[test]
fn tlp_fires_after_probe_timeout_with_one_segment_outstanding() {
    let mut c = cfg(Mechanisms { rack_tlp: true, ..Default::default() });
    c.rto.min = Duration::from_secs(1); // RTO 1 s, so the probe (2·SRTT + 200 ms) comes first
    let mut s = Sender::new(c);
    let mut r = receiver();
    s.write(1000);
    let segs = drain(&mut s, ms(0));
    exchange(&mut s, &mut r, ms(100), &segs); // SRTT 100 ms
    s.write(500);
    let lost = drain(&mut s, ms(1000));
    assert_eq!(lost.len(), 1);
    assert_eq!(s.poll_timeout(), Some(ms(1400)), "PTO = 2·SRTT + WCDelAckT with one segment in flight");
    assert_eq!(s.handle_timeout(ms(1400)), None, "the probe, not an RTO");
    let probe = drain(&mut s, ms(1400));
    assert_eq!(probe.len(), 1);
    assert_eq!(
        (probe[0].seq, probe[0].len, probe[0].retransmission),
        (1000, 500, true),
        "the last segment again"
    );
    assert_eq!(s.stats().tlp_probes, 1);
    assert_eq!(s.stats().timeouts, 0);
    exchange(&mut s, &mut r, ms(1500), &probe);
    assert_eq!(s.snd_una(), 1500, "the probe repaired the tail loss without a timeout");
}

#[test]
fn rack_marks_lost_after_a_later_segment_is_delivered_and_the_window_passes() {
    let mut s = Sender::new(cfg(Mechanisms { rack_tlp: true, ..Default::default() }));
    let mut r = receiver();
    s.write(1000);
    let a = drain(&mut s, ms(0)); // A, lost
    s.write(1000);
    let b = drain(&mut s, ms(10)); // B
    exchange(&mut s, &mut r, ms(110), &b); // B SACKed: RACK.rtt = 100 ms, min_rtt = 100 ms
    assert!(!s.in_recovery(), "A is not lost yet: 0 + 100 + reo_wnd (25) > 110");
    assert_eq!(s.stats().rack_marked_lost, 0);
    assert_eq!(s.poll_timeout(), Some(ms(125)), "reordering timer");
    s.handle_timeout(ms(125));
    assert_eq!(s.stats().rack_marked_lost, 1);
    assert!(s.in_recovery());
    let rtx = drain(&mut s, ms(125));
    assert_eq!(rtx.first().map(|x| (x.seq, x.retransmission)), Some((a[0].seq, true)));
}

#[test]
fn thin_linear_timeouts_do_not_back_off_while_thin() {
    for linear in [false, true] {
        let mut s = Sender::new(cfg(Mechanisms { thin_linear_timeouts: linear, ..Default::default() }));
        let mut r = receiver();
        // Leave initial slow start: one timeout episode sets ssthresh, then recover.
        s.write(1000);
        drain(&mut s, ms(0));
        s.handle_timeout(ms(1000));
        let segs = drain(&mut s, ms(1000));
        exchange(&mut s, &mut r, ms(1100), &segs);
        s.write(1000);
        let segs = drain(&mut s, ms(1200));
        exchange(&mut s, &mut r, ms(1300), &segs); // a clean sample: RTO = 300 ms
        let base = s.current_rto();
        // A thin stream (one segment in flight) whose segment keeps getting lost.
        s.write(100);
        drain(&mut s, ms(2000));
        let mut now = ms(2000);
        let mut gaps = Vec::new();
        for _ in 0..8 {
            let due = s.poll_timeout().unwrap();
            gaps.push(due - now);
            now = due;
            s.handle_timeout(now);
            drain(&mut s, now);
        }
        if linear {
            assert!(gaps[..7].iter().all(|&g| g == base), "{gaps:?}");
            assert_eq!(gaps[7], base.saturating_mul(2), "backoff resumes after 6 linear retries");
        } else {
            assert_eq!(gaps[1], base.saturating_mul(2));
            assert_eq!(gaps[2], base.saturating_mul(4));
        }
    }
}

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

/// A first segment W, then bulk segments B0–B2 at 10 ms and interactive ones I0–I2 at
/// 20 ms that a priority queue lets overtake them. W's ACK at 100 ms gives the RTT
/// (SRTT 100 ms, RTTVAR 50 ms: RTO = 100 + max(4·50, 200) = 300 ms, restarted to 400);
/// the three I's are SACKed at 120 ms. Returns the sender then and the B's.
fn interactive_overtakes_bulk(bands: bool) -> (Sender, Receiver, Vec<DataSegment>) {
    let mut s = Sender::new(cfg(Mechanisms { rack_tlp: true, rack_bands: bands, ..Default::default() }));
    let mut r = receiver();
    s.write(1000);
    let first = drain(&mut s, ms(0));
    s.write(3000);
    let bulk = drain(&mut s, ms(10));
    s.write(3000);
    let inter = drain(&mut s, ms(20));
    for i in &inter {
        s.mark_interactive(i.seq);
    }
    exchange(&mut s, &mut r, ms(100), &first);
    exchange(&mut s, &mut r, ms(120), &inter);
    (s, r, bulk)
}

#[test]
fn rack_per_band_does_not_take_priority_reordering_for_loss() {
    // RFC 8985 alone: three SACKed segments and no reordering seen yet, so reo_wnd = 0
    // (§6.2 step 4) and every bulk segment sent before I0 is lost — a spurious recovery.
    let (plain, _, _) = interactive_overtakes_bulk(false);
    assert_eq!(plain.stats().rack_marked_lost, 3);
    assert!(plain.in_recovery());
    // Per band: the bulk band has nothing delivered after B0–B2, so RACK's rule does not
    // judge them; the interactive band's deliveries do only once an RTO has passed since
    // they left.
    let (mut s, mut r, bulk) = interactive_overtakes_bulk(true);
    assert_eq!(s.stats().rack_marked_lost, 0);
    assert!(!s.in_recovery());
    assert_eq!(s.poll_timeout(), Some(ms(310)), "B0–B2 are judged at their send time + RTO");
    // The bulk segments arrive late but within it, in order: acknowledged, never resent.
    exchange(&mut s, &mut r, ms(300), &bulk);
    assert_eq!(s.snd_una(), 7000);
    assert_eq!((s.stats().fast_retransmits, s.stats().bytes_retransmitted), (0, 0));
}

#[test]
fn rack_per_band_still_finds_a_loss_within_the_band() {
    let (mut s, mut r, bulk) = interactive_overtakes_bulk(true);
    // B0 lost; B1 and B2 arrive: RACK of the bulk band judges B0 against them — sent
    // with them, so at once (three segments SACKed, reo_wnd = 0, RFC 8985 §6.2 step 4).
    exchange(&mut s, &mut r, ms(200), &bulk[1..]);
    assert_eq!(s.stats().rack_marked_lost, 1);
    assert!(s.in_recovery());
    let rtx = drain(&mut s, ms(200));
    assert_eq!(rtx.first().map(|x| (x.seq, x.retransmission)), Some((bulk[0].seq, true)));
}

#[test]
fn rack_per_band_judges_a_band_by_the_other_after_an_rto() {
    // B0–B2 all lost: no bulk segment is ever delivered after them, only I0–I2.
    let (mut s, _, bulk) = interactive_overtakes_bulk(true);
    let due = s.poll_timeout().expect("the reordering timer");
    assert_eq!(due, ms(310), "before the RTO (400 ms)");
    assert_eq!(s.handle_timeout(due), None, "RACK's timer, not the RTO");
    assert_eq!(s.stats().rack_marked_lost, 3);
    assert!(s.in_recovery() && s.stats().timeouts == 0, "a fast recovery, not a timeout");
    let rtx = drain(&mut s, due);
    assert_eq!(rtx.first().map(|x| (x.seq, x.retransmission)), Some((bulk[0].seq, true)));
}

#[test]
fn autotuned_send_buffer_grows_only_for_a_waiting_writer() {
    let mut c = cfg(Mechanisms::default());
    c.send_buffer_autotune = true;
    let mut s = Sender::new(c);
    let mut r = receiver();
    let charged = |s: &Sender| {
        (s.write_end() - s.snd_una()) + sender::SKB_OVERHEAD * (s.snd_max() - s.snd_una()).div_ceil(1000)
    };
    // tcp_sndbuf_expand at the start: 2 · TCP_INIT_CWND · 2,304 = 46,080 bytes.
    assert_eq!(s.buffer_space(), 46_080);
    s.write(20_000);
    let first = drain(&mut s, ms(0)); // the initial window: 10 segments of 1,000 B
    assert_eq!(first.len(), 10);
    // Charged: 20,000 queued bytes + 832 per segment in flight.
    assert_eq!(s.buffer_space(), 46_080 - 20_000 - 10 * sender::SKB_OVERHEAD);
    // ACKs while nobody waits: slow start grows cwnd, not the buffer.
    exchange(&mut s, &mut r, ms(100), &first[..5]);
    assert!(s.cwnd() > 10_000);
    assert_eq!(s.buffer_space(), 46_080 - charged(&s));
    // An ACK that finds the writer waiting and room in the window: 2 · cwnd segments.
    s.set_writer_waits(true);
    exchange(&mut s, &mut r, ms(101), &first[5..6]);
    let cwnd_segs = s.cwnd() / 1000;
    assert!(cwnd_segs > 10, "slow start grew cwnd to {cwnd_segs}");
    assert_eq!(s.buffer_space(), 2 * 2_304 * cwnd_segs - charged(&s));
}

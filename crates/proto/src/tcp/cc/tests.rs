//! The controllers on virtual time: CUBIC against RFC 9438's equations, Linux's packet
//! counting, and both through the sender's window check.

use super::cubic::{ALPHA, BETA, C};
use super::*;
use crate::tcp::{
    Ack, Mechanisms, Receiver, ReceiverConfig, Recovery, RtoConfig, SackBlocks, Sender, SenderConfig,
};
use crate::time::{Duration, Instant};

fn ms(x: u64) -> Instant {
    Instant::from_nanos(x * 1_000_000)
}

fn packets(cwnd: u64, ssthresh: u64) -> Window {
    Window { cwnd, ssthresh, seg: 1, unit: CwndUnit::Packets }
}

/// An ACK of `acked` segments from a sender whose window was full.
fn full(now: Instant, acked: u64, w: &Window, rtt_ms: u64) -> AckSample {
    AckSample {
        now,
        acked,
        prior_in_flight: w.cwnd,
        srtt: Some(Duration::from_millis(rtt_ms)),
        rtt: None,
        snd_una: 0,
        snd_nxt: 0,
        round_cwnd_limited: None,
    }
}

/// Feed `full(…)` to the controller.
fn ack_full(cc: &mut Controller, w: &mut Window, now: Instant, acked: u64, rtt_ms: u64) {
    let a = full(now, acked, w, rtt_ms);
    cc.on_ack(w, &a);
}

/// CUBIC after a loss at `w_max` segments (ssthresh = cwnd = 0.7·w_max), in packets.
fn cubic_after_loss(w_max: u64) -> (Controller, Window) {
    let mut cc = Controller::new(Algorithm::Cubic);
    let w = packets(w_max, u64::MAX);
    let ssthresh = cc.on_congestion_event(ms(0), &w, w_max);
    (cc, packets(ssthresh, ssthresh))
}

fn cubic(cc: &Controller) -> &Cubic {
    match cc {
        Controller::Cubic(c) => c,
        Controller::Reno(_) => panic!("not CUBIC"),
    }
}

/// One round trip of a window-limited flow: every segment of the window ACKed, one ACK
/// each, at `now`.
fn round(cc: &mut Controller, w: &mut Window, now: Instant, rtt_ms: u64) {
    for _ in 0..w.cwnd {
        let a = full(now, 1, w, rtt_ms);
        cc.on_ack(w, &a);
    }
}

mod cubic_rfc9438 {
    use super::*;

    #[test]
    fn reduction_is_beta_0_7_of_flight_in_bytes_and_of_cwnd_in_packets() {
        let mut cc = Controller::new(Algorithm::Cubic);
        let bytes = Window { cwnd: 100_000, ssthresh: u64::MAX, seg: 1000, unit: CwndUnit::Bytes };
        assert_eq!(
            cc.on_congestion_event(ms(0), &bytes, 80_000),
            56_000,
            "§4.6: ssthresh = flight_size·β_cubic"
        );
        assert_eq!(cc.on_congestion_event(ms(0), &bytes, 1_000), 2_000, "§4.6: at least 2 segments");
        let mut cc = Controller::new(Algorithm::Cubic);
        assert_eq!(cc.on_congestion_event(ms(0), &packets(100, 200), 3), 70, "Linux: cwnd·β");
        // Reno halves.
        let mut reno = Controller::new(Algorithm::Reno);
        assert_eq!(reno.on_congestion_event(ms(0), &bytes, 80_000), 40_000, "RFC 5681 (4)");
        assert_eq!(reno.on_congestion_event(ms(0), &packets(100, 200), 3), 50, "tcp_reno_ssthresh");
        assert!((ALPHA - 0.5294).abs() < 1e-4, "§4.3: α_cubic = 3(1 − β)/(1 + β)");
    }

    #[test]
    fn k_and_the_window_curve_follow_figures_1_and_2() {
        let (mut cc, mut w) = cubic_after_loss(100);
        assert_eq!(w.cwnd, 70);
        // The first ACK of congestion avoidance starts the stage (t_epoch).
        let a = full(ms(1000), 1, &w, 100);
        cc.on_ack(&mut w, &a);
        let c = cubic(&cc);
        let k = (100.0 * (1.0 - BETA) / C).cbrt(); // §4.2 Figure 2 with cwnd_epoch = β·W_max
        assert!((c.k() - k).abs() < 1e-9, "K = {} (expected {k})", c.k());
        assert!((k - 4.2172).abs() < 1e-4);
        for t in [0.0, 1.0, 2.5, k, 5.0, 8.0] {
            let expected = C * (t - k).powi(3) + 100.0; // Figure 1
            assert!((c.w_cubic(t) - expected).abs() < 1e-9, "W_cubic({t})");
        }
        assert!((c.w_cubic(0.0) - 70.0).abs() < 1e-9, "the curve starts at cwnd_epoch");
        assert!((c.w_cubic(k) - 100.0).abs() < 1e-9, "and plateaus at W_max at t = K");

        // A long-RTT path (100 ms), a window's ACKs spread over each round trip: the
        // window follows the curve (§4.4 concave, then §4.5 convex), aiming one RTT
        // ahead (§4.2 target), so it stays between W_cubic(t − RTT) and W_cubic(t + RTT),
        // or at W_est once Reno would be ahead (§4.3: here after ~6 s).
        let mut t_ms = 1000;
        while t_ms < 1000 + 7000 {
            let n = w.cwnd;
            for i in 0..n {
                let now = Instant::from_nanos(ms(t_ms).as_nanos() + i * 100_000_000 / n);
                ack_full(&mut cc, &mut w, now, 1, 100);
            }
            t_ms += 100;
            let t = (t_ms - 1000) as f64 / 1000.0;
            let c = cubic(&cc);
            let (lo, hi) = (c.w_cubic(t - 0.1), c.w_cubic(t + 0.1).max(c.w_est()));
            let cwnd = w.cwnd as f64;
            assert!(lo - 1.0 <= cwnd && cwnd <= hi + 1.0, "t = {t}: cwnd {cwnd} outside [{lo:.2}, {hi:.2}]");
            if t <= 4.0 {
                assert!(cwnd > c.w_est() + 1.0, "t = {t}: the concave curve leads W_est {}", c.w_est());
            }
        }
        assert!(w.cwnd > 100, "convex region past W_max after K ≈ 4.2 s: {}", w.cwnd);
    }

    #[test]
    fn target_is_clamped_to_one_and_a_half_windows_per_round_trip() {
        // Far into the convex region the curve jumps ahead; growth is capped at 1.5·cwnd.
        let (mut cc, mut w) = cubic_after_loss(20);
        round(&mut cc, &mut w, ms(0), 100); // starts the stage at 0
        let before = w.cwnd;
        round(&mut cc, &mut w, ms(30_000), 100); // W_cubic(30 s) ≈ 10,000
        assert!(cubic(&cc).w_cubic(30.0) > 100.0 * before as f64);
        assert!(w.cwnd <= before * 3 / 2 + 1, "{before} → {} in one round trip", w.cwnd);
        assert!(w.cwnd >= before * 3 / 2 - 1, "{before} → {}: at the clamp", w.cwnd);
    }

    #[test]
    fn reno_friendly_region_takes_over_on_a_short_rtt_path() {
        // 1 ms RTT: the cubic curve hardly moves in 100 round trips while W_est grows
        // α_cubic per round trip (§4.3), so cwnd = W_est.
        let (mut cc, mut w) = cubic_after_loss(100);
        let mut t_us = 0u64;
        let mut prev_est: Option<f64> = None;
        for _ in 0..50 {
            let now = Instant::from_nanos(t_us * 1000);
            let before = w.cwnd;
            for _ in 0..w.cwnd {
                let a = full(now, 1, &w, 1);
                cc.on_ack(&mut w, &a);
            }
            let c = cubic(&cc);
            if let Some(p) = prev_est {
                // Figure 4: one window of ACKs adds α_cubic (cwnd changes within the
                // round, hence the tolerance).
                let grew = c.w_est() - p;
                assert!((grew - ALPHA).abs() < 0.03, "W_est grew {grew} in a round of {before}");
            }
            prev_est = Some(c.w_est());
            t_us += 1000;
        }
        let c = cubic(&cc);
        let t = t_us as f64 * 1e-6;
        assert!(
            c.w_cubic(t) < c.w_est(),
            "Reno-friendly region: W_cubic {} < W_est {}",
            c.w_cubic(t),
            c.w_est()
        );
        assert_eq!(w.cwnd, c.w_est() as u64, "cwnd = W_est");
        assert!((c.w_est() - (70.0 + 50.0 * ALPHA)).abs() < 0.5, "W_est {}", c.w_est());
        // Once W_est reaches cwnd_prior (100) α_cubic becomes 1: Reno's own rate.
        while cubic(&cc).w_est() < 100.0 {
            round(&mut cc, &mut w, Instant::from_nanos(t_us * 1000), 1);
            t_us += 1000;
        }
        let p = cubic(&cc).w_est();
        round(&mut cc, &mut w, Instant::from_nanos(t_us * 1000), 1);
        let grew = cubic(&cc).w_est() - p;
        assert!((grew - 1.0).abs() < 0.05, "α_cubic = 1 past cwnd_prior: grew {grew}");
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut cc = Controller::new(Algorithm::Cubic);
        cc.on_congestion_event(ms(0), &packets(100, u64::MAX), 100);
        assert_eq!(cubic(&cc).w_max(), 100.0, "first loss: W_max = cwnd");
        // Lost again before regaining W_max: §4.7, W_max = cwnd·(1 + β)/2.
        cc.on_congestion_event(ms(5000), &packets(80, 70), 80);
        assert!((cubic(&cc).w_max() - 80.0 * (1.0 + BETA) / 2.0).abs() < 1e-9, "{}", cubic(&cc).w_max());
        // Lost above it: W_max = cwnd.
        cc.on_congestion_event(ms(9000), &packets(90, 56), 90);
        assert_eq!(cubic(&cc).w_max(), 90.0);
    }

    #[test]
    fn after_a_timeout_the_next_stage_starts_flat_at_its_own_window() {
        let mut cc = Controller::new(Algorithm::Cubic);
        cc.on_congestion_event(ms(0), &packets(100, u64::MAX), 100);
        let ssthresh = cc.on_rto(ms(2000), &packets(70, 70), 70);
        assert_eq!(ssthresh, 49, "§4.8: ssthresh with β_cubic");
        // Slow start from 1 to ssthresh, then the first congestion-avoidance ACK.
        let mut w = packets(ssthresh, ssthresh);
        let a = full(ms(3000), 1, &w, 100);
        cc.on_ack(&mut w, &a);
        let c = cubic(&cc);
        assert_eq!(c.k(), 0.0, "§4.8: K = 0");
        assert_eq!(c.w_max(), 49.0, "§4.8: W_max = cwnd at the start of congestion avoidance");
        assert!((c.w_est() - 49.0 - ALPHA / 49.0).abs() < 1e-9, "§4.8: W_est starts there too");
    }

    #[test]
    fn an_idle_period_moves_the_stage_start_and_app_limited_acks_do_not_grow() {
        let (mut cc, mut w) = cubic_after_loss(100);
        round(&mut cc, &mut w, ms(0), 100);
        round(&mut cc, &mut w, ms(1000), 100);
        let cwnd = w.cwnd;
        // Application-limited: 3 segments in flight of a window of ~80 (§5.8).
        let a = AckSample {
            now: ms(2000),
            acked: 1,
            prior_in_flight: 3,
            srtt: Some(Duration::from_millis(100)),
            rtt: None,
            snd_una: 0,
            snd_nxt: 0,
            round_cwnd_limited: None,
        };
        cc.on_ack(&mut w, &a);
        assert_eq!(w.cwnd, cwnd, "no growth while application-limited");
        // 10 s of silence, then sending resumes: t continues from 1 s, not from 11 s.
        cc.on_tx_start(ms(11_000), Duration::from_secs(10));
        let mut shifted = w;
        round(&mut cc, &mut shifted, ms(11_100), 100);
        let (mut cc2, mut w2) = cubic_after_loss(100);
        round(&mut cc2, &mut w2, ms(0), 100);
        round(&mut cc2, &mut w2, ms(1000), 100);
        round(&mut cc2, &mut w2, ms(1100), 100);
        assert_eq!(shifted.cwnd, w2.cwnd, "the curve resumes where it stood");
        assert!(shifted.cwnd < 100, "still below W_max (at t ≈ 11 s it would be far past it)");
    }
}

mod packet_counting {
    use super::*;

    #[test]
    fn slow_start_adds_one_per_segment_acked_up_to_ssthresh() {
        let mut cc = Controller::new(Algorithm::Reno);
        let mut w = packets(10, 14);
        ack_full(&mut cc, &mut w, ms(0), 2, 100);
        assert_eq!(w.cwnd, 12, "+1 per segment ACKed");
        ack_full(&mut cc, &mut w, ms(0), 3, 100);
        assert_eq!(w.cwnd, 14, "capped at ssthresh; one segment left for congestion avoidance");
        // The left-over segment went to the counter: 13 more ACKed segments make one
        // window (14) of them.
        for _ in 0..12 {
            ack_full(&mut cc, &mut w, ms(0), 1, 100);
        }
        assert_eq!(w.cwnd, 14);
        ack_full(&mut cc, &mut w, ms(0), 1, 100);
        assert_eq!(w.cwnd, 15, "+1 per cwnd segments ACKed (snd_cwnd_cnt)");
    }

    #[test]
    fn congestion_avoidance_adds_one_per_window_of_segments() {
        let mut cc = Controller::new(Algorithm::Reno);
        let mut w = packets(20, 10);
        for round in 1..=5u64 {
            // Delayed ACKs: 2 segments per ACK, 10 ACKs per round trip of 20… then 21, …
            let mut acked = 0;
            let start = w.cwnd;
            while acked < start {
                ack_full(&mut cc, &mut w, ms(round * 100), 2.min(start - acked), 100);
                acked += 2;
            }
            assert_eq!(w.cwnd, 20 + round, "round {round}");
        }
    }

    #[test]
    fn an_application_limited_window_does_not_grow() {
        let mut cc = Controller::new(Algorithm::Reno);
        let mut w = packets(10, u64::MAX);
        let thin = AckSample {
            now: ms(0),
            acked: 2,
            prior_in_flight: 2,
            srtt: None,
            rtt: None,
            snd_una: 0,
            snd_nxt: 0,
            round_cwnd_limited: None,
        };
        cc.on_ack(&mut w, &thin);
        assert_eq!(w.cwnd, 10, "2 of 10 in flight: not cwnd-limited (tcp_is_cwnd_limited)");
        let half = AckSample { prior_in_flight: 6, ..thin };
        cc.on_ack(&mut w, &half);
        assert_eq!(w.cwnd, 12, "slow start: grows while more than half the window is used");
        // In bytes, Reno grows on every ACK (RFC 5681, thinwan's default, unchanged).
        let mut w = Window { cwnd: 10_000, ssthresh: u64::MAX, seg: 1000, unit: CwndUnit::Bytes };
        cc.on_ack(&mut w, &AckSample { acked: 2000, ..thin });
        assert_eq!(w.cwnd, 11_000, "RFC 5681 (2): at most one SMSS per ACK");
    }
}

/// The controllers inside the sender.
mod sender {
    use super::*;

    const MSS: u32 = 1000;

    fn cfg(cc: Algorithm, unit: CwndUnit, iw: u32) -> SenderConfig {
        SenderConfig {
            mss: MSS,
            initial_cwnd_segments: iw,
            slow_start_restart: false,
            recovery: Recovery::Sack,
            rto: RtoConfig { min: Duration::from_millis(200), ..Default::default() },
            mechanisms: Mechanisms::default(),
            congestion_control: cc,
            cwnd_unit: unit,
            ..Default::default()
        }
    }

    /// Write and send `n` segments of `len` bytes one at a time (a thin stream's small
    /// writes, not coalesced); returns how many went out.
    fn small_writes(s: &mut Sender, n: usize, len: u64) -> usize {
        let mut sent = 0;
        for _ in 0..n {
            s.write(len);
            while s.poll_transmit(ms(0)).is_some() {
                sent += 1;
            }
        }
        sent
    }

    #[test]
    fn a_window_of_n_packets_admits_n_small_segments() {
        let mut s = Sender::new(cfg(Algorithm::Reno, CwndUnit::Packets, 4));
        assert_eq!(small_writes(&mut s, 10, 100), 4, "4 segments of 100 bytes, then the window is full");
        assert_eq!(s.cwnd(), 4 * MSS as u64, "observers report bytes (segments × SMSS)");
        assert_eq!(s.window().cwnd, 4);
        // The same window in bytes (4,000) admits all ten (1,000 bytes).
        let mut s = Sender::new(cfg(Algorithm::Reno, CwndUnit::Bytes, 4));
        assert_eq!(small_writes(&mut s, 10, 100), 10);
        // And full-size segments: four either way.
        let mut s = Sender::new(cfg(Algorithm::Cubic, CwndUnit::Packets, 4));
        assert_eq!(small_writes(&mut s, 6, MSS as u64), 4);
    }

    #[test]
    fn slow_start_in_packets_counts_segments_acked_whatever_their_size() {
        let mut s = Sender::new(cfg(Algorithm::Reno, CwndUnit::Packets, 4));
        assert_eq!(small_writes(&mut s, 4, 100), 4);
        let ack = Ack { ack: 200, wnd: 1 << 20, sack: SackBlocks::default() };
        s.handle_ack(ms(50), &ack);
        assert_eq!(s.window().cwnd, 6, "two 100-byte segments ACKed: +2");
        assert_eq!(small_writes(&mut s, 10, 100), 4, "2 still in flight, room for 4 more");
    }

    #[test]
    fn go_back_n_after_a_partial_ack_of_a_segment_is_not_blocked() {
        // Three 600-byte segments; the timeout's retransmission [0, 1000) ends inside the
        // second, whose rest is then all that is outstanding. When that is lost too, the
        // one-segment loss window must admit its retransmission.
        let mut c = cfg(Algorithm::Reno, CwndUnit::Packets, 4);
        c.recovery = Recovery::NewReno;
        let mut s = Sender::new(c);
        assert_eq!(small_writes(&mut s, 3, 600), 3);
        let rto = s.poll_timeout().expect("armed");
        assert_eq!(s.handle_timeout(rto), Some(0));
        let rtx = s.poll_transmit(rto).expect("go-back-N");
        assert_eq!((rtx.seq, rtx.len), (0, 1000));
        s.handle_ack(
            rto + Duration::from_millis(100),
            &Ack { ack: 1000, wnd: 1 << 20, sack: SackBlocks::default() },
        );
        let next = s.poll_transmit(rto + Duration::from_millis(100)).expect("the rest");
        assert_eq!((next.seq, next.len), (1000, 800));
        let rto2 = s.poll_timeout().expect("armed");
        assert_eq!(s.handle_timeout(rto2), Some(1000));
        assert_eq!(s.window().cwnd, 1);
        let again = s.poll_transmit(rto2).expect("the loss window admits one segment");
        assert_eq!((again.seq, again.len), (1000, 800));
    }

    #[test]
    fn cubic_sack_recovery_reduces_to_seven_tenths_of_the_flight() {
        let mut s = Sender::new(cfg(Algorithm::Cubic, CwndUnit::Bytes, 10));
        let mut r = Receiver::new(ReceiverConfig {
            rwnd: 1 << 20,
            delayed_ack: false,
            delayed_ack_timeout: Duration::from_millis(40),
            sack: true,
        });
        s.write(10 * MSS as u64);
        let segs: Vec<_> = std::iter::from_fn(|| s.poll_transmit(ms(0))).collect();
        assert_eq!(segs.len(), 10);
        for seg in &segs[1..] {
            r.handle_segment(ms(100), seg); // the first is lost
            if let Some(a) = r.poll_ack() {
                s.handle_ack(ms(100), &a);
            }
        }
        assert!(s.in_recovery());
        assert_eq!(s.ssthresh(), 7_000, "RFC 9438 §4.6: 0.7 × FlightSize (10 segments)");
        assert_eq!(s.cwnd(), 7_000);
    }

    #[test]
    fn a_window_full_once_in_a_round_grows_on_every_ack_of_that_round() {
        // Linux `tcp_cwnd_validate` / `tcp_is_cwnd_limited`: ten segments fill a window
        // of ten (limited for the round), then the application is quiet. Each of the ten
        // ACKs grows slow start by one: 20. Judged per ACK, only while more than half the
        // window is still in flight (the first four: 14).
        let mut s = Sender::new(cfg(Algorithm::Cubic, CwndUnit::Packets, 10));
        assert_eq!(small_writes(&mut s, 10, MSS as u64), 10);
        for k in 1..=10u64 {
            let ack = Ack { ack: k * MSS as u64, wnd: 1 << 20, sack: SackBlocks::default() };
            s.handle_ack(ms(50 + k), &ack);
        }
        assert_eq!(s.window().cwnd, 20);
        // The next round, sent with the window a quarter used (5 of 20): not limited,
        // and 20 ≥ 2·5 — no growth (an application-limited flow keeps its window).
        assert_eq!(small_writes(&mut s, 5, MSS as u64), 5);
        for k in 11..=15u64 {
            let ack = Ack { ack: k * MSS as u64, wnd: 1 << 20, sack: SackBlocks::default() };
            s.handle_ack(ms(150 + k), &ack);
        }
        assert_eq!(s.window().cwnd, 20);
    }

    #[test]
    fn reno_in_bytes_is_the_default() {
        let d = SenderConfig::default();
        assert_eq!((d.congestion_control, d.cwnd_unit), (Algorithm::Reno, CwndUnit::Bytes));
    }
}

mod hystart_in_cubic {
    use super::*;

    fn sample(now: Instant, cwnd: u64, rtt_ms: u64, una: u64) -> AckSample {
        AckSample {
            now,
            acked: 1,
            prior_in_flight: cwnd,
            srtt: Some(Duration::from_millis(rtt_ms)),
            rtt: Some(Duration::from_millis(rtt_ms)),
            snd_una: una,
            snd_nxt: una + 100,
            round_cwnd_limited: None,
        }
    }

    #[test]
    fn a_delay_rise_sets_ssthresh_to_cwnd_and_plain_cubic_keeps_slow_start() {
        for hystart in [true, false] {
            let mut cc = Controller::with_hystart(Algorithm::Cubic, hystart);
            let mut w = packets(20, u64::MAX);
            let first = sample(ms(0), w.cwnd, 40, 1);
            cc.on_ack(&mut w, &first); // delay_min 40 ms
                                       // A new round 3 ms apart (no train) at 60 ms: exits after 8 samples.
            for k in 0..9 {
                let s = sample(ms(200 + 3 * k), w.cwnd, 60, 1000 + k);
                cc.on_ack(&mut w, &s);
            }
            if hystart {
                assert!(w.ssthresh < u64::MAX, "tp->snd_ssthresh = tcp_snd_cwnd(tp)");
                assert_eq!(w.ssthresh, 29, "20 + the 9 slow-start increments before the exit");
            } else {
                assert_eq!((w.ssthresh, w.cwnd), (u64::MAX, 30), "RFC 5681 slow start, +1 per ACK");
            }
        }
    }
}

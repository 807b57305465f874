//! HyStart, the slow-start exit of Linux's CUBIC (net/ipv4/tcp_cubic.c, Linux 6.x:
//! `hystart_update`, `bictcp_hystart_reset`, `cubictcp_acked`; module parameters
//! `hystart = 1`, `hystart_detect = 3`). Not RFC 9406's HyStart++: Linux's CUBIC runs
//! this older algorithm (Ha & Rhee, "Taming the elephants", 2011) by default.
//!
//! Per round trip (a round ends when SND.UNA passes the SND.NXT of its start), once
//! cwnd ≥ `hystart_low_window` (16 segments), slow start ends — ssthresh = cwnd — on
//! either sign of a full pipe:
//! - **ACK train** (`HYSTART_ACK_TRAIN`): ACKs keep arriving at most
//!   `hystart_ack_delta_us` (2 ms) apart for longer than (delay_min + ack_delay)/2
//!   since the round began (`threshold >>= 1` without pacing, `sk_pacing_status ==
//!   SK_PACING_NONE`, which holds for CUBIC over fq_codel);
//! - **delay increase** (`HYSTART_DELAY`): after 8 RTT samples of the round
//!   (`HYSTART_MIN_SAMPLES`), their minimum exceeds delay_min + clamp(delay_min/8,
//!   4 ms, 16 ms) (`HYSTART_DELAY_THRESH`).
//!
//! `delay_min` is the smallest RTT sample since the connection began or since its last
//! timeout (`bictcp_reset` on `TCP_CA_Loss` clears it and HyStart's `found`).

use crate::time::{Duration, Instant};

/// `hystart_low_window`: HyStart acts only from this window (segments) on.
pub const LOW_WINDOW: u64 = 16;
/// `hystart_ack_delta_us`: ACKs at most this far apart form a train.
pub const ACK_DELTA: Duration = Duration::from_millis(2);
/// `HYSTART_MIN_SAMPLES`: RTT samples of a round before the delay test.
pub const MIN_SAMPLES: u8 = 8;
/// `HYSTART_DELAY_MIN` / `HYSTART_DELAY_MAX`: the delay test's margin bounds.
pub const DELAY_MIN: Duration = Duration::from_millis(4);
/// See [`DELAY_MIN`].
pub const DELAY_MAX: Duration = Duration::from_millis(16);
/// `hystart_ack_delay()`: min(1 ms, `sk_gso_max_size`·4 / pacing rate). Linux's pacing
/// rate in slow start is 2·cwnd·MSS/SRTT; only above 2 Gbit/s (64 KiB·4 / 1 ms) would
/// the term fall below its 1-ms cap, far beyond thinwan's links, so it is the cap.
pub const ACK_DELAY: Duration = Duration::from_millis(1);

/// HyStart's state (`struct bictcp`'s `found`, `round_start`, `end_seq`, `last_ack`,
/// `curr_rtt`, `sample_cnt`, and `delay_min`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HyStart {
    found: bool,
    round_start: Instant,
    last_ack: Instant,
    /// SND.NXT when the round began: the round ends when SND.UNA passes it.
    end_seq: u64,
    /// Smallest RTT sample of the round (`Duration::MAX` before the first).
    curr_rtt: Duration,
    sample_cnt: u8,
    delay_min: Option<Duration>,
}

impl Default for HyStart {
    /// `bictcp_init` → `bictcp_hystart_reset` at time zero with SND.NXT = 0.
    fn default() -> Self {
        HyStart {
            found: false,
            round_start: Instant::ZERO,
            last_ack: Instant::ZERO,
            end_seq: 0,
            curr_rtt: Duration::MAX,
            sample_cnt: 0,
            delay_min: None,
        }
    }
}

impl HyStart {
    /// `cubictcp_acked` for one ACK with an RTT sample `rtt`: keeps `delay_min`, and in
    /// slow start runs `hystart_update`. Returns whether slow start should end now (the
    /// caller sets ssthresh = cwnd). `cwnd_segments` is the window in segments.
    pub fn on_rtt_sample(
        &mut self,
        now: Instant,
        rtt: Duration,
        (snd_una, snd_nxt): (u64, u64),
        cwnd_segments: u64,
        in_slow_start: bool,
    ) -> bool {
        // `if (delay == 0) delay = 1` (µs).
        let delay = rtt.max(Duration::from_nanos(1_000));
        let delay_min = *self.delay_min.get_or_insert(delay);
        let delay_min = delay_min.min(delay);
        self.delay_min = Some(delay_min);
        if self.found || !in_slow_start {
            return false;
        }
        if snd_una > self.end_seq {
            self.reset(now, snd_nxt);
        }
        if cwnd_segments < LOW_WINDOW {
            return false;
        }
        // HYSTART_ACK_TRAIN.
        if now - self.last_ack <= ACK_DELTA {
            self.last_ack = now;
            let threshold = Duration::from_nanos((delay_min + ACK_DELAY).as_nanos() / 2);
            if now - self.round_start > threshold {
                self.found = true;
                return true;
            }
        }
        // HYSTART_DELAY: the round's minimum over its first MIN_SAMPLES samples and on.
        self.curr_rtt = self.curr_rtt.min(delay);
        if self.sample_cnt < MIN_SAMPLES {
            self.sample_cnt += 1;
        } else {
            let margin = Duration::from_nanos(delay_min.as_nanos() / 8).clamp(DELAY_MIN, DELAY_MAX);
            if self.curr_rtt > delay_min + margin {
                self.found = true;
                return true;
            }
        }
        false
    }

    /// `bictcp_state(TCP_CA_Loss)`: `bictcp_reset` (found = 0, delay_min = 0) and
    /// `bictcp_hystart_reset` — the next round starts with the next ACK.
    pub fn on_loss(&mut self, now: Instant) {
        *self = HyStart { round_start: now, last_ack: now, ..HyStart::default() };
    }

    /// Did HyStart end slow start since the connection began or its last timeout?
    pub fn found(&self) -> bool {
        self.found
    }

    /// The smallest RTT sample HyStart has seen.
    pub fn delay_min(&self) -> Option<Duration> {
        self.delay_min
    }

    /// `bictcp_hystart_reset`: a new round.
    fn reset(&mut self, now: Instant, snd_nxt: u64) {
        self.round_start = now;
        self.last_ack = now;
        self.end_seq = snd_nxt;
        self.curr_rtt = Duration::MAX;
        self.sample_cnt = 0;
    }
}

#[cfg(test)]
mod tests {
    //! `hystart_update` on virtual time: each detector alone, and the conditions that
    //! keep HyStart quiet.
    use super::*;

    fn ms(x: u64) -> Instant {
        Instant::from_nanos(x * 1_000_000)
    }
    fn d(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// delay_min = 40 ms from a first round of slow samples; the round ends at 10_000.
    fn warmed() -> HyStart {
        let mut h = HyStart::default();
        assert!(!h.on_rtt_sample(ms(0), d(40), (1, 10_000), 20, true));
        h
    }

    #[test]
    fn delay_increase_needs_eight_samples_above_min_plus_an_eighth_clamped() {
        // Margin clamp(40/8 = 5 ms, 4, 16) = 5 ms: 45 ms is not above, 46 ms is.
        let mut h = warmed();
        // A new round (SND.UNA past 10_000), its samples 3 ms apart (no ACK train).
        for k in 0..20 {
            assert!(
                !h.on_rtt_sample(ms(100 + 3 * k), d(45), (10_001 + k, 20_000), 20, true),
                "45 ms, sample {k}"
            );
        }
        let mut h = warmed();
        let found: Vec<bool> =
            (0..9).map(|k| h.on_rtt_sample(ms(100 + 3 * k), d(46), (10_001 + k, 20_000), 20, true)).collect();
        assert_eq!(
            found,
            [false, false, false, false, false, false, false, false, true],
            "HYSTART_MIN_SAMPLES = 8"
        );
        assert!(h.found());
    }

    #[test]
    fn the_round_minimum_counts_so_one_fast_sample_holds_the_exit() {
        let mut h = warmed();
        assert!(!h.on_rtt_sample(ms(100), d(41), (10_001, 20_000), 20, true));
        for k in 1..20 {
            assert!(!h.on_rtt_sample(ms(100 + 3 * k), d(60), (10_001 + k, 20_000), 20, true));
        }
        // The next round forgets it.
        let found = (0..9).any(|k| h.on_rtt_sample(ms(500 + 3 * k), d(60), (20_001 + k, 30_000), 20, true));
        assert!(found, "a new round starts a new minimum");
    }

    #[test]
    fn ack_train_longer_than_half_the_min_rtt_ends_slow_start() {
        // Threshold (40 + 1)/2 = 20.5 ms after the round's start (the first ACK of it).
        let mut h = warmed();
        let exit = (0..40).position(|k| h.on_rtt_sample(ms(100 + k), d(40), (10_001 + k, 20_000), 20, true));
        assert_eq!(exit, Some(21), "the ACK 21 ms into the round (> 20.5 ms)");
        // Spaced 3 ms (> hystart_ack_delta_us), the same span is no train.
        let mut h = warmed();
        assert!(!(0..40).any(|k| h.on_rtt_sample(ms(100 + 3 * k), d(40), (10_001 + k, 20_000), 20, true)));
    }

    #[test]
    fn quiet_below_the_low_window_outside_slow_start_and_once_found() {
        let mut h = warmed();
        assert!(!(0..40).any(|k| h.on_rtt_sample(
            ms(100 + k),
            d(80),
            (10_001 + k, 20_000),
            LOW_WINDOW - 1,
            true
        )));
        assert!(!(0..40).any(|k| h.on_rtt_sample(ms(200 + k), d(80), (20_001 + k, 30_000), 20, false)));
        assert!((0..40).any(|k| h.on_rtt_sample(ms(300 + k), d(80), (30_001 + k, 40_000), 20, true)));
        assert!(
            !(0..40).any(|k| h.on_rtt_sample(ms(400 + k), d(80), (40_001 + k, 50_000), 20, true)),
            "found"
        );
        // Outside slow start the minimum is still kept.
        h.on_rtt_sample(ms(500), d(30), (50_001, 60_000), 20, false);
        assert_eq!(h.delay_min(), Some(d(30)));
    }

    #[test]
    fn a_timeout_forgets_found_and_the_minimum() {
        let mut h = warmed();
        assert!((0..40).any(|k| h.on_rtt_sample(ms(100 + k), d(40), (10_001 + k, 20_000), 20, true)));
        h.on_loss(ms(1000));
        assert!(!h.found());
        assert_eq!(h.delay_min(), None, "bictcp_reset: delay_min = 0");
        assert!(!h.on_rtt_sample(ms(1100), d(90), (20_001, 30_000), 20, true));
        assert_eq!(h.delay_min(), Some(d(90)));
    }
}

//! RTT estimation and the retransmission timeout, RFC 6298.
//!
//! The estimator is a separate piece behind [`RttEstimator`] so variants (e.g. the
//! asymmetric gain of Ogawa §5.1) can replace it without touching the sender. Backoff
//! (RFC 6298 (5.5)) belongs to the timer and lives in the sender.

use crate::time::Duration;

/// RTO parameters (RFC 6298 §2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RtoConfig {
    /// Lower clamp. RFC 6298 (2.4) says 1 s; Linux and our default use 200 ms.
    pub min: Duration,
    /// Upper clamp; RFC 6298 (2.5) allows any value ≥ 60 s.
    pub max: Duration,
    /// RTO before the first sample, RFC 6298 (2.1).
    pub initial: Duration,
    /// Clock granularity G, RFC 6298 (2.2)/(2.3).
    pub granularity: Duration,
    /// Linux's formula: the minimum bounds the variance term, RTO = SRTT +
    /// max(K·RTTVAR, min) (`tcp_set_rto`: srtt + rttvar with rttvar ≥ tcp_rto_min),
    /// instead of RFC 6298 (2.4)'s RTO = max(SRTT + K·RTTVAR, min). On a 200-ms path
    /// RFC 6298 gives ≈ 240 ms and Linux ≈ 400 ms, which decides whether a delayed ACK
    /// causes a spurious timeout. A sender built with [`Estimator::for_config`] then runs
    /// [`LinuxRtt`], which also holds RTTVAR at its maximum over the last round trip
    /// before letting it decay (`mdev_max_us`); [`Rfc6298`] alone applies only the
    /// minimum's placement.
    pub min_on_variance: bool,
}

impl Default for RtoConfig {
    fn default() -> Self {
        RtoConfig {
            min: Duration::from_millis(200),
            max: Duration::from_secs(60),
            initial: Duration::from_secs(1),
            granularity: Duration::from_millis(1),
            min_on_variance: false,
        }
    }
}

/// Turns RTT samples into a retransmission timeout.
pub trait RttEstimator {
    /// A new RTT measurement (already filtered by Karn's rule).
    fn on_sample(&mut self, rtt: Duration);
    /// The current RTO before backoff, clamped to [min, max] of `cfg`. The parameters
    /// are the connection's (shared by many), the estimator holds only its state.
    fn rto(&self, cfg: &RtoConfig) -> Duration;
    /// Smoothed RTT, once there is a sample.
    fn srtt(&self) -> Option<Duration>;
    /// RTT variation, once there is a sample.
    fn rttvar(&self) -> Option<Duration>;
    /// Forget all samples: the next one is treated as the first.
    fn reset(&mut self);
    /// A sample taken by an ACK that moved SND.UNA to `snd_una` while `snd_max` was the
    /// highest byte sent. Linux's estimator ends its round trip there
    /// (`tcp_rtt_estimator`: `after(snd_una, rtt_seq)`); the others only take the sample.
    fn on_sample_acked(&mut self, rtt: Duration, _snd_una: u64, _snd_max: u64, _cfg: &RtoConfig) {
        self.on_sample(rtt);
    }
}

/// The standard estimator: α = 1/8, β = 1/4, K = 4 (RFC 6298 §2). With
/// [`Rfc6298::asymmetric`], a sample above SRTT moves it by 7/8 instead of 1/8
/// (Ogawa §5.1): the RTO follows a queue that fills fast and shrinks
/// slowly when the path switches back to prioritised interactive packets.
#[derive(Clone, Debug)]
pub struct Rfc6298 {
    /// SRTT gain for samples ≥ SRTT (1/8 in RFC 6298).
    gain_rising: f64,
    /// (srtt, rttvar) in ns as f64, so small gains do not truncate; NaN before the first
    /// sample (not an `Option`: the estimator stays one cache line).
    state: (f64, f64),
}

const NO_SAMPLE: (f64, f64) = (f64::NAN, f64::NAN);

impl Default for Rfc6298 {
    fn default() -> Self {
        Rfc6298::new()
    }
}

impl Rfc6298 {
    /// No sample yet: RTO = the initial RTO.
    pub fn new() -> Self {
        Rfc6298 { gain_rising: 0.125, state: NO_SAMPLE }
    }

    /// The asymmetric-gain variant: g = 7/8 for rising samples, 1/8 for falling ones.
    pub fn asymmetric() -> Self {
        Rfc6298 { gain_rising: 0.875, state: NO_SAMPLE }
    }

    /// (srtt, rttvar), once there is a sample.
    fn sample(&self) -> Option<(f64, f64)> {
        (!self.state.0.is_nan()).then_some(self.state)
    }
}

/// RTO = SRTT + max(G, K·RTTVAR), clamped — RFC 6298 (2.2), (2.3), (2.4), (2.5); with
/// [`RtoConfig::min_on_variance`], the minimum clamps K·RTTVAR instead (Linux).
pub fn rto_from(cfg: &RtoConfig, srtt_ns: f64, rttvar_ns: f64) -> Duration {
    let mut k_var = (4.0 * rttvar_ns).max(cfg.granularity.as_nanos() as f64);
    if cfg.min_on_variance {
        k_var = k_var.max(cfg.min.as_nanos() as f64);
    }
    let rto = Duration::from_nanos((srtt_ns + k_var).round() as u64);
    rto.max(cfg.min).min(cfg.max)
}

impl RttEstimator for Rfc6298 {
    fn on_sample(&mut self, rtt: Duration) {
        let r = rtt.as_nanos() as f64;
        self.state = match self.sample() {
            // (2.2) first measurement: SRTT = R, RTTVAR = R/2.
            None => (r, r / 2.0),
            // (2.3) RTTVAR first (it uses the old SRTT), then SRTT.
            Some((srtt, rttvar)) => {
                let rttvar = 0.75 * rttvar + 0.25 * (srtt - r).abs();
                let g = if r >= srtt { self.gain_rising } else { 0.125 };
                ((1.0 - g) * srtt + g * r, rttvar)
            }
        };
    }

    fn rto(&self, cfg: &RtoConfig) -> Duration {
        match self.sample() {
            None => cfg.initial.max(cfg.min).min(cfg.max),
            Some((s, v)) => rto_from(cfg, s, v),
        }
    }

    fn srtt(&self) -> Option<Duration> {
        self.sample().map(|(s, _)| Duration::from_nanos(s.round() as u64))
    }

    fn rttvar(&self) -> Option<Duration> {
        self.sample().map(|(_, v)| Duration::from_nanos(v.round() as u64))
    }

    fn reset(&mut self) {
        self.state = NO_SAMPLE;
    }
}

/// The estimator a sender runs, chosen by its configuration and held inline (no
/// `Box<dyn>`: every ACK of 10⁴ connections goes through it).
#[derive(Clone, Debug)]
pub enum Estimator {
    /// RFC 6298 (optionally with Ogawa §5.1's asymmetric gain).
    Rfc6298(Rfc6298),
    /// Linux's `tcp_rtt_estimator` (`tcp.rto_formula = "linux"`).
    Linux(LinuxRtt),
}

impl Estimator {
    /// [`LinuxRtt`] when the RTO minimum goes on the variance term (Linux), else
    /// [`Rfc6298`]; the asymmetric gain of Ogawa §5.1 applies to either.
    pub fn for_config(rto: &RtoConfig, asymmetric_gain: bool) -> Self {
        match (rto.min_on_variance, asymmetric_gain) {
            (true, asym) => Estimator::Linux(LinuxRtt::new(asym)),
            (false, false) => Estimator::Rfc6298(Rfc6298::new()),
            (false, true) => Estimator::Rfc6298(Rfc6298::asymmetric()),
        }
    }
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator::Rfc6298(Rfc6298::new())
    }
}

impl RttEstimator for Estimator {
    fn on_sample(&mut self, rtt: Duration) {
        match self {
            Estimator::Rfc6298(e) => e.on_sample(rtt),
            Estimator::Linux(e) => e.on_sample(rtt),
        }
    }
    fn on_sample_acked(&mut self, rtt: Duration, snd_una: u64, snd_max: u64, cfg: &RtoConfig) {
        match self {
            Estimator::Rfc6298(e) => e.on_sample(rtt),
            Estimator::Linux(e) => e.on_sample_acked(rtt, snd_una, snd_max, cfg),
        }
    }
    fn rto(&self, cfg: &RtoConfig) -> Duration {
        match self {
            Estimator::Rfc6298(e) => e.rto(cfg),
            Estimator::Linux(e) => e.rto(cfg),
        }
    }
    fn srtt(&self) -> Option<Duration> {
        match self {
            Estimator::Rfc6298(e) => e.srtt(),
            Estimator::Linux(e) => e.srtt(),
        }
    }
    fn rttvar(&self) -> Option<Duration> {
        match self {
            Estimator::Rfc6298(e) => e.rttvar(),
            Estimator::Linux(e) => e.rttvar(),
        }
    }
    fn reset(&mut self) {
        match self {
            Estimator::Rfc6298(e) => e.reset(),
            Estimator::Linux(e) => e.reset(),
        }
    }
}

/// Linux's RTT estimator, `tcp_rtt_estimator` and `tcp_set_rto` in
/// net/ipv4/tcp_input.c, in the kernel's own integer microseconds:
///
/// - `srtt_us` is SRTT·8 and moves by 1/8 of the error (7/8 with Ogawa §5.1's gain for a
///   rising sample);
/// - `mdev_us` is 4·RTTVAR and moves by 1/4 of the error — by only 1/32 when the sample
///   is *below* SRTT and the error exceeds mdev/4 (the kernel's "Eifel-like" rule, which
///   keeps a falling RTT from inflating the RTO);
/// - `rttvar_us`, the term the RTO uses, follows the largest `mdev_us` of the current
///   round trip (`mdev_max_us`) upwards at once, and when a round trip ends (SND.UNA
///   passes `rtt_seq`, the SND.NXT of the round's start) decays by 1/4 of its distance to
///   that round's maximum; `mdev_max_us` starts each round at `tcp_rto_min` (200 ms), so
///   `rttvar_us` never falls below the minimum RTO;
/// - RTO = SRTT + `rttvar_us` (`__tcp_set_rto`), rounded up to the clock granularity (a
///   jiffy, `usecs_to_jiffies`) and clamped to the maximum (`tcp_bound_rto`).
///
/// The first sample R gives SRTT = R, mdev = 2R, rttvar = max(2R, min_rto): the same RTO
/// as [`Rfc6298`] under [`RtoConfig::min_on_variance`]; later they part.
#[derive(Clone, Debug, Default)]
pub struct LinuxRtt {
    /// SRTT·8, µs; 0 before the first sample (the kernel's own marker).
    srtt_us: u32,
    /// 4·RTTVAR, µs.
    mdev_us: u32,
    /// Largest `mdev_us` of the round trip in progress (at least the minimum RTO).
    mdev_max_us: u32,
    /// The variance term of the RTO, µs.
    rttvar_us: u32,
    /// The round trip in progress ends when SND.UNA passes this.
    rtt_seq: u64,
    /// Ogawa §5.1: SRTT gain 7/8 for samples ≥ SRTT.
    asymmetric: bool,
}

impl LinuxRtt {
    /// No sample yet; `asymmetric` selects Ogawa §5.1's rising gain.
    pub fn new(asymmetric: bool) -> Self {
        LinuxRtt { asymmetric, ..Default::default() }
    }

    /// `tcp_rtt_estimator(sk, mrtt_us)` with `tp->snd_una` = `snd_una` and
    /// `tp->snd_nxt` = `snd_max`.
    fn estimate(&mut self, rtt: Duration, snd_una: u64, snd_max: u64, cfg: &RtoConfig) {
        // The kernel's srtt_us holds 8·RTT in a u32: keep samples below 2^28 µs (268 s).
        let mrtt = (rtt.as_nanos() / 1000).min(1 << 28) as i64;
        let rto_min = (cfg.min.as_nanos() / 1000).min(u32::MAX as u64) as u32;
        if self.srtt_us == 0 {
            // No previous measure: SRTT = R, mdev = 2R ("make sure rto = 3*rtt").
            self.srtt_us = ((mrtt << 3) as u32).max(1);
            self.mdev_us = (mrtt << 1) as u32;
            self.rttvar_us = self.mdev_us.max(rto_min);
            self.mdev_max_us = self.rttvar_us;
            self.rtt_seq = snd_max;
            return;
        }
        let srtt = self.srtt_us as i64;
        let mut m = mrtt - (srtt >> 3); // the error
        let new_srtt = if self.asymmetric && m >= 0 { srtt + 7 * m } else { srtt + m };
        let mdev = self.mdev_us as i64;
        if m < 0 {
            m = -m - (mdev >> 2);
            // A falling RTT: the finer gain 1/32 for a growing deviation.
            if m > 0 {
                m >>= 3;
            }
        } else {
            m -= mdev >> 2;
        }
        self.mdev_us = (mdev + m).max(0) as u32;
        if self.mdev_us > self.mdev_max_us {
            self.mdev_max_us = self.mdev_us;
            self.rttvar_us = self.rttvar_us.max(self.mdev_max_us);
        }
        if snd_una > self.rtt_seq {
            // A round trip ended: decay towards its maximum, start the next round.
            if self.mdev_max_us < self.rttvar_us {
                self.rttvar_us -= (self.rttvar_us - self.mdev_max_us) >> 2;
            }
            self.rtt_seq = snd_max;
            self.mdev_max_us = rto_min;
        }
        self.srtt_us = new_srtt.clamp(1, u32::MAX as i64) as u32;
    }
}

impl RttEstimator for LinuxRtt {
    /// A sample without sequence numbers never ends a round trip; the sender calls
    /// [`RttEstimator::on_sample_acked`].
    fn on_sample(&mut self, rtt: Duration) {
        self.estimate(rtt, 0, 0, &RtoConfig::default());
    }

    fn on_sample_acked(&mut self, rtt: Duration, snd_una: u64, snd_max: u64, cfg: &RtoConfig) {
        self.estimate(rtt, snd_una, snd_max, cfg);
    }

    fn rto(&self, cfg: &RtoConfig) -> Duration {
        if self.srtt_us == 0 {
            return cfg.initial.max(cfg.min).min(cfg.max);
        }
        let us = (self.srtt_us >> 3) as u64 + self.rttvar_us as u64;
        let mut rto = Duration::from_micros(us);
        let g = cfg.granularity.as_nanos();
        if g > 0 {
            rto = Duration::from_nanos(rto.as_nanos().div_ceil(g) * g); // usecs_to_jiffies
        }
        rto.max(cfg.min).min(cfg.max)
    }

    fn srtt(&self) -> Option<Duration> {
        (self.srtt_us != 0).then(|| Duration::from_nanos(self.srtt_us as u64 * 125))
    }

    /// RTTVAR as RFC 6298 counts it: the RTO's variance term / 4.
    fn rttvar(&self) -> Option<Duration> {
        (self.srtt_us != 0).then(|| Duration::from_nanos(self.rttvar_us as u64 * 250))
    }

    fn reset(&mut self) {
        *self = LinuxRtt::new(self.asymmetric);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn initial_rto_before_any_sample() {
        let e = Rfc6298::new();
        assert_eq!(e.rto(&RtoConfig::default()), ms(1000)); // (2.1)
        assert_eq!(e.srtt(), None);
    }

    #[test]
    fn first_sample_sets_srtt_and_half_var() {
        let mut e = Rfc6298::new();
        e.on_sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), Some(ms(50)));
        assert_eq!(e.rto(&RtoConfig { min: ms(1), ..Default::default() }), ms(300));
        // 100 + 4·50
    }

    #[test]
    fn later_samples_use_gains_one_eighth_and_one_quarter() {
        let mut e = Rfc6298::new();
        e.on_sample(ms(100));
        e.on_sample(ms(200));
        // rttvar = 3/4·50 + 1/4·|100−200| = 62.5; srtt = 7/8·100 + 1/8·200 = 112.5
        assert_eq!(e.rttvar(), Some(Duration::from_micros(62_500)));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(&RtoConfig { min: ms(1), ..Default::default() }), Duration::from_micros(362_500));
    }

    #[test]
    fn linux_formula_puts_the_minimum_on_the_variance_term() {
        let rfc = RtoConfig { min: ms(200), ..Default::default() };
        let linux = RtoConfig { min_on_variance: true, ..rfc };
        let mut e = Rfc6298::new();
        for _ in 0..50 {
            e.on_sample(ms(200));
        }
        // A steady 200-ms path: RTTVAR → 0, so RFC 6298 gives SRTT + G and Linux
        // SRTT + 200 ms.
        assert_eq!(e.rto(&rfc), ms(201));
        assert_eq!(e.rto(&linux), ms(400));
        // A large variance wins over the minimum in both.
        let mut v = Rfc6298::new();
        v.on_sample(ms(200)); // SRTT 200, RTTVAR 100 → RTO 200 + 400
        assert_eq!(v.rto(&linux), ms(600));
        assert_eq!(v.rto(&rfc), ms(600));
    }

    #[test]
    fn clamps_to_min_and_max_and_granularity() {
        let mut e = Rfc6298::new();
        e.on_sample(ms(10));
        assert_eq!(e.rto(&RtoConfig::default()), ms(200)); // 10 + 20 < 200 → min
        let mut e = Rfc6298::new();
        e.on_sample(ms(5000));
        assert_eq!(e.rto(&RtoConfig { min: ms(1), max: ms(2000), ..Default::default() }), ms(2000)); // max
                                                                                                     // Zero variance: the K·RTTVAR term is at least G.
        let mut e = Rfc6298::new();
        for _ in 0..200 {
            e.on_sample(ms(50));
        }
        assert_eq!(e.rto(&RtoConfig { min: ms(1), granularity: ms(7), ..Default::default() }), ms(57));
    }

    #[test]
    fn asymmetric_gain_rises_by_seven_eighths_and_falls_by_one_eighth() {
        let mut e = Rfc6298::asymmetric();
        e.on_sample(ms(100));
        e.on_sample(ms(500)); // rising: 1/8·100 + 7/8·500 = 450
        assert_eq!(e.srtt(), Some(ms(450)));
        // rttvar as usual: 3/4·50 + 1/4·400 = 137.5
        assert_eq!(e.rttvar(), Some(Duration::from_micros(137_500)));
        e.on_sample(ms(50)); // falling: 7/8·450 + 1/8·50 = 400
        assert_eq!(e.srtt(), Some(ms(400)));
        let mut std = Rfc6298::new();
        std.on_sample(ms(100));
        std.on_sample(ms(500)); // 7/8·100 + 1/8·500 = 150
        assert_eq!(std.srtt(), Some(ms(150)));
    }

    #[test]
    fn reset_forgets() {
        let mut e = Rfc6298::new();
        e.on_sample(ms(300));
        e.reset();
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rto(&RtoConfig::default()), ms(1000));
    }

    fn us(x: u64) -> Duration {
        Duration::from_micros(x)
    }

    /// `tcp_rtt_estimator` by hand (srtt_us = 8·SRTT, mdev_us = 4·RTTVAR, µs).
    #[test]
    fn linux_holds_rttvar_at_the_round_trip_maximum() {
        let cfg = RtoConfig { min: ms(200), min_on_variance: true, ..Default::default() };
        let mut e = LinuxRtt::new(false);
        // (1) first measure, R = 100 ms: srtt 800000, mdev 200000, rttvar =
        // max(200000, rto_min) = 200000, rtt_seq = 10000. RTO = 100 + 200.
        e.on_sample_acked(ms(100), 1000, 10_000, &cfg);
        assert_eq!(e.rto(&cfg), ms(300));
        // (2) 300 ms, same round (snd_una ≤ rtt_seq): m = 200000, srtt 1000000; m −=
        // mdev/4 → 150000, mdev 350000 > mdev_max → rttvar 350000. RTO = 125 + 350.
        e.on_sample_acked(ms(300), 5000, 10_000, &cfg);
        assert_eq!(e.srtt(), Some(us(125_000)));
        assert_eq!(e.rto(&cfg), ms(475));
        // (3) 100 ms, the round ends (snd_una 10001 > 10000): m = −25000, srtt 975000;
        // falling: m = 25000 − 87500 < 0 → mdev 287500. mdev_max (350000) = rttvar: no
        // decay; next round from snd_nxt 20000, mdev_max = 200000. RTO = 121.875 + 350
        // → 472 (rounded up to the 1-ms jiffy). RFC 6298 would give 121.875 + 287.5.
        e.on_sample_acked(ms(100), 10_001, 20_000, &cfg);
        assert_eq!(e.rto(&cfg), ms(472));
        let mut rfc = Rfc6298::new();
        for r in [100, 300, 100] {
            rfc.on_sample(ms(r));
        }
        assert_eq!(rfc.rto(&cfg), Duration::from_micros(409_375), "RFC 6298 lets RTTVAR fall per sample");
        // (4) 100 ms, same round: m = 100000 − 121875 = −21875, srtt 953125; m = 21875 −
        // 71875 < 0 → mdev 237500 > mdev_max 200000 → mdev_max 237500 (< rttvar 350000).
        // RTO = 119140 + 350000 µs → 470 ms.
        e.on_sample_acked(ms(100), 15_000, 20_000, &cfg);
        assert_eq!(e.rto(&cfg), ms(470));
        // (5) 100 ms, the round ends: m = −19140, srtt 933985; m = 19140 − 59375 < 0 →
        // mdev 197265. Decay: rttvar −= (350000 − 237500)/4 = 28125 → 321875.
        // RTO = 116748 + 321875 = 438623 µs → 439 ms.
        e.on_sample_acked(ms(100), 20_001, 30_000, &cfg);
        assert_eq!(e.rttvar(), Some(Duration::from_nanos(321_875 * 250)), "rttvar_us / 4");
        assert_eq!(e.rto(&cfg), ms(439));
    }

    #[test]
    fn linux_grows_the_deviation_by_one_32nd_on_a_falling_sample() {
        let cfg = RtoConfig {
            min: ms(1),
            min_on_variance: true,
            granularity: Duration::ZERO,
            ..Default::default()
        };
        let mut e = LinuxRtt::new(false);
        e.on_sample_acked(ms(100), 0, 1, &cfg); // mdev 200000
                                                // 10 ms: |m| = 90000 − mdev/4 (50000) = 40000 > 0 → ·1/8 → mdev 205000 (RFC 6298:
                                                // 4·RTTVAR = 3/4·200000 + 90000 = 240000). srtt = 800000 − 90000 = 710000.
        e.on_sample_acked(ms(10), 0, 1, &cfg);
        assert_eq!(e.rto(&cfg), us(710_000 / 8 + 205_000));
    }

    #[test]
    fn linux_first_sample_matches_the_min_on_variance_formula() {
        let cfg = RtoConfig { min: ms(200), min_on_variance: true, ..Default::default() };
        for r in [10, 60, 100, 250] {
            let mut l = LinuxRtt::new(false);
            let mut f = Rfc6298::new();
            l.on_sample_acked(ms(r), 0, 1, &cfg);
            f.on_sample(ms(r));
            assert_eq!(l.rto(&cfg), f.rto(&cfg), "R = {r} ms: R + max(2R, min)");
        }
        assert_eq!(LinuxRtt::new(false).rto(&cfg), ms(1000), "initial RTO");
    }
}

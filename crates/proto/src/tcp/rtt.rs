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
    /// causes a spurious timeout. Linux also holds RTTVAR at its maximum over the last
    /// round trip before letting it decay; that refinement is not modelled.
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
}

//! Delay jitter: uniform ± amplitude or normal, as a fraction of the delay or absolute.

use rand::Rng;
use rand_distr::{Distribution, Normal};
use thinwan_proto::Duration;

/// Shape of the jitter distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JitterLaw {
    /// delay + U(−a, +a).
    Uniform,
    /// delay + N(0, σ²), clamped at zero.
    Normal,
}

/// Amplitude (uniform) or standard deviation (normal).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JitterSize {
    /// A fraction of the configured delay (`10%` = 0.1).
    Fraction(f64),
    /// An absolute span.
    Absolute(Duration),
}

/// Jitter of one direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Jitter {
    /// Every packet gets exactly the configured delay.
    None,
    /// Random per-packet delay.
    Law {
        /// Distribution.
        law: JitterLaw,
        /// Size.
        size: JitterSize,
    },
}

impl Jitter {
    /// The delay of one packet, given the configured `delay` (never negative).
    pub fn sample<R: Rng + ?Sized>(&self, delay: Duration, rng: &mut R) -> Duration {
        let Jitter::Law { law, size } = *self else { return delay };
        let a = match size {
            JitterSize::Fraction(f) => delay.as_secs_f64() * f,
            JitterSize::Absolute(d) => d.as_secs_f64(),
        };
        if a <= 0.0 {
            return delay;
        }
        let offset = match law {
            JitterLaw::Uniform => a * (2.0 * rng.gen::<f64>() - 1.0),
            // σ > 0 and finite here, so Normal::new cannot fail.
            JitterLaw::Normal => Normal::new(0.0, a).map(|n| n.sample(rng)).unwrap_or(0.0),
        };
        Duration::from_secs_f64(delay.as_secs_f64() + offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinwan_proto::traffic::stream_rng;

    #[test]
    fn uniform_stays_in_band_and_normal_has_sigma() {
        let mut rng = stream_rng(1, 1);
        let d = Duration::from_millis(20);
        let u = Jitter::Law { law: JitterLaw::Uniform, size: JitterSize::Fraction(0.1) };
        let xs: Vec<f64> = (0..20_000).map(|_| u.sample(d, &mut rng).as_secs_f64()).collect();
        assert!(xs.iter().all(|&x| (0.018..=0.022).contains(&x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.020).abs() < 5e-5);
        let n = Jitter::Law { law: JitterLaw::Normal, size: JitterSize::Absolute(Duration::from_millis(1)) };
        let ys: Vec<f64> = (0..20_000).map(|_| n.sample(d, &mut rng).as_secs_f64()).collect();
        let m = ys.iter().sum::<f64>() / ys.len() as f64;
        let sd = (ys.iter().map(|y| (y - m).powi(2)).sum::<f64>() / ys.len() as f64).sqrt();
        assert!((sd - 0.001).abs() < 5e-5, "{sd}");
        assert_eq!(Jitter::None.sample(d, &mut rng), d);
    }
}

//! The middlebox topology's per-client base one-way delays (spec "Evaluation set-up":
//! "each flow gets a random base one-way delay of 5–10 ms (normally distributed)"),
//! drawn once here so the simulator's client links and the lab's per-pair delays
//! (thinwan-link's `pairs.client_delays_ms`) are the same numbers for the same seed.

use rand_distr::{Distribution, Normal};

use crate::traffic::stream_rng;

/// First random stream of the client delays (docs/model.md, "Random streams"): after
/// the two bottleneck directions' `2^62` and `2^62 + 1`.
pub const CLIENT_DELAY_STREAM: u64 = (1 << 62) + 2;

/// The law of the clients' delays, ms: N(mean, sd) clipped to [min, max].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayLaw {
    /// Mean, ms.
    pub mean_ms: f64,
    /// Standard deviation, ms.
    pub sd_ms: f64,
    /// Lower clip, ms.
    pub min_ms: f64,
    /// Upper clip, ms.
    pub max_ms: f64,
}

/// Client i's base one-way delay, ms, for `clients` clients of a run seeded `seed`: the
/// i-th draw of `law` on stream [`CLIENT_DELAY_STREAM`], clipped. The error names the
/// key (`topology.client_delay_sd_ms`).
pub fn client_delays_ms(law: DelayLaw, seed: u64, clients: u32) -> Result<Vec<f64>, String> {
    let normal =
        Normal::new(law.mean_ms, law.sd_ms).map_err(|e| format!("topology.client_delay_sd_ms: {e}"))?;
    let mut rng = stream_rng(seed, CLIENT_DELAY_STREAM);
    Ok((0..clients).map(|_| normal.sample(&mut rng).clamp(law.min_ms, law.max_ms)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAW: DelayLaw = DelayLaw { mean_ms: 7.5, sd_ms: 1.25, min_ms: 5.0, max_ms: 10.0 };

    #[test]
    fn draws_are_seeded_clipped_and_spread() {
        let a = client_delays_ms(LAW, 3, 2000).unwrap();
        assert_eq!(a, client_delays_ms(LAW, 3, 2000).unwrap());
        assert_ne!(a, client_delays_ms(LAW, 4, 2000).unwrap());
        assert!(a.iter().all(|&d| (5.0..=10.0).contains(&d)));
        let mean = a.iter().sum::<f64>() / a.len() as f64;
        assert!((mean - 7.5).abs() < 0.1, "{mean}");
        // Fewer clients are a prefix: client i's delay does not depend on the count.
        assert_eq!(client_delays_ms(LAW, 3, 5).unwrap(), a[..5]);
    }

    #[test]
    fn a_bad_sd_names_the_key() {
        // rand_distr's Normal takes a negative sd (as its mirror image), not NaN.
        let e = client_delays_ms(DelayLaw { sd_ms: f64::NAN, ..LAW }, 1, 1).unwrap_err();
        assert!(e.starts_with("topology.client_delay_sd_ms"), "{e}");
    }
}

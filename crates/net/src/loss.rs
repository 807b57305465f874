//! Random loss on a link: i.i.d. (Bernoulli) or Gilbert–Elliott bursts.
//!
//! Both draw only from the generator they are given, so a direction's loss pattern is
//! a function of its seed and the packet sequence alone (STYLE.md §8).

use rand::Rng;

/// Why the loss model dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossKind {
    /// I.i.d. loss.
    Random,
    /// Gilbert–Elliott loss (in either state).
    Burst,
}

/// A per-packet loss process.
#[derive(Clone, Debug, PartialEq)]
pub enum LossModel {
    /// Never lose.
    None,
    /// Lose each packet independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Two-state Markov chain (Gilbert 1960, Elliott 1963), stepped once per packet
    /// before the loss draw, as Linux netem's `gemodel` does.
    GilbertElliott {
        /// P(Good → Bad).
        p: f64,
        /// P(Bad → Good).
        r: f64,
        /// Loss probability in Good.
        loss_good: f64,
        /// Loss probability in Bad.
        loss_bad: f64,
        /// Currently in Bad.
        bad: bool,
    },
}

impl LossModel {
    /// A Gilbert–Elliott model starting in the Good state.
    pub fn gilbert_elliott(p: f64, r: f64, loss_good: f64, loss_bad: f64) -> Self {
        LossModel::GilbertElliott { p, r, loss_good, loss_bad, bad: false }
    }

    /// Decide the fate of the next packet.
    pub fn lose<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Option<LossKind> {
        match self {
            LossModel::None => None,
            LossModel::Bernoulli { p } => (rng.gen::<f64>() < *p).then_some(LossKind::Random),
            LossModel::GilbertElliott { p, r, loss_good, loss_bad, bad } => {
                let u: f64 = rng.gen();
                *bad = if *bad { u >= *r } else { u < *p };
                let loss = if *bad { *loss_bad } else { *loss_good };
                (rng.gen::<f64>() < loss).then_some(LossKind::Burst)
            }
        }
    }

    /// Long-run loss rate (π_B·loss_bad + π_G·loss_good for Gilbert–Elliott).
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott { p, r, loss_good, loss_bad, .. } => {
                if p + r == 0.0 {
                    return loss_good;
                }
                let pi_bad = p / (p + r);
                pi_bad * loss_bad + (1.0 - pi_bad) * loss_good
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinwan_proto::traffic::stream_rng;

    fn pattern(mut m: LossModel, seed: u64, n: usize) -> Vec<bool> {
        let mut rng = stream_rng(seed, 0);
        (0..n).map(|_| m.lose(&mut rng).is_some()).collect()
    }

    #[test]
    fn bernoulli_rate_and_determinism() {
        let a = pattern(LossModel::Bernoulli { p: 0.02 }, 5, 200_000);
        assert_eq!(a, pattern(LossModel::Bernoulli { p: 0.02 }, 5, 200_000));
        assert_ne!(a, pattern(LossModel::Bernoulli { p: 0.02 }, 6, 200_000));
        let rate = a.iter().filter(|&&x| x).count() as f64 / a.len() as f64;
        assert!((rate - 0.02).abs() < 0.002, "{rate}");
        assert!(pattern(LossModel::None, 1, 1000).iter().all(|&x| !x));
    }

    #[test]
    fn gilbert_elliott_is_bursty_with_the_right_mean() {
        let m = LossModel::gilbert_elliott(0.01, 0.25, 0.0, 1.0);
        let expected = m.mean_loss(); // 0.01 / 0.26
        let a = pattern(m, 9, 400_000);
        let lost = a.iter().filter(|&&x| x).count() as f64;
        let rate = lost / a.len() as f64;
        assert!((rate / expected - 1.0).abs() < 0.1, "{rate} vs {expected}");
        // Mean burst length 1/r = 4 packets, vs ≈1 for i.i.d. loss of the same rate.
        let bursts = a.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
        let mean_burst = lost / bursts;
        assert!((mean_burst - 4.0).abs() < 0.5, "burst {mean_burst}");
    }
}

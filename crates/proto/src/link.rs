//! Random loss and delay jitter of one link direction, written once for the simulator's
//! WAN links and the emulator's link ([`Impairment`]).
//!
//! A packet that finished serialisation at `done` is first offered to the loss process
//! (a corrupted frame still used the link); if it survives, its propagation delay is
//! drawn from the jitter law; without reordering it never arrives before the packet
//! ahead of it on the same direction.
//!
//! # Random streams
//!
//! Every direction draws loss and jitter, in that order, from one generator,
//! `stream_rng(seed, LINK_STREAM_BASE + dir)` ([`LinkDir::stream`]), so the same seed
//! and packet sequence give the same losses and delays in the simulator and in the lab.
//! The full table of streams is in docs/model.md ("Random streams").

use crate::drops::DropReason;
use crate::time::{Duration, Instant};
use crate::traffic::stream_rng;
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// First stream of link randomness: far above the sources' `2·pair` (and `2·pair + 1`),
/// so they never collide for any realistic pair count.
pub const LINK_STREAM_BASE: u64 = 1 << 62;

/// A direction of the bottleneck (WAN) link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkDir {
    /// R1 → R2: server → client, the data direction (port `bottleneck`, emulator `fwd`).
    Fwd = 0,
    /// R2 → R1: client → server, the ACK direction (port `bottleneck-rev`, emulator `rev`).
    Rev = 1,
}

impl LinkDir {
    /// The random stream of this direction's loss and jitter.
    pub fn stream(self) -> u64 {
        LINK_STREAM_BASE + self as u64
    }
}

/// A per-packet loss process.
#[derive(Clone, Debug, PartialEq)]
pub enum LossModel {
    /// Never lose (draws no random number).
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
    /// I.i.d. loss with probability `p`; none (and no random draws) when `p` is 0.
    pub fn iid(p: f64) -> Self {
        if p > 0.0 {
            LossModel::Bernoulli { p }
        } else {
            LossModel::None
        }
    }

    /// A Gilbert–Elliott model starting in the Good state.
    pub fn gilbert_elliott(p: f64, r: f64, loss_good: f64, loss_bad: f64) -> Self {
        LossModel::GilbertElliott { p, r, loss_good, loss_bad, bad: false }
    }

    /// Decide the fate of the next packet: `Some(reason)` if it is lost.
    pub fn lose<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Option<DropReason> {
        match self {
            LossModel::None => None,
            LossModel::Bernoulli { p } => (rng.gen::<f64>() < *p).then_some(DropReason::Loss),
            LossModel::GilbertElliott { p, r, loss_good, loss_bad, bad } => {
                let u: f64 = rng.gen();
                *bad = if *bad { u >= *r } else { u < *p };
                let loss = if *bad { *loss_bad } else { *loss_good };
                (rng.gen::<f64>() < loss).then_some(DropReason::BurstLoss)
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
    /// Uniform within ± `pct` % of the delay (the simulator's `bottleneck_jitter_pct`);
    /// none when `pct` is 0.
    pub fn uniform_pct(pct: f64) -> Self {
        if pct > 0.0 {
            Jitter::Law { law: JitterLaw::Uniform, size: JitterSize::Fraction(pct / 100.0) }
        } else {
            Jitter::None
        }
    }

    /// The delay of one packet, given the configured `delay` (never negative). Draws
    /// one number unless the jitter is zero.
    pub fn sample<R: Rng + ?Sized>(&self, delay: Duration, rng: &mut R) -> Duration {
        let Jitter::Law { law, size } = *self else { return delay };
        let d = delay.as_secs_f64();
        // A standard draw: U(−1, 1) or N(0, 1).
        let z = |rng: &mut R| match law {
            JitterLaw::Uniform => 2.0 * rng.gen::<f64>() - 1.0,
            JitterLaw::Normal => StandardNormal.sample(rng),
        };
        match size {
            // delay · (1 + f·z): the simulator's formula since its first jittered run;
            // written so, its records stay bit-identical.
            JitterSize::Fraction(f) if f > 0.0 => Duration::from_secs_f64(d * (1.0 + f * z(rng))),
            JitterSize::Absolute(a) if a > Duration::ZERO => {
                Duration::from_secs_f64(d + a.as_secs_f64() * z(rng))
            }
            JitterSize::Fraction(_) | JitterSize::Absolute(_) => delay,
        }
    }
}

/// Loss and jitter of one link direction, with its own random stream and the memory
/// that keeps it from reordering.
pub struct Impairment {
    loss: LossModel,
    jitter: Jitter,
    reorder: bool,
    rng: Xoshiro256PlusPlus,
    /// Arrival time of the latest packet sent over the link.
    last_arrive: Instant,
}

impl Impairment {
    /// Direction `dir`'s impairment in a run seeded `seed`: random numbers from
    /// [`LinkDir::stream`]. `reorder`: let jitter reorder packets.
    pub fn new(loss: LossModel, jitter: Jitter, reorder: bool, seed: u64, dir: LinkDir) -> Self {
        Impairment { loss, jitter, reorder, rng: stream_rng(seed, dir.stream()), last_arrive: Instant::ZERO }
    }

    /// Neither loss nor jitter: [`Impairment::transit`] is then `done + delay`.
    pub fn is_none(&self) -> bool {
        self.loss == LossModel::None && self.jitter == Jitter::None
    }

    /// A packet finished serialisation at `done` on a link of propagation delay `delay`:
    /// its arrival time, or why it was lost.
    pub fn transit(&mut self, done: Instant, delay: Duration) -> Result<Instant, DropReason> {
        if let Some(reason) = self.loss.lose(&mut self.rng) {
            return Err(reason);
        }
        let mut arrive = done + self.jitter.sample(delay, &mut self.rng);
        if !self.reorder {
            // A link does not reorder: a packet that would overtake waits for the one ahead.
            arrive = arrive.max(self.last_arrive);
        }
        self.last_arrive = self.last_arrive.max(arrive);
        Ok(arrive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(Jitter::uniform_pct(0.0), Jitter::None);
    }

    #[test]
    fn without_reordering_arrivals_keep_their_order() {
        let mut imp = Impairment::new(LossModel::None, Jitter::uniform_pct(50.0), false, 3, LinkDir::Fwd);
        let d = Duration::from_millis(10);
        let arrivals: Vec<Instant> =
            (0..2000).map(|k| imp.transit(Instant::from_nanos(k * 1_000_000), d).unwrap()).collect();
        assert!(arrivals.windows(2).all(|w| w[0] <= w[1]));
        let mut imp = Impairment::new(LossModel::None, Jitter::uniform_pct(50.0), true, 3, LinkDir::Fwd);
        let arrivals: Vec<Instant> =
            (0..2000).map(|k| imp.transit(Instant::from_nanos(k * 1_000_000), d).unwrap()).collect();
        assert!(arrivals.windows(2).any(|w| w[0] > w[1]), "with reordering allowed, some overtake");
    }

    #[test]
    fn directions_draw_from_different_streams() {
        let lost = |dir| {
            let mut imp = Impairment::new(LossModel::iid(0.3), Jitter::None, false, 7, dir);
            (0..200).map(|k| imp.transit(Instant::from_nanos(k), Duration::ZERO).is_err()).collect::<Vec<_>>()
        };
        assert_ne!(lost(LinkDir::Fwd), lost(LinkDir::Rev));
        assert_eq!(LinkDir::Fwd.stream(), 1 << 62);
        assert_eq!(LinkDir::Rev.stream(), (1 << 62) + 1);
    }
}

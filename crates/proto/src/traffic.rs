//! Traffic models: the two-state thin-client source of spec §1 (thin-client-tcp.md).
//!
//! Server→client traffic is a sequence of *flows*: an interactive flow is one small
//! write (a keystroke echo); a bulk flow is a block of writes (a screen update). The
//! kind of the next flow follows a two-state Markov chain; the start-to-start gap
//! depends on the transition. Each observed response packet is modelled as one
//! application write (Nagle off), so a bulk block is `c_B` writes ~0.36 ms apart.
//!
//! Default laws (docs/model.md explains the choices): gaps lognormal with the spec's
//! means and σ = 1 (broad, mode well below the mean, as observed); sizes uniform within
//! ±50 % of the mean, capped at the MSS; block length a discretised Pareto (shape 1.5,
//! heavy-tailed) whose scale is solved so the mean is exactly `bulk_packets_mean`.

use crate::time::{Duration, Instant};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Kind of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A keystroke echo.
    Interactive = 0,
    /// Part of a screen update.
    Bulk = 1,
}

/// One application write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    /// When the application writes.
    pub at: Instant,
    /// Bytes written.
    pub bytes: u32,
    /// Interactive or bulk.
    pub kind: Kind,
}

/// How gaps are distributed around their mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GapLaw {
    /// Lognormal with this σ of ln(gap).
    LogNormal {
        /// σ of ln(gap).
        sigma: f64,
    },
    /// Exponential.
    Exponential,
    /// Always the mean.
    Constant,
}

/// Parameters of the two-state source (spec §1 defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThinClientParams {
    /// α: P(next = bulk | current = interactive).
    pub p_interactive_to_bulk: f64,
    /// β: P(next = interactive | current = bulk).
    pub p_bulk_to_interactive: f64,
    /// Mean gaps t_II, t_IB, t_BI, t_BB (seconds).
    pub gap_ii: f64,
    /// t_IB.
    pub gap_ib: f64,
    /// t_BI.
    pub gap_bi: f64,
    /// t_BB.
    pub gap_bb: f64,
    /// Gap law.
    pub gap_law: GapLaw,
    /// Mean interactive write, bytes.
    pub interactive_bytes_mean: f64,
    /// Mean write inside a bulk block, bytes.
    pub bulk_bytes_mean: f64,
    /// Sizes are uniform in mean·(1 ± spread).
    pub size_spread: f64,
    /// Mean writes per bulk block (c_B).
    pub bulk_packets_mean: f64,
    /// Cap on writes per block.
    pub bulk_packets_max: u32,
    /// Pareto tail index of the block length.
    pub bulk_pareto_shape: f64,
    /// Mean gap between writes of a block (exponential), seconds.
    pub intra_bulk_gap: f64,
    /// No write exceeds this (the MSS).
    pub max_write: u32,
}

impl Default for ThinClientParams {
    fn default() -> Self {
        ThinClientParams {
            p_interactive_to_bulk: 0.09,
            p_bulk_to_interactive: 0.42,
            gap_ii: 0.27,
            gap_ib: 0.22,
            gap_bi: 0.24,
            gap_bb: 0.11,
            gap_law: GapLaw::LogNormal { sigma: 1.0 },
            interactive_bytes_mean: 137.2,
            bulk_bytes_mean: 936.2,
            size_spread: 0.5,
            bulk_packets_mean: 7.4,
            bulk_packets_max: 1000,
            bulk_pareto_shape: 1.5,
            intra_bulk_gap: 0.36e-3,
            max_write: 1460,
        }
    }
}

/// A seeded random generator for one stream of randomness (one source, one direction).
pub fn stream_rng(seed: u64, stream: u64) -> Xoshiro256PlusPlus {
    // SplitMix64-style mixing so neighbouring (seed, stream) pairs are unrelated.
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Xoshiro256PlusPlus::seed_from_u64(z ^ (z >> 31))
}

/// Why parameters are unusable.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamError(pub String);

/// Parameters with the block-length law solved for its mean; shared by many sources.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibrated {
    params: ThinClientParams,
    pareto_scale: f64,
}

impl Calibrated {
    /// Check the parameters and solve the Pareto scale for `bulk_packets_mean`.
    pub fn new(params: ThinClientParams) -> Result<Self, ParamError> {
        let pareto_scale = solve_pareto_scale(params.bulk_packets_mean, params.bulk_pareto_shape, params.bulk_packets_max)?;
        Ok(Calibrated { params, pareto_scale })
    }
}

/// The two-state source. Yields writes in non-decreasing time order.
pub struct ThinClientSource {
    p: ThinClientParams,
    rng: Xoshiro256PlusPlus,
    /// Pareto scale solved for the requested mean block length.
    pareto_scale: f64,
    /// Kind of the flow that started last.
    state: Kind,
    /// Start of the flow that started last.
    flow_start: Instant,
    /// Writes of the current block still to come.
    block_left: u32,
    next_at: Instant,
}

impl ThinClientSource {
    /// A source whose first flow starts at `start`.
    pub fn new(p: ThinClientParams, rng: Xoshiro256PlusPlus, start: Instant) -> Result<Self, ParamError> {
        Ok(Self::calibrated(&Calibrated::new(p)?, rng, start))
    }

    /// The same from parameters calibrated once (cheaper for many sources: solving the
    /// block-length scale costs ~10⁵ `powf` calls).
    pub fn calibrated(c: &Calibrated, rng: Xoshiro256PlusPlus, start: Instant) -> Self {
        let (p, pareto_scale) = (c.params, c.pareto_scale);
        let mut s = ThinClientSource {
            p,
            rng,
            pareto_scale,
            state: Kind::Interactive,
            flow_start: start,
            block_left: 0,
            next_at: start,
        };
        // First flow kind from the stationary distribution p_B = α/(α+β).
        let (a, b) = (p.p_interactive_to_bulk, p.p_bulk_to_interactive);
        let p_bulk = if a + b > 0.0 { a / (a + b) } else { 0.0 };
        s.state = if s.rng.gen::<f64>() < p_bulk { Kind::Bulk } else { Kind::Interactive };
        s.begin_flow(start);
        s
    }

    /// The next write.
    pub fn next_write(&mut self) -> Write {
        let at = self.next_at;
        let kind = self.state;
        let bytes = self.size(kind);
        if self.block_left > 1 {
            self.block_left -= 1;
            self.next_at = at + self.exp(self.p.intra_bulk_gap);
        } else {
            // Markov step; the next flow starts one gap after this one started, but
            // not before this block's last write (blocks do not interleave).
            let next = match (kind, self.rng.gen::<f64>()) {
                (Kind::Interactive, u) if u < self.p.p_interactive_to_bulk => Kind::Bulk,
                (Kind::Interactive, _) => Kind::Interactive,
                (Kind::Bulk, u) if u < self.p.p_bulk_to_interactive => Kind::Interactive,
                (Kind::Bulk, _) => Kind::Bulk,
            };
            let mean = match (kind, next) {
                (Kind::Interactive, Kind::Interactive) => self.p.gap_ii,
                (Kind::Interactive, Kind::Bulk) => self.p.gap_ib,
                (Kind::Bulk, Kind::Interactive) => self.p.gap_bi,
                (Kind::Bulk, Kind::Bulk) => self.p.gap_bb,
            };
            let start = (self.flow_start + self.gap(mean)).max(at);
            self.state = next;
            self.begin_flow(start);
        }
        Write { at, bytes, kind }
    }

    fn begin_flow(&mut self, start: Instant) {
        self.flow_start = start;
        self.next_at = start;
        self.block_left = match self.state {
            Kind::Interactive => 1,
            Kind::Bulk => self.block_len(),
        };
    }

    fn size(&mut self, kind: Kind) -> u32 {
        let mean = match kind {
            Kind::Interactive => self.p.interactive_bytes_mean,
            Kind::Bulk => self.p.bulk_bytes_mean,
        };
        let spread = self.p.size_spread * mean;
        let x = mean + spread * (2.0 * self.rng.gen::<f64>() - 1.0);
        (x.round() as u32).clamp(1, self.p.max_write)
    }

    fn block_len(&mut self) -> u32 {
        // Inverse-CDF Pareto: X = xm · U^(−1/a), U ∈ (0, 1].
        let u: f64 = 1.0 - self.rng.gen::<f64>();
        let x = self.pareto_scale * u.powf(-1.0 / self.p.bulk_pareto_shape);
        (x.ceil().min(self.p.bulk_packets_max as f64) as u32).max(2)
    }

    fn exp(&mut self, mean: f64) -> Duration {
        if mean <= 0.0 {
            return Duration::ZERO;
        }
        let e = Exp::new(1.0 / mean).expect("rate is positive");
        Duration::from_secs_f64(e.sample(&mut self.rng))
    }

    fn gap(&mut self, mean: f64) -> Duration {
        match self.p.gap_law {
            GapLaw::Constant => Duration::from_secs_f64(mean),
            GapLaw::Exponential => self.exp(mean),
            GapLaw::LogNormal { sigma } => {
                // E[X] = exp(μ + σ²/2) = mean.
                let mu = mean.ln() - sigma * sigma / 2.0;
                let d = LogNormal::new(mu, sigma).expect("sigma is positive");
                Duration::from_secs_f64(d.sample(&mut self.rng))
            }
        }
    }
}

/// Expected block length E[clamp(⌈X⌉, 2, max)] for X ~ Pareto(scale, shape).
pub fn expected_block_len(scale: f64, shape: f64, max: u32) -> f64 {
    // E[n] = Σ_{k≥1} P(n ≥ k) = 2 + Σ_{k=3}^{max} P(X > k − 1).
    let tail = |x: f64| if x < scale { 1.0 } else { (scale / x).powf(shape) };
    2.0 + (3..=max).map(|k| tail((k - 1) as f64)).sum::<f64>()
}

/// Solve the Pareto scale for a mean block length (bisection; E is increasing).
fn solve_pareto_scale(mean: f64, shape: f64, max: u32) -> Result<f64, ParamError> {
    if !(2.0..max as f64).contains(&mean) {
        return Err(ParamError(format!("bulk_packets_mean must be in [2, bulk_packets_max): got {mean}")));
    }
    let (mut lo, mut hi) = (1e-9, max as f64);
    // 100 halvings take the bracket below f64 resolution.
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if expected_block_len(mid, shape, max) < mean {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(0.5 * (lo + hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: ThinClientParams, seed: u64, n: usize) -> Vec<Write> {
        let mut s = ThinClientSource::new(p, stream_rng(seed, 0), Instant::ZERO).unwrap();
        (0..n).map(|_| s.next_write()).collect()
    }

    #[test]
    fn solved_scale_gives_the_mean() {
        let scale = solve_pareto_scale(7.4, 1.5, 1000).unwrap();
        assert!((expected_block_len(scale, 1.5, 1000) - 7.4).abs() < 1e-9);
        assert!(solve_pareto_scale(1.0, 1.5, 1000).is_err());
    }

    #[test]
    fn writes_are_ordered_and_deterministic() {
        let a = run(ThinClientParams::default(), 7, 5000);
        let b = run(ThinClientParams::default(), 7, 5000);
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        assert_ne!(a, run(ThinClientParams::default(), 8, 5000));
    }

    #[test]
    fn long_run_matches_the_spec_means() {
        let p = ThinClientParams::default();
        let mut s = ThinClientSource::new(p, stream_rng(3, 1), Instant::ZERO).unwrap();
        let (mut inter, mut inter_bytes, mut bulk_writes, mut bulk_bytes, mut bulk_flows) = (0u64, 0u64, 0u64, 0u64, 0u64);
        let horizon = Instant::from_secs_f64(300.0 * 200.0);
        let mut last = Instant::ZERO;
        while last < horizon {
            let last_of_block = s.block_left == 1;
            let w = s.next_write();
            last = w.at;
            match w.kind {
                Kind::Interactive => {
                    inter += 1;
                    inter_bytes += w.bytes as u64;
                }
                Kind::Bulk => {
                    bulk_writes += 1;
                    bulk_bytes += w.bytes as u64;
                    bulk_flows += last_of_block as u64;
                }
            }
        }
        let flows = (inter + bulk_flows) as f64;
        let p_i = inter as f64 / flows;
        assert!((p_i - 0.42 / 0.51).abs() < 0.01, "p_I = {p_i}");
        let c_b = bulk_writes as f64 / bulk_flows as f64;
        assert!((c_b - 7.4).abs() < 0.4, "c_B = {c_b}");
        assert!(((inter_bytes as f64 / inter as f64) - 137.2).abs() < 1.0);
        assert!(((bulk_bytes as f64 / bulk_writes as f64) - 936.2).abs() < 5.0);
        // Mean start-to-start gap implied by the chain and the t_XY means.
        let (a, b) = (0.09, 0.42);
        let (pi, pb) = (b / (a + b), a / (a + b));
        let mean_gap = pi * ((1.0 - a) * 0.27 + a * 0.22) + pb * (b * 0.24 + (1.0 - b) * 0.11);
        let measured = horizon.as_secs_f64() / flows;
        assert!((measured / mean_gap - 1.0).abs() < 0.02, "gap {measured} vs {mean_gap}");
    }
}

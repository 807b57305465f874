//! Traffic models: the two-state thin-client source of Ogawa §1 (docs/sources.md),
//! and the game source of Carlmar's test grid ([`GameSource`]).
//!
//! Server→client traffic is a sequence of *flows*: an interactive flow is one small
//! write (a keystroke echo); a bulk flow is a block of writes (a screen update). The
//! kind of the next flow follows a two-state Markov chain; the start-to-start gap
//! depends on the transition. Each observed response packet is modelled as one
//! application write (Nagle off), so a bulk block is `c_B` writes ~0.36 ms apart.
//!
//! Default laws (docs/model.md explains the choices): gaps lognormal with the source's
//! means and σ = 1 (broad, mode well below the mean, as observed); sizes uniform within
//! ±50 % of the mean, capped at the MSS; block length a discretised Pareto (shape 1.5,
//! heavy-tailed) whose scale is solved so the mean is exactly `bulk_packets_mean`.

use std::sync::Arc;

mod apps;
pub use apps::{
    App, AppKeys, DataParams, DataSource, MixSource, MixSpec, VideoParams, VideoSource, MIX_PHASE_STREAM,
};

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
    /// The application (model) that wrote it: the truth per-type metrics and the QDS
    /// `oracle` classifier read.
    pub app: App,
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

/// Parameters of the two-state source (Ogawa §1 defaults).
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

/// The two-state source's keys of a scenario's `[traffic]` section, as docs/scenario.md
/// names them. The simulator and the lab's traffic pump both read them (embedded with
/// `#[serde(flatten)]` next to their own keys) and turn them into [`ThinClientParams`] here.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ThinClientKeys {
    /// α.
    pub p_interactive_to_bulk: f64,
    /// β.
    pub p_bulk_to_interactive: f64,
    /// t_II, seconds.
    pub gap_ii_s: f64,
    /// t_IB.
    pub gap_ib_s: f64,
    /// t_BI.
    pub gap_bi_s: f64,
    /// t_BB.
    pub gap_bb_s: f64,
    /// Gap law.
    pub gap_distribution: GapDistribution,
    /// σ of ln(gap).
    pub gap_lognormal_sigma: f64,
    /// Mean interactive write, bytes.
    pub interactive_bytes_mean: f64,
    /// Mean bulk write, bytes.
    pub bulk_bytes_mean: f64,
    /// Size spread.
    pub size_spread: f64,
    /// c_B.
    pub bulk_packets_mean: f64,
    /// Cap on block length.
    pub bulk_packets_max: u32,
    /// Pareto shape of block length.
    pub bulk_pareto_shape: f64,
    /// Mean gap inside a block, ms.
    pub intra_bulk_gap_ms: f64,
}

impl Default for ThinClientKeys {
    fn default() -> Self {
        let p = ThinClientParams::default();
        ThinClientKeys {
            p_interactive_to_bulk: p.p_interactive_to_bulk,
            p_bulk_to_interactive: p.p_bulk_to_interactive,
            gap_ii_s: p.gap_ii,
            gap_ib_s: p.gap_ib,
            gap_bi_s: p.gap_bi,
            gap_bb_s: p.gap_bb,
            gap_distribution: GapDistribution::Lognormal,
            gap_lognormal_sigma: 1.0,
            interactive_bytes_mean: p.interactive_bytes_mean,
            bulk_bytes_mean: p.bulk_bytes_mean,
            size_spread: p.size_spread,
            bulk_packets_mean: p.bulk_packets_mean,
            bulk_packets_max: p.bulk_packets_max,
            bulk_pareto_shape: p.bulk_pareto_shape,
            intra_bulk_gap_ms: p.intra_bulk_gap * 1e3,
        }
    }
}

impl ThinClientKeys {
    /// The source's parameters; no write exceeds `mss`.
    pub fn params(&self, mss: u32) -> Result<ThinClientParams, ParamError> {
        let gap_law = match self.gap_distribution {
            GapDistribution::Lognormal => GapLaw::LogNormal { sigma: self.gap_lognormal_sigma },
            GapDistribution::Exponential => GapLaw::Exponential,
            GapDistribution::Constant => GapLaw::Constant,
        };
        Ok(ThinClientParams {
            p_interactive_to_bulk: self.p_interactive_to_bulk,
            p_bulk_to_interactive: self.p_bulk_to_interactive,
            gap_ii: self.gap_ii_s,
            gap_ib: self.gap_ib_s,
            gap_bi: self.gap_bi_s,
            gap_bb: self.gap_bb_s,
            gap_law,
            interactive_bytes_mean: self.interactive_bytes_mean,
            bulk_bytes_mean: self.bulk_bytes_mean,
            size_spread: self.size_spread,
            bulk_packets_mean: self.bulk_packets_mean,
            bulk_packets_max: self.bulk_packets_max,
            bulk_pareto_shape: self.bulk_pareto_shape,
            intra_bulk_gap: self.intra_bulk_gap_ms * 1e-3,
            max_write: mss,
        })
    }
}

/// `traffic.gap_distribution`: the names of [`GapLaw`] in a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GapDistribution {
    /// [`GapLaw::LogNormal`] with `gap_lognormal_sigma`.
    Lognormal,
    /// [`GapLaw::Exponential`].
    Exponential,
    /// [`GapLaw::Constant`].
    Constant,
}

/// `traffic.model`: which [`Source`] every stream runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// [`ThinClientSource`].
    ThinClient,
    /// Greedy: [`Source::Bulk`].
    Bulk,
    /// [`GameSource`].
    Game,
    /// Writes from a capture: [`Source::Trace`].
    Pcap,
    /// Fixed size at a fixed interval (the lab pump only): [`Source::Constant`].
    Constant,
    /// Frame-paced video: [`VideoSource`].
    Video,
    /// Web/document bursts: [`DataSource`].
    Data,
    /// Per pair one of the models of `traffic.mix`: [`MixSource`].
    Mix,
}

/// What every stream's [`Source`] is built from, checked and calibrated once for all
/// streams of a run (the simulator holds 10⁴ of them).
#[derive(Clone, Debug)]
pub enum TrafficSpec {
    /// The two-state source.
    ThinClient(Arc<Calibrated>),
    /// The game source.
    Game(Arc<GameCalibrated>),
    /// Per stream, its writes (seconds from the run start, bytes) read from a capture;
    /// all interactive, in the capture's own timing (no stagger).
    Trace(Vec<Vec<(f64, u32)>>),
    /// `bytes` every `interval`, interactive.
    Constant {
        /// Period.
        interval: Duration,
        /// Size.
        bytes: u32,
    },
    /// Greedy: writes of `bytes`, all due at the start, `writes` of them (`None`: no end).
    Bulk {
        /// Size of each write.
        bytes: u32,
        /// How many.
        writes: Option<u32>,
    },
    /// Frame-paced video.
    Video(Arc<VideoParams>),
    /// Web/document bursts.
    Data(Arc<DataParams>),
    /// A mix of models per pair, maybe changing over time.
    Mix(Arc<MixSpec>),
}

/// The writes of one stream, relative to the run start: the one dispatch the simulator
/// and the lab pump share, so that the same seed gives the same writes in both.
pub enum Source {
    /// The two-state thin-client model.
    ThinClient(ThinClientSource),
    /// The game model (every write interactive).
    Game(GameSource),
    /// Writes from a capture, in time order.
    Trace(std::vec::IntoIter<Write>),
    /// `bytes` every `interval`, from `next`.
    Constant {
        /// Next write.
        next: Instant,
        /// Period.
        interval: Duration,
        /// Size.
        bytes: u32,
    },
    /// Greedy: every write due at `at` (so written as fast as TCP takes them).
    Bulk {
        /// The start.
        at: Instant,
        /// Size of each write.
        bytes: u32,
        /// Writes left (`None`: no end).
        left: Option<u32>,
    },
    /// Frame-paced video.
    Video(VideoSource),
    /// Web/document bursts.
    Data(DataSource),
    /// One pair of a mix (boxed: it holds the [`Source`] of its current phase).
    Mix(Box<MixSource>),
}

impl Source {
    /// Stream `stream`'s source, starting at `start` (a trace keeps its own timing). The
    /// random models draw from `stream_rng(seed, 2·stream)` (docs/model.md, "Random
    /// streams").
    pub fn new(spec: &TrafficSpec, seed: u64, stream: u32, start: Instant) -> Result<Source, ParamError> {
        match spec {
            TrafficSpec::Mix(m) => Ok(Source::Mix(Box::new(MixSource::new(m, seed, stream, start)?))),
            _ => Source::with_rng(spec, stream_rng(seed, 2 * stream as u64), stream, start),
        }
    }

    /// The same with the random generator given (a mix's later phases draw from their
    /// own streams); not for [`TrafficSpec::Mix`] itself.
    fn with_rng(
        spec: &TrafficSpec,
        rng: Xoshiro256PlusPlus,
        stream: u32,
        start: Instant,
    ) -> Result<Source, ParamError> {
        let mut rng = Some(rng);
        let mut rng = || rng.take().expect("one random source per stream");
        Ok(match spec {
            TrafficSpec::ThinClient(c) => Source::ThinClient(ThinClientSource::calibrated(c, rng(), start)),
            TrafficSpec::Game(c) => Source::Game(GameSource::new(c, rng(), start)),
            TrafficSpec::Trace(streams) => {
                let writes = streams
                    .get(stream as usize)
                    .ok_or_else(|| ParamError(format!("traffic.trace: no writes for stream {stream}")))?;
                let writes: Vec<Write> = writes
                    .iter()
                    .map(|&(t, bytes)| Write {
                        at: Instant::from_secs_f64(t),
                        bytes,
                        kind: Kind::Interactive,
                        app: App::Trace,
                    })
                    .collect();
                Source::Trace(writes.into_iter())
            }
            &TrafficSpec::Constant { interval, bytes } => Source::Constant { next: start, interval, bytes },
            &TrafficSpec::Bulk { bytes, writes } => Source::Bulk { at: start, bytes, left: writes },
            TrafficSpec::Video(p) => Source::Video(VideoSource::new(p, rng(), start)),
            TrafficSpec::Data(p) => Source::Data(DataSource::new(p, rng(), start)),
            TrafficSpec::Mix(_) => return Err(ParamError("traffic.mix: a mix cannot contain a mix".into())),
        })
    }

    /// The next write, `None` once the source has no more.
    pub fn next_write(&mut self) -> Option<Write> {
        match self {
            Source::ThinClient(s) => Some(s.next_write()),
            Source::Game(s) => Some(s.next_write()),
            Source::Video(s) => Some(s.next_write()),
            Source::Data(s) => Some(s.next_write()),
            Source::Mix(s) => s.next_write(),
            Source::Trace(writes) => writes.next(),
            Source::Constant { next, interval, bytes } => {
                let w = Write { at: *next, bytes: *bytes, kind: Kind::Interactive, app: App::Constant };
                *next += *interval;
                Some(w)
            }
            Source::Bulk { at, bytes, left } => {
                if let Some(n) = left {
                    *n = n.checked_sub(1)?;
                }
                Some(Write { at: *at, bytes: *bytes, kind: Kind::Bulk, app: App::Bulk })
            }
        }
    }

    /// Whether the write [`Source::next_write`] returns next starts a flow of the
    /// two-state model (an interactive write, or the first write of a bulk block): the
    /// truth a capture's gap rule is checked against. Every other model has no flows
    /// beyond its writes: each write starts one.
    pub fn next_starts_flow(&self) -> bool {
        match self {
            Source::ThinClient(s) => s.next_starts_flow(),
            _ => true,
        }
    }

    /// A greedy source: its writes are always due.
    pub fn is_greedy(&self) -> bool {
        matches!(self, Source::Bulk { .. })
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
        let pareto_scale =
            solve_pareto_scale(params.bulk_packets_mean, params.bulk_pareto_shape, params.bulk_packets_max)?;
        Ok(Calibrated { params, pareto_scale })
    }
}

/// The two-state source. Yields writes in non-decreasing time order.
///
/// The parameters are shared, not copied: a simulator holds 10⁴ sources, and 100 bytes
/// of copies each would double what a write reads from memory.
pub struct ThinClientSource {
    c: Arc<Calibrated>,
    rng: Xoshiro256PlusPlus,
    /// Kind of the flow that started last.
    state: Kind,
    /// Start of the flow that started last.
    flow_start: Instant,
    /// Writes of the current block still to come.
    block_left: u32,
    next_at: Instant,
    /// The next write starts a flow (read by the simulator's per-packet truth).
    fresh: bool,
}

impl ThinClientSource {
    /// A source whose first flow starts at `start`.
    pub fn new(p: ThinClientParams, rng: Xoshiro256PlusPlus, start: Instant) -> Result<Self, ParamError> {
        Ok(Self::calibrated(&Arc::new(Calibrated::new(p)?), rng, start))
    }

    /// The same from parameters calibrated once (cheaper for many sources: solving the
    /// block-length scale costs ~10⁵ `powf` calls).
    pub fn calibrated(c: &Arc<Calibrated>, rng: Xoshiro256PlusPlus, start: Instant) -> Self {
        let mut s = ThinClientSource {
            c: Arc::clone(c),
            rng,
            state: Kind::Interactive,
            flow_start: start,
            block_left: 0,
            next_at: start,
            fresh: true,
        };
        // First flow kind from the stationary distribution p_B = α/(α+β).
        let (a, b) = (c.params.p_interactive_to_bulk, c.params.p_bulk_to_interactive);
        let p_bulk = if a + b > 0.0 { a / (a + b) } else { 0.0 };
        s.state = if s.rng.gen::<f64>() < p_bulk { Kind::Bulk } else { Kind::Interactive };
        s.begin_flow(start);
        s
    }

    /// Whether the write [`Self::next_write`] returns next starts a flow (it is an
    /// interactive write or the first of a block).
    pub fn next_starts_flow(&self) -> bool {
        self.fresh
    }

    /// The next write.
    pub fn next_write(&mut self) -> Write {
        self.fresh = false;
        let at = self.next_at;
        let kind = self.state;
        let bytes = self.size(kind);
        if self.block_left > 1 {
            self.block_left -= 1;
            self.next_at = at + self.exp(self.c.params.intra_bulk_gap);
        } else {
            // Markov step; the next flow starts one gap after this one started, but
            // not before this block's last write (blocks do not interleave).
            let next = match (kind, self.rng.gen::<f64>()) {
                (Kind::Interactive, u) if u < self.c.params.p_interactive_to_bulk => Kind::Bulk,
                (Kind::Interactive, _) => Kind::Interactive,
                (Kind::Bulk, u) if u < self.c.params.p_bulk_to_interactive => Kind::Interactive,
                (Kind::Bulk, _) => Kind::Bulk,
            };
            let mean = match (kind, next) {
                (Kind::Interactive, Kind::Interactive) => self.c.params.gap_ii,
                (Kind::Interactive, Kind::Bulk) => self.c.params.gap_ib,
                (Kind::Bulk, Kind::Interactive) => self.c.params.gap_bi,
                (Kind::Bulk, Kind::Bulk) => self.c.params.gap_bb,
            };
            let start = (self.flow_start + self.gap(mean)).max(at);
            self.state = next;
            self.begin_flow(start);
        }
        Write { at, bytes, kind, app: App::ThinClient }
    }

    fn begin_flow(&mut self, start: Instant) {
        self.fresh = true;
        self.flow_start = start;
        self.next_at = start;
        self.block_left = match self.state {
            Kind::Interactive => 1,
            Kind::Bulk => self.block_len(),
        };
    }

    fn size(&mut self, kind: Kind) -> u32 {
        let mean = match kind {
            Kind::Interactive => self.c.params.interactive_bytes_mean,
            Kind::Bulk => self.c.params.bulk_bytes_mean,
        };
        let spread = self.c.params.size_spread * mean;
        let x = mean + spread * (2.0 * self.rng.gen::<f64>() - 1.0);
        (x.round() as u32).clamp(1, self.c.params.max_write)
    }

    fn block_len(&mut self) -> u32 {
        // Inverse-CDF Pareto: X = xm · U^(−1/a), U ∈ (0, 1].
        let u: f64 = 1.0 - self.rng.gen::<f64>();
        let x = self.c.pareto_scale * u.powf(-1.0 / self.c.params.bulk_pareto_shape);
        (x.ceil().min(self.c.params.bulk_packets_max as f64) as u32).max(2)
    }

    fn exp(&mut self, mean: f64) -> Duration {
        if mean <= 0.0 {
            return Duration::ZERO;
        }
        let e = Exp::new(1.0 / mean).expect("rate is positive");
        Duration::from_secs_f64(e.sample(&mut self.rng))
    }

    fn gap(&mut self, mean: f64) -> Duration {
        match self.c.params.gap_law {
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

/// Parameters of the game source: one MMO server→client stream (the
/// Carlmar 2011 statistics in docs/model.md, Anarchy Online trace: payload avg 98 B, min 8, max 1333;
/// inter-arrival avg 632 ms, median 449 ms, 1st percentile 83 ms, 99th 4195 ms).
///
/// Laws (docs/model.md, "Game traffic"): the inter-arrival time is lognormal with the
/// trace's median, clamped to `[gap_min, gap_max]`, its σ solved so the clamped mean is
/// the trace's mean (σ ≈ 0.83); with `gap_min` = the trace's 1st percentile, 2 % of the
/// gaps sit at the clamp, so the model's 1st percentile is 83 ms too. A lognormal cannot
/// match median, mean *and* 99th percentile: its 99th percentile is ≈ 3.1 s, not 4.2 s.
/// The payload is `payload_min` plus a lognormal (σ = `payload_sigma`) rounded to bytes
/// and clamped to `payload_max`, its μ solved so the mean is `payload_mean`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GameParams {
    /// Mean payload, bytes.
    pub payload_mean: f64,
    /// Smallest payload, bytes.
    pub payload_min: u32,
    /// Largest payload, bytes.
    pub payload_max: u32,
    /// σ of ln(payload − min).
    pub payload_sigma: f64,
    /// Median inter-arrival time, seconds.
    pub gap_median: f64,
    /// Mean inter-arrival time, seconds.
    pub gap_mean: f64,
    /// Shortest inter-arrival time (clamp), seconds.
    pub gap_min: f64,
    /// Longest inter-arrival time (clamp), seconds. **[ours]**: the trace gives none.
    pub gap_max: f64,
}

impl Default for GameParams {
    fn default() -> Self {
        GameParams {
            payload_mean: 98.0,
            payload_min: 8,
            payload_max: 1333,
            payload_sigma: 1.0,
            gap_median: 0.449,
            gap_mean: 0.632,
            gap_min: 0.083,
            gap_max: 10.0,
        }
    }
}

/// Game parameters with the lognormal laws solved for their means; shared by many sources.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GameCalibrated {
    params: GameParams,
    /// μ, σ of ln(gap).
    gap_mu: f64,
    gap_sigma: f64,
    /// μ of ln(payload − min).
    payload_mu: f64,
}

impl GameCalibrated {
    /// Check the parameters and solve σ of the gap law and μ of the payload law.
    pub fn new(p: GameParams) -> Result<Self, ParamError> {
        if !(0.0 < p.gap_min
            && p.gap_min < p.gap_median
            && p.gap_median < p.gap_mean
            && p.gap_mean < p.gap_max)
        {
            return Err(ParamError("game: need 0 < gap_min < gap_median < gap_mean < gap_max".into()));
        }
        let (lo, hi) = (p.payload_min as f64, p.payload_max as f64);
        if !(lo < p.payload_mean && p.payload_mean < hi) || p.payload_sigma <= 0.0 {
            return Err(ParamError(
                "game: need payload_min < payload_mean < payload_max, payload_sigma > 0".into(),
            ));
        }
        let gap_mu = p.gap_median.ln();
        // The clamped mean grows with σ (for a fixed median): bisection.
        let gap_sigma =
            bisect(1e-3, 5.0, |s| clamped_lognormal_mean(gap_mu, s, p.gap_min, p.gap_max) - p.gap_mean)
                .ok_or_else(|| ParamError("game: no σ gives the gap mean".into()))?;
        let payload_mu = bisect(-10.0, hi.ln(), |m| {
            lo + clamped_lognormal_mean(m, p.payload_sigma, 0.0, hi - lo) - p.payload_mean
        })
        .ok_or_else(|| ParamError("game: no μ gives the payload mean".into()))?;
        Ok(GameCalibrated { params: p, gap_mu, gap_sigma, payload_mu })
    }

    /// σ of ln(gap) solved for the mean.
    pub fn gap_sigma(&self) -> f64 {
        self.gap_sigma
    }
}

/// The game source: independent lognormal inter-arrival times and payload sizes, every
/// write interactive. Yields writes in increasing time order; the first at `start`.
pub struct GameSource {
    /// Shared, like [`ThinClientSource`]'s parameters.
    c: Arc<GameCalibrated>,
    rng: Xoshiro256PlusPlus,
    next_at: Instant,
}

impl GameSource {
    /// A source whose first write is at `start`.
    pub fn new(c: &Arc<GameCalibrated>, rng: Xoshiro256PlusPlus, start: Instant) -> Self {
        GameSource { c: Arc::clone(c), rng, next_at: start }
    }

    /// The next write.
    pub fn next_write(&mut self) -> Write {
        let p = self.c.params;
        let at = self.next_at;
        let z = self.normal();
        let gap = (self.c.gap_mu + self.c.gap_sigma * z).exp().clamp(p.gap_min, p.gap_max);
        self.next_at = at + Duration::from_secs_f64(gap);
        let z = self.normal();
        let extra = (self.c.payload_mu + p.payload_sigma * z).exp().round();
        let bytes = (p.payload_min as f64 + extra).min(p.payload_max as f64) as u32;
        Write { at, bytes, kind: Kind::Interactive, app: App::Game }
    }

    fn normal(&mut self) -> f64 {
        rand_distr::StandardNormal.sample(&mut self.rng)
    }
}

/// E[clamp(X, lo, hi)] for ln X ~ N(μ, σ²), by Simpson's rule over the standard normal.
fn clamped_lognormal_mean(mu: f64, sigma: f64, lo: f64, hi: f64) -> f64 {
    const N: usize = 4000; // even; ±10 σ, step 0.005: error far below 1e-9 relative
    let (a, b) = (-10.0, 10.0);
    let h = (b - a) / N as f64;
    let f = |z: f64| (mu + sigma * z).exp().clamp(lo, hi) * (-0.5 * z * z).exp();
    let mut sum = f(a) + f(b);
    for i in 1..N {
        sum += f(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    sum * h / 3.0 / (2.0 * std::f64::consts::PI).sqrt()
}

/// A root of increasing `f` in `[lo, hi]`, or `None` if it has no sign change there.
fn bisect(mut lo: f64, mut hi: f64, f: impl Fn(f64) -> f64) -> Option<f64> {
    if f(lo) > 0.0 || f(hi) < 0.0 {
        return None;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if f(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(0.5 * (lo + hi))
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

    #[test]
    fn bulk_source_writes_its_count_at_the_start_and_a_trace_ends() {
        let spec = TrafficSpec::Bulk { bytes: 10, writes: Some(3) };
        let start = Instant::from_nanos(5);
        let mut s = Source::new(&spec, 1, 0, start).unwrap();
        let ws: Vec<_> = std::iter::from_fn(|| s.next_write()).collect();
        assert_eq!(ws, vec![Write { at: start, bytes: 10, kind: Kind::Bulk, app: App::Bulk }; 3]);
        let spec = TrafficSpec::Trace(vec![vec![(0.5, 7)]]);
        let mut s = Source::new(&spec, 1, 0, start).unwrap();
        assert_eq!(s.next_write().map(|w| (w.at, w.bytes)), Some((Instant::from_secs_f64(0.5), 7)));
        assert_eq!(s.next_write(), None);
        assert!(Source::new(&spec, 1, 1, start).is_err(), "no writes for stream 1");
    }

    #[test]
    fn model_names_are_the_scenario_strings() {
        let names: Vec<Model> =
            serde_json::from_str(r#"["thin-client", "bulk", "game", "pcap", "constant"]"#).unwrap();
        assert_eq!(names, [Model::ThinClient, Model::Bulk, Model::Game, Model::Pcap, Model::Constant]);
        assert!(serde_json::from_str::<Model>(r#""thin_client""#).is_err());
        let g: Vec<GapDistribution> =
            serde_json::from_str(r#"["lognormal", "exponential", "constant"]"#).unwrap();
        assert_eq!(g, [GapDistribution::Lognormal, GapDistribution::Exponential, GapDistribution::Constant]);
    }

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

    /// `next_starts_flow` marks every interactive write and the first write of each
    /// block: the flows it counts are those the source's block lengths make.
    #[test]
    fn flow_starts_are_the_sources_flows() {
        let mut s =
            ThinClientSource::new(ThinClientParams::default(), stream_rng(5, 1), Instant::ZERO).unwrap();
        let (mut starts, mut ends, mut prev_kind) = (0u32, 0u32, None);
        for _ in 0..20_000 {
            let starts_flow = s.next_starts_flow();
            let last_of_flow = s.block_left == 1;
            let w = s.next_write();
            if w.kind == Kind::Interactive || prev_kind != Some(Kind::Bulk) {
                assert!(starts_flow, "an interactive write, or bulk after interactive, starts a flow");
            }
            starts += starts_flow as u32;
            ends += last_of_flow as u32;
            prev_kind = Some(w.kind);
            // The write after the last of a flow starts one; no other does.
            assert_eq!(s.next_starts_flow(), last_of_flow);
        }
        assert!(starts > 1000 && starts.abs_diff(ends) <= 1, "{starts} starts, {ends} ends");
    }

    #[test]
    fn long_run_matches_the_spec_means() {
        let p = ThinClientParams::default();
        let mut s = ThinClientSource::new(p, stream_rng(3, 1), Instant::ZERO).unwrap();
        let (mut inter, mut inter_bytes, mut bulk_writes, mut bulk_bytes, mut bulk_flows) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
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

    #[test]
    fn game_source_matches_the_trace_statistics() {
        let c = Arc::new(GameCalibrated::new(GameParams::default()).unwrap());
        assert!((c.gap_sigma() - 0.8265).abs() < 1e-3, "σ = {}", c.gap_sigma());
        let mut s = GameSource::new(&c, stream_rng(5, 0), Instant::ZERO);
        let n = 400_000;
        let w: Vec<Write> = (0..n).map(|_| s.next_write()).collect();
        assert!(w.iter().all(|w| w.kind == Kind::Interactive));
        let bytes: Vec<f64> = w.iter().map(|w| w.bytes as f64).collect();
        let mean_bytes = bytes.iter().sum::<f64>() / n as f64;
        assert!((mean_bytes - 98.0).abs() < 1.0, "payload mean {mean_bytes}");
        assert!(w.iter().all(|w| (8..=1333).contains(&w.bytes)));
        assert!(w.iter().any(|w| w.bytes > 1000), "the tail reaches large payloads");
        let mut gaps: Vec<f64> = w.windows(2).map(|p| (p[1].at - p[0].at).as_secs_f64()).collect();
        assert!(gaps.iter().all(|&g| g > 0.0));
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        gaps.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let q = |p: f64| gaps[((gaps.len() - 1) as f64 * p) as usize];
        assert!((mean / 0.632 - 1.0).abs() < 0.01, "gap mean {mean}");
        assert!((q(0.5) / 0.449 - 1.0).abs() < 0.01, "gap median {}", q(0.5));
        assert!((q(0.01) - 0.083).abs() < 1e-6, "gap p1 {} (the clamp)", q(0.01));
        // A lognormal fitted to median and mean has p99 ≈ 3.07 s (the trace: 4.2 s).
        assert!((q(0.99) / 3.07 - 1.0).abs() < 0.03, "gap p99 {}", q(0.99));
        assert!((1.0 / mean - 1.58).abs() < 0.03, "≈ 1.6 packets/s");
    }

    #[test]
    fn game_source_is_deterministic_and_rejects_bad_parameters() {
        let c = Arc::new(GameCalibrated::new(GameParams::default()).unwrap());
        let run = |seed| {
            let mut s = GameSource::new(&c, stream_rng(seed, 2), Instant::from_nanos(7_000_000));
            (0..100).map(|_| s.next_write()).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        assert_eq!(run(1)[0].at, Instant::from_nanos(7_000_000));
        let bad = GameParams { gap_median: 0.7, ..GameParams::default() };
        assert!(GameCalibrated::new(bad).is_err());
        let bad = GameParams { payload_mean: 2.0, ..GameParams::default() };
        assert!(GameCalibrated::new(bad).is_err());
    }
}

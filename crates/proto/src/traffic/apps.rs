//! The application models of the QDS evaluation (docs/model.md, "Video, data and mixes";
//! the spec's "Evaluation set-up"): frame-paced video, web/document data bursts, and the
//! per-pair mix of models `[V:D]` whose types may change inside persistent flows.
//!
//! - **Video** (`traffic.model = "video"`): one write per frame, every `1 / video_fps`
//!   exactly; the frame is `video_rate_mbps / 8 / video_fps` bytes on average, uniform
//!   within ± `video_frame_spread` of that (so the mean rate is exact); the first frame
//!   at a uniform random phase within one frame interval of the stream's start, so that
//!   flows do not send their frames in lockstep. No I/P-frame structure.
//! - **Data** (`traffic.model = "data"`): objects (a web page, a document) written in one
//!   write each, so TCP sends each as a burst (on) followed by silence (off). Object
//!   sizes are lognormal with mean `data_object_kb` kB (10³ bytes) and σ of ln(size)
//!   `data_object_sigma`; objects arrive as a Poisson process (start-to-start gaps
//!   exponential) with mean gap `8 · data_object_kb · 10³ / (data_rate_mbps · 10⁶)` s, so
//!   the long-run mean rate is `data_rate_mbps` whatever the network does. The first
//!   object comes one such gap after the stream's start.
//! - **Mix** (`traffic.model = "mix"`): `traffic.mix = [["video", V], ["data", D], …]`
//!   lists the models of the pairs in order (pair 0..V−1 video, then D data, …);
//!   thin-client and game may be listed too. With `traffic.mix_change_s = T > 0` the
//!   flows are persistent and their type changes every T seconds: in phase k (from
//!   k·T) pair i runs the model of position `(i + k·s) mod N` of the expanded list
//!   (N = its length, s = `traffic.mix_shift`, 0 = the count of the first entry), so
//!   the mix as a whole keeps its counts while every flow changes type.

use std::sync::Arc;

use super::{stream_rng, Calibrated, GameCalibrated, Kind, Model, ParamError, Source, ThinClientKeys, Write};
use crate::time::{Duration, Instant};
use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The application a write belongs to: the label per-type metrics and the QDS `oracle`
/// classifier read. Its code (`as u8`) is the `app` column of the `packet_rtt` table
/// (docs/records.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum App {
    /// The two-state thin-client source.
    #[default]
    ThinClient = 0,
    /// The game source.
    Game = 1,
    /// Frame-paced video.
    Video = 2,
    /// Web/document bursts.
    Data = 3,
    /// A greedy source.
    Bulk = 4,
    /// Writes from a capture.
    Trace = 5,
    /// The lab pump's constant source.
    Constant = 6,
}

impl App {
    /// Every label, in code order.
    pub const ALL: [App; 7] =
        [App::ThinClient, App::Game, App::Video, App::Data, App::Bulk, App::Trace, App::Constant];

    /// The name in records and summaries (`summary.by_type.<name>`): the model's name.
    pub fn name(self) -> &'static str {
        match self {
            App::ThinClient => "thin-client",
            App::Game => "game",
            App::Video => "video",
            App::Data => "data",
            App::Bulk => "bulk",
            App::Trace => "pcap",
            App::Constant => "constant",
        }
    }
}

/// The `[traffic]` keys of the video, data and mix models (docs/scenario.md), embedded
/// with `#[serde(flatten)]` next to [`ThinClientKeys`] by the simulator and the pump.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AppKeys {
    /// Mean video rate, Mbit/s.
    pub video_rate_mbps: f64,
    /// Frames per second.
    pub video_fps: f64,
    /// Frame sizes are uniform in mean·(1 ± spread).
    pub video_frame_spread: f64,
    /// Mean data rate, Mbit/s.
    pub data_rate_mbps: f64,
    /// Mean object size, kB (10³ bytes).
    pub data_object_kb: f64,
    /// σ of ln(object size).
    pub data_object_sigma: f64,
    /// Model "mix": (model, pairs) in pair order.
    pub mix: Vec<(Model, u32)>,
    /// Seconds between type changes inside the flows (0 = never).
    pub mix_change_s: f64,
    /// Positions the assignment moves per change (0 = the first entry's count).
    pub mix_shift: u32,
}

impl Default for AppKeys {
    fn default() -> Self {
        AppKeys {
            video_rate_mbps: 5.0,
            video_fps: 25.0,
            video_frame_spread: 0.2,
            data_rate_mbps: 1.0,
            data_object_kb: 50.0,
            data_object_sigma: 1.0,
            mix: Vec::new(),
            mix_change_s: 0.0,
            mix_shift: 0,
        }
    }
}

impl AppKeys {
    /// The spec of `model` for the models whose writes are generated (thin-client, game,
    /// video, data, mix); `mss` caps thin-client writes. Pcap, bulk and constant are the
    /// caller's (they need the capture, the horizon or the pump's own keys).
    pub fn spec(
        &self,
        model: Model,
        thin: &ThinClientKeys,
        mss: u32,
    ) -> Result<super::TrafficSpec, ParamError> {
        use super::TrafficSpec as S;
        Ok(match model {
            Model::ThinClient => S::ThinClient(Arc::new(Calibrated::new(thin.params(mss)?)?)),
            Model::Game => S::Game(Arc::new(GameCalibrated::new(super::GameParams::default())?)),
            Model::Video => S::Video(Arc::new(self.video()?)),
            Model::Data => S::Data(Arc::new(self.data()?)),
            Model::Mix => S::Mix(Arc::new(self.mix_spec(thin, mss)?)),
            Model::Pcap | Model::Bulk | Model::Constant => {
                return Err(ParamError(format!("traffic.model: {model:?} has no generated writes here")))
            }
        })
    }

    fn video(&self) -> Result<VideoParams, ParamError> {
        if !(self.video_rate_mbps > 0.0 && self.video_fps > 0.0) {
            return Err(ParamError("traffic.video_rate_mbps and video_fps must be > 0".into()));
        }
        if !(0.0..=1.0).contains(&self.video_frame_spread) {
            return Err(ParamError("traffic.video_frame_spread must be in [0, 1]".into()));
        }
        Ok(VideoParams {
            interval: Duration::from_secs_f64(1.0 / self.video_fps),
            frame_bytes_mean: self.video_rate_mbps * 1e6 / 8.0 / self.video_fps,
            spread: self.video_frame_spread,
        })
    }

    fn data(&self) -> Result<DataParams, ParamError> {
        if !(self.data_rate_mbps > 0.0 && self.data_object_kb > 0.0 && self.data_object_sigma > 0.0) {
            return Err(ParamError(
                "traffic.data_rate_mbps, data_object_kb and data_object_sigma must be > 0".into(),
            ));
        }
        let mean = self.data_object_kb * 1e3;
        let sigma = self.data_object_sigma;
        Ok(DataParams {
            gap_mean: mean * 8.0 / (self.data_rate_mbps * 1e6),
            // E[X] = exp(μ + σ²/2) = mean.
            size: LogNormal::new(mean.ln() - sigma * sigma / 2.0, sigma)
                .map_err(|e| ParamError(format!("traffic.data_object_sigma: {e}")))?,
        })
    }

    fn mix_spec(&self, thin: &ThinClientKeys, mss: u32) -> Result<MixSpec, ParamError> {
        let mut flows = Vec::new();
        for &(model, count) in &self.mix {
            if !matches!(model, Model::Video | Model::Data | Model::ThinClient | Model::Game) {
                return Err(ParamError(format!(
                    "traffic.mix: {model:?} cannot be mixed (video, data, thin-client or game)"
                )));
            }
            let spec = self.spec(model, thin, mss)?;
            flows.extend(std::iter::repeat_n(spec, count as usize));
        }
        if flows.is_empty() {
            return Err(ParamError("traffic.mix: traffic.model = \"mix\" needs at least one flow".into()));
        }
        let change = match self.mix_change_s {
            0.0 => None,
            t if t > 0.0 && t.is_finite() => Some(Duration::from_secs_f64(t)),
            _ => return Err(ParamError("traffic.mix_change_s must be ≥ 0".into())),
        };
        let shift = match self.mix_shift {
            0 => self.mix.iter().find(|e| e.1 > 0).map_or(1, |e| e.1),
            s => s,
        };
        Ok(MixSpec { flows, change, shift })
    }
}

/// Calibrated video parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VideoParams {
    /// Frame interval.
    pub interval: Duration,
    /// Mean frame, bytes.
    pub frame_bytes_mean: f64,
    /// Frame sizes uniform in mean·(1 ± spread).
    pub spread: f64,
}

/// Calibrated data parameters.
#[derive(Clone, Copy, Debug)]
pub struct DataParams {
    /// Mean start-to-start gap of objects, seconds.
    pub gap_mean: f64,
    /// Object size law, bytes.
    pub size: LogNormal<f64>,
}

/// The per-pair models of a mix and how they change.
#[derive(Clone, Debug)]
pub struct MixSpec {
    /// Position i's model (the expanded `traffic.mix`).
    pub flows: Vec<super::TrafficSpec>,
    /// Time between changes (`None`: never).
    pub change: Option<Duration>,
    /// Positions the assignment moves per change.
    pub shift: u32,
}

impl MixSpec {
    /// The position of the model pair `stream` runs in phase `phase`.
    pub fn position(&self, stream: u32, phase: u64) -> usize {
        let n = self.flows.len() as u64;
        ((stream as u64 + phase.wrapping_mul(self.shift as u64) % n) % n) as usize
    }
}

/// Frame-paced video: one write per frame.
pub struct VideoSource {
    p: Arc<VideoParams>,
    rng: Xoshiro256PlusPlus,
    next_at: Instant,
}

impl VideoSource {
    /// A source whose first frame is within one frame interval after `start`.
    pub fn new(p: &Arc<VideoParams>, mut rng: Xoshiro256PlusPlus, start: Instant) -> Self {
        let phase = p.interval.as_secs_f64() * rng.gen::<f64>();
        VideoSource { p: Arc::clone(p), rng, next_at: start + Duration::from_secs_f64(phase) }
    }

    /// The next frame.
    pub fn next_write(&mut self) -> Write {
        let at = self.next_at;
        self.next_at = at + self.p.interval;
        let x = self.p.frame_bytes_mean * (1.0 + self.p.spread * (2.0 * self.rng.gen::<f64>() - 1.0));
        Write { at, bytes: (x.round() as u32).max(1), kind: Kind::Bulk, app: App::Video }
    }
}

/// Web/document bursts: one write per object, Poisson arrivals.
pub struct DataSource {
    p: Arc<DataParams>,
    rng: Xoshiro256PlusPlus,
    next_at: Instant,
}

impl DataSource {
    /// A source whose first object comes one random gap after `start`.
    pub fn new(p: &Arc<DataParams>, rng: Xoshiro256PlusPlus, start: Instant) -> Self {
        let mut s = DataSource { p: Arc::clone(p), rng, next_at: start };
        s.next_at = start + s.gap();
        s
    }

    /// The next object.
    pub fn next_write(&mut self) -> Write {
        let at = self.next_at;
        let bytes = self.p.size.sample(&mut self.rng).round().clamp(1.0, u32::MAX as f64) as u32;
        self.next_at = at + self.gap();
        Write { at, bytes, kind: Kind::Bulk, app: App::Data }
    }

    fn gap(&mut self) -> Duration {
        let e = Exp::new(1.0 / self.p.gap_mean).expect("the mean gap is positive");
        Duration::from_secs_f64(e.sample(&mut self.rng))
    }
}

/// First random stream of the mix's later phases: phase k ≥ 1 of stream i draws from
/// `stream_rng(seed, MIX_PHASE_STREAM + k·2³² + i)` (docs/model.md, "Random streams");
/// phase 0 uses the stream's own `2·i`, as the plain model would.
pub const MIX_PHASE_STREAM: u64 = 1 << 61;

/// One pair of a mix: the model of its current phase, switched at each change.
pub struct MixSource {
    spec: Arc<MixSpec>,
    seed: u64,
    stream: u32,
    phase: u64,
    sub: Source,
    /// Start of the next phase (`None`: the mix never changes).
    next_change: Option<Instant>,
}

impl MixSource {
    /// Pair `stream`'s source, starting at `start`; the phases count from the run start.
    pub fn new(spec: &Arc<MixSpec>, seed: u64, stream: u32, start: Instant) -> Result<Self, ParamError> {
        let model = &spec.flows[spec.position(stream, 0)];
        let sub = Source::with_rng(model, stream_rng(seed, 2 * stream as u64), stream, start)?;
        let next_change = spec.change.map(|c| Instant::ZERO + c);
        Ok(MixSource { spec: Arc::clone(spec), seed, stream, phase: 0, sub, next_change })
    }

    /// The next write: the current phase's, or the next phase's once the current one ends.
    pub fn next_write(&mut self) -> Option<Write> {
        loop {
            let w = self.sub.next_write()?;
            let Some(change) = self.next_change.filter(|&c| w.at >= c) else { return Some(w) };
            // The write falls into the next phase: the old model stops there.
            self.phase += 1;
            let model = &self.spec.flows[self.spec.position(self.stream, self.phase)];
            let rng = stream_rng(self.seed, MIX_PHASE_STREAM + (self.phase << 32) + self.stream as u64);
            self.sub = Source::with_rng(model, rng, self.stream, change).expect("mixed models need no trace");
            self.next_change = self.spec.change.map(|c| change + c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::TrafficSpec;
    use super::*;

    fn writes_until(spec: &TrafficSpec, seed: u64, stream: u32, until_s: f64) -> Vec<Write> {
        let mut s = Source::new(spec, seed, stream, Instant::ZERO).unwrap();
        let end = Instant::from_secs_f64(until_s);
        std::iter::from_fn(|| s.next_write()).take_while(|w| w.at < end).collect()
    }

    fn rate_mbps(w: &[Write], secs: f64) -> f64 {
        w.iter().map(|w| w.bytes as f64).sum::<f64>() * 8.0 / secs / 1e6
    }

    #[test]
    fn video_writes_one_frame_per_interval_at_the_rate() {
        let k = AppKeys::default();
        let spec = k.spec(Model::Video, &ThinClientKeys::default(), 1460).unwrap();
        let w = writes_until(&spec, 3, 0, 200.0);
        assert!(w.iter().all(|w| w.app == App::Video && w.kind == Kind::Bulk));
        assert!(w[0].at < Instant::from_nanos(40_000_000), "first frame within one interval");
        assert!(w.windows(2).all(|p| p[1].at - p[0].at == Duration::from_millis(40)), "25 fps");
        assert_eq!(w.len(), 5000);
        let (lo, hi) = (25_000.0 * 0.8, 25_000.0 * 1.2);
        assert!(w.iter().all(|w| (lo..=hi).contains(&(w.bytes as f64))), "±20 % of 25 kB");
        let r = rate_mbps(&w, 200.0);
        assert!((r - 5.0).abs() < 0.02, "video rate {r}");
    }

    #[test]
    fn data_bursts_average_their_rate() {
        let k = AppKeys::default();
        let spec = k.spec(Model::Data, &ThinClientKeys::default(), 1460).unwrap();
        let w = writes_until(&spec, 4, 1, 20_000.0);
        assert!(w.iter().all(|w| w.app == App::Data));
        let r = rate_mbps(&w, 20_000.0);
        assert!((r - 1.0).abs() < 0.05, "data rate {r}");
        let gaps =
            w.windows(2).map(|p| (p[1].at - p[0].at).as_secs_f64()).sum::<f64>() / (w.len() - 1) as f64;
        assert!((gaps / 0.4 - 1.0).abs() < 0.03, "mean gap {gaps} (50 kB at 1 Mbit/s)");
        let mut sizes: Vec<u32> = w.iter().map(|w| w.bytes).collect();
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2] as f64;
        // Lognormal, σ = 1: median = mean · e^(−σ²/2) ≈ 30.3 kB.
        assert!((median / 30_327.0 - 1.0).abs() < 0.05, "median object {median}");
    }

    #[test]
    fn mix_assigns_models_in_order_and_rotates_them() {
        let mut k = AppKeys { mix: vec![(Model::Video, 1), (Model::Data, 2)], ..AppKeys::default() };
        let thin = ThinClientKeys::default();
        let spec = k.spec(Model::Mix, &thin, 1460).unwrap();
        let apps = |spec: &TrafficSpec, i, from: f64, to: f64| {
            let w = writes_until(spec, 9, i, to);
            let mut a: Vec<App> = w.iter().filter(|w| w.at.as_secs_f64() >= from).map(|w| w.app).collect();
            a.dedup();
            a
        };
        assert_eq!(apps(&spec, 0, 0.0, 100.0), [App::Video]);
        assert_eq!(apps(&spec, 1, 0.0, 100.0), [App::Data]);
        assert_eq!(apps(&spec, 2, 0.0, 100.0), [App::Data]);
        // Phase 0 of a mix is the plain model's stream: the same writes.
        let video = k.spec(Model::Video, &thin, 1460).unwrap();
        assert_eq!(writes_until(&spec, 9, 0, 5.0), writes_until(&video, 9, 0, 5.0));
        k.mix_change_s = 60.0;
        let spec = k.spec(Model::Mix, &thin, 1460).unwrap();
        // Shift = 1 (the first entry's count): pair i runs position (i + k) mod 3.
        for (i, want) in [(0, [App::Video, App::Data, App::Data]), (1, [App::Data, App::Data, App::Video])] {
            for (phase, &app) in want.iter().enumerate() {
                let from = 60.0 * phase as f64;
                assert_eq!(apps(&spec, i, from, from + 60.0), [app], "pair {i} phase {phase}");
            }
        }
        let w = writes_until(&spec, 9, 0, 180.0);
        assert!(w.windows(2).all(|p| p[0].at <= p[1].at), "in time order across changes");
        let in_phase = |a: f64, b: f64| w.iter().filter(|w| (a..b).contains(&w.at.as_secs_f64())).count();
        assert_eq!(in_phase(0.0, 60.0), 1500, "video for exactly the first 60 s");
        assert_ne!(writes_until(&spec, 9, 0, 180.0), writes_until(&spec, 10, 0, 180.0));
        assert_eq!(w, writes_until(&spec, 9, 0, 180.0), "deterministic");
    }

    #[test]
    fn mix_refuses_models_without_generated_writes() {
        let thin = ThinClientKeys::default();
        let k = AppKeys { mix: vec![(Model::Bulk, 1)], ..AppKeys::default() };
        assert!(k.spec(Model::Mix, &thin, 1460).is_err());
        let k = AppKeys { mix: vec![(Model::Video, 0)], ..AppKeys::default() };
        assert!(k.spec(Model::Mix, &thin, 1460).is_err(), "no flow");
        let k = AppKeys { video_fps: 0.0, ..AppKeys::default() };
        assert!(k.spec(Model::Video, &thin, 1460).is_err());
        let names: Vec<Model> = serde_json::from_str(r#"["video", "data", "mix"]"#).unwrap();
        assert_eq!(names, [Model::Video, Model::Data, Model::Mix]);
        let mix: Vec<(Model, u32)> = serde_json::from_str(r#"[["video", 3], ["data", 9]]"#).unwrap();
        assert_eq!(mix, [(Model::Video, 3), (Model::Data, 9)]);
    }
}

//! The application inside a flow, from IP-level features (spec "Setting": the source
//! classified encrypted RDP flows statistically; payload is never read).
//!
//! The model is Gaussian naive Bayes on log-scaled features: each application type is
//! a product of independent normals over `ln(1 + feature)`, and a flow gets the type of
//! highest posterior. Why this one: it trains in one pass with no iteration or random
//! initialisation (deterministic by construction), needs no ML library, is a few
//! hundred bytes of JSON, and predicts in ~N·types operations — and the features it sees
//! (packet sizes, gaps, rates) are roughly log-normal, which the log scale turns into the
//! normals it assumes. A class absent from the training data is never predicted.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What runs inside a flow: the application types QDS gives different thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppType {
    /// Video playback (high rate, frame-paced bursts).
    Video,
    /// Audio playback.
    Audio,
    /// Web pages and documents: bursts of bulk data.
    Data,
    /// Typing and pointing: small updates in answer to input.
    Interactive,
}

impl AppType {
    /// Every type, in order.
    pub const ALL: [AppType; 4] = [AppType::Video, AppType::Audio, AppType::Data, AppType::Interactive];

    /// Position in [`AppType::ALL`].
    pub fn index(self) -> usize {
        match self {
            AppType::Video => 0,
            AppType::Audio => 1,
            AppType::Data => 2,
            AppType::Interactive => 3,
        }
    }

    /// The lowercase name (as in JSON and TOML).
    pub fn name(self) -> &'static str {
        match self {
            AppType::Video => "video",
            AppType::Audio => "audio",
            AppType::Data => "data",
            AppType::Interactive => "interactive",
        }
    }
}

impl fmt::Display for AppType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Number of features.
pub const N_FEATURES: usize = 8;

/// IP-level features of a flow over the monitor's window (no payload). Sizes and gaps
/// are of the packets carrying payload toward the client; rates count every packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Features {
    /// Mean IP length, bytes.
    pub size_mean: f64,
    /// Standard deviation of the IP length, bytes.
    pub size_sd: f64,
    /// Mean gap between consecutive packets, µs.
    pub iat_mean_us: f64,
    /// Standard deviation of the gap, µs.
    pub iat_sd_us: f64,
    /// Rate toward the client, bit/s.
    pub rate_down_bps: f64,
    /// Rate toward the server, bit/s (input, requests, ACKs).
    pub rate_up_bps: f64,
    /// Share of packets within 10 % of the flow's largest (full segments).
    pub full_share: f64,
    /// Mean packets per burst (packets less than 1 ms apart form a burst).
    pub burst_pkts: f64,
}

impl Features {
    /// The features' names, in [`Features::as_array`] order (also the JSON model's
    /// `features` list).
    pub const NAMES: [&'static str; N_FEATURES] = [
        "size_mean",
        "size_sd",
        "iat_mean_us",
        "iat_sd_us",
        "rate_down_bps",
        "rate_up_bps",
        "full_share",
        "burst_pkts",
    ];

    /// The features as numbers, in [`Features::NAMES`] order.
    pub fn as_array(&self) -> [f64; N_FEATURES] {
        [
            self.size_mean,
            self.size_sd,
            self.iat_mean_us,
            self.iat_sd_us,
            self.rate_down_bps,
            self.rate_up_bps,
            self.full_share,
            self.burst_pkts,
        ]
    }

    /// No payload toward the client in the window: nothing to classify on (drivers keep
    /// the flow's previous type rather than trust a prediction from zeros).
    pub fn is_idle(&self) -> bool {
        self.size_mean == 0.0
    }

    /// `ln(1 + x)` of each feature (negative and NaN read as 0): the model's scale.
    pub fn log_scaled(&self) -> [f64; N_FEATURES] {
        self.as_array().map(|x| x.max(0.0).ln_1p())
    }
}

/// Added to every variance (on the log scale): a feature constant in the training data
/// of a type (e.g. `full_share` = 1 for all its samples) must not make that type
/// impossible for a flow a hair away. 0.01 is a ±10 % spread of the raw feature.
pub const VAR_FLOOR: f64 = 0.01;

/// One application type in the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassModel {
    /// The type.
    pub app: AppType,
    /// Training samples of this type.
    pub samples: u64,
    /// ln of its share of the training samples.
    pub log_prior: f64,
    /// Mean of each log-scaled feature.
    pub mean: [f64; N_FEATURES],
    /// Variance of each log-scaled feature, [`VAR_FLOOR`] included.
    pub var: [f64; N_FEATURES],
}

/// A trained classifier (serde: the JSON file shipped in the repo and written by
/// training).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The features it was trained on, by name ([`Features::NAMES`]): a model trained
    /// on other features is refused by [`Model::validate`].
    pub features: Vec<String>,
    /// One entry per type seen in training, in [`AppType`] order.
    pub classes: Vec<ClassModel>,
}

/// Why a loaded model cannot be used.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelError {
    /// Its feature list is not this build's.
    Features {
        /// The model's list.
        found: Vec<String>,
    },
    /// It has no class.
    Empty,
    /// A type appears twice.
    Duplicate(AppType),
    /// A number is not finite, or a variance not positive.
    BadNumber {
        /// The type.
        app: AppType,
        /// The feature.
        feature: &'static str,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Features { found } => write!(
                f,
                "the model was trained on features {found:?}, this build computes {:?}: retrain it",
                Features::NAMES
            ),
            ModelError::Empty => write!(f, "the model has no class (trained on no sample)"),
            ModelError::Duplicate(a) => write!(f, "the model lists class {a} twice"),
            ModelError::BadNumber { app, feature } => {
                write!(f, "class {app}, feature {feature}: mean or variance is not a positive finite number")
            }
        }
    }
}

impl std::error::Error for ModelError {}

impl Model {
    /// Fit one normal per (type, feature) to the log-scaled features of `samples`.
    /// No sample gives a model with no class, which predicts [`AppType::Data`] (the
    /// type with the longest threshold: an unknown flow is not made urgent).
    pub fn train(samples: &[(Features, AppType)]) -> Model {
        let total = samples.len() as f64;
        let mut classes = Vec::new();
        for app in AppType::ALL {
            let xs: Vec<[f64; N_FEATURES]> =
                samples.iter().filter(|(_, a)| *a == app).map(|(f, _)| f.log_scaled()).collect();
            if xs.is_empty() {
                continue;
            }
            let n = xs.len() as f64;
            let mut mean = [0.0; N_FEATURES];
            for x in &xs {
                for i in 0..N_FEATURES {
                    mean[i] += x[i] / n;
                }
            }
            let mut var = [VAR_FLOOR; N_FEATURES];
            for x in &xs {
                for i in 0..N_FEATURES {
                    var[i] += (x[i] - mean[i]).powi(2) / n;
                }
            }
            classes.push(ClassModel {
                app,
                samples: xs.len() as u64,
                log_prior: (n / total).ln(),
                mean,
                var,
            });
        }
        Model { features: Features::NAMES.iter().map(|s| s.to_string()).collect(), classes }
    }

    /// The most probable type of a flow with features `f` (ties: the first in
    /// [`AppType`] order).
    pub fn predict(&self, f: &Features) -> AppType {
        let x = f.log_scaled();
        let mut best: Option<(f64, AppType)> = None;
        for c in &self.classes {
            let score = c.log_prior
                + (0..N_FEATURES)
                    .map(|i| {
                        -0.5 * (2.0 * std::f64::consts::PI * c.var[i]).ln()
                            - (x[i] - c.mean[i]).powi(2) / (2.0 * c.var[i])
                    })
                    .sum::<f64>();
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, c.app));
            }
        }
        best.map_or(AppType::Data, |(_, a)| a)
    }

    /// Check a model read from a file: this build's features, one entry per type,
    /// finite numbers.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.features.iter().map(String::as_str).ne(Features::NAMES) {
            return Err(ModelError::Features { found: self.features.clone() });
        }
        if self.classes.is_empty() {
            return Err(ModelError::Empty);
        }
        for (i, c) in self.classes.iter().enumerate() {
            if self.classes[..i].iter().any(|o| o.app == c.app) {
                return Err(ModelError::Duplicate(c.app));
            }
            for (j, feature) in Features::NAMES.iter().enumerate() {
                if !(c.mean[j].is_finite()
                    && c.var[j].is_finite()
                    && c.var[j] > 0.0
                    && c.log_prior.is_finite())
                {
                    return Err(ModelError::BadNumber { app: c.app, feature });
                }
            }
        }
        Ok(())
    }
}

/// The classifier thinwan ships (crates/proto/data/qds-classifier.json), trained on
/// simulated traffic by `crates/sim/examples/qds_train.rs` (docs/scenario.md "[qds]"):
/// what `qds.model_file = ""` means in the simulator, thinwan-link and thinwan-qds.
pub const SHIPPED_MODEL_JSON: &str = include_str!("../../data/qds-classifier.json");

/// [`SHIPPED_MODEL_JSON`], parsed.
pub fn shipped_model() -> Model {
    // Cannot fail: the file is built in, and `tests::the_shipped_model_parses_and_is_valid`
    // parses and validates it.
    Model::from_json(SHIPPED_MODEL_JSON).expect("the shipped classifier is a valid model")
}

impl Model {
    /// A model from its JSON (the format of [`Model`]'s serde); check it with
    /// [`Model::validate`].
    pub fn from_json(text: &str) -> Result<Model, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }
}

/// A confusion matrix: `counts[true type][predicted type]`, indexed by
/// [`AppType::index`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confusion {
    /// Samples of each (true, predicted) pair.
    pub counts: [[u64; 4]; 4],
}

impl Confusion {
    /// The matrix of `model` on `samples`.
    pub fn of(model: &Model, samples: &[(Features, AppType)]) -> Confusion {
        let mut c = Confusion::default();
        for (f, truth) in samples {
            c.add(*truth, model.predict(f));
        }
        c
    }

    /// Count one prediction.
    pub fn add(&mut self, truth: AppType, predicted: AppType) {
        self.counts[truth.index()][predicted.index()] += 1;
    }

    /// Samples counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().flatten().sum()
    }

    /// Share predicted right (0 when empty).
    pub fn accuracy(&self) -> f64 {
        let right: u64 = (0..4).map(|i| self.counts[i][i]).sum();
        let total = self.total();
        if total == 0 {
            0.0
        } else {
            right as f64 / total as f64
        }
    }

    /// Share of the samples of `app` predicted as `app`; None if there were none.
    pub fn recall(&self, app: AppType) -> Option<f64> {
        let row = &self.counts[app.index()];
        let n: u64 = row.iter().sum();
        (n > 0).then(|| row[app.index()] as f64 / n as f64)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_shipped_model_parses_and_is_valid() {
        let m = shipped_model();
        assert_eq!(m.validate(), Ok(()));
        assert!(m.classes.len() >= 2, "trained on several types");
    }

    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, LogNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// A flow of `app` with each feature drawn log-normally around a typical value
    /// (±20 %): video 5 Mbit/s in full packets with frame bursts, data 1 Mbit/s in
    /// long bulk bursts, interactive small sparse updates.
    fn sample(app: AppType, rng: &mut Xoshiro256PlusPlus) -> Features {
        let centre: [f64; N_FEATURES] = match app {
            AppType::Video => [1400.0, 250.0, 2400.0, 6000.0, 5e6, 1.2e5, 0.9, 15.0],
            AppType::Data => [1300.0, 400.0, 12000.0, 30000.0, 1e6, 4e4, 0.8, 40.0],
            AppType::Interactive => [200.0, 150.0, 60000.0, 80000.0, 3e4, 2e4, 0.1, 1.5],
            AppType::Audio => [300.0, 20.0, 20000.0, 2000.0, 1.2e5, 1e4, 0.05, 1.0],
        };
        let noise = LogNormal::new(0.0, 0.2).unwrap();
        let v: Vec<f64> = centre.iter().map(|c| c * noise.sample(rng)).collect();
        Features {
            size_mean: v[0],
            size_sd: v[1],
            iat_mean_us: v[2],
            iat_sd_us: v[3],
            rate_down_bps: v[4],
            rate_up_bps: v[5],
            full_share: v[6].min(1.0),
            burst_pkts: v[7],
        }
    }

    fn samples(n: usize, seed: u64) -> Vec<(Features, AppType)> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let kinds = [AppType::Video, AppType::Data, AppType::Interactive];
        (0..n)
            .map(|_| {
                let app = kinds[rng.gen_range(0..3)];
                (sample(app, &mut rng), app)
            })
            .collect()
    }

    #[test]
    fn three_separated_kinds_are_told_apart_on_held_out_flows() {
        let model = Model::train(&samples(300, 1));
        assert_eq!(
            model.classes.iter().map(|c| c.app).collect::<Vec<_>>(),
            [AppType::Video, AppType::Data, AppType::Interactive]
        );
        let held_out = samples(300, 2);
        let c = Confusion::of(&model, &held_out);
        assert_eq!(c.total(), 300);
        assert!(c.accuracy() > 0.97, "accuracy {} {:?}", c.accuracy(), c.counts);
        for app in [AppType::Video, AppType::Data, AppType::Interactive] {
            assert!(c.recall(app).unwrap() > 0.95, "{app}: {:?}", c.counts);
        }
        // Never trained on audio: never predicted, and no recall to report.
        assert_eq!(c.recall(AppType::Audio), None);
        assert!(c.counts.iter().all(|row| row[AppType::Audio.index()] == 0));
    }

    #[test]
    fn a_model_round_trips_through_json() {
        let model = Model::train(&samples(100, 3));
        let json = serde_json::to_string_pretty(&model).unwrap();
        let back: Model = serde_json::from_str(&json).unwrap();
        assert_eq!(back, model);
        assert_eq!(back.validate(), Ok(()));
        assert!(json.contains("\"app\": \"interactive\""), "lowercase type names: {json}");
        let probe = samples(20, 4);
        assert!(probe.iter().all(|(f, _)| back.predict(f) == model.predict(f)));
    }

    #[test]
    fn training_is_deterministic() {
        let s = samples(200, 5);
        assert_eq!(Model::train(&s), Model::train(&s));
    }

    #[test]
    fn validate_names_what_is_wrong() {
        let mut m = Model::train(&samples(50, 6));
        m.features[0] = "payload_entropy".into();
        assert!(matches!(m.validate(), Err(ModelError::Features { .. })));
        let mut m = Model::train(&samples(50, 6));
        m.classes[0].var[3] = 0.0;
        assert_eq!(m.validate(), Err(ModelError::BadNumber { app: AppType::Video, feature: "iat_sd_us" }));
        let mut m = Model::train(&samples(50, 6));
        let first = m.classes[0].clone();
        m.classes.push(first);
        assert_eq!(m.validate(), Err(ModelError::Duplicate(AppType::Video)));
        assert_eq!(Model::train(&[]).validate(), Err(ModelError::Empty));
    }

    #[test]
    fn an_empty_model_predicts_data() {
        assert_eq!(Model::train(&[]).predict(&Features::default()), AppType::Data);
    }

    #[test]
    fn confusion_counts_by_hand() {
        let mut c = Confusion::default();
        // 3 video: 2 right, 1 as data; 1 data, right.
        c.add(AppType::Video, AppType::Video);
        c.add(AppType::Video, AppType::Video);
        c.add(AppType::Video, AppType::Data);
        c.add(AppType::Data, AppType::Data);
        assert_eq!(c.accuracy(), 0.75);
        assert_eq!(c.recall(AppType::Video), Some(2.0 / 3.0));
        assert_eq!(c.recall(AppType::Data), Some(1.0));
        assert_eq!(Confusion::default().accuracy(), 0.0);
    }
}

//! thinwan-link's `qds` object: the `[qds]` keys of a scenario (the simulator's names,
//! docs/scenario.md "[qds]"), plus the emulator's own `oracle` table (real packets carry
//! no label). Checked once into a [`QdsSetup`]; errors name the key (`qds.alpha: …`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use thinwan_capture::FlowKey;
use thinwan_proto::qds::classify::{AppType, Model};
use thinwan_proto::qds::controller::{QdsConfig, Variant};
use thinwan_proto::qds::monitor::MonitorConfig;
use thinwan_proto::Duration;

use crate::config::ConfigError;

/// `qds.classifier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifierName {
    /// The model of `qds.model` / `qds.model_file` names each flow's type.
    Model,
    /// The `oracle` table names it (the lab's known traffic).
    Oracle,
}

/// One row of the oracle table: a flow matches when every field given matches; the
/// first matching row wins. A row must give at least one field besides `app`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleEntry {
    /// The flow's application type.
    pub app: AppType,
    /// The client's TCP port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_port: Option<u16>,
    /// The server's TCP port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_port: Option<u16>,
    /// The client's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_addr: Option<IpAddr>,
    /// The server's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_addr: Option<IpAddr>,
}

impl OracleEntry {
    fn matches(&self, k: &FlowKey) -> bool {
        fn ok<T: PartialEq>(want: Option<T>, have: T) -> bool {
            want.is_none_or(|w| w == have)
        }
        ok(self.client_port, k.client.port())
            && ok(self.server_port, k.server.port())
            && ok(self.client_addr, k.client.ip())
            && ok(self.server_addr, k.server.ip())
    }
}

/// The `qds` object of thinwan-link's configuration (docs/lab.md "QDS"): used when
/// `fwd.queue.discipline = "qds"`. Names, defaults and bounds are the scenario's
/// `[qds]` (Python `QdsSection`); `model`, `oracle` and `oracle_default` are the link's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QdsKeys {
    /// Control period, ms (spec: 100).
    pub period_ms: f64,
    /// α: slope of the class level.
    pub alpha: f64,
    /// β: exponent of the bandwidth ratio.
    pub beta: f64,
    /// Smallest class level.
    pub l_floor: f64,
    /// The weight formula.
    pub variant: Variant,
    /// Where each flow's type comes from.
    pub classifier: ClassifierName,
    /// The classifier's model (JSON, docs/qds.md), read at load when `model` is absent;
    /// relative to the working directory.
    pub model_file: String,
    /// The model itself (what the simulator's native JSON carries; wins over `model_file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Model>,
    /// Number of budget classes, m.
    pub classes: u32,
    /// DB_max(c_k) = k · class_step_ms.
    pub class_step_ms: f64,
    /// QT of video, ms.
    pub qt_video_ms: f64,
    /// QT of audio, ms.
    pub qt_audio_ms: f64,
    /// QT of data, ms.
    pub qt_data_ms: f64,
    /// QT of interactive traffic, ms.
    pub qt_interactive_ms: f64,
    /// The monitor's RTT samples per half (sliding window).
    pub rtt_samples: u32,
    /// The monitor's rate and feature window, ms.
    pub rate_window_ms: f64,
    /// Flow → type: the oracle's truth (and, with `classifier = "model"`, the truth the
    /// log records next to the prediction).
    pub oracle: Vec<OracleEntry>,
    /// The oracle's type of a flow no row matches.
    pub oracle_default: AppType,
}

impl Default for QdsKeys {
    /// The scenario's `[qds]` defaults, which are the core's (`QdsConfig::default()`,
    /// `MonitorConfig::default()`): read from there, not copied.
    fn default() -> Self {
        let c = QdsConfig::default();
        let m = MonitorConfig::default();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let step = c.bounds.first().copied().unwrap_or(Duration::from_millis(10));
        QdsKeys {
            period_ms: ms(c.period),
            alpha: c.alpha,
            beta: c.beta,
            l_floor: c.l_floor,
            variant: c.variant,
            classifier: ClassifierName::Model,
            model_file: String::new(),
            model: None,
            classes: c.bounds.len() as u32,
            class_step_ms: ms(step),
            qt_video_ms: ms(c.qt_of(AppType::Video)),
            qt_audio_ms: ms(c.qt_of(AppType::Audio)),
            qt_data_ms: ms(c.qt_of(AppType::Data)),
            qt_interactive_ms: ms(c.qt_of(AppType::Interactive)),
            rtt_samples: m.rtt_samples as u32,
            rate_window_ms: ms(m.rate_window),
            oracle: Vec::new(),
            // The longest threshold: an unknown flow is not made urgent (as the core's
            // untrained model).
            oracle_default: AppType::Data,
        }
    }
}

/// The checked `qds` object: what the control loop runs with.
#[derive(Clone, Debug)]
pub struct QdsSetup {
    /// The controller's parameters.
    pub cfg: QdsConfig,
    /// The monitor's.
    pub monitor: MonitorConfig,
    /// The model; None = oracle.
    pub model: Option<Model>,
    /// The oracle table.
    pub oracle: Vec<OracleEntry>,
    /// The oracle's type of unlisted flows.
    pub oracle_default: AppType,
}

impl QdsSetup {
    /// The oracle's type of `key`: its first matching row, else `oracle_default`.
    pub fn truth(&self, key: &FlowKey) -> AppType {
        self.listed(key).unwrap_or(self.oracle_default)
    }

    /// The type of the first row matching `key`, if any.
    pub fn listed(&self, key: &FlowKey) -> Option<AppType> {
        self.oracle.iter().find(|e| e.matches(key)).map(|e| e.app)
    }
}

impl QdsKeys {
    /// Check every value's range (the scenario's bounds); errors name the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |key: &str, msg: String| Err(ConfigError(format!("qds.{key}: {msg}")));
        let ranges = [
            ("period_ms", self.period_ms, 0.0, 60_000.0, false),
            ("alpha", self.alpha, 0.0, 10.0, true),
            ("beta", self.beta, 0.0, 10.0, true),
            ("l_floor", self.l_floor, 0.0, 1.0, false),
            ("class_step_ms", self.class_step_ms, 0.0, 10_000.0, false),
            ("qt_video_ms", self.qt_video_ms, 0.0, 60_000.0, false),
            ("qt_audio_ms", self.qt_audio_ms, 0.0, 60_000.0, false),
            ("qt_data_ms", self.qt_data_ms, 0.0, 60_000.0, false),
            ("qt_interactive_ms", self.qt_interactive_ms, 0.0, 60_000.0, false),
            ("rate_window_ms", self.rate_window_ms, 0.0, 60_000.0, false),
        ];
        for (key, v, lo, hi, lo_ok) in ranges {
            let above = if lo_ok { v >= lo } else { v > lo };
            if !(v.is_finite() && above && v <= hi) {
                let open = if lo_ok { "[" } else { "(" };
                return err(key, format!("must be in {open}{lo}, {hi}], got {v}"));
            }
        }
        if !(1..=64).contains(&self.classes) {
            return err("classes", format!("must be in [1, 64], got {}", self.classes));
        }
        if !(1..=1024).contains(&self.rtt_samples) {
            return err("rtt_samples", format!("must be in [1, 1024], got {}", self.rtt_samples));
        }
        if let Some(i) = self.oracle.iter().position(|e| {
            e.client_port.is_none()
                && e.server_port.is_none()
                && e.client_addr.is_none()
                && e.server_addr.is_none()
        }) {
            return err(
                &format!("oracle[{i}]"),
                "names no flow: give client_port, server_port, client_addr or server_addr".into(),
            );
        }
        Ok(())
    }

    /// Check and build what the loop runs with; reads `model_file` if needed.
    pub fn setup(&self) -> Result<QdsSetup, ConfigError> {
        self.validate()?;
        let ms = Duration::from_millis_f64;
        let mut cfg = QdsConfig {
            period: ms(self.period_ms),
            bounds: (1..=self.classes as u64).map(|k| ms(self.class_step_ms * k as f64)).collect(),
            alpha: self.alpha,
            beta: self.beta,
            l_floor: self.l_floor,
            variant: self.variant,
            ..QdsConfig::default()
        };
        for (app, v) in [
            (AppType::Video, self.qt_video_ms),
            (AppType::Audio, self.qt_audio_ms),
            (AppType::Data, self.qt_data_ms),
            (AppType::Interactive, self.qt_interactive_ms),
        ] {
            cfg.qt.insert(app, ms(v));
        }
        cfg.validate().map_err(|e| {
            let key = match e.field {
                "period" => "period_ms",
                "bounds" => "classes, class_step_ms",
                "qt" => "qt_video_ms, qt_audio_ms, qt_data_ms, qt_interactive_ms",
                other => other,
            };
            ConfigError(format!("qds.{key}: {}", e.why))
        })?;
        let model = match self.classifier {
            ClassifierName::Oracle => None,
            ClassifierName::Model => Some(self.load_model()?),
        };
        let monitor = MonitorConfig {
            rtt_samples: self.rtt_samples as usize,
            rate_window: ms(self.rate_window_ms),
            ..MonitorConfig::default()
        };
        Ok(QdsSetup { cfg, monitor, model, oracle: self.oracle.clone(), oracle_default: self.oracle_default })
    }

    fn load_model(&self) -> Result<Model, ConfigError> {
        let (model, from) = match (&self.model, self.model_file.as_str()) {
            (Some(m), _) => (m.clone(), "qds.model"),
            (None, "") => {
                return Err(ConfigError(
                    "qds.model_file: classifier = \"model\" needs a model (model_file or model), \
                     or set classifier = \"oracle\""
                        .into(),
                ))
            }
            (None, path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ConfigError(format!("qds.model_file: {path}: {e}")))?;
                let m = serde_json::from_str(&text).map_err(|e| {
                    ConfigError(format!("qds.model_file: {path}: not a classifier model: {e}"))
                })?;
                (m, "qds.model_file")
            }
        };
        model.validate().map_err(|e| ConfigError(format!("{from}: {e}")))?;
        Ok(model)
    }
}

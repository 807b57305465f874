//! The `[qds]` keys: what a scenario's `[qds]` section, thinwan-link's `qds` object and
//! thinwan-qds's `[qds]` table spell (docs/scenario.md "[qds]", docs/lab.md "QDS",
//! docs/qds-lab.md), once. Python's `QdsSection` is the user-facing validator of a
//! scenario and mirrors the names and defaults (a test compares them). The defaults are
//! read from [`QdsConfig::default`] and [`MonitorConfig::default`], not copied; an
//! unknown key fails to parse, naming it; [`QdsKeys::validate`] checks each value's
//! range, naming the key (`qds.alpha: …`); [`QdsKeys::config`], [`QdsKeys::monitor`] and
//! [`QdsKeys::classifier`] turn them into what the monitor, classifier and controller
//! run with. No file is read here (sans-IO): a driver hands [`QdsKeys::classifier`] the
//! way to read `model_file`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::qds::classify::{shipped_model, AppType, Model};
use crate::qds::controller::{QdsConfig, Variant};
use crate::qds::monitor::MonitorConfig;
use crate::time::Duration;

/// `qds.classifier`: where each flow's application type comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifierName {
    /// The model of `qds.model` / `qds.model_file` (the shipped one when both are empty).
    Model,
    /// The true types: the simulator's labels, or the `oracle` table on real packets.
    Oracle,
}

/// One row of the oracle table (real packets carry no label; the simulator ignores the
/// table): a flow matches when every field given matches; the first matching row wins. A
/// row must give at least one field besides `app`.
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
    /// Does the flow between `client` and `server` match this row?
    pub fn matches(&self, client: SocketAddr, server: SocketAddr) -> bool {
        fn ok<T: PartialEq>(want: Option<T>, have: T) -> bool {
            want.is_none_or(|w| w == have)
        }
        ok(self.client_port, client.port())
            && ok(self.server_port, server.port())
            && ok(self.client_addr, client.ip())
            && ok(self.server_addr, server.ip())
    }

    fn names_a_flow(&self) -> bool {
        self.client_port.is_some()
            || self.server_port.is_some()
            || self.client_addr.is_some()
            || self.server_addr.is_some()
    }
}

/// The `[qds]` keys. Every key has a default, so each front end reads a partial table.
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
    /// The classifier's model (JSON, docs/qds.md); "" = the shipped one
    /// ([`shipped_model`]). Relative to the scenario file (the Python layer reads it into
    /// `model`) or, for the daemons, to their working directory.
    pub model_file: String,
    /// The model itself, inline (what a scenario's JSON carries after the Python layer
    /// read `model_file`; wins over reading `model_file`).
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
    /// Real packets only: flow → type, the oracle's truth (and, with `classifier =
    /// "model"`, the truth logged next to the prediction). The simulator has labels.
    pub oracle: Vec<OracleEntry>,
    /// The oracle's type of a flow no row matches.
    pub oracle_default: AppType,
}

impl Default for QdsKeys {
    /// The core's defaults (`QdsConfig::default()`, `MonitorConfig::default()`): read
    /// from there, not copied.
    fn default() -> Self {
        let c = QdsConfig::default();
        let m = MonitorConfig::default();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        // The default bounds are k · 10 ms.
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

/// A `[qds]` value that cannot be used: the key (without `qds.`) and why.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyError {
    /// The key at fault (`alpha`, `oracle[2]`, `model_file`, …).
    pub key: String,
    /// What is wrong.
    pub why: String,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qds.{}: {}", self.key, self.why)
    }
}

impl std::error::Error for KeyError {}

fn key_err<T>(key: &str, why: String) -> Result<T, KeyError> {
    Err(KeyError { key: key.into(), why })
}

impl QdsKeys {
    /// Check every value's range (the scenario's bounds, docs/scenario.md "[qds]").
    pub fn validate(&self) -> Result<(), KeyError> {
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
                return key_err(key, format!("must be in {open}{lo}, {hi}], got {v}"));
            }
        }
        if !(1..=64).contains(&self.classes) {
            return key_err("classes", format!("must be in [1, 64], got {}", self.classes));
        }
        if !(1..=1024).contains(&self.rtt_samples) {
            return key_err("rtt_samples", format!("must be in [1, 1024], got {}", self.rtt_samples));
        }
        if let Some(i) = self.oracle.iter().position(|e| !e.names_a_flow()) {
            return key_err(
                &format!("oracle[{i}]"),
                "names no flow: give client_port, server_port, client_addr or server_addr".into(),
            );
        }
        Ok(())
    }

    /// The controller's parameters (checked: [`QdsKeys::validate`], then
    /// [`QdsConfig::validate`] with its field mapped back to the keys).
    pub fn config(&self) -> Result<QdsConfig, KeyError> {
        self.validate()?;
        let ms = Duration::from_millis_f64;
        let mut cfg = QdsConfig {
            period: ms(self.period_ms),
            bounds: (1..=u64::from(self.classes)).map(|k| ms(self.class_step_ms * k as f64)).collect(),
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
            KeyError { key: key.into(), why: e.why }
        })?;
        Ok(cfg)
    }

    /// The monitor's parameters (`rtt_samples`, `rate_window_ms`; the rest the core's).
    pub fn monitor(&self) -> MonitorConfig {
        MonitorConfig {
            rtt_samples: self.rtt_samples as usize,
            rate_window: Duration::from_millis_f64(self.rate_window_ms),
            ..MonitorConfig::default()
        }
    }

    /// The classifier: None with `classifier = "oracle"`; else `model` if given, the
    /// shipped model if `model_file` is "", else `model_file` read by `read` (the
    /// driver's file access; its error is shown after the path). Every model is checked
    /// ([`Model::validate`]); errors name `model_file` (an inline model that came from a
    /// file too, with the path) or `model`.
    pub fn classifier(
        &self,
        read: impl FnOnce(&str) -> Result<String, String>,
    ) -> Result<Option<Model>, KeyError> {
        if self.classifier == ClassifierName::Oracle {
            return Ok(None);
        }
        let path = self.model_file.as_str();
        let from = |why: String| match (&self.model, path) {
            (Some(_), "") => KeyError { key: "model".into(), why },
            _ => KeyError { key: "model_file".into(), why: format!("{path}: {why}") },
        };
        let model = match (&self.model, path) {
            (Some(m), _) => m.clone(),
            (None, "") => return Ok(Some(shipped_model())),
            (None, path) => {
                let text = read(path).map_err(from)?;
                Model::from_json(&text).map_err(|e| from(format!("not a classifier model: {e}")))?
            }
        };
        model.validate().map_err(|e| from(e.to_string()))?;
        Ok(Some(model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_cores() {
        let k = QdsKeys::default();
        let cfg = k.config().unwrap();
        assert_eq!(cfg, QdsConfig::default(), "the keys' defaults give the core's controller");
        assert_eq!(k.monitor(), MonitorConfig::default());
        let model = k.classifier(|_| panic!("no file to read")).unwrap();
        assert_eq!(model, Some(shipped_model()), "model_file = \"\" is the shipped model");
    }

    #[test]
    fn unknown_keys_and_names_fail_to_parse() {
        let e = serde_json::from_str::<QdsKeys>(r#"{"alpah": 1}"#).unwrap_err().to_string();
        assert!(e.contains("alpah"), "{e}");
        let e = serde_json::from_str::<QdsKeys>(r#"{"variant": "fast"}"#).unwrap_err().to_string();
        assert!(e.contains("fast") && e.contains("demand_first"), "{e}");
        let k: QdsKeys = serde_json::from_str(r#"{"alpha": 0.5}"#).unwrap();
        assert_eq!((k.alpha, k.beta), (0.5, 1.0));
    }

    #[test]
    fn bad_values_name_their_key() {
        let bad = |k: QdsKeys| k.config().unwrap_err().to_string();
        let d = QdsKeys::default;
        assert!(bad(QdsKeys { alpha: -1.0, ..d() }).starts_with("qds.alpha: must be in [0, 10]"));
        assert!(bad(QdsKeys { period_ms: 0.0, ..d() }).starts_with("qds.period_ms:"));
        assert!(bad(QdsKeys { classes: 0, ..d() }).starts_with("qds.classes:"));
        assert!(bad(QdsKeys { rtt_samples: 0, ..d() }).starts_with("qds.rtt_samples:"));
        let row = OracleEntry {
            app: AppType::Video,
            client_port: None,
            server_port: None,
            client_addr: None,
            server_addr: None,
        };
        let e = bad(QdsKeys { oracle: vec![row], ..d() });
        assert!(e.starts_with("qds.oracle[0]: names no flow"), "{e}");
    }

    #[test]
    fn the_model_comes_from_the_keys_and_errors_name_its_source() {
        let shipped = shipped_model();
        let json = serde_json::to_string(&shipped).unwrap();
        let file = QdsKeys { model_file: "m.json".into(), ..QdsKeys::default() };
        assert_eq!(
            file.classifier(|p| Ok(if p == "m.json" { json.clone() } else { String::new() })).unwrap(),
            Some(shipped.clone())
        );
        let e = file.classifier(|_| Err("No such file".into())).unwrap_err().to_string();
        assert_eq!(e, "qds.model_file: m.json: No such file");
        let e = file.classifier(|_| Ok("{".into())).unwrap_err().to_string();
        assert!(e.starts_with("qds.model_file: m.json: not a classifier model"), "{e}");
        let wrong: Model = serde_json::from_str(r#"{"features": ["size"], "classes": []}"#).unwrap();
        let e = QdsKeys { model: Some(wrong.clone()), ..QdsKeys::default() }
            .classifier(|_| unreachable!())
            .unwrap_err();
        assert!(e.to_string().starts_with("qds.model: the model was trained on features"), "{e}");
        let e = QdsKeys { model: Some(wrong), ..file.clone() }.classifier(|_| unreachable!()).unwrap_err();
        assert!(
            e.to_string().starts_with("qds.model_file: m.json: the model was trained on features"),
            "{e}"
        );
        let oracle = QdsKeys { classifier: ClassifierName::Oracle, ..file };
        assert_eq!(oracle.classifier(|_| unreachable!()).unwrap(), None);
    }

    #[test]
    fn oracle_rows_match_by_every_field_given() {
        let row = OracleEntry {
            app: AppType::Video,
            client_port: None,
            server_port: Some(5001),
            client_addr: None,
            server_addr: Some("10.0.0.2".parse().unwrap()),
        };
        let (c, s) = ("10.0.1.1:40000".parse().unwrap(), "10.0.0.2:5001".parse().unwrap());
        assert!(row.matches(c, s));
        assert!(!row.matches(c, "10.0.0.3:5001".parse().unwrap()));
        assert!(!row.matches(s, c), "the server's port is not the client's");
    }
}

//! thinwan-link's `qds` object: the core's `[qds]` keys
//! ([`thinwan_proto::qds::keys::QdsKeys`]: the scenario's names, defaults and bounds,
//! plus the `oracle` table real packets need), checked once into a [`QdsSetup`]; errors
//! name the key (`qds.alpha: …`). thinwan-qds builds its loop the same way.

use thinwan_capture::FlowKey;
use thinwan_proto::qds::classify::{AppType, Model};
use thinwan_proto::qds::controller::QdsConfig;
pub use thinwan_proto::qds::keys::{ClassifierName, OracleEntry, QdsKeys};
use thinwan_proto::qds::monitor::MonitorConfig;

use crate::config::ConfigError;
use crate::pairs::PairTruth;
use thinwan_proto::Duration;

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
    /// The pairs' traffic (thinwan-link's `pairs.traffic`): each pair's true type over
    /// time, before the `oracle` table.
    pub truth: Option<PairTruth>,
}

impl QdsSetup {
    /// The oracle's type of `key` `since_start` after the run's start: its pair's (see
    /// [`QdsSetup::listed`]), else `oracle_default`.
    pub fn truth(&self, key: &FlowKey, since_start: Duration) -> AppType {
        self.listed(key, since_start).unwrap_or(self.oracle_default)
    }

    /// The true type of `key`, if known: its pair's at the time (by its server port,
    /// `pairs.traffic`), else that of the first `oracle` row matching it.
    pub fn listed(&self, key: &FlowKey, since_start: Duration) -> Option<AppType> {
        self.truth
            .as_ref()
            .and_then(|t| t.app(key.server.port(), since_start))
            .or_else(|| self.oracle.iter().find(|e| e.matches(key.client, key.server)).map(|e| e.app))
    }

    /// Check `keys` and build what the loop runs with; reads `model_file` (relative to
    /// the working directory) if needed; `model_file = ""` is the shipped model.
    pub fn from_keys(keys: &QdsKeys) -> Result<QdsSetup, ConfigError> {
        let e = |e: thinwan_proto::qds::keys::KeyError| ConfigError(e.to_string());
        let cfg = keys.config().map_err(e)?;
        let model =
            keys.classifier(|path| std::fs::read_to_string(path).map_err(|e| e.to_string())).map_err(e)?;
        Ok(QdsSetup {
            cfg,
            monitor: keys.monitor(),
            model,
            oracle: keys.oracle.clone(),
            oracle_default: keys.oracle_default,
            truth: None,
        })
    }
}

//! `controller = "qds"`: the core's passive flow monitor, application classifier (or the
//! oracle table) and QDS controller (`thinwan_proto::qds`, docs/qds.md) — the same code
//! the simulator's middlebox runs — driven by captured packets and the wall clock.
//!
//! Every period: forget idle flows, take every tracked flow's view (RTT = client half +
//! server half, rate toward the client, features), name its application, and hand
//! the flows to `controller::plan`, whose classes and rates the daemon programs into HTB.
//! A flow whose RTT has not been measured yet (no half timed) enters the plan with
//! RTT 0: its budget is its whole QT, so it is not made urgent on no evidence.

use std::path::Path;

use thinwan_proto::qds::classify::{AppType, Model};
use thinwan_proto::qds::controller::{plan, FlowInput, QdsConfig};
use thinwan_proto::qds::monitor::{FlowMonitor, MonitorConfig, Segment, Toward};
use thinwan_proto::{Duration, Instant};

use crate::capture::{Dir, TcpInfo};
use crate::config::{ClassifierMode, Config, FlowMatch};
use crate::control::{Control, Decision, FlowReport};
use crate::htb::Rate;
use crate::tc::FiveTuple;

/// Where flows get their application type.
enum Apps {
    /// The trained classifier on the monitor's features.
    Model(Box<Model>),
    /// The oracle table; flows it does not list are `data` (the longest QT: an unknown
    /// flow is not made urgent).
    Oracle(Vec<(FlowMatch, AppType)>),
}

impl Apps {
    fn of(&self, flow: &FiveTuple, features: &thinwan_proto::qds::classify::Features) -> AppType {
        match self {
            Apps::Model(m) => m.predict(features),
            Apps::Oracle(t) => t.iter().find(|(m, _)| m.matches(flow.server, flow.server_port)).map_or(AppType::Data, |(_, a)| *a),
        }
    }
}

/// The QDS decider.
pub struct Qds {
    cfg: QdsConfig,
    monitor: FlowMonitor<FiveTuple>,
    apps: Apps,
    capacity_bps: u64,
}

impl Qds {
    /// From the daemon's configuration (the model file is read and checked here).
    pub fn new(c: &Config) -> Result<Qds, String> {
        let mut cfg = QdsConfig { period: Duration::from_millis(c.period_ms), alpha: c.qds.alpha, beta: c.qds.beta, variant: c.qds.variant, ..QdsConfig::default() };
        if !c.qds.bounds_ms.is_empty() {
            cfg.bounds = c.qds.bounds_ms.iter().map(|b| Duration::from_millis_f64(*b)).collect();
        }
        cfg.validate().map_err(|e| e.to_string())?;
        let apps = match c.classifier.mode {
            ClassifierMode::Oracle => Apps::Oracle(c.classifier.oracle.iter().map(|e| (e.flow, e.app)).collect()),
            ClassifierMode::Model => {
                let path = c.classifier.model.as_deref().ok_or("classifier.model: mode = \"model\" needs the model file")?;
                Apps::Model(Box::new(load_model(path)?))
            }
        };
        Ok(Qds { cfg, monitor: FlowMonitor::new(MonitorConfig::default()), apps, capacity_bps: (c.capacity_mbps * 1e6).round() as u64 })
    }
}

/// Read and check a trained model (JSON).
pub fn load_model(path: &Path) -> Result<Model, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("classifier.model: {}: {e}", path.display()))?;
    let model: Model = serde_json::from_str(&text).map_err(|e| format!("classifier.model: {}: {e}", path.display()))?;
    model.validate().map_err(|e| format!("classifier.model: {}: {e}", path.display()))?;
    Ok(model)
}

impl Control for Qds {
    fn classes(&self) -> usize {
        self.cfg.classes()
    }

    fn initial_rates(&self) -> Vec<Rate> {
        let cap = self.capacity_bps / 8;
        vec![Rate { rate: (cap / self.classes() as u64).max(1), ceil: cap }; self.classes()]
    }

    fn observe(&mut self, now: Instant, flow: FiveTuple, dir: Dir, p: &TcpInfo) {
        let toward = match dir {
            Dir::ToClient => Toward::Client,
            Dir::ToServer => Toward::Server,
        };
        let seg = Segment {
            seq: p.seq,
            ack: p.ack,
            has_ack: p.has_ack,
            syn: p.syn,
            fin: p.fin,
            rst: p.rst,
            payload: p.payload,
            wire_len: p.wire_len,
            ts: p.ts,
        };
        self.monitor.observe(now, flow, toward, &seg);
    }

    fn tick(&mut self, now: Instant) -> Decision {
        self.monitor.expire(now);
        let views = self.monitor.views(now);
        let inputs: Vec<FlowInput<FiveTuple>> = views
            .iter()
            .map(|(k, v)| FlowInput { key: *k, app: self.apps.of(k, &v.features), rtt: v.rtt.unwrap_or(Duration::ZERO), rate_bps: v.rate_bps })
            .collect();
        let p = plan(&self.cfg, &inputs, self.capacity_bps);
        let flows = p
            .class_of
            .iter()
            .zip(&inputs)
            .zip(&views)
            .map(|(((key, class), input), (_, view))| FlowReport { flow: *key, class: *class, app: Some(input.app.name()), rtt: view.rtt.map(|r| r.as_secs_f64()) })
            .collect();
        let rates = p.rates.iter().map(|r| Rate { rate: (r.rate_bps / 8).max(1), ceil: (r.ceil_bps / 8).max(1) }).collect();
        Decision { flows, rates }
    }
}

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
            Apps::Oracle(t) => t
                .iter()
                .find(|(m, _)| m.matches(flow.server, flow.server_port))
                .map_or(AppType::Data, |(_, a)| *a),
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
        let mut cfg = QdsConfig {
            period: Duration::from_millis(c.period_ms),
            alpha: c.qds.alpha,
            beta: c.qds.beta,
            variant: c.qds.variant,
            ..QdsConfig::default()
        };
        if !c.qds.bounds_ms.is_empty() {
            cfg.bounds = c.qds.bounds_ms.iter().map(|b| Duration::from_millis_f64(*b)).collect();
        }
        cfg.validate().map_err(|e| e.to_string())?;
        let apps = match c.classifier.mode {
            ClassifierMode::Oracle => {
                Apps::Oracle(c.classifier.oracle.iter().map(|e| (e.flow, e.app)).collect())
            }
            ClassifierMode::Model => {
                let path = c
                    .classifier
                    .model
                    .as_deref()
                    .ok_or("classifier.model: mode = \"model\" needs the model file")?;
                Apps::Model(Box::new(load_model(path)?))
            }
        };
        Ok(Qds {
            cfg,
            monitor: FlowMonitor::new(MonitorConfig::default()),
            apps,
            capacity_bps: (c.capacity_mbps * 1e6).round() as u64,
        })
    }
}

/// Read and check a trained model (JSON).
pub fn load_model(path: &Path) -> Result<Model, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("classifier.model: {}: {e}", path.display()))?;
    let model: Model =
        serde_json::from_str(&text).map_err(|e| format!("classifier.model: {}: {e}", path.display()))?;
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

    fn observe(&mut self, now: Instant, flow: FiveTuple, toward: Toward, seg: &Segment) {
        self.monitor.observe(now, flow, toward, seg);
    }

    fn tick(&mut self, now: Instant) -> Decision {
        self.monitor.expire(now);
        let views = self.monitor.views(now);
        let inputs: Vec<FlowInput<FiveTuple>> = views
            .iter()
            .map(|(k, v)| FlowInput {
                key: *k,
                app: self.apps.of(k, &v.features),
                rtt: v.rtt.unwrap_or(Duration::ZERO),
                rate_bps: v.rate_bps,
            })
            .collect();
        let p = plan(&self.cfg, &inputs, self.capacity_bps);
        let flows = p
            .class_of
            .iter()
            .zip(&inputs)
            .zip(&views)
            .map(|(((key, class), input), (_, view))| FlowReport {
                flow: *key,
                class: *class,
                app: Some(input.app.name()),
                rtt: view.rtt.map(|r| r.as_secs_f64()),
                halves: (
                    view.client_half.map(|h| h.as_secs_f64()),
                    view.server_half.map(|h| h.as_secs_f64()),
                ),
                rate_bps: Some(view.rate_bps),
                features: Some(view.features.as_array()),
            })
            .collect();
        let rates = p
            .rates
            .iter()
            .map(|r| Rate { rate: (r.rate_bps / 8).max(1), ceil: (r.ceil_bps / 8).max(1) })
            .collect();
        Decision { flows, rates }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: &str = r#"
downlink = "x-l"
uplink = "x-w"
capacity_mbps = 10
controller = "qds"
[servers]
nets = ["198.18.1.0/24"]
[classifier]
mode = "oracle"
oracle = [{ port = 5001, type = "video" }, { port = 5002, type = "data" }]
"#;

    fn ms(x: u64) -> Instant {
        Instant::from_nanos(x * 1_000_000)
    }

    /// A connection whose handshake times the server half at 1 ms and the client half
    /// at 30 ms, then a few data segments each acknowledged 30 ms later.
    fn connection(q: &mut Qds, flow: FiveTuple, t0: u64) {
        let seg = |seq, ack, has_ack, syn, payload| Segment {
            seq,
            ack,
            has_ack,
            syn,
            payload,
            wire_len: 40 + payload,
            ..Segment::default()
        };
        q.observe(ms(t0), flow, Toward::Server, &seg(100, 0, false, true, 0));
        q.observe(ms(t0 + 1), flow, Toward::Client, &seg(5000, 101, true, true, 0));
        q.observe(ms(t0 + 31), flow, Toward::Server, &seg(101, 5001, true, false, 0));
        for i in 0..5u32 {
            let t = t0 + 40 + 50 * u64::from(i);
            q.observe(ms(t), flow, Toward::Client, &seg(5001 + 1000 * i, 101, true, false, 1000));
            q.observe(ms(t + 30), flow, Toward::Server, &seg(101, 6001 + 1000 * i, true, false, 0));
        }
    }

    #[test]
    fn oracle_types_and_measured_rtts_place_flows_by_budget() {
        let cfg = Config::parse(CFG).unwrap();
        let mut q = Qds::new(&cfg).unwrap();
        assert_eq!(q.classes(), 10);
        let video = FiveTuple {
            server: [198, 18, 1, 1].into(),
            server_port: 5001,
            client: [198, 18, 2, 1].into(),
            client_port: 40000,
        };
        let data = FiveTuple { server_port: 5002, ..video };
        connection(&mut q, video, 0);
        connection(&mut q, data, 0);
        let d = q.tick(ms(400));
        assert_eq!(d.flows.len(), 2);
        let by_port = |p: u16| d.flows.iter().find(|f| f.flow.server_port == p).unwrap().clone();
        let (v, w) = (by_port(5001), by_port(5002));
        assert_eq!((v.app, w.app), (Some("video"), Some("data")));
        let rtt = v.rtt.expect("timed");
        assert!((rtt - 0.031).abs() < 0.002, "RTT = server half 1 ms + client half 30 ms: {rtt}");
        // DB = QT − RTT: video 50 − 31 = 19 ms → bound 20 ms (class 1); data 100 − 31 =
        // 69 ms → bound 70 ms (class 6). Bounds 10, 20, …, 100 ms.
        assert_eq!((v.class, w.class), (1, 6));
        assert_eq!(d.rates.len(), 10);
        let total: u64 = d.rates.iter().map(|r| r.rate).sum();
        // ⌊w·capacity⌋ per class; an empty class's 0 is sent as 1 B/s (HTB refuses 0).
        assert!((1_249_990..=1_250_010).contains(&total), "rates share the capacity: {total}");
        assert!(d.rates.iter().all(|r| r.ceil == 1_250_000));
    }

    #[test]
    fn model_mode_needs_a_valid_model_file() {
        let dir = std::env::temp_dir().join(format!("thinwan-qds-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.json");
        std::fs::write(&path, "{\"features\": [\"nope\"], \"classes\": []}").unwrap();
        let text = CFG.replace(
            "mode = \"oracle\"",
            &format!("mode = \"model\"\nmodel = {:?}", path.display().to_string()),
        );
        let err = Qds::new(&Config::parse(&text).unwrap()).err().unwrap();
        assert!(err.starts_with("classifier.model:"), "{err}");
        let empty = Model::train(&[]);
        std::fs::write(&path, serde_json::to_string(&empty).unwrap()).unwrap();
        let err = Qds::new(&Config::parse(&text).unwrap()).err().unwrap();
        assert!(err.starts_with("classifier.model:") && err.contains("no class"), "{err}");
        let one = Model::train(&[(Default::default(), AppType::Video)]);
        std::fs::write(&path, serde_json::to_string(&one).unwrap()).unwrap();
        let ok = Qds::new(&Config::parse(&text).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(ok.is_ok(), "a trained model loads");
    }
}

//! `controller = "qds"`: the core's passive flow monitor, application classifier (or the
//! oracle table) and QDS controller (`thinwan_proto::qds`, docs/qds.md) — the same code
//! the simulator's middlebox runs — driven by captured packets and the wall clock.
//!
//! Its `[qds]` keys are thinwan-link's (`thinwan_net::qds::config`): the same names,
//! defaults, bounds and model/oracle handling as the emulator and the scenario.
//!
//! Every period: forget idle flows, take every tracked flow's view (RTT = client half +
//! server half, rate toward the client, features), name its application, and hand
//! the flows to `controller::plan`, whose classes and rates the daemon programs into HTB.
//! A flow whose RTT has not been measured yet (no half timed) enters the plan with RTT 0
//! (DB = QT), as in the simulator and thinwan-link's loop (`controller::inputs`), so its
//! class gets a rate and it cannot starve in the default class.

use std::net::SocketAddr;

use thinwan_capture::FlowKey;
use thinwan_net::qds::config::QdsSetup;
use thinwan_proto::qds::classify::{AppType, Features};
use thinwan_proto::qds::controller::{self, plan};
use thinwan_proto::qds::monitor::{FlowMonitor, Segment, Toward};
use thinwan_proto::{Duration, Instant};

use crate::config::Config;
use crate::control::{Control, Decision, FlowReport};
use crate::htb::Rate;
use crate::tc::FiveTuple;

/// The QDS decider.
pub struct Qds {
    setup: QdsSetup,
    monitor: FlowMonitor<FiveTuple>,
    capacity_bps: u64,
}

impl Qds {
    /// From the daemon's configuration: its `[qds]` keys checked and built exactly as
    /// thinwan-link builds them (`QdsSetup::from_keys`: controller and monitor parameters,
    /// the model read from `model_file` — the shipped one if "" — and checked, or the
    /// oracle table).
    pub fn new(c: &Config) -> Result<Qds, String> {
        let setup = QdsSetup::from_keys(&c.qds).map_err(|e| e.0)?;
        let monitor = FlowMonitor::new(setup.monitor);
        Ok(Qds { setup, monitor, capacity_bps: (c.capacity_mbps * 1e6).round() as u64 })
    }

    /// The application type of `flow`: the model's prediction from its features, or the
    /// oracle's row (unlisted flows: `oracle_default`, `data` unless set).
    fn app_of(&self, flow: &FiveTuple, features: &Features) -> AppType {
        match &self.setup.model {
            Some(m) => m.predict(features),
            None => self.setup.truth(
                &FlowKey {
                    client: SocketAddr::from((flow.client, flow.client_port)),
                    server: SocketAddr::from((flow.server, flow.server_port)),
                },
                Duration::ZERO,
            ), // no pairs here: the table alone
        }
    }
}

impl Control for Qds {
    fn classes(&self) -> usize {
        self.setup.cfg.classes()
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
        // Every flow, one not yet timed with RTT 0, as the simulator and thinwan-link
        // (`controller::inputs`, the core's one rule).
        let views = self.monitor.views(now);
        let inputs = controller::inputs(&views, |k, v| self.app_of(k, &v.features));
        let p = plan(&self.setup.cfg, &inputs, self.capacity_bps);
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
[qds]
classifier = "oracle"
oracle = [{ server_port = 5001, app = "video" }, { server_port = 5002, app = "data" }]
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
    fn a_flow_not_yet_timed_gets_a_class_with_a_rate() {
        // Data toward the client and no answer yet: no RTT. It is planned at RTT 0
        // (controller::inputs): data, DB = QT = 100 ms, the last class, whose rate is
        // then the link's — not left unfiltered in a default class the plan gives 0.
        let mut q = Qds::new(&Config::parse(CFG).unwrap()).unwrap();
        let data = FiveTuple {
            server: [198, 18, 1, 1].into(),
            server_port: 5002,
            client: [198, 18, 2, 1].into(),
            client_port: 40001,
        };
        let seg = Segment { seq: 1, has_ack: true, payload: 1000, wire_len: 1040, ..Segment::default() };
        q.observe(ms(150), data, Toward::Client, &seg);
        let d = q.tick(ms(200));
        assert_eq!(d.flows.len(), 1, "planned although untimed");
        let f = &d.flows[0];
        assert_eq!((f.rtt, f.app, f.class), (None, Some("data"), 9));
        assert_eq!(d.rates[9].rate, 1_250_000, "its class has the whole link");
    }

    #[test]
    fn model_mode_needs_a_valid_model_file() {
        let dir = std::env::temp_dir().join(format!("thinwan-qds-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.json");
        let text = CFG.replace(
            "classifier = \"oracle\"",
            &format!("classifier = \"model\"\nmodel_file = {:?}", path.display().to_string()),
        );
        let no_file = Qds::new(&Config::parse(&text).unwrap()).err().unwrap();
        assert!(no_file.starts_with("qds.model"), "{no_file}");
        let empty = thinwan_proto::qds::classify::Model::train(&[]);
        std::fs::write(&path, serde_json::to_string(&empty).unwrap()).unwrap();
        let err = Qds::new(&Config::parse(&text).unwrap()).err().unwrap();
        assert!(err.starts_with("qds.model") && err.contains("no class"), "{err}");
        let one = thinwan_proto::qds::classify::Model::train(&[(Default::default(), AppType::Video)]);
        std::fs::write(&path, serde_json::to_string(&one).unwrap()).unwrap();
        let ok = Qds::new(&Config::parse(&text).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(ok.is_ok(), "a trained model loads");
    }
}

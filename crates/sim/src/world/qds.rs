//! The QDS control loop on the middlebox's downlink (`queue.discipline = "qds"`;
//! docs/scenario.md "[qds]"): the core's passive monitor sees every packet crossing R1 as
//! a capture on the middlebox would — data toward the client when it reaches R1 (before
//! the downlink's queue, so also the packets that queue then drops), ACKs toward the
//! server when they reach R1 from the uplink — and every `qds.period_ms` the flows' RTT
//! estimates, rates and types (the classifier's, or the true labels with `qds.classifier
//! = "oracle"`) go to the controller's `plan`, whose class rates and per-flow classes are
//! set on the downlink's class scheduler through `QueueDisc::classes()`. With
//! `queue.qds_order = "deadline"` the downlink is the deadline queue instead: each period
//! every flow's slack (QT − its base RTT, `controller::BaseRtt`) goes to it through
//! `QueueDisc::deadlines()` (docs/qds.md "Deadline order").
//!
//! What the monitor can time here: the simulated TCP has no handshake and no timestamps
//! option, and the client sends no data, so only the **client half** (R1 → client → R1:
//! a data segment to the cumulative ACK that covers it, Karn's rule for retransmitted
//! ones) is ever timed; the server half stays untimed and counts as 0
//! (`FlowView::partial`). The estimate so misses the server side's round trip, 2 ·
//! `topology.access_delay_ms` plus serialisation (0.2 ms in scenarios/qds).

use super::*;
use std::collections::BTreeMap;

use crate::config::QdsKeys;
use crate::records::{QdsClasses, QdsFlows};
use thinwan_proto::qds::classify::{AppType, Model};
use thinwan_proto::qds::controller::{self, plan, BaseRtt, QdsConfig};
use thinwan_proto::qds::monitor::{FlowMonitor, Segment, Toward};

/// The loop's state: the monitor, the controller's parameters, the classifier.
pub(super) struct Qds {
    monitor: FlowMonitor<u32>,
    cfg: QdsConfig,
    /// `None`: the true labels (oracle).
    model: Option<Model>,
    capacity_bps: u64,
    /// Each flow's least RTT estimate (the deadline order's slack).
    base: BaseRtt<u32>,
    pub(super) flows: QdsFlows,
    pub(super) classes: QdsClasses,
}

impl Qds {
    /// The loop of `[qds]` on a downlink of `capacity_bps`. The classifier is `qds.model`
    /// (the Python layer reads `qds.model_file` into it, relative to the scenario file),
    /// else the shipped one; the simulator reads no file itself.
    pub(super) fn new(q: &QdsKeys, capacity_bps: u64) -> Result<Qds, String> {
        let cfg = q.config().map_err(|e| e.to_string())?;
        let model = q
            .classifier(|_| {
                Err("the simulator takes the model inline (qds.model): run the scenario with thinwan".into())
            })
            .map_err(|e| e.to_string())?;
        Ok(Qds {
            monitor: FlowMonitor::new(q.monitor()),
            cfg,
            model,
            capacity_bps,
            base: BaseRtt::default(),
            flows: QdsFlows::default(),
            classes: QdsClasses::default(),
        })
    }

    /// The control period.
    pub(super) fn period(&self) -> Duration {
        self.cfg.period
    }

    /// Data segment `seg` (`wire` bytes on the wire) of `conn` reached R1 toward the client.
    #[cold] // off the dumbbell's hot paths
    #[inline(never)]
    pub(super) fn observe_data(&mut self, now: Instant, conn: u32, seg: &DataSegment, wire: u32) {
        // Sequence numbers on the wire are 32 bits (the monitor handles the wrap).
        let s = Segment {
            seq: seg.seq as u32,
            has_ack: true,
            payload: seg.len,
            wire_len: wire,
            ..Segment::default()
        };
        self.monitor.observe(now, conn, Toward::Client, &s);
    }

    /// An ACK of `conn` acknowledging `ack` reached R1 toward the server.
    #[cold] // off the dumbbell's hot paths
    #[inline(never)]
    pub(super) fn observe_ack(&mut self, now: Instant, conn: u32, ack: u64, wire: u32) {
        let s = Segment { ack: ack as u32, has_ack: true, wire_len: wire, ..Segment::default() };
        self.monitor.observe(now, conn, Toward::Server, &s);
    }
}

impl World {
    /// One control period: monitor → classifier (or truth) → plan → the downlink's classes.
    pub(super) fn on_qds_tick(&mut self) {
        let now = self.now;
        let Some(q) = self.qds.as_mut() else { return };
        q.monitor.expire(now);
        let t = now.as_secs_f64();
        let views = q.monitor.views(now);
        let truth = |conn: u32| {
            thinwan_proto::qds::truth::app_type(
                self.rtt.as_ref().map_or(App::ThinClient, |r| r.last_app(conn)),
            )
        };
        // Every flow, an untimed one with RTT 0 (`controller::inputs` says why).
        let inputs = controller::inputs(&views, |&conn, v| {
            q.model.as_ref().map_or_else(|| truth(conn), |m| m.predict(&v.features))
        });
        for ((conn, v), input) in views.iter().zip(&inputs) {
            let f = &mut q.flows;
            f.t.push(t);
            f.conn.push(*conn);
            f.app_true.push(truth(*conn).index() as u8);
            f.app.push(input.app.index() as u8);
            f.rtt.push(v.rtt.map_or(f64::NAN, |r| r.as_secs_f64()));
            f.rate_bps.push(v.rate_bps);
            f.features.push(v.features.as_array());
        }
        let p = plan(&q.cfg, &inputs, q.capacity_bps);
        let f = &mut q.flows;
        f.class.extend(p.class_of.iter().map(|&(_, c)| c as u16));
        let c = &mut q.classes;
        for (k, (w, r)) in p.weights.iter().zip(&p.rates).enumerate() {
            let flows = p.class_of.iter().filter(|&&(_, class)| class == k).count();
            c.t.push(t);
            c.class.push(k as u16);
            c.weight.push(*w);
            c.rate_bps.push(r.rate_bps as f64);
            c.flows.push(flows as u32);
        }
        // The deadline order (`queue.qds_order = "deadline"`): each flow's packets are
        // due at arrival + QT − its base RTT.
        if let Some(d) = self.queues[0].queue.deadlines() {
            // Only timed flows: the base RTT is a least estimate, and an untimed flow's
            // 0 would stick. Untimed flows keep the default slack.
            let timed = views.iter().filter_map(|(k, v)| v.rtt.map(|r| (*k, r)));
            let base = q.base.update(timed);
            let app: BTreeMap<u32, AppType> = inputs.iter().map(|f| (f.key, f.app)).collect();
            let slacks: Vec<(u64, Duration)> =
                base.iter().map(|&(k, b)| (k as u64, q.cfg.slack(app[&k], b))).collect();
            d.set_slacks(&slacks, q.cfg.default_slack());
        }
        let next = now + q.period();
        // Rates first, then the filters; the port restarts if the new rates let a class
        // send now.
        self.with_classes(0, |cc| {
            cc.set_rates(now, &p.rates);
            for &(conn, class) in &p.class_of {
                cc.assign(conn as u64, class);
            }
        });
        if next <= self.end {
            self.events.push(next, Event::QdsTick);
        }
    }
}

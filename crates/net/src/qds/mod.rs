//! The QDS control loop inside thinwan-link (`fwd.queue.discipline = "qds"`), sans-IO:
//! the same monitor → classifier → `controller::plan` → class scheduler as the
//! simulator's middlebox (`crates/sim/src/world/qds.rs`), on real packets.
//!
//! The link stands for the middlebox's congested downlink, the middlebox at its server
//! end. So the monitor sees what a capture on the middlebox would:
//!
//! - every packet of the `fwd` direction (server → client, [`Toward::Client`]) when it
//!   arrives, before the downlink's queue (so also the packets the queue then drops);
//! - every packet of the `rev` direction ([`Toward::Server`]) when the link delivers it
//!   to the server side, i.e. after the uplink's delay.
//!
//! The client half of a flow's RTT thus spans the downlink's queue, both delays and the
//! client, as in the simulator; the server half (link ↔ server namespace) is timed by
//! the handshake and TCP timestamps (docs/qds.md). Headers are parsed once, by
//! `thinwan_capture::ip` (the daemon's and `thinwan analyze`'s parser), never the payload.
//!
//! Call order: [`QdsLoop::observe`] for every packet (both directions, in time order as
//! far as the two threads allow), [`QdsLoop::handle_timeout`] when
//! [`QdsLoop::poll_timeout`] is due, then [`Period::apply`] on the `fwd` direction.
//! Each period, as the simulator: expire idle flows; every flow gets a type (the model's
//! prediction, or the oracle table's) and goes to the controller, one not yet timed with
//! RTT 0 (`controller::inputs`, the core's one rule); `plan` on the link rate; its
//! class rates replace the scheduler's and each flow is filtered into its class under the
//! id its packets carry in the queue ([`crate::link::fwd_flow_id`]).

pub mod config;
pub mod log;

use pcap_file::DataLink;
use thinwan_capture::ip::{self, Frame};
use thinwan_capture::FlowKey;
use thinwan_proto::qdisc::ClassRate;
use thinwan_proto::qds::controller::{self, plan};
use thinwan_proto::qds::monitor::{FlowMonitor, MonitorStats, Toward};
use thinwan_proto::{Duration, Instant};

use crate::link::{fwd_flow_id, Direction, Event};
use config::QdsSetup;
use log::{ClassRecord, FlowRecord, Record};

/// The loop's state: the monitor, the controller's parameters, the classifier.
pub struct QdsLoop {
    monitor: FlowMonitor<FlowKey>,
    setup: QdsSetup,
    capacity_bps: u64,
    next: Instant,
    periods: u64,
    /// The pairs' time origin for the oracle's truth: when the first packet of a pair
    /// (its SYN) crossed. The pump starts its sources 200 ms (`--start-delay`) after the
    /// last connection is up, so a mix's types change here that much early (docs/lab.md
    /// "Pairs").
    origin: Option<Instant>,
}

/// What one period decided: apply it to the downlink, log its records.
#[derive(Clone, Debug, PartialEq)]
pub struct Period {
    /// When.
    pub t: Instant,
    /// Every class's rate and ceil.
    pub rates: Vec<ClassRate>,
    /// (queue flow id, class) of every planned flow.
    pub assign: Vec<(u64, usize)>,
    /// One record per planned flow, then one per class.
    pub records: Vec<Record>,
}

impl QdsLoop {
    /// The loop of `setup` on a downlink of `capacity_bps`, started at `now` (the first
    /// period ends at `now + period`).
    pub fn new(setup: QdsSetup, capacity_bps: u64, now: Instant) -> Self {
        QdsLoop {
            monitor: FlowMonitor::new(setup.monitor),
            next: now + setup.cfg.period,
            setup,
            capacity_bps,
            periods: 0,
            origin: None,
        }
    }

    /// IP packet `data` crossed the middlebox at `now` toward `toward` (see the module
    /// documentation for where each direction is observed). Anything but TCP is ignored.
    pub fn observe(&mut self, now: Instant, toward: Toward, data: &[u8]) {
        if let Frame::Tcp(p) = ip::parse(DataLink::RAW, data) {
            let key = p.flow_key(toward);
            if self.origin.is_none()
                && self.setup.truth.as_ref().is_some_and(|t| t.pair_of(key.server.port()).is_some())
            {
                self.origin = Some(now);
            }
            self.monitor.observe(now, key, toward, &p.segment());
        }
    }

    /// When the next period ends.
    pub fn poll_timeout(&self) -> Instant {
        self.next
    }

    /// Run the period if it is due at `now`. A driver that woke up late runs one period
    /// and keeps the grid (the next ends at the first grid point after `now`).
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Period> {
        if now < self.next {
            return None;
        }
        while self.next <= now {
            self.next += self.setup.cfg.period;
        }
        self.periods += 1;
        Some(self.period(now))
    }

    /// Periods run so far.
    pub fn periods(&self) -> u64 {
        self.periods
    }

    /// Flows tracked now.
    pub fn flows(&self) -> usize {
        self.monitor.len()
    }

    /// The monitor's counters.
    pub fn monitor_stats(&self) -> MonitorStats {
        self.monitor.stats()
    }

    fn period(&mut self, now: Instant) -> Period {
        self.monitor.expire(now);
        let s = &self.setup;
        let since_start = self.origin.map_or(Duration::ZERO, |o| now - o);
        let views = self.monitor.views(now);
        // Every flow, an untimed one with RTT 0, as the simulator (`controller::inputs`).
        let inputs = controller::inputs(&views, |key, v| match &s.model {
            Some(m) => m.predict(&v.features),
            None => s.listed(key, since_start).unwrap_or(s.oracle_default),
        });
        let records: Vec<FlowRecord> = views
            .iter()
            .zip(&inputs)
            .map(|((key, v), input)| FlowRecord {
                t: now,
                key: *key,
                flow: fwd_flow_id(key),
                rate_bps: v.rate_bps,
                rate_up_bps: v.rate_up_bps,
                rtt_s: v.rtt.map_or(f64::NAN, |r| r.as_secs_f64()),
                class: 0,
                app: input.app,
                app_true: s.listed(key, since_start),
                partial: v.partial,
            })
            .collect();
        let p = plan(&s.cfg, &inputs, self.capacity_bps);
        let assign: Vec<(u64, usize)> = p.class_of.iter().map(|(k, c)| (fwd_flow_id(k), *c)).collect();
        let mut records: Vec<Record> = records
            .into_iter()
            .zip(&p.class_of)
            .map(|(mut r, &(_, c))| {
                r.class = c as u16;
                Record::Flow(r)
            })
            .collect();
        for (k, (w, r)) in p.weights.iter().zip(&p.rates).enumerate() {
            let flows = p.class_of.iter().filter(|&&(_, c)| c == k).count();
            records.push(Record::Class(ClassRecord {
                t: now,
                class: k as u16,
                rate_bps: r.rate_bps,
                ceil_bps: r.ceil_bps,
                weight: *w,
                flows: flows as u32,
            }));
        }
        Period { t: now, rates: p.rates, assign, records }
    }
}

impl Period {
    /// Set the class rates and filters on `dir` (the `fwd` direction) at its time; false
    /// if its discipline has no classes.
    pub fn apply(&self, dir: &mut Direction, events: &mut Vec<Event>) -> bool {
        dir.with_classes(self.t, events, |c| {
            c.set_rates(self.t, &self.rates);
            for &(flow, class) in &self.assign {
                c.assign(flow, class);
            }
        })
        .is_some()
    }
}

#[cfg(test)]
mod tests;

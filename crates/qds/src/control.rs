//! Who decides each flow's class and the class rates: the seam between the daemon's
//! I/O (capture, netlink) and the decision. [`Static`] uses fixed tables from the
//! configuration; `engine::Qds` runs proto's monitor, classifier and QDS controller.

use std::collections::BTreeMap;

use thinwan_proto::{Duration, Instant};

use std::net::IpAddr;

use thinwan_capture::ip::TcpPacket;
use thinwan_proto::qds::classify::N_FEATURES;
use thinwan_proto::qds::monitor::{Segment, Toward};

use crate::config::{Config, StaticKeys};
use crate::htb::Rate;
use crate::tc::FiveTuple;

/// One managed flow's state after a period, for the filters and the metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowReport {
    /// The flow.
    pub flow: FiveTuple,
    /// Its class.
    pub class: usize,
    /// Its application type, when known (`video`, `data`, …).
    pub app: Option<&'static str>,
    /// Its estimated RTT in seconds, when measured.
    pub rtt: Option<f64>,
    /// The monitor's client half and server half, seconds, when timed.
    pub halves: (Option<f64>, Option<f64>),
    /// Its rate toward the client, bit/s, when measured.
    pub rate_bps: Option<f64>,
    /// The classifier's input (`Features::as_array`, in `Features::NAMES` order), when
    /// the monitor computed it.
    pub features: Option<[f64; N_FEATURES]>,
}

/// What to program for the next period.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// Every managed flow, with its class.
    pub flows: Vec<FlowReport>,
    /// Rate and ceil of every class, bytes/s.
    pub rates: Vec<Rate>,
}

/// A class decider. Call order: [`Control::observe`] for every captured packet of a
/// managed flow, [`Control::tick`] once per period.
pub trait Control {
    /// Number of classes (fixed for the daemon's life).
    fn classes(&self) -> usize;
    /// Class rates before any traffic.
    fn initial_rates(&self) -> Vec<Rate>;
    /// One packet of `flow` travelling `toward`.
    fn observe(&mut self, now: Instant, flow: FiveTuple, toward: Toward, seg: &Segment);
    /// The period's decision.
    fn tick(&mut self, now: Instant) -> Decision;
}

/// The flow a packet belongs to, oriented server → client, if it is managed.
pub fn flow_of(cfg: &Config, toward: Toward, p: &TcpPacket) -> Option<FiveTuple> {
    // IPv4 only: the u32 filters match IPv4 header offsets.
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (p.src, p.dst) else { return None };
    let f = match toward {
        Toward::Client => FiveTuple { server: src, server_port: p.sport, client: dst, client_port: p.dport },
        Toward::Server => FiveTuple { server: dst, server_port: p.dport, client: src, client_port: p.sport },
    };
    cfg.is_server(f.server, f.server_port).then_some(f)
}

/// A flow idle this long is forgotten (its filter removed): the monitor's default.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Fixed class rates and a fixed flow → class table (`controller = "static"`).
pub struct Static {
    table: StaticKeys,
    capacity: u64,
    seen: BTreeMap<FiveTuple, Instant>,
}

impl Static {
    /// From `[static]` and the capacity in bytes/s.
    pub fn new(table: StaticKeys, capacity: u64) -> Static {
        Static { table, capacity, seen: BTreeMap::new() }
    }

    fn rates(&self) -> Vec<Rate> {
        self.table
            .rates_mbps
            .iter()
            .map(|r| Rate { rate: (r * 1e6 / 8.0).round() as u64, ceil: self.capacity })
            .collect()
    }
}

impl Control for Static {
    fn classes(&self) -> usize {
        self.table.rates_mbps.len()
    }

    fn initial_rates(&self) -> Vec<Rate> {
        self.rates()
    }

    fn observe(&mut self, now: Instant, flow: FiveTuple, _toward: Toward, _seg: &Segment) {
        self.seen.insert(flow, now);
    }

    fn tick(&mut self, now: Instant) -> Decision {
        self.seen.retain(|_, last| now.saturating_since(*last) < IDLE_TIMEOUT);
        let last = self.classes() - 1;
        let flows = self
            .seen
            .keys()
            .map(|f| {
                let class = self
                    .table
                    .flows
                    .iter()
                    .find(|e| e.flow.matches(f.server, f.server_port))
                    .map_or(last, |e| e.class);
                FlowReport {
                    flow: *f,
                    class,
                    app: None,
                    rtt: None,
                    halves: (None, None),
                    rate_bps: None,
                    features: None,
                }
            })
            .collect();
        Decision { flows, rates: self.rates() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FlowMatch, StaticFlow};

    #[test]
    fn static_table_assigns_and_expires() {
        let keys = StaticKeys {
            rates_mbps: vec![8.0, 2.0],
            flows: vec![StaticFlow { flow: FlowMatch { port: Some(5001), address: None }, class: 0 }],
        };
        let mut s = Static::new(keys, 2_500_000);
        let a = FiveTuple {
            server: [198, 18, 1, 1].into(),
            server_port: 5001,
            client: [198, 18, 2, 1].into(),
            client_port: 40000,
        };
        let b = FiveTuple { server_port: 5002, ..a };
        s.observe(Instant::ZERO, a, Toward::Client, &Segment::default());
        s.observe(Instant::from_nanos(1), b, Toward::Client, &Segment::default());
        let d = s.tick(Instant::from_nanos(2));
        assert_eq!(d.flows.iter().map(|f| f.class).collect::<Vec<_>>(), vec![0, 1], "unmatched → last class");
        assert_eq!(
            d.rates,
            vec![Rate { rate: 1_000_000, ceil: 2_500_000 }, Rate { rate: 250_000, ceil: 2_500_000 }]
        );
        let later = Instant::from_nanos(IDLE_TIMEOUT.as_nanos() + 1);
        assert!(s.tick(later).flows.is_empty(), "idle flows are forgotten");
    }
}

//! thinwan-link's `pairs` object: what the lab knows about each (server, client) pair
//! of a run, keyed by the fixed server port of its connection (the pump binds pair i to
//! `server_port_base + i`, `thinwan-net pump --local-port-base`; docs/lab.md "Pairs"):
//!
//! - `client_delays_ms`: pair i's client's base one-way delay, added in both directions
//!   to the link's `delay_ms` (the middlebox topology's per-client delays, drawn by the
//!   core: `thinwan_proto::clients`), so one client namespace stands for N clients on
//!   links of their own;
//! - `traffic`: the pump's traffic model (its `traffic.json`), from which the QDS loop's
//!   oracle takes each pair's true application type at the time
//!   (`thinwan_proto::qds::truth::pair_app`), as the simulator's oracle reads its writes'
//!   labels.

use serde::{Deserialize, Serialize};
use thinwan_proto::link::LinkDir;
use thinwan_proto::traffic::TrafficSpec;
use thinwan_proto::Duration;

use crate::config::ConfigError;
use crate::packet::Summary;
use crate::pump::TrafficConfig;

/// The `pairs` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairsConfig {
    /// Pair i's connection has server port `server_port_base + i`.
    pub server_port_base: u16,
    /// How many pairs.
    pub count: u32,
    /// Per pair, its client's base one-way delay, ms, added both ways (empty: none).
    #[serde(default)]
    pub client_delays_ms: Vec<f64>,
    /// The pairs' traffic model (the pump's `--traffic` JSON): the QDS oracle's truth.
    #[serde(default)]
    pub traffic: Option<TrafficConfig>,
}

impl PairsConfig {
    /// Check every value; errors name the key (`pairs.count: …`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |key: &str, msg: String| Err(ConfigError(format!("pairs.{key}: {msg}")));
        if self.count == 0 {
            return err("count", "must be ≥ 1".into());
        }
        if self.server_port_base as u64 + self.count as u64 - 1 > u16::MAX as u64
            || self.server_port_base == 0
        {
            return err(
                "server_port_base",
                format!("{} + {} pairs do not fit in ports 1–65535", self.server_port_base, self.count),
            );
        }
        let n = self.client_delays_ms.len();
        if n != 0 && n != self.count as usize {
            return err("client_delays_ms", format!("{n} delays for {} pairs", self.count));
        }
        if let Some(i) = self.client_delays_ms.iter().position(|d| !(d.is_finite() && *d >= 0.0)) {
            return err(&format!("client_delays_ms[{i}]"), "must be a finite number ≥ 0".into());
        }
        if let Some(t) = &self.traffic {
            t.spec().map_err(|e| ConfigError(format!("pairs.{e}")))?;
        }
        Ok(())
    }

    /// Per-pair delays for the link's direction `dir` (None without delays).
    pub fn delays(&self, dir: LinkDir) -> Option<PairDelays> {
        (!self.client_delays_ms.is_empty()).then(|| PairDelays {
            base: self.server_port_base,
            delays: self.client_delays_ms.iter().map(|&d| Duration::from_millis_f64(d)).collect(),
            dir,
        })
    }

    /// The oracle's truth, when the traffic is given (validated: cannot fail then).
    pub fn truth(&self) -> Result<Option<PairTruth>, ConfigError> {
        let Some(t) = &self.traffic else { return Ok(None) };
        let spec = t.spec().map_err(|e| ConfigError(format!("pairs.{e}")))?;
        Ok(Some(PairTruth { base: self.server_port_base, count: self.count, spec }))
    }
}

/// The extra delay of each pair's packets in one direction of the link.
#[derive(Clone, Debug)]
pub struct PairDelays {
    base: u16,
    delays: Vec<Duration>,
    dir: LinkDir,
}

impl PairDelays {
    /// The extra delay of packet `h`: its pair's, found by the server port (the source
    /// port going to the clients, `fwd`; the destination port coming back, `rev`); zero
    /// for a packet of no pair.
    pub fn of(&self, h: &Summary) -> Duration {
        let port = match self.dir {
            LinkDir::Fwd => h.sport,
            LinkDir::Rev => h.dport,
        };
        port.checked_sub(self.base)
            .and_then(|i| self.delays.get(i as usize))
            .copied()
            .unwrap_or(Duration::ZERO)
    }
}

/// Each pair's traffic model: the QDS oracle's truth.
#[derive(Clone, Debug)]
pub struct PairTruth {
    base: u16,
    count: u32,
    spec: TrafficSpec,
}

impl PairTruth {
    /// The pair whose connection has server port `port`.
    pub fn pair_of(&self, port: u16) -> Option<u32> {
        let i = port.checked_sub(self.base)? as u32;
        (i < self.count).then_some(i)
    }

    /// The true type of the flow with server port `port`, `since_start` after the
    /// run's start; None for a flow of no pair.
    pub fn app(&self, port: u16, since_start: Duration) -> Option<thinwan_proto::qds::classify::AppType> {
        let pair = self.pair_of(port)?;
        let app = thinwan_proto::qds::truth::pair_app(&self.spec, pair, since_start);
        Some(thinwan_proto::qds::truth::app_type(app))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use thinwan_proto::qds::classify::AppType;
    use thinwan_proto::traffic::{AppKeys, Model};

    fn mix_pairs(change_s: f64) -> PairsConfig {
        let traffic = TrafficConfig {
            model: Model::Mix,
            apps: AppKeys {
                mix: vec![(Model::Video, 1), (Model::Data, 2)],
                mix_change_s: change_s,
                ..AppKeys::default()
            },
            ..TrafficConfig::default()
        };
        PairsConfig {
            server_port_base: 20000,
            count: 3,
            client_delays_ms: vec![5.0, 7.5, 10.0],
            traffic: Some(traffic),
        }
    }

    fn header(sport: u16, dport: u16) -> Summary {
        Summary { proto: 6, sport, dport, ..Summary::default() }
    }

    #[test]
    fn each_pair_gets_its_delay_by_the_server_port_both_ways() {
        let p = mix_pairs(0.0);
        let fwd = p.delays(LinkDir::Fwd).unwrap();
        let rev = p.delays(LinkDir::Rev).unwrap();
        // Server → client: the server port is the source port; back, the destination.
        assert_eq!(fwd.of(&header(20001, 5001)), Duration::from_micros(7500));
        assert_eq!(rev.of(&header(5001, 20002)), Duration::from_millis(10));
        // The client's port says nothing; ports of no pair get no extra delay.
        assert_eq!(fwd.of(&header(5001, 20001)), Duration::ZERO);
        assert_eq!(fwd.of(&header(20003, 5001)), Duration::ZERO);
        assert_eq!(fwd.of(&header(19999, 5001)), Duration::ZERO);
        assert!(PairsConfig { client_delays_ms: vec![], ..p }.delays(LinkDir::Fwd).is_none());
    }

    #[test]
    fn the_truth_follows_the_mix_and_its_rotation() {
        let t = mix_pairs(60.0).truth().unwrap().expect("traffic given");
        let s = Duration::from_secs_f64;
        // Phase 0: pair 0 video, pairs 1–2 data; phase 1 (shift = 1, the video count):
        // pair i runs position (i + 1) mod 3, so pair 2 carries the video.
        assert_eq!(t.app(20000, s(10.0)), Some(AppType::Video));
        assert_eq!(t.app(20001, s(59.9)), Some(AppType::Data));
        assert_eq!(t.app(20002, s(60.1)), Some(AppType::Video));
        assert_eq!(t.app(20000, s(60.1)), Some(AppType::Data));
        assert_eq!(t.app(20003, s(1.0)), None, "no pair");
        let fixed = mix_pairs(0.0).truth().unwrap().unwrap();
        assert_eq!(fixed.app(20000, s(1000.0)), Some(AppType::Video), "no rotation");
    }

    #[test]
    fn bad_values_name_their_key() {
        let err = |p: PairsConfig| p.validate().unwrap_err().0;
        assert!(err(PairsConfig { count: 0, ..mix_pairs(0.0) }).starts_with("pairs.count"));
        assert!(err(PairsConfig { server_port_base: 65535, ..mix_pairs(0.0) })
            .starts_with("pairs.server_port_base"));
        assert!(err(PairsConfig { client_delays_ms: vec![1.0], ..mix_pairs(0.0) })
            .starts_with("pairs.client_delays_ms"));
        let e = err(PairsConfig { client_delays_ms: vec![1.0, -2.0, 3.0], ..mix_pairs(0.0) });
        assert!(e.starts_with("pairs.client_delays_ms[1]"), "{e}");
        let mut bad = mix_pairs(0.0);
        if let Some(t) = bad.traffic.as_mut() {
            t.apps.mix.clear();
        }
        assert!(err(bad).starts_with("pairs.traffic"));
        mix_pairs(60.0).validate().unwrap();
    }
}

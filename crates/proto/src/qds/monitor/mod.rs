//! The passive flow monitor: per TCP flow crossing the middlebox, the RTT of each half,
//! the flow's rates and the features of its traffic (spec "Passive RTT estimation").
//!
//! Call order: [`FlowMonitor::observe`] for every TCP packet that crosses the middlebox,
//! in capture order, with the time it passed; [`FlowMonitor::expire`] now and then (each
//! control period) to forget idle and closed flows; [`FlowMonitor::views`] when the
//! controller needs the flows. Only TCP headers are read ([`Segment`]), never payload.
//!
//! **The two halves.** A packet toward the client and the client's answer time the
//! *client half* (middlebox → client → middlebox); a packet toward the server and the
//! server's answer time the *server half*. Flow RTT = client half + server half, each
//! the average of its last `rtt_samples` samples ([`rtt`] says how samples are taken:
//! data → covering ACK with Karn's rule per segment, TCP timestamps of what the end must
//! answer promptly, the handshake).
//!
//! **A half never timed.** With the server sending nearly everything, no timestamps and
//! the handshake before the monitor started, nothing toward the server is ever answered
//! in a way the monitor can time, so the server half has no sample. The view then gives
//! `server_half = None`, counts it as 0 in `rtt` and sets [`FlowView::partial`]. The
//! server half is the short one in QDS's setting (the middlebox sits next to the
//! servers, spec "Setting"), so `rtt` is then a slight underestimate rather than a
//! guess. A half that *was* timed keeps its last samples however old (its last known
//! value) until the flow ends.
//!
//! **Memory** is bounded: at most `max_flows` flows (a new flow beyond that evicts the
//! least recently seen, to a resolution of [`LRU_TICK_NS`]), at most `max_pending`
//! timed sends and TSvals per half, `rtt_samples` samples per half, and constant-size
//! rate and feature windows. FIN in both directions or a RST closes a flow: its view
//! disappears at once, its state at the next [`FlowMonitor::expire`].

mod rtt;
mod stats;
#[cfg(test)]
mod tests;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use crate::qds::classify::Features;
use crate::time::{Duration, Instant};

use rtt::{Half, Sent, Source};
use stats::{Rate, Shape};

/// Least-recently-seen order is kept to this resolution (2^20 ns ≈ 1.05 ms): a flow's
/// place in the eviction order moves at most once per tick, so the order costs nothing
/// on most packets of a busy flow.
pub const LRU_TICK_NS: u64 = 1 << 20;

/// Which way a packet crosses the middlebox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Toward {
    /// From the server toward the client (the congested downlink).
    Client,
    /// From the client toward the server.
    Server,
}

impl Toward {
    /// The other way.
    pub fn reverse(self) -> Toward {
        match self {
            Toward::Client => Toward::Server,
            Toward::Server => Toward::Client,
        }
    }

    fn index(self) -> usize {
        match self {
            Toward::Client => 0,
            Toward::Server => 1,
        }
    }
}

/// The TCP header fields the monitor reads (payload never).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number (meaningful when `has_ack`).
    pub ack: u32,
    /// ACK flag set.
    pub has_ack: bool,
    /// SYN flag.
    pub syn: bool,
    /// FIN flag.
    pub fin: bool,
    /// RST flag.
    pub rst: bool,
    /// TCP payload bytes.
    pub payload: u32,
    /// IP length on the wire.
    pub wire_len: u32,
    /// TCP timestamps option (RFC 7323 §3): (TSval, TSecr).
    pub ts: Option<(u32, u32)>,
}

/// Limits and windows of the monitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MonitorConfig {
    /// Samples per half in the sliding-window average (spec: "the last few samples").
    pub rtt_samples: usize,
    /// Window of the rates and of the features.
    pub rate_window: Duration,
    /// A flow not seen for this long is forgotten by [`FlowMonitor::expire`].
    pub idle_timeout: Duration,
    /// Most flows tracked at once.
    pub max_flows: usize,
    /// Most timed sends (and, separately, TSvals) waiting for an answer, per half.
    pub max_pending: usize,
}

impl Default for MonitorConfig {
    /// 8 samples (smooths the per-ACK jitter of one window of a thin flow while following
    /// a queue that builds within a 100-ms period); 1 s of rate (ten 100-ms control periods,
    /// long enough for a 1 Mbit/s flow to show ~80 packets); 30 s idle (longer than a
    /// remote desktop's keep-alive interval of a few seconds to tens of seconds, so idle
    /// sessions stay known); 65,536 flows (a few hundred thin-client flows with room to
    /// spare, ≈ 1 KB each in steady state); 64 pending per half (a 100-ms half at
    /// 5 Mbit/s has ~40 full segments in flight).
    fn default() -> Self {
        MonitorConfig {
            rtt_samples: 8,
            rate_window: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(30),
            max_flows: 65_536,
            max_pending: 64,
        }
    }
}

/// What the monitor knows of one flow at a given time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowView {
    /// Sliding-window average of the client half (middlebox → client → middlebox); None
    /// before its first sample.
    pub client_half: Option<Duration>,
    /// Same for the server half.
    pub server_half: Option<Duration>,
    /// Client half + server half, a never-timed half counted as 0 (then `partial`); None
    /// while neither half has a sample.
    pub rtt: Option<Duration>,
    /// Exactly one half has never been timed: `rtt` is that of the other half alone.
    pub partial: bool,
    /// Bits per second toward the client (IP bytes) over `rate_window`.
    pub rate_bps: f64,
    /// Bits per second toward the server over `rate_window`.
    pub rate_up_bps: f64,
    /// Features of the traffic toward the client, for the classifier.
    pub features: Features,
    /// Samples taken so far: (client half, server half).
    pub samples: (u64, u64),
}

/// Counters of the monitor as a whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MonitorStats {
    /// Packets observed.
    pub packets: u64,
    /// Flows started (first packet, or a SYN reopening a closed flow).
    pub flows_started: u64,
    /// Flows evicted to stay within `max_flows`.
    pub evicted: u64,
    /// Flows forgotten after `idle_timeout`.
    pub expired: u64,
    /// Flows closed by FIN in both directions or RST.
    pub closed: u64,
    /// RTT samples from data → covering ACK (the handshake included).
    pub samples_seq: u64,
    /// RTT samples from TCP timestamps.
    pub samples_ts: u64,
    /// Pending samples discarded by Karn's rule.
    pub ambiguous: u64,
    /// Keep-alives seen (not timed).
    pub keepalives: u64,
}

/// Per-flow monitor. `K` identifies a flow (the sim: a connection id; the daemon: a
/// 4-tuple normalised so both directions give the same key); flows are kept and
/// reported in key order, so everything is deterministic.
#[derive(Clone, Debug)]
pub struct FlowMonitor<K: Ord + Copy> {
    cfg: MonitorConfig,
    flows: BTreeMap<K, Flow>,
    /// (LRU tick of the last packet, key): the eviction order.
    lru: BTreeSet<(u64, K)>,
    /// Flows closed since the last expire.
    closed: Vec<K>,
    stats: MonitorStats,
    /// rate_window / 10 and rate_window in ns (at least 1).
    rate_width: u64,
    window: u64,
}

#[derive(Clone, Debug)]
struct Flow {
    last_seen: Instant,
    tick: u64,
    /// Indexed by [`Toward::index`] of the packets that time it: [client half, server half].
    halves: [Half; 2],
    /// Bytes per direction, indexed the same way.
    rates: [Rate; 2],
    shape: Shape,
    fin: [bool; 2],
    closed: bool,
}

impl Flow {
    fn new(now: Instant) -> Flow {
        Flow {
            last_seen: now,
            tick: now.as_nanos() / LRU_TICK_NS,
            halves: Default::default(),
            rates: [Rate::new(now), Rate::new(now)],
            shape: Shape::default(),
            fin: [false; 2],
            closed: false,
        }
    }
}

impl<K: Ord + Copy> FlowMonitor<K> {
    /// An empty monitor.
    pub fn new(cfg: MonitorConfig) -> Self {
        let window = cfg.rate_window.as_nanos().max(10);
        FlowMonitor {
            cfg,
            flows: BTreeMap::new(),
            lru: BTreeSet::new(),
            closed: Vec::new(),
            stats: MonitorStats::default(),
            rate_width: window / 10,
            window,
        }
    }

    /// A packet of flow `key` crossed the middlebox `toward` one end at `now`.
    pub fn observe(&mut self, now: Instant, key: K, toward: Toward, seg: &Segment) {
        self.observe_sample(now, key, toward, seg);
    }

    /// [`FlowMonitor::observe`], also returning the RTT sample the packet gave, if any:
    /// the half it timed (`Toward::Client`: the client half) and the sample itself, before
    /// any averaging (`thinwan analyze` reports each half's median and p90 from these).
    pub fn observe_sample(
        &mut self,
        now: Instant,
        key: K,
        toward: Toward,
        seg: &Segment,
    ) -> Option<(Toward, Duration)> {
        self.stats.packets += 1;
        let tick = now.as_nanos() / LRU_TICK_NS;
        let reopen = seg.syn && !seg.has_ack;
        if self.flows.len() >= self.cfg.max_flows.max(1) && !self.flows.contains_key(&key) {
            self.evict_one();
        }
        let flow = match self.flows.entry(key) {
            Entry::Vacant(v) => {
                self.stats.flows_started += 1;
                self.lru.insert((tick, key));
                v.insert(Flow::new(now))
            }
            Entry::Occupied(o) => {
                let f = o.into_mut();
                if f.closed {
                    if !reopen {
                        // Late packets of a closed flow (the last ACK, a retransmitted
                        // FIN) do not bring it back; it goes at the next expire.
                        f.last_seen = now;
                        return None;
                    }
                    // A new connection on the same key.
                    self.lru.remove(&(f.tick, key));
                    *f = Flow::new(now);
                    self.lru.insert((tick, key));
                    self.stats.flows_started += 1;
                }
                f
            }
        };
        // Only forward: a packet slightly out of time order does not make a flow older.
        if flow.tick < tick {
            self.lru.remove(&(flow.tick, key));
            self.lru.insert((tick, key));
            flow.tick = tick;
        }
        flow.last_seen = flow.last_seen.max(now);
        let (d, r) = (toward.index(), toward.reverse().index());
        flow.rates[d].add(now, seg.wire_len, self.rate_width);
        if toward == Toward::Client && seg.payload > 0 {
            flow.shape.add(now, seg.wire_len, self.window);
        }

        // The segment answers what was sent toward its sender: that half's sample.
        let tsecr = seg.ts.filter(|_| seg.has_ack).map(|(_, e)| e);
        let ack = seg.has_ack.then_some(seg.ack);
        let mut sample = None;
        if let Some((rtt, src)) = flow.halves[r].on_answer(now, ack, tsecr) {
            flow.halves[r].push(rtt, self.cfg.rtt_samples);
            sample = Some((toward.reverse(), rtt));
            match src {
                Source::Seq => self.stats.samples_seq += 1,
                Source::Timestamp => self.stats.samples_ts += 1,
            }
        }
        // And it is itself a send toward `toward`, to be answered by that end.
        let len = seg.payload.saturating_add(u32::from(seg.syn) + u32::from(seg.fin));
        match flow.halves[d].on_sent(now, seg.seq, len, seg.ts.map(|(v, _)| v), seg.syn, self.cfg.max_pending)
        {
            Sent::Normal => {}
            Sent::KeepAlive => self.stats.keepalives += 1,
            Sent::Retransmission(n) => self.stats.ambiguous += n as u64,
        }

        if seg.rst || seg.fin {
            flow.fin[d] |= seg.fin;
            if seg.rst || flow.fin[r] {
                flow.closed = true;
                self.stats.closed += 1;
                self.closed.push(key);
            }
        }
        sample
    }

    /// Forget flows idle for longer than `idle_timeout`, and closed flows.
    pub fn expire(&mut self, now: Instant) {
        for key in std::mem::take(&mut self.closed) {
            if self.flows.get(&key).is_some_and(|f| f.closed) {
                self.remove(&key);
            }
        }
        let Some(cutoff) = now.as_nanos().checked_sub(self.cfg.idle_timeout.as_nanos()) else {
            return;
        };
        // Candidates: every flow whose tick is not after the cutoff's; the exact time
        // decides within the cutoff's own tick.
        let last_tick = cutoff / LRU_TICK_NS;
        let idle: Vec<K> = self
            .lru
            .iter()
            .take_while(|(t, _)| *t <= last_tick)
            .filter(|(_, k)| self.flows.get(k).is_some_and(|f| f.last_seen.as_nanos() < cutoff))
            .map(|&(_, k)| k)
            .collect();
        self.stats.expired += idle.len() as u64;
        for key in idle {
            self.remove(&key);
        }
    }

    /// Every open flow's view at `now`, in key order.
    pub fn views(&self, now: Instant) -> Vec<(K, FlowView)> {
        self.flows.iter().filter(|(_, f)| !f.closed).map(|(k, f)| (*k, self.view_of(now, f))).collect()
    }

    /// One open flow's view at `now`.
    pub fn view(&self, now: Instant, key: &K) -> Option<FlowView> {
        self.flows.get(key).filter(|f| !f.closed).map(|f| self.view_of(now, f))
    }

    /// Flows tracked (closed ones included until the next [`FlowMonitor::expire`]).
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// No flow tracked.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// The counters.
    pub fn stats(&self) -> MonitorStats {
        self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &MonitorConfig {
        &self.cfg
    }

    fn view_of(&self, now: Instant, f: &Flow) -> FlowView {
        let client_half = f.halves[Toward::Client.index()].average();
        let server_half = f.halves[Toward::Server.index()].average();
        let rtt = match (client_half, server_half) {
            (None, None) => None,
            (c, s) => Some(c.unwrap_or(Duration::ZERO) + s.unwrap_or(Duration::ZERO)),
        };
        let rate_bps = f.rates[Toward::Client.index()].bps(now, self.rate_width);
        let rate_up_bps = f.rates[Toward::Server.index()].bps(now, self.rate_width);
        let features =
            Features { rate_down_bps: rate_bps, rate_up_bps, ..f.shape.features(now, self.window) };
        FlowView {
            client_half,
            server_half,
            rtt,
            partial: client_half.is_some() != server_half.is_some(),
            rate_bps,
            rate_up_bps,
            features,
            samples: (f.halves[0].samples(), f.halves[1].samples()),
        }
    }

    fn evict_one(&mut self) {
        // Closed flows first: they are gone anyway.
        while let Some(key) = self.closed.pop() {
            if self.flows.get(&key).is_some_and(|f| f.closed) {
                self.remove(&key);
                return;
            }
        }
        if let Some((_, key)) = self.lru.pop_first() {
            self.flows.remove(&key);
            self.stats.evicted += 1;
        }
    }

    fn remove(&mut self, key: &K) {
        if let Some(f) = self.flows.remove(key) {
            self.lru.remove(&(f.tick, *key));
        }
    }

    #[cfg(test)]
    fn pending(&self, key: &K, toward: Toward) -> (usize, usize) {
        self.flows[key].halves[toward.index()].pending_len()
    }
}

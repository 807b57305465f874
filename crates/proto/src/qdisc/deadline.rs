//! Earliest deadline first over per-flow queues: QDS's budget order applied per packet
//! (`queue.discipline = "qds"` with `queue.qds_order = "deadline"`; docs/qds.md
//! "Deadline order").
//!
//! A controller gives each flow a *slack* ([`DeadlineControl::set_slacks`]): how long its
//! packets may wait here and still arrive within their application's threshold (QDS:
//! the flow's delay budget DB = QT − RTT, at least 0). A packet arriving at `t` gets
//! the deadline `t + slack` of its flow, fixed at arrival. Dequeue sends the head of the
//! flow queue whose head has the earliest deadline (ties: the lower flow id), so
//!
//! - a packet near its deadline goes before one with slack to spare, whatever the flows'
//!   rates — data packets with slack wait only while video packets are near theirs;
//! - packets of one flow never overtake each other (a flow's queue is FIFO; when its
//!   slack shrinks, a later packet waits behind the flow's head);
//! - it is work-conserving (a packet is sent whenever one is queued) and starves no
//!   flow: a packet with deadline `d` waits only for packets whose deadlines are ≤ `d`,
//!   and every packet arriving after `d` has a deadline after `d` (slack ≥ 0), so its
//!   wait is at most its slack plus the time to send what was queued by then.
//!
//! The spec rejects per-packet EDF for its cost and for starving flows above 100 % load
//! (spec "Algorithm"); here the order is per flow (one ordered set entry per
//! backlogged flow, O(log flows) per packet) and the starvation bound above holds at any
//! load, because deadlines are fixed at arrival and slack is never negative.
//!
//! **Full buffer [ours].** The arrival or the queued packet with the latest deadline —
//! the one that can best afford a loss's repair round trip — is dropped: a flow's
//! tail (its latest packet) is pushed out when its deadline is later than the
//! arrival's (`DropReason::PushedOut`), else the arrival is dropped (`Overflow`).
//!
//! **CoDel on lateness [ours]** ([`Deadline::with_codel`], `queue.class_codel`): each
//! flow queue runs CoDel (RFC 8289) on the time its head is past its *deadline*
//! instead of its sojourn time. A flow whose packets keep leaving more than `target`
//! after their deadlines for an `interval` is sending more than the link can give it in
//! time, so it is the one told to slow down (by a head drop, RFC 8289 §5.5); a flow
//! that waits by design (large slack) but leaves in time is never dropped.

use super::codel::{Codel, CodelParams, Stamped};
use super::{DropReason, Dropped, Limits, QueueDisc, QueueItem, QueueStats};
use crate::time::{Duration, Instant};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// What a controller changes on a [`Deadline`] queue at run time.
pub trait DeadlineControl {
    /// Replace every flow's slack: `slacks` lists (flow, slack); flows not listed get
    /// `default`. Packets already queued keep their deadlines.
    fn set_slacks(&mut self, slacks: &[(u64, Duration)], default: Duration);
}

/// The EDF discipline; see the module documentation.
#[derive(Debug)]
pub struct Deadline<P> {
    limits: Limits,
    slack: BTreeMap<u64, Duration>,
    default_slack: Duration,
    /// Per-flow FIFO queues; each packet stamped with its deadline.
    flows: BTreeMap<u64, FlowQueue<P>>,
    /// (deadline of the head, flow) of every backlogged flow: the service order.
    order: BTreeSet<(Instant, u64)>,
    codel: Option<CodelParams>,
    /// CoDel's head drops of the last dequeues, until [`QueueDisc::take_drops`].
    dropped: Vec<P>,
    bytes: u64,
    packets: usize,
    stats: QueueStats,
}

#[derive(Debug)]
struct FlowQueue<P> {
    /// `enqueued` holds the packet's deadline (CoDel then measures lateness).
    packets: VecDeque<Stamped<P>>,
    bytes: u64,
    codel: Codel,
}

impl<P: QueueItem> Deadline<P> {
    /// An EDF queue with a shared buffer of `limits`; every flow's slack is 0 (FIFO
    /// order) until [`DeadlineControl::set_slacks`].
    pub fn new(limits: Limits) -> Self {
        Deadline {
            limits,
            slack: BTreeMap::new(),
            default_slack: Duration::ZERO,
            flows: BTreeMap::new(),
            order: BTreeSet::new(),
            codel: None,
            dropped: Vec::new(),
            bytes: 0,
            packets: 0,
            stats: QueueStats::default(),
        }
    }

    /// Run CoDel with `params` on each flow queue's lateness (None: buffer drops only).
    pub fn with_codel(mut self, params: Option<CodelParams>) -> Self {
        self.codel = params;
        self
    }

    fn slack_of(&self, flow: u64) -> Duration {
        self.slack.get(&flow).copied().unwrap_or(self.default_slack)
    }

    /// Make room for a packet of `len` bytes due at `due` by pushing out the latest
    /// queued packets while theirs are later; false if the arrival itself must go.
    fn make_room(&mut self, due: Instant, len: u32, drops: &mut Vec<Dropped<P>>) -> bool {
        while !self.limits.fits(self.bytes, self.packets, len) {
            let latest = self
                .flows
                .iter()
                .filter_map(|(&flow, f)| f.packets.back().map(|p| (p.enqueued, flow)))
                .max();
            let Some((d, flow)) = latest.filter(|&(d, _)| d > due) else { return false };
            let f = self.flows.get_mut(&flow).expect("a flow with a tail");
            let p = f.packets.pop_back().expect("a flow with a tail").packet;
            f.bytes -= p.wire_len() as u64;
            if f.packets.is_empty() {
                self.flows.remove(&flow);
                self.order.remove(&(d, flow));
            }
            self.bytes -= p.wire_len() as u64;
            self.packets -= 1;
            self.stats.count_drop(DropReason::PushedOut);
            drops.push(Dropped { packet: p, reason: DropReason::PushedOut });
        }
        true
    }
}

impl<P: QueueItem> QueueDisc<P> for Deadline<P> {
    fn enqueue(&mut self, now: Instant, packet: P, drops: &mut Vec<Dropped<P>>) {
        let flow = packet.flow();
        let len = packet.wire_len();
        let due = now + self.slack_of(flow);
        if !self.make_room(due, len, drops) {
            self.stats.count_drop(DropReason::Overflow);
            drops.push(Dropped { packet, reason: DropReason::Overflow });
            return;
        }
        let f = self.flows.entry(flow).or_insert_with(|| FlowQueue {
            packets: VecDeque::new(),
            bytes: 0,
            codel: Codel::default(),
        });
        if f.packets.is_empty() {
            self.order.insert((due, flow));
        }
        f.bytes += len as u64;
        f.packets.push_back(Stamped { packet, enqueued: due });
        self.bytes += len as u64;
        self.packets += 1;
        self.stats.enqueued += 1;
        self.stats.max_bytes = self.stats.max_bytes.max(self.bytes);
    }

    fn dequeue(&mut self, now: Instant) -> Option<P> {
        // Each turn sends a packet or (CoDel) drops at least one: ends within
        // `packets` turns.
        while let Some((_, flow)) = self.order.pop_first() {
            let f = self.flows.get_mut(&flow).expect("an ordered flow has a queue");
            let before = self.dropped.len();
            let p = match &self.codel {
                // CoDel reads `enqueued` as the arrival; the deadline there makes its
                // "sojourn" the lateness (0 until the deadline).
                Some(params) => f.codel.dequeue(params, now, &mut f.packets, &mut f.bytes, &mut self.dropped),
                None => f.packets.pop_front().map(|s| {
                    f.bytes -= s.packet.wire_len() as u64;
                    s.packet
                }),
            };
            for d in &self.dropped[before..] {
                self.bytes -= d.wire_len() as u64;
                self.packets -= 1;
                self.stats.count_drop(DropReason::Codel);
            }
            match f.packets.front() {
                Some(head) => {
                    self.order.insert((head.enqueued, flow));
                }
                None => {
                    self.flows.remove(&flow);
                }
            }
            if let Some(p) = p {
                self.bytes -= p.wire_len() as u64;
                self.packets -= 1;
                self.stats.dequeued += 1;
                return Some(p);
            }
        }
        None
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
    fn backlog_packets(&self) -> usize {
        self.packets
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn take_drops(&mut self, drops: &mut Vec<Dropped<P>>) {
        drops.extend(self.dropped.drain(..).map(|packet| Dropped { packet, reason: DropReason::Codel }));
    }
    fn deadlines(&mut self) -> Option<&mut dyn DeadlineControl> {
        Some(self)
    }
}

impl<P: QueueItem> DeadlineControl for Deadline<P> {
    fn set_slacks(&mut self, slacks: &[(u64, Duration)], default: Duration) {
        self.slack = slacks.iter().copied().collect();
        self.default_slack = default;
    }
}

#[cfg(test)]
mod tests;

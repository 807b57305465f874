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
//! **Full buffer.** The arrival is queued, then the head of the flow queue holding the
//! most bytes is dropped until the buffer fits (`DropReason::Overflow`), as FQ-CoDel
//! does (RFC 8290 §4.1, `fq_codel_drop`): the fattest flow is the one sending more than
//! its share, and a flow with little queued is never the victim. [ours, measured]
//! Dropping the latest deadline instead (the packet with the most slack) starved flows:
//! a flow not yet timed has the default slack, the largest, so under overload its
//! every packet was pushed out and it never got the RTT sample that would shorten its
//! slack (a 20-s run at c = 20, [3:9] left one flow with 1,460 bytes delivered).
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

    fn over_limits(&self) -> bool {
        self.limits.bytes.is_some_and(|b| self.bytes > b)
            || self.limits.packets.is_some_and(|p| self.packets > p)
    }

    fn slack_of(&self, flow: u64) -> Duration {
        self.slack.get(&flow).copied().unwrap_or(self.default_slack)
    }

    /// Drop the head of the flow queue with the most bytes (ties: more packets, then
    /// the lower flow id). False when nothing is queued.
    fn drop_from_fattest(&mut self, drops: &mut Vec<Dropped<P>>) -> bool {
        let fattest = self
            .flows
            .iter()
            .max_by_key(|(&flow, f)| (f.bytes, f.packets.len(), std::cmp::Reverse(flow)))
            .map(|(&flow, _)| flow);
        let Some(flow) = fattest else { return false };
        let f = self.flows.get_mut(&flow).expect("the fattest flow has a queue");
        let Some(head) = f.packets.pop_front() else { return false };
        self.order.remove(&(head.enqueued, flow));
        match f.packets.front() {
            Some(next) => {
                self.order.insert((next.enqueued, flow));
            }
            None => {
                self.flows.remove(&flow);
            }
        }
        let len = head.packet.wire_len();
        if let Some(f) = self.flows.get_mut(&flow) {
            f.bytes -= len as u64;
        }
        self.bytes -= len as u64;
        self.packets -= 1;
        self.stats.count_drop(DropReason::Overflow);
        drops.push(Dropped { packet: head.packet, reason: DropReason::Overflow });
        true
    }
}

impl<P: QueueItem> QueueDisc<P> for Deadline<P> {
    fn enqueue(&mut self, now: Instant, packet: P, drops: &mut Vec<Dropped<P>>) {
        let flow = packet.flow();
        let len = packet.wire_len();
        let due = now + self.slack_of(flow);
        if !self.limits.fits(0, 0, len) {
            // Larger than the whole buffer: no head drop would make room.
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
        while self.over_limits() && self.drop_from_fattest(drops) {}
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
                Some(params) => f.codel.dequeue(
                    params,
                    now,
                    &mut f.packets,
                    &mut f.bytes,
                    &mut self.dropped,
                    &mut self.stats.marks_ce,
                ),
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

//! FQ-CoDel (RFC 8290): flow queues served by deficit round robin, sparse flows first,
//! each queue under its own CoDel (RFC 8289, [`super::codel`]).
//!
//! - **Flows** (§4.1.1): a packet's [`QueueItem::flow`] is hashed into one of `flows`
//!   buckets; each bucket is a queue with its CoDel state and DRR deficit. The hash is
//!   fixed (optionally perturbed by a seed), so a run is repeatable.
//! - **Enqueue** (§4.1): the packet is stamped and appended to its queue; a queue that
//!   is on no list joins the tail of `new_flows` with a deficit of one `quantum`. Over
//!   the buffer limit, packets are dropped from the head of the queue holding the most
//!   bytes (the "fattest" flow), not the arrival.
//! - **Dequeue** (§4.2): `new_flows` is served before `old_flows`. A queue whose deficit
//!   is exhausted gets another `quantum` and moves to the tail of `old_flows`. A queue
//!   that CoDel leaves empty moves from `new_flows` to the tail of `old_flows` (if that
//!   list has any flow), so a flow cannot stay "new" by emptying and refilling its
//!   queue and starve the old ones (§4.2's last paragraph); an empty old queue leaves
//!   the lists. A flow sending less than one quantum per round is thus always new:
//!   sparse flows go first (§4.3).

use super::codel::{Codel, CodelParams, Stamped};
use super::{DropReason, Dropped, Limits, QueueDisc, QueueItem, QueueStats};
use crate::time::Instant;
use std::collections::VecDeque;

/// FQ-CoDel's parameters (RFC 8290 §4–5; defaults of §5.2 and Linux `sch_fq_codel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqCodelParams {
    /// CoDel's target and interval, per queue.
    pub codel: CodelParams,
    /// Bytes a flow may send per round (§4.2.1; 1514 = one Ethernet MTU).
    pub quantum: u32,
    /// Number of flow queues (hash buckets), ≥ 1 (§5.2.2: 1024).
    pub flows: u32,
    /// Mixed into the flow hash: 0 gives the same buckets on every run; another value
    /// moves collisions elsewhere (Linux draws one at random; we take it from the
    /// scenario so a run stays repeatable).
    pub perturbation: u64,
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams { codel: CodelParams::default(), quantum: 1514, flows: 1024, perturbation: 0 }
    }
}

/// The packet limit of Linux fq_codel and RFC 8290 §5.2.4 (10240 packets). The
/// scenario keeps one `limit_packets` for every discipline (default 1000); set this
/// value there for a Linux-like FQ-CoDel buffer.
pub const FQ_CODEL_DEFAULT_LIMIT_PACKETS: u64 = 10240;

/// The FQ-CoDel discipline; see the module documentation.
#[derive(Debug)]
pub struct FqCodel<P> {
    params: FqCodelParams,
    limits: Limits,
    /// One queue per hash bucket (allocated lazily: a bucket's deque is empty until
    /// used).
    queues: Vec<FlowQueue<P>>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    bytes: u64,
    packets: usize,
    /// CoDel's head drops since the driver last called `take_drops`.
    codel_drops: Vec<P>,
    stats: QueueStats,
}

/// Which list a flow queue is on (§4.1.1: "new", "old", or none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

#[derive(Debug)]
struct FlowQueue<P> {
    packets: VecDeque<Stamped<P>>,
    bytes: u64,
    deficit: i64,
    codel: Codel,
    list: List,
}

impl<P: QueueItem> FqCodel<P> {
    /// An empty FQ-CoDel with these parameters and buffer limits (shared by all queues).
    pub fn new(params: FqCodelParams, limits: Limits) -> Self {
        let n = params.flows.max(1) as usize;
        let queues = (0..n)
            .map(|_| FlowQueue {
                packets: VecDeque::new(),
                bytes: 0,
                deficit: 0,
                codel: Codel::default(),
                list: List::None,
            })
            .collect();
        FqCodel {
            params,
            limits,
            queues,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            bytes: 0,
            packets: 0,
            codel_drops: Vec::new(),
            stats: QueueStats::default(),
        }
    }

    /// The bucket of a flow: a fixed 64-bit mix (SplitMix64's finaliser) of the flow
    /// id and the perturbation, reduced modulo the number of queues.
    fn bucket(&self, flow: u64) -> usize {
        let mut z = flow ^ self.params.perturbation;
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % self.queues.len() as u64) as usize
    }

    /// Drop the head of the queue holding the most bytes (§4.1; then the most packets,
    /// for zero-length ones); ties go to the lowest bucket so the choice is repeatable.
    /// Only queues on a list can hold packets. False if no queue holds any.
    fn drop_from_fattest(&mut self, drops: &mut Vec<Dropped<P>>) -> bool {
        let fattest = self
            .new_flows
            .iter()
            .chain(&self.old_flows)
            .map(|&i| i as usize)
            .max_by_key(|&i| (self.queues[i].bytes, self.queues[i].packets.len(), std::cmp::Reverse(i)));
        let Some(i) = fattest else { return false };
        let q = &mut self.queues[i];
        let Some(head) = q.packets.pop_front() else { return false };
        let len = head.packet.wire_len() as u64;
        q.bytes -= len;
        self.bytes -= len;
        self.packets -= 1;
        self.stats.count_drop(DropReason::Overflow);
        drops.push(Dropped { packet: head.packet, reason: DropReason::Overflow });
        true
    }

    fn over_limits(&self) -> bool {
        self.limits.bytes.is_some_and(|b| self.bytes > b)
            || self.limits.packets.is_some_and(|p| self.packets > p)
    }

    /// In CoDel's dropping state (tests).
    #[cfg(test)]
    fn dropping(&self, flow: u64) -> bool {
        self.queues[self.bucket(flow)].codel.dropping()
    }
}

impl<P: QueueItem> QueueDisc<P> for FqCodel<P> {
    fn enqueue(&mut self, now: Instant, packet: P, drops: &mut Vec<Dropped<P>>) {
        let len = packet.wire_len();
        if !self.limits.fits(0, 0, len) {
            // Larger than the whole buffer: no head drop would make room.
            self.stats.count_drop(DropReason::Overflow);
            drops.push(Dropped { packet, reason: DropReason::Overflow });
            return;
        }
        let i = self.bucket(packet.flow());
        let q = &mut self.queues[i];
        q.packets.push_back(Stamped { packet, enqueued: now });
        q.bytes += len as u64;
        if q.list == List::None {
            // §4.1: a flow with no queue state becomes new, with one quantum of credit.
            q.list = List::New;
            q.deficit = self.params.quantum as i64;
            self.new_flows.push_back(i as u32);
        }
        self.bytes += len as u64;
        self.packets += 1;
        self.stats.enqueued += 1;
        self.stats.max_bytes = self.stats.max_bytes.max(self.bytes);
        while self.over_limits() && self.drop_from_fattest(drops) {}
    }

    fn dequeue(&mut self, now: Instant) -> Option<P> {
        loop {
            let (i, from_new) = match self.new_flows.front() {
                Some(&i) => (i as usize, true),
                None => (*self.old_flows.front()? as usize, false),
            };
            let list = if from_new { &mut self.new_flows } else { &mut self.old_flows };
            let q = &mut self.queues[i];
            if q.deficit <= 0 {
                // §4.2: credit exhausted — one more quantum, to the tail of the old list.
                q.deficit += self.params.quantum as i64;
                list.pop_front();
                q.list = List::Old;
                self.old_flows.push_back(i as u32);
                continue;
            }
            let before = q.packets.len();
            let mut dropped = Vec::new();
            let got = q.codel.dequeue(
                &self.params.codel,
                now,
                &mut q.packets,
                &mut q.bytes,
                &mut dropped,
                &mut self.stats.marks_ce,
            );
            let removed = before - q.packets.len();
            self.packets -= removed;
            for d in dropped {
                self.bytes -= d.wire_len() as u64;
                self.stats.count_drop(DropReason::Codel);
                self.codel_drops.push(d);
            }
            let Some(p) = got else {
                // §4.2: an emptied new queue goes to the old list (if any flow is there)
                // rather than away, so it cannot cut in again at once; an emptied old
                // queue leaves the lists.
                list.pop_front();
                if from_new && !self.old_flows.is_empty() {
                    q.list = List::Old;
                    self.old_flows.push_back(i as u32);
                } else {
                    q.list = List::None;
                }
                continue;
            };
            let len = p.wire_len();
            q.deficit -= len as i64;
            self.bytes -= len as u64;
            self.stats.dequeued += 1;
            return Some(p);
        }
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
        drops.extend(self.codel_drops.drain(..).map(|packet| Dropped { packet, reason: DropReason::Codel }));
    }
}

#[cfg(test)]
mod tests;

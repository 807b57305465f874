//! Queue disciplines behind one trait that takes `now` (STYLE.md §5).
//!
//! The same implementations run in the simulator (virtual time) and in the emulator
//! (real clock). Limits and drop accounting live in one place ([`Limits`],
//! [`QueueStats`]) so each discipline is only its service order. Unlike mahimahi's
//! queues, every call receives `now` instead of reading a global clock.

use crate::time::Instant;
use std::collections::VecDeque;

/// What a queue needs to know about a packet.
pub trait QueueItem {
    /// Bytes the packet occupies on the wire (and in a byte-limited buffer).
    fn wire_len(&self) -> u32;
    /// Labelled interactive by its sender (used by priority disciplines).
    fn is_interactive(&self) -> bool {
        false
    }
}

/// Why a packet was dropped (ns-3 `QueueDisc::Stats` keeps the same idea).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The arriving packet did not fit within the limits.
    Overflow,
    /// A queued packet was pushed out to make room for a more important arrival.
    PushedOut,
}

impl DropReason {
    /// Stable name used in records.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Overflow => "overflow",
            DropReason::PushedOut => "pushed_out",
        }
    }
}

/// A dropped packet and the reason.
#[derive(Debug)]
pub struct Dropped<P> {
    /// The packet.
    pub packet: P,
    /// The reason.
    pub reason: DropReason,
}

/// Byte and/or packet limits of a buffer; `None` = no limit of that kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum queued bytes (wire length).
    pub bytes: Option<u64>,
    /// Maximum queued packets.
    pub packets: Option<usize>,
}

impl Limits {
    /// Would a packet of `len` bytes fit on top of `bytes`/`packets` already queued?
    pub fn fits(&self, bytes: u64, packets: usize, len: u32) -> bool {
        self.bytes.is_none_or(|b| bytes + len as u64 <= b)
            && self.packets.is_none_or(|p| packets < p)
    }
}

/// Counters every discipline keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets accepted.
    pub enqueued: u64,
    /// Packets handed to the link.
    pub dequeued: u64,
    /// Packets dropped because the buffer was full.
    pub drops_overflow: u64,
    /// Packets pushed out by a more important arrival.
    pub drops_pushed_out: u64,
    /// Largest backlog seen, bytes.
    pub max_bytes: u64,
}

impl QueueStats {
    fn count_drop(&mut self, reason: DropReason) {
        match reason {
            DropReason::Overflow => self.drops_overflow += 1,
            DropReason::PushedOut => self.drops_pushed_out += 1,
        }
    }
}

/// A queue discipline: buffers packets in front of a link.
pub trait QueueDisc<P: QueueItem> {
    /// Offer `packet` at `now`. Packets dropped as a consequence (the arrival itself,
    /// or queued packets pushed out) are appended to `drops`.
    fn enqueue(&mut self, now: Instant, packet: P, drops: &mut Vec<Dropped<P>>);
    /// The next packet to transmit, if any.
    fn dequeue(&mut self, now: Instant) -> Option<P>;
    /// Queued bytes (wire length).
    fn backlog_bytes(&self) -> u64;
    /// Queued packets.
    fn backlog_packets(&self) -> usize;
    /// Counters.
    fn stats(&self) -> &QueueStats;
}

/// Tail-drop FIFO limited in bytes and/or packets.
#[derive(Debug)]
pub struct DropTail<P> {
    limits: Limits,
    queue: VecDeque<P>,
    bytes: u64,
    stats: QueueStats,
}

impl<P: QueueItem> DropTail<P> {
    /// An empty FIFO with these limits.
    pub fn new(limits: Limits) -> Self {
        DropTail { limits, queue: VecDeque::new(), bytes: 0, stats: QueueStats::default() }
    }
}

impl<P: QueueItem> QueueDisc<P> for DropTail<P> {
    fn enqueue(&mut self, _now: Instant, packet: P, drops: &mut Vec<Dropped<P>>) {
        let len = packet.wire_len();
        if !self.limits.fits(self.bytes, self.queue.len(), len) {
            self.stats.count_drop(DropReason::Overflow);
            drops.push(Dropped { packet, reason: DropReason::Overflow });
            return;
        }
        self.bytes += len as u64;
        self.stats.enqueued += 1;
        self.stats.max_bytes = self.stats.max_bytes.max(self.bytes);
        self.queue.push_back(packet);
    }

    fn dequeue(&mut self, _now: Instant) -> Option<P> {
        let p = self.queue.pop_front()?;
        self.bytes -= p.wire_len() as u64;
        self.stats.dequeued += 1;
        Some(p)
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
    fn backlog_packets(&self) -> usize {
        self.queue.len()
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, PartialEq)]
    struct P(u32, u32); // (id, len)
    impl QueueItem for P {
        fn wire_len(&self) -> u32 {
            self.1
        }
    }

    #[test]
    fn fifo_order_and_byte_limit() {
        let mut q = DropTail::new(Limits { bytes: Some(3000), packets: None });
        let mut drops = Vec::new();
        for i in 0..3 {
            q.enqueue(Instant::ZERO, P(i, 1500), &mut drops);
        }
        assert_eq!(drops.len(), 1);
        assert_eq!(drops[0].packet, P(2, 1500));
        assert_eq!(drops[0].reason, DropReason::Overflow);
        // A smaller packet still fits? No: 3000 + 40 > 3000.
        q.enqueue(Instant::ZERO, P(3, 40), &mut drops);
        assert_eq!(drops.len(), 2);
        assert_eq!(q.dequeue(Instant::ZERO), Some(P(0, 1500)));
        q.enqueue(Instant::ZERO, P(4, 40), &mut drops);
        assert_eq!(q.backlog_bytes(), 1540);
        assert_eq!(q.dequeue(Instant::ZERO), Some(P(1, 1500)));
        assert_eq!(q.dequeue(Instant::ZERO), Some(P(4, 40)));
        assert_eq!(q.dequeue(Instant::ZERO), None);
        assert_eq!(q.stats().drops_overflow, 2);
        assert_eq!(q.stats().max_bytes, 3000);
    }

    #[test]
    fn packet_limit() {
        let mut q = DropTail::new(Limits { bytes: None, packets: Some(2) });
        let mut drops = Vec::new();
        for i in 0..5 {
            q.enqueue(Instant::ZERO, P(i, 10), &mut drops);
        }
        assert_eq!(q.backlog_packets(), 2);
        assert_eq!(drops.len(), 3);
    }

    proptest! {
        /// Occupancy never exceeds the limits and packets are conserved.
        #[test]
        fn never_exceeds_limits(ops in proptest::collection::vec((any::<bool>(), 1u32..2000), 1..400),
                                lb in 1500u64..20_000, lp in 1usize..20) {
            let mut q = DropTail::new(Limits { bytes: Some(lb), packets: Some(lp) });
            let mut drops = Vec::new();
            let (mut offered, mut out) = (0u64, 0u64);
            for (i, (enq, len)) in ops.into_iter().enumerate() {
                if enq {
                    offered += 1;
                    q.enqueue(Instant::ZERO, P(i as u32, len), &mut drops);
                } else if q.dequeue(Instant::ZERO).is_some() {
                    out += 1;
                }
                prop_assert!(q.backlog_bytes() <= lb);
                prop_assert!(q.backlog_packets() <= lp);
            }
            prop_assert_eq!(offered, out + drops.len() as u64 + q.backlog_packets() as u64);
        }
    }
}

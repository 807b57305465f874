//! The two disciplines of the first studies: a tail-drop FIFO and two priority bands.

use super::*;
use crate::time::Duration;
use std::collections::VecDeque;

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

/// How a priority queue decides that a packet is interactive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classifier {
    /// Trust the sender's label ([`QueueItem::is_interactive`]).
    Label,
    /// Classify per flow by arrival gaps (Ogawa §1's 10^-2.2 s rule): a packet arriving
    /// more than `gap` after the previous packet of its flow starts a new flow and is
    /// served as interactive; packets following within `gap` are bulk. Online, the router
    /// cannot know whether a flow will stand alone, so the head of a bulk block is
    /// served first too.
    Gap(Duration),
}

/// Two bands sharing one buffer; the interactive band is always served first
/// (Ogawa §4). Interactive packets are never dropped while bulk packets
/// are queued: an interactive arrival to a full buffer pushes out the most recently
/// queued bulk packets until it fits; a bulk arrival to a full buffer is dropped.
#[derive(Debug)]
pub struct Priority<P> {
    limits: Limits,
    classifier: Classifier,
    bands: [VecDeque<(P, bool)>; 2],
    band_bytes: [u64; 2],
    last_arrival: std::collections::HashMap<u64, Instant>,
    stats: QueueStats,
}

impl<P: QueueItem> Priority<P> {
    /// An empty priority queue.
    pub fn new(limits: Limits, classifier: Classifier) -> Self {
        Priority {
            limits,
            classifier,
            bands: [VecDeque::new(), VecDeque::new()],
            band_bytes: [0, 0],
            last_arrival: Default::default(),
            stats: QueueStats::default(),
        }
    }

    fn classify(&mut self, now: Instant, p: &P) -> bool {
        match self.classifier {
            Classifier::Label => p.is_interactive(),
            Classifier::Gap(gap) => {
                let prev = self.last_arrival.insert(p.flow(), now);
                prev.is_none_or(|t| now - t > gap)
            }
        }
    }

    fn len(&self) -> usize {
        self.bands[0].len() + self.bands[1].len()
    }
}

impl<P: QueueItem> QueueDisc<P> for Priority<P> {
    fn enqueue(&mut self, now: Instant, packet: P, drops: &mut Vec<Dropped<P>>) {
        let len = packet.wire_len();
        let interactive = self.classify(now, &packet);
        let band = usize::from(!interactive);
        let fits_without_bulk = self.limits.fits(self.band_bytes[0], self.bands[0].len(), len);
        // An interactive arrival is admitted if it fits once the bulk band is pushed out.
        let admitted =
            self.limits.fits(self.backlog_bytes(), self.len(), len) || (interactive && fits_without_bulk);
        if !admitted {
            self.stats.count_drop(DropReason::Overflow);
            drops.push(Dropped { packet, reason: DropReason::Overflow });
            return;
        }
        // Push out the last-queued bulk packets until the interactive arrival fits.
        while !self.limits.fits(self.backlog_bytes(), self.len(), len) {
            let (victim, _) = self.bands[1].pop_back().expect("bulk band is non-empty while over the limit");
            self.band_bytes[1] -= victim.wire_len() as u64;
            self.stats.count_drop(DropReason::PushedOut);
            drops.push(Dropped { packet: victim, reason: DropReason::PushedOut });
        }
        self.band_bytes[band] += len as u64;
        self.stats.enqueued += 1;
        self.stats.max_bytes = self.stats.max_bytes.max(self.backlog_bytes());
        self.bands[band].push_back((packet, interactive));
    }

    fn dequeue(&mut self, _now: Instant) -> Option<P> {
        let band = if self.bands[0].is_empty() { 1 } else { 0 };
        let (p, _) = self.bands[band].pop_front()?;
        self.band_bytes[band] -= p.wire_len() as u64;
        self.stats.dequeued += 1;
        Some(p)
    }

    fn backlog_bytes(&self) -> u64 {
        self.band_bytes[0] + self.band_bytes[1]
    }
    fn backlog_packets(&self) -> usize {
        self.len()
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

    /// (id, len, interactive, flow)
    #[derive(Debug, Clone, PartialEq)]
    struct L(u32, u32, bool, u64);
    impl QueueItem for L {
        fn wire_len(&self) -> u32 {
            self.1
        }
        fn is_interactive(&self) -> bool {
            self.2
        }
        fn flow(&self) -> u64 {
            self.3
        }
    }

    fn ids<T, F: Fn(&T) -> u32>(q: &mut dyn QueueDisc<T>, id: F) -> Vec<u32>
    where
        T: QueueItem,
    {
        std::iter::from_fn(|| q.dequeue(Instant::ZERO)).map(|p| id(&p)).collect()
    }

    #[test]
    fn priority_serves_interactive_first_and_pushes_out_last_bulk() {
        let mut q = Priority::new(Limits { bytes: Some(3000), packets: None }, Classifier::Label);
        let mut drops = Vec::new();
        q.enqueue(Instant::ZERO, L(1, 1000, false, 0), &mut drops);
        q.enqueue(Instant::ZERO, L(2, 1000, false, 0), &mut drops);
        q.enqueue(Instant::ZERO, L(3, 500, true, 0), &mut drops);
        q.enqueue(Instant::ZERO, L(4, 1000, false, 0), &mut drops); // 3500 > 3000: dropped
        assert_eq!(drops.len(), 1);
        assert_eq!((drops[0].packet.0, drops[0].reason), (4, DropReason::Overflow));
        // Interactive arrival to a full buffer: the last-queued bulk packet goes.
        q.enqueue(Instant::ZERO, L(5, 1200, true, 0), &mut drops);
        assert_eq!((drops[1].packet.0, drops[1].reason), (2, DropReason::PushedOut));
        assert_eq!(q.backlog_bytes(), 2700);
        assert_eq!(q.stats().drops_pushed_out, 1);
        assert_eq!(ids(&mut q, |p: &L| p.0), vec![3, 5, 1]);
        assert_eq!(q.backlog_bytes(), 0);
    }

    #[test]
    fn gap_classifier_marks_flow_heads_interactive() {
        let gap = crate::time::Duration::from_micros(6310);
        let mut q = Priority::new(Limits { bytes: None, packets: Some(100) }, Classifier::Gap(gap));
        let mut drops = Vec::new();
        let t = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        // Flow 1: a block of three packets 1 ms apart; flow 2: a lone packet at 2 ms.
        q.enqueue(t(0), L(10, 100, false, 1), &mut drops);
        q.enqueue(t(1), L(11, 100, false, 1), &mut drops);
        q.enqueue(t(2), L(20, 100, false, 2), &mut drops);
        q.enqueue(t(3), L(12, 100, false, 1), &mut drops);
        q.enqueue(t(20), L(13, 100, false, 1), &mut drops); // new flow of flow 1
        assert_eq!(ids(&mut q, |p: &L| p.0), vec![10, 20, 13, 11, 12]);
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

        /// Priority: limits hold, packets are conserved, and no interactive packet is
        /// dropped while a bulk packet is queued.
        #[test]
        fn priority_invariants(ops in proptest::collection::vec((any::<bool>(), any::<bool>(), 40u32..1500), 1..400),
                               lb in 1500u64..20_000) {
            let mut q = Priority::new(Limits { bytes: Some(lb), packets: None }, Classifier::Label);
            let mut drops = Vec::new();
            let (mut offered, mut out) = (0u64, 0u64);
            for (i, (enq, inter, len)) in ops.into_iter().enumerate() {
                if enq {
                    offered += 1;
                    let bulk_queued = q.band_bytes[1] > 0;
                    let before = drops.len();
                    q.enqueue(Instant::ZERO, L(i as u32, len, inter, 0), &mut drops);
                    for d in &drops[before..] {
                        if d.packet.2 {
                            // An interactive packet may only be dropped if even without bulk it could not fit.
                            prop_assert!(!bulk_queued || q.band_bytes[0] + len as u64 > lb);
                        }
                    }
                } else if q.dequeue(Instant::ZERO).is_some() {
                    out += 1;
                }
                prop_assert!(q.backlog_bytes() <= lb);
            }
            prop_assert_eq!(offered, out + drops.len() as u64 + q.backlog_packets() as u64);
        }
    }
}

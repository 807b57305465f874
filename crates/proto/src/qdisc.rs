//! Queue disciplines behind one trait that takes `now` (STYLE.md §5).
//!
//! The same implementations run in the simulator (virtual time) and in the emulator
//! (real clock). Limits and drop accounting live in one place ([`Limits`],
//! [`QueueStats`]) so each discipline is only its service order. Unlike mahimahi's
//! queues, every call receives `now` instead of reading a global clock.

use crate::time::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What a queue needs to know about a packet.
pub trait QueueItem {
    /// Bytes the packet occupies on the wire (and in a byte-limited buffer).
    fn wire_len(&self) -> u32;
    /// Labelled interactive by its sender (used by priority disciplines).
    fn is_interactive(&self) -> bool {
        false
    }
    /// Flow (connection) identifier, for disciplines that keep per-flow state.
    fn flow(&self) -> u64 {
        0
    }
}

pub use crate::drops::DropReason;

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
        self.bytes.is_none_or(|b| bytes + len as u64 <= b) && self.packets.is_none_or(|p| packets < p)
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
            // Reasons of the link and the emulator's I/O: a queue never gives them.
            DropReason::Loss
            | DropReason::BurstLoss
            | DropReason::Malformed
            | DropReason::Shutdown
            | DropReason::WriteError => debug_assert!(false, "a queue dropped for {reason:?}"),
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

// ----- the typed spec and the one factory ------------------------------------------

/// The gap classifier's default threshold, 10^−2.2 s (Ogawa §1), in ms.
/// The scenario's default is Python's (`QueueSection`, docs/scenario.md); this one
/// serves the emulator's own configuration and flags.
pub const DEFAULT_CLASSIFIER_GAP_MS: f64 = 6.31;
/// The default packet limit of a queue (the scenario's `queue.limit_packets`).
pub const DEFAULT_LIMIT_PACKETS: u64 = 1000;

/// `queue.discipline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DisciplineName {
    /// [`DropTail`].
    Droptail,
    /// [`Priority`].
    Priority,
}

/// `queue.priority_classifier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifierName {
    /// [`Classifier::Label`].
    Label,
    /// [`Classifier::Gap`] with `classifier_gap_ms`.
    Gap,
}

/// The `[queue]` keys as the scenario (docs/scenario.md) and the emulator's link config
/// (docs/lab.md) spell them; an unknown name or key fails to parse, naming it. Turned
/// into a [`QueueSpec`] with [`QueueSpec::try_from`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueKeys {
    /// Discipline.
    pub discipline: DisciplineName,
    /// Byte limit (wire bytes), 0 = none.
    pub limit_bytes: u64,
    /// Packet limit, 0 = none.
    pub limit_packets: u64,
    /// Priority only: how a packet is found interactive.
    pub priority_classifier: ClassifierName,
    /// Priority with the gap classifier: the threshold, ms.
    pub classifier_gap_ms: f64,
}

impl Default for QueueKeys {
    fn default() -> Self {
        QueueKeys {
            discipline: DisciplineName::Droptail,
            limit_bytes: 0,
            limit_packets: DEFAULT_LIMIT_PACKETS,
            priority_classifier: ClassifierName::Label,
            classifier_gap_ms: DEFAULT_CLASSIFIER_GAP_MS,
        }
    }
}

/// A queue discipline and its limits, checked: what [`QueueSpec::build`] makes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum QueueSpec {
    /// A tail-drop FIFO.
    DropTail {
        /// Limits.
        limits: Limits,
    },
    /// Two bands, interactive first.
    Priority {
        /// Limits of the shared buffer.
        limits: Limits,
        /// How a packet is found interactive.
        classifier: Classifier,
    },
}

impl QueueSpec {
    /// The one queue-discipline factory of the simulator and the emulator.
    pub fn build<P: QueueItem + Send + 'static>(&self) -> Box<dyn QueueDisc<P> + Send> {
        match *self {
            QueueSpec::DropTail { limits } => Box::new(DropTail::new(limits)),
            QueueSpec::Priority { limits, classifier } => Box::new(Priority::new(limits, classifier)),
        }
    }

    /// Its limits.
    pub fn limits(&self) -> Limits {
        match *self {
            QueueSpec::DropTail { limits } | QueueSpec::Priority { limits, .. } => limits,
        }
    }
}

impl TryFrom<&QueueKeys> for QueueSpec {
    type Error = String;

    /// Check the values; an error names the key (`limit_bytes: …`, relative to the section).
    fn try_from(k: &QueueKeys) -> Result<Self, String> {
        if k.limit_bytes == 0 && k.limit_packets == 0 {
            return Err("limit_bytes, limit_packets: both 0; set at least one".into());
        }
        let limits = Limits {
            bytes: (k.limit_bytes > 0).then_some(k.limit_bytes),
            packets: (k.limit_packets > 0).then_some(k.limit_packets as usize),
        };
        // Checked even where unused, as the scenario's loader does (docs/scenario.md).
        let ms = k.classifier_gap_ms;
        if !(ms.is_finite() && ms > 0.0) {
            return Err(format!("classifier_gap_ms: must be a finite number > 0, got {ms}"));
        }
        let classifier = match k.priority_classifier {
            ClassifierName::Label => Classifier::Label,
            ClassifierName::Gap => Classifier::Gap(Duration::from_millis_f64(ms)),
        };
        Ok(match k.discipline {
            DisciplineName::Droptail => QueueSpec::DropTail { limits },
            DisciplineName::Priority => QueueSpec::Priority { limits, classifier },
        })
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

    #[test]
    fn queue_keys_parse_to_a_spec_and_reject_unknown_names() {
        let k: QueueKeys =
            serde_json::from_str(r#"{"discipline": "priority", "priority_classifier": "gap"}"#)
                .expect("known names");
        let spec = QueueSpec::try_from(&k).expect("valid");
        let gap = Classifier::Gap(Duration::from_millis_f64(DEFAULT_CLASSIFIER_GAP_MS));
        let limits = Limits { bytes: None, packets: Some(DEFAULT_LIMIT_PACKETS as usize) };
        assert_eq!(spec, QueueSpec::Priority { limits, classifier: gap });
        let _q: Box<dyn QueueDisc<P> + Send> = spec.build();
        for bad in
            [r#"{"discipline": "red"}"#, r#"{"priority_classifier": "dpi"}"#, r#"{"disciplin": "priority"}"#]
        {
            let e = serde_json::from_str::<QueueKeys>(bad).expect_err(bad).to_string();
            assert!(e.contains("red") || e.contains("dpi") || e.contains("disciplin"), "{bad}: {e}");
        }
        let none = QueueKeys { limit_packets: 0, ..QueueKeys::default() };
        assert!(QueueSpec::try_from(&none).unwrap_err().starts_with("limit_bytes, limit_packets:"));
        let droptail = QueueKeys { limit_bytes: 3000, limit_packets: 0, ..QueueKeys::default() };
        let want = Limits { bytes: Some(3000), packets: None };
        assert_eq!(QueueSpec::try_from(&droptail), Ok(QueueSpec::DropTail { limits: want }));
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

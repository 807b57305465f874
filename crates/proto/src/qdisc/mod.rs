//! Queue disciplines behind one trait that takes `now` (STYLE.md §5).
//!
//! The same implementations run in the simulator (virtual time) and in the emulator
//! (real clock). Limits and drop accounting live in one place ([`Limits`],
//! [`QueueStats`]) so each discipline is only its service order. Unlike mahimahi's
//! queues, every call receives `now` instead of reading a global clock.
//!
//! | discipline | module | service order |
//! |---|---|---|
//! | [`DropTail`] | `basic` | one FIFO |
//! | [`Priority`] | `basic` | interactive band first (Ogawa §4) |
//! | [`FqCodel`] | `fq_codel` (+ `codel`) | RFC 8290 flow queues, RFC 8289 CoDel on each |
//! | [`Classes`] | `classes` | weighted classes with rate and ceil (Linux HTB semantics) |
//! | [`Deadline`] | `deadline` | earliest deadline first over flow queues (QDS's budgets per packet) |
//!
//! Call order for a driver (the simulator's port, the emulator's direction): `enqueue`
//! on arrival; when the link is free, `dequeue(now)`, then [`QueueDisc::take_drops`]
//! (CoDel drops at dequeue); if `dequeue` gave nothing while `backlog_packets() > 0`,
//! call `dequeue` again at [`QueueDisc::next_ready`] (a shaped class waits for tokens)
//! or on the next arrival, whichever is first.

mod basic;
mod classes;
mod codel;
mod deadline;
mod fq_codel;
mod spec;
#[cfg(test)]
mod test_item;

pub use basic::{Classifier, DropTail, Priority};
pub use classes::{ClassChange, ClassControl, ClassRate, Classes};
pub use codel::CodelParams;
pub use deadline::{Deadline, DeadlineControl};
pub use fq_codel::{FqCodel, FqCodelParams, FQ_CODEL_DEFAULT_LIMIT_PACKETS};
pub use spec::*;

use crate::time::Instant;

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
    /// ECN-capable: its IP header says ECT(0), ECT(1) or already CE (RFC 3168 §5), so
    /// an AQM may mark it instead of dropping it.
    fn ecn_capable(&self) -> bool {
        false
    }
    /// Set CE (RFC 3168 §5); called only on an ECN-capable packet.
    fn mark_ce(&mut self) {}
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
    /// Packets CoDel dropped at the head of a queue (RFC 8289 §5).
    pub drops_codel: u64,
    /// Packets CoDel marked CE instead of dropping them (RFC 8289 §5 with ECN,
    /// RFC 8290 §5.2.7).
    pub marks_ce: u64,
    /// Largest backlog seen, bytes.
    pub max_bytes: u64,
}

impl QueueStats {
    /// Count a drop for `reason` (a queue's reasons only).
    pub(crate) fn count_drop(&mut self, reason: DropReason) {
        match reason {
            DropReason::Overflow => self.drops_overflow += 1,
            DropReason::PushedOut => self.drops_pushed_out += 1,
            DropReason::Codel => self.drops_codel += 1,
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
    /// Move the packets dropped inside [`QueueDisc::dequeue`] (CoDel's head drops) to
    /// `drops`. A driver calls it after every `dequeue`; disciplines that drop only on
    /// arrival have none.
    fn take_drops(&mut self, _drops: &mut Vec<Dropped<P>>) {}
    /// The earliest time a dequeue that returned None could succeed although packets are
    /// queued (a shaped class waiting for tokens); None = when a packet arrives.
    fn next_ready(&self, _now: Instant) -> Option<Instant> {
        None
    }
    /// The class scheduler's controls, if this discipline has classes.
    fn classes(&mut self) -> Option<&mut dyn ClassControl> {
        None
    }
    /// The per-flow slack controls, if this discipline orders by deadline.
    fn deadlines(&mut self) -> Option<&mut dyn DeadlineControl> {
        None
    }
}

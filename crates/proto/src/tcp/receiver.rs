//! The data receiver: reassembly, cumulative and selective ACKs (RFC 2018), delayed
//! ACK (RFC 1122 §4.2.3.2, RFC 5681 §4.2). The application reads in-order data as soon
//! as it arrives, so the advertised window only shrinks by out-of-order bytes held.

use std::sync::Arc;

use super::scoreboard::RangeSet;
use super::{Ack, DataSegment, SackBlocks, MAX_SACK_BLOCKS};
use crate::time::{Duration, Instant};

/// Receiver parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReceiverConfig {
    /// Receive buffer, bytes.
    pub rwnd: u64,
    /// Delay ACKs of in-order segments (ACK every second segment or on the timer).
    pub delayed_ack: bool,
    /// Delayed-ACK timer (RFC 1122: < 500 ms; Linux's minimum is 40 ms).
    pub delayed_ack_timeout: Duration,
    /// Send SACK blocks.
    pub sack: bool,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            rwnd: 4 << 20,
            delayed_ack: true,
            delayed_ack_timeout: Duration::from_millis(40),
            sack: true,
        }
    }
}

/// What a segment did at the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// `rcv_nxt` before the segment.
    pub from: u64,
    /// `rcv_nxt` after it: bytes `[from, to)` were just handed to the application.
    pub to: u64,
}

/// The receiving half of a connection. Its configuration is shared (as the sender's
/// is), so that a simulator's 10⁴ receivers are 88 bytes each rather than 104.
pub struct Receiver {
    cfg: Arc<ReceiverConfig>,
    rcv_nxt: u64,
    ooo: RangeSet,
    /// Blocks in the order RFC 2018 §4 reports them: most recently changed first.
    recent: Vec<(u64, u64)>,
    unacked_segments: u32,
    ack_now: bool,
    delack_deadline: Option<Instant>,
}

impl Receiver {
    /// A receiver expecting byte 0, from its own configuration or one shared.
    pub fn new(cfg: impl Into<Arc<ReceiverConfig>>) -> Self {
        Receiver {
            cfg: cfg.into(),
            rcv_nxt: 0,
            ooo: RangeSet::new(),
            recent: Vec::with_capacity(MAX_SACK_BLOCKS + 1),
            unacked_segments: 0,
            ack_now: false,
            delack_deadline: None,
        }
    }

    /// A data segment arrived.
    pub fn handle_segment(&mut self, now: Instant, seg: &DataSegment) -> Delivery {
        let from = self.rcv_nxt;
        let (s, e) = (seg.seq, seg.end());
        if e <= self.rcv_nxt {
            // Entirely old: ACK at once so the sender learns where we are (RFC 5681 §4.2).
            self.ack_now = true;
        } else if s <= self.rcv_nxt {
            let filled_gap = !self.ooo.is_empty();
            self.rcv_nxt = e;
            // Held ranges are disjoint and non-adjacent, so at most one now joins.
            if let Some((_, oe)) = self.ooo.range_at(self.rcv_nxt) {
                self.rcv_nxt = self.rcv_nxt.max(oe);
            }
            self.ooo.advance(self.rcv_nxt);
            if filled_gap {
                // RFC 5681 §4.2: ACK at once when a segment fills (part of) a gap.
                self.ack_now = true;
            } else {
                self.unacked_segments += 1;
                if !self.cfg.delayed_ack || self.unacked_segments >= 2 {
                    self.ack_now = true;
                } else if self.delack_deadline.is_none() {
                    self.delack_deadline = Some(now + self.cfg.delayed_ack_timeout);
                }
            }
        } else {
            // Out of order: hold it, report it first (RFC 2018 §4), ACK at once.
            let block = self.ooo.insert(s, e);
            self.recent.retain(|&(rs, re)| re < block.0 || rs > block.1);
            self.recent.insert(0, block);
            self.ack_now = true;
        }
        self.refresh_recent();
        Delivery { from, to: self.rcv_nxt }
    }

    /// Fire the delayed-ACK timer if due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.delack_deadline.is_some_and(|d| d <= now) {
            self.ack_now = true;
        }
    }

    /// The ACK to send now, if one is due.
    pub fn poll_ack(&mut self) -> Option<Ack> {
        if !self.ack_now {
            return None;
        }
        self.ack_now = false;
        self.unacked_segments = 0;
        self.delack_deadline = None;
        let sack = if self.cfg.sack { SackBlocks::from_slice(&self.recent) } else { SackBlocks::default() };
        Some(Ack { ack: self.rcv_nxt, wnd: self.cfg.rwnd.saturating_sub(self.ooo.total_bytes()), sack })
    }

    /// When `handle_timeout` should be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.delack_deadline
    }

    /// Next byte expected.
    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }

    /// Out-of-order bytes held.
    pub fn held_bytes(&self) -> u64 {
        self.ooo.total_bytes()
    }

    /// Keep reported blocks in step with the reassembly map (merges, cumulative ACK).
    fn refresh_recent(&mut self) {
        let ooo = &self.ooo;
        let mut fresh: Vec<(u64, u64)> = Vec::with_capacity(self.recent.len());
        for &(s, _) in &self.recent {
            if let Some(r) = ooo.range_at(s.max(self.rcv_nxt)) {
                if !fresh.contains(&r) {
                    fresh.push(r);
                }
            }
        }
        fresh.truncate(MAX_SACK_BLOCKS);
        self.recent = fresh;
    }
}

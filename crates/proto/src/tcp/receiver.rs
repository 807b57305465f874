//! The data receiver: reassembly, cumulative and selective ACKs (RFC 2018), delayed
//! ACK (RFC 1122 §4.2.3.2, RFC 5681 §4.2), optionally duplicate SACK (RFC 2883) and
//! Linux's quick-ACK mode, and ECN's echo (RFC 3168 §6.1.3). The application reads in-order data as soon as it arrives,
//! so the advertised window only shrinks by out-of-order bytes held.

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

/// Receiver mechanisms beyond RFC 2018 / RFC 1122 (all off by default); the idle RTO
/// depends on the path, so receivers of different paths hold different ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReceiverOptions {
    /// Report a duplicate segment in a DSACK block (RFC 2883 §4).
    pub dsack: bool,
    /// Linux's quick-ACK mode (`tcp_event_data_recv`, `tcp_incr_quickack`): ACK every
    /// in-order segment for up to [`MAX_QUICKACKS`] ACKs at the first data, after an idle
    /// period longer than [`ReceiverOptions::idle_rto`] and after a duplicate segment.
    pub quick_ack: bool,
    /// The receiver's own RTO (`icsk_rto`), the idle period that re-enters quick-ACK
    /// mode. A pure receiver takes its only RTT sample from the handshake, so Linux holds
    /// it at RTT + max(2·RTT, 200 ms) for the connection's life ([`idle_rto_after_handshake`]).
    pub idle_rto: Duration,
}

impl Default for ReceiverOptions {
    /// Both off; the idle RTO before any RTT sample, Linux's `TCP_TIMEOUT_INIT` (1 s).
    fn default() -> Self {
        ReceiverOptions { dsack: false, quick_ack: false, idle_rto: Duration::from_secs(1) }
    }
}

/// Linux's `TCP_MAX_QUICKACKS`.
pub const MAX_QUICKACKS: u8 = 16;

/// The RTO a Linux receiver keeps after the handshake's single RTT sample `rtt`
/// (`tcp_rtt_estimator`'s first-measure branch, then `tcp_set_rto`): SRTT = RTT,
/// rttvar = max(2·RTT, `min_rto`).
pub fn idle_rto_after_handshake(rtt: Duration, min_rto: Duration) -> Duration {
    rtt + rtt.saturating_mul(2).max(min_rto)
}

/// What a segment did at the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// `rcv_nxt` before the segment.
    pub from: u64,
    /// `rcv_nxt` after it: bytes `[from, to)` were just handed to the application.
    pub to: u64,
}

/// A receiver's configuration and mechanisms, shared by the receivers of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReceiverShared {
    /// RFC 2018 / RFC 1122 parameters.
    pub cfg: ReceiverConfig,
    /// DSACK and quick ACKs.
    pub opts: ReceiverOptions,
}

/// The receiving half of a connection. Its configuration is shared (as the sender's
/// is), and times that may be unset use `Instant::MAX`, so that a simulator's 10⁴
/// receivers stay 88 bytes each.
pub struct Receiver {
    shared: Arc<ReceiverShared>,
    rcv_nxt: u64,
    ooo: RangeSet,
    /// Blocks in the order RFC 2018 §4 reports them: most recently changed first; while
    /// `dsack_pending`, a DSACK block first (RFC 2883 §4).
    recent: Vec<(u64, u64)>,
    /// Delayed-ACK deadline, `Instant::MAX` when not armed.
    delack_deadline: Instant,
    /// Last in-order data arrival (`icsk_ack.lrcvtime`), `Instant::MAX` before the first.
    last_rcv: Instant,
    /// Estimated sender MSS (`icsk_ack.rcv_mss`, `tcp_measure_rcv_mss`).
    rcv_mss: u16,
    unacked_segments: u8,
    ack_now: bool,
    /// Quick ACKs left (`icsk_ack.quick`).
    quick: u8,
    /// `recent[0]` is a DSACK block not yet sent (it is sent once).
    dsack_pending: bool,
    /// RFC 3168 §6.1.3: a CE-marked segment arrived and no CWR since: every ACK
    /// carries ECE ([`Receiver::ece`]).
    ece: bool,
}

impl Receiver {
    /// A receiver expecting byte 0, from its own configuration or one shared.
    pub fn new(cfg: impl Into<Arc<ReceiverConfig>>) -> Self {
        Self::with_options(*cfg.into(), ReceiverOptions::default())
    }

    /// The same with the mechanisms of `opts`.
    pub fn with_options(cfg: ReceiverConfig, opts: ReceiverOptions) -> Self {
        Self::with_shared(Arc::new(ReceiverShared { cfg, opts }))
    }

    /// A receiver of a configuration many share.
    pub fn with_shared(shared: Arc<ReceiverShared>) -> Self {
        // tcp_initialize_rcv_mss: min(TCP_MSS_DEFAULT = 536, rcv_wnd/2), ≥ TCP_MIN_MSS (88).
        let rcv_mss = (shared.cfg.rwnd / 2).clamp(88, 536) as u16;
        Receiver {
            shared,
            rcv_nxt: 0,
            ooo: RangeSet::new(),
            recent: Vec::with_capacity(MAX_SACK_BLOCKS + 1),
            delack_deadline: Instant::MAX,
            last_rcv: Instant::MAX,
            rcv_mss,
            unacked_segments: 0,
            ack_now: false,
            quick: 0,
            dsack_pending: false,
            ece: false,
        }
    }

    /// A data segment arrived.
    pub fn handle_segment(&mut self, now: Instant, seg: &DataSegment) -> Delivery {
        let from = self.rcv_nxt;
        let (s, e) = (seg.seq, seg.end());
        // RFC 3168 §6.1.3: CWR ends the echo; CE (re)starts it — a segment with both
        // keeps ECE set, as the RFC asks for CE after CWR. The echo does not hurry the
        // ACK: RFC 3168 asks only that every ACK carry it.
        if seg.ecn.cwr {
            self.ece = false;
        }
        if seg.ecn.ce {
            self.ece = true;
        }
        if self.dsack_pending {
            // A DSACK not yet sent gives way to the news of this segment.
            self.recent.remove(0);
            self.dsack_pending = false;
        }
        let dup = if self.shared.opts.dsack { self.duplicate_part(s, e) } else { None };
        if e <= self.rcv_nxt {
            // Entirely old: ACK at once so the sender learns where we are (RFC 5681 §4.2).
            self.ack_now = true;
            if self.shared.opts.quick_ack {
                // tcp_data_queue, "A retransmit, 2nd most common case": quick-ACK mode.
                self.incr_quickack();
            }
        } else if s <= self.rcv_nxt {
            if self.shared.opts.quick_ack {
                self.event_data_recv(now, seg.len);
            }
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
                self.unacked_segments = self.unacked_segments.saturating_add(1);
                if !self.shared.cfg.delayed_ack || self.unacked_segments >= 2 || self.quick > 0 {
                    self.ack_now = true;
                } else if self.delack_deadline == Instant::MAX {
                    self.delack_deadline = now + self.shared.cfg.delayed_ack_timeout;
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
        if let Some(d) = dup {
            // RFC 2883 §4: first in the next ACK; the block holding it (if any) is
            // already first of the others.
            self.recent.insert(0, d);
            self.dsack_pending = true;
        }
        Delivery { from, to: self.rcv_nxt }
    }

    /// Fire the delayed-ACK timer if due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.delack_deadline <= now {
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
        self.delack_deadline = Instant::MAX;
        // tcp_dec_quickack_mode: one quick ACK used per ACK sent.
        self.quick = self.quick.saturating_sub(1);
        let sack =
            if self.shared.cfg.sack { SackBlocks::from_slice(&self.recent) } else { SackBlocks::default() };
        if self.dsack_pending {
            self.recent.remove(0); // RFC 2883 §4: each duplicate is reported once
            self.dsack_pending = false;
        }
        let wnd = self.shared.cfg.rwnd.saturating_sub(self.ooo.total_bytes());
        Some(Ack { ack: self.rcv_nxt, wnd, sack })
    }

    /// The ECE flag of the ACKs sent now (RFC 3168 §6.1.3): set from a CE-marked
    /// arrival until a segment with CWR. A driver reads it with each
    /// [`Receiver::poll_ack`] and carries it to [`super::Sender::handle_ece`].
    pub fn ece(&self) -> bool {
        self.ece
    }

    /// When `handle_timeout` should be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (self.delack_deadline != Instant::MAX).then_some(self.delack_deadline)
    }

    /// Next byte expected.
    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }

    /// Out-of-order bytes held.
    pub fn held_bytes(&self) -> u64 {
        self.ooo.total_bytes()
    }

    /// RFC 2883 §4: the first contiguous part of `[s, e)` already received — below
    /// `rcv_nxt`, or inside a held out-of-order block.
    fn duplicate_part(&self, s: u64, e: u64) -> Option<(u64, u64)> {
        if s < self.rcv_nxt {
            return Some((s, e.min(self.rcv_nxt)));
        }
        let i = self.ooo.ranges().partition_point(|&(_, re)| re <= s);
        let &(rs, re) = self.ooo.ranges().get(i)?;
        (rs < e).then(|| (s.max(rs), e.min(re)))
    }

    /// `tcp_event_data_recv`: quick-ACK mode at the first in-order data and after an
    /// idle period longer than the receiver's RTO.
    fn event_data_recv(&mut self, now: Instant, len: u32) {
        // tcp_measure_rcv_mss: a segment at least as large as the estimate raises it.
        if len >= self.rcv_mss as u32 {
            self.rcv_mss = len.min(u16::MAX as u32) as u16;
        }
        if self.last_rcv == Instant::MAX || now - self.last_rcv > self.shared.opts.idle_rto {
            self.incr_quickack();
        }
        self.last_rcv = now;
    }

    /// `tcp_incr_quickack(sk, TCP_MAX_QUICKACKS)`: rcv_wnd / (2·rcv_mss) quick ACKs
    /// (2 if that is 0), at most 16; never fewer than are left.
    fn incr_quickack(&mut self) {
        let rcv_wnd = self.shared.cfg.rwnd.saturating_sub(self.ooo.total_bytes());
        let q = match rcv_wnd / (2 * self.rcv_mss as u64) {
            0 => 2,
            q => q.min(MAX_QUICKACKS as u64) as u8,
        };
        self.quick = self.quick.max(q);
    }

    /// Quick ACKs left (Linux `icsk_ack.quick`).
    pub fn quick_acks_left(&self) -> u8 {
        self.quick
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

//! RACK-TLP loss detection, RFC 8985: time-based loss marking (RACK, §6) and the tail
//! loss probe (TLP, §7). The sender owns the per-segment records; this module keeps
//! RACK's own state and applies its rules to them.

use crate::time::{Duration, Instant};

/// One segment as the sender keeps it until cumulatively acknowledged.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sent {
    pub start: u64,
    pub end: u64,
    /// Latest transmission (RFC 8985 `Segment.xmit_ts`).
    pub xmit_ts: Instant,
    /// Some byte of it was retransmitted (Karn's rule; RACK's ambiguity check).
    pub retransmitted: bool,
    /// Wholly SACKed.
    pub sacked: bool,
    /// Marked lost by RACK and not retransmitted since.
    pub lost: bool,
}

/// RFC 8985 §6.1: the most recently sent segment known delivered, and its RTT.
#[derive(Clone, Debug, Default)]
pub(super) struct Rack {
    xmit_ts: Option<Instant>,
    end_seq: u64,
    rtt: Duration,
    min_rtt: Option<Duration>,
    /// Reordering timer (RFC 8985 §6.2 step 5).
    pub reo_deadline: Option<Instant>,
}

/// `RACK_sent_after(t1, seq1, t2, seq2)`: was (t1, seq1) sent after (t2, seq2)?
fn sent_after(t1: Instant, seq1: u64, t2: Instant, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl Rack {
    /// RFC 8985 §6.2 step 1–2: a segment was delivered (cumulatively or selectively
    /// acknowledged) at `now`.
    pub fn on_delivered(&mut self, now: Instant, seg: &Sent) {
        let rtt = now - seg.xmit_ts;
        // An ambiguous retransmission whose "RTT" is below the path minimum was
        // answered by the original: it tells nothing about the probe's fate.
        if seg.retransmitted && self.min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        if !seg.retransmitted {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        self.rtt = rtt;
        if self.xmit_ts.is_none_or(|t| sent_after(seg.xmit_ts, seg.end, t, self.end_seq)) {
            self.xmit_ts = Some(seg.xmit_ts);
            self.end_seq = seg.end;
        }
    }

    /// RFC 8985 §6.2 step 4 without reordering detection (our paths never reorder):
    /// zero in recovery or once DupThresh segments are SACKed, else min_RTT/4 ≤ SRTT.
    pub fn reo_wnd(
        &self,
        in_recovery: bool,
        sacked_segments: u32,
        dupthresh: u32,
        srtt: Option<Duration>,
    ) -> Duration {
        if in_recovery || sacked_segments >= dupthresh {
            return Duration::ZERO;
        }
        let quarter = Duration::from_nanos(self.min_rtt.map_or(0, |m| m.as_nanos() / 4));
        srtt.map_or(quarter, |s| quarter.min(s))
    }

    /// RFC 8985 §6.2 step 5: mark lost every unacknowledged segment sent before the
    /// most recently delivered one by more than RTT + reo_wnd; arm the reordering timer
    /// for the rest. Returns the number of segments newly marked.
    pub fn detect_loss<'a>(
        &mut self,
        now: Instant,
        reo_wnd: Duration,
        segs: impl Iterator<Item = &'a mut Sent>,
    ) -> u32 {
        self.reo_deadline = None;
        let Some(rack_ts) = self.xmit_ts else { return 0 };
        let mut marked = 0;
        let mut wait = Duration::ZERO;
        for s in segs {
            if s.sacked || s.lost || !sent_after(rack_ts, self.end_seq, s.xmit_ts, s.end) {
                continue;
            }
            let due = s.xmit_ts + self.rtt + reo_wnd;
            if due <= now {
                s.lost = true;
                marked += 1;
            } else {
                wait = wait.max(due - now);
            }
        }
        if wait > Duration::ZERO {
            self.reo_deadline = Some(now + wait);
        }
        marked
    }
}

/// Tail loss probe state (RFC 8985 §7).
#[derive(Clone, Debug, Default)]
pub(super) struct Tlp {
    /// When the probe timeout fires.
    pub deadline: Option<Instant>,
    /// `TLP.end_seq`: the episode in progress ends when this is acknowledged.
    pub end_seq: Option<u64>,
    /// The probe was a retransmission (its loss repair implies congestion).
    pub is_retrans: bool,
}

/// RFC 8985 §7.2: PTO = 2·SRTT, plus the worst-case delayed-ACK time when one segment
/// is in flight; 1 s without an RTT sample.
pub(super) fn probe_timeout(srtt: Option<Duration>, one_in_flight: bool) -> Duration {
    const WC_DEL_ACK: Duration = Duration::from_millis(200);
    match srtt {
        None => Duration::from_secs(1),
        Some(s) if one_in_flight => s.saturating_mul(2) + WC_DEL_ACK,
        Some(s) => s.saturating_mul(2),
    }
}

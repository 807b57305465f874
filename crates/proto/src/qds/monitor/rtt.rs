//! Timing one half of a flow: the path from the middlebox to one end and back.
//!
//! A half is timed by what the middlebox sends toward that end and what comes back from
//! it (spec "Passive RTT estimation"):
//!
//! - **sequence numbers**: a segment carrying sequence space (payload, SYN or FIN) is
//!   remembered as `end of its range → capture time`; the first ACK from that end whose
//!   acknowledgement number covers the range closes it. The SYN and SYN/ACK of the
//!   handshake are timed the same way (each occupies one sequence number, RFC 9293
//!   §3.4), so SYN → SYN/ACK gives the server half and SYN/ACK → first ACK the client
//!   half without a special case.
//! - **TCP timestamps** (RFC 7323 §3, §4.3): the first capture time of each TSval sent
//!   toward the end, matched when that end echoes it as TSecr. Pure ACKs carry TSvals
//!   too, so a half is timed even when no data flows toward its end.
//!
//! Karn's rule (Karn & Partridge 1987; RFC 6298 §3): a segment that starts below the
//! highest sequence number already sent toward the end is a retransmission; an ACK that
//! covers it cannot tell which copy it answers, so every pending sample at or above its
//! start is discarded. Timestamps need no such rule: a retransmission carries a new TSval
//! (RFC 7323 §4.2, the reason timestamps exist).

use std::collections::VecDeque;

use crate::time::{Duration, Instant};

/// `a < b` in sequence space (RFC 9293 §3.4: comparisons are modulo 2^32).
#[inline]
pub(super) fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `a <= b` in sequence space.
#[inline]
pub(super) fn seq_le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

/// Where an RTT sample came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// Data (or SYN/FIN) → covering ACK.
    Seq,
    /// TSval → echoed TSecr.
    Timestamp,
}

/// The samples of one half and the sends still waiting for their answer.
#[derive(Clone, Debug, Default)]
pub(super) struct Half {
    /// Highest sequence number sent toward this end, plus one (`SND.MAX` of the far
    /// sender, as seen here); None before the first segment.
    snd_max: Option<u32>,
    /// Highest acknowledgement number this end has sent (`SND.UNA` of the far sender).
    snd_una: Option<u32>,
    /// Timed sends: (end of the sequence range, capture time), increasing ends.
    pending: VecDeque<(u32, Instant)>,
    /// Timed TSvals: (TSval, first capture time), increasing TSvals.
    ts_pending: VecDeque<(u32, Instant)>,
    /// The sliding window of samples (ns).
    window: Window,
}

/// What a segment sent toward this end turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sent {
    /// Nothing to time (a pure ACK), or timed / skipped because the pending list was full.
    Normal,
    /// A keep-alive (RFC 9293 §3.8.4): at most one byte below SND.UNA. Not timed and not a
    /// retransmission for Karn's rule.
    KeepAlive,
    /// A retransmission: `n` pending samples were discarded (Karn).
    Retransmission(usize),
}

impl Half {
    /// A segment toward this end passed: `seq`, the sequence space it occupies (payload +
    /// SYN + FIN), its TSval if any.
    pub(super) fn on_sent(
        &mut self,
        now: Instant,
        seq: u32,
        len: u32,
        tsval: Option<u32>,
        syn: bool,
        max_pending: usize,
    ) -> Sent {
        if syn && self.snd_max != Some(seq.wrapping_add(len)) {
            // A new connection (a SYN with the same ISN is a retransmission: Karn below).
            // Its sequence and timestamp clocks start afresh (RFC 7323 §5.4 lets each
            // connection have its own TSval offset).
            *self = Half { window: std::mem::take(&mut self.window), ..Half::default() };
            self.snd_max = Some(seq);
        }
        if let Some(v) = tsval {
            // RFC 7323 §4.3: the receiver echoes the TSval of the earliest segment it has
            // not yet acknowledged, so the first capture of each value is the one to time.
            let newer = self.ts_pending.back().is_none_or(|&(last, _)| seq_lt(last, v));
            if newer && self.ts_pending.len() < max_pending {
                self.ts_pending.push_back((v, now));
            }
        }
        if len == 0 {
            return Sent::Normal;
        }
        let end = seq.wrapping_add(len);
        let Some(max) = self.snd_max else {
            // The first segment seen in this direction (a flow picked up mid-stream).
            self.snd_max = Some(end);
            self.time(end, now, max_pending);
            return Sent::Normal;
        };
        if seq_lt(seq, max) {
            if len <= 1 && self.snd_una.is_some_and(|una| seq_lt(seq, una)) {
                return Sent::KeepAlive;
            }
            // Karn: anything pending from `seq` up may be answered by this copy.
            let keep = self.pending.partition_point(|&(e, _)| seq_le(e, seq));
            let dropped = self.pending.len() - keep;
            self.pending.truncate(keep);
            if seq_lt(max, end) {
                self.snd_max = Some(end);
            }
            return Sent::Retransmission(dropped);
        }
        self.snd_max = Some(end);
        self.time(end, now, max_pending);
        Sent::Normal
    }

    /// A segment from this end passed carrying `ack` (if the ACK flag is set) and the
    /// TSecr it echoes (if any). Returns the sample it gave, if any: at most one per
    /// segment, the sequence-number one first (it carries no delayed-ACK bias from
    /// TS.Recent, RFC 7323 §4.3).
    pub(super) fn on_answer(
        &mut self,
        now: Instant,
        ack: Option<u32>,
        tsecr: Option<u32>,
    ) -> Option<(Duration, Source)> {
        let mut sample = None;
        if let Some(a) = ack {
            if self.snd_una.is_none_or(|u| seq_lt(u, a)) {
                self.snd_una = Some(a);
            }
            // The newest send the ACK covers gives the sample: with delayed ACKs (RFC 9293
            // §3.8.6.3) the older ones also waited for the newer one to arrive.
            let n = self.pending.partition_point(|&(e, _)| seq_le(e, a));
            if n > 0 {
                let (_, t) = self.pending[n - 1];
                self.pending.drain(..n);
                sample = Some((now.saturating_since(t), Source::Seq));
            }
        }
        if let Some(e) = tsecr {
            // Echoes are only meaningful on segments with ACK set (RFC 7323 §3.2).
            let n = self.ts_pending.partition_point(|&(v, _)| seq_le(v, e));
            if n > 0 {
                let (v, t) = self.ts_pending[n - 1];
                self.ts_pending.drain(..n);
                if v == e && sample.is_none() {
                    sample = Some((now.saturating_since(t), Source::Timestamp));
                }
            }
        }
        sample
    }

    /// Add a sample to the sliding window of the last `capacity`.
    pub(super) fn push(&mut self, rtt: Duration, capacity: usize) {
        self.window.push(rtt.as_nanos(), capacity);
    }

    /// The window's average, None before the first sample.
    pub(super) fn average(&self) -> Option<Duration> {
        self.window.average().map(Duration::from_nanos)
    }

    /// Samples taken so far.
    pub(super) fn samples(&self) -> u64 {
        self.window.total
    }

    /// Sends waiting for their answer (sequence, timestamp).
    #[cfg(test)]
    pub(super) fn pending_len(&self) -> (usize, usize) {
        (self.pending.len(), self.ts_pending.len())
    }

    fn time(&mut self, end: u32, now: Instant, max_pending: usize) {
        // Sub-sampling: a full list skips sends until answers drain it; the oldest
        // entries stay, so a sample is always closed eventually.
        if self.pending.len() < max_pending {
            self.pending.push_back((end, now));
        }
    }
}

/// The last `capacity` samples and their sum.
#[derive(Clone, Debug, Default)]
struct Window {
    ring: Vec<u64>,
    next: usize,
    sum: u128,
    total: u64,
}

impl Window {
    fn push(&mut self, x: u64, capacity: usize) {
        let capacity = capacity.max(1);
        if self.ring.len() < capacity {
            self.ring.push(x);
        } else {
            self.sum -= u128::from(self.ring[self.next]);
            self.ring[self.next] = x;
            self.next = (self.next + 1) % capacity;
        }
        self.sum += u128::from(x);
        self.total += 1;
    }

    fn average(&self) -> Option<u64> {
        (!self.ring.is_empty()).then(|| (self.sum / self.ring.len() as u128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Instant {
        Instant::from_nanos(x * 1_000_000)
    }

    #[test]
    fn window_averages_the_last_samples() {
        let mut w = Window::default();
        for x in [10, 20, 30, 40] {
            w.push(x, 3);
        }
        // The last three: (20 + 30 + 40) / 3.
        assert_eq!(w.average(), Some(30));
        assert_eq!(w.total, 4);
    }

    #[test]
    fn sequence_comparisons_wrap() {
        assert!(seq_lt(u32::MAX - 5, 3), "RFC 9293 §3.4: modulo 2^32");
        assert!(!seq_lt(3, u32::MAX - 5));
        assert!(seq_le(7, 7));
    }

    #[test]
    fn cumulative_ack_times_the_newest_covered_send() {
        let mut h = Half::default();
        h.on_sent(ms(0), 1000, 100, None, false, 64);
        h.on_sent(ms(2), 1100, 100, None, false, 64);
        h.on_sent(ms(4), 1200, 100, None, false, 64);
        // Covers the first two: timed from the second (2 ms), not the first.
        assert_eq!(h.on_answer(ms(22), Some(1200), None), Some((Duration::from_millis(20), Source::Seq)));
        assert_eq!(h.pending_len().0, 1);
        // A duplicate ACK gives nothing.
        assert_eq!(h.on_answer(ms(23), Some(1200), None), None);
    }

    #[test]
    fn timestamp_echo_of_an_unknown_value_gives_no_sample() {
        let mut h = Half::default();
        h.on_sent(ms(0), 1, 0, Some(100), false, 64);
        h.on_sent(ms(5), 1, 0, Some(105), false, 64);
        // TSecr 103 was never seen (ours: 100 and 105): clears 100, no sample.
        assert_eq!(h.on_answer(ms(20), None, Some(103)), None);
        assert_eq!(
            h.on_answer(ms(25), None, Some(105)),
            Some((Duration::from_millis(20), Source::Timestamp))
        );
    }
}

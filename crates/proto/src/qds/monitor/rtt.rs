//! Timing one half of a flow: the path from the middlebox to one end and back.
//!
//! A half is timed by what the middlebox sends toward that end and what comes back from
//! it (spec "Passive RTT estimation"):
//!
//! - **sequence numbers**: a segment carrying sequence space (payload, SYN or FIN) is
//!   remembered as `its range → capture time`; the first ACK from that end whose
//!   acknowledgement number covers the range closes it. The SYN and SYN/ACK of the
//!   handshake are timed the same way (each occupies one sequence number, RFC 9293
//!   §3.4), so SYN → SYN/ACK gives the server half and SYN/ACK → first ACK the client
//!   half without a special case.
//! - **TCP timestamps** (RFC 7323 §3, §4.3): the first capture time of each TSval sent
//!   toward the end, matched when that end echoes it as TSecr. An end echoes a TSval only
//!   when it next sends something, so only an answer that had to come promptly times the
//!   half: a TSval carried by a segment occupying sequence space, which the end must
//!   acknowledge (RFC 9293 §3.10.7.4, RFC 1122 §4.2.3.2: at most 500 ms later, in practice
//!   within the delayed-ACK timer); or a TSval of a pure ACK echoed by an end that was
//!   sending anyway (its previous packet passed after the TSval did), whose echo waited
//!   at most the gap between its two packets. A pure ACK's TSval echoed by an end that
//!   was idle measures that end's idleness, not the path (a thin server writing every
//!   half second would read as a 500-ms half), and gives no sample.
//!
//! Karn's rule (Karn & Partridge 1987; RFC 6298 §3): a segment that starts below the
//! highest sequence number already sent toward the end is a retransmission; an ACK that
//! covers it cannot tell which copy it answers, so the pending samples whose range
//! overlaps the retransmitted one are discarded. Segments sent once keep their samples,
//! also those held behind the repaired loss: the ACK that finally covers them is
//! unambiguous and includes the repair time, as their delivery did (the per-packet RTT of
//! issue 18: transmission → covering ACK). Timestamps need no such rule: a retransmission
//! carries a new TSval (RFC 7323 §4.2, the reason timestamps exist).

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
    /// Timed sends, increasing ranges that do not overlap.
    pending: VecDeque<Timed>,
    /// Timed TSvals, increasing TSvals.
    ts_pending: VecDeque<Stamp>,
    /// When the last segment from this end passed (for the pure-ACK echo rule above).
    last_answer: Option<Instant>,
    /// The sliding window of samples (ns).
    window: Window,
}

/// A timed send: the sequence range `[start, end)` it occupies, when it passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Timed {
    start: u32,
    end: u32,
    at: Instant,
}

/// A timed TSval: its first capture time, and whether a segment occupying sequence space
/// carried it (then the end must answer it promptly).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    tsval: u32,
    at: Instant,
    prompt: bool,
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
            // A value first seen on a pure ACK and then on data (one clock tick) is
            // answered promptly: the data must be acknowledged.
            let prompt = len > 0;
            let room = self.ts_pending.len() < max_pending;
            match self.ts_pending.back_mut() {
                Some(last) if last.tsval == v => last.prompt |= prompt,
                Some(last) if !seq_lt(last.tsval, v) => {}
                _ if room => self.ts_pending.push_back(Stamp { tsval: v, at: now, prompt }),
                _ => {}
            }
        }
        if len == 0 {
            return Sent::Normal;
        }
        let end = seq.wrapping_add(len);
        let Some(max) = self.snd_max else {
            // The first segment seen in this direction (a flow picked up mid-stream).
            self.snd_max = Some(end);
            self.time(seq, end, now, max_pending);
            return Sent::Normal;
        };
        if seq_lt(seq, max) {
            if len <= 1 && self.snd_una.is_some_and(|una| seq_lt(seq, una)) {
                return Sent::KeepAlive;
            }
            // Karn: a pending send overlapping this copy's range may be answered by it.
            // The ranges increase, so those are one run: ends above `seq`, starts below
            // `end`.
            let from = self.pending.partition_point(|t| seq_le(t.end, seq));
            let to = self.pending.partition_point(|t| seq_lt(t.start, end));
            let dropped = to.saturating_sub(from);
            self.pending.drain(from..from + dropped);
            if seq_lt(max, end) {
                self.snd_max = Some(end);
            }
            return Sent::Retransmission(dropped);
        }
        self.snd_max = Some(end);
        self.time(seq, end, now, max_pending);
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
            let n = self.pending.partition_point(|t| seq_le(t.end, a));
            if n > 0 {
                let t = self.pending[n - 1].at;
                self.pending.drain(..n);
                sample = Some((now.saturating_since(t), Source::Seq));
            }
        }
        if let Some(e) = tsecr {
            // Echoes are only meaningful on segments with ACK set (RFC 7323 §3.2).
            let n = self.ts_pending.partition_point(|s| seq_le(s.tsval, e));
            if n > 0 {
                let s = self.ts_pending[n - 1];
                self.ts_pending.drain(..n);
                // A pure ACK's TSval counts only if this end sent something after it
                // passed: then the echo waited at most the gap between this end's last
                // two packets, which is shorter than the sample (module doc).
                let busy = self.last_answer.is_some_and(|p| s.at < p);
                if s.tsval == e && (s.prompt || busy) && sample.is_none() {
                    sample = Some((now.saturating_since(s.at), Source::Timestamp));
                }
            }
        }
        self.last_answer = Some(self.last_answer.map_or(now, |p| p.max(now)));
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

    fn time(&mut self, start: u32, end: u32, now: Instant, max_pending: usize) {
        // Sub-sampling: a full list skips sends until answers drain it; the oldest
        // entries stay, so a sample is always closed eventually.
        if self.pending.len() < max_pending {
            self.pending.push_back(Timed { start, end, at: now });
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
        h.on_sent(ms(0), 1, 10, Some(100), false, 64);
        h.on_sent(ms(5), 11, 10, Some(105), false, 64);
        // TSecr 103 was never seen (ours: 100 and 105): clears 100, no sample.
        assert_eq!(h.on_answer(ms(20), None, Some(103)), None);
        assert_eq!(
            h.on_answer(ms(25), None, Some(105)),
            Some((Duration::from_millis(20), Source::Timestamp))
        );
    }

    #[test]
    fn a_pure_acks_tsval_counts_only_if_the_end_was_sending() {
        // Pure ACKs (no sequence space) with TSvals 100 at 0 ms and 200 at 50 ms.
        let mut h = Half::default();
        h.on_sent(ms(0), 1, 0, Some(100), false, 64);
        // The end was idle (nothing from it yet) and echoes 100 at 400 ms: its idleness,
        // not the path.
        assert_eq!(h.on_answer(ms(400), None, Some(100)), None);
        h.on_sent(ms(410), 1, 0, Some(200), false, 64);
        // Idle again since 400 ms: no sample at 900 ms either.
        assert_eq!(h.on_answer(ms(900), None, Some(200)), None);
        // A busy end: TSval 300 passes at 900.5 ms and the end sends again at 901 ms (still
        // echoing 200), then echoes 300 at 907 ms.
        h.on_sent(Instant::from_nanos(900_500_000), 1, 0, Some(300), false, 64);
        assert_eq!(h.on_answer(ms(901), None, Some(200)), None, "older echo");
        assert_eq!(
            h.on_answer(ms(907), None, Some(300)),
            Some((Duration::from_micros(6_500), Source::Timestamp)),
            "its echo waited at most its 6-ms gap"
        );
    }

    #[test]
    fn karn_discards_only_the_overlapping_sends() {
        let mut h = Half::default();
        for i in 0..4u32 {
            h.on_sent(ms(u64::from(i)), 1000 + 100 * i, 100, None, false, 64);
        }
        // The second segment, [1100, 1200), again: only its own sample is ambiguous.
        assert_eq!(h.on_sent(ms(30), 1100, 100, None, false, 64), Sent::Retransmission(1));
        assert_eq!(h.pending_len().0, 3);
        // A repacketised retransmission spanning [1250, 1350) overlaps the last two.
        assert_eq!(h.on_sent(ms(31), 1250, 100, None, false, 64), Sent::Retransmission(2));
        assert_eq!(h.on_answer(ms(20), Some(1100), None), Some((Duration::from_millis(20), Source::Seq)));
    }
}

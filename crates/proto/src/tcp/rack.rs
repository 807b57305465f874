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
    /// Its priority band with [`super::Mechanisms::rack_bands`] (1 = carries an
    /// interactive byte, [`super::Sender::mark_interactive`]); 0 otherwise.
    pub band: u8,
}

/// How RACK's reordering window is chosen (`tcp.rack_reo_wnd`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReoWnd {
    /// min_RTT/4 (≤ SRTT), zero in recovery or once DupThresh segments are SACKed.
    #[default]
    Static,
    /// RFC 8985 §6.2 steps 3–4 in full: once reordering has been seen the window stays
    /// open in recovery too, and with DSACK it grows by min_RTT/4 per round trip in which
    /// a DSACK arrives, persisting for 16 recoveries.
    Adaptive,
    /// As [`ReoWnd::Adaptive`], with the DSACKs Linux lets grow the window
    /// (net/ipv4/tcp_input.c `tcp_dsack_seen`: `if (tp->reord_seen && !(state->flag &
    /// FLAG_DSACK_TLP)) tp->rack.dsack_seen = 1`): only once reordering has been seen,
    /// and not the DSACK of a tail-loss probe (ending at `tlp_high_seq`) — "TLP is
    /// timer-driven, not triggered by RACK", so its duplicate says nothing about
    /// reordering.
    Linux,
}

/// Which rules arm the tail-loss-probe timer (`tcp.tlp_timer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlpTimer {
    /// RFC 8985 §7.2: PTO = 2·SRTT (+ WCDelAckT with one segment in flight), re-armed
    /// on every transmission and every ACK while no probe is outstanding and the
    /// connection is not in recovery.
    #[default]
    Rfc,
    /// Linux 6.x `tcp_schedule_loss_probe` (net/ipv4/tcp_output.c): PTO = 2·SRTT plus
    /// `tcp_rto_min_us` with one segment in flight, else `TCP_TIMEOUT_MIN_US` (2 ms),
    /// never past the RTO; armed only in the Open or CWR state (no segment SACKed,
    /// marked lost or retransmitted and outstanding — `tcp_try_keep_open` — and not in
    /// recovery or after a timeout), and only when new data is sent (`tcp_write_xmit`)
    /// or an ACK acknowledges new data (`FLAG_SET_XMIT_TIMER` → `tcp_set_xmit_timer`);
    /// the reordering timer replaces it (one timer slot, `icsk_pending`).
    Linux,
}

/// RFC 8985 §6.2 step 4: recoveries a grown window persists for (`TCP_RACK_RECOVERY_THRESH`).
const REO_WND_PERSIST: u8 = 16;

/// RFC 8985 §6.1: the most recently sent segment known delivered (`RACK.xmit_ts`,
/// `RACK.end_seq`) and its RTT (`RACK.rtt`).
#[derive(Clone, Copy, Debug, Default)]
struct Latest {
    xmit_ts: Option<Instant>,
    end_seq: u64,
    rtt: Duration,
}

/// RFC 8985 §6.1: the most recently sent segment known delivered, and its RTT — one per
/// priority band with [`super::Mechanisms::rack_bands`] (else band 0 only); §6.2
/// steps 3–4: the reordering state.
#[derive(Clone, Debug)]
pub(super) struct Rack {
    latest: [Latest; 2],
    min_rtt: Option<Duration>,
    /// Reordering timer (RFC 8985 §6.2 step 5).
    pub reo_deadline: Option<Instant>,
    /// `RACK.fack`: the highest end sequence delivered (step 3).
    fack: u64,
    /// `RACK.dsack_round`: a DSACK already grew the window in the round trip ending
    /// when SND.UNA reaches this; 0 for none (SND.NXT is > 0 once a DSACK can come).
    /// Plain integers, not `Option`s, keep the sender's cold part a line shorter.
    dsack_round: u64,
    /// `RACK.reo_wnd_mult` (≥ 1).
    reo_wnd_mult: u32,
    /// `RACK.reo_wnd_persist`: recoveries left before the multiplier resets.
    reo_wnd_persist: u8,
    /// `RACK.reordering_seen` (step 3).
    reordering_seen: bool,
    /// End of the DSACK block of the ACK being processed (RFC 2883 §4), 0 for none.
    pub dsack_end: u64,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            latest: [Latest::default(); 2],
            min_rtt: None,
            reo_deadline: None,
            fack: 0,
            dsack_round: 0,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            reordering_seen: false,
            dsack_end: 0,
        }
    }
}

/// `RACK_sent_after(t1, seq1, t2, seq2)`: was (t1, seq1) sent after (t2, seq2)?
fn sent_after(t1: Instant, seq1: u64, t2: Instant, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl Rack {
    /// RFC 8985 §6.2 step 1–2: a segment was delivered (cumulatively or selectively
    /// acknowledged) at `now`.
    pub fn on_delivered(&mut self, now: Instant, seg: &Sent) {
        // Step 3: a never-retransmitted segment delivered below the highest end
        // sequence delivered so far was reordered (segments come in ascending order).
        if seg.end > self.fack {
            self.fack = seg.end;
        } else if seg.end < self.fack && !seg.retransmitted {
            self.reordering_seen = true;
        }
        let rtt = now - seg.xmit_ts;
        // An ambiguous retransmission whose "RTT" is below the path minimum was
        // answered by the original: it tells nothing about the probe's fate.
        if seg.retransmitted && self.min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        if !seg.retransmitted {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        let latest = &mut self.latest[seg.band as usize];
        latest.rtt = rtt;
        if latest.xmit_ts.is_none_or(|t| sent_after(seg.xmit_ts, seg.end, t, latest.end_seq)) {
            latest.xmit_ts = Some(seg.xmit_ts);
            latest.end_seq = seg.end;
        }
    }

    /// RFC 8985 §6.2 step 4, `RACK_update_reo_wnd()`'s first half, once per ACK: a DSACK
    /// grows the multiplier, at most once per round trip (`RACK.dsack_round`), and
    /// re-arms its persistence; each recovery that ends without one counts down
    /// `RACK.reo_wnd_persist`, and at zero the multiplier returns to 1.
    pub fn update_reo_wnd(&mut self, snd_una: u64, snd_nxt: u64, dsack: bool, exiting_recovery: bool) {
        if self.dsack_round != 0 && snd_una >= self.dsack_round {
            self.dsack_round = 0;
        }
        if self.dsack_round == 0 && dsack {
            self.dsack_round = snd_nxt;
            self.reo_wnd_mult += 1;
            self.reo_wnd_persist = REO_WND_PERSIST;
        } else if exiting_recovery {
            self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
            }
        }
    }

    /// RFC 8985 §6.2 step 4, the window itself. [`ReoWnd::Static`]: zero in recovery or
    /// once DupThresh segments are SACKed, else min_RTT/4 ≤ SRTT. [`ReoWnd::Adaptive`]:
    /// the zero applies only while no reordering has been seen, and the window is
    /// `reo_wnd_mult`·min_RTT/4 ≤ SRTT.
    pub fn reo_wnd(
        &self,
        mode: ReoWnd,
        in_recovery: bool,
        sacked_segments: u32,
        dupthresh: u32,
        srtt: Option<Duration>,
    ) -> Duration {
        let (keep_open, mult) = match mode {
            ReoWnd::Static => (false, 1),
            ReoWnd::Adaptive | ReoWnd::Linux => (self.reordering_seen, self.reo_wnd_mult as u64),
        };
        if !keep_open && (in_recovery || sacked_segments >= dupthresh) {
            return Duration::ZERO;
        }
        let quarter = Duration::from_nanos(self.min_rtt.map_or(0, |m| m.as_nanos() / 4).saturating_mul(mult));
        srtt.map_or(quarter, |s| quarter.min(s))
    }

    /// `RACK.reo_wnd_mult`.
    #[cfg(test)]
    pub fn reo_wnd_mult(&self) -> u32 {
        self.reo_wnd_mult
    }

    /// Does this DSACK count for the window (`RACK_update_reo_wnd`'s input)? All do,
    /// except with [`ReoWnd::Linux`] (see there): `tlp_end` is the outstanding probe's
    /// `TLP.end_seq` when the ACK arrived.
    pub fn dsack_counts(&self, mode: ReoWnd, dsack_end: Option<u64>, tlp_end: Option<u64>) -> bool {
        match (mode, dsack_end) {
            (_, None) => false,
            (ReoWnd::Linux, Some(end)) => self.reordering_seen && tlp_end != Some(end),
            (ReoWnd::Static | ReoWnd::Adaptive, Some(_)) => true,
        }
    }

    /// `RACK.reordering_seen`.
    #[cfg(test)]
    pub fn reordering_seen(&self) -> bool {
        self.reordering_seen
    }

    /// RFC 8985 §6.2 step 5: mark lost every unacknowledged segment sent before the
    /// most recently delivered one by more than RTT + reo_wnd; arm the reordering timer
    /// for the rest. Returns the number of segments newly marked. With bands, "the most
    /// recently delivered one" is of the segment's own band: a priority queue reorders
    /// the bands by design, but keeps each band in order. A segment no later one of its
    /// own band has overtaken (a band's lost tail) is judged by the other band's
    /// deliveries only `cross_wnd` (the RTO) after it left: the path is alive, and no
    /// ACK came for it within the time TCP allows one.
    pub fn detect_loss<'a>(
        &mut self,
        now: Instant,
        reo_wnd: Duration,
        cross_wnd: Duration,
        segs: impl Iterator<Item = &'a mut Sent>,
    ) -> u32 {
        self.reo_deadline = None;
        let mut marked = 0;
        let mut wait = Duration::ZERO;
        for s in segs {
            if s.sacked || s.lost {
                continue;
            }
            let own = &self.latest[s.band as usize];
            let other = &self.latest[1 - s.band as usize];
            let after = |l: &Latest| l.xmit_ts.is_some_and(|t| sent_after(t, l.end_seq, s.xmit_ts, s.end));
            let due = if after(own) {
                s.xmit_ts + own.rtt + reo_wnd
            } else if after(other) {
                s.xmit_ts + cross_wnd
            } else {
                continue;
            };
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

/// Linux's PTO (`tcp_schedule_loss_probe`): `srtt_us >> 2` (2·SRTT), plus
/// `tcp_rto_min_us` (the minimum RTO, 200 ms by default: room for a delayed ACK) when
/// one segment is in flight, else `TCP_TIMEOUT_MIN_US` (2 ms); `TCP_TIMEOUT_INIT` (1 s)
/// without an RTT sample. The caller caps it by the RTO.
pub(super) fn probe_timeout_linux(
    srtt: Option<Duration>,
    one_in_flight: bool,
    rto_min: Duration,
) -> Duration {
    const TIMEOUT_MIN: Duration = Duration::from_millis(2);
    match srtt {
        None => Duration::from_secs(1),
        Some(s) if one_in_flight => s.saturating_mul(2) + rto_min,
        Some(s) => s.saturating_mul(2) + TIMEOUT_MIN,
    }
}

#[cfg(test)]
mod tests {
    //! RFC 8985 §6.2 steps 3–4 on RACK's own state.
    use super::*;

    fn delivered(rack: &mut Rack, end: u64, retransmitted: bool) {
        let seg = Sent {
            start: end - 1000,
            end,
            xmit_ts: Instant::ZERO,
            retransmitted,
            sacked: false,
            lost: false,
            band: 0,
        };
        rack.on_delivered(Instant::from_nanos(100_000_000), &seg);
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn dsack_grows_the_multiplier_once_per_round_trip() {
        let mut r = Rack::default();
        r.update_reo_wnd(0, 10_000, true, false);
        assert_eq!(r.reo_wnd_mult(), 2, "RACK.reo_wnd_mult += 1; RACK.dsack_round = SND.NXT");
        r.update_reo_wnd(5_000, 12_000, true, false);
        assert_eq!(r.reo_wnd_mult(), 2, "SND.UNA < dsack_round: same round trip");
        r.update_reo_wnd(10_000, 14_000, true, false);
        assert_eq!(r.reo_wnd_mult(), 3, "SND.UNA ≥ dsack_round: the round is over");
    }

    #[test]
    fn multiplier_persists_sixteen_recoveries_then_resets() {
        let mut r = Rack::default();
        r.update_reo_wnd(0, 10_000, true, false);
        for k in 1..=15 {
            r.update_reo_wnd(10_000 * k, 10_000 * k + 1, false, true);
            assert_eq!(r.reo_wnd_mult(), 2, "RACK.reo_wnd_persist after {k} recoveries");
        }
        r.update_reo_wnd(200_000, 200_001, false, true);
        assert_eq!(r.reo_wnd_mult(), 1, "the 16th recovery without DSACK resets the multiplier");
        // A DSACK re-arms the persistence: 16 more recoveries.
        r.update_reo_wnd(300_000, 300_001, true, false);
        r.update_reo_wnd(300_001, 300_002, false, true);
        assert_eq!(r.reo_wnd_mult(), 2);
    }

    #[test]
    fn window_grows_with_the_multiplier_up_to_srtt() {
        let mut r = Rack::default();
        delivered(&mut r, 1000, false); // min_RTT 100 ms
        let srtt = Some(Duration::from_nanos(160 * MS));
        let w = |r: &Rack| r.reo_wnd(ReoWnd::Adaptive, false, 0, 3, srtt);
        assert_eq!(w(&r), Duration::from_nanos(25 * MS), "min_RTT/4");
        r.update_reo_wnd(0, 10_000, true, false);
        assert_eq!(w(&r), Duration::from_nanos(50 * MS), "2·min_RTT/4");
        for k in 1..10 {
            r.update_reo_wnd(10_000 * k, 10_000 * (k + 1), true, false);
        }
        assert_eq!(w(&r), Duration::from_nanos(160 * MS), "capped at SRTT");
        assert_eq!(
            r.reo_wnd(ReoWnd::Static, false, 0, 3, srtt),
            Duration::from_nanos(25 * MS),
            "static ignores the multiplier"
        );
    }

    #[test]
    fn reordering_seen_keeps_the_window_open_in_recovery() {
        let mut r = Rack::default();
        delivered(&mut r, 3000, false);
        assert_eq!(r.reo_wnd(ReoWnd::Adaptive, true, 0, 3, None), Duration::ZERO, "no reordering yet");
        delivered(&mut r, 2000, true);
        assert!(!r.reordering_seen(), "a retransmitted segment below RACK.fack proves nothing");
        delivered(&mut r, 1000, false);
        assert!(r.reordering_seen(), "RFC 8985 §6.2 step 3");
        assert_eq!(r.reo_wnd(ReoWnd::Adaptive, true, 5, 3, None), Duration::from_nanos(25 * MS));
        assert_eq!(r.reo_wnd(ReoWnd::Static, true, 5, 3, None), Duration::ZERO);
    }
}

//! Proportional Rate Reduction, RFC 6937 §3, with the Slow-Start Reduction Bound
//! (PRR-SSRB, the RFC's recommendation, §6).
//!
//! During SACK-based recovery it decides how many bytes each ACK may release: while the
//! pipe is above ssthresh, sending follows delivery in the proportion
//! ssthresh / RecoverFS, so the window comes down to ssthresh over one round trip
//! instead of in a half-RTT silence (RFC 6675) followed by a burst; once the pipe is at
//! or below ssthresh (heavy losses), it grows back by at most one SMSS more than was
//! delivered per ACK. The sender sets `cwnd = pipe + sndcnt` and its usual
//! `cwnd − pipe ≥ 1 SMSS` rule does the rest. Every amount is in the window's unit:
//! bytes, or segments with `cwnd_unit = "packets"` (then "SMSS" is one segment, as in
//! Linux's `tcp_cwnd_reduction`).

/// One recovery episode's PRR state (RFC 6937 §3, "At the beginning of recovery").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Prr {
    /// `prr_delivered`: bytes delivered to the receiver during recovery.
    pub delivered: u64,
    /// `prr_out`: bytes sent during recovery.
    pub out: u64,
    /// `RecoverFS`: FlightSize (snd.nxt − snd.una) when recovery began.
    pub recover_fs: u64,
}

impl Prr {
    /// Recovery begins with `flight` bytes outstanding.
    pub fn start(flight: u64) -> Self {
        Prr { delivered: 0, out: 0, recover_fs: flight.max(1) }
    }

    /// RFC 6937 §3, "On every ACK during recovery": `delivered` = DeliveredData
    /// (change in snd.una + change in SACKed bytes), `pipe` per RFC 6675. Returns
    /// `sndcnt`, the bytes this ACK lets the sender send.
    pub fn on_ack(&mut self, delivered: u64, pipe: u64, ssthresh: u64, mss: u64) -> u64 {
        self.delivered += delivered;
        let sndcnt = if pipe > ssthresh {
            // Proportional Rate Reduction: CEIL(prr_delivered·ssthresh/RecoverFS) − prr_out.
            let target = (self.delivered as u128 * ssthresh as u128).div_ceil(self.recover_fs as u128);
            (target.min(u64::MAX as u128) as u64).saturating_sub(self.out)
        } else {
            // PRR-SSRB: limit = MAX(prr_delivered − prr_out, DeliveredData) + MSS.
            let limit = self.delivered.saturating_sub(self.out).max(delivered) + mss;
            (ssthresh - pipe).min(limit)
        };
        // The fast retransmit goes out on the ACK that starts recovery even when the
        // proportion rounds below a segment (Linux `tcp_cwnd_reduction`: "Force a fast
        // retransmit upon entering fast recovery").
        if self.out == 0 {
            sndcnt.max(mss)
        } else {
            sndcnt
        }
    }

    /// "On any data transmission or retransmission": `prr_out += (data sent)`.
    pub fn on_sent(&mut self, bytes: u64) {
        self.out += bytes;
    }
}

#[cfg(test)]
mod tests {
    //! RFC 6937 §3.1's examples: 20 segments in flight, ssthresh 10, limited transmit
    //! (RFC 3042) sends 2 new segments on the first 2 duplicate ACKs and the third
    //! starts recovery with the retransmission. Counted in segments (MSS = 1).
    use super::*;

    /// Play ACKs with `delivered` segments each from `pipe0` (pipe after the entry ACK
    /// is processed, before sending); every ACK's sends raise the pipe, every delivery
    /// lowers it. Returns the segments sent on each ACK.
    fn play(prr: &mut Prr, mut pipe: u64, ssthresh: u64, acks: &[u64]) -> Vec<u64> {
        let mut sent = Vec::new();
        for (i, &d) in acks.iter().enumerate() {
            if i > 0 {
                pipe -= d; // the delivered segments leave the pipe
            }
            let n = prr.on_ack(d, pipe, ssthresh, 1);
            prr.on_sent(n);
            pipe += n;
            sent.push(n);
        }
        sent
    }

    #[test]
    fn single_loss_spreads_the_reduction_over_the_round_trip() {
        // ACKs 3..=19 each SACK one segment; RecoverFS = snd.nxt − snd.una = 22 (20 + 2
        // limited-transmit segments), ssthresh = RecoverFS/2 = 11; the entry ACK (3)
        // leaves pipe = 22 − 3 SACKed − 1 lost = 18.
        let mut prr = Prr::start(22);
        let sent = play(&mut prr, 18, 11, &[1; 17]);
        // RFC 6937 §3.1, PRR row: R on ACK 3, N on 5, 7, 9, 11, 13, 15 (proportional,
        // ⌈prr_delivered·11/22⌉ − prr_out), nothing on 16 and 17, N on 18 and 19 (RB "s":
        // pipe ≤ ssthresh, sndcnt = ssthresh − pipe).
        assert_eq!(
            sent,
            [1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1],
            "RFC 6937 §3.1: sndcnt = CEIL(prr_delivered·ssthresh/RecoverFS) − prr_out"
        );
        // RFC 6937 §3.1: "all 3 algorithms send the same total amount of data" (R + 8 N).
        assert_eq!(sent.iter().sum::<u64>(), 9);
    }

    #[test]
    fn burst_loss_ssrb_sends_delivered_plus_one_per_ack() {
        // Segments 0–14 lost, ACKs 15–19 arrive; the third (17) starts recovery: pipe =
        // 22 − 3 SACKed − 15 lost = 4 ≤ ssthresh 10.
        let mut prr = Prr::start(22);
        let sent = play(&mut prr, 4, 10, &[1, 1, 1]);
        assert_eq!(sent, [2, 2, 2], "RFC 6937 §3.1 PRR-SSRB: 2R on each ACK (RB: bd, d, d)");
    }

    #[test]
    fn burst_loss_crb_limit_is_delivered_minus_out() {
        // The conservative bound for comparison (RFC 6937 §3.1 PRR-CRB row: R R R): the
        // SSRB limit minus its extra SMSS.
        let mut prr = Prr::start(22);
        let mut crb = Vec::new();
        for _ in 0..3 {
            prr.delivered += 1;
            let n = (10 - 4u64).min(prr.delivered - prr.out).max(if prr.out == 0 { 1 } else { 0 });
            prr.on_sent(n);
            crb.push(n);
        }
        assert_eq!(crb, [1, 1, 1]);
    }
}

//! Reno window growth and reduction (RFC 5681 §3.1), in bytes or, as Linux's
//! `tcp_reno_cong_avoid` / `tcp_reno_ssthresh`, in segments.

use super::{additive_increase, slow_start, AckSample, CwndUnit, Window};

/// Reno's state: only the congestion-avoidance counter of packet-counted windows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reno {
    /// Segments ACKed towards the next increase (Linux `snd_cwnd_cnt`).
    cwnd_cnt: u64,
}

impl Reno {
    /// Grow on an ACK outside recovery.
    pub fn on_ack(&mut self, w: &mut Window, ack: &AckSample) {
        match w.unit {
            CwndUnit::Bytes => {
                // RFC 5681 grows on every ACK, whether or not the window limited the
                // sender (as thinwan always did; RFC 7661 is not modelled).
                if w.cwnd < w.ssthresh {
                    slow_start(w, ack.acked); // (2)
                } else {
                    // (3): about one SMSS per RTT, SMSS·SMSS/cwnd per ACK.
                    w.cwnd += (w.seg * w.seg / w.cwnd).max(1);
                }
            }
            CwndUnit::Packets => {
                if !ack.cwnd_limited(w) {
                    return;
                }
                let mut acked = ack.acked;
                if w.cwnd < w.ssthresh {
                    acked = slow_start(w, acked);
                    if acked == 0 {
                        return;
                    }
                }
                let per = w.cwnd;
                additive_increase(w, &mut self.cwnd_cnt, per, acked);
            }
        }
    }

    /// The new `ssthresh` after a congestion event or a timeout. Bytes: RFC 5681 (4),
    /// max(FlightSize / 2, 2·SMSS). Packets: Linux `tcp_reno_ssthresh`, max(cwnd / 2, 2).
    pub fn ssthresh(&mut self, w: &Window, flight: u64) -> u64 {
        self.cwnd_cnt = 0;
        match w.unit {
            CwndUnit::Bytes => flight.div_ceil(2).max(2 * w.seg),
            CwndUnit::Packets => (w.cwnd / 2).max(2),
        }
    }
}

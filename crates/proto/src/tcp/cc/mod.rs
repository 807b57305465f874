//! Congestion control: how the window grows on ACKs and what a congestion event does to
//! it, kept apart from loss recovery (ns-3's `TcpCongestionOps` / `TcpRecoveryOps` split,
//! quinn's `congestion.rs`). Recovery (sender.rs: RFC 5681/6582/6675, RFC 8985) decides
//! *that* a segment was lost and what to retransmit; the controller decides the new
//! `ssthresh` and how `cwnd` grows afterwards.
//!
//! The sender owns `cwnd` and `ssthresh` (they sit in its hot cache lines) and asks:
//! - [`Controller::on_ack`] — an ACK advanced SND.UNA outside recovery: grow `cwnd`;
//! - [`Controller::on_congestion_event`] — fast retransmit, RACK-marked loss or a
//!   TLP-repaired loss: the new `ssthresh` (recovery then sets `cwnd` from it);
//! - [`Controller::on_rto`] — the first retransmission timeout of a loss: `ssthresh`;
//! - [`Controller::on_tx_start`] — sending resumes after a quiescent period.
//!
//! Windows are counted in a [`CwndUnit`]: bytes (RFC 5681, RFC 9438 "in bytes"), or
//! segments as Linux's `snd_cwnd` does. With [`CwndUnit::Packets`] the controller models
//! Linux's accounting as a whole: slow start adds one per segment ACKed up to
//! `ssthresh` (`tcp_slow_start`), congestion avoidance adds one per `cwnd` segments
//! ACKed through a counter (`snd_cwnd_cnt`, `tcp_cong_avoid_ai`), `ssthresh` is taken
//! from `cwnd` (the algorithms' `ssthresh()` hooks: `tcp_reno_ssthresh`,
//! `bictcp_recalc_ssthresh`), and the window grows only while it limits the sender
//! (`tcp_is_cwnd_limited`). The sender counts segments in flight for its window check.
//!
//! Reading list: RFC 5681 §3.1 (slow start, congestion avoidance, (4) ssthresh);
//! RFC 9438 (CUBIC); RFC 3465 (byte counting, used for CUBIC's per-ACK increase in bytes).

mod cubic;
pub mod hystart;
mod reno;

pub use cubic::Cubic;
pub use hystart::HyStart;
pub use reno::Reno;

use crate::time::{Duration, Instant};

/// `tcp.congestion_control`: which algorithm grows and reduces the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Algorithm {
    /// RFC 5681 slow start and congestion avoidance, ssthresh = FlightSize / 2.
    #[default]
    Reno,
    /// RFC 9438 CUBIC (slow start RFC 5681's, or ended by Linux's HyStart).
    Cubic,
}

/// `tcp.cwnd_unit`: what `cwnd` and `ssthresh` count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CwndUnit {
    /// Bytes (RFC 5681): a window admits its size in bytes, whatever the segments.
    #[default]
    Bytes,
    /// Segments, as Linux's `snd_cwnd`: a window of N admits N segments, whatever their
    /// size (see the module documentation for what else this brings).
    Packets,
}

/// The sender's window as the controller sees it, in the window's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Congestion window.
    pub cwnd: u64,
    /// Slow-start threshold (`u64::MAX` before the first congestion event).
    pub ssthresh: u64,
    /// One full segment in this unit: SMSS bytes, or 1.
    pub seg: u64,
    /// The unit.
    pub unit: CwndUnit,
}

/// What the sender tells the controller about an ACK that advanced SND.UNA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSample {
    /// Arrival time (virtual).
    pub now: Instant,
    /// Newly acknowledged: bytes, or whole segments with [`CwndUnit::Packets`].
    pub acked: u64,
    /// Sent and not acknowledged before this ACK, in the window's unit (SACKed ones not
    /// counted).
    pub prior_in_flight: u64,
    /// Smoothed RTT, if the estimator has one.
    pub srtt: Option<Duration>,
    /// This ACK's RTT sample (Karn's rule), if it gave one.
    pub rtt: Option<Duration>,
    /// SND.UNA after this ACK.
    pub snd_una: u64,
    /// SND.NXT (one past the highest byte sent).
    pub snd_nxt: u64,
    /// Linux's `tcp_is_cwnd_limited` as the sender tracked it over the round trip
    /// (`tcp_cwnd_validate`), when it does (packet-counted windows); `None`: judge by
    /// this ACK alone ([`AckSample::cwnd_limited`]).
    pub round_cwnd_limited: Option<bool>,
}

impl AckSample {
    /// Did the window limit the sender when this ACK arrived? The sender's per-round
    /// answer when it gives one, else Linux's `tcp_is_cwnd_limited` per ACK: the window was full
    /// (no room for another segment), or, in slow start, more than half of it was in
    /// use (so it may grow to twice what is being acknowledged). RFC 9438 §5.8: an
    /// application-limited flow does not grow its window.
    pub fn cwnd_limited(&self, w: &Window) -> bool {
        if let Some(limited) = self.round_cwnd_limited {
            return limited;
        }
        self.prior_in_flight + w.seg > w.cwnd || (w.cwnd < w.ssthresh && w.cwnd < 2 * self.prior_in_flight)
    }
}

/// A connection's congestion controller: an enum held inline in the sender (no boxed
/// trait object on the per-ACK path).
#[derive(Clone, Debug, PartialEq)]
pub enum Controller {
    /// RFC 5681.
    Reno(Reno),
    /// RFC 9438.
    Cubic(Cubic),
}

impl Controller {
    /// A fresh controller of the given algorithm.
    pub fn new(algorithm: Algorithm) -> Self {
        Self::with_hystart(algorithm, false)
    }

    /// The same, CUBIC's slow start ending by Linux's HyStart when `hystart` (Reno has
    /// none: Linux's HyStart lives in tcp_cubic.c).
    pub fn with_hystart(algorithm: Algorithm, hystart: bool) -> Self {
        match algorithm {
            Algorithm::Reno => Controller::Reno(Reno::default()),
            Algorithm::Cubic if hystart => Controller::Cubic(Cubic::with_hystart()),
            Algorithm::Cubic => Controller::Cubic(Cubic::default()),
        }
    }

    /// An ACK advanced SND.UNA while not in loss recovery: grow `w.cwnd` (HyStart may
    /// lower `w.ssthresh` to it).
    pub fn on_ack(&mut self, w: &mut Window, ack: &AckSample) {
        match self {
            Controller::Reno(r) => r.on_ack(w, ack),
            Controller::Cubic(c) => c.on_ack(w, ack),
        }
    }

    /// A congestion event detected by loss recovery (fast retransmit, RACK-marked loss,
    /// a loss a tail loss probe repaired): returns the new `ssthresh`. `flight` is
    /// RFC 5681's FlightSize in the window's unit.
    pub fn on_congestion_event(&mut self, now: Instant, w: &Window, flight: u64) -> u64 {
        match self {
            Controller::Reno(r) => r.ssthresh(w, flight),
            Controller::Cubic(c) => c.on_congestion_event(now, w, flight),
        }
    }

    /// The first retransmission timeout of a loss (RFC 5681 (4); RFC 9438 §4.8):
    /// returns the new `ssthresh` (the sender sets `cwnd` to the loss window).
    pub fn on_rto(&mut self, now: Instant, w: &Window, flight: u64) -> u64 {
        match self {
            Controller::Reno(r) => r.ssthresh(w, flight),
            Controller::Cubic(c) => c.on_rto(now, w, flight),
        }
    }

    /// The sender transmits with nothing in flight, `idle` after its last transmission.
    pub fn on_tx_start(&mut self, now: Instant, idle: Duration) {
        match self {
            Controller::Reno(_) => {}
            Controller::Cubic(c) => c.on_tx_start(now, idle),
        }
    }
}

/// Slow start. Bytes: RFC 5681 (2), at most one SMSS per ACK (RFC 3465 L = 1), and
/// nothing left over. Packets: Linux `tcp_slow_start`, one per segment ACKed up to
/// `ssthresh`; returns the segments left for congestion avoidance.
fn slow_start(w: &mut Window, acked: u64) -> u64 {
    match w.unit {
        CwndUnit::Bytes => {
            w.cwnd += acked.min(w.seg);
            0
        }
        CwndUnit::Packets => {
            let cwnd = (w.cwnd + acked).min(w.ssthresh);
            let left = acked - (cwnd - w.cwnd);
            w.cwnd = cwnd;
            left
        }
    }
}

/// Linux `tcp_cong_avoid_ai`: one more segment of window per `per` segments ACKed,
/// counted in `cnt` (`snd_cwnd_cnt`) across ACKs.
fn additive_increase(w: &mut Window, cnt: &mut u64, per: u64, acked: u64) {
    let per = per.max(1);
    // The window may have shrunk since the counter last reached `per`.
    if *cnt >= per {
        *cnt = 0;
        w.cwnd += 1;
    }
    *cnt += acked;
    if *cnt >= per {
        let delta = *cnt / per;
        *cnt -= delta * per;
        w.cwnd += delta;
    }
}

#[cfg(test)]
mod tests;

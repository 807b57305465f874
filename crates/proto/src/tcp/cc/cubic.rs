//! CUBIC, RFC 9438: the window follows W_cubic(t) = C·(t − K)³ + W_max from the start of
//! each congestion-avoidance stage, never below what Reno would have (the Reno-friendly
//! estimate W_est), and a congestion event multiplies it by β_cubic = 0.7.
//!
//! The arithmetic is in segments (f64), as the RFC writes it; a byte-counted window is
//! converted at the edges (cwnd / SMSS). Time is the core's virtual [`Instant`].
//!
//! Slow start is RFC 5681's, or with [`Cubic::with_hystart`] ends as Linux's does
//! (module `hystart`). Not modelled: HyStart++ (RFC 9406), the undo of spurious congestion events (§4.9), ECN (§4.6's `reduction_on_ece`).

use super::hystart::HyStart;
use super::{additive_increase, slow_start, AckSample, CwndUnit, Window};
use crate::time::{Duration, Instant};

/// §4.1 / §5.1: C = 0.4 (segments / s³).
pub const C: f64 = 0.4;
/// §4.6: β_cubic = 0.7.
pub const BETA: f64 = 0.7;
/// §4.3: α_cubic = 3·(1 − β_cubic) / (1 + β_cubic) ≈ 0.529, Reno's average rate for the
/// same loss rate with the gentler decrease β_cubic.
pub const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// CUBIC's state between ACKs (all windows in segments).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cubic {
    /// §4.1 W_max: the window just before the last reduction (after fast convergence,
    /// §4.7); 0 when unknown (before the first congestion event and after a timeout),
    /// and then the window at the start of congestion avoidance (K = 0, §4.8).
    w_max: f64,
    /// §4.1 cwnd_prior: the window when ssthresh was last set (§4.3's α switch).
    cwnd_prior: f64,
    /// §4.2 K, seconds.
    k: f64,
    /// §4.1 t_epoch: when the current congestion-avoidance stage began (`None` until
    /// its first ACK).
    t_epoch: Option<Instant>,
    /// §4.3 W_est.
    w_est: f64,
    /// Segments ACKed towards the next increase of a packet-counted window (Linux
    /// `snd_cwnd_cnt`).
    cwnd_cnt: u64,
    /// Linux's slow-start exit (`tcp.hystart`), if on.
    hystart: Option<HyStart>,
}

impl Cubic {
    /// CUBIC whose slow start ends by Linux's HyStart (tcp_cubic.c `hystart = 1`).
    pub fn with_hystart() -> Self {
        Cubic { hystart: Some(HyStart::default()), ..Cubic::default() }
    }

    /// HyStart's state, if on.
    pub fn hystart(&self) -> Option<&HyStart> {
        self.hystart.as_ref()
    }

    /// §4.2 Figure 1, W_cubic(t) = C·(t − K)³ + W_max, for `t` seconds into the stage.
    pub fn w_cubic(&self, t: f64) -> f64 {
        C * (t - self.k).powi(3) + self.w_max
    }

    /// §4.2 K (seconds).
    pub fn k(&self) -> f64 {
        self.k
    }

    /// §4.1 W_max (segments).
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// §4.3 W_est (segments).
    pub fn w_est(&self) -> f64 {
        self.w_est
    }

    /// Slow start below ssthresh, then §4.2–4.5 in congestion avoidance.
    pub fn on_ack(&mut self, w: &mut Window, ack: &AckSample) {
        if let (Some(h), Some(rtt)) = (&mut self.hystart, ack.rtt) {
            // `cubictcp_acked` runs on every ACK, window-limited or not, but "discard[s]
            // delay samples right after fast recovery": within a second (HZ) of the
            // congestion-avoidance epoch's start.
            let settling = self.t_epoch.is_some_and(|t| ack.now - t < Duration::from_secs(1));
            if !settling {
                let slow_start = w.cwnd < w.ssthresh;
                if h.on_rtt_sample(ack.now, rtt, (ack.snd_una, ack.snd_nxt), w.cwnd / w.seg, slow_start) {
                    w.ssthresh = w.cwnd; // `tp->snd_ssthresh = tcp_snd_cwnd(tp)`
                }
            }
        }
        // §5.8: "CUBIC does not increase its congestion window if a flow is application
        // limited" (time spent so is also taken out of t: see `on_tx_start`).
        if !ack.cwnd_limited(w) {
            return;
        }
        let mut acked = ack.acked;
        if w.cwnd < w.ssthresh {
            // §4.10: slow start (RFC 5681; HyStart++ is not modelled).
            acked = slow_start(w, acked);
            if acked == 0 {
                return;
            }
        }
        self.congestion_avoidance(w, ack.now, acked, ack.srtt);
    }

    /// §4.6 multiplicative decrease with §4.7 fast convergence; returns ssthresh.
    /// Bytes: ssthresh = FlightSize·β_cubic, as §4.6 writes it. Packets: cwnd·β_cubic,
    /// as Linux's `bictcp_recalc_ssthresh` (§4.6 allows cwnd when, as here, the window
    /// does not grow while application-limited).
    pub fn on_congestion_event(&mut self, _now: Instant, w: &Window, flight: u64) -> u64 {
        let cwnd = w.cwnd as f64 / w.seg as f64;
        // §4.7: a flow that lost before reaching its previous W_max releases bandwidth
        // for newcomers by aiming lower.
        self.w_max = if cwnd < self.w_max { cwnd * (1.0 + BETA) / 2.0 } else { cwnd };
        self.cwnd_prior = cwnd;
        self.t_epoch = None;
        self.cwnd_cnt = 0;
        Self::reduced(w, flight)
    }

    /// §4.8: after a timeout ssthresh is set with β_cubic (as in §4.6) and the next
    /// congestion-avoidance stage starts a new curve from its own first window (K = 0,
    /// W_max = that window, W_est = that window).
    pub fn on_rto(&mut self, now: Instant, w: &Window, flight: u64) -> u64 {
        if let Some(h) = &mut self.hystart {
            h.on_loss(now); // `bictcp_state(TCP_CA_Loss)`
        }
        self.cwnd_prior = w.cwnd as f64 / w.seg as f64;
        self.w_max = 0.0;
        self.t_epoch = None;
        self.cwnd_cnt = 0;
        Self::reduced(w, flight)
    }

    /// §5.8 / §4.2: t excludes application-limited periods. Like Linux
    /// (`bictcp_cwnd_event`, `CA_EVENT_TX_START`), when sending resumes with nothing in
    /// flight the stage's start moves later by the time since the last transmission
    /// (never past now), so the curve continues where it stood rather than jumping by
    /// the idle time.
    pub fn on_tx_start(&mut self, now: Instant, idle: Duration) {
        if let Some(t) = self.t_epoch {
            self.t_epoch = Some((t + idle).min(now));
        }
    }

    fn reduced(w: &Window, flight: u64) -> u64 {
        let base = match w.unit {
            CwndUnit::Bytes => flight,
            CwndUnit::Packets => w.cwnd,
        };
        // β_cubic = 7/10 in integer arithmetic; §4.6: ssthresh ≥ 2 segments.
        (base * 7 / 10).max(2 * w.seg)
    }

    /// §4.2–4.5 on one ACK in congestion avoidance.
    fn congestion_avoidance(&mut self, w: &mut Window, now: Instant, acked: u64, srtt: Option<Duration>) {
        let seg = w.seg as f64;
        let cwnd = w.cwnd as f64 / seg;
        let t_epoch = *self.t_epoch.get_or_insert_with(|| {
            // A new stage (§4.2): K from the window it starts with (Figure 2); with no
            // W_max above it (first stage, after a timeout §4.8) the curve starts flat
            // at the current window (K = 0, W_max = cwnd_epoch), as Linux does.
            if self.w_max <= cwnd {
                self.w_max = cwnd;
                self.k = 0.0;
            } else {
                self.k = ((self.w_max - cwnd) / C).cbrt();
            }
            self.w_est = cwnd; // §4.3: W_est = cwnd_epoch
            self.cwnd_cnt = 0;
            now
        });
        let t = (now - t_epoch).as_secs_f64();
        let rtt = srtt.map_or(0.0, |d| d.as_secs_f64());
        // §4.2: target = W_cubic(t + RTT) clamped to [cwnd, 1.5·cwnd].
        let target = self.w_cubic(t + rtt).clamp(cwnd, 1.5 * cwnd);
        // §4.3 Figure 4, with α_cubic = 1 once W_est has reached cwnd_prior.
        let acked_segs = acked as f64 / seg;
        let alpha = if self.w_est >= self.cwnd_prior { 1.0 } else { ALPHA };
        self.w_est += alpha * acked_segs / cwnd;
        if self.w_cubic(t) < self.w_est {
            // §4.3 Reno-friendly region: cwnd = W_est (never lowered on an ACK).
            let est = match w.unit {
                CwndUnit::Bytes => (self.w_est * seg) as u64,
                CwndUnit::Packets => self.w_est as u64,
            };
            w.cwnd = w.cwnd.max(est);
            return;
        }
        // §4.4 concave (cwnd < W_max) and §4.5 convex regions: (target − cwnd)/cwnd per
        // segment ACKed (RFC 3465 byte counting: an ACK of n segments counts n).
        if target <= cwnd {
            return;
        }
        match w.unit {
            CwndUnit::Bytes => w.cwnd += ((target - cwnd) / cwnd * acked as f64) as u64,
            CwndUnit::Packets => {
                // Linux `bictcp_update`: one segment per cwnd / (target − cwnd) ACKed.
                let per = (cwnd / (target - cwnd)) as u64;
                additive_increase(w, &mut self.cwnd_cnt, per, acked);
            }
        }
    }
}

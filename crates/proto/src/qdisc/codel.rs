//! CoDel, "Controlled Delay" (RFC 8289), as the per-queue AQM of FQ-CoDel (RFC 8290 §4.2).
//!
//! CoDel looks at the *sojourn time* of the packet at the head of its queue when it is
//! dequeued. Once that time has stayed above `target` for at least `interval`
//! (RFC 8289 §4.3), CoDel enters the dropping state and drops at the head, spacing the
//! drops by `interval / sqrt(count)` (the control law, §4.4 and §5.5) until the sojourn
//! time falls below `target` again. Re-entering the dropping state soon after leaving
//! it resumes from the previous drop rate (§5.6: `count` reuse).
//!
//! With ECN (`ecn`, RFC 8289 §5 "ECN", RFC 8290 §5.2.7 and Linux `codel_dequeue`), a
//! packet CoDel would drop is marked CE instead when it is ECN-capable and sent on:
//! the control law runs exactly as for a drop (the mark counts in `count` and
//! schedules the next one), but the dropping loop ends at a mark, since the marked
//! packet is the one to send. A packet that is not ECN-capable is still dropped.
//!
//! The state here ([`Codel`]) is separate from the queue it controls, so FQ-CoDel keeps
//! one per flow queue next to that queue's packets; [`Codel::dequeue`] takes the queue.

use super::QueueItem;
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// CoDel's two parameters (RFC 8289 §4.3–4.4; defaults from §4.3/§5 and RFC 8290 §5.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelParams {
    /// Acceptable standing queue delay (RFC 8289 `TARGET`, 5 ms).
    pub target: Duration,
    /// The sliding window over which the minimum sojourn time must exceed `target`
    /// before dropping starts, and the base of the control law (`INTERVAL`, 100 ms).
    pub interval: Duration,
    /// A queue holding at most this many bytes is never dropped from (RFC 8289 §5.4:
    /// `bytes_in_queue <= MAXPACKET`): one MTU, so a single packet is never dropped.
    pub mtu: u32,
    /// Mark ECN-capable packets CE instead of dropping them (RFC 8290 §5.2.7, `ecn`;
    /// Linux fq_codel's default is on, ours off so existing scenarios are unchanged).
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            mtu: 1514,
            ecn: false,
        }
    }
}

/// A packet in a CoDel-controlled queue and its enqueue time (RFC 8289 §5.2: the
/// timestamp CoDel reads at dequeue).
#[derive(Debug)]
pub(crate) struct Stamped<P> {
    pub(crate) packet: P,
    pub(crate) enqueued: Instant,
}

/// The CoDel state of one queue (RFC 8289 §5.3 "per-queue state").
#[derive(Clone, Debug, Default)]
pub(crate) struct Codel {
    /// Packets dropped since entering the dropping state (sets the drop rate).
    count: u32,
    /// `count` when the dropping state was last entered (for §5.6's reuse).
    lastcount: u32,
    /// In the dropping state.
    dropping: bool,
    /// When the sojourn time will have been above target for an interval; None = it is
    /// below target now.
    first_above_time: Option<Instant>,
    /// When the next drop is due while dropping.
    drop_next: Instant,
}

/// What [`Codel::do_dequeue`] found at the head.
struct Head<P> {
    packet: Option<P>,
    ok_to_drop: bool,
}

impl Codel {
    /// RFC 8289 §5.5 `dequeue()`: the next packet of `queue` to send, or None when CoDel
    /// dropped every packet it looked at (they are appended to `dropped`) or the queue is
    /// empty. `bytes` is the queue's byte count, kept up to date. With `p.ecn`, an
    /// ECN-capable packet due for a drop is marked CE and returned instead, and
    /// `marks` counts it.
    pub(crate) fn dequeue<P: QueueItem>(
        &mut self,
        p: &CodelParams,
        now: Instant,
        queue: &mut VecDeque<Stamped<P>>,
        bytes: &mut u64,
        dropped: &mut Vec<P>,
        marks: &mut u64,
    ) -> Option<P> {
        // RFC 3168 §5 via Linux `INET_ECN_set_ce`: mark when the packet can carry it.
        let mut mark = |packet: &mut P| {
            let ok = p.ecn && packet.ecn_capable();
            if ok {
                packet.mark_ce();
                *marks += 1;
            }
            ok
        };
        let mut r = self.do_dequeue(p, now, queue, bytes);
        let Some(mut packet) = r.packet.take() else {
            // An empty queue leaves the dropping state (§5.5: "if (r.p == NULL)").
            self.dropping = false;
            return None;
        };
        if self.dropping {
            if !r.ok_to_drop {
                // Sojourn time below target: leave the dropping state (§5.5).
                self.dropping = false;
            }
            // Drop as many packets as the control law says are due (§5.5's while loop).
            while self.dropping && now >= self.drop_next {
                self.count += 1;
                if mark(&mut packet) {
                    // Linux `codel_dequeue`: a mark schedules the next signal and ends
                    // the loop — this packet goes out.
                    self.drop_next = control_law(self.drop_next, p.interval, self.count);
                    break;
                }
                dropped.push(packet);
                r = self.do_dequeue(p, now, queue, bytes);
                match r.packet.take() {
                    Some(next) => packet = next,
                    None => {
                        self.dropping = false;
                        return None;
                    }
                }
                if r.ok_to_drop {
                    self.drop_next = control_law(self.drop_next, p.interval, self.count);
                } else {
                    self.dropping = false;
                }
            }
        } else if r.ok_to_drop {
            // Enter the dropping state: drop this packet and send the next (§5.5), or
            // mark it and send it.
            let next = if mark(&mut packet) {
                Some(packet)
            } else {
                dropped.push(packet);
                self.do_dequeue(p, now, queue, bytes).packet
            };
            self.dropping = true;
            // §5.6: if the last dropping state ended recently, start from the drop rate
            // it had reached (count − lastcount) instead of from 1.
            let delta = self.count.saturating_sub(self.lastcount);
            self.count = 1;
            if delta > 1
                && now < self.drop_next + Duration::from_nanos(p.interval.as_nanos().saturating_mul(16))
            {
                self.count = delta;
            }
            self.drop_next = control_law(now, p.interval, self.count);
            self.lastcount = self.count;
            return next;
        }
        Some(packet)
    }

    /// RFC 8289 §5.4 `dodequeue()`: pop the head and decide whether it may be dropped.
    fn do_dequeue<P: QueueItem>(
        &mut self,
        p: &CodelParams,
        now: Instant,
        queue: &mut VecDeque<Stamped<P>>,
        bytes: &mut u64,
    ) -> Head<P> {
        let Some(head) = queue.pop_front() else {
            self.first_above_time = None;
            return Head { packet: None, ok_to_drop: false };
        };
        // The byte test of §5.4 looks at the queue before this packet left it.
        let bytes_before = *bytes;
        *bytes -= head.packet.wire_len() as u64;
        let sojourn = now.saturating_since(head.enqueued);
        let mut ok_to_drop = false;
        if sojourn < p.target || bytes_before <= p.mtu as u64 {
            // Below target (or too little queue to matter): restart the interval.
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + p.interval),
                Some(t) => ok_to_drop = now >= t,
            }
        }
        Head { packet: Some(head.packet), ok_to_drop }
    }

    /// In the dropping state (for tests).
    #[cfg(test)]
    pub(crate) fn dropping(&self) -> bool {
        self.dropping
    }

    /// Drops since entering the dropping state (for tests).
    #[cfg(test)]
    pub(crate) fn count(&self) -> u32 {
        self.count
    }
}

/// RFC 8289 §5.5 `control_law(t, count)`: the next drop `interval / sqrt(count)` after
/// `t`. Computed in f64 on integer nanoseconds: deterministic on every IEEE-754 machine.
fn control_law(t: Instant, interval: Duration, count: u32) -> Instant {
    let step = interval.as_nanos() as f64 / (count.max(1) as f64).sqrt();
    t + Duration::from_nanos(step as u64)
}

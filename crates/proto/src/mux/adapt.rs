//! Measurements and decisions behind adaptive trunk lanes, the bulk-in-flight limit
//! and shedding (issue 20). Sans-IO: every input carries its `now`.
//!
//! Per lane, from the session's own cumulative `Ack`s (which already say how many of
//! the lane's reliable frames the peer *processed*; the sender keeps each frame's
//! encoded bytes and send time, so an ack is also an acknowledgement by byte count):
//! - **RTT**: send time of the newest frame an ack releases → ack arrival. This is the
//!   lane's delivery delay (TCP queueing and recovery included, plus at most the peer's
//!   `ack_delay`). Smoothed as RFC 6298 §2.3 smooths SRTT (gain 1/8); `min_rtt` is the
//!   smallest sample seen (paths in the grid do not change their base delay; a
//!   windowed minimum as BBR's would be the refinement for paths that do).
//! - **Delivery rate**: bytes acknowledged per interval of at least one minimum RTT, counted
//!   only over intervals in which the lane had a backlog the whole time (an idle lane
//!   says nothing about its capacity), smoothed with gain 1/4.
//! - **Backlog in time**: bytes queued in the session for the lane ÷ delivery rate.
//! - **Ping RTT** (for shedding): each side pings every lane every `ping_interval`, and
//!   pings and pongs jump the session's queues but not the trunk socket's unsent bytes
//!   nor TCP's retransmissions. So a pong's RTT above the smallest one is the delay the
//!   trunk's sockets and TCP add in either direction, which each side sees — the edge
//!   too, whose own frames (acks, credits) are too few and small to measure a backlog
//!   of the core → edge direction, where a server's data queues.

use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// What a session knows about one lane's path.
#[derive(Clone, Debug)]
pub struct LaneMeter {
    /// Smoothed ack RTT.
    pub srtt: Option<Duration>,
    /// Smallest ack RTT seen.
    pub min_rtt: Option<Duration>,
    /// Delivery rate while backlogged, bytes per second.
    pub rate: Option<f64>,
    acked: u64,
    mark_at: Instant,
    mark_acked: u64,
    /// The lane had a backlog at every tick since `mark_at`.
    busy: bool,
    /// The current judging window of the backlog (see [`LaneMeter::judge_backlog`]):
    /// its start, and the sum and count of its ticks' excess backlog, seconds.
    window: Option<(Instant, f64, u32)>,
    /// When the lane last carried a stream data frame, sent or received.
    pub last_data: Instant,
    /// Smoothed ping round trip (pong arrival − ping send).
    pub ping_srtt: Option<Duration>,
    /// Smallest ping round trip seen: the path's round trip.
    pub ping_min: Option<Duration>,
}

impl LaneMeter {
    /// A lane with no measurements yet.
    pub fn new(now: Instant) -> Self {
        LaneMeter {
            srtt: None,
            min_rtt: None,
            rate: None,
            acked: 0,
            mark_at: now,
            mark_acked: 0,
            // Cleared by the first tick without a backlog.
            busy: true,
            window: None,
            last_data: now,
            ping_srtt: None,
            ping_min: None,
        }
    }

    /// A pong arrived `rtt` after its ping left.
    pub fn on_pong(&mut self, rtt: Duration) {
        self.ping_srtt = Some(smooth(self.ping_srtt, rtt));
        self.ping_min = Some(self.ping_min.map_or(rtt, |m| m.min(rtt)));
    }

    /// Delay the trunk's sockets and TCP add now beyond the path's round trip: smoothed
    /// minus smallest ping RTT; `None` before the first pong.
    pub fn ping_excess(&self) -> Option<Duration> {
        Some(Duration::from_nanos(self.ping_srtt?.as_nanos().saturating_sub(self.ping_min?.as_nanos())))
    }

    /// An ack released `bytes` of frames, the newest sent `rtt` ago.
    pub fn on_ack(&mut self, bytes: u64, rtt: Option<Duration>) {
        self.acked += bytes;
        if let Some(r) = rtt {
            self.srtt = Some(smooth(self.srtt, r));
            self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        }
    }

    /// Periodic sample: `backlogged` says whether the lane has bytes queued now.
    pub fn tick(&mut self, now: Instant, backlogged: bool) {
        let interval = now.saturating_since(self.mark_at);
        // One path round trip (the minimum: SRTT includes the socket's queue, which can
        // be seconds on a backlogged lane and would delay the first sample as long).
        let min_interval = self.min_rtt.unwrap_or(Duration::from_millis(100));
        if interval >= min_interval && interval > Duration::ZERO {
            if self.busy && backlogged {
                let sample = (self.acked - self.mark_acked) as f64 / interval.as_secs_f64();
                self.rate = Some(match self.rate {
                    None => sample,
                    Some(r) => 0.75 * r + 0.25 * sample,
                });
            }
            self.mark_at = now;
            self.mark_acked = self.acked;
            self.busy = backlogged;
        } else {
            self.busy &= backlogged;
        }
    }

    /// One tick's backlog in time beyond one round trip, `excess` seconds (`None` when
    /// unknown: no RTT or rate yet, or the lane is not up). Back with the window's mean
    /// excess once a window of `span` has passed, and a new window begins.
    ///
    /// A mean over the window, not "above the threshold at every tick": on a lossy lane
    /// the backlog rises with each loss recovery and falls when it ends, so a lane that
    /// is head-of-line blocked most of the time still dips below the threshold between
    /// recoveries, and every dip would restart an all-ticks timer.
    pub fn judge_backlog(&mut self, now: Instant, excess: Option<f64>, span: Duration) -> Option<f64> {
        let Some(x) = excess else {
            self.window = None;
            return None;
        };
        let (start, sum, n) = self.window.get_or_insert((now, 0.0, 0));
        *sum += x;
        *n += 1;
        if now.saturating_since(*start) < span {
            return None;
        }
        let mean = *sum / f64::from(*n);
        self.window = None;
        Some(mean)
    }

    /// Start judging afresh (new lanes changed what every lane carries).
    pub fn restart_judging(&mut self) {
        self.window = None;
    }

    /// Time to deliver `bytes` at the measured rate; `None` while the rate is unknown.
    pub fn backlog_time(&self, bytes: u64) -> Option<Duration> {
        if bytes == 0 {
            return Some(Duration::ZERO);
        }
        let r = self.rate?;
        if r <= 0.0 {
            return Some(Duration::MAX);
        }
        Some(Duration::from_secs_f64((bytes as f64 / r).min(1e6)))
    }
}

/// A frame still unacknowledged this many of its lane's minimum RTTs (at least one
/// measurement tick, plus the peer's `ack_delay`) after it was sent is *held*: in loss
/// recovery, or queued behind more than half a round trip. Its ack comes after one RTT
/// (plus the ack delay) when nothing goes wrong, and after about two when fast
/// retransmit repairs a loss.
pub const HELD_RTTS: f64 = 1.5;

/// Whether a lane's oldest unacknowledged frame, sent `age` ago, is held ([`HELD_RTTS`]
/// of the lane's `min_rtt`, at least one tick, plus the peer's `ack_delay`). The peer may
/// hold its ack `ack_delay` (5 ms), and a busy host delays a frame by milliseconds: on a
/// short path that is many RTTs and no hold-up, hence the floor.
pub fn is_held(age: Duration, min_rtt: Duration, ack_delay: Duration) -> bool {
    let tick = super::session::ADAPT_TICK.as_secs_f64();
    let limit = (HELD_RTTS * min_rtt.as_secs_f64()).max(tick) + ack_delay.as_secs_f64();
    age.as_secs_f64() > limit
}

/// The held rule doubles the lanes when more than this share of lane-ticks in a window
/// were held …
pub const HELD_GROW: f64 = 0.35;

/// … and halves them when less than this share was held over the last
/// [`HELD_CALM_WINDOWS`] windows together.
pub const HELD_CALM: f64 = 0.10;

/// Windows the held rule pools before it halves the lanes: shrinking costs a connection
/// per lane given up (and a new one if the lane is wanted again), so it judges a longer
/// stretch; growing does not wait. Pooled, not "each calm": a share that hovers about
/// [`HELD_CALM`] (16 lanes at 1 %/100 ms in the simulator: 9 % on average, 4–22 % from
/// window to window) would otherwise seldom give five calm windows in a row, and lanes
/// thinner than the load needs repair their losses by timeout (docs/mux.md "The held
/// rule").
pub const HELD_CALM_WINDOWS: u32 = 5;

/// Shortest window of the held rule: at [`ADAPT_TICK`](super::session::ADAPT_TICK)
/// (20 ms) intervals, 25 ticks per lane, so that on a short path a share is still a share.
pub const HELD_MIN_WINDOW: Duration = Duration::from_millis(500);

/// What the held rule decided at the end of a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldVerdict {
    /// More than [`HELD_GROW`] of the lane-ticks were held: double the lanes.
    Grow,
    /// Under [`HELD_CALM`] over the last [`HELD_CALM_WINDOWS`] windows: halve them.
    Shrink,
    /// Neither.
    Stay,
}

/// The held rule's window (`lane_rule = "held"`): how much of the time the open lanes
/// had a frame held ([`HELD_RTTS`]), counted per lane and tick, and the last few
/// windows' counts.
///
/// Why not the backlog in time: one thin stream's loss recovery holds up every stream
/// behind it on its lane for an RTO, whether the lane is loaded or not, and a lane's
/// backlog counts bytes, which thin lanes hardly have (11–17 % of ticks "backlogged" on
/// 64 lanes at 1 %/100 ms in the simulator, so it never shrank; docs/mux.md).
#[derive(Clone, Debug, Default)]
pub struct HeldShare {
    /// Window start, held lane-ticks, measured lane-ticks.
    window: Option<(Instant, u64, u64)>,
    /// The last [`HELD_CALM_WINDOWS`] windows' (held, measured) lane-ticks since this
    /// rule last grew or shrank, oldest first.
    recent: VecDeque<(u64, u64)>,
}

impl HeldShare {
    /// One tick: `held` of `lanes` measured lanes had a frame held. Back with a verdict
    /// once a window of `span` has passed.
    pub fn tick(&mut self, now: Instant, held: u64, lanes: u64, span: Duration) -> Option<HeldVerdict> {
        let (start, h, n) = self.window.get_or_insert((now, 0, 0));
        *h += held;
        *n += lanes;
        if now.saturating_since(*start) < span {
            return None;
        }
        let (h, n) = (*h, *n);
        self.window = None;
        if share(h, n) > HELD_GROW {
            self.recent.clear();
            return Some(HeldVerdict::Grow);
        }
        if self.recent.len() == HELD_CALM_WINDOWS as usize {
            self.recent.pop_front();
        }
        self.recent.push_back((h, n));
        let (rh, rn) = self.recent.iter().fold((0, 0), |(a, b), &(h, n)| (a + h, b + n));
        if self.recent.len() == HELD_CALM_WINDOWS as usize && share(rh, rn) < HELD_CALM {
            self.recent.clear();
            return Some(HeldVerdict::Shrink);
        }
        Some(HeldVerdict::Stay)
    }
}

fn share(held: u64, measured: u64) -> f64 {
    held as f64 / measured.max(1) as f64
}

/// RFC 6298 §2.2–2.3: the first sample, then SRTT <- 7/8 SRTT + 1/8 R'.
fn smooth(srtt: Option<Duration>, r: Duration) -> Duration {
    match srtt {
        None => r,
        Some(s) => Duration::from_nanos((s.as_nanos() * 7 + r.as_nanos()) / 8),
    }
}

/// The bulk-in-flight limit: `max(floor, 2 × Σ lane rates × min RTT)` bytes.
///
/// One bandwidth-delay product keeps a backlogged trunk busy; the factor 2 is BBR's
/// `cwnd_gain` (Cardwell et al., draft-cardwell-iccrg-bbr-congestion-control §4.6.4),
/// which leaves room to measure a higher rate — with a gain of 1 the limit would cap
/// the rate it is measured from and could never grow past the floor.
pub fn bulk_inflight_limit(rate_sum: f64, min_rtt: Option<Duration>, floor: usize) -> usize {
    match min_rtt {
        Some(r) if rate_sum > 0.0 => floor.max((2.0 * rate_sum * r.as_secs_f64()) as usize),
        _ => floor,
    }
}

/// Expected added delay of a thin message on a direct TCP connection over a path with
/// round-trip time `rtt` and packet loss `loss` (both from the trunk lanes).
///
/// A thin stream rarely has the three packets in flight that fast retransmit needs
/// (docs/sources.md, Carlmar 2011), so a lost message waits a retransmission timeout;
/// Linux's RTO is `srtt + max(4·rttvar, 200 ms)` (`tcp_rto_min`), taken here as
/// `rtt + 200 ms`. Expected cost per message: `loss × (rtt + 200 ms)`.
pub fn direct_added_delay(rtt: Duration, loss: f64) -> Duration {
    Duration::from_secs_f64(loss.clamp(0.0, 1.0) * (rtt.as_secs_f64() + 0.2))
}

/// Expected added delay of a thin message through the tunnel: the lane's backlog in
/// time, plus `loss × rtt` (on a thick trunk a loss is repaired by fast retransmit
/// after about one round trip).
pub fn tunnel_added_delay(backlog: Duration, rtt: Duration, loss: f64) -> Duration {
    backlog + Duration::from_secs_f64(loss.clamp(0.0, 1.0) * rtt.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn rate_counts_only_busy_intervals() {
        let t0 = Instant::ZERO;
        let mut m = LaneMeter::new(t0);
        m.on_ack(0, Some(ms(100)));
        // 10 kB acked over 100 ms while busy: 100 kB/s.
        m.on_ack(10_000, Some(ms(100)));
        m.tick(t0 + ms(100), true);
        assert_eq!(m.rate.map(|r| r.round()), Some(100_000.0));
        // An idle interval leaves the rate alone.
        m.on_ack(1_000, None);
        m.tick(t0 + ms(150), false);
        m.tick(t0 + ms(250), false);
        assert_eq!(m.rate.map(|r| r.round()), Some(100_000.0));
        assert_eq!(m.backlog_time(50_000), Some(ms(500)));
    }

    #[test]
    fn ping_excess_is_the_smoothed_rtt_above_the_smallest() {
        let mut m = LaneMeter::new(Instant::ZERO);
        assert_eq!(m.ping_excess(), None, "no pong yet");
        m.on_pong(ms(200));
        assert_eq!(m.ping_excess(), Some(Duration::ZERO));
        // RFC 6298 §2.3 gain 1/8: 7/8 · 200 + 1/8 · 1000 = 300 ms.
        m.on_pong(ms(1000));
        assert_eq!((m.ping_srtt, m.ping_min, m.ping_excess()), (Some(ms(300)), Some(ms(200)), Some(ms(100))));
    }

    #[test]
    fn backlog_is_judged_on_its_mean_over_a_window() {
        let mut m = LaneMeter::new(Instant::ZERO);
        let span = ms(100);
        // 1.5 s of excess backlog, dipping to 0 every third 20-ms tick (between loss
        // recoveries): no verdict before the window ends, then its mean, 1.0 s.
        let mut verdicts = Vec::new();
        for i in 1..=6u64 {
            let x = if i % 3 == 0 { 0.0 } else { 1.5 };
            verdicts.push(m.judge_backlog(Instant::ZERO + ms(20 * i), Some(x), span));
        }
        assert_eq!(verdicts[..5], [None; 5]);
        assert_eq!(verdicts[5].map(|v| (v * 1e9).round() / 1e9), Some(1.0));
        // Unknown (lane down, no rate yet) starts over.
        m.judge_backlog(Instant::ZERO + ms(140), Some(5.0), span);
        m.judge_backlog(Instant::ZERO + ms(160), None, span);
        assert_eq!(m.judge_backlog(Instant::ZERO + ms(180), Some(0.0), span), None);
    }

    #[test]
    fn held_share_grows_at_once_and_shrinks_after_calm_windows() {
        let span = ms(100);
        let mut h = HeldShare::default();
        let mut at = Instant::ZERO;
        // One window: 4 lanes over 6 ticks, 9 of 24 lane-ticks held (37.5 %): grow.
        let mut verdicts = Vec::new();
        for i in 0..6u64 {
            at = Instant::ZERO + ms(20 * i);
            verdicts.push(h.tick(at, if i < 3 { 3 } else { 0 }, 4, span));
        }
        assert_eq!(verdicts[..5], [None; 5]);
        assert_eq!(verdicts[5], Some(HeldVerdict::Grow));
        // Windows of 10 lanes × 6 ticks, `held` of the 10 held every tick.
        let mut window = |held: u64| {
            let mut v = None;
            for _ in 0..6 {
                at += ms(20);
                v = h.tick(at, held, 10, span).or(v);
            }
            v
        };
        // 20 % (between the bounds) stays; four calm windows after it make five windows
        // at 4 % together: shrink, and the count starts over.
        assert_eq!(window(2), Some(HeldVerdict::Stay));
        for _ in 0..3 {
            assert_eq!(window(0), Some(HeldVerdict::Stay));
        }
        assert_eq!(window(0), Some(HeldVerdict::Shrink));
        // Five windows at exactly 10 % are not calm; the next one at 0 % slides the
        // oldest out (four at 10 %, one at 0 %: 8 %) and shrinks.
        for _ in 0..5 {
            assert_eq!(window(1), Some(HeldVerdict::Stay));
        }
        assert_eq!(window(0), Some(HeldVerdict::Shrink));
        // A window that grows starts the count over: four calm windows after it stay.
        assert_eq!(window(4), Some(HeldVerdict::Grow));
        for _ in 0..4 {
            assert_eq!(window(0), Some(HeldVerdict::Stay));
        }
        assert_eq!(window(0), Some(HeldVerdict::Shrink));
    }

    #[test]
    fn limit_has_a_floor_and_grows_with_the_rate() {
        assert_eq!(bulk_inflight_limit(0.0, None, 65_536), 65_536);
        assert_eq!(bulk_inflight_limit(1e6, Some(ms(100)), 65_536), 200_000);
    }

    #[test]
    fn tunnel_beats_direct_only_with_a_short_backlog() {
        let (rtt, loss) = (ms(200), 0.05);
        let direct = direct_added_delay(rtt, loss); // 20 ms
        assert_eq!(direct, ms(20));
        assert!(tunnel_added_delay(ms(5), rtt, loss) < direct);
        assert!(tunnel_added_delay(ms(50), rtt, loss) > direct);
    }
}

//! Counters and histograms a session keeps (read by the shell's metrics endpoint).

use super::sched::Class;
use crate::time::Duration;

/// Upper bounds (µs) of the queueing-delay histogram buckets; the last bucket is +Inf.
pub const DELAY_BUCKETS_US: [u64; 16] = [
    10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000,
    1_000_000,
];

/// A fixed-bucket histogram in the Prometheus shape (counts per bucket, sum, count).
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    /// Non-cumulative counts; index `DELAY_BUCKETS_US.len()` is the +Inf bucket.
    pub buckets: [u64; DELAY_BUCKETS_US.len() + 1],
    /// Sum of observations, seconds.
    pub sum_secs: f64,
    /// Number of observations.
    pub count: u64,
}

impl Histogram {
    /// Record one duration.
    pub fn observe(&mut self, d: Duration) {
        let us = d.as_nanos() / 1_000;
        let i = DELAY_BUCKETS_US.iter().position(|&b| us <= b).unwrap_or(DELAY_BUCKETS_US.len());
        self.buckets[i] += 1;
        self.sum_secs += d.as_secs_f64();
        self.count += 1;
    }

    /// Add another histogram's counts into this one.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets.iter()) {
            *a += *b;
        }
        self.sum_secs += o.sum_secs;
        self.count += o.count;
    }
}

/// Session counters. Monotonic unless noted.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Frames sent, by frame type byte (index = type).
    pub frames_tx: [u64; 12],
    /// Frames received, by frame type byte.
    pub frames_rx: [u64; 12],
    /// Trunk bytes sent (including replays).
    pub trunk_bytes_tx: u64,
    /// Trunk bytes received.
    pub trunk_bytes_rx: u64,
    /// Stream payload bytes sent / received.
    pub payload_bytes_tx: u64,
    /// Stream payload bytes received.
    pub payload_bytes_rx: u64,
    /// Streams opened (either side).
    pub streams_opened: u64,
    /// Streams reset, local or remote.
    pub streams_reset: u64,
    /// Reliable frames re-sent after a reconnect.
    pub frames_replayed: u64,
    /// Successful lane resumptions (handshakes after the first).
    pub resumes: u64,
    /// Lane disconnects seen.
    pub lane_drops: u64,
    /// Lanes this side's want rose by (adaptive lanes; the lanes open are the larger of
    /// the two sides' wants).
    pub lanes_opened: u64,
    /// Lanes this side's want fell by (the backlog rule's idle hold, the held rule's calm
    /// windows).
    pub lanes_closed: u64,
    /// Streams moved from one lane to another.
    pub stream_moves: u64,
    /// Moves given up because the old lane did not acknowledge in time (the stream
    /// stays where it is).
    pub move_giveups: u64,
    /// Time a data frame's first byte waited in the mux before going on the trunk,
    /// for streams scheduled as thin.
    pub delay_thin: Histogram,
    /// The same for streams scheduled as bulk.
    pub delay_bulk: Histogram,
    /// Last ping round-trip time (gauge), if any.
    pub rtt: Option<Duration>,
}

impl Stats {
    pub(crate) fn delay(&mut self, thin: bool) -> &mut Histogram {
        if thin {
            &mut self.delay_thin
        } else {
            &mut self.delay_bulk
        }
    }

    /// Label used for a class in metrics.
    pub fn class_label(thin: bool, class: Class) -> &'static str {
        match (class, thin) {
            (Class::Auto, true) => "thin",
            (Class::Auto, false) => "bulk",
            (c, _) => c.name(),
        }
    }
}

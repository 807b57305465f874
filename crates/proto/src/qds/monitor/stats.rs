//! A flow's rates over a sliding window and the packet-size / inter-arrival features of
//! its traffic toward the client, in constant memory per flow.

use crate::qds::classify::Features;
use crate::time::Instant;

/// Sub-windows of a rate window: the rate slides in steps of a tenth of the window.
const BUCKETS: usize = 10;

/// Two packets toward the client closer than this belong to one burst. 1 ms: several
/// times the serialisation time of a full packet at 10 Mbit/s (1.2 ms) is too long to
/// separate a video frame's packets from the next frame's at 25 frames/s (40 ms), and
/// the spacing of an ACK-clocked bulk transfer at 1 Mbit/s (12 ms) is longer still, so
/// 1 ms separates "sent back to back by the server" from "paced".
pub(crate) const BURST_GAP_NS: u64 = 1_000_000;

/// Bytes per sub-window over the last [`BUCKETS`] sub-windows.
#[derive(Clone, Debug)]
pub(super) struct Rate {
    bytes: [u64; BUCKETS],
    /// Number of the latest sub-window written (now / width).
    head: u64,
    /// The flow's first packet: before it the flow had no rate to measure.
    since: Instant,
}

impl Rate {
    pub(super) fn new(now: Instant) -> Self {
        Rate { bytes: [0; BUCKETS], head: 0, since: now }
    }

    /// `bytes` passed at `now`; `width` = rate window / BUCKETS, in ns (> 0).
    pub(super) fn add(&mut self, now: Instant, bytes: u32, width: u64) {
        let b = now.as_nanos() / width;
        if b > self.head {
            // Clear the sub-windows skipped since the last packet (at most all of them).
            let n = (b - self.head).min(BUCKETS as u64);
            for j in 1..=n {
                self.bytes[((self.head + j) % BUCKETS as u64) as usize] = 0;
            }
            self.head = b;
        }
        // A packet from the past (time does not run backwards here, but be safe) counts in
        // the newest sub-window.
        self.bytes[(self.head % BUCKETS as u64) as usize] += u64::from(bytes);
    }

    /// Bits per second over the window ending at `now`: the bytes of the sub-windows
    /// inside it, over the time they cover (from the window's oldest sub-window, or the
    /// flow's first packet if later, to `now`; at least one sub-window so a flow's first
    /// packet does not read as an infinite rate).
    pub(super) fn bps(&self, now: Instant, width: u64) -> f64 {
        let nb = now.as_nanos() / width;
        let lo = (nb + 1).saturating_sub(BUCKETS as u64).max((self.head + 1).saturating_sub(BUCKETS as u64));
        if self.head < lo {
            return 0.0;
        }
        let sum: u64 = (lo..=self.head).map(|j| self.bytes[(j % BUCKETS as u64) as usize]).sum();
        let start = (lo * width).max(self.since.as_nanos());
        let span = now.as_nanos().saturating_sub(start).max(width);
        sum as f64 * 8.0 * 1e9 / span as f64
    }
}

/// Running sums of one feature window.
#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    packets: u64,
    size: f64,
    size_sq: f64,
    gaps: u64,
    gap: f64,
    gap_sq: f64,
    full: u64,
    bursts: u64,
}

impl Acc {
    fn merge(&self, o: &Acc) -> Acc {
        Acc {
            packets: self.packets + o.packets,
            size: self.size + o.size,
            size_sq: self.size_sq + o.size_sq,
            gaps: self.gaps + o.gaps,
            gap: self.gap + o.gap,
            gap_sq: self.gap_sq + o.gap_sq,
            full: self.full + o.full,
            bursts: self.bursts + o.bursts,
        }
    }
}

/// Packet-size and inter-arrival statistics of the payload packets toward the client,
/// over the current feature window and the one before it (so a view always covers
/// between one and two windows of traffic, never a just-started empty one).
#[derive(Clone, Debug, Default)]
pub(super) struct Shape {
    cur: Acc,
    prev: Acc,
    /// Number of the current window (now / window).
    cur_no: u64,
    last: Option<Instant>,
    /// Largest IP length seen toward the client: the flow's full-size packet (MSS plus
    /// headers) without assuming an MTU.
    max_len: u32,
}

impl Shape {
    /// A payload packet of `wire_len` bytes toward the client at `now`.
    pub(super) fn add(&mut self, now: Instant, wire_len: u32, window: u64) {
        // A packet slightly out of time order (two capture interfaces) counts in the
        // current window rather than wiping it.
        let w = (now.as_nanos() / window).max(self.cur_no);
        if w != self.cur_no {
            self.prev = if w == self.cur_no + 1 { self.cur } else { Acc::default() };
            self.cur = Acc::default();
            self.cur_no = w;
        }
        let a = &mut self.cur;
        let gap = self.last.map(|t| now.saturating_since(t).as_nanos());
        if let Some(g) = gap {
            let us = g as f64 / 1e3;
            a.gaps += 1;
            a.gap += us;
            a.gap_sq += us * us;
        }
        if gap.is_none_or(|g| g > BURST_GAP_NS) {
            a.bursts += 1;
        }
        self.last = Some(now);
        self.max_len = self.max_len.max(wire_len);
        // Within 10 % of the largest: a full segment whatever the options' length.
        if u64::from(wire_len) * 10 >= u64::from(self.max_len) * 9 {
            a.full += 1;
        }
        let s = f64::from(wire_len);
        a.packets += 1;
        a.size += s;
        a.size_sq += s * s;
    }

    /// The features at `now` (rates filled in by the caller).
    pub(super) fn features(&self, now: Instant, window: u64) -> Features {
        let w = now.as_nanos() / window;
        let a = if w == self.cur_no {
            self.prev.merge(&self.cur)
        } else if w == self.cur_no + 1 {
            self.cur
        } else {
            Acc::default()
        };
        let mean_sd = |n: u64, sum: f64, sq: f64| {
            if n == 0 {
                return (0.0, 0.0);
            }
            let m = sum / n as f64;
            (m, (sq / n as f64 - m * m).max(0.0).sqrt())
        };
        let (size_mean, size_sd) = mean_sd(a.packets, a.size, a.size_sq);
        let (iat_mean_us, iat_sd_us) = mean_sd(a.gaps, a.gap, a.gap_sq);
        Features {
            size_mean,
            size_sd,
            iat_mean_us,
            iat_sd_us,
            rate_down_bps: 0.0,
            rate_up_bps: 0.0,
            full_share: if a.packets == 0 { 0.0 } else { a.full as f64 / a.packets as f64 },
            burst_pkts: if a.packets == 0 { 0.0 } else { a.packets as f64 / a.bursts.max(1) as f64 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Instant {
        Instant::from_nanos(x * 1_000_000)
    }

    #[test]
    fn rate_over_a_full_window() {
        // 1 s window, 100 ms sub-windows; 1000 B every 10 ms from t = 0 to 1990 ms.
        let width = 100_000_000;
        let mut r = Rate::new(ms(0));
        for i in 0..200 {
            r.add(ms(i * 10), 1000, width);
        }
        // At 1999 ms the window holds sub-windows 10..=19 (1000..1999 ms): 100 packets,
        // 800 kbit over (1999 − 1000) ms.
        let bps = r.bps(ms(1999), width);
        assert!((bps - 800_000.0 / 0.999).abs() < 1.0, "{bps}");
        // Two windows of silence later: nothing.
        assert_eq!(r.bps(ms(4000), width), 0.0);
    }

    #[test]
    fn a_young_flow_is_measured_over_its_life_not_the_window() {
        let width = 100_000_000;
        let mut r = Rate::new(ms(5000));
        r.add(ms(5000), 1250, width);
        r.add(ms(5100), 1250, width);
        r.add(ms(5200), 1250, width);
        // 30 kbit over 200 ms = 150 kbit/s (not 30 kbit/s over the full second).
        assert!((r.bps(ms(5200), width) - 150_000.0).abs() < 1e-6);
    }

    #[test]
    fn shape_of_a_paced_stream() {
        let window = 1_000_000_000;
        let mut s = Shape::default();
        // Bursts of 3 full packets (1500, 1500, 1500) 0.1 ms apart, one every 10 ms,
        // then a 100-byte packet in each burst.
        for b in 0..50u64 {
            let t0 = b * 10_000_000;
            for (i, len) in [1500u32, 1500, 1500, 100].iter().enumerate() {
                s.add(Instant::from_nanos(t0 + i as u64 * 100_000), *len, window);
            }
        }
        let f = s.features(Instant::from_nanos(499_000_000), window);
        // Mean size (3·1500 + 100) / 4 = 1150; sd = sqrt(mean of squares − 1150²).
        let sd = ((3.0 * 1500f64.powi(2) + 100f64.powi(2)) / 4.0 - 1150f64.powi(2)).sqrt();
        assert!((f.size_mean - 1150.0).abs() < 1e-9 && (f.size_sd - sd).abs() < 1e-9, "{f:?}");
        assert_eq!(f.full_share, 0.75);
        assert_eq!(f.burst_pkts, 4.0, "each 10-ms group is one burst of 4");
        // Gaps: per burst 3 of 100 µs and one of 9700 µs (except before the first).
        let mean = (150.0 * 100.0 + 49.0 * 9700.0) / 199.0;
        assert!((f.iat_mean_us - mean).abs() < 1e-6, "{f:?}");
    }

    #[test]
    fn a_packet_slightly_out_of_order_does_not_wipe_the_window() {
        // Two capture interfaces: a packet stamped 0.2 ms before the previous one, across
        // a window boundary.
        let window = 1_000_000_000;
        let mut s = Shape::default();
        s.add(ms(500), 1000, window);
        s.add(Instant::from_nanos(1_000_100_000), 1000, window);
        s.add(Instant::from_nanos(999_900_000), 1000, window);
        let f = s.features(Instant::from_nanos(1_000_200_000), window);
        assert_eq!(f.size_mean, 1000.0);
        assert_eq!(f.burst_pkts, 1.5, "3 packets in 2 bursts: none lost");
    }
}

//! Time as integer nanoseconds (smoltcp `time.rs` style).
//!
//! The core never reads a clock: callers pass `now`. Virtual time starts at
//! [`Instant::ZERO`]; real-clock drivers convert at their edge.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A point in time, nanoseconds since the start of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Instant {
    /// The start of a run.
    pub const ZERO: Instant = Instant(0);
    /// Later than any real event; used for "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// From nanoseconds since the run start.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    /// From seconds (rounded to the nearest nanosecond).
    pub fn from_secs_f64(s: f64) -> Self {
        Instant((s * 1e9).round().max(0.0) as u64)
    }
    /// Nanoseconds since the run start.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds since the run start.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// No time.
    pub const ZERO: Duration = Duration(0);
    /// Longer than anything a run can contain.
    pub const MAX: Duration = Duration(u64::MAX);

    /// From nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    /// From microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Duration(us * 1_000)
    }
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    /// From seconds.
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * 1_000_000_000)
    }
    /// From fractional seconds (rounded to the nearest nanosecond, negative → zero).
    pub fn from_secs_f64(s: f64) -> Self {
        Duration((s * 1e9).round().max(0.0) as u64)
    }
    /// From fractional milliseconds.
    pub fn from_millis_f64(ms: f64) -> Self {
        Self::from_secs_f64(ms * 1e-3)
    }
    /// Nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    /// Time to serialise `bytes` at `rate_bps` bits per second (rounded up, so a
    /// link never runs faster than its rate).
    pub fn transmission(bytes: u64, rate_bps: u64) -> Duration {
        let bits = bytes as u128 * 8 * 1_000_000_000;
        Duration(bits.div_ceil(rate_bps.max(1) as u128) as u64)
    }
    /// Multiply by an integer, saturating.
    pub fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: an earlier minus a later instant is zero.
    fn sub(self, o: Instant) -> Duration {
        self.saturating_since(o)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, o: Duration) -> Duration {
        Duration(self.0.saturating_sub(o.0))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}ms", self.0 as f64 * 1e-6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmission_time_rounds_up() {
        // 1500 B at 10 Mbit/s = 1.2 ms exactly.
        assert_eq!(Duration::transmission(1500, 10_000_000), Duration::from_micros(1200));
        // 1 B at 3 bit/s = 8/3 s, rounded up to the next ns.
        assert_eq!(Duration::transmission(1, 3).as_nanos(), 2_666_666_667);
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_nanos(5);
        assert_eq!(t - Instant::from_nanos(9), Duration::ZERO);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
    }
}

//! What an unauthenticated peer can make a daemon spend: a cap on connections still in
//! their handshake (TLS + key proof + `Hello` at the core; the request at the metrics
//! endpoint) and a rate limit on the warnings such connections cause.
//!
//! Why: anyone who can reach a listener can open connections without credentials. Before
//! these limits, 5,000 garbage connections to the core's trunk port raised its RSS from
//! 6.1 to 42.6 MB for good (every finished connection task was kept until shutdown) and
//! wrote 5,000 WARN lines. Now a connection costs memory only while its handshake runs,
//! at most [`HandshakeGate`]'s limit of them run at once, each for at most
//! `timeouts.handshake_timeout_ms`, and each listener logs at most [`LINES_PER_WINDOW`]
//! per-connection warnings per second plus one "suppressed K" summary.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::driver::Counters;

/// Per-connection warnings a listener logs per [`WINDOW`]. Ten lines a second keep a
/// flood visible in the log (with peers and errors to act on) without letting it fill
/// the disk: the soak's 20,000 connections in 12.8 s wrote 142 lines, not 20,000.
pub const LINES_PER_WINDOW: u32 = 10;
/// The rate-limit window, and how often the summary of suppressed lines is written.
pub const WINDOW: Duration = Duration::from_secs(1);

/// Counts warnings per window and decides which are written (sans-IO: time passed in).
#[derive(Debug, Default)]
pub struct RateLimit {
    window_start: Option<Instant>,
    in_window: u32,
    suppressed: u64,
}

impl RateLimit {
    /// Whether the warning happening at `now` may be written; counts it if not. When a
    /// new window starts, first returns the count suppressed in the windows before
    /// (the caller writes the summary).
    pub fn check(&mut self, now: Instant) -> (bool, Option<u64>) {
        let summary = self.roll(now);
        if self.in_window < LINES_PER_WINDOW {
            self.in_window += 1;
            (true, summary)
        } else {
            self.suppressed += 1;
            (false, summary)
        }
    }

    /// Called periodically: the count suppressed since the last summary once the
    /// window it happened in is over, so a flood that stopped is still summarised.
    pub fn flush(&mut self, now: Instant) -> Option<u64> {
        self.roll(now)
    }

    fn roll(&mut self, now: Instant) -> Option<u64> {
        match self.window_start {
            Some(start) if now.saturating_duration_since(start) < WINDOW => None,
            _ => {
                self.window_start = Some(now);
                self.in_window = 0;
                Some(std::mem::take(&mut self.suppressed)).filter(|&k| k > 0)
            }
        }
    }
}

/// A [`RateLimit`] shared by the tasks of one listener; `listener` is its config key
/// (e.g. `trunk.listen`), named in the summary.
#[derive(Debug)]
pub struct Warnings {
    listener: String,
    limit: Mutex<RateLimit>,
}

impl Warnings {
    /// Warnings of the listener configured under `listener`.
    pub fn new(listener: impl Into<String>) -> Arc<Warnings> {
        Arc::new(Warnings { listener: listener.into(), limit: Mutex::default() })
    }

    /// Run `write` (a `tracing::warn!`) if the rate allows it.
    pub fn warn(&self, write: impl FnOnce()) {
        let (allowed, summary) = self.lock().check(Instant::now());
        self.summary(summary);
        if allowed {
            write();
        }
    }

    /// Write the summary of suppressed warnings if one is due (call every [`WINDOW`]).
    pub fn flush(&self) {
        let summary = self.lock().flush(Instant::now());
        self.summary(summary);
    }

    fn summary(&self, suppressed: Option<u64>) {
        if let Some(k) = suppressed {
            tracing::warn!(listener = %self.listener, suppressed = k, "per-connection warnings suppressed");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RateLimit> {
        // Nothing panics while holding it; a poisoned lock still holds valid counts.
        self.limit.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Flush `warnings` every [`WINDOW`] until `shutdown` turns true.
pub async fn flush_every_window(
    warnings: Vec<Arc<Warnings>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(WINDOW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => warnings.iter().for_each(|w| w.flush()),
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

/// At most `limit` unauthenticated connections in their handshake at once. Beyond it a
/// new connection is accepted and closed at once (RST): refusing costs one `accept`,
/// whereas leaving it in the kernel's backlog would make a legitimate edge wait behind
/// the whole flood; a refused edge retries within its back-off (≤ 2 s).
#[derive(Clone, Debug)]
pub struct HandshakeGate {
    slots: Arc<Semaphore>,
    counters: Arc<Counters>,
}

/// One handshake slot; released when dropped.
#[derive(Debug)]
pub struct Permit {
    _permit: OwnedSemaphorePermit,
    counters: Arc<Counters>,
}

impl HandshakeGate {
    /// A gate of `limit` slots that reports into `counters` (`handshakes` in progress,
    /// `handshakes_refused`).
    pub fn new(limit: usize, counters: Arc<Counters>) -> HandshakeGate {
        HandshakeGate { slots: Arc::new(Semaphore::new(limit)), counters }
    }

    /// A slot, or `None` (counted as refused) when all are taken.
    pub fn try_enter(&self) -> Option<Permit> {
        match self.slots.clone().try_acquire_owned() {
            Ok(p) => {
                self.counters.handshakes.fetch_add(1, Ordering::Relaxed);
                Some(Permit { _permit: p, counters: self.counters.clone() })
            }
            Err(_) => {
                self.counters.handshakes_refused.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.counters.handshakes.fetch_sub(1, Ordering::Relaxed);
        HANDSHAKES_ENDED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Handshakes (of any gate in the process) ended so far; see [`release_memory_after_bursts`].
static HANDSHAKES_ENDED: AtomicU64 = AtomicU64::new(0);

/// Once a burst of unauthenticated connections is over (none in progress, some ended
/// since the last look, checked every [`WINDOW`]), give the heap pages they freed back to
/// the system. glibc's `free` returns memory only from the top of the heap; pages freed
/// below a live allocation stay resident, so without this the core's RSS stayed at its
/// peak after the trunk soak (`tests/soak.rs`: 6.3 MB at start, 11.3 MB at the peak of
/// 200 concurrent handshakes and still 11.3 MB after, with nothing leaked); with it,
/// 8.2 MB. `malloc_trim(0)` releases every free page (glibc ≥ 2.8) in well
/// under a millisecond for a heap this size, so doing it at most once a second costs
/// nothing measurable. Other C libraries: no-op.
pub async fn release_memory_after_bursts(
    counters: Arc<Counters>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(WINDOW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = HANDSHAKES_ENDED.load(Ordering::Relaxed);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let ended = HANDSHAKES_ENDED.load(Ordering::Relaxed);
        if ended != seen && counters.handshakes.load(Ordering::Relaxed) == 0 {
            seen = ended;
            trim_heap();
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_heap() {
    // SAFETY: malloc_trim only walks and releases the allocator's own free lists.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_heap() {}

/// How long an accept loop pauses after `accept` failed. Without a pause, running out
/// of file descriptors (EMFILE) makes the loop spin at 100 % CPU, logging each failure;
/// 100 ms is what hyper and tokio's examples use, short enough that a legitimate peer
/// barely notices once descriptors are free again.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_writes_n_per_window_then_summarises() {
        let t0 = Instant::now();
        let mut r = RateLimit::default();
        let written = (0..1000).filter(|_| r.check(t0).0).count();
        assert_eq!(written, LINES_PER_WINDOW as usize, "at most N lines in one window");
        assert_eq!(r.flush(t0 + WINDOW / 2), None, "no summary before the window ends");
        assert_eq!(r.flush(t0 + WINDOW), Some(1000 - LINES_PER_WINDOW as u64), "then one summary");
        assert_eq!(r.flush(t0 + 3 * WINDOW), None, "and only one");
        // A new window allows N lines again; its first line carries the earlier count.
        for _ in 0..LINES_PER_WINDOW + 5 {
            r.check(t0 + 4 * WINDOW);
        }
        assert_eq!(r.check(t0 + 5 * WINDOW), (true, Some(5)));
    }

    #[test]
    fn gate_admits_up_to_its_limit_and_frees_on_drop() {
        let c = Arc::new(Counters::default());
        let g = HandshakeGate::new(2, c.clone());
        let a = g.try_enter().expect("first slot");
        let _b = g.try_enter().expect("second slot");
        assert!(g.try_enter().is_none(), "third is refused");
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!((load(&c.handshakes), load(&c.handshakes_refused)), (2, 1));
        drop(a);
        assert!(g.try_enter().is_some(), "a finished handshake frees its slot");
        assert_eq!(load(&c.handshakes), 1, "the dropped temporary left again");
    }
}

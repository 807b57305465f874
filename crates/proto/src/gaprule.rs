//! The gap rule of the thin-client traffic model, and the pooled statistics a capture is
//! summarised by (issue 19; `docs/analyze.md`).
//!
//! Source: Ogawa, Hasegawa and Murata (spec `thin-client-tcp.md` §1). The response
//! packets of one TCP connection (server → client) that carry payload are cut into
//! *flows*: a packet less than `gap` after the previous one belongs to the same flow, one
//! `gap` or more after it starts a new flow. A flow of one packet is *interactive* (a
//! character echo), a flow of two or more is *bulk* (a block: a screen update). The
//! sequence of flow kinds is the two-state chain whose transition probabilities are
//! α = P(I→B) and β = P(B→I); the gap of a transition is start-to-start (first packet of
//! flow k+1 − first packet of flow k), as the scenario's `gap_ii_s` … `gap_bb_s` are.
//!
//! Call order, per connection: [`GapRule::push`] for every *new* response packet that
//! carries payload (retransmissions are not new writes and stay out: the caller decides
//! that from sequence numbers), [`GapRule::push_request`] for every request packet that
//! carries payload, both in capture order with the capture time; then
//! [`GapRule::finish`] once when the connection ends (or the capture does). Nothing here
//! reads a clock or a file.
//!
//! **Memory does not grow with the capture.** Every statistic pooled over connections
//! ([`Pooled`]) is a histogram plus exact sums: times in log-spaced bins from 1 µs to
//! 10⁴ s, 20 per decade ([`bin_edges_s`]: computed, not stored), with count, Σt, Σln t
//! and Σ(ln t)² (the maximum-likelihood lognormal needs only those); sizes one bin per
//! byte; block lengths exact up to [`BLOCK_EXACT_MAX`] plus a bounded list of longer
//! ones. A connection's state is a few words.

use crate::time::{Duration, Instant};

/// Lowest histogram edge: 10^`HIST_MIN_EXP` s (1 µs, below any capture's resolution
/// that matters here).
pub const HIST_MIN_EXP: i32 = -6;
/// Decades the time histograms span (1 µs … 10⁴ s: the longest idle period of a
/// session the source saw was about a minute).
pub const HIST_DECADES: usize = 10;
/// Bins per decade (the source's figure reads to about 10^0.05).
pub const BINS_PER_DECADE: usize = 20;
/// Bins of a time histogram.
pub const HIST_BINS: usize = HIST_DECADES * BINS_PER_DECADE;
/// Size histograms: one bin per payload byte count, 0 … 65535 (the largest IPv4 datagram).
pub const SIZE_BINS: usize = 65_536;
/// Block lengths up to this many packets are counted exactly; longer ones go to
/// [`BlockLengths::overflow`].
pub const BLOCK_EXACT_MAX: usize = 4096;
/// Most entries kept in [`BlockLengths::overflow`]; beyond, only counted.
pub const BLOCK_OVERFLOW_MAX: usize = 1_000_000;

/// The `HIST_BINS + 1` edges of a time histogram, in seconds: bin `k` is
/// `[edge k, edge k+1)`, edge k = 10^(−6 + k/20).
pub fn bin_edges_s() -> Vec<f64> {
    (0..=HIST_BINS).map(|k| 10f64.powf(f64::from(HIST_MIN_EXP) + k as f64 / BINS_PER_DECADE as f64)).collect()
}

/// Kind of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FlowKind {
    /// One packet.
    Interactive,
    /// Two or more packets (a block).
    Bulk,
}

/// A transition between consecutive flows of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transition {
    /// Interactive → interactive.
    II,
    /// Interactive → bulk (probability α).
    IB,
    /// Bulk → interactive (probability β).
    BI,
    /// Bulk → bulk.
    BB,
}

impl Transition {
    /// All four, in the order of [`Transition::index`].
    pub const ALL: [Transition; 4] = [Transition::II, Transition::IB, Transition::BI, Transition::BB];

    /// From one kind to the next.
    pub fn between(from: FlowKind, to: FlowKind) -> Transition {
        match (from, to) {
            (FlowKind::Interactive, FlowKind::Interactive) => Transition::II,
            (FlowKind::Interactive, FlowKind::Bulk) => Transition::IB,
            (FlowKind::Bulk, FlowKind::Interactive) => Transition::BI,
            (FlowKind::Bulk, FlowKind::Bulk) => Transition::BB,
        }
    }

    /// 0 … 3 (II, IB, BI, BB).
    pub fn index(self) -> usize {
        self as usize
    }

    /// "ii", "ib", "bi", "bb" (the suffix of the scenario's `gap_ii_s` …).
    pub fn name(self) -> &'static str {
        match self {
            Transition::II => "ii",
            Transition::IB => "ib",
            Transition::BI => "bi",
            Transition::BB => "bb",
        }
    }
}

/// A histogram of durations on log-spaced bins, with the exact sums.
#[derive(Clone, Debug, PartialEq)]
pub struct LogHist {
    /// Counts per bin ([`bin_edges_s`]); a value below 1 µs counts in bin 0, one of
    /// 10⁴ s or more in the last bin.
    pub counts: Vec<u64>,
    /// Values added.
    pub n: u64,
    /// Σ value, ns (exact).
    pub sum_ns: u128,
    /// Σ ln(value / 1 s); a value below 1 µs counts as 1 µs (ln of 0 is not a number,
    /// and a capture cannot time closer than its resolution).
    pub sum_ln: f64,
    /// Σ ln(value / 1 s)², same clamp.
    pub sum_ln2: f64,
    /// Values below 1 µs (clamped as said).
    pub below_min: u64,
}

impl Default for LogHist {
    fn default() -> Self {
        LogHist { counts: vec![0; HIST_BINS], n: 0, sum_ns: 0, sum_ln: 0.0, sum_ln2: 0.0, below_min: 0 }
    }
}

impl LogHist {
    /// Add one duration.
    #[inline]
    pub fn add(&mut self, d: Duration) {
        let ns = d.as_nanos();
        self.n += 1;
        self.sum_ns += u128::from(ns);
        if ns < 1_000 {
            self.below_min += 1;
        }
        let ln = ((ns.max(1_000)) as f64 * 1e-9).ln();
        self.sum_ln += ln;
        self.sum_ln2 += ln * ln;
        // bin = floor(20 · log10 t) + 120, from the same logarithm.
        let k = (ln * (BINS_PER_DECADE as f64 / std::f64::consts::LN_10)).floor() as i64
            - i64::from(HIST_MIN_EXP) * BINS_PER_DECADE as i64;
        self.counts[k.clamp(0, HIST_BINS as i64 - 1) as usize] += 1;
    }

    /// Σ value in seconds.
    pub fn sum_s(&self) -> f64 {
        self.sum_ns as f64 * 1e-9
    }

    /// Mean in seconds; None when empty.
    pub fn mean_s(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum_s() / self.n as f64)
    }

    /// Add another histogram's counts and sums.
    pub fn merge(&mut self, o: &LogHist) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.n += o.n;
        self.sum_ns += o.sum_ns;
        self.sum_ln += o.sum_ln;
        self.sum_ln2 += o.sum_ln2;
        self.below_min += o.below_min;
    }
}

/// Payload sizes, one bin per byte count.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeHist {
    /// Packets per payload size 0 … 65535 (a larger one, from a capture of offloaded
    /// segments, counts in the last bin; `sum` stays exact).
    pub counts: Vec<u64>,
    /// Packets.
    pub n: u64,
    /// Σ payload bytes.
    pub sum: u64,
}

impl Default for SizeHist {
    fn default() -> Self {
        SizeHist { counts: vec![0; SIZE_BINS], n: 0, sum: 0 }
    }
}

impl SizeHist {
    /// One packet of `bytes` payload.
    #[inline]
    pub fn add(&mut self, bytes: u32) {
        self.counts[(bytes as usize).min(SIZE_BINS - 1)] += 1;
        self.n += 1;
        self.sum += u64::from(bytes);
    }
}

/// Packets per bulk block.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockLengths {
    /// Blocks per length, indexed by length 0 … [`BLOCK_EXACT_MAX`] (0 and 1 stay 0).
    pub counts: Vec<u64>,
    /// Lengths above [`BLOCK_EXACT_MAX`], in the order seen, at most [`BLOCK_OVERFLOW_MAX`].
    pub overflow: Vec<u32>,
    /// Longer blocks beyond that bound: counted only (their packets are in `sum`).
    pub overflow_dropped: u64,
    /// Blocks.
    pub n: u64,
    /// Σ packets over blocks.
    pub sum: u64,
}

impl Default for BlockLengths {
    fn default() -> Self {
        BlockLengths {
            counts: vec![0; BLOCK_EXACT_MAX + 1],
            overflow: Vec::new(),
            overflow_dropped: 0,
            n: 0,
            sum: 0,
        }
    }
}

impl BlockLengths {
    /// One block of `packets`.
    pub fn add(&mut self, packets: u32) {
        self.n += 1;
        self.sum += u64::from(packets);
        match self.counts.get_mut(packets as usize) {
            Some(c) => *c += 1,
            None if self.overflow.len() < BLOCK_OVERFLOW_MAX => self.overflow.push(packets),
            None => self.overflow_dropped += 1,
        }
    }

    /// Mean packets per block (c_B); None without blocks.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum as f64 / self.n as f64)
    }
}

/// One connection's activity, for the per-session spread (`fit-model`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Session {
    /// First to last new response payload packet, seconds.
    pub duration_s: f64,
    /// Flows (both kinds).
    pub flows: u64,
    /// Response payload bytes of new packets.
    pub bytes: u64,
}

/// Everything pooled over the connections of a capture.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pooled {
    /// Transitions by [`Transition::index`].
    pub transitions: [u64; 4],
    /// Start-to-start gaps by [`Transition::index`].
    pub gaps: [LogHist; 4],
    /// Gaps between consecutive packets of one block.
    pub intra: LogHist,
    /// Inter-arrival of consecutive request packets with payload (per connection).
    pub request: LogHist,
    /// Inter-arrival of consecutive new response packets with payload (per connection):
    /// the histogram a user picks the gap threshold from.
    pub response: LogHist,
    /// Payload sizes of interactive flows' packets.
    pub interactive_sizes: SizeHist,
    /// Payload sizes of packets in blocks.
    pub bulk_sizes: SizeHist,
    /// Packets per block.
    pub block_lengths: BlockLengths,
    /// Flows by kind: [interactive, bulk].
    pub flows: [u64; 2],
    /// One entry per connection that had a response packet.
    pub sessions: Vec<Session>,
}

impl Pooled {
    /// α = n(I→B) / (n(I→I) + n(I→B)); None without a transition from I.
    pub fn alpha(&self) -> Option<f64> {
        let [ii, ib, _, _] = self.transitions;
        (ii + ib > 0).then(|| ib as f64 / (ii + ib) as f64)
    }

    /// β = n(B→I) / (n(B→I) + n(B→B)); None without a transition from B.
    pub fn beta(&self) -> Option<f64> {
        let [_, _, bi, bb] = self.transitions;
        (bi + bb > 0).then(|| bi as f64 / (bi + bb) as f64)
    }
}

/// What one connection's gap rule counted (the summary row's part).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnCounts {
    /// Flows by kind: [interactive, bulk].
    pub flows: [u64; 2],
    /// Transitions by [`Transition::index`].
    pub transitions: [u64; 4],
    /// New response packets with payload (those pushed).
    pub packets: u64,
    /// Their payload bytes.
    pub bytes: u64,
}

/// A flow the rule has closed: its kind is known once the next flow starts (or the
/// connection ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClosedFlow {
    /// Interactive or bulk.
    pub kind: FlowKind,
    /// Its first packet's time.
    pub start: Instant,
    /// Packets in it.
    pub packets: u32,
}

/// The flow being built.
#[derive(Clone, Copy, Debug)]
struct Open {
    start: Instant,
    last: Instant,
    packets: u32,
    /// Payload of the first packet: interactive or bulk is known only when the flow
    /// closes or gets its second packet.
    first_bytes: u32,
}

/// The gap rule of one connection (see the module docs for the call order).
#[derive(Clone, Debug)]
pub struct GapRule {
    gap: Duration,
    open: Option<Open>,
    /// Kind and start of the last closed flow.
    prev: Option<(FlowKind, Instant)>,
    last_request: Option<Instant>,
    first: Option<Instant>,
    counts: ConnCounts,
}

impl GapRule {
    /// A connection with no packet yet; `gap`: the threshold (the scenario's
    /// `classifier_gap_ms` by default, 10^-2.2 s in the source).
    pub fn new(gap: Duration) -> Self {
        GapRule {
            gap,
            open: None,
            prev: None,
            last_request: None,
            first: None,
            counts: ConnCounts::default(),
        }
    }

    /// A new response packet with `payload` > 0 bytes passed at `t`. Returns the flow it
    /// closed, if it starts a new one.
    #[inline]
    pub fn push(&mut self, t: Instant, payload: u32, pooled: &mut Pooled) -> Option<ClosedFlow> {
        self.counts.packets += 1;
        self.counts.bytes += u64::from(payload);
        self.first.get_or_insert(t);
        let Some(open) = self.open.as_mut() else {
            self.open = Some(Open { start: t, last: t, packets: 1, first_bytes: payload });
            return None;
        };
        // A capture merged from several interfaces can step back a little: no negative gaps.
        let since = t.saturating_since(open.last);
        pooled.response.add(since);
        if since < self.gap {
            // Same flow: a block from its second packet on.
            if open.packets == 1 {
                pooled.bulk_sizes.add(open.first_bytes);
            }
            pooled.bulk_sizes.add(payload);
            pooled.intra.add(since);
            open.packets += 1;
            open.last = open.last.max(t);
            return None;
        }
        let closed = self.close(pooled);
        self.open = Some(Open { start: t, last: t, packets: 1, first_bytes: payload });
        closed
    }

    /// A request packet with payload passed at `t`.
    #[inline]
    pub fn push_request(&mut self, t: Instant, pooled: &mut Pooled) {
        if let Some(last) = self.last_request {
            pooled.request.add(t.saturating_since(last));
        }
        self.last_request = Some(self.last_request.map_or(t, |l| l.max(t)));
    }

    /// The connection ended: close the open flow and record the session. Returns the
    /// flow closed, if any. Call once.
    pub fn finish(&mut self, pooled: &mut Pooled) -> Option<ClosedFlow> {
        let last = self.open.map(|o| o.last);
        let closed = self.close(pooled);
        if let (Some(first), Some(last)) = (self.first, last) {
            pooled.sessions.push(Session {
                duration_s: last.saturating_since(first).as_secs_f64(),
                flows: self.counts.flows[0] + self.counts.flows[1],
                bytes: self.counts.bytes,
            });
        }
        closed
    }

    /// What this connection counted so far (closed flows only).
    pub fn counts(&self) -> ConnCounts {
        self.counts
    }

    /// The threshold.
    pub fn gap(&self) -> Duration {
        self.gap
    }

    fn close(&mut self, pooled: &mut Pooled) -> Option<ClosedFlow> {
        let open = self.open.take()?;
        let kind = if open.packets == 1 {
            pooled.interactive_sizes.add(open.first_bytes);
            FlowKind::Interactive
        } else {
            pooled.block_lengths.add(open.packets);
            FlowKind::Bulk
        };
        let k = kind as usize;
        self.counts.flows[k] += 1;
        pooled.flows[k] += 1;
        if let Some((prev, start)) = self.prev {
            let tr = Transition::between(prev, kind);
            self.counts.transitions[tr.index()] += 1;
            pooled.transitions[tr.index()] += 1;
            pooled.gaps[tr.index()].add(open.start.saturating_since(start));
        }
        self.prev = Some((kind, open.start));
        Some(ClosedFlow { kind, start: open.start, packets: open.packets })
    }
}

#[cfg(test)]
mod tests;

//! The weighted class scheduler: classes with a guaranteed `rate` and a `ceil`, unused
//! capacity lent to the classes that want more — the semantics of Linux HTB
//! (`sch_htb.c`; Devera, "HTB Linux queuing discipline manual") for one level of leaf
//! classes under the link.
//!
//! Each class has two token buckets refilled on `now`: one at `rate`, one at `ceil`
//! (tokens in nano-bits, integer arithmetic: runs are repeatable). A class with a
//! backlog is
//!
//! - *green* when its rate bucket is not negative: it may send at its own rate;
//! - *yellow* when only its ceil bucket is not negative: it may borrow;
//! - *red* otherwise: it waits ([`QueueDisc::next_ready`] says until when).
//!
//! Dequeue serves green classes first; only when none is green does it lend the link
//! to yellow classes. Within each colour, classes take turns by deficit round robin
//! with a quantum proportional to their rate (HTB's `quantum = rate / r2q`), so
//! borrowed capacity is shared in proportion to the rates. Sending charges the ceil
//! bucket always and the rate bucket only when green (`htb_charge_class`: a borrowing
//! leaf's own tokens are not charged). With ceil = link rate the scheduler is
//! work-conserving: some backlogged class is always green or yellow. A class with
//! rate > 0 becomes green again after at most one packet's worth of refill, so it is
//! never starved.
//!
//! Flows go to classes by a filter ([`ClassControl::assign`]; unassigned flows go to
//! the default class, the last). Inside a class, flows take turns by deficit round
//! robin with `quantum` bytes. The buffer ([`Limits`]) is shared: an arrival that does
//! not fit is dropped (tail drop).
//!
//! When a flow is assigned to another class while it has packets queued, those packets
//! either stay where they are ([`ClassChange::Leave`], the default: Linux HTB with u32
//! filters, whose filter decides a packet's class once, at enqueue) and leave at the old
//! class's rate, so the flow's later packets may overtake them; or its flow queue moves
//! with it ([`ClassChange::Move`], `queue.class_change = "move"`): same packets, same
//! order, same CoDel state, now served in the new class's round at the new class's rate.
//! A TCP receiver then never sees the scheduler reorder a flow (docs/qds.md "ECN: marks
//! instead of drops", the diagnosis of spurious fast retransmits).
//!
//! Optionally ([`Classes::with_codel`], `queue.class_codel`), each flow queue of a class
//! runs CoDel (RFC 8289) as FQ-CoDel does for its flow queues (RFC 8290 §4.2): a greedy
//! flow's standing queue is dropped down to `target` at the head, so it neither holds
//! the shared buffer full (tail drops for everyone else) nor builds a delay of its own.
//! A flow queue's CoDel state lives while it has packets (a flow that empties its queue
//! starts afresh, where RFC 8290 keeps the state of the hashed queue).

use super::codel::{Codel, CodelParams, Stamped};
use super::{DropReason, Dropped, Limits, QueueDisc, QueueItem, QueueStats};
use crate::time::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// One class of the weighted class scheduler: HTB semantics (RFC-less; Linux sch_htb).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassRate {
    /// Guaranteed rate, bit/s (0 = only borrows).
    pub rate_bps: u64,
    /// Most it may send when borrowing, bit/s (≥ rate; the link rate = no cap).
    pub ceil_bps: u64,
}

/// What a controller (QDS, static config) changes on a class scheduler at run time.
pub trait ClassControl {
    /// Number of classes.
    fn class_count(&self) -> usize;
    /// Replace every class's rate and ceil (len == class_count()).
    fn set_rates(&mut self, now: Instant, rates: &[ClassRate]);
    /// Put flow `flow` (QueueItem::flow()) into class `class`; flows never assigned go
    /// to the default class (the last one).
    fn assign(&mut self, flow: u64, class: usize);
}

/// What [`ClassControl::assign`] does with the packets a flow has already queued when it
/// puts the flow into another class (`queue.class_change`; module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassChange {
    /// They stay in the old class and leave at its rate; only later packets go to the
    /// new class (Linux HTB: a u32 filter classifies each packet once, at enqueue).
    #[default]
    Leave,
    /// The flow's queue moves to the new class, in order, to the back of its round.
    Move,
}

/// Nano-bits per byte: tokens are bits × 10⁹, so a refill is `rate_bps × ns` exactly.
const NANOBITS_PER_BYTE: i128 = 8_000_000_000;
/// Bucket depth: the larger of two full packets and 10 ms at the bucket's rate (HTB's
/// default burst is one timer tick plus an MTU; 10 ms is a 100 Hz tick).
const BURST_TIME: Duration = Duration::from_millis(10);
const BURST_MIN_BYTES: i128 = 2 * 1514;
/// The least DRR quantum of a class among classes (a class whose rate is tiny next to
/// the others still sends a packet every few rounds).
const MIN_CLASS_QUANTUM: i64 = 64;

/// The class scheduler; see the module documentation.
#[derive(Debug)]
pub struct Classes<P> {
    limits: Limits,
    /// DRR quantum of a flow inside a class, bytes.
    quantum: u32,
    classes: Vec<Class<P>>,
    /// The filter: flow → class (absent = the default class).
    filter: BTreeMap<u64, usize>,
    /// Packets labelled interactive go to this class unless their flow is assigned.
    interactive_class: Option<usize>,
    /// Next class to visit in the green and in the yellow round.
    cursor: [usize; 2],
    /// CoDel on every flow queue, if on.
    codel: Option<CodelParams>,
    /// What a flow's queued packets do when [`ClassControl::assign`] moves the flow.
    class_change: ClassChange,
    /// CoDel's head drops of the last dequeues, until [`QueueDisc::take_drops`].
    dropped: Vec<P>,
    bytes: u64,
    packets: usize,
    stats: QueueStats,
}

#[derive(Debug)]
struct Class<P> {
    rate: ClassRate,
    /// Rate and ceil buckets, nano-bits, as of `refilled`.
    tokens: i128,
    ctokens: i128,
    refilled: Instant,
    /// Deficits in the green and the yellow round, bytes.
    deficit: [i64; 2],
    /// DRR quantum among classes, bytes (proportional to the rate).
    class_quantum: i64,
    /// Per-flow queues and the round of flows with packets.
    flows: BTreeMap<u64, FlowQueue<P>>,
    active: VecDeque<u64>,
    packets: usize,
}

#[derive(Debug)]
struct FlowQueue<P> {
    packets: VecDeque<Stamped<P>>,
    bytes: u64,
    deficit: i64,
    codel: Codel,
}

/// A class's colour (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Colour {
    Green = 0,
    Yellow = 1,
}

impl<P: QueueItem> Classes<P> {
    /// A scheduler with one class per entry of `rates` (at least one; the last is the
    /// default class), `quantum` bytes per flow turn inside a class, and a shared
    /// buffer of `limits`. Buckets start full.
    pub fn new(rates: &[ClassRate], quantum: u32, limits: Limits) -> Self {
        let mut s = Classes {
            limits,
            quantum: quantum.max(1),
            classes: Vec::new(),
            filter: BTreeMap::new(),
            interactive_class: None,
            cursor: [0, 0],
            codel: None,
            class_change: ClassChange::Leave,
            dropped: Vec::new(),
            bytes: 0,
            packets: 0,
            stats: QueueStats::default(),
        };
        s.set_rates(Instant::ZERO, rates);
        for c in &mut s.classes {
            c.tokens = burst(c.rate.rate_bps);
            c.ctokens = burst(c.rate.ceil_bps);
        }
        s
    }

    /// Send packets labelled interactive ([`QueueItem::is_interactive`]) of flows not
    /// assigned elsewhere to `class` (the static configuration's `interactive` class).
    pub fn with_interactive_class(mut self, class: Option<usize>) -> Self {
        self.interactive_class = class.filter(|&c| c < self.classes.len());
        self
    }

    /// Run CoDel with `params` on every flow queue of every class (None: tail drop only).
    pub fn with_codel(mut self, params: Option<CodelParams>) -> Self {
        self.codel = params;
        self
    }

    /// Move a reassigned flow's queued packets with it, or leave them in the old class
    /// ([`ClassChange`]; the default is to leave them).
    pub fn with_class_change(mut self, class_change: ClassChange) -> Self {
        self.class_change = class_change;
        self
    }

    /// The current rates (tests, observers).
    pub fn rates(&self) -> Vec<ClassRate> {
        self.classes.iter().map(|c| c.rate).collect()
    }

    /// Queued packets of class `class`.
    pub fn class_backlog(&self, class: usize) -> usize {
        self.classes.get(class).map_or(0, |c| c.packets)
    }

    fn class_of(&self, p: &P) -> usize {
        let default = self.classes.len() - 1;
        match self.filter.get(&p.flow()) {
            Some(&c) => c.min(default),
            None if p.is_interactive() => self.interactive_class.unwrap_or(default),
            None => default,
        }
    }

    /// Gather the packets flow `flow` has queued in classes other than `to` into its
    /// queue in class `to` ([`ClassChange::Move`]).
    fn move_flow(&mut self, flow: u64, to: usize) {
        for from in 0..self.classes.len() {
            if from == to {
                continue;
            }
            if let Some(q) = self.classes[from].take_flow(flow) {
                self.classes[to].put_flow(flow, q);
            }
        }
    }

    fn refill(&mut self, now: Instant) {
        for c in &mut self.classes {
            c.refill(now);
        }
    }

    /// Quanta among classes: proportional to the rates, the largest rate getting the
    /// flow quantum ×10 (HTB's r2q idea: a class's quantum ∝ its rate).
    fn update_class_quanta(&mut self) {
        let max_rate = self.classes.iter().map(|c| c.rate.rate_bps.max(1)).max().unwrap_or(1) as i128;
        let top = 10 * self.quantum as i128;
        for c in &mut self.classes {
            let q = top * c.rate.rate_bps.max(1) as i128 / max_rate;
            c.class_quantum = (q as i64).max(MIN_CLASS_QUANTUM);
        }
    }

    /// One packet of the first class of `colour` in DRR order, if any.
    fn serve(&mut self, now: Instant, colour: Colour) -> Option<P> {
        let n = self.classes.len();
        let k = colour as usize;
        // While some class is eligible, each visit either sends, adds a quantum or (with
        // CoDel) drops packets, so the loop ends within (largest packet / least quantum
        // + 1) rounds plus one visit per queued packet.
        loop {
            if !self.classes.iter().any(|c| c.may_send(colour)) {
                return None;
            }
            let i = self.cursor[k];
            let c = &mut self.classes[i];
            if !c.may_send(colour) {
                c.deficit[k] = 0;
                self.cursor[k] = (i + 1) % n;
                continue;
            }
            if c.deficit[k] <= 0 {
                c.deficit[k] += c.class_quantum;
                self.cursor[k] = (i + 1) % n;
                continue;
            }
            let before = self.dropped.len();
            let popped =
                c.pop(self.quantum, now, self.codel.as_ref(), &mut self.dropped, &mut self.stats.marks_ce);
            for d in &self.dropped[before..] {
                self.bytes -= d.wire_len() as u64;
                self.packets -= 1;
                self.stats.count_drop(DropReason::Codel);
            }
            // CoDel dropped every packet of the class it looked at: visit again.
            let Some(p) = popped else { continue };
            let bits = p.wire_len() as i128 * NANOBITS_PER_BYTE;
            c.deficit[k] -= p.wire_len() as i64;
            c.ctokens -= bits;
            if colour == Colour::Green {
                c.tokens -= bits;
            }
            return Some(p);
        }
    }
}

impl<P> Class<P> {
    fn new(rate: ClassRate, now: Instant) -> Self {
        Class {
            rate,
            tokens: 0,
            ctokens: 0,
            refilled: now,
            deficit: [0, 0],
            class_quantum: MIN_CLASS_QUANTUM,
            flows: BTreeMap::new(),
            active: VecDeque::new(),
            packets: 0,
        }
    }

    /// Buckets as of `now` (no state change).
    fn buckets_at(&self, now: Instant) -> (i128, i128) {
        let dt = now.saturating_since(self.refilled).as_nanos() as i128;
        let fill = |t: i128, bps: u64| (t + bps as i128 * dt).min(burst(bps).max(t));
        (fill(self.tokens, self.rate.rate_bps), fill(self.ctokens, self.rate.ceil_bps))
    }

    fn refill(&mut self, now: Instant) {
        if now > self.refilled {
            (self.tokens, self.ctokens) = self.buckets_at(now);
            self.refilled = now;
        }
    }

    /// Has packets and may send in the round of `colour` (a green class may also
    /// take the yellow round's turns; it has none then, as the green round came first).
    fn may_send(&self, round: Colour) -> bool {
        match (self.packets, self.colour(), round) {
            (0, _, _) | (_, None, _) => false,
            (_, Some(c), Colour::Green) => c == Colour::Green,
            (_, Some(_), Colour::Yellow) => true,
        }
    }

    fn colour(&self) -> Option<Colour> {
        if self.tokens >= 0 {
            Some(Colour::Green)
        } else if self.ctokens >= 0 {
            Some(Colour::Yellow)
        } else {
            None
        }
    }

    /// The next packet of this class: DRR among its flows with `quantum` bytes; with
    /// `codel`, CoDel at the head of the chosen flow's queue (its drops are appended to
    /// `dropped`, its CE marks counted in `marks`). None when CoDel dropped every packet of the class.
    fn pop(
        &mut self,
        quantum: u32,
        now: Instant,
        codel: Option<&CodelParams>,
        dropped: &mut Vec<P>,
        marks: &mut u64,
    ) -> Option<P>
    where
        P: QueueItem,
    {
        while self.packets > 0 {
            // The class has packets, so some flow is active (every queued packet's flow
            // is in `active`).
            let flow = *self.active.front().expect("a class with packets has an active flow");
            let f = self.flows.get_mut(&flow).expect("an active flow has a queue");
            if f.deficit <= 0 {
                f.deficit += quantum as i64;
                self.active.rotate_left(1);
                continue;
            }
            let before = dropped.len();
            let p = match codel {
                Some(params) => f.codel.dequeue(params, now, &mut f.packets, &mut f.bytes, dropped, marks),
                None => f.packets.pop_front().map(|s| {
                    f.bytes -= s.packet.wire_len() as u64;
                    s.packet
                }),
            };
            self.packets -= dropped.len() - before + p.is_some() as usize;
            if let Some(p) = &p {
                f.deficit -= p.wire_len() as i64;
            }
            if f.packets.is_empty() {
                self.flows.remove(&flow);
                self.active.pop_front();
            }
            if p.is_some() {
                return p;
            }
        }
        None
    }

    /// Remove flow `flow`'s queue (and its turn in the round), if it has one here.
    fn take_flow(&mut self, flow: u64) -> Option<FlowQueue<P>> {
        let q = self.flows.remove(&flow)?;
        self.active.retain(|&f| f != flow);
        self.packets -= q.packets.len();
        Some(q)
    }

    /// Take in flow `flow`'s queue `q` from another class: a flow new here joins the
    /// back of the round with its deficit and CoDel state; one already here (labelled
    /// packets of an unassigned flow went to the interactive class, or `set_rates`
    /// removed a class) gets the packets merged by arrival time, so its order holds.
    fn put_flow(&mut self, flow: u64, q: FlowQueue<P>) {
        self.packets += q.packets.len();
        let Some(f) = self.flows.get_mut(&flow) else {
            self.active.push_back(flow);
            self.flows.insert(flow, q);
            return;
        };
        let (mut a, mut b) = (std::mem::take(&mut f.packets), q.packets);
        let mut merged = VecDeque::with_capacity(a.len() + b.len());
        while let (Some(x), Some(y)) = (a.front(), b.front()) {
            let from_b = y.enqueued < x.enqueued;
            merged.extend(if from_b { b.pop_front() } else { a.pop_front() });
        }
        merged.extend(a);
        merged.extend(b);
        f.packets = merged;
        f.bytes += q.bytes;
    }

    fn push(&mut self, p: Stamped<P>, quantum: u32)
    where
        P: QueueItem,
    {
        let flow = p.packet.flow();
        let f = self.flows.entry(flow).or_insert_with(|| {
            self.active.push_back(flow);
            FlowQueue { packets: VecDeque::new(), bytes: 0, deficit: quantum as i64, codel: Codel::default() }
        });
        f.bytes += p.packet.wire_len() as u64;
        f.packets.push_back(p);
        self.packets += 1;
    }
}

/// A bucket's depth for `bps`, nano-bits.
fn burst(bps: u64) -> i128 {
    let by_time = bps as i128 * BURST_TIME.as_nanos() as i128;
    by_time.max(BURST_MIN_BYTES * NANOBITS_PER_BYTE)
}

impl<P: QueueItem> QueueDisc<P> for Classes<P> {
    fn enqueue(&mut self, now: Instant, packet: P, drops: &mut Vec<Dropped<P>>) {
        let len = packet.wire_len();
        if !self.limits.fits(self.bytes, self.packets, len) {
            self.stats.count_drop(DropReason::Overflow);
            drops.push(Dropped { packet, reason: DropReason::Overflow });
            return;
        }
        let c = self.class_of(&packet);
        self.classes[c].push(Stamped { packet, enqueued: now }, self.quantum);
        self.bytes += len as u64;
        self.packets += 1;
        self.stats.enqueued += 1;
        self.stats.max_bytes = self.stats.max_bytes.max(self.bytes);
    }

    fn dequeue(&mut self, now: Instant) -> Option<P> {
        if self.packets == 0 {
            return None;
        }
        self.refill(now);
        let p = self.serve(now, Colour::Green).or_else(|| self.serve(now, Colour::Yellow))?;
        self.bytes -= p.wire_len() as u64;
        self.packets -= 1;
        self.stats.dequeued += 1;
        Some(p)
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }
    fn backlog_packets(&self) -> usize {
        self.packets
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn take_drops(&mut self, drops: &mut Vec<Dropped<P>>) {
        drops.extend(self.dropped.drain(..).map(|packet| Dropped { packet, reason: DropReason::Codel }));
    }

    /// The first time a backlogged class turns green or yellow: its rate or ceil bucket
    /// back to zero at its refill rate.
    fn next_ready(&self, now: Instant) -> Option<Instant> {
        let wait = |tokens: i128, bps: u64| match (tokens, bps) {
            (t, _) if t >= 0 => Some(0),
            (_, 0) => None,
            (t, bps) => Some((-t + bps as i128 - 1) / bps as i128),
        };
        self.classes
            .iter()
            .filter(|c| c.packets > 0)
            .filter_map(|c| {
                // Time never runs backwards for a driver; if it did, wait from the
                // last refill rather than promise an instant too early.
                let from = now.max(c.refilled);
                let (t, ct) = c.buckets_at(from);
                let w = [wait(t, c.rate.rate_bps), wait(ct, c.rate.ceil_bps)];
                let ns = w.into_iter().flatten().min()?;
                Some(from + Duration::from_nanos(ns.clamp(0, u64::MAX as i128) as u64))
            })
            .min()
    }

    fn classes(&mut self) -> Option<&mut dyn ClassControl> {
        Some(self)
    }
}

impl<P: QueueItem> ClassControl for Classes<P> {
    fn class_count(&self) -> usize {
        self.classes.len()
    }

    /// Replace the rates at `now` (buckets are first refilled at the old rates). A
    /// different number of classes resizes the scheduler: new classes start with empty
    /// buckets; the packets of removed classes move to the new default (last) class and
    /// filters pointing past the end fall back to it. Ignored when `rates` is empty.
    fn set_rates(&mut self, now: Instant, rates: &[ClassRate]) {
        if rates.is_empty() {
            return;
        }
        self.refill(now);
        while self.classes.len() > rates.len() {
            let Some(gone) = self.classes.pop() else { break };
            let last = rates.len() - 1;
            let Class { mut flows, active, .. } = gone;
            // In the removed class's round order, so its flows keep their turn order.
            for flow in active {
                let Some(q) = flows.remove(&flow) else { continue };
                match self.class_change {
                    ClassChange::Leave => {
                        for p in q.packets {
                            self.classes[last].push(p, self.quantum);
                        }
                    }
                    // A flow with packets in both keeps them in arrival order.
                    ClassChange::Move => self.classes[last].put_flow(flow, q),
                }
            }
        }
        while self.classes.len() < rates.len() {
            self.classes.push(Class::new(rates[self.classes.len()], now));
        }
        for (c, r) in self.classes.iter_mut().zip(rates) {
            c.rate = ClassRate { rate_bps: r.rate_bps, ceil_bps: r.ceil_bps.max(r.rate_bps) };
            c.tokens = c.tokens.min(burst(c.rate.rate_bps));
            c.ctokens = c.ctokens.min(burst(c.rate.ceil_bps));
        }
        let n = self.classes.len();
        self.filter.retain(|_, c| *c < n);
        self.interactive_class = self.interactive_class.filter(|&c| c < n);
        self.cursor = [self.cursor[0] % n, self.cursor[1] % n];
        self.update_class_quanta();
    }

    /// With [`ClassChange::Move`] the flow's queued packets go along (module
    /// documentation); with [`ClassChange::Leave`] only its later packets do.
    fn assign(&mut self, flow: u64, class: usize) {
        let default = self.classes.len() - 1;
        if class >= default {
            // The default class needs no filter entry (and the filter stays small).
            self.filter.remove(&flow);
        } else {
            self.filter.insert(flow, class);
        }
        if self.class_change == ClassChange::Move {
            self.move_flow(flow, class.min(default));
        }
    }
}

#[cfg(test)]
mod tests;

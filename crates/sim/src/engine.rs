//! The event queue: events ordered by (time, insertion number), so events at the same
//! instant run in the order they were scheduled and every run is deterministic.
//! Events are small (24 bytes); packets live in a slab elsewhere.
//!
//! Where an event waits depends on what it is, and the earliest of the heads goes
//! first (the order is exactly (time, insertion number) whichever holds it):
//! - writes and timers, ~2·10⁴ of them at 10⁴ connections and mostly far ahead, in a
//!   calendar queue of 1-ms buckets (`Calendar`);
//! - packet events in lanes, each in time order: FIFO lanes for events their caller
//!   schedules in time order (arrivals over one WAN link, which never reorders, and
//!   arrivals a fixed delay after the present, such as every ACK over an access link:
//!   [`EventQueue::push_after`]), and two lanes kept sorted on insertion for the rest
//!   (ports finishing a packet; arrivals of segments of other sizes, a few hundred).
//!
//! Seven events in eight are packet events. A lane is read in order, so what its next
//! events will touch can be prefetched ([`EventQueue::lane_ahead`]), which a heap's
//! could not.

use dary_heap::QuaternaryHeap as BinaryHeap;
use std::cmp::Ordering;
use std::collections::VecDeque;
use thinwan_proto::Instant;

/// What happens. Fields name the connection, port or packet (slab index) concerned.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A pair's source writes next.
    AppWrite { pair: u32 },
    /// A port finished transmitting its current packet.
    PortFree { port: u32 },
    /// A packet (slab index) reaches the far end of a link.
    Arrive { packet: u32 },
    /// A sender's retransmission timer may be due.
    SenderTimer { conn: u32 },
    /// A receiver's delayed-ACK timer may be due.
    ReceiverTimer { conn: u32 },
    /// Sample the queue trace.
    TraceSample,
    /// A tunnel session's timer (acks, pings) may be due: the edge's or the core's.
    MuxTimer { edge: bool },
    /// A control period of the QDS loop on the middlebox's downlink.
    QdsTick,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    at: Instant,
    seq: u64,
    ev: Event,
}

impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse for earliest first.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Pending events.
pub struct EventQueue {
    /// Writes and timers.
    rest: Calendar,
    /// Packet events, each lane in (time, insertion) order: [`PORT_FREE`], then
    /// [`OTHER_PACKETS`] (both sorted on insertion), then the caller's
    /// ([`EventQueue::push_in_lane`]), then the delay lanes ([`EventQueue::push_after`]).
    lanes: Vec<VecDeque<Entry>>,
    /// The delay each lane after the caller's own ones serves ([`EventQueue::push_after`]).
    delay_lanes: Vec<u64>,
    /// Lanes before the delay lanes (the two sorted ones and the caller's).
    fixed_lanes: usize,
    next_seq: u64,
    popped: u64,
    /// The lane the latest event came from ([`REST`]: the calendar).
    popped_lane: usize,
}

/// A calendar queue (R. Brown, CACM 31(10), 1988) for the events far ahead: a
/// source's next write and the timers, one or two per connection. In a heap of 2·10⁴
/// of them each pop walked ~7 levels whose lower ones miss the cache, one after the
/// other; here an event is appended to the bucket of its time (a store: nothing waits
/// for it) and a bucket is sorted once, when it becomes the earliest nonempty one.
///
/// Buckets hold the events of `[base, base + BUCKETS)` (in bucket numbers), `base`
/// being the bucket of the latest event popped; every pending event is at or after
/// it, so two events in one slot are always of the same bucket. Events beyond the
/// window when pushed (backed-off timers) wait in a small heap, and the earlier of its
/// top and the buckets' head goes first.
struct Calendar {
    /// Slot `b % BUCKETS` holds the events with `at >> WIDTH_SHIFT == b`.
    buckets: Vec<Vec<Entry>>,
    base: u64,
    /// No nonempty bucket before this one (≥ `base`).
    cur: u64,
    /// Bucket `cur` is sorted, latest first (its earliest is popped off the end).
    cur_sorted: bool,
    /// Events in `buckets`.
    in_buckets: usize,
    far: BinaryHeap<Entry>,
}

/// Bucket width 2^20 ns ≈ 1 ms and 4096 buckets: a window of 4.3 s, beyond every write
/// gap and unbacked RTO of the models; only backed-off timers go to the heap.
const WIDTH_SHIFT: u32 = 20;
const BUCKETS: u64 = 4096;

impl Calendar {
    fn new() -> Self {
        let buckets = vec![Vec::new(); BUCKETS as usize];
        Calendar { buckets, base: 0, cur: 0, cur_sorted: false, in_buckets: 0, far: BinaryHeap::new() }
    }

    fn bucket_of(e: &Entry) -> u64 {
        e.at.as_nanos() >> WIDTH_SHIFT
    }

    fn push(&mut self, e: Entry) {
        let b = Self::bucket_of(&e);
        debug_assert!(b >= self.base, "event scheduled before the latest one popped");
        if b >= self.base + BUCKETS {
            self.far.push(e);
            return;
        }
        let q = &mut self.buckets[(b % BUCKETS) as usize];
        if b == self.cur && self.cur_sorted {
            // Entry's order is reversed (later = smaller): the bucket ascends in it.
            let i = q.partition_point(|x| x < &e);
            q.insert(i, e);
        } else {
            q.push(e);
            if b < self.cur {
                (self.cur, self.cur_sorted) = (b, false);
            }
        }
        self.in_buckets += 1;
    }

    /// The earliest event in the buckets, after sorting its bucket.
    fn bucket_head(&mut self) -> Option<&Entry> {
        if self.in_buckets == 0 {
            return None;
        }
        loop {
            let q = &mut self.buckets[(self.cur % BUCKETS) as usize];
            if !self.cur_sorted {
                q.sort_unstable();
                self.cur_sorted = true;
            }
            if !q.is_empty() {
                return self.buckets[(self.cur % BUCKETS) as usize].last();
            }
            (self.cur, self.cur_sorted) = (self.cur + 1, false);
        }
    }

    /// The earliest event.
    fn peek(&mut self) -> Option<&Entry> {
        let b = self.bucket_head().copied();
        match (b, self.far.peek()) {
            (Some(b), f) if f.is_none_or(|f| b > *f) => self.buckets[(self.cur % BUCKETS) as usize].last(),
            (_, f) => f,
        }
    }

    /// The event `k` places after the head in the current bucket (sorted).
    fn ahead(&self, k: usize) -> Option<&Entry> {
        let q = &self.buckets[(self.cur % BUCKETS) as usize];
        if !self.cur_sorted || k >= q.len() {
            return None;
        }
        q.get(q.len() - 1 - k)
    }

    fn pop(&mut self) -> Option<Entry> {
        let from_buckets = match (self.bucket_head().copied(), self.far.peek()) {
            (None, None) => return None,
            (Some(b), f) => f.is_none_or(|f| b > *f),
            (None, Some(_)) => false,
        };
        let e = if from_buckets {
            self.in_buckets -= 1;
            self.buckets[(self.cur % BUCKETS) as usize].pop().expect("head exists")
        } else {
            self.far.pop().expect("head exists")
        };
        self.base = Self::bucket_of(&e);
        if self.cur < self.base {
            (self.cur, self.cur_sorted) = (self.base, false);
        }
        Some(e)
    }
}

/// Lanes [`EventQueue::push_after`] opens at most (each costs every pop a look).
pub const MAX_DELAY_LANES: usize = 6;

/// `popped_lane` when the latest event came from the calendar.
const REST: usize = usize::MAX - 1;

/// The lane of ports finishing a packet: one per busy port, a handful.
const PORT_FREE: usize = 0;
/// The lane of the packet events no FIFO lane holds: arrivals over access links of
/// segments of other sizes than a lane's, a few hundred at 10⁴ pairs.
const OTHER_PACKETS: usize = 1;
/// Lanes the queue keeps for itself, before the caller's.
const OWN_LANES: usize = 2;

/// Insert `e`, the latest event scheduled, in `q`, sorted by (time, insertion). This
/// replaces a heap: nearly every event goes among the last few (an access link's
/// delay after now), so the scan back is short and the ring shifts few entries, and a
/// sorted lane can be read ahead ([`EventQueue::lane_ahead`]), which a heap cannot.
fn insert_sorted(q: &mut VecDeque<Entry>, e: Entry) {
    /// Places scanned back from the end before a binary search takes over.
    const SCAN_BACK: usize = 16;
    // Inserted last, `e` goes after every event at its time or before.
    let later = |x: &Entry| x.at > e.at;
    let n = q.len();
    let mut i = n;
    while i > 0 && n - i < SCAN_BACK && later(&q[i - 1]) {
        i -= 1;
    }
    if i > 0 && n - i == SCAN_BACK && later(&q[i - 1]) {
        i = q.partition_point(|x| !later(x));
    }
    q.insert(i, e);
}

impl EventQueue {
    /// No events; `lanes` lanes for [`EventQueue::push_in_lane`].
    pub fn new(lanes: usize) -> Self {
        EventQueue {
            rest: Calendar::new(),
            lanes: vec![VecDeque::new(); OWN_LANES + lanes],
            delay_lanes: Vec::new(),
            fixed_lanes: OWN_LANES + lanes,
            next_seq: 0,
            popped: 0,
            popped_lane: REST,
        }
    }
    /// Schedule `ev` at `at` in `lane`, whose events the caller pushes in time order.
    pub fn push_in_lane(&mut self, lane: usize, at: Instant, ev: Event) {
        self.push_fifo(OWN_LANES + lane, at, ev);
    }
    fn push_fifo(&mut self, lane: usize, at: Instant, ev: Event) {
        let e = Entry { at, seq: self.next_seq, ev };
        self.next_seq += 1;
        let q = &mut self.lanes[lane];
        debug_assert!(q.back().is_none_or(|b| b.at <= at), "lane {lane} out of order");
        q.push_back(e);
    }
    /// Schedule `ev` at `at`, which is `delay` ns after the time of the latest event
    /// popped. Events pushed with the same delay are in time order (time never goes
    /// back), so the first [`MAX_DELAY_LANES`] delays get a FIFO lane each; others go
    /// to the sorted lane of other packet events. The caller picks the delays worth a
    /// lane (an access link's ACK and full-sized segment: most packets cross one), not
    /// the first ones that come.
    pub fn push_after(&mut self, delay: u64, at: Instant, ev: Event) {
        let lane = match self.delay_lanes.iter().position(|&d| d == delay) {
            Some(i) => i,
            None if self.delay_lanes.len() < MAX_DELAY_LANES => {
                self.delay_lanes.push(delay);
                self.lanes.push(VecDeque::new());
                self.delay_lanes.len() - 1
            }
            None => return self.push(at, ev),
        };
        self.push_fifo(self.fixed_lanes + lane, at, ev);
    }
    /// Schedule `ev` at `at`.
    pub fn push(&mut self, at: Instant, ev: Event) {
        let e = Entry { at, seq: self.next_seq, ev };
        self.next_seq += 1;
        match ev {
            Event::PortFree { .. } => insert_sorted(&mut self.lanes[PORT_FREE], e),
            Event::Arrive { .. } => insert_sorted(&mut self.lanes[OTHER_PACKETS], e),
            _ => self.rest.push(e),
        }
    }
    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Instant, Event)> {
        // Entry's order is reversed: the earliest is the greatest.
        let mut head = REST;
        let mut top = self.rest.peek();
        for (i, q) in self.lanes.iter().enumerate() {
            if let Some(e) = q.front() {
                if top.is_none_or(|t| e > t) {
                    (head, top) = (i, Some(e));
                }
            }
        }
        self.popped_lane = head;
        let e = match head {
            REST => self.rest.pop(),
            i => self.lanes[i].pop_front(),
        }?;
        self.popped += 1;
        Some((e.at, e.ev))
    }
    /// When the latest event came from a lane or the calendar's current bucket: the
    /// event `k` places behind it there, which runs soon (both are read in order), for
    /// the caller to prefetch what it will touch. Each lane event is seen at each `k`
    /// once; a bucket's events may be seen again when one is inserted ahead of them.
    pub fn lane_ahead(&self, k: usize) -> Option<Event> {
        match self.popped_lane {
            REST => self.rest.ahead(k).map(|e| e.ev),
            i => self.lanes[i].get(k).map(|e| e.ev),
        }
    }
    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_insertion_order() {
        let mut q = EventQueue::new(1);
        let t = |n| Instant::from_nanos(n);
        q.push_in_lane(0, t(1), Event::Arrive { packet: 9 });
        q.push(t(5), Event::TraceSample);
        q.push(t(1), Event::AppWrite { pair: 1 });
        q.push(t(5), Event::PortFree { port: 7 });
        q.push_in_lane(0, t(5), Event::Arrive { packet: 8 });
        q.push(t(5), Event::AppWrite { pair: 2 });
        q.push(t(1), Event::Arrive { packet: 4 });
        q.push(t(1), Event::AppWrite { pair: 3 });
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            got,
            vec![
                (t(1), Event::Arrive { packet: 9 }),
                (t(1), Event::AppWrite { pair: 1 }),
                (t(1), Event::Arrive { packet: 4 }),
                (t(1), Event::AppWrite { pair: 3 }),
                (t(5), Event::TraceSample),
                (t(5), Event::PortFree { port: 7 }),
                (t(5), Event::Arrive { packet: 8 }),
                (t(5), Event::AppWrite { pair: 2 }),
            ]
        );
        assert_eq!(q.processed(), 8);
    }

    /// What a scheduled event is in the model run below.
    #[derive(Clone, Debug)]
    enum Op {
        /// A write or timer `d` ns after now (calendar: same bucket, window, far).
        Rest(u64),
        /// An arrival `d` ns after now through a delay lane (or the sorted lane, past
        /// the lanes' number).
        After(u64),
        /// A port finishing `d` ns after now (its sorted lane).
        Packet(u64),
        /// An arrival `d` ns after now (the sorted lane of other packet events).
        Arrival(u64),
        /// Pop one.
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            // Same bucket, within the window, and beyond it (backed-off timers).
            (0u64..2_000_000).prop_map(Op::Rest),
            (0u64..8_000_000_000).prop_map(Op::Rest),
            (0u64..20_000_000_000).prop_map(Op::Rest),
            // Eight delays for six lanes: some go to the sorted lane.
            (0u64..8).prop_map(|k| Op::After(1_000 + 250_000 * k)),
            (0u64..3_000_000).prop_map(Op::Packet),
            // Mostly near the latest (short scans back), sometimes far before them
            // (the binary search).
            (1_000_000u64..1_200_000).prop_map(Op::Arrival),
            (0u64..1_200_000).prop_map(Op::Arrival),
            Just(Op::Pop),
            Just(Op::Pop),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever holds them, events come out in (time, insertion) order, the order
        /// of a plain sort; the calendar's buckets, its far heap and the lanes (FIFO
        /// or sorted on insertion) only change where they wait.
        #[test]
        fn pops_in_time_then_insertion_order(ops in proptest::collection::vec(op(), 1..400)) {
            let mut q = EventQueue::new(0);
            let mut model: Vec<(u64, u64)> = Vec::new(); // (at, id) pending
            let (mut now, mut id) = (0u64, 0u64);
            let pop_both = |q: &mut EventQueue, model: &mut Vec<(u64, u64)>, now: &mut u64| {
                let want = model.iter().copied().min();
                let got = q.pop().map(|(at, ev)| match ev {
                    Event::AppWrite { pair } | Event::Arrive { packet: pair } | Event::PortFree { port: pair } => (at.as_nanos(), pair as u64),
                    other => panic!("unexpected {other:?}"),
                });
                prop_assert_eq!(got, want);
                if let Some(w) = want {
                    model.retain(|&m| m != w);
                    *now = w.0;
                }
                Ok(())
            };
            for o in ops {
                let at = |d: u64| Instant::from_nanos(now + d);
                match o {
                    Op::Rest(d) => q.push(at(d), Event::AppWrite { pair: id as u32 }),
                    Op::After(d) => q.push_after(d, at(d), Event::Arrive { packet: id as u32 }),
                    Op::Packet(d) => q.push(at(d), Event::PortFree { port: id as u32 }),
                    Op::Arrival(d) => q.push(at(d), Event::Arrive { packet: id as u32 }),
                    Op::Pop => {
                        pop_both(&mut q, &mut model, &mut now)?;
                        continue;
                    }
                }
                let d = match o { Op::Rest(d) | Op::After(d) | Op::Packet(d) | Op::Arrival(d) => d, Op::Pop => unreachable!() };
                model.push((now + d, id));
                id += 1;
            }
            while !model.is_empty() {
                pop_both(&mut q, &mut model, &mut now)?;
            }
            prop_assert_eq!(q.pop(), None);
        }
    }
}

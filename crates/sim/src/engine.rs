//! The event queue: events ordered by (time, insertion number), so events at the same
//! instant run in the order they were scheduled and every run is deterministic.
//! Events are small (24 bytes); packets live in a slab elsewhere.
//!
//! Two 4-ary heaps and a few FIFO lanes hold them: packet events (arrivals, a port
//! finishing a packet), the rest (writes, timers), and lanes of events their caller
//! schedules in time order (arrivals over one WAN link, which never reorders); the
//! earliest of the heads goes first. At 10⁴ connections ~2·10⁴ events are pending,
//! three quarters of them a source's next write or a timer, far ahead, and most of the
//! rest packets crossing the WAN; but seven events in eight are packet events, and
//! popping those from a heap of only the access links' arrivals saves levels that each
//! miss the L1 cache.

use std::cmp::Ordering;
use std::collections::VecDeque;
use dary_heap::QuaternaryHeap as BinaryHeap;
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
    /// Arrive and PortFree events.
    packets: BinaryHeap<Entry>,
    /// The others.
    rest: BinaryHeap<Entry>,
    /// Events pushed with [`EventQueue::push_in_lane`], each lane in time order.
    lanes: Vec<VecDeque<Entry>>,
    next_seq: u64,
    popped: u64,
}

/// Where the earliest event waits.
#[derive(Clone, Copy)]
enum Head {
    Packets,
    Rest,
    Lane(usize),
}

impl EventQueue {
    /// No events; `lanes` lanes for [`EventQueue::push_in_lane`].
    pub fn new(lanes: usize) -> Self {
        EventQueue {
            packets: BinaryHeap::new(),
            rest: BinaryHeap::new(),
            lanes: vec![VecDeque::new(); lanes],
            next_seq: 0,
            popped: 0,
        }
    }
    /// Schedule `ev` at `at` in `lane`, whose events the caller pushes in time order.
    pub fn push_in_lane(&mut self, lane: usize, at: Instant, ev: Event) {
        let e = Entry { at, seq: self.next_seq, ev };
        self.next_seq += 1;
        let q = &mut self.lanes[lane];
        debug_assert!(q.back().is_none_or(|b| b.at <= at), "lane {lane} out of order");
        q.push_back(e);
    }
    /// Schedule `ev` at `at`.
    pub fn push(&mut self, at: Instant, ev: Event) {
        let e = Entry { at, seq: self.next_seq, ev };
        self.next_seq += 1;
        match ev {
            Event::Arrive { .. } | Event::PortFree { .. } => self.packets.push(e),
            _ => self.rest.push(e),
        }
    }
    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Instant, Event)> {
        // Entry's order is reversed: the earliest is the greatest.
        let mut head = Head::Rest;
        let mut top = self.rest.peek();
        let candidates = [(Head::Packets, self.packets.peek())].into_iter();
        let lanes = self.lanes.iter().enumerate().map(|(i, q)| (Head::Lane(i), q.front()));
        for (h, e) in candidates.chain(lanes) {
            if let Some(e) = e {
                if top.is_none_or(|t| e > t) {
                    (head, top) = (h, Some(e));
                }
            }
        }
        let e = match head {
            Head::Packets => self.packets.pop(),
            Head::Rest => self.rest.pop(),
            Head::Lane(i) => self.lanes[i].pop_front(),
        }?;
        self.popped += 1;
        Some((e.at, e.ev))
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
}

//! The event queue: a binary heap ordered by (time, insertion number), so events at
//! the same instant run in the order they were scheduled and every run is
//! deterministic. Events are small (24 bytes); packets live in a slab elsewhere.

use std::cmp::Ordering;
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
#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    next_seq: u64,
    popped: u64,
}

impl EventQueue {
    /// Schedule `ev` at `at`.
    pub fn push(&mut self, at: Instant, ev: Event) {
        self.heap.push(Entry { at, seq: self.next_seq, ev });
        self.next_seq += 1;
    }
    /// The earliest event.
    pub fn pop(&mut self) -> Option<(Instant, Event)> {
        let e = self.heap.pop()?;
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
        let mut q = EventQueue::default();
        let t = |n| Instant::from_nanos(n);
        q.push(t(5), Event::TraceSample);
        q.push(t(1), Event::AppWrite { pair: 1 });
        q.push(t(5), Event::AppWrite { pair: 2 });
        q.push(t(1), Event::AppWrite { pair: 3 });
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            got,
            vec![
                (t(1), Event::AppWrite { pair: 1 }),
                (t(1), Event::AppWrite { pair: 3 }),
                (t(5), Event::TraceSample),
                (t(5), Event::AppWrite { pair: 2 }),
            ]
        );
        assert_eq!(q.processed(), 4);
    }
}

//! The packet the disciplines' unit tests queue: an id, a wire length and a flow.

use super::QueueItem;

/// (id, len, flow)
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct F(pub u32, pub u32, pub u64);

impl QueueItem for F {
    fn wire_len(&self) -> u32 {
        self.1
    }
    fn flow(&self) -> u64 {
        self.2
    }
}

/// An ECN test packet: (id, len, flow, ECN-capable, marked CE).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct E(pub u32, pub u32, pub u64, pub bool, pub bool);

impl QueueItem for E {
    fn wire_len(&self) -> u32 {
        self.1
    }
    fn flow(&self) -> u64 {
        self.2
    }
    fn ecn_capable(&self) -> bool {
        self.3
    }
    fn mark_ce(&mut self) {
        self.4 = true;
    }
}

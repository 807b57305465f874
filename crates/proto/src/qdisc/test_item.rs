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

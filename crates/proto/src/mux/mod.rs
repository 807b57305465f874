//! Thin-stream multiplexing over trunk TCP connections (Carlmar 2011, docs/sources.md).
//!
//! Sans-IO pieces shared by the tunnel daemons (`crates/mux`) and the simulator:
//! - [`frame`]: the trunk wire format (typed header, `encode`/`decode`, bounded decoder);
//! - [`sched`]: thin-first / bulk round-robin scheduler and the thin-stream rate meter;
//! - [`session`]: streams with credit-based flow control, per-lane replay buffers and
//!   the resume handshake, driven by `handle_*(now)` / `poll_*()`;
//! - [`stats`]: counters and delay histograms;
//! - [`adapt`]: lane measurements (ack RTT, delivery rate) behind adaptive lanes, the
//!   bulk-in-flight limit and the shedding estimate.

pub mod adapt;
pub mod frame;
pub mod sched;
pub mod session;
pub mod stats;

pub use frame::{DecodeError, Frame, FrameDecoder, FrameType, Header, Hello, ResetCode, StreamId};
pub use sched::{Class, Scheduler};
pub use session::{Config, Event, LaneRule, OpenError, Role, Session, StreamError};

#[cfg(test)]
mod adapt_tests;
#[cfg(test)]
mod tests;

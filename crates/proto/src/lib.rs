//! thinwan sans-IO core: time, TCP endpoint, queue disciplines, traffic models.
//!
//! Nothing here reads a clock, touches a socket or needs an async runtime: every input
//! carries `now`, every output is a value (ARCHITECTURE.md, STYLE.md §1).
#![warn(missing_docs)]

pub mod capture;
pub mod clients;
pub mod drops;
pub mod gaprule;
pub mod link;
pub mod mux;
pub mod qdisc;
pub mod qds;
pub mod tcp;
pub mod time;
pub mod traffic;

pub use drops::DropReason;
pub use time::{Duration, Instant};

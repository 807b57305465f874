//! thinwan real I/O: the TUN link emulator, the traffic pump and sink on real sockets,
//! and the files they write (event log, pcap).
//!
//! The emulator is a thin real-clock shell around sans-IO pieces (STYLE.md §1): a
//! [`link::Direction`] takes `now` and packets, and says when it wants to be called
//! again; it drives the very queue disciplines the simulator uses
//! (`thinwan_proto::qdisc`). Only [`clock`], [`tun`] and [`emulator`] touch the OS.
#![warn(missing_docs)]

pub mod clock;
pub mod config;
pub mod emulator;
pub mod evlog;
pub mod link;
pub mod packet;
pub mod pairs;
pub mod pcap;
pub mod pump;
pub mod qds;
pub mod tun;
pub mod wire;

//! A sans-IO TCP endpoint pair for the simulator: a data sender (the server side) and a
//! receiver (the client side) of one persistent connection.
//!
//! Reading list, in the order the code follows them:
//! - RFC 5681 — slow start, congestion avoidance, fast retransmit/recovery, restart after idle
//! - RFC 9438 — CUBIC (module `cc`, with Reno and Linux's packet-counted windows)
//! - RFC 6582 — NewReno's partial-ACK handling
//! - RFC 2018 — SACK option (receiver); RFC 6675 — SACK-based loss recovery (sender)
//! - RFC 6298 — the retransmission timer; Karn's rule
//! - RFC 1122 §4.2.3.2 — delayed ACK; RFC 896 — Nagle
//! - RFC 2883 — duplicate SACK (DSACK); RFC 8985 — RACK-TLP; RFC 6937 — PRR
//! - RFC 3168 §6.1 — ECN: ECT on data, CE → ECE until CWR, one reduction per window
//!   (`Mechanisms::ecn`; negotiation in the handshake is assumed: both ends alike)
//!
//! Modelling choices (documented in docs/model.md):
//! - Sequence numbers are unwrapped 64-bit byte offsets starting at 0 (a 300-s run never
//!   wraps 2^64); there is no handshake or FIN: the connection is already established.
//! - Data flows one way (server → client); segments carry lengths, not payload bytes.
//! - Calls follow quinn-proto's order: feed inputs with `handle_*(now, …)`, then drain
//!   `poll_transmit(now)` until `None`, then ask `poll_timeout()` when to call
//!   `handle_timeout(now)` next.

pub mod cc;
mod prr;
mod rack;
pub mod receiver;
pub mod rtt;
pub mod scoreboard;
pub mod sender;

pub use cc::{Algorithm as CongestionControl, CwndUnit};
pub use rack::{ReoWnd, TlpTimer};
pub use receiver::{
    idle_rto_after_handshake, Receiver, ReceiverConfig, ReceiverOptions, ReceiverShared, MAX_QUICKACKS,
};
pub use rtt::{Estimator, LinuxRtt, Rfc6298, RtoConfig, RttEstimator};
pub use sender::{Mechanisms, Recovery, RtoRestart, Sender, SenderConfig, SenderStats};

/// At most four SACK blocks fit in the 40-byte option space without timestamps
/// (RFC 2018 §3: 2 + 8·n ≤ 40).
pub const MAX_SACK_BLOCKS: usize = 4;

/// A data segment (sender → receiver).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSegment {
    /// First byte.
    pub seq: u64,
    /// Payload bytes (> 0).
    pub len: u32,
    /// Some byte of it was sent before.
    pub retransmission: bool,
    /// Its ECN bits (all clear without [`Mechanisms::ecn`]).
    pub ecn: SegmentEcn,
}

/// The ECN bits a data segment carries: the IP header's ECN field (RFC 3168 §5) and
/// the TCP header's CWR flag (§6.1). Three flags fit the padding of [`DataSegment`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentEcn {
    /// ECT(0): the sender is ECN-capable (§6.1.2; never on retransmissions, §6.1.5).
    pub ect: bool,
    /// CE: a router marked it instead of dropping it (§5; set by the network).
    pub ce: bool,
    /// CWR: the sender reduced its window after an ECE (§6.1.2).
    pub cwr: bool,
}

impl DataSegment {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.seq + self.len as u64
    }
}

/// SACK blocks of one ACK, most recent first (RFC 2018 §4).
///
/// Unused slots are empty ranges, so there is no length field: an ACK is then 80
/// bytes, and the simulator's packet, which holds one, fits two cache lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlocks {
    blocks: [(u64, u64); MAX_SACK_BLOCKS],
}

impl SackBlocks {
    /// Blocks from a slice (extra ones, and empty ones, which say nothing, are ignored).
    pub fn from_slice(b: &[(u64, u64)]) -> Self {
        let mut s = SackBlocks::default();
        for (slot, &r) in s.blocks.iter_mut().zip(b.iter().filter(|&&(start, end)| start < end)) {
            *slot = r;
        }
        s
    }
    /// The blocks.
    pub fn as_slice(&self) -> &[(u64, u64)] {
        let len = self.blocks.iter().take_while(|&&(start, end)| start < end).count();
        &self.blocks[..len]
    }
}

/// An acknowledgement (receiver → sender).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// Cumulative ACK: next byte expected.
    pub ack: u64,
    /// Advertised receive window, bytes.
    pub wnd: u64,
    /// SACK blocks (empty when SACK is off).
    pub sack: SackBlocks,
}

#[cfg(test)]
mod ecn_tests;
#[cfg(test)]
mod linux_rack_tests;
#[cfg(test)]
mod linux_tlp_tests;
#[cfg(test)]
mod mechanism_tests;
#[cfg(test)]
mod transcript_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sack_blocks_keep_the_first_four_non_empty_ones() {
        let b = SackBlocks::from_slice(&[(10, 20), (5, 5), (30, 40), (50, 60), (70, 80), (90, 95)]);
        assert_eq!(b.as_slice(), &[(10, 20), (30, 40), (50, 60), (70, 80)]);
        assert_eq!(SackBlocks::from_slice(&[(1, 2)]).as_slice(), &[(1, 2)]);
        assert!(SackBlocks::default().as_slice().is_empty());
    }
}

//! Why a packet was dropped: one enum for every substrate (ns-3's `QueueDisc::Stats`
//! keeps a reason per drop in the same spirit).
//!
//! The simulator's records name reasons with [`DropReason::as_str`] (docs/records.md,
//! `drops_by_reason`); the emulator's binary event log stores [`DropReason::code`]
//! (docs/lab.md; `thinwan.lab.events.REASONS` reads it back, 0 meaning "not a drop").
//! Neither the names nor the codes may change: files on disk carry them.

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// The queue was over its limits: the arriving packet (tail drop), or for FQ-CoDel
    /// the head of the fattest flow queue (RFC 8290 §4.1).
    Overflow = 1,
    /// A queued packet was pushed out to make room for a more important arrival.
    PushedOut = 2,
    /// I.i.d. random loss on the link ([`crate::link::LossModel::Bernoulli`]).
    Loss = 3,
    /// Gilbert–Elliott burst loss on the link ([`crate::link::LossModel::GilbertElliott`]).
    BurstLoss = 4,
    /// Not a well-formed IP packet (the emulator's input).
    Malformed = 5,
    /// Still inside the emulator when it stopped.
    Shutdown = 6,
    /// The emulator's output device refused it.
    WriteError = 7,
    /// CoDel dropped it at the head of its queue: the queue's sojourn time stayed above
    /// `target` for an `interval` (RFC 8289 §5; FQ-CoDel, RFC 8290).
    Codel = 8,
}

impl DropReason {
    /// Every reason, in code order.
    pub const ALL: [DropReason; 8] = [
        DropReason::Overflow,
        DropReason::PushedOut,
        DropReason::Loss,
        DropReason::BurstLoss,
        DropReason::Malformed,
        DropReason::Shutdown,
        DropReason::WriteError,
        DropReason::Codel,
    ];

    /// Stable name used in records and files.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Overflow => "overflow",
            DropReason::PushedOut => "pushed_out",
            DropReason::Loss => "loss",
            DropReason::BurstLoss => "burst_loss",
            DropReason::Malformed => "malformed",
            DropReason::Shutdown => "shutdown",
            DropReason::WriteError => "write_error",
            DropReason::Codel => "codel",
        }
    }

    /// Stable numeric code of the emulator's event log (0 is kept for "not a drop").
    pub fn code(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_are_the_files_contract() {
        // python/thinwan/lab/events.py: REASONS = {0: "", 1: "overflow", ...}.
        let want =
            ["overflow", "pushed_out", "loss", "burst_loss", "malformed", "shutdown", "write_error", "codel"];
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!((r.code() as usize, r.as_str()), (i + 1, want[i]));
        }
    }
}

//! Measurement builds (bench/diag, BENCHMARKS.md), compiled in by cargo features of this
//! crate and forwarded by crates/py, so that they build and are linted with the code:
//!
//! - `diag-event-cycles`: TSC cycles per event kind and per section of a write and of an
//!   ACK at the server, printed to stderr at the end of a run
//!   (`python -m bench.diag.event_cycles` reads them). RDTSC itself costs ~10 %.
//! - `diag-footprint-pad`: [`PAD_LINES`] more cache lines per connection, read and
//!   written by every ACK and every transmission at the server and prefetched with the
//!   rest of the server end: what a larger per-pair state costs
//!   (`python -m bench.diag.cache_misses` against a plain build).
//!
//! Without the features every hook below is empty and inlined away: the plain build
//! computes and measures nothing more (records_digest is the same either way).

use super::*;

/// Where the cycles of a write and of an ACK at the server go (bench/diag/event_cycles.py's
/// `SECTIONS`, in this order).
#[derive(Clone, Copy)]
#[allow(dead_code)] // only the event-cycles build reads the numbers
pub(super) enum Section {
    WriteSource = 0,
    WriteTcp = 1,
    WriteTransmit = 2,
    PollTransmit = 3,
    MarkRows = 4,
    Send = 5,
    ArmTimer = 6,
    Trace = 7,
    AckHandle = 8,
    AckCursor = 9,
    AckBlocked = 10,
    AckTransmit = 11,
    SendSlab = 12,
    SendReadPort = 13,
    SendIdlePort = 14,
    SendQueue = 15,
}

impl World {
    /// The kind of event `ev` as bench/diag/event_cycles.py's `KINDS` numbers them:
    /// arrivals split by direction and hop.
    #[cfg_attr(not(feature = "diag-event-cycles"), allow(dead_code))]
    pub(super) fn diag_event_kind(&self, ev: &Event) -> usize {
        match *ev {
            Event::AppWrite { .. } => 0,
            Event::PortFree { .. } => 1,
            Event::Arrive { packet } => {
                let pk = &self.slab[packet as usize];
                2 + (matches!(pk.body, Body::Ack(_)) as usize) * 3 + (pk.hop as usize).min(2)
            }
            Event::SenderTimer { .. } => 8,
            Event::ReceiverTimer { .. } => 9,
            Event::TraceSample | Event::MuxTimer { .. } | Event::QdsTick => 10,
        }
    }
}

#[cfg(feature = "diag-event-cycles")]
mod cycles {
    use std::cell::RefCell;

    #[cfg(not(target_arch = "x86_64"))]
    compile_error!("the diag-event-cycles feature reads the x86-64 time-stamp counter");

    thread_local! {
        /// Cycles per [`super::Section`].
        static SEC: RefCell<[u64; 16]> = const { RefCell::new([0; 16]) };
        /// Per event kind. Rows: 1 the handler and the next pop, 2 the prefetches and
        /// this accounting, 3 counts (row 0 unused, kept for the reader's format).
        static DBG: RefCell<[[u64; 12]; 4]> = const { RefCell::new([[0; 12]; 4]) };
    }

    fn tsc() -> u64 {
        // SAFETY: RDTSC reads a counter; it has no memory effects.
        unsafe { std::arch::x86_64::_rdtsc() }
    }

    /// A time-stamp counter reading.
    pub struct Stamp(u64);

    impl Stamp {
        pub fn now() -> Stamp {
            Stamp(tsc())
        }
        /// Add the cycles since the stamp to `section`; restart the stamp.
        pub fn section(&mut self, section: super::Section) {
            let n = tsc();
            SEC.with(|d| d.borrow_mut()[section as usize] += n - self.0);
            self.0 = n;
        }
    }

    /// The run loop's accounting.
    pub struct Cycles {
        prev: u64,
        popped: u64,
        last_kind: usize,
    }

    impl Cycles {
        pub fn start() -> Cycles {
            Cycles { prev: tsc(), popped: 0, last_kind: 11 }
        }
        /// An event was popped: the cycles since the last dispatch go to its kind.
        pub fn popped(&mut self) {
            self.popped = tsc();
            let (k, d) = (self.last_kind, self.popped - self.prev);
            DBG.with(|r| r.borrow_mut()[1][k] += d);
        }
        /// About to handle an event of kind `kind()`.
        pub fn dispatching(&mut self, kind: impl FnOnce() -> usize) {
            let k = kind();
            let t = tsc();
            DBG.with(|r| {
                let mut r = r.borrow_mut();
                r[2][k] += t - self.popped;
                r[3][k] += 1;
            });
            self.last_kind = k;
            self.prev = t;
        }
        /// Print the counters to stderr (`sec [..]`, `row0 [..]` … `row3 [..]`).
        pub fn dump(&self) {
            SEC.with(|d| eprintln!("sec {:?}", d.borrow()));
            DBG.with(|d| {
                for (i, r) in d.borrow().iter().enumerate() {
                    eprintln!("row{i} {r:?}");
                }
            });
        }
    }
}

#[cfg(not(feature = "diag-event-cycles"))]
mod cycles {
    /// Nothing to read.
    pub struct Stamp;

    impl Stamp {
        #[inline(always)]
        pub fn now() -> Stamp {
            Stamp
        }
        #[inline(always)]
        pub fn section(&mut self, _: super::Section) {}
    }

    /// Nothing to count.
    pub struct Cycles;

    impl Cycles {
        #[inline(always)]
        pub fn start() -> Cycles {
            Cycles
        }
        #[inline(always)]
        pub fn popped(&mut self) {}
        #[inline(always)]
        pub fn dispatching(&mut self, _: impl FnOnce() -> usize) {}
        #[inline(always)]
        pub fn dump(&self) {}
    }
}

pub(super) use cycles::{Cycles, Stamp};

/// Cache lines of [`Pad`] with `diag-footprint-pad`.
#[cfg(feature = "diag-footprint-pad")]
pub const PAD_LINES: usize = 6;
/// Cache lines of [`Pad`] with `diag-footprint-pad` (none without).
#[cfg(not(feature = "diag-footprint-pad"))]
pub const PAD_LINES: usize = 0;

/// Per-connection padding of the footprint measurement: [`PAD_LINES`] cache lines
/// (a zero-sized field without the feature).
#[cfg_attr(feature = "diag-footprint-pad", repr(align(64)))]
pub(super) struct Pad([u64; 8 * PAD_LINES]);

impl Pad {
    pub(super) const NEW: Pad = Pad([0; 8 * PAD_LINES]);
}

#[cfg(feature = "diag-footprint-pad")]
impl Pad {
    /// Read and write every line, each depending on the one before.
    #[inline(always)]
    pub(super) fn touch(&mut self) {
        for line in 1..PAD_LINES {
            self.0[8 * line] = self.0[8 * line].wrapping_add(self.0[8 * (line - 1)] | 1);
        }
    }

    /// Prefetch every line (with the rest of the server end).
    #[inline(always)]
    pub(super) fn prefetch(&self) {
        super::prefetch::prefetch_all(self);
    }
}

#[cfg(not(feature = "diag-footprint-pad"))]
impl Pad {
    /// No lines to touch.
    #[inline(always)]
    pub(super) fn touch(&mut self) {}

    /// No lines to prefetch.
    #[inline(always)]
    pub(super) fn prefetch(&self) {}
}

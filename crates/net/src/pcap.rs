//! pcap capture of one side of the emulator: the real packets it forwards, with ns
//! timestamps in wall-clock time, written with the writer the simulator's captures use
//! (`thinwan_capture::write::PcapOut`, LINKTYPE_RAW).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use thinwan_capture::write::PcapOut;
use thinwan_proto::Instant;

/// Bytes kept of each packet (all of it up to 64 KiB).
pub const SNAPLEN: u32 = 65535;

/// A pcap file for one side.
pub struct PcapSide {
    w: PcapOut<BufWriter<File>>,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    offset_ns: i128,
}

impl PcapSide {
    /// Create `path`; `offset_ns` converts our monotonic instants to wall time.
    pub fn create(path: &Path, offset_ns: i128) -> io::Result<Self> {
        let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        Ok(PcapSide { w: PcapOut::new(file, SNAPLEN)?, offset_ns })
    }

    /// Append a packet seen at `t`.
    pub fn write(&mut self, t: Instant, data: &[u8]) -> io::Result<()> {
        let wall = (t.as_nanos() as i128 + self.offset_ns).clamp(0, u64::MAX as i128) as u64;
        self.w.write(wall, data, data.len() as u32)
    }

    /// Flush to disk.
    pub fn finish(self) -> io::Result<()> {
        self.w.into_inner().flush()
    }
}

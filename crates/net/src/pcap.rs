//! pcap capture of one side of the emulator (LINKTYPE_RAW: bare IP packets, ns
//! timestamps in wall-clock time), written with the `pcap-file` crate.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;
use std::time::Duration as StdDuration;
use thinwan_proto::Instant;

/// Bytes kept of each packet (all of it up to 64 KiB).
pub const SNAPLEN: u32 = 65535;

/// A pcap file for one side.
pub struct PcapSide {
    w: PcapWriter<BufWriter<File>>,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    offset_ns: i128,
}

impl PcapSide {
    /// Create `path`; `offset_ns` converts our monotonic instants to wall time.
    pub fn create(path: &Path, offset_ns: i128) -> io::Result<Self> {
        let header = PcapHeader {
            datalink: DataLink::RAW,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::native(),
            snaplen: SNAPLEN,
            ..PcapHeader::default()
        };
        let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let w = PcapWriter::with_header(file, header).map_err(to_io)?;
        Ok(PcapSide { w, offset_ns })
    }

    /// Append a packet seen at `t`.
    pub fn write(&mut self, t: Instant, data: &[u8]) -> io::Result<()> {
        let wall = (t.as_nanos() as i128 + self.offset_ns).max(0) as u128;
        let ts = StdDuration::new((wall / 1_000_000_000) as u64, (wall % 1_000_000_000) as u32);
        let keep = &data[..data.len().min(SNAPLEN as usize)];
        self.w.write_packet(&PcapPacket::new(ts, data.len() as u32, keep)).map_err(to_io)?;
        Ok(())
    }

    /// Flush to disk.
    pub fn finish(self) -> io::Result<()> {
        use std::io::Write;
        self.w.into_writer().flush()
    }
}

fn to_io(e: pcap_file::PcapError) -> io::Error {
    io::Error::other(e.to_string())
}

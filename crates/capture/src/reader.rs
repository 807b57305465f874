//! pcap and pcapng files → one [`RawPacket`] at a time, with timestamps in nanoseconds.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::path::Path;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, PcapError, TsResolution};

use crate::Error;

/// One captured packet, borrowed from the reader's buffer.
#[derive(Debug)]
pub struct RawPacket<'a> {
    /// 1-based number in the file (the number Wireshark shows).
    pub number: u64,
    /// Timestamp, nanoseconds since the Unix epoch.
    pub t_ns: u64,
    /// The link type of its interface.
    pub linktype: DataLink,
    /// The captured bytes (possibly cut at the snap length).
    pub data: &'a [u8],
}

/// Which format the file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// libpcap (microsecond or nanosecond timestamps, either byte order).
    Pcap,
    /// pcapng.
    PcapNg,
}

/// Call `each` for every packet of the capture at `path`, in file order; returns the
/// file's format and how many packets it held. Errors name the file and, for damaged
/// files, the packet where reading stopped.
pub fn for_each_packet(path: &Path, mut each: impl FnMut(&RawPacket<'_>)) -> Result<(Format, u64), Error> {
    try_for_each_packet(path, |p| {
        each(p);
        ControlFlow::Continue(())
    })
}

/// [`for_each_packet`] that stops early when `each` says `Break` (`thinwan analyze
/// --max-packets`); the count returned is of the packets handed to `each`.
pub fn try_for_each_packet(
    path: &Path,
    mut each: impl FnMut(&RawPacket<'_>) -> ControlFlow<()>,
) -> Result<(Format, u64), Error> {
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(io)?;
    let mut magic = [0u8; 4];
    let got = read_up_to(&mut file, &mut magic).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    if got < 4 {
        return Err(Error::NotACapture { path: path.to_path_buf(), magic: magic[..got].to_vec() });
    }
    let bad = |number: u64, e: PcapError| Error::from_pcap(path, number, e);
    match u32::from_le_bytes(magic) {
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => {
            let mut r = PcapReader::new(file).map_err(|e| bad(0, e))?;
            let header = r.header();
            let linktype = header.datalink;
            let frac_ns = match header.ts_resolution {
                TsResolution::MicroSecond => 1_000,
                TsResolution::NanoSecond => 1,
            };
            let mut number = 0;
            // Raw packets: pcap-file's checked `next_packet` rejects every packet longer
            // than the snap length (orig_len > snaplen), which is what `tcpdump -s` writes.
            while let Some(p) = r.next_raw_packet() {
                number += 1;
                let p = p.map_err(|e| bad(number, e))?;
                let t_ns = u64::from(p.ts_sec)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(u64::from(p.ts_frac) * frac_ns);
                if each(&RawPacket { number, t_ns, linktype, data: &p.data }).is_break() {
                    break;
                }
            }
            Ok((Format::Pcap, number))
        }
        0x0a0d_0d0a => {
            let mut r = PcapNgReader::new(file).map_err(|e| bad(0, e))?;
            // Our own table of the section's interfaces: (link type, ns per tick, offset).
            let mut ifaces: Vec<(DataLink, Scale, u64)> = Vec::new();
            let mut number = 0;
            while let Some(block) = r.next_block() {
                let block = block.map_err(|e| bad(number + 1, e))?;
                match block {
                    Block::SectionHeader(_) => ifaces.clear(),
                    Block::InterfaceDescription(idb) => {
                        let mut scale = Scale::from_tsresol(6);
                        let mut offset_s = 0;
                        for o in &idb.options {
                            match o {
                                InterfaceDescriptionOption::IfTsResol(r) => scale = Scale::from_tsresol(*r),
                                InterfaceDescriptionOption::IfTsOffset(s) => offset_s = *s,
                                _ => {}
                            }
                        }
                        ifaces.push((idb.linktype, scale, offset_s.saturating_mul(1_000_000_000)));
                    }
                    Block::EnhancedPacket(epb) => {
                        number += 1;
                        let Some(&(linktype, scale, offset)) = ifaces.get(epb.interface_id as usize) else {
                            return Err(Error::Malformed {
                                path: path.to_path_buf(),
                                packet: number,
                                what: format!(
                                    "refers to interface {} which the file does not describe",
                                    epb.interface_id
                                ),
                            });
                        };
                        // pcap-file hands the raw tick count over as nanoseconds.
                        let ticks = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                        let t_ns = scale.to_nanos(ticks).saturating_add(offset);
                        if each(&RawPacket { number, t_ns, linktype, data: &epb.data }).is_break() {
                            break;
                        }
                    }
                    Block::SimplePacket(spb) => {
                        number += 1;
                        // No timestamp in a simple packet block: a capture of them cannot be timed.
                        let _ = spb;
                        return Err(Error::Malformed {
                            path: path.to_path_buf(),
                            packet: number,
                            what: "is a simple packet block, which has no timestamp".into(),
                        });
                    }
                    _ => {}
                }
            }
            Ok((Format::PcapNg, number))
        }
        _ => Err(Error::NotACapture { path: path.to_path_buf(), magic: magic.to_vec() }),
    }
}

/// A pcapng interface's timestamp unit.
#[derive(Clone, Copy, Debug)]
enum Scale {
    /// 10^-k s with k ≤ 9: multiply by 10^(9-k).
    Mul(u64),
    /// 10^-k s with k > 9, or 2^-k s: nanoseconds = ticks × 10^9 / div.
    Div(u128),
}

impl Scale {
    /// `if_tsresol` (pcapng §4.2): high bit clear = 10^-k s, set = 2^-k s.
    fn from_tsresol(r: u8) -> Self {
        let k = u32::from(r & 0x7f);
        if r & 0x80 != 0 {
            Scale::Div(1u128.checked_shl(k.min(127)).unwrap_or(u128::MAX))
        } else if k <= 9 {
            Scale::Mul(10u64.pow(9 - k))
        } else {
            Scale::Div(10u128.checked_pow(k).unwrap_or(u128::MAX))
        }
    }

    fn to_nanos(self, ticks: u64) -> u64 {
        match self {
            Scale::Mul(m) => ticks.saturating_mul(m),
            Scale::Div(d) => u64::try_from(u128::from(ticks) * 1_000_000_000 / d.max(1)).unwrap_or(u64::MAX),
        }
    }
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

//! Remote-display captures → operations, without decoding the protocol (issue 16).
//!
//! [`analyze`] reads a pcap or pcapng file ([`reader`]), keeps the TCP packets of one
//! display server ([`Filter`]), gives each its direction and feeds them to proto's
//! sans-IO [`Splitter`](thinwan_proto::capture::Splitter), which cuts the traffic into
//! operations at idle gaps (see `thinwan_proto::capture` for the definitions of an
//! operation, its latency and its round trips). One pass, nothing kept per packet unless
//! asked for ([`Options::keep_packets`]).
//!
//! [`ip`] also turns a parsed packet into what the QDS flow monitor reads
//! ([`ip::qds_segment`]: flow key, direction, sequence numbers, flags, timestamps), for
//! the middlebox daemon's captured frames and for captures; [`qds::features`] replays a
//! capture through the monitor and returns the classifier's input per (flow, period).

#![warn(missing_docs)]

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use pcap_file::PcapError;
use thinwan_proto::capture::{Dir, Operation, Packet, Splitter, Unattributed};
use thinwan_proto::{Duration, Instant};

pub mod filter;
pub mod flows;
pub mod ip;
pub mod qds;
pub mod reader;
pub mod write;

pub use ip::{qds_segment, FlowKey, ServerSide};
pub use reader::{for_each_packet, try_for_each_packet, Format, RawPacket};

/// Which packets are the display traffic, and which way each went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The TCP port of the display connection's listening end.
    pub port: u16,
    /// Its address (None: any address with that port).
    pub addr: Option<IpAddr>,
    /// False (the usual case): the listening end is the remote-display server, so packets
    /// from it are display updates. True: the listening end is on the *user's* side —
    /// plain X11, whose X server (the display) listens and the application connects to it
    /// — so packets *to* it are the display updates.
    pub port_at_client: bool,
}

impl Filter {
    /// The direction of `p`, or None if it is not display traffic.
    #[inline]
    pub fn direction(&self, p: &ip::TcpPacket) -> Option<Dir> {
        let at = |a: IpAddr| match self.addr {
            Some(x) => x == a,
            None => true,
        };
        let (from_listener, to_listener) =
            (p.sport == self.port && at(p.src), p.dport == self.port && at(p.dst));
        let from = if from_listener {
            true
        } else if to_listener {
            false
        } else {
            return None;
        };
        Some(if from != self.port_at_client { Dir::ServerToClient } else { Dir::ClientToServer })
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            Some(a) => write!(f, "TCP {a} port {}", self.port)?,
            None => write!(f, "TCP port {}", self.port)?,
        }
        if self.port_at_client {
            write!(f, " (listening on the user's side)")?;
        }
        Ok(())
    }
}

/// How to analyse.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Silence (no payload either way) that ends an operation.
    pub idle_gap: Duration,
    /// Also return every display packet ([`Analysis::packets`]).
    pub keep_packets: bool,
    /// Fail when the whole capture is one burst (no idle gap at all).
    pub require_gap: bool,
}

/// The display packets, one entry per packet (columns).
#[derive(Clone, Debug, Default)]
pub struct PacketColumns {
    /// Packet number in the file.
    pub number: Vec<u64>,
    /// Timestamp, ns since the epoch.
    pub t_ns: Vec<i64>,
    /// True: server→client.
    pub s2c: Vec<bool>,
    /// IP length.
    pub ip_len: Vec<u32>,
    /// TCP payload not captured before in that direction (0 for a retransmission).
    pub payload: Vec<u32>,
    /// Index of the operation it was counted in (-1: before the first).
    pub op: Vec<i64>,
}

/// The result of [`analyze`].
#[derive(Clone, Debug)]
pub struct Analysis {
    /// Operations in capture order.
    pub ops: Vec<Operation>,
    /// The display packets, if asked for.
    pub packets: Option<PacketColumns>,
    /// pcap or pcapng.
    pub format: Format,
    /// Packets in the file.
    pub packets_total: u64,
    /// TCP packets in the file.
    pub packets_tcp: u64,
    /// Display packets (matched by the filter).
    pub packets_matched: u64,
    /// Display packets before the first burst.
    pub unattributed: Unattributed,
}

/// Why a capture could not be analysed. Every message names the file.
#[derive(Debug)]
pub enum Error {
    /// The file cannot be read.
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Not a pcap or pcapng file.
    NotACapture {
        /// The file.
        path: PathBuf,
        /// Its first bytes.
        magic: Vec<u8>,
    },
    /// The file ends in the middle of a packet (a capture still being written, or cut).
    Truncated {
        /// The file.
        path: PathBuf,
        /// The packet that is cut (1-based; 0: the file header).
        packet: u64,
    },
    /// A packet or block is malformed.
    Malformed {
        /// The file.
        path: PathBuf,
        /// Its number (1-based; 0: the file header).
        packet: u64,
        /// What is wrong.
        what: String,
    },
    /// A packet's link type is not one the reader knows.
    LinkType {
        /// The file.
        path: PathBuf,
        /// The first packet with it.
        packet: u64,
        /// The link type.
        linktype: String,
    },
    /// No packet matched the filter.
    NoPackets {
        /// The file.
        path: PathBuf,
        /// The filter.
        filter: Filter,
        /// Packets in the file.
        total: u64,
        /// The busiest TCP ports of the file: (port, packets).
        busiest: Vec<(u16, u64)>,
    },
    /// The whole capture is one burst: no idle gap to split at.
    NoIdleGap {
        /// The file.
        path: PathBuf,
        /// The gap looked for.
        idle_gap: Duration,
        /// First and last payload packet of the one burst.
        first: u64,
        /// Last payload packet.
        last: u64,
        /// How long the burst lasted.
        span: Duration,
    },
}

impl Error {
    fn from_pcap(path: &Path, packet: u64, e: PcapError) -> Self {
        let path = path.to_path_buf();
        match e {
            PcapError::IncompleteBuffer => Error::Truncated { path, packet },
            PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                Error::Truncated { path, packet }
            }
            PcapError::IoError(source) => Error::Io { path, source },
            other => Error::Malformed { path, packet, what: other.to_string() },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::NotACapture { path, magic } => write!(
                f,
                "{}: not a pcap or pcapng file (it starts with {})",
                path.display(),
                if magic.is_empty() { "nothing: it is empty".to_string() } else { format!("{magic:02x?}") }
            ),
            Error::Truncated { path, packet: 0 } => write!(f, "{}: truncated in the file header", path.display()),
            Error::Truncated { path, packet } => write!(
                f,
                "{}: truncated: the file ends inside packet {packet} (a capture still being written, or cut short)",
                path.display()
            ),
            Error::Malformed { path, packet: 0, what } => write!(f, "{}: bad file header: {what}", path.display()),
            Error::Malformed { path, packet, what } => write!(f, "{}: packet {packet}: {what}", path.display()),
            Error::LinkType { path, packet, linktype } => write!(
                f,
                "{}: packet {packet}: link type {linktype} is not supported (raw IP, Ethernet, Linux cooked v1/v2 and BSD loopback are)",
                path.display()
            ),
            Error::NoPackets { path, filter, total, busiest } => {
                write!(f, "{}: no packet of {filter} among its {total} packets", path.display())?;
                if !busiest.is_empty() {
                    let ports: Vec<String> = busiest.iter().map(|(p, n)| format!("{p} ({n} packets)")).collect();
                    write!(f, "; its busiest TCP ports: {}", ports.join(", "))?;
                }
                Ok(())
            }
            Error::NoIdleGap { path, idle_gap, first, last, span } => write!(
                f,
                "{}: no idle gap of {} ms or more: packets {first}–{last} form one burst of {:.1} ms, so there is nothing \
                 to split into operations (a smaller idle gap, or a capture with pauses between inputs)",
                path.display(),
                idle_gap.as_nanos() as f64 / 1e6,
                span.as_nanos() as f64 / 1e6
            ),
        }
    }
}

impl std::error::Error for Error {}

/// A TCP connection, one direction: source, source port, destination, destination port.
type Conn = (IpAddr, u16, IpAddr, u16);

/// One direction of a connection as [`Duplicates`] tracks it.
struct Received {
    /// The sequence number of the front (the highest segment start seen) …
    front_seq: u32,
    /// … and its offset from the first segment's.
    front_off: i64,
    /// Byte ranges seen, as offsets from the first segment's start (sorted, disjoint).
    ranges: Vec<(i64, i64)>,
}

impl Received {
    /// The offset of sequence number `seq`: sequence numbers wrap every 4 GiB (RFC 9293
    /// §3.4), so a segment's place is taken as the nearest to the front (within ±2 GiB,
    /// far beyond any window, RFC 7323 §2.2), which keeps offsets exact on a connection
    /// that carries more than 4 GiB.
    fn offset(&mut self, seq: u32) -> i64 {
        let off = self.front_off + i64::from(seq.wrapping_sub(self.front_seq) as i32);
        if off > self.front_off {
            (self.front_seq, self.front_off) = (seq, off);
        }
        off
    }
}

/// Segments that carry no byte not already in a segment of the same direction captured
/// before: retransmissions, which the splitter counts but never lets start a burst, an
/// input or an update's end (`thinwan_proto::capture`, "Retransmissions", owns that rule;
/// this finds them, from TCP sequence numbers).
///
/// Server→client: the capture is made at the client, behind the emulated WAN, so every
/// server→client segment in it reached the client; a duplicate is a retransmission after
/// a lost ACK (Wireshark calls it spurious): over `wan-loss-1` an update's last ACK lost
/// on the way back made the server resend its last segment one RTO (~270 ms) after the
/// client had drawn it. A retransmission that fills a hole (the first copy was lost on
/// the WAN, later bytes arrived) brings new bytes and is update data, hence the set of
/// received ranges rather than the highest sequence number.
///
/// Client→server: captured before the WAN, so the first copy of every byte is in the
/// capture at the time the client sent it, and a retransmission is never when the client
/// gave anything: over `wan-loss-1` a lost update request resent after the pause opened
/// the next click's window 66.6 ms before the click left (docs/desktop.md).
#[derive(Default)]
struct Duplicates {
    /// Per connection (source, source port, destination, destination port): the byte
    /// ranges seen.
    conns: std::collections::HashMap<Conn, Received>,
}

impl Duplicates {
    fn is_duplicate(&mut self, p: &ip::TcpPacket) -> bool {
        if p.payload == 0 {
            return false;
        }
        let conn = self.conns.entry((p.src, p.sport, p.dst, p.dport)).or_insert(Received {
            front_seq: p.seq,
            front_off: 0,
            ranges: Vec::new(),
        });
        let start = conn.offset(p.seq);
        let end = start + i64::from(p.payload);
        let ranges = &mut conn.ranges;
        if ranges.iter().any(|&(a, b)| a <= start && end <= b) {
            return true;
        }
        // Insert and merge what now touches or overlaps.
        let (mut lo, mut hi) = (start, end);
        ranges.retain(|&(a, b)| {
            let apart = b < lo || a > hi;
            if !apart {
                lo = lo.min(a);
                hi = hi.max(b);
            }
            apart
        });
        let at = ranges.partition_point(|&(a, _)| a < lo);
        ranges.insert(at, (lo, hi));
        false
    }
}

/// Read the capture at `path` and split the display traffic selected by `filter` into
/// operations.
pub fn analyze(path: &Path, filter: Filter, opts: Options) -> Result<Analysis, Error> {
    let mut splitter = Splitter::new(opts.idle_gap);
    let mut ops = Vec::new();
    let mut packets = opts.keep_packets.then(PacketColumns::default);
    let mut port_counts = vec![0u32; 65536];
    let (mut tcp, mut matched) = (0u64, 0u64);
    let mut bad_link: Option<(u64, String)> = None;
    let mut dups = Duplicates::default();
    let (format, total) = for_each_packet(path, |raw| {
        let p = match ip::parse(raw.linktype, raw.data) {
            ip::Frame::Tcp(p) => p,
            ip::Frame::Other => return,
            ip::Frame::UnknownLink => {
                bad_link.get_or_insert_with(|| (raw.number, format!("{:?}", raw.linktype)));
                return;
            }
        };
        tcp += 1;
        let Some(dir) = filter.direction(&p) else {
            port_counts[usize::from(p.sport.min(p.dport))] += 1;
            return;
        };
        matched += 1;
        let resent = dups.is_duplicate(&p);
        let pkt = Packet {
            t: Instant::from_nanos(raw.t_ns),
            dir,
            ip_len: p.ip_len,
            payload: p.payload,
            resent,
            number: raw.number,
        };
        ops.extend(splitter.push(pkt));
        if let Some(cols) = packets.as_mut() {
            cols.number.push(raw.number);
            cols.t_ns.push(i64::try_from(raw.t_ns).unwrap_or(i64::MAX));
            cols.s2c.push(dir == Dir::ServerToClient);
            cols.ip_len.push(p.ip_len);
            // New bytes only: a retransmission's payload was in its first copy.
            cols.payload.push(if resent { 0 } else { p.payload });
            // The packet went into the current operation (the one not yet handed back).
            cols.op.push(splitter.bursts() as i64 - 1);
        }
    })?;
    ops.extend(splitter.finish());
    if matched == 0 {
        if let Some((packet, linktype)) = bad_link {
            return Err(Error::LinkType { path: path.to_path_buf(), packet, linktype });
        }
        let mut busiest: Vec<(u16, u64)> = port_counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(p, n)| (p as u16, u64::from(*n)))
            .collect();
        busiest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        busiest.truncate(3);
        return Err(Error::NoPackets { path: path.to_path_buf(), filter, total, busiest });
    }
    if opts.require_gap && ops.len() == 1 {
        let op = &ops[0];
        return Err(Error::NoIdleGap {
            path: path.to_path_buf(),
            idle_gap: opts.idle_gap,
            first: op.first_packet,
            last: op.last_packet,
            span: op.t_last.saturating_since(op.t_start),
        });
    }
    Ok(Analysis {
        ops,
        packets,
        format,
        packets_total: total,
        packets_tcp: tcp,
        packets_matched: matched,
        unattributed: splitter.unattributed(),
    })
}

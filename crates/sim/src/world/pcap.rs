//! `[records] pcap`: a capture of the simulated packets at one point of the network, in
//! the pcap format tshark and `thinwan analyze` read (docs/records.md, "pcap").
//!
//! Each packet is written as the IPv4/TCP packet it stands for, payload zero-filled and
//! left out of the record (`incl_len` = the headers, `orig_len` = the whole packet), with
//! the simulated sequence and acknowledgment numbers, SACK blocks and window, and its
//! simulated time as the timestamp (time zero = 1970-01-01 00:00:00). The encoder and
//! the writer are `thinwan_capture::write`'s, the ones the lab's link emulator uses.
//!
//! Kept apart from the rest of the world behind one `Option` test per packet: a run
//! without a capture pays nothing else.
//!
//! Addresses (one per host) and ports, so a capture's flows map back to connections:
//!
//! | host | address |
//! |---|---|
//! | server of pair i (dumbbell, mux direct, a stream shed from the tunnel), server i mod S (middlebox) | 10.64.0.0 + i + 1 |
//! | client of pair i | 10.128.0.0 + i + 1 |
//! | the tunnel's core host / edge proxy (mux mode) | 10.0.0.1 / 10.0.0.2 |
//!
//! The data sender's port is [`SERVER_PORT`]; the receiver's is `10000 + conn` (mod
//! 55536), so the two connections of a pair with separate connections differ.

use std::net::Ipv4Addr;

use super::{Body, Packet, ROLE_LAST_HOP, ROLE_TRUNK, ROLE_TRUNK_REV};
use crate::config::{Config, PcapPoint, TopologyKind};
use crate::records::PcapFile;
use thinwan_capture::write::{flags, PcapOut, TcpHeaders, MAX_HEADER_LEN, MAX_SACK_BLOCKS};
use thinwan_proto::Instant;

/// The data sender's TCP port (VNC's): `thinwan analyze --server-port 5900`.
pub const SERVER_PORT: u16 = 5900;
/// The receivers' ports start here.
const CLIENT_PORT_BASE: u16 = 10_000;
/// The snap length in the file header. Records keep the headers only, but strict readers
/// (pcap-file's checked reader) refuse a record whose `orig_len` exceeds the header's
/// snap length, so it says "whole packets" as `tcpdump -s 0` does.
const SNAPLEN: u32 = 65_535;

/// Where in the network a packet is when the simulator offers it to the capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Seen {
    /// Handed by TCP to its host's NIC.
    Sent,
    /// Delivered to its endpoint after the last hop.
    Arrived,
    /// Starting onto a WAN link (the bottleneck, either direction).
    OnWan,
}

/// The capture being written.
pub(super) struct PcapTap {
    point: PcapPoint,
    /// Per connection: captured (the `pcap_conns` filter).
    conns: Vec<bool>,
    /// Per connection: its data sender's and receiver's address and port.
    ends: Vec<End2>,
    /// Window-scale shift applied to every window field (RFC 7323 §2.3).
    wscale: u8,
    out: PcapOut<Vec<u8>>,
    buf: Vec<u8>,
    packets: u64,
}

/// A connection's two ends: (address, port) of the data sender, then of the receiver.
#[derive(Clone, Copy, Debug)]
struct End2 {
    sender: ([u8; 4], u16),
    receiver: ([u8; 4], u16),
}

impl PcapTap {
    /// The tap of a run, or None when `records.pcap = "none"`. `roles` and `pairs`: per
    /// connection, its role and its pair.
    pub(super) fn new(cfg: &Config, roles: &[(u8, u32)]) -> Result<Option<Box<Self>>, String> {
        let point = cfg.records.pcap;
        if point == PcapPoint::None {
            return Ok(None);
        }
        let mut conns = vec![cfg.records.pcap_conns.is_empty(); roles.len()];
        for &c in &cfg.records.pcap_conns {
            let slot = conns.get_mut(c as usize).ok_or_else(|| {
                format!("records.pcap_conns: connection {c} does not exist (this run has {})", roles.len())
            })?;
            *slot = true;
        }
        // Largest packet: IPv4 + TCP + options + a full segment must fit 65,535 bytes.
        if MAX_HEADER_LEN as u64 + cfg.tcp.mss as u64 > u16::MAX as u64 {
            return Err(format!("records.pcap: tcp.mss = {} is too large for an IPv4 packet", cfg.tcp.mss));
        }
        let t = &cfg.topology;
        let servers = match (t.kind, t.servers) {
            (TopologyKind::Middlebox, 0) => t.pairs.div_ceil(2),
            (TopologyKind::Middlebox, s) => s.min(t.pairs),
            _ => u32::MAX,
        };
        let ends = roles
            .iter()
            .enumerate()
            .map(|(c, &(role, pair))| {
                let client_port = CLIENT_PORT_BASE + (c % (u16::MAX - CLIENT_PORT_BASE) as usize) as u16;
                let (core, edge) = (host(0x0A00_0001), host(0x0A00_0002));
                let server = host(0x0A40_0001 + (pair % servers));
                let client = host(0x0A80_0001 + pair);
                let (from, to) = match role {
                    ROLE_TRUNK => (core, edge),
                    ROLE_TRUNK_REV => (edge, core),
                    ROLE_LAST_HOP => (edge, client),
                    _ => (server, client),
                };
                End2 { sender: (from, SERVER_PORT), receiver: (to, client_port) }
            })
            .collect();
        let rwnd = cfg.tcp.rwnd_bytes;
        let wscale = (0..14u8).find(|&s| rwnd >> s <= u16::MAX as u64).unwrap_or(14);
        let out = PcapOut::new(Vec::new(), SNAPLEN).map_err(|e| format!("records.pcap: {e}"))?;
        Ok(Some(Box::new(PcapTap { point, conns, ends, wscale, out, buf: Vec::new(), packets: 0 })))
    }

    /// Connection `conn` of pair `pair`, a tunnel's last hop until now, was shed
    /// (`mux.shed`): its data now leaves the pair's own server.
    pub(super) fn shed(&mut self, conn: u32, pair: u32) {
        self.ends[conn as usize].sender.0 = host(0x0A40_0001 + pair);
    }

    /// Offer packet `p` seen at `seen` at `now`: written if the point and the filter say so.
    pub(super) fn offer(&mut self, seen: Seen, p: &Packet, now: Instant) {
        let data = matches!(p.body, Body::Data(_));
        let wanted = match (self.point, seen) {
            (PcapPoint::Server, Seen::Sent) | (PcapPoint::Client, Seen::Arrived) => data,
            (PcapPoint::Server, Seen::Arrived) | (PcapPoint::Client, Seen::Sent) => !data,
            (PcapPoint::Bottleneck, Seen::OnWan) => true,
            _ => false,
        };
        if !wanted || !self.conns[p.conn as usize] {
            return;
        }
        let e = self.ends[p.conn as usize];
        let win = |w: u64| (w >> self.wscale).min(u16::MAX as u64) as u16;
        let mut h = TcpHeaders { flags: flags::ACK, ..Default::default() };
        match p.body {
            Body::Data(seg) => {
                ((h.src, h.sport), (h.dst, h.dport)) = (e.sender, e.receiver);
                // Stream offsets start at 0 and wrap at 2³² (RFC 9293 §3.4); the receiver
                // sends no data, so its side of the numbering stays 0.
                h.seq = seg.seq as u32;
                h.flags |= flags::PSH;
                h.window = win(u16::MAX as u64);
                h.payload_len = seg.len as u16; // ≤ MSS, checked in `new`
            }
            Body::Ack(a) => {
                ((h.src, h.sport), (h.dst, h.dport)) = (e.receiver, e.sender);
                h.ack = a.ack as u32;
                h.window = win(a.wnd);
                let blocks = if p.sacks { a.sack.as_slice() } else { &[] };
                for (slot, &(l, r)) in h.sack.iter_mut().zip(blocks.iter().take(MAX_SACK_BLOCKS)) {
                    *slot = (l as u32, r as u32);
                }
                h.sack_len = blocks.len().min(MAX_SACK_BLOCKS) as u8;
            }
        }
        self.buf.clear();
        let len = h.encode(&mut self.buf).expect("the MSS was checked against IPv4's limit");
        // Writing to a Vec cannot fail.
        self.out.write(now.as_nanos(), &self.buf, len as u32).expect("writing to memory");
        self.packets += 1;
    }

    /// The finished file.
    pub(super) fn finish(self) -> PcapFile {
        PcapFile { point: self.point.name(), packets: self.packets, bytes: self.out.into_inner() }
    }
}

fn host(a: u32) -> [u8; 4] {
    Ipv4Addr::from(a).octets()
}

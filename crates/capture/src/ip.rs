//! A captured frame → the TCP segment in it (addresses, ports, lengths, sequence
//! numbers, flags, timestamps), for every link type a capture of a remote desktop is
//! likely to have; and a parsed segment → what the QDS flow monitor reads of it
//! ([`qds_segment`]).

use std::net::{IpAddr, SocketAddr};

use etherparse::{IpNumber, Ipv4HeaderSlice, Ipv6HeaderSlice, TcpHeaderSlice, TcpOptionElement};
use pcap_file::DataLink;
use thinwan_proto::qds::monitor::{Segment, Toward};

/// The parts of a TCP/IP packet the analyser and the QDS monitor use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpPacket {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IP length as sent (from the IP header, so a snap length does not shorten it).
    pub ip_len: u32,
    /// TCP payload bytes as sent.
    pub payload: u32,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number (meaningful with `flags.ack`).
    pub ack: u32,
    /// The flags the monitor reads.
    pub flags: TcpFlags,
    /// TCP timestamps option (RFC 7323 §3): (TSval, TSecr).
    pub ts: Option<(u32, u32)>,
}

/// TCP flags (RFC 9293 §3.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpFlags {
    /// SYN.
    pub syn: bool,
    /// ACK.
    pub ack: bool,
    /// FIN.
    pub fin: bool,
    /// RST.
    pub rst: bool,
}

/// What a frame is, for the analyser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame {
    /// A TCP segment over IPv4 or IPv6.
    Tcp(TcpPacket),
    /// Something else (ARP, UDP, ICMP, a cut header…): not display traffic.
    Other,
    /// A link type this reader does not know.
    UnknownLink,
}

/// Parse `data` captured on a `linktype` interface.
pub fn parse(linktype: DataLink, data: &[u8]) -> Frame {
    let ip = match linktype {
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Some(data),
        DataLink::ETHERNET => ethernet(data),
        // BSD loopback: a 4-byte address family, then IP.
        DataLink::NULL | DataLink::LOOP => data.get(4..),
        // Linux cooked v1: 16-byte header, protocol at 14..16.
        DataLink::LINUX_SLL => ethertype_payload(data, 14, 16),
        // Linux cooked v2: 20-byte header, protocol at 0..2.
        DataLink::LINUX_SLL2 => ethertype_payload(data, 0, 20),
        _ => return Frame::UnknownLink,
    };
    ip.and_then(tcp).map_or(Frame::Other, Frame::Tcp)
}

fn ethernet(data: &[u8]) -> Option<&[u8]> {
    let mut off = 12;
    // Up to two VLAN tags (802.1Q, 802.1ad).
    for _ in 0..3 {
        let et = u16::from_be_bytes([*data.get(off)?, *data.get(off + 1)?]);
        match et {
            0x8100 | 0x88a8 => off += 4,
            0x0800 | 0x86dd => return data.get(off + 2..),
            _ => return None,
        }
    }
    None
}

fn ethertype_payload(data: &[u8], at: usize, header: usize) -> Option<&[u8]> {
    let et = u16::from_be_bytes([*data.get(at)?, *data.get(at + 1)?]);
    matches!(et, 0x0800 | 0x86dd).then(|| data.get(header..)).flatten()
}

fn tcp(ip: &[u8]) -> Option<TcpPacket> {
    match ip.first()? >> 4 {
        4 => {
            let h = Ipv4HeaderSlice::from_slice(ip).ok()?;
            // Fragments after the first carry no TCP header.
            if h.protocol() != IpNumber::TCP || h.fragments_offset().value() != 0 {
                return None;
            }
            let hl = usize::from(h.ihl()) * 4;
            let t = TcpHeaderSlice::from_slice(ip.get(hl..)?).ok()?;
            let ip_len = u32::from(h.total_len());
            let overhead = (hl + usize::from(t.data_offset()) * 4) as u32;
            Some(packet(h.source_addr().into(), h.destination_addr().into(), &t, ip_len, overhead))
        }
        6 => {
            let h = Ipv6HeaderSlice::from_slice(ip).ok()?;
            // Extension headers are not followed: remote-display traffic does not use them.
            if h.next_header() != IpNumber::TCP {
                return None;
            }
            let t = TcpHeaderSlice::from_slice(ip.get(40..)?).ok()?;
            let ip_len = 40 + u32::from(h.payload_length());
            let overhead = 40 + u32::from(t.data_offset()) * 4;
            Some(packet(h.source_addr().into(), h.destination_addr().into(), &t, ip_len, overhead))
        }
        _ => None,
    }
}

fn packet(src: IpAddr, dst: IpAddr, t: &TcpHeaderSlice, ip_len: u32, overhead: u32) -> TcpPacket {
    // A malformed option ends the walk: what came before it still counts.
    let ts = t.options_iterator().map_while(Result::ok).find_map(|o| match o {
        TcpOptionElement::Timestamp(v, e) => Some((v, e)),
        _ => None,
    });
    TcpPacket {
        src,
        dst,
        sport: t.source_port(),
        dport: t.destination_port(),
        ip_len,
        payload: ip_len.saturating_sub(overhead),
        seq: t.sequence_number(),
        ack: t.acknowledgment_number(),
        flags: TcpFlags { syn: t.syn(), ack: t.ack(), fin: t.fin(), rst: t.rst() },
        ts,
    }
}

/// A TCP connection as the QDS monitor keys it: the same key for both directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowKey {
    /// The client's address and port.
    pub client: SocketAddr,
    /// The server's address and port.
    pub server: SocketAddr,
}

/// Which end of a connection is the server (the side whose traffic crosses the
/// congested downlink toward the clients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerSide {
    /// The end using this TCP port (a remote-desktop server listens on it: 3389, 5900…).
    Port(u16),
    /// The end with this address.
    Addr(IpAddr),
    /// The end inside this network (address, prefix length): a server farm.
    Net(IpAddr, u8),
}

impl ServerSide {
    /// The way `p` crosses the middlebox: toward the client if it comes from the server
    /// end. None if neither end is a server. If both are (two servers talking), the
    /// source wins: the packet counts as leaving a server.
    pub fn toward(&self, p: &TcpPacket) -> Option<Toward> {
        let is_server = |addr: IpAddr, port: u16| match *self {
            ServerSide::Port(x) => port == x,
            ServerSide::Addr(a) => addr == a,
            ServerSide::Net(net, len) => in_net(addr, net, len),
        };
        if is_server(p.src, p.sport) {
            Some(Toward::Client)
        } else if is_server(p.dst, p.dport) {
            Some(Toward::Server)
        } else {
            None
        }
    }
}

pub(crate) fn in_net(addr: IpAddr, net: IpAddr, len: u8) -> bool {
    let (a, n, bits) = match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            (u128::from(u32::from(a)) << 96, u128::from(u32::from(n)) << 96, 32)
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
        _ => return false,
    };
    let len = u32::from(len).min(bits);
    let mask = if len == 0 { 0 } else { u128::MAX << (128 - len) };
    a & mask == n & mask
}

impl TcpPacket {
    /// What the QDS monitor reads of this packet.
    pub fn segment(&self) -> Segment {
        Segment {
            seq: self.seq,
            ack: self.ack,
            has_ack: self.flags.ack,
            syn: self.flags.syn,
            fin: self.flags.fin,
            rst: self.flags.rst,
            payload: self.payload,
            wire_len: self.ip_len,
            ts: self.ts,
        }
    }

    /// The flow key of this packet, given the way it crosses the middlebox.
    pub fn flow_key(&self, toward: Toward) -> FlowKey {
        let (src, dst) = (SocketAddr::new(self.src, self.sport), SocketAddr::new(self.dst, self.dport));
        match toward {
            Toward::Client => FlowKey { client: dst, server: src },
            Toward::Server => FlowKey { client: src, server: dst },
        }
    }
}

/// A parsed packet → (flow key, direction, monitor segment), the server end given by
/// `server`; None if neither end is a server. The daemon calls it on every AF_PACKET
/// frame, `thinwan analyze` on every packet of a capture.
pub fn qds_segment(p: &TcpPacket, server: ServerSide) -> Option<(FlowKey, Toward, Segment)> {
    let toward = server.toward(p)?;
    Some((p.flow_key(toward), toward, p.segment()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    const CLIENT: [u8; 4] = [10, 0, 0, 7];
    const SERVER: [u8; 4] = [192, 168, 1, 1];

    fn tcp_of(frame: &[u8], link: DataLink) -> TcpPacket {
        match parse(link, frame) {
            Frame::Tcp(t) => t,
            other => panic!("{other:?}"),
        }
    }

    /// A data segment from the server with timestamps, over Ethernet.
    fn from_server(payload: usize) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4(SERVER, CLIENT, 64)
            .tcp(3389, 50_000, 4_000_000_000, 65_535)
            .ack(77)
            .options(&[TcpOptionElement::Noop, TcpOptionElement::Noop, TcpOptionElement::Timestamp(123, 456)])
            .unwrap();
        let mut out = Vec::new();
        b.write(&mut out, &vec![0xab; payload]).unwrap();
        out
    }

    #[test]
    fn sequence_flags_and_timestamps_are_parsed() {
        let p = tcp_of(&from_server(100), DataLink::ETHERNET);
        // 20 (IPv4) + 20 + 12 (two NOPs and the 10-byte timestamps option) + 100.
        assert_eq!((p.ip_len, p.payload), (152, 100));
        assert_eq!((p.seq, p.ack, p.ts), (4_000_000_000, 77, Some((123, 456))));
        assert_eq!(p.flags, TcpFlags { ack: true, ..TcpFlags::default() });
    }

    #[test]
    fn a_syn_without_options_over_ipv6() {
        let b = PacketBuilder::ipv6([0xfe; 16], [0xfd; 16], 64).tcp(50_000, 5900, 9, 1000).syn();
        let mut out = Vec::new();
        b.write(&mut out, &[]).unwrap();
        let p = tcp_of(&out, DataLink::RAW);
        assert_eq!(p.flags, TcpFlags { syn: true, ..TcpFlags::default() });
        assert_eq!((p.seq, p.ts, p.payload, p.ip_len), (9, None, 0, 60));
        let (key, toward, seg) = qds_segment(&p, ServerSide::Port(5900)).unwrap();
        assert_eq!(toward, Toward::Server);
        assert_eq!(key.server.port(), 5900);
        assert!(seg.syn && !seg.has_ack && seg.ts.is_none());
    }

    #[test]
    fn both_directions_give_one_key() {
        let down = tcp_of(&from_server(1000), DataLink::ETHERNET);
        let b = PacketBuilder::ipv4(CLIENT, SERVER, 64).tcp(50_000, 3389, 77, 1000).ack(4_000_001_000).fin();
        let mut up = Vec::new();
        b.write(&mut up, &[]).unwrap();
        let up = tcp_of(&up, DataLink::RAW);
        for server in [
            ServerSide::Port(3389),
            ServerSide::Addr(IpAddr::from(SERVER)),
            ServerSide::Net(IpAddr::from([192, 168, 0, 0]), 16),
        ] {
            let (k1, t1, s1) = qds_segment(&down, server).unwrap();
            let (k2, t2, s2) = qds_segment(&up, server).unwrap();
            assert_eq!(k1, k2, "{server:?}");
            assert_eq!((t1, t2), (Toward::Client, Toward::Server));
            assert_eq!(k1.client, SocketAddr::new(IpAddr::from(CLIENT), 50_000));
            assert_eq!((s1.payload, s1.wire_len, s1.ts, s1.has_ack), (1000, 1052, Some((123, 456)), true));
            assert_eq!((s2.ack, s2.fin, s2.payload), (4_000_001_000, true, 0));
        }
        // Neither end a server.
        assert_eq!(qds_segment(&down, ServerSide::Port(22)), None);
        assert_eq!(qds_segment(&down, ServerSide::Net(IpAddr::from([192, 168, 2, 0]), 24)), None);
    }

    #[test]
    fn a_captured_handshake_times_both_halves_in_the_monitor() {
        use thinwan_proto::qds::monitor::{FlowMonitor, MonitorConfig};
        use thinwan_proto::{Duration, Instant};
        let frame = |b: etherparse::PacketBuilderStep<etherparse::TcpHeader>| {
            let mut out = Vec::new();
            b.write(&mut out, &[]).unwrap();
            tcp_of(&out, DataLink::RAW)
        };
        let syn = frame(PacketBuilder::ipv4(CLIENT, SERVER, 64).tcp(50_000, 3389, 100, 1000).syn());
        let synack =
            frame(PacketBuilder::ipv4(SERVER, CLIENT, 64).tcp(3389, 50_000, 900, 1000).syn().ack(101));
        let ack = frame(PacketBuilder::ipv4(CLIENT, SERVER, 64).tcp(50_000, 3389, 101, 1000).ack(901));
        let mut m = FlowMonitor::new(MonitorConfig::default());
        for (us, p) in [(0, syn), (6_500, synack), (27_000, ack)] {
            let (key, toward, seg) = qds_segment(&p, ServerSide::Port(3389)).unwrap();
            m.observe(Instant::from_nanos(us * 1000), key, toward, &seg);
        }
        let views = m.views(Instant::from_nanos(27_000_000));
        assert_eq!(views.len(), 1);
        let v = views[0].1;
        assert_eq!(v.server_half, Some(Duration::from_micros(6_500)));
        assert_eq!(v.client_half, Some(Duration::from_micros(20_500)));
    }

    #[test]
    fn network_prefixes() {
        let v4 = |a: [u8; 4]| IpAddr::from(a);
        assert!(in_net(v4([10, 1, 2, 3]), v4([10, 0, 0, 0]), 8));
        assert!(!in_net(v4([11, 1, 2, 3]), v4([10, 0, 0, 0]), 8));
        assert!(in_net(v4([11, 1, 2, 3]), v4([10, 0, 0, 0]), 0), "/0 is everything of the family");
        assert!(in_net(v4([10, 1, 2, 3]), v4([10, 1, 2, 3]), 40), "a prefix beyond 32 is the host");
        assert!(!in_net(IpAddr::from([0u16; 8]), v4([0, 0, 0, 0]), 0), "families never match");
    }
}

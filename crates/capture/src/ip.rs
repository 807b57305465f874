//! A captured frame → the TCP segment in it (addresses, ports, lengths), for every link
//! type a capture of a remote desktop is likely to have.

use std::net::IpAddr;

use etherparse::{IpNumber, Ipv4HeaderSlice, Ipv6HeaderSlice, TcpHeaderSlice};
use pcap_file::DataLink;

/// The parts of a TCP/IP packet the analyser uses.
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
            Some(TcpPacket {
                src: h.source_addr().into(),
                dst: h.destination_addr().into(),
                sport: t.source_port(),
                dport: t.destination_port(),
                ip_len,
                payload: ip_len.saturating_sub(overhead),
            })
        }
        6 => {
            let h = Ipv6HeaderSlice::from_slice(ip).ok()?;
            // Extension headers are not followed: remote-display traffic does not use them.
            if h.next_header() != IpNumber::TCP {
                return None;
            }
            let t = TcpHeaderSlice::from_slice(ip.get(40..)?).ok()?;
            let ip_len = 40 + u32::from(h.payload_length());
            Some(TcpPacket {
                src: h.source_addr().into(),
                dst: h.destination_addr().into(),
                sport: t.source_port(),
                dport: t.destination_port(),
                ip_len,
                payload: ip_len.saturating_sub(40 + u32::from(t.data_offset()) * 4),
            })
        }
        _ => None,
    }
}

//! What the event log needs from a packet's headers, read through `etherparse` views.
//!
//! A TUN device opened without packet information hands us bare IP packets. Anything
//! that is not a well-formed IPv4/IPv6 packet (a junk frame, a truncated header) is
//! [`Malformed`]: the emulator counts and drops it; parsing never panics.

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

/// TCP flag bits, in the order of the TCP header's flag byte (RFC 9293 §3.1, RFC 3168).
pub mod flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// URG.
    pub const URG: u8 = 0x20;
    /// ECE.
    pub const ECE: u8 = 0x40;
    /// CWR.
    pub const CWR: u8 = 0x80;
}

/// Header fields of one IP packet. IPv6 addresses are logged by their last 32 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// 4 or 6.
    pub version: u8,
    /// IP protocol number of the payload (6 = TCP, 17 = UDP, 1 = ICMP).
    pub proto: u8,
    /// Source address (IPv4, big-endian as an integer).
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// TCP/UDP source port (0 otherwise).
    pub sport: u16,
    /// TCP/UDP destination port.
    pub dport: u16,
    /// TCP sequence number.
    pub seq: u32,
    /// TCP acknowledgment number.
    pub ack: u32,
    /// TCP flags ([`flags`]).
    pub flags: u8,
    /// Transport payload bytes (TCP/UDP data).
    pub payload: u16,
    /// Bytes of the IP packet (header + payload).
    pub ip_len: u16,
    /// IPv4 TOS / IPv6 traffic-class byte: DSCP in the upper six bits, ECN in the
    /// lower two (RFC 2474, RFC 3168).
    pub tos: u8,
}

impl Summary {
    /// The Differentiated Services codepoint (upper six bits of [`Summary::tos`]).
    pub fn dscp(&self) -> u8 {
        self.tos >> 2
    }
}

/// Not a well-formed IP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// Parse the headers of a bare IP packet.
pub fn parse(data: &[u8]) -> Result<Summary, Malformed> {
    let sliced = SlicedPacket::from_ip(data).map_err(|_| Malformed)?;
    let mut s = Summary::default();
    match sliced.net.as_ref().ok_or(Malformed)? {
        NetSlice::Ipv4(ip) => {
            let h = ip.header();
            s.version = 4;
            s.proto = ip.payload_ip_number().0;
            s.src = u32::from_be_bytes(h.source());
            s.dst = u32::from_be_bytes(h.destination());
            s.ip_len = h.total_len();
            s.tos = (h.dcp().value() << 2) | h.ecn().value();
        }
        NetSlice::Ipv6(ip) => {
            let h = ip.header();
            s.version = 6;
            s.proto = ip.payload().ip_number.0;
            let (src, dst) = (h.source(), h.destination());
            s.src = u32::from_be_bytes([src[12], src[13], src[14], src[15]]);
            s.dst = u32::from_be_bytes([dst[12], dst[13], dst[14], dst[15]]);
            s.ip_len = h.payload_length().saturating_add(40);
            s.tos = h.traffic_class();
        }
    }
    match &sliced.transport {
        Some(TransportSlice::Tcp(t)) => {
            s.sport = t.source_port();
            s.dport = t.destination_port();
            s.seq = t.sequence_number();
            s.ack = t.acknowledgment_number();
            s.payload = t.payload().len() as u16;
            s.flags = tcp_flags(t);
        }
        Some(TransportSlice::Udp(u)) => {
            s.sport = u.source_port();
            s.dport = u.destination_port();
            s.payload = u.payload().len() as u16;
        }
        _ => {}
    }
    Ok(s)
}

fn tcp_flags(t: &etherparse::TcpSlice<'_>) -> u8 {
    use flags::*;
    let bits = [
        (t.fin(), FIN),
        (t.syn(), SYN),
        (t.rst(), RST),
        (t.psh(), PSH),
        (t.ack(), ACK),
        (t.urg(), URG),
        (t.ece(), ECE),
        (t.cwr(), CWR),
    ];
    bits.iter().filter(|(on, _)| *on).fold(0, |acc, (_, b)| acc | b)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use proptest::prelude::*;

    /// A TCP/IPv4 packet with `payload` bytes of data.
    pub(crate) fn tcp_packet(seq: u32, payload: usize) -> Vec<u8> {
        let b = PacketBuilder::ipv4([198, 18, 1, 1], [198, 18, 2, 1], 64)
            .tcp(40000, 5001, seq, 65535)
            .ack(7)
            .psh();
        let data = vec![0xabu8; payload];
        let mut out = Vec::with_capacity(b.size(payload));
        b.write(&mut out, &data).expect("writing to a Vec cannot fail");
        out
    }

    #[test]
    fn tcp_fields() {
        let p = tcp_packet(1000, 100);
        let s = parse(&p).unwrap();
        assert_eq!((s.version, s.proto, s.sport, s.dport, s.seq, s.ack), (4, 6, 40000, 5001, 1000, 7));
        assert_eq!(s.src, u32::from_be_bytes([198, 18, 1, 1]));
        assert_eq!((s.payload, s.ip_len as usize), (100, p.len()));
        assert_eq!(s.flags, flags::ACK | flags::PSH);
        assert_eq!(s.tos, 0);
        let mut marked = p.clone();
        marked[1] = 0x82; // DSCP CS4 + ECT(0)
        let m = parse(&marked).unwrap();
        assert_eq!((m.tos, m.dscp()), (0x82, 32));
    }

    #[test]
    fn junk_is_malformed() {
        assert_eq!(parse(&[]), Err(Malformed));
        assert_eq!(parse(b"hello world, not a packet"), Err(Malformed));
        let mut p = tcp_packet(1, 10);
        p.truncate(30); // IPv4 header + part of TCP
        assert_eq!(parse(&p), Err(Malformed));
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&data);
        }
        #[test]
        fn never_panics_on_ip_like(mut data in proptest::collection::vec(any::<u8>(), 20..200), v6 in any::<bool>()) {
            data[0] = if v6 { 0x60 } else { 0x45 };
            let _ = parse(&data);
        }
    }
}

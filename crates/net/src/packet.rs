//! What the event log needs from a packet's headers, read through `etherparse` views.
//!
//! A TUN device opened without packet information hands us bare IP packets. Anything
//! that is not a well-formed IPv4/IPv6 packet (a junk frame, a truncated header) is
//! [`Malformed`]: the emulator counts and drops it; parsing never panics.
//!
//! [`set_ce`] is the one write: a queue that marks instead of dropping (CoDel with ECN,
//! RFC 8290 §5.2.7) sets CE in place, fixing the IPv4 header checksum incrementally.

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
    /// The ECN codepoint ([`ecn`]; lower two bits of [`Summary::tos`], RFC 3168 §5).
    pub fn ecn(&self) -> u8 {
        self.tos & ecn::MASK
    }
    /// ECN-capable: ECT(0), ECT(1) or already CE. RFC 3168 §5: a router sets CE only in
    /// a packet whose ECN field says ECT (a CE packet stays CE), never in a Not-ECT one.
    pub fn ecn_capable(&self) -> bool {
        self.ecn() != ecn::NOT_ECT
    }
}

/// ECN codepoints of the IP header's ECN field (RFC 3168 §5, Figure 1).
pub mod ecn {
    /// Not ECN-Capable Transport.
    pub const NOT_ECT: u8 = 0b00;
    /// ECT(1).
    pub const ECT1: u8 = 0b01;
    /// ECT(0): what Linux's TCP sends with `net.ipv4.tcp_ecn` (RFC 3168 §6.1.1).
    pub const ECT0: u8 = 0b10;
    /// Congestion Experienced.
    pub const CE: u8 = 0b11;
    /// The field's two bits in the TOS / traffic-class byte.
    pub const MASK: u8 = 0b11;
}

/// Set CE in the bare IP packet `data`, in place (RFC 3168 §5: "setting the CE
/// codepoint"; the caller checks that the packet is ECN-capable), and return the new
/// IPv4 TOS / IPv6 traffic-class byte.
///
/// IPv4 (RFC 791 §3.1, RFC 3168 §5): the ECN field is the low two bits of byte 1 (TOS),
/// and the header checksum (bytes 10–11) covers it, so it is updated incrementally by
/// RFC 1624 eqn. 3 over the 16-bit word holding the TOS. IPv6 (RFC 8200 §3): the traffic
/// class straddles bytes 0–1 (its low four bits are byte 1's high nibble), so ECN is
/// `0x30` of byte 1; there is no header checksum. Neither TCP's nor UDP's checksum covers
/// the field (their pseudo-headers hold addresses, protocol and length only).
/// `Err(Malformed)` when `data` is too short for the version's fixed header.
pub fn set_ce(data: &mut [u8]) -> Result<u8, Malformed> {
    match data.first().map(|b| b >> 4) {
        Some(4) if data.len() >= 20 => {
            let old = u16::from_be_bytes([data[0], data[1]]);
            data[1] |= ecn::CE;
            let new = u16::from_be_bytes([data[0], data[1]]);
            let hc = u16::from_be_bytes([data[10], data[11]]);
            data[10..12].copy_from_slice(&checksum_update(hc, old, new).to_be_bytes());
            Ok(data[1])
        }
        Some(6) if data.len() >= 40 => {
            data[1] |= ecn::CE << 4;
            Ok((data[0] << 4) | (data[1] >> 4))
        }
        _ => Err(Malformed),
    }
}

/// RFC 1624 eqn. 3: the header checksum `hc` after a 16-bit word of the header changed
/// from `old` to `new`, HC' = ~(~HC + ~m + m'), in one's complement arithmetic (the
/// form of §3 that never yields the −0 of eqn. 2).
fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    // Two end-around carries: the first leaves at most 0x1_0001.
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
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

    /// RFC 1071's one's complement sum of `h`'s 16-bit words: 0xffff when `h` is an IPv4
    /// header whose checksum verifies.
    fn ones_sum(h: &[u8]) -> u16 {
        let mut sum: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    /// The IPv4 header checksum of `h` computed from scratch (RFC 791 §3.1: the
    /// complement of the sum with the checksum field taken as zero).
    fn checksum_from_scratch(h: &[u8]) -> u16 {
        let mut zeroed = h.to_vec();
        zeroed[10..12].fill(0);
        !ones_sum(&zeroed)
    }

    /// [`tcp_packet`] with TOS byte `tos` and its header checksum recomputed.
    pub(crate) fn tcp_packet_tos(seq: u32, payload: usize, tos: u8) -> Vec<u8> {
        let mut p = tcp_packet(seq, payload);
        p[1] = tos;
        let c = checksum_from_scratch(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn a_marked_ect0_tcp_packet_is_ce_and_its_checksum_verifies() {
        let mut p = tcp_packet_tos(1000, 100, 0x80 | ecn::ECT0); // DSCP CS4 + ECT(0)
        let before = parse(&p).unwrap();
        assert!(before.ecn_capable());
        assert_eq!(set_ce(&mut p), Ok(0x80 | ecn::CE));
        let after = parse(&p).unwrap();
        assert_eq!((after.ecn(), after.dscp()), (ecn::CE, 32), "RFC 3168 §5: CE set, DSCP kept");
        assert_eq!(after, Summary { tos: 0x80 | ecn::CE, ..before });
        // etherparse's own from-scratch checksum agrees with the incremental one.
        let h = etherparse::Ipv4HeaderSlice::from_slice(&p).unwrap();
        assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum(), "RFC 1624 eqn. 3");
        // Marking again changes nothing (CE stays CE).
        let once = p.clone();
        assert_eq!(set_ce(&mut p), Ok(0x80 | ecn::CE));
        assert_eq!(p, once);
    }

    #[test]
    fn a_not_ect_packet_is_not_ecn_capable() {
        assert!(!parse(&tcp_packet(1, 10)).unwrap().ecn_capable());
        assert!(!parse(&tcp_packet_tos(1, 10, 0x80)).unwrap().ecn_capable(), "a DSCP alone is not ECT");
        for e in [ecn::ECT1, ecn::ECT0, ecn::CE] {
            assert!(parse(&tcp_packet_tos(1, 10, e)).unwrap().ecn_capable(), "{e:#04b}");
        }
    }

    #[test]
    fn set_ce_refuses_what_is_not_an_ip_header() {
        assert_eq!(set_ce(&mut []), Err(Malformed));
        assert_eq!(set_ce(&mut [0x45; 19]), Err(Malformed));
        assert_eq!(set_ce(&mut [0x60; 39]), Err(Malformed));
        assert_eq!(set_ce(&mut [0x00; 60]), Err(Malformed));
    }

    /// An IPv6 TCP packet with traffic class `tc` and flow label `flow`.
    fn tcp6_packet(tc: u8, flow: u32, payload: usize) -> Vec<u8> {
        let b =
            PacketBuilder::ipv6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 198, 18, 1, 1], [0xfe; 16], 64)
                .tcp(40000, 5001, 1, 65535)
                .ack(7);
        let mut out = Vec::with_capacity(b.size(payload));
        b.write(&mut out, &vec![0xabu8; payload]).expect("writing to a Vec cannot fail");
        // RFC 8200 §3: version (4 bits) | traffic class (8) | flow label (20).
        let word = (6u32 << 28) | (u32::from(tc) << 20) | (flow & 0xf_ffff);
        out[..4].copy_from_slice(&word.to_be_bytes());
        out
    }

    proptest! {
        /// RFC 3168 §5 + RFC 1624 eqn. 3 on any IPv4 header (options included): CE set,
        /// DSCP and every other byte kept, and the header checksum equal to one computed
        /// from scratch.
        #[test]
        fn marking_ect_ipv4_sets_ce_and_the_checksum_verifies_from_scratch(
            ihl in 5usize..=15,
            bytes in proptest::collection::vec(any::<u8>(), 60),
            dscp in 0u8..64,
            ecn_field in prop_oneof![Just(ecn::ECT0), Just(ecn::ECT1), Just(ecn::CE)],
            payload in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let mut p = bytes[..4 * ihl].to_vec();
            p[0] = 0x40 | ihl as u8;
            p[1] = (dscp << 2) | ecn_field;
            let c = checksum_from_scratch(&p);
            p[10..12].copy_from_slice(&c.to_be_bytes());
            prop_assert_eq!(ones_sum(&p), 0xffff);
            p.extend_from_slice(&payload);
            let before = p.clone();
            prop_assert_eq!(set_ce(&mut p), Ok((dscp << 2) | ecn::CE));
            let h = &p[..4 * ihl];
            prop_assert_eq!(ones_sum(h), 0xffff, "the marked header verifies");
            prop_assert_eq!(u16::from_be_bytes([h[10], h[11]]), checksum_from_scratch(h));
            for (i, (a, b)) in before.iter().zip(&p).enumerate() {
                if ![1, 10, 11].contains(&i) {
                    prop_assert_eq!(a, b, "byte {} changed", i);
                }
            }
        }

        /// RFC 8200 §3 + RFC 3168 §5 on IPv6: ECT or CE is capable and marks to CE with
        /// the rest of the traffic class, the flow label and the packet unchanged;
        /// Not-ECT is not capable.
        #[test]
        fn ipv6_traffic_class_ecn(tc in any::<u8>(), flow in 0u32..(1 << 20), payload in 0usize..64) {
            let mut p = tcp6_packet(tc, flow, payload);
            let before = parse(&p).unwrap();
            prop_assert_eq!(before.tos, tc);
            prop_assert_eq!(before.ecn_capable(), tc & ecn::MASK != ecn::NOT_ECT);
            let original = p.clone();
            prop_assert_eq!(set_ce(&mut p), Ok(tc | ecn::CE));
            let after = parse(&p).unwrap();
            prop_assert_eq!(after, Summary { tos: tc | ecn::CE, ..before });
            let h = etherparse::Ipv6HeaderSlice::from_slice(&p).unwrap();
            prop_assert_eq!(h.flow_label().value(), flow);
            prop_assert_eq!(&p[2..], &original[2..]);
            prop_assert_eq!(p[0], original[0]);
        }

        #[test]
        fn set_ce_never_panics(mut data in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = set_ce(&mut data);
        }

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

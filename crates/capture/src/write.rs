//! Writing captures: IPv4/TCP headers of packets whose payload is not kept, and the
//! pcap file they go into (LINKTYPE_RAW: bare IP packets, nanosecond timestamps).
//!
//! The simulator writes its packets with both (`[records] pcap`, docs/records.md); the
//! lab's link emulator writes the real packets it forwards with [`PcapOut`] alone.
//!
//! A simulated packet has no payload bytes, only a length. [`TcpHeaders::encode`] writes
//! the headers of the packet it would be with that payload **zero-filled**: the IPv4 total
//! length counts the payload, and both checksums are those of the whole packet. Zero
//! bytes add nothing to the Internet checksum's one's-complement sum (RFC 1071 §1), so
//! the TCP checksum is computed over the pseudo-header (with the full TCP length, RFC
//! 9293 §3.1) and the header alone, and the payload need never be materialised. Records
//! then keep the headers only (`incl_len` < `orig_len`), as `tcpdump -s 128` does, so a
//! capture costs ~60 bytes a packet whatever its payload.

use std::io::{self, Write};
use std::time::Duration as StdDuration;

use etherparse::{checksum::Sum16BitWords, ip_number, Ipv4Header, TcpHeader, TcpOptionElement};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

/// Most SACK blocks one ACK carries: 4 fill the 40 option bytes with two NOPs (RFC 2018
/// §3: "a SACK option that specifies n blocks will have a length of 8*n+2 bytes, so the
/// 40 bytes available for TCP options can specify a maximum of 4 blocks").
pub const MAX_SACK_BLOCKS: usize = 4;

/// Longest header [`TcpHeaders::encode`] writes: IPv4 (20) + TCP (20) + 40 option bytes.
pub const MAX_HEADER_LEN: usize = 80;

/// TCP flag bits (RFC 9293 §3.1).
pub mod flags {
    /// PSH: the segment ends an application write.
    pub const PSH: u8 = 0x08;
    /// ACK: the acknowledgment number is valid.
    pub const ACK: u8 = 0x10;
}

/// The headers of one IPv4/TCP packet with `payload_len` zero bytes of payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpHeaders {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number (of the first payload byte).
    pub seq: u32,
    /// Acknowledgment number (meaningful with [`flags::ACK`]).
    pub ack: u32,
    /// Flag bits ([`flags`]).
    pub flags: u8,
    /// Window field, already scaled down by the sender's window-scale shift (RFC 7323 §2.3).
    pub window: u16,
    /// IPv4 identification.
    pub ip_id: u16,
    /// SACK blocks `[left, right)` in sequence space; at most [`MAX_SACK_BLOCKS`] are
    /// written, the first `sack_len` of them.
    pub sack: [(u32, u32); MAX_SACK_BLOCKS],
    /// How many of `sack` are present.
    pub sack_len: u8,
    /// Payload bytes on the wire (not written: zero-filled).
    pub payload_len: u16,
}

/// A packet too long for IPv4 (total length over 65,535 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong(pub usize);

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an IPv4 packet of {} bytes is longer than 65535", self.0)
    }
}

impl std::error::Error for TooLong {}

impl TcpHeaders {
    /// Append the IPv4 and TCP headers to `out` (checksums those of the zero-filled
    /// packet). Returns the whole packet's length, payload included: the record's
    /// `orig_len`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<usize, TooLong> {
        let mut tcp = TcpHeader::new(self.sport, self.dport, self.seq, self.window);
        tcp.acknowledgment_number = self.ack;
        tcp.ack = self.flags & flags::ACK != 0;
        tcp.psh = self.flags & flags::PSH != 0;
        let n = (self.sack_len as usize).min(MAX_SACK_BLOCKS);
        if n > 0 {
            // RFC 2018 §3: kind 5, length 8n + 2, then n (left, right) pairs of 32-bit
            // edges; two NOPs first align the edges on 32-bit words, as senders do.
            let b = &self.sack;
            let more = |i: usize| (i < n).then_some(b[i]);
            let sack = TcpOptionElement::SelectiveAcknowledgement(b[0], [more(1), more(2), more(3)]);
            let opts = [TcpOptionElement::Noop, TcpOptionElement::Noop, sack];
            tcp.set_options(&opts).expect("two NOPs and at most four SACK blocks fit 40 bytes");
        }
        let tcp_len = tcp.header_len() + self.payload_len as usize;
        let total = Ipv4Header::MIN_LEN + tcp_len;
        let too_long = || TooLong(total);
        let mut ip = Ipv4Header::new(
            tcp_len.try_into().map_err(|_| too_long())?,
            64,
            ip_number::TCP,
            self.src,
            self.dst,
        )
        .map_err(|_| too_long())?;
        ip.identification = self.ip_id;
        ip.header_checksum = ip.calc_header_checksum();
        out.extend_from_slice(&ip.to_bytes());
        let at = out.len();
        out.extend_from_slice(&tcp.to_bytes());
        // RFC 9293 §3.1: the sum over the pseudo-header (addresses, protocol, TCP length)
        // and the segment with the checksum field zero (as serialised); the zero payload
        // adds nothing. Patched in place: serialising the header once is cheaper.
        let sum = Sum16BitWords::new()
            .add_4bytes(self.src)
            .add_4bytes(self.dst)
            .add_2bytes([0, ip_number::TCP.0])
            .add_2bytes((tcp_len as u16).to_be_bytes())
            .add_slice(&out[at..]);
        // The sum is of native-endian words (etherparse), so its bytes go in native order.
        out[at + 16..at + 18].copy_from_slice(&sum.ones_complement().to_ne_bytes());
        Ok(total)
    }
}

/// A pcap file being written: LINKTYPE_RAW, nanosecond timestamps.
pub struct PcapOut<W: Write> {
    w: PcapWriter<W>,
    snaplen: u32,
}

impl<W: Write> PcapOut<W> {
    /// Start a file on `w` whose records keep at most `snaplen` bytes of each packet.
    pub fn new(w: W, snaplen: u32) -> io::Result<Self> {
        let header = PcapHeader {
            datalink: DataLink::RAW,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::native(),
            snaplen,
            ..PcapHeader::default()
        };
        let w = PcapWriter::with_header(w, header).map_err(to_io)?;
        Ok(PcapOut { w, snaplen })
    }

    /// Append a packet seen at `t_ns` (ns since the epoch: the simulator's time zero is
    /// 1970-01-01). `data` is what is kept of it (cut to the snap length), `orig_len` its
    /// length on the wire.
    pub fn write(&mut self, t_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let ts = StdDuration::new(t_ns / 1_000_000_000, (t_ns % 1_000_000_000) as u32);
        let keep = &data[..data.len().min(self.snaplen as usize)];
        self.w.write_packet(&PcapPacket::new(ts, orig_len.max(keep.len() as u32), keep)).map_err(to_io)?;
        Ok(())
    }

    /// The underlying writer (not flushed).
    pub fn into_inner(self) -> W {
        self.w.into_writer()
    }
}

fn to_io(e: pcap_file::PcapError) -> io::Error {
    io::Error::other(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{SlicedPacket, TransportSlice};

    fn headers(sack: &[(u32, u32)], payload_len: u16) -> TcpHeaders {
        let mut h = TcpHeaders {
            src: [10, 64, 0, 1],
            dst: [10, 128, 0, 1],
            sport: 5900,
            dport: 1024,
            seq: 4_000_000_000,
            ack: 77,
            flags: flags::ACK | flags::PSH,
            window: 32768,
            ip_id: 9,
            payload_len,
            ..Default::default()
        };
        h.sack[..sack.len()].copy_from_slice(sack);
        h.sack_len = sack.len() as u8;
        h
    }

    /// The packet with its payload zero-filled, as a receiver would see it.
    fn full_packet(h: &TcpHeaders) -> Vec<u8> {
        let mut p = Vec::new();
        let len = h.encode(&mut p).unwrap();
        p.resize(len, 0);
        p
    }

    /// One's-complement sum of 16-bit words (RFC 1071 §4.1), written out independently
    /// of etherparse.
    fn sum16(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn checksums_verify_over_the_zero_filled_packet() {
        for (sack, len) in
            [(&[][..], 0u16), (&[][..], 1448), (&[(100, 200), (300, 400)][..], 0), (&[][..], 137)]
        {
            let p = full_packet(&headers(sack, len));
            assert_eq!(
                p.len(),
                u16::from_be_bytes([p[2], p[3]]) as usize,
                "IPv4 total length counts the payload"
            );
            // RFC 791 §3.1: the header's words sum to all ones with its checksum in.
            assert_eq!(sum16(&p[..20]), 0xffff, "IPv4 header checksum");
            // RFC 9293 §3.1: pseudo-header + segment sum to all ones.
            let tcp_len = (p.len() - 20) as u16;
            let mut pseudo = Vec::from(&p[12..20]);
            pseudo.extend_from_slice(&[0, 6]);
            pseudo.extend_from_slice(&tcp_len.to_be_bytes());
            pseudo.extend_from_slice(&p[20..]);
            assert_eq!(sum16(&pseudo), 0xffff, "TCP checksum, sack={sack:?} len={len}");
        }
    }

    #[test]
    fn fields_parse_back() {
        let h = headers(&[(1000, 2448)], 536);
        let p = full_packet(&h);
        let s = SlicedPacket::from_ip(&p).unwrap();
        let Some(TransportSlice::Tcp(t)) = s.transport else { panic!("not TCP") };
        assert_eq!((t.source_port(), t.destination_port()), (5900, 1024));
        assert_eq!((t.sequence_number(), t.acknowledgment_number()), (4_000_000_000, 77));
        assert_eq!((t.window_size(), t.ack(), t.psh(), t.syn()), (32768, true, true, false));
        assert_eq!(t.payload().len(), 536);
    }

    #[test]
    fn sack_option_layout_follows_rfc_2018() {
        let blocks = [(1, 2), (0x0102_0304, 0x0506_0708), (10, 20), (30, 40)];
        for n in 1..=4 {
            let p = full_packet(&headers(&blocks[..n], 0));
            let doff = (p[20 + 12] >> 4) as usize * 4;
            // RFC 2018 §3: NOP NOP | kind 5 | length 8n + 2 | n pairs of 32-bit edges.
            assert_eq!(doff, 20 + 2 + 2 + 8 * n, "data offset with {n} blocks");
            let o = &p[40..20 + doff];
            assert_eq!((o[0], o[1], o[2], o[3] as usize), (1, 1, 5, 8 * n + 2));
            for (i, &(l, r)) in blocks[..n].iter().enumerate() {
                let at = 4 + 8 * i;
                assert_eq!(u32::from_be_bytes(o[at..at + 4].try_into().unwrap()), l, "left edge {i}");
                assert_eq!(u32::from_be_bytes(o[at + 4..at + 8].try_into().unwrap()), r, "right edge {i}");
            }
        }
    }

    #[test]
    fn too_long_is_an_error() {
        let h = headers(&[], 65_500);
        assert_eq!(h.encode(&mut Vec::new()), Err(TooLong(65_540)));
    }

    #[test]
    fn pcap_records_keep_headers_with_the_wire_length() {
        let h = headers(&[], 1000);
        let mut buf = Vec::new();
        let len = h.encode(&mut buf).unwrap();
        let mut w = PcapOut::new(Vec::new(), 65535).unwrap();
        w.write(1_500_000_123, &buf, len as u32).unwrap();
        let file = w.into_inner();
        let mut r = pcap_file::pcap::PcapReader::new(&file[..]).unwrap();
        assert_eq!(r.header().ts_resolution, TsResolution::NanoSecond);
        let pk = r.next_packet().unwrap().unwrap();
        assert_eq!(pk.timestamp, StdDuration::new(1, 500_000_123));
        assert_eq!((pk.data.len(), pk.orig_len as usize), (40, 1040));
        assert!(r.next_packet().is_none());
    }
}

//! The emulator's per-packet event log: a small header and fixed 64-byte little-endian
//! records, so numpy reads it in one call (`np.fromfile(path, dtype, offset=16)`) and
//! Python turns it into Parquet. Documented in docs/lab.md ("Event log").
//!
//! ```text
//! header (16 B): magic "TWEVLOG\0" | version u32 = 1 | record size u32 = 64
//! record (64 B):
//!   0  t_ns     u64   CLOCK_MONOTONIC ns of the event
//!   8  pkt      u64   packet number within its direction (arrival order)
//!  16  due_ns   u64   deliveries: when the packet was due (0 otherwise)
//!  24  src      u32   IPv4 source (big-endian value; IPv6: last 32 bits)
//!  28  dst      u32   destination
//!  32  seq      u32   TCP sequence number
//!  36  ack      u32   TCP acknowledgment number
//!  40  q_bytes  u32   queue backlog after the event, bytes (saturating)
//!  44  sport    u16
//!  46  dport    u16
//!  48  ip_len   u16   IP packet bytes (malformed frames: frame bytes)
//!  50  payload  u16   TCP/UDP payload bytes
//!  52  q_pkts   u16   queue backlog after the event, packets (saturating)
//!  54  dir      u8    0 = fwd (server→client), 1 = rev (client→server)
//!  55  event    u8    0 arrival, 1 enqueue, 2 dequeue (end of serialisation), 3 drop, 4 deliver
//!  56  reason   u8    drops: 1 overflow, 2 pushed_out, 3 loss, 4 burst_loss, 5 malformed, 6 shutdown, 7 write_error
//!  57  flags    u8    TCP flags (FIN 1, SYN 2, RST 4, PSH 8, ACK 16, URG 32, ECE 64, CWR 128)
//!  58  proto    u8    IP protocol
//!  59  version  u8    IP version (0 for malformed)
//!  60  tos      u8    IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN)
//!  61  pad      [u8; 3]
//! ```

use crate::link::Event;
use std::io::{self, Write};
use thinwan_proto::DropReason;

/// File magic.
pub const MAGIC: &[u8; 8] = b"TWEVLOG\0";
/// Format version; bump on any layout change.
pub const VERSION: u32 = 1;
/// Bytes per record.
pub const RECORD: usize = 64;

/// Writes the header, then records.
pub struct EventWriter<W: Write> {
    out: W,
}

impl<W: Write> EventWriter<W> {
    /// Start a log (writes the header).
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(RECORD as u32).to_le_bytes())?;
        Ok(EventWriter { out })
    }

    /// Append one record of direction `dir`.
    pub fn write(&mut self, dir: u8, e: &Event) -> io::Result<()> {
        self.out.write_all(&encode(dir, e))
    }

    /// Flush and return the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The 64 bytes of one record.
pub fn encode(dir: u8, e: &Event) -> [u8; RECORD] {
    let mut b = [0u8; RECORD];
    let h = &e.hdr;
    b[0..8].copy_from_slice(&e.t.as_nanos().to_le_bytes());
    b[8..16].copy_from_slice(&e.pkt.to_le_bytes());
    b[16..24].copy_from_slice(&e.due.as_nanos().to_le_bytes());
    b[24..28].copy_from_slice(&h.src.to_le_bytes());
    b[28..32].copy_from_slice(&h.dst.to_le_bytes());
    b[32..36].copy_from_slice(&h.seq.to_le_bytes());
    b[36..40].copy_from_slice(&h.ack.to_le_bytes());
    b[40..44].copy_from_slice(&(e.q_bytes.min(u32::MAX as u64) as u32).to_le_bytes());
    b[44..46].copy_from_slice(&h.sport.to_le_bytes());
    b[46..48].copy_from_slice(&h.dport.to_le_bytes());
    b[48..50].copy_from_slice(&h.ip_len.to_le_bytes());
    b[50..52].copy_from_slice(&h.payload.to_le_bytes());
    b[52..54].copy_from_slice(&(e.q_pkts.min(u16::MAX as u64) as u16).to_le_bytes());
    b[54] = dir;
    b[55] = e.kind as u8;
    b[56] = e.reason.map_or(0, DropReason::code);
    b[57] = h.flags;
    b[58] = h.proto;
    b[59] = h.version;
    b[60] = h.tos;
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::EventKind;
    use crate::packet::Summary;
    use thinwan_proto::DropReason;
    use thinwan_proto::Instant;

    #[test]
    fn layout() {
        let e = Event {
            t: Instant::from_nanos(0x0102_0304_0506_0708),
            kind: EventKind::Drop,
            reason: Some(DropReason::Overflow),
            pkt: 9,
            hdr: Summary {
                src: 0xc612_0101,
                sport: 5001,
                seq: 77,
                payload: 1448,
                ip_len: 1500,
                flags: 0x18,
                proto: 6,
                version: 4,
                tos: 0x80,
                ..Default::default()
            },
            q_bytes: 1 << 40,
            q_pkts: 3,
            due: Instant::ZERO,
        };
        let b = encode(1, &e);
        assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), 0x0102_0304_0506_0708);
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()), 0xc612_0101);
        assert_eq!(u32::from_le_bytes(b[40..44].try_into().unwrap()), u32::MAX);
        assert_eq!(u16::from_le_bytes(b[44..46].try_into().unwrap()), 5001);
        assert_eq!(u16::from_le_bytes(b[52..54].try_into().unwrap()), 3);
        assert_eq!(&b[54..61], &[1, 3, 1, 0x18, 6, 4, 0x80]);
        let mut w = EventWriter::new(Vec::new()).unwrap();
        w.write(0, &e).unwrap();
        let v = w.finish().unwrap();
        assert_eq!(v.len(), 16 + RECORD);
        assert_eq!(&v[..8], MAGIC);
    }
}

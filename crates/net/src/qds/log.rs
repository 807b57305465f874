//! The QDS log: what the control loop decided each period, in the event log's format
//! family ([`crate::evlog`]): a 16-byte header and fixed 64-byte little-endian records,
//! so numpy reads it in one call (`np.fromfile(path, dtype, offset=16)`). One record per
//! flow the controller saw and one per class, every period: the simulator's `qds_flows`
//! and `qds_classes` records (docs/records.md) in one file. Documented in docs/lab.md
//! ("QDS log").
//!
//! ```text
//! header (16 B): magic "TWQDSLG\0" | version u32 = 1 | record size u32 = 64
//! record (64 B):                flow record (kind 0)          class record (kind 1)
//!   0  t_ns      u64   CLOCK_MONOTONIC ns of the period (both)
//!   8  flow      u64   the queue's flow id (QueueItem::flow) 0
//!  16  rate_bps  f64   rate toward the client (monitor)      the class's rate (plan)
//!  24  value     f64   RTT estimate, s (NaN: not yet timed)  normalised weight
//!  32  extra     f64   rate toward the server, bit/s         the class's ceil, bit/s
//!  40  client    u32   client IPv4 (IPv6: last 32 bits)      0
//!  44  server    u32   server address                        0
//!  48  cport     u16   client port                           0
//!  50  sport     u16   server port                           0
//!  52  class     u16   the flow's class (0 = most urgent)    the class
//!  54  kind      u8    0                                     1
//!  55  app       u8    type the controller used (0 video, 1 audio, 2 data, 3 interactive; 255 none)
//!  56  app_true  u8    the oracle table's type (255: not listed)
//!  57  flags     u8    1 = partial (server half untimed)      0
//!  58  pad       u16
//!  60  flows     u32   0                                     flows in the class
//! ```

use std::io::{self, Write};
use std::net::IpAddr;

use thinwan_capture::FlowKey;
use thinwan_proto::qds::classify::AppType;
use thinwan_proto::Instant;

/// File magic.
pub const MAGIC: &[u8; 8] = b"TWQDSLG\0";
/// Format version; bump on any layout change.
pub const VERSION: u32 = 1;
/// Bytes per record.
pub const RECORD: usize = 64;
/// `app` / `app_true` when there is none.
pub const NO_APP: u8 = 255;

/// One flow in one period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowRecord {
    /// The period.
    pub t: Instant,
    /// The flow.
    pub key: FlowKey,
    /// The id the downlink's queue sees ([`crate::link::fwd_flow_id`]).
    pub flow: u64,
    /// Rate toward the client, bit/s.
    pub rate_bps: f64,
    /// Rate toward the server, bit/s.
    pub rate_up_bps: f64,
    /// RTT estimate, seconds; NaN while the flow has none (the controller then took 0).
    pub rtt_s: f64,
    /// Its class.
    pub class: u16,
    /// The type the controller used.
    pub app: AppType,
    /// The oracle table's type, if listed.
    pub app_true: Option<AppType>,
    /// The server half was never timed (counted as 0).
    pub partial: bool,
}

/// One class in one period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassRecord {
    /// The period.
    pub t: Instant,
    /// The class (0 = most urgent).
    pub class: u16,
    /// Its rate, bit/s.
    pub rate_bps: u64,
    /// Its ceil, bit/s.
    pub ceil_bps: u64,
    /// Its normalised weight.
    pub weight: f64,
    /// Flows in it.
    pub flows: u32,
}

/// A record of the QDS log.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Record {
    /// A flow's type, RTT, rate and class.
    Flow(FlowRecord),
    /// A class's rate and occupancy.
    Class(ClassRecord),
}

/// Writes the header, then records.
pub struct QdsWriter<W: Write> {
    out: W,
}

impl<W: Write> QdsWriter<W> {
    /// Start a log (writes the header).
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(RECORD as u32).to_le_bytes())?;
        Ok(QdsWriter { out })
    }

    /// Append one record.
    pub fn write(&mut self, r: &Record) -> io::Result<()> {
        self.out.write_all(&encode(r))
    }

    /// Flush and return the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// An address as the event log writes it: IPv4 as is, IPv6 by its last 32 bits.
pub fn addr32(a: IpAddr) -> u32 {
    match a {
        IpAddr::V4(v4) => u32::from(v4),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            u32::from_be_bytes([o[12], o[13], o[14], o[15]])
        }
    }
}

/// The 64 bytes of one record.
pub fn encode(r: &Record) -> [u8; RECORD] {
    let mut b = [0u8; RECORD];
    match r {
        Record::Flow(f) => {
            b[0..8].copy_from_slice(&f.t.as_nanos().to_le_bytes());
            b[8..16].copy_from_slice(&f.flow.to_le_bytes());
            b[16..24].copy_from_slice(&f.rate_bps.to_le_bytes());
            b[24..32].copy_from_slice(&f.rtt_s.to_le_bytes());
            b[32..40].copy_from_slice(&f.rate_up_bps.to_le_bytes());
            b[40..44].copy_from_slice(&addr32(f.key.client.ip()).to_le_bytes());
            b[44..48].copy_from_slice(&addr32(f.key.server.ip()).to_le_bytes());
            b[48..50].copy_from_slice(&f.key.client.port().to_le_bytes());
            b[50..52].copy_from_slice(&f.key.server.port().to_le_bytes());
            b[52..54].copy_from_slice(&f.class.to_le_bytes());
            b[54] = 0;
            b[55] = f.app.index() as u8;
            b[56] = f.app_true.map_or(NO_APP, |a| a.index() as u8);
            b[57] = f.partial as u8;
        }
        Record::Class(c) => {
            b[0..8].copy_from_slice(&c.t.as_nanos().to_le_bytes());
            b[16..24].copy_from_slice(&(c.rate_bps as f64).to_le_bytes());
            b[24..32].copy_from_slice(&c.weight.to_le_bytes());
            b[32..40].copy_from_slice(&(c.ceil_bps as f64).to_le_bytes());
            b[52..54].copy_from_slice(&c.class.to_le_bytes());
            b[54] = 1;
            b[55] = NO_APP;
            b[56] = NO_APP;
            b[60..64].copy_from_slice(&c.flows.to_le_bytes());
        }
    }
    b
}

//! Framing of pump messages on a TCP stream, and a tiny UDP probe format.
//!
//! Every application write of the pump is one message: a 24-byte header followed by
//! filler up to the message size, so the sink can tell where each message ends and
//! stamp its read time. A message smaller than the header is sent as a header alone
//! (its wire size is logged separately). The sink checks every byte: the filler must be
//! [`FILL`] and ids must follow each other, so delivery is verified byte-exact (no byte
//! lost, changed or duplicated).
//!
//! ```text
//! 0 len u32 LE (whole message, ≥ 24) | 4 conn u32 | 8 id u32 | 12 magic "twm1" | 16 t_write_ns u64
//! ```

/// Header bytes.
pub const HEADER: usize = 24;
/// Magic at offset 12.
pub const MAGIC: [u8; 4] = *b"twm1";
/// The filler byte of every message body.
pub const FILL: u8 = 0x5a;

/// A decoded message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgHeader {
    /// Whole message length, bytes.
    pub len: u32,
    /// Connection id.
    pub conn: u32,
    /// Message id within the connection.
    pub id: u32,
    /// CLOCK_MONOTONIC ns of the write.
    pub t_write_ns: u64,
}

/// Why a stream cannot be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The magic did not match: the stream is not ours or lost sync.
    BadMagic,
    /// `len` smaller than the header.
    BadLength(u32),
    /// A body byte is not [`FILL`]: the stream was corrupted.
    Corrupt,
    /// A message id other than the next one: a message was lost or duplicated.
    OutOfSequence {
        /// The id that should have come.
        expected: u32,
        /// The id that came.
        got: u32,
    },
}

impl MsgHeader {
    /// Encode into the first [`HEADER`] bytes of `buf`.
    pub fn encode(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&self.len.to_le_bytes());
        buf[4..8].copy_from_slice(&self.conn.to_le_bytes());
        buf[8..12].copy_from_slice(&self.id.to_le_bytes());
        buf[12..16].copy_from_slice(&MAGIC);
        buf[16..24].copy_from_slice(&self.t_write_ns.to_le_bytes());
    }

    /// Decode from at least [`HEADER`] bytes.
    pub fn decode(buf: &[u8]) -> Result<Self, FrameError> {
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        if buf[12..16] != MAGIC {
            return Err(FrameError::BadMagic);
        }
        let len = u32_at(0);
        if (len as usize) < HEADER {
            return Err(FrameError::BadLength(len));
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&buf[16..24]);
        Ok(MsgHeader { len, conn: u32_at(4), id: u32_at(8), t_write_ns: u64::from_le_bytes(t) })
    }
}

/// Incremental decoder: feed stream bytes, get the headers of messages whose last byte
/// has arrived.
#[derive(Debug, Default)]
pub struct Deframer {
    header: Vec<u8>,
    /// Bytes of the current message body still to check.
    skip: u64,
    current: Option<MsgHeader>,
    /// The id the next message must carry.
    next_id: u32,
}

impl Deframer {
    /// Consume `data`; push every message completed by it onto `done`.
    pub fn feed(&mut self, mut data: &[u8], done: &mut Vec<MsgHeader>) -> Result<(), FrameError> {
        while !data.is_empty() {
            if let Some(h) = self.current {
                let take = (self.skip.min(data.len() as u64)) as usize;
                if data[..take].iter().any(|&b| b != FILL) {
                    return Err(FrameError::Corrupt);
                }
                self.skip -= take as u64;
                data = &data[take..];
                if self.skip == 0 {
                    done.push(h);
                    self.current = None;
                }
                continue;
            }
            let need = HEADER - self.header.len();
            let take = need.min(data.len());
            self.header.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.header.len() == HEADER {
                let h = MsgHeader::decode(&self.header)?;
                if h.id != self.next_id {
                    return Err(FrameError::OutOfSequence { expected: self.next_id, got: h.id });
                }
                self.next_id = h.id.wrapping_add(1);
                self.header.clear();
                self.skip = h.len as u64 - HEADER as u64;
                if self.skip == 0 {
                    done.push(h);
                } else {
                    self.current = Some(h);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream(sizes: &[u32]) -> (Vec<u8>, Vec<MsgHeader>) {
        let mut out = Vec::new();
        let mut hs = Vec::new();
        for (i, &s) in sizes.iter().enumerate() {
            let h =
                MsgHeader { len: s.max(HEADER as u32), conn: 3, id: i as u32, t_write_ns: 1000 + i as u64 };
            let mut m = vec![FILL; h.len as usize];
            h.encode(&mut m);
            out.extend_from_slice(&m);
            hs.push(h);
        }
        (out, hs)
    }

    proptest! {
        /// Any split of the stream into reads yields the same messages in order.
        #[test]
        fn round_trip_any_split(sizes in proptest::collection::vec(1u32..3000, 1..40), cuts in proptest::collection::vec(1usize..700, 1..200)) {
            let (bytes, expected) = stream(&sizes);
            let mut d = Deframer::default();
            let mut got = Vec::new();
            let mut rest = &bytes[..];
            for c in cuts.iter().cycle() {
                if rest.is_empty() { break; }
                let n = (*c).min(rest.len());
                d.feed(&rest[..n], &mut got).unwrap();
                rest = &rest[n..];
            }
            prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn junk_is_an_error() {
        let mut d = Deframer::default();
        assert_eq!(d.feed(&[0u8; 24], &mut Vec::new()), Err(FrameError::BadMagic));
    }

    #[test]
    fn corrupted_lost_or_duplicated_bytes_are_caught() {
        let (bytes, _) = stream(&[100, 200, 300]);
        let mut bad = bytes.clone();
        bad[150] ^= 1; // a body byte of message 1
        assert_eq!(Deframer::default().feed(&bad, &mut Vec::new()), Err(FrameError::Corrupt));
        // Message 1 missing: message 2 comes next.
        let lost = [&bytes[..100], &bytes[300..]].concat();
        assert_eq!(
            Deframer::default().feed(&lost, &mut Vec::new()),
            Err(FrameError::OutOfSequence { expected: 1, got: 2 })
        );
        // Message 0 twice.
        let dup = [&bytes[..100], &bytes[..]].concat();
        assert_eq!(
            Deframer::default().feed(&dup, &mut Vec::new()),
            Err(FrameError::OutOfSequence { expected: 1, got: 0 })
        );
    }
}

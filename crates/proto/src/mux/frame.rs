//! Trunk frame codec: a typed 12-byte header plus a typed body (yamux
//! `frame/header.rs` style, STYLE.md §7).
//!
//! ```text
//!  0        1        2                 4                                 8                                12
//! +--------+--------+-----------------+---------------------------------+---------------------------------+
//! |  type  | flags  | reserved (= 0)  |        stream id (u32 BE)       |   body length (u32 BE)          |
//! +--------+--------+-----------------+---------------------------------+---------------------------------+
//! ```
//!
//! Bodies (all integers big-endian):
//!
//! | type | stream | body |
//! |------|--------|------|
//! | `Open` (1)   | new id | target name, UTF-8, 1..=[`MAX_TARGET_NAME`] bytes |
//! | `Data` (2)   | id     | payload, 1..=max payload bytes |
//! | `Close` (3)  | id     | empty: the sender will send no more data on this stream (half close) |
//! | `Reset` (4)  | id     | `u16` reason code, then a UTF-8 message (≤ [`MAX_REASON_TEXT`]) |
//! | `Credit` (5) | id     | `u32` window increment (bytes) |
//! | `Ack` (6)    | 0      | `u64` next reliable frame sequence number expected (cumulative) |
//! | `Ping` (7)   | 0      | `u64` opaque; flag [`FLAG_PONG`] marks the answer |
//! | `Hello` (8)  | 0      | `u32` magic, `u8` version, `u64` session, `u16` lane, `u16` lanes, `u64` next seq expected, `u32` initial stream window; flags [`FLAG_NEW`], [`FLAG_UNKNOWN_SESSION`], [`FLAG_ADAPTIVE`], [`FLAG_HELD`] |
//! | `GoAway` (9) | 0      | `u16` reason code: the sender opens no more streams (graceful shutdown) |
//! | `Lanes` (10) | 0      | `u16` lanes the sender wants open (adaptive lanes, version 2); per connection, not replayed |
//! | `LaneClose` (11) | 0  | empty, on the lane it closes (version 3): the edge asks to close it; flag [`FLAG_CLOSE_OK`] marks the core's answer, its last frame on that connection |
//!
//! The decoder never panics and never allocates more than the announced body, which it
//! checks against a caller-given bound first ([`DecodeError::FrameTooLarge`]).

use core::fmt;

/// Bytes in a frame header.
pub const HEADER_LEN: usize = 12;
/// Longest target name in an `Open` frame.
pub const MAX_TARGET_NAME: usize = 255;
/// Longest message text in a `Reset` frame (longer texts are cut on encode).
pub const MAX_REASON_TEXT: usize = 1024;
/// `Hello` magic: ASCII "TWMX".
pub const HELLO_MAGIC: u32 = 0x5457_4d58;
/// Wire-format version carried in `Hello`.
///
/// 2: adds the `Lanes` frame (adaptive lanes) and lets a stream's frames arrive on
/// any lane (a sender moves a stream only once the old lane acknowledged all of it).
/// A version-1 peer is refused at the handshake ("unsupported protocol version").
///
/// 3: adds `LaneClose`: the edge closes an unwanted lane only once the core answers
/// that nothing of its own is left on it (the core's data could otherwise be in flight
/// on a lane the edge closes). Earlier versions are refused at the handshake.
///
/// 4: adds [`FLAG_HELD`], the edge's lane rule, which the core follows: a version-3
/// core would not know the flag and judge its lanes by another rule. Earlier versions
/// are refused at the handshake.
pub const VERSION: u8 = 4;
/// `Hello` body: magic, version, session, lane, lanes, next expected, window.
const HELLO_BODY: usize = 4 + 1 + 8 + 2 + 2 + 8 + 4;
/// `Ping` flag: this is the answer to a ping.
pub const FLAG_PONG: u8 = 0x01;
/// `Hello` flag (edge → core): start a new session rather than resume one.
pub const FLAG_NEW: u8 = 0x01;
/// `Hello` flag (core → edge): the session asked for is not known here (the core lost
/// its state, or the session timed out); the edge must fail its streams and start anew.
pub const FLAG_UNKNOWN_SESSION: u8 = 0x02;
/// `Hello` flag (edge → core): the edge's lanes are adaptive; `lanes` is their maximum.
pub const FLAG_ADAPTIVE: u8 = 0x04;
/// `Hello` flag (edge → core), with [`FLAG_ADAPTIVE`]: both sides decide their lanes by
/// the held rule (`LaneRule::Held`) rather than by their backlog (version 4).
pub const FLAG_HELD: u8 = 0x08;
/// `LaneClose` flag (core → edge): the answer — the core has nothing left on the lane and
/// sends nothing more on this connection; the edge may close it.
pub const FLAG_CLOSE_OK: u8 = 0x01;

/// A stream identifier. Zero is the connection itself (ack, ping, hello, go-away).
pub type StreamId = u32;

/// The frame type byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameType {
    /// Open a stream to a named target.
    Open = 1,
    /// Stream payload.
    Data = 2,
    /// Half close: no more data from the sender.
    Close = 3,
    /// Abort the stream with a reason.
    Reset = 4,
    /// Grant more receive window.
    Credit = 5,
    /// Cumulative acknowledgement of reliable frames (for replay on resumption).
    Ack = 6,
    /// Keep-alive / liveness probe.
    Ping = 7,
    /// Lane handshake: session id and resume point.
    Hello = 8,
    /// No more new streams.
    GoAway = 9,
    /// How many lanes the sender wants open (adaptive lanes).
    Lanes = 10,
    /// Closing this lane: the edge's request, the core's answer.
    LaneClose = 11,
}

impl FrameType {
    /// Reliable frames are numbered, kept until acknowledged and replayed after a
    /// reconnect; the others are per-connection (ack, ping, hello).
    pub fn is_reliable(self) -> bool {
        matches!(
            self,
            FrameType::Open
                | FrameType::Data
                | FrameType::Close
                | FrameType::Reset
                | FrameType::Credit
                | FrameType::GoAway
        )
    }
}

impl TryFrom<u8> for FrameType {
    type Error = DecodeError;
    fn try_from(b: u8) -> Result<Self, DecodeError> {
        Ok(match b {
            1 => FrameType::Open,
            2 => FrameType::Data,
            3 => FrameType::Close,
            4 => FrameType::Reset,
            5 => FrameType::Credit,
            6 => FrameType::Ack,
            7 => FrameType::Ping,
            8 => FrameType::Hello,
            9 => FrameType::GoAway,
            10 => FrameType::Lanes,
            11 => FrameType::LaneClose,
            other => return Err(DecodeError::UnknownType(other)),
        })
    }
}

/// The typed 12-byte header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Frame type.
    pub kind: FrameType,
    /// Type-specific flags.
    pub flags: u8,
    /// Stream the frame belongs to (0 = connection).
    pub stream: StreamId,
    /// Body length in bytes.
    pub len: u32,
}

impl Header {
    /// Write the header into `out`.
    pub fn encode(&self, out: &mut [u8; HEADER_LEN]) {
        out[0] = self.kind as u8;
        out[1] = self.flags;
        out[2] = 0;
        out[3] = 0;
        out[4..8].copy_from_slice(&self.stream.to_be_bytes());
        out[8..12].copy_from_slice(&self.len.to_be_bytes());
    }

    /// Parse and validate a header; `max_body` bounds the announced body length.
    pub fn decode(b: &[u8; HEADER_LEN], max_body: u32) -> Result<Header, DecodeError> {
        let kind = FrameType::try_from(b[0])?;
        if b[2] != 0 || b[3] != 0 {
            return Err(DecodeError::Malformed("reserved header bytes not zero"));
        }
        let stream = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let len = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        if len > max_body {
            return Err(DecodeError::FrameTooLarge { len, max: max_body });
        }
        let conn_level = matches!(
            kind,
            FrameType::Ack
                | FrameType::Ping
                | FrameType::Hello
                | FrameType::GoAway
                | FrameType::Lanes
                | FrameType::LaneClose
        );
        if conn_level != (stream == 0) {
            return Err(DecodeError::Malformed("stream id 0 used for a stream frame or vice versa"));
        }
        Ok(Header { kind, flags: b[1], stream, len })
    }
}

/// Why a stream was reset; carried as a `u16` in `Reset` and `GoAway` frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResetCode {
    /// The far application connection closed abnormally (socket error or RST).
    Aborted,
    /// The core has no target of that name (the edge never names an address).
    UnknownTarget,
    /// The core could not connect to the target.
    ConnectFailed,
    /// The peer sent more than its credit allowed.
    FlowControl,
    /// A configured limit (streams, buffered bytes) was reached.
    Limit,
    /// The daemon is shutting down.
    Shutdown,
    /// The trunk could not be resumed (peer lost its state, or the resume timeout passed).
    ResumeFailed,
    /// The peer violated the protocol.
    Protocol,
    /// A code this version does not know (kept so it can be reported).
    Other(u16),
}

impl ResetCode {
    /// Wire value.
    pub fn to_u16(self) -> u16 {
        match self {
            ResetCode::Aborted => 1,
            ResetCode::UnknownTarget => 2,
            ResetCode::ConnectFailed => 3,
            ResetCode::FlowControl => 4,
            ResetCode::Limit => 5,
            ResetCode::Shutdown => 6,
            ResetCode::ResumeFailed => 7,
            ResetCode::Protocol => 8,
            ResetCode::Other(v) => v,
        }
    }
    /// From the wire value.
    pub fn from_u16(v: u16) -> ResetCode {
        match v {
            1 => ResetCode::Aborted,
            2 => ResetCode::UnknownTarget,
            3 => ResetCode::ConnectFailed,
            4 => ResetCode::FlowControl,
            5 => ResetCode::Limit,
            6 => ResetCode::Shutdown,
            7 => ResetCode::ResumeFailed,
            8 => ResetCode::Protocol,
            v => ResetCode::Other(v),
        }
    }
    /// A short stable name for logs and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            ResetCode::Aborted => "aborted",
            ResetCode::UnknownTarget => "unknown_target",
            ResetCode::ConnectFailed => "connect_failed",
            ResetCode::FlowControl => "flow_control",
            ResetCode::Limit => "limit",
            ResetCode::Shutdown => "shutdown",
            ResetCode::ResumeFailed => "resume_failed",
            ResetCode::Protocol => "protocol",
            ResetCode::Other(_) => "other",
        }
    }
}

impl fmt::Display for ResetCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResetCode::Other(v) => write!(f, "other({v})"),
            c => f.write_str(c.name()),
        }
    }
}

/// Lane handshake contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Session identifier, chosen by the edge at start.
    pub session: u64,
    /// Which trunk connection (lane) this is.
    pub lane: u16,
    /// How many lanes the session has.
    pub lanes: u16,
    /// The next reliable frame sequence number the sender expects on this lane.
    pub next_expected: u64,
    /// Initial receive window the sender grants every stream (the peer's initial credit).
    pub window: u32,
    /// [`FLAG_NEW`] / [`FLAG_UNKNOWN_SESSION`].
    pub flags: u8,
}

/// A decoded frame (owned; payloads are copied out of the receive buffer once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Open stream `stream` to the target called `target`.
    Open {
        /// New stream id.
        stream: StreamId,
        /// Configured target name.
        target: String,
    },
    /// Stream payload.
    Data {
        /// Stream id.
        stream: StreamId,
        /// Payload (non-empty).
        payload: Vec<u8>,
    },
    /// Half close.
    Close {
        /// Stream id.
        stream: StreamId,
    },
    /// Abort a stream.
    Reset {
        /// Stream id.
        stream: StreamId,
        /// Reason code.
        code: ResetCode,
        /// Human-readable detail.
        message: String,
    },
    /// Window increment.
    Credit {
        /// Stream id.
        stream: StreamId,
        /// Bytes added to the window.
        increment: u32,
    },
    /// Cumulative ack of reliable frames.
    Ack {
        /// Next expected sequence number.
        next_expected: u64,
    },
    /// Ping or pong.
    Ping {
        /// True for the answer.
        pong: bool,
        /// Echoed value.
        opaque: u64,
    },
    /// Lane handshake.
    Hello(Hello),
    /// No more new streams.
    GoAway {
        /// Why.
        code: ResetCode,
    },
    /// The sender wants this many lanes open (adaptive lanes; the edge dials them).
    Lanes {
        /// Wanted lanes, ≥ 1.
        want: u16,
    },
    /// Close the lane it arrives on: the edge's request, or (`ok`) the core's answer.
    LaneClose {
        /// True for the core's answer.
        ok: bool,
    },
}

/// Why bytes could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The type byte is not a known frame type.
    UnknownType(u8),
    /// The announced body is longer than allowed.
    FrameTooLarge {
        /// Announced length.
        len: u32,
        /// Allowed maximum.
        max: u32,
    },
    /// Structurally invalid frame.
    Malformed(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::UnknownType(t) => write!(f, "unknown frame type {t}"),
            DecodeError::FrameTooLarge { len, max } => {
                write!(f, "frame body of {len} bytes exceeds limit {max}")
            }
            DecodeError::Malformed(why) => write!(f, "malformed frame: {why}"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl Frame {
    /// The frame type.
    pub fn kind(&self) -> FrameType {
        match self {
            Frame::Open { .. } => FrameType::Open,
            Frame::Data { .. } => FrameType::Data,
            Frame::Close { .. } => FrameType::Close,
            Frame::Reset { .. } => FrameType::Reset,
            Frame::Credit { .. } => FrameType::Credit,
            Frame::Ack { .. } => FrameType::Ack,
            Frame::Ping { .. } => FrameType::Ping,
            Frame::Hello(_) => FrameType::Hello,
            Frame::GoAway { .. } => FrameType::GoAway,
            Frame::Lanes { .. } => FrameType::Lanes,
            Frame::LaneClose { .. } => FrameType::LaneClose,
        }
    }

    /// The stream id (0 for connection-level frames).
    pub fn stream(&self) -> StreamId {
        match self {
            Frame::Open { stream, .. }
            | Frame::Data { stream, .. }
            | Frame::Close { stream }
            | Frame::Reset { stream, .. }
            | Frame::Credit { stream, .. } => *stream,
            _ => 0,
        }
    }

    /// Bytes this frame takes on the wire.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }

    fn body_len(&self) -> usize {
        match self {
            Frame::Open { target, .. } => target.len().min(MAX_TARGET_NAME),
            Frame::Data { payload, .. } => payload.len(),
            Frame::Close { .. } | Frame::LaneClose { .. } => 0,
            Frame::Reset { message, .. } => 2 + truncate_utf8(message, MAX_REASON_TEXT).len(),
            Frame::Credit { .. } => 4,
            Frame::Ack { .. } | Frame::Ping { .. } => 8,
            Frame::Hello(_) => HELLO_BODY,
            Frame::GoAway { .. } | Frame::Lanes { .. } => 2,
        }
    }

    /// Append the encoded frame to `out`. Over-long target names and reset messages are
    /// cut (on a UTF-8 boundary) so every encoded frame decodes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let flags = match self {
            Frame::Ping { pong: true, .. } => FLAG_PONG,
            Frame::LaneClose { ok: true } => FLAG_CLOSE_OK,
            Frame::Hello(h) => h.flags,
            _ => 0,
        };
        let header = Header { kind: self.kind(), flags, stream: self.stream(), len: self.body_len() as u32 };
        let mut h = [0u8; HEADER_LEN];
        header.encode(&mut h);
        out.reserve(HEADER_LEN + header.len as usize);
        out.extend_from_slice(&h);
        match self {
            Frame::Open { target, .. } => {
                out.extend_from_slice(truncate_utf8(target, MAX_TARGET_NAME).as_bytes())
            }
            Frame::Data { payload, .. } => out.extend_from_slice(payload),
            Frame::Close { .. } | Frame::LaneClose { .. } => {}
            Frame::Reset { code, message, .. } => {
                out.extend_from_slice(&code.to_u16().to_be_bytes());
                out.extend_from_slice(truncate_utf8(message, MAX_REASON_TEXT).as_bytes());
            }
            Frame::Credit { increment, .. } => out.extend_from_slice(&increment.to_be_bytes()),
            Frame::Ack { next_expected } => out.extend_from_slice(&next_expected.to_be_bytes()),
            Frame::Ping { opaque, .. } => out.extend_from_slice(&opaque.to_be_bytes()),
            Frame::Hello(h) => {
                out.extend_from_slice(&HELLO_MAGIC.to_be_bytes());
                out.push(VERSION);
                out.extend_from_slice(&h.session.to_be_bytes());
                out.extend_from_slice(&h.lane.to_be_bytes());
                out.extend_from_slice(&h.lanes.to_be_bytes());
                out.extend_from_slice(&h.next_expected.to_be_bytes());
                out.extend_from_slice(&h.window.to_be_bytes());
            }
            Frame::GoAway { code } => out.extend_from_slice(&code.to_u16().to_be_bytes()),
            Frame::Lanes { want } => out.extend_from_slice(&want.to_be_bytes()),
        }
    }

    /// Decode one frame from the front of `buf`. `Ok(None)` means more bytes are needed;
    /// `Ok(Some((frame, used)))` consumed `used` bytes. `max_body` bounds every body (and
    /// hence any allocation) before it is read.
    pub fn decode(buf: &[u8], max_body: u32) -> Result<Option<(Frame, usize)>, DecodeError> {
        let Some(h) = buf.first_chunk::<HEADER_LEN>() else { return Ok(None) };
        let header = Header::decode(h, max_body)?;
        let total = HEADER_LEN + header.len as usize;
        if buf.len() < total {
            return Ok(None);
        }
        let frame = Frame::decode_body(&header, &buf[HEADER_LEN..total])?;
        Ok(Some((frame, total)))
    }

    /// Build a frame from a validated header and exactly `header.len` body bytes.
    pub fn decode_body(header: &Header, body: &[u8]) -> Result<Frame, DecodeError> {
        let stream = header.stream;
        let fixed = |n: usize| {
            if body.len() == n {
                Ok(())
            } else {
                Err(DecodeError::Malformed("wrong body length for frame type"))
            }
        };
        Ok(match header.kind {
            FrameType::Open => {
                if body.is_empty() || body.len() > MAX_TARGET_NAME {
                    return Err(DecodeError::Malformed("target name length out of range"));
                }
                let target = core::str::from_utf8(body)
                    .map_err(|_| DecodeError::Malformed("target name not UTF-8"))?;
                Frame::Open { stream, target: target.to_owned() }
            }
            FrameType::Data => {
                if body.is_empty() {
                    return Err(DecodeError::Malformed("empty data frame"));
                }
                Frame::Data { stream, payload: body.to_vec() }
            }
            FrameType::Close => {
                fixed(0)?;
                Frame::Close { stream }
            }
            FrameType::Reset => {
                if body.len() < 2 || body.len() > 2 + MAX_REASON_TEXT {
                    return Err(DecodeError::Malformed("reset body length out of range"));
                }
                let code = ResetCode::from_u16(u16::from_be_bytes([body[0], body[1]]));
                let message = core::str::from_utf8(&body[2..])
                    .map_err(|_| DecodeError::Malformed("reset message not UTF-8"))?;
                Frame::Reset { stream, code, message: message.to_owned() }
            }
            FrameType::Credit => {
                fixed(4)?;
                let increment = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
                if increment == 0 {
                    return Err(DecodeError::Malformed("zero credit increment"));
                }
                Frame::Credit { stream, increment }
            }
            FrameType::Ack => {
                fixed(8)?;
                Frame::Ack { next_expected: be_u64(body) }
            }
            FrameType::Ping => {
                fixed(8)?;
                Frame::Ping { pong: header.flags & FLAG_PONG != 0, opaque: be_u64(body) }
            }
            FrameType::Hello => {
                fixed(HELLO_BODY)?;
                if u32::from_be_bytes([body[0], body[1], body[2], body[3]]) != HELLO_MAGIC {
                    return Err(DecodeError::Malformed("bad hello magic"));
                }
                if body[4] != VERSION {
                    return Err(DecodeError::Malformed("unsupported protocol version"));
                }
                let lane = u16::from_be_bytes([body[13], body[14]]);
                let lanes = u16::from_be_bytes([body[15], body[16]]);
                if lanes == 0 || lane >= lanes {
                    return Err(DecodeError::Malformed("hello lane out of range"));
                }
                Frame::Hello(Hello {
                    session: be_u64(&body[5..13]),
                    lane,
                    lanes,
                    next_expected: be_u64(&body[17..25]),
                    window: u32::from_be_bytes([body[25], body[26], body[27], body[28]]),
                    flags: header.flags,
                })
            }
            FrameType::GoAway => {
                fixed(2)?;
                Frame::GoAway { code: ResetCode::from_u16(u16::from_be_bytes([body[0], body[1]])) }
            }
            FrameType::Lanes => {
                fixed(2)?;
                let want = u16::from_be_bytes([body[0], body[1]]);
                if want == 0 {
                    return Err(DecodeError::Malformed("zero lanes wanted"));
                }
                Frame::Lanes { want }
            }
            FrameType::LaneClose => {
                fixed(0)?;
                Frame::LaneClose { ok: header.flags & FLAG_CLOSE_OK != 0 }
            }
        })
    }
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Incremental decoder over a byte stream: push what the socket gave, pop frames.
///
/// Memory is bounded by `max_body + HEADER_LEN` plus one read's worth of bytes: a
/// header announcing more than `max_body` fails before any body is buffered.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
    max_body: u32,
}

impl FrameDecoder {
    /// A decoder that rejects bodies longer than `max_body`.
    pub fn new(max_body: u32) -> Self {
        FrameDecoder { buf: Vec::new(), start: 0, max_body }
    }

    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 64 * 1024 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, if any. After an error the stream is unusable.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        match Frame::decode(&self.buf[self.start..], self.max_body)? {
            Some((frame, used)) => {
                self.start += used;
                Ok(Some(frame))
            }
            None => Ok(None),
        }
    }

    /// Bytes buffered but not yet decoded.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: u32 = 64 * 1024;

    fn arb_code() -> impl Strategy<Value = ResetCode> {
        any::<u16>().prop_map(ResetCode::from_u16)
    }

    fn arb_frame() -> impl Strategy<Value = Frame> {
        let sid = 1u32..;
        prop_oneof![
            (sid.clone(), "[a-z0-9_.-]{1,40}").prop_map(|(stream, target)| Frame::Open { stream, target }),
            (sid.clone(), proptest::collection::vec(any::<u8>(), 1..2000))
                .prop_map(|(stream, payload)| Frame::Data { stream, payload }),
            sid.clone().prop_map(|stream| Frame::Close { stream }),
            (sid.clone(), arb_code(), "\\PC{0,60}").prop_map(|(stream, code, message)| Frame::Reset {
                stream,
                code,
                message
            }),
            (sid, 1u32..).prop_map(|(stream, increment)| Frame::Credit { stream, increment }),
            any::<u64>().prop_map(|next_expected| Frame::Ack { next_expected }),
            (any::<bool>(), any::<u64>()).prop_map(|(pong, opaque)| Frame::Ping { pong, opaque }),
            (any::<u64>(), 1u16.., any::<u64>(), any::<u32>(), 0u8..4).prop_flat_map(
                |(session, lanes, next_expected, window, flags)| {
                    (0..lanes).prop_map(move |lane| {
                        Frame::Hello(Hello { session, lane, lanes, next_expected, window, flags })
                    })
                }
            ),
            arb_code().prop_map(|code| Frame::GoAway { code }),
            (1u16..).prop_map(|want| Frame::Lanes { want }),
            any::<bool>().prop_map(|ok| Frame::LaneClose { ok }),
        ]
    }

    proptest! {
        #[test]
        fn header_round_trip(kind in 1u8..=11, flags: u8, stream: u32, len in 0u32..=MAX) {
            let kind = FrameType::try_from(kind).unwrap();
            let h = Header { kind, flags, stream, len };
            let mut b = [0u8; HEADER_LEN];
            h.encode(&mut b);
            match Header::decode(&b, MAX) {
                Ok(d) => prop_assert_eq!(d, h),
                // Only the stream-0 rule may reject a well-formed header.
                Err(e) => prop_assert_eq!(e, DecodeError::Malformed("stream id 0 used for a stream frame or vice versa")),
            }
        }

        #[test]
        fn frame_round_trip(frames in proptest::collection::vec(arb_frame(), 1..8), split in 0usize..10_000) {
            let mut wire = Vec::new();
            for f in &frames { f.encode(&mut wire); }
            prop_assert_eq!(wire.len(), frames.iter().map(Frame::encoded_len).sum::<usize>());
            // Feed the bytes in two arbitrary pieces through the incremental decoder.
            let split = split.min(wire.len());
            let mut dec = FrameDecoder::new(MAX);
            let mut out = Vec::new();
            for piece in [&wire[..split], &wire[split..]] {
                dec.push(piece);
                while let Some(f) = dec.next_frame().unwrap() { out.push(f); }
            }
            prop_assert_eq!(out, frames);
            prop_assert_eq!(dec.pending(), 0);
        }

        /// Fuzz target: arbitrary bytes never panic, and a frame never claims more than
        /// was given or more than the bound.
        #[test]
        fn decode_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..4096), max in 0u32..8192) {
            let mut rest = &bytes[..];
            while let Ok(Some((f, used))) = Frame::decode(rest, max) {
                prop_assert!(used <= rest.len());
                prop_assert!(used <= HEADER_LEN + max as usize);
                prop_assert_eq!(used, f.encoded_len());
                rest = &rest[used..];
            }
        }

        /// Fuzz with valid-looking headers so bodies are actually parsed.
        #[test]
        fn decode_arbitrary_bodies(kind in 0u8..13, flags: u8, stream in 0u32..4, body in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut wire = vec![kind, flags, 0, 0];
            wire.extend_from_slice(&stream.to_be_bytes());
            wire.extend_from_slice(&(body.len() as u32).to_be_bytes());
            wire.extend_from_slice(&body);
            if let Ok(Some((f, used))) = Frame::decode(&wire, MAX) {
                prop_assert_eq!(used, wire.len());
                let mut again = Vec::new();
                f.encode(&mut again);
                prop_assert_eq!(again.len(), wire.len());
                prop_assert_eq!(Frame::decode(&again, MAX).unwrap().map(|x| x.0), Some(f));
            }
        }
    }

    #[test]
    fn too_large_is_rejected_before_buffering_body() {
        let mut h = [0u8; HEADER_LEN];
        Header { kind: FrameType::Data, flags: 0, stream: 1, len: u32::MAX }.encode(&mut h);
        assert_eq!(Frame::decode(&h, MAX), Err(DecodeError::FrameTooLarge { len: u32::MAX, max: MAX }));
    }

    #[test]
    fn long_reset_message_is_cut_on_char_boundary() {
        let f = Frame::Reset { stream: 3, code: ResetCode::Aborted, message: "é".repeat(1000) };
        let mut w = Vec::new();
        f.encode(&mut w);
        let (d, _) = Frame::decode(&w, MAX).unwrap().unwrap();
        let Frame::Reset { message, .. } = d else { panic!() };
        assert_eq!(message.len(), MAX_REASON_TEXT);
    }
}

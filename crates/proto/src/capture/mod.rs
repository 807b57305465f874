//! Splitting a remote-display capture into operations at idle gaps (slow-motion
//! benchmarking, Nieh et al. 2003; Lai and Nieh 2006: `shared/spec/slow-motion-benchmarking.md`).
//!
//! Sans-IO: the caller reads a capture, decides each packet's direction (client→server
//! or server→client) and pushes packets in capture order; [`Splitter::push`] hands back
//! each operation once the next one has begun, [`Splitter::finish`] the last one. No
//! protocol is decoded, so any remote-display protocol over TCP splits the same way.
//!
//! **What an operation is.** Slow motion pauses after every input until the display
//! traffic has fallen idle, so traffic comes in bursts. A *burst* is a run of packets
//! carrying payload (either direction) in which no two consecutive ones are `idle_gap` or
//! more apart; the idle gap *is* the definition of "the end of an update": whatever the
//! server sends less than `idle_gap` after the previous payload packet still belongs to
//! the update (TigerVNC's lossless refresh, trickling over a WAN for 1–2 s, does), a
//! packet after a longer silence starts a new burst. Packets without payload (pure ACKs,
//! SYN/FIN) never start or extend a burst; they are counted with the burst they follow.
//!
//! **Retransmissions** ([`Packet::resent`]: every payload byte was in a packet of the
//! same direction captured before) are treated like packets without payload: counted
//! (packets and IP bytes, in the burst they follow) but never the start of a burst, of
//! an input or of an update's end. Both directions, for different reasons. Server→client
//! (the capture is behind the WAN, at the client): the client already had those bytes —
//! a retransmission after a lost ACK, one RTO after the update was drawn, is no update.
//! Client→server (the capture is before the WAN): the first copy is in the capture at the
//! time the client sent it, so the retransmission is *not* when anything was given; a
//! lost update request resent after the pause (RFC 6298 §5.4, or a tail-loss probe,
//! RFC 8985 §7) would otherwise open the next input's window before the input left.
//!
//! **Latency** (the spec's "Method" 1) = the last server→client payload packet of the
//! burst − the first client→server payload packet of the burst (the input). A burst that
//! the server started (no input before its first update: a clock, a cursor blink) is
//! still reported, with [`Operation::client_started`] false.
//!
//! **Round trips** are counted from the order of payload packets: every time the server
//! sends after the client did (a client→server → server→client turn) the operation has
//! waited on the path once more. Direction changes count both kinds of turn.

use crate::time::{Duration, Instant};

/// Which way a packet travelled, relative to the remote-display *server* (the side that
/// runs the application; the user's side is the client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// From the user's side: input, requests, ACKs of updates.
    ClientToServer,
    /// From the application's side: display updates.
    ServerToClient,
}

/// One packet of the display connection(s), as the splitter needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Capture timestamp.
    pub t: Instant,
    /// Its direction.
    pub dir: Dir,
    /// IP length (header + payload) as sent, not as captured.
    pub ip_len: u32,
    /// TCP payload bytes.
    pub payload: u32,
    /// True when every payload byte was in a packet of the same direction captured
    /// before (a retransmission; see the module docs): counted, but no payload.
    pub resent: bool,
    /// 1-based number of the packet in the capture file (for messages and for finding it
    /// in Wireshark).
    pub number: u64,
}

impl Packet {
    /// No payload, or only bytes captured before: it neither starts nor extends a burst.
    #[inline]
    fn carries_nothing_new(&self) -> bool {
        self.payload == 0 || self.resent
    }
}

/// Per-direction counters of one operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirCounts {
    /// Packets (with and without payload).
    pub packets: u64,
    /// IP bytes.
    pub bytes: u64,
    /// TCP payload bytes.
    pub payload: u64,
}

/// One burst of display traffic: an input and the update it caused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Number (in the file) of the first payload packet of the burst.
    pub first_packet: u64,
    /// Number of the last payload packet of the burst.
    pub last_packet: u64,
    /// The first payload packet of the burst (either direction).
    pub t_start: Instant,
    /// The first client→server payload packet: the input (None: the server sent alone).
    pub t_input: Option<Instant>,
    /// The first server→client payload packet after the input.
    pub t_first_update: Option<Instant>,
    /// The last server→client payload packet after the input: the end of the update.
    pub t_end: Option<Instant>,
    /// The last payload packet of the burst (either direction).
    pub t_last: Instant,
    /// True if the burst began with a client→server packet.
    pub client_started: bool,
    /// Client→server counters (pure ACKs and retransmissions up to the next burst
    /// included; `payload` counts only bytes not captured before).
    pub c2s: DirCounts,
    /// Server→client counters.
    pub s2c: DirCounts,
    /// Changes of direction between consecutive payload packets.
    pub direction_changes: u32,
    /// Client→server followed by server→client turns.
    pub round_trips: u32,
    /// Silence before the burst (None for the first burst of the capture).
    pub gap_before: Option<Duration>,
    last_dir: Dir,
}

impl Operation {
    /// Latency: end of the update − input; None when there was no input or no update
    /// after it.
    pub fn latency(&self) -> Option<Duration> {
        Some(self.t_end?.saturating_since(self.t_input?))
    }

    fn start(p: &Packet, gap_before: Option<Duration>) -> Self {
        let mut op = Operation {
            first_packet: p.number,
            last_packet: p.number,
            t_start: p.t,
            t_input: None,
            t_first_update: None,
            t_end: None,
            t_last: p.t,
            client_started: p.dir == Dir::ClientToServer,
            c2s: DirCounts::default(),
            s2c: DirCounts::default(),
            direction_changes: 0,
            round_trips: 0,
            gap_before,
            last_dir: p.dir,
        };
        op.add(p);
        op
    }

    fn add(&mut self, p: &Packet) {
        let c = match p.dir {
            Dir::ClientToServer => &mut self.c2s,
            Dir::ServerToClient => &mut self.s2c,
        };
        c.packets += 1;
        c.bytes += u64::from(p.ip_len);
        if p.carries_nothing_new() {
            return;
        }
        c.payload += u64::from(p.payload);
        self.last_packet = p.number;
        self.t_last = p.t;
        if p.dir != self.last_dir {
            self.direction_changes += 1;
            if p.dir == Dir::ServerToClient {
                self.round_trips += 1;
            }
        }
        self.last_dir = p.dir;
        match p.dir {
            Dir::ClientToServer => {
                if self.t_input.is_none() {
                    self.t_input = Some(p.t);
                    // Turns before the input (a server-started burst) are not the input's.
                    self.round_trips = 0;
                    self.direction_changes = 0;
                }
            }
            Dir::ServerToClient => {
                if self.t_input.is_some() {
                    self.t_first_update.get_or_insert(p.t);
                    self.t_end = Some(p.t);
                }
            }
        }
    }
}

/// Counters of the packets that belong to no burst (before the first one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unattributed {
    /// Client→server.
    pub c2s: DirCounts,
    /// Server→client.
    pub s2c: DirCounts,
}

/// Splits a packet sequence into [`Operation`]s at idle gaps; see the module docs.
///
/// Call order: [`push`](Self::push) every packet in capture order (timestamps that go
/// backwards are taken as no gap), then [`finish`](Self::finish) once.
#[derive(Clone, Debug)]
pub struct Splitter {
    idle_gap: Duration,
    current: Option<Operation>,
    last_payload: Option<Instant>,
    before_first: Unattributed,
    bursts: u64,
}

impl Splitter {
    /// A splitter that ends a burst after `idle_gap` without payload either way.
    pub fn new(idle_gap: Duration) -> Self {
        Splitter {
            idle_gap,
            current: None,
            last_payload: None,
            before_first: Unattributed::default(),
            bursts: 0,
        }
    }

    /// Feed the next packet; returns the previous operation when this packet starts a new
    /// one.
    pub fn push(&mut self, p: Packet) -> Option<Operation> {
        if p.carries_nothing_new() {
            match &mut self.current {
                Some(op) => op.add(&p),
                None => {
                    let c = match p.dir {
                        Dir::ClientToServer => &mut self.before_first.c2s,
                        Dir::ServerToClient => &mut self.before_first.s2c,
                    };
                    c.packets += 1;
                    c.bytes += u64::from(p.ip_len);
                }
            }
            return None;
        }
        let gap = self.last_payload.map(|t| p.t.saturating_since(t));
        self.last_payload = Some(p.t);
        match (&mut self.current, gap) {
            (Some(op), Some(g)) if g < self.idle_gap => {
                op.add(&p);
                None
            }
            _ => {
                self.bursts += 1;
                self.current.replace(Operation::start(&p, gap))
            }
        }
    }

    /// The last operation (None if no payload packet was ever pushed).
    pub fn finish(&mut self) -> Option<Operation> {
        self.current.take()
    }

    /// Packets seen before the first burst.
    pub fn unattributed(&self) -> Unattributed {
        self.before_first
    }

    /// Bursts started so far.
    pub fn bursts(&self) -> u64 {
        self.bursts
    }
}

#[cfg(test)]
mod tests;

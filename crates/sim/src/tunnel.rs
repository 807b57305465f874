//! The tunnel of the mux topology in mux mode: the daemons' own sans-IO
//! [`Session`]s (frame codec, thin-first scheduler, per-stream credit, acknowledgements
//! and pings, `thinwan_proto::mux`) at the core and at the edge, their bytes carried
//! by simulated trunk TCP connections.
//!
//! A simulated TCP connection carries byte *counts*; the bytes themselves wait here,
//! in one pipe per trunk direction, until the receiving TCP delivers them in order, and
//! are then handed to the receiving session. TCP delivers exactly the bytes written,
//! in order, so the session sees the same byte stream the daemons would.
//!
//! A trunk lane is two simulated connections on the same path: *forward* core → edge
//! (frames of server data) and *reverse* edge → core (the edge's acks, credits, pongs).
//! Real TCP would piggyback the two directions' ACKs on each other; here each has
//! its own pure ACKs — a few dozen extra 40-byte packets per second per lane.
//!
//! What is not modelled: trunk failures and resumption (the simulated path never
//! breaks, so the liveness timeout is off), the core's connect to the server (the core
//! sits beside R1 and the server's writes reach its session at once), and stream
//! set-up: lanes and streams are established before time 0, as the direct
//! connections are, so both configurations start with open connections.
//!
//! Adaptive lanes (`mux.lanes = "adaptive"`): the sessions decide as the daemons'
//! do; every lane up to `mux.max_lanes` has its simulated TCP connections from time 0
//! (idle until used), and "dialing" a lane connects both sessions' ends at once, so a
//! new lane costs its `Hello` round trip over the simulated trunk but not the TCP and
//! TLS handshakes (2 RTTs more in the daemons), and a lane dialled again goes on with its
//! simulated connections' TCP state (their RTT estimate and window). The backlog rule
//! never gives a lane up in a run (`lane_idle_hold` is off: the grid's streams never go
//! quiet for long); the held rule halves the lanes, and the sessions close an unwanted
//! lane by their `LaneClose` handshake ([`Tunnel::close_lane`]).
//!
//! Shedding (`mux.shed = true`, docs/mux.md "Shedding"): a stream *opens* when its
//! source starts (its first write, the moment its client would connect to the edge).
//! Then the edge asks its session once, as the daemon does on accepting a client,
//! whether to shed ([`Session::shed_margin`] against `mux.shed_slack_ms`, with the
//! loss the edge reads from its trunk sockets: [`Tunnel::decide_shed`]). A shed stream
//! goes on a direct TCP connection of its own, server → client across the same WAN,
//! for its whole life; a stream is never moved off the tunnel later. Its stream in
//! the session, opened before time 0 like the others, is reset unused (one `Reset`
//! frame on the trunk: the price of not modelling stream set-up).

use std::collections::{HashMap, VecDeque};

use thinwan_proto::mux::frame::{FrameType, Header, ResetCode, StreamId, HEADER_LEN};
use thinwan_proto::mux::sched::Class;
use thinwan_proto::mux::session::{Config as SessionConfig, Event, LaneRule, Role, Session};
use thinwan_proto::{Duration, Instant};

use crate::config::{MuxLanes, MuxSec};

/// The target name every stream opens (the core has one: the server beside it).
const TARGET: &str = "server";
/// Zero bytes stand in for server data (the session only counts and frames them).
const ZEROS: [u8; 16 * 1024] = [0; 16 * 1024];

/// One end of the tunnel.
pub(crate) struct End {
    pub session: Session,
    /// Generation of each lane's (only) connection.
    generation: Vec<u64>,
    /// Earliest pending timer event (MAX = none).
    pub armed: Instant,
}

/// A data frame the core wrote on a forward trunk: its stream and the stream offset
/// one past its last payload byte.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameSpan {
    pub pair: u32,
    pub stream_end: u64,
    /// Frame bytes, header included.
    pub bytes: u32,
}

/// Both ends, the pipes and the stream ↔ pair maps.
pub(crate) struct Tunnel {
    /// Connection id of forward trunk 0; forward lane `l` is `first_trunk + l`, reverse
    /// lane `l` is `first_trunk + lanes + l`.
    pub first_trunk: u32,
    pub lanes: u32,
    pub core: End,
    pub edge: End,
    /// TCP_NOTSENT_LOWAT of the trunk sockets: a session writes while fewer bytes than
    /// this are unsent in the socket, so ordering decisions stay in the session.
    pub notsent_lowat: u64,
    /// Bytes per `poll_transmit` call (the daemons' batch).
    batch: usize,
    /// Per trunk connection (forward lanes, then reverse lanes): bytes written into it
    /// and not yet delivered to the receiving session, oldest first.
    pipes: Vec<VecDeque<u8>>,
    /// Stream of each pair, and back.
    stream: Vec<StreamId>,
    pair: HashMap<StreamId, u32>,
    /// Per pair: bytes the server wrote that the core session has not taken yet
    /// (its stream buffer was full), and everything the server wrote.
    backlog: Vec<u64>,
    pub written: Vec<u64>,
    /// Per pair: stream bytes the core has put in data frames.
    framed: Vec<u64>,
    /// Per trunk connection: frame bytes the socket has not taken yet (its send buffer
    /// was full), the tail of its pipe.
    unwritten: Vec<u64>,
    /// Per lane, oldest first: bytes of its reverse pipe (edge → core) from a connection
    /// the edge closed, and that connection's generation at the core, which reads them
    /// and then the end of the stream. (A lane can close again, redialled, before the
    /// tail of its last connection arrived.)
    closing: Vec<VecDeque<(u64, u64)>>,
    /// Per lane: bytes of its forward pipe (core → edge) that reach an edge connection
    /// already closed, and whether the edge's end is closed now. A lane given up in its
    /// handshake (the edge may, [`Session`]) can have the core's `Hello` and replay on
    /// the way; a closed socket drops them, so they must not reach the lane's next
    /// connection.
    stale: Vec<(u64, bool)>,
    /// Per pair: first message row of its last hop whose trunk stamps are not copied.
    pub stamped: Vec<usize>,
    scratch: Vec<u8>,
    /// Shedding (`mux.shed`), `None` when off.
    shed: Option<Shed>,
}

/// Per-pair shedding decisions (`mux.shed = true`).
struct Shed {
    /// `mux.shed_slack_ms`, seconds (signed: see [`Session::shed_margin`]).
    slack_s: f64,
    /// Per pair: not decided yet (the stream has not opened), or whether it was shed.
    decided: Vec<Option<bool>>,
}

/// A pair's path, as decided when its stream opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// Through the tunnel (always, without shedding).
    Tunnel,
    /// On a direct connection of its own.
    Direct,
    /// The stream opens now: the edge must decide ([`Tunnel::decide_shed`]).
    Undecided,
}

impl Tunnel {
    /// Open `lanes` trunk lanes and one stream per pair, exchanging the handshake
    /// frames directly (before time 0). Forward trunks get connection ids from
    /// `first_trunk` on.
    pub fn establish(mux: &MuxSec, pairs: u32, first_trunk: u32, session_id: u64) -> Result<Tunnel, String> {
        let base = u16::try_from(mux.trunks).map_err(|_| "mux.trunks: at most 65535".to_string())?;
        let lanes = match mux.lanes {
            MuxLanes::Fixed => base,
            MuxLanes::Adaptive => u16::try_from(mux.max_lanes.max(mux.trunks))
                .map_err(|_| "mux.max_lanes: at most 65535".to_string())?,
        };
        let cfg = SessionConfig {
            lanes: base,
            max_lanes: lanes,
            lane_rule: mux.lane_rule.unwrap_or(LaneRule::Backlog),
            bulk_limit: mux.bulk_limit,
            // See the module documentation: the backlog rule never gives lanes up here.
            lane_idle_hold: Duration::from_millis(1_000_000_000),
            max_payload: mux.frame_payload_bytes,
            max_streams: pairs as usize,
            // The simulated path never breaks: no liveness or resume deadline.
            idle_timeout: Duration::from_millis(1_000_000_000),
            resume_timeout: Duration::from_millis(1_000_000_000),
            ..SessionConfig::default()
        };
        let t0 = Instant::ZERO;
        let mut edge = Session::new(Role::Edge, session_id, cfg.clone(), t0);
        // As the daemon's core makes it (crates/mux/src/core.rs): an adaptive session
        // starts at one lane and learns the edge's count from its `Lanes` frame.
        let core_cfg = match mux.lanes {
            MuxLanes::Fixed => cfg,
            MuxLanes::Adaptive => SessionConfig { lanes: 1, ..cfg },
        };
        let mut core = Session::new(Role::Core, session_id, core_cfg, t0);
        let ge: Vec<u64> =
            (0..lanes).map(|l| if l < base { edge.lane_connected(l, t0) } else { 0 }).collect();
        let gc: Vec<u64> =
            (0..lanes).map(|l| if l < base { core.lane_connected(l, t0) } else { 0 }).collect();
        exchange(&mut edge, &ge, &mut core, &gc);
        let mut stream = Vec::with_capacity(pairs as usize);
        for _ in 0..pairs {
            stream.push(
                edge.open_stream(TARGET, Class::Auto, t0)
                    .map_err(|e| format!("mux: cannot open a stream: {e:?}"))?,
            );
        }
        exchange(&mut edge, &ge, &mut core, &gc);
        let mut opened = 0;
        for s in [&mut edge, &mut core] {
            while let Some(ev) = s.poll_event() {
                match ev {
                    Event::StreamOpened { .. } => opened += 1,
                    Event::LaneUp { .. } => {}
                    other => {
                        return Err(format!("mux: unexpected event while establishing the tunnel: {other:?}"))
                    }
                }
            }
        }
        if opened != pairs {
            return Err(format!("mux: {opened} of {pairs} streams opened while establishing the tunnel"));
        }
        let n = pairs as usize;
        Ok(Tunnel {
            first_trunk,
            lanes: lanes as u32,
            core: End { session: core, generation: gc, armed: Instant::MAX },
            edge: End { session: edge, generation: ge, armed: Instant::MAX },
            notsent_lowat: mux.notsent_lowat_bytes as u64,
            batch: mux.frame_payload_bytes as usize,
            pipes: vec![VecDeque::new(); 2 * lanes as usize],
            pair: stream.iter().enumerate().map(|(p, &s)| (s, p as u32)).collect(),
            stream,
            backlog: vec![0; n],
            written: vec![0; n],
            framed: vec![0; n],
            unwritten: vec![0; 2 * lanes as usize],
            closing: vec![VecDeque::new(); lanes as usize],
            stale: vec![(0, false); lanes as usize],
            stamped: vec![0; n],
            scratch: Vec::new(),
            shed: mux.shed.then(|| Shed { slack_s: mux.shed_slack_ms / 1e3, decided: vec![None; n] }),
        })
    }

    /// Where pair `pair`'s writes go.
    pub fn path(&self, pair: u32) -> Path {
        match &self.shed {
            None => Path::Tunnel,
            Some(s) => match s.decided[pair as usize] {
                None => Path::Undecided,
                Some(false) => Path::Tunnel,
                Some(true) => Path::Direct,
            },
        }
    }

    /// Pair `pair`'s stream opens (its first write): the edge decides once whether to
    /// shed it, from its session and `loss`, the packet loss it measures on its trunk
    /// sockets. A shed stream's session stream is reset. Returns whether it was shed.
    pub fn decide_shed(&mut self, pair: u32, loss: f64) -> bool {
        let Some(s) = &mut self.shed else { return false };
        let margin = self.edge.session.shed_margin(loss);
        let shed = margin.is_some_and(|m| m > s.slack_s);
        s.decided[pair as usize] = Some(shed);
        if shed {
            let id = self.stream[pair as usize];
            self.edge.session.stream_reset(id, ResetCode::Aborted, "shed to a direct connection");
        }
        shed
    }

    /// The end that sends on trunk connection `conn`'s data direction: (is the edge, lane).
    pub fn lane_of(&self, conn: u32) -> Option<(bool, u16)> {
        let i = conn.checked_sub(self.first_trunk)?;
        (i < 2 * self.lanes).then(|| (i >= self.lanes, (i % self.lanes) as u16))
    }

    /// The trunk connection on which `edge` (or the core) sends on `lane`.
    pub fn conn_of(&self, edge: bool, lane: u16) -> u32 {
        self.first_trunk + edge as u32 * self.lanes + lane as u32
    }

    /// The edge dials `lane` (adaptive lanes): both ends get a new connection at once;
    /// the `Hello`s then cross the simulated trunk.
    pub fn connect_lane(&mut self, lane: u16, now: Instant) {
        self.stale[lane as usize].1 = false;
        for end in [&mut self.edge, &mut self.core] {
            end.generation[lane as usize] = end.session.lane_connected(lane, now);
        }
    }

    pub fn end(&mut self, edge: bool) -> &mut End {
        if edge {
            &mut self.edge
        } else {
            &mut self.core
        }
    }

    pub fn stream_of(&self, pair: u32) -> StreamId {
        self.stream[pair as usize]
    }

    pub fn pair_of(&self, stream: StreamId) -> Option<u32> {
        self.pair.get(&stream).copied()
    }

    /// The server of `pair` wrote `bytes`: the core reads them into the stream's queue,
    /// as far as its stream buffer allows (the rest waits for `Writable`).
    pub fn server_write(&mut self, pair: u32, bytes: u64, now: Instant) {
        self.written[pair as usize] += bytes;
        self.backlog[pair as usize] += bytes;
        self.feed(pair, now);
    }

    /// Hand the core what the server of `pair` wrote and it has not taken yet.
    pub fn feed(&mut self, pair: u32, now: Instant) {
        let id = self.stream[pair as usize];
        let backlog = &mut self.backlog[pair as usize];
        while *backlog > 0 {
            let n = (*backlog).min(ZEROS.len() as u64) as usize;
            let taken = self.core.session.stream_send(id, &ZEROS[..n], now).unwrap_or(0);
            *backlog -= taken as u64;
            if taken < n {
                break;
            }
        }
    }

    /// Frames for `conn` (a trunk whose sender is `edge`'s `lane`): up to one batch,
    /// appended to the connection's pipe. Returns the byte count and, on a forward
    /// trunk, each data frame it holds (offsets relative to the batch's first byte:
    /// end of the frame on the trunk, and the frame's span).
    pub fn poll_transmit(
        &mut self,
        edge: bool,
        lane: u16,
        now: Instant,
        spans: &mut Vec<(u64, FrameSpan)>,
    ) -> usize {
        let conn = self.conn_of(edge, lane);
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let end = if edge { &mut self.edge } else { &mut self.core };
        end.session.poll_transmit(lane, end.generation[lane as usize], &mut buf, self.batch, now);
        if !edge {
            self.data_frames(&buf, spans);
            let (stale, closed) = &mut self.stale[lane as usize];
            if *closed {
                *stale += buf.len() as u64;
            }
        }
        self.pipes[(conn - self.first_trunk) as usize].extend(&buf);
        let n = buf.len();
        self.scratch = buf;
        n
    }

    /// The data frames in `buf` (whole frames from `poll_transmit`), in order.
    fn data_frames(&mut self, buf: &[u8], spans: &mut Vec<(u64, FrameSpan)>) {
        let mut at = 0;
        while at + HEADER_LEN <= buf.len() {
            let raw: &[u8; HEADER_LEN] = buf[at..at + HEADER_LEN].try_into().expect("header length");
            let h = Header::decode(raw, u32::MAX).expect("the session encodes valid frames");
            at += HEADER_LEN + h.len as usize;
            if h.kind == FrameType::Data {
                if let Some(pair) = self.pair_of(h.stream) {
                    let framed = &mut self.framed[pair as usize];
                    *framed += h.len as u64;
                    spans.push((
                        at as u64,
                        FrameSpan { pair, stream_end: *framed, bytes: (HEADER_LEN as u32) + h.len },
                    ));
                }
            }
        }
    }

    /// Frame bytes trunk `conn`'s socket has not taken yet.
    pub fn unwritten(&mut self, conn: u32) -> &mut u64 {
        &mut self.unwritten[(conn - self.first_trunk) as usize]
    }

    /// The edge gave `lane` up ([`Event::LaneClosed`]): on the core's answer to its
    /// `LaneClose`, the core's last frame on that connection, or in the handshake. What
    /// the edge wrote before closing still reaches the core, which then sees the end of
    /// the stream (as the daemon's core reads to EOF); what the core sent or sends on it
    /// is dropped. The simulated connections go on and carry the next connection of the
    /// lane, if it is dialled again.
    pub fn close_lane(&mut self, lane: u16, now: Instant) {
        let fwd = (self.conn_of(false, lane) - self.first_trunk) as usize;
        self.stale[lane as usize] = (self.pipes[fwd].len() as u64, true);
        let rev = (self.conn_of(true, lane) - self.first_trunk) as usize;
        let closing = &mut self.closing[lane as usize];
        let due = self.pipes[rev].len() as u64 - closing.iter().map(|&(due, _)| due).sum::<u64>();
        let generation = self.core.generation[lane as usize];
        if closing.is_empty() && due == 0 {
            self.core.session.lane_disconnected(lane, generation, now);
        } else {
            closing.push_back((due, generation));
        }
    }

    /// TCP delivered `n` more bytes in order on trunk `conn`: the receiving end reads them.
    pub fn deliver(&mut self, conn: u32, n: u64, now: Instant) {
        let Some((sender_is_edge, lane)) = self.lane_of(conn) else { return };
        let i = (conn - self.first_trunk) as usize;
        let mut n = n as usize;
        if !sender_is_edge {
            let stale = &mut self.stale[lane as usize].0;
            let skip = (*stale as usize).min(n);
            *stale -= skip as u64;
            self.pipes[i].drain(..skip);
            n -= skip;
        }
        while let Some((due, generation)) = self.closing[lane as usize].front_mut().filter(|_| sender_is_edge)
        {
            // The tail of a connection the edge closed, then its end.
            let last = (*due as usize).min(n);
            *due -= last as u64;
            let (done, generation) = (*due == 0, *generation);
            let bytes: Vec<u8> = self.pipes[i].drain(..last).collect();
            self.core.session.handle_bytes(lane, generation, &bytes, now);
            n -= last;
            if !done {
                break;
            }
            self.closing[lane as usize].pop_front();
            self.core.session.lane_disconnected(lane, generation, now);
        }
        if n == 0 {
            return;
        }
        let bytes: Vec<u8> = self.pipes[i].drain(..n).collect();
        let to = self.end(!sender_is_edge);
        to.session.handle_bytes(lane, to.generation[lane as usize], &bytes, now);
    }
}

/// Move frames between two sessions until neither has anything to send (set-up only).
fn exchange(a: &mut Session, ga: &[u64], b: &mut Session, gb: &[u64]) {
    let mut buf = Vec::new();
    loop {
        let mut moved = false;
        for lane in 0..ga.len() {
            moved |= send_all(a, ga[lane], b, gb[lane], lane as u16, &mut buf);
            moved |= send_all(b, gb[lane], a, ga[lane], lane as u16, &mut buf);
        }
        if !moved {
            return;
        }
    }
}

/// Everything `from` has for `lane`, handed to `to`. Returns whether anything moved.
fn send_all(
    from: &mut Session,
    gen_from: u64,
    to: &mut Session,
    gen_to: u64,
    lane: u16,
    buf: &mut Vec<u8>,
) -> bool {
    buf.clear();
    while from.poll_transmit(lane, gen_from, buf, usize::MAX, Instant::ZERO) {}
    if !buf.is_empty() {
        to.handle_bytes(lane, gen_to, buf, Instant::ZERO);
    }
    !buf.is_empty()
}

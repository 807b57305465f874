//! The multiplexing session between one edge and one core: streams, per-stream credit,
//! the thin-first scheduler, and per-lane replay buffers for resumption. Sans-IO.
//!
//! # Call order (quinn-proto `Connection` style)
//! - When a trunk connection for lane `l` is established (TLS done), call
//!   [`Session::lane_connected`]; it returns a generation number that every later call
//!   for that connection passes, so bytes from a superseded connection are ignored.
//! - Feed received trunk bytes to [`Session::handle_bytes`].
//! - Fill the socket with [`Session::poll_transmit`] until it returns `false`.
//! - When the connection fails, call [`Session::lane_disconnected`].
//! - Application side: [`Session::open_stream`] (edge), [`Session::stream_send`],
//!   [`Session::stream_finish`], [`Session::stream_consumed`] (after the bytes of a
//!   `Data` event were written to the local socket — this is what returns credit, so a
//!   slow reader holds at most one window), [`Session::stream_reset`].
//! - After every call drain [`Session::poll_event`]; call [`Session::handle_timeout`]
//!   at [`Session::poll_timeout`].
//!
//! # Resumption
//! Every reliable frame (open, data, close, reset, credit, go-away) sent on a lane gets
//! the next sequence number of that lane (implicitly: the count of reliable frames sent
//! before it) and is kept, encoded, until the peer's cumulative `Ack` covers it. A new
//! connection for the lane starts with `Hello { next_expected }` from both sides; each
//! side drops what the other already has and re-sends the rest in order. All frames of
//! a stream travel on one lane (`id % lanes`), so per-stream order survives. A peer
//! that does not know the session, or a lane that stays down longer than the resume
//! timeout, fails the session: every stream gets a `Reset` event with
//! [`ResetCode::ResumeFailed`].
//!
//! # Adaptive lanes (issue 20; off while `max_lanes == lanes`)
//! Every [`ADAPT_TICK`] each side measures its lanes ([`super::adapt::LaneMeter`]). When
//! a lane's backlog in time — (bytes queued for it + its unacknowledged bytes) ÷
//! delivery rate, minus one round trip — averaged over a window of `lane_sustain_rtts`
//! × its minimum RTT exceeds `lane_open_rtts` × that RTT, the side doubles its lanes (up to
//! `max_lanes`) and says so in a `Lanes` frame (on lane 0 only, so
//! values cannot overtake each other); the edge dials every lane
//! either side wants. When a lane comes up, streams are rebalanced so each open lane
//! carries ⌊n / k⌋ or ⌈n / k⌉ of them. A stream **moves only at a frame boundary and
//! only once the peer acknowledged every reliable frame it sent on its old lane**: the
//! peer then has processed all of it, so nothing sent on the new lane can overtake
//! it, and no sequence numbers or reordering buffer are needed at the receiver (a
//! handover marker would move sooner but needs both). The cost: a bulk stream's data
//! waits up to one RTT of the old lane; a thin stream's does not wait — it keeps
//! sending on the old lane and moves at the first ack that leaves nothing of it
//! outstanding (between two of its messages). The top extra lane, once it carried no stream
//! data for `lane_idle_hold` while no lane was backlogged, is given up: its streams
//! are moved down, and once neither side wants it the edge asks the core, on that
//! lane, to close it (`LaneClose`) and closes the connection on the core's answer
//! (`Closing`).
//!
//! # Bulk in flight (`bulk_limit`)
//! Unacknowledged bulk data bytes (summed over lanes) are kept below
//! [`super::adapt::bulk_inflight_limit`]; past it only thin streams send, so a thin
//! frame waits behind at most that much bulk data (plus one frame) in the trunk.

use std::collections::{HashMap, VecDeque};

use serde::Deserialize;

use super::adapt::{self, LaneMeter};
use super::frame::{
    DecodeError, Frame, FrameDecoder, FrameType, Hello, ResetCode, StreamId, FLAG_ADAPTIVE, FLAG_HELD,
    FLAG_NEW, FLAG_UNKNOWN_SESSION, HEADER_LEN,
};
use super::sched::{Class, RateMeter, Scheduler};
use super::stats::Stats;
use crate::time::{Duration, Instant};

/// Which end of the trunk this session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Regional proxy: accepts clients, opens streams, dials the core.
    Edge,
    /// Data-centre side: accepts trunks, connects streams to configured targets.
    Core,
}

/// Session parameters. Defaults are documented on [`Config::default`].
#[derive(Clone, Debug)]
pub struct Config {
    /// Trunk connections (lanes) per session.
    pub lanes: u16,
    /// Largest data frame payload; larger writes are split.
    pub max_payload: u32,
    /// Receive window granted to each stream (its peer's initial credit).
    pub stream_window: u32,
    /// Bytes a stream may have queued for the trunk but not yet framed.
    pub stream_buffer: usize,
    /// Bytes all streams together may hold in send queues plus replay buffers.
    pub total_buffer: usize,
    /// Concurrent streams allowed.
    pub max_streams: usize,
    /// A stream is thin while it sent fewer than this many bytes in about `thin_tau`.
    pub thin_bytes: u32,
    /// Time constant of the thin-stream rate meter.
    pub thin_tau: Duration,
    /// Ping period on an idle lane.
    pub ping_interval: Duration,
    /// A lane with nothing received for this long (or 21 path RTTs, if longer: TCP's
    /// own silence while it retries, [`IDLE_RTTS`]) is declared dead.
    pub idle_timeout: Duration,
    /// How long a lane may stay down before the session's streams are failed.
    pub resume_timeout: Duration,
    /// Longest an acknowledgement is delayed.
    pub ack_delay: Duration,
    /// Acknowledge at once after this many reliable frames.
    pub ack_every: u64,
    /// Most lanes (adaptive lanes): `lanes` are always open, up to `max_lanes` are
    /// opened on demand. `max_lanes <= lanes` turns adaptation off.
    pub max_lanes: u16,
    /// How the lane count adapts (with `max_lanes > lanes`).
    pub lane_rule: LaneRule,
    /// Open a lane when a lane's backlog in time exceeds this many of its RTTs …
    pub lane_open_rtts: f64,
    /// … for this many of its RTTs (the held rule's window, too).
    pub lane_sustain_rtts: f64,
    /// An extra lane that carried no stream data for this long is closed.
    pub lane_idle_hold: Duration,
    /// Keep unacknowledged bulk bytes below the bulk-in-flight limit.
    pub bulk_limit: bool,
    /// Floor of the bulk-in-flight limit, bytes.
    pub bulk_floor: usize,
    /// With two or more lanes open and a bulk stream present, keep lane 0 for thin
    /// streams.
    pub reserve_thin_lane: bool,
}

/// How an adaptive session decides how many lanes it wants (the simulator's
/// `mux.lane_rule`, "backlog" or "held").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LaneRule {
    /// Double the lanes when a lane's backlog in time stays above `lane_open_rtts` RTTs
    /// over `lane_sustain_rtts` RTTs; give the top extra lane up after `lane_idle_hold`
    /// without stream data. Never fewer than `lanes`.
    Backlog,
    /// Double the lanes when more than [`adapt::HELD_GROW`] of the open lanes' time was
    /// held up (a frame unacknowledged after [`adapt::HELD_RTTS`] RTTs), over windows
    /// of `lane_sustain_rtts` RTTs; halve them when under [`adapt::HELD_CALM`] was held
    /// over the last [`adapt::HELD_CALM_WINDOWS`] windows together. `lanes` is the
    /// count at the start; the rule may go down to one.
    Held,
}

/// How often the adaptive-lane and bulk-limit measurements run (when either is on).
/// Short against the paths' RTTs (tens to hundreds of ms), long against a frame.
pub const ADAPT_TICK: Duration = Duration::from_millis(20);

/// How often an adaptive session reports its lanes' streams ([`Event::LaneReport`]).
pub const LANE_REPORT: Duration = Duration::from_secs(5);

/// A stream's `last_seq` while its `Open` has not been sent: it cannot move.
const PINNED: u64 = u64::MAX;

/// Path RTTs a lane may stay silent before it is declared dead, if that exceeds
/// `idle_timeout`: TCP itself is silent while it retries, and a segment lost three times
/// in a row on a fresh connection (RTO = 3 × RTT after the handshake's sample, RFC 6298
/// §2.2 as Linux applies it) is retried after 3 + 6 + 12 RTTs. At 5 % loss that is one
/// repair in 8,000; declaring the lane dead instead replays its frames over a new
/// connection, which costs seconds on such a path.
const IDLE_RTTS: u32 = 21;

impl Default for Config {
    /// - one lane; 16 KiB frames (bounds the wait of a thin frame behind a bulk one);
    /// - 1 MiB stream window (≈ 80 Mbit/s per stream at 100 ms RTT), 256 KiB stream send
    ///   buffer, 256 MiB total, 4096 streams;
    /// - thin below 32 KiB per 100 ms (≈ 2.6 Mbit/s);
    /// - ping every 1 s, dead after 5 s silence, resume within 30 s;
    /// - ack after 5 ms or 64 frames;
    /// - adaptive lanes off (`max_lanes = 1`); when on, the backlog rule: open above 1
    ///   RTT of backlog held for 4 RTTs, close an extra lane idle for 10 s;
    /// - bulk-in-flight limit off (floor 64 KiB when on); no reserved thin lane.
    fn default() -> Self {
        Config {
            lanes: 1,
            max_payload: 16 * 1024,
            stream_window: 1024 * 1024,
            stream_buffer: 256 * 1024,
            total_buffer: 256 * 1024 * 1024,
            max_streams: 4096,
            thin_bytes: 32 * 1024,
            thin_tau: Duration::from_millis(100),
            ping_interval: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(5),
            resume_timeout: Duration::from_secs(30),
            ack_delay: Duration::from_millis(5),
            ack_every: 64,
            max_lanes: 1,
            lane_rule: LaneRule::Backlog,
            lane_open_rtts: 1.0,
            lane_sustain_rtts: 4.0,
            lane_idle_hold: Duration::from_secs(10),
            bulk_limit: false,
            bulk_floor: 64 * 1024,
            reserve_thin_lane: false,
        }
    }
}

impl Config {
    /// Lanes are opened and closed on demand.
    pub fn adaptive(&self) -> bool {
        self.max_lanes > self.lanes.max(1)
    }

    /// Fewest lanes a side wants: `lanes`, or one under the held rule.
    fn min_lanes(&self) -> u16 {
        match self.lane_rule {
            LaneRule::Held if self.adaptive() => 1,
            _ => self.lanes.max(1),
        }
    }
}

/// What the session tells its driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// (core) The edge opened a stream to the target called `target`; connect it, or
    /// [`Session::stream_reset`] it with [`ResetCode::UnknownTarget`].
    StreamOpened {
        /// Stream id.
        id: StreamId,
        /// Target name from the edge.
        target: String,
    },
    /// Bytes for the local socket. Call [`Session::stream_consumed`] once written.
    Data {
        /// Stream id.
        id: StreamId,
        /// Payload.
        bytes: Vec<u8>,
    },
    /// The peer half-closed: shut down the local socket's write side after the data.
    Finished {
        /// Stream id.
        id: StreamId,
    },
    /// The stream is gone; abort the local socket.
    Reset {
        /// Stream id.
        id: StreamId,
        /// Why.
        code: ResetCode,
        /// Detail.
        message: String,
        /// True when the peer sent the reset, false when this side decided it.
        remote: bool,
    },
    /// A stream that could not take all bytes earlier has room again.
    Writable {
        /// Stream id.
        id: StreamId,
    },
    /// A lane finished its handshake (and replayed what the peer missed).
    LaneUp {
        /// Lane index.
        lane: u16,
        /// True for a resumption rather than the first connection.
        resumed: bool,
    },
    /// The lane's connection must be closed (idle timeout or protocol error).
    LaneDead {
        /// Lane index.
        lane: u16,
        /// Why.
        reason: String,
    },
    /// (edge) Lane `lane` is wanted and down: dial it (adaptive lanes).
    ConnectLane {
        /// Lane index.
        lane: u16,
    },
    /// An extra lane is no longer wanted by either side; its connection was given up.
    LaneClosed {
        /// Lane index.
        lane: u16,
    },
    /// (adaptive lanes) Every [`LANE_REPORT`]: how many streams each wanted lane
    /// carries now, for the driver's log (moves and lanes opened are in
    /// [`Session::stats`]).
    LaneReport {
        /// Lanes either side wants (streams are spread over these).
        wanted: u16,
        /// Streams on each wanted lane, lane 0 first.
        streams: Vec<u32>,
    },
    /// The peer is shutting down and will open no more streams.
    GoAway,
    /// The session cannot continue; all its streams were reset. Start a new one.
    SessionLost {
        /// Why.
        reason: String,
    },
}

/// Why a stream call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// No such stream (finished, reset, or never opened).
    Unknown,
    /// The stream was already finished for writing.
    Finished,
}

/// Why a stream could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// `max_streams` streams are open.
    TooManyStreams,
    /// The peer or this side is shutting down, or the session was lost.
    Closing,
    /// Only the edge opens streams.
    WrongRole,
}

/// A multiplexing session. See the module documentation for the call order.
#[derive(Debug)]
pub struct Session {
    role: Role,
    id: u64,
    cfg: Config,
    streams: HashMap<StreamId, Stream>,
    lanes: Vec<Lane>,
    events: VecDeque<Event>,
    next_stream: StreamId,
    /// Initial credit for our streams, learned from the peer's Hello.
    peer_window: u32,
    /// The edge has completed one handshake (so later Hellos ask to resume).
    established: bool,
    going_away: bool,
    peer_going_away: bool,
    lost: bool,
    /// Bytes in stream send queues plus lane replay buffers.
    buffered: usize,
    total_blocked: bool,
    stats: Stats,
    /// Lanes this side wants open (adaptive lanes; `cfg.lanes` otherwise).
    want: u16,
    /// Lanes the peer wants open (from its `Lanes` frames).
    peer_want: u16,
    /// Next measurement tick (adaptive lanes or bulk limit on).
    next_tick: Option<Instant>,
    /// Unacknowledged bulk data frame bytes, all lanes.
    bulk_inflight: usize,
    /// An ack arrived while adaptive: try pending moves (see `handle_bytes`).
    pending_moves_after_ack: bool,
    /// When the next [`Event::LaneReport`] is due.
    next_report: Instant,
    /// The held rule's window ([`LaneRule::Held`]).
    held: adapt::HeldShare,
}

#[derive(Debug)]
struct Stream {
    lane: u16,
    /// Lane the stream should move to (== `lane` when it stays).
    target: u16,
    /// Sequence number of its last reliable frame on `lane` ([`PINNED`] before its
    /// `Open` left); it may move once the lane's acks pass it.
    last_seq: Option<u64>,
    /// Since when the stream has waited to move (its data held, see `try_moves`).
    move_since: Option<Instant>,
    class: Class,
    meter: RateMeter,
    send: ByteQueue,
    /// (end offset in `queued_total` terms, time enqueued) per `stream_send` call, for
    /// the queueing-delay histogram.
    send_times: VecDeque<(u64, Instant)>,
    queued_total: u64,
    sent_total: u64,
    send_credit: u64,
    fin_queued: bool,
    fin_sent: bool,
    recv_window: u64,
    consumed_unreported: u64,
    fin_received: bool,
    queued: bool,
    blocked: bool,
}

impl Stream {
    /// Scheduled as thin: declared interactive, or (auto) below `thin_bytes` per `thin_tau`.
    fn is_thin(&mut self, cfg: &Config, now: Instant) -> bool {
        match self.class {
            Class::Interactive => true,
            Class::Bulk => false,
            Class::Auto => self.meter.value(now, cfg.thin_tau) < cfg.thin_bytes as f64,
        }
    }
}

#[derive(Debug)]
enum LaneState {
    /// No connection (see `Lane::down_since`).
    Down,
    /// Connected; waiting for the peer's Hello.
    Handshake,
    /// Exchanging frames.
    Up,
}

/// Where an unwanted lane's close handshake stands on this connection (`LaneClose`,
/// frame version 3). The edge cannot see the core's side of a lane: the core learns of
/// a lower lane count only when the edge's `Lanes` frame arrives on lane 0, and a frame
/// it sends on the lane before then would be lost with a connection the edge closed at
/// once (and its stream stall until the resume timeout fails the session, since the
/// edge never dials an unwanted lane again). So the edge asks, on the lane itself, and
/// closes when the core answers there — after its last frame on that connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closing {
    /// Nothing asked.
    No,
    /// Edge: asked, waiting for the answer. Core: asked, answers once it has nothing
    /// of its own on the lane and does not want it.
    Asked,
    /// Core: the answer is queued; sent, it is the connection's last frame.
    Answering,
    /// Core: answered; sends nothing more on this connection.
    Answered,
}

#[derive(Debug)]
struct Lane {
    state: LaneState,
    generation: u64,
    decoder: FrameDecoder,
    /// Sequence number of the next new reliable frame.
    tx_seq: u64,
    /// Encoded reliable frames not yet acknowledged; the front has `replay_base`.
    replay: VecDeque<Vec<u8>>,
    /// Per replay entry: when it was first sent and its bulk data bytes.
    replay_meta: VecDeque<(Instant, u32)>,
    replay_base: u64,
    replay_bytes: usize,
    /// Index into `replay` of the next frame to re-send after a resume.
    resend: usize,
    /// Next reliable sequence number expected from the peer.
    rx_next: u64,
    rx_acked: u64,
    /// Stream payload bytes received since the last ack (acks by byte count with
    /// `bulk_limit`).
    rx_unacked_bytes: usize,
    ack_due: Option<Instant>,
    /// Reliable control frames (open, reset, credit, go-away), in order.
    ctrl: VecDeque<Frame>,
    /// Per-connection frames (hello, ack, ping), sent first.
    urgent: VecDeque<Frame>,
    sched: Scheduler,
    last_rx: Instant,
    next_ping: Instant,
    /// Hello to send once the peer's arrives (core) — or already sent (edge).
    hello_sent: bool,
    handshakes: u64,
    /// When the lane last stopped being up (None while up). Connection attempts that
    /// fail before the handshake completes do not restart the resume timeout.
    down_since: Option<Instant>,
    meter: LaneMeter,
    /// The close handshake on this connection.
    closing: Closing,
}

impl Session {
    /// A new session. The edge picks a random `id`; the core uses the id from the
    /// edge's first `Hello`. Lanes start down at `now` (the resume timeout applies).
    pub fn new(role: Role, id: u64, cfg: Config, now: Instant) -> Session {
        let n = cfg.lanes.max(cfg.max_lanes).max(1);
        let base = cfg.lanes.max(1);
        let lanes = (0..n)
            .map(|i| Lane {
                state: LaneState::Down,
                generation: 0,
                decoder: FrameDecoder::new(cfg.max_payload.max(2 + super::frame::MAX_REASON_TEXT as u32)),
                tx_seq: 0,
                replay: VecDeque::new(),
                replay_meta: VecDeque::new(),
                replay_base: 0,
                replay_bytes: 0,
                resend: 0,
                rx_next: 0,
                rx_acked: 0,
                rx_unacked_bytes: 0,
                ack_due: None,
                ctrl: VecDeque::new(),
                urgent: VecDeque::new(),
                sched: Scheduler::new(),
                last_rx: now,
                next_ping: now,
                hello_sent: false,
                handshakes: 0,
                // Extra lanes start closed: no resume deadline until wanted.
                down_since: (i < base).then_some(now),
                meter: LaneMeter::new(now),
                closing: Closing::No,
            })
            .collect();
        let ticking = cfg.adaptive() || cfg.bulk_limit || cfg.reserve_thin_lane;
        Session {
            role,
            id,
            peer_window: cfg.stream_window,
            cfg,
            streams: HashMap::new(),
            lanes,
            events: VecDeque::new(),
            next_stream: 1,
            established: false,
            going_away: false,
            peer_going_away: false,
            lost: false,
            buffered: 0,
            total_blocked: false,
            stats: Stats::default(),
            want: base,
            peer_want: base,
            next_tick: ticking.then(|| now + ADAPT_TICK),
            bulk_inflight: 0,
            pending_moves_after_ack: false,
            next_report: now + LANE_REPORT,
            held: adapt::HeldShare::default(),
        }
    }

    /// Session id.
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Role.
    pub fn role(&self) -> Role {
        self.role
    }
    /// Configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Open streams.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }
    /// Bytes held in send queues and replay buffers.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }
    /// Streams waiting in the schedulers (thin, bulk), summed over lanes.
    pub fn queue_depth(&self) -> (usize, usize) {
        self.lanes.iter().fold((0, 0), |(t, b), l| {
            let (t2, b2) = l.sched.depth();
            (t + t2, b + b2)
        })
    }
    /// Unacknowledged reliable frames held for replay, summed over lanes.
    pub fn replay_frames(&self) -> usize {
        self.lanes.iter().map(|l| l.replay.len()).sum()
    }
    /// Lanes currently up.
    pub fn lanes_up(&self) -> usize {
        self.lanes.iter().filter(|l| matches!(l.state, LaneState::Up)).count()
    }
    /// The session failed; drop it (after draining events).
    pub fn is_lost(&self) -> bool {
        self.lost
    }
    /// This side or the peer is shutting down.
    pub fn is_going_away(&self) -> bool {
        self.going_away || self.peer_going_away
    }
    /// The lane that carries `stream` from this side: `id % lanes` with fixed lanes,
    /// the stream's current lane with adaptive ones.
    pub fn lane_of(&self, stream: StreamId) -> u16 {
        match self.streams.get(&stream) {
            Some(s) if self.cfg.adaptive() || self.cfg.reserve_thin_lane => s.lane,
            _ => (stream % self.lanes.len() as u32) as u16,
        }
    }
    /// Lanes either side wants open (the edge keeps these connected).
    pub fn lanes_wanted(&self) -> u16 {
        self.want.max(self.peer_want).max(self.cfg.min_lanes()).min(self.lanes.len() as u16)
    }
    /// Whether the edge should keep `lane` connected.
    pub fn lane_wanted(&self, lane: u16) -> bool {
        lane < self.lanes_wanted() || self.lanes.get(lane as usize).is_some_and(|l| !l.replay.is_empty())
    }
    /// Unacknowledged bulk data bytes (all lanes).
    pub fn bulk_inflight(&self) -> usize {
        self.bulk_inflight
    }
    /// The bulk-in-flight limit now (bytes), from the lanes' measurements.
    pub fn bulk_limit(&self) -> usize {
        let rate: f64 = self.lanes.iter().filter_map(|l| l.meter.rate).sum();
        let min_rtt = self.lanes.iter().filter_map(|l| l.meter.min_rtt).min();
        adapt::bulk_inflight_limit(rate, min_rtt, self.cfg.bulk_floor)
    }
    /// Smoothed ack RTT of `lane`, if measured.
    pub fn lane_srtt(&self, lane: u16) -> Option<Duration> {
        self.lanes.get(lane as usize)?.meter.srtt
    }
    /// Shedding (issue 20): true when every lane this session may open is up and even
    /// its best lane's expected added delay exceeds a direct connection's by more than
    /// `slack` ([`Session::shed_margin`]). `loss` is the trunk's packet loss as the
    /// shell measures it (e.g. `tcp_info` retransmissions ÷ segments). The edge then
    /// hands new streams to a direct path.
    pub fn should_shed(&self, loss: f64, slack: Duration) -> bool {
        self.shed_margin(loss).is_some_and(|m| m > slack.as_secs_f64())
    }

    /// What [`Session::should_shed`] compares, in seconds: the best lane's expected
    /// added delay minus a direct connection's, or `None` while it cannot be decided (a
    /// lane the session may open is not up, or not measured yet). Per lane:
    /// - path round trip `rtt`: the smallest ping RTT (pings leave every
    ///   `ping_interval` on every lane; a lane without a pong yet is not measured);
    /// - queue ahead of a new message beyond that round trip: the larger of the
    ///   session's backlog in time minus `rtt` and the ping RTT's excess over its
    ///   minimum ([`LaneMeter::ping_excess`]: delay in the trunk sockets and TCP,
    ///   the part the edge can see of the core → edge direction);
    /// - tunnel: that queue + `loss` × `rtt` ([`adapt::tunnel_added_delay`]: a loss on
    ///   a thick trunk is repaired by fast retransmit in about one round trip);
    /// - direct: `loss` × (`rtt` + 200 ms) ([`adapt::direct_added_delay`]: a thin
    ///   stream's loss waits Linux's RTO).
    ///
    /// Signed, so a shell may compare it with a negative slack (shed even when the
    /// tunnel is expected to be faster by less than that: a way to exercise the
    /// direct path).
    pub fn shed_margin(&self, loss: f64) -> Option<f64> {
        if self.lanes_up() < self.lanes.len() {
            return None;
        }
        let backlog = self.lane_backlog();
        let mut best: Option<(Duration, Duration)> = None;
        for (i, l) in self.lanes.iter().enumerate() {
            let m = &l.meter;
            let rtt = m.ping_min?;
            let by_backlog = m.backlog_time(backlog[i]).map(|bt| bt.as_secs_f64() - rtt.as_secs_f64());
            let by_ping = m.ping_excess().map(|d| d.as_secs_f64());
            let queued = match (by_backlog, by_ping) {
                (None, None) => return None,
                (a, b) => a.unwrap_or(0.0).max(b.unwrap_or(0.0)).max(0.0),
            };
            let tunnel = adapt::tunnel_added_delay(Duration::from_secs_f64(queued), rtt, loss);
            if best.is_none_or(|(t, _)| tunnel < t) {
                best = Some((tunnel, adapt::direct_added_delay(rtt, loss)));
            }
        }
        best.map(|(tunnel, direct)| tunnel.as_secs_f64() - direct.as_secs_f64())
    }
    /// Number of lanes.
    pub fn lane_count(&self) -> u16 {
        self.lanes.len() as u16
    }

    // ----- lanes -------------------------------------------------------------------

    /// A trunk connection for `lane` is ready (after TLS and authentication). Any
    /// previous connection of the lane is superseded. Returns its generation.
    pub fn lane_connected(&mut self, lane: u16, now: Instant) -> u64 {
        let cfg_max = self.cfg.max_payload.max(2 + super::frame::MAX_REASON_TEXT as u32);
        let Some(l) = self.lanes.get_mut(lane as usize) else { return 0 };
        if matches!(l.state, LaneState::Up | LaneState::Handshake) {
            self.stats.lane_drops += 1;
        }
        l.down_since.get_or_insert(now);
        l.generation += 1;
        l.state = LaneState::Handshake;
        l.decoder = FrameDecoder::new(cfg_max);
        l.urgent.clear();
        l.ack_due = None;
        l.rx_unacked_bytes = 0;
        l.last_rx = now;
        l.next_ping = now + self.cfg.ping_interval;
        l.hello_sent = false;
        l.closing = Closing::No;
        if self.role == Role::Edge {
            let hello = self.hello_for(lane, 0);
            let l = &mut self.lanes[lane as usize];
            l.urgent.push_back(hello);
            l.hello_sent = true;
        }
        self.lanes[lane as usize].generation
    }

    /// The connection `generation` of `lane` failed or was closed.
    pub fn lane_disconnected(&mut self, lane: u16, generation: u64, now: Instant) {
        let Some(l) = self.lanes.get_mut(lane as usize) else { return };
        if l.generation != generation || matches!(l.state, LaneState::Down) {
            return;
        }
        l.state = LaneState::Down;
        l.down_since.get_or_insert(now);
        l.urgent.clear();
        l.closing = Closing::No;
        self.stats.lane_drops += 1;
        if self.peer_going_away && self.streams.is_empty() {
            self.fail("peer went away", now);
        }
    }

    /// Bytes received on connection `generation` of `lane`.
    pub fn handle_bytes(&mut self, lane: u16, generation: u64, bytes: &[u8], now: Instant) {
        let Some(l) = self.lanes.get_mut(lane as usize) else { return };
        if l.generation != generation || matches!(l.state, LaneState::Down) || self.lost {
            return;
        }
        self.stats.trunk_bytes_rx += bytes.len() as u64;
        l.last_rx = now;
        l.decoder.push(bytes);
        loop {
            let l = &mut self.lanes[lane as usize];
            if l.generation != generation || matches!(l.state, LaneState::Down) || self.lost {
                return;
            }
            match l.decoder.next_frame() {
                Ok(Some(frame)) => self.handle_frame(lane, frame, now),
                Ok(None) => {
                    if std::mem::take(&mut self.pending_moves_after_ack) {
                        self.try_moves(now);
                    }
                    return;
                }
                Err(e) => {
                    self.protocol_error(lane, &format!("undecodable trunk bytes: {e}"), now);
                    return;
                }
            }
        }
    }

    /// Append frames for connection `generation` of `lane` to `out` until it holds at
    /// least `max` bytes or nothing is ready. Returns true if anything was appended.
    pub fn poll_transmit(
        &mut self,
        lane: u16,
        generation: u64,
        out: &mut Vec<u8>,
        max: usize,
        now: Instant,
    ) -> bool {
        let start = out.len();
        let Some(l) = self.lanes.get_mut(lane as usize) else { return false };
        if l.generation != generation || matches!(l.state, LaneState::Down) || self.lost {
            return false;
        }
        if l.closing == Closing::Answered {
            return false;
        }
        // Per-connection frames first: hello, acks, pongs.
        while let Some(f) = l.urgent.pop_front() {
            self.stats.frames_tx[f.kind() as usize] += 1;
            f.encode(out);
            if f == (Frame::LaneClose { ok: true }) {
                // The core's answer ends what it sends on this connection.
                l.closing = Closing::Answered;
                l.urgent.clear();
                self.stats.trunk_bytes_tx += (out.len() - start) as u64;
                return true;
            }
        }
        if !matches!(l.state, LaneState::Up) {
            self.stats.trunk_bytes_tx += (out.len() - start) as u64;
            return out.len() > start;
        }
        // Then what the peer missed before this connection.
        while l.resend < l.replay.len() && out.len() < max {
            out.extend_from_slice(&l.replay[l.resend]);
            l.resend += 1;
            self.stats.frames_replayed += 1;
        }
        // Then new reliable control frames, then stream data by the scheduler.
        while out.len() < max {
            let l = &mut self.lanes[lane as usize];
            if let Some(f) = l.ctrl.pop_front() {
                let seq = self.send_reliable(lane, &f, out, 0, now);
                if let Frame::Open { stream, .. } = f {
                    // The stream may move once its Open is acknowledged.
                    if let Some(s) = self.streams.get_mut(&stream) {
                        s.last_seq = Some(seq);
                    }
                }
                continue;
            }
            if !self.send_next_stream_frame(lane, out, now) {
                break;
            }
        }
        self.stats.trunk_bytes_tx += (out.len() - start) as u64;
        out.len() > start
    }

    /// True while connection `generation` is the live connection of `lane`; when false
    /// the driver closes it (superseded, idle timeout, or session lost).
    pub fn lane_is_current(&self, lane: u16, generation: u64) -> bool {
        self.lanes
            .get(lane as usize)
            .is_some_and(|l| !self.lost && l.generation == generation && !matches!(l.state, LaneState::Down))
    }

    /// True if [`Session::poll_transmit`] would write something on `lane`.
    pub fn wants_transmit(&self, lane: u16) -> bool {
        let Some(l) = self.lanes.get(lane as usize) else { return false };
        if self.lost || matches!(l.state, LaneState::Down) || l.closing == Closing::Answered {
            return false;
        }
        !l.urgent.is_empty()
            || (matches!(l.state, LaneState::Up)
                && (l.resend < l.replay.len() || !l.ctrl.is_empty() || {
                    let (thin, bulk) = l.sched.depth();
                    thin > 0 || (bulk > 0 && self.bulk_ok())
                }))
    }

    /// How long a lane may receive nothing before it is declared dead: `idle_timeout`,
    /// or [`IDLE_RTTS`] path RTTs (the smallest ping RTT of any lane) if longer.
    fn idle_limit(&self) -> Duration {
        let rtt = self.lanes.iter().filter_map(|l| l.meter.ping_min).min();
        rtt.map_or(self.cfg.idle_timeout, |r| self.cfg.idle_timeout.max(r.saturating_mul(IDLE_RTTS as u64)))
    }

    /// When [`Session::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.lost {
            return None;
        }
        let mut t: Option<Instant> = None;
        let mut min = |x: Instant| t = Some(t.map_or(x, |y| y.min(x)));
        if let Some(x) = self.next_tick {
            min(x);
        }
        let idle = self.idle_limit();
        for l in &self.lanes {
            if let Some(d) = l.down_since {
                min(d + self.cfg.resume_timeout);
            }
            match l.state {
                LaneState::Down => {}
                LaneState::Handshake => min(l.last_rx + idle),
                LaneState::Up => {
                    min(l.last_rx + idle);
                    min(l.next_ping);
                    if let Some(a) = l.ack_due {
                        min(a);
                    }
                }
            }
        }
        t
    }

    /// Fire every timer that is due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.lost {
            return;
        }
        if self.next_tick.is_some_and(|x| now >= x) {
            self.next_tick = Some(now + ADAPT_TICK);
            self.adapt(now);
        }
        let idle = self.idle_limit();
        for i in 0..self.lanes.len() {
            // Only lanes someone wants (or that hold frames) have a resume deadline.
            let needed = self.lane_wanted(i as u16);
            let lane = i as u16;
            let l = &mut self.lanes[i];
            if matches!(l.state, LaneState::Down) {
                if !needed {
                    l.down_since = None;
                } else if l.down_since.is_none() {
                    l.down_since = Some(now);
                }
            }
            if l.down_since.is_some_and(|d| now >= d + self.cfg.resume_timeout) {
                let msg = format!("trunk lane {lane} down longer than the resume timeout");
                self.fail(&msg, now);
                return;
            }
            match l.state {
                LaneState::Down => {}
                LaneState::Handshake | LaneState::Up => {
                    if now >= l.last_rx + idle {
                        l.state = LaneState::Down;
                        l.down_since.get_or_insert(now);
                        l.urgent.clear();
                        self.stats.lane_drops += 1;
                        self.events.push_back(Event::LaneDead { lane, reason: "idle timeout".into() });
                        continue;
                    }
                    if !matches!(l.state, LaneState::Up) {
                        continue;
                    }
                    if l.ack_due.is_some_and(|a| now >= a) {
                        l.ack_due = None;
                        l.rx_acked = l.rx_next;
                        l.rx_unacked_bytes = 0;
                        l.urgent.push_back(Frame::Ack { next_expected: l.rx_next });
                    }
                    if now >= l.next_ping {
                        l.next_ping = now + self.cfg.ping_interval;
                        l.urgent.push_back(Frame::Ping { pong: false, opaque: now.as_nanos() });
                    }
                }
            }
        }
    }

    /// Next event for the driver.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ----- streams -----------------------------------------------------------------

    /// (edge) Open a stream to the core's target called `target`. Data may be sent at
    /// once; it flows when the lane is up.
    pub fn open_stream(&mut self, target: &str, class: Class, now: Instant) -> Result<StreamId, OpenError> {
        if self.role != Role::Edge {
            return Err(OpenError::WrongRole);
        }
        if self.lost || self.going_away || self.peer_going_away {
            return Err(OpenError::Closing);
        }
        if self.streams.len() >= self.cfg.max_streams {
            return Err(OpenError::TooManyStreams);
        }
        let id = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(1).max(1);
        let lane = if self.cfg.adaptive() || self.cfg.reserve_thin_lane {
            self.least_loaded_lane()
        } else {
            self.lane_of(id)
        };
        let mut stream = self.new_stream(lane, class, now);
        stream.last_seq = Some(PINNED);
        self.streams.insert(id, stream);
        self.lanes[lane as usize].ctrl.push_back(Frame::Open { stream: id, target: target.to_owned() });
        self.stats.streams_opened += 1;
        Ok(id)
    }

    /// (core) Set the scheduling class of a stream the edge opened.
    pub fn set_class(&mut self, id: StreamId, class: Class) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.class = class;
        }
    }

    /// Queue bytes from the local socket. Returns how many were taken; fewer than
    /// offered means the stream's or the session's buffer is full — wait for
    /// [`Event::Writable`].
    pub fn stream_send(&mut self, id: StreamId, data: &[u8], now: Instant) -> Result<usize, StreamError> {
        let total_room = self.cfg.total_buffer.saturating_sub(self.buffered);
        let s = self.streams.get_mut(&id).ok_or(StreamError::Unknown)?;
        if s.fin_queued {
            return Err(StreamError::Finished);
        }
        let room = self.cfg.stream_buffer.saturating_sub(s.send.len()).min(total_room);
        let n = data.len().min(room);
        if n < data.len() {
            s.blocked = true;
            if total_room < data.len() {
                self.total_blocked = true;
            }
        }
        if n == 0 {
            return Ok(0);
        }
        s.send.push(&data[..n]);
        s.queued_total += n as u64;
        s.send_times.push_back((s.queued_total, now));
        self.buffered += n;
        self.make_ready(id, now);
        Ok(n)
    }

    /// The local socket reached end of file: send `Close` after the queued bytes.
    pub fn stream_finish(&mut self, id: StreamId, now: Instant) {
        if let Some(s) = self.streams.get_mut(&id) {
            if !s.fin_queued {
                s.fin_queued = true;
                self.make_ready(id, now);
            }
        }
    }

    /// `n` bytes of `Data` events were written to the local socket: return credit.
    pub fn stream_consumed(&mut self, id: StreamId, n: usize) {
        let window = self.cfg.stream_window as u64;
        let Some(s) = self.streams.get_mut(&id) else { return };
        s.consumed_unreported += n as u64;
        // Grant in half-window steps: a thin stream never causes credit traffic, a
        // bulk one gets a frame per half window.
        if s.consumed_unreported >= window / 2 && !s.fin_received {
            let inc = s.consumed_unreported.min(u32::MAX as u64) as u32;
            s.consumed_unreported -= inc as u64;
            s.recv_window += inc as u64;
            let lane = s.lane;
            self.lanes[lane as usize].ctrl.push_back(Frame::Credit { stream: id, increment: inc });
        }
    }

    /// Abort a stream: drop its queued bytes and tell the peer.
    pub fn stream_reset(&mut self, id: StreamId, code: ResetCode, message: &str) {
        if let Some(s) = self.streams.remove(&id) {
            self.buffered -= s.send.len();
            self.stats.streams_reset += 1;
            self.lanes[s.lane as usize].ctrl.push_back(Frame::Reset {
                stream: id,
                code,
                message: message.to_owned(),
            });
        }
    }

    /// Begin a graceful shutdown: tell the peer no more streams will be opened.
    pub fn go_away(&mut self) {
        if self.going_away {
            return;
        }
        self.going_away = true;
        for l in &mut self.lanes {
            l.ctrl.push_back(Frame::GoAway { code: ResetCode::Shutdown });
        }
    }

    /// Reset every stream (shutdown after the grace period).
    pub fn reset_all(&mut self, code: ResetCode, message: &str) {
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for id in ids {
            self.stream_reset(id, code, message);
            self.events.push_back(Event::Reset { id, code, message: message.to_owned(), remote: false });
        }
    }

    /// Nothing left to send or to be acknowledged (for a clean shutdown).
    pub fn is_drained(&self) -> bool {
        self.lanes.iter().all(|l| l.replay.is_empty() && l.ctrl.is_empty() && l.sched.depth() == (0, 0))
    }

    // ----- internals ---------------------------------------------------------------

    /// Bulk frames may be sent (the bulk-in-flight limit is off or not reached).
    fn bulk_ok(&self) -> bool {
        !self.cfg.bulk_limit || self.bulk_inflight < self.bulk_limit()
    }

    /// Everything `s` sent on its lane is acknowledged (and its Open has left).
    fn movable(&self, s: &Stream) -> bool {
        match s.last_seq {
            None => true,
            Some(PINNED) => false,
            Some(q) => q < self.lanes[s.lane as usize].replay_base,
        }
    }

    /// Lanes streams may be assigned to: wanted by either side and up (lane 0 if none).
    /// Either side: the core starts at one lane and learns the edge's start count from
    /// its `Lanes` frame; with only its own want it would crowd every stream it sends
    /// onto lane 0 while the edge keeps 15 more lanes open.
    fn active_lanes(&self) -> Vec<u16> {
        let n = if self.cfg.adaptive() { self.lanes_wanted() } else { self.lanes.len() as u16 };
        // A lane the core has answered a close on carries nothing more of it.
        let v: Vec<u16> = (0..n)
            .filter(|&i| {
                let l = &self.lanes[i as usize];
                matches!(l.state, LaneState::Up)
                    && !matches!(l.closing, Closing::Answering | Closing::Answered)
            })
            .collect();
        if v.is_empty() {
            vec![0]
        } else {
            v
        }
    }

    /// Streams whose target is each lane.
    fn target_counts(&self) -> Vec<usize> {
        let mut c = vec![0; self.lanes.len()];
        for s in self.streams.values() {
            c[s.target as usize] += 1;
        }
        c
    }

    /// Lane for a new stream: the active lane with the fewest streams (lowest index on
    /// ties), skipping a reserved thin lane only for streams declared bulk later.
    fn least_loaded_lane(&self) -> u16 {
        let c = self.target_counts();
        let active = self.active_lanes();
        *active.iter().min_by_key(|&&i| (c[i as usize], i)).unwrap_or(&0)
    }

    /// Give every stream a target lane among the active ones so each carries about as
    /// many streams, moving as few as possible (deterministic: by stream id). With
    /// `reserve_thin_lane`, bulk streams avoid lane 0 while another lane is active.
    fn rebalance(&mut self, now: Instant) {
        let active = self.active_lanes();
        let mut ids: Vec<StreamId> = self.streams.keys().copied().collect();
        ids.sort_unstable();
        let cfg = &self.cfg;
        let bulk: HashMap<StreamId, bool> =
            self.streams.iter_mut().map(|(&id, s)| (id, !s.is_thin(cfg, now))).collect();
        let reserve = self.cfg.reserve_thin_lane && active.len() >= 2 && bulk.values().any(|&b| b);
        let allowed =
            |id: StreamId, lane: u16| active.contains(&lane) && !(reserve && lane == 0 && bulk[&id]);
        let mut per_lane: Vec<Vec<StreamId>> = vec![Vec::new(); self.lanes.len()];
        let mut pool = Vec::new();
        for &id in &ids {
            let t = self.streams[&id].target;
            if allowed(id, t) {
                per_lane[t as usize].push(id);
            } else {
                pool.push(id);
            }
        }
        // Each lane keeps ⌊n / k⌋ streams, or one more on the `n mod k` lanes that carry
        // the most now (a ceiling for all would let lanes that come up last stay empty:
        // 52 lanes of 4 already hold 200 streams, 12 of 64 lanes get none).
        let (lo, extra) = (ids.len() / active.len(), ids.len() % active.len());
        let mut fullest = active.clone();
        fullest.sort_by_key(|&l| (std::cmp::Reverse(per_lane[l as usize].len()), l));
        for (i, &l) in fullest.iter().enumerate() {
            let keep = lo + usize::from(i < extra);
            while per_lane[l as usize].len() > keep {
                pool.push(per_lane[l as usize].pop().expect("over its share"));
            }
        }
        pool.sort_unstable();
        for id in pool {
            let best = active
                .iter()
                .copied()
                .filter(|&l| allowed(id, l))
                .min_by_key(|&l| (per_lane[l as usize].len(), l))
                .unwrap_or(active[0]);
            per_lane[best as usize].push(id);
            if let Some(s) = self.streams.get_mut(&id) {
                s.target = best;
            }
        }
        self.try_moves(now);
    }

    /// Move every stream whose target differs from its lane and that may move now.
    fn try_moves(&mut self, now: Instant) {
        let mut ids: Vec<StreamId> =
            self.streams.iter().filter(|(_, s)| s.target != s.lane).map(|(&id, _)| id).collect();
        ids.sort_unstable();
        for id in ids {
            let thin = self.streams.get_mut(&id).expect("listed above").is_thin(&self.cfg, now);
            let s = &self.streams[&id];
            if !self.movable(s) {
                if thin {
                    // Not held (see `send_next_stream_frame`): it moves at a later ack.
                    self.streams.get_mut(&id).expect("listed above").move_since = None;
                    self.make_ready(id, now);
                    continue;
                }
                // A bulk stream is held. The old lane's acks travel on its reverse
                // connection, itself a thin stream that can sit in RTO backoff for
                // seconds on a lossy path: give the move up after twice the lane's usual
                // ack delay (SRTT: it includes the socket's queue) and send on the old
                // lane again.
                let rtt = self.lanes[s.lane as usize].meter.srtt.unwrap_or(Duration::from_millis(100));
                let give_up = rtt.saturating_mul(2).max(ADAPT_TICK);
                let s = self.streams.get_mut(&id).expect("listed above");
                let since = *s.move_since.get_or_insert(now);
                if now.saturating_since(since) >= give_up {
                    s.target = s.lane;
                    s.move_since = None;
                    self.stats.move_giveups += 1;
                    self.make_ready(id, now);
                }
                continue;
            }
            let old = s.lane;
            let s = self.streams.get_mut(&id).expect("listed above");
            if s.queued {
                self.lanes[old as usize].sched.remove(id);
                s.queued = false;
            }
            s.lane = s.target;
            s.last_seq = None;
            s.move_since = None;
            self.stats.stream_moves += 1;
            self.make_ready(id, now);
        }
    }

    /// This side's wanted lane count changed (or the peer's): tell the peer, dial
    /// newly wanted lanes (edge), and rebalance.
    fn set_want(&mut self, want: u16, now: Instant) {
        let before = self.lanes_wanted();
        self.stats.lanes_opened += u64::from(want.saturating_sub(self.want));
        self.stats.lanes_closed += u64::from(self.want.saturating_sub(want));
        self.want = want;
        // Only on lane 0 (always wanted; re-sent when it comes up): lanes are
        // independent byte streams, and a stale value overtaking a newer one on
        // another lane would close a lane still in use.
        if matches!(self.lanes[0].state, LaneState::Up) {
            self.lanes[0].urgent.push_back(Frame::Lanes { want });
        }
        self.request_lanes(before, now);
        self.rebalance(now);
    }

    /// (edge) Ask the driver to dial lanes wanted now that were not before.
    fn request_lanes(&mut self, before: u16, now: Instant) {
        let after = self.lanes_wanted();
        for lane in before..after {
            let l = &mut self.lanes[lane as usize];
            l.meter.last_data = now;
            if matches!(l.state, LaneState::Down) && self.role == Role::Edge {
                self.events.push_back(Event::ConnectLane { lane });
            }
        }
    }

    /// Per lane: bytes ahead of a newly queued one — stream bytes queued for the lane
    /// (with credit to send) plus the lane's unacknowledged frames (in the socket, in
    /// flight, or unread at the peer). The socket holds up to TCP_NOTSENT_LOWAT
    /// unsent bytes, often more than the session's own queue, so both count.
    fn lane_backlog(&self) -> Vec<u64> {
        let mut backlog: Vec<u64> = self.lanes.iter().map(|l| l.replay_bytes as u64).collect();
        for s in self.streams.values() {
            if s.send_credit > 0 {
                backlog[s.lane as usize] += s.send.len() as u64;
            }
        }
        backlog
    }

    /// One measurement tick: update lane meters, open or give up lanes, move streams.
    fn adapt(&mut self, now: Instant) {
        let backlog = self.lane_backlog();
        for (l, &b) in self.lanes.iter_mut().zip(&backlog) {
            l.meter.tick(now, b > 0);
        }
        if !self.cfg.adaptive() {
            if self.cfg.reserve_thin_lane {
                self.rebalance(now);
            }
            return;
        }
        let open_now = self.lanes_wanted();
        let all_up = (0..open_now as usize).all(|i| matches!(self.lanes[i].state, LaneState::Up));
        match self.cfg.lane_rule {
            LaneRule::Backlog => self.backlog_rule(now, &backlog, open_now, all_up),
            LaneRule::Held => self.held_rule(now, open_now, all_up),
        }
        self.try_moves(now);
        match self.role {
            Role::Edge => self.close_unwanted_lanes(now),
            Role::Core => self.answer_lane_closes(),
        }
        if now >= self.next_report {
            self.next_report = now + LANE_REPORT;
            let wanted = self.lanes_wanted();
            let mut streams = vec![0u32; wanted as usize];
            for s in self.streams.values() {
                if let Some(n) = streams.get_mut(s.lane as usize) {
                    *n += 1;
                }
            }
            self.events.push_back(Event::LaneReport { wanted, streams });
        }
    }

    /// [`LaneRule::Backlog`]: double the lanes when a wanted lane was backlogged past
    /// `lane_open_rtts` on average over the last window of `lane_sustain_rtts` RTTs;
    /// give the top extra lane up once it carried no stream data for `lane_idle_hold`
    /// while no lane was over.
    fn backlog_rule(&mut self, now: Instant, backlog: &[u64], open_now: u16, all_up: bool) {
        // Which wanted lanes were backlogged past the threshold, on average, over the
        // last window of `lane_sustain_rtts` RTTs?
        let mut any_over = false;
        let mut trigger = false;
        for (l, &b) in self.lanes.iter_mut().zip(backlog).take(open_now as usize) {
            // Delivery delay of a byte queued now (Little's law over everything ahead
            // of it, in the session and in the socket) beyond one round trip.
            let rtt = l.meter.min_rtt;
            let excess = match (rtt, l.meter.backlog_time(b)) {
                (Some(rtt), Some(bt)) if matches!(l.state, LaneState::Up) => {
                    Some(bt.as_secs_f64() - rtt.as_secs_f64())
                }
                _ => None,
            };
            let Some(rtt) = rtt.map(|r| r.as_secs_f64()) else { continue };
            let open = rtt * self.cfg.lane_open_rtts;
            any_over |= excess.is_some_and(|x| x > open);
            let span = Duration::from_secs_f64(rtt * self.cfg.lane_sustain_rtts);
            if l.meter.judge_backlog(now, excess, span).is_some_and(|mean| mean > open) {
                trigger = true;
            }
        }
        let base = self.cfg.lanes.max(1);
        if trigger && all_up && open_now < self.lanes.len() as u16 {
            // The new lanes must take their share before the next decision.
            for l in &mut self.lanes {
                l.meter.restart_judging();
            }
            self.double_lanes(open_now, now);
        } else if !any_over && self.want > base {
            let top = (self.want - 1) as usize;
            if now.saturating_since(self.lanes[top].meter.last_data) >= self.cfg.lane_idle_hold {
                self.set_want(self.want - 1, now);
            }
        }
    }

    /// [`LaneRule::Held`]: per tick, count the open lanes whose oldest unacknowledged
    /// frame is older than [`adapt::HELD_RTTS`] of their minimum RTTs; per window of
    /// `lane_sustain_rtts` of the smallest minimum RTT ([`adapt::HeldShare`]), want twice
    /// the lanes open, half of them, or as many. Each side judges its own frames; the
    /// lanes open are the larger want of the two.
    fn held_rule(&mut self, now: Instant, open_now: u16, all_up: bool) {
        let (mut held, mut measured, mut min_rtt) = (0u64, 0u64, None::<Duration>);
        for l in self.lanes.iter().take(open_now as usize) {
            let (Some(rtt), LaneState::Up) = (l.meter.min_rtt, &l.state) else { continue };
            measured += 1;
            min_rtt = Some(min_rtt.map_or(rtt, |m| m.min(rtt)));
            let age = l.replay_meta.front().map_or(Duration::ZERO, |&(sent, _)| now.saturating_since(sent));
            held += u64::from(adapt::is_held(age, rtt, self.cfg.ack_delay));
        }
        let Some(rtt) = min_rtt else { return };
        let span = Duration::from_secs_f64(rtt.as_secs_f64() * self.cfg.lane_sustain_rtts)
            .max(adapt::HELD_MIN_WINDOW);
        let want = match self.held.tick(now, held, measured, span) {
            Some(adapt::HeldVerdict::Grow) if all_up && open_now < self.lanes.len() as u16 => {
                return self.double_lanes(open_now, now);
            }
            // Calm: this side would do with half the lanes open now …
            Some(adapt::HeldVerdict::Shrink) => (open_now / 2).max(self.cfg.min_lanes()),
            // … otherwise it wants those open, so lanes shrink only once both sides are
            // calm, never below what the busier side needs.
            Some(_) => open_now,
            None => return,
        };
        if want != self.want {
            self.set_want(want, now);
        }
    }

    /// Want twice the lanes open now (up to `max_lanes`): a need that grows for the
    /// whole run, as one lossy trunk's backlog does at 300 ms, is met within a few
    /// windows, not one lane per window.
    fn double_lanes(&mut self, open_now: u16, now: Instant) {
        self.set_want((open_now * 2).min(self.lanes.len() as u16), now);
    }

    /// (edge) Give up extra lanes neither side wants once nothing is left on them: a
    /// lane still in its handshake at once, an up lane once the core answers the
    /// `LaneClose` asked on it ([`Closing`]).
    fn close_unwanted_lanes(&mut self, _now: Instant) {
        for i in self.lanes_wanted() as usize..self.lanes.len() {
            if !self.nothing_of_ours_on(i) {
                continue;
            }
            let l = &mut self.lanes[i];
            match l.state {
                LaneState::Handshake => self.give_up_lane(i as u16),
                LaneState::Up if l.closing == Closing::No => {
                    l.closing = Closing::Asked;
                    l.urgent.push_back(Frame::LaneClose { ok: false });
                }
                _ => {}
            }
        }
    }

    /// Nothing of this side's is on lane `i`: every frame sent there acknowledged,
    /// nothing queued, no stream on or moving to it.
    fn nothing_of_ours_on(&self, i: usize) -> bool {
        let l = &self.lanes[i];
        l.replay.is_empty()
            && l.ctrl.is_empty()
            && l.sched.depth() == (0, 0)
            && !self.streams.values().any(|s| s.lane as usize == i || s.target as usize == i)
    }

    /// (edge) Close `lane`'s connection: the driver closes it on [`Event::LaneClosed`].
    fn give_up_lane(&mut self, lane: u16) {
        let l = &mut self.lanes[lane as usize];
        l.state = LaneState::Down;
        l.down_since = None;
        l.urgent.clear();
        l.closing = Closing::No;
        self.events.push_back(Event::LaneClosed { lane });
    }

    /// (core) Answer the edge's `LaneClose` on lanes this side does not want either,
    /// once nothing of its own is left on them: every frame it sent there acknowledged,
    /// nothing queued, no stream on or moving to the lane.
    fn answer_lane_closes(&mut self) {
        for i in self.lanes_wanted() as usize..self.lanes.len() {
            let asked =
                self.lanes[i].closing == Closing::Asked && matches!(self.lanes[i].state, LaneState::Up);
            if asked && self.nothing_of_ours_on(i) {
                let l = &mut self.lanes[i];
                l.closing = Closing::Answering;
                l.urgent.push_back(Frame::LaneClose { ok: true });
            }
        }
    }

    fn new_stream(&self, lane: u16, class: Class, now: Instant) -> Stream {
        Stream {
            lane,
            target: lane,
            last_seq: None,
            move_since: None,
            class,
            meter: RateMeter::new(now),
            send: ByteQueue::default(),
            send_times: VecDeque::new(),
            queued_total: 0,
            sent_total: 0,
            send_credit: self.peer_window as u64,
            fin_queued: false,
            fin_sent: false,
            recv_window: self.cfg.stream_window as u64,
            consumed_unreported: 0,
            fin_received: false,
            queued: false,
            blocked: false,
        }
    }

    fn hello_for(&self, lane: u16, extra_flags: u8) -> Frame {
        let l = &self.lanes[lane as usize];
        let new = self.role == Role::Edge && !self.established;
        Frame::Hello(Hello {
            session: self.id,
            lane,
            lanes: self.lanes.len() as u16,
            next_expected: l.rx_next,
            window: self.cfg.stream_window,
            flags: if new { FLAG_NEW } else { 0 }
                | match (self.role, self.cfg.adaptive(), self.cfg.lane_rule) {
                    (Role::Edge, true, LaneRule::Held) => FLAG_ADAPTIVE | FLAG_HELD,
                    (Role::Edge, true, LaneRule::Backlog) => FLAG_ADAPTIVE,
                    _ => 0,
                }
                | extra_flags,
        })
    }

    /// Queue the stream in its lane's scheduler if it has something sendable.
    fn make_ready(&mut self, id: StreamId, now: Instant) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        let thin = s.is_thin(&self.cfg, now);
        if s.queued || (s.target != s.lane && !thin) {
            // A bulk stream waiting to move is queued by `try_moves` once it has moved.
            return;
        }
        let has_data = !s.send.is_empty() && s.send_credit > 0;
        let has_fin = s.fin_queued && !s.fin_sent && s.send.is_empty();
        if !(has_data || has_fin) {
            return;
        }
        s.queued = true;
        self.lanes[s.lane as usize].sched.push(id, thin);
    }

    /// Emit one data (or close) frame of the next scheduled stream. False if none.
    fn send_next_stream_frame(&mut self, lane: u16, out: &mut Vec<u8>, now: Instant) -> bool {
        loop {
            let bulk_ok = self.bulk_ok();
            let sched = &mut self.lanes[lane as usize].sched;
            let Some(id) = (if bulk_ok { sched.pop() } else { sched.pop_thin() }) else { return false };
            let max_payload = self.cfg.max_payload as usize;
            let Some(mut s) = self.streams.remove(&id) else { continue };
            s.queued = false;
            let thin = s.is_thin(&self.cfg, now);
            if s.target != s.lane {
                if self.movable(&s) {
                    // At a frame boundary with everything it sent here acknowledged.
                    s.lane = s.target;
                    s.last_seq = None;
                    s.move_since = None;
                    self.stats.stream_moves += 1;
                    self.streams.insert(id, s);
                    self.make_ready(id, now);
                    continue;
                }
                if !thin {
                    // Hold its data until the old lane acknowledges what it has: sending
                    // more here would push the move back again (`try_moves` resumes it).
                    self.streams.insert(id, s);
                    continue;
                }
                // A thin stream does not wait: a held message would pay the old lane's
                // whole round trip, and a game stream rarely leaves its lane with nothing
                // unacknowledged within the give-up time. It sends here and moves at the
                // ack that finds nothing of it outstanding (`try_moves` after each ack):
                // between two of its messages.
            }
            if !thin && !bulk_ok {
                // Became bulk while queued as thin: wait in the bulk queue.
                s.queued = true;
                self.lanes[lane as usize].sched.push(id, false);
                self.streams.insert(id, s);
                continue;
            }
            let frame = if !s.send.is_empty() && s.send_credit > 0 {
                let n = s.send.len().min(max_payload).min(s.send_credit as usize);
                // Queueing delay of the frame's first byte.
                let first = s.sent_total;
                while s.send_times.front().is_some_and(|&(end, _)| end <= first) {
                    s.send_times.pop_front();
                }
                if let Some(&(_, t)) = s.send_times.front() {
                    self.stats.delay(thin).observe(now.saturating_since(t));
                }
                let mut payload = Vec::with_capacity(n);
                s.send.take_into(n, &mut payload);
                s.sent_total += n as u64;
                s.send_credit -= n as u64;
                s.meter.record(n, now, self.cfg.thin_tau);
                self.buffered -= n;
                self.stats.payload_bytes_tx += n as u64;
                Some(Frame::Data { stream: id, payload })
            } else if s.fin_queued && !s.fin_sent && s.send.is_empty() {
                s.fin_sent = true;
                Some(Frame::Close { stream: id })
            } else {
                None
            };
            let writable = s.blocked && s.send.len() <= self.cfg.stream_buffer / 2 && !self.total_blocked;
            if writable {
                s.blocked = false;
            }
            let done = s.fin_sent && s.fin_received;
            let bulk = match &frame {
                Some(Frame::Data { payload, .. }) if !thin => payload.len() as u32,
                _ => 0,
            };
            if let Some(f) = &frame {
                let seq = self.send_reliable(lane, f, out, bulk, now);
                s.last_seq = Some(seq);
            }
            if !done {
                self.streams.insert(id, s);
                self.make_ready(id, now);
            }
            if writable {
                self.events.push_back(Event::Writable { id });
            }
            if frame.is_some() {
                return true;
            }
        }
    }

    /// Encode a reliable frame, keep it for replay, append it to `out`. `bulk`: payload
    /// bytes that count against the bulk-in-flight limit. Returns its sequence number.
    fn send_reliable(&mut self, lane: u16, f: &Frame, out: &mut Vec<u8>, bulk: u32, now: Instant) -> u64 {
        let mut enc = Vec::with_capacity(f.encoded_len());
        f.encode(&mut enc);
        out.extend_from_slice(&enc);
        self.stats.frames_tx[f.kind() as usize] += 1;
        self.bulk_inflight += bulk as usize;
        let l = &mut self.lanes[lane as usize];
        let seq = l.tx_seq;
        l.replay_meta.push_back((now, bulk));
        if matches!(f, Frame::Data { .. }) {
            l.meter.last_data = now;
        }
        l.tx_seq += 1;
        l.replay_bytes += enc.len();
        self.buffered += enc.len();
        l.replay.push_back(enc);
        l.resend = l.replay.len();
        seq
    }

    fn handle_frame(&mut self, lane: u16, frame: Frame, now: Instant) {
        let kind = frame.kind();
        self.stats.frames_rx[kind as usize] += 1;
        if let Frame::Hello(h) = frame {
            self.handle_hello(lane, h, now);
            return;
        }
        let l = &mut self.lanes[lane as usize];
        if !matches!(l.state, LaneState::Up) {
            self.protocol_error(lane, "frame before hello", now);
            return;
        }
        if kind.is_reliable() {
            l.rx_next += 1;
            if let Frame::Data { payload, .. } = &frame {
                l.rx_unacked_bytes += payload.len();
                // A lane carries stream data either way: the edge, which decides the
                // lanes, sends little of its own and must not give up a lane the core's
                // data is on (it closed such lanes and dialled them again).
                l.meter.last_data = now;
            }
            // With the bulk-in-flight limit the peer may send only that much before an
            // ack: acknowledge by byte count too (half the limit's floor), or a fast,
            // short path would idle for `ack_delay` after every floor's worth.
            let by_bytes = self.cfg.bulk_limit && l.rx_unacked_bytes >= self.cfg.bulk_floor / 2;
            if l.rx_next - l.rx_acked >= self.cfg.ack_every || by_bytes {
                l.rx_acked = l.rx_next;
                l.rx_unacked_bytes = 0;
                l.ack_due = None;
                l.urgent.push_back(Frame::Ack { next_expected: l.rx_next });
            } else if l.ack_due.is_none() {
                l.ack_due = Some(now + self.cfg.ack_delay);
            }
        }
        match frame {
            Frame::Open { stream, target } => {
                if self.role != Role::Core || self.streams.contains_key(&stream) {
                    self.protocol_error(lane, "unexpected open", now);
                    return;
                }
                let fixed = !(self.cfg.adaptive() || self.cfg.reserve_thin_lane);
                if fixed && (stream % self.lanes.len() as u32) as u16 != lane {
                    self.protocol_error(lane, "stream opened on the wrong lane", now);
                    return;
                }
                if self.going_away || self.streams.len() >= self.cfg.max_streams {
                    let why = if self.going_away { "core shutting down" } else { "too many streams" };
                    let code = if self.going_away { ResetCode::Shutdown } else { ResetCode::Limit };
                    self.lanes[lane as usize].ctrl.push_back(Frame::Reset {
                        stream,
                        code,
                        message: why.into(),
                    });
                    self.stats.streams_reset += 1;
                    return;
                }
                // Each side places the streams it sends: with lanes that move, the core
                // sends on its least loaded lane, not the one the Open came by (the edge
                // opens on lane 0 while its other lanes are still in their handshakes).
                let lane = if fixed { lane } else { self.least_loaded_lane() };
                let s = self.new_stream(lane, Class::Auto, now);
                self.streams.insert(stream, s);
                self.stats.streams_opened += 1;
                self.events.push_back(Event::StreamOpened { id: stream, target });
            }
            Frame::Data { stream, payload } => {
                let Some(s) = self.streams.get_mut(&stream) else { return };
                if s.fin_received {
                    self.local_reset(stream, ResetCode::Protocol, "data after close");
                    return;
                }
                if payload.len() as u64 > s.recv_window {
                    self.local_reset(stream, ResetCode::FlowControl, "peer exceeded its credit");
                    return;
                }
                s.recv_window -= payload.len() as u64;
                self.stats.payload_bytes_rx += payload.len() as u64;
                self.events.push_back(Event::Data { id: stream, bytes: payload });
            }
            Frame::Close { stream } => {
                let Some(s) = self.streams.get_mut(&stream) else { return };
                s.fin_received = true;
                let done = s.fin_sent;
                self.events.push_back(Event::Finished { id: stream });
                if done {
                    self.remove_stream(stream);
                }
            }
            Frame::Reset { stream, code, message } => {
                if self.remove_stream(stream) {
                    self.stats.streams_reset += 1;
                    self.events.push_back(Event::Reset { id: stream, code, message, remote: true });
                }
            }
            Frame::Credit { stream, increment } => {
                let Some(s) = self.streams.get_mut(&stream) else { return };
                s.send_credit += increment as u64;
                self.make_ready(stream, now);
            }
            Frame::GoAway { .. } => {
                self.peer_going_away = true;
                self.events.push_back(Event::GoAway);
            }
            Frame::Ack { next_expected } => {
                let l = &mut self.lanes[lane as usize];
                if next_expected > l.tx_seq {
                    self.protocol_error(lane, "ack beyond what was sent", now);
                    return;
                }
                self.release_replay(lane, next_expected, now);
            }
            Frame::Ping { pong: false, opaque } => {
                self.lanes[lane as usize].urgent.push_back(Frame::Ping { pong: true, opaque });
            }
            Frame::Ping { pong: true, opaque } => {
                let rtt = now.saturating_since(Instant::from_nanos(opaque));
                self.stats.rtt = Some(rtt);
                self.lanes[lane as usize].meter.on_pong(rtt);
            }
            Frame::Lanes { want } => {
                let before = self.lanes_wanted();
                self.peer_want = want.min(self.lanes.len() as u16).max(1);
                self.request_lanes(before, now);
                if self.lanes_wanted() != before {
                    self.rebalance(now);
                }
            }
            Frame::LaneClose { ok: false } if self.role == Role::Core => {
                let l = &mut self.lanes[lane as usize];
                if l.closing == Closing::No {
                    l.closing = Closing::Asked;
                    self.answer_lane_closes();
                }
            }
            Frame::LaneClose { ok: true } if self.role == Role::Edge => {
                // Everything the core sent on this connection came before its answer, so
                // nothing of it is lost with the connection. A lane wanted again since
                // the request is dialled anew.
                self.give_up_lane(lane);
                if self.lane_wanted(lane) {
                    self.events.push_back(Event::ConnectLane { lane });
                }
            }
            // A request to the edge or an answer to the core: not ours to act on.
            Frame::LaneClose { .. } => {}
            // Handled above; a second Hello on an up lane is ignored.
            Frame::Hello(_) => {}
        }
    }

    fn handle_hello(&mut self, lane: u16, h: Hello, now: Instant) {
        let l = &self.lanes[lane as usize];
        if !matches!(l.state, LaneState::Handshake) || h.session != self.id || h.lane != lane {
            self.protocol_error(lane, "unexpected hello", now);
            return;
        }
        if h.flags & FLAG_UNKNOWN_SESSION != 0 {
            self.fail("peer does not know this session (it restarted or timed the session out)", now);
            return;
        }
        if h.lanes as usize != self.lanes.len() {
            self.fail("peer uses a different number of trunk lanes", now);
            return;
        }
        if self.role == Role::Core && h.flags & FLAG_NEW != 0 && (l.tx_seq > 0 || l.rx_next > 0) {
            self.fail("peer restarted the session", now);
            return;
        }
        // Resume point: the peer has everything before `next_expected`.
        if h.next_expected < l.replay_base || h.next_expected > l.tx_seq {
            self.fail("peer's resume point is outside what this side kept", now);
            return;
        }
        self.peer_window = h.window;
        self.release_replay(lane, h.next_expected, now);
        // A lane's first handshake is not a resumption, even when other lanes are up.
        let resumed = self.lanes[lane as usize].handshakes > 0;
        if self.role == Role::Core {
            let hello = self.hello_for(lane, 0);
            self.lanes[lane as usize].urgent.push_back(hello);
        }
        let l = &mut self.lanes[lane as usize];
        for m in l.replay_meta.iter_mut() {
            m.0 = now;
        }
        l.resend = 0;
        l.state = LaneState::Up;
        l.down_since = None;
        l.handshakes += 1;
        l.rx_acked = l.rx_next;
        if resumed {
            self.stats.resumes += 1;
        }
        self.established = true;
        self.events.push_back(Event::LaneUp { lane, resumed });
        if self.cfg.adaptive() {
            if lane == 0 {
                let want = self.want;
                self.lanes[0].urgent.push_back(Frame::Lanes { want });
            }
            self.rebalance(now);
        }
    }

    /// Drop replay entries the peer has (sequence numbers below `next_expected`).
    fn release_replay(&mut self, lane: u16, next_expected: u64, now: Instant) {
        let l = &mut self.lanes[lane as usize];
        let (mut bytes, mut newest) = (0u64, None);
        while l.replay_base < next_expected {
            let Some(f) = l.replay.pop_front() else { break };
            if let Some((sent, bulk)) = l.replay_meta.pop_front() {
                self.bulk_inflight -= bulk as usize;
                newest = Some(sent);
            }
            l.replay_base += 1;
            l.replay_bytes -= f.len();
            bytes += f.len() as u64;
            self.buffered -= f.len();
            l.resend = l.resend.saturating_sub(1);
        }
        if bytes > 0 && self.cfg.adaptive() {
            // Streams waiting for this ack may move now.
            self.pending_moves_after_ack = true;
        }
        if bytes > 0 {
            // Replayed frames carry their replay time (set on resume), so the sample
            // is the delivery delay of the replay, not of the lost connection.
            let rtt = newest.map(|t| now.saturating_since(t));
            l.meter.on_ack(bytes, rtt);
        }
        if self.total_blocked && self.buffered < self.cfg.total_buffer {
            self.total_blocked = false;
            for (&id, s) in self.streams.iter_mut() {
                if s.blocked {
                    s.blocked = false;
                    self.events.push_back(Event::Writable { id });
                }
            }
        }
    }

    fn local_reset(&mut self, id: StreamId, code: ResetCode, message: &str) {
        self.stream_reset(id, code, message);
        self.events.push_back(Event::Reset { id, code, message: message.to_owned(), remote: false });
    }

    fn remove_stream(&mut self, id: StreamId) -> bool {
        match self.streams.remove(&id) {
            Some(s) => {
                self.buffered -= s.send.len();
                true
            }
            None => false,
        }
    }

    fn protocol_error(&mut self, lane: u16, why: &str, now: Instant) {
        // A peer that breaks the protocol cannot be resumed with: fail everything.
        self.fail(&format!("protocol error on lane {lane}: {why}"), now);
    }

    fn fail(&mut self, reason: &str, _now: Instant) {
        if self.lost {
            return;
        }
        self.lost = true;
        let mut ids: Vec<StreamId> = self.streams.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            self.stats.streams_reset += 1;
            self.events.push_back(Event::Reset {
                id,
                code: ResetCode::ResumeFailed,
                message: reason.to_owned(),
                remote: false,
            });
        }
        self.streams.clear();
        for l in &mut self.lanes {
            l.sched.clear();
            l.replay.clear();
            l.replay_meta.clear();
            l.ctrl.clear();
            l.urgent.clear();
        }
        self.buffered = 0;
        self.bulk_inflight = 0;
        self.events.push_back(Event::SessionLost { reason: reason.to_owned() });
    }
}

/// The reply a core sends on a trunk whose `Hello` names a session it does not have.
pub fn unknown_session_reply(h: &Hello) -> Frame {
    Frame::Hello(Hello { flags: FLAG_UNKNOWN_SESSION, next_expected: 0, ..*h })
}

/// Peek at the first frame of a new trunk connection without consuming it: the core
/// routes the connection to a session by the `Hello`. `Ok(None)`: need more bytes.
pub fn peek_hello(buf: &[u8], max_body: u32) -> Result<Option<Hello>, DecodeError> {
    match Frame::decode(buf, max_body)? {
        Some((Frame::Hello(h), _)) => Ok(Some(h)),
        Some(_) => Err(DecodeError::Malformed("first trunk frame is not a hello")),
        None if buf.len() >= HEADER_LEN && buf[0] != FrameType::Hello as u8 => {
            Err(DecodeError::Malformed("first trunk frame is not a hello"))
        }
        None => Ok(None),
    }
}

/// A byte FIFO: a `Vec` with a consumed prefix, compacted lazily.
#[derive(Debug, Default)]
struct ByteQueue {
    buf: Vec<u8>,
    start: usize,
}

impl ByteQueue {
    fn len(&self) -> usize {
        self.buf.len() - self.start
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn push(&mut self, b: &[u8]) {
        if self.start > 0 && (self.start == self.buf.len() || self.start >= self.buf.len() / 2) {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(b);
    }
    fn take_into(&mut self, n: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buf[self.start..self.start + n]);
        self.start += n;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
    }
}

//! The simulated world: hosts, router ports and links of a dumbbell, TCP connections
//! and their traffic sources, driven from the event queue in virtual time.
//!
//! ```text
//!  server_i ──access──▶ R1 ══bottleneck══▶ R2 ──access──▶ client_i     (data)
//!  server_i ◀──access── R1 ◀═bottleneck-rev═ R2 ◀──access── client_i   (ACKs)
//! ```
//!
//! The mux topology (`topology.kind = "mux"`, Carlmar 2011, docs/sources.md) is the same
//! dumbbell with a *last hop* (proxy → client: `last_hop_*`) in place of the client access
//! links and, in mux mode, a tunnel ([`crate::tunnel`]): the servers' writes go into the
//! core's multiplexing session, whose frames travel on trunk lanes from a core host
//! beside R1 to the edge proxy at R2; the edge's session hands each stream's bytes to
//! the stream's own connection to its client.
//!
//! ```text
//!  direct: server_i ─access─ R1 ══WAN══ R2 ──last hop── client_i   (one TCP conn per stream)
//!  mux:    core ═(trunk lane k, access)═ R1 ══WAN══ R2 = edge ──last hop── client_i
//!            forward conns core→edge, reverse edge→core     last-hop conns edge→client_i
//! ```
//!
//! Every output port is a link (rate, propagation delay) behind a queue discipline
//! from the sans-IO core. A packet's route is the list of ports it crosses (at most
//! [`HOPS`], [`NO_PORT`] ends a shorter one); after the last one it reaches its endpoint.

mod build;
mod diag;
mod output;
mod pcap;
mod prefetch;
mod qds;
mod rtt;
mod tunnel_glue;

pub use build::{client_delays, traffic_spec, wan_impairment, CLIENT_DELAY_STREAM};

use std::sync::Arc;

use crate::config::Config;
use crate::engine::{Event, EventQueue};
use crate::records::{RunRecords, WRITE_WAIT};
use crate::tunnel::{FrameSpan, Tunnel};
use diag::{Cycles, Pad, Section, Stamp};
use thinwan_proto::link::Impairment;
use thinwan_proto::mux::session::Event as MuxEvent;
use thinwan_proto::qdisc::{ClassControl, Dropped, Limits, QueueDisc, QueueItem};
use thinwan_proto::tcp::{
    Ack, DataSegment, Mechanisms, Receiver, ReceiverConfig, Recovery, RtoConfig, SackBlocks, Sender,
    SenderConfig,
};
use thinwan_proto::traffic::{App, Kind, Source, Write};
use thinwan_proto::{Duration, Instant};

/// Most hops on a route: sender NIC, a router port, the far router's port to the host.
const HOPS: usize = 3;
/// Ends a route shorter than [`HOPS`] (the mux topology's trunk and last-hop routes).
const NO_PORT: u32 = u32::MAX;
/// Ports 0 and 1, R1→R2 and R2→R1; their arrivals have event lanes of the same number.
const WAN_PORTS: usize = 2;

/// Connection roles (connections table, docs/records.md).
const ROLE_TRUNK: u8 = 2;
const ROLE_LAST_HOP: u8 = 3;
const ROLE_TRUNK_REV: u8 = 4;
/// A stream the edge shed (`mux.shed`): its own connection server → client.
const ROLE_SHED: u8 = 5;
/// Greedy sources write in chunks of this size (one message row per chunk).
const BULK_CHUNK: u32 = 1 << 20;

/// What the queues hold: a packet's slab index plus what a discipline may look at.
#[derive(Clone, Copy, Debug)]
struct QItem {
    packet: u32,
    wire: u32,
    interactive: bool,
    /// A data segment with ECT or CE (RFC 3168 §5): a CoDel with ECN may mark it.
    ect: bool,
    /// Marked CE in this queue; copied into the segment when it leaves
    /// ([`World::transmit_item`]).
    ce: bool,
    conn: u32,
}

impl QItem {
    /// The queue entry of packet `packet` (slab index) as it is now.
    fn of(packet: u32, pk: &Packet) -> Self {
        let ect = matches!(pk.body, Body::Data(s) if s.ecn.ect || s.ecn.ce);
        QItem { packet, wire: pk.wire, interactive: pk.interactive, ect, ce: false, conn: pk.conn }
    }
}

impl QueueItem for QItem {
    fn wire_len(&self) -> u32 {
        self.wire
    }
    fn is_interactive(&self) -> bool {
        self.interactive
    }
    fn flow(&self) -> u64 {
        self.conn as u64
    }
    fn ecn_capable(&self) -> bool {
        self.ect
    }
    fn mark_ce(&mut self) {
        self.ce = true;
    }
}

#[derive(Clone, Copy, Debug)]
enum Body {
    Data(DataSegment),
    Ack(Ack),
}

/// A packet in the slab. Laid out (C order, cache-line aligned: 128 bytes) so that
/// everything a hop reads or stamps, a data segment's body and an ACK's cumulative
/// ACK and window included, is in the first 64-byte line; only an ACK's SACK blocks
/// spill into the second, and a flag in the first says whether there are any.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Packet {
    conn: u32,
    wire: u32,
    hop: u8,
    interactive: bool,
    /// An ACK with SACK blocks: only then is the second line read at its endpoint.
    sacks: bool,
    /// An ACK with ECE (RFC 3168 §6.1.3). Kept here, in the header's spare byte, not in
    /// [`Ack`], which would then outgrow the packet's two cache lines.
    ece: bool,
    /// The connection's message row its endpoint reads first: a data segment's first
    /// message; for an ACK, the message of the segment it answers, where its sender's
    /// scan of newly acknowledged messages starts. A prefetch hint, with
    /// `World::rows_at`.
    row: u32,
    /// When TCP emitted it.
    t_tx: Instant,
    /// Bottleneck enqueue / departure (MAX until it happens).
    t_enq: Instant,
    t_deq: Instant,
    body: Body,
}

const _: () = assert!(std::mem::size_of::<Packet>() == 128, "a packet should stay two cache lines");

/// An output port: what every packet through it reads. Its link's rate and delay are a
/// [`Link`] shared with the ports that have the same, and the rest of the port (its
/// queue, name, impairment, counters) is a [`PortQueue`] in a separate table, so that
/// an idle access link — most of the 4·10⁴ ports at 10⁴ pairs — costs a packet a
/// quarter of a cache line (a pair's four fit one) instead of three.
#[repr(C, align(16))]
struct Port {
    /// The link is serialising a packet until then (≤ now: idle).
    busy_until: Instant,
    /// Index in `World::links`.
    link: u16,
    /// A PortFree event is pending. Only a port with a backlog needs one, so idle access
    /// links cost no event per packet.
    free_scheduled: bool,
    /// Stamp t_enq / t_deq on data packets here.
    bottleneck: bool,
    /// A WAN link: reported in the ports table (so counted) and maybe impaired.
    wan: bool,
    /// A plain tail-drop FIFO nobody inspects (access links): bypassed while empty.
    plain_fifo: bool,
    /// The pending PortFree is a wake-up at the discipline's `next_ready` (a shaped
    /// class waits for tokens): the link is idle, and an arrival may start it sooner.
    waiting: bool,
}

const _: () = assert!(std::mem::size_of::<Port>() == 16, "four ports should fit a cache line");

/// A rate and propagation delay, and the transmission times at that rate of the sizes
/// most packets have: an ACK and a full segment.
struct Link {
    rate_bps: u64,
    delay: Duration,
    tx_ack: Duration,
    tx_full: Duration,
}

/// The rest of an output port: its queue, and what only the WAN links need.
struct PortQueue {
    name: &'static str,
    rate_bps: u64,
    delay: Duration,
    queue: Box<dyn QueueDisc<QItem> + Send>,
    /// Random loss and delay jitter on the link (the WAN path only; `None` elsewhere,
    /// and when both are off, so an unimpaired link draws no random numbers).
    impair: Option<Impairment>,
    /// Packets lost on the link (reason "loss").
    drops_loss: u64,
    /// The time of the last wake-up scheduled for `next_ready` (MAX: none), so that two
    /// PortFree events at one instant do not schedule the same wake-up twice.
    wake_at: Instant,
    /// Transmitted in the measurement window (WAN links only: nothing reads the others).
    bytes_tx: u64,
    bytes_tx_interactive: u64,
    packets_tx: u64,
}

/// One application write and what happened to its last byte: one cache line (the
/// rows are cold at 10⁴ connections, and a 72-byte row straddled two lines in eight
/// of nine). Its size is not kept: it is the offset less the previous row's.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Msg {
    /// Offset one past its last byte (bits 0–47), kind (bit 48), transmissions of the
    /// last byte (bits 49–63, saturating).
    word: u64,
    t_write: Instant,
    t_first_tx: Instant,
    t_tx: Instant,
    t_enq: Instant,
    t_deq: Instant,
    t_arrive: Instant,
    t_read: Instant,
}

const _: () = assert!(std::mem::size_of::<Msg>() == 64, "a message row should be one cache line");

const END_BITS: u32 = 48;
const END_MASK: u64 = (1 << END_BITS) - 1;
const KIND_BIT: u64 = 1 << END_BITS;
const TX_SHIFT: u32 = END_BITS + 1;
const TX_MAX: u64 = (1 << (64 - TX_SHIFT)) - 1;

impl Msg {
    /// The row of write `w`, whose last byte is at offset `end - 1` (< 2⁴⁸: 281 TB).
    fn new(end: u64, w: Write) -> Msg {
        assert!(end <= END_MASK, "stream offset {end} beyond 2^48");
        let kind = if w.kind == Kind::Bulk { KIND_BIT } else { 0 };
        Msg {
            word: end | kind,
            t_write: w.at,
            t_first_tx: NONE,
            t_tx: NONE,
            t_enq: NONE,
            t_deq: NONE,
            t_arrive: NONE,
            t_read: NONE,
        }
    }
    /// Offset one past its last byte.
    fn end(&self) -> u64 {
        self.word & END_MASK
    }
    fn kind(&self) -> Kind {
        if self.word & KIND_BIT != 0 {
            Kind::Bulk
        } else {
            Kind::Interactive
        }
    }
    /// Transmissions of its last byte.
    fn tx_count(&self) -> u64 {
        self.word >> TX_SHIFT
    }
    fn set_tx_count(&mut self, n: u64) {
        self.word = (self.word & (END_MASK | KIND_BIT)) | (n.min(TX_MAX) << TX_SHIFT);
    }
}

/// A server→client pair: one traffic source feeding one connection, or two with
/// separate connections (interactive writes on `conns[0]`, bulk on `conns[1]`).
///
/// 88 bytes aligned to 32, so that every write reads two cache lines, never three.
#[repr(align(32))]
struct Pair {
    source: Source,
    next_write: Option<Write>,
    conns: [u32; 2],
    /// `next_write` starts a flow of the source (`Source::next_starts_flow`).
    next_starts_flow: bool,
}

/// One connection, both ends. In C order: the sender (seven cache lines, of which every
/// ACK and transmission reads the first four, [`Sender::HOT_BYTES`]), then in three
/// lines what a packet reads at either end, then what it never reads. At 10⁴
/// connections each line read is a cache miss.
#[repr(C)]
struct Conn {
    sender: Sender,
    msgs: Vec<Msg>,
    /// First message not read whole by the client (every earlier one has arrived).
    read_cursor: usize,
    /// First message not acknowledged whole (no later transmission can carry an
    /// earlier one). The two cursors keep per-packet lookups inside the few messages
    /// in flight instead of searching all of a connection's rows, which at 10⁴
    /// connections are hundreds of MB and cold in cache.
    acked_cursor: usize,
    /// Writes waiting for send-buffer space (the application is blocked).
    blocked: std::collections::VecDeque<Pending>,
    /// Data ranges dropped and not retransmitted since (for spurious-timeout checks).
    dropped: Vec<(u64, u64)>,
    receiver: Receiver,
    /// A last-hop connection of the tunnel: its messages are the server's writes (rows
    /// made at write time, offsets in the stream) and carry the trunk's transmission
    /// stamps, so its own transmissions and arrivals do not overwrite them.
    relay: bool,
    /// 0 = all writes (or the interactive connection), 1 = the bulk connection.
    role: u8,
    pair: u32,
    spurious_timeouts: u32,
    /// Writes TCP took more than [`WRITE_WAIT`] after their schedule.
    writes_waited: u32,
    /// A forward trunk: the data frame of each of its messages, parallel to `msgs`.
    frames: Vec<FrameSpan>,
    last_trace: [f64; 6],
    /// Nothing (zero bytes) unless built with `diag-footprint-pad` ([`diag`]).
    pad: Pad,
}

const _: () = assert!(
    std::mem::offset_of!(Conn, relay) < std::mem::size_of::<Sender>() + 3 * 64,
    "what a packet reads besides the sender should fit three cache lines"
);

/// Each connection's route: [data, ACKs], each the ports crossed in order.
type Route = [[u32; HOPS]; 2];

/// The routes of all connections: computed when they are the plain dumbbell's (every
/// hop of 10⁴ connections would otherwise read a table that is seldom in cache), else a
/// table apart from [`Conn`].
enum Routes {
    /// Connection `c` belongs to pair `c / per_pair` and takes [`dumbbell_route`].
    Dumbbell {
        per_pair: u32,
    },
    Table(Vec<Route>),
}

/// Pair `p`'s ports are `2 + 4p ..`: server NIC, R2→client, client NIC, R1→server
/// (ports 0 and 1 are the bottleneck's two directions).
fn dumbbell_route(conn: u32, per_pair: u32) -> Route {
    let base = 2 + 4 * (conn / per_pair);
    [[base, 0, base + 1], [base + 2, 1, base + 3]]
}

impl Routes {
    fn port(&self, conn: u32, dir: usize, hop: usize) -> u32 {
        match self {
            Routes::Dumbbell { per_pair } => dumbbell_route(conn, *per_pair)[dir][hop],
            Routes::Table(t) => t[conn as usize][dir][hop],
        }
    }

    /// Give `conn` another route (a stream shed from the tunnel).
    fn set(&mut self, conn: u32, route: Route) {
        match self {
            Routes::Table(t) => t[conn as usize] = route,
            // Only the mux topology's tunnel changes routes, and its trunks make a table.
            Routes::Dumbbell { .. } => unreachable!("routes change only in the tunnel's table"),
        }
    }
}

/// One endpoint's timer as the event queue sees it. The queue cannot move an event, and
/// every ACK of new data restarts the RTO later (RFC 6298 (5.3)), so most timer events
/// fire before their endpoint's deadline and only re-arm. Kept apart from [`Conn`], in
/// a table of 16 bytes per endpoint, such an event is handled without reading the
/// connection, which at 10⁴ connections has left the cache.
#[derive(Clone, Copy)]
struct Timer {
    /// Earliest pending timer event (NONE = none).
    armed: Instant,
    /// The endpoint's deadline when last asked (NONE = none). Each change to an
    /// endpoint is followed by asking it ([`World::arm_sender`], [`World::send_acks`]),
    /// so an event before this time has nothing to do.
    due: Instant,
}

const IDLE: Timer = Timer { armed: NONE, due: NONE };

/// Which endpoint of a connection a [`Timer`] belongs to.
#[derive(Clone, Copy)]
enum End {
    Sender = 0,
    Receiver = 1,
}

/// A write waiting for TCP, and what it is.
#[derive(Clone, Copy, Debug)]
struct Pending {
    w: Write,
    tag: Tag,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    /// An application write: gets a message row.
    Plain,
    /// Stream bytes the edge writes on a last hop (the row exists since the server's write).
    Relay,
}

impl Conn {
    fn new(pair: u32, role: u8, sender: Sender, receiver: Receiver, relay: bool) -> Self {
        Conn {
            pair,
            role,
            sender,
            receiver,
            blocked: Default::default(),
            writes_waited: 0,
            relay,
            frames: Vec::new(),
            msgs: Vec::new(),
            read_cursor: 0,
            acked_cursor: 0,
            dropped: Vec::new(),
            spurious_timeouts: 0,
            last_trace: [f64::NAN; 6],
            pad: Pad::NEW,
        }
    }
}

/// A whole run.
pub struct World {
    cfg: Config,
    seed: u64,
    now: Instant,
    end: Instant,
    window: Instant,
    events: EventQueue,
    ports: Vec<Port>,
    /// The distinct rates and delays of the ports.
    links: Vec<Link>,
    /// The rest of each port, same index.
    queues: Vec<PortQueue>,
    pairs: Vec<Pair>,
    conns: Vec<Conn>,
    /// Per connection: the ports its data (0) and its ACKs (1) cross.
    routes: Routes,
    /// Per connection: log its packets.
    logged: Vec<bool>,
    slab: Vec<Packet>,
    free: Vec<u32>,
    /// Per connection, where its message rows were when it last sent: with a packet's
    /// `row`, the address its endpoint will read, to prefetch (the row vector may have
    /// moved since: then the prefetch is wasted, nothing else). Kept only while
    /// prefetching.
    rows_at: Vec<usize>,
    /// Per connection, its sender's and its receiver's [`Timer`].
    timers: Vec<[Timer; 2]>,
    drop_buf: Vec<Dropped<QItem>>,
    header: u32,
    mss: u32,
    tunnel: Option<Box<Tunnel>>,
    trace_tcp: bool,
    trace_interval: Duration,
    /// Prefetch what the events a few places ahead will touch ([`World::prefetch_ahead`]):
    /// only for runs of [`PREFETCH_MIN_CONNS`] connections or more.
    prefetch: bool,
    /// Exact per-packet RTTs (the middlebox topology or `records.packet_rtt`).
    rtt: Option<Box<rtt::RttLog>>,
    /// The QDS loop on the downlink (`queue.discipline = "qds"`).
    qds: Option<Box<qds::Qds>>,
    /// The capture of `records.pcap`.
    pcap: Option<Box<pcap::PcapTap>>,
    out: RunRecords,
}

/// Connections from which [`World::prefetch_ahead`] pays. Below, a pair's state (~1 KB)
/// for all of them stays in cache and the prefetching only costs: on the AMD EPYC of
/// BENCHMARKS.md, leaving it out saved 3 % at 100 pairs, 7–8 % at 1,000 and 2,000, and
/// broke even at 3,000 and 5,000, while at 7,000 and 10,000 it cost 21–27 % (where this
/// machine's load latency climbs, 4–8 MB).
pub const PREFETCH_MIN_CONNS: usize = 4096;

const NONE: Instant = Instant::MAX;

// Packet-log event codes (docs/records.md).
const LOG_DATA_SENT: u8 = 0;
const LOG_DROPPED: u8 = 1;
const LOG_DATA_ARRIVED: u8 = 2;
const LOG_ACK_SENT: u8 = 3;
const LOG_ACK_ARRIVED: u8 = 4;
const LOG_TIMEOUT: u8 = 5;

impl World {
    /// Prefetch or not, whatever the size ([`PREFETCH_MIN_CONNS`] decides otherwise): for
    /// benchmarks, and for tests that the records do not depend on it.
    pub fn with_prefetch(mut self, on: bool) -> Self {
        self.prefetch = on;
        self
    }

    /// Run to the end and return the records.
    pub fn run(mut self) -> RunRecords {
        let mut cycles = Cycles::start();
        while let Some((at, ev)) = self.events.pop() {
            if at > self.end {
                break;
            }
            cycles.popped();
            self.now = at;
            if self.prefetch {
                self.prefetch_ahead();
            }
            cycles.dispatching(|| self.diag_event_kind(&ev));
            match ev {
                Event::AppWrite { pair } => self.on_app_write(pair),
                Event::PortFree { port } => {
                    let pt = &mut self.ports[port as usize];
                    if pt.busy_until > at {
                        // A wake-up for `next_ready` gone stale: an arrival started the
                        // link since, and its own PortFree is pending. (A PortFree at
                        // the end of a transmission always has busy_until == at.)
                        continue;
                    }
                    pt.free_scheduled = false;
                    pt.waiting = false;
                    self.start_tx(port);
                }
                Event::Arrive { packet } => self.on_arrive(packet),
                Event::SenderTimer { conn } => self.on_sender_timer(conn, at),
                Event::ReceiverTimer { conn } => self.on_receiver_timer(conn, at),
                Event::TraceSample => self.on_trace_sample(),
                Event::MuxTimer { edge } => self.on_mux_timer(edge, at),
                Event::QdsTick => self.on_qds_tick(),
            }
        }
        cycles.dump();
        self.finish()
    }

    // ----- sources and senders ----------------------------------------------------

    fn on_app_write(&mut self, pair: u32) {
        let mut t = Stamp::now();
        let p = &mut self.pairs[pair as usize];
        let Some(w) = p.next_write.take() else { return };
        let starts_flow = p.next_starts_flow;
        p.next_starts_flow = p.source.next_starts_flow();
        p.next_write = p.source.next_write();
        if let Some(next) = p.next_write.filter(|n| n.at < self.window) {
            self.events.push(next.at, Event::AppWrite { pair });
        }
        t.section(Section::WriteSource);
        if self.tunnel.is_some() && !self.takes_direct_path(pair) {
            self.tunnel_write(pair, w);
            return;
        }
        let conn = self.pairs[pair as usize].conns[(w.kind == Kind::Bulk) as usize];
        let c = &mut self.conns[conn as usize];
        if let Some(r) = &mut self.rtt {
            // The write's row comes after those of the writes still blocked.
            r.note_write(conn, c.msgs.len() + c.blocked.len(), starts_flow);
        }
        if c.blocked.is_empty() && c.sender.buffer_space() >= w.bytes as u64 {
            // Nothing waits and the buffer has room: TCP takes the write at once,
            // without a trip through the (cold) queue of blocked writes.
            let end = c.sender.write(w.bytes as u64);
            c.msgs.push(Msg::new(end, w));
            if let Some(r) = &mut self.rtt {
                r.note_app(conn, c.msgs.len() - 1, w.app);
            }
        } else {
            c.blocked.push_back(Pending { w, tag: Tag::Plain });
            self.flush_writes(conn);
        }
        t.section(Section::WriteTcp);
        self.transmit(conn);
        t.section(Section::WriteTransmit);
    }

    /// Hand blocked writes to TCP while its send buffer has room. Returns the relayed
    /// stream bytes written (the edge returns them to its session as consumed).
    fn flush_writes(&mut self, conn: u32) -> usize {
        let now = self.now;
        let c = &mut self.conns[conn as usize];
        let mut relayed = 0;
        while let Some(pw) = c.blocked.front() {
            if c.sender.buffer_space() < pw.w.bytes as u64 {
                break;
            }
            let Pending { w, tag } = c.blocked.pop_front().expect("front exists");
            let end = c.sender.write(w.bytes as u64);
            match tag {
                Tag::Plain => {
                    if now.saturating_since(w.at) > WRITE_WAIT {
                        c.writes_waited += 1;
                    }
                    c.msgs.push(Msg::new(end, w));
                    if let Some(r) = &mut self.rtt {
                        r.note_app(conn, c.msgs.len() - 1, w.app);
                    }
                }
                Tag::Relay => relayed += w.bytes as usize,
            }
        }
        c.sender.set_writer_waits(!c.blocked.is_empty());
        if relayed > 0 {
            let tn = self.tunnel.as_mut().expect("only the tunnel relays");
            let id = tn.stream_of(self.conns[conn as usize].pair);
            tn.edge.session.stream_consumed(id, relayed);
        }
        relayed
    }

    /// Send everything TCP allows now, then re-arm its timer.
    fn transmit(&mut self, conn: u32) {
        let now = self.now;
        let mut t = Stamp::now();
        while let Some(seg) = self.conns[conn as usize].sender.poll_transmit(now) {
            t.section(Section::PollTransmit);
            let c = &mut self.conns[conn as usize];
            c.pad.touch();
            // This copy supersedes any dropped copy of the same bytes.
            c.dropped.retain(|&(s, _)| s < seg.seq || s >= seg.end());
            let (interactive, first) = mark_transmission(&mut c.msgs[c.acked_cursor..], &seg, now, !c.relay);
            let row = (c.acked_cursor + first) as u32;
            if interactive && !seg.retransmission {
                c.sender.mark_interactive(seg.seq); // its priority band (tcp.rack_bands)
            }
            if let Some(r) = &mut self.rtt {
                let kind = c.msgs.get(row as usize).map_or(Kind::Interactive, |m| m.kind());
                r.on_transmit(conn, seg.seq, seg.end(), seg.retransmission, (row as usize, kind), now);
            }
            t.section(Section::MarkRows);
            let route0 = self.routes.port(conn, 0, 0);
            self.send(
                route0,
                Packet {
                    conn,
                    hop: 0,
                    interactive,
                    sacks: false,
                    ece: false,
                    row,
                    wire: seg.len + self.header,
                    body: Body::Data(seg),
                    t_tx: now,
                    t_enq: NONE,
                    t_deq: NONE,
                },
            );
            t.section(Section::Send);
        }
        t.section(Section::PollTransmit);
        if self.prefetch {
            // Only the prefetching reads it.
            self.rows_at[conn as usize] = self.conns[conn as usize].msgs.as_ptr() as usize;
        }
        self.arm_sender(conn);
        t.section(Section::ArmTimer);
        self.trace_conn(conn);
        t.section(Section::Trace);
    }

    fn on_sender_timer(&mut self, conn: u32, at: Instant) {
        if !self.timer_fires(conn, End::Sender, at) {
            return;
        }
        let c = &mut self.conns[conn as usize];
        if let Some(seq) = c.sender.handle_timeout(self.now) {
            let una = c.sender.snd_una();
            c.dropped.retain(|&(_, e)| e > una);
            if !c.dropped.iter().any(|&(s, e)| s <= seq && seq < e) {
                c.spurious_timeouts += 1;
            }
            if self.logged[conn as usize] {
                let l = &mut self.out.packet_log;
                l.conn.push(conn);
                l.t.push(self.now.as_secs_f64());
                l.event.push(LOG_TIMEOUT);
                l.seq.push(seq);
                l.len.push(0);
                l.retx.push(0);
            }
        }
        self.transmit(conn);
    }

    fn arm_sender(&mut self, conn: u32) {
        let due = self.conns[conn as usize].sender.poll_timeout();
        self.arm(conn, End::Sender, due.unwrap_or(NONE));
    }

    /// Note endpoint `end`'s deadline `due` and make sure an event comes by then.
    fn arm(&mut self, conn: u32, end: End, due: Instant) {
        let t = &mut self.timers[conn as usize][end as usize];
        t.due = due;
        if due < t.armed {
            t.armed = due;
            self.events.push(
                due,
                match end {
                    End::Sender => Event::SenderTimer { conn },
                    End::Receiver => Event::ReceiverTimer { conn },
                },
            );
        }
    }

    /// A timer event of `end` at `at`: whether the endpoint has a deadline due. An event
    /// superseded by an earlier one does nothing; one whose deadline moved later
    /// re-arms for it.
    fn timer_fires(&mut self, conn: u32, end: End, at: Instant) -> bool {
        let t = &mut self.timers[conn as usize][end as usize];
        if t.armed != at {
            return false;
        }
        t.armed = NONE;
        if t.due > at {
            let due = t.due;
            self.arm(conn, end, due);
            return false;
        }
        true
    }

    // ----- receivers --------------------------------------------------------------

    /// Data segment `seg` of `conn` arrived; `stamps`: the packet's t_tx, t_enq, t_deq.
    fn on_data_arrival(&mut self, conn: u32, stamps: [Instant; 3], seg: DataSegment) {
        let now = self.now;
        let c = &mut self.conns[conn as usize];
        let d = c.receiver.handle_segment(now, &seg);
        // First arrival of each message's last byte.
        let from = c.read_cursor;
        let mut i = from + first_ending_after(&c.msgs[from..], seg.seq, false);
        let row = i as u32;
        while i < c.msgs.len() && c.msgs[i].end() <= seg.end() {
            let m = &mut c.msgs[i];
            if m.t_arrive == NONE {
                m.t_arrive = now;
                if !c.relay {
                    [m.t_tx, m.t_enq, m.t_deq] = stamps;
                }
            }
            i += 1;
        }
        // In-order bytes go to the application at once.
        let first_read = c.read_cursor;
        if d.to > d.from {
            while c.read_cursor < c.msgs.len() && c.msgs[c.read_cursor].end() <= d.to {
                c.msgs[c.read_cursor].t_read = now;
                c.read_cursor += 1;
            }
        }
        let read_to = c.read_cursor;
        self.send_acks(conn, row);
        let Some(lane) = self.tunnel.as_ref().and_then(|tn| tn.lane_of(conn)) else { return };
        let receiver_is_edge = !lane.0;
        if receiver_is_edge {
            self.copy_trunk_stamps(conn, first_read, read_to);
        }
        if d.to > d.from {
            self.tunnel.as_mut().expect("mux mode").deliver(conn, d.to - d.from, now);
            self.pump(receiver_is_edge);
        }
    }

    /// Send the ACKs the receiver has. `row`: the message row their sender will read
    /// first (the one just arrived), as a prefetch hint.
    fn send_acks(&mut self, conn: u32, row: u32) {
        let now = self.now;
        while let Some(ack) = self.conns[conn as usize].receiver.poll_ack() {
            let ece = self.conns[conn as usize].receiver.ece();
            let route0 = self.routes.port(conn, 1, 0);
            self.send(
                route0,
                Packet {
                    conn,
                    hop: 0,
                    interactive: false,
                    sacks: !ack.sack.as_slice().is_empty(),
                    ece,
                    row,
                    wire: self.header,
                    body: Body::Ack(ack),
                    t_tx: now,
                    t_enq: NONE,
                    t_deq: NONE,
                },
            );
        }
        let due = self.conns[conn as usize].receiver.poll_timeout();
        self.arm(conn, End::Receiver, due.unwrap_or(NONE));
    }

    fn on_receiver_timer(&mut self, conn: u32, at: Instant) {
        if !self.timer_fires(conn, End::Receiver, at) {
            return;
        }
        let c = &mut self.conns[conn as usize];
        c.receiver.handle_timeout(self.now);
        let row = c.acked_cursor as u32;
        self.send_acks(conn, row);
    }

    fn on_ack_arrival(&mut self, conn: u32, ack: Ack, ece: bool) {
        let mut t = Stamp::now();
        let c = &mut self.conns[conn as usize];
        c.pad.touch();
        c.sender.handle_ack(self.now, &ack);
        if ece {
            c.sender.handle_ece(self.now);
        }
        t.section(Section::AckHandle);
        let una = c.sender.snd_una();
        if let Some(r) = &mut self.rtt {
            r.on_ack(conn, una, self.now);
        }
        while c.acked_cursor < c.msgs.len() && c.msgs[c.acked_cursor].end() <= una {
            c.acked_cursor += 1;
        }
        t.section(Section::AckCursor);
        let relayed = self.flush_writes(conn);
        t.section(Section::AckBlocked);
        self.transmit(conn);
        t.section(Section::AckTransmit);
        // A trunk's socket drained below the low-water mark, or a last hop took
        // relayed bytes (credit to return): the tunnel end acts.
        match self.tunnel.as_ref().map(|tn| tn.lane_of(conn)) {
            Some(Some((edge, _))) => self.pump(edge),
            Some(None) if relayed > 0 => self.pump(true),
            _ => {}
        }
    }

    // ----- ports and links --------------------------------------------------------

    /// A packet leaves its endpoint through `port`. What its queue needs is taken from
    /// `p`, not read back from the slab slot just written: that read waited for the
    /// write to reach the cache (removing it saved 2–3 % of a run at 10⁴ pairs).
    fn send(&mut self, port: u32, p: Packet) {
        let (conn, wire, interactive) = (p.conn, p.wire, p.interactive);
        let ect = matches!(p.body, Body::Data(s) if s.ecn.ect);
        let event = if matches!(p.body, Body::Data(_)) { LOG_DATA_SENT } else { LOG_ACK_SENT };
        let mut t = Stamp::now();
        if let Some(tap) = &mut self.pcap {
            tap.offer(pcap::Seen::Sent, &p, self.now);
        }
        let packet = self.alloc(p);
        if self.logged[conn as usize] {
            self.log_packet(event, packet);
        }
        t.section(Section::SendSlab);
        // Only the event-cycles build tells an idle port's direct hand-over apart.
        let direct = cfg!(feature = "diag-event-cycles") && {
            let pt = &self.ports[port as usize];
            pt.plain_fifo && !pt.free_scheduled && pt.busy_until <= self.now
        };
        t.section(Section::SendReadPort);
        self.enqueue(port, QItem { packet, wire, interactive, ect, ce: false, conn });
        t.section(if direct { Section::SendIdlePort } else { Section::SendQueue });
    }

    fn alloc(&mut self, p: Packet) -> u32 {
        self.out.packets.created += 1;
        match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = p;
                i
            }
            None => {
                self.slab.push(p);
                (self.slab.len() - 1) as u32
            }
        }
    }

    fn enqueue(&mut self, port: u32, item: QItem) {
        let now = self.now;
        let pt = &mut self.ports[port as usize];
        if pt.plain_fifo && !pt.free_scheduled && pt.busy_until <= now {
            // An idle link with no PortFree pending has an empty queue (a backlog always
            // has one): a tail-drop FIFO hands the packet straight over. Not touching
            // the queue's memory at all matters at 10⁴ connections.
            debug_assert_eq!(self.queues[port as usize].queue.backlog_packets(), 0);
            self.transmit_item(port, item, false);
            return;
        }
        if pt.bottleneck {
            let pk = &mut self.slab[item.packet as usize];
            pk.t_enq = now;
            // The middlebox sees the data before its own queue (which may drop it).
            if let (Some(q), Body::Data(seg)) = (self.qds.as_deref_mut(), &pk.body) {
                q.observe_data(now, item.conn, seg, item.wire);
            }
        }
        self.queues[port as usize].queue.enqueue(now, item, &mut self.drop_buf);
        let mut drops = std::mem::take(&mut self.drop_buf);
        for d in drops.drain(..) {
            self.on_drop(d.packet.packet);
        }
        self.drop_buf = drops;
        let pt = &mut self.ports[port as usize];
        if pt.free_scheduled && !pt.waiting {
            return; // the pending PortFree serves the queue
        }
        if pt.busy_until <= now {
            self.start_tx(port);
        } else {
            pt.free_scheduled = true;
            let at = pt.busy_until;
            self.events.push(at, Event::PortFree { port });
        }
    }

    fn on_drop(&mut self, packet: u32) {
        self.out.packets.dropped += 1;
        self.log_packet(LOG_DROPPED, packet);
        let pk = &self.slab[packet as usize];
        if let Body::Data(seg) = pk.body {
            self.conns[pk.conn as usize].dropped.push((seg.seq, seg.end()));
        }
        self.free.push(packet);
    }

    fn start_tx(&mut self, port: u32) {
        let queue = &mut self.queues[port as usize].queue;
        let next = queue.dequeue(self.now);
        // CoDel drops at the head while dequeuing (RFC 8289 §5.5).
        queue.take_drops(&mut self.drop_buf);
        if !self.drop_buf.is_empty() {
            let mut drops = std::mem::take(&mut self.drop_buf);
            for d in drops.drain(..) {
                self.on_drop(d.packet.packet);
            }
            self.drop_buf = drops;
        }
        let Some(item) = next else {
            self.wait_for_queue(port);
            return;
        };
        let backlog = self.queues[port as usize].queue.backlog_packets() > 0;
        let pt = &mut self.ports[port as usize];
        if pt.waiting {
            // Started by an arrival before the wake-up: that one is stale now.
            pt.waiting = false;
            pt.free_scheduled = false;
        }
        self.transmit_item(port, item, backlog);
    }

    /// Change the class scheduler of `port` now (a QDS controller's period): `f` gets
    /// its [`ClassControl`]; afterwards an idle port with packets queued tries again at
    /// once, since the new rates may let a class send sooner. None when it has no
    /// classes.
    pub(crate) fn with_classes<R>(
        &mut self,
        port: u32,
        f: impl FnOnce(&mut dyn ClassControl) -> R,
    ) -> Option<R> {
        let r = f(self.queues[port as usize].queue.classes()?);
        // Idle (waiting for tokens, or stuck with no class able to send at all).
        let pt = &self.ports[port as usize];
        if (pt.waiting || !pt.free_scheduled) && pt.busy_until <= self.now {
            self.start_tx(port);
        }
        Some(r)
    }

    /// The queue holds packets but gave none (a shaped class out of tokens): wake the
    /// port when the discipline says one is ready (`QueueDisc::next_ready`).
    fn wait_for_queue(&mut self, port: u32) {
        let pq = &mut self.queues[port as usize];
        if pq.queue.backlog_packets() == 0 {
            return;
        }
        let Some(at) = pq.queue.next_ready(self.now) else { return };
        let pt = &mut self.ports[port as usize];
        pt.free_scheduled = true;
        pt.waiting = true;
        if pq.wake_at != at {
            pq.wake_at = at;
            self.events.push(at, Event::PortFree { port });
        }
    }

    /// Put `item` on the (idle) link of `port` now; `backlog`: more wait in its queue.
    fn transmit_item(&mut self, port: u32, item: QItem, backlog: bool) {
        let now = self.now;
        if item.ce {
            // CoDel marked it in this queue (RFC 3168 §5): the IP header now says CE.
            if let Body::Data(seg) = &mut self.slab[item.packet as usize].body {
                seg.ecn.ce = true;
            }
        }
        let pt = &mut self.ports[port as usize];
        let link = &self.links[pt.link as usize];
        let tx = match item.wire {
            w if w == self.header => link.tx_ack,
            w if w == self.header + self.mss => link.tx_full,
            w => Duration::transmission(w as u64, link.rate_bps),
        };
        let done = now + tx;
        pt.busy_until = done;
        if pt.bottleneck {
            self.slab[item.packet as usize].t_deq = done;
        }
        if backlog {
            pt.free_scheduled = true;
            self.events.push(done, Event::PortFree { port });
        }
        let (delay, wan) = (link.delay, pt.wan);
        let mut arrive = done + delay;
        if wan {
            if let Some(tap) = &mut self.pcap {
                tap.offer(pcap::Seen::OnWan, &self.slab[item.packet as usize], now);
            }
            let pq = &mut self.queues[port as usize];
            if done <= self.window {
                pq.bytes_tx += item.wire as u64;
                pq.packets_tx += 1;
                if item.interactive {
                    pq.bytes_tx_interactive += item.wire as u64;
                }
            }
            if let Some(imp) = &mut pq.impair {
                match imp.transit(done, delay) {
                    Ok(at) => arrive = at,
                    Err(_) => {
                        // The lost packet still occupied the link while it was serialised.
                        pq.drops_loss += 1;
                        self.on_drop(item.packet);
                        return;
                    }
                }
            }
        }
        let ev = Event::Arrive { packet: item.packet };
        if wan {
            // A link never reorders: its arrivals are in time order.
            self.events.push_in_lane(port as usize, arrive, ev);
        } else if item.wire == self.header || item.wire == self.header + self.mss {
            // An ACK or a full segment: arrives a fixed time after now (the link
            // was idle until now), as every such packet over a link of this rate and
            // delay does.
            self.events.push_after((arrive - now).as_nanos(), arrive, ev);
        } else {
            self.events.push(arrive, ev);
        }
    }

    fn on_arrive(&mut self, packet: u32) {
        // Only the first cache line (header and body tag) until the packet has arrived:
        // an ACK's SACK blocks in the second are read at its endpoint alone.
        let pk = &mut self.slab[packet as usize];
        pk.hop += 1;
        let (hop, conn, dir) = (pk.hop as usize, pk.conn as usize, matches!(pk.body, Body::Ack(_)) as usize);
        if hop == 2 && dir == 1 {
            // An ACK reaches R1 from the uplink: the middlebox sees it.
            if let (Some(q), Body::Ack(a)) = (self.qds.as_deref_mut(), &pk.body) {
                q.observe_ack(self.now, pk.conn, a.ack, pk.wire);
            }
        }
        if hop < HOPS {
            let next = self.routes.port(conn as u32, dir, hop);
            if next != NO_PORT {
                let item = QItem::of(packet, pk);
                self.enqueue(next, item);
                return;
            }
        }
        self.free.push(packet);
        self.out.packets.arrived += 1;
        self.log_packet(if dir == 0 { LOG_DATA_ARRIVED } else { LOG_ACK_ARRIVED }, packet);
        let pk = &self.slab[packet as usize];
        if let Some(tap) = &mut self.pcap {
            tap.offer(pcap::Seen::Arrived, pk, self.now);
        }
        match pk.body {
            Body::Data(seg) => {
                let stamps = [pk.t_tx, pk.t_enq, pk.t_deq];
                self.on_data_arrival(conn as u32, stamps, seg)
            }
            Body::Ack(ref a) if !pk.sacks => {
                let ack = Ack { ack: a.ack, wnd: a.wnd, sack: SackBlocks::default() };
                self.on_ack_arrival(conn as u32, ack, pk.ece)
            }
            Body::Ack(ack) => self.on_ack_arrival(conn as u32, ack, pk.ece),
        }
    }

    // ----- traces and results -----------------------------------------------------

    /// Log a packet event of a selected connection (`records.packet_log_conns`).
    fn log_packet(&mut self, event: u8, packet: u32) {
        let pk = &self.slab[packet as usize];
        if !self.logged[pk.conn as usize] {
            return;
        }
        let (seq, len, retx) = match pk.body {
            Body::Data(d) => (d.seq, d.len, d.retransmission as u8),
            Body::Ack(a) => (a.ack, 0, 0),
        };
        let l = &mut self.out.packet_log;
        l.conn.push(pk.conn);
        l.t.push(self.now.as_secs_f64());
        l.event.push(event);
        l.seq.push(seq);
        l.len.push(len);
        l.retx.push(retx);
    }

    fn on_trace_sample(&mut self) {
        let t = self.now.as_secs_f64();
        for (_, p) in self.ports.iter().zip(&self.queues).filter(|(link, _)| link.wan) {
            let q = &mut self.out.queue_trace;
            q.port.push(p.name.to_string());
            q.t.push(t);
            q.bytes.push(p.queue.backlog_bytes());
            q.packets.push(p.queue.backlog_packets() as u64);
        }
        let next = self.now + self.trace_interval;
        if next <= self.end {
            self.events.push(next, Event::TraceSample);
        }
    }

    fn trace_conn(&mut self, conn: u32) {
        if !self.trace_tcp {
            return;
        }
        let c = &mut self.conns[conn as usize];
        let s = &c.sender;
        let dur = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
        let ss = if s.ssthresh() == u64::MAX { f64::INFINITY } else { s.ssthresh() as f64 };
        let row = [
            s.cwnd() as f64,
            ss,
            dur(s.rtt().srtt()),
            dur(s.rtt().rttvar()),
            s.current_rto().as_secs_f64(),
            dur(s.last_rtt_sample()),
        ];
        let same = row.iter().zip(c.last_trace.iter()).all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
        if same {
            return;
        }
        c.last_trace = row;
        let tr = &mut self.out.conn_trace;
        tr.conn.push(conn);
        tr.t.push(self.now.as_secs_f64());
        tr.cwnd.push(row[0]);
        tr.ssthresh.push(row[1]);
        tr.srtt.push(row[2]);
        tr.rttvar.push(row[3]);
        tr.rto.push(row[4]);
        tr.rtt.push(row[5]);
    }
}

/// Count a transmission for every message whose last byte the segment carries, stamp
/// first transmissions (unless `stamp` is off: relayed messages keep the trunk's), and
/// say whether it carries any interactive byte and which message (index in `msgs`) it
/// starts in.
fn mark_transmission(msgs: &mut [Msg], seg: &DataSegment, now: Instant, stamp: bool) -> (bool, usize) {
    let mut interactive = false;
    // New data is at the end of the rows, a retransmission near the start.
    let first = first_ending_after(msgs, seg.seq, !seg.retransmission);
    let mut i = first;
    while i < msgs.len() {
        let m = &mut msgs[i];
        interactive |= m.kind() == Kind::Interactive;
        if m.end() > seg.end() {
            break; // carries only a middle part of this one
        }
        if !stamp {
            i += 1;
            continue;
        }
        m.set_tx_count(m.tx_count() + 1);
        if m.t_first_tx == NONE {
            m.t_first_tx = now;
        }
        i += 1;
    }
    (interactive, first)
}

/// The first of `msgs` (in offset order) whose last byte is at or after `seq`: the
/// `partition_point` of `m.end <= seq`, found by galloping from the start or, with
/// `from_end`, from the end. The rows are cold at 10⁴ connections and the answer is
/// almost always the first or last one: one or two rows read instead of a binary
/// search's log₂(n), each a cache miss waiting on the last.
fn first_ending_after(msgs: &[Msg], seq: u64, from_end: bool) -> usize {
    let before = |m: &Msg| m.end() <= seq;
    let n = msgs.len();
    let mut bound = 1;
    let (lo, hi) = if from_end {
        while bound <= n && !before(&msgs[n - bound]) {
            bound *= 2;
        }
        (n.saturating_sub(bound), n - bound / 2)
    } else {
        while bound <= n && before(&msgs[bound - 1]) {
            bound *= 2;
        }
        (bound / 2, bound.min(n))
    };
    lo + msgs[lo..hi].partition_point(before)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galloping_finds_what_a_binary_search_finds() {
        let w = Write { at: Instant::ZERO, bytes: 1, kind: Kind::Interactive, app: App::ThinClient };
        for n in 0..40u64 {
            let msgs: Vec<Msg> = (1..=n).map(|k| Msg::new(10 * k, w)).collect();
            for seq in 0..10 * n + 12 {
                let want = msgs.partition_point(|m| m.end() <= seq);
                assert_eq!(first_ending_after(&msgs, seq, false), want, "n={n} seq={seq} forward");
                assert_eq!(first_ending_after(&msgs, seq, true), want, "n={n} seq={seq} from the end");
            }
        }
    }
}

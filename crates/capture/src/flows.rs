//! `thinwan analyze`: a capture → its TCP connections → the thin-client model's
//! statistics (issue 19; `docs/analyze.md`).
//!
//! One pass over the file. Each TCP packet that passes the filter is given to its
//! connection (a live table keyed by the two endpoints). Per connection:
//!
//! - the **server** end is the one whose port is `--server-port`; without it, the
//!   destination of the first SYN or the source of the first SYN-ACK seen; if the
//!   handshake was not captured, the end with the lower port ([`ServerBy`], written in
//!   the connection's row);
//! - each direction's sequence numbers sort its payload segments into new,
//!   **out-of-order** and **retransmitted** ([`SeqTrack`]);
//! - new response packets with payload (server → client) go through proto's gap rule
//!   ([`GapRule`]), request packets with payload time the request inter-arrival;
//! - every packet goes through proto's passive monitor (`qds::monitor`), whose RTT
//!   samples of both halves give the row's medians and p90s.
//!
//! **Memory** is bounded by the live connections, not the capture's length: the pooled
//! statistics are fixed-size histograms ([`Pooled`]); a connection is summarised into
//! one row and dropped when it has been closed (FIN both ways or RST) for
//! [`CLOSED_LINGER`] of capture time, or idle for [`Options::idle_timeout`]; its RTT
//! samples are a bounded, evenly thinned subsample ([`RTT_SAMPLES_MAX`]).
//! Rows and sessions come out in the order the connections were first seen, whatever
//! order they ended in, so the result is deterministic.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use thinwan_proto::gaprule::{FlowKind, GapRule, Pooled};
use thinwan_proto::qds::monitor::{FlowMonitor, MonitorConfig, MonitorStats, Toward};
use thinwan_proto::{Duration, Instant};

use crate::filter::Expr;
use crate::ip::{self, TcpPacket};
use crate::reader::{try_for_each_packet, Format};

/// A closed connection stays in the table this long (capture time) so that its last
/// ACKs and a retransmitted FIN count in it, not as a new connection.
pub const CLOSED_LINGER: Duration = Duration::from_secs(2);
/// RTT samples kept per half of a connection; beyond, every other one is dropped and
/// only every 2nd (4th, …) new one is kept, so the kept ones stay evenly spread.
pub const RTT_SAMPLES_MAX: usize = 4096;
/// Sequence holes remembered per direction (for out-of-order detection); the oldest is
/// forgotten beyond.
pub const MAX_HOLES: usize = 16;
/// The idle expiry is checked once per this much capture time.
const SCAN_EVERY: Duration = Duration::from_secs(1);

/// How to analyse.
#[derive(Clone, Debug)]
pub struct Options {
    /// The server's port (`--server-port`); None: from the handshake.
    pub server_port: Option<u16>,
    /// Keep only packets matching this (`--filter`).
    pub filter: Option<Expr>,
    /// The gap rule's threshold (`--gap-ms`).
    pub gap: Duration,
    /// Stop after this many packets of the file.
    pub max_packets: Option<u64>,
    /// A connection idle this long ends (its row is written; a later packet starts a new one).
    pub idle_timeout: Duration,
    /// Also return every response packet's gap-rule label ([`Analysis::labels`]): grows
    /// with the capture, for tests and small captures.
    pub labels: bool,
}

impl Options {
    /// `gap`, everything else at its default: no port, no filter, all packets, 600-s
    /// idle timeout, no labels.
    pub fn new(gap: Duration) -> Self {
        Options {
            server_port: None,
            filter: None,
            gap,
            max_packets: None,
            idle_timeout: DEFAULT_IDLE,
            labels: false,
        }
    }
}

/// Default idle timeout: 10 minutes. A remote-desktop session can sit idle for a
/// minute or more (the source's inter-arrival times reach 60 s) and must stay one
/// session; a keep-alive every few tens of seconds keeps longer pauses alive anyway.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);

/// How the server end of a connection was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerBy {
    /// Its port is `--server-port`.
    Port,
    /// It received the first SYN.
    Syn,
    /// It sent the first SYN-ACK.
    SynAck,
    /// No handshake captured: the end with the lower port (the other's is ephemeral).
    LowerPort,
}

impl ServerBy {
    /// "port", "syn", "syn_ack", "lower_port".
    pub fn name(self) -> &'static str {
        match self {
            ServerBy::Port => "port",
            ServerBy::Syn => "syn",
            ServerBy::SynAck => "syn_ack",
            ServerBy::LowerPort => "lower_port",
        }
    }
}

/// Why a connection's row was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// FIN both ways.
    Fin,
    /// RST.
    Rst,
    /// Idle for the idle timeout.
    Idle,
    /// A SYN opened a new connection on the same endpoints.
    Reused,
    /// Still open at the end of the capture.
    Eof,
}

impl EndReason {
    /// "fin", "rst", "idle", "reused", "eof".
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::Idle => "idle",
            EndReason::Reused => "reused",
            EndReason::Eof => "eof",
        }
    }
}

/// Median and 90th percentile of one half's RTT samples, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RttSummary {
    /// Median (linear interpolation between order statistics); None without samples.
    pub median_ms: Option<f64>,
    /// 90th percentile, same way.
    pub p90_ms: Option<f64>,
    /// Samples taken (all, not only the kept ones).
    pub samples: u64,
}

/// One connection's row.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnRow {
    /// 0, 1, 2… in the order first seen.
    pub id: u64,
    /// Client end.
    pub client: SocketAddr,
    /// Server end.
    pub server: SocketAddr,
    /// How the server end was decided.
    pub server_by: ServerBy,
    /// Why the row ended.
    pub end: EndReason,
    /// First and last packet, seconds since the epoch.
    pub first_s: f64,
    /// Last packet.
    pub last_s: f64,
    /// Packets server → client (response), all.
    pub packets_s2c: u64,
    /// Packets client → server (request), all.
    pub packets_c2s: u64,
    /// Payload bytes server → client, retransmissions included.
    pub bytes_s2c: u64,
    /// Payload bytes client → server.
    pub bytes_c2s: u64,
    /// Interactive flows.
    pub flows_interactive: u64,
    /// Bulk flows (blocks).
    pub flows_bulk: u64,
    /// Transitions by `Transition::index` (II, IB, BI, BB).
    pub transitions: [u64; 4],
    /// Retransmitted payload segments server → client.
    pub retrans_s2c: u64,
    /// Same client → server.
    pub retrans_c2s: u64,
    /// Out-of-order payload segments server → client.
    pub ooo_s2c: u64,
    /// Same client → server.
    pub ooo_c2s: u64,
    /// Client half (capture point → client → capture point).
    pub rtt_client: RttSummary,
    /// Server half.
    pub rtt_server: RttSummary,
}

/// The result of [`analyze`].
#[derive(Clone, Debug)]
pub struct Analysis {
    /// One row per connection, in the order first seen.
    pub conns: Vec<ConnRow>,
    /// Statistics pooled over the connections.
    pub pooled: Pooled,
    /// pcap or pcapng.
    pub format: Format,
    /// Packets read.
    pub packets_total: u64,
    /// TCP packets.
    pub packets_tcp: u64,
    /// TCP packets that passed the filter and the server port.
    pub packets_matched: u64,
    /// The monitor's counters.
    pub monitor: MonitorStats,
    /// With [`Options::labels`]: (packet number, kind) of every new response packet with
    /// payload, in the order their flows closed.
    pub labels: Option<Vec<(u64, FlowKind)>>,
    /// Most connections live at once (the memory bound).
    pub live_max: usize,
}

/// Why a capture could not be analysed; every message names the file.
#[derive(Debug)]
pub enum AnalyzeError {
    /// The file could not be read (damaged, truncated, not a capture…).
    Read(crate::Error),
    /// No TCP packet in the file.
    NoTcp {
        /// The file.
        path: PathBuf,
        /// Packets in it.
        total: u64,
    },
    /// No TCP packet matched the server port / filter.
    NoMatch {
        /// The file.
        path: PathBuf,
        /// What was asked ("TCP port 3389", "filter …").
        what: String,
        /// TCP packets in the file.
        tcp: u64,
        /// The busiest TCP ports: (port, packets).
        busiest: Vec<(u16, u64)>,
    },
}

impl fmt::Display for AnalyzeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalyzeError::Read(e) => write!(f, "{e}"),
            AnalyzeError::NoTcp { path, total: 0 } => {
                write!(f, "{}: the capture holds no packet", path.display())
            }
            AnalyzeError::NoTcp { path, total } => {
                write!(f, "{}: none of its {total} packets is TCP (over IPv4 or IPv6)", path.display())
            }
            AnalyzeError::NoMatch { path, what, tcp, busiest } => {
                write!(f, "{}: no packet of {what} among its {tcp} TCP packets", path.display())?;
                if !busiest.is_empty() {
                    let ports: Vec<String> =
                        busiest.iter().map(|(p, n)| format!("{p} ({n} packets)")).collect();
                    write!(f, "; its busiest TCP ports: {}", ports.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for AnalyzeError {}

impl From<crate::Error> for AnalyzeError {
    fn from(e: crate::Error) -> Self {
        AnalyzeError::Read(e)
    }
}

/// Read the capture at `path` and analyse its TCP connections. `progress` is called
/// with the number of packets read every 2^20 packets.
pub fn analyze(path: &Path, opts: &Options, mut progress: impl FnMut(u64)) -> Result<Analysis, AnalyzeError> {
    let mut d = Driver::new(opts);
    let max = opts.max_packets.unwrap_or(u64::MAX);
    let (format, total) = try_for_each_packet(path, |raw| {
        if raw.number > max {
            return ControlFlow::Break(());
        }
        if raw.number & 0xf_ffff == 0 {
            progress(raw.number);
        }
        if let ip::Frame::Tcp(p) = ip::parse(raw.linktype, raw.data) {
            d.packet(raw.number, Instant::from_nanos(raw.t_ns), &p);
        }
        ControlFlow::Continue(())
    })?;
    let total = total.min(max);
    if d.tcp == 0 {
        return Err(AnalyzeError::NoTcp { path: path.to_path_buf(), total });
    }
    if d.matched == 0 {
        let what = match (&opts.filter, opts.server_port) {
            (Some(f), Some(p)) => format!("TCP port {p} matching the filter '{f}'"),
            (Some(f), None) => format!("the filter '{f}'"),
            (None, Some(p)) => format!("TCP port {p}"),
            (None, None) => "TCP".to_string(),
        };
        let busiest = d.busiest();
        return Err(AnalyzeError::NoMatch { path: path.to_path_buf(), what, tcp: d.tcp, busiest });
    }
    Ok(d.finish(format, total))
}

/// The endpoints of a connection, lower first (the same key both ways).
type Key = (SocketAddr, SocketAddr);

fn key_of(p: &TcpPacket) -> Key {
    let (a, b) = (SocketAddr::new(p.src, p.sport), SocketAddr::new(p.dst, p.dport));
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

struct Driver<'o> {
    opts: &'o Options,
    conns: HashMap<Key, Conn>,
    monitor: FlowMonitor<u64>,
    pooled: Pooled,
    rows: Vec<ConnRow>,
    /// Sessions with their connection id, sorted by id at the end.
    sessions: Vec<(u64, thinwan_proto::gaprule::Session)>,
    labels: Option<Vec<(u64, FlowKind)>>,
    next_id: u64,
    tcp: u64,
    matched: u64,
    /// Unmatched TCP packets per lower port (for the error's "busiest ports").
    port_counts: Vec<u32>,
    next_scan: Instant,
    now: Instant,
    live_max: usize,
}

impl<'o> Driver<'o> {
    fn new(opts: &'o Options) -> Self {
        let cfg = MonitorConfig {
            // The monitor forgets a flow no sooner than the table does.
            idle_timeout: opts.idle_timeout + CLOSED_LINGER + SCAN_EVERY,
            max_flows: 1 << 20,
            ..MonitorConfig::default()
        };
        Driver {
            opts,
            conns: HashMap::new(),
            monitor: FlowMonitor::new(cfg),
            pooled: Pooled::default(),
            rows: Vec::new(),
            sessions: Vec::new(),
            labels: opts.labels.then(Vec::new),
            next_id: 0,
            tcp: 0,
            matched: 0,
            port_counts: vec![0; 65_536],
            next_scan: Instant::ZERO,
            now: Instant::ZERO,
            live_max: 0,
        }
    }

    #[inline]
    fn packet(&mut self, number: u64, t: Instant, p: &TcpPacket) {
        self.tcp += 1;
        let port_ok = self.opts.server_port.is_none_or(|s| p.sport == s || p.dport == s);
        if !port_ok || self.opts.filter.as_ref().is_some_and(|f| !f.matches(p)) {
            self.port_counts[usize::from(p.sport.min(p.dport))] += 1;
            return;
        }
        self.matched += 1;
        self.now = self.now.max(t);
        if self.now >= self.next_scan {
            self.scan();
            self.next_scan = self.now + SCAN_EVERY;
        }
        let key = key_of(p);
        let opening = p.flags.syn && !p.flags.ack;
        // A new SYN on endpoints whose connection carried data or closed: a new
        // connection. A packet after the idle timeout (between two scans): the same.
        if let Some(c) = self.conns.get(&key) {
            let why = if t.saturating_since(c.last) >= self.opts.idle_timeout {
                Some(EndReason::Idle)
            } else if opening && (c.closed.is_some() || c.packets[0] + c.packets[1] > 2) {
                Some(EndReason::Reused)
            } else {
                None
            };
            if let Some(why) = why {
                let c = self.conns.remove(&key).expect("just found");
                self.end(c, why);
            }
        }
        if !self.conns.contains_key(&key) {
            self.conns.insert(key, Conn::new(self.next_id, t, p, self.opts));
            self.next_id += 1;
            self.live_max = self.live_max.max(self.conns.len());
        }
        let conn = self.conns.get_mut(&key).expect("inserted above");
        let from_server = SocketAddr::new(p.src, p.sport) == conn.server;
        let d = usize::from(!from_server); // 0: s2c (response), 1: c2s (request)
        conn.last = conn.last.max(t);
        conn.packets[d] += 1;
        conn.bytes[d] += u64::from(p.payload);
        if p.payload > 0 {
            match conn.seq[d].classify(p.seq, p.payload, p.flags.syn) {
                SeqClass::Retransmission => conn.retrans[d] += 1,
                class => {
                    if class == SeqClass::OutOfOrder {
                        conn.ooo[d] += 1;
                    }
                    if from_server {
                        let closed = conn.rule.push(t, p.payload, &mut self.pooled);
                        if let Some(labels) = self.labels.as_mut() {
                            if let Some(f) = closed {
                                labels.extend(conn.open_packets.drain(..).map(|n| (n, f.kind)));
                            }
                            conn.open_packets.push(number);
                        }
                    } else {
                        conn.rule.push_request(t, &mut self.pooled);
                    }
                }
            }
        } else {
            conn.seq[d].advance(p.seq, p.flags.syn, p.flags.fin);
        }
        let toward = if from_server { Toward::Client } else { Toward::Server };
        if let Some((half, rtt)) = self.monitor.observe_sample(t, conn.id, toward, &p.segment()) {
            conn.rtt[usize::from(half == Toward::Server)].push(rtt);
        }
        if p.flags.rst {
            conn.closed.get_or_insert((t, EndReason::Rst));
        } else if p.flags.fin {
            conn.fin[d] = true;
            if conn.fin[0] && conn.fin[1] {
                conn.closed.get_or_insert((t, EndReason::Fin));
            }
        }
    }

    /// End the connections closed for [`CLOSED_LINGER`] or idle for the idle timeout,
    /// in id order.
    fn scan(&mut self) {
        let now = self.now;
        let idle = self.opts.idle_timeout;
        let mut done: Vec<(u64, Key, EndReason)> = self
            .conns
            .iter()
            .filter_map(|(k, c)| match c.closed {
                Some((at, why)) if now.saturating_since(at) >= CLOSED_LINGER => Some((c.id, *k, why)),
                _ if now.saturating_since(c.last) >= idle => Some((c.id, *k, EndReason::Idle)),
                _ => None,
            })
            .collect();
        done.sort_unstable_by_key(|d| d.0);
        for (_, k, why) in done {
            let c = self.conns.remove(&k).expect("collected from the table");
            self.end(c, why);
        }
        self.monitor.expire(now);
    }

    fn end(&mut self, mut c: Conn, why: EndReason) {
        let closed = c.rule.finish(&mut self.pooled);
        if let (Some(labels), Some(f)) = (self.labels.as_mut(), closed) {
            labels.extend(c.open_packets.drain(..).map(|n| (n, f.kind)));
        }
        if let Some(s) = self.pooled.sessions.pop() {
            self.sessions.push((c.id, s));
        }
        let counts = c.rule.counts();
        self.rows.push(ConnRow {
            id: c.id,
            client: c.client,
            server: c.server,
            server_by: c.server_by,
            end: why,
            first_s: c.first.as_secs_f64(),
            last_s: c.last.as_secs_f64(),
            packets_s2c: c.packets[0],
            packets_c2s: c.packets[1],
            bytes_s2c: c.bytes[0],
            bytes_c2s: c.bytes[1],
            flows_interactive: counts.flows[0],
            flows_bulk: counts.flows[1],
            transitions: counts.transitions,
            retrans_s2c: c.retrans[0],
            retrans_c2s: c.retrans[1],
            ooo_s2c: c.ooo[0],
            ooo_c2s: c.ooo[1],
            rtt_client: c.rtt[0].summary(),
            rtt_server: c.rtt[1].summary(),
        });
    }

    fn finish(mut self, format: Format, total: u64) -> Analysis {
        let mut rest: Vec<(Key, Conn)> = self.conns.drain().collect();
        rest.sort_unstable_by_key(|(_, c)| c.id);
        for (_, c) in rest {
            let why = c.closed.map_or(EndReason::Eof, |(_, w)| w);
            self.end(c, why);
        }
        self.rows.sort_unstable_by_key(|r| r.id);
        self.sessions.sort_unstable_by_key(|s| s.0);
        self.pooled.sessions = self.sessions.drain(..).map(|(_, s)| s).collect();
        Analysis {
            conns: self.rows,
            pooled: self.pooled,
            format,
            packets_total: total,
            packets_tcp: self.tcp,
            packets_matched: self.matched,
            monitor: self.monitor.stats(),
            labels: self.labels,
            live_max: self.live_max,
        }
    }

    fn busiest(&self) -> Vec<(u16, u64)> {
        let mut b: Vec<(u16, u64)> = self
            .port_counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(p, n)| (p as u16, u64::from(*n)))
            .collect();
        b.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        b.truncate(3);
        b
    }
}

/// One live connection.
struct Conn {
    id: u64,
    client: SocketAddr,
    server: SocketAddr,
    server_by: ServerBy,
    first: Instant,
    last: Instant,
    /// Indexed [s2c, c2s].
    packets: [u64; 2],
    bytes: [u64; 2],
    seq: [SeqTrack; 2],
    retrans: [u64; 2],
    ooo: [u64; 2],
    fin: [bool; 2],
    closed: Option<(Instant, EndReason)>,
    rule: GapRule,
    /// [client half, server half].
    rtt: [RttSamples; 2],
    /// Packet numbers of the open flow (only with labels).
    open_packets: Vec<u64>,
}

impl Conn {
    fn new(id: u64, t: Instant, p: &TcpPacket, opts: &Options) -> Conn {
        let (src, dst) = (SocketAddr::new(p.src, p.sport), SocketAddr::new(p.dst, p.dport));
        let (server, by) = match opts.server_port {
            // The source wins if both ends have the port (as ServerSide::toward does).
            Some(port) if p.sport == port => (src, ServerBy::Port),
            Some(_) => (dst, ServerBy::Port),
            None if p.flags.syn && !p.flags.ack => (dst, ServerBy::Syn),
            None if p.flags.syn => (src, ServerBy::SynAck),
            None if p.sport < p.dport || (p.sport == p.dport && src < dst) => (src, ServerBy::LowerPort),
            None => (dst, ServerBy::LowerPort),
        };
        let client = if server == src { dst } else { src };
        Conn {
            id,
            client,
            server,
            server_by: by,
            first: t,
            last: t,
            packets: [0; 2],
            bytes: [0; 2],
            seq: [SeqTrack::default(), SeqTrack::default()],
            retrans: [0; 2],
            ooo: [0; 2],
            fin: [false; 2],
            closed: None,
            rule: GapRule::new(opts.gap),
            rtt: [RttSamples::default(), RttSamples::default()],
            open_packets: Vec::new(),
        }
    }
}

/// What a payload segment is, judged from the sequence space seen so far one way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqClass {
    /// It carries bytes beyond the highest seen (the usual case).
    New,
    /// Entirely below the highest byte seen, but into a hole never seen: it was
    /// overtaken (or, at a receiver's capture point, is the repair of a loss upstream).
    OutOfOrder,
    /// Every byte of it was seen before.
    Retransmission,
}

/// One direction's sequence space: the highest byte seen plus the holes below it
/// (RFC 9293 §3.4: comparisons modulo 2^32).
#[derive(Clone, Debug, Default)]
pub struct SeqTrack {
    /// One past the highest sequence number seen (SND.MAX as seen here).
    next: Option<u32>,
    /// Ranges `[start, end)` below `next` never seen, increasing, at most [`MAX_HOLES`].
    holes: Vec<(u32, u32)>,
}

impl SeqTrack {
    /// Classify a segment of `len` > 0 payload bytes at `seq` (a SYN's data starts one
    /// after it) and remember it.
    pub fn classify(&mut self, seq: u32, len: u32, syn: bool) -> SeqClass {
        let start = seq.wrapping_add(u32::from(syn));
        let end = start.wrapping_add(len);
        let Some(next) = self.next else {
            self.next = Some(end);
            return SeqClass::New;
        };
        if seq_le(next, start) {
            if start != next {
                if self.holes.len() == MAX_HOLES {
                    self.holes.remove(0);
                }
                self.holes.push((next, start));
            }
            self.next = Some(end);
            return SeqClass::New;
        }
        let fills = self.fill(start, seq_min(end, next));
        if seq_lt(next, end) {
            // Some bytes below the top (a repacketised retransmission), some new.
            self.next = Some(end);
            return SeqClass::New;
        }
        if fills {
            SeqClass::OutOfOrder
        } else {
            SeqClass::Retransmission
        }
    }

    /// A segment without payload: only a SYN or FIN moves the top (each occupies one
    /// sequence number, RFC 9293 §3.4).
    pub fn advance(&mut self, seq: u32, syn: bool, fin: bool) {
        if !(syn || fin) {
            return;
        }
        let end = seq.wrapping_add(1);
        if self.next.is_none_or(|n| seq_lt(n, end)) {
            self.next = Some(end);
        }
    }

    /// Remove `[start, end)` from the holes; true if any hole byte was in it.
    fn fill(&mut self, start: u32, end: u32) -> bool {
        let mut hit = false;
        let mut out = Vec::with_capacity(self.holes.len() + 1);
        for &(hs, he) in &self.holes {
            if seq_le(end, hs) || seq_le(he, start) {
                out.push((hs, he));
                continue;
            }
            hit = true;
            if seq_lt(hs, start) {
                out.push((hs, start));
            }
            if seq_lt(end, he) {
                out.push((end, he));
            }
        }
        if hit {
            out.truncate(MAX_HOLES);
            self.holes = out;
        }
        hit
    }
}

/// The earlier of two sequence numbers.
#[inline]
fn seq_min(a: u32, b: u32) -> u32 {
    if seq_lt(a, b) {
        a
    } else {
        b
    }
}

#[inline]
fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[inline]
fn seq_le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

/// A bounded, evenly thinned record of one half's RTT samples (µs).
#[derive(Clone, Debug, Default)]
struct RttSamples {
    kept: Vec<u32>,
    /// Keep one sample in `stride` (a power of two).
    stride: u64,
    seen: u64,
}

impl RttSamples {
    fn push(&mut self, d: Duration) {
        let stride = self.stride.max(1);
        self.seen += 1;
        if !(self.seen - 1).is_multiple_of(stride) {
            return;
        }
        self.kept.push(u32::try_from(d.as_nanos().div_ceil(1_000)).unwrap_or(u32::MAX));
        if self.kept.len() >= RTT_SAMPLES_MAX {
            // Keep every other one and halve the rate from now on.
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride = stride * 2;
        }
    }

    fn summary(&self) -> RttSummary {
        let mut v = self.kept.clone();
        v.sort_unstable();
        RttSummary { median_ms: quantile(&v, 0.5), p90_ms: quantile(&v, 0.9), samples: self.seen }
    }
}

/// Linear interpolation between order statistics (numpy's default), µs in, ms out.
fn quantile(sorted: &[u32], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let x = q * last as f64;
    let (i, f) = (x.floor() as usize, x - x.floor());
    let a = f64::from(sorted[i]);
    let b = f64::from(sorted[(i + 1).min(last)]);
    Some((a + (b - a) * f) / 1000.0)
}

#[cfg(test)]
mod tests;

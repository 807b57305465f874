//! Traffic pump and sink on real sockets, driven by the simulator's traffic models.
//!
//! The pump has `conns` TCP connections to the sink: it opens them ([`Peer::Connect`]),
//! or — when the clients must open them, e.g. through a tunnel's edge — accepts them
//! ([`Peer::Listen`]; each client first sends its connection id, 4 bytes LE). Either
//! way the pump then sends the connection id back as a 4-byte preamble, and connection
//! *i* runs its own source (`thinwan_proto::traffic::Source`, the simulator's: the
//! two-state thin-client source or the game source, seeded with `stream_rng(seed, 2·i)`
//! as in the simulator; a capture's writes; a constant-rate source; or a greedy bulk
//! source) starting at `t0 + i·stagger`, writing each message
//! ([`crate::wire`]) when it is due. It logs every write (CLOCK_MONOTONIC before and
//! after the `write`). When its source is done it half-closes; the sink closes once it
//! has read everything, so the pump reads `TCP_INFO` as soon as every byte arrived (or
//! at the end of the drain period). The sink stamps each message with the time the
//! `read` that completed it returned. Both logs are CSV (docs/lab.md).

use crate::clock;
use crate::wire::{Deframer, MsgHeader, FILL, HEADER};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use thinwan_proto::traffic::{
    AppKeys, Calibrated, GameCalibrated, GameParams, Kind, Model, Source, ThinClientKeys, ThinClientParams,
    TrafficSpec,
};
use thinwan_proto::{Duration, Instant};

/// The scenario's `[traffic]` section (same keys as docs/scenario.md) plus the MSS cap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrafficConfig {
    /// The sources' model.
    pub model: Model,
    /// The two-state source's keys (α, β, gaps, sizes, block lengths).
    #[serde(flatten)]
    pub thin_client: ThinClientKeys,
    /// The video, data and mix models' keys.
    #[serde(flatten)]
    pub apps: AppKeys,
    /// Largest write (the MSS).
    pub mss: u32,
    /// Constant source: bytes per message.
    pub constant_bytes: u32,
    /// Constant source: interval, ms.
    pub constant_interval_ms: f64,
    /// Bulk source: bytes per write.
    pub bulk_chunk_bytes: u32,
    /// Model "pcap": per connection, its writes (seconds from the run start, bytes),
    /// read from the capture by the Python layer (`thinwan.trace`), as the simulator's.
    pub trace: Vec<Vec<(f64, u32)>>,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        TrafficConfig {
            model: Model::ThinClient,
            thin_client: ThinClientKeys::default(),
            apps: AppKeys::default(),
            mss: ThinClientParams::default().max_write,
            constant_bytes: 200,
            constant_interval_ms: 100.0,
            bulk_chunk_bytes: 65536,
            trace: Vec::new(),
        }
    }
}

impl TrafficConfig {
    /// What every connection's source is built from (the core's [`Source`], the same
    /// dispatch and random streams as the simulator's).
    pub fn spec(&self) -> Result<TrafficSpec, String> {
        let err = |e: thinwan_proto::traffic::ParamError| format!("traffic: {}", e.0);
        Ok(match self.model {
            Model::ThinClient => {
                let p = self.thin_client.params(self.mss).map_err(|e| e.0)?;
                TrafficSpec::ThinClient(std::sync::Arc::new(Calibrated::new(p).map_err(err)?))
            }
            Model::Game => TrafficSpec::Game(std::sync::Arc::new(
                GameCalibrated::new(GameParams::default()).map_err(err)?,
            )),
            Model::Pcap => TrafficSpec::Trace(self.trace.clone()),
            Model::Video | Model::Data | Model::Mix => {
                self.apps.spec(self.model, &self.thin_client, self.mss).map_err(err)?
            }
            Model::Constant => TrafficSpec::Constant {
                interval: Duration::from_millis_f64(self.constant_interval_ms),
                bytes: self.constant_bytes,
            },
            // Greedy without end: the pump stops writing at the end of the run.
            Model::Bulk => {
                TrafficSpec::Bulk { bytes: self.bulk_chunk_bytes.max(HEADER as u32), writes: None }
            }
        })
    }
}

/// Socket options of the sending side.
#[derive(Clone, Debug, Default)]
pub struct SockOpts {
    /// TCP_NODELAY (Nagle off).
    pub nodelay: bool,
    /// TCP_NOTSENT_LOWAT, bytes.
    pub notsent_lowat: Option<u32>,
    /// TCP_CONGESTION.
    pub congestion: Option<String>,
    /// SO_SNDBUF / SO_RCVBUF, bytes.
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF.
    pub rcvbuf: Option<u32>,
    /// TCP_QUICKACK after every read (sink).
    pub quickack: bool,
    /// Pump: mark interactive messages on the wire with this TOS byte (IP_TOS /
    /// IPV6_TCLASS set before each write whose kind differs from the previous one;
    /// bulk writes go out with 0). See [`Marker`] for what TCP makes of it.
    pub mark_interactive: Option<u8>,
}

/// Who opens the connections between pump and sink.
#[derive(Clone, Copy, Debug)]
pub enum Peer {
    /// Open them to this address.
    Connect(SocketAddr),
    /// Accept them on this address (printing a ready line first).
    Listen(SocketAddr),
}

/// Pump settings.
#[derive(Clone, Debug)]
pub struct PumpOptions {
    /// The sink: connect to it, or let it (or a proxy in front of the pump) connect.
    pub peer: Peer,
    /// Connections.
    pub conns: u32,
    /// Traffic model.
    pub traffic: TrafficConfig,
    /// Seed (scenario seed + run).
    pub seed: u64,
    /// Sources write during [0, duration).
    pub duration: Duration,
    /// Then wait this long before reading TCP_INFO and closing.
    pub drain: Duration,
    /// Connection i starts at i·stagger.
    pub stagger: Duration,
    /// With [`Peer::Connect`]: connection i binds local port `base + i` before it
    /// connects, so whoever sees its packets knows its pair by port (thinwan-link's
    /// `pairs`); None = ephemeral ports.
    pub local_port_base: Option<u16>,
    /// Gap between "all connected" and t0.
    pub start_delay: Duration,
    /// Socket options.
    pub sock: SockOpts,
    /// Message log (CSV).
    pub out: PathBuf,
    /// Connection log (JSON).
    pub conns_out: PathBuf,
}

/// Run the pump to completion (or until `stop`).
pub fn run_pump(o: &PumpOptions, stop: Arc<AtomicBool>) -> io::Result<()> {
    // A bad traffic model fails before any connection is made.
    let spec = o.traffic.spec().map_err(io::Error::other)?;
    let mut streams = match (o.peer, o.local_port_base) {
        (Peer::Connect(addr), base) => connect_all(addr, o.conns, base)?,
        (Peer::Listen(addr), None) => accept_all(addr, o.conns, &stop)?,
        (Peer::Listen(_), Some(_)) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "--local-port-base: only with --connect (the pump opens the connections)",
            ))
        }
    };
    for (conn, s) in streams.iter_mut().enumerate() {
        apply_sockopts(s, &o.sock)?;
        // Connection id first, so the sink can label (or check) the stream before any message.
        s.write_all(&(conn as u32).to_le_bytes())?;
    }
    let t0 = clock::now() + o.start_delay;
    let log = Arc::new(Mutex::new(BufWriter::new(File::create(&o.out)?)));
    writeln!(lock(&log), "conn,msg,kind,bytes,wire_bytes,t_write_ns,t_written_ns,end_offset,t_due_ns")?;
    let mut handles = Vec::new();
    for (conn, stream) in streams.into_iter().enumerate() {
        let conn = conn as u32;
        // How often wait_for_close looks at the clock (the pump reads nothing else).
        stream.set_read_timeout(Some(std::time::Duration::from_millis(50)))?;
        let start = Instant::ZERO + o.stagger.saturating_mul(conn as u64);
        let source = Source::new(&spec, o.seed, conn, start).map_err(|e| io::Error::other(e.0))?;
        let (log, stop, o) = (Arc::clone(&log), Arc::clone(&stop), o.clone());
        handles.push(thread::spawn(move || pump_conn(conn, stream, source, t0, &o, &log, &stop)));
    }
    let mut infos = Vec::new();
    for h in handles {
        infos.push(h.join().map_err(|_| io::Error::other("pump thread panicked"))??);
    }
    lock(&log).flush()?;
    let doc = serde_json::json!({"t0_ns": t0.as_nanos(), "conns": infos});
    std::fs::write(&o.conns_out, format!("{doc}\n"))?;
    Ok(())
}

/// Open `conns` connections to `addr`, in connection order. All at once: one after the
/// other, hundreds of handshakes across a long WAN would take minutes. With `base`,
/// connection i first binds local port `base + i` (all bound before any connects, so a
/// taken port fails the run before any traffic).
fn connect_all(addr: SocketAddr, conns: u32, base: Option<u16>) -> io::Result<Vec<TcpStream>> {
    let sockets = match base {
        Some(base) => Some(bind_ports(addr, conns, base)?),
        None => None,
    };
    let handshakes: Vec<_> = match sockets {
        Some(sockets) => sockets
            .into_iter()
            .map(|s| thread::spawn(move || s.connect(&addr.into()).map(|()| TcpStream::from(s))))
            .collect(),
        None => (0..conns).map(|_| thread::spawn(move || TcpStream::connect(addr))).collect(),
    };
    handshakes
        .into_iter()
        .map(|h| {
            let s = h.join().map_err(|_| io::Error::other("connect thread panicked"))?;
            s.map_err(|e| io::Error::new(e.kind(), format!("connect {addr}: {e}")))
        })
        .collect()
}

/// One TCP socket per connection toward `addr`, connection i bound to local port
/// `base + i` of the unspecified address. A port in use is an error naming it.
fn bind_ports(addr: SocketAddr, conns: u32, base: u16) -> io::Result<Vec<socket2::Socket>> {
    use socket2::{Domain, Socket, Type};
    let last = base as u64 + conns as u64 - 1;
    if conns == 0 || last > u16::MAX as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--local-port-base {base}: {conns} connections need ports up to {last}, beyond 65535"),
        ));
    }
    (0..conns)
        .map(|i| {
            let port = base + i as u16;
            let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
            // A port left in TIME_WAIT by an earlier run may be bound again; one that a
            // live socket holds (listening or connected) still fails here.
            s.set_reuse_address(true)?;
            let local: SocketAddr = match addr {
                SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, port).into(),
                SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, port).into(),
            };
            s.bind(&local.into()).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("connection {i}: local port {port} (--local-port-base {base}): {e}"),
                )
            })?;
            Ok(s)
        })
        .collect()
}

/// Accept `conns` connections on `addr`; each client names its connection id first (4
/// bytes LE), so streams are in connection order whatever order they arrive in. All are
/// accepted before any id is read: behind a tunnel an id takes a WAN crossing, and
/// reading them one by one would let the listen backlog overflow meanwhile.
fn accept_all(addr: SocketAddr, conns: u32, stop: &AtomicBool) -> io::Result<Vec<TcpStream>> {
    let listener = listen(addr, conns)?;
    listener.set_nonblocking(true)?;
    println!("{}", serde_json::json!({"ready": true, "listen": addr.to_string()}));
    io::stdout().flush()?;
    let mut accepted = Vec::new();
    while accepted.len() < conns as usize {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("stopped after accepting {} of {conns} connections", accepted.len()),
            ));
        }
        match listener.accept() {
            Ok((s, _)) => accepted.push(s),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(std::time::Duration::from_millis(1))
            }
            Err(e) => return Err(e),
        }
    }
    let mut slots: Vec<Option<TcpStream>> = (0..conns).map(|_| None).collect();
    for mut s in accepted {
        s.set_nonblocking(false)?;
        // Generous: an id delayed by a few retransmission timeouts is still on its way.
        s.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
        let mut id = [0u8; 4];
        s.read_exact(&mut id)
            .map_err(|e| io::Error::new(e.kind(), format!("reading a connection id: {e}")))?;
        let id = u32::from_le_bytes(id);
        match slots.get_mut(id as usize) {
            Some(slot @ None) => *slot = Some(s),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("connection id {id}: out of range or taken (conns {conns})"),
                ))
            }
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

fn pump_conn(
    conn: u32,
    mut stream: TcpStream,
    mut source: Source,
    t0: Instant,
    o: &PumpOptions,
    log: &Mutex<BufWriter<File>>,
    stop: &AtomicBool,
) -> io::Result<serde_json::Value> {
    clock::tighten_timer_slack();
    let local = stream.local_addr()?;
    let remote = stream.peer_addr()?;
    let mut buf = vec![FILL; 64];
    let mut offset: u64 = 4; // the connection-id preamble
    let mut rows = String::new();
    let end = t0 + o.duration;
    let mut id = 0u32;
    let mut write_error = None;
    let mut marker = o.sock.mark_interactive.map(|tos| Marker::new(&stream, tos));
    while !stop.load(Ordering::Relaxed) {
        // A trace's end: nothing more to write.
        let Some(w) = source.next_write() else { break };
        let due = t0 + Duration::from_nanos(w.at.as_nanos());
        if due >= end {
            break;
        }
        // Past the end of the run nothing more is written, also by a pump running late:
        // a write blocked on a full send buffer (a starved flow; the simulator's send
        // buffer is unbounded, Linux's is not) would otherwise have it write its backlog
        // of overdue messages long after the run (docs/lab.md, the QDS middlebox).
        if clock::now() >= end {
            break;
        }
        if !sleep_until_or_stop(due, stop) {
            break;
        }
        let wire = (w.bytes as usize).max(HEADER);
        if buf.len() < wire {
            buf.resize(wire, FILL);
        }
        if let Some(m) = marker.as_mut() {
            m.set(&stream, w.kind == Kind::Interactive)?;
        }
        let t_write = clock::now();
        MsgHeader { len: wire as u32, conn, id, t_write_ns: t_write.as_nanos() }.encode(&mut buf);
        if let Err(e) = stream.write_all(&buf[..wire]) {
            write_error = Some(e.to_string());
            break;
        }
        let t_written = clock::now();
        offset += wire as u64;
        // t_due: the schedule, so a reader can tell a write that started late (the thread
        // ran late, or an earlier write blocked) from one whose `write` blocked (full
        // send buffer): t_write − t_due against t_written − t_write.
        rows.push_str(&format!(
            "{conn},{id},{},{},{wire},{},{},{offset},{}\n",
            w.kind as u8,
            w.bytes,
            t_write.as_nanos(),
            t_written.as_nanos(),
            due.as_nanos()
        ));
        id += 1;
        if rows.len() > 1 << 16 {
            lock(log).write_all(rows.as_bytes())?;
            rows.clear();
        }
    }
    lock(log).write_all(rows.as_bytes())?;
    // Half-close and let queued data drain: the sink closes after reading the last byte
    // (end of file here), so the run need not last the whole drain period. Then read the
    // kernel's view of the connection.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    wait_for_close(&mut stream, end + o.drain, stop);
    let info = tcp_info(&stream).unwrap_or_default();
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Ok(serde_json::json!({
        "conn": conn, "local": local.to_string(), "remote": remote.to_string(),
        "messages": id, "bytes_written": offset - 4, "write_error": write_error, "tcp_info": info,
    }))
}

/// How often a thread waiting for its next write looks at `stop`: a stop (SIGINT or
/// SIGTERM, which wakes only the thread that takes it) must not wait for the longest gap
/// of any source, which can be seconds.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Sleep until `due` unless `stop` is set first; false if stopped. The last stretch is
/// one [`clock::sleep_until`], so a write keeps its precision.
fn sleep_until_or_stop(due: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let step = clock::now() + STOP_POLL;
        if step >= due {
            clock::sleep_until(due);
            return true;
        }
        clock::sleep_until(step);
    }
}

/// Wait until the peer closes (end of file), `until` passes or `stop`; the stream's
/// read timeout sets how often the clock is looked at.
fn wait_for_close(stream: &mut TcpStream, until: Instant, stop: &AtomicBool) {
    let mut buf = [0u8; 512];
    while clock::now() < until && !stop.load(Ordering::Relaxed) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {} // the sink sends nothing after its connection id; ignore strays
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return, // reset: nothing more will come
        }
    }
}

/// Marks a TCP socket's traffic as interactive or bulk through its TOS byte, so the
/// emulator's label classifier (`queue.priority_classifier = "label"`) can tell them
/// apart on the wire.
///
/// Limits: the TOS is a socket attribute that Linux reads when it *transmits* a
/// segment, not when the application writes. So bytes written as bulk but sent after
/// an interactive write's `setsockopt` (waiting for cwnd in the send buffer) carry the
/// interactive mark and vice versa; a segment that coalesces both kinds (Nagle,
/// autocorking, TSO) carries whichever mark is current; retransmissions carry the
/// current mark. With `TCP_NODELAY` and an open cwnd, each message leaves in its own
/// segments and the marks are right.
pub struct Marker {
    tos: u8,
    current: u8,
    v6: bool,
}

impl Marker {
    /// A marker for `stream`, which starts unmarked (TOS 0).
    pub fn new(stream: &TcpStream, tos: u8) -> Self {
        let v6 = stream.local_addr().map(|a| a.is_ipv6()).unwrap_or(false);
        Marker { tos, current: 0, v6 }
    }

    /// Mark what follows as interactive or bulk (one `setsockopt` when it changes).
    pub fn set(&mut self, stream: &TcpStream, interactive: bool) -> io::Result<()> {
        let want = if interactive { self.tos } else { 0 };
        if want == self.current {
            return Ok(());
        }
        let (level, name) =
            if self.v6 { (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) } else { (libc::IPPROTO_IP, libc::IP_TOS) };
        setsockopt_int(stream.as_raw_fd(), level, name, want as i32)
            .map_err(|e| io::Error::new(e.kind(), format!("IP_TOS {want:#x}: {e}")))?;
        self.current = want;
        Ok(())
    }
}

/// Sink settings.
#[derive(Clone, Debug)]
pub struct SinkOptions {
    /// The pump: accept its connections, or open them (to it or to a proxy in front of it).
    pub peer: Peer,
    /// Connections to accept.
    pub conns: u32,
    /// Socket options (quickack, rcvbuf).
    pub sock: SockOpts,
    /// Message log (CSV: conn,msg,bytes,t_write_ns,t_read_ns).
    pub out: PathBuf,
    /// Give up this long after start.
    pub timeout: Duration,
}

/// Accept (or open) `conns` connections and log every message until all close (or `stop`).
pub fn run_sink(o: &SinkOptions, stop: Arc<AtomicBool>) -> io::Result<()> {
    let addr = match o.peer {
        Peer::Listen(addr) => addr,
        Peer::Connect(addr) => return run_sink_connecting(addr, o, stop),
    };
    let listener = listen(addr, o.conns)?;
    if let Some(b) = o.sock.rcvbuf {
        setsockopt_int(listener.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, b as i32)?;
    }
    listener.set_nonblocking(true)?;
    // Ready line for the orchestrator.
    println!("{}", serde_json::json!({"ready": true, "listen": addr.to_string()}));
    io::stdout().flush()?;
    let deadline = clock::now() + o.timeout;
    let log = sink_log(&o.out)?;
    let mut handles = Vec::new();
    while (handles.len() as u32) < o.conns && !stop.load(Ordering::Relaxed) && clock::now() < deadline {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(std::time::Duration::from_millis(100)))?;
                let (log, stop, sock) = (Arc::clone(&log), Arc::clone(&stop), o.sock.clone());
                handles.push(thread::spawn(move || sink_conn(s, None, &sock, &log, &stop, deadline)));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(std::time::Duration::from_millis(2))
            }
            Err(e) => return Err(e),
        }
    }
    join_sink(handles, &log)
}

/// The sink as the client: open `conns` connections to `addr`, name each (connection id,
/// 4 bytes LE) and check that the pump's preamble names the same one.
fn run_sink_connecting(addr: SocketAddr, o: &SinkOptions, stop: Arc<AtomicBool>) -> io::Result<()> {
    let deadline = clock::now() + o.timeout;
    let log = sink_log(&o.out)?;
    let mut handles = Vec::new();
    for (conn, s) in connect_all(addr, o.conns, None)?.into_iter().enumerate() {
        let conn = conn as u32;
        if let Some(b) = o.sock.rcvbuf {
            // After connect: the window scale is already chosen, so this only caps the buffer.
            setsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, b as i32)?;
        }
        (&s).write_all(&conn.to_le_bytes())?;
        s.set_read_timeout(Some(std::time::Duration::from_millis(100)))?;
        let (log, stop, sock) = (Arc::clone(&log), Arc::clone(&stop), o.sock.clone());
        handles.push(thread::spawn(move || sink_conn(s, Some(conn), &sock, &log, &stop, deadline)));
    }
    join_sink(handles, &log)
}

/// A listener whose backlog holds all `conns` connections: hundreds of handshakes arrive
/// at once, and beyond std's backlog of 128 Linux falls back to SYN cookies and drops
/// final ACKs — across a lossy WAN that ended a connection with a reset now and then.
fn listen(addr: SocketAddr, conns: u32) -> io::Result<TcpListener> {
    let listener =
        TcpListener::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("listen {addr}: {e}")))?;
    let backlog = conns.max(128).min(i32::MAX as u32) as i32;
    // SAFETY: a valid listening socket; listen() again only resizes its backlog (Linux).
    if unsafe { libc::listen(listener.as_raw_fd(), backlog) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(listener)
}

fn sink_log(path: &PathBuf) -> io::Result<Arc<Mutex<BufWriter<File>>>> {
    let log = Arc::new(Mutex::new(BufWriter::new(File::create(path)?)));
    writeln!(lock(&log), "conn,msg,bytes,t_write_ns,t_read_ns")?;
    Ok(log)
}

fn join_sink(
    handles: Vec<thread::JoinHandle<io::Result<()>>>,
    log: &Mutex<BufWriter<File>>,
) -> io::Result<()> {
    for h in handles {
        h.join().map_err(|_| io::Error::other("sink thread panicked"))??;
    }
    let flushed = lock(log).flush();
    flushed
}

fn sink_conn(
    mut s: TcpStream,
    expected: Option<u32>,
    sock: &SockOpts,
    log: &Mutex<BufWriter<File>>,
    stop: &AtomicBool,
    deadline: Instant,
) -> io::Result<()> {
    let mut buf = vec![0u8; 1 << 16];
    let mut pre = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match s.read(&mut pre[got..]) {
            Ok(0) => return Ok(()),
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) || clock::now() >= deadline {
                    return Ok(());
                }
            }
            Err(e) => return Err(e),
        }
    }
    let conn = u32::from_le_bytes(pre);
    if expected.is_some_and(|e| e != conn) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("connection {expected:?} carries the stream of connection {conn}"),
        ));
    }
    let mut deframer = Deframer::default();
    let mut done = Vec::new();
    let mut rows = String::new();
    loop {
        if sock.quickack {
            let _ = setsockopt_int(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1);
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let t = clock::now();
                if let Err(e) = deframer.feed(&buf[..n], &mut done) {
                    // Not byte-exact: corrupted, lost or duplicated data, or lost framing.
                    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("conn {conn}: {e:?}")));
                }
                for h in done.drain(..) {
                    rows.push_str(&format!(
                        "{},{},{},{},{}\n",
                        h.conn,
                        h.id,
                        h.len,
                        h.t_write_ns,
                        t.as_nanos()
                    ));
                }
                if rows.len() > 1 << 16 {
                    lock(log).write_all(rows.as_bytes())?;
                    rows.clear();
                }
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) || clock::now() >= deadline {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e),
        }
    }
    lock(log).write_all(rows.as_bytes())
}

/// UDP probe sender: `count` datagrams of `size` bytes every `interval`, each carrying
/// its sequence number and send time. Returns (sent, send errors); a send that fails
/// (e.g. ENOBUFS) loses that probe, and the receiver sees the gap.
pub fn probe_send(to: SocketAddr, count: u64, interval: Duration, size: usize) -> io::Result<(u64, u64)> {
    clock::tighten_timer_slack();
    let bind: SocketAddr =
        if to.is_ipv4() { "0.0.0.0:0".parse().expect("literal") } else { "[::]:0".parse().expect("literal") };
    let s = UdpSocket::bind(bind)?;
    s.connect(to)?;
    let mut buf = vec![0u8; size.max(16)];
    let start = clock::now() + Duration::from_millis(10);
    let (mut sent, mut errors) = (0, 0);
    for k in 0..count {
        clock::sleep_until(start + interval.saturating_mul(k));
        let t = clock::now();
        buf[0..8].copy_from_slice(&k.to_le_bytes());
        buf[8..16].copy_from_slice(&t.as_nanos().to_le_bytes());
        match s.send(&buf) {
            Ok(_) => sent += 1,
            Err(_) => errors += 1,
        }
    }
    Ok((sent, errors))
}

/// UDP probe receiver: writes `seq,bytes,t_send_ns,t_recv_ns` rows until `count`
/// probes arrived or `timeout` passed without one; `rcvbuf` sets the socket's receive
/// buffer.
pub fn probe_recv(
    listen: SocketAddr,
    count: u64,
    timeout: Duration,
    rcvbuf: Option<u32>,
    out: &PathBuf,
) -> io::Result<u64> {
    clock::tighten_timer_slack();
    let s = UdpSocket::bind(listen)?;
    if let Some(b) = rcvbuf {
        // SO_RCVBUFFORCE ignores net.core.rmem_max (needs CAP_NET_ADMIN: the lab runs as root).
        setsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, b as i32)
            .or_else(|_| setsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, b as i32))?;
    }
    s.set_read_timeout(Some(std::time::Duration::from_nanos(timeout.as_nanos().max(1_000_000))))?;
    println!("{}", serde_json::json!({"ready": true, "listen": listen.to_string()}));
    io::stdout().flush()?;
    let mut w = BufWriter::new(File::create(out)?);
    writeln!(w, "seq,bytes,t_send_ns,t_recv_ns")?;
    let mut buf = vec![0u8; 65536];
    let mut n = 0;
    while n < count {
        match s.recv(&mut buf) {
            Ok(len) if len >= 16 => {
                let t = clock::now();
                let seq = u64::from_le_bytes(buf[0..8].try_into().expect("8 bytes"));
                let ts = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
                writeln!(w, "{seq},{len},{ts},{}", t.as_nanos())?;
                n += 1;
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
            Err(e) => return Err(e),
        }
    }
    w.flush()?;
    Ok(n)
}

/// Apply the sending-side socket options.
pub fn apply_sockopts(s: &TcpStream, o: &SockOpts) -> io::Result<()> {
    let fd = s.as_raw_fd();
    if o.nodelay {
        s.set_nodelay(true)?;
    }
    if let Some(v) = o.notsent_lowat {
        setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, v as i32)?;
    }
    if let Some(b) = o.sndbuf {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, b as i32)?;
    }
    if let Some(b) = o.rcvbuf {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, b as i32)?;
    }
    if let Some(cc) = &o.congestion {
        // SAFETY: valid fd, pointer and length of the name bytes.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                cc.as_ptr().cast(),
                cc.len() as libc::socklen_t,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("TCP_CONGESTION {cc}: {e}")));
        }
    }
    Ok(())
}

fn setsockopt_int(fd: i32, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: valid fd and a pointer to one int.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The fields of Linux `struct tcp_info` (include/uapi/linux/tcp.h) we report, read by
/// offset so newer fields (total_rto, Linux ≥ 6.7) are used when the kernel has them.
pub fn tcp_info(s: &TcpStream) -> io::Result<serde_json::Map<String, serde_json::Value>> {
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: valid fd, buffer and length.
    let rc = unsafe {
        libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let len = len as usize;
    let u16_at = |o: usize| (o + 2 <= len).then(|| u16::from_le_bytes([buf[o], buf[o + 1]]) as u64);
    let u32_at = |o: usize| {
        (o + 4 <= len).then(|| u32::from_ne_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]) as u64)
    };
    let u64_at =
        |o: usize| (o + 8 <= len).then(|| u64::from_ne_bytes(buf[o..o + 8].try_into().expect("8 bytes")));
    let fields: [(&str, Option<u64>); 16] = [
        // TCPI_OPT_* bits: 1 timestamps, 2 SACK, 4 window scaling, 8 ECN negotiated
        // (RFC 3168 §6.1.1), 16 ECN_SEEN (an ECT or CE segment arrived), …
        ("options", (len > 5).then(|| u64::from(buf[5]))),
        ("rto_us", u32_at(8)),
        ("snd_mss", u32_at(16)),
        ("rtt_us", u32_at(68)),
        ("rttvar_us", u32_at(72)),
        ("snd_ssthresh", u32_at(76)),
        ("snd_cwnd", u32_at(80)),
        ("total_retrans", u32_at(100)),
        ("bytes_acked", u64_at(120)),
        ("data_segs_out", u32_at(156)),
        // Segments acknowledged by ACKs with ECE (Linux `tcp_newly_delivered`): on the
        // sender, the data its receiver reported as CE-marked (RFC 3168 §6.1.3).
        ("delivered_ce", u32_at(196)),
        ("bytes_sent", u64_at(200)),
        ("bytes_retrans", u64_at(208)),
        ("dsack_dups", u32_at(216)),
        ("total_rto", u16_at(240)),
        ("total_rto_recoveries", u16_at(242)),
    ];
    let mut m = serde_json::Map::new();
    for (k, v) in fields {
        if let Some(v) = v {
            m.insert(k.into(), v.into());
        }
    }
    Ok(m)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned log only means another connection's thread panicked; keep logging.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

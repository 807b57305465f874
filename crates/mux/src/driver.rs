//! The thin async shell around one sans-IO [`Session`] (quinn `ConnectionDriver` style,
//! STYLE.md §10): one driver task per session owns the session, its trunk connections
//! and the local sockets of all its streams. Each poll it
//!
//! 1. takes commands (a client accepted, a target connected, a trunk connection
//!    authenticated, shutdown steps),
//! 2. fires the session's timers if due,
//! 3. reads the trunk lanes and writes each delivered payload to its local socket at once,
//! 4. services the local sockets that woke (writes what they are owed, reads what arrived),
//! 5. writes what the session now wants to send on each lane,
//!
//! and re-arms its one timer from `poll_timeout()`. Nothing here decides what to send
//! or in which order — that is the session's job.
//!
//! Why one task: a message then costs one wake-up per daemon (the socket's readiness)
//! and the bytes go out in the same poll. The earlier shell (lane tasks, two tasks per
//! stream, a timer task, all around a shared mutex) cost 3–4 task hand-offs per message,
//! which measured ~0.5 ms added at the median and tens of ms at p99 for 1,000 streams.
//!
//! The session still sits in a mutex, but only so observers (metrics, shutdown, tests)
//! can read it: the driver is the only writer and holds the lock for one poll.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use thinwan_proto::mux::{Class, Config as SessionConfig, Event, ResetCode, Role, Session, StreamId};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Sleep;

use crate::config::Common;
use crate::guard::Warnings;
use crate::lane::{LaneIo, Read};
use crate::local::{Local, ReadyQueue, Service};
use crate::tls::Io;

/// Process-wide counters not kept by a session.
#[derive(Debug, Default)]
pub struct Counters {
    /// Client (edge) or target (core) connections accepted / made.
    pub app_connections: AtomicU64,
    /// Client connections refused (limits, shutting down).
    pub app_refused: AtomicU64,
    /// Trunk connections established (after authentication).
    pub trunk_connects: AtomicU64,
    /// Trunk connect or handshake failures (including failed authentication).
    pub trunk_failures: AtomicU64,
    /// Sessions lost (streams failed).
    pub sessions_lost: AtomicU64,
    /// Target connects that failed (core).
    pub target_connect_failures: AtomicU64,
    /// Streams refused because their target is not configured (core).
    pub unknown_targets: AtomicU64,
    /// Unauthenticated connections in their handshake now (trunk handshakes at the
    /// core, metrics requests): a gauge.
    pub handshakes: AtomicU64,
    /// Unauthenticated connections closed at once because `limits.max_handshakes` were
    /// in progress.
    pub handshakes_refused: AtomicU64,
    /// (edge) Clients shed to a forward's direct path (`forward[i].shed`).
    pub streams_shed: AtomicU64,
    /// (edge) Bytes both ways through shed clients' splices (counted as each ends).
    pub shed_bytes: AtomicU64,
    /// (edge) Direct-path connects that failed (the client was reset).
    pub shed_connect_failures: AtomicU64,
    /// (edge) The trunk loss at the last shedding decision, `f64` bits.
    pub trunk_loss_bits: AtomicU64,
}

/// The real clock at the edge of the sans-IO world (STYLE.md §2).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base: tokio::time::Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn new() -> Clock {
        Clock { base: tokio::time::Instant::now() }
    }
    /// Now, as the core's time type.
    pub fn now(&self) -> thinwan_proto::Instant {
        thinwan_proto::Instant::from_nanos(self.base.elapsed().as_nanos() as u64)
    }
    /// Back to tokio time.
    pub fn to_tokio(&self, t: thinwan_proto::Instant) -> tokio::time::Instant {
        self.base + std::time::Duration::from_nanos(t.as_nanos().min(u64::MAX / 4))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// (core) A stream the edge opened: connect it to `target`, then [`Shared::attach`].
#[derive(Debug)]
pub struct Opened {
    /// Stream id.
    pub id: StreamId,
    /// Target name asked for.
    pub target: String,
}

/// What observers may read.
pub struct Inner {
    /// The protocol state machine.
    pub session: Session,
}

/// Handle to one session's driver task.
pub struct Shared {
    inner: Mutex<Inner>,
    /// Clock.
    pub clock: Clock,
    /// Counters.
    pub counters: Arc<Counters>,
    cmds: mpsc::UnboundedSender<Command>,
}

/// Requests to the driver from accept loops, connectors, lane tasks and shutdown.
enum Command {
    /// (edge) A client connected to a forward of `target`; `warnings` are that
    /// listener's (rate-limited: anyone who reaches it can connect).
    Accept { sock: TcpStream, target: String, class: Class, warnings: Arc<Warnings> },
    /// (core) The target of stream `id` is connected.
    Attach { id: StreamId, sock: TcpStream, class: Class },
    /// Reset stream `id` from this side.
    Reset { id: StreamId, code: ResetCode, message: String },
    /// An authenticated trunk connection for `lane`; `initial` was already read from it.
    Lane { lane: u16, io: Box<dyn Io>, initial: Vec<u8>, done: oneshot::Sender<io::Result<()>> },
    /// Tell the peer no more streams will be opened.
    GoAway,
    /// Reset every stream (end of the shutdown grace period).
    ResetAll,
    /// Close everything and end the driver.
    Stop,
}

impl Shared {
    /// Start a session's driver task. The core passes `opened` to learn of new streams.
    /// The task ends when the core's session is lost or on [`Shared::stop`]; the edge
    /// replaces a lost session with a fresh one.
    pub fn spawn(
        role: Role,
        id: u64,
        cfg: SessionConfig,
        counters: Arc<Counters>,
        opened: Option<mpsc::UnboundedSender<Opened>>,
    ) -> (Arc<Shared>, JoinHandle<()>) {
        let clock = Clock::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let session = Session::new(role, id, cfg.clone(), clock.now());
        let shared = Arc::new(Shared { inner: Mutex::new(Inner { session }), clock, counters, cmds: tx });
        let lanes = (0..cfg.lanes.max(cfg.max_lanes).max(1)).map(|_| None).collect();
        let driver = Driver {
            shared: shared.clone(),
            role,
            cfg,
            cmds: rx,
            opened,
            lanes,
            locals: HashMap::new(),
            ready: Arc::new(ReadyQueue::default()),
            woken: Vec::new(),
            timer: Box::pin(tokio::time::sleep_until(far_future())),
            timer_at: None,
            buf: vec![0u8; 64 * 1024],
            lost: false,
            stopped: false,
        };
        // The driver bounds its own work per poll (read budgets); tokio's cooperative
        // budget would only add spurious yields in the middle of a batch of sockets.
        let handle = tokio::spawn(tokio::task::unconstrained(driver));
        (shared, handle)
    }

    /// Lock the state for reading. A poisoned lock means the driver panicked mid-update;
    /// observers still get what is there.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// (edge) Carry a client connection as a new stream to `target`; a refusal is
    /// logged through `warnings` (the listener's).
    pub fn accept(&self, sock: TcpStream, target: &str, class: Class, warnings: &Arc<Warnings>) {
        let cmd = Command::Accept { sock, target: target.to_owned(), class, warnings: warnings.clone() };
        if let Err(mpsc::error::SendError(Command::Accept { sock, .. })) = self.cmds.send(cmd) {
            self.counters.app_refused.fetch_add(1, Ordering::Relaxed);
            abort_socket(&sock);
        }
    }

    /// (core) The target of stream `id` is connected; schedule it as `class`.
    pub fn attach(&self, id: StreamId, sock: TcpStream, class: Class) {
        if let Err(mpsc::error::SendError(Command::Attach { sock, .. })) =
            self.cmds.send(Command::Attach { id, sock, class })
        {
            abort_socket(&sock);
        }
    }

    /// Reset a stream from this side and abort its local socket.
    pub fn reset(&self, id: StreamId, code: ResetCode, message: String) {
        let _ = self.cmds.send(Command::Reset { id, code, message });
    }

    /// Run one authenticated trunk connection for `lane` until it fails or is
    /// superseded. `initial` holds bytes already read from it (the core peeks at the
    /// `Hello`).
    pub async fn run_lane<S: Io>(&self, lane: u16, stream: S, initial: Vec<u8>) -> io::Result<()> {
        let (done, result) = oneshot::channel();
        let gone = || io::Error::new(io::ErrorKind::ConnectionAborted, "session ended");
        self.cmds.send(Command::Lane { lane, io: Box::new(stream), initial, done }).map_err(|_| gone())?;
        result.await.unwrap_or_else(|_| Err(gone()))
    }

    /// Begin a graceful shutdown, wait up to `grace` for streams to end, then reset
    /// the rest and wait briefly for the peer to acknowledge.
    pub async fn shutdown(&self, grace: std::time::Duration) {
        let _ = self.cmds.send(Command::GoAway);
        let deadline = tokio::time::Instant::now() + grace;
        while tokio::time::Instant::now() < deadline {
            if self.lock().session.stream_count() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let _ = self.cmds.send(Command::ResetAll);
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        while tokio::time::Instant::now() < deadline {
            let done = {
                let g = self.lock();
                g.session.is_drained() || g.session.lanes_up() == 0
            };
            if done {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// End the driver: close every socket of the session.
    pub fn stop(&self) {
        let _ = self.cmds.send(Command::Stop);
    }
}

/// The task that owns a session and its sockets (see the module documentation).
struct Driver {
    shared: Arc<Shared>,
    role: Role,
    cfg: SessionConfig,
    cmds: mpsc::UnboundedReceiver<Command>,
    opened: Option<mpsc::UnboundedSender<Opened>>,
    lanes: Vec<Option<LaneIo>>,
    locals: HashMap<StreamId, Local>,
    ready: Arc<ReadyQueue>,
    /// Reused list of woken streams.
    woken: Vec<StreamId>,
    timer: Pin<Box<Sleep>>,
    timer_at: Option<thinwan_proto::Instant>,
    /// Read buffer shared by all sockets (one read is handled before the next).
    buf: Vec<u8>,
    /// The session reported `SessionLost`; handled at the end of the poll.
    lost: bool,
    stopped: bool,
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let d = self.get_mut();
        d.ready.set_driver(cx.waker());
        let shared = d.shared.clone();
        let mut g = shared.lock();
        if d.step(&mut g.session, cx) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Driver {
    /// One round of work; true when the driver is finished.
    fn step(&mut self, s: &mut Session, cx: &mut Context<'_>) -> bool {
        self.commands(s, cx);
        if self.stopped {
            self.close_all(s, "driver stopped");
            return true;
        }
        let now = self.now();
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
            self.dispatch(s);
        }
        self.read_lanes(s, cx);
        self.serve_streams(s);
        self.transmit(s, cx);
        if self.lost {
            self.lost = false;
            self.close_all(s, "session lost");
            if self.role == Role::Core {
                return true;
            }
            // Start over with a fresh session; lanes reconnect with `Hello NEW`.
            *s = Session::new(Role::Edge, random_id(), self.cfg.clone(), self.now());
        }
        self.arm_timer(s, cx);
        false
    }

    fn now(&self) -> thinwan_proto::Instant {
        self.shared.clock.now()
    }

    fn commands(&mut self, s: &mut Session, cx: &mut Context<'_>) {
        while let Poll::Ready(cmd) = self.cmds.poll_recv(cx) {
            let Some(cmd) = cmd else {
                self.stopped = true;
                return;
            };
            match cmd {
                Command::Accept { sock, target, class, warnings } => {
                    match s.open_stream(&target, class, self.now()) {
                        Ok(id) => {
                            tracing::debug!(stream = id, %target, "client connected");
                            self.locals.insert(id, Local::new(id, Some(sock), &self.ready));
                        }
                        Err(e) => {
                            warnings.warn(|| tracing::warn!(?e, %target, "stream refused"));
                            self.shared.counters.app_refused.fetch_add(1, Ordering::Relaxed);
                            abort_socket(&sock);
                        }
                    }
                }
                Command::Attach { id, sock, class } => match self.locals.get_mut(&id) {
                    Some(l) if !l.is_attached() => {
                        s.set_class(id, class);
                        l.attach(sock);
                    }
                    // Reset while connecting.
                    _ => abort_socket(&sock),
                },
                Command::Reset { id, code, message } => {
                    s.stream_reset(id, code, &message);
                    if let Some(l) = self.locals.remove(&id) {
                        l.abort();
                    }
                }
                Command::Lane { lane, io, initial, done } => self.lane_connected(s, lane, io, &initial, done),
                Command::GoAway => s.go_away(),
                Command::ResetAll => s.reset_all(ResetCode::Shutdown, "daemon shutting down"),
                Command::Stop => self.stopped = true,
            }
            self.dispatch(s);
        }
    }

    fn lane_connected(
        &mut self,
        s: &mut Session,
        lane: u16,
        io: Box<dyn Io>,
        initial: &[u8],
        done: oneshot::Sender<io::Result<()>>,
    ) {
        if lane >= s.lane_count() {
            let _ = done.send(Err(io::Error::new(io::ErrorKind::InvalidData, "lane index out of range")));
            return;
        }
        if let Some(old) = self.lanes[lane as usize].take() {
            old.finish(Ok(()));
        }
        let now = self.now();
        let generation = s.lane_connected(lane, now);
        if !initial.is_empty() {
            s.handle_bytes(lane, generation, initial, now);
        }
        self.lanes[lane as usize] = Some(LaneIo::new(io, generation, done));
        self.dispatch(s);
    }

    /// Route the session's events; payload goes to its socket right away.
    fn dispatch(&mut self, s: &mut Session) {
        while let Some(ev) = s.poll_event() {
            match ev {
                Event::StreamOpened { id, target } => {
                    self.locals.insert(id, Local::new(id, None, &self.ready));
                    if let Some(o) = &self.opened {
                        let _ = o.send(Opened { id, target });
                    }
                }
                Event::Data { id, bytes } => {
                    if let Some(l) = self.locals.get_mut(&id) {
                        if let Err(e) = l.deliver(bytes, s) {
                            self.fail_stream(s, id, e);
                        }
                    }
                }
                Event::Finished { id } => {
                    if let Some(l) = self.locals.get_mut(&id) {
                        match l.finish(s) {
                            Err(e) => self.fail_stream(s, id, e),
                            Ok(true) => {
                                self.locals.remove(&id);
                            }
                            Ok(false) => {}
                        }
                    }
                }
                Event::Reset { id, code, message, remote } => {
                    tracing::info!(stream = id, %code, %message, remote, "stream reset");
                    if let Some(l) = self.locals.remove(&id) {
                        l.abort();
                    }
                }
                Event::Writable { id } => {
                    if let Some(l) = self.locals.get(&id) {
                        l.wake();
                    }
                }
                Event::LaneUp { lane, resumed } => {
                    tracing::info!(session = s.id(), lane, resumed, "trunk lane up");
                }
                Event::LaneDead { lane, reason } => {
                    tracing::warn!(session = s.id(), lane, %reason, "trunk lane dead");
                    self.close_lane(s, lane as usize, Err(io::Error::new(io::ErrorKind::TimedOut, reason)));
                }
                // Adaptive lanes: the edge's lane task for `lane` dials once the session
                // wants it (`Session::lane_wanted`); closed lanes end here.
                Event::ConnectLane { lane } => tracing::info!(session = s.id(), lane, "trunk lane wanted"),
                Event::LaneClosed { lane } => {
                    tracing::info!(session = s.id(), lane, "idle trunk lane closed");
                    self.close_lane(s, lane as usize, Ok(()));
                }
                Event::LaneReport { wanted, streams } => {
                    let st = s.stats();
                    let streams = streams.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
                    tracing::info!(
                        session = s.id(),
                        wanted,
                        %streams,
                        moves = st.stream_moves,
                        move_giveups = st.move_giveups,
                        lanes_opened = st.lanes_opened,
                        lanes_closed = st.lanes_closed,
                        "lane report"
                    );
                }
                Event::GoAway => tracing::info!(session = s.id(), "peer is going away"),
                Event::SessionLost { reason } => {
                    tracing::warn!(session = s.id(), %reason, "session lost; its streams were reset");
                    self.shared.counters.sessions_lost.fetch_add(1, Ordering::Relaxed);
                    self.lost = true;
                }
            }
        }
    }

    fn read_lanes(&mut self, s: &mut Session, cx: &mut Context<'_>) {
        for i in 0..self.lanes.len() {
            let mut used = 0;
            loop {
                let now = self.now();
                let Some(l) = self.lanes[i].as_mut() else { break };
                let generation = l.generation;
                match l.read(cx, &mut self.buf, used) {
                    Read::Data(n) => {
                        used += n;
                        s.handle_bytes(i as u16, generation, &self.buf[..n], now);
                        self.dispatch(s);
                    }
                    Read::Pending => break,
                    Read::Budget => {
                        cx.waker().wake_by_ref();
                        break;
                    }
                    Read::Closed(e) => {
                        self.close_lane(s, i, Err(e));
                        break;
                    }
                }
            }
        }
    }

    fn serve_streams(&mut self, s: &mut Session) {
        let mut woken = std::mem::take(&mut self.woken);
        self.ready.take(&mut woken);
        let now = self.now();
        for &id in &woken {
            let Some(l) = self.locals.get_mut(&id) else { continue };
            match l.service(s, &mut self.buf, now) {
                Service::Idle => {}
                Service::Done => {
                    self.locals.remove(&id);
                }
                Service::Failed(e) => self.fail_stream(s, id, e),
            }
        }
        self.woken = woken;
        self.dispatch(s);
    }

    fn transmit(&mut self, s: &mut Session, cx: &mut Context<'_>) {
        let now = self.now();
        for i in 0..self.lanes.len() {
            let Some(l) = self.lanes[i].as_mut() else { continue };
            if !s.lane_is_current(i as u16, l.generation) {
                self.close_lane(s, i, Ok(()));
                continue;
            }
            if let Err(e) = l.transmit(cx, s, i as u16, now) {
                self.close_lane(s, i, Err(e));
            }
        }
        self.dispatch(s);
    }

    fn arm_timer(&mut self, s: &Session, cx: &mut Context<'_>) {
        let deadline = s.poll_timeout();
        if deadline != self.timer_at {
            self.timer_at = deadline;
            let at = deadline.map_or_else(far_future, |d| self.shared.clock.to_tokio(d));
            self.timer.as_mut().reset(at);
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
        }
    }

    /// A local socket failed: reset its stream at both ends.
    fn fail_stream(&mut self, s: &mut Session, id: StreamId, e: io::Error) {
        s.stream_reset(id, ResetCode::Aborted, &format!("local socket: {e}"));
        if let Some(l) = self.locals.remove(&id) {
            l.abort();
        }
    }

    fn close_lane(&mut self, s: &mut Session, lane: usize, result: io::Result<()>) {
        if let Some(l) = self.lanes[lane].take() {
            s.lane_disconnected(lane as u16, l.generation, self.now());
            l.finish(result);
        }
    }

    /// Abort every local socket and close every lane.
    fn close_all(&mut self, s: &mut Session, why: &str) {
        for (_, l) in self.locals.drain() {
            l.abort();
        }
        for i in 0..self.lanes.len() {
            self.close_lane(s, i, Err(io::Error::new(io::ErrorKind::ConnectionAborted, why.to_owned())));
        }
    }
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(86_400)
}

/// Abort a TCP connection with RST (SO_LINGER 0) so the application sees an error,
/// not a clean end of stream: that is how a reset stream is signalled to it.
pub fn abort_socket(s: &TcpStream) {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: valid fd owned by `s`; `linger` is a plain struct of the size passed.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// `TCP_RTO_MIN_US` (include/uapi/linux/tcp.h, Linux 6.15; not in the libc crate yet).
const TCP_RTO_MIN_US: libc::c_int = 45;

/// Trunk socket options: no Nagle; a small `TCP_NOTSENT_LOWAT` so the kernel holds
/// little unsent data and the order of frames is decided by the scheduler; and, if
/// configured, `TCP_THIN_LINEAR_TIMEOUTS` (many lanes make each one thin) and
/// `TCP_RTO_MIN_US` (a thin lane repairs most losses by timeout). A route's locked
/// `rto_min` metric (what `ip route … rto_min` sets) overrides `TCP_RTO_MIN_US`
/// (Linux `tcp_rto_min()`).
pub fn tune_trunk(s: &TcpStream, common: &Common) {
    let _ = s.set_nodelay(true);
    let _ = set_tcp_int(s, libc::TCP_NOTSENT_LOWAT, common.notsent_lowat as libc::c_int);
    if common.thin_linear_timeouts {
        if let Err(e) = set_tcp_int(s, libc::TCP_THIN_LINEAR_TIMEOUTS, 1) {
            tracing::warn!(error = %e, "TCP_THIN_LINEAR_TIMEOUTS not set on a trunk socket");
        }
    }
    if let Some(min) = common.rto_min {
        if let Err(e) = set_tcp_int(s, TCP_RTO_MIN_US, min.as_micros() as libc::c_int) {
            tracing::warn!(error = %e, "TCP_RTO_MIN_US not set on a trunk socket (Linux ≥ 6.15)");
        }
    }
}

/// `setsockopt(IPPROTO_TCP, opt, v)` for an int option.
fn set_tcp_int(s: &TcpStream, opt: libc::c_int, v: libc::c_int) -> std::io::Result<()> {
    // SAFETY: valid fd owned by `s`; an int option of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A random 64-bit session id.
pub fn random_id() -> u64 {
    let mut b = [0u8; 8];
    // The system RNG failing is not recoverable in any useful way; fall back to time.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b).is_err() {
        return std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
    }
    u64::from_ne_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse, EdgeConfig};

    /// The socket's `TCP_RTO_MIN_US`, µs.
    fn rto_min_us(s: &TcpStream) -> u32 {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: valid fd owned by `s`; an int option of the size passed.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_TCP,
                TCP_RTO_MIN_US,
                &mut v as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!(rc, 0, "getsockopt(TCP_RTO_MIN_US): {}", io::Error::last_os_error());
        v as u32
    }

    /// `trunk.rto_min_ms` reaches a real socket as the kernel's per-socket minimum RTO
    /// (rounded up to whole jiffies), and a socket without it keeps the kernel's.
    #[tokio::test]
    async fn trunk_rto_min_reaches_the_socket() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let s = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let default = rto_min_us(&s);
        let text = "[trunk]\nconnect = \"127.0.0.1:7400\"\nrto_min_ms = 50\n[auth]\npsk = \"0123456789abcdef0123\"\n\
                    [[forward]]\nname = \"echo\"\nlisten = \"127.0.0.1:7001\"\n";
        let cfg = EdgeConfig::try_from(parse(text).unwrap()).unwrap();
        tune_trunk(&s, &cfg.common);
        let set = rto_min_us(&s);
        assert!((50_000..=60_000).contains(&set), "TCP_RTO_MIN_US {set} µs after asking for 50 ms");
        assert_ne!(set, default, "the kernel's own minimum ({default} µs) is not 50 ms");
    }
}

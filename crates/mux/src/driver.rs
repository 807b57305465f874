//! The thin async shell around one sans-IO [`Session`] (quinn `ConnectionDriver`
//! style): the session sits in a mutex; trunk-lane tasks and per-stream tasks feed it
//! and drain its events; one timer task re-arms from `poll_timeout()`.
//!
//! Nothing here decides what to send or in which order — that is the session's job.
//! Tasks only move bytes between sockets and the session.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use thinwan_proto::mux::{Class, Config as SessionConfig, Event, ResetCode, Role, Session, StreamId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

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

/// What a stream task receives.
#[derive(Debug)]
pub enum Msg {
    /// Write these bytes to the local socket.
    Data(Vec<u8>),
    /// Peer half-closed.
    Finished,
    /// Abort with RST.
    Reset(ResetCode, String),
}

/// Dispatch entry for one stream.
#[derive(Debug)]
pub struct StreamHandle {
    tx: mpsc::UnboundedSender<Msg>,
    writable: Arc<Notify>,
}

/// A stream the edge opened, handed to the core's connector task.
#[derive(Debug)]
pub struct Opened {
    /// Session epoch.
    pub epoch: u64,
    /// Stream id.
    pub id: StreamId,
    /// Target name asked for.
    pub target: String,
    /// Channel of messages for the stream.
    pub rx: mpsc::UnboundedReceiver<Msg>,
    /// Wakes the reader when the session has room again.
    pub writable: Arc<Notify>,
}

/// Mutable state behind the mutex.
pub struct Inner {
    /// The protocol state machine.
    pub session: Session,
    /// Bumped when the edge replaces a lost session; stale tasks compare it.
    pub epoch: u64,
    streams: HashMap<StreamId, StreamHandle>,
    lane_wakers: Vec<Arc<Notify>>,
}

/// One session and everything needed to drive it.
pub struct Shared {
    inner: Mutex<Inner>,
    /// Clock.
    pub clock: Clock,
    role: Role,
    cfg: SessionConfig,
    /// Counters.
    pub counters: Arc<Counters>,
    opened_tx: Option<mpsc::UnboundedSender<Opened>>,
    timer: Notify,
}

impl Shared {
    /// A shared session. The core passes `opened_tx` to learn of new streams.
    pub fn new(
        role: Role,
        id: u64,
        cfg: SessionConfig,
        counters: Arc<Counters>,
        opened_tx: Option<mpsc::UnboundedSender<Opened>>,
    ) -> Arc<Shared> {
        let clock = Clock::new();
        let lanes = cfg.lanes.max(1) as usize;
        Arc::new(Shared {
            inner: Mutex::new(Inner {
                session: Session::new(role, id, cfg.clone(), clock.now()),
                epoch: 0,
                streams: HashMap::new(),
                lane_wakers: (0..lanes).map(|_| Arc::new(Notify::new())).collect(),
            }),
            clock,
            role,
            cfg,
            counters,
            opened_tx,
            timer: Notify::new(),
        })
    }

    /// Lock the state. A poisoned lock means a task panicked mid-update; the state
    /// may be inconsistent, but failing every stream is worse than carrying on.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After any call into the session: route its events, wake lanes with work.
    pub fn after(&self, g: &mut Inner) {
        let mut lost = false;
        while let Some(ev) = g.session.poll_event() {
            match ev {
                Event::StreamOpened { id, target } => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    let writable = Arc::new(Notify::new());
                    g.streams.insert(id, StreamHandle { tx, writable: writable.clone() });
                    if let Some(o) = &self.opened_tx {
                        let _ = o.send(Opened { epoch: g.epoch, id, target, rx, writable });
                    }
                }
                Event::Data { id, bytes } => {
                    if let Some(h) = g.streams.get(&id) {
                        let _ = h.tx.send(Msg::Data(bytes));
                    }
                }
                Event::Finished { id } => {
                    if let Some(h) = g.streams.get(&id) {
                        let _ = h.tx.send(Msg::Finished);
                    }
                }
                Event::Reset { id, code, message, remote } => {
                    tracing::info!(stream = id, %code, %message, remote, "stream reset");
                    if let Some(h) = g.streams.remove(&id) {
                        let _ = h.tx.send(Msg::Reset(code, message));
                    }
                }
                Event::Writable { id } => {
                    if let Some(h) = g.streams.get(&id) {
                        h.writable.notify_one();
                    }
                }
                Event::LaneUp { lane, resumed } => {
                    tracing::info!(session = g.session.id(), lane, resumed, "trunk lane up");
                }
                Event::LaneDead { lane, reason } => {
                    tracing::warn!(session = g.session.id(), lane, %reason, "trunk lane dead");
                    g.lane_wakers[lane as usize].notify_one();
                }
                Event::GoAway => tracing::info!(session = g.session.id(), "peer is going away"),
                Event::SessionLost { reason } => {
                    tracing::warn!(session = g.session.id(), %reason, "session lost; its streams were reset");
                    self.counters.sessions_lost.fetch_add(1, Ordering::Relaxed);
                    lost = true;
                }
            }
        }
        if lost {
            for w in &g.lane_wakers {
                w.notify_one();
            }
            if self.role == Role::Edge {
                // Start over with a fresh session; lanes reconnect with `Hello NEW`.
                g.epoch += 1;
                g.session = Session::new(Role::Edge, random_id(), self.cfg.clone(), self.clock.now());
                for s in g.streams.drain() {
                    let _ = s.1.tx.send(Msg::Reset(ResetCode::ResumeFailed, "session lost".into()));
                }
            }
            self.timer.notify_one();
        }
        for lane in 0..g.session.lane_count() {
            if g.session.wants_transmit(lane) {
                g.lane_wakers[lane as usize].notify_one();
            }
        }
    }

    /// Register a stream opened locally (edge).
    pub fn open(&self, target: &str, class: Class) -> Option<Opened> {
        let mut g = self.lock();
        let id = match g.session.open_stream(target, class, self.clock.now()) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(?e, target, "stream refused");
                return None;
            }
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let writable = Arc::new(Notify::new());
        g.streams.insert(id, StreamHandle { tx, writable: writable.clone() });
        let epoch = g.epoch;
        self.after(&mut g);
        Some(Opened { epoch, id, target: target.to_owned(), rx, writable })
    }

    /// Reset a stream from this side and abort its local socket.
    pub fn reset(&self, epoch: u64, id: StreamId, code: ResetCode, message: &str) {
        let mut g = self.lock();
        if g.epoch != epoch {
            return;
        }
        g.session.stream_reset(id, code, message);
        if let Some(h) = g.streams.remove(&id) {
            let _ = h.tx.send(Msg::Reset(code, message.to_owned()));
        }
        self.after(&mut g);
    }

    /// Drive timers until the session is lost (core) or forever (edge: it replaces
    /// lost sessions). Wakes at least every half ack delay so delayed acks are timely.
    pub async fn run_timers(self: Arc<Self>) {
        let cap = std::time::Duration::from_nanos(self.cfg.ack_delay.as_nanos() / 2).max(std::time::Duration::from_micros(500));
        loop {
            let deadline = {
                let g = self.lock();
                if g.session.is_lost() {
                    return;
                }
                g.session.poll_timeout()
            };
            let mut wake = tokio::time::Instant::now() + cap;
            if let Some(d) = deadline {
                wake = wake.min(self.clock.to_tokio(d));
            }
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = self.timer.notified() => {}
            }
            let mut g = self.lock();
            let now = self.clock.now();
            g.session.handle_timeout(now);
            self.after(&mut g);
        }
    }

    /// Run one trunk connection for `lane` until it fails or is superseded. `initial`
    /// holds bytes already read from it (the core peeks at the `Hello`).
    pub async fn run_lane<S: Io>(self: &Arc<Self>, lane: u16, stream: S, initial: &[u8]) -> io::Result<()> {
        let waker = Arc::new(Notify::new());
        let (epoch, generation) = {
            let mut g = self.lock();
            let now = self.clock.now();
            let old = std::mem::replace(&mut g.lane_wakers[lane as usize], waker.clone());
            old.notify_one();
            let generation = g.session.lane_connected(lane, now);
            if !initial.is_empty() {
                g.session.handle_bytes(lane, generation, initial, now);
            }
            self.after(&mut g);
            (g.epoch, generation)
        };
        let current = |g: &Inner| g.epoch == epoch && g.session.lane_is_current(lane, generation);
        let (mut rd, mut wr) = tokio::io::split(stream);
        let reader = async {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = rd.read(&mut buf).await?;
                if n == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "trunk closed by peer"));
                }
                let mut g = self.lock();
                if !current(&g) {
                    return Ok(());
                }
                g.session.handle_bytes(lane, generation, &buf[..n], self.clock.now());
                self.after(&mut g);
            }
        };
        let writer = async {
            let mut buf = Vec::with_capacity(128 * 1024);
            loop {
                buf.clear();
                {
                    let mut g = self.lock();
                    if !current(&g) {
                        return Ok(());
                    }
                    // One frame-sized batch per write: a thin frame never waits behind more than
                    // ~16 KiB of our own bulk data in user space.
                    g.session.poll_transmit(lane, generation, &mut buf, 16 * 1024, self.clock.now());
                    self.after(&mut g);
                }
                if buf.is_empty() {
                    waker.notified().await;
                    continue;
                }
                wr.write_all(&buf).await?;
                wr.flush().await?;
            }
        };
        let result = tokio::select! {
            r = reader => r,
            r = writer => r,
        };
        let mut g = self.lock();
        if g.epoch == epoch {
            g.session.lane_disconnected(lane, generation, self.clock.now());
            self.after(&mut g);
        }
        result
    }

    /// Move bytes between a local TCP socket and stream `o.id` until both directions
    /// are finished or the stream is reset (then the socket is aborted with RST).
    pub async fn pump(self: Arc<Self>, o: Opened, sock: TcpStream) {
        let Opened { epoch, id, mut rx, writable, .. } = o;
        let _ = sock.set_nodelay(true);
        let (mut rd, mut wr) = sock.into_split();
        let sh = self.clone();
        let mut reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match rd.read(&mut buf).await {
                    Ok(0) => {
                        let mut g = sh.lock();
                        if g.epoch == epoch {
                            g.session.stream_finish(id, sh.clock.now());
                            sh.after(&mut g);
                        }
                        return;
                    }
                    Ok(n) => n,
                    Err(e) => {
                        sh.reset(epoch, id, ResetCode::Aborted, &format!("local socket: {e}"));
                        return;
                    }
                };
                let mut off = 0;
                while off < n {
                    let notified = writable.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    {
                        let mut g = sh.lock();
                        if g.epoch != epoch {
                            return;
                        }
                        match g.session.stream_send(id, &buf[off..n], sh.clock.now()) {
                            Ok(k) => off += k,
                            Err(_) => return,
                        }
                        sh.after(&mut g);
                    }
                    if off < n {
                        notified.await;
                    }
                }
            }
        });
        let mut peer_finished = false;
        loop {
            let msg = if peer_finished {
                tokio::select! {
                    _ = &mut reader => break,
                    m = rx.recv() => m,
                }
            } else {
                rx.recv().await
            };
            match msg {
                Some(Msg::Data(b)) => {
                    if let Err(e) = wr.write_all(&b).await {
                        self.reset(epoch, id, ResetCode::Aborted, &format!("local socket: {e}"));
                        close_with_rst(&reader, wr);
                        break;
                    }
                    let mut g = self.lock();
                    if g.epoch == epoch {
                        g.session.stream_consumed(id, b.len());
                        self.after(&mut g);
                    }
                }
                Some(Msg::Finished) => {
                    let _ = wr.shutdown().await;
                    peer_finished = true;
                }
                Some(Msg::Reset(..)) | None => {
                    close_with_rst(&reader, wr);
                    break;
                }
            }
        }
        let mut g = self.lock();
        if g.epoch == epoch {
            g.streams.remove(&id);
        }
    }

    /// Begin a graceful shutdown, wait up to `grace` for streams to end, then reset
    /// the rest and wait briefly for the peer to acknowledge.
    pub async fn shutdown(&self, grace: std::time::Duration) {
        {
            let mut g = self.lock();
            g.session.go_away();
            self.after(&mut g);
        }
        let deadline = tokio::time::Instant::now() + grace;
        while tokio::time::Instant::now() < deadline {
            let open = self.lock().session.stream_count();
            if open == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        {
            let mut g = self.lock();
            g.session.reset_all(ResetCode::Shutdown, "daemon shutting down");
            self.after(&mut g);
        }
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
}

/// Stop reading a local socket and close it with RST (the stream was reset).
fn close_with_rst(reader: &tokio::task::JoinHandle<()>, wr: tokio::net::tcp::OwnedWriteHalf) {
    reader.abort();
    abort_socket(wr.as_ref());
    // Dropping the half would send FIN first; close only with RST.
    wr.forget();
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

/// Trunk socket options: no Nagle, and a small `TCP_NOTSENT_LOWAT` so the kernel
/// holds little unsent data and the order of frames is decided by the scheduler.
pub fn tune_trunk(s: &TcpStream, notsent_lowat: u32) {
    let _ = s.set_nodelay(true);
    let v = notsent_lowat as libc::c_int;
    // SAFETY: valid fd; an int option.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// A random 64-bit session id.
pub fn random_id() -> u64 {
    let mut b = [0u8; 8];
    // The system RNG failing is not recoverable in any useful way; fall back to time.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b).is_err() {
        return std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    }
    u64::from_ne_bytes(b)
}

//! The local side of a stream — the client's connection at the edge, the server's at
//! the core — as the session driver sees it: a socket, the bytes owed to it, and a waker
//! that names the stream when the socket becomes ready.
//!
//! Why per-stream wakers: the driver is one task for thousands of sockets. A waker that
//! pushes its stream id onto a [`ReadyQueue`] lets the driver service exactly the
//! sockets that changed (what `FuturesUnordered` does internally), instead of polling
//! every socket on every wake-up.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use thinwan_proto::mux::{Session, StreamId};
use thinwan_proto::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::driver::abort_socket;

/// Streams whose sockets became ready since the driver last looked.
#[derive(Default)]
pub struct ReadyQueue {
    inner: Mutex<ReadyInner>,
}

#[derive(Default)]
struct ReadyInner {
    ids: Vec<StreamId>,
    driver: Option<Waker>,
}

impl ReadyQueue {
    /// Remember the driver task's waker (call at the start of every driver poll).
    pub fn set_driver(&self, w: &Waker) {
        let mut q = lock(&self.inner);
        if !q.driver.as_ref().is_some_and(|d| d.will_wake(w)) {
            q.driver = Some(w.clone());
        }
    }

    /// Take the ready ids into `out` (emptied first).
    pub fn take(&self, out: &mut Vec<StreamId>) {
        out.clear();
        std::mem::swap(&mut lock(&self.inner).ids, out);
    }

    fn push(&self, id: StreamId) {
        let mut q = lock(&self.inner);
        q.ids.push(id);
        if let Some(w) = &q.driver {
            w.wake_by_ref();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing panics while holding this lock; recover anyway rather than wedge the driver.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waker of one stream's socket: queues the id once until the driver takes it.
struct StreamWaker {
    id: StreamId,
    queued: AtomicBool,
    queue: Arc<ReadyQueue>,
}

impl Wake for StreamWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.queue.push(self.id);
        }
    }
}

/// What servicing a stream's socket found.
pub enum Service {
    /// Nothing more to do until the socket or the session wakes the stream.
    Idle,
    /// Both directions finished cleanly: drop the stream.
    Done,
    /// The socket failed: reset the stream.
    Failed(io::Error),
}

/// One stream's local connection.
pub struct Local {
    id: StreamId,
    /// None while the core is still connecting to the target.
    sock: Option<TcpStream>,
    handle: Arc<StreamWaker>,
    waker: Waker,
    /// Payload for the socket not yet written (front has `out_off` bytes done).
    out: VecDeque<Vec<u8>>,
    out_off: usize,
    /// Read from the socket but refused by the session (its buffers are full).
    pending_in: Vec<u8>,
    /// The socket reached end of file (the session was told).
    read_done: bool,
    /// The peer half-closed: shut down our write side once `out` is empty.
    peer_finished: bool,
    write_done: bool,
}

/// Largest read from a local socket per service, so one busy stream cannot hold the
/// driver (and every other stream) for long.
const READ_BUDGET: usize = 256 * 1024;

impl Local {
    /// A stream; `sock` is None until the core's connect completes.
    pub fn new(id: StreamId, sock: Option<TcpStream>, queue: &Arc<ReadyQueue>) -> Local {
        let handle = Arc::new(StreamWaker { id, queued: AtomicBool::new(false), queue: queue.clone() });
        let waker = Waker::from(handle.clone());
        let mut l = Local {
            id,
            sock: None,
            handle,
            waker,
            out: VecDeque::new(),
            out_off: 0,
            pending_in: Vec::new(),
            read_done: false,
            peer_finished: false,
            write_done: false,
        };
        if let Some(s) = sock {
            l.attach(s);
        }
        l
    }

    /// The core connected the target: start moving bytes.
    pub fn attach(&mut self, sock: TcpStream) {
        let _ = sock.set_nodelay(true);
        self.sock = Some(sock);
        self.wake();
    }

    /// True while the core's connect is in progress.
    pub fn is_attached(&self) -> bool {
        self.sock.is_some()
    }

    /// Ask the driver to service this stream.
    pub fn wake(&self) {
        self.handle.wake_by_ref();
    }

    /// Payload from the peer: write it now if the socket takes it, else keep it.
    pub fn deliver(&mut self, bytes: Vec<u8>, s: &mut Session) -> io::Result<()> {
        self.out.push_back(bytes);
        self.flush(s)
    }

    /// The peer finished its direction. True when both directions are now finished.
    pub fn finish(&mut self, s: &mut Session) -> io::Result<bool> {
        self.peer_finished = true;
        self.flush(s)?;
        Ok(self.read_done && self.write_done)
    }

    /// Called when the stream's waker fired: write what is owed, read what arrived.
    pub fn service(&mut self, s: &mut Session, buf: &mut [u8], now: Instant) -> Service {
        // Clear before touching the socket, so a readiness change from here on queues
        // the stream again.
        self.handle.queued.store(false, Ordering::Release);
        if self.sock.is_none() {
            return Service::Idle;
        }
        if let Err(e) = self.flush(s) {
            return Service::Failed(e);
        }
        if let Err(e) = self.read(s, buf, now) {
            return Service::Failed(e);
        }
        if self.read_done && self.write_done {
            Service::Done
        } else {
            Service::Idle
        }
    }

    /// Close with RST: the application must see an error, not a clean end of stream.
    pub fn abort(self) {
        if let Some(sock) = self.sock {
            abort_socket(&sock);
        }
    }

    fn flush(&mut self, s: &mut Session) -> io::Result<()> {
        let Some(sock) = self.sock.as_mut() else { return Ok(()) };
        let mut cx = Context::from_waker(&self.waker);
        while let Some(front) = self.out.front() {
            match Pin::new(&mut *sock).poll_write(&mut cx, &front[self.out_off..]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    // Credit goes back only for bytes the application can now read.
                    s.stream_consumed(self.id, n);
                    self.out_off += n;
                    if self.out_off == front.len() {
                        self.out.pop_front();
                        self.out_off = 0;
                    }
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
        if self.peer_finished && !self.write_done {
            // shutdown(SHUT_WR) does not block.
            if let Poll::Ready(r) = Pin::new(&mut *sock).poll_shutdown(&mut cx) {
                r?;
                self.write_done = true;
            }
        }
        Ok(())
    }

    fn read(&mut self, s: &mut Session, buf: &mut [u8], now: Instant) -> io::Result<()> {
        if !self.pending_in.is_empty() {
            let k = s.stream_send(self.id, &self.pending_in, now).map_err(refused)?;
            self.pending_in.drain(..k);
            if !self.pending_in.is_empty() {
                // Still full: the session's `Writable` event wakes the stream again.
                return Ok(());
            }
        }
        let Some(sock) = self.sock.as_mut() else { return Ok(()) };
        let mut cx = Context::from_waker(&self.waker);
        let mut total = 0;
        while !self.read_done {
            if total >= READ_BUDGET {
                // More may be waiting; come back after the other streams had a turn.
                self.wake();
                return Ok(());
            }
            let mut rb = ReadBuf::new(buf);
            match Pin::new(&mut *sock).poll_read(&mut cx, &mut rb) {
                // Pending registered the waker: the next byte wakes this stream.
                Poll::Pending => return Ok(()),
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Ready(Ok(())) => {}
            }
            let data = rb.filled();
            if data.is_empty() {
                self.read_done = true;
                s.stream_finish(self.id, now);
                return Ok(());
            }
            total += data.len();
            let k = s.stream_send(self.id, data, now).map_err(refused)?;
            if k < data.len() {
                self.pending_in.extend_from_slice(&data[k..]);
                return Ok(());
            }
        }
        Ok(())
    }
}

fn refused(e: thinwan_proto::mux::StreamError) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, format!("stream refused data: {e:?}"))
}

//! One trunk connection (TLS) of a lane, as the session driver sees it.
//!
//! Writing: frames are taken from the session one batch at a time, and only after the
//! previous batch has left user space (TLS flushed into the kernel). With
//! `TCP_NOTSENT_LOWAT` the kernel also holds little unsent data, so a thin frame that
//! arrives while a bulk stream is sending waits behind at most about one batch plus the
//! low-water mark, and the scheduler — not a buffer — decides the order.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use thinwan_proto::mux::Session;
use thinwan_proto::Instant;
use tokio::io::ReadBuf;
use tokio::sync::oneshot;

use crate::tls::Io;

/// Frames taken from the session per write. 16 KiB is one TLS record and one maximal
/// data frame: the most a thin frame can queue behind in user space.
const WRITE_BATCH: usize = 16 * 1024;

/// Largest amount read from one lane per driver poll before the streams get a turn.
const READ_BUDGET: usize = 256 * 1024;

/// A live trunk connection.
pub struct LaneIo {
    io: Box<dyn Io>,
    /// The session's generation number for this connection.
    pub generation: u64,
    out: Vec<u8>,
    sent: usize,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

/// Result of reading a lane.
pub enum Read {
    /// Bytes were read into the buffer.
    Data(usize),
    /// Nothing more now (the waker is registered).
    Pending,
    /// Read budget used up; more may be waiting.
    Budget,
    /// The connection failed or the peer closed it.
    Closed(io::Error),
}

impl LaneIo {
    /// A connection; `done` learns how it ended.
    pub fn new(io: Box<dyn Io>, generation: u64, done: oneshot::Sender<io::Result<()>>) -> LaneIo {
        LaneIo { io, generation, out: Vec::with_capacity(2 * WRITE_BATCH), sent: 0, done: Some(done) }
    }

    /// Read once into `buf`, counting against `used` (bytes read so far this poll).
    pub fn read(&mut self, cx: &mut Context<'_>, buf: &mut [u8], used: usize) -> Read {
        if used >= READ_BUDGET {
            return Read::Budget;
        }
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(cx, &mut rb) {
            Poll::Pending => Read::Pending,
            Poll::Ready(Err(e)) => Read::Closed(e),
            Poll::Ready(Ok(())) if rb.filled().is_empty() => {
                Read::Closed(io::Error::new(io::ErrorKind::UnexpectedEof, "trunk closed by peer"))
            }
            Poll::Ready(Ok(())) => Read::Data(rb.filled().len()),
        }
    }

    /// Write what the session has for `lane` until the socket pushes back (its waker is
    /// then registered) or nothing is left.
    pub fn transmit(
        &mut self,
        cx: &mut Context<'_>,
        s: &mut Session,
        lane: u16,
        now: Instant,
    ) -> io::Result<()> {
        loop {
            if self.sent == self.out.len() {
                // The previous batch must leave user space before the next is chosen.
                match Pin::new(&mut *self.io).poll_flush(cx) {
                    Poll::Pending => return Ok(()),
                    Poll::Ready(r) => r?,
                }
                self.out.clear();
                self.sent = 0;
                if !s.poll_transmit(lane, self.generation, &mut self.out, WRITE_BATCH, now) {
                    return Ok(());
                }
            }
            match Pin::new(&mut *self.io).poll_write(cx, &self.out[self.sent..]) {
                Poll::Pending => return Ok(()),
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => self.sent += n,
                Poll::Ready(Err(e)) => return Err(e),
            }
        }
    }

    /// Tell whoever connected this lane how it ended (dropping `self` closes it).
    pub fn finish(mut self, result: io::Result<()>) {
        if let Some(d) = self.done.take() {
            let _ = d.send(result);
        }
    }
}

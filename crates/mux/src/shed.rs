//! Shedding at the edge (issue 20, docs/mux.md "Shedding"): when the session says even
//! all its lanes cannot keep a new client's delay near a direct connection's, the edge
//! connects the client to the forward's `shed.direct` address itself, a plain TCP
//! splice beside the tunnel, for the connection's whole life.
//!
//! The decision needs the trunk's packet loss, which only the kernel knows: per lane,
//! `tcp_info` of the edge's trunk socket, retransmitted ÷ data segments sent
//! (`tcpi_total_retrans ÷ tcpi_data_segs_out`), summed over the lanes' current
//! connections and every earlier one.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::net::TcpStream;

use crate::driver::{abort_socket, Counters};

/// The edge's trunk loss meter: one slot per lane.
#[derive(Debug, Default)]
pub struct TrunkLoss {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Per lane, a duplicate of its live connection's socket (the driver owns the
    /// connection; a duplicate keeps `getsockopt` on the right socket even while the
    /// driver closes its copy).
    live: Vec<Option<OwnedFd>>,
    /// Retransmitted and sent data segments of connections that ended.
    retrans: u64,
    segs: u64,
}

/// A lane's connection, measured until this is dropped (when the connection ended or
/// its task was aborted).
#[derive(Debug)]
pub struct Attached {
    loss: Arc<TrunkLoss>,
    lane: usize,
}

impl TrunkLoss {
    /// Measure lane `lane`'s new connection `tcp` until the returned guard is dropped.
    /// `None` if the socket cannot be duplicated (then it goes unmeasured).
    pub fn attach(self: &Arc<Self>, lane: u16, tcp: &TcpStream) -> Option<Attached> {
        let fd = tcp.as_fd().try_clone_to_owned().ok()?;
        let lane = lane as usize;
        let mut g = self.lock();
        if g.live.len() <= lane {
            g.live.resize_with(lane + 1, || None);
        }
        g.live[lane] = Some(fd);
        Some(Attached { loss: self.clone(), lane })
    }

    /// Loss of the trunk so far: retransmitted ÷ sent data segments over all lanes'
    /// connections, 0 before any was sent.
    pub fn loss(&self) -> f64 {
        let g = self.lock();
        let (mut retrans, mut segs) = (g.retrans, g.segs);
        for fd in g.live.iter().flatten() {
            if let Some((r, s)) = retrans_and_segs(fd.as_fd()) {
                retrans += r;
                segs += s;
            }
        }
        if segs == 0 {
            0.0
        } else {
            retrans as f64 / segs as f64
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut g = self.loss.lock();
        if let Some(fd) = g.live.get_mut(self.lane).and_then(Option::take) {
            if let Some((r, s)) = retrans_and_segs(fd.as_fd()) {
                g.retrans += r;
                g.segs += s;
            }
        }
    }
}

/// `tcpi_total_retrans` and `tcpi_data_segs_out` of a TCP socket (Linux ≥ 4.6),
/// read by offset in `struct tcp_info` (include/uapi/linux/tcp.h), as
/// `thinwan-net`'s pump reads it.
fn retrans_and_segs(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    const TOTAL_RETRANS: usize = 100;
    const DATA_SEGS_OUT: usize = 156;
    let mut buf = [0u8; 256];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: a valid descriptor (borrowed from an owned one), buffer and length.
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len)
    };
    let u32_at = |o: usize| u32::from_ne_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]) as u64;
    (rc == 0 && len as usize >= DATA_SEGS_OUT + 4).then(|| (u32_at(TOTAL_RETRANS), u32_at(DATA_SEGS_OUT)))
}

/// Connect a shed client to `direct` and copy bytes both ways until both sides are
/// done. A failed connect resets the client (as a failed target connect does through
/// the tunnel).
pub async fn splice(
    client: TcpStream,
    direct: SocketAddr,
    timeout: std::time::Duration,
    counters: Arc<Counters>,
) {
    let up = match tokio::time::timeout(timeout, TcpStream::connect(direct)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return refused(&client, direct, &e, &counters),
        Err(_) => return refused(&client, direct, &io::ErrorKind::TimedOut.into(), &counters),
    };
    // Thin streams: every write leaves at once, as on the tunnel's local sockets.
    let _ = client.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (mut client, mut up) = (client, up);
    match tokio::io::copy_bidirectional(&mut client, &mut up).await {
        Ok((a, b)) => {
            counters.shed_bytes.fetch_add(a + b, Ordering::Relaxed);
        }
        Err(e) => {
            tracing::debug!(%direct, error = %e, "shed connection ended with an error");
            abort_socket(&client);
            abort_socket(&up);
        }
    }
}

fn refused(client: &TcpStream, direct: SocketAddr, e: &io::Error, counters: &Counters) {
    counters.shed_connect_failures.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(%direct, error = %e, "direct-path connect failed; client reset");
    abort_socket(client);
}

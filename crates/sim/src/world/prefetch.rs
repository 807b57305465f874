//! Software prefetching for large runs ([`PREFETCH_MIN_CONNS`]): hints only, nothing the
//! simulation computes depends on them (a test checks the records are the same).

use super::*;

impl World {
    /// Start loading what the events a few places down the current lane (or calendar
    /// bucket) will read: far ahead an arrival's packet or a write's traffic source,
    /// nearer (those loaded by then) the port a packet goes through next, or at its
    /// endpoint the connection, the message row the packet names (`Packet::row`) and
    /// the port of the answer; for a write, its connection and port. At 10⁴
    /// connections all of it has left the cache since it was last touched, and each
    /// load would otherwise stall its event in turn. Only hints: nothing the
    /// simulation computes depends on them. The distances were tuned at 10⁴ pairs
    /// (BENCHMARKS.md).
    pub(super) fn prefetch_ahead(&self) {
        const FAR: usize = 12;
        const NEAR: usize = 6;
        match self.events.lane_ahead(FAR) {
            Some(Event::Arrive { packet }) => prefetch(&self.slab[packet as usize]),
            Some(Event::AppWrite { pair }) => prefetch_all(&self.pairs[pair as usize]),
            _ => {}
        }
        match self.events.lane_ahead(NEAR) {
            Some(Event::Arrive { packet }) => {
                let pk = &self.slab[packet as usize];
                let (hop, dir) = (pk.hop as usize + 1, matches!(pk.body, Body::Ack(_)) as usize);
                let next = if hop < HOPS { self.routes.port(pk.conn, dir, hop) } else { NO_PORT };
                if next != NO_PORT {
                    self.prefetch_port(next);
                } else {
                    // The endpoint answers (an ACK, or data the ACK lets go) through
                    // the first port of the other direction.
                    let c = &self.conns[pk.conn as usize];
                    if dir == 1 {
                        c.prefetch_server_end();
                    } else {
                        c.prefetch_client_end();
                    }
                    let rows = self.rows_at[pk.conn as usize];
                    prefetch_line(
                        rows.wrapping_add(pk.row as usize * std::mem::size_of::<Msg>()) as *const u8
                    );
                    self.prefetch_port(self.routes.port(pk.conn, 1 - dir, 0));
                }
            }
            Some(Event::AppWrite { pair }) => {
                let conn = self.pairs[pair as usize].conns[0];
                self.conns[conn as usize].prefetch_server_end();
                self.prefetch_port(self.routes.port(conn, 0, 0));
            }
            _ => {}
        }
    }

    /// [`prefetch`] port `port` ([`NO_PORT`], which a route may hold: nothing).
    pub(super) fn prefetch_port(&self, port: u32) {
        if let Some(pt) = self.ports.get(port as usize) {
            prefetch(pt);
        }
    }
}

impl Conn {
    /// [`prefetch`] what an ACK or a write reads: the sender's hot part, the cursors,
    /// the queue of blocked writes and the dropped ranges.
    pub(super) fn prefetch_server_end(&self) {
        prefetch_head(&self.sender, Sender::HOT_BYTES);
        prefetch(&self.msgs);
        prefetch(&self.dropped);
        self.pad.prefetch();
    }

    /// [`prefetch`] what a data segment reads at the client: the cursors, the receiver.
    pub(super) fn prefetch_client_end(&self) {
        prefetch(&self.msgs);
        prefetch_all(&self.receiver);
    }
}

/// Hint the CPU to load the cache line holding the start of `x` (no effect on results).
#[inline(always)]
fn prefetch<T>(x: &T) {
    prefetch_line((x as *const T).cast());
}

/// [`prefetch`] every cache line `x` overlaps.
#[inline(always)]
pub(super) fn prefetch_all<T>(x: &T) {
    prefetch_head(x, std::mem::size_of::<T>());
}

/// [`prefetch`] every cache line the first `bytes` of `x` overlap.
#[inline(always)]
fn prefetch_head<T>(x: &T, bytes: usize) {
    let start = (x as *const T).cast::<u8>();
    let first = start as usize & !63;
    let last = (start as usize + bytes - 1) & !63;
    for line in (first..=last).step_by(64) {
        prefetch_line(start.wrapping_add(line.wrapping_sub(start as usize)));
    }
}

#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address, and neither reads nor
    // writes memory architecturally.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

//! The exact per-packet RTT of data packets (`packet_rtt`, docs/records.md): for each
//! first transmission of a data segment, the time from the server's transmission to the
//! arrival back at the server of the first ACK whose cumulative acknowledgment covers
//! the segment's last byte. Retransmissions get no row of their own; a row whose bytes
//! were retransmitted before that ACK is flagged (`retx = 1`): its RTT holds the loss
//! recovery, and a passive monitor following Karn's rule would not time it.
//!
//! Kept apart from the connections (only the middlebox topology, or `records.packet_rtt`,
//! pays for it), and it labels each row with the application, the kind and the source's
//! flow of the write holding the segment's first byte: the truth a capture of the run
//! (`records.pcap`) is analysed against.

use std::collections::VecDeque;

use super::NONE;
use crate::records::PacketRtt;
use thinwan_proto::traffic::{App, Kind};
use thinwan_proto::Instant;

/// Per-connection state and the rows so far.
pub(super) struct RttLog {
    /// Per connection: first transmissions not yet covered by a cumulative ACK, in
    /// sequence order: (end offset, row in `rows`, t_tx).
    pending: Vec<VecDeque<(u64, u32, Instant)>>,
    /// Per connection: (first message index, app) at each change of application.
    apps: Vec<Vec<(u32, App)>>,
    /// Per connection: the application of its latest first transmission (the type of
    /// what crosses the network now: the QDS oracle's truth).
    last: Vec<App>,
    /// Per connection: the message index of each flow's first write, in order.
    flow_starts: Vec<Vec<u32>>,
    pub(super) rows: PacketRtt,
}

impl RttLog {
    pub(super) fn new(conns: usize) -> Self {
        RttLog {
            pending: vec![VecDeque::new(); conns],
            apps: vec![Vec::new(); conns],
            last: vec![App::default(); conns],
            flow_starts: vec![Vec::new(); conns],
            rows: PacketRtt::default(),
        }
    }

    /// Message `index` of `conn` was written by `app`.
    #[cold] // off the dumbbell's hot paths: only middlebox and packet_rtt runs call it
    #[inline(never)]
    pub(super) fn note_app(&mut self, conn: u32, index: usize, app: App) {
        let a = &mut self.apps[conn as usize];
        if a.last().map(|&(_, x)| x) != Some(app) {
            a.push((index as u32, app));
        }
    }

    /// Message `index` of `conn` is written now; `starts_flow`: it is the first write of
    /// a flow of its source.
    #[cold] // off the dumbbell's hot paths: only middlebox and packet_rtt runs call it
    #[inline(never)]
    pub(super) fn note_write(&mut self, conn: u32, index: usize, starts_flow: bool) {
        let f = &mut self.flow_starts[conn as usize];
        if starts_flow || f.is_empty() {
            f.push(index as u32);
        }
    }

    /// The source's flow (counted per connection from 0) of message `index` of `conn`.
    fn flow_of(&self, conn: u32, index: usize) -> u32 {
        let f = &self.flow_starts[conn as usize];
        f.partition_point(|&first| first as usize <= index).checked_sub(1).map_or(u32::MAX, |k| k as u32)
    }

    /// The application of message `index` of `conn`.
    pub(super) fn app_of(&self, conn: u32, index: usize) -> App {
        let a = &self.apps[conn as usize];
        let i = a.partition_point(|&(first, _)| first as usize <= index);
        a[..i].last().map_or(App::ThinClient, |&(_, app)| app)
    }

    /// The application of `conn`'s latest first transmission.
    pub(super) fn last_app(&self, conn: u32) -> App {
        self.last[conn as usize]
    }

    /// A data segment `[seq, end)` left the server at `now`; `(index, kind)`: the
    /// message holding its first byte and its kind.
    #[cold] // off the dumbbell's hot paths: only middlebox and packet_rtt runs call it
    #[inline(never)]
    pub(super) fn on_transmit(
        &mut self,
        conn: u32,
        seq: u64,
        end: u64,
        retx: bool,
        (index, kind): (usize, Kind),
        now: Instant,
    ) {
        if retx {
            // Flag the first transmissions whose bytes this one repeats.
            for &(e, row, _) in self.pending[conn as usize].iter() {
                if e > seq && e - (self.rows.bytes[row as usize] as u64) < end {
                    self.rows.retx[row as usize] = 1;
                }
                if e >= end {
                    break;
                }
            }
            return;
        }
        let row = self.rows.conn.len() as u32;
        let app = self.app_of(conn, index);
        let flow = self.flow_of(conn, index);
        self.last[conn as usize] = app;
        let r = &mut self.rows;
        r.conn.push(conn);
        r.app.push(app as u8);
        r.t_tx.push(now.as_secs_f64());
        r.rtt.push(f64::NAN);
        r.bytes.push((end - seq) as u32);
        r.retx.push(0);
        r.seq.push(seq);
        r.kind.push(kind as u8);
        r.flow.push(flow);
        self.pending[conn as usize].push_back((end, row, now));
    }

    /// An ACK of `conn` with cumulative acknowledgment `una` reached the server at `now`.
    #[cold] // off the dumbbell's hot paths: only middlebox and packet_rtt runs call it
    #[inline(never)]
    pub(super) fn on_ack(&mut self, conn: u32, una: u64, now: Instant) {
        let pending = &mut self.pending[conn as usize];
        while let Some(&(end, row, t_tx)) = pending.front() {
            if end > una {
                break;
            }
            debug_assert!(t_tx != NONE);
            self.rows.rtt[row as usize] = (now - t_tx).as_secs_f64();
            pending.pop_front();
        }
    }
}

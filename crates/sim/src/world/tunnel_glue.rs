//! The tunnel's glue to the world (mux topology in mux mode, [`crate::tunnel`]): server
//! writes into the core's session, the session's frames onto trunk lanes, the edge's
//! bytes onto last hops, and the trunk's stamps onto the streams' message rows.

use super::*;
use crate::tunnel::Path;

impl World {
    /// Whether pair `pair`'s writes bypass the tunnel (shedding, `mux.shed`). The first
    /// write opens the stream: the edge decides then, once ([`Tunnel::decide_shed`]).
    pub(super) fn takes_direct_path(&mut self, pair: u32) -> bool {
        match self.tunnel.as_ref().expect("mux mode").path(pair) {
            Path::Tunnel => false,
            Path::Direct => true,
            Path::Undecided => {
                let loss = self.trunk_loss();
                let shed = self.tunnel.as_mut().expect("mux mode").decide_shed(pair, loss);
                if shed {
                    self.go_direct(pair);
                    // The edge's reset of the unused stream leaves on the trunk.
                    self.pump(true);
                }
                shed
            }
        }
    }

    /// The trunk's packet loss as the edge measures it on its own trunk sockets (the
    /// reverse connections, whose senders it is; `tcp_info` in the daemon):
    /// retransmitted ÷ sent payload bytes since the start, 0 before anything was sent.
    /// The edge's frames are small and alike, so the byte ratio is the segment ratio
    /// the daemon reads (`tcpi_total_retrans ÷ tcpi_data_segs_out`).
    fn trunk_loss(&self) -> f64 {
        let tn = self.tunnel.as_ref().expect("mux mode");
        let (mut retx, mut sent) = (0u64, 0u64);
        for lane in 0..tn.lanes as u16 {
            let st = self.conns[tn.conn_of(true, lane) as usize].sender.stats();
            retx += st.bytes_retransmitted;
            sent += st.bytes_sent;
        }
        if sent == 0 {
            0.0
        } else {
            retx as f64 / sent as f64
        }
    }

    /// Pair `pair`'s connection, until now its last hop edge → client, becomes a direct
    /// connection server → client across the WAN, as in `mux.mode = "direct"`. It has
    /// carried nothing yet (this is the stream's first write).
    fn go_direct(&mut self, pair: u32) {
        let conn = self.pairs[pair as usize].conns[0];
        // build.rs gives pair i the ports base..base+4 (server NIC, R2 → client, client
        // NIC, R1 → server); its last hop uses base+1 and base+2.
        let base = self.routes.port(conn, 0, 0) - 1;
        self.routes.set(conn, [[base, 0, base + 1], [base + 2, 1, base + 3]]);
        let c = &mut self.conns[conn as usize];
        debug_assert!(c.msgs.is_empty() && c.blocked.is_empty(), "a shed stream starts fresh");
        c.relay = false;
        c.role = ROLE_SHED;
        if let Some(tap) = &mut self.pcap {
            tap.shed(conn, pair);
        }
    }

    /// A server's write goes into the core's session; its message row is made on the
    /// stream's last hop at once, at its offset in the stream.
    pub(super) fn tunnel_write(&mut self, pair: u32, w: Write) {
        let tn = self.tunnel.as_mut().expect("mux mode");
        tn.server_write(pair, w.bytes as u64, self.now);
        let end = tn.written[pair as usize];
        let last_hop = self.pairs[pair as usize].conns[0];
        self.conns[last_hop as usize].msgs.push(Msg::new(end, w));
        self.pump(false);
    }

    /// Let one end of the tunnel act: handle its session's events, write frames on each
    /// of its lanes while the socket has fewer than TCP_NOTSENT_LOWAT bytes unsent (so
    /// the session, not the socket, decides the order), and re-arm its timer.
    pub(super) fn pump(&mut self, edge: bool) {
        self.tunnel_events(edge);
        let now = self.now;
        let mut spans = Vec::new();
        let (lanes, lowat) = {
            let tn = self.tunnel.as_ref().expect("mux mode");
            (tn.lanes as u16, tn.notsent_lowat)
        };
        for lane in 0..lanes {
            let conn = self.tunnel.as_ref().expect("mux mode").conn_of(edge, lane);
            loop {
                // Frames the socket has not taken yet go in first, as far as its send
                // buffer allows (a partial write).
                let tn = self.tunnel.as_mut().expect("mux mode");
                let s = &mut self.conns[conn as usize].sender;
                let unwritten = tn.unwritten(conn);
                let take = (*unwritten).min(s.buffer_space());
                *unwritten -= take;
                if take > 0 {
                    s.write(take);
                    self.transmit(conn);
                }
                let tn = self.tunnel.as_mut().expect("mux mode");
                let s = &self.conns[conn as usize].sender;
                if *tn.unwritten(conn) > 0
                    || s.write_end() - s.snd_max() >= lowat
                    || !tn.end(edge).session.wants_transmit(lane)
                {
                    break;
                }
                spans.clear();
                let n = tn.poll_transmit(edge, lane, now, &mut spans) as u64;
                if n == 0 {
                    break;
                }
                let start = s.write_end();
                *tn.unwritten(conn) = n;
                for &(end, span) in &spans {
                    // A frame counts as interactive if the write holding its last byte is.
                    let stream_msgs = &self.conns[self.pairs[span.pair as usize].conns[0] as usize].msgs;
                    let i = stream_msgs.partition_point(|m| m.end() < span.stream_end);
                    let kind = stream_msgs.get(i).map_or(Kind::Interactive, |m| m.kind());
                    let c = &mut self.conns[conn as usize];
                    c.msgs.push(Msg::new(
                        start + end,
                        Write { at: now, bytes: span.bytes, kind, app: App::ThinClient },
                    ));
                    c.frames.push(span);
                }
            }
        }
        let end = self.tunnel.as_mut().expect("mux mode").end(edge);
        if let Some(d) = end.session.poll_timeout() {
            // A deadline already past (an adaptive session's move or measurement timer
            // can be) means "act now": an event scheduled before `now` would turn the
            // simulation's clock back, and every event after it would run out of order.
            let d = d.max(now);
            if d < end.armed {
                end.armed = d;
                self.events.push(d, Event::MuxTimer { edge });
            }
        }
    }

    fn tunnel_events(&mut self, edge: bool) {
        let now = self.now;
        loop {
            let tn = self.tunnel.as_mut().expect("mux mode");
            let Some(ev) = tn.end(edge).session.poll_event() else { return };
            match ev {
                // Bytes for a client: the edge writes them on the stream's last hop.
                MuxEvent::Data { id, bytes } => {
                    let pair = tn.pair_of(id).expect("every stream belongs to a pair");
                    let conn = self.pairs[pair as usize].conns[0];
                    let w = Write {
                        at: now,
                        bytes: bytes.len() as u32,
                        kind: Kind::Interactive,
                        app: App::ThinClient,
                    };
                    self.conns[conn as usize].blocked.push_back(Pending { w, tag: Tag::Relay });
                    self.flush_writes(conn);
                    self.transmit(conn);
                }
                // The core's stream buffer has room for the server's waiting bytes.
                MuxEvent::Writable { id } => {
                    if let Some(pair) = tn.pair_of(id) {
                        tn.feed(pair, now);
                    }
                }
                // The daemons log lane reports; a simulation's results do not carry them.
                MuxEvent::LaneUp { .. } | MuxEvent::LaneReport { .. } => {}
                // The core learns that the edge shed a stream (its unused session stream).
                MuxEvent::Reset { id, remote: true, .. }
                    if !edge && tn.pair_of(id).is_some_and(|p| tn.path(p) == Path::Direct) => {}
                // Adaptive lanes: the edge dials a lane either side wants; the core's
                // end answers the Hello when it crosses the trunk (this pump writes the edge's).
                MuxEvent::ConnectLane { lane } => {
                    tn.connect_lane(lane, now);
                }
                // The held rule's sessions closed an unwanted lane by their handshake.
                MuxEvent::LaneClosed { lane } if edge => tn.close_lane(lane, now),
                // Simulated trunks never fail and streams never close during a run.
                other => panic!("tunnel: unexpected session event {other:?}"),
            }
        }
    }

    pub(super) fn on_mux_timer(&mut self, edge: bool, at: Instant) {
        let end = self.tunnel.as_mut().expect("mux mode").end(edge);
        if end.armed != at {
            return; // superseded by an earlier re-arm
        }
        end.armed = NONE;
        end.session.handle_timeout(self.now);
        self.pump(edge);
    }

    /// The edge read data frames `from..to` of forward trunk `conn`: their stream
    /// bytes' messages take the trunk's transmission stamps (of the frame holding
    /// each message's last byte).
    pub(super) fn copy_trunk_stamps(&mut self, conn: u32, from: usize, to: usize) {
        let tn = self.tunnel.as_mut().expect("mux mode");
        for f in from..to {
            let (frame, span) = (self.conns[conn as usize].msgs[f], self.conns[conn as usize].frames[f]);
            let cursor = &mut tn.stamped[span.pair as usize];
            let msgs = &mut self.conns[self.pairs[span.pair as usize].conns[0] as usize].msgs;
            while *cursor < msgs.len() && msgs[*cursor].end() <= span.stream_end {
                let m = &mut msgs[*cursor];
                m.t_first_tx = frame.t_first_tx;
                m.t_tx = frame.t_tx;
                m.t_enq = frame.t_enq;
                m.t_deq = frame.t_deq;
                m.set_tx_count(frame.tx_count());
                *cursor += 1;
            }
        }
    }
}

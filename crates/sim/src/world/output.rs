//! Assembling the records of a finished run (docs/records.md).

use super::*;
use thinwan_proto::DropReason;

impl World {
    pub(super) fn finish(mut self) -> RunRecords {
        let mut out = std::mem::take(&mut self.out);
        out.events = self.events.processed();
        out.packets.in_flight = (self.slab.len() - self.free.len()) as u64;
        out.seed = self.seed;
        out.packet_rtt = self.rtt.take().map(|r| r.rows);
        out.qds = self.qds.take().map(|q| (q.flows, q.classes));
        out.pcap = self.pcap.take().map(|tap| tap.finish());
        // A trunk's messages are frames, not application writes: the stream's last-hop
        // connection has the row of each write (unread ones: t_arrive and t_read NaN).
        let is_write_row = |c: &Conn| c.role != ROLE_TRUNK && c.role != ROLE_TRUNK_REV;
        let total_msgs: usize = self.conns.iter().filter(|c| is_write_row(c)).map(|c| c.msgs.len()).sum();
        let m = &mut out.messages;
        for v in [
            &mut m.t_write,
            &mut m.t_first_tx,
            &mut m.t_tx,
            &mut m.t_enq,
            &mut m.t_deq,
            &mut m.t_arrive,
            &mut m.t_read,
        ] {
            v.reserve_exact(total_msgs);
        }
        let (mut overflow, mut pushed, mut lost, mut codel) = (0u64, 0u64, 0u64, 0u64);
        for (i, c) in self.conns.iter().enumerate() {
            let mut prev_end = 0;
            for msg in c.msgs.iter().filter(|_| is_write_row(c)) {
                m.conn.push(i as u32);
                m.pair.push(c.pair);
                m.kind.push(msg.kind() as u8);
                m.bytes.push((msg.end() - prev_end) as u32);
                prev_end = msg.end();
                m.t_write.push(secs(msg.t_write));
                m.t_first_tx.push(secs(msg.t_first_tx));
                m.t_tx.push(secs(msg.t_tx));
                m.t_enq.push(secs(msg.t_enq));
                m.t_deq.push(secs(msg.t_deq));
                m.t_arrive.push(secs(msg.t_arrive));
                m.t_read.push(secs(msg.t_read));
                m.retx.push(msg.tx_count().saturating_sub(1) as u16);
            }
            let st = c.sender.stats();
            let k = &mut out.connections;
            k.conn.push(i as u32);
            k.pair.push(c.pair);
            k.timeouts.push(st.timeouts as u32);
            k.spurious_timeouts.push(c.spurious_timeouts);
            k.fast_retransmits.push(st.fast_retransmits as u32);
            k.sack_recoveries.push(st.sack_recoveries as u32);
            k.bytes_written.push(c.sender.write_end());
            // The application reads in-order bytes as they arrive, from byte 0.
            k.bytes_delivered.push(c.receiver.rcv_nxt());
            k.bytes_sent.push(st.bytes_sent);
            k.bytes_retransmitted.push(st.bytes_retransmitted);
            k.segments_sent.push(st.segments_sent);
            k.tlp_probes.push(st.tlp_probes as u32);
            k.rack_marked_lost.push(st.rack_marked_lost as u32);
            k.rto_resets.push(st.rto_resets as u32);
            k.retransmit_episodes.push(st.retransmit_episodes as u32);
            k.ecn_reductions.push(st.ecn_reductions as u32);
            k.writes_waited.push(c.writes_waited);
            k.writes_blocked.push(c.writes_waited);
            k.role.push(c.role);
        }
        for (link, p) in self.ports.iter().zip(&self.queues) {
            let s = p.queue.stats();
            overflow += s.drops_overflow;
            pushed += s.drops_pushed_out;
            codel += s.drops_codel;
            lost += p.drops_loss;
            if !link.wan {
                continue;
            }
            let r = &mut out.ports;
            r.port.push(p.name.to_string());
            r.rate_bps.push(p.rate_bps as f64);
            r.window_s.push(self.cfg.scenario.duration_s);
            r.bytes_tx.push(p.bytes_tx);
            r.bytes_tx_interactive.push(p.bytes_tx_interactive);
            r.packets_tx.push(p.packets_tx);
            r.drops_overflow.push(s.drops_overflow);
            r.drops_loss.push(p.drops_loss);
            r.max_queue_bytes.push(s.max_bytes);
            r.marks_ce.push(s.marks_ce);
        }
        out.drops_by_reason = vec![
            ("overflow".into(), overflow),
            ("pushed_out".into(), pushed),
            ("loss".into(), lost),
            (DropReason::Codel.as_str().into(), codel),
        ];
        out
    }
}

fn secs(t: Instant) -> f64 {
    if t == NONE {
        f64::NAN
    } else {
        t.as_secs_f64()
    }
}

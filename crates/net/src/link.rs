//! One direction of the emulated link, sans-IO: packets and `now` in, due packets and
//! log events out (STYLE.md §1). The real-clock driver is [`crate::emulator`]; the tests
//! below run it on virtual time.
//!
//! A packet's path (every step is one [`Event`]):
//!
//! ```text
//! arrival ─▶ queue discipline ─▶ serialisation at `rate` ─▶ loss ─▶ delay (+jitter) ─▶ delivery
//!            (enqueue | drop:overflow)   (dequeue = end of tx)   (drop:loss)
//! ```
//!
//! Serialisation is scheduled on ideal times: a transmission starts at
//! `max(previous end, arrival)`, never at the (late) instant the driver happened to
//! wake up, so the rate is exact however the OS schedules us. Random loss acts after
//! serialisation (a corrupted frame still used the link). Without `reorder`, a
//! packet's due time is at least its predecessor's, so jitter never reorders.
//!
//! ```
//! use thinwan_net::{config::DirConfig, link::Direction};
//! use thinwan_proto::{link::LinkDir, Duration, Instant};
//! let cfg = DirConfig { rate_bps: 10_000_000, delay_ms: 20.0, ..Default::default() };
//! let mut d = Direction::new(&cfg, 1, LinkDir::Fwd).expect("a valid configuration");
//! let (mut events, mut out) = (Vec::new(), Vec::new());
//! let ip = [0x45, 0, 0, 20, 0, 0, 0, 0, 64, 253, 0, 0, 198, 18, 1, 1, 198, 18, 2, 1];
//! d.arrive(Instant::ZERO, ip.to_vec(), &mut events);
//! let due = d.poll_timeout().unwrap(); // end of serialisation: 16 µs
//! d.handle_timeout(due, &mut out, &mut events);
//! let due = d.poll_timeout().unwrap(); // + 20 ms propagation
//! d.handle_timeout(due, &mut out, &mut events);
//! assert_eq!(out[0].due, Instant::ZERO + Duration::from_micros(16) + Duration::from_millis(20));
//! ```

use crate::config::{ConfigError, DirConfig};
use crate::packet::{self, Summary};
use crate::pairs::PairDelays;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use thinwan_proto::link::{Impairment, LinkDir};
use thinwan_proto::qdisc::{ClassControl, Dropped, QueueDisc, QueueItem};
use thinwan_proto::{DropReason, Duration, Instant};

/// A packet inside the emulator.
#[derive(Debug)]
pub struct Packet {
    /// Arrival number within its direction (joins the events of one packet).
    pub id: u64,
    /// The IP packet.
    pub data: Vec<u8>,
    /// Its parsed headers.
    pub hdr: Summary,
    /// Bytes it occupies on the link (IP length + configured overhead).
    pub wire: u32,
    /// When it arrived (a transmission never starts earlier).
    pub arrived: Instant,
}

impl QueueItem for Packet {
    fn wire_len(&self) -> u32 {
        self.wire
    }
    /// Real packets carry no interactive/bulk label; the label classifier reads the
    /// DSCP instead: any nonzero codepoint is interactive (the pump marks CS4,
    /// [`crate::config::INTERACTIVE_TOS`]). ECN bits are ignored.
    fn is_interactive(&self) -> bool {
        self.hdr.dscp() != 0
    }
    /// The flow is the 5-tuple (protocol, addresses, ports), hashed.
    fn flow(&self) -> u64 {
        flow_id(&self.hdr)
    }
    /// The IP header's ECN field says ECT(0), ECT(1) or CE (RFC 3168 §5).
    fn ecn_capable(&self) -> bool {
        self.hdr.ecn_capable()
    }
    /// Set CE in the packet's bytes (IPv4: header checksum updated by RFC 1624 eqn. 3;
    /// [`packet::set_ce`]) and in its parsed header, so the event log's dequeue and
    /// delivery records carry the mark.
    fn mark_ce(&mut self) {
        // Only parsed IPv4/IPv6 packets are queued, so `set_ce` finds its header; on the
        // impossible error the packet goes out unmarked rather than corrupted.
        if let Ok(tos) = packet::set_ce(&mut self.data) {
            self.hdr.tos = tos;
        }
    }
}

/// A 64-bit id of a packet's 5-tuple (`DefaultHasher::new()` has fixed keys, so the
/// id is the same for every packet of a flow; it is never stored).
pub fn flow_id(h: &Summary) -> u64 {
    tuple_id(h.proto, h.src, h.dst, h.sport, h.dport)
}

/// The [`flow_id`] of the `fwd` (server → client) packets of TCP connection `key`: the
/// id under which the QDS loop files the flow into a class. Addresses as [`Summary`]
/// holds them (IPv6 by their last 32 bits), so the two always agree.
pub fn fwd_flow_id(key: &thinwan_capture::FlowKey) -> u64 {
    use crate::qds::log::addr32;
    let tcp = etherparse::IpNumber::TCP.0;
    tuple_id(tcp, addr32(key.server.ip()), addr32(key.client.ip()), key.server.port(), key.client.port())
}

fn tuple_id(proto: u8, src: u32, dst: u32, sport: u16, dport: u16) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut s = std::collections::hash_map::DefaultHasher::new();
    (proto, src, dst, sport, dport).hash(&mut s);
    s.finish()
}

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EventKind {
    /// Read from the input device.
    Arrival = 0,
    /// Accepted by the queue discipline.
    Enqueue = 1,
    /// Left the link port: end of its serialisation (records' `t_deq`).
    Dequeue = 2,
    /// Dropped; see [`Event::reason`].
    Drop = 3,
    /// Written to the output device (records' `t_arrive`).
    Deliver = 4,
}

/// One log record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// When.
    pub t: Instant,
    /// What.
    pub kind: EventKind,
    /// Why (drops only; the log's code 0 is "not a drop").
    pub reason: Option<DropReason>,
    /// Packet number within the direction.
    pub pkt: u64,
    /// Its headers (zero for malformed frames, except `ip_len` = frame length).
    pub hdr: Summary,
    /// Queue backlog after the event, bytes.
    pub q_bytes: u64,
    /// Queue backlog after the event, packets.
    pub q_pkts: u64,
    /// For deliveries: the due time (so `t − due` is the emulator's own lateness).
    pub due: Instant,
}

/// A packet whose propagation delay has elapsed: write it out.
#[derive(Debug)]
pub struct Delivery {
    /// The packet.
    pub packet: Packet,
    /// When it was due.
    pub due: Instant,
}

/// Counters of one direction.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DirStats {
    /// Frames read.
    pub arrivals: u64,
    /// Bytes read.
    pub arrival_bytes: u64,
    /// Frames that were not IP packets (dropped).
    pub malformed: u64,
    /// Accepted by the queue.
    pub enqueued: u64,
    /// Queue overflow drops.
    pub drops_overflow: u64,
    /// Pushed-out drops.
    pub drops_pushed_out: u64,
    /// CoDel's head drops (FQ-CoDel, the classes' CoDel).
    pub drops_codel: u64,
    /// Packets CoDel marked CE instead of dropping (`queue.ecn`; RFC 8290 §5.2.7).
    pub marks_ce: u64,
    /// I.i.d. loss drops.
    pub drops_loss: u64,
    /// Gilbert–Elliott drops.
    pub drops_burst_loss: u64,
    /// Serialised packets.
    pub dequeued: u64,
    /// Serialised wire bytes.
    pub bytes_tx: u64,
    /// Written to the output device.
    pub delivered: u64,
    /// Bytes written.
    pub delivered_bytes: u64,
    /// Writes that failed.
    pub write_errors: u64,
    /// Largest queue backlog, bytes.
    pub max_queue_bytes: u64,
    /// Largest queue backlog, packets.
    pub max_queue_packets: u64,
}

/// One direction of the link.
pub struct Direction {
    rate_bps: u64,
    delay: Duration,
    /// Each pair's client delay on top of `delay` (thinwan-link's `pairs`).
    pair_delays: Option<PairDelays>,
    overhead: u32,
    queue: Box<dyn QueueDisc<Packet> + Send>,
    /// Loss and jitter, on the simulator's random stream of the same direction.
    impair: Impairment,
    /// The packet being serialised and the end of its transmission.
    on_wire: Option<(Instant, Packet)>,
    /// When the link is next free (end of the last transmission).
    free_at: Instant,
    /// The link is idle with packets queued that the discipline holds back (a shaped
    /// class waiting for tokens): try again then ([`QueueDisc::next_ready`]).
    wake: Option<Instant>,
    /// Packets in flight, by (due, sequence): a min-heap.
    line: BinaryHeap<Reverse<(Instant, u64, PacketBox)>>,
    line_seq: u64,
    next_id: u64,
    drops: Vec<Dropped<Packet>>,
    stats: DirStats,
}

impl Direction {
    /// Direction `dir` configured by `cfg`, its loss and jitter drawn from the random
    /// stream of `dir` in a link seeded `seed` (`thinwan_proto::link`, docs/model.md).
    pub fn new(cfg: &DirConfig, seed: u64, dir: LinkDir) -> Result<Self, ConfigError> {
        Ok(Direction {
            rate_bps: cfg.rate_bps,
            delay: cfg.delay(),
            pair_delays: None,
            overhead: cfg.overhead_bytes,
            queue: cfg.queue_spec()?.build(cfg.rate_bps),
            impair: cfg.impairment(seed, dir)?,
            on_wire: None,
            free_at: Instant::ZERO,
            wake: None,
            line: BinaryHeap::new(),
            line_seq: 0,
            next_id: 0,
            drops: Vec::new(),
            stats: DirStats::default(),
        })
    }

    /// Add each pair's client delay to its packets' propagation delay ([`PairDelays`]).
    /// Loss, jitter and the no-reordering rule act on the link's own `delay` first; the
    /// pair's delay follows, as on the client's own link: packets of different pairs
    /// may overtake each other, those of one pair never do.
    pub fn with_pair_delays(mut self, delays: Option<PairDelays>) -> Self {
        self.pair_delays = delays;
        self
    }

    /// A frame read from the input device at `now`.
    pub fn arrive(&mut self, now: Instant, data: Vec<u8>, events: &mut Vec<Event>) {
        let id = self.next_id;
        self.next_id += 1;
        self.stats.arrivals += 1;
        self.stats.arrival_bytes += data.len() as u64;
        let Ok(hdr) = packet::parse(&data) else {
            self.stats.malformed += 1;
            let hdr = Summary { ip_len: data.len().min(u16::MAX as usize) as u16, ..Summary::default() };
            events.push(self.event(
                now,
                EventKind::Drop,
                Some(DropReason::Malformed),
                id,
                hdr,
                Instant::ZERO,
            ));
            return;
        };
        events.push(self.event(now, EventKind::Arrival, None, id, hdr, Instant::ZERO));
        let wire = (data.len() as u32).saturating_add(self.overhead);
        self.queue.enqueue(now, Packet { id, data, hdr, wire, arrived: now }, &mut self.drops);
        let dropped_itself = self.drops.iter().any(|d| d.packet.id == id);
        if !dropped_itself {
            self.stats.enqueued += 1;
            events.push(self.event(now, EventKind::Enqueue, None, id, hdr, Instant::ZERO));
        }
        self.flush_queue_drops(now, events);
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queue.backlog_bytes());
        self.stats.max_queue_packets = self.stats.max_queue_packets.max(self.queue.backlog_packets() as u64);
        if self.on_wire.is_none() {
            self.start_tx(now.max(self.free_at), events);
        }
    }

    /// The next instant at which [`Direction::handle_timeout`] has work, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let tx = self.on_wire.as_ref().map(|(end, _)| *end).or(self.wake);
        let line = self.line.peek().map(|Reverse((due, _, _))| *due);
        match (tx, line) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Advance to `now`: finish transmissions, apply loss, and move every packet whose
    /// delay has elapsed to `out` (in due order).
    pub fn handle_timeout(&mut self, now: Instant, out: &mut Vec<Delivery>, events: &mut Vec<Event>) {
        while let Some(end) = self.on_wire.as_ref().map(|(end, _)| *end).filter(|&end| end <= now) {
            let Some((_, p)) = self.on_wire.take() else { break };
            self.finish_tx(end, p, events);
            self.start_tx(end, events);
        }
        if let Some(at) = self.wake.filter(|&at| at <= now && self.on_wire.is_none()) {
            self.start_tx(at, events);
            // A packet started at `at` may already have finished by `now`.
            while let Some(end) = self.on_wire.as_ref().map(|(end, _)| *end).filter(|&end| end <= now) {
                let Some((_, p)) = self.on_wire.take() else { break };
                self.finish_tx(end, p, events);
                self.start_tx(end, events);
            }
        }
        while let Some(Reverse((due, _, _))) = self.line.peek() {
            if *due > now {
                break;
            }
            let Some(Reverse((due, _, PacketBox(packet)))) = self.line.pop() else { break };
            out.push(Delivery { packet, due });
        }
    }

    /// Log a delivery (or its failure) written at `now`.
    pub fn delivered(&mut self, now: Instant, d: &Delivery, ok: bool, events: &mut Vec<Event>) {
        let (kind, reason) = if ok {
            self.stats.delivered += 1;
            self.stats.delivered_bytes += d.packet.data.len() as u64;
            (EventKind::Deliver, None)
        } else {
            self.stats.write_errors += 1;
            (EventKind::Drop, Some(DropReason::WriteError))
        };
        events.push(self.event(now, kind, reason, d.packet.id, d.packet.hdr, d.due));
    }

    /// Change the class scheduler's rates or filters at `now` (a QDS controller):
    /// `f` gets its [`ClassControl`]; afterwards an idle link that was waiting for
    /// tokens tries again at once, since the new rates may let a class send sooner.
    /// None (and `f` not called) when the discipline has no classes.
    pub fn with_classes<R>(
        &mut self,
        now: Instant,
        events: &mut Vec<Event>,
        f: impl FnOnce(&mut dyn ClassControl) -> R,
    ) -> Option<R> {
        let r = f(self.queue.classes()?);
        if self.on_wire.is_none() && self.queue.backlog_packets() > 0 {
            self.start_tx(now.max(self.free_at), events);
        }
        Some(r)
    }

    /// Packets still inside (queued, on the wire, propagating).
    pub fn in_flight(&self) -> usize {
        self.queue.backlog_packets() + self.on_wire.is_some() as usize + self.line.len()
    }

    /// Counters.
    pub fn stats(&self) -> &DirStats {
        &self.stats
    }

    fn start_tx(&mut self, at: Instant, events: &mut Vec<Event>) {
        debug_assert!(self.on_wire.is_none());
        let next = self.queue.dequeue(at);
        // CoDel marks at dequeue too; the queue counts them.
        self.stats.marks_ce = self.queue.stats().marks_ce;
        // CoDel drops at dequeue (RFC 8289 §5.5): log them at the dequeue time.
        self.queue.take_drops(&mut self.drops);
        self.flush_queue_drops(at, events);
        self.wake = None;
        let Some(p) = next else {
            if self.queue.backlog_packets() > 0 {
                self.wake = self.queue.next_ready(at);
            }
            return;
        };
        // A driver that woke up late may hand us an arrival after a transmission's end
        // time it has not processed yet; the next one still cannot start before it.
        let at = at.max(p.arrived);
        let end = at + Duration::transmission(p.wire as u64, self.rate_bps);
        let end = if self.rate_bps == 0 { at } else { end };
        self.free_at = end;
        self.on_wire = Some((end, p));
    }

    fn finish_tx(&mut self, end: Instant, p: Packet, events: &mut Vec<Event>) {
        self.stats.dequeued += 1;
        self.stats.bytes_tx += p.wire as u64;
        events.push(self.event(end, EventKind::Dequeue, None, p.id, p.hdr, Instant::ZERO));
        let due = match self.impair.transit(end, self.delay) {
            Ok(due) => due + self.pair_delays.as_ref().map_or(Duration::ZERO, |d| d.of(&p.hdr)),
            Err(reason) => {
                self.count_drop(reason);
                events.push(self.event(end, EventKind::Drop, Some(reason), p.id, p.hdr, Instant::ZERO));
                return;
            }
        };
        self.line_seq += 1;
        self.line.push(Reverse((due, self.line_seq, PacketBox(p))));
    }

    fn flush_queue_drops(&mut self, now: Instant, events: &mut Vec<Event>) {
        for d in std::mem::take(&mut self.drops) {
            self.count_drop(d.reason);
            let reason = Some(d.reason);
            events.push(self.event(now, EventKind::Drop, reason, d.packet.id, d.packet.hdr, Instant::ZERO));
        }
    }

    /// Count a drop of the queue or the link.
    fn count_drop(&mut self, reason: DropReason) {
        let counter = match reason {
            DropReason::Overflow => &mut self.stats.drops_overflow,
            DropReason::PushedOut => &mut self.stats.drops_pushed_out,
            DropReason::Codel => &mut self.stats.drops_codel,
            DropReason::Loss => &mut self.stats.drops_loss,
            DropReason::BurstLoss => &mut self.stats.drops_burst_loss,
            // The I/O's own drops are counted where they happen ([`Direction::arrive`],
            // [`Direction::delivered`], the emulator's shutdown).
            DropReason::Malformed | DropReason::WriteError | DropReason::Shutdown => return,
        };
        *counter += 1;
    }

    fn event(
        &self,
        t: Instant,
        kind: EventKind,
        reason: Option<DropReason>,
        pkt: u64,
        hdr: Summary,
        due: Instant,
    ) -> Event {
        Event {
            t,
            kind,
            reason,
            pkt,
            hdr,
            q_bytes: self.queue.backlog_bytes(),
            q_pkts: self.queue.backlog_packets() as u64,
            due,
        }
    }
}

/// A packet in the delay-line heap; ordering is by (due, sequence) only.
#[derive(Debug)]
struct PacketBox(Packet);
impl PartialEq for PacketBox {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for PacketBox {}
impl PartialOrd for PacketBox {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for PacketBox {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{GeConfig, QueueKeys};
    use crate::packet::tests::tcp_packet;
    use thinwan_proto::qdisc::{ClassifierName, DisciplineName};

    /// Run a direction on virtual time: `arrivals` are (time, payload bytes); returns
    /// (packet id, due, delivered) and all events.
    fn run(cfg: &DirConfig, arrivals: &[(Instant, usize)]) -> (Vec<(u64, Instant)>, Vec<Event>) {
        let frames: Vec<_> =
            arrivals.iter().enumerate().map(|(i, &(t, n))| (t, tcp_packet(i as u32, n))).collect();
        run_frames(cfg, &frames)
    }

    /// [`run`] with given frames.
    fn run_frames(cfg: &DirConfig, arrivals: &[(Instant, Vec<u8>)]) -> (Vec<(u64, Instant)>, Vec<Event>) {
        let (_, events, _) = run_packets(cfg, arrivals);
        let delivered =
            events.iter().filter(|e| e.kind == EventKind::Deliver).map(|e| (e.pkt, e.t)).collect();
        (delivered, events)
    }

    /// [`run_frames`], returning the delivered packets themselves and the counters.
    fn run_packets(cfg: &DirConfig, arrivals: &[(Instant, Vec<u8>)]) -> (Vec<Packet>, Vec<Event>, DirStats) {
        let mut d = Direction::new(cfg, 42, LinkDir::Fwd).expect("a valid configuration");
        let (mut events, mut out, mut packets) = (Vec::new(), Vec::new(), Vec::new());
        let mut i = 0;
        loop {
            let next_arrival = arrivals.get(i).map(|a| a.0);
            let next = match (next_arrival, d.poll_timeout()) {
                (Some(a), Some(t)) => a.min(t),
                (a, t) => match a.or(t) {
                    Some(x) => x,
                    None => break,
                },
            };
            if next_arrival == Some(next) {
                d.arrive(next, arrivals[i].1.clone(), &mut events);
                i += 1;
            }
            d.handle_timeout(next, &mut out, &mut events);
            for del in out.drain(..) {
                d.delivered(del.due, &del, true, &mut events);
                packets.push(del.packet);
            }
        }
        (packets, events, d.stats().clone())
    }

    fn ms(x: f64) -> Instant {
        Instant::from_secs_f64(x * 1e-3)
    }

    #[test]
    fn delay_line_and_rate() {
        // 1460 B payload + 40 B headers = 1500 B = 1.2 ms at 10 Mbit/s.
        let cfg = DirConfig { rate_bps: 10_000_000, delay_ms: 20.0, ..Default::default() };
        let arrivals: Vec<_> = (0..5).map(|_| (Instant::ZERO, 1460)).collect();
        let (out, events) = run(&cfg, &arrivals);
        let expect: Vec<_> = (0..5).map(|k| (k as u64, ms(1.2 * (k + 1) as f64 + 20.0))).collect();
        assert_eq!(out, expect);
        // Backlog after each enqueue: the first packet goes on the wire right after
        // its enqueue event, so the second also sees a backlog of one.
        let enq: Vec<_> = events.iter().filter(|e| e.kind == EventKind::Enqueue).map(|e| e.q_pkts).collect();
        assert_eq!(enq, vec![1, 1, 2, 3, 4]);
    }

    #[test]
    fn idle_link_does_not_bank_credit() {
        // A packet arriving long after the previous one still takes its full 1.2 ms.
        let cfg = DirConfig { rate_bps: 10_000_000, delay_ms: 0.0, ..Default::default() };
        let (out, _) = run(&cfg, &[(ms(0.0), 1460), (ms(50.0), 1460), (ms(50.1), 1460)]);
        assert_eq!(out, vec![(0, ms(1.2)), (1, ms(51.2)), (2, ms(52.4))]);
    }

    #[test]
    fn unshaped_is_pure_delay() {
        let cfg = DirConfig { delay_ms: 5.0, ..Default::default() };
        let (out, _) = run(&cfg, &[(ms(0.0), 1460), (ms(0.0), 1460), (ms(1.0), 10)]);
        assert_eq!(out, vec![(0, ms(5.0)), (1, ms(5.0)), (2, ms(6.0))]);
    }

    #[test]
    fn overflow_drops_are_logged_with_reason() {
        let cfg = DirConfig {
            rate_bps: 1_000_000,
            queue: QueueKeys { limit_packets: 2, ..Default::default() },
            ..Default::default()
        };
        let arrivals: Vec<_> = (0..6).map(|_| (Instant::ZERO, 1000)).collect();
        let (out, events) = run(&cfg, &arrivals);
        // One on the wire + 2 queued; the other 3 overflow.
        assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        let drops: Vec<_> =
            events.iter().filter(|e| e.kind == EventKind::Drop).map(|e| (e.pkt, e.reason)).collect();
        assert_eq!(
            drops,
            vec![
                (3, Some(DropReason::Overflow)),
                (4, Some(DropReason::Overflow)),
                (5, Some(DropReason::Overflow))
            ]
        );
    }

    #[test]
    fn jitter_without_reordering_keeps_order() {
        let cfg = DirConfig { delay_ms: 10.0, jitter: "uniform:50%".into(), ..Default::default() };
        // Arrivals 4 ms apart against ±5 ms of jitter: some would overtake.
        let arrivals: Vec<_> = (0..2000).map(|k| (Instant::from_nanos(k * 4_000_000), 100)).collect();
        let (out, _) = run(&cfg, &arrivals);
        assert_eq!(out.len(), 2000);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        // Delays really vary, and stay within [5 ms, 15 ms] + the ordering push-back.
        let delays: Vec<f64> =
            out.iter().map(|(id, t)| (*t - arrivals[*id as usize].0).as_secs_f64()).collect();
        let (lo, hi) = delays.iter().fold((1.0f64, 0.0f64), |(l, h), &d| (l.min(d), h.max(d)));
        assert!(lo >= 0.005 && hi <= 0.015 && hi - lo > 0.008, "{lo} {hi}");
    }

    #[test]
    fn jitter_with_reordering_reorders() {
        let cfg =
            DirConfig { delay_ms: 10.0, jitter: "uniform:50%".into(), reorder: true, ..Default::default() };
        let arrivals: Vec<_> = (0..500).map(|k| (Instant::from_nanos(k * 100_000), 100)).collect();
        let (out, _) = run(&cfg, &arrivals);
        assert_eq!(out.len(), 500);
        assert!(out.windows(2).any(|w| w[0].0 > w[1].0));
        assert!(out.windows(2).all(|w| w[0].1 <= w[1].1)); // delivered in due order
    }

    #[test]
    fn each_pair_gets_its_own_delay_and_may_overtake_another() {
        use crate::pairs::PairsConfig;
        // Unshaped, 1 ms of link delay; pair 0 (port 20000) 9 ms more, pair 1 2 ms more.
        let cfg = DirConfig { delay_ms: 1.0, ..Default::default() };
        let pairs = PairsConfig {
            server_port_base: 20000,
            count: 2,
            client_delays_ms: vec![9.0, 2.0],
            traffic: None,
        };
        let mut d =
            Direction::new(&cfg, 1, LinkDir::Fwd).unwrap().with_pair_delays(pairs.delays(LinkDir::Fwd));
        let (mut events, mut out) = (Vec::new(), Vec::new());
        // Pair 0's packet first, then pair 1's, then one of no pair.
        for (i, port) in [20000u16, 20001, 30000].into_iter().enumerate() {
            d.arrive(ms(i as f64 * 0.1), flow_packet(port, 100, 0), &mut events);
        }
        while let Some(t) = d.poll_timeout() {
            d.handle_timeout(t, &mut out, &mut events);
        }
        let due: Vec<(u16, Instant)> = out.iter().map(|x| (x.packet.hdr.sport, x.due)).collect();
        // In due order: no pair (1.2 ms), pair 1 (0.1 + 1 + 2), pair 0 (0 + 1 + 9).
        assert_eq!(due, vec![(30000, ms(1.2)), (20001, ms(3.1)), (20000, ms(10.0))]);
    }

    #[test]
    fn loss_is_seeded_and_logged() {
        let cfg = DirConfig { loss: 0.1, ..Default::default() };
        let arrivals: Vec<_> = (0..5000).map(|k| (Instant::from_nanos(k * 1000), 100)).collect();
        let (a, ev) = run(&cfg, &arrivals);
        let (b, _) = run(&cfg, &arrivals);
        assert_eq!(a, b);
        let lost = ev.iter().filter(|e| e.reason == Some(DropReason::Loss)).count();
        assert_eq!(lost + a.len(), 5000);
        assert!((lost as f64 / 5000.0 - 0.1).abs() < 0.02);
        let ge = DirConfig {
            ge: Some(GeConfig { p: 0.05, r: 0.5, loss_good: 0.0, loss_bad: 1.0 }),
            ..Default::default()
        };
        let (_, ev) = run(&ge, &arrivals);
        assert!(ev.iter().any(|e| e.reason == Some(DropReason::BurstLoss)));
    }

    /// A TCP packet of flow `sport` with `payload` bytes and TOS byte `tos` (its IPv4
    /// header checksum valid, as Linux's receiver wants it).
    fn flow_packet(sport: u16, payload: usize, tos: u8) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ipv4([198, 18, 1, 1], [198, 18, 2, 1], 64)
            .tcp(sport, 5001, 1, 65535)
            .ack(1);
        let mut out = Vec::with_capacity(b.size(payload));
        b.write(&mut out, &vec![0u8; payload]).expect("writing to a Vec cannot fail");
        out[1] = tos;
        let sum = etherparse::Ipv4HeaderSlice::from_slice(&out).expect("an IPv4 header").to_header();
        out[10..12].copy_from_slice(&sum.calc_header_checksum().to_be_bytes());
        out
    }

    /// The IPv4 header of `p` verifies: its checksum is the one computed from scratch.
    fn checksum_verifies(p: &[u8]) -> bool {
        let h = etherparse::Ipv4HeaderSlice::from_slice(p).expect("an IPv4 header");
        h.header_checksum() == h.to_header().calc_header_checksum()
    }

    /// One flow of 300 packets of 1000 bytes at once into a 1-Mbit/s FQ-CoDel (2.4 s of
    /// queue), so CoDel's control law fires many times; ECN on in the queue.
    fn codel_with_ecn(tos: u8) -> (Vec<Packet>, Vec<Event>, DirStats) {
        let queue = QueueKeys { discipline: DisciplineName::FqCodel, ecn: true, ..Default::default() };
        let cfg = DirConfig { rate_bps: 1_000_000, queue, ..Default::default() };
        let frames: Vec<_> = (0..300).map(|_| (ms(0.0), flow_packet(1, 1000, tos))).collect();
        run_packets(&cfg, &frames)
    }

    #[test]
    fn codel_with_ecn_marks_ect_packets_ce_instead_of_dropping_them() {
        use crate::packet::ecn;
        let (out, events, stats) = codel_with_ecn(0x80 | ecn::ECT0);
        // RFC 8290 §5.2.7: where CoDel would drop an ECN-capable packet it marks it.
        assert_eq!(out.len(), 300, "every ECT(0) packet delivered");
        assert_eq!(stats.drops_codel, 0);
        assert!(stats.marks_ce > 0, "CoDel marked");
        let marked: Vec<_> = out.iter().filter(|p| p.hdr.ecn() == ecn::CE).collect();
        assert_eq!(marked.len() as u64, stats.marks_ce, "one CE per mark counted");
        for p in &out {
            assert!(checksum_verifies(&p.data), "packet {} header checksum (RFC 1624 eqn. 3)", p.id);
            assert_eq!(
                packet::parse(&p.data).expect("still a packet"),
                p.hdr,
                "bytes and parsed header agree"
            );
            assert_eq!(p.hdr.dscp(), 0x20, "DSCP kept");
        }
        // The event log carries the mark from the dequeue on, not at the arrival.
        let ce =
            |k: EventKind| events.iter().filter(|e| e.kind == k && e.hdr.ecn() == ecn::CE).count() as u64;
        assert_eq!(
            (ce(EventKind::Arrival), ce(EventKind::Dequeue), ce(EventKind::Deliver)),
            (0, stats.marks_ce, stats.marks_ce)
        );
    }

    #[test]
    fn codel_with_ecn_still_drops_not_ect_packets() {
        let (out, events, stats) = codel_with_ecn(0);
        assert_eq!(stats.marks_ce, 0);
        assert!(stats.drops_codel > 0);
        let logged = events.iter().filter(|e| e.reason == Some(DropReason::Codel)).count() as u64;
        assert_eq!((out.len() as u64 + stats.drops_codel, logged), (300, stats.drops_codel));
    }

    /// Flow A (port 1) writes a block of five 1000-byte packets 1 ms apart from 0 ms,
    /// then one more at 12 ms (8 ms after its previous packet); flow B (port 2) sends
    /// one small packet at 2.5 ms, flow C (port 3) one at 2.6 ms with only an ECN bit
    /// set. At 1 Mbit/s a 1040-byte packet takes 8.32 ms, so a queue builds.
    /// Returns the service order as labels.
    fn service_order(queue: QueueKeys, tos_b: u8) -> (Vec<&'static str>, Vec<Event>) {
        let cfg = DirConfig { rate_bps: 1_000_000, queue, ..Default::default() };
        let names = ["A0", "A1", "A2", "B", "C", "A3", "A4", "A5"];
        let frames = vec![
            (ms(0.0), flow_packet(1, 1000, 0)),
            (ms(1.0), flow_packet(1, 1000, 0)),
            (ms(2.0), flow_packet(1, 1000, 0)),
            (ms(2.5), flow_packet(2, 100, tos_b)),
            (ms(2.6), flow_packet(3, 100, 0x02)),
            (ms(3.0), flow_packet(1, 1000, 0)),
            (ms(4.0), flow_packet(1, 1000, 0)),
            (ms(12.0), flow_packet(1, 1000, 0)),
        ];
        let (out, events) = run_frames(&cfg, &frames);
        assert_eq!(out.len(), frames.len());
        (out.iter().map(|(id, _)| names[*id as usize]).collect(), events)
    }

    #[test]
    fn droptail_serves_in_arrival_order() {
        let (order, _) = service_order(QueueKeys::default(), crate::config::INTERACTIVE_TOS);
        assert_eq!(order, ["A0", "A1", "A2", "B", "C", "A3", "A4", "A5"]);
    }

    #[test]
    fn fq_codel_serves_a_sparse_flow_first_and_codel_drops_are_logged() {
        let queue = QueueKeys { discipline: DisciplineName::FqCodel, ..Default::default() };
        let cfg = DirConfig { rate_bps: 1_000_000, queue, ..Default::default() };
        // Flow A: 300 packets at 0 (2.5 s of queue at 1 Mbit/s); flow B: one at 100 ms.
        let mut frames: Vec<_> = (0..300).map(|_| (ms(0.0), flow_packet(1, 1000, 0))).collect();
        frames.push((ms(100.0), flow_packet(2, 100, 0)));
        let (out, events) = run_frames(&cfg, &frames);
        let b = out.iter().find(|(id, _)| *id == 300).expect("B delivered");
        // B waits for A's packet on the wire only (8.3 ms), not behind 2.4 s of queue.
        assert!(b.1 < ms(120.0), "sparse flow delivered at {}", b.1);
        let codel = events.iter().filter(|e| e.reason == Some(DropReason::Codel)).count();
        assert!(codel > 0, "CoDel drops at the head once the sojourn stays above 5 ms for 100 ms");
        assert_eq!(out.len() + codel, frames.len(), "every packet delivered or dropped by CoDel");
    }

    #[test]
    fn a_shaped_class_wakes_the_link_at_next_ready() {
        let queue = QueueKeys {
            discipline: DisciplineName::Classes,
            class_rate_shares: vec![0.1],
            class_ceil_shares: vec![0.1],
            ..Default::default()
        };
        let cfg = DirConfig { rate_bps: 10_000_000, queue, ..Default::default() };
        let frames: Vec<_> = (0..50).map(|_| (ms(0.0), flow_packet(1, 1000, 0))).collect();
        let (out, _) = run_frames(&cfg, &frames);
        assert_eq!(out.len(), 50, "the link does not stall while the class waits for tokens");
        // 50 × 1040 bytes at the 1-Mbit/s ceil is 416 ms, less the bucket's burst (two
        // packets at the link rate); at the link rate alone it would be 42 ms.
        let last = out.iter().map(|(_, due)| *due).max().expect("delivered");
        assert!(last > ms(380.0) && last < ms(420.0), "last delivery at {last}");
        let no_rate = DirConfig { rate_bps: 0, ..cfg.clone() };
        let e = Direction::new(&no_rate, 1, LinkDir::Fwd).err().expect("classes need a link rate");
        assert!(e.0.contains("queue.discipline"), "{e}");
    }

    #[test]
    fn raising_a_class_rate_wakes_a_waiting_link_at_once() {
        use thinwan_proto::qdisc::ClassRate;
        let queue = QueueKeys {
            discipline: DisciplineName::Classes,
            class_rate_shares: vec![0.01],
            class_ceil_shares: vec![0.01],
            ..Default::default()
        };
        let cfg = DirConfig { rate_bps: 10_000_000, queue, ..Default::default() };
        let mut d = Direction::new(&cfg, 1, LinkDir::Fwd).expect("a valid configuration");
        let (mut events, mut out) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            d.arrive(Instant::ZERO, flow_packet(1, 1000, 0), &mut events);
        }
        // The 100-kbit/s class spends its burst, then waits for tokens (~83 ms a packet).
        while let Some(t) = d.poll_timeout().filter(|&t| t < ms(20.0)) {
            d.handle_timeout(t, &mut out, &mut events);
        }
        let waiting_until = d.poll_timeout().expect("a wake-up is due");
        assert!(waiting_until > ms(50.0), "waiting until {waiting_until}");
        let full = ClassRate { rate_bps: 10_000_000, ceil_bps: 10_000_000 };
        let set = d.with_classes(ms(20.0), &mut events, |c| c.set_rates(ms(20.0), &[full]));
        assert!(set.is_some());
        assert!(d.poll_timeout().expect("transmitting") < ms(21.0), "the new rate applies at once");
    }

    #[test]
    fn priority_gap_classifier_serves_flow_heads_first() {
        let q = QueueKeys {
            discipline: DisciplineName::Priority,
            priority_classifier: ClassifierName::Gap,
            ..Default::default()
        };
        let (order, _) = service_order(q, 0);
        // A0 is on the wire when the rest arrive. B and C start flows (interactive);
        // A1..A4 follow A0 within 6.31 ms (bulk); A5 comes 8 ms after A4, so it heads
        // a new block and overtakes the bulk still queued (A2..A4) when A1 finishes.
        assert_eq!(order, ["A0", "B", "C", "A1", "A5", "A2", "A3", "A4"]);
    }

    #[test]
    fn priority_label_classifier_reads_dscp() {
        let q = QueueKeys {
            discipline: DisciplineName::Priority,
            priority_classifier: ClassifierName::Label,
            ..Default::default()
        };
        // B carries DSCP CS4: served first. C has only ECT(0) (DSCP 0): bulk, like A5.
        let (order, events) = service_order(q.clone(), crate::config::INTERACTIVE_TOS);
        assert_eq!(order, ["A0", "B", "A1", "A2", "C", "A3", "A4", "A5"]);
        assert!(events.iter().any(|e| e.hdr.tos == crate::config::INTERACTIVE_TOS));
        // Unmarked, B waits its turn.
        let (order, _) = service_order(q, 0);
        assert_eq!(order, ["A0", "A1", "A2", "B", "C", "A3", "A4", "A5"]);
    }

    #[test]
    fn priority_pushes_out_last_bulk_and_logs_it() {
        let cfg = DirConfig {
            rate_bps: 1_000_000,
            queue: QueueKeys { discipline: DisciplineName::Priority, limit_packets: 2, ..Default::default() },
            ..Default::default()
        };
        let frames = vec![
            (ms(0.0), flow_packet(1, 1000, 0)), // on the wire
            (ms(0.1), flow_packet(1, 1000, 0)), // queued
            (ms(0.2), flow_packet(1, 1000, 0)), // queued: full
            (ms(0.3), flow_packet(2, 100, crate::config::INTERACTIVE_TOS)), // pushes out packet 2
            (ms(0.4), flow_packet(1, 1000, 0)), // overflow
        ];
        let (out, events) = run_frames(&cfg, &frames);
        assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![0, 3, 1]);
        let drops: Vec<_> =
            events.iter().filter(|e| e.kind == EventKind::Drop).map(|e| (e.pkt, e.reason)).collect();
        assert_eq!(drops, vec![(2, Some(DropReason::PushedOut)), (4, Some(DropReason::Overflow))]);
    }

    #[test]
    fn junk_frames_are_counted_and_dropped() {
        let mut d = Direction::new(&DirConfig::default(), 1, LinkDir::Fwd).expect("the defaults are valid");
        let mut events = Vec::new();
        d.arrive(Instant::ZERO, b"\x00\x01junk".to_vec(), &mut events);
        d.arrive(Instant::ZERO, Vec::new(), &mut events);
        assert_eq!(d.stats().malformed, 2);
        assert_eq!(d.in_flight(), 0);
        assert!(events.iter().all(|e| e.kind == EventKind::Drop && e.reason == Some(DropReason::Malformed)));
    }
}

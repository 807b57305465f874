//! Two sessions joined in memory (quinn `tests/util.rs` style): bytes move between
//! them lane by lane; a "cut" delivers only a prefix of what was in flight, then
//! reconnects — which is what a TCP reset does to a trunk.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::time::{Duration, Instant};

struct Pair {
    edge: Session,
    core: Session,
    now: Instant,
    gens: Vec<(u64, u64)>,
    /// In flight per lane: edge → core, core → edge.
    e2c: Vec<Vec<u8>>,
    c2e: Vec<Vec<u8>>,
    /// Bytes each side's application received per stream (edge ids).
    at_core: HashMap<StreamId, Vec<u8>>,
    at_edge: HashMap<StreamId, Vec<u8>>,
    fin_at_core: Vec<StreamId>,
    fin_at_edge: Vec<StreamId>,
    resets: Vec<(bool, StreamId, ResetCode)>,
    lost: Vec<String>,
    /// Consume received bytes at once (a fast reader) or never (a stalled one).
    consume: bool,
}

impl Pair {
    fn new(cfg: Config) -> Pair {
        let lanes = cfg.lanes as usize;
        let mut p = Pair {
            edge: Session::new(Role::Edge, 42, cfg.clone(), Instant::ZERO),
            core: Session::new(Role::Core, 42, cfg, Instant::ZERO),
            now: Instant::ZERO,
            gens: vec![(0, 0); lanes],
            e2c: vec![Vec::new(); lanes],
            c2e: vec![Vec::new(); lanes],
            at_core: HashMap::new(),
            at_edge: HashMap::new(),
            fin_at_core: Vec::new(),
            fin_at_edge: Vec::new(),
            resets: Vec::new(),
            lost: Vec::new(),
            consume: true,
        };
        for l in 0..lanes as u16 {
            p.connect(l);
        }
        p.run();
        p
    }

    fn connect(&mut self, lane: u16) {
        let ge = self.edge.lane_connected(lane, self.now);
        let gc = self.core.lane_connected(lane, self.now);
        self.gens[lane as usize] = (ge, gc);
        self.e2c[lane as usize].clear();
        self.c2e[lane as usize].clear();
    }

    /// Deliver `keep_e2c`/`keep_c2e` bytes of what is in flight, drop the rest, and
    /// reconnect the lane.
    fn cut(&mut self, lane: u16, keep_e2c: usize, keep_c2e: usize) {
        let l = lane as usize;
        let (ge, gc) = self.gens[l];
        let a: Vec<u8> = self.e2c[l].drain(..).collect();
        let b: Vec<u8> = self.c2e[l].drain(..).collect();
        self.core.handle_bytes(lane, gc, &a[..keep_e2c.min(a.len())], self.now);
        self.edge.handle_bytes(lane, ge, &b[..keep_c2e.min(b.len())], self.now);
        self.drain_events();
        self.edge.lane_disconnected(lane, ge, self.now);
        self.core.lane_disconnected(lane, gc, self.now);
        self.now += Duration::from_millis(10);
        self.connect(lane);
    }

    /// Move bytes until both sides are quiet.
    fn run(&mut self) {
        for _ in 0..100_000 {
            let mut moved = false;
            for lane in 0..self.gens.len() as u16 {
                let l = lane as usize;
                let (ge, gc) = self.gens[l];
                moved |= self.edge.poll_transmit(lane, ge, &mut self.e2c[l], 64 * 1024, self.now);
                moved |= self.core.poll_transmit(lane, gc, &mut self.c2e[l], 64 * 1024, self.now);
                let a: Vec<u8> = self.e2c[l].drain(..).collect();
                let b: Vec<u8> = self.c2e[l].drain(..).collect();
                self.core.handle_bytes(lane, gc, &a, self.now);
                self.edge.handle_bytes(lane, ge, &b, self.now);
            }
            moved |= self.drain_events();
            if !moved {
                // Let delayed acks fire.
                let next = [self.edge.poll_timeout(), self.core.poll_timeout()].into_iter().flatten().min();
                match next {
                    Some(t) if t <= self.now + Duration::from_millis(5) => {
                        self.now = self.now.max(t);
                        self.edge.handle_timeout(self.now);
                        self.core.handle_timeout(self.now);
                        if !self.edge.wants_transmit(0)
                            && !self.core.wants_transmit(0)
                            && !self.drain_events()
                        {
                            let more = (0..self.gens.len() as u16)
                                .any(|l| self.edge.wants_transmit(l) || self.core.wants_transmit(l));
                            if !more {
                                return;
                            }
                        }
                    }
                    _ => return,
                }
            }
        }
        panic!("pair did not settle");
    }

    /// Apply both sides' events; true if any.
    fn drain_events(&mut self) -> bool {
        let mut any = false;
        while let Some(ev) = self.core.poll_event() {
            any = true;
            match ev {
                Event::StreamOpened { id, target } => {
                    if target == "nowhere" {
                        self.core.stream_reset(id, ResetCode::UnknownTarget, "no such target");
                    } else {
                        self.at_core.entry(id).or_default();
                    }
                }
                Event::Data { id, bytes } => {
                    self.at_core.entry(id).or_default().extend_from_slice(&bytes);
                    if self.consume {
                        self.core.stream_consumed(id, bytes.len());
                    }
                }
                Event::Finished { id } => self.fin_at_core.push(id),
                Event::Reset { id, code, .. } => self.resets.push((true, id, code)),
                Event::SessionLost { reason } => self.lost.push(format!("core: {reason}")),
                _ => {}
            }
        }
        while let Some(ev) = self.edge.poll_event() {
            any = true;
            match ev {
                Event::Data { id, bytes } => {
                    self.at_edge.entry(id).or_default().extend_from_slice(&bytes);
                    if self.consume {
                        self.edge.stream_consumed(id, bytes.len());
                    }
                }
                Event::Finished { id } => self.fin_at_edge.push(id),
                Event::Reset { id, code, .. } => self.resets.push((false, id, code)),
                Event::SessionLost { reason } => self.lost.push(format!("edge: {reason}")),
                _ => {}
            }
        }
        any
    }
}

fn pattern(stream: StreamId, from: usize, n: usize) -> Vec<u8> {
    (from..from + n).map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(stream) as u8).collect()
}

#[test]
fn open_send_close_both_ways() {
    let mut p = Pair::new(Config::default());
    let id = p.edge.open_stream("echo", Class::Auto, p.now).unwrap();
    assert_eq!(p.edge.stream_send(id, b"hello core", p.now), Ok(10));
    p.edge.stream_finish(id, p.now);
    p.run();
    assert_eq!(p.at_core[&id], b"hello core");
    assert_eq!(p.fin_at_core, vec![id]);
    assert_eq!(p.core.stream_send(id, b"hello edge", p.now), Ok(10));
    p.core.stream_finish(id, p.now);
    p.run();
    assert_eq!(p.at_edge[&id], b"hello edge");
    assert_eq!(p.fin_at_edge, vec![id]);
    assert_eq!((p.edge.stream_count(), p.core.stream_count()), (0, 0));
    assert!(p.edge.is_drained() && p.core.is_drained(), "acks release replay buffers");
}

#[test]
fn only_a_reconnect_counts_as_a_resumption() {
    // Lanes 1 and 2 coming up after lane 0 are first connections, not resumptions.
    let mut p = Pair::new(Config { lanes: 3, ..Config::default() });
    assert_eq!((p.edge.stats().resumes, p.core.stats().resumes), (0, 0));
    p.cut(1, 0, 0);
    p.run();
    assert_eq!((p.edge.stats().resumes, p.core.stats().resumes), (1, 1));
}

#[test]
fn unknown_target_is_reset_at_the_edge() {
    let mut p = Pair::new(Config::default());
    let id = p.edge.open_stream("nowhere", Class::Auto, p.now).unwrap();
    p.edge.stream_send(id, b"x", p.now).unwrap();
    p.run();
    assert_eq!(p.resets, vec![(false, id, ResetCode::UnknownTarget)]);
    assert_eq!(p.edge.stream_count(), 0);
}

#[test]
fn credit_bounds_a_slow_reader() {
    let cfg = Config { stream_window: 64 * 1024, stream_buffer: 32 * 1024, ..Config::default() };
    let mut p = Pair::new(cfg);
    p.consume = false;
    let id = p.edge.open_stream("bulk", Class::Bulk, p.now).unwrap();
    let mut offered = 0;
    for _ in 0..100 {
        offered += p.edge.stream_send(id, &[7u8; 8192], p.now).unwrap();
        p.run();
    }
    // The core holds exactly one window; the edge holds at most its stream buffer.
    assert_eq!(p.at_core[&id].len(), 64 * 1024);
    assert_eq!(offered, 64 * 1024 + 32 * 1024);
    assert!(p.edge.buffered_bytes() <= 32 * 1024);
    // The reader catches up: credit flows and everything arrives.
    p.consume = true;
    p.core.stream_consumed(id, 64 * 1024);
    p.run();
    assert_eq!(p.at_core[&id].len(), offered);
}

#[test]
fn thin_frame_overtakes_bulk_backlog() {
    let mut s = Session::new(Role::Edge, 1, Config::default(), Instant::ZERO);
    let g = s.lane_connected(0, Instant::ZERO);
    let mut out = Vec::new();
    s.poll_transmit(0, g, &mut out, 1 << 20, Instant::ZERO);
    let mut hello = Frame::decode(&out, 1 << 20).unwrap().unwrap().0;
    if let Frame::Hello(h) = &mut hello {
        h.flags = 0;
    }
    let mut wire = Vec::new();
    hello.encode(&mut wire);
    s.handle_bytes(0, g, &wire, Instant::ZERO);
    let bulk = s.open_stream("b", Class::Auto, Instant::ZERO).unwrap();
    let thin = s.open_stream("t", Class::Auto, Instant::ZERO).unwrap();
    let mut t = Instant::ZERO;
    // Warm the bulk stream up past the thin threshold.
    s.stream_send(bulk, &vec![0u8; 200_000], t).unwrap();
    out.clear();
    s.poll_transmit(0, g, &mut out, 64 * 1024, t);
    t += Duration::from_micros(10);
    s.stream_send(thin, b"key", t).unwrap();
    out.clear();
    s.poll_transmit(0, g, &mut out, 1, t);
    let (f, _) = Frame::decode(&out, 1 << 20).unwrap().unwrap();
    assert_eq!(f, Frame::Data { stream: thin, payload: b"key".to_vec() });
}

#[test]
fn peer_without_state_fails_every_stream() {
    let mut p = Pair::new(Config::default());
    let a = p.edge.open_stream("x", Class::Auto, p.now).unwrap();
    p.edge.stream_send(a, b"abc", p.now).unwrap();
    p.run();
    // The core "restarts": a fresh process answers the edge's resume Hello.
    p.core = Session::new(Role::Core, 99, Config::default(), p.now);
    let ge = p.edge.lane_connected(0, p.now);
    let mut out = Vec::new();
    p.edge.poll_transmit(0, ge, &mut out, 1 << 16, p.now);
    let h = session::peek_hello(&out, 1 << 16).unwrap().unwrap();
    assert_eq!(h.flags & frame::FLAG_NEW, 0, "an established edge asks to resume");
    let mut reply = Vec::new();
    session::unknown_session_reply(&h).encode(&mut reply);
    p.edge.handle_bytes(0, ge, &reply, p.now);
    p.drain_events();
    assert_eq!(p.resets, vec![(false, a, ResetCode::ResumeFailed)]);
    assert_eq!(p.lost.len(), 1);
}

#[test]
fn resume_timeout_fails_streams() {
    let mut p = Pair::new(Config::default());
    let a = p.edge.open_stream("x", Class::Auto, p.now).unwrap();
    p.run();
    let (ge, gc) = p.gens[0];
    p.edge.lane_disconnected(0, ge, p.now);
    p.core.lane_disconnected(0, gc, p.now);
    let t = p.edge.poll_timeout().unwrap();
    assert_eq!(t, p.now + Config::default().resume_timeout);
    p.edge.handle_timeout(t);
    p.core.handle_timeout(t);
    p.drain_events();
    assert!(p.resets.contains(&(false, a, ResetCode::ResumeFailed)));
    assert!(p.resets.contains(&(true, a, ResetCode::ResumeFailed)));
}

/// One ping round trip on lane 0 with `one_way` delay each way (the lanes' RTT
/// measurement); returns when the pong has arrived at the edge.
fn ping_over(p: &mut Pair, one_way: Duration) {
    let (ge, gc) = p.gens[0];
    p.now += Config::default().ping_interval;
    p.edge.handle_timeout(p.now);
    p.core.handle_timeout(p.now);
    // Pings cross, then pongs.
    for _ in 0..2 {
        let (mut e2c, mut c2e) = (Vec::new(), Vec::new());
        while p.edge.poll_transmit(0, ge, &mut e2c, 64 * 1024, p.now) {}
        while p.core.poll_transmit(0, gc, &mut c2e, 64 * 1024, p.now) {}
        p.now += one_way;
        p.core.handle_bytes(0, gc, &e2c, p.now);
        p.edge.handle_bytes(0, ge, &c2e, p.now);
    }
    while p.edge.poll_event().is_some() {}
}

/// When the edge declares lane 0 dead after the last bytes it received (at `p.now`).
fn dead_after(p: &mut Pair) -> Duration {
    let last_rx = p.now;
    loop {
        let t = p.edge.poll_timeout().expect("a lane deadline");
        p.edge.handle_timeout(t);
        while let Some(ev) = p.edge.poll_event() {
            if let Event::LaneDead { lane: 0, .. } = ev {
                return t - last_rx;
            }
        }
        assert!(t < last_rx + Duration::from_secs(60), "lane 0 never declared dead");
    }
}

/// A lane's liveness timeout covers TCP's own silence while it retries: `idle_timeout`
/// (5 s) on a short path, 21 path RTTs on a long one (a 600-ms path: 12.6 s), so a lane
/// whose segment is lost twice in a row at 300 ms one way is not torn down.
#[test]
fn a_silent_lane_is_dead_after_the_idle_timeout_or_21_rtts() {
    let idle = Config::default().idle_timeout;
    for (one_way_ms, expected) in [(10, idle), (300, Duration::from_millis(21 * 600))] {
        let mut p = Pair::new(Config::default());
        ping_over(&mut p, Duration::from_millis(one_way_ms));
        assert_eq!(dead_after(&mut p), expected, "{one_way_ms} ms one way");
    }
}

#[derive(Clone, Debug)]
enum Op {
    Open,
    Send { stream: usize, len: usize, from_core: bool },
    Finish { stream: usize, from_core: bool },
    Run,
    Cut { lane: u16, keep_e2c: usize, keep_c2e: usize },
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Open),
        6 => (0usize..6, 1usize..40_000, any::<bool>()).prop_map(|(stream, len, from_core)| Op::Send { stream, len, from_core }),
        1 => (0usize..6, any::<bool>()).prop_map(|(stream, from_core)| Op::Finish { stream, from_core }),
        3 => Just(Op::Run),
        2 => (0u16..2, 0usize..200_000, 0usize..200_000).prop_map(|(lane, keep_e2c, keep_c2e)| Op::Cut { lane, keep_e2c, keep_c2e }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever prefix of in-flight bytes a trunk reset lets through, every stream's
    /// bytes arrive exactly once and in order, and finishes arrive once.
    #[test]
    fn resumption_delivers_exactly_once(ops in proptest::collection::vec(arb_op(), 1..60)) {
        let cfg = Config { lanes: 2, stream_window: 48 * 1024, ..Config::default() };
        let mut p = Pair::new(cfg);
        let mut ids: Vec<StreamId> = Vec::new();
        let mut sent_e: HashMap<StreamId, usize> = HashMap::new();
        let mut sent_c: HashMap<StreamId, usize> = HashMap::new();
        let mut fin_e = Vec::new();
        let mut fin_c = Vec::new();
        for op in ops {
            match op {
                Op::Open => {
                    let id = p.edge.open_stream("t", Class::Auto, p.now).unwrap();
                    ids.push(id);
                    p.run(); // the core learns of the stream before it sends
                }
                Op::Send { stream, len, from_core } => {
                    let Some(&id) = ids.get(stream) else { continue };
                    let (s, sent, fins) = if from_core { (&mut p.core, &mut sent_c, &fin_c) } else { (&mut p.edge, &mut sent_e, &fin_e) };
                    if fins.contains(&id) { continue; }
                    let from = *sent.get(&id).unwrap_or(&0);
                    let n = s.stream_send(id, &pattern(id, from, len), p.now).unwrap_or(0);
                    *sent.entry(id).or_default() += n;
                }
                Op::Finish { stream, from_core } => {
                    let Some(&id) = ids.get(stream) else { continue };
                    let (s, fins) = if from_core { (&mut p.core, &mut fin_c) } else { (&mut p.edge, &mut fin_e) };
                    if !fins.contains(&id) { s.stream_finish(id, p.now); fins.push(id); }
                }
                Op::Run => p.run(),
                Op::Cut { lane, keep_e2c, keep_c2e } => {
                    // Put some bytes in flight first.
                    let l = lane as usize;
                    let (ge, gc) = p.gens[l];
                    p.edge.poll_transmit(lane, ge, &mut p.e2c[l], 100_000, p.now);
                    p.core.poll_transmit(lane, gc, &mut p.c2e[l], 100_000, p.now);
                    p.cut(lane, keep_e2c, keep_c2e);
                }
            }
        }
        p.run();
        prop_assert!(p.lost.is_empty(), "{:?}", p.lost);
        prop_assert!(p.resets.is_empty(), "{:?}", p.resets);
        for &id in &ids {
            let n = *sent_e.get(&id).unwrap_or(&0);
            let got = p.at_core.get(&id).map(Vec::as_slice).unwrap_or(&[]);
            prop_assert_eq!(got.len(), n, "edge→core stream {}", id);
            prop_assert!(got == pattern(id, 0, n).as_slice(), "edge→core bytes of stream {}", id);
            let n = *sent_c.get(&id).unwrap_or(&0);
            let got = p.at_edge.get(&id).map(Vec::as_slice).unwrap_or(&[]);
            prop_assert_eq!(got.len(), n, "core→edge stream {}", id);
            prop_assert!(got == pattern(id, 0, n).as_slice(), "core→edge bytes of stream {}", id);
        }
        let mut a = p.fin_at_core.clone(); a.sort();
        let mut b = fin_e.clone(); b.sort();
        prop_assert_eq!(a, b);
        let mut a = p.fin_at_edge.clone(); a.sort();
        let mut b = fin_c.clone(); b.sort();
        prop_assert_eq!(a, b);
    }
}

//! The class scheduler's rates, ceilings and borrowing on virtual time: a link model
//! dequeues at the link rate and, when nothing may be sent, sleeps until `next_ready`.

use super::*;
use proptest::prelude::*;

use crate::qdisc::test_item::F;

const LINK: u64 = 10_000_000;
const NO_LIMIT: Limits = Limits { bytes: None, packets: None };

fn rate(mbps: f64, ceil_mbps: f64) -> ClassRate {
    ClassRate { rate_bps: (mbps * 1e6) as u64, ceil_bps: (ceil_mbps * 1e6) as u64 }
}

/// Keep the flows in `backlogged` (flow, packet size) topped up to 20 packets, run the
/// link for `secs`, and return the bytes sent per flow and the idle (waiting) time.
/// Flows are assigned to classes beforehand.
struct Run {
    sent: BTreeMap<u64, u64>,
    idle: Duration,
}

fn run_link(q: &mut Classes<F>, backlogged: &[(u64, u32)], secs: u64) -> Run {
    let mut drops = Vec::new();
    let mut queued: BTreeMap<u64, usize> = BTreeMap::new();
    let mut sent = BTreeMap::new();
    let mut t = Instant::ZERO;
    let end = Instant::from_nanos(secs * 1_000_000_000);
    let mut idle = Duration::ZERO;
    let mut id = 0;
    while t < end {
        for &(flow, len) in backlogged {
            let n = queued.entry(flow).or_default();
            while *n < 20 {
                q.enqueue(t, F(id, len, flow), &mut drops);
                id += 1;
                *n += 1;
            }
        }
        match q.dequeue(t) {
            Some(p) => {
                *queued.get_mut(&p.2).expect("queued") -= 1;
                *sent.entry(p.2).or_default() += p.1 as u64;
                t += Duration::transmission(p.1 as u64, LINK);
            }
            None => {
                let at = q.next_ready(t).expect("a backlogged scheduler says when it can send");
                assert!(at > t, "next_ready is in the future when dequeue gave nothing");
                idle = idle + (at - t);
                t = at;
            }
        }
    }
    assert!(drops.is_empty());
    Run { sent, idle }
}

fn share(r: &Run, flow: u64) -> f64 {
    let total: u64 = r.sent.values().sum();
    r.sent.get(&flow).copied().unwrap_or(0) as f64 / total as f64
}

fn mbps(r: &Run, flow: u64, secs: u64) -> f64 {
    r.sent.get(&flow).copied().unwrap_or(0) as f64 * 8.0 / secs as f64 / 1e6
}

#[test]
fn two_backlogged_classes_share_the_link_by_their_rates() {
    // Rates 3:1 covering the link, and 3:1 covering 40 % of it (the rest borrowed in
    // proportion to the rates, HTB's quantum ∝ rate). Whether reassigned flows take
    // their packets along changes nothing when no flow is reassigned.
    for ((a, b), change) in
        [(7.5, 2.5), (3.0, 1.0)].into_iter().flat_map(|r| [(r, ClassChange::Leave), (r, ClassChange::Move)])
    {
        let mut q = Classes::new(&[rate(a, 10.0), rate(b, 10.0)], 1514, NO_LIMIT).with_class_change(change);
        q.assign(1, 0);
        q.assign(2, 1);
        let r = run_link(&mut q, &[(1, 1500), (2, 1500)], 10);
        let s = share(&r, 1);
        assert!((s - 0.75).abs() < 0.02, "rates {a}:{b}: class 0 got {s:.4} of the link, want 0.75 ± 0.02");
        assert_eq!(r.idle, Duration::ZERO, "ceil = link rate: work-conserving");
    }
}

#[test]
fn a_class_alone_borrows_up_to_its_ceil_and_no_more() {
    // Class 0 alone (class 1 idle): rate 1 Mbit/s, ceil = link → the whole link.
    let mut q = Classes::new(&[rate(1.0, 10.0), rate(9.0, 10.0)], 1514, NO_LIMIT);
    q.assign(1, 0);
    let r = run_link(&mut q, &[(1, 1500)], 10);
    let got = mbps(&r, 1, 10);
    assert!((got - 10.0).abs() < 0.1, "borrowed up to the link: {got:.3} Mbit/s");
    // Ceil 4 Mbit/s < link: 4 Mbit/s, the link idles in between (next_ready honoured).
    let mut q = Classes::new(&[rate(1.0, 4.0), rate(9.0, 10.0)], 1514, NO_LIMIT);
    q.assign(1, 0);
    let r = run_link(&mut q, &[(1, 1500)], 10);
    let got = mbps(&r, 1, 10);
    assert!((got - 4.0).abs() < 0.08, "capped at ceil: {got:.3} Mbit/s, want 4 ± 2 %");
    assert!(r.idle.as_secs_f64() > 5.5, "the link waited {} for tokens", r.idle);
}

#[test]
fn an_idle_classs_share_goes_to_the_others() {
    let third = 10.0 / 3.0;
    let mut q = Classes::new(&[rate(third, 10.0), rate(third, 10.0), rate(third, 10.0)], 1514, NO_LIMIT);
    q.assign(1, 0);
    q.assign(3, 2);
    let r = run_link(&mut q, &[(1, 1500), (3, 1500)], 10);
    let (a, c) = (mbps(&r, 1, 10), mbps(&r, 3, 10));
    assert!((a - 5.0).abs() < 0.1 && (c - 5.0).abs() < 0.1, "class 1's share split: {a:.3} and {c:.3}");
}

#[test]
fn flows_inside_a_class_share_it_by_drr() {
    let mut q = Classes::new(&[rate(10.0, 10.0)], 1514, NO_LIMIT);
    let r = run_link(&mut q, &[(1, 1500), (2, 300), (3, 64)], 5);
    let b: Vec<u64> = r.sent.values().copied().collect();
    let (lo, hi) = (*b.iter().min().unwrap(), *b.iter().max().unwrap());
    assert!(hi - lo <= 1514 + 1500, "bytes per flow {b:?}: within one quantum and one packet");
}

#[test]
fn assign_moves_a_flows_later_packets() {
    let mut q = Classes::new(&[rate(5.0, 10.0), rate(5.0, 10.0)], 1514, NO_LIMIT);
    let mut drops = Vec::new();
    q.enqueue(Instant::ZERO, F(1, 100, 7), &mut drops);
    assert_eq!((q.class_backlog(0), q.class_backlog(1)), (0, 1), "unassigned: the default (last) class");
    q.assign(7, 0);
    q.enqueue(Instant::ZERO, F(2, 100, 7), &mut drops);
    assert_eq!((q.class_backlog(0), q.class_backlog(1)), (1, 1), "later packets go to class 0");
    q.assign(7, 1);
    q.enqueue(Instant::ZERO, F(3, 100, 7), &mut drops);
    assert_eq!((q.class_backlog(0), q.class_backlog(1)), (1, 2), "assigning the default class");
}

/// Send everything queued on the link from `t` (sleeping until `next_ready` when no class
/// may send); the packets' ids in the order they left and when the last one was sent.
fn drain(q: &mut Classes<F>, mut t: Instant) -> (Vec<u32>, Instant) {
    let mut ids = Vec::new();
    while q.backlog_packets() > 0 {
        match q.dequeue(t) {
            Some(p) => {
                ids.push(p.0);
                t += Duration::transmission(p.1 as u64, LINK);
            }
            None => t = q.next_ready(t).expect("a backlogged scheduler says when it can send"),
        }
    }
    (ids, t)
}

/// Flow 7 in class A (0, 1 Mbit/s) with 400 packets of 1500 B queued at t = 0, of which
/// 10 leave; then it is put into class B (1, 8 Mbit/s) and sends 100 more. Neither
/// class may borrow (ceil = rate), the link has 10 Mbit/s. Returns the scheduler right
/// after the move and the time of the move.
fn moved_from_slow_to_fast(change: ClassChange) -> (Classes<F>, Instant) {
    let mut q = Classes::new(&[rate(1.0, 1.0), rate(8.0, 8.0)], 1514, NO_LIMIT).with_class_change(change);
    let mut drops = Vec::new();
    q.assign(7, 0);
    for id in 0..400 {
        q.enqueue(Instant::ZERO, F(id, 1500, 7), &mut drops);
    }
    let mut t = Instant::ZERO;
    let mut first = Vec::new();
    while first.len() < 10 {
        match q.dequeue(t) {
            Some(p) => {
                first.push(p.0);
                t += Duration::transmission(p.1 as u64, LINK);
            }
            None => t = q.next_ready(t).expect("backlogged"),
        }
    }
    assert_eq!(first, (0..10).collect::<Vec<_>>(), "in order while in class A");
    q.assign(7, 1);
    (q, t)
}

#[test]
fn a_moved_flow_takes_its_queued_packets_along_in_order_at_the_new_rate() {
    let (mut q, t) = moved_from_slow_to_fast(ClassChange::Move);
    assert_eq!((q.class_backlog(0), q.class_backlog(1)), (0, 390), "nothing is left in class A");
    let mut drops = Vec::new();
    for id in 400..500 {
        q.enqueue(t, F(id, 1500, 7), &mut drops);
    }
    assert_eq!((q.class_backlog(0), q.class_backlog(1)), (0, 490), "later packets join them in B");
    let (ids, end) = drain(&mut q, t);
    assert_eq!(ids, (10..500).collect::<Vec<_>>(), "every packet leaves, in arrival order");
    // B's rate: 490 × 1500 B at 8 Mbit/s is 735 ms (its bucket's 10 ms burst on top
    // makes it 1.4 % faster); at A's 1 Mbit/s it would take 5.9 s.
    let mbps = 490.0 * 1500.0 * 8.0 / (end - t).as_secs_f64() / 1e6;
    assert!((mbps - 8.0).abs() < 0.2, "served at B's 8 Mbit/s: {mbps:.3} Mbit/s");
    assert!(drops.is_empty());
}

#[test]
fn a_flow_moved_under_leave_overtakes_its_own_packets() {
    // The default, Linux HTB's: the queued packets stay in A at 1 Mbit/s; the later
    // ones, in B, leave before them (the reordering `ClassChange::Move` removes).
    let (mut q, t) = moved_from_slow_to_fast(ClassChange::Leave);
    assert_eq!((q.class_backlog(0), q.class_backlog(1)), (390, 0), "the queued packets stay in A");
    let mut drops = Vec::new();
    for id in 400..500 {
        q.enqueue(t, F(id, 1500, 7), &mut drops);
    }
    let (ids, end) = drain(&mut q, t);
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (10..500).collect::<Vec<_>>(), "every packet leaves");
    let overtaken = ids.iter().position(|&id| id >= 400).expect("sent");
    assert!(overtaken < 20, "a later packet leaves after only {overtaken} of the 390 older ones");
    let secs = (end - t).as_secs_f64();
    assert!((secs - 390.0 * 1500.0 * 8.0 / 1e6).abs() < 0.1, "A's 390 packets take {secs:.3} s at 1 Mbit/s");
}

/// A packet of the interactive-label tests: (id, flow, labelled interactive).
#[derive(Debug, Clone, PartialEq)]
struct L(u32, u64, bool);

impl QueueItem for L {
    fn wire_len(&self) -> u32 {
        100
    }
    fn flow(&self) -> u64 {
        self.1
    }
    fn is_interactive(&self) -> bool {
        self.2
    }
}

#[test]
fn moving_a_flow_split_by_labels_merges_its_packets_in_arrival_order() {
    // An unassigned flow's labelled packets go to the interactive class (0), the rest to
    // the default (1); assigning it moves both parts to class 1, merged by arrival.
    let mut q = Classes::new(&[rate(5.0, 10.0), rate(5.0, 10.0)], 1514, NO_LIMIT)
        .with_interactive_class(Some(0))
        .with_class_change(ClassChange::Move);
    let mut drops = Vec::new();
    for id in 0..10 {
        q.enqueue(Instant::from_nanos(id as u64), L(id, 5, id % 3 == 0), &mut drops);
    }
    assert_eq!((q.class_backlog(0), q.class_backlog(1)), (4, 6));
    q.assign(5, 1);
    assert_eq!((q.class_backlog(0), q.class_backlog(1)), (0, 10));
    let ids: Vec<u32> = std::iter::from_fn(|| q.dequeue(Instant::ZERO).map(|p| p.0)).collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
}

#[test]
fn no_class_starves() {
    // A class with 1 % of the link against one with 99 %, both greedy: the small one
    // still gets at least its rate.
    let mut q = Classes::new(&[rate(0.1, 10.0), rate(9.9, 10.0)], 1514, NO_LIMIT);
    q.assign(1, 0);
    q.assign(2, 1);
    let r = run_link(&mut q, &[(1, 1500), (2, 1500)], 10);
    let got = mbps(&r, 1, 10);
    assert!(got >= 0.1 * 0.98, "the 0.1-Mbit/s class got {got:.4} Mbit/s");
}

#[test]
fn set_rates_changes_the_split_and_resizes() {
    let mut q = Classes::new(&[rate(5.0, 10.0), rate(5.0, 10.0)], 1514, NO_LIMIT);
    q.assign(1, 0);
    q.assign(2, 1);
    q.set_rates(Instant::ZERO, &[rate(8.0, 10.0), rate(2.0, 10.0)]);
    let r = run_link(&mut q, &[(1, 1500), (2, 1500)], 10);
    assert!((share(&r, 1) - 0.8).abs() < 0.02, "after set_rates: {:.4}", share(&r, 1));
    // Shrinking to one class moves every queued packet into it; growing adds classes.
    let mut drops = Vec::new();
    q.enqueue(Instant::ZERO, F(9, 100, 1), &mut drops);
    let before = q.backlog_packets();
    q.set_rates(Instant::ZERO, &[rate(10.0, 10.0)]);
    assert_eq!((q.class_count(), q.class_backlog(0)), (1, before));
    q.set_rates(Instant::ZERO, &[rate(4.0, 10.0), rate(3.0, 10.0), rate(3.0, 10.0)]);
    assert_eq!(q.class_count(), 3);
    assert_eq!(q.class_backlog(0), before, "the old class 0 keeps its packets");
}

#[test]
fn shared_limits_drop_the_arrival() {
    let mut q =
        Classes::new(&[rate(5.0, 10.0), rate(5.0, 10.0)], 1514, Limits { bytes: None, packets: Some(3) });
    let mut drops = Vec::new();
    for i in 0..5 {
        q.enqueue(Instant::ZERO, F(i, 100, i as u64 % 2), &mut drops);
    }
    assert_eq!(q.backlog_packets(), 3);
    let ids: Vec<_> = drops.iter().map(|d| (d.packet.0, d.reason)).collect();
    assert_eq!(ids, [(3, DropReason::Overflow), (4, DropReason::Overflow)]);
}

proptest! {
    /// Packets are conserved, limits hold, and a backlogged scheduler either sends or
    /// names a future time at which it can — with flows reassigned at any time, either
    /// way of treating their queued packets, with or without CoDel. With
    /// `ClassChange::Move` every flow's packets also leave in arrival order.
    #[test]
    fn conserves_packets_and_always_progresses(
        ops in proptest::collection::vec((0u8..5, 0u64..5, 40u32..1500, 0u64..3, 0usize..5), 1..400),
        rates in proptest::collection::vec((0u64..5_000_000, 1u64..10_000_000), 1..5),
        lp in 1usize..40,
        moves in any::<bool>(),
        codel in any::<bool>())
    {
        let rates: Vec<_> = rates.into_iter().map(|(r, c)| ClassRate { rate_bps: r, ceil_bps: c.max(r) }).collect();
        let change = if moves { ClassChange::Move } else { ClassChange::Leave };
        let mut q = Classes::new(&rates, 1514, Limits { bytes: None, packets: Some(lp) })
            .with_class_change(change)
            .with_codel(codel.then(CodelParams::default));
        for f in 0..5u64 {
            q.assign(f, f as usize % rates.len());
        }
        let mut drops = Vec::new();
        let (mut offered, mut out) = (0u64, 0u64);
        let mut last_sent: BTreeMap<u64, u32> = BTreeMap::new();
        let mut sent = |p: F| -> Result<(), TestCaseError> {
            if let Some(prev) = last_sent.insert(p.2, p.0) {
                prop_assert!(!moves || prev < p.0, "flow {}: {} left after {}", p.2, p.0, prev);
            }
            Ok(())
        };
        let mut t = Instant::ZERO;
        for (i, (op, flow, len, dt, class)) in ops.into_iter().enumerate() {
            t += Duration::from_millis(dt);
            match op {
                0 | 1 => {
                    offered += 1;
                    q.enqueue(t, F(i as u32, len, flow), &mut drops);
                }
                2 => q.assign(flow, class % rates.len()),
                _ => {
                    let p = match q.dequeue(t) {
                        Some(p) => Some(p),
                        None if q.backlog_packets() > 0 => {
                            q.take_drops(&mut drops);
                            if q.backlog_packets() > 0 {
                                let at = q.next_ready(t);
                                prop_assert!(at.is_some_and(|at| at > t));
                                t = at.unwrap();
                                let p = q.dequeue(t);
                                prop_assert!(p.is_some() || codel, "sends at next_ready");
                                p
                            } else {
                                None
                            }
                        }
                        None => None,
                    };
                    q.take_drops(&mut drops);
                    if let Some(p) = p {
                        out += 1;
                        sent(p)?;
                    }
                }
            }
            prop_assert!(q.backlog_packets() <= lp);
        }
        prop_assert_eq!(offered, out + drops.len() as u64 + q.backlog_packets() as u64);
    }
}

/// One class, a standing queue of flow 1 (200 × 1500 B at t = 0: 240 ms at 10 Mbit/s)
/// and a sparse flow 2 (one packet every 10 ms), drained at the link rate for 300 ms.
/// Returns (CoDel drops of each flow, the scheduler's counters, packets sent).
fn standing_queue(codel: Option<CodelParams>) -> (BTreeMap<u64, usize>, QueueStats, usize, usize) {
    let mut q = Classes::new(&[rate(10.0, 10.0)], 1514, NO_LIMIT).with_codel(codel);
    let mut drops = Vec::new();
    for id in 0..200 {
        q.enqueue(Instant::ZERO, F(id, 1500, 1), &mut drops);
    }
    let (mut t, end) = (Instant::ZERO, Instant::from_nanos(300_000_000));
    let (mut next_sparse, mut sent, mut id) = (Instant::ZERO, 0, 1000);
    while t < end {
        if t >= next_sparse {
            q.enqueue(t, F(id, 100, 2), &mut drops);
            id += 1;
            next_sparse += Duration::from_millis(10);
        }
        match q.dequeue(t) {
            Some(p) => {
                sent += 1;
                t += Duration::transmission(p.1 as u64, LINK);
            }
            None => {
                t = q.next_ready(t).unwrap_or(next_sparse).min(next_sparse).max(t + Duration::from_micros(1))
            }
        }
        q.take_drops(&mut drops);
    }
    let mut by_flow = BTreeMap::new();
    for d in &drops {
        assert_eq!(d.reason, DropReason::Codel, "only CoDel drops here (no buffer limit)");
        *by_flow.entry(d.packet.2).or_default() += 1;
    }
    (by_flow, q.stats().clone(), sent, q.backlog_packets())
}

#[test]
fn codel_in_a_class_drops_at_the_head_of_the_standing_queue_only() {
    // RFC 8289 §4.3: the head's sojourn exceeds target (5 ms) from the start; after one
    // interval (100 ms) CoDel starts dropping flow 1's head. Flow 2's queue holds at
    // most one small packet (sojourn < target, and ≤ one MTU, §5.4): never dropped.
    let (dropped, stats, sent, backlog) = standing_queue(Some(CodelParams::default()));
    let d1 = dropped.get(&1).copied().unwrap_or(0);
    assert!(d1 > 0, "the standing queue is dropped from");
    assert_eq!(dropped.get(&2), None, "the sparse flow is never dropped: {dropped:?}");
    assert_eq!(stats.drops_codel, d1 as u64);
    assert_eq!(stats.dequeued as usize, sent);
    // Conservation: every packet accepted was sent, dropped or is still queued.
    assert_eq!(stats.enqueued as usize, sent + d1 + backlog);
    // Without CoDel the same run drops nothing.
    let (dropped, stats, _, _) = standing_queue(None);
    assert!(dropped.is_empty() && stats.drops_codel == 0);
}

#[test]
fn codel_in_a_class_marks_an_ect_standing_queue_instead_of_dropping() {
    // QDS-demand's per-flow CoDel with `queue.ecn` (RFC 8290 §5.2.7 as in FQ-CoDel): the
    // standing queue of an ECN-capable flow is marked at the head and loses nothing; a
    // not-ECT flow in the same class still loses packets.
    use crate::qdisc::test_item::E;
    let codel = CodelParams { ecn: true, ..CodelParams::default() };
    let mut q = Classes::new(&[rate(10.0, 10.0)], 1514, NO_LIMIT).with_codel(Some(codel));
    let mut drops = Vec::new();
    for id in 0..300 {
        q.enqueue(Instant::ZERO, E(id, 1500, 1, true, false), &mut drops);
        q.enqueue(Instant::ZERO, E(1000 + id, 1500, 2, false, false), &mut drops);
    }
    let (mut t, mut marks) = (Instant::ZERO, 0);
    while t < Instant::from_nanos(400_000_000) {
        let p = q.dequeue(t).expect("backlogged, and the class may use the whole link");
        marks += p.4 as u64;
        assert!(!p.4 || p.2 == 1, "only the ECT flow is marked");
        t += Duration::transmission(p.1 as u64, LINK);
        q.take_drops(&mut drops);
    }
    assert!(marks > 0, "the ECT flow is marked");
    assert!(!drops.is_empty() && drops.iter().all(|d| d.packet.2 == 2), "only the not-ECT flow is dropped");
    assert_eq!(q.stats().marks_ce, marks);
    assert_eq!(q.stats().drops_codel, drops.len() as u64);
}

//! FQ-CoDel against RFC 8290 and CoDel against RFC 8289, on virtual time.

use super::*;
use crate::time::Duration;
use proptest::prelude::*;

use crate::qdisc::test_item::F;

fn ms(x: u64) -> Instant {
    Instant::from_nanos(x * 1_000_000)
}

fn fq(limits: Limits) -> FqCodel<F> {
    FqCodel::new(FqCodelParams::default(), limits)
}

const NO_LIMIT: Limits = Limits { bytes: None, packets: None };

#[test]
fn a_sparse_flow_goes_before_a_backlogged_bulk_flow() {
    let mut q = fq(NO_LIMIT);
    assert_ne!(q.bucket(1), q.bucket(2), "the test needs the two flows in different queues");
    let mut drops = Vec::new();
    for i in 0..20 {
        q.enqueue(Instant::ZERO, F(i, 500, 1), &mut drops);
    }
    // The bulk flow spends its first quantum (1514 bytes: four 500-byte packets) …
    let first: Vec<u32> = (0..4).filter_map(|_| q.dequeue(Instant::ZERO)).map(|p| p.0).collect();
    assert_eq!(first, [0, 1, 2, 3]);
    // … when a packet of a new (sparse) flow arrives behind 16 bulk packets …
    q.enqueue(Instant::ZERO, F(100, 100, 2), &mut drops);
    // … and leaves next (RFC 8290 §4.3: new flows are served first).
    assert_eq!(q.dequeue(Instant::ZERO).map(|p| p.0), Some(100), "RFC 8290 §4.2: new_flows first");
    // Having emptied its queue while new, flow 2 moves to the old list (§4.2) behind the
    // bulk flow (which starts its second quantum: packet 4), rather than off the lists.
    assert_eq!(q.dequeue(Instant::ZERO).map(|p| p.0), Some(4));
    assert_eq!(
        q.queues[q.bucket(2)].list,
        List::Old,
        "RFC 8290 §4.2: an emptied new flow moves to old_flows"
    );
    // So its next packet waits for the bulk flow's quantum to end (packets 5, 6)
    // instead of cutting in as a new flow again.
    q.enqueue(Instant::ZERO, F(101, 100, 2), &mut drops);
    let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(Instant::ZERO)).map(|p| p.0).collect();
    assert_eq!(order[..3], [5, 6, 101], "flow 2 is old now: the bulk flow finishes its quantum first");
    assert!(drops.is_empty());
}

#[test]
fn drr_shares_bytes_fairly_among_backlogged_flows() {
    let mut q = fq(NO_LIMIT);
    let mut drops = Vec::new();
    // Three flows with different packet sizes, each with plenty queued.
    let sizes = [1500u32, 576, 64];
    for (f, &len) in sizes.iter().enumerate() {
        for i in 0..(300_000 / len) {
            q.enqueue(Instant::ZERO, F(i, len, f as u64 + 10), &mut drops);
        }
    }
    let mut bytes = [0u64; 3];
    for _ in 0..2000 {
        let p = q.dequeue(Instant::ZERO).expect("backlogged");
        bytes[(p.2 - 10) as usize] += p.1 as u64;
    }
    let (lo, hi) = (bytes.iter().min().unwrap(), bytes.iter().max().unwrap());
    // DRR: after any number of rounds, two backlogged flows differ by less than one
    // quantum plus one packet (RFC 8290 §4.2.1; Shreedhar & Varghese).
    assert!(hi - lo <= 1514 + 1500, "bytes per flow {bytes:?}");
}

/// One bulk flow drained at 1 packet/ms from a backlog queued at 0: the sojourn time is
/// the dequeue time, above target from 5 ms on.
#[test]
fn codel_drops_at_the_head_after_an_interval_above_target_then_at_interval_over_sqrt_count() {
    let mut q = fq(NO_LIMIT);
    let mut drops = Vec::new();
    for i in 0..600 {
        q.enqueue(Instant::ZERO, F(i, 1500, 1), &mut drops);
    }
    let mut drop_times = Vec::new();
    let mut sent = Vec::new();
    for t in 1..=400 {
        let p = q.dequeue(ms(t)).expect("backlogged");
        sent.push(p.0);
        q.take_drops(&mut drops);
        for d in drops.drain(..) {
            assert_eq!(d.reason, DropReason::Codel);
            drop_times.push((t, d.packet.0));
        }
    }
    // Sojourn reaches target (5 ms) at t = 5: first_above_time = 105 ms (RFC 8289 §5.4).
    // The first drop is at 105 ms, of the head packet, and the packet behind it is sent.
    assert_eq!(drop_times[0].0, 105, "RFC 8289 §4.3: drop after one interval above target");
    assert_eq!(drop_times[0].1, 104, "the head is dropped (ids 0..103 were sent at 1..104 ms)");
    assert_eq!(sent[104], 105, "the packet behind the dropped head leaves instead");
    // Control law (RFC 8289 §5.5): drop_next = 105 + 100/√1; then + 100/√2 = 70.7 ms.
    assert_eq!(drop_times[1].0, 205, "second drop one interval later (count = 1)");
    assert_eq!(drop_times[2].0, 276, "third drop interval/√2 later: 205 + 70.7 ms");
    let third_gap = 100.0 / 3f64.sqrt();
    assert_eq!(drop_times[3].0, (275.71 + third_gap).ceil() as u64, "then interval/√3");
    assert!(q.dropping(1));
    assert_eq!(q.stats().drops_codel, drop_times.len() as u64);
    assert_eq!(q.backlog_packets() as u64, 600 - 400 - drop_times.len() as u64);
}

#[test]
fn codel_leaves_the_dropping_state_when_sojourn_falls_below_target() {
    let mut q = fq(NO_LIMIT);
    let mut drops = Vec::new();
    for i in 0..200 {
        q.enqueue(Instant::ZERO, F(i, 1500, 1), &mut drops);
    }
    for t in 1..=110 {
        q.dequeue(ms(t)).expect("backlogged");
    }
    assert!(q.dropping(1), "above target for an interval since 5 ms: dropping at 105 ms");
    // Fresh packets join behind the old ones; the old ones leave at once (no drop is due
    // before 205 ms).
    for i in 0..10 {
        q.enqueue(ms(110), F(1000 + i, 1500, 1), &mut drops);
    }
    while q.dequeue(ms(110)).is_some_and(|p| p.0 < 1000) {}
    // That loop took fresh packet 1000; the next has a sojourn of 1 ms < target.
    assert_eq!(q.dequeue(ms(111)).map(|p| p.0), Some(1001));
    assert!(!q.dropping(1), "RFC 8289 §5.5: sojourn < target leaves the dropping state");
    assert!(q.backlog_packets() >= 2, "left the state on sojourn time, not on an empty queue");
    q.take_drops(&mut drops);
    assert_eq!(drops.len(), 1, "one drop only, at 105 ms");
}

#[test]
fn codel_reuses_the_drop_rate_when_dropping_resumes_soon() {
    // RFC 8289 §5.6: count restarts from count − lastcount when the dropping state is
    // re-entered within 16 intervals of the last drop_next.
    let p = CodelParams::default();
    let mut c = Codel::default();
    let mut queue = VecDeque::new();
    let mut bytes = 0u64;
    let mut dropped = Vec::new();
    for i in 0..2000 {
        queue.push_back(Stamped { packet: F(i, 1500, 1), enqueued: Instant::ZERO });
        bytes += 1500;
    }
    // Dropping from 105 ms until 600 ms: count grows to several.
    for t in 1..=600 {
        c.dequeue(&p, ms(t), &mut queue, &mut bytes, &mut dropped, &mut 0);
    }
    let count_before = c.count();
    assert!(count_before >= 5, "count {count_before}");
    // Leave the state: fresh packets below target.
    queue.clear();
    bytes = 0;
    for i in 0..300 {
        queue.push_back(Stamped { packet: F(5000 + i, 1500, 1), enqueued: ms(600) });
        bytes += 1500;
    }
    c.dequeue(&p, ms(601), &mut queue, &mut bytes, &mut dropped, &mut 0);
    assert!(!c.dropping());
    // At target again at 605 ms (sojourn 5 ms): dropping resumes at 705 ms with
    // count = count − lastcount (lastcount was 1).
    for t in 602..=706 {
        c.dequeue(&p, ms(t), &mut queue, &mut bytes, &mut dropped, &mut 0);
    }
    assert!(c.dropping());
    assert_eq!(c.count(), count_before - 1, "RFC 8289 §5.6: count − lastcount");
}

#[test]
fn overflow_drops_the_head_of_the_fattest_flow() {
    let mut q = fq(Limits { bytes: None, packets: Some(10) });
    let mut drops = Vec::new();
    for i in 0..8 {
        q.enqueue(Instant::ZERO, F(i, 1000, 1), &mut drops);
    }
    for i in 0..2 {
        q.enqueue(Instant::ZERO, F(100 + i, 1500, 2), &mut drops);
    }
    assert!(drops.is_empty());
    // Flow 2 is not the fattest (3000 vs 8000 bytes): its arrival stays, flow 1's head goes.
    q.enqueue(Instant::ZERO, F(102, 1500, 2), &mut drops);
    assert_eq!(drops.len(), 1);
    assert_eq!((drops[0].packet.0, drops[0].reason), (0, DropReason::Overflow), "RFC 8290 §4.1");
    assert_eq!(q.backlog_packets(), 10);
    assert_eq!(q.stats().drops_overflow, 1);
}

proptest! {
    /// Limits hold, every packet offered is sent, dropped or still queued, and the
    /// byte count matches the queued packets.
    #[test]
    fn conserves_packets_and_respects_limits(
        ops in proptest::collection::vec((any::<bool>(), 0u64..6, 0u32..1500, 0u64..3), 1..600),
        lb in 3000u64..30_000, lp in 1usize..40, flows in 1u32..8)
    {
        let params = FqCodelParams { flows, ..FqCodelParams::default() };
        let mut q = FqCodel::new(params, Limits { bytes: Some(lb), packets: Some(lp) });
        let mut drops = Vec::new();
        let (mut offered, mut out, mut out_bytes, mut in_bytes) = (0u64, 0u64, 0u64, 0u64);
        let mut t = Instant::ZERO;
        for (i, (enq, flow, len, dt_ms)) in ops.into_iter().enumerate() {
            t += Duration::from_millis(dt_ms * 20);
            if enq {
                offered += 1;
                in_bytes += len as u64;
                q.enqueue(t, F(i as u32, len, flow), &mut drops);
            } else if let Some(p) = q.dequeue(t) {
                out += 1;
                out_bytes += p.1 as u64;
            }
            q.take_drops(&mut drops);
            prop_assert!(q.backlog_bytes() <= lb);
            prop_assert!(q.backlog_packets() <= lp);
        }
        let dropped_bytes: u64 = drops.iter().map(|d| d.packet.1 as u64).sum();
        prop_assert_eq!(offered, out + drops.len() as u64 + q.backlog_packets() as u64);
        prop_assert_eq!(in_bytes, out_bytes + dropped_bytes + q.backlog_bytes());
        let s = q.stats();
        prop_assert_eq!(s.drops_codel + s.drops_overflow, drops.len() as u64);
        // Draining empties it.
        let mut left = 0;
        while q.dequeue(t).is_some() {
            left += 1;
        }
        q.take_drops(&mut drops);
        prop_assert_eq!(q.backlog_packets(), 0);
        prop_assert_eq!(q.backlog_bytes(), 0);
        prop_assert_eq!(offered, out + left + drops.len() as u64);
    }
}

mod ecn {
    //! CoDel with ECN (RFC 8289 §5, RFC 8290 §5.2.7): marks where it would drop, on
    //! ECN-capable packets only.
    use super::*;
    use crate::qdisc::test_item::E;
    use std::collections::BTreeMap;

    fn ecn_fq() -> FqCodel<E> {
        let codel = CodelParams { ecn: true, ..CodelParams::default() };
        FqCodel::new(FqCodelParams { codel, ..FqCodelParams::default() }, NO_LIMIT)
    }

    #[test]
    fn an_ect_standing_queue_is_marked_on_the_drop_schedule_and_nothing_is_dropped() {
        let mut q = ecn_fq();
        let mut drops = Vec::new();
        for i in 0..600 {
            q.enqueue(Instant::ZERO, E(i, 1500, 1, true, false), &mut drops);
        }
        let mut marks = Vec::new();
        for t in 1..=400 {
            let p = q.dequeue(ms(t)).expect("backlogged");
            assert_eq!(p.0 as u64, t - 1, "nothing is dropped: packets leave in order");
            if p.4 {
                marks.push(t);
            }
            q.take_drops(&mut drops);
        }
        assert!(drops.is_empty(), "RFC 8290 §5.2.7: an ECT packet is marked, not dropped");
        // The control law of the drop test (RFC 8289 §5.5): 105, 205, 205 + 100/√2, + 100/√3.
        assert_eq!(marks[..4], [105, 205, 276, (275.71 + 100.0 / 3f64.sqrt()).ceil() as u64]);
        assert_eq!(q.stats().marks_ce, marks.len() as u64);
        assert_eq!(q.stats().drops_codel, 0);
        assert!(q.dropping(1), "still in the dropping (marking) state");
    }

    #[test]
    fn ect_flows_are_marked_and_not_ect_flows_dropped() {
        let mut q = ecn_fq();
        assert_ne!(q.bucket(1), q.bucket(2));
        let mut drops = Vec::new();
        for i in 0..400 {
            q.enqueue(Instant::ZERO, E(i, 1500, 1, true, false), &mut drops);
            q.enqueue(Instant::ZERO, E(1000 + i, 1500, 2, false, false), &mut drops);
        }
        let mut marked: BTreeMap<u64, u64> = BTreeMap::new();
        for t in 1..=500 {
            if let Some(p) = q.dequeue(ms(t)) {
                *marked.entry(p.2).or_default() += p.4 as u64;
            }
            q.take_drops(&mut drops);
        }
        let dropped_flows: Vec<u64> = drops.iter().map(|d| d.packet.2).collect();
        assert!(!dropped_flows.is_empty(), "the not-ECT flow is dropped from");
        assert!(dropped_flows.iter().all(|&f| f == 2), "only the not-ECT flow loses packets");
        assert!(marked[&1] > 0, "the ECT flow is marked");
        assert_eq!(marked.get(&2).copied().unwrap_or(0), 0, "a not-ECT packet is never marked");
        assert_eq!(q.stats().marks_ce, marked[&1]);
        assert_eq!(q.stats().drops_codel, drops.len() as u64);
    }

    #[test]
    fn without_the_ecn_key_an_ect_packet_is_dropped() {
        let mut q: FqCodel<E> = FqCodel::new(FqCodelParams::default(), NO_LIMIT);
        let mut drops = Vec::new();
        for i in 0..300 {
            q.enqueue(Instant::ZERO, E(i, 1500, 1, true, false), &mut drops);
        }
        for t in 1..=300 {
            let p = q.dequeue(ms(t));
            assert!(p.is_none_or(|p| !p.4), "no marks with ecn off");
            q.take_drops(&mut drops);
        }
        assert!(!drops.is_empty());
        assert_eq!(q.stats().marks_ce, 0);
    }

    #[test]
    fn overflow_still_drops_an_ect_packet() {
        let codel = CodelParams { ecn: true, ..CodelParams::default() };
        let mut q = FqCodel::new(
            FqCodelParams { codel, ..FqCodelParams::default() },
            Limits { bytes: None, packets: Some(3) },
        );
        let mut drops = Vec::new();
        for i in 0..5 {
            q.enqueue(Instant::ZERO, E(i, 1000, 1, true, false), &mut drops);
        }
        assert_eq!(drops.len(), 2, "a full buffer drops whatever the packet's ECN bits");
        assert!(drops.iter().all(|d| d.reason == DropReason::Overflow));
    }
}

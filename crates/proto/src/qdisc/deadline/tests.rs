//! The deadline queue on virtual time: EDF order, no reordering inside a flow, work
//! conservation, the starvation bound, the full-buffer rule and CoDel on lateness.

use super::*;
use proptest::prelude::*;

use crate::qdisc::test_item::F;

const NO_LIMIT: Limits = Limits { bytes: None, packets: None };
const MS: fn(u64) -> Duration = Duration::from_millis;

fn at(ms: u64) -> Instant {
    Instant::ZERO + MS(ms)
}

/// Flow 1 has 5 ms of slack (video near its budget), flow 2 has 60 ms (data).
fn video_and_data(limits: Limits) -> Deadline<F> {
    let mut q = Deadline::new(limits);
    q.set_slacks(&[(1, MS(5)), (2, MS(60))], MS(100));
    q
}

#[test]
fn a_near_deadline_packet_goes_before_a_packet_with_slack() {
    let mut q = video_and_data(NO_LIMIT);
    let mut drops = Vec::new();
    // The data packet arrived first (due at 60 ms), the video one 10 ms later (due 15 ms).
    q.enqueue(at(0), F(0, 1500, 2), &mut drops);
    q.enqueue(at(10), F(1, 1500, 1), &mut drops);
    assert_eq!(q.dequeue(at(10)).map(|p| p.0), Some(1), "EDF: the video packet (due 15 ms) first");
    assert_eq!(q.dequeue(at(11)).map(|p| p.0), Some(0));
    // A video packet arriving after the data packet's deadline minus its slack goes after it.
    q.enqueue(at(20), F(2, 1500, 2), &mut drops); // due 80 ms
    q.enqueue(at(76), F(3, 1500, 1), &mut drops); // due 81 ms
    assert_eq!(q.dequeue(at(76)).map(|p| p.0), Some(2), "the data packet is due first now");
    assert!(drops.is_empty());
}

#[test]
fn unknown_flows_take_the_default_slack_and_equal_slacks_are_fifo() {
    let mut q = video_and_data(NO_LIMIT);
    let mut drops = Vec::new();
    q.enqueue(at(0), F(0, 100, 7), &mut drops); // default 100 ms: due 100
    q.enqueue(at(1), F(1, 100, 2), &mut drops); // due 61
    assert_eq!(q.dequeue(at(1)).map(|p| p.0), Some(1));
    q.set_slacks(&[], MS(0));
    q.enqueue(at(2), F(2, 100, 8), &mut drops); // due 2
    q.enqueue(at(3), F(3, 100, 9), &mut drops); // due 3
    let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(at(3)).map(|p| p.0)).collect();
    assert_eq!(order, [2, 3, 0], "same slack: arrival order; the old packet keeps its deadline");
}

#[test]
fn a_flow_is_never_reordered_when_its_slack_shrinks() {
    let mut q = video_and_data(NO_LIMIT);
    let mut drops = Vec::new();
    q.enqueue(at(0), F(0, 100, 2), &mut drops); // due 60
    q.set_slacks(&[(2, MS(0))], MS(100));
    q.enqueue(at(1), F(1, 100, 2), &mut drops); // due 1, behind its flow's head
    q.enqueue(at(1), F(2, 100, 1), &mut drops); // default: due 101
    let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(at(1)).map(|p| p.0)).collect();
    assert_eq!(order, [0, 1, 2], "the flow's head (due 60) goes first; its second packet follows");
}

/// A link at `rate_bps` with two flows kept backlogged: the urgent flow 1 (slack 0)
/// always has `urgent` packets queued, flow 2 (slack `slack2`) has one packet at a
/// time. Returns the longest wait of flow 2's packets and whether the link was ever
/// idle with packets queued.
fn urgent_against_one(slack2: Duration, urgent: usize) -> (Duration, bool) {
    let mut q = Deadline::new(NO_LIMIT);
    q.set_slacks(&[(1, Duration::ZERO), (2, slack2)], Duration::ZERO);
    let mut drops = Vec::new();
    let (mut t, mut id, mut queued1) = (Instant::ZERO, 0, 0);
    let mut flow2_since: Option<Instant> = None;
    let mut longest = Duration::ZERO;
    let mut idle = false;
    while t < at(2_000) {
        while queued1 < urgent {
            q.enqueue(t, F(id, 1500, 1), &mut drops);
            (id, queued1) = (id + 1, queued1 + 1);
        }
        if flow2_since.is_none() {
            q.enqueue(t, F(id, 1500, 2), &mut drops);
            id += 1;
            flow2_since = Some(t);
        }
        match q.dequeue(t) {
            Some(p) if p.2 == 1 => queued1 -= 1,
            Some(_) => {
                let since = flow2_since.take().expect("flow 2 had a packet queued");
                longest = longest.max(t - since);
            }
            None => idle = q.backlog_packets() > 0,
        }
        t += Duration::transmission(1500, 10_000_000); // 1.2 ms per packet
    }
    assert!(drops.is_empty());
    (longest, idle)
}

#[test]
fn no_flow_starves_behind_an_always_urgent_flow() {
    // Flow 1 is always backlogged and always due now; flow 2 has 50 ms of slack. Its
    // packets wait at most their slack plus what was queued by their deadline.
    let (longest, idle) = urgent_against_one(MS(50), 20);
    assert!(!idle, "work-conserving: never idle with packets queued");
    let bound = MS(50) + Duration::transmission(21 * 1500, 10_000_000);
    assert!(longest <= bound, "flow 2 waited {longest}, bound {bound}");
    assert!(longest >= MS(40), "and it did wait about its slack: {longest}");
}

#[test]
fn the_full_buffer_drops_the_head_of_the_fattest_flow_not_a_thin_one() {
    let mut q = video_and_data(Limits { bytes: None, packets: Some(3) });
    let mut drops = Vec::new();
    q.enqueue(at(0), F(0, 1500, 1), &mut drops); // video, due 5
    q.enqueue(at(0), F(1, 1500, 1), &mut drops); // video, due 5
    q.enqueue(at(0), F(2, 1500, 2), &mut drops); // data, due 60
                                                 // A packet of a flow not yet timed: the default slack (100 ms), the latest deadline of
                                                 // all. It is queued; the fattest flow (video) loses its head (RFC 8290 §4.1).
    q.enqueue(at(1), F(3, 1500, 7), &mut drops);
    assert_eq!(drops.iter().map(|d| (d.packet.0, d.reason)).collect::<Vec<_>>(), [(0, DropReason::Overflow)]);
    assert_eq!(q.stats().drops_overflow, 1);
    let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(at(2)).map(|p| p.0)).collect();
    assert_eq!(order, [1, 2, 3], "EDF among what is left; the thin flow's packet is sent");
    // A packet larger than the whole buffer is refused.
    let mut small = Deadline::new(Limits { bytes: Some(1000), packets: None });
    small.enqueue(at(0), F(9, 1500, 1), &mut drops);
    assert_eq!(drops.last().map(|d| d.packet.0), Some(9));
    assert_eq!(small.backlog_packets(), 0);
}

/// One flow with `slack`, one packet per ms in, one per ms out from 20 ms on: a
/// standing queue of 20 ms. CoDel's drops over 400 ms.
fn codel_drops_with_standing_queue(slack: Duration) -> Vec<Dropped<F>> {
    let mut q = Deadline::new(NO_LIMIT).with_codel(Some(CodelParams::default())); // 5 ms, 100 ms
    q.set_slacks(&[(1, slack)], Duration::ZERO);
    let mut drops = Vec::new();
    for ms in 0..400u64 {
        q.enqueue(at(ms), F(ms as u32, 1500, 1), &mut drops);
        if ms >= 20 {
            q.dequeue(at(ms));
            q.take_drops(&mut drops);
        }
    }
    assert_eq!(q.stats().drops_codel as usize, drops.len());
    drops
}

#[test]
fn codel_drops_only_a_flow_that_keeps_missing_its_deadline() {
    // No slack: its packets leave 20 ms after their deadlines, for longer than an interval.
    let late = codel_drops_with_standing_queue(Duration::ZERO);
    assert!(!late.is_empty(), "the late flow is dropped from");
    assert!(late.iter().all(|d| d.reason == DropReason::Codel));
    // 60 ms of slack: the same 20-ms queue, but every packet leaves before its deadline.
    assert!(codel_drops_with_standing_queue(MS(60)).is_empty(), "a flow within its slack never is");
    // 16 ms of slack: 4 ms late, below CoDel's 5-ms target.
    assert!(codel_drops_with_standing_queue(MS(16)).is_empty());
}

proptest! {
    /// Whatever the arrivals and slacks: every packet leaves once, a flow's packets
    /// leave in arrival order, the queue sends whenever it holds packets, and among the
    /// flows' heads it sends the earliest deadline.
    #[test]
    fn edf_over_flow_heads(ops in prop::collection::vec((0u64..4, 0u64..50, any::<bool>()), 1..200)) {
        let mut q = Deadline::new(NO_LIMIT);
        q.set_slacks(&[(0, MS(0)), (1, MS(10)), (2, MS(30))], MS(45));
        let mut drops = Vec::new();
        let mut heads: BTreeMap<u64, VecDeque<(u32, Instant)>> = BTreeMap::new();
        let mut t = Instant::ZERO;
        for (id, (flow, gap, send)) in ops.into_iter().enumerate() {
            t += Duration::from_micros(gap * 100);
            let due = t + q.slack_of(flow);
            q.enqueue(t, F(id as u32, 1000, flow), &mut drops);
            heads.entry(flow).or_default().push_back((id as u32, due));
            if send {
                let p = q.dequeue(t).expect("work-conserving: a queued packet is sent");
                let earliest = heads.values().filter_map(|h| h.front()).map(|&(_, d)| d).min();
                let h = heads.get_mut(&p.2).expect("a queued flow");
                let (want, due) = h.pop_front().expect("its head");
                prop_assert_eq!(p.0, want, "a flow's packets leave in order");
                prop_assert_eq!(Some(due), earliest, "the earliest head deadline goes");
                heads.retain(|_, h| !h.is_empty());
            }
        }
        let left: usize = heads.values().map(|h| h.len()).sum();
        prop_assert_eq!(q.backlog_packets(), left);
        prop_assert!(drops.is_empty());
    }
}

//! The gap rule on hand-built packet sequences: every count, α, β and mean worked out in
//! the comments.

use super::*;

const GAP: Duration = Duration::from_micros(6_300);

fn ms(x: f64) -> Instant {
    Instant::from_nanos((x * 1e6).round() as u64)
}

/// Feeds (ms, bytes) response packets; returns the pooled statistics, the connection's
/// counts and the closed flows in order.
fn run(packets: &[(f64, u32)]) -> (Pooled, ConnCounts, Vec<ClosedFlow>) {
    let mut pooled = Pooled::default();
    let mut rule = GapRule::new(GAP);
    let mut closed: Vec<ClosedFlow> =
        packets.iter().filter_map(|&(t, b)| rule.push(ms(t), b, &mut pooled)).collect();
    closed.extend(rule.finish(&mut pooled));
    (pooled, rule.counts(), closed)
}

/// A = I{100} @0; B = B{200,1000,1000} @10, 11, 12; C = I{50} @100; D = I{60} @200;
/// E = B{70,900} @300, 301.
const SEQ: [(f64, u32); 8] = [
    (0.0, 100),
    (10.0, 200),
    (11.0, 1000),
    (12.0, 1000),
    (100.0, 50),
    (200.0, 60),
    (300.0, 70),
    (301.0, 900),
];

#[test]
fn flows_and_transitions_of_a_hand_built_sequence() {
    let (p, c, closed) = run(&SEQ);
    let kinds: Vec<(FlowKind, u32)> = closed.iter().map(|f| (f.kind, f.packets)).collect();
    use FlowKind::{Bulk as B, Interactive as I};
    assert_eq!(kinds, [(I, 1), (B, 3), (I, 1), (I, 1), (B, 2)]);
    // A→B IB, B→C BI, C→D II, D→E IB.
    assert_eq!(p.transitions, [1, 2, 1, 0]);
    assert_eq!(c.transitions, p.transitions);
    assert_eq!(c.flows, [3, 2]);
    assert_eq!(p.alpha(), Some(2.0 / 3.0), "α = IB / (II + IB) = 2/3");
    assert_eq!(p.beta(), Some(1.0), "β = BI / (BI + BB) = 1/1");
}

#[test]
fn gaps_are_start_to_start() {
    let (p, _, _) = run(&SEQ);
    let g = |t: Transition| &p.gaps[t.index()];
    // IB: A@0→B@10 and D@200→E@300: 10 + 100 ms.
    assert_eq!((g(Transition::IB).n, g(Transition::IB).sum_ns), (2, 110_000_000));
    // BI: B@10→C@100 (start to start, not end to start: 90 ms, not 88).
    assert_eq!(g(Transition::BI).sum_ns, 90_000_000);
    assert_eq!(g(Transition::II).sum_ns, 100_000_000);
    assert_eq!(g(Transition::BB).n, 0);
    assert!((g(Transition::IB).mean_s().unwrap() - 0.055).abs() < 1e-12);
    // Σ ln for IB: ln 0.01 + ln 0.1.
    assert!((g(Transition::IB).sum_ln - (0.01f64.ln() + 0.1f64.ln())).abs() < 1e-9);
    assert!((g(Transition::IB).sum_ln2 - (0.01f64.ln().powi(2) + 0.1f64.ln().powi(2))).abs() < 1e-9);
}

#[test]
fn sizes_block_lengths_and_intra_block_gaps() {
    let (p, c, _) = run(&SEQ);
    assert_eq!((p.interactive_sizes.n, p.interactive_sizes.sum), (3, 210), "100 + 50 + 60");
    assert_eq!(p.interactive_sizes.counts[50], 1);
    assert_eq!((p.bulk_sizes.n, p.bulk_sizes.sum), (5, 3170), "200 + 2·1000 + 70 + 900");
    assert_eq!(p.bulk_sizes.counts[1000], 2);
    assert_eq!((p.block_lengths.n, p.block_lengths.sum), (2, 5));
    assert_eq!((p.block_lengths.counts[3], p.block_lengths.counts[2]), (1, 1));
    assert_eq!(p.block_lengths.mean(), Some(2.5), "c_B");
    // 10→11, 11→12, 300→301.
    assert_eq!((p.intra.n, p.intra.sum_ns), (3, 3_000_000));
    // Every consecutive pair: 10, 1, 1, 88, 100, 100, 1 ms.
    assert_eq!((p.response.n, p.response.sum_ns), (7, 301_000_000));
    assert_eq!((c.packets, c.bytes), (8, 3380));
    assert_eq!(p.sessions.len(), 1);
    let s = p.sessions[0];
    assert_eq!((s.flows, s.bytes), (5, 3380));
    assert!((s.duration_s - 0.301).abs() < 1e-12);
}

#[test]
fn a_packet_exactly_one_gap_later_starts_a_new_flow() {
    // "Less than gap apart" joins; 6.3 ms apart does not (the source: "more than
    // 10^-2.2 s starts a new flow"; at equality we start one too).
    let (p, _, closed) = run(&[(0.0, 10), (6.3, 10), (6.3 + 6.299, 10)]);
    assert_eq!(closed.iter().map(|f| f.packets).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(p.transitions, [0, 1, 0, 0]);
}

#[test]
fn one_packet_gives_one_interactive_flow_and_no_transition() {
    let (p, c, closed) = run(&[(5.0, 42)]);
    assert_eq!(closed.len(), 1);
    assert_eq!((c.flows, p.transitions, p.alpha(), p.beta()), ([1, 0], [0; 4], None, None));
    assert_eq!(p.sessions[0].duration_s, 0.0);
}

#[test]
fn time_stepping_back_is_a_zero_gap() {
    // Merged interfaces: 5.0 then 4.9 ms. The second joins the block with a 0 gap,
    // counted below 1 µs and clamped to 1 µs for the logarithms.
    let (p, _, _) = run(&[(5.0, 1), (4.9, 1)]);
    assert_eq!((p.intra.n, p.intra.sum_ns, p.intra.below_min), (1, 0, 1));
    assert!((p.intra.sum_ln - 1e-6f64.ln()).abs() < 1e-12);
    assert_eq!(p.intra.counts[0], 1);
}

#[test]
fn requests_have_their_own_inter_arrival() {
    let mut pooled = Pooled::default();
    let mut rule = GapRule::new(GAP);
    for t in [0.0, 2.0, 502.0] {
        rule.push_request(ms(t), &mut pooled);
    }
    assert_eq!((pooled.request.n, pooled.request.sum_ns), (2, 502_000_000));
    assert_eq!(pooled.response.n, 0);
}

#[test]
fn bins_follow_the_computed_edges() {
    let edges = bin_edges_s();
    assert_eq!(edges.len(), HIST_BINS + 1);
    assert!((edges[0] - 1e-6).abs() < 1e-18 && (edges[HIST_BINS] - 1e4).abs() < 1e-8);
    // Values spread over the range, away from the edges by more than rounding.
    let mut x = 1.37e-6;
    while x < 9e3 {
        let mut h = LogHist::default();
        h.add(Duration::from_secs_f64(x));
        let k = h.counts.iter().position(|&c| c == 1).unwrap();
        assert!(edges[k] <= x * (1.0 + 1e-9) && x < edges[k + 1] * (1.0 + 1e-9), "{x} in bin {k}");
        x *= 1.173;
    }
    let mut h = LogHist::default();
    h.add(Duration::from_secs(20_000));
    assert_eq!(h.counts[HIST_BINS - 1], 1, "beyond 10⁴ s: last bin");
}

#[test]
fn long_blocks_overflow_into_a_list() {
    let mut b = BlockLengths::default();
    b.add(2);
    b.add(4096);
    b.add(5000);
    assert_eq!((b.counts[4096], b.overflow.as_slice(), b.n, b.sum), (1, &[5000u32][..], 3, 9098));
}

#[test]
fn merging_histograms_adds_everything() {
    let (mut a, _, _) = run(&SEQ);
    let (b, _, _) = run(&SEQ);
    let before = a.response.clone();
    a.response.merge(&b.response);
    assert_eq!(a.response.n, 2 * before.n);
    assert_eq!(a.response.sum_ns, 2 * before.sum_ns);
    assert_eq!(a.response.counts.iter().sum::<u64>(), 2 * before.n);
}

//! Sequence-space bookkeeping: new, out-of-order and retransmitted segments.

use super::*;

#[test]
fn in_order_segments_are_new() {
    let mut s = SeqTrack::default();
    assert_eq!(s.classify(1000, 100, false), SeqClass::New);
    assert_eq!(s.classify(1100, 100, false), SeqClass::New);
    assert_eq!(s.classify(1100, 100, false), SeqClass::Retransmission, "the same range again");
    assert_eq!(s.classify(1150, 50, false), SeqClass::Retransmission, "a part of a range seen");
}

#[test]
fn an_overtaken_segment_is_out_of_order_once() {
    let mut s = SeqTrack::default();
    s.classify(0, 100, false);
    // 100..200 is overtaken by 200..300: a hole.
    assert_eq!(s.classify(200, 100, false), SeqClass::New);
    assert_eq!(s.classify(100, 100, false), SeqClass::OutOfOrder, "fills the hole");
    assert_eq!(s.classify(100, 100, false), SeqClass::Retransmission, "the hole is gone");
}

#[test]
fn a_hole_filled_in_parts() {
    let mut s = SeqTrack::default();
    s.classify(0, 10, false);
    s.classify(40, 10, false); // hole 10..40
    assert_eq!(s.classify(20, 10, false), SeqClass::OutOfOrder); // holes 10..20, 30..40
    assert_eq!(s.classify(10, 10, false), SeqClass::OutOfOrder);
    assert_eq!(s.classify(30, 10, false), SeqClass::OutOfOrder);
    assert_eq!(s.classify(15, 20, false), SeqClass::Retransmission, "all seen now");
}

#[test]
fn a_segment_across_the_top_carries_new_bytes() {
    let mut s = SeqTrack::default();
    s.classify(0, 100, false);
    assert_eq!(s.classify(50, 100, false), SeqClass::New, "50..100 seen, 100..150 new");
    assert_eq!(s.classify(100, 50, false), SeqClass::Retransmission);
}

#[test]
fn sequence_numbers_wrap() {
    let mut s = SeqTrack::default();
    let top = u32::MAX - 49;
    s.classify(top, 100, false); // top .. 50 (wrapped)
    assert_eq!(s.classify(50, 10, false), SeqClass::New);
    assert_eq!(s.classify(u32::MAX - 9, 20, false), SeqClass::Retransmission);
}

#[test]
fn the_syn_takes_one_sequence_number() {
    let mut s = SeqTrack::default();
    s.advance(999, true, false); // SYN at 999: data from 1000
    assert_eq!(s.classify(1000, 10, false), SeqClass::New);
    let mut s = SeqTrack::default();
    s.advance(999, true, false);
    assert_eq!(s.classify(1001, 10, false), SeqClass::New);
    assert_eq!(s.classify(1000, 1, false), SeqClass::OutOfOrder, "byte 1000 was a hole");
}

#[test]
fn holes_are_bounded() {
    let mut s = SeqTrack::default();
    s.classify(0, 1, false);
    for k in 1..=(MAX_HOLES as u32 + 4) {
        s.classify(k * 10, 1, false);
    }
    assert_eq!(s.holes.len(), MAX_HOLES);
    // The oldest holes were forgotten: a segment there now counts as a retransmission.
    assert_eq!(s.classify(1, 1, false), SeqClass::Retransmission);
    assert_eq!(s.classify((MAX_HOLES as u32 + 4) * 10 - 5, 1, false), SeqClass::OutOfOrder);
}

#[test]
fn rtt_samples_thin_evenly_and_stay_bounded() {
    let mut r = RttSamples::default();
    for k in 0..(RTT_SAMPLES_MAX as u64 * 5) {
        r.push(Duration::from_micros(1000 + k % 100));
    }
    assert!(r.kept.len() < RTT_SAMPLES_MAX);
    assert_eq!(r.seen, RTT_SAMPLES_MAX as u64 * 5);
    let s = r.summary();
    // 1000 … 1099 µs uniformly: median ≈ 1.05 ms, p90 ≈ 1.09 ms.
    assert!((s.median_ms.unwrap() - 1.0495).abs() < 0.003, "{s:?}");
    assert!((s.p90_ms.unwrap() - 1.089).abs() < 0.003, "{s:?}");
}

#[test]
fn quantiles_interpolate() {
    assert_eq!(quantile(&[], 0.5), None);
    assert_eq!(quantile(&[1000], 0.9), Some(1.0));
    assert_eq!(quantile(&[1000, 2000, 3000, 4000], 0.5), Some(2.5));
    assert_eq!(quantile(&[0, 10_000], 0.9), Some(9.0));
}

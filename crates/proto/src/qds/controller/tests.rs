//! Hand-worked plans. With the defaults (m = 10, bounds 10, 20, …, 100 ms, α = 0.2,
//! ⌈m/2⌉ = 5) the class levels are l(c_1..c_10) = 1.8, 1.6, 1.4, 1.2, 1.0, 0.8, 0.6, 0.4,
//! 0.2 and max(0.0, l_floor = 0.1) = 0.1.

use super::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn flow(key: u32, app: AppType, rtt_ms: u64, mbps: f64) -> FlowInput<u32> {
    FlowInput { key, app, rtt: Duration::from_millis(rtt_ms), rate_bps: mbps * 1e6 }
}

fn with(variant: Variant) -> QdsConfig {
    QdsConfig { variant, ..QdsConfig::default() }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Rates agree with the expected Mbit/s to within 1 bit/s (the floor of w · capacity).
fn assert_rates(p: &Plan<u32>, expected_mbps: &[(usize, f64)], capacity: u64) {
    for (c, r) in p.rates.iter().enumerate() {
        let want = expected_mbps.iter().find(|(k, _)| *k == c).map_or(0.0, |(_, x)| x * 1e6);
        assert!((r.rate_bps as f64 - want).abs() <= 1.0, "class {c}: {} bit/s, want {want}", r.rate_bps);
        assert_eq!(r.ceil_bps, capacity, "class {c}: ceil = capacity (work-conserving)");
    }
}

#[test]
fn defaults_are_the_spec_s() {
    let c = QdsConfig::default();
    assert_eq!(c.period, Duration::from_millis(100));
    assert_eq!((c.alpha, c.beta, c.classes()), (0.2, 1.0, 10));
    assert_eq!(c.qt_of(AppType::Video), Duration::from_millis(50));
    assert_eq!(c.qt_of(AppType::Data), Duration::from_millis(100));
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn each_flow_goes_to_the_first_class_whose_bound_holds_its_budget() {
    let cfg = QdsConfig::default();
    let flows = [
        flow(1, AppType::Video, 45, 1.0), // DB = 50 − 45 = 5    → c_1 (≤ 10)
        flow(2, AppType::Video, 60, 1.0), // DB = −10 (overdue)  → c_1
        flow(3, AppType::Video, 30, 1.0), // DB = 20, on a bound → c_2 (≤ 20)
        flow(4, AppType::Video, 29, 1.0), // DB = 21             → c_3
        flow(5, AppType::Data, 20, 1.0),  // DB = 80             → c_8
        flow(6, AppType::Data, 0, 1.0),   // DB = 100            → c_10
    ];
    let p = plan(&cfg, &flows, 10_000_000);
    assert_eq!(p.class_of, vec![(1, 0), (2, 0), (3, 1), (4, 2), (5, 7), (6, 9)]);
    // Above the last bound: the last class.
    let mut cfg = QdsConfig::default();
    cfg.qt.insert(AppType::Data, Duration::from_millis(200));
    let p = plan(&cfg, &[flow(7, AppType::Data, 50, 1.0)], 10_000_000); // DB = 150
    assert_eq!(p.class_of, vec![(7, 9)]);
}

#[test]
fn delay_only_weights_by_hand() {
    // A: DB = 50 − 40 = 10 → c_1; B: DB = 50 − 20 = 30 → c_3; C: DB = 100 − 30 = 70 → c_7.
    // S = 10 + 30 + 70 = 110. Terms 1 − DB/S: A 100/110, B 80/110, C 40/110; sum 220/110.
    // Normalised: A 100/220, B 80/220, C 40/220 → of 11 Mbit/s: 5, 4 and 2 Mbit/s.
    let flows =
        [flow(1, AppType::Video, 40, 5.0), flow(2, AppType::Video, 20, 5.0), flow(3, AppType::Data, 30, 1.0)];
    let p = plan(&with(Variant::DelayOnly), &flows, 11_000_000);
    assert!(close(p.weights[0], 100.0 / 220.0) && close(p.weights[2], 80.0 / 220.0), "{:?}", p.weights);
    assert!(close(p.weights[6], 40.0 / 220.0));
    assert!(close(p.weights.iter().sum(), 1.0));
    assert_rates(&p, &[(0, 5.0), (2, 4.0), (6, 2.0)], 11_000_000);
}

#[test]
fn delay_only_with_one_budgeted_flow_still_serves_its_class() {
    // One flow: its term is 1 − DB/DB = 0, so every weight is 0; the class with flows gets
    // everything rather than nothing.
    let p = plan(&with(Variant::DelayOnly), &[flow(1, AppType::Data, 30, 1.0)], 1_000_000);
    assert_eq!(p.class_of, vec![(1, 6)]);
    assert_eq!(p.weights[6], 1.0);
    // Every budget spent (S = 0): each flow counts 1 (no 0/0); all are in c_1.
    let flows = [flow(1, AppType::Video, 60, 1.0), flow(2, AppType::Data, 150, 1.0)];
    let p = plan(&with(Variant::DelayOnly), &flows, 3_000_000);
    assert_eq!(p.class_of, vec![(1, 0), (2, 0)]);
    assert_eq!(p.weights[0], 1.0);
}

#[test]
fn bandwidth_aware_weights_by_hand() {
    // A: video, RTT 40 → DB 10 → c_1 (l 1.8), 5 Mbit/s; B: video, RTT 20 → DB 30 → c_3
    // (l 1.4), 5 Mbit/s; C: data, RTT 30 → DB 70 → c_7 (l 0.6), 1 Mbit/s; D: data, RTT 35
    // → DB 65 → c_7, 2 Mbit/s. min BR = 1 Mbit/s, β = 1.
    // w(c_1) = 5·1.8 = 9; w(c_3) = 5·1.4 = 7; w(c_7) = (1 + 2)·0.6 = 1.8; sum 17.8.
    // Of 17.8 Mbit/s: 9, 7 and 1.8 Mbit/s.
    let flows = [
        flow(1, AppType::Video, 40, 5.0),
        flow(2, AppType::Video, 20, 5.0),
        flow(3, AppType::Data, 30, 1.0),
        flow(4, AppType::Data, 35, 2.0),
    ];
    let p = plan(&with(Variant::BandwidthAware), &flows, 17_800_000);
    assert_eq!(p.class_of, vec![(1, 0), (2, 2), (3, 6), (4, 6)]);
    assert!(
        close(p.weights[0], 9.0 / 17.8) && close(p.weights[2], 7.0 / 17.8) && close(p.weights[6], 1.8 / 17.8)
    );
    assert_rates(&p, &[(0, 9.0), (2, 7.0), (6, 1.8)], 17_800_000);
}

#[test]
fn the_level_is_clamped_at_its_floor_so_the_last_class_never_starves() {
    let cfg = QdsConfig::default();
    let l: Vec<f64> = (0..10).map(|i| cfg.level(i)).collect();
    for (got, want) in l.iter().zip([1.8, 1.6, 1.4, 1.2, 1.0, 0.8, 0.6, 0.4, 0.2, 0.1]) {
        assert!(close(*got, want), "{l:?}");
    }
    // X: video RTT 40 → c_1 (1.8); Y: data RTT 0 → DB 100 → c_10 (printed l = 0 → 0.1).
    // Both 1 Mbit/s: Y's share = 0.1 / 1.9.
    let flows = [flow(1, AppType::Video, 40, 1.0), flow(2, AppType::Data, 0, 1.0)];
    let p = plan(&cfg, &flows, 1_900_000);
    assert!(close(p.weights[9], 0.1 / 1.9), "{:?}", p.weights);
    assert_rates(&p, &[(0, 1.8), (9, 0.1)], 1_900_000);
    // A higher floor lifts c_9 too: l = max(0.2, 0.3).
    let high = QdsConfig { l_floor: 0.3, ..QdsConfig::default() };
    assert!(close(high.level(8), 0.3) && close(high.level(9), 0.3) && close(high.level(7), 0.4));
}

#[test]
fn beta_changes_the_weights() {
    // A: video RTT 40 → c_1 (l 1.8), 4 Mbit/s; C: data RTT 30 → c_7 (l 0.6), 1 Mbit/s.
    // β = 0: 1.8 vs 0.6 → A 0.75.  β = 1: 4·1.8 = 7.2 vs 0.6 → A 7.2/7.8.
    // β = 2: 16·1.8 = 28.8 vs 0.6 → A 28.8/29.4. (β as a factor would give 7.2/7.8 every time.)
    let flows = [flow(1, AppType::Video, 40, 4.0), flow(2, AppType::Data, 30, 1.0)];
    let share = |beta| plan(&QdsConfig { beta, ..QdsConfig::default() }, &flows, 1_000_000).weights[0];
    assert!(close(share(0.0), 0.75));
    assert!(close(share(1.0), 7.2 / 7.8));
    assert!(close(share(2.0), 28.8 / 29.4));
}

#[test]
fn alpha_changes_the_weights() {
    // Same flows, α = 0: every level 1 → A 4/5. α = 0.1: l(c_1) = 1.4, l(c_7) = 0.8 → 5.6/6.4.
    let flows = [flow(1, AppType::Video, 40, 4.0), flow(2, AppType::Data, 30, 1.0)];
    let share = |alpha| plan(&QdsConfig { alpha, ..QdsConfig::default() }, &flows, 1_000_000).weights[0];
    assert!(close(share(0.0), 0.8));
    assert!(close(share(0.1), 5.6 / 6.4));
}

#[test]
fn demand_first_gives_urgent_classes_their_demand_out_of_what_qds_gave_beyond_others_needs() {
    // c = 20 Mbit/s; 2 video at 5 Mbit/s, RTT 45 → DB 5 → c_1 (l 1.8); 14 data at
    // 1 Mbit/s, RTT 30 → DB 70 → c_7 (l 0.6): 20 % overload.
    // Bandwidth-aware: w = 2·5·1.8 = 18 and 14·1·0.6 = 8.4 → video 18/26.4·20 = 13.636,
    // data 6.364 Mbit/s. Demands (×1.1): video 11.0, data 15.4.
    // Demand-first: video keeps min(13.636, 11.0) = 11.0, data min(6.364, 15.4); the pool
    // 20 − 17.364 = 2.636 goes to data (short 9.036) → data 9.0 Mbit/s. Nothing left.
    let mut flows = vec![flow(0, AppType::Video, 45, 5.0), flow(1, AppType::Video, 45, 5.0)];
    flows.extend((2..16).map(|k| flow(k, AppType::Data, 30, 1.0)));
    let qds = plan(&with(Variant::BandwidthAware), &flows, 20_000_000);
    assert!(close(qds.weights[0], 18.0 / 26.4));
    let df = plan(&with(Variant::DemandFirst), &flows, 20_000_000);
    assert!(close(df.weights[0], 0.55) && close(df.weights[6], 0.45), "{:?}", df.weights);
    assert_eq!(df.class_of, qds.class_of);
    assert_rates(&df, &[(0, 11.0), (6, 9.0)], 20_000_000);
}

#[test]
fn demand_first_under_light_load_covers_every_demand_and_shares_the_rest() {
    // c = 10; video 5 Mbit/s in c_1 (l 1.8), data 1 Mbit/s in c_7 (l 0.6).
    // Bandwidth-aware: 9 vs 0.6 → video 9.375, data 0.625 (below its 1 Mbit/s).
    // Demand-first: keep 5.5 and 0.625; pool 3.875 covers data's 0.475 → 1.1; the last
    // 3.4 by the shares 0.9375 / 0.0625: video 5.5 + 3.1875 = 8.6875, data 1.1 + 0.2125.
    let flows = [flow(1, AppType::Video, 45, 5.0), flow(2, AppType::Data, 30, 1.0)];
    let df = plan(&with(Variant::DemandFirst), &flows, 10_000_000);
    assert_rates(&df, &[(0, 8.6875), (6, 1.3125)], 10_000_000);
}

#[test]
fn demand_first_never_gives_a_class_less_than_qds_up_to_its_demand() {
    // The guarantee over many random mixes: r_k ≥ min(b_k, d_k); all demands met when
    // they fit; the rates fill the capacity.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(18);
    for _ in 0..500 {
        let n = rng.gen_range(1..30);
        let flows: Vec<FlowInput<u32>> = (0..n)
            .map(|k| {
                let app = AppType::ALL[rng.gen_range(0..4)];
                flow(k, app, rng.gen_range(0..120), rng.gen_range(0.0..6.0))
            })
            .collect();
        let cap = rng.gen_range(1..40) * 1_000_000u64;
        let cfg = with(Variant::DemandFirst);
        let df = plan(&cfg, &flows, cap).weights;
        let qds = plan(&with(Variant::BandwidthAware), &flows, cap).weights;
        let mut demand = vec![0.0; cfg.classes()];
        for (f, (_, c)) in flows.iter().zip(&plan(&cfg, &flows, cap).class_of) {
            demand[*c] += DEMAND_HEADROOM * f.rate_bps.max(RATE_FLOOR_BPS) / cap as f64;
        }
        assert!(close(df.iter().sum(), 1.0), "{df:?}");
        let fits = demand.iter().sum::<f64>() <= 1.0;
        for k in 0..cfg.classes() {
            assert!(
                df[k] >= qds[k].min(demand[k]) - 1e-9,
                "class {k}: {} < min({}, {})",
                df[k],
                qds[k],
                demand[k]
            );
            if fits {
                assert!(df[k] >= demand[k] - 1e-9, "class {k}: demand {} not met ({})", demand[k], df[k]);
            }
        }
    }
}

#[test]
fn no_flow_puts_everything_in_the_default_class() {
    for variant in [Variant::DelayOnly, Variant::BandwidthAware, Variant::DemandFirst] {
        let p = plan::<u32>(&with(variant), &[], 20_000_000);
        assert!(p.class_of.is_empty());
        assert_eq!(p.weights.len(), 10);
        assert_eq!(p.weights[9], 1.0, "{variant:?}");
        assert_eq!(p.weights.iter().sum::<f64>(), 1.0);
        assert_rates(&p, &[(9, 20.0)], 20_000_000);
    }
}

#[test]
fn idle_flows_count_at_the_rate_floor() {
    // A flow with no measured rate must not make every ratio infinite: BR = 1 kbit/s.
    // A: video, c_1, 0 bit/s → 1 kbit/s; B: data, c_7, 1 Mbit/s → ratio 1000.
    // w(c_1) = 1·1.8; w(c_7) = 1000·0.6 = 600.
    let flows = [flow(1, AppType::Video, 40, 0.0), flow(2, AppType::Data, 30, 1.0)];
    let p = plan(&QdsConfig::default(), &flows, 1_000_000);
    assert!(close(p.weights[0], 1.8 / 601.8), "{:?}", p.weights);
}

#[test]
fn validate_names_the_field() {
    let bad = |c: QdsConfig| c.validate().unwrap_err().field;
    let d = QdsConfig::default;
    assert_eq!(bad(QdsConfig { bounds: vec![], ..d() }), "bounds");
    assert_eq!(
        bad(QdsConfig { bounds: vec![Duration::from_millis(20), Duration::from_millis(20)], ..d() }),
        "bounds"
    );
    assert_eq!(bad(QdsConfig { alpha: f64::NAN, ..d() }), "alpha");
    assert_eq!(bad(QdsConfig { beta: -1.0, ..d() }), "beta");
    assert_eq!(bad(QdsConfig { l_floor: 0.0, ..d() }), "l_floor");
    assert_eq!(bad(QdsConfig { period: Duration::ZERO, ..d() }), "period");
    let mut c = d();
    c.qt.remove(&AppType::Audio);
    let e = c.validate().unwrap_err();
    assert_eq!((e.field, e.to_string().as_str()), ("qt", "qds qt: no threshold for audio"));
}

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
fn demand_first_guarantees_each_flow_its_max_min_fair_share_of_the_demands() {
    // c = 20 Mbit/s; 3 video measured at 5 Mbit/s, RTT 45 → DB 5 → c_1; 9 data at
    // 1 Mbit/s, RTT 30 → DB 70 → c_7: the [3:9] mix, 20 % overload.
    // Demands (×1.1): video 5.5 each, data 1.1 each. Water-filling: 20/12 = 1.667 > 1.1,
    // so every data flow gets its 1.1 (9.9 in all); the 10.1 left over 3 video flows is
    // 3.367 each < 5.5, so λ = 3.367 and video's class gets 10.1.
    // (Bandwidth-aware: w = 3·5·1.8 = 27 vs 9·1·0.6 = 5.4 → data 3.33 Mbit/s.)
    let mut flows: Vec<_> = (0..3).map(|k| flow(k, AppType::Video, 45, 5.0)).collect();
    flows.extend((3..12).map(|k| flow(k, AppType::Data, 30, 1.0)));
    let qds = plan(&with(Variant::BandwidthAware), &flows, 20_000_000);
    assert_rates(&qds, &[(0, 20.0 * 27.0 / 32.4), (6, 20.0 * 5.4 / 32.4)], 20_000_000);
    let df = plan(&with(Variant::DemandFirst), &flows, 20_000_000);
    assert_eq!(df.class_of, qds.class_of);
    assert_rates(&df, &[(0, 10.1), (6, 9.9)], 20_000_000);
}

#[test]
fn demand_first_under_light_load_covers_every_demand_and_shares_the_rest() {
    // c = 10; video 5 Mbit/s in c_1 (l 1.8), data 1 Mbit/s in c_7 (l 0.6).
    // Demands 5.5 and 1.1 fit (6.6 ≤ 10): each class gets its demand, and the 3.4 left
    // goes by the bandwidth-aware shares 9/9.6 and 0.6/9.6: video 5.5 + 3.1875 = 8.6875,
    // data 1.1 + 0.2125 = 1.3125.
    let flows = [flow(1, AppType::Video, 45, 5.0), flow(2, AppType::Data, 30, 1.0)];
    let df = plan(&with(Variant::DemandFirst), &flows, 10_000_000);
    assert_rates(&df, &[(0, 8.6875), (6, 1.3125)], 10_000_000);
}

#[test]
fn demand_first_gives_every_flow_at_least_its_fair_share_of_its_demand() {
    // The guarantee over many random mixes: with λ the max-min level, class k gets at
    // least Σ_{f∈c_k} min(d_f, λ) ≥ Σ_{f∈c_k} min(d_f, capacity / n) — no flow is held
    // below an equal share of the link unless it asks for less; every demand is met
    // when they fit; the rates fill the capacity.
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
        let p = plan(&cfg, &flows, cap);
        let equal = 1.0 / n as f64;
        let mut floor = vec![0.0; cfg.classes()];
        let mut demand = vec![0.0; cfg.classes()];
        for (f, (_, c)) in flows.iter().zip(&p.class_of) {
            let d = DEMAND_HEADROOM * f.rate_bps.max(RATE_FLOOR_BPS) / cap as f64;
            floor[*c] += d.min(equal);
            demand[*c] += d;
        }
        assert!(close(p.weights.iter().sum(), 1.0), "{:?}", p.weights);
        let fits = demand.iter().sum::<f64>() <= 1.0;
        for k in 0..cfg.classes() {
            assert!(p.weights[k] >= floor[k] - 1e-9, "class {k}: {} < fair floor {}", p.weights[k], floor[k]);
            if fits {
                assert!(p.weights[k] >= demand[k] - 1e-9, "class {k}: demand {} not met", demand[k]);
            }
        }
    }
}

#[test]
fn the_fair_level_is_water_filling() {
    // 10 over demands 1, 2, 8, 9: 1 and 2 fit; 7 left for two → λ = 3.5.
    assert!(close(fair_level(&[8.0, 1.0, 9.0, 2.0], 10.0), 3.5));
    // Everything fits: no level.
    assert_eq!(fair_level(&[1.0, 2.0], 10.0), f64::INFINITY);
    // Equal demands above the equal share: λ = cap / n.
    assert!(close(fair_level(&[5.0, 5.0, 5.0, 5.0], 10.0), 2.5));
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

#[test]
fn the_deadline_slack_is_qt_less_the_base_rtt_the_least_estimate_so_far() {
    let ms = Duration::from_millis;
    let mut base = BaseRtt::default();
    // Flow 1's estimates: 30 ms (a queue builds), then 18, then 40 again: the base is 18.
    assert_eq!(base.update([(1u32, ms(30)), (2, ms(15))]), [(1, ms(30)), (2, ms(15))]);
    assert_eq!(base.update([(1, ms(18)), (2, ms(25))]), [(1, ms(18)), (2, ms(15))]);
    assert_eq!(base.update([(1, ms(40))]), [(1, ms(18))], "flow 2 not seen this period: forgotten");
    assert_eq!(base.update([(2, ms(25))]), [(2, ms(25))], "so it starts afresh");
    let cfg = QdsConfig::default();
    assert_eq!(cfg.slack(AppType::Video, ms(18)), ms(32), "50 − 18 ms");
    assert_eq!(cfg.slack(AppType::Data, ms(15)), ms(85), "100 − 15 ms");
    assert_eq!(cfg.slack(AppType::Video, ms(70)), Duration::ZERO, "a path beyond QT: due at once");
    assert_eq!(cfg.default_slack(), ms(100), "untimed flows: the last class's DB_max");
    let f = flow(1, AppType::Video, 35, 5.0);
    assert_eq!(cfg.budget_ns(&f), 15_000_000, "DB = QT − RTT, as plan uses it");
}

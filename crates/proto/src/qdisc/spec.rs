//! The `[queue]` keys, the checked [`QueueSpec`] and the one factory.
//!
//! [`QueueKeys`] is what the scenario's `[queue]` section and thinwan-link's
//! `queue` object spell (docs/scenario.md, docs/lab.md; Python mirrors it in
//! `QueueSection`); [`QueueSpec::try_from`] checks every value once, naming the key,
//! and [`QueueSpec::build`] makes the discipline for a link of a given rate.

use super::*;
use crate::time::Duration;
use serde::{Deserialize, Serialize};

/// The gap classifier's default threshold, 10^−2.2 s (Ogawa §1), in ms.
/// The scenario's default is Python's (`QueueSection`, docs/scenario.md); this one
/// serves the emulator's own configuration and flags.
pub const DEFAULT_CLASSIFIER_GAP_MS: f64 = 6.31;
/// The default packet limit of a queue (the scenario's `queue.limit_packets`).
pub const DEFAULT_LIMIT_PACKETS: u64 = 1000;
/// The number of classes `discipline = "qds"` starts with (the QDS spec's m = 10
/// budget classes; a controller may resize with [`ClassControl::set_rates`]).
pub const QDS_DEFAULT_CLASSES: usize = 10;
/// Most flow queues `fq_codel_flows` may ask for (Linux's limit is 65536 as well).
pub const FQ_CODEL_MAX_FLOWS: u32 = 65536;

/// `queue.discipline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisciplineName {
    /// [`DropTail`].
    Droptail,
    /// [`Priority`].
    Priority,
    /// [`FqCodel`] (RFC 8290).
    FqCodel,
    /// [`Classes`] with the static classes of `queue.classes`.
    Classes,
    /// [`Classes`] with [`QDS_DEFAULT_CLASSES`] equal classes, driven by a QDS
    /// controller through [`QueueDisc::classes`].
    Qds,
}

/// `queue.priority_classifier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassifierName {
    /// [`Classifier::Label`].
    Label,
    /// [`Classifier::Gap`] with `classifier_gap_ms`.
    Gap,
}

/// `queue.qds_order`: how `discipline = "qds"` picks the next packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QdsOrder {
    /// The budget classes with the controller's rates and borrowing ([`Classes`]): the
    /// source's QDS.
    Drr,
    /// Earliest deadline first over the flows, each packet due at arrival + its flow's
    /// remaining budget ([`Deadline`]; the class rates are not used).
    Deadline,
}

/// The `[queue]` keys as the scenario (docs/scenario.md) and the emulator's link config
/// (docs/lab.md) spell them; an unknown name or key fails to parse, naming it. Turned
/// into a [`QueueSpec`] with [`QueueSpec::try_from`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueKeys {
    /// Discipline.
    pub discipline: DisciplineName,
    /// Byte limit (wire bytes), 0 = none.
    pub limit_bytes: u64,
    /// Packet limit, 0 = none.
    pub limit_packets: u64,
    /// Priority only: how a packet is found interactive.
    pub priority_classifier: ClassifierName,
    /// Priority with the gap classifier: the threshold, ms.
    pub classifier_gap_ms: f64,
    /// FQ-CoDel: CoDel's target sojourn time, ms (RFC 8289 §4.3: 5).
    pub fq_codel_target_ms: f64,
    /// FQ-CoDel: CoDel's interval, ms (RFC 8289 §4.3: 100).
    pub fq_codel_interval_ms: f64,
    /// FQ-CoDel: DRR quantum, bytes (RFC 8290 §5.1: 1514).
    pub fq_codel_quantum_bytes: u32,
    /// FQ-CoDel: number of flow queues (RFC 8290 §5.2.2: 1024).
    pub fq_codel_flows: u32,
    /// FQ-CoDel: perturbation of the flow hash (0 = none).
    pub fq_codel_hash_seed: u64,
    /// Class schedulers (`classes`, `qds`): DRR quantum of a flow inside a class, bytes.
    pub class_quantum_bytes: u32,
    /// `discipline = "classes"`: each class's guaranteed rate as a share of the link
    /// rate, in class order; the last class is the default. One entry per class.
    pub class_rate_shares: Vec<f64>,
    /// Each class's ceil as a share of the link rate (≥ its rate share); empty = every
    /// class may borrow the whole link.
    pub class_ceil_shares: Vec<f64>,
    /// The class that takes packets labelled interactive (of flows not listed in
    /// `class_flows`); -1 = none (they go to the default class like the rest).
    pub class_interactive: i64,
    /// Flows (the simulator's connection numbers) filtered into each class: entry i
    /// lists class i's flows; may be shorter than the class list.
    pub class_flows: Vec<Vec<u64>>,
    /// Class schedulers: CoDel (RFC 8289, with `fq_codel_target_ms` and
    /// `fq_codel_interval_ms`) on every flow queue of every class; false = tail drop only.
    pub class_codel: bool,
    /// `discipline = "qds"`: the service order (budget classes, or deadlines).
    pub qds_order: QdsOrder,
    /// Class schedulers: when a flow is put into another class, its queued packets stay
    /// in the old class (`leave`, Linux HTB) or move with it (`move`).
    pub class_change: ClassChange,
    /// CoDel (of `fq_codel`, and of the classes with `class_codel`) marks ECN-capable
    /// packets CE instead of dropping them (RFC 8290 §5.2.7); overflow still drops.
    pub ecn: bool,
}

// Parallel arrays rather than an array of tables: a scenario dumps every key as a
// JSON value into TOML (`Scenario.to_toml`), and arrays of numbers survive that.

impl Default for QueueKeys {
    fn default() -> Self {
        let fq = FqCodelParams::default();
        QueueKeys {
            discipline: DisciplineName::Droptail,
            limit_bytes: 0,
            limit_packets: DEFAULT_LIMIT_PACKETS,
            priority_classifier: ClassifierName::Label,
            classifier_gap_ms: DEFAULT_CLASSIFIER_GAP_MS,
            fq_codel_target_ms: fq.codel.target.as_secs_f64() * 1e3,
            fq_codel_interval_ms: fq.codel.interval.as_secs_f64() * 1e3,
            fq_codel_quantum_bytes: fq.quantum,
            fq_codel_flows: fq.flows,
            fq_codel_hash_seed: fq.perturbation,
            class_quantum_bytes: 1514,
            class_rate_shares: Vec::new(),
            class_ceil_shares: Vec::new(),
            class_interactive: -1,
            class_flows: Vec::new(),
            class_codel: false,
            qds_order: QdsOrder::Drr,
            class_change: ClassChange::Leave,
            ecn: false,
        }
    }
}

/// A static class, checked: rates as shares of the link rate.
#[derive(Clone, Debug, PartialEq)]
pub struct StaticClass {
    /// Guaranteed share of the link rate.
    pub rate_share: f64,
    /// Ceiling, share of the link rate.
    pub ceil_share: f64,
    /// Receives the interactive-labelled packets of unfiltered flows.
    pub interactive: bool,
    /// Flows filtered into it.
    pub flows: Vec<u64>,
}

/// A queue discipline and its limits, checked: what [`QueueSpec::build`] makes.
#[derive(Clone, Debug, PartialEq)]
pub enum QueueSpec {
    /// A tail-drop FIFO.
    DropTail {
        /// Limits.
        limits: Limits,
    },
    /// Two bands, interactive first.
    Priority {
        /// Limits of the shared buffer.
        limits: Limits,
        /// How a packet is found interactive.
        classifier: Classifier,
    },
    /// FQ-CoDel.
    FqCodel {
        /// Limits of the shared buffer.
        limits: Limits,
        /// Parameters.
        params: FqCodelParams,
    },
    /// The class scheduler with static classes.
    Classes {
        /// Limits of the shared buffer.
        limits: Limits,
        /// Flow quantum inside a class, bytes.
        quantum: u32,
        /// The classes (at least one).
        classes: Vec<StaticClass>,
        /// CoDel on every flow queue (`class_codel`), or None.
        codel: Option<CodelParams>,
        /// A reassigned flow's queued packets: left behind or moved (`class_change`).
        class_change: ClassChange,
    },
    /// What a QDS controller drives: `classes` equal classes, or (`order` =
    /// [`QdsOrder::Deadline`]) the deadline queue.
    Qds {
        /// Limits of the shared buffer.
        limits: Limits,
        /// Flow quantum inside a class, bytes.
        quantum: u32,
        /// Number of classes.
        classes: usize,
        /// CoDel on every flow queue (`class_codel`), or None.
        codel: Option<CodelParams>,
        /// The service order.
        order: QdsOrder,
        /// A reassigned flow's queued packets: left behind or moved (`class_change`;
        /// the deadline queue has no classes and ignores it).
        class_change: ClassChange,
    },
}

impl QueueSpec {
    /// The one queue-discipline factory of the simulator and the emulator, for a link
    /// of `link_rate_bps` (the class schedulers' rates are shares of it; it must be > 0
    /// for them, the others ignore it).
    pub fn build<P: QueueItem + Send + 'static>(&self, link_rate_bps: u64) -> Box<dyn QueueDisc<P> + Send> {
        match self {
            QueueSpec::DropTail { limits } => Box::new(DropTail::new(*limits)),
            QueueSpec::Priority { limits, classifier } => Box::new(Priority::new(*limits, *classifier)),
            QueueSpec::FqCodel { limits, params } => Box::new(FqCodel::new(*params, *limits)),
            QueueSpec::Classes { limits, quantum, classes, codel, class_change } => {
                let share = |s: f64| (s * link_rate_bps as f64).round() as u64;
                let rates: Vec<_> = classes
                    .iter()
                    .map(|c| ClassRate { rate_bps: share(c.rate_share), ceil_bps: share(c.ceil_share) })
                    .collect();
                let interactive = classes.iter().position(|c| c.interactive);
                let mut q = Classes::new(&rates, *quantum, *limits)
                    .with_interactive_class(interactive)
                    .with_codel(*codel)
                    .with_class_change(*class_change);
                for (i, c) in classes.iter().enumerate() {
                    for &flow in &c.flows {
                        q.assign(flow, i);
                    }
                }
                Box::new(q)
            }
            QueueSpec::Qds { limits, codel, order: QdsOrder::Deadline, .. } => {
                Box::new(Deadline::new(*limits).with_codel(*codel))
            }
            QueueSpec::Qds { limits, quantum, classes, codel, order: QdsOrder::Drr, class_change } => {
                let rates = vec![qds_initial_rate(link_rate_bps, *classes); *classes];
                Box::new(
                    Classes::new(&rates, *quantum, *limits)
                        .with_codel(*codel)
                        .with_class_change(*class_change),
                )
            }
        }
    }

    /// Its limits.
    pub fn limits(&self) -> Limits {
        match *self {
            QueueSpec::DropTail { limits }
            | QueueSpec::Priority { limits, .. }
            | QueueSpec::FqCodel { limits, .. }
            | QueueSpec::Classes { limits, .. }
            | QueueSpec::Qds { limits, .. } => limits,
        }
    }

    /// Needs a link rate > 0 to build (the class schedulers shape by it).
    pub fn needs_link_rate(&self) -> bool {
        matches!(self, QueueSpec::Classes { .. } | QueueSpec::Qds { .. })
    }
}

/// QDS's starting point: `n` equal classes summing to the link rate, each may borrow up
/// to the whole link.
pub fn qds_initial_rate(link_rate_bps: u64, n: usize) -> ClassRate {
    ClassRate { rate_bps: link_rate_bps / n.max(1) as u64, ceil_bps: link_rate_bps }
}

impl TryFrom<&QueueKeys> for QueueSpec {
    type Error = String;

    /// Check the values; an error names the key (`limit_bytes: …`, relative to the section).
    fn try_from(k: &QueueKeys) -> Result<Self, String> {
        if k.limit_bytes == 0 && k.limit_packets == 0 {
            return Err("limit_bytes, limit_packets: both 0; set at least one".into());
        }
        let limits = Limits {
            bytes: (k.limit_bytes > 0).then_some(k.limit_bytes),
            packets: (k.limit_packets > 0).then_some(k.limit_packets as usize),
        };
        // Checked even where unused, as the scenario's loader does (docs/scenario.md).
        let ms = k.classifier_gap_ms;
        positive_ms("classifier_gap_ms", ms)?;
        let classifier = match k.priority_classifier {
            ClassifierName::Label => Classifier::Label,
            ClassifierName::Gap => Classifier::Gap(Duration::from_millis_f64(ms)),
        };
        let params = fq_codel_params(k)?;
        if k.class_quantum_bytes == 0 {
            return Err("class_quantum_bytes: must be ≥ 1".into());
        }
        let classes = static_classes(k)?;
        let quantum = k.class_quantum_bytes;
        let codel = k.class_codel.then_some(params.codel);
        let class_change = k.class_change;
        Ok(match k.discipline {
            DisciplineName::Droptail => QueueSpec::DropTail { limits },
            DisciplineName::Priority => QueueSpec::Priority { limits, classifier },
            DisciplineName::FqCodel => QueueSpec::FqCodel { limits, params },
            DisciplineName::Classes if classes.is_empty() => {
                return Err("class_rate_shares: discipline \"classes\" needs at least one class".into())
            }
            DisciplineName::Classes => QueueSpec::Classes { limits, quantum, classes, codel, class_change },
            DisciplineName::Qds => QueueSpec::Qds {
                limits,
                quantum,
                classes: QDS_DEFAULT_CLASSES,
                codel,
                order: k.qds_order,
                class_change,
            },
        })
    }
}

fn positive_ms(key: &str, ms: f64) -> Result<(), String> {
    if ms.is_finite() && ms > 0.0 {
        Ok(())
    } else {
        Err(format!("{key}: must be a finite number > 0, got {ms}"))
    }
}

fn fq_codel_params(k: &QueueKeys) -> Result<FqCodelParams, String> {
    positive_ms("fq_codel_target_ms", k.fq_codel_target_ms)?;
    positive_ms("fq_codel_interval_ms", k.fq_codel_interval_ms)?;
    if k.fq_codel_interval_ms < k.fq_codel_target_ms {
        return Err(format!(
            "fq_codel_interval_ms: must be ≥ fq_codel_target_ms ({} ms), got {}",
            k.fq_codel_target_ms, k.fq_codel_interval_ms
        ));
    }
    if k.fq_codel_quantum_bytes == 0 {
        return Err("fq_codel_quantum_bytes: must be ≥ 1".into());
    }
    if !(1..=FQ_CODEL_MAX_FLOWS).contains(&k.fq_codel_flows) {
        return Err(format!("fq_codel_flows: must be in 1..={FQ_CODEL_MAX_FLOWS}, got {}", k.fq_codel_flows));
    }
    let codel = CodelParams {
        target: Duration::from_millis_f64(k.fq_codel_target_ms),
        interval: Duration::from_millis_f64(k.fq_codel_interval_ms),
        ecn: k.ecn,
        ..CodelParams::default()
    };
    Ok(FqCodelParams {
        codel,
        quantum: k.fq_codel_quantum_bytes,
        flows: k.fq_codel_flows,
        perturbation: k.fq_codel_hash_seed,
    })
}

fn static_classes(k: &QueueKeys) -> Result<Vec<StaticClass>, String> {
    let n = k.class_rate_shares.len();
    if !k.class_ceil_shares.is_empty() && k.class_ceil_shares.len() != n {
        return Err(format!(
            "class_ceil_shares: {} entries for {n} classes (class_rate_shares); give one per class or none",
            k.class_ceil_shares.len()
        ));
    }
    let mut sum = 0.0;
    for (i, &rate) in k.class_rate_shares.iter().enumerate() {
        if !(0.0..=1.0).contains(&rate) {
            return Err(format!("class_rate_shares[{i}]: must be in [0, 1], got {rate}"));
        }
        let ceil = k.class_ceil_shares.get(i).copied().unwrap_or(1.0);
        if !(ceil > 0.0 && ceil <= 1.0 && ceil >= rate) {
            return Err(format!(
                "class_ceil_shares[{i}]: must be in [rate share {rate}, 1] and > 0, got {ceil}"
            ));
        }
        sum += rate;
    }
    // A small tolerance for shares written as decimals (0.7 + 0.2 + 0.1).
    if sum > 1.0 + 1e-9 {
        return Err(format!("class_rate_shares: sum to {sum}, more than the link (1)"));
    }
    if !(k.class_interactive == -1 || (0..n as i64).contains(&k.class_interactive)) {
        return Err(format!(
            "class_interactive: must be -1 or a class index below {n}, got {}",
            k.class_interactive
        ));
    }
    if k.class_flows.len() > n {
        return Err(format!("class_flows: {} entries for {n} classes", k.class_flows.len()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, flows) in k.class_flows.iter().enumerate() {
        if let Some(f) = flows.iter().find(|f| !seen.insert(**f)) {
            return Err(format!("class_flows[{i}]: flow {f} is already in an earlier class"));
        }
    }
    Ok((0..n)
        .map(|i| StaticClass {
            rate_share: k.class_rate_shares[i],
            ceil_share: k.class_ceil_shares.get(i).copied().unwrap_or(1.0),
            interactive: k.class_interactive == i as i64,
            flows: k.class_flows.get(i).cloned().unwrap_or_default(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct P(u32, u32);
    impl QueueItem for P {
        fn wire_len(&self) -> u32 {
            self.1
        }
    }

    #[test]
    fn queue_keys_parse_to_a_spec_and_reject_unknown_names() {
        let k: QueueKeys =
            serde_json::from_str(r#"{"discipline": "priority", "priority_classifier": "gap"}"#)
                .expect("known names");
        let spec = QueueSpec::try_from(&k).expect("valid");
        let gap = Classifier::Gap(Duration::from_millis_f64(DEFAULT_CLASSIFIER_GAP_MS));
        let limits = Limits { bytes: None, packets: Some(DEFAULT_LIMIT_PACKETS as usize) };
        assert_eq!(spec, QueueSpec::Priority { limits, classifier: gap });
        let _q: Box<dyn QueueDisc<P> + Send> = spec.build(10_000_000);
        for bad in
            [r#"{"discipline": "red"}"#, r#"{"priority_classifier": "dpi"}"#, r#"{"disciplin": "priority"}"#]
        {
            let e = serde_json::from_str::<QueueKeys>(bad).expect_err(bad).to_string();
            assert!(e.contains("red") || e.contains("dpi") || e.contains("disciplin"), "{bad}: {e}");
        }
        let none = QueueKeys { limit_packets: 0, ..QueueKeys::default() };
        assert!(QueueSpec::try_from(&none).unwrap_err().starts_with("limit_bytes, limit_packets:"));
        let droptail = QueueKeys { limit_bytes: 3000, limit_packets: 0, ..QueueKeys::default() };
        let want = Limits { bytes: Some(3000), packets: None };
        assert_eq!(QueueSpec::try_from(&droptail), Ok(QueueSpec::DropTail { limits: want }));
    }

    fn parse(json: &str) -> Result<QueueSpec, String> {
        let k: QueueKeys = serde_json::from_str(json).map_err(|e| e.to_string())?;
        QueueSpec::try_from(&k)
    }

    #[test]
    fn fq_codel_keys_parse_with_rfc_defaults() {
        let spec = parse(r#"{"discipline": "fq_codel"}"#).expect("valid");
        let limits = Limits { bytes: None, packets: Some(DEFAULT_LIMIT_PACKETS as usize) };
        assert_eq!(spec, QueueSpec::FqCodel { limits, params: FqCodelParams::default() });
        let spec = parse(
            r#"{"discipline": "fq_codel", "fq_codel_target_ms": 10, "fq_codel_interval_ms": 200,
                "fq_codel_quantum_bytes": 300, "fq_codel_flows": 16, "fq_codel_hash_seed": 7}"#,
        )
        .expect("valid");
        let QueueSpec::FqCodel { params, .. } = spec else { panic!("{spec:?}") };
        assert_eq!(params.codel.target, Duration::from_millis(10));
        assert_eq!(params.codel.interval, Duration::from_millis(200));
        assert_eq!((params.quantum, params.flows, params.perturbation), (300, 16, 7));
    }

    #[test]
    fn class_keys_parse_and_build_for_the_link_rate() {
        let spec = parse(
            r#"{"discipline": "classes", "class_quantum_bytes": 3000, "class_rate_shares": [0.3, 0.7],
                "class_ceil_shares": [1, 0.9], "class_interactive": 0, "class_flows": [[], [4]]}"#,
        )
        .expect("valid");
        let QueueSpec::Classes { quantum, ref classes, .. } = spec else { panic!("{spec:?}") };
        assert_eq!((quantum, classes.len()), (3000, 2));
        assert_eq!((classes[0].ceil_share, classes[1].ceil_share), (1.0, 0.9));
        let no_ceil = parse(r#"{"discipline": "classes", "class_rate_shares": [0.3, 0.7]}"#).expect("valid");
        let QueueSpec::Classes { classes: ref dflt, .. } = no_ceil else { panic!("{no_ceil:?}") };
        assert!(dflt.iter().all(|c| c.ceil_share == 1.0 && !c.interactive), "ceil defaults to the link");
        assert!(classes[0].interactive && classes[1].flows == [4]);
        let mut q: Box<dyn QueueDisc<P> + Send> = spec.build(20_000_000);
        let c = q.classes().expect("a class scheduler");
        assert_eq!(c.class_count(), 2);
        // QDS: ten equal classes of the link, ceil = link.
        let mut q: Box<dyn QueueDisc<P> + Send> =
            parse(r#"{"discipline": "qds"}"#).expect("valid").build(20_000_000);
        assert_eq!(q.classes().map(|c| c.class_count()), Some(QDS_DEFAULT_CLASSES));
        assert_eq!(qds_initial_rate(20_000_000, 10), ClassRate { rate_bps: 2_000_000, ceil_bps: 20_000_000 });
        let mut q: Box<dyn QueueDisc<P> + Send> =
            parse(r#"{"discipline": "fq_codel"}"#).expect("valid").build(1);
        assert!(q.classes().is_none());
    }

    #[test]
    fn qds_order_picks_the_class_scheduler_or_the_deadline_queue() {
        let mut drr: Box<dyn QueueDisc<P> + Send> =
            parse(r#"{"discipline": "qds"}"#).expect("valid").build(1);
        assert!(drr.classes().is_some() && drr.deadlines().is_none(), "the default: budget classes");
        let spec =
            parse(r#"{"discipline": "qds", "qds_order": "deadline", "class_codel": true}"#).expect("valid");
        let QueueSpec::Qds { order, codel, .. } = spec else { panic!("{spec:?}") };
        assert_eq!((order, codel.is_some()), (QdsOrder::Deadline, true));
        let mut edf: Box<dyn QueueDisc<P> + Send> = spec.build(1);
        assert!(edf.classes().is_none() && edf.deadlines().is_some());
        let e = parse(r#"{"discipline": "qds", "qds_order": "edf"}"#).expect_err("unknown order");
        assert!(e.contains("edf"), "{e}");
    }

    #[test]
    fn class_change_leaves_queued_packets_by_default_and_moves_them_when_asked() {
        let QueueSpec::Qds { class_change, .. } = parse(r#"{"discipline": "qds"}"#).expect("valid") else {
            panic!("qds")
        };
        assert_eq!(class_change, ClassChange::Leave, "the default: Linux HTB's behaviour");
        let spec = parse(r#"{"discipline": "qds", "class_change": "move"}"#).expect("valid");
        let QueueSpec::Qds { class_change, .. } = spec else { panic!("{spec:?}") };
        assert_eq!(class_change, ClassChange::Move);
        let spec = parse(r#"{"discipline": "classes", "class_rate_shares": [1], "class_change": "move"}"#);
        assert!(matches!(spec, Ok(QueueSpec::Classes { class_change: ClassChange::Move, .. })), "{spec:?}");
        let e = parse(r#"{"class_change": "moved"}"#).expect_err("unknown value");
        assert!(e.contains("moved") && e.contains("leave") && e.contains("move"), "{e}");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (json, key) in [
            (r#"{"fq_codel_target_ms": 0}"#, "fq_codel_target_ms:"),
            (r#"{"fq_codel_interval_ms": -1}"#, "fq_codel_interval_ms:"),
            (r#"{"fq_codel_target_ms": 50, "fq_codel_interval_ms": 10}"#, "fq_codel_interval_ms:"),
            (r#"{"fq_codel_quantum_bytes": 0}"#, "fq_codel_quantum_bytes:"),
            (r#"{"fq_codel_flows": 0}"#, "fq_codel_flows:"),
            (r#"{"fq_codel_flows": 70000}"#, "fq_codel_flows:"),
            (r#"{"class_quantum_bytes": 0}"#, "class_quantum_bytes:"),
            (r#"{"discipline": "classes"}"#, "class_rate_shares:"),
            (r#"{"class_rate_shares": [1.5]}"#, "class_rate_shares[0]:"),
            (r#"{"class_rate_shares": [0.5, 0.5], "class_ceil_shares": [1, 0.4]}"#, "class_ceil_shares[1]:"),
            (r#"{"class_rate_shares": [0.5, 0.5], "class_ceil_shares": [1]}"#, "class_ceil_shares:"),
            (r#"{"class_rate_shares": [0.6, 0.6]}"#, "class_rate_shares: sum"),
            (r#"{"class_rate_shares": [0.5], "class_interactive": 1}"#, "class_interactive:"),
            (r#"{"class_rate_shares": [0.5], "class_flows": [[1], [2]]}"#, "class_flows:"),
            (r#"{"class_rate_shares": [0.1, 0.1], "class_flows": [[1], [1]]}"#, "class_flows[1]:"),
        ] {
            let e = parse(json).expect_err(json);
            assert!(e.starts_with(key), "{json}: {e}");
        }
        for (json, word) in
            [(r#"{"discipline": "fq-codel"}"#, "fq-codel"), (r#"{"class_rate": [1]}"#, "class_rate")]
        {
            let e = parse(json).expect_err(json);
            assert!(e.contains(word), "{json}: {e}");
        }
    }
}

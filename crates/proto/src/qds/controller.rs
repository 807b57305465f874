//! The QDS controller: every period, flows → budget classes → class weights → class
//! rates of the congested downlink (spec "Algorithm"; docs/qds.md has the formulas with
//! a worked example).
//!
//! - Delay budget of flow f: DB(f) = QT(type of f) − RTT(f). Lower = more urgent.
//! - Classes c_1..c_m by their largest budget DB_max(c_k) (`bounds`, strictly
//!   increasing): f goes to the first class with DB_max ≥ DB(f); a budget above the last
//!   bound goes to the last class. Class index `k − 1` here (0 = most urgent); the last
//!   class is the class scheduler's default class, where unassigned flows wait.
//! - Weights ([`Variant`]), normalised to sum 1 over the classes; class k's rate is
//!   w_norm(c_k) · capacity and its ceil the whole capacity (HTB semantics: a class uses
//!   its rate for sure and borrows whatever the others leave, so the link stays
//!   work-conserving).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::qds::classify::AppType;
use crate::qds::monitor::FlowView;
use crate::time::Duration;

/// The class scheduler's per-class rate and ceil, which [`plan`] fills (re-exported so
/// a driver needs only this module).
pub use crate::qdisc::ClassRate;

/// How class weights are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The source's delay-only weights: w(c_k) = Σ_{f∈c_k} (1 − max(0,DB(f)) / Σ_h max(0,DB(h))).
    DelayOnly,
    /// The source's main, bandwidth-aware weights, with β as the exponent of the rate
    /// ratio: w(c_k) = l(c_k) · Σ_{f∈c_k} (BR(f) / min_h BR(h))^β.
    BandwidthAware,
    /// Ours (issue 18 "Beyond the source"): every flow is first guaranteed its max-min
    /// fair share of the measured demands (water-filling on 1.1 · BR(f)); a class's rate
    /// is the sum over its flows; what is left when every demand fits is shared by the
    /// bandwidth-aware weights. Meant with CoDel in the classes (`queue.class_codel`).
    DemandFirst,
}

/// Demand of a flow in [`Variant::DemandFirst`]: this many times its measured rate. A
/// flow held at its guarantee measures at that rate, so without headroom it could never
/// be seen to need more than it gets; 10 % lets its guarantee grow by a tenth per period
/// until its real demand is met.
pub const DEMAND_HEADROOM: f64 = 1.1;

/// Rates below this (bit/s) count as this in the bandwidth ratios: a flow that sent
/// nothing in the window (an idle session, a flow just seen) must not make
/// min_h BR(h) zero and every ratio infinite. 1 kbit/s is below any application's rate.
pub const RATE_FLOOR_BPS: f64 = 1_000.0;

/// The controller's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct QdsConfig {
    /// Recompute every this long (spec: 100 ms). Used by the drivers, not by [`plan`].
    pub period: Duration,
    /// DB_max of each class, strictly increasing; m = `bounds.len()`.
    pub bounds: Vec<Duration>,
    /// Slope of the class level l(c_k) = 1 + α(⌈m/2⌉ − k) (spec: 0.2).
    pub alpha: f64,
    /// Exponent of the bandwidth ratio BR(f)/min BR (spec: 1; see [`Variant`]).
    pub beta: f64,
    /// Smallest l(c_k): the printed formula reaches 0 for k = m when α = 0.2, m = 10.
    pub l_floor: f64,
    /// The weight formula.
    pub variant: Variant,
    /// QoE threshold QT (largest tolerable RTT) per application type.
    pub qt: BTreeMap<AppType, Duration>,
}

impl Default for QdsConfig {
    /// Spec "Algorithm": period 100 ms, α 0.2, β 1, QT video 50 ms and data 100 ms; ours:
    /// bounds 10, 20, …, 100 ms (m = 10), l floor 0.1, QT audio and interactive 50 ms
    /// (docs/qds.md says why), bandwidth-aware weights.
    fn default() -> Self {
        QdsConfig {
            period: Duration::from_millis(100),
            bounds: (1..=10).map(|k| Duration::from_millis(10 * k)).collect(),
            alpha: 0.2,
            beta: 1.0,
            l_floor: 0.1,
            variant: Variant::BandwidthAware,
            qt: AppType::ALL.iter().map(|&a| (a, default_qt(a))).collect(),
        }
    }
}

/// The default QT of a type: video 50 ms and data 100 ms (spec, from the source's RDP
/// user studies); audio 50 ms, as the video it usually accompanies, so the two stay
/// within lip-sync tolerance (ITU-R BT.1359: sound more than 45 ms ahead of or 125 ms
/// behind the picture is noticed); interactive 50 ms: an answer to a keystroke should
/// come within ~100 ms to feel instantaneous (Card, Moran & Newell; Nielsen's 0.1 s),
/// and the network gets about half, the rest being the server's rendering and the
/// client's display.
pub fn default_qt(app: AppType) -> Duration {
    match app {
        AppType::Video | AppType::Audio | AppType::Interactive => Duration::from_millis(50),
        AppType::Data => Duration::from_millis(100),
    }
}

/// A configuration that cannot be used; `field` is the [`QdsConfig`] field.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError {
    /// The field at fault (`bounds`, `alpha`, `beta`, `l_floor`, `qt`, `period`).
    pub field: &'static str,
    /// What is wrong.
    pub why: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qds {}: {}", self.field, self.why)
    }
}

impl std::error::Error for ConfigError {}

impl QdsConfig {
    /// Check the parameters (the drivers call it once, at load).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field, why: String| Err(ConfigError { field, why });
        if self.period == Duration::ZERO {
            return err("period", "must be positive".into());
        }
        if self.bounds.is_empty() {
            return err("bounds", "needs at least one class".into());
        }
        if let Some(w) = self.bounds.windows(2).find(|w| w[0] >= w[1]) {
            return err("bounds", format!("must be strictly increasing ({} then {})", w[0], w[1]));
        }
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return err("alpha", format!("must be a finite number ≥ 0, not {}", self.alpha));
        }
        if !(self.beta.is_finite() && self.beta >= 0.0) {
            return err("beta", format!("must be a finite number ≥ 0, not {}", self.beta));
        }
        if !(self.l_floor.is_finite() && self.l_floor > 0.0) {
            return err(
                "l_floor",
                format!("must be a finite number > 0 (no class may starve), not {}", self.l_floor),
            );
        }
        if let Some(a) = AppType::ALL.iter().find(|a| !self.qt.contains_key(a)) {
            return err("qt", format!("no threshold for {a}"));
        }
        Ok(())
    }

    /// Number of classes, m.
    pub fn classes(&self) -> usize {
        self.bounds.len().max(1)
    }

    /// QT of `app` (the default if the map lacks it; [`QdsConfig::validate`] refuses that).
    pub fn qt_of(&self, app: AppType) -> Duration {
        self.qt.get(&app).copied().unwrap_or_else(|| default_qt(app))
    }

    /// The class (0-based) of a flow with budget `db_ns` (QT − RTT, ns, may be negative):
    /// the first whose DB_max ≥ DB, else the last.
    pub fn class_of_budget(&self, db_ns: i64) -> usize {
        self.bounds.iter().position(|b| db_ns <= b.as_nanos() as i64).unwrap_or(self.classes() - 1)
    }

    /// DB(f) = QT(type of f) − RTT(f), ns (negative when the flow is over its threshold).
    pub fn budget_ns<K>(&self, f: &FlowInput<K>) -> i64 {
        self.qt_of(f.app).as_nanos() as i64 - f.rtt.as_nanos() as i64
    }

    /// The slack of a flow's packets in the deadline queue (`queue.qds_order =
    /// "deadline"`, `qdisc::Deadline`): max(0, QT − base RTT), the flow's budget left
    /// once the path outside this queue is paid (`base_rtt`: [`BaseRtt`]), so a packet is
    /// due when its RTT would reach QT. Not QT − RTT: the flow's RTT already holds the
    /// queueing here, which would then be counted twice, and a long queue would shrink
    /// every flow's slack to 0 (first-in first-out behind a full buffer).
    pub fn slack(&self, app: AppType, base_rtt: Duration) -> Duration {
        self.qt_of(app) - base_rtt // saturates at 0
    }

    /// The slack of flows with no RTT estimate yet (so no base RTT): the last class's
    /// DB_max, the largest budget of the class order — an untimed data flow's, which
    /// [`inputs`] plans at DB = QT = 100 ms in the last class.
    pub fn default_slack(&self) -> Duration {
        self.bounds.last().copied().unwrap_or(Duration::ZERO)
    }

    /// l(c_k) for the 0-based class `i` (k = i + 1): 1 + α(⌈m/2⌉ − k), at least `l_floor`.
    pub fn level(&self, i: usize) -> f64 {
        let m = self.classes() as f64;
        (1.0 + self.alpha * ((m / 2.0).ceil() - (i + 1) as f64)).max(self.l_floor)
    }
}

/// Each flow's base RTT: the least of its RTT estimates so far, the RTT of its path
/// without the queueing of this middlebox (the base-delay idea of LEDBAT, RFC 6817
/// §2.4.1; [ours]: over the flow's life, no history window, as the monitor keeps a
/// half's last known value until the flow ends). Forgets flows not updated in a period.
#[derive(Clone, Debug, Default)]
pub struct BaseRtt<K> {
    min: BTreeMap<K, Duration>,
}

impl<K: Ord + Copy> BaseRtt<K> {
    /// Take this period's estimates (key, RTT) and return each flow's base RTT, by key.
    pub fn update(&mut self, rtts: impl IntoIterator<Item = (K, Duration)>) -> Vec<(K, Duration)> {
        let mut seen = BTreeMap::new();
        for (k, rtt) in rtts {
            let base = self.min.get(&k).map_or(rtt, |&m| m.min(rtt));
            seen.insert(k, base);
        }
        let out = seen.iter().map(|(&k, &b)| (k, b)).collect();
        self.min = seen;
        out
    }
}

/// What the controller needs of one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowInput<K> {
    /// The flow.
    pub key: K,
    /// Its application type (classified, or the true label in oracle mode).
    pub app: AppType,
    /// Its RTT (sliding-window average; a flow not yet timed passes zero, which puts it
    /// at DB = QT, i.e. not urgent: [`inputs`]).
    pub rtt: Duration,
    /// Its rate toward the client, bit/s (BR in the spec).
    pub rate_bps: f64,
}

impl<K> FlowInput<K> {
    /// The input of one flow as the monitor sees it, typed `app`: its RTT estimate, or
    /// zero while it has none ([`inputs`] says why), and its rate toward the client.
    pub fn of_view(key: K, app: AppType, view: &FlowView) -> Self {
        FlowInput { key, app, rtt: view.rtt.unwrap_or(Duration::ZERO), rate_bps: view.rate_bps }
    }
}

/// The controller's inputs for one period: **every** flow the monitor reports
/// ([`FlowMonitor::views`](crate::qds::monitor::FlowMonitor::views), in its order), typed
/// by `app` (the classifier's prediction or the oracle's label), each through
/// [`FlowInput::of_view`]. The one rule the simulator's middlebox, thinwan-link's loop
/// and the thinwan-qds daemon share.
///
/// A flow the monitor has not timed yet (no sample on either half: a flow that started
/// after the previous period, or whose first packets still wait in the queue) enters
/// with RTT 0, so DB = QT — the largest budget its type can have, never more urgent
/// than any timed flow of its type — the same way the monitor already counts a half it
/// has never timed as 0 (`FlowView::partial`). Why it must enter at all: the spec's
/// "each period, each flow goes to the class with the lowest DB_max above its DB" and
/// "the source requires that no flow starves" (spec/qoe-scheduler.md "Algorithm"). A
/// flow left out of the plan waits in the default class without counting in its weight;
/// with the timed flows' classes holding the whole link that class's rate is 0, and
/// under overload it can only borrow what nobody else wants — nothing — so its first
/// window never leaves, it is never timed, and it starves for good (measured: the data
/// flows of 3 runs in 10 at c = 20, [4:4], QDS-demand with `queue.class_change =
/// "move"`; docs/qds.md "Flows not yet timed"). In the plan its class's weight counts it
/// like any flow (bandwidth-aware: its rate ratio times the class level, at least
/// `l_floor`; demand-first: its share of the demands, measured on its arrivals at the
/// middlebox, so on the packets that wait), which gives that class a rate above 0.
pub fn inputs<K: Copy>(
    views: &[(K, FlowView)],
    mut app: impl FnMut(&K, &FlowView) -> AppType,
) -> Vec<FlowInput<K>> {
    views.iter().map(|(k, v)| FlowInput::of_view(*k, app(k, v), v)).collect()
}

/// The controller's decision for one period.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan<K> {
    /// Every input flow with its class (0-based), in input order.
    pub class_of: Vec<(K, usize)>,
    /// Per class, normalised: sum 1. Without flows, the last (default) class gets 1: any
    /// traffic that arrives before the next period lands there.
    pub weights: Vec<f64>,
    /// Per class: rate = ⌊w_norm · capacity⌋, ceil = capacity.
    pub rates: Vec<ClassRate>,
}

/// Classes, weights and rates for `flows` sharing a downlink of `capacity_bps`.
pub fn plan<K: Copy>(cfg: &QdsConfig, flows: &[FlowInput<K>], capacity_bps: u64) -> Plan<K> {
    let m = cfg.classes();
    let budgets: Vec<i64> = flows.iter().map(|f| cfg.budget_ns(f)).collect();
    let class_of: Vec<(K, usize)> =
        flows.iter().zip(&budgets).map(|(f, &db)| (f.key, cfg.class_of_budget(db))).collect();
    let weights = match cfg.variant {
        Variant::DelayOnly => normalise(delay_only(m, &class_of, &budgets), &class_of),
        Variant::BandwidthAware => normalise(bandwidth_aware(cfg, flows, &class_of), &class_of),
        Variant::DemandFirst => demand_first(cfg, flows, &class_of, capacity_bps),
    };
    let cap = capacity_bps as f64;
    let rates = weights
        .iter()
        .map(|w| ClassRate { rate_bps: ((w * cap).floor() as u64).min(capacity_bps), ceil_bps: capacity_bps })
        .collect();
    Plan { class_of, weights, rates }
}

/// w(c_k) = Σ_{f∈c_k} (1 − max(0,DB(f)) / S), S = Σ_h max(0,DB(h)); with S = 0 (every
/// budget spent) each flow counts 1.
fn delay_only<K>(m: usize, class_of: &[(K, usize)], budgets: &[i64]) -> Vec<f64> {
    let s: f64 = budgets.iter().map(|&b| b.max(0) as f64).sum();
    let mut w = vec![0.0; m];
    for ((_, c), &b) in class_of.iter().zip(budgets) {
        w[*c] += if s > 0.0 { 1.0 - b.max(0) as f64 / s } else { 1.0 };
    }
    w
}

/// w(c_k) = l(c_k) · Σ_{f∈c_k} (BR(f) / min_h BR(h))^β (BR floored at [`RATE_FLOOR_BPS`]).
///
/// β as printed multiplies every term and cancels in the normalisation; as the
/// exponent it keeps β = 1 the source's base setting and moves the weights between
/// counting flows (β = 0: every flow equal, the class level alone orders them) and
/// favouring heavy flows more than proportionally (β > 1).
fn bandwidth_aware<K>(cfg: &QdsConfig, flows: &[FlowInput<K>], class_of: &[(K, usize)]) -> Vec<f64> {
    let br = |f: &FlowInput<K>| f.rate_bps.max(RATE_FLOOR_BPS);
    let min = flows.iter().map(br).fold(f64::INFINITY, f64::min);
    let mut w = vec![0.0; cfg.classes()];
    for (f, (_, c)) in flows.iter().zip(class_of) {
        w[*c] += (br(f) / min).powf(cfg.beta);
    }
    for (i, x) in w.iter_mut().enumerate() {
        *x *= cfg.level(i);
    }
    w
}

/// Scale to sum 1. All zero: equal shares among the classes with flows (the delay-only
/// formula gives 0 to a lone flow with a budget); no flow: all to the last class.
fn normalise<K>(mut w: Vec<f64>, class_of: &[(K, usize)]) -> Vec<f64> {
    let total: f64 = w.iter().sum();
    if total > 0.0 && total.is_finite() {
        w.iter_mut().for_each(|x| *x /= total);
        return w;
    }
    let mut used = vec![false; w.len()];
    class_of.iter().for_each(|(_, c)| used[*c] = true);
    let n = used.iter().filter(|u| **u).count();
    if n == 0 {
        let last = w.len() - 1;
        w.iter_mut().enumerate().for_each(|(i, x)| *x = if i == last { 1.0 } else { 0.0 });
    } else {
        w.iter_mut().zip(&used).for_each(|(x, u)| *x = if *u { 1.0 / n as f64 } else { 0.0 });
    }
    w
}

/// [`Variant::DemandFirst`]: every flow f is first guaranteed its max-min fair share
/// of the capacity on the demands d_f = [`DEMAND_HEADROOM`] · BR(f) (water-filling:
/// a_f = min(d_f, λ) with λ the level at which Σ_f a_f = capacity, or a_f = d_f when
/// every demand fits); a class's guarantee is Σ_{f∈c_k} a_f. What is left when every
/// demand fits is shared by the bandwidth-aware weights. Returned as shares of the
/// capacity.
fn demand_first<K>(
    cfg: &QdsConfig,
    flows: &[FlowInput<K>],
    class_of: &[(K, usize)],
    capacity_bps: u64,
) -> Vec<f64> {
    let share = normalise(bandwidth_aware(cfg, flows, class_of), class_of);
    let cap = capacity_bps as f64;
    if cap <= 0.0 || flows.is_empty() {
        return share;
    }
    let demand: Vec<f64> = flows.iter().map(|f| DEMAND_HEADROOM * f.rate_bps.max(RATE_FLOOR_BPS)).collect();
    let level = fair_level(&demand, cap);
    let mut rate = vec![0.0; share.len()];
    for (d, (_, c)) in demand.iter().zip(class_of) {
        rate[*c] += d.min(level);
    }
    let pool = (cap - rate.iter().sum::<f64>()).max(0.0);
    rate.iter_mut().zip(&share).for_each(|(r, s)| *r += s * pool);
    rate.iter().map(|r| r / cap).collect()
}

/// The water level λ of a max-min fair split of `cap` over `demands`: Σ min(d, λ) = cap,
/// or +∞ when Σ d ≤ cap (every demand fits).
fn fair_level(demands: &[f64], cap: f64) -> f64 {
    let mut d = demands.to_vec();
    d.sort_by(f64::total_cmp);
    let mut left = cap;
    for (i, x) in d.iter().enumerate() {
        let even = left / (d.len() - i) as f64;
        if *x > even {
            return even;
        }
        left -= x;
    }
    f64::INFINITY
}

#[cfg(test)]
mod tests;

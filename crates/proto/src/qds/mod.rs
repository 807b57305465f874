//! QDS, the QoE-driven scheduler of thin-client flows at a middlebox (issue 18,
//! `spec/qoe-scheduler.md`; Arumaithurai et al., "Quality-of-Experience driven
//! Acceleration of Thin Client Connections").
//!
//! Three sans-IO pieces, driven alike by the simulator's middlebox and by the
//! `thinwan-qds` daemon on captured frames (docs/qds.md):
//!
//! - [`monitor`]: a passive per-flow monitor. Fed the TCP headers of every packet that
//!   crosses the middlebox ([`monitor::FlowMonitor::observe`]), it estimates each flow's
//!   RTT as the sum of its two halves (middlebox ↔ client, middlebox ↔ server), its rates,
//!   and the IP-level features the classifier needs. Payload is never read.
//! - [`classify`]: a small deterministic model (Gaussian naive Bayes on log-scaled
//!   features) that names the application inside a flow from those features.
//! - [`controller`]: every period, each flow's delay budget DB = QT − RTT puts it in one
//!   of m budget classes, and the classes' weights (delay-only, bandwidth-aware, or our
//!   demand-first variant) become the class rates of the congested downlink.
//!
//! [`keys`] holds the `[qds]` keys that configure all three, shared by the simulator,
//! thinwan-link and thinwan-qds, and [`classify::shipped_model`] the model they use when
//! `model_file` is empty; [`truth`] the oracle's true type of a pair's flow.

pub mod classify;
pub mod controller;
pub mod keys;
pub mod monitor;
pub mod truth;

#[cfg(test)]
mod pipeline_tests;

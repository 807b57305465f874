//! `thinwan-qds`: the QDS middlebox daemon (issue 18, docs/qds-lab.md).
//!
//! ```text
//!  servers ── uplink ──▶ [ AF_PACKET capture (arriving packets, both interfaces) ]
//!                              │ per packet: 5-tuple, TCP header fields
//!                              ▼
//!                        [ control: proto's flow monitor → classifier → QDS plan ]
//!                              │ every period: flow → class, class rates
//!                              ▼
//!  clients ◀── downlink ◀── [ Linux HTB: classes + u32 flow filters, over rtnetlink ]
//! ```
//!
//! Modules: [`config`] (TOML), [`capture`] (AF_PACKET, read through a [`ring`]), [`control`] (the deciders; [`engine`]: QDS),
//! [`netlink`] and [`tc`] (messages), [`htb`] (the tree and its update), [`restore`]
//! (the original qdisc and the state file), [`metrics`] (Prometheus), [`daemon`] (the
//! loop).
#![warn(missing_docs)]

pub mod capture;
pub mod config;
pub mod control;
pub mod daemon;
pub mod engine;
pub mod htb;
pub mod metrics;
pub mod netlink;
pub mod restore;
pub mod ring;
pub mod tc;

//! thinwan-mux: the thin-stream multiplexing tunnel daemons.
//!
//! `thinwan-mux edge` (regional proxy, next to the clients) and `thinwan-mux core`
//! (next to the servers) carry every client connection as a stream over one or more
//! authenticated TLS 1.3 trunk connections. All protocol logic — framing, credit,
//! scheduling, replay and resumption — is the sans-IO `thinwan_proto::mux`; this crate
//! is the tokio/rustls shell around it (see `docs/mux.md`).

pub mod config;
pub mod core;
pub mod driver;
pub mod edge;
pub mod guard;
mod lane;
mod local;
pub mod metrics;
pub mod shed;
pub mod tls;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

pub use crate::config::{CoreConfig, EdgeConfig};
pub use crate::driver::{Counters, Shared};

/// The runtime a daemon runs on: one thread. A session is one driver task, so more
/// worker threads would not speed a session up; they would only move its wake-ups
/// between threads (a futex hand-off each), which costs latency on every message.
pub fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Bind a listener configured under `key`; the error names the key and the address
/// (a bare "Address already in use (os error 98)" says neither).
pub async fn bind(key: &str, addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("{key}: cannot listen on {addr}: {e}")))
}

/// Bind everything a core config names and run until `shutdown`.
pub async fn run_core(cfg: CoreConfig, shutdown: watch::Receiver<bool>) -> io::Result<()> {
    let listener = bind("trunk.listen", cfg.listen).await?;
    let counters = Arc::new(Counters::default());
    tokio::spawn(guard::release_memory_after_bursts(counters.clone(), shutdown.clone()));
    let registry: core::Registry = Default::default();
    if let Some(m) = cfg.common.metrics {
        let l = bind("metrics.listen", m).await?;
        let reg = registry.clone();
        let sessions: metrics::Sessions =
            Arc::new(move || reg.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect());
        tracing::info!(listen = %l.local_addr()?, "metrics endpoint");
        let limits = metrics::Limits::new(&cfg.common, &counters);
        tokio::spawn(metrics::serve(l, "core", counters.clone(), sessions, limits, shutdown.clone()));
    }
    core::Core::run(cfg, listener, counters, registry, shutdown).await
}

/// Bind everything an edge config names and run until `shutdown`.
pub async fn run_edge(cfg: EdgeConfig, shutdown: watch::Receiver<bool>) -> io::Result<()> {
    let mut listeners = Vec::new();
    for (i, f) in cfg.forwards.iter().enumerate() {
        listeners.push(bind(&format!("forward[{i}].listen"), f.listen).await?);
    }
    let counters = Arc::new(Counters::default());
    tokio::spawn(guard::release_memory_after_bursts(counters.clone(), shutdown.clone()));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let metrics_listener = match cfg.common.metrics {
        Some(m) => Some(bind("metrics.listen", m).await?),
        None => None,
    };
    let (c2, sd) = (counters.clone(), shutdown.clone());
    let limits = metrics::Limits::new(&cfg.common, &counters);
    tokio::spawn(async move {
        let Ok(shared) = rx.await else { return };
        if let Some(l) = metrics_listener {
            if let Ok(a) = l.local_addr() {
                tracing::info!(listen = %a, "metrics endpoint");
            }
            let sessions: metrics::Sessions = Arc::new(move || vec![Arc::clone(&shared)]);
            let _ = metrics::serve(l, "edge", c2, sessions, limits, sd).await;
        }
    });
    edge::Edge::run(cfg, listeners, counters, Some(tx), shutdown).await
}

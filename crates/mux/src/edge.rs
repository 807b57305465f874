//! `thinwan-mux edge`: the regional proxy next to the clients. Accepts clients on the
//! configured listeners, opens one stream per client connection on the trunk, and keeps
//! `trunk.connections` trunk lanes to the core connected (reconnecting with resume).
//! A forward with `shed` asks the session first and may connect the client to its
//! direct address instead ([`crate::shed`]).

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use thinwan_proto::mux::Role;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::config::EdgeConfig;
use crate::driver::{random_id, tune_trunk, Counters, Shared};
use crate::guard::{flush_every_window, Warnings, ACCEPT_ERROR_PAUSE};
use crate::shed::{splice, TrunkLoss};
use crate::tls::Connector;

/// A running edge: its session (for metrics and tests).
pub struct Edge {
    /// The shared session.
    pub shared: Arc<Shared>,
}

impl Edge {
    /// Start the edge on already-bound client listeners (one per `cfg.forwards`, same
    /// order). Runs until `shutdown` turns true, then shuts down gracefully.
    pub async fn run(
        cfg: EdgeConfig,
        listeners: Vec<TcpListener>,
        counters: Arc<Counters>,
        shared_out: Option<tokio::sync::oneshot::Sender<Arc<Shared>>>,
        mut shutdown: watch::Receiver<bool>,
    ) -> io::Result<()> {
        let connector = Connector::new(&cfg.common.auth, &cfg.server_name)?;
        let (shared, _driver) =
            Shared::spawn(Role::Edge, random_id(), cfg.common.session.clone(), counters.clone(), None);
        if let Some(tx) = shared_out {
            let _ = tx.send(shared.clone());
        }
        let mut tasks = tokio::task::JoinSet::new();
        let all_lanes = cfg.common.session.lanes.max(cfg.common.session.max_lanes);
        // The trunk sockets' loss is read only where a forward may shed.
        let loss = cfg.forwards.iter().any(|f| f.shed.is_some()).then(|| Arc::new(TrunkLoss::default()));
        for lane in 0..all_lanes {
            let (c, l) = (connector.clone(), loss.clone());
            tasks.spawn(lane_loop(shared.clone(), lane, c, cfg.clone(), l, shutdown.clone()));
        }
        let mut all_warnings = Vec::new();
        for (i, (l, f)) in listeners.into_iter().zip(cfg.forwards.iter().cloned()).enumerate() {
            let shared = shared.clone();
            let mut stop = shutdown.clone();
            // Anyone who reaches a forward can connect: its per-connection warnings are
            // rate-limited. Memory per client is bounded by `limits.max_streams` (the
            // session refuses more) and freed when the stream ends.
            let warnings = Warnings::new(format!("forward[{i}].listen"));
            all_warnings.push(warnings.clone());
            tracing::info!(listen = %l.local_addr()?, target = %f.name, "forwarding");
            let (loss, connect_timeout) = (loss.clone(), cfg.common.connect_timeout);
            tasks.spawn(async move {
                // Shed clients' splices; dropped (aborted) with this task.
                let mut spliced = tokio::task::JoinSet::new();
                loop {
                    tokio::select! {
                        r = l.accept() => match r {
                            Ok((sock, peer)) => {
                                shared.counters.app_connections.fetch_add(1, Ordering::Relaxed);
                                tracing::debug!(%peer, target = %f.name, "client accepted");
                                if let (Some(sh), Some(loss)) = (f.shed, &loss) {
                                    let loss = loss.loss();
                                    shared.counters.trunk_loss_bits.store(loss.to_bits(), Ordering::Relaxed);
                                    let margin = shared.lock().session.shed_margin(loss);
                                    if let Some(m) = margin.filter(|&m| m > sh.slack_s) {
                                        shared.counters.streams_shed.fetch_add(1, Ordering::Relaxed);
                                        warnings.warn(|| tracing::info!(
                                            %peer, target = %f.name, direct = %sh.direct,
                                            margin_ms = m * 1e3, loss, "client shed to the direct path"
                                        ));
                                        let counters = shared.counters.clone();
                                        spliced.spawn(splice(sock, sh.direct, connect_timeout, counters));
                                        continue;
                                    }
                                }
                                shared.accept(sock, &f.name, f.class, &warnings);
                            }
                            Err(e) => {
                                warnings.warn(|| tracing::warn!(listen = %f.listen, error = %e, "accept failed"));
                                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                            }
                        },
                        Some(_) = spliced.join_next(), if !spliced.is_empty() => {}
                        _ = stop.changed() => return,
                    }
                }
            });
        }
        tasks.spawn(flush_every_window(all_warnings, shutdown.clone()));
        let _ = shutdown.wait_for(|s| *s).await;
        tracing::info!("edge shutting down");
        shared.shutdown(cfg.common.shutdown_grace).await;
        tasks.abort_all();
        shared.stop();
        Ok(())
    }
}

/// Keep one trunk lane connected: dial, authenticate, run, back off, repeat.
async fn lane_loop(
    shared: Arc<Shared>,
    lane: u16,
    connector: Connector,
    cfg: EdgeConfig,
    loss: Option<Arc<TrunkLoss>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = std::time::Duration::from_millis(50);
    loop {
        let stopping = *stop.borrow();
        if stopping {
            return;
        }
        // Adaptive lanes: dial only while the session wants this lane. Checked every
        // 50 ms — short against the several RTTs of backlog that ask for a lane.
        if !shared.lock().session.lane_wanted(lane) {
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        let attempt = async {
            let tcp = tokio::time::timeout(cfg.common.connect_timeout, TcpStream::connect(cfg.connect))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))??;
            tune_trunk(&tcp, &cfg.common);
            // Shedding reads this connection's loss until it ends (the guard's drop).
            let measured = loss.as_ref().and_then(|l| l.attach(lane, &tcp));
            let tls = tokio::time::timeout(cfg.common.connect_timeout, connector.connect(tcp))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timeout"))??;
            Ok::<_, io::Error>((tls, measured))
        };
        match attempt.await {
            Ok((tls, _measured)) => {
                shared.counters.trunk_connects.fetch_add(1, Ordering::Relaxed);
                backoff = std::time::Duration::from_millis(50);
                tracing::info!(lane, core = %cfg.connect, "trunk connected");
                // Runs through a graceful shutdown too (the session drains over it);
                // `Edge::run` aborts this task at the end.
                if let Err(e) = shared.run_lane(lane, tls, Vec::new()).await {
                    tracing::warn!(lane, error = %e, "trunk connection ended");
                }
            }
            Err(e) => {
                shared.counters.trunk_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(lane, core = %cfg.connect, error = %e, "trunk connect failed");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => {}
        }
        backoff = (backoff * 2).min(std::time::Duration::from_secs(2));
    }
}

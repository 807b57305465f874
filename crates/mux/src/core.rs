//! `thinwan-mux core`: the data-centre side next to the servers. Accepts authenticated
//! trunk connections, routes each to its session by the `Hello`, and connects streams
//! to configured targets only (an unknown name is reset, never resolved).

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use thinwan_proto::mux::frame::{FLAG_ADAPTIVE, FLAG_HELD, FLAG_NEW, MAX_REASON_TEXT};
use thinwan_proto::mux::session::{peek_hello, unknown_session_reply};
use thinwan_proto::mux::{LaneRule, ResetCode, Role};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::config::{CoreConfig, Target, MAX_LANES};
use crate::driver::{abort_socket, tune_trunk, Counters, Opened, Shared};
use crate::guard::{flush_every_window, HandshakeGate, Permit, Warnings, ACCEPT_ERROR_PAUSE};
use crate::tls::Acceptor;

/// Sessions by id.
pub type Registry = Arc<Mutex<HashMap<u64, Arc<Shared>>>>;

/// The core daemon.
pub struct Core;

impl Core {
    /// Serve trunks on an already-bound listener until `shutdown` turns true.
    pub async fn run(
        cfg: CoreConfig,
        listener: TcpListener,
        counters: Arc<Counters>,
        registry: Registry,
        mut shutdown: watch::Receiver<bool>,
    ) -> io::Result<()> {
        let acceptor = Acceptor::new(&cfg.common.auth)?;
        let cfg = Arc::new(cfg);
        tracing::info!(listen = %listener.local_addr()?, targets = cfg.targets.len(), "core listening");
        let gate = HandshakeGate::new(cfg.common.max_handshakes, counters.clone());
        let warnings = Warnings::new("trunk.listen");
        tokio::spawn(flush_every_window(vec![warnings.clone()], shutdown.clone()));
        // Connection tasks, reaped as they end: a finished task kept here until shutdown
        // held ~7 KB, which let unauthenticated connections grow the core without bound.
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let mut pause = false;
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((tcp, peer)) => {
                        let Some(permit) = gate.try_enter() else {
                            abort_socket(&tcp);
                            let limit = cfg.common.max_handshakes;
                            warnings.warn(|| tracing::warn!(%peer, limit, "trunk handshakes at limits.max_handshakes; connection refused"));
                            continue;
                        };
                        let (cfg, acc, reg, ctr, w) = (cfg.clone(), acceptor.clone(), registry.clone(), counters.clone(), warnings.clone());
                        conns.spawn(async move {
                            match serve_trunk(cfg, acc, reg, ctr, tcp, permit).await {
                                Ok(()) => {}
                                Err(Ended::Handshake(e)) => {
                                    w.warn(|| tracing::warn!(%peer, error = %e, "trunk handshake failed"))
                                }
                                Err(Ended::Lane(e)) => tracing::warn!(%peer, error = %e, "trunk connection ended"),
                            }
                        });
                    }
                    Err(e) => {
                        warnings.warn(|| tracing::warn!(error = %e, "accept failed"));
                        pause = true;
                    }
                },
                Some(r) = conns.join_next(), if !conns.is_empty() => {
                    if let Err(e) = r {
                        if e.is_panic() {
                            tracing::error!(error = %e, "trunk connection task panicked");
                        }
                    }
                }
                _ = shutdown.wait_for(|s| *s) => break,
            }
            if pause {
                // Outside `select!`: its output holds the shutdown watch's guard.
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
        tracing::info!("core shutting down");
        let sessions: Vec<Arc<Shared>> = lock(&registry).values().cloned().collect();
        let grace = cfg.common.shutdown_grace;
        let mut all = tokio::task::JoinSet::new();
        for s in sessions {
            all.spawn(async move { s.shutdown(grace).await });
        }
        while all.join_next().await.is_some() {}
        conns.abort_all();
        for s in lock(&registry).values() {
            s.stop();
        }
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How a trunk connection ended badly: before authentication (rate-limited warning;
/// anyone can cause it) or after (an authenticated edge's lane).
enum Ended {
    Handshake(io::Error),
    Lane(io::Error),
}

async fn serve_trunk(
    cfg: Arc<CoreConfig>,
    acceptor: Acceptor,
    registry: Registry,
    counters: Arc<Counters>,
    tcp: TcpStream,
    permit: Permit,
) -> Result<(), Ended> {
    tune_trunk(&tcp, &cfg.common);
    let handshake = async {
        let mut tls = acceptor.accept(tcp).await?;
        // Read until the first frame (the Hello) is complete. `peek_hello` rejects a
        // header announcing more than a hello before its body is buffered.
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(h) = peek_hello(&buf, MAX_REASON_TEXT as u32)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            {
                return Ok::<_, io::Error>((tls, buf, h));
            }
            let n = tls.read(&mut chunk).await?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before hello"));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    let result = tokio::time::timeout(cfg.common.handshake_timeout, handshake).await;
    drop(permit);
    let (mut tls, initial, hello) = match result {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            counters.trunk_failures.fetch_add(1, Ordering::Relaxed);
            return Err(Ended::Handshake(e));
        }
        Err(_) => {
            counters.trunk_failures.fetch_add(1, Ordering::Relaxed);
            let why = "no authenticated hello within timeouts.handshake_timeout_ms";
            return Err(Ended::Handshake(io::Error::new(io::ErrorKind::TimedOut, why)));
        }
    };
    counters.trunk_connects.fetch_add(1, Ordering::Relaxed);
    let shared = {
        let mut reg = lock(&registry);
        match reg.get(&hello.session) {
            Some(s) => Some(s.clone()),
            None if hello.flags & FLAG_NEW != 0 && hello.lanes <= MAX_LANES => {
                let mut scfg = cfg.common.session.clone();
                // The edge chooses the lanes: fixed, or adaptive up to `hello.lanes`
                // (then only the lanes either side wants are kept connected).
                if hello.flags & FLAG_ADAPTIVE != 0 {
                    scfg.lanes = 1;
                    scfg.max_lanes = hello.lanes;
                    scfg.lane_rule =
                        if hello.flags & FLAG_HELD != 0 { LaneRule::Held } else { LaneRule::Backlog };
                } else {
                    scfg.lanes = hello.lanes;
                    scfg.max_lanes = hello.lanes;
                }
                let (tx, rx) = mpsc::unbounded_channel();
                let (s, driver) = Shared::spawn(Role::Core, hello.session, scfg, counters.clone(), Some(tx));
                reg.insert(hello.session, s.clone());
                tracing::info!(session = hello.session, lanes = hello.lanes, "new session");
                tokio::spawn(connector(s.clone(), cfg.clone(), rx));
                let reg2 = registry.clone();
                tokio::spawn(async move {
                    let _ = driver.await;
                    lock(&reg2).remove(&hello.session);
                    tracing::info!(session = hello.session, "session removed");
                });
                Some(s)
            }
            None => None,
        }
    };
    let Some(shared) = shared else {
        tracing::warn!(session = hello.session, "resume for an unknown session refused");
        let mut out = Vec::new();
        unknown_session_reply(&hello).encode(&mut out);
        tls.write_all(&out).await.map_err(Ended::Lane)?;
        tls.flush().await.map_err(Ended::Lane)?;
        return Ok(());
    };
    shared.run_lane(hello.lane, tls, initial).await.map_err(Ended::Lane)
}

/// Connect streams the edge opened to their targets; never blocks other streams.
async fn connector(shared: Arc<Shared>, cfg: Arc<CoreConfig>, mut rx: mpsc::UnboundedReceiver<Opened>) {
    let targets: HashMap<String, Target> = cfg.targets.iter().map(|t| (t.name.clone(), t.clone())).collect();
    while let Some(o) = rx.recv().await {
        let Some(t) = targets.get(&o.target).cloned() else {
            shared.counters.unknown_targets.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(stream = o.id, target = %o.target, "stream for an unconfigured target refused");
            shared.reset(o.id, ResetCode::UnknownTarget, "no such target at the core".into());
            continue;
        };
        let (shared, timeout) = (shared.clone(), cfg.common.connect_timeout);
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, TcpStream::connect(t.connect)).await {
                Ok(Ok(sock)) => {
                    shared.counters.app_connections.fetch_add(1, Ordering::Relaxed);
                    shared.attach(o.id, sock, t.class);
                }
                Ok(Err(e)) => {
                    shared.counters.target_connect_failures.fetch_add(1, Ordering::Relaxed);
                    shared.reset(o.id, ResetCode::ConnectFailed, format!("connect {}: {e}", t.connect));
                }
                Err(_) => {
                    shared.counters.target_connect_failures.fetch_add(1, Ordering::Relaxed);
                    shared.reset(o.id, ResetCode::ConnectFailed, format!("connect {}: timeout", t.connect));
                }
            }
        });
    }
}

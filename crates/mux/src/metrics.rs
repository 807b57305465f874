//! Prometheus text exposition (format 0.0.4) on `GET /metrics`.
//!
//! Hand-written rather than a metrics crate: the numbers already live in the sans-IO
//! session's `Stats` and a few atomics; a scrape locks each session once and prints.

use std::fmt::Write as _;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use thinwan_proto::mux::stats::{Histogram, Stats, DELAY_BUCKETS_US};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Common;
use crate::driver::{abort_socket, Counters, Shared};
use crate::guard::{flush_every_window, HandshakeGate, Warnings, ACCEPT_ERROR_PAUSE};

/// Where a scrape finds the sessions.
pub type Sessions = Arc<dyn Fn() -> Vec<Arc<Shared>> + Send + Sync>;

const FRAME_TYPES: [&str; 12] =
    ["", "open", "data", "close", "reset", "credit", "ack", "ping", "hello", "goaway", "lanes", "lane_close"];

/// Render all metrics.
pub fn render(role: &str, counters: &Counters, sessions: &[Arc<Shared>]) -> String {
    let mut st = Stats::default();
    let (mut streams, mut buffered, mut thin_q, mut bulk_q, mut replay, mut lanes_up) = (0, 0, 0, 0, 0, 0);
    let mut rtt = None;
    let (mut lanes_wanted, mut bulk_inflight) = (0, 0);
    for s in sessions {
        let g = s.lock();
        let ss = g.session.stats();
        for i in 0..FRAME_TYPES.len() {
            st.frames_tx[i] += ss.frames_tx[i];
            st.frames_rx[i] += ss.frames_rx[i];
        }
        st.trunk_bytes_tx += ss.trunk_bytes_tx;
        st.trunk_bytes_rx += ss.trunk_bytes_rx;
        st.payload_bytes_tx += ss.payload_bytes_tx;
        st.payload_bytes_rx += ss.payload_bytes_rx;
        st.streams_opened += ss.streams_opened;
        st.streams_reset += ss.streams_reset;
        st.frames_replayed += ss.frames_replayed;
        st.resumes += ss.resumes;
        st.lane_drops += ss.lane_drops;
        st.lanes_opened += ss.lanes_opened;
        st.lanes_closed += ss.lanes_closed;
        st.stream_moves += ss.stream_moves;
        st.move_giveups += ss.move_giveups;
        lanes_wanted += g.session.lanes_wanted() as usize;
        bulk_inflight += g.session.bulk_inflight();
        st.delay_thin.merge(&ss.delay_thin);
        st.delay_bulk.merge(&ss.delay_bulk);
        rtt = rtt.or(ss.rtt);
        streams += g.session.stream_count();
        buffered += g.session.buffered_bytes();
        let (t, b) = g.session.queue_depth();
        thin_q += t;
        bulk_q += b;
        replay += g.session.replay_frames();
        lanes_up += g.session.lanes_up();
    }
    let mut o = String::new();
    let gauge = |o: &mut String, name: &str, help: &str, v: f64| {
        let _ = writeln!(o, "# HELP thinwan_mux_{name} {help}\n# TYPE thinwan_mux_{name} gauge\nthinwan_mux_{name}{{role=\"{role}\"}} {v}");
    };
    gauge(&mut o, "sessions", "Live sessions.", sessions.len() as f64);
    gauge(&mut o, "streams", "Open streams.", streams as f64);
    gauge(&mut o, "buffered_bytes", "Bytes in stream send queues and replay buffers.", buffered as f64);
    gauge(&mut o, "replay_frames", "Reliable frames kept for replay (unacknowledged).", replay as f64);
    gauge(&mut o, "lanes_up", "Trunk lanes up.", lanes_up as f64);
    gauge(
        &mut o,
        "lanes_wanted",
        "Trunk lanes either side wants open (adaptive lanes).",
        lanes_wanted as f64,
    );
    gauge(&mut o, "bulk_inflight_bytes", "Unacknowledged bulk data bytes.", bulk_inflight as f64);
    gauge(&mut o, "rtt_seconds", "Last trunk ping round trip.", rtt.map_or(0.0, |d| d.as_secs_f64()));
    let _ = writeln!(o, "# HELP thinwan_mux_queue_streams Streams waiting in the scheduler.\n# TYPE thinwan_mux_queue_streams gauge");
    let _ = writeln!(o, "thinwan_mux_queue_streams{{role=\"{role}\",class=\"thin\"}} {thin_q}");
    let _ = writeln!(o, "thinwan_mux_queue_streams{{role=\"{role}\",class=\"bulk\"}} {bulk_q}");
    let counter = |o: &mut String, name: &str, help: &str, v: u64| {
        let _ = writeln!(o, "# HELP thinwan_mux_{name} {help}\n# TYPE thinwan_mux_{name} counter\nthinwan_mux_{name}{{role=\"{role}\"}} {v}");
    };
    let c = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    counter(&mut o, "streams_opened_total", "Streams opened.", st.streams_opened);
    counter(&mut o, "streams_reset_total", "Streams reset (either side).", st.streams_reset);
    counter(&mut o, "frames_replayed_total", "Reliable frames re-sent after reconnects.", st.frames_replayed);
    counter(&mut o, "resumes_total", "Trunk lane resumptions.", st.resumes);
    counter(&mut o, "lane_drops_total", "Trunk lane disconnects.", st.lane_drops);
    counter(
        &mut o,
        "lanes_opened_total",
        "Lanes this side's want rose by (adaptive lanes).",
        st.lanes_opened,
    );
    counter(
        &mut o,
        "lanes_closed_total",
        "Lanes this side's want fell by (adaptive lanes).",
        st.lanes_closed,
    );
    counter(&mut o, "stream_moves_total", "Streams moved between lanes.", st.stream_moves);
    counter(
        &mut o,
        "stream_move_giveups_total",
        "Moves given up: the old lane did not acknowledge in time.",
        st.move_giveups,
    );
    counter(&mut o, "reconnects_total", "Trunk connections established.", c(&counters.trunk_connects));
    counter(
        &mut o,
        "trunk_failures_total",
        "Trunk connects/handshakes failed (incl. authentication).",
        c(&counters.trunk_failures),
    );
    counter(&mut o, "sessions_lost_total", "Sessions lost (streams failed).", c(&counters.sessions_lost));
    counter(
        &mut o,
        "app_connections_total",
        "Client (edge) or target (core) connections.",
        c(&counters.app_connections),
    );
    counter(&mut o, "app_refused_total", "Client connections refused.", c(&counters.app_refused));
    gauge(
        &mut o,
        "handshakes",
        "Unauthenticated connections in their handshake (trunk) or request (metrics).",
        c(&counters.handshakes) as f64,
    );
    counter(
        &mut o,
        "handshakes_refused_total",
        "Unauthenticated connections closed at once: limits.max_handshakes in progress.",
        c(&counters.handshakes_refused),
    );
    counter(
        &mut o,
        "unknown_targets_total",
        "Streams refused: target not configured.",
        c(&counters.unknown_targets),
    );
    counter(
        &mut o,
        "target_connect_failures_total",
        "Target connects failed.",
        c(&counters.target_connect_failures),
    );
    counter(&mut o, "streams_shed_total", "Clients shed to a direct path (edge).", c(&counters.streams_shed));
    counter(
        &mut o,
        "shed_bytes_total",
        "Bytes both ways through shed clients' splices, counted as each ends (edge).",
        c(&counters.shed_bytes),
    );
    counter(
        &mut o,
        "shed_connect_failures_total",
        "Direct-path connects that failed (edge).",
        c(&counters.shed_connect_failures),
    );
    gauge(
        &mut o,
        "trunk_loss_ratio",
        "Trunk retransmitted / sent segments at the last shedding decision (edge).",
        f64::from_bits(c(&counters.trunk_loss_bits)),
    );
    let _ = writeln!(o, "# HELP thinwan_mux_trunk_bytes_total Trunk bytes (plaintext frames).\n# TYPE thinwan_mux_trunk_bytes_total counter");
    let _ = writeln!(o, "thinwan_mux_trunk_bytes_total{{role=\"{role}\",dir=\"tx\"}} {}", st.trunk_bytes_tx);
    let _ = writeln!(o, "thinwan_mux_trunk_bytes_total{{role=\"{role}\",dir=\"rx\"}} {}", st.trunk_bytes_rx);
    let _ = writeln!(o, "# HELP thinwan_mux_payload_bytes_total Stream payload bytes.\n# TYPE thinwan_mux_payload_bytes_total counter");
    let _ =
        writeln!(o, "thinwan_mux_payload_bytes_total{{role=\"{role}\",dir=\"tx\"}} {}", st.payload_bytes_tx);
    let _ =
        writeln!(o, "thinwan_mux_payload_bytes_total{{role=\"{role}\",dir=\"rx\"}} {}", st.payload_bytes_rx);
    let _ = writeln!(o, "# HELP thinwan_mux_frames_total Frames by type and direction.\n# TYPE thinwan_mux_frames_total counter");
    for (i, name) in FRAME_TYPES.iter().enumerate().skip(1) {
        let _ = writeln!(
            o,
            "thinwan_mux_frames_total{{role=\"{role}\",dir=\"tx\",type=\"{name}\"}} {}",
            st.frames_tx[i]
        );
        let _ = writeln!(
            o,
            "thinwan_mux_frames_total{{role=\"{role}\",dir=\"rx\",type=\"{name}\"}} {}",
            st.frames_rx[i]
        );
    }
    let _ = writeln!(o, "# HELP thinwan_mux_queue_delay_seconds Time a data frame's first byte waited in the mux before the trunk.\n# TYPE thinwan_mux_queue_delay_seconds histogram");
    for (class, h) in [("thin", &st.delay_thin), ("bulk", &st.delay_bulk)] {
        histogram(&mut o, role, class, h);
    }
    o
}

fn histogram(o: &mut String, role: &str, class: &str, h: &Histogram) {
    let mut cum = 0;
    for (i, b) in DELAY_BUCKETS_US.iter().enumerate() {
        cum += h.buckets[i];
        let _ = writeln!(
            o,
            "thinwan_mux_queue_delay_seconds_bucket{{role=\"{role}\",class=\"{class}\",le=\"{}\"}} {cum}",
            *b as f64 * 1e-6
        );
    }
    let _ = writeln!(
        o,
        "thinwan_mux_queue_delay_seconds_bucket{{role=\"{role}\",class=\"{class}\",le=\"+Inf\"}} {}",
        h.count
    );
    let _ = writeln!(
        o,
        "thinwan_mux_queue_delay_seconds_sum{{role=\"{role}\",class=\"{class}\"}} {}",
        h.sum_secs
    );
    let _ =
        writeln!(o, "thinwan_mux_queue_delay_seconds_count{{role=\"{role}\",class=\"{class}\"}} {}", h.count);
}

/// What a metrics endpoint lets unauthenticated clients spend: the same bounds as trunk
/// handshakes (`limits.max_handshakes` requests at once, each within
/// `timeouts.handshake_timeout_ms`), and rate-limited warnings.
pub struct Limits {
    gate: HandshakeGate,
    timeout: std::time::Duration,
    warnings: Arc<Warnings>,
}

impl Limits {
    /// From the daemon's settings; refusals are counted in `counters`.
    pub fn new(common: &Common, counters: &Arc<Counters>) -> Limits {
        Limits {
            gate: HandshakeGate::new(common.max_handshakes, counters.clone()),
            timeout: common.handshake_timeout,
            warnings: Warnings::new("metrics.listen"),
        }
    }
}

/// Longest request head read. A scrape's is a few hundred bytes.
const MAX_REQUEST: usize = 8192;

/// Serve `GET /metrics` (any path, really) until shutdown.
pub async fn serve(
    listener: TcpListener,
    role: &'static str,
    counters: Arc<Counters>,
    sessions: Sessions,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    tokio::spawn(flush_every_window(vec![limits.warnings.clone()], shutdown.clone()));
    loop {
        let r = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.wait_for(|s| *s) => return Ok(()),
        };
        let (mut sock, peer) = match r {
            Ok(x) => x,
            Err(e) => {
                limits.warnings.warn(|| tracing::warn!(error = %e, "metrics accept failed"));
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let Some(permit) = limits.gate.try_enter() else {
            abort_socket(&sock);
            limits.warnings.warn(
                || tracing::warn!(%peer, "metrics requests at limits.max_handshakes; connection refused"),
            );
            continue;
        };
        let (counters, sessions, timeout) = (counters.clone(), sessions.clone(), limits.timeout);
        // Detached: the task frees itself when it ends, within `timeout` plus one write.
        tokio::spawn(async move {
            let read_head = async {
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    if req.len() >= MAX_REQUEST {
                        return false;
                    }
                    match sock.read(&mut buf).await {
                        Ok(n) if n > 0 => req.extend_from_slice(&buf[..n]),
                        _ => return false,
                    }
                }
                true
            };
            let complete = tokio::time::timeout(timeout, read_head).await.unwrap_or(false);
            drop(permit);
            if !complete {
                return;
            }
            let body = render(role, &counters, &sessions());
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            // A client that does not read gets the same bound as one that does not send.
            let _ = tokio::time::timeout(timeout, async {
                sock.write_all(head.as_bytes()).await?;
                sock.write_all(body.as_bytes()).await?;
                sock.shutdown().await
            })
            .await;
        });
    }
}

//! Python bindings: one native module, `thinwan._native`.
//!
//! `simulate(config_json, run)` runs one simulation with the GIL released and returns
//! the records of docs/records.md as numpy columns (moved, not copied).

use numpy::IntoPyArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict};
use std::time::Instant as WallClock;
use thinwan_sim::records::RunRecords;

/// Run run `run` (0-based; seed = scenario.seed + run) of a validated scenario given as
/// JSON. Returns {"messages": {col: ndarray}, "connections": …, "ports": …,
/// "conn_trace": …, "queue_trace": …, "meta": {…}}.
#[pyfunction]
fn simulate(py: Python<'_>, config_json: &str, run: u64) -> PyResult<PyObject> {
    let cfg = config_json.to_owned();
    let started = WallClock::now();
    let rec = py.allow_threads(move || thinwan_sim::simulate(&cfg, run)).map_err(PyValueError::new_err)?;
    let wall_s = started.elapsed().as_secs_f64();
    to_python(py, rec, run, wall_s)
}

/// The middlebox topology's per-client base one-way delays (ms) of run `run` of a
/// validated scenario given as JSON: the simulator's own draws
/// (`thinwan_sim::world::client_delays`, seed = scenario.seed + run), so the lab, which
/// has one client namespace, can apply their mean and record them (docs/lab.md).
#[pyfunction]
fn client_delays_ms(config_json: &str, run: u64) -> PyResult<Vec<f64>> {
    let cfg = thinwan_sim::Config::from_json(config_json).map_err(PyValueError::new_err)?;
    let seed = cfg.scenario.seed.wrapping_add(run);
    thinwan_sim::world::client_delays(&cfg.topology, seed, cfg.topology.pairs).map_err(PyValueError::new_err)
}

/// The application (its code, the `packet_rtt.app` column) whose writes pair `pair` of
/// a validated scenario (JSON) makes at each of `t_s` (seconds from the run start): the
/// core's `thinwan_proto::qds::truth::pair_app`, which thinwan-link's QDS oracle reads
/// too, so the lab labels its packets from the same model (docs/lab.md "Pairs").
#[pyfunction]
fn pair_apps(config_json: &str, pair: u32, t_s: Vec<f64>) -> PyResult<Vec<u8>> {
    let cfg = thinwan_sim::Config::from_json(config_json).map_err(PyValueError::new_err)?;
    let spec = thinwan_sim::world::traffic_spec(&cfg).map_err(PyValueError::new_err)?;
    let at = |t: f64| thinwan_proto::Duration::from_secs_f64(t.max(0.0));
    Ok(t_s.iter().map(|&t| thinwan_proto::qds::truth::pair_app(&spec, pair, at(t)) as u8).collect())
}

/// The core's application labels and controller types, so that Python names codes as the
/// core does instead of keeping copies: `apps` is every `packet_rtt.app` label in code order
/// as (name, controller type) — `thinwan_proto::qds::truth::app_type`, the oracle's truth —
/// and `types` every controller type in code order (`AppType::ALL`, the `app_true` column).
#[pyfunction]
fn app_types() -> (Vec<(&'static str, &'static str)>, Vec<&'static str>) {
    use thinwan_proto::qds::classify::AppType;
    use thinwan_proto::traffic::App;
    let apps = App::ALL.iter().map(|&a| (a.name(), thinwan_proto::qds::truth::app_type(a).name())).collect();
    (apps, AppType::ALL.iter().map(|t| t.name()).collect())
}

/// Version of the native module (the crate version).
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// How late a write may be taken before it counts as waiting (`connections.writes_waited`),
/// ns: the simulator's threshold, which the lab's join of the pump's log applies too.
#[pyfunction]
fn write_wait_ns() -> u64 {
    thinwan_sim::records::WRITE_WAIT.as_nanos()
}

/// The tunnel session's default largest frame payload, the default of the scenario
/// key `mux.frame_payload_bytes`.
#[pyfunction]
fn mux_frame_payload_default() -> u32 {
    thinwan_proto::mux::session::Config::default().max_payload
}

/// The classifier's features in `QdsFlows::features` order: the core's names.
const QDS_FEATURES: [&str; thinwan_proto::qds::classify::N_FEATURES] =
    thinwan_proto::qds::classify::Features::NAMES;

/// The QDS controller's default QT per type, ms (`controller::default_qt`): the one
/// table the scenario defaults (`[qds] qt_*_ms`) and the per-type metrics follow.
#[pyfunction]
fn qds_default_qt_ms() -> std::collections::BTreeMap<&'static str, f64> {
    use thinwan_proto::qds::classify::AppType;
    AppType::ALL
        .iter()
        .map(|&a| (a.name(), thinwan_proto::qds::controller::default_qt(a).as_secs_f64() * 1e3))
        .collect()
}

/// The core's `[qds]` keys with their defaults (`thinwan_proto::qds::keys::QdsKeys`) as
/// JSON: the scenario's `[qds]` (Python `QdsSection`) must spell the same keys and defaults.
#[pyfunction]
fn qds_default_keys() -> PyResult<String> {
    serde_json::to_string(&thinwan_proto::qds::keys::QdsKeys::default())
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// The classifier's inputs from a capture (`thinwan_capture::qds::features`): the
/// packets of the display server on `port` (`addr`: its address, None = any;
/// `port_at_client`: the listener is the user's display, plain X11) replayed through the
/// core's flow monitor, one row per (control period, flow with an RTT estimate), as the
/// QDS controller classifies them. `period_ms` / `rate_window_ms`: `qds.period_ms` and
/// `qds.rate_window_ms` (None: the core's defaults). Returns {"rows": {"t_s", "flow",
/// "rtt_s", "rate_bps", "idle", "f_<feature>"…: ndarray}, "flows": [{"client", "server",
/// "bytes_down"}] (`flow` indexes it),
/// "format", "packets_total", "packets_matched", "ticks", "origin_s" (the first matched
/// packet's capture time, s since the epoch: `t_s` counts from it)}. Raises ValueError naming the
/// file on a bad file or when no packet is the server's.
#[pyfunction]
#[pyo3(signature = (path, port, addr=None, port_at_client=false, period_ms=None, rate_window_ms=None))]
fn qds_capture_features(
    py: Python<'_>,
    path: std::path::PathBuf,
    port: u16,
    addr: Option<&str>,
    port_at_client: bool,
    period_ms: Option<f64>,
    rate_window_ms: Option<f64>,
) -> PyResult<PyObject> {
    use thinwan_capture::qds;
    use thinwan_proto::qds::{controller::QdsConfig, monitor::MonitorConfig};
    let addr = match addr {
        Some(a) => Some(a.parse().map_err(|_| PyValueError::new_err(format!("not an IP address: {a:?}")))?),
        None => None,
    };
    let ms = |name: &str, v: Option<f64>, default: thinwan_proto::Duration| match v {
        None => Ok(default),
        Some(x) if x.is_finite() && x > 0.0 => Ok(thinwan_proto::Duration::from_millis_f64(x)),
        Some(x) => Err(PyValueError::new_err(format!("{name} must be > 0 ms, got {x}"))),
    };
    let mut monitor = MonitorConfig::default();
    monitor.rate_window = ms("rate window", rate_window_ms, monitor.rate_window)?;
    let opts = qds::FeatureOptions {
        filter: thinwan_capture::Filter { port, addr, port_at_client },
        period: ms("period", period_ms, QdsConfig::default().period)?,
        monitor,
    };
    let f =
        py.allow_threads(|| qds::features(&path, &opts)).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let rows = PyDict::new(py);
    macro_rules! col {
        ($name:expr, $f:expr) => {
            rows.set_item($name, f.rows.iter().map($f).collect::<Vec<_>>().into_pyarray(py))?
        };
    }
    col!("t_s", |r| r.t.as_secs_f64());
    col!("flow", |r| r.flow);
    col!("rtt_s", |r| r.rtt.as_secs_f64());
    col!("rate_bps", |r| r.rate_bps);
    col!("idle", |r| r.idle());
    for (i, name) in QDS_FEATURES.iter().enumerate() {
        col!(format!("f_{name}"), |r| r.features.as_array()[i]);
    }
    let flows = pyo3::types::PyList::empty(py);
    for (k, bytes) in f.flows.iter().zip(&f.bytes_down) {
        let d = [("client", k.client.to_string()), ("server", k.server.to_string())].into_py_dict(py)?;
        d.set_item("bytes_down", bytes)?;
        flows.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("rows", rows)?;
    out.set_item("flows", flows)?;
    out.set_item("format", if f.format == thinwan_capture::Format::Pcap { "pcap" } else { "pcapng" })?;
    out.set_item("packets_total", f.packets_total)?;
    out.set_item("packets_matched", f.packets_matched)?;
    out.set_item("ticks", f.ticks)?;
    out.set_item("origin_s", f.origin.as_secs_f64())?;
    Ok(out.into_any().unbind())
}

/// Labelled feature rows (`features[i]`: the `QDS_FEATURES` in order; `labels[i]`: a
/// type name) → the core's `Model::train`, as the JSON `qds.model_file` reads.
#[pyfunction]
fn qds_train(features: Vec<Vec<f64>>, labels: Vec<String>) -> PyResult<String> {
    use thinwan_proto::qds::classify::Model;
    if features.len() != labels.len() {
        return Err(PyValueError::new_err(format!(
            "{} feature rows but {} labels",
            features.len(),
            labels.len()
        )));
    }
    let rows = qds_rows(&features)?;
    let samples = rows
        .into_iter()
        .zip(labels.iter())
        .map(|(f, l)| Ok((f, qds_app(l)?)))
        .collect::<PyResult<Vec<_>>>()?;
    serde_json::to_string_pretty(&Model::train(&samples)).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The type `Model::predict` names for each row of `features` (as in [`qds_train`]);
/// `model_json`: a model's JSON (checked by `Model::validate`), None = the shipped one.
#[pyfunction]
#[pyo3(signature = (features, model_json=None))]
fn qds_predict(features: Vec<Vec<f64>>, model_json: Option<&str>) -> PyResult<Vec<&'static str>> {
    use thinwan_proto::qds::classify::{shipped_model, Model};
    let model = match model_json {
        None => shipped_model(),
        Some(text) => {
            let m = Model::from_json(text).map_err(|e| PyValueError::new_err(format!("not a model: {e}")))?;
            m.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
            m
        }
    };
    Ok(qds_rows(&features)?.iter().map(|f| model.predict(f).name()).collect())
}

/// The shipped classifier's JSON (`classify::SHIPPED_MODEL_JSON`).
#[pyfunction]
fn qds_shipped_model() -> &'static str {
    thinwan_proto::qds::classify::SHIPPED_MODEL_JSON
}

fn qds_rows(features: &[Vec<f64>]) -> PyResult<Vec<thinwan_proto::qds::classify::Features>> {
    use thinwan_proto::qds::classify::{Features, N_FEATURES};
    features
        .iter()
        .enumerate()
        .map(|(i, x)| match x.as_slice() {
            &[size_mean, size_sd, iat_mean_us, iat_sd_us, rate_down_bps, rate_up_bps, full_share, burst_pkts] => {
                Ok(Features { size_mean, size_sd, iat_mean_us, iat_sd_us, rate_down_bps, rate_up_bps, full_share, burst_pkts })
            }
            _ => Err(PyValueError::new_err(format!("row {i}: {} features, expected {N_FEATURES}", x.len()))),
        })
        .collect()
}

fn qds_app(name: &str) -> PyResult<thinwan_proto::qds::classify::AppType> {
    use thinwan_proto::qds::classify::AppType;
    AppType::ALL.into_iter().find(|a| a.name() == name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown application type {name:?} (one of {})",
            AppType::ALL.map(|a| a.name()).join(", ")
        ))
    })
}

/// A dict of numpy columns from named `Vec` fields of a records table.
macro_rules! table {
    ($py:expr, $t:expr, [$($col:ident),*]) => {{
        let d = PyDict::new($py);
        $( d.set_item(stringify!($col), $t.$col.into_pyarray($py))?; )*
        d
    }};
}

fn to_python(py: Python<'_>, r: RunRecords, run: u64, wall_s: f64) -> PyResult<PyObject> {
    let out = PyDict::new(py);
    let m = r.messages;
    out.set_item(
        "messages",
        table!(
            py,
            m,
            [conn, pair, kind, bytes, t_write, t_first_tx, t_tx, t_enq, t_deq, t_arrive, t_read, retx]
        ),
    )?;
    let c = r.connections;
    out.set_item(
        "connections",
        table!(
            py,
            c,
            [
                conn,
                pair,
                timeouts,
                spurious_timeouts,
                fast_retransmits,
                sack_recoveries,
                bytes_written,
                bytes_delivered,
                bytes_sent,
                bytes_retransmitted,
                segments_sent,
                tlp_probes,
                rack_marked_lost,
                rto_resets,
                retransmit_episodes,
                ecn_reductions,
                writes_waited,
                writes_blocked,
                role
            ]
        ),
    )?;
    let p = r.ports;
    let ports = table!(
        py,
        p,
        [
            rate_bps,
            window_s,
            bytes_tx,
            bytes_tx_interactive,
            packets_tx,
            drops_overflow,
            max_queue_bytes,
            drops_loss,
            marks_ce
        ]
    );
    ports.set_item("port", p.port)?; // strings: a list, not an ndarray
    out.set_item("ports", ports)?;
    let ct = r.conn_trace;
    out.set_item("conn_trace", table!(py, ct, [conn, t, cwnd, ssthresh, srtt, rttvar, rto, rtt]))?;
    let pl = r.packet_log;
    out.set_item("packet_log", table!(py, pl, [conn, t, event, seq, len, retx]))?;
    // Only runs that record them have the newer tables, so the records of every other
    // run stay exactly what they were (bench/records_digest.py).
    if let Some(pr) = r.packet_rtt {
        out.set_item("packet_rtt", table!(py, pr, [conn, app, t_tx, rtt, bytes, retx, seq, kind, flow]))?;
    }
    // `records.pcap`: the file's bytes, which the Python side writes as `<point>.pcap`.
    if let Some(cap) = r.pcap {
        let d = PyDict::new(py);
        d.set_item("point", cap.point)?;
        d.set_item("packets", cap.packets)?;
        d.set_item("bytes", pyo3::types::PyBytes::new(py, &cap.bytes))?;
        out.set_item("pcap", d)?;
    }
    if let Some((mut f, c)) = r.qds {
        let features = std::mem::take(&mut f.features);
        let flows = table!(py, f, [t, conn, app_true, app, rtt, rate_bps, class]);
        // One column per feature, named after the classifier's (docs/records.md).
        for (i, name) in QDS_FEATURES.iter().enumerate() {
            let col: Vec<f64> = features.iter().map(|x| x[i]).collect();
            flows.set_item(format!("f_{name}"), col.into_pyarray(py))?;
        }
        out.set_item("qds_flows", flows)?;
        out.set_item("qds_classes", table!(py, c, [t, class, weight, rate_bps, flows]))?;
    }
    let qt = r.queue_trace;
    let queue = table!(py, qt, [t, bytes, packets]);
    queue.set_item("port", qt.port)?;
    out.set_item("queue_trace", queue)?;
    let meta = PyDict::new(py);
    meta.set_item("run", run)?;
    meta.set_item("seed", r.seed)?;
    meta.set_item("events", r.events)?;
    meta.set_item("wall_s", wall_s)?;
    meta.set_item("substrate", "sim")?;
    meta.set_item("native_version", env!("CARGO_PKG_VERSION"))?;
    let drops = PyDict::new(py);
    for (k, v) in r.drops_by_reason {
        drops.set_item(k, v)?;
    }
    meta.set_item("drops", drops)?;
    let pk = PyDict::new(py);
    pk.set_item("created", r.packets.created)?;
    pk.set_item("arrived", r.packets.arrived)?;
    pk.set_item("dropped", r.packets.dropped)?;
    pk.set_item("in_flight", r.packets.in_flight)?;
    meta.set_item("packets", pk)?;
    out.set_item("meta", meta)?;
    Ok(out.into_any().unbind())
}

/// The native module.
/// Split the display traffic of a capture into operations (crates/capture; issue 16).
/// `port`/`addr`: the display connection's listening end (`addr` None: any address);
/// `port_at_client`: it listens on the user's side (plain X11). Returns {"ops": {col:
/// ndarray}, "packets": {col: ndarray} or None, "format", "packets_total",
/// "packets_tcp", "packets_matched"}; times in ns since the epoch, -1 where absent.
/// Raises ValueError with a message naming the file (and packet) on bad input.
#[pyfunction]
#[pyo3(signature = (path, port, addr=None, port_at_client=false, idle_ms=500.0, keep_packets=false, require_gap=true))]
#[allow(clippy::too_many_arguments)]
fn analyze_capture(
    py: Python<'_>,
    path: std::path::PathBuf,
    port: u16,
    addr: Option<&str>,
    port_at_client: bool,
    idle_ms: f64,
    keep_packets: bool,
    require_gap: bool,
) -> PyResult<PyObject> {
    use thinwan_capture as cap;
    let addr = match addr {
        Some(a) => Some(a.parse().map_err(|_| PyValueError::new_err(format!("not an IP address: {a:?}")))?),
        None => None,
    };
    if !(idle_ms.is_finite() && idle_ms > 0.0) {
        return Err(PyValueError::new_err(format!("idle gap must be > 0 ms, got {idle_ms}")));
    }
    let filter = cap::Filter { port, addr, port_at_client };
    let opts = cap::Options {
        idle_gap: thinwan_proto::Duration::from_nanos((idle_ms * 1e6).round() as u64),
        keep_packets,
        require_gap,
    };
    let a = py
        .allow_threads(|| cap::analyze(&path, filter, opts))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let ns = |t: Option<thinwan_proto::Instant>| t.map_or(-1, |t| t.as_nanos() as i64);
    let ops = PyDict::new(py);
    macro_rules! col {
        ($name:literal, $f:expr) => {
            ops.set_item($name, a.ops.iter().map($f).collect::<Vec<_>>().into_pyarray(py))?
        };
    }
    col!("first_packet", |o| o.first_packet);
    col!("last_packet", |o| o.last_packet);
    col!("t_start_ns", |o| o.t_start.as_nanos() as i64);
    col!("t_input_ns", |o| ns(o.t_input));
    col!("t_first_update_ns", |o| ns(o.t_first_update));
    col!("t_end_ns", |o| ns(o.t_end));
    col!("t_last_ns", |o| o.t_last.as_nanos() as i64);
    col!("latency_ns", |o| o.latency().map_or(-1, |d| d.as_nanos() as i64));
    col!("client_started", |o| o.client_started);
    col!("packets_c2s", |o| o.c2s.packets);
    col!("bytes_c2s", |o| o.c2s.bytes);
    col!("payload_c2s", |o| o.c2s.payload);
    col!("packets_s2c", |o| o.s2c.packets);
    col!("bytes_s2c", |o| o.s2c.bytes);
    col!("payload_s2c", |o| o.s2c.payload);
    col!("direction_changes", |o| o.direction_changes);
    col!("round_trips", |o| o.round_trips);
    col!("gap_before_ns", |o| o.gap_before.map_or(-1, |d| d.as_nanos() as i64));
    let out = PyDict::new(py);
    out.set_item("ops", ops)?;
    match a.packets {
        Some(p) => out.set_item("packets", table!(py, p, [number, t_ns, s2c, ip_len, payload, op]))?,
        None => out.set_item("packets", py.None())?,
    }
    out.set_item("format", if a.format == cap::Format::Pcap { "pcap" } else { "pcapng" })?;
    out.set_item("packets_total", a.packets_total)?;
    out.set_item("packets_tcp", a.packets_tcp)?;
    out.set_item("packets_matched", a.packets_matched)?;
    Ok(out.into_any().unbind())
}

/// `thinwan analyze`: a capture's TCP connections → per-connection rows and the pooled
/// gap-rule statistics (crates/capture/src/flows.rs; the dict is specified in
/// docs/analyze.md). `server_port`: the server's port (None: from the handshake);
/// `filter`: a pcap-filter subset expression; `gap_ms`: the gap rule's threshold
/// (default: the scenario's `queue.classifier_gap_ms`); `labels`: also return each new
/// response packet's flow kind; `progress`: packets read on stderr every ~1 M packets.
/// Raises ValueError naming the file (and the packet, where there is one).
#[pyfunction]
#[pyo3(signature = (path, server_port=None, filter=None, gap_ms=thinwan_proto::qdisc::DEFAULT_CLASSIFIER_GAP_MS, max_packets=None, idle_timeout_s=None, labels=false, progress=false))]
#[allow(clippy::too_many_arguments)]
fn analyze_tcp_capture(
    py: Python<'_>,
    path: std::path::PathBuf,
    server_port: Option<u16>,
    filter: Option<&str>,
    gap_ms: f64,
    max_packets: Option<u64>,
    idle_timeout_s: Option<f64>,
    labels: bool,
    progress: bool,
) -> PyResult<PyObject> {
    use thinwan_capture::filter::Expr;
    use thinwan_capture::flows;
    use thinwan_proto::gaprule::{self, LogHist, Transition};
    if !(gap_ms.is_finite() && gap_ms > 0.0) {
        return Err(PyValueError::new_err(format!("gap must be > 0 ms, got {gap_ms}")));
    }
    let idle_timeout_s = idle_timeout_s.unwrap_or(flows::DEFAULT_IDLE.as_secs_f64());
    if !(idle_timeout_s.is_finite() && idle_timeout_s > 0.0) {
        return Err(PyValueError::new_err(format!("idle timeout must be > 0 s, got {idle_timeout_s}")));
    }
    let filter = match filter {
        Some(f) => Some(Expr::parse(f).map_err(|e| PyValueError::new_err(format!("filter {f:?}: {e}")))?),
        None => None,
    };
    let opts = flows::Options {
        server_port,
        filter,
        gap: thinwan_proto::Duration::from_millis_f64(gap_ms),
        max_packets,
        idle_timeout: thinwan_proto::Duration::from_secs_f64(idle_timeout_s),
        labels,
    };
    let t0 = WallClock::now();
    let a = py
        .allow_threads(|| {
            let r = flows::analyze(&path, &opts, |n| {
                if progress {
                    let s = t0.elapsed().as_secs_f64();
                    eprint!(
                        "\rthinwan analyze: {:.1} M packets read ({:.1} M/s)",
                        n as f64 / 1e6,
                        n as f64 / 1e6 / s.max(1e-9)
                    );
                }
            });
            if progress && t0.elapsed().as_secs_f64() > 0.0 {
                eprint!("\r\x1b[K");
            }
            r
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;

    let rows = pyo3::types::PyList::empty(py);
    for c in &a.conns {
        let d = PyDict::new(py);
        d.set_item("id", c.id)?;
        d.set_item("client_addr", c.client.ip().to_string())?;
        d.set_item("client_port", c.client.port())?;
        d.set_item("server_addr", c.server.ip().to_string())?;
        d.set_item("server_port", c.server.port())?;
        d.set_item("server_by", c.server_by.name())?;
        d.set_item("end", c.end.name())?;
        d.set_item("first_s", c.first_s)?;
        d.set_item("last_s", c.last_s)?;
        d.set_item("packets_s2c", c.packets_s2c)?;
        d.set_item("packets_c2s", c.packets_c2s)?;
        d.set_item("bytes_s2c", c.bytes_s2c)?;
        d.set_item("bytes_c2s", c.bytes_c2s)?;
        d.set_item("flows_interactive", c.flows_interactive)?;
        d.set_item("flows_bulk", c.flows_bulk)?;
        for t in Transition::ALL {
            d.set_item(format!("transitions_{}", t.name()), c.transitions[t.index()])?;
        }
        d.set_item("retrans_s2c", c.retrans_s2c)?;
        d.set_item("retrans_c2s", c.retrans_c2s)?;
        d.set_item("ooo_s2c", c.ooo_s2c)?;
        d.set_item("ooo_c2s", c.ooo_c2s)?;
        for (half, r) in [("client", &c.rtt_client), ("server", &c.rtt_server)] {
            d.set_item(format!("rtt_{half}_median_ms"), r.median_ms)?;
            d.set_item(format!("rtt_{half}_p90_ms"), r.p90_ms)?;
            d.set_item(format!("rtt_{half}_samples"), r.samples)?;
        }
        rows.append(d)?;
    }

    let p = &a.pooled;
    let hist = |h: &LogHist| -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("counts", h.counts.clone())?;
        d.set_item("n", h.n)?;
        d.set_item("sum", h.sum_s())?;
        d.set_item("sum_ln", h.sum_ln)?;
        d.set_item("sum_ln2", h.sum_ln2)?;
        d.set_item("below_min", h.below_min)?;
        Ok(d)
    };
    let pooled = PyDict::new(py);
    let tr = PyDict::new(py);
    let gaps = PyDict::new(py);
    for t in Transition::ALL {
        tr.set_item(t.name(), p.transitions[t.index()])?;
        gaps.set_item(t.name(), hist(&p.gaps[t.index()])?)?;
    }
    gaps.set_item("intra", hist(&p.intra)?)?;
    gaps.set_item("request", hist(&p.request)?)?;
    gaps.set_item("response", hist(&p.response)?)?;
    pooled.set_item("transitions", tr)?;
    pooled.set_item("gaps", gaps)?;
    pooled.set_item("bin_edges_s", gaprule::bin_edges_s())?;
    let sizes = PyDict::new(py);
    sizes.set_item("interactive", p.interactive_sizes.counts.clone())?;
    sizes.set_item("bulk", p.bulk_sizes.counts.clone())?;
    pooled.set_item("sizes", sizes)?;
    let bl = PyDict::new(py);
    let counts = PyDict::new(py);
    for (len, n) in p.block_lengths.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        counts.set_item(len, *n)?;
    }
    bl.set_item("counts", counts)?;
    bl.set_item("overflow", p.block_lengths.overflow.clone())?;
    bl.set_item("overflow_dropped", p.block_lengths.overflow_dropped)?;
    pooled.set_item("block_lengths", bl)?;
    pooled.set_item("flows", [("interactive", p.flows[0]), ("bulk", p.flows[1])].into_py_dict(py)?)?;
    let sessions = pyo3::types::PyList::empty(py);
    for s in &p.sessions {
        sessions.append(
            [("duration_s", s.duration_s), ("flows", s.flows as f64), ("bytes", s.bytes as f64)]
                .into_py_dict(py)?,
        )?;
    }
    pooled.set_item("sessions", sessions)?;

    let out = PyDict::new(py);
    out.set_item("flows", rows)?;
    out.set_item("pooled", pooled)?;
    out.set_item("packets", a.packets_total)?;
    out.set_item("tcp", a.packets_tcp)?;
    out.set_item("matched", a.packets_matched)?;
    out.set_item("file", path.display().to_string())?;
    out.set_item("format", if a.format == thinwan_capture::Format::Pcap { "pcap" } else { "pcapng" })?;
    out.set_item("gap_ms", gap_ms)?;
    out.set_item("idle_timeout_s", idle_timeout_s)?;
    out.set_item("live_max", a.live_max)?;
    out.set_item("rtt_samples_seq", a.monitor.samples_seq)?;
    out.set_item("rtt_samples_ts", a.monitor.samples_ts)?;
    match a.labels {
        Some(l) => {
            let d = PyDict::new(py);
            d.set_item("number", l.iter().map(|x| x.0).collect::<Vec<_>>().into_pyarray(py))?;
            d.set_item(
                "bulk",
                l.iter().map(|x| x.1 == gaprule::FlowKind::Bulk).collect::<Vec<_>>().into_pyarray(py),
            )?;
            out.set_item("labels", d)?;
        }
        None => out.set_item("labels", py.None())?,
    }
    Ok(out.into_any().unbind())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(app_types, m)?)?;
    m.add_function(wrap_pyfunction!(client_delays_ms, m)?)?;
    m.add_function(wrap_pyfunction!(pair_apps, m)?)?;
    m.add_function(wrap_pyfunction!(mux_frame_payload_default, m)?)?;
    m.add_function(wrap_pyfunction!(write_wait_ns, m)?)?;
    m.add_function(wrap_pyfunction!(qds_default_qt_ms, m)?)?;
    m.add_function(wrap_pyfunction!(qds_default_keys, m)?)?;
    m.add_function(wrap_pyfunction!(qds_capture_features, m)?)?;
    m.add_function(wrap_pyfunction!(qds_train, m)?)?;
    m.add_function(wrap_pyfunction!(qds_predict, m)?)?;
    m.add_function(wrap_pyfunction!(qds_shipped_model, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_capture, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_tcp_capture, m)?)?;
    Ok(())
}

//! Typed configuration: TOML → serde `Raw*` structs (unknown keys rejected) → validated
//! [`CoreConfig`] / [`EdgeConfig`] via `TryFrom`, so a bad value fails at load with its
//! key named (rpxy `config/toml.rs` style, STYLE.md §11).

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thinwan_proto::mux::{Class, Config as SessionConfig, LaneRule};
use thinwan_proto::Duration;

/// A configuration error, naming the offending key.
#[derive(Debug)]
pub struct ConfigError {
    /// Dotted key path, e.g. `target[1].connect`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { key: key.into(), message: message.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<ConfigError> for std::io::Error {
    fn from(e: ConfigError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
    }
}

/// `[trunk]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTrunk {
    /// (core) Address to accept trunk connections on.
    pub listen: Option<String>,
    /// (edge) Core address to dial.
    pub connect: Option<String>,
    /// (edge) Parallel trunk connections (lanes). Default 1.
    pub connections: Option<u16>,
    /// (edge) TLS server name of the core certificate. Default "thinwan-core".
    pub server_name: Option<String>,
    /// TCP_NOTSENT_LOWAT on trunk sockets, bytes. Default 32768.
    pub notsent_lowat: Option<u32>,
    /// TCP_THIN_LINEAR_TIMEOUTS on trunk sockets. Default false.
    pub thin_linear_timeouts: Option<bool>,
    /// TCP_RTO_MIN_US on trunk sockets, ms (5–200). Default: the kernel's.
    pub rto_min_ms: Option<u32>,
    /// (edge) "fixed" (default): `connections` lanes; "adaptive": `connections` at
    /// start, more up to `max_connections` while a lane stays backlogged.
    pub lanes: Option<String>,
    /// (edge) Most lanes with `lanes = "adaptive"`. Default 8.
    pub max_connections: Option<u16>,
    /// (edge) How adaptive lanes are judged: "held" (default; docs/mux.md "The held
    /// rule") or "backlog" (the first rule, "Adaptive lanes"); the core follows the
    /// edge's `Hello`.
    pub lane_rule: Option<String>,
    /// Open a lane when a lane's backlog in time exceeds this many RTTs. Default 1.0.
    pub lane_open_rtts: Option<f64>,
    /// … for this many RTTs. Default 4.0.
    pub lane_sustain_rtts: Option<f64>,
    /// Give up an extra lane idle for this long, ms. Default 10000.
    pub lane_idle_hold_ms: Option<u64>,
    /// Bound unacknowledged bulk bytes (docs/mux.md). Default false.
    pub bulk_limit: Option<bool>,
    /// Floor of the bulk-in-flight limit, bytes. Default 65536.
    pub bulk_floor: Option<usize>,
    /// Keep lane 0 for thin streams while a bulk stream is present. Default false.
    pub reserve_thin_lane: Option<bool>,
}

/// `[auth]`: either `psk`/`psk_file`, or `cert` + `key` + `ca`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuth {
    /// Pre-shared key text (≥ 16 bytes).
    pub psk: Option<String>,
    /// File whose trimmed contents are the pre-shared key.
    pub psk_file: Option<PathBuf>,
    /// This side's certificate chain (PEM).
    pub cert: Option<PathBuf>,
    /// This side's private key (PEM).
    pub key: Option<PathBuf>,
    /// CA that signed the peer's certificate (PEM).
    pub ca: Option<PathBuf>,
}

/// `[limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Concurrent streams. Default 4096.
    pub max_streams: Option<usize>,
    /// Per-stream receive window, bytes. Default 1 MiB.
    pub stream_window: Option<u32>,
    /// Per-stream send buffer, bytes. Default 256 KiB.
    pub stream_buffer: Option<usize>,
    /// All streams' send buffers plus replay buffers, bytes. Default 256 MiB.
    pub total_buffer: Option<usize>,
    /// Largest data frame payload, bytes. Default 16384.
    pub max_frame_payload: Option<u32>,
    /// Thin-stream threshold: bytes per ~100 ms. Default 32768.
    pub thin_bytes: Option<u32>,
    /// Unauthenticated connections in their handshake at once (core trunk handshakes;
    /// metrics requests of either daemon); more are closed at once. Default 256.
    pub max_handshakes: Option<usize>,
}

/// `[timeouts]`, all in milliseconds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    /// Default 1000.
    pub ping_interval_ms: Option<u64>,
    /// Default 5000.
    pub idle_timeout_ms: Option<u64>,
    /// Default 30000.
    pub resume_timeout_ms: Option<u64>,
    /// Trunk and target connect timeout. Default 5000.
    pub connect_timeout_ms: Option<u64>,
    /// How long a shutdown waits for streams to finish. Default 5000.
    pub shutdown_grace_ms: Option<u64>,
    /// Accept to authenticated `Hello` at the core (TLS, key proof, hello); a metrics
    /// request must arrive within it too. Default 5000.
    pub handshake_timeout_ms: Option<u64>,
}

/// `[metrics]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    /// Address for the Prometheus text endpoint (`GET /metrics`).
    pub listen: Option<String>,
}

/// `[log]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    /// "text" (default) or "json".
    pub format: Option<String>,
    /// "error", "warn", "info" (default), "debug", "trace" or "off", or a list of
    /// `target=level` directives such as "info,thinwan_mux=debug".
    pub level: Option<String>,
}

/// `[[target]]` (core): a server the core may connect streams to.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    /// Name the edge refers to.
    pub name: String,
    /// Server address.
    pub connect: String,
    /// "auto" (default), "interactive" or "bulk".
    pub class: Option<String>,
}

/// `[[forward]]` (edge): a local listener whose connections go to a core target.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawForward {
    /// Target name at the core.
    pub name: String,
    /// Address clients connect to.
    pub listen: String,
    /// "auto" (default), "interactive" or "bulk".
    pub class: Option<String>,
    /// Shedding (docs/mux.md "Shedding"): absent = off.
    pub shed: Option<RawShed>,
}

/// `forward[i].shed = { direct = "IP:PORT", slack_ms = N }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShed {
    /// Where the edge connects a shed client itself: the server, reached without the
    /// tunnel.
    pub direct: String,
    /// How much longer (ms) the tunnel's expected added delay must be than a direct
    /// connection's before a client is shed. Default 100; negative sheds a faster
    /// tunnel too.
    pub slack_ms: Option<f64>,
}

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// `[trunk]`.
    #[serde(default)]
    pub trunk: RawTrunk,
    /// `[auth]`.
    #[serde(default)]
    pub auth: RawAuth,
    /// `[limits]`.
    #[serde(default)]
    pub limits: RawLimits,
    /// `[timeouts]`.
    #[serde(default)]
    pub timeouts: RawTimeouts,
    /// `[metrics]`.
    #[serde(default)]
    pub metrics: RawMetrics,
    /// `[log]`.
    #[serde(default)]
    pub log: RawLog,
    /// `[[target]]` (core only).
    #[serde(default)]
    pub target: Vec<RawTarget>,
    /// `[[forward]]` (edge only).
    #[serde(default)]
    pub forward: Vec<RawForward>,
}

/// How the trunk is authenticated.
#[derive(Clone, Debug)]
pub enum Auth {
    /// TLS 1.3 with throw-away certificates, then both sides prove the key with an
    /// HMAC over the TLS exporter (binds the proof to this connection).
    Psk(Vec<u8>),
    /// TLS 1.3 with mutual certificate authentication against `ca`.
    Certs {
        /// Own chain.
        cert: PathBuf,
        /// Own key.
        key: PathBuf,
        /// Peer CA.
        ca: PathBuf,
    },
}

/// Settings both daemons share.
#[derive(Clone, Debug)]
pub struct Common {
    /// Trunk authentication.
    pub auth: Auth,
    /// Session parameters for the sans-IO core.
    pub session: SessionConfig,
    /// TCP_NOTSENT_LOWAT for trunk sockets.
    pub notsent_lowat: u32,
    /// TCP_THIN_LINEAR_TIMEOUTS on trunk sockets: a lane with under four segments in
    /// flight keeps its RTO for six retries instead of doubling it (Linux
    /// `tcp_thin_linear_timeouts`, per socket).
    pub thin_linear_timeouts: bool,
    /// TCP_RTO_MIN_US on trunk sockets (Linux ≥ 6.15): the floor of a lane's
    /// retransmission timeout, which a lane carrying a few thin streams pays for most
    /// losses. `None`: the kernel's (`tcp_rto_min_us`, 200 ms by default).
    pub rto_min: Option<std::time::Duration>,
    /// Connect timeout.
    pub connect_timeout: std::time::Duration,
    /// Limit on unauthenticated handshakes (and metrics requests) in progress.
    pub max_handshakes: usize,
    /// Time an unauthenticated connection may take to authenticate (or to send its
    /// metrics request).
    pub handshake_timeout: std::time::Duration,
    /// Shutdown grace period.
    pub shutdown_grace: std::time::Duration,
    /// Metrics endpoint.
    pub metrics: Option<SocketAddr>,
    /// Log format is JSON.
    pub log_json: bool,
    /// Log filter.
    pub log_level: String,
}

/// A validated core configuration.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// Trunk listen address.
    pub listen: SocketAddr,
    /// Targets by name.
    pub targets: Vec<Target>,
    /// Shared settings.
    pub common: Common,
}

/// A core target.
#[derive(Clone, Debug)]
pub struct Target {
    /// Name.
    pub name: String,
    /// Address.
    pub connect: SocketAddr,
    /// Scheduling class.
    pub class: Class,
}

/// A validated edge configuration.
#[derive(Clone, Debug)]
pub struct EdgeConfig {
    /// Core address.
    pub connect: SocketAddr,
    /// TLS server name expected on the core's certificate.
    pub server_name: String,
    /// Local listeners.
    pub forwards: Vec<Forward>,
    /// Shared settings.
    pub common: Common,
}

/// An edge listener.
#[derive(Clone, Debug)]
pub struct Forward {
    /// Target name at the core.
    pub name: String,
    /// Listen address.
    pub listen: SocketAddr,
    /// Scheduling class.
    pub class: Class,
    /// Shedding, when configured.
    pub shed: Option<Shed>,
}

/// Shedding of one forward: a client accepted while the session says shed goes to
/// `direct` over a plain TCP splice instead of into the tunnel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shed {
    /// Server address reached without the tunnel.
    pub direct: SocketAddr,
    /// `slack_ms` in seconds (signed: compared with `Session::shed_margin`).
    pub slack_s: f64,
}

/// Default `forward[i].shed.slack_ms`: two thirds of the 150-ms one-way delay beyond
/// which interaction is no longer perceived as immediate (ITU-T G.114), so a client
/// leaves the tunnel only when that costs clearly less than staying.
pub const DEFAULT_SHED_SLACK_MS: f64 = 100.0;

/// Most trunk lanes (`trunk.connections`, `trunk.max_connections`). A lost segment
/// holds up every stream of its lane until it is repaired, so the fewer streams share a
/// lane the less they wait for each other: in the lab at 5 % loss and 300 ms, 200 game
/// streams took 1.13–1.17 × direct TCP's median on 64 lanes and 1.00 × on 128
/// (docs/mux.md "How many lanes at most"). 256 leaves room for more streams than that.
pub const MAX_LANES: u16 = 256;

/// Parse TOML text into the raw structure (errors carry the key and position).
pub fn parse(text: &str) -> Result<RawConfig, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::new("", e.to_string()))
}

/// Read and parse a file; relative paths inside are resolved against its directory.
pub fn load(path: &Path) -> Result<RawConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new("", format!("cannot read {}: {e}", path.display())))?;
    let mut raw =
        parse(&text).map_err(|e| ConfigError::new("", format!("{}: {}", path.display(), e.message)))?;
    let base = path.parent().unwrap_or(Path::new("."));
    for p in [&mut raw.auth.psk_file, &mut raw.auth.cert, &mut raw.auth.key, &mut raw.auth.ca]
        .into_iter()
        .flatten()
    {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    }
    Ok(raw)
}

impl TryFrom<RawConfig> for CoreConfig {
    type Error = ConfigError;
    fn try_from(raw: RawConfig) -> Result<Self, ConfigError> {
        if raw.trunk.connect.is_some() {
            return Err(ConfigError::new("trunk.connect", "is an edge setting; the core uses trunk.listen"));
        }
        if raw.trunk.connections.is_some() {
            return Err(ConfigError::new("trunk.connections", "is chosen by the edge"));
        }
        for (key, set) in [
            ("trunk.lanes", raw.trunk.lanes.is_some()),
            ("trunk.max_connections", raw.trunk.max_connections.is_some()),
            ("trunk.lane_rule", raw.trunk.lane_rule.is_some()),
        ] {
            if set {
                return Err(ConfigError::new(key, "is chosen by the edge"));
            }
        }
        if !raw.forward.is_empty() {
            return Err(ConfigError::new("forward", "is an edge setting; the core has [[target]]"));
        }
        let listen = addr("trunk.listen", raw.trunk.listen.as_deref())?;
        if raw.target.is_empty() {
            return Err(ConfigError::new("target", "at least one [[target]] is required"));
        }
        let mut names = HashSet::new();
        let mut targets = Vec::new();
        for (i, t) in raw.target.iter().enumerate() {
            let key = |f: &str| format!("target[{i}].{f}");
            check_name(&key("name"), &t.name)?;
            if !names.insert(t.name.clone()) {
                return Err(ConfigError::new(key("name"), format!("duplicate target name {:?}", t.name)));
            }
            targets.push(Target {
                name: t.name.clone(),
                connect: addr(&key("connect"), Some(&t.connect))?,
                class: class(&key("class"), t.class.as_deref())?,
            });
        }
        let common = common(&raw, 1)?;
        Ok(CoreConfig { listen, targets, common })
    }
}

impl TryFrom<RawConfig> for EdgeConfig {
    type Error = ConfigError;
    fn try_from(raw: RawConfig) -> Result<Self, ConfigError> {
        if raw.trunk.listen.is_some() {
            return Err(ConfigError::new("trunk.listen", "is a core setting; the edge uses trunk.connect"));
        }
        if !raw.target.is_empty() {
            return Err(ConfigError::new("target", "is a core setting; the edge has [[forward]]"));
        }
        let connect = addr("trunk.connect", raw.trunk.connect.as_deref())?;
        let lanes = raw.trunk.connections.unwrap_or(1);
        if !(1..=MAX_LANES).contains(&lanes) {
            return Err(ConfigError::new("trunk.connections", format!("must be between 1 and {MAX_LANES}")));
        }
        if raw.forward.is_empty() {
            return Err(ConfigError::new("forward", "at least one [[forward]] is required"));
        }
        let mut listens = HashSet::new();
        let mut forwards = Vec::new();
        for (i, f) in raw.forward.iter().enumerate() {
            let key = |k: &str| format!("forward[{i}].{k}");
            check_name(&key("name"), &f.name)?;
            let listen = addr(&key("listen"), Some(&f.listen))?;
            if !listens.insert(listen) {
                return Err(ConfigError::new(key("listen"), format!("address {listen} used twice")));
            }
            forwards.push(Forward {
                name: f.name.clone(),
                listen,
                class: class(&key("class"), f.class.as_deref())?,
                shed: f.shed.as_ref().map(|sh| shed(&key("shed"), sh)).transpose()?,
            });
        }
        let server_name = raw.trunk.server_name.clone().unwrap_or_else(|| "thinwan-core".into());
        if rustls_pki_types::ServerName::try_from(server_name.as_str()).is_err() {
            return Err(ConfigError::new(
                "trunk.server_name",
                format!("{server_name:?} is not a valid DNS name or IP"),
            ));
        }
        let mut common = common(&raw, lanes)?;
        common.session.max_lanes = match raw.trunk.lanes.as_deref().unwrap_or("fixed") {
            "fixed" => {
                for (key, set) in [
                    ("trunk.max_connections", raw.trunk.max_connections.is_some()),
                    ("trunk.lane_rule", raw.trunk.lane_rule.is_some()),
                ] {
                    if set {
                        return Err(ConfigError::new(key, "needs trunk.lanes = \"adaptive\""));
                    }
                }
                lanes
            }
            "adaptive" => {
                let max = raw.trunk.max_connections.unwrap_or(8);
                if !(lanes..=MAX_LANES).contains(&max) {
                    return Err(ConfigError::new(
                        "trunk.max_connections",
                        format!("must be between trunk.connections ({lanes}) and {MAX_LANES}"),
                    ));
                }
                max
            }
            other => {
                return Err(ConfigError::new(
                    "trunk.lanes",
                    format!("{other:?}: expected \"fixed\" or \"adaptive\""),
                ))
            }
        };
        common.session.lane_rule = match raw.trunk.lane_rule.as_deref().unwrap_or("held") {
            "backlog" => LaneRule::Backlog,
            "held" => LaneRule::Held,
            other => {
                return Err(ConfigError::new(
                    "trunk.lane_rule",
                    format!("{other:?}: expected \"backlog\" or \"held\""),
                ))
            }
        };
        Ok(EdgeConfig { connect, server_name, forwards, common })
    }
}

fn shed(key: &str, raw: &RawShed) -> Result<Shed, ConfigError> {
    let direct = addr(&format!("{key}.direct"), Some(&raw.direct))?;
    let slack_ms = raw.slack_ms.unwrap_or(DEFAULT_SHED_SLACK_MS);
    if !(slack_ms.is_finite() && (-60_000.0..=60_000.0).contains(&slack_ms)) {
        return Err(ConfigError::new(format!("{key}.slack_ms"), "must be between -60000 and 60000"));
    }
    Ok(Shed { direct, slack_s: slack_ms / 1e3 })
}

fn common(raw: &RawConfig, lanes: u16) -> Result<Common, ConfigError> {
    let d = SessionConfig::default();
    let l = &raw.limits;
    let t = &raw.timeouts;
    let max_payload = l.max_frame_payload.unwrap_or(d.max_payload);
    if !(512..=1024 * 1024).contains(&max_payload) {
        return Err(ConfigError::new("limits.max_frame_payload", "must be between 512 and 1048576"));
    }
    let stream_window = l.stream_window.unwrap_or(d.stream_window);
    if stream_window < max_payload {
        return Err(ConfigError::new("limits.stream_window", "must be at least limits.max_frame_payload"));
    }
    let stream_buffer = l.stream_buffer.unwrap_or(d.stream_buffer);
    if stream_buffer < 1024 {
        return Err(ConfigError::new("limits.stream_buffer", "must be at least 1024"));
    }
    let total_buffer = l.total_buffer.unwrap_or(d.total_buffer);
    if total_buffer < stream_buffer {
        return Err(ConfigError::new("limits.total_buffer", "must be at least limits.stream_buffer"));
    }
    let max_streams = l.max_streams.unwrap_or(d.max_streams);
    if max_streams == 0 {
        return Err(ConfigError::new("limits.max_streams", "must be positive"));
    }
    let ms = |key: &str, v: Option<u64>, default: u64| -> Result<u64, ConfigError> {
        let v = v.unwrap_or(default);
        if v == 0 {
            return Err(ConfigError::new(format!("timeouts.{key}"), "must be positive"));
        }
        Ok(v)
    };
    let ping = ms("ping_interval_ms", t.ping_interval_ms, 1000)?;
    let idle = ms("idle_timeout_ms", t.idle_timeout_ms, 5000)?;
    if idle <= ping {
        return Err(ConfigError::new("timeouts.idle_timeout_ms", "must exceed timeouts.ping_interval_ms"));
    }
    let resume = ms("resume_timeout_ms", t.resume_timeout_ms, 30_000)?;
    let connect = ms("connect_timeout_ms", t.connect_timeout_ms, 5000)?;
    let grace = t.shutdown_grace_ms.unwrap_or(5000);
    let handshake = ms("handshake_timeout_ms", t.handshake_timeout_ms, DEFAULT_HANDSHAKE_TIMEOUT_MS)?;
    let max_handshakes = l.max_handshakes.unwrap_or(DEFAULT_MAX_HANDSHAKES);
    // The upper bound keeps the semaphore behind it constructible (tokio panics above
    // 2^61 permits); a million handshakes would need a million descriptors anyway.
    if !(1..=1_000_000).contains(&max_handshakes) {
        return Err(ConfigError::new("limits.max_handshakes", "must be between 1 and 1000000"));
    }
    let tr = &raw.trunk;
    let positive = |key: &str, v: Option<f64>, default: f64| -> Result<f64, ConfigError> {
        let v = v.unwrap_or(default);
        if !(v.is_finite() && v > 0.0) {
            return Err(ConfigError::new(format!("trunk.{key}"), "must be a positive number"));
        }
        Ok(v)
    };
    let lane_open_rtts = positive("lane_open_rtts", tr.lane_open_rtts, d.lane_open_rtts)?;
    let lane_sustain_rtts = positive("lane_sustain_rtts", tr.lane_sustain_rtts, d.lane_sustain_rtts)?;
    let hold = tr.lane_idle_hold_ms.unwrap_or(d.lane_idle_hold.as_nanos() / 1_000_000);
    if hold == 0 {
        return Err(ConfigError::new("trunk.lane_idle_hold_ms", "must be positive"));
    }
    // The kernel's range for TCP_RTO_MIN_US: at least a few jiffies, at most TCP_RTO_MIN.
    let rto_min = match tr.rto_min_ms {
        None => None,
        Some(v @ 5..=200) => Some(std::time::Duration::from_millis(v.into())),
        Some(v) => return Err(ConfigError::new("trunk.rto_min_ms", format!("{v}: must be 5–200 (ms)"))),
    };
    let bulk_floor = tr.bulk_floor.unwrap_or(d.bulk_floor);
    if bulk_floor < max_payload as usize {
        return Err(ConfigError::new("trunk.bulk_floor", "must be at least limits.max_frame_payload"));
    }
    let session = SessionConfig {
        lanes,
        max_lanes: lanes,
        lane_open_rtts,
        lane_sustain_rtts,
        lane_idle_hold: Duration::from_millis(hold),
        bulk_limit: tr.bulk_limit.unwrap_or(false),
        bulk_floor,
        reserve_thin_lane: tr.reserve_thin_lane.unwrap_or(false),
        max_payload,
        stream_window,
        stream_buffer,
        total_buffer,
        max_streams,
        thin_bytes: l.thin_bytes.unwrap_or(d.thin_bytes),
        ping_interval: Duration::from_millis(ping),
        idle_timeout: Duration::from_millis(idle),
        resume_timeout: Duration::from_millis(resume),
        ..d
    };
    let metrics = match raw.metrics.listen.as_deref() {
        None => None,
        Some(s) => Some(addr("metrics.listen", Some(s))?),
    };
    let log_json = match raw.log.format.as_deref().unwrap_or("text") {
        "text" => false,
        "json" => true,
        other => {
            return Err(ConfigError::new("log.format", format!("{other:?}: expected \"text\" or \"json\"")))
        }
    };
    Ok(Common {
        auth: auth(&raw.auth)?,
        session,
        notsent_lowat: raw.trunk.notsent_lowat.unwrap_or(32 * 1024),
        thin_linear_timeouts: raw.trunk.thin_linear_timeouts.unwrap_or(false),
        rto_min,
        connect_timeout: std::time::Duration::from_millis(connect),
        max_handshakes,
        handshake_timeout: std::time::Duration::from_millis(handshake),
        shutdown_grace: std::time::Duration::from_millis(grace),
        metrics,
        log_json,
        log_level: log_level(raw.log.level.as_deref())?,
    })
}

/// Default `limits.max_handshakes`. A handshake in progress costs ~25 KB (rustls
/// connection state and buffers, the task, the socket; measured: 200 concurrent ones
/// raised the core's RSS by 5.0 MB), so 256 of them bound an unauthenticated flood to
/// ~6.5 MB, while 100 edges of two lanes each can still reconnect at once after a
/// core restart (the rest retry within their ≤ 2 s back-off).
pub const DEFAULT_MAX_HANDSHAKES: usize = 256;
/// Default `timeouts.handshake_timeout_ms`: the TLS 1.3 handshake, the key proof and the
/// `Hello` take about three round trips, so 5 s leave room for a 300 ms WAN path with a
/// lost SYN-ACK or two (1 s initial RTO), and a slowloris peer holds a slot for at most that.
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 5000;

/// Levels `log.level` accepts, alone or after `target=` in a directive.
const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// `log.level`: a level, or comma-separated `level` / `target=level` directives.
///
/// Why not hand the string to `EnvFilter`: it reads any unknown word as a *target*
/// name ("verbose!!" means "log target `verbose!!` at every level"), so a typo passes and
/// silently turns all of the daemon's logging off. Only the forms above are accepted;
/// `RUST_LOG` still takes the full `EnvFilter` syntax.
fn log_level(v: Option<&str>) -> Result<String, ConfigError> {
    let Some(v) = v else { return Ok("info".into()) };
    let is_level = |s: &str| LOG_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(s));
    let is_target = |s: &str| {
        s.split("::").all(|part| {
            part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    let ok = !v.trim().is_empty()
        && v.split(',').all(|d| match d.trim().split_once('=') {
            None => is_level(d.trim()),
            Some((target, level)) => is_target(target.trim()) && is_level(level.trim()),
        });
    if !ok {
        return Err(ConfigError::new(
            "log.level",
            format!(
                "{v:?}: expected one of {} or comma-separated target=level directives \
                 (e.g. \"info,thinwan_mux=debug\")",
                LOG_LEVELS.map(|l| format!("\"{l}\"")).join(", ")
            ),
        ));
    }
    Ok(v.to_owned())
}

fn auth(a: &RawAuth) -> Result<Auth, ConfigError> {
    let psk = match (&a.psk, &a.psk_file) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::new("auth.psk", "give auth.psk or auth.psk_file, not both"))
        }
        (Some(p), None) => Some(("auth.psk", p.trim().as_bytes().to_vec())),
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f).map_err(|e| {
                ConfigError::new("auth.psk_file", format!("cannot read {}: {e}", f.display()))
            })?;
            Some(("auth.psk_file", text.trim().as_bytes().to_vec()))
        }
        (None, None) => None,
    };
    let certs = a.cert.is_some() || a.key.is_some() || a.ca.is_some();
    match (psk, certs) {
        (Some(_), true) => Err(ConfigError::new("auth", "use either a pre-shared key or certificates, not both")),
        (Some((key, p)), false) => {
            if p.len() < 16 {
                return Err(ConfigError::new(key, "pre-shared key must be at least 16 bytes"));
            }
            Ok(Auth::Psk(p))
        }
        (None, true) => {
            let need = |k: &str, v: &Option<PathBuf>| -> Result<PathBuf, ConfigError> {
                let p = v.clone().ok_or_else(|| ConfigError::new(format!("auth.{k}"), "required with certificates"))?;
                if !p.is_file() {
                    return Err(ConfigError::new(format!("auth.{k}"), format!("no such file {}", p.display())));
                }
                Ok(p)
            };
            Ok(Auth::Certs { cert: need("cert", &a.cert)?, key: need("key", &a.key)?, ca: need("ca", &a.ca)? })
        }
        (None, false) => Err(ConfigError::new(
            "auth",
            "the trunk must be authenticated: set auth.psk / auth.psk_file, or auth.cert + auth.key + auth.ca",
        )),
    }
}

fn addr(key: &str, v: Option<&str>) -> Result<SocketAddr, ConfigError> {
    let v = v.ok_or_else(|| ConfigError::new(key, "required"))?;
    v.parse().map_err(|_| ConfigError::new(key, format!("{v:?} is not an IP:port socket address")))
}

fn class(key: &str, v: Option<&str>) -> Result<Class, ConfigError> {
    match v.unwrap_or("auto") {
        "auto" => Ok(Class::Auto),
        "interactive" => Ok(Class::Interactive),
        "bulk" => Ok(Class::Bulk),
        other => {
            Err(ConfigError::new(key, format!("{other:?}: expected \"auto\", \"interactive\" or \"bulk\"")))
        }
    }
}

fn check_name(key: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || name.len() > thinwan_proto::mux::frame::MAX_TARGET_NAME {
        return Err(ConfigError::new(key, "must be 1 to 255 bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORE: &str = r#"
        [trunk]
        listen = "127.0.0.1:7400"
        [auth]
        psk = "0123456789abcdef0123"
        [[target]]
        name = "echo"
        connect = "127.0.0.1:7000"
    "#;

    fn edge(trunk_extra: &str) -> Result<EdgeConfig, ConfigError> {
        let text = format!(
            "[trunk]\nconnect = \"127.0.0.1:7400\"\n{trunk_extra}\n[auth]\npsk = \"0123456789abcdef0123\"\n\
             [[forward]]\nname = \"echo\"\nlisten = \"127.0.0.1:7001\"\n"
        );
        EdgeConfig::try_from(parse(&text)?)
    }

    #[test]
    fn adaptive_lane_keys_parse_and_bad_ones_name_their_key() {
        let e = edge("").unwrap();
        assert!(!e.common.session.adaptive());
        let e = edge("lanes = \"adaptive\"\nmax_connections = 6\nbulk_limit = true").unwrap();
        assert_eq!((e.common.session.lanes, e.common.session.max_lanes), (1, 6));
        assert!(e.common.session.adaptive() && e.common.session.bulk_limit);
        assert_eq!(e.common.session.lane_rule, LaneRule::Held);
        let e = edge("lanes = \"adaptive\"\nlane_rule = \"backlog\"").unwrap();
        assert_eq!(e.common.session.lane_rule, LaneRule::Backlog);
        assert!(!e.common.thin_linear_timeouts);
        let e = edge("lanes = \"adaptive\"\nmax_connections = 256\nthin_linear_timeouts = true").unwrap();
        assert_eq!(e.common.session.max_lanes, MAX_LANES);
        assert!(e.common.thin_linear_timeouts);
        assert_eq!(e.common.rto_min, None);
        let e = edge("rto_min_ms = 50").unwrap();
        assert_eq!(e.common.rto_min, Some(std::time::Duration::from_millis(50)));
        for (extra, key) in [
            ("lanes = \"elastic\"", "trunk.lanes"),
            ("max_connections = 4", "trunk.max_connections"),
            ("lane_rule = \"held\"", "trunk.lane_rule"),
            ("lanes = \"adaptive\"\nlane_rule = \"loss\"", "trunk.lane_rule"),
            ("connections = 4\nlanes = \"adaptive\"\nmax_connections = 2", "trunk.max_connections"),
            ("lanes = \"adaptive\"\nmax_connections = 257", "trunk.max_connections"),
            ("connections = 257", "trunk.connections"),
            ("lane_open_rtts = 0.0", "trunk.lane_open_rtts"),
            ("lane_sustain_rtts = -1.0", "trunk.lane_sustain_rtts"),
            ("lane_idle_hold_ms = 0", "trunk.lane_idle_hold_ms"),
            ("bulk_floor = 100", "trunk.bulk_floor"),
            ("rto_min_ms = 4", "trunk.rto_min_ms"),
            ("rto_min_ms = 201", "trunk.rto_min_ms"),
        ] {
            assert_eq!(edge(extra).unwrap_err().key, key, "{extra}");
        }
        for key in ["lanes = \"adaptive\"", "lane_rule = \"held\""] {
            let core = CORE.replace("[trunk]", &format!("[trunk]\n{key}"));
            let err = CoreConfig::try_from(parse(&core).unwrap()).unwrap_err().key;
            assert_eq!(err, format!("trunk.{}", key.split(' ').next().unwrap()));
        }
    }

    #[test]
    fn shed_is_off_by_default_and_bad_keys_are_named() {
        let fwd = |shed: &str| {
            let text = format!(
                "[trunk]\nconnect = \"127.0.0.1:7400\"\n[auth]\npsk = \"0123456789abcdef0123\"\n\
                 [[forward]]\nname = \"echo\"\nlisten = \"127.0.0.1:7001\"\n{shed}\n"
            );
            EdgeConfig::try_from(parse(&text).map_err(|e| e.to_string()).unwrap())
        };
        assert_eq!(edge("").unwrap().forwards[0].shed, None);
        let s = fwd("shed = { direct = \"127.0.0.1:7000\" }").unwrap().forwards[0].shed.unwrap();
        assert_eq!((s.direct.port(), s.slack_s), (7000, DEFAULT_SHED_SLACK_MS / 1e3));
        let s = fwd("shed = { direct = \"[::1]:7000\", slack_ms = -50 }").unwrap().forwards[0].shed;
        assert_eq!(s.map(|s| s.slack_s), Some(-0.05));
        for (shed, key) in [
            ("shed = { direct = \"localhost:7000\" }", "forward[0].shed.direct"),
            ("shed = { direct = \"127.0.0.1:7000\", slack_ms = 1e9 }", "forward[0].shed.slack_ms"),
            ("shed = { direct = \"127.0.0.1:7000\", slack_ms = nan }", "forward[0].shed.slack_ms"),
        ] {
            assert_eq!(fwd(shed).unwrap_err().key, key, "{shed}");
        }
        // A missing or unknown key fails at parsing, naming it.
        for (shed, word) in [
            ("shed = { slack_ms = 5 }", "direct"),
            ("shed = { direct = \"127.0.0.1:1\", slak_ms = 5 }", "slak_ms"),
        ] {
            let text = format!(
                "[trunk]\nconnect = \"127.0.0.1:7400\"\n[auth]\npsk = \"0123456789abcdef0123\"\n\
                 [[forward]]\nname = \"echo\"\nlisten = \"127.0.0.1:7001\"\n{shed}\n"
            );
            let e = parse(&text).unwrap_err();
            assert!(e.message.contains(word), "{e}");
        }
    }

    #[test]
    fn core_ok() {
        let c = CoreConfig::try_from(parse(CORE).unwrap()).unwrap();
        assert_eq!(c.targets[0].name, "echo");
        assert!(matches!(c.common.auth, Auth::Psk(_)));
    }

    #[test]
    fn bad_values_name_their_key() {
        let bad = CORE.replace("127.0.0.1:7000", "localhost");
        let e = CoreConfig::try_from(parse(&bad).unwrap()).unwrap_err();
        assert_eq!(e.key, "target[0].connect");
        let bad = CORE.replace("[auth]\n        psk = \"0123456789abcdef0123\"", "");
        let e = CoreConfig::try_from(parse(&bad).unwrap()).unwrap_err();
        assert_eq!(e.key, "auth");
        let bad = format!("{CORE}\n[limits]\nstream_window = 100\n");
        let e = CoreConfig::try_from(parse(&bad).unwrap()).unwrap_err();
        assert_eq!(e.key, "limits.stream_window");
        let e = parse(&format!("{CORE}\n[limits]\nmax_stream = 3\n")).unwrap_err();
        assert!(e.message.contains("max_stream"), "{e}");
        let e = EdgeConfig::try_from(parse(CORE).unwrap()).unwrap_err();
        assert_eq!(e.key, "trunk.listen");
        for n in ["0", "9223372036854775807"] {
            let bad = format!("{CORE}\n[limits]\nmax_handshakes = {n}\n");
            let e = CoreConfig::try_from(parse(&bad).unwrap()).unwrap_err();
            assert_eq!(e.key, "limits.max_handshakes");
        }
        let bad = format!("{CORE}\n[timeouts]\nhandshake_timeout_ms = 0\n");
        let e = CoreConfig::try_from(parse(&bad).unwrap()).unwrap_err();
        assert_eq!(e.key, "timeouts.handshake_timeout_ms");
    }

    #[test]
    fn handshake_limits_default_and_parse() {
        let c = CoreConfig::try_from(parse(CORE).unwrap()).unwrap();
        assert_eq!(c.common.max_handshakes, DEFAULT_MAX_HANDSHAKES);
        assert_eq!(c.common.handshake_timeout.as_millis() as u64, DEFAULT_HANDSHAKE_TIMEOUT_MS);
        let s = format!("{CORE}\n[limits]\nmax_handshakes = 7\n[timeouts]\nhandshake_timeout_ms = 900\n");
        let c = CoreConfig::try_from(parse(&s).unwrap()).unwrap();
        assert_eq!((c.common.max_handshakes, c.common.handshake_timeout.as_millis()), (7, 900));
    }

    fn with_level(level: &str) -> Result<CoreConfig, ConfigError> {
        CoreConfig::try_from(parse(&format!("{CORE}\n[log]\nlevel = {level:?}\n")).unwrap())
    }

    /// Issue 15 item 18: "verbose!!" passed and turned all logging off.
    #[test]
    fn log_level_typos_are_rejected_with_the_key_and_the_accepted_values() {
        // EnvFilter itself accepts it (as a target name): why we validate before it.
        assert!(tracing_subscriber::EnvFilter::try_new("verbose!!").is_ok());
        for bad in ["verbose!!", "", "inf", "info,", "thinwan_mux=loud", "=info", "a b=info", "info;debug"] {
            let e = with_level(bad).unwrap_err();
            assert_eq!(e.key, "log.level", "{bad:?}");
            assert!(e.message.contains("\"warn\"") && e.message.contains("target=level"), "{e}");
        }
        for good in ["info", "WARN", "off", "trace", "info,thinwan_mux=debug", "thinwan_mux::core=trace"] {
            let c = with_level(good).unwrap_or_else(|e| panic!("{good:?}: {e}"));
            // Whatever passes here, the subscriber must take as given.
            assert!(tracing_subscriber::EnvFilter::try_new(&c.common.log_level).is_ok(), "{good:?}");
        }
    }
}

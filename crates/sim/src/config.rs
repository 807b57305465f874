//! The validated scenario as the simulator receives it (docs/scenario.md).
//!
//! Validation with user-facing errors happens in Python at load time; here every key
//! the simulator uses is required (no serde defaults), so a drift between the two
//! sides fails loudly instead of silently using another default. The exceptions are
//! `[queue]` and `[qds]`, whose keys are the core's [`QueueKeys`] and [`QdsKeys`] shared
//! with the lab's link emulator and daemon (which need defaults): there an unknown key
//! is refused instead. Every
//! name is parsed here into an enum, once (an unknown one fails naming its key);
//! sections and keys the simulator does not use (e.g. lab-only settings) are ignored.

use serde::Deserialize;
use thinwan_proto::mux::LaneRule;
pub use thinwan_proto::qdisc::QueueKeys;
use thinwan_proto::qdisc::QueueSpec;
pub use thinwan_proto::qds::keys::QdsKeys;
use thinwan_proto::traffic::Model;

/// A complete scenario.
#[derive(Clone, Debug, Deserialize)]
pub struct Config {
    /// Run-level settings.
    pub scenario: ScenarioSec,
    /// Topology.
    pub topology: TopologySec,
    /// Bottleneck queue.
    pub queue: QueueKeys,
    /// TCP of every connection.
    pub tcp: TcpSec,
    /// Traffic sources.
    pub traffic: TrafficSec,
    /// What to record.
    pub records: RecordsSec,
    /// The thin-stream tunnel of the mux topology.
    pub mux: MuxSec,
    /// The QDS controller (`queue.discipline = "qds"`): the core's keys, shared with
    /// thinwan-link and thinwan-qds (defaults, unknown keys refused, like `[queue]`).
    pub qds: QdsKeys,
}

/// `[mux]` (used with `topology.kind = "mux"` only).
#[derive(Clone, Debug, Deserialize)]
pub struct MuxSec {
    /// One TCP connection per stream, or the tunnel.
    pub mode: MuxMode,
    /// Trunk connections (session lanes); a stream stays on one.
    pub trunks: u32,
    /// Largest data frame payload (the daemons' `limits.max_frame_payload`).
    pub frame_payload_bytes: u32,
    /// TCP_NOTSENT_LOWAT of the trunk sockets (the daemons' `trunk.notsent_lowat`).
    pub notsent_lowat_bytes: u32,
    /// `trunks` lanes always (fixed), or opened on demand up to `max_lanes` (adaptive).
    pub lanes: MuxLanes,
    /// Most lanes with `lanes = "adaptive"`.
    pub max_lanes: u32,
    /// How adaptive lanes are judged (the daemons' `trunk.lane_rule`); unset: the
    /// backlog rule, which sweeps from before the key ran (the daemons' default is the
    /// held rule).
    pub lane_rule: Option<LaneRule>,
    /// Keep unacknowledged bulk bytes below the bulk-in-flight limit (docs/mux.md).
    pub bulk_limit: bool,
    /// Shedding: a stream that opens while the edge's session says so goes on a direct
    /// connection of its own (docs/mux.md "Shedding").
    pub shed: bool,
    /// How much longer (ms) the tunnel's expected added delay must be than a direct
    /// connection's before a stream is shed; negative sheds even a faster tunnel.
    pub shed_slack_ms: f64,
    /// `TCP_THIN_LINEAR_TIMEOUTS` on every trunk connection (the daemons'
    /// `trunk.thin_linear_timeouts`): a lane with fewer than four segments in flight
    /// does not back its retransmission timeout off for its first six retries.
    pub thin_linear_timeouts: bool,
    /// The trunk connections' minimum RTO, ms (the daemons' `trunk.rto_min_ms`, Linux
    /// `TCP_RTO_MIN_US`); `None`: `tcp.min_rto_ms`, as every other connection.
    pub rto_min_ms: Option<u32>,
}

/// `mux.lanes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MuxLanes {
    /// `mux.trunks` lanes for the whole run.
    Fixed,
    /// `mux.trunks` lanes at start, more (up to `mux.max_lanes`) when backlogged.
    Adaptive,
}

/// `[scenario]`
#[derive(Clone, Debug, Deserialize)]
pub struct ScenarioSec {
    /// Label.
    pub name: String,
    /// Source activity, seconds.
    pub duration_s: f64,
    /// Extra time for queued data to arrive, seconds.
    pub drain_s: f64,
    /// Base seed; run k uses seed + k.
    pub seed: u64,
    /// Server i starts at i · stagger.
    pub start_stagger_ms: f64,
}

/// `[topology]`
#[derive(Clone, Debug, Deserialize)]
pub struct TopologySec {
    /// The topology.
    pub kind: TopologyKind,
    /// Server→client pairs.
    pub pairs: u32,
    /// Access link rate.
    pub access_rate_mbps: f64,
    /// Access link one-way delay.
    pub access_delay_ms: f64,
    /// Tail-drop limit of access output ports.
    pub access_queue_packets: u64,
    /// Bottleneck rate.
    pub bottleneck_rate_mbps: f64,
    /// Bottleneck one-way delay.
    pub bottleneck_delay_ms: f64,
    /// I.i.d. loss probability of packets on the bottleneck link R1→R2.
    pub bottleneck_loss: f64,
    /// The same on R2→R1.
    pub bottleneck_loss_rev: f64,
    /// Delay jitter of both bottleneck directions: uniform within ± this % of the
    /// one-way delay, without reordering.
    pub bottleneck_jitter_pct: f64,
    /// Mux topology: one-way delay of the last hop proxy (R2) ↔ client.
    pub last_hop_delay_ms: f64,
    /// Mux topology: rate of the last hop.
    pub last_hop_rate_mbps: f64,
    /// Middlebox topology: servers (pair i is served by server i mod servers; 0 =
    /// ⌈pairs / 2⌉, the spec's S = N/2).
    pub servers: u32,
    /// Middlebox topology: each client's base one-way delay (its link to R2, both
    /// directions) is drawn per run from a normal law of this mean (ms) …
    pub client_delay_mean_ms: f64,
    /// … and standard deviation (ms), …
    pub client_delay_sd_ms: f64,
    /// … clipped to [min, max] (ms).
    pub client_delay_min_ms: f64,
    /// The upper clip.
    pub client_delay_max_ms: f64,
}

/// `[tcp]`
#[derive(Clone, Debug, Deserialize)]
pub struct TcpSec {
    /// Loss recovery without SACK.
    pub recovery: RecoveryName,
    /// SACK on.
    pub sack: bool,
    /// SMSS.
    pub mss: u32,
    /// IP + TCP header bytes per packet.
    pub header_bytes: u32,
    /// Initial window, segments.
    pub initial_cwnd_segments: u32,
    /// Nagle.
    pub nagle: bool,
    /// Delayed ACK.
    pub delayed_ack: bool,
    /// Delayed-ACK timer.
    pub delayed_ack_ms: f64,
    /// Restart after idle.
    pub slow_start_restart: bool,
    /// RTO lower clamp.
    pub min_rto_ms: f64,
    /// RTO upper clamp.
    pub max_rto_ms: f64,
    /// RTO before the first sample.
    pub initial_rto_ms: f64,
    /// Clock granularity G.
    pub clock_granularity_ms: f64,
    /// Receive buffer.
    pub rwnd_bytes: u64,
    /// Send-buffer limit, 0 = unlimited.
    pub send_buffer_bytes: u64,
    /// Linux's send-buffer autotuning (`tcp_sndbuf_expand`), capped by `send_buffer_bytes`.
    pub send_buffer_autotune: bool,
    /// Duplicate-ACK threshold.
    pub dupthresh: u32,
    /// Gains of the RTT estimator.
    pub rtt_gain: RttGain,
    /// Where the minimum RTO applies.
    pub rto_formula: RtoFormula,
    /// Spec §5.2.
    pub rto_reset_after_idle: bool,
    /// Spec §5.3.
    pub sack_off_after_timeout: bool,
    /// RFC 8985.
    pub rack_tlp: bool,
    /// Linux thin-stream linear timeouts.
    pub thin_linear_timeouts: bool,
    /// RFC 2883 DSACK at the receiver, used by RACK-TLP at the sender.
    pub dsack: bool,
    /// RACK's reordering window (RFC 8985 §6.2 step 4).
    pub rack_reo_wnd: RackReoWnd,
    /// RFC 6937 PRR in SACK-based recovery.
    pub prr: bool,
    /// RACK per priority band (ours): loss judged only within a segment's band.
    pub rack_bands: bool,
    /// Linux's quick-ACK mode at the receiver.
    pub quick_ack: bool,
    /// Window growth and reduction (RFC 5681 or RFC 9438).
    pub congestion_control: CongestionControlName,
    /// What cwnd and ssthresh count.
    pub cwnd_unit: CwndUnitName,
    /// CUBIC's slow start ends by Linux's HyStart.
    pub hystart: bool,
    /// The tail-loss-probe timer's rules (RFC 8985 §7.2 or Linux's).
    pub tlp_timer: TlpTimerName,
    /// When the retransmission timer restarts (RFC 6298 or Linux's).
    pub rto_restart: RtoRestartName,
    /// ECN (RFC 3168 §6.1): ECT on data, ECE echoed until CWR, a window reduction per
    /// window of data without a retransmission.
    pub ecn: bool,
}

/// `tcp.rto_restart`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RtoRestartName {
    /// RFC 6298 (5.3).
    Rfc6298,
    /// Linux's `tcp_xmit_retransmit_queue` restart.
    Linux,
}

/// `tcp.tlp_timer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlpTimerName {
    /// RFC 8985 §7.2.
    Rfc,
    /// Linux's `tcp_schedule_loss_probe`.
    Linux,
}

/// `tcp.rack_reo_wnd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RackReoWnd {
    /// min_RTT/4, zero in recovery or once DupThresh segments are SACKed.
    Static,
    /// RFC 8985 §6.2 steps 3–4 in full.
    Adaptive,
    /// As adaptive, with the DSACKs Linux counts (`tcp_dsack_seen`).
    Linux,
}

/// `[traffic]`
#[derive(Clone, Debug, Deserialize)]
pub struct TrafficSec {
    /// The sources' model ("constant" is the lab pump's alone: refused here).
    pub model: Model,
    /// The two-state source's keys (α, β, gaps, sizes, block lengths).
    #[serde(flatten)]
    pub thin_client: thinwan_proto::traffic::ThinClientKeys,
    /// The video, data and mix models' keys.
    #[serde(flatten)]
    pub apps: thinwan_proto::traffic::AppKeys,
    /// Interactive and bulk writes on two connections per pair (Ogawa §6 case 2).
    pub separate_connections: bool,
    /// Model "pcap": per stream, its writes (seconds, bytes) read from the capture by
    /// the Python layer (`thinwan.trace`); the capture's own keys are not needed here.
    #[serde(default)]
    pub trace: Vec<Vec<(f64, u32)>>,
}

/// `[records]`
#[derive(Clone, Debug, Deserialize)]
pub struct RecordsSec {
    /// TCP and queue traces.
    pub traces: bool,
    /// Queue-trace sampling period.
    pub trace_interval_ms: f64,
    /// Which connections' TCP state is traced.
    pub trace_connections: TraceConnections,
    /// Connections whose packets go to the packet log.
    pub packet_log_conns: Vec<u32>,
    /// Record the `packet_rtt` table (always on in the middlebox topology).
    pub packet_rtt: bool,
    /// Where a pcap of the simulated packets is taken (docs/records.md, "pcap").
    pub pcap: PcapPoint,
    /// Connections whose packets go to the pcap (empty: all).
    pub pcap_conns: Vec<u32>,
}

/// `records.pcap`: the point of the network a capture of the simulated packets is
/// taken at, as a `tcpdump` there would see them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PcapPoint {
    /// No capture.
    None,
    /// At each connection's data sender: data as TCP sends it, ACKs as they arrive.
    Server,
    /// At each connection's receiver: data as it arrives, ACKs as TCP sends them.
    Client,
    /// On the bottleneck link: every packet as it starts onto either direction.
    Bottleneck,
}

impl PcapPoint {
    /// The key's value, which also names the file (`<point>.pcap`).
    pub fn name(self) -> &'static str {
        match self {
            PcapPoint::None => "none",
            PcapPoint::Server => "server",
            PcapPoint::Client => "client",
            PcapPoint::Bottleneck => "bottleneck",
        }
    }
}

/// `topology.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TopologyKind {
    /// Server–client pairs across one bottleneck.
    Dumbbell,
    /// The dumbbell with a last hop proxy → client (Carlmar 2011, docs/sources.md).
    Mux,
    /// S servers → middlebox R1 → downlink → N clients with their own delays (QDS).
    Middlebox,
}

/// `mux.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MuxMode {
    /// One TCP connection per stream server → client.
    Direct,
    /// The streams share the tunnel's trunk lanes.
    Mux,
    /// OpenSSH local forwarding (`ssh -L`): a real program, so the namespace lab runs
    /// it and the simulator refuses it (docs/mux.md "OpenSSH as a peer").
    Ssh,
    /// A yamux-multiplexed forwarder (`thinwan-yamux-peer`): lab only, like `Ssh`.
    Yamux,
}

/// `tcp.recovery` (with `sack = false`; SACK recovery otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecoveryName {
    /// RFC 5681 fast recovery.
    Reno,
    /// RFC 6582 NewReno.
    Newreno,
}

/// `tcp.congestion_control`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CongestionControlName {
    /// RFC 5681.
    Reno,
    /// RFC 9438.
    Cubic,
}

/// `tcp.cwnd_unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CwndUnitName {
    /// Bytes (RFC 5681).
    Bytes,
    /// Segments (Linux's `snd_cwnd`).
    Packets,
}

/// `tcp.rtt_gain`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RttGain {
    /// RFC 6298 (2.3) gains.
    Rfc6298,
    /// Spec §5.1's asymmetric gains.
    Asymmetric,
}

/// `tcp.rto_formula`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RtoFormula {
    /// RFC 6298 (2.4): the minimum clamps the whole RTO.
    Rfc6298,
    /// Linux: the minimum applies to the variance term.
    Linux,
}

/// `records.trace_connections`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceConnections {
    /// Every connection's cwnd / RTO trace.
    All,
    /// None.
    #[serde(rename = "none")]
    Off,
}

/// Why the simulator refuses `mux.mode = "ssh" | "yamux"` (real programs, no model);
/// the Python front end says the same before any run starts
/// (`thinwan.config.scenario.check_simulable`).
pub const LAB_ONLY: &str = "runs only in the lab: thinwan lab run SCENARIO / thinwan sweep SWEEP --lab";

impl Config {
    /// Parse the JSON the Python loader produces.
    pub fn from_json(s: &str) -> Result<Config, String> {
        // The path names the key of a bad value (`queue.discipline: unknown variant …`).
        let de = &mut serde_json::Deserializer::from_str(s);
        let c: Config = serde_path_to_error::deserialize(de).map_err(|e| format!("scenario JSON: {e}"))?;
        c.check()?;
        Ok(c)
    }

    /// Checks the simulator relies on (Python validates everything first; these guard
    /// direct callers).
    fn check(&self) -> Result<(), String> {
        let t_kind_middlebox = |c: &Config| c.topology.kind == TopologyKind::Middlebox;
        let bad = |k: &str, why: &str| Err(format!("{k}: {why}"));
        if self.topology.kind == TopologyKind::Mux {
            if let MuxMode::Ssh | MuxMode::Yamux = self.mux.mode {
                let mode = if self.mux.mode == MuxMode::Ssh { "ssh" } else { "yamux" };
                return bad("mux.mode", &format!("\"{mode}\" {LAB_ONLY}"));
            }
            if self.topology.last_hop_rate_mbps <= 0.0 || self.topology.last_hop_delay_ms < 0.0 {
                return bad("topology.last_hop_*", "rate must be > 0 and delay ≥ 0");
            }
            if !(1..=u16::MAX as u32).contains(&self.mux.trunks) {
                return bad("mux.trunks", "must be in [1, 65535]");
            }
            if !(512..=1 << 20).contains(&self.mux.frame_payload_bytes) {
                return bad("mux.frame_payload_bytes", "must be in [512, 1048576]");
            }
            if self.mux.notsent_lowat_bytes == 0 {
                return bad("mux.notsent_lowat_bytes", "must be ≥ 1");
            }
            if self.mux.lanes == MuxLanes::Adaptive
                && !(self.mux.trunks..=u16::MAX as u32).contains(&self.mux.max_lanes)
            {
                return bad("mux.max_lanes", "must be in [mux.trunks, 65535]");
            }
            if !self.mux.shed_slack_ms.is_finite() {
                return bad("mux.shed_slack_ms", "must be a finite number");
            }
            if self.traffic.separate_connections || self.traffic.model == Model::Bulk {
                return bad(
                    "topology.kind",
                    "\"mux\" needs traffic.separate_connections = false and a thin model",
                );
            }
        }
        if self.topology.pairs == 0 {
            return bad("topology.pairs", "must be ≥ 1");
        }
        if self.topology.access_rate_mbps <= 0.0 || self.topology.bottleneck_rate_mbps <= 0.0 {
            return bad("topology", "rates must be > 0");
        }
        QueueSpec::try_from(&self.queue).map_err(|e| format!("queue.{e}"))?;
        if (self.tcp.rack_tlp || self.tcp.sack_off_after_timeout) && !self.tcp.sack {
            return bad("tcp", "rack_tlp and sack_off_after_timeout need sack = true");
        }
        if (self.tcp.dsack || self.tcp.prr) && !self.tcp.sack {
            return bad("tcp", "dsack and prr need sack = true");
        }
        if self.tcp.rack_bands && !self.tcp.rack_tlp {
            return bad("tcp.rack_bands", "needs rack_tlp = true");
        }
        if self.tcp.rack_reo_wnd != RackReoWnd::Static && !self.tcp.rack_tlp {
            return bad("tcp.rack_reo_wnd", "\"adaptive\" and \"linux\" need rack_tlp = true");
        }
        if self.tcp.hystart && self.tcp.congestion_control != CongestionControlName::Cubic {
            return bad(
                "tcp.hystart",
                "needs congestion_control = \"cubic\" (HyStart is CUBIC's, tcp_cubic.c)",
            );
        }
        if self.tcp.tlp_timer == TlpTimerName::Linux && !self.tcp.rack_tlp {
            return bad("tcp.tlp_timer", "\"linux\" needs rack_tlp = true");
        }
        if self.traffic.model == Model::Constant {
            return bad(
                "traffic.model",
                "\"constant\" is the lab pump's; the simulator runs thin-client, bulk, game, pcap, video, data or mix",
            );
        }
        if t_kind_middlebox(self) {
            let t = &self.topology;
            if !(0.0 <= t.client_delay_min_ms
                && t.client_delay_min_ms <= t.client_delay_max_ms
                && t.client_delay_sd_ms >= 0.0)
            {
                return bad("topology.client_delay_*", "need 0 ≤ min ≤ max and sd ≥ 0");
            }
        }
        if self.traffic.model == Model::Pcap && self.traffic.trace.len() < self.topology.pairs as usize {
            return bad("traffic.trace", "needs the writes of every stream (topology.pairs)");
        }
        let t = &self.topology;
        for (k, p) in [
            ("topology.bottleneck_loss", t.bottleneck_loss),
            ("topology.bottleneck_loss_rev", t.bottleneck_loss_rev),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return bad(k, "must be in [0, 1]");
            }
        }
        if !(0.0..=100.0).contains(&t.bottleneck_jitter_pct) {
            return bad("topology.bottleneck_jitter_pct", "must be in [0, 100]");
        }
        if self.scenario.duration_s <= 0.0 {
            return bad("scenario.duration_s", "must be > 0");
        }
        Ok(())
    }
}

//! Columnar records (docs/records.md): one schema for simulated and real runs.
//! Times are f64 seconds since the run start; NaN = did not happen.

use thinwan_proto::Duration;

/// One row per application write.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Messages {
    /// Connection id.
    pub conn: Vec<u32>,
    /// Pair.
    pub pair: Vec<u32>,
    /// 0 interactive, 1 bulk.
    pub kind: Vec<u8>,
    /// Bytes written.
    pub bytes: Vec<u32>,
    /// Application write.
    pub t_write: Vec<f64>,
    /// First transmission by TCP of the segment with the message's last byte.
    pub t_first_tx: Vec<f64>,
    /// Transmission of the copy of that byte that arrived first.
    pub t_tx: Vec<f64>,
    /// That copy's arrival at the bottleneck queue.
    pub t_enq: Vec<f64>,
    /// That copy's departure from the bottleneck.
    pub t_deq: Vec<f64>,
    /// That copy's arrival at the client host.
    pub t_arrive: Vec<f64>,
    /// The client application's read of the last byte.
    pub t_read: Vec<f64>,
    /// Transmissions of the last byte before it first arrived, minus one.
    pub retx: Vec<u16>,
}

/// One row per connection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Connections {
    /// Connection id.
    pub conn: Vec<u32>,
    /// Pair.
    pub pair: Vec<u32>,
    /// Retransmission timeouts.
    pub timeouts: Vec<u32>,
    /// Timeouts whose timed-out segment had not been dropped.
    pub spurious_timeouts: Vec<u32>,
    /// Entries into fast recovery.
    pub fast_retransmits: Vec<u32>,
    /// SACK-driven recoveries.
    pub sack_recoveries: Vec<u32>,
    /// Application bytes written.
    pub bytes_written: Vec<u64>,
    /// Bytes read by the client application.
    pub bytes_delivered: Vec<u64>,
    /// Payload bytes sent, incl. retransmissions.
    pub bytes_sent: Vec<u64>,
    /// Payload bytes retransmitted.
    pub bytes_retransmitted: Vec<u64>,
    /// Data segments sent.
    pub segments_sent: Vec<u64>,
    /// Tail loss probes sent.
    pub tlp_probes: Vec<u32>,
    /// Segments RACK marked lost.
    pub rack_marked_lost: Vec<u32>,
    /// SRTT/RTTVAR resets after idle.
    pub rto_resets: Vec<u32>,
    /// Runs of retransmitted segments not interrupted by new data.
    pub retransmit_episodes: Vec<u32>,
    /// Window reductions answering ECE (RFC 3168 §6.1.2; 0 without `tcp.ecn`).
    pub ecn_reductions: Vec<u32>,
    /// Writes TCP took more than [`WRITE_WAIT`] after their schedule: they waited for
    /// send-buffer space (`tcp.send_buffer_bytes`, `tcp.send_buffer_autotune`).
    pub writes_waited: Vec<u32>,
    /// Of those, the writes held by a full send buffer — all of them here (a simulated
    /// application is never descheduled); the lab tells the two apart.
    pub writes_blocked: Vec<u32>,
    /// 0 = carries every write (or interactive writes with separate connections), 1 = bulk writes.
    pub role: Vec<u8>,
}

/// A write "waited" when TCP took it more than this after its schedule; the lab's join
/// (`analysis.lab_join`) reads it through `_native.write_wait_ns`.
pub const WRITE_WAIT: Duration = Duration::from_millis(10);

/// One row per router output port.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ports {
    /// Name.
    pub port: Vec<String>,
    /// Link rate, bit/s.
    pub rate_bps: Vec<f64>,
    /// Measurement window, s.
    pub window_s: Vec<f64>,
    /// Wire bytes transmitted in the window.
    pub bytes_tx: Vec<u64>,
    /// Of those, packets labelled interactive.
    pub bytes_tx_interactive: Vec<u64>,
    /// Packets transmitted in the window.
    pub packets_tx: Vec<u64>,
    /// Drops because the queue was full.
    pub drops_overflow: Vec<u64>,
    /// Packets lost on the link after it (random loss, `topology.bottleneck_loss*`).
    pub drops_loss: Vec<u64>,
    /// Largest backlog, bytes.
    pub max_queue_bytes: Vec<u64>,
    /// Packets CoDel marked CE instead of dropping (`queue.ecn`; RFC 8290 §5.2.7).
    pub marks_ce: Vec<u64>,
}

/// TCP state on change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnTrace {
    /// Connection.
    pub conn: Vec<u32>,
    /// Time.
    pub t: Vec<f64>,
    /// cwnd, bytes.
    pub cwnd: Vec<f64>,
    /// ssthresh, bytes (inf before the first loss).
    pub ssthresh: Vec<f64>,
    /// Smoothed RTT, s (NaN before the first sample).
    pub srtt: Vec<f64>,
    /// RTT variation, s.
    pub rttvar: Vec<f64>,
    /// RTO including backoff, s.
    pub rto: Vec<f64>,
    /// Latest RTT sample, s (NaN before the first).
    pub rtt: Vec<f64>,
}

/// Every packet event of selected connections (`records.packet_log_conns`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PacketLog {
    /// Connection.
    pub conn: Vec<u32>,
    /// Time.
    pub t: Vec<f64>,
    /// 0 data sent, 1 data dropped, 2 data arrived at the client, 3 ACK sent, 4 ACK
    /// arrived at the server, 5 retransmission timeout at the server (seq = timed-out byte).
    pub event: Vec<u8>,
    /// Data: first byte; ACK: cumulative ACK.
    pub seq: Vec<u64>,
    /// Data: payload bytes; ACK: 0.
    pub len: Vec<u32>,
    /// Data: 1 for a retransmission.
    pub retx: Vec<u8>,
}

/// Queue length, sampled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueTrace {
    /// Port name.
    pub port: Vec<String>,
    /// Time.
    pub t: Vec<f64>,
    /// Backlog, bytes.
    pub bytes: Vec<u64>,
    /// Backlog, packets.
    pub packets: Vec<u64>,
}

/// One row per first transmission of a data segment, with its exact RTT (the middlebox
/// topology, or `records.packet_rtt`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PacketRtt {
    /// Connection.
    pub conn: Vec<u32>,
    /// Application of the write holding its first byte (`thinwan_proto::traffic::App` code).
    pub app: Vec<u8>,
    /// Transmission by the server.
    pub t_tx: Vec<f64>,
    /// Until the covering cumulative ACK reached the server, s (NaN: not by the end).
    pub rtt: Vec<f64>,
    /// Payload bytes.
    pub bytes: Vec<u32>,
    /// 1 when some of its bytes were retransmitted before that ACK.
    pub retx: Vec<u8>,
    /// Its first byte's offset in the connection's stream (the capture's sequence
    /// number, mod 2³², with `records.pcap`).
    pub seq: Vec<u64>,
    /// Kind of the write holding its first byte: 0 interactive, 1 bulk (the source's
    /// truth, `thinwan_proto::traffic::Kind`).
    pub kind: Vec<u8>,
    /// The source's flow that write belongs to, counted from 0 per connection: each
    /// interactive write of the two-state model is a flow, each bulk block one (every
    /// write of any other model is its own); `u32::MAX` where unknown (a tunnel's last hop).
    pub flow: Vec<u32>,
}

/// The QDS loop's view of each flow, per control period (`queue.discipline = "qds"`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QdsFlows {
    /// Time of the period.
    pub t: Vec<f64>,
    /// Connection (the monitor's flow key).
    pub conn: Vec<u32>,
    /// The flow's true type (`AppType` index: 0 video, 1 audio, 2 data, 3 interactive).
    pub app_true: Vec<u8>,
    /// The type the controller used (the classifier's, or the truth in oracle mode).
    pub app: Vec<u8>,
    /// The monitor's RTT estimate, s.
    pub rtt: Vec<f64>,
    /// The monitor's rate toward the client, bit/s.
    pub rate_bps: Vec<f64>,
    /// The class the controller put it in (0 = most urgent).
    pub class: Vec<u16>,
    /// The classifier's features (`Features::as_array`, in `Features::NAMES` order).
    pub features: Vec<[f64; 8]>,
}

/// The QDS controller's classes, per control period.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QdsClasses {
    /// Time of the period.
    pub t: Vec<f64>,
    /// Class (0 = most urgent).
    pub class: Vec<u16>,
    /// Normalised weight.
    pub weight: Vec<f64>,
    /// Rate set on the class scheduler, bit/s.
    pub rate_bps: Vec<f64>,
    /// Flows in the class.
    pub flows: Vec<u32>,
}

/// Everything one run produces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunRecords {
    /// Per message.
    pub messages: Messages,
    /// Per connection.
    pub connections: Connections,
    /// Per port.
    pub ports: Ports,
    /// TCP traces.
    pub conn_trace: ConnTrace,
    /// Queue trace.
    pub queue_trace: QueueTrace,
    /// Packet log of selected connections.
    pub packet_log: PacketLog,
    /// Exact per-packet RTTs, when recorded.
    pub packet_rtt: Option<PacketRtt>,
    /// The QDS loop's flows and classes per period, when it runs.
    pub qds: Option<(QdsFlows, QdsClasses)>,
    /// Simulator events processed.
    pub events: u64,
    /// Seed used.
    pub seed: u64,
    /// Packets dropped anywhere, by reason.
    pub drops_by_reason: Vec<(String, u64)>,
    /// Packet conservation: created = arrived + dropped + in flight at the end.
    pub packets: PacketCounts,
    /// The capture of `records.pcap`, when one was asked for.
    pub pcap: Option<PcapFile>,
}

/// A pcap file of simulated packets (`records.pcap`, docs/records.md).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PcapFile {
    /// Where it was taken (`records.pcap`): also the file's name, `<point>.pcap`.
    pub point: &'static str,
    /// Packets in it.
    pub packets: u64,
    /// The file.
    pub bytes: Vec<u8>,
}

/// Packet conservation counters (data and ACK packets together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketCounts {
    /// Packets handed to the network by endpoints.
    pub created: u64,
    /// Packets that reached their endpoint.
    pub arrived: u64,
    /// Packets dropped by a queue or lost on a link.
    pub dropped: u64,
    /// Packets still queued or on a link when the run ended.
    pub in_flight: u64,
}

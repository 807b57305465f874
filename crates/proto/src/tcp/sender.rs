//! The data sender: congestion control (RFC 5681), loss recovery (RFC 5681 Reno,
//! RFC 6582 NewReno, RFC 6675 SACK) and the retransmission timer (RFC 6298).
//!
//! Call order (quinn-proto style): `write` / `handle_ack` / `handle_timeout`, then drain
//! `poll_transmit(now)` until it returns `None`, then re-arm with `poll_timeout()`.
//!
//! Window growth and loss recovery are separate: [`Recovery`] picks the recovery
//! policy, the congestion controller ([`super::cc`]) the window's growth and the
//! ssthresh of a congestion event; the RTT estimator is any [`RttEstimator`].

use super::cc::{AckSample, Algorithm, Controller, CwndUnit, Window};
use super::prr::Prr;
use super::rack::{probe_timeout, probe_timeout_linux, Rack, ReoWnd, Sent, Tlp, TlpTimer};
use super::rtt::{Estimator, RtoConfig, RttEstimator};
use super::scoreboard::RangeSet;
use super::{Ack, DataSegment, SegmentEcn};
use crate::time::{Duration, Instant};
use std::collections::VecDeque;
use std::sync::Arc;

/// Loss-recovery policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// RFC 5681 §3.2: any new ACK ends fast recovery.
    Reno,
    /// RFC 6582: partial ACKs retransmit the next hole and stay in fast recovery.
    NewReno,
    /// RFC 6675: SACK scoreboard, `pipe` and `NextSeg()` (needs a SACK receiver).
    Sack,
}

/// Sender parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SenderConfig {
    /// Sender maximum segment size (SMSS), bytes.
    pub mss: u32,
    /// Initial window in segments (RFC 6928 allows 10).
    pub initial_cwnd_segments: u32,
    /// Nagle's algorithm (RFC 896; RFC 1122 §4.2.3.4).
    pub nagle: bool,
    /// Reduce cwnd to the initial window after an idle period > RTO (RFC 5681 §4.1).
    pub slow_start_restart: bool,
    /// Loss-recovery policy.
    pub recovery: Recovery,
    /// Duplicate ACKs that trigger fast retransmit (RFC 5681: 3).
    pub dupthresh: u32,
    /// Retransmission-timer parameters.
    pub rto: RtoConfig,
    /// Send-buffer limit in bytes (`None` = unlimited; with `send_buffer_autotune`, the
    /// cap of the autotuned buffer, Linux's `tcp_wmem[2]`).
    pub send_buffer: Option<u64>,
    /// Linux's send-buffer autotuning (`tcp_sndbuf_expand`): the buffer holds
    /// 2 · 10 segments of kernel memory at first and 2 · cwnd once an ACK finds the writer
    /// waiting with room in the window; each segment in flight costs its socket-buffer
    /// overhead besides its bytes ([`Sender::buffer_space`]).
    pub send_buffer_autotune: bool,
    /// Optional mechanisms (all off by default).
    pub mechanisms: Mechanisms,
    /// Window growth and reduction (RFC 5681 Reno or RFC 9438 CUBIC).
    pub congestion_control: Algorithm,
    /// What cwnd and ssthresh count: bytes, or segments as Linux does.
    pub cwnd_unit: CwndUnit,
    /// CUBIC's slow start ends by Linux's HyStart (tcp_cubic.c; [`super::cc::hystart`]).
    pub hystart: bool,
}

/// Mechanisms under study (Ogawa §5, RFC 8985, Linux thin streams). Each
/// is an independent switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mechanisms {
    /// SRTT gain 7/8 for rising samples (Ogawa §5.1).
    pub asymmetric_rtt_gain: bool,
    /// Forget SRTT/RTTVAR after an idle period > RTO, leaving cwnd alone (Ogawa §5.2).
    pub rto_reset_after_idle: bool,
    /// After a timeout, until all then outstanding is acknowledged: no fast recovery,
    /// cwnd + 1 SMSS per ACK, go-back-N without the scoreboard (Ogawa §5.3).
    pub sack_off_after_timeout: bool,
    /// RACK-TLP loss detection (RFC 8985); needs [`Recovery::Sack`].
    pub rack_tlp: bool,
    /// No RTO backoff for the first 6 timeouts while < 4 segments are in flight
    /// (Linux `tcp_thin_linear_timeouts`, `TCP_THIN_LINEAR_RETRIES` = 6).
    pub thin_linear_timeouts: bool,
    /// Recognise DSACK blocks (RFC 2883 §4, RFC 3708), keep them out of the scoreboard
    /// and hand them to RACK (RFC 8985 §6.2 step 4) and TLP (§7.4.2); needs a DSACK
    /// receiver ([`super::ReceiverOptions::dsack`]).
    pub dsack: bool,
    /// RACK's reordering window (RFC 8985 §6.2 step 4).
    pub rack_reo_wnd: ReoWnd,
    /// RFC 6937 PRR-SSRB paces sending during SACK-based recovery.
    pub prr: bool,
    /// RACK per priority band (ours; docs/model.md "RACK per band"): a segment is
    /// judged lost against later-sent segments of its own band (interactive or not,
    /// [`Sender::mark_interactive`]) by RFC 8985's rule, and against the other band's
    /// only an RTO after it left, so a priority queue that lets interactive segments
    /// overtake bulk ones is not taken for loss. Needs [`Self::rack_tlp`].
    pub rack_bands: bool,
    /// The rules of the tail-loss-probe timer (RFC 8985 §7.2 or Linux's).
    pub tlp_timer: TlpTimer,
    /// When the retransmission timer restarts (RFC 6298 (5.3) or Linux's).
    pub rto_restart: RtoRestart,
    /// ECN (RFC 3168 §6.1): new data carries ECT(0), an ECE halves the window once per
    /// window of data without a retransmission ([`Sender::handle_ece`]). The peer is
    /// assumed to have agreed in the handshake (both ends are configured alike).
    pub ecn: bool,
}

/// When the retransmission timer restarts, besides a timeout (`tcp.rto_restart`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RtoRestart {
    /// RFC 6298 (5.3): when an ACK acknowledges new data (and (5.1) when sending with
    /// none running).
    #[default]
    Rfc6298,
    /// Also when loss recovery retransmits the oldest outstanding segment, unless the
    /// reordering timer is pending: Linux `tcp_xmit_retransmit_queue` (`skb ==
    /// rtx_head && icsk_pending != ICSK_TIME_REO_TIMEOUT` → `tcp_reset_xmit_timer(…,
    /// icsk_rto)`), so a fast retransmission gets a full RTO to be acknowledged.
    Linux,
}

/// What (re)arms the probe timer: Linux re-arms it only on the first two
/// ([`TlpTimer::Linux`]), RFC 8985 §7.2 on all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arm {
    /// New data left (`tcp_write_xmit` → `tcp_schedule_loss_probe(sk, false)`).
    NewData,
    /// An ACK acknowledged new data (`FLAG_SET_XMIT_TIMER` → `tcp_set_xmit_timer`).
    AckedNew,
    /// A retransmission, or an ACK that acknowledged nothing new.
    Other,
}

/// RFC 2883 §4 / RFC 3708 §2: the first SACK block is a DSACK when it lies below the
/// cumulative ACK or inside the second block.
fn dsack_block(ack: &Ack) -> Option<(u64, u64)> {
    let b = ack.sack.as_slice();
    let &(s, e) = b.first()?;
    (e <= ack.ack || b.get(1).is_some_and(|&(s2, e2)| s2 <= s && e <= e2)).then_some((s, e))
}

/// Linux's `TCP_THIN_LINEAR_RETRIES`.
const THIN_LINEAR_RETRIES: u32 = 6;

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            mss: 1460,
            initial_cwnd_segments: 10,
            nagle: false,
            slow_start_restart: true,
            recovery: Recovery::Sack,
            dupthresh: 3,
            rto: RtoConfig::default(),
            send_buffer: None,
            send_buffer_autotune: false,
            mechanisms: Mechanisms::default(),
            congestion_control: Algorithm::Reno,
            cwnd_unit: CwndUnit::Bytes,
            hystart: false,
        }
    }
}

/// Per-connection counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SenderStats {
    /// Payload bytes sent, including retransmissions.
    pub bytes_sent: u64,
    /// Data segments sent.
    pub segments_sent: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Entries into fast retransmit / fast recovery.
    pub fast_retransmits: u64,
    /// Of those, recoveries driven by the SACK scoreboard.
    pub sack_recoveries: u64,
    /// Payload bytes retransmitted.
    pub bytes_retransmitted: u64,
    /// Tail loss probes sent (RFC 8985 §7).
    pub tlp_probes: u64,
    /// Segments RACK marked lost (RFC 8985 §6).
    pub rack_marked_lost: u64,
    /// SRTT/RTTVAR resets after idle (Ogawa §5.2).
    pub rto_resets: u64,
    /// Runs of retransmitted data segments not interrupted by new data: what the lab
    /// counts on the wire, where it cannot see the sender's state (a fast recovery, a
    /// tail-loss probe that resends, a timeout each start one).
    pub retransmit_episodes: u64,
    /// Window reductions in response to ECE (RFC 3168 §6.1.2), without a retransmission.
    pub ecn_reductions: u64,
}

/// The sending half of a connection, generic over its RTT estimator (held inline, not
/// boxed: the simulator touches it on every segment of 10⁴ connections).
///
/// Laid out in C order, what every ACK and every transmission reads first, so that
/// they touch four cache lines ([`Sender::HOT_BYTES`]) rather than the nine a
/// compiler-ordered, config-copying layout spread them over (at 10⁴ connections each
/// of those lines is a cache miss). The configuration is shared, the estimator holds
/// only its state; the counters only losses bump, and RACK-TLP's state, read only when
/// RACK-TLP is on, come last.
#[repr(C, align(64))]
pub struct Sender<E: RttEstimator = Estimator> {
    /// Oldest unacknowledged byte (RFC 793 SND.UNA).
    snd_una: u64,
    /// Next byte to send; after a timeout it goes back to `snd_una` (go-back-N).
    snd_nxt: u64,
    /// One past the highest byte ever sent (RFC 6675 HighData + 1).
    snd_max: u64,
    /// Bytes the application has written so far (the next write starts here).
    write_end: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Peer's advertised window.
    rwnd: u64,
    rto_deadline: Opt<Instant>,
    last_send: Opt<Instant>,
    /// One past RFC 6582 `recover` / RFC 6675 RecoveryPoint (the highest byte sent when
    /// recovery or a timeout began): unset until first set (= ISS).
    recover: Opt<u64>,
    /// RFC 6675 HighRxt + 1: bytes below were retransmitted in this recovery.
    high_rxt: u64,
    /// RFC 6675: unSACKed bytes below this are presumed lost (`IsLost`).
    lost_edge: u64,
    /// A segment that must go out now regardless of cwnd (fast retransmit).
    pending_rtx: Opt<u64>,
    dupacks: u32,
    /// Exponential backoff count (RFC 6298 (5.5)).
    backoff: u32,
    /// Consecutive timeouts without new data acknowledged.
    rto_retries: u32,
    in_recovery: bool,
    /// NewReno "impatient" timer: reset only on the first partial ACK (RFC 6582 §4.1).
    partial_acked: bool,
    /// Spec §5.3: SACK-based recovery is off until `recover` is acknowledged.
    sack_suspended: bool,
    /// The TLP timer fired: the next `poll_transmit` sends the probe.
    probe_due: bool,
    cfg: Arc<SenderConfig>,
    rtt: E,
    last_sample: Opt<Duration>,
    /// [`SenderStats::bytes_sent`] and [`SenderStats::segments_sent`], which every
    /// transmission bumps, kept here among the fields it reads anyway.
    bytes_sent: u64,
    segments_sent: u64,
    /// Segments in `[snd_una, snd_max)` as first cut, for RTT samples (Karn's rule),
    /// `IsLost` and RACK.
    sent: VecDeque<Sent>,
    sacked: RangeSet,
    /// The other counters (its first two unused: see `bytes_sent`).
    stats: SenderStats,
    /// The last segment sent was a retransmission (for `retransmit_episodes`).
    last_retx: bool,
    /// The congestion controller (enum dispatch, inline). Out of the hot lines: Reno
    /// reads only its tag there, CUBIC its curve on ACKs outside recovery.
    cc: Controller,
    rack: Rack,
    tlp: Tlp,
    /// RFC 6937 state of the recovery in progress (with [`Mechanisms::prr`]).
    prr: Prr,
    /// RFC 3168 §6.1.2 state (with [`Mechanisms::ecn`]).
    ecn: EcnState,
    /// Packet-counted windows: Linux's `tcp_cwnd_validate` state — the window limited
    /// the sender at some point of the round ending at `cwnd_usage_seq`
    /// (`is_cwnd_limited`), and the most segments in flight in it (`max_packets_out`).
    cwnd_use: CwndUse,
    /// The autotuned send buffer (`sk_sndbuf`), bytes; it only grows
    /// ([`SenderConfig::send_buffer_autotune`]).
    sndbuf: u64,
    /// The application waits for send-buffer space ([`Sender::set_writer_waits`]).
    writer_waits: bool,
}

/// Linux `tcp_sndbuf_expand` on x86-64, MSS ≤ 1,480: `per_mss` =
/// roundup_pow_of_two(MSS + `MAX_TCP_HEADER` + aligned `skb_shared_info`) +
/// aligned `sk_buff` = 2,048 + 256 bytes. The lab's sockets show `skmem` `tb46080` =
/// 2 · 10 · 2,304 from the start (docs/findings.md, the small buffer's write waits).
const LINUX_PER_MSS: u64 = 2_304;
/// `TCP_INIT_CWND`: the buffer never sizes for fewer segments.
const LINUX_SNDBUF_MIN_SEGS: u64 = 10;
/// `tcp_wmem[2]` by default (ip-sysctl): the autotuned buffer's cap.
const LINUX_WMEM_MAX: u64 = 4 << 20;
/// A segment's kernel memory besides its bytes: aligned `sk_buff` (256) + aligned
/// `skb_shared_info` (320) + the linear header room (`MAX_TCP_HEADER`, 256), x86-64.
pub const SKB_OVERHEAD: u64 = 832;

/// The sender's ECN state (RFC 3168 §6.1.2).
#[derive(Clone, Copy, Debug, Default)]
struct EcnState {
    /// The window was reduced: the next new data segment carries CWR.
    cwr_pending: bool,
    /// One past the highest byte sent when the window was last reduced (for ECE or a
    /// loss): ECE on ACKs up to it belongs to the same window of data, which has
    /// already been answered ("at most once per window of data"). As Linux's CWR state
    /// (`tcp_fastretrans_alert`), it ends only when data *above* it is acknowledged:
    /// the ACK of the window's last segment may still carry ECE.
    high: Option<u64>,
}

/// Linux `tcp_cwnd_validate`'s per-round record of how fully the window was used.
#[derive(Clone, Copy, Debug, Default)]
struct CwndUse {
    is_cwnd_limited: bool,
    max_packets_out: u64,
    cwnd_usage_seq: u64,
}

/// An optional time or sequence number in 8 bytes (an `Option<u64>` takes 16): the
/// type's maximum, which no run reaches, means "not set".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Opt<T: Unset>(T);

trait Unset: Copy + PartialEq {
    const UNSET: Self;
}
impl Unset for u64 {
    const UNSET: u64 = u64::MAX;
}
impl Unset for Instant {
    const UNSET: Instant = Instant::MAX;
}
impl Unset for Duration {
    const UNSET: Duration = Duration::MAX;
}

impl<T: Unset> Opt<T> {
    const NONE: Self = Opt(T::UNSET);
    fn some(v: T) -> Self {
        debug_assert!(v != T::UNSET, "a set value may not be the marker");
        Opt(v)
    }
    fn get(self) -> Option<T> {
        (self.0 != T::UNSET).then_some(self.0)
    }
    fn take(&mut self) -> Option<T> {
        std::mem::replace(self, Self::NONE).get()
    }
}

impl Sender {
    /// A connection with nothing written, the estimator its RTO configuration asks for
    /// ([`Estimator::for_config`]: RFC 6298, or Linux's) and an initial window.
    /// `cfg` may be shared (an `Arc`) by many senders.
    pub fn new(cfg: impl Into<Arc<SenderConfig>>) -> Self {
        let cfg = cfg.into();
        let est = Estimator::for_config(&cfg.rto, cfg.mechanisms.asymmetric_rtt_gain);
        Self::with_estimator(cfg, est)
    }

    /// How many bytes from its start every ACK and every transmission read (without
    /// RACK-TLP): a simulator prefetches these and leaves the rest alone.
    pub const HOT_BYTES: usize = std::mem::offset_of!(Sender, stats);
}

/// One full segment in the window's unit: SMSS bytes, or 1.
fn seg_of(cfg: &SenderConfig) -> u64 {
    match cfg.cwnd_unit {
        CwndUnit::Bytes => cfg.mss as u64,
        CwndUnit::Packets => 1,
    }
}

const _: () = assert!(Sender::HOT_BYTES <= 4 * 64, "the hot part of a sender should stay four cache lines");

impl<E: RttEstimator> Sender<E> {
    /// The same with another RTT estimator.
    pub fn with_estimator(cfg: impl Into<Arc<SenderConfig>>, rtt: E) -> Self {
        let cfg = cfg.into();
        Sender {
            write_end: 0,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            cwnd: cfg.initial_cwnd_segments as u64 * seg_of(&cfg),
            cc: Controller::with_hystart(cfg.congestion_control, cfg.hystart),
            cfg,
            rtt,
            ssthresh: u64::MAX,
            rwnd: u64::MAX,
            dupacks: 0,
            in_recovery: false,
            recover: Opt::NONE,
            high_rxt: 0,
            lost_edge: 0,
            sacked: RangeSet::new(),
            pending_rtx: Opt::NONE,
            partial_acked: false,
            backoff: 0,
            rto_deadline: Opt::NONE,
            sent: VecDeque::new(),
            last_send: Opt::NONE,
            sack_suspended: false,
            rto_retries: 0,
            last_sample: Opt::NONE,
            bytes_sent: 0,
            segments_sent: 0,
            rack: Rack::default(),
            tlp: Tlp::default(),
            probe_due: false,
            stats: SenderStats::default(),
            last_retx: false,
            prr: Prr::default(),
            ecn: EcnState::default(),
            cwnd_use: CwndUse::default(),
            sndbuf: 2 * LINUX_PER_MSS * LINUX_SNDBUF_MIN_SEGS,
            writer_waits: false,
        }
    }

    // ----- inputs -------------------------------------------------------------------

    /// Free space in the send buffer (`u64::MAX` when unlimited), in application bytes.
    /// Autotuned (Linux): `sk_sndbuf` (2 · max(10, cwnd) · per-MSS memory, as last grown
    /// in [`Sender::handle_ack`]), against the queued bytes plus [`SKB_OVERHEAD`] per segment in flight
    /// (`sk_wmem_queued` counts each skb's `truesize`; unsent bytes coalesce into few
    /// large skbs, so their overhead is left out).
    pub fn buffer_space(&self) -> u64 {
        let queued = self.write_end - self.snd_una;
        if self.cfg.send_buffer_autotune {
            let cap = self.cfg.send_buffer.unwrap_or(LINUX_WMEM_MAX);
            let charged = queued + SKB_OVERHEAD * self.sent.len() as u64;
            return self.sndbuf.min(cap).saturating_sub(charged);
        }
        match self.cfg.send_buffer {
            None => u64::MAX,
            Some(limit) => limit.saturating_sub(queued),
        }
    }

    /// The application writes `len` bytes; returns the offset one past its last byte.
    /// The caller respects [`Sender::buffer_space`].
    pub fn write(&mut self, len: u64) -> u64 {
        self.write_end += len;
        self.write_end
    }

    /// The segment just sent from `seq` (new data) carries an interactive byte: with
    /// [`Mechanisms::rack_bands`] RACK judges it within the interactive band. The
    /// application's marking, as Linux's `IP_TOS` before a write: the sender never looks
    /// into its bytes.
    pub fn mark_interactive(&mut self, seq: u64) {
        if !self.cfg.mechanisms.rack_bands {
            return;
        }
        if let Some(s) = self.sent.iter_mut().rev().find(|s| s.start <= seq && seq < s.end) {
            s.band = 1;
        }
    }

    /// An ACK arrived.
    pub fn handle_ack(&mut self, now: Instant, ack: &Ack) {
        if ack.ack > self.snd_max || ack.ack < self.snd_una {
            return; // acknowledges data never sent, or an old reordered ACK
        }
        self.rwnd = ack.wnd;
        let sack = self.cfg.recovery == Recovery::Sack;
        let m = self.cfg.mechanisms;
        let dsack = if sack && m.dsack { dsack_block(ack) } else { None };
        // RFC 6937 DeliveredData = change in snd.una + change in SACKed bytes.
        let prr_before = m.prr.then(|| (self.snd_una, self.sacked.total_bytes()));
        let was_recovering = self.recovering();
        let tlp_end = self.tlp.end_seq; // the probe outstanding as the ACK arrives
        let mut newly_delivered = 0;
        if sack {
            // A DSACK block reports a duplicate, not new data: not for the scoreboard.
            for &(s, e) in &ack.sack.as_slice()[dsack.is_some() as usize..] {
                let (s, e) = (s.max(ack.ack), e.min(self.snd_max));
                if s < e {
                    self.sacked.insert(s, e);
                }
            }
            newly_delivered = self.note_delivered(now, ack.ack);
        }
        if m.dsack {
            // (RACK's state is read only with RACK-TLP: not written on every ACK.)
            self.rack.dsack_end = dsack.map_or(0, |(_, e)| e);
        }
        let advanced = ack.ack > self.snd_una;
        if advanced {
            self.on_new_ack(now, ack.ack);
        } else if m.rack_tlp && m.dsack {
            // A probe's DSACK may come on a duplicate ACK, even once all is acknowledged.
            self.tlp_process_ack(now, ack.ack, ack.sack.as_slice().is_empty());
        }
        if !advanced && self.snd_una < self.snd_max {
            // RFC 5681 §2 also asks for an unchanged window; our receiver shrinks the
            // window by the out-of-order bytes it holds, so (like Linux and ns-3) we do
            // not require it.
            self.dupacks += 1;
            if self.sack_suspended {
                self.cwnd += self.seg(); // Ogawa §5.3: grow on every ACK
            } else if !sack {
                self.on_dupack_reno(now);
            }
        }
        if m.rack_tlp {
            let exiting = was_recovering && !self.recovering();
            let counts = self.rack.dsack_counts(m.rack_reo_wnd, dsack.map(|(_, e)| e), tlp_end);
            self.rack.update_reo_wnd(self.snd_una, self.snd_max, counts, exiting);
        }
        if sack && !self.sack_suspended {
            if self.cfg.mechanisms.rack_tlp {
                self.rack_detect_loss(now);
            } else {
                self.update_lost_edge();
            }
            self.maybe_enter_sack_recovery(now);
            if let Some((una, sacked)) = prr_before.filter(|_| self.in_recovery) {
                // RFC 6937 §3: cwnd = pipe + sndcnt, so NextSeg() sends sndcnt — in the
                // window's unit: with packets DeliveredData counts segments, as Linux's
                // `newly_acked_sacked` does.
                let delivered = match self.cfg.cwnd_unit {
                    CwndUnit::Bytes => {
                        (self.snd_una - una + self.sacked.total_bytes()).saturating_sub(sacked)
                    }
                    CwndUnit::Packets => newly_delivered,
                };
                let pipe = self.pipe_in_unit();
                self.cwnd = pipe + self.prr.on_ack(delivered, pipe, self.ssthresh, self.seg());
            }
        }
        self.arm_tlp(now, if advanced { Arm::AckedNew } else { Arm::Other });
        if self.cfg.send_buffer_autotune && self.writer_waits && self.pipe_in_unit() < self.cwnd {
            // tcp_check_space → tcp_new_space: with a writer waiting (SOCK_NOSPACE) and
            // the window not full (tcp_should_expand_sndbuf), tcp_sndbuf_expand sizes the
            // buffer for 2 · max(TCP_INIT_CWND, cwnd) segments; it never shrinks. While
            // the window is full it does not grow, so a long burst can outgrow it.
            let segs = (self.cwnd / self.seg()).max(LINUX_SNDBUF_MIN_SEGS);
            self.sndbuf = self.sndbuf.max(2 * LINUX_PER_MSS * segs);
        }
    }

    /// The application is (or no longer is) waiting for send-buffer space
    /// (`SOCK_NOSPACE`): with [`SenderConfig::send_buffer_autotune`] the buffer grows
    /// only then.
    pub fn set_writer_waits(&mut self, waits: bool) {
        self.writer_waits = waits;
    }

    /// The ACK just given to [`Sender::handle_ack`] carried ECE (RFC 3168 §6.1.2):
    /// congestion was met on the way to the receiver. The sender reacts as to a loss
    /// but retransmits nothing: ssthresh from the congestion controller (Reno ½, CUBIC
    /// its β) and cwnd = ssthresh, and CWR on the next new data segment. At most once
    /// per window of data: not for ECE on ACKs of data sent before the last reduction,
    /// and not while loss recovery (fast or after a timeout) already reduced the window
    /// for this data. Without [`Mechanisms::ecn`] ECE is ignored (a non-ECN sender
    /// never sees one).
    pub fn handle_ece(&mut self, now: Instant) {
        if !self.cfg.mechanisms.ecn || self.ecn.high.is_some_and(|h| self.snd_una <= h) {
            return;
        }
        if self.recovering() {
            // Loss recovery already reduced the window for this data; still send CWR so
            // the receiver stops echoing (Linux `tcp_init_cwnd_reduction` queues it for
            // either cause), and answer no ECE of data sent before recovery began.
            let high = self.recover.get().unwrap_or(self.snd_max);
            self.ecn = EcnState { cwr_pending: true, high: Some(high) };
            return;
        }
        self.ssthresh = self.congestion_ssthresh(now);
        // §6.1.2 also halves cwnd; it never goes below one segment (the RFC's rule for
        // cwnd = 1 SMSS — wait for the retransmission timer — is not modelled).
        self.cwnd = self.ssthresh.max(self.seg());
        self.ecn = EcnState { cwr_pending: true, high: Some(self.snd_max) };
        self.stats.ecn_reductions += 1;
    }

    /// Fire whichever timers are due: the retransmission timer (RFC 6298 §5.4–5.6), and
    /// with RACK-TLP the reordering timer and the probe timer. Returns the sequence
    /// number of the timed-out segment when the retransmission timer fired.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<u64> {
        let due = |d: Option<Instant>| d.is_some_and(|d| d <= now);
        let rack_tlp = self.cfg.mechanisms.rack_tlp;
        // The probe timer is never later than the RTO; when both are due, probe first
        // (RFC 8985 §7.2) and restart the RTO after the probe (§7.3).
        if rack_tlp && due(self.tlp.deadline) {
            self.tlp.deadline = None;
            self.probe_due = true;
            self.rto_deadline = Opt::some(now + self.current_rto());
            return None;
        }
        if due(self.rto_deadline.get()) {
            return Some(self.on_rto(now));
        }
        if rack_tlp && due(self.rack.reo_deadline) {
            self.rack_detect_loss(now);
            self.maybe_enter_sack_recovery(now);
        }
        None
    }

    // ----- outputs ------------------------------------------------------------------

    /// The next segment to send now, if the windows allow one.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<DataSegment> {
        let seg = if let Some(seq) = self.pending_rtx.take() {
            Some((seq, self.retransmit_len(seq)))
        } else if self.probe_due {
            self.probe_due = false;
            self.tail_probe()
        } else if self.cfg.recovery == Recovery::Sack && self.in_recovery {
            self.next_seg_sack()
        } else {
            self.next_seg_in_order(now)
        }?;
        Some(self.emit(now, seg.0, seg.1))
    }

    /// When `handle_timeout` should be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let rto = self.rto_deadline.get();
        if !self.cfg.mechanisms.rack_tlp {
            return rto; // the RACK-TLP timers are never armed
        }
        [rto, self.rack.reo_deadline, self.tlp.deadline].into_iter().flatten().min()
    }

    // ----- observers ----------------------------------------------------------------

    /// Congestion window, bytes (a packet-counted window: segments × SMSS).
    pub fn cwnd(&self) -> u64 {
        self.cwnd * self.bytes_per_unit()
    }
    /// Slow-start threshold, bytes (`u64::MAX` before the first loss).
    pub fn ssthresh(&self) -> u64 {
        if self.ssthresh == u64::MAX {
            return u64::MAX;
        }
        self.ssthresh * self.bytes_per_unit()
    }
    /// Congestion window and slow-start threshold as counted: bytes, or segments with
    /// [`CwndUnit::Packets`].
    pub fn window(&self) -> Window {
        Window { cwnd: self.cwnd, ssthresh: self.ssthresh, seg: self.seg(), unit: self.cfg.cwnd_unit }
    }
    /// The congestion controller.
    pub fn controller(&self) -> &Controller {
        &self.cc
    }
    /// The RTT estimator.
    pub fn rtt(&self) -> &dyn RttEstimator {
        &self.rtt
    }
    /// The latest RTT sample taken.
    pub fn last_rtt_sample(&self) -> Option<Duration> {
        self.last_sample.get()
    }
    /// RTO including backoff.
    pub fn current_rto(&self) -> Duration {
        let base = self.rtt.rto(&self.cfg.rto);
        let factor = 1u64.checked_shl(self.backoff.min(32)).unwrap_or(u64::MAX);
        base.saturating_mul(factor).min(self.cfg.rto.max.max(base))
    }
    /// Oldest unacknowledged byte.
    pub fn snd_una(&self) -> u64 {
        self.snd_una
    }
    /// One past the highest byte sent.
    pub fn snd_max(&self) -> u64 {
        self.snd_max
    }
    /// Bytes written by the application.
    pub fn write_end(&self) -> u64 {
        self.write_end
    }
    /// In fast recovery?
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }
    /// Counters.
    pub fn stats(&self) -> SenderStats {
        SenderStats { bytes_sent: self.bytes_sent, segments_sent: self.segments_sent, ..self.stats.clone() }
    }

    /// When the probe timer fires, for the tests of its rules.
    #[cfg(test)]
    pub(super) fn tlp_deadline(&self) -> Option<Instant> {
        self.tlp.deadline
    }

    /// RACK's state, for the tests of its reordering window.
    #[cfg(test)]
    pub(super) fn rack(&self) -> &Rack {
        &self.rack
    }

    // ----- internals ----------------------------------------------------------------

    fn mss(&self) -> u64 {
        self.cfg.mss as u64
    }

    /// One full segment in the window's unit.
    fn seg(&self) -> u64 {
        seg_of(&self.cfg)
    }

    /// Bytes one unit of the window stands for (for observers).
    fn bytes_per_unit(&self) -> u64 {
        match self.cfg.cwnd_unit {
            CwndUnit::Bytes => 1,
            CwndUnit::Packets => self.mss(),
        }
    }

    /// Is the SACK scoreboard in use right now (Ogawa §5.3 suspends it)?
    fn use_scoreboard(&self) -> bool {
        self.cfg.recovery == Recovery::Sack && !self.sack_suspended
    }

    /// RFC 5681 FlightSize: sent but not cumulatively acknowledged.
    fn flight_size(&self) -> u64 {
        self.snd_max - self.snd_una
    }

    /// FlightSize in the window's unit (segments: those not cumulatively acknowledged).
    fn flight_in_unit(&self) -> u64 {
        match self.cfg.cwnd_unit {
            CwndUnit::Bytes => self.flight_size(),
            CwndUnit::Packets => {
                (self.sent.len() - self.sent.iter().take_while(|s| s.end <= self.snd_una).count()) as u64
            }
        }
    }

    /// [`Self::outstanding`] in the window's unit: segments (as first cut) in
    /// `[snd_una, snd_nxt)` not wholly SACKed, like Linux's packets in flight.
    fn outstanding_in_unit(&self) -> u64 {
        match self.cfg.cwnd_unit {
            CwndUnit::Bytes => self.outstanding(),
            CwndUnit::Packets => {
                if self.snd_nxt == self.snd_max && self.sacked.is_empty() {
                    return self.flight_in_unit(); // the common case, without a walk
                }
                let scoreboard = self.use_scoreboard();
                let (una, nxt) = (self.snd_una, self.snd_nxt);
                // A record partly acknowledged (a retransmission cut it elsewhere) counts
                // only if bytes of it past SND.UNA were sent again since go-back-N.
                self.sent
                    .iter()
                    .take_while(|s| s.start < nxt)
                    .filter(|s| s.end > una && s.start.max(una) < nxt && !(scoreboard && s.sacked))
                    .count() as u64
            }
        }
    }

    /// [`Self::pipe`] in the window's unit: with segments, RFC 6675 SetPipe() counts a
    /// segment once if not lost and once more if retransmitted in this recovery.
    fn pipe_in_unit(&self) -> u64 {
        if self.cfg.cwnd_unit == CwndUnit::Bytes {
            return self.pipe();
        }
        let live = self.sent.iter().filter(|s| s.end > self.snd_una && !s.sacked);
        if self.cfg.mechanisms.rack_tlp {
            return live.filter(|s| !s.lost).count() as u64;
        }
        live.map(|s| u64::from(s.end > self.lost_edge) + u64::from(s.start < self.high_rxt)).sum()
    }

    /// Bytes considered in the network when sending in order from `snd_nxt`.
    fn outstanding(&self) -> u64 {
        let sacked = if self.use_scoreboard() { self.sacked.bytes_in(self.snd_una, self.snd_nxt) } else { 0 };
        (self.snd_nxt - self.snd_una) - sacked
    }

    /// RFC 6675 §4 SetPipe(), in bytes: unSACKed bytes not presumed lost, plus
    /// unSACKed bytes retransmitted in this recovery. With RACK (RFC 8985 §6) a
    /// segment is out of the pipe exactly while it is marked lost.
    fn pipe(&self) -> u64 {
        let unsacked = |a: u64, b: u64| b.saturating_sub(a) - self.sacked.bytes_in(a, b);
        if self.cfg.mechanisms.rack_tlp {
            let lost: u64 = self
                .sent
                .iter()
                .filter(|s| s.lost && !s.sacked)
                .map(|s| s.end - s.start.max(self.snd_una))
                .sum();
            return unsacked(self.snd_una, self.snd_max) - lost;
        }
        let not_lost = unsacked(self.lost_edge.max(self.snd_una), self.snd_max);
        let rtx = unsacked(self.snd_una, self.high_rxt.min(self.snd_max));
        not_lost + rtx
    }

    fn on_new_ack(&mut self, now: Instant, ack: u64) {
        let acked = ack - self.snd_una;
        // What the window counts of this ACK, before the state moves on.
        let (acked_u, prior_in_flight) = match self.cfg.cwnd_unit {
            CwndUnit::Bytes => (acked, self.outstanding()),
            CwndUnit::Packets => {
                (self.sent.iter().take_while(|s| s.end <= ack).count() as u64, self.outstanding_in_unit())
            }
        };
        let rtt = self.take_rtt_sample(now, ack);
        self.snd_una = ack;
        self.snd_nxt = self.snd_nxt.max(ack);
        self.high_rxt = self.high_rxt.max(ack);
        self.sacked.advance(ack);
        self.dupacks = 0;
        self.rto_retries = 0;
        let mut restart_timer = true;
        if self.sack_suspended && self.recovery_done() {
            self.sack_suspended = false;
        }
        if self.cfg.mechanisms.rack_tlp && self.tlp.end_seq.is_some_and(|e| ack >= e) {
            if self.cfg.mechanisms.dsack {
                self.tlp_process_ack(now, ack, false);
            } else {
                self.end_tlp_episode(now);
            }
        }
        if self.in_recovery {
            match self.cfg.recovery {
                // RFC 5681 §3.2 (6): the first new ACK ends fast recovery.
                Recovery::Reno => self.exit_recovery(self.ssthresh),
                Recovery::NewReno => {
                    if self.recovery_done() {
                        // RFC 6582 §3.2 (3), option 1.
                        let w = self.ssthresh.min(self.flight_in_unit().max(self.seg()) + self.seg());
                        self.exit_recovery(w);
                    } else {
                        // RFC 6582 §3.2 (5): partial ACK — retransmit the next hole,
                        // deflate by the amount acked, add back one SMSS if ≥ SMSS acked.
                        self.pending_rtx = Opt::some(self.snd_una);
                        self.cwnd = self.cwnd.saturating_sub(acked_u).max(self.seg());
                        if acked_u >= self.seg() {
                            self.cwnd += self.seg();
                        }
                        restart_timer = !self.partial_acked;
                        self.partial_acked = true;
                    }
                }
                Recovery::Sack => {
                    if self.recovery_done() {
                        self.exit_recovery(self.ssthresh);
                    }
                }
            }
        } else if self.sack_suspended {
            // Ogawa §5.3: slow-start growth, one SMSS per ACK at most, until `recover`.
            self.cwnd += acked_u.min(self.seg());
        } else {
            let mut w = self.window();
            let sample = AckSample {
                now,
                acked: acked_u,
                prior_in_flight,
                srtt: self.rtt.srtt(),
                rtt,
                snd_una: ack,
                snd_nxt: self.snd_max,
                round_cwnd_limited: self.round_cwnd_limited(&w),
            };
            self.cc.on_ack(&mut w, &sample);
            self.cwnd = w.cwnd;
            self.ssthresh = w.ssthresh;
        }
        // Drop the records of acknowledged segments.
        while self.sent.front().is_some_and(|s| s.end <= ack) {
            self.sent.pop_front();
        }
        // RFC 6298 (5.2) stop when all is acknowledged, (5.3) else restart.
        if self.snd_una == self.snd_max {
            self.rto_deadline = Opt::NONE;
        } else if restart_timer {
            self.rto_deadline = Opt::some(now + self.current_rto());
        }
    }

    /// RTT sample from the newest segment this ACK covers completely, unless it was
    /// retransmitted (Karn's rule; RFC 6298 §3). A valid sample ends the backoff.
    /// Returns the sample.
    fn take_rtt_sample(&mut self, now: Instant, ack: u64) -> Option<Duration> {
        let s = self.sent.iter().take_while(|s| s.end <= ack).last().copied()?;
        if s.retransmitted {
            return None;
        }
        let rtt = now - s.xmit_ts;
        self.rtt.on_sample_acked(rtt, ack, self.snd_max, &self.cfg.rto);
        self.last_sample = Opt::some(rtt);
        self.backoff = 0;
        Some(rtt)
    }

    /// Mark segments newly delivered by this ACK (cumulatively or by SACK) and tell
    /// RACK about them (RFC 8985 §6.2 step 1). Returns how many there were.
    fn note_delivered(&mut self, now: Instant, ack: u64) -> u64 {
        let rack = self.cfg.mechanisms.rack_tlp;
        let mut newly = 0;
        for s in self.sent.iter_mut() {
            if s.sacked {
                continue;
            }
            if s.end <= ack || self.sacked.bytes_in(s.start, s.end) == s.end - s.start {
                s.sacked = s.end > ack; // cumulatively acked ones are dropped soon
                s.lost = false;
                newly += 1;
                if rack {
                    self.rack.on_delivered(now, s);
                }
            }
        }
        newly
    }

    /// RFC 8985 §6.2 step 5, then enter recovery if anything was marked.
    fn rack_detect_loss(&mut self, now: Instant) {
        let sacked_segs = self.sent.iter().filter(|s| s.sacked).count() as u32;
        let reo_wnd = self.rack.reo_wnd(
            self.cfg.mechanisms.rack_reo_wnd,
            self.recovering(),
            sacked_segs,
            self.cfg.dupthresh,
            self.rtt.srtt(),
        );
        // Per band, a segment no later segment of its own band has overtaken is still lost
        // once the other band delivers a later one and an RTO has passed since it left.
        let cross_wnd =
            if self.cfg.mechanisms.rack_bands { self.rtt.rto(&self.cfg.rto) } else { Duration::MAX };
        let marked = self.rack.detect_loss(now, reo_wnd, cross_wnd, self.sent.iter_mut());
        self.stats.rack_marked_lost += marked as u64;
    }

    /// In fast recovery or in the recovery after a timeout (RFC 8985 "Fast or RTO
    /// recovery"): `recover` not yet acknowledged.
    fn recovering(&self) -> bool {
        self.in_recovery || self.recover.get().is_some_and(|r| self.snd_una < r)
    }

    fn recovery_done(&self) -> bool {
        self.recover.get().is_some_and(|r| self.snd_una >= r)
    }

    /// May a new fast recovery start? RFC 6582 §3.2 (1): only if the ACK covers more
    /// than `recover` (a timeout or an earlier recovery set it). The RFC's `recover` is
    /// the highest byte sent; ours is one past it, so "covers more" is `snd_una ≥ recover`.
    fn may_enter_recovery(&self) -> bool {
        !self.in_recovery
            && !self.sack_suspended
            && self.recover.get().is_none_or(|r| self.snd_una >= r || self.cfg.recovery == Recovery::Reno)
    }

    fn exit_recovery(&mut self, cwnd: u64) {
        self.in_recovery = false;
        self.partial_acked = false;
        self.cwnd = cwnd.max(self.seg());
    }

    /// The congestion controller's ssthresh for a congestion event loss recovery found.
    fn congestion_ssthresh(&mut self, now: Instant) -> u64 {
        let (w, flight) = (self.window(), self.flight_in_unit());
        self.cc.on_congestion_event(now, &w, flight)
    }

    /// RFC 5681 §3.2 (2)–(4) for Reno and NewReno.
    fn on_dupack_reno(&mut self, now: Instant) {
        if self.in_recovery {
            self.cwnd += self.seg(); // (4) inflate for each segment that left the network
        } else if self.dupacks == self.cfg.dupthresh && self.may_enter_recovery() {
            self.ssthresh = self.congestion_ssthresh(now); // (2)
            self.recover = Opt::some(self.snd_max);
            self.pending_rtx = Opt::some(self.snd_una); // (3) retransmit
            self.cwnd = self.ssthresh + self.cfg.dupthresh as u64 * self.seg();
            self.in_recovery = true;
            self.partial_acked = false;
            self.stats.fast_retransmits += 1;
        }
    }

    /// RFC 6675 §5 (4): enter on DupThresh duplicate ACKs or when IsLost(HighACK + 1);
    /// with RACK (RFC 8985 §6.2), when RACK has marked a segment lost.
    fn maybe_enter_sack_recovery(&mut self, now: Instant) {
        if self.snd_una == self.snd_max || !self.may_enter_recovery() {
            return;
        }
        let lost = if self.cfg.mechanisms.rack_tlp {
            self.sent.iter().any(|s| s.lost)
        } else {
            self.dupacks >= self.cfg.dupthresh
                || (self.lost_edge > self.snd_una && !self.sacked.contains(self.snd_una))
        };
        if !lost {
            return;
        }
        self.recover = Opt::some(self.snd_max); // (4.1) RecoveryPoint = HighData
        self.ssthresh = self.congestion_ssthresh(now); // (4.2)
        self.cwnd = self.ssthresh;
        self.prr = Prr::start(self.flight_in_unit()); // RFC 6937 §3: RecoverFS = snd.nxt − snd.una
        self.in_recovery = true;
        self.high_rxt = self.snd_una;
        self.tlp = Tlp::default();
        if !self.cfg.mechanisms.rack_tlp {
            self.pending_rtx = Opt::some(self.snd_una); // (4.3) retransmit HighACK + 1
        }
        self.stats.fast_retransmits += 1;
        self.stats.sack_recoveries += 1;
    }

    /// RFC 6675 §4 IsLost(): a byte is lost when DupThresh SACKed segments, or more than
    /// (DupThresh − 1)·SMSS SACKed bytes, lie above it. Returns the highest such edge:
    /// every unSACKed byte below it is lost.
    fn update_lost_edge(&mut self) {
        self.lost_edge = self.snd_una;
        if self.sacked.is_empty() {
            return;
        }
        let byte_limit = (self.cfg.dupthresh as u64 - 1) * self.mss();
        let (mut segs, mut bytes) = (0u32, 0u64);
        for s in self.sent.iter().rev() {
            if s.start < self.snd_una {
                break;
            }
            let b = self.sacked.bytes_in(s.start, s.end);
            if b == s.end - s.start {
                segs += 1;
            }
            bytes += b;
            if segs >= self.cfg.dupthresh || bytes > byte_limit {
                self.lost_edge = s.start;
                return;
            }
        }
    }

    /// RFC 6298 (5.4)–(5.6), RFC 5681 (4), and the timeout-side mechanisms.
    fn on_rto(&mut self, now: Instant) -> u64 {
        self.stats.timeouts += 1;
        self.rto_retries += 1;
        let thin = self.sent.len() < 4 && self.ssthresh != u64::MAX;
        // RFC 5681 (4); keep ssthresh when the segment already timed out once.
        if self.backoff == 0 {
            let (w, flight) = (self.window(), self.flight_in_unit());
            self.ssthresh = self.cc.on_rto(now, &w, flight);
        }
        self.cwnd = self.seg(); // loss window
                                // RFC 6582 §3.2 (1) / RFC 6675 §5.1: no fast recovery for data sent before the timeout.
        self.recover = Opt::some(self.snd_max);
        self.in_recovery = false;
        self.dupacks = 0;
        self.pending_rtx = Opt::NONE;
        self.probe_due = false;
        self.tlp = Tlp::default();
        self.rack.reo_deadline = None;
        for s in self.sent.iter_mut() {
            s.lost = false; // go-back-N resends everything unSACKed anyway
        }
        self.snd_nxt = self.snd_una; // go-back-N: everything outstanding is presumed lost
        self.high_rxt = self.snd_una;
        self.sack_suspended =
            self.cfg.mechanisms.sack_off_after_timeout && self.cfg.recovery == Recovery::Sack;
        let linear =
            self.cfg.mechanisms.thin_linear_timeouts && thin && self.rto_retries <= THIN_LINEAR_RETRIES;
        if !linear {
            self.backoff += 1; // (5.5)
        }
        self.rto_deadline = Opt::some(now + self.current_rto()); // (5.6)
        self.snd_una
    }

    /// Length of a retransmission at `seq`: one SMSS at most, not past data sent
    /// before, and not into SACKed data.
    fn retransmit_len(&self, seq: u64) -> u32 {
        let mut end = (seq + self.mss()).min(self.snd_max);
        if self.use_scoreboard() {
            if let Some(&(s, _)) = self.sacked.ranges().iter().find(|&&(s, _)| s > seq) {
                end = end.min(s);
            }
        }
        (end - seq) as u32
    }

    /// RFC 6675 §4 NextSeg() under the `cwnd − pipe ≥ 1 SMSS` rule of §5 (C); with RACK,
    /// rule (1) retransmits the first segment RACK marked lost.
    fn next_seg_sack(&mut self) -> Option<(u64, u32)> {
        if self.cwnd < self.pipe_in_unit() + self.seg() {
            return None;
        }
        // (1) the first unSACKed byte that is lost (and, without RACK, above HighRxt).
        if self.cfg.mechanisms.rack_tlp {
            if let Some(s) = self.sent.iter().find(|s| s.lost && !s.sacked) {
                let seq = s.start.max(self.snd_una);
                return Some((seq, (s.end - seq).min(self.mss()) as u32));
            }
        } else {
            let s2 = self.sacked.next_gap(self.high_rxt.max(self.snd_una));
            if s2 < self.lost_edge && s2 < self.snd_max {
                return Some((s2, self.retransmit_len(s2)));
            }
        }
        // (2) new data, if the application has some and the receiver window allows.
        if self.write_end > self.snd_max {
            let len = (self.write_end - self.snd_max).min(self.mss());
            if self.snd_max + len <= self.snd_una + self.rwnd {
                self.snd_nxt = self.snd_max;
                return Some((self.snd_max, len as u32));
            }
        }
        // (3) an unSACKed byte above HighRxt that is not (yet) lost (not with RACK:
        // its timer decides).
        let s2 = self.sacked.next_gap(self.high_rxt.max(self.snd_una));
        if !self.cfg.mechanisms.rack_tlp && s2 < self.snd_max && self.sacked.max_end().is_some_and(|e| e > s2)
        {
            return Some((s2, self.retransmit_len(s2)));
        }
        None
    }

    /// Normal sending (and Reno/NewReno recovery, and go-back-N after a timeout): the
    /// next bytes from `snd_nxt`, within min(cwnd, rwnd).
    fn next_seg_in_order(&mut self, now: Instant) -> Option<(u64, u32)> {
        if self.use_scoreboard() {
            self.snd_nxt = self.sacked.next_gap(self.snd_nxt);
        }
        let len = if self.snd_nxt < self.snd_max {
            self.retransmit_len(self.snd_nxt) as u64
        } else {
            (self.write_end - self.snd_nxt).min(self.mss())
        };
        if len == 0 {
            return None;
        }
        let idle = self.snd_una == self.snd_max
            && self.last_send.get().is_some_and(|t| now - t > self.rtt.rto(&self.cfg.rto));
        if idle {
            // RFC 5681 §4.1: restart from the initial window after an idle period > RTO.
            if self.cfg.slow_start_restart {
                self.cwnd = self.cwnd.min(self.cfg.initial_cwnd_segments as u64 * self.seg());
            }
            // Spec §5.2: the path may have changed while idle; the next sample is the first.
            if self.cfg.mechanisms.rto_reset_after_idle && self.rtt.srtt().is_some() {
                self.rtt.reset();
                self.stats.rto_resets += 1;
            }
        }
        let fits = match self.cfg.cwnd_unit {
            CwndUnit::Bytes => self.outstanding() + len <= self.cwnd.min(self.rwnd),
            // A packet-counted window admits one more segment of any size; the
            // receiver's window still counts bytes.
            CwndUnit::Packets => {
                self.outstanding() + len <= self.rwnd && self.outstanding_in_unit() < self.cwnd
            }
        };
        if !fits {
            if self.cfg.cwnd_unit == CwndUnit::Packets && self.outstanding_in_unit() >= self.cwnd {
                self.note_cwnd_use(true); // data waits for the window
            }
            return None;
        }
        // RFC 896: hold a small new segment while data is unacknowledged.
        let new_data = self.snd_nxt >= self.snd_max;
        if self.cfg.nagle && new_data && len < self.mss() && self.snd_nxt > self.snd_una {
            return None;
        }
        Some((self.snd_nxt, len as u32))
    }

    /// RFC 8985 §7.3: the probe is one new segment if the application has data and the
    /// receiver window allows, else a retransmission of the last segment sent.
    fn tail_probe(&mut self) -> Option<(u64, u32)> {
        if self.snd_una == self.snd_max || self.in_recovery {
            return None;
        }
        self.stats.tlp_probes += 1;
        if self.write_end > self.snd_max && self.snd_max < self.snd_una + self.rwnd {
            let len = (self.write_end - self.snd_max).min(self.mss());
            self.snd_nxt = self.snd_max;
            self.tlp = Tlp { deadline: None, end_seq: Some(self.snd_max + len), is_retrans: false };
            return Some((self.snd_max, len as u32));
        }
        let last = self.sent.back().copied()?;
        let seq = last.start.max(self.snd_una);
        self.tlp = Tlp { deadline: None, end_seq: Some(self.snd_max), is_retrans: true };
        Some((seq, (last.end - seq) as u32))
    }

    /// RFC 8985 §7.2, or Linux's rules: (re)arm the probe timer while nothing else is
    /// going on.
    fn arm_tlp(&mut self, now: Instant, why: Arm) {
        if !self.cfg.mechanisms.rack_tlp {
            return;
        }
        if self.cfg.mechanisms.tlp_timer == TlpTimer::Linux {
            return self.arm_tlp_linux(now, why);
        }
        let eligible = !self.in_recovery
            && !self.sack_suspended
            && self.backoff == 0
            && self.tlp.end_seq.is_none()
            && self.snd_una < self.snd_max;
        if !eligible {
            self.tlp.deadline = None;
            return;
        }
        let pto = now + probe_timeout(self.rtt.srtt(), self.sent.len() == 1);
        // Never later than the RTO (RFC 8985 §7.2; Linux arms min(PTO, RTO)).
        self.tlp.deadline = Some(self.rto_deadline.get().map_or(pto, |r| pto.min(r)));
    }

    /// Linux 6.x `tcp_schedule_loss_probe` ([`TlpTimer::Linux`]).
    fn arm_tlp_linux(&mut self, now: Instant, why: Arm) {
        // One timer slot (`icsk_pending`): an armed reordering timer has replaced the
        // probe (`tcp_rack_mark_lost` clears FLAG_SET_XMIT_TIMER), and when it fires the
        // RTO follows (`tcp_rack_reo_timeout` → `tcp_rearm_rto`).
        if self.rack.reo_deadline.is_some() {
            self.tlp.deadline = None;
            return;
        }
        // The cap "if the RTO formula yields an earlier time": on an ACK the RTO just
        // restarted (`icsk_rto` from now); after new data, the RTO of the oldest
        // outstanding segment (`tcp_rto_delta_us`: its transmission + RTO).
        let cap = match why {
            Arm::Other => return, // a pending probe stays as it was
            Arm::AckedNew => self.rto_deadline.get(),
            Arm::NewData => self.sent.front().map(|h| h.xmit_ts + self.current_rto()),
        };
        // `icsk_ca_state` Open or CWR: not Recovery or Loss (`recover` not yet
        // acknowledged), and not Disorder (`tcp_try_keep_open`: `tcp_left_out` — SACKed
        // or marked-lost segments — or `tcp_any_retrans_done`). At most one probe per
        // episode (`tlp_high_seq`: a timer would only re-arm the RTO).
        let open = !self.recovering()
            && !self.sack_suspended
            && self.tlp.end_seq.is_none()
            && self.snd_una < self.snd_max
            && self.sacked.is_empty()
            && !self.sent.iter().any(|s| s.lost || s.retransmitted);
        if !open {
            self.tlp.deadline = None; // `tcp_rearm_rto`: the slot holds the RTO
            return;
        }
        let pto = now + probe_timeout_linux(self.rtt.srtt(), self.sent.len() == 1, self.cfg.rto.min);
        self.tlp.deadline = Some(cap.filter(|&c| c > now).map_or(pto, |c| pto.min(c)));
    }

    /// RFC 8985 §7.4: the probe's episode is over. Without DSACK we cannot tell whether
    /// a retransmitted probe repaired a real loss, so (conservatively) we assume it did
    /// and reduce the window as for a loss.
    fn end_tlp_episode(&mut self, now: Instant) {
        if self.tlp.is_retrans && !self.in_recovery {
            self.ssthresh = self.congestion_ssthresh(now).min(self.cwnd.max(2 * self.seg()));
            self.cwnd = self.ssthresh;
        }
        self.tlp = Tlp::default();
    }

    /// RFC 8985 §7.4.2 `TLP_process_ack` with DSACK: a retransmitted probe whose
    /// duplicate the receiver reports (a DSACK ending at `TLP.end_seq`) was spurious and
    /// leaves the window alone; an ACK beyond `TLP.end_seq` means it repaired a loss
    /// (reduce, as [`Self::end_tlp_episode`]); a duplicate ACK without SACK blocks ends
    /// the episode too. An ACK of exactly `TLP.end_seq` waits for the DSACK that may
    /// follow.
    fn tlp_process_ack(&mut self, now: Instant, ack: u64, dupack_without_sack: bool) {
        let Some(end) = self.tlp.end_seq.filter(|&e| ack >= e) else { return };
        let spurious = self.rack.dsack_end == end;
        if !self.tlp.is_retrans || spurious || dupack_without_sack {
            self.tlp = Tlp::default();
        } else if ack > end {
            self.end_tlp_episode(now);
        }
    }

    /// The ECN bits of a segment being sent: ECT(0) on new data only (RFC 3168
    /// §6.1.5: a retransmission must not be ECT, so a router drops rather than marks
    /// it), and CWR once, on the first new data after a reduction (§6.1.2).
    fn segment_ecn(&mut self, retransmission: bool) -> SegmentEcn {
        if !self.cfg.mechanisms.ecn || retransmission {
            return SegmentEcn::default();
        }
        let cwr = std::mem::take(&mut self.ecn.cwr_pending);
        SegmentEcn { ect: true, ce: false, cwr }
    }

    /// Linux `tcp_cwnd_validate` after a transmission (or a send the window held back):
    /// keep the strongest sign of how fully the window was used in the current round —
    /// limited once, limited for the round; otherwise the most segments in flight.
    fn note_cwnd_use(&mut self, limited: bool) {
        let packets_out = self.flight_in_unit();
        let u = &mut self.cwnd_use;
        if self.snd_una >= u.cwnd_usage_seq
            || limited
            || (!u.is_cwnd_limited && packets_out > u.max_packets_out)
        {
            *u = CwndUse {
                is_cwnd_limited: limited,
                max_packets_out: packets_out,
                cwnd_usage_seq: self.snd_max,
            };
        }
    }

    /// Linux `tcp_is_cwnd_limited` from the round's record (packet-counted windows): the
    /// window limited the sender in this round, or, in slow start, it is below twice the
    /// most segments in flight in it. `None` with byte-counted windows (judged per ACK).
    fn round_cwnd_limited(&self, w: &Window) -> Option<bool> {
        (self.cfg.cwnd_unit == CwndUnit::Packets).then(|| {
            let u = &self.cwnd_use;
            u.is_cwnd_limited || (w.cwnd < w.ssthresh && w.cwnd < 2 * u.max_packets_out)
        })
    }

    /// Bookkeeping for a segment that leaves now.
    fn emit(&mut self, now: Instant, seq: u64, len: u32) -> DataSegment {
        let end = seq + len as u64;
        let retransmission = seq < self.snd_max;
        let new_data = end > self.snd_max;
        if self.in_recovery && self.cfg.mechanisms.prr {
            // RFC 6937 §3: prr_out += (data sent), in the window's unit.
            self.prr.on_sent(if self.cfg.cwnd_unit == CwndUnit::Bytes { len as u64 } else { 1 });
        }
        if retransmission != self.last_retx {
            self.stats.retransmit_episodes += retransmission as u64;
            self.last_retx = retransmission;
        }
        if retransmission {
            self.stats.bytes_retransmitted += end.min(self.snd_max) - seq;
            for s in self.sent.iter_mut() {
                if s.start >= end {
                    break;
                }
                if s.end > seq {
                    s.retransmitted = true;
                    s.lost = false;
                    s.xmit_ts = now;
                }
            }
            if self.in_recovery && self.cfg.recovery == Recovery::Sack {
                self.high_rxt = self.high_rxt.max(end);
            }
            let head = seq <= self.snd_una && end > self.snd_una;
            if self.in_recovery
                && head
                && self.cfg.mechanisms.rto_restart == RtoRestart::Linux
                && self.rack.reo_deadline.is_none()
            {
                self.rto_deadline = Opt::some(now + self.current_rto()); // tcp_xmit_retransmit_queue
            }
        }
        if self.snd_una == self.snd_max {
            // Nothing was in flight: the controller may discount the quiet time.
            if let Some(last) = self.last_send.get() {
                self.cc.on_tx_start(now, now - last);
            }
        }
        if end > self.snd_max {
            let start = self.snd_max.max(seq);
            self.sent.push_back(Sent {
                start,
                end,
                xmit_ts: now,
                retransmitted: false,
                sacked: false,
                lost: false,
                band: 0,
            });
            self.snd_max = end;
        }
        if seq == self.snd_nxt || (seq < self.snd_nxt && end > self.snd_nxt) {
            self.snd_nxt = end;
        }
        self.bytes_sent += len as u64;
        self.segments_sent += 1;
        self.last_send = Opt::some(now);
        if self.rto_deadline.get().is_none() {
            self.rto_deadline = Opt::some(now + self.current_rto()); // RFC 6298 (5.1)
        }
        if self.cfg.cwnd_unit == CwndUnit::Packets {
            let limited = self.outstanding_in_unit() >= self.cwnd;
            self.note_cwnd_use(limited);
        }
        self.arm_tlp(now, if new_data { Arm::NewData } else { Arm::Other });
        DataSegment { seq, len, retransmission, ecn: self.segment_ecn(retransmission) }
    }
}

"""TCP profiles: ``tcp.profile`` sets many ``[tcp]`` keys at once (docs/scenario.md "Profiles").

A profile is a table ``key → (value, source)``: one line per key, with where the value
comes from (a kernel constant or sysctl, an ns-2 variable and its file). Resolution is a
plain overlay, done once when a ``[tcp]`` table is validated
(:class:`thinwan.config.scenario.TcpSection`): the profile's keys first, then every key
the scenario sets itself. Keys a profile does not list keep their documented defaults, so
``rfc`` — the documented defaults — is the empty table.

Layers (a file over the file it inherits from, a sweep's overrides over its base):
setting ``profile`` in a layer restarts ``[tcp]`` from that profile — the earlier layers'
``[tcp]`` keys are dropped, the keys set next to the profile apply (:func:`overlay`).
Otherwise a profile over the ogawa2011 files, which set every key, would change nothing.

The simulator never sees a profile, only the resolved keys; the profile's name stays in
the scenario (``tcp.profile``) and so in every result's ``config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PROFILES", "overlay", "profile_values", "resolve", "sources"]

# Citations used below (docs/scenario.md "Profiles" has the table with these sources):
#   tcp.h          include/net/tcp.h of Linux 6.x
#   ip-sysctl      Documentation/networking/ip-sysctl.rst of Linux 6.x
#   ns-default     tcl/lib/ns-default.tcl of ns-2.33 (line numbers of the 2.33 release)
#   tcp-full.cc    tcp/tcp-full.cc of ns-2.33; tcp.cc: tcp/tcp.cc of ns-2.33

# The documented defaults (docs/scenario.md "[tcp]"), each with its RFC there.
RFC: dict[str, tuple[Any, str]] = {}

# What Linux 6.x does with its default sysctls, in the keys thinwan has.
LINUX: dict[str, tuple[Any, str]] = {
    "recovery": ("newreno", "without SACK Linux recovers as NewReno (tcp_input.c, RFC 6582)"),
    "sack": (True, "ip-sysctl tcp_sack: default 1"),
    "mss": (1448, "1500-byte Ethernet MTU − 20 IP − 20 TCP − 12 timestamp option"),
    "header_bytes": (52, "ip-sysctl tcp_timestamps: default 1, so 40 + 12 option bytes (RFC 7323)"),
    "initial_cwnd_segments": (10, "tcp.h TCP_INIT_CWND 10 (RFC 6928)"),
    "nagle": (True, "tcp(7): Nagle is on unless the socket sets TCP_NODELAY"),
    "delayed_ack": (True, "tcp_input.c __tcp_ack_snd_check: ACK every 2nd full segment, else the delack timer"),
    "delayed_ack_ms": (
        40.0,
        "tcp.h TCP_DELACK_MIN = TCP_ATO_MIN = HZ/25 (40 ms; adaptive up to TCP_DELACK_MAX 200 ms)",
    ),
    "slow_start_restart": (True, "ip-sysctl tcp_slow_start_after_idle: default 1"),
    "min_rto_ms": (200.0, "tcp.h TCP_RTO_MIN = HZ/5; ip-sysctl tcp_rto_min_us: default 200000"),
    "max_rto_ms": (120000.0, "tcp.h TCP_RTO_MAX = 120·HZ; ip-sysctl tcp_rto_max_ms: default 120000"),
    "initial_rto_ms": (1000.0, "tcp.h TCP_TIMEOUT_INIT = 1·HZ (RFC 6298 (2.1))"),
    "clock_granularity_ms": (
        1.0,
        "RTT in µs (tcp_rtt_estimator), timers in jiffies; moot: min_rto bounds the variance term",
    ),
    "rwnd_bytes": (6291456, "ip-sysctl tcp_rmem max: default 6 MiB, reached by autotuning (tcp_moderate_rcvbuf = 1)"),
    "send_buffer_bytes": (0, "no SO_SNDBUF: autotuned up to tcp_wmem[2] (ip-sysctl: default 4 MiB)"),
    "send_buffer_autotune": (
        True,
        "tcp_input.c tcp_sndbuf_expand: 2 · max(10, cwnd) · 2,304 B, grown only when the writer waits "
        "and the window is not full (tcp_should_expand_sndbuf)",
    ),
    "dupthresh": (3, "ip-sysctl tcp_reordering: default 3"),
    "rtt_gain": ("rfc6298", "tcp_input.c tcp_rtt_estimator: srtt gain 1/8"),
    "rto_formula": ("linux", "tcp_input.c tcp_set_rto / tcp_rtt_estimator: RTO = srtt + max(rttvar, rto_min)"),
    "rto_reset_after_idle": (False, "not in Linux (Ogawa §5.2)"),
    "sack_off_after_timeout": (False, "not in Linux (Ogawa §5.3)"),
    "rack_tlp": (True, "ip-sysctl tcp_recovery: default 0x1 (RACK); tcp_early_retrans: default 3 (TLP)"),
    "thin_linear_timeouts": (False, "ip-sysctl tcp_thin_linear_timeouts: default 0"),
    "congestion_control": ("cubic", "ip-sysctl tcp_congestion_control: default cubic (tcp_cubic.c, RFC 9438)"),
    "cwnd_unit": ("packets", "tcp.h: snd_cwnd and snd_ssthresh count segments (tcp_cong_avoid_ai, tcp_slow_start)"),
    "dsack": (True, "ip-sysctl tcp_dsack: default 1 (RFC 2883)"),
    # Not "linux" (tcp_dsack_seen's DSACK gate) yet: Linux also finds reordering from
    # timestamps (tcp_try_undo_partial → tcp_check_sack_reordering(…, ts = 1)), which the
    # model lacks; the gate alone starves the window behind priority queuing (docs/model.md).
    "rack_reo_wnd": ("adaptive", "tcp_recovery.c tcp_rack_update_reo_wnd / tcp_rack_reo_wnd (RFC 8985 §6.2)"),
    "prr": (True, "tcp_input.c tcp_cwnd_reduction: PRR in every recovery, not a sysctl (RFC 6937)"),
    "rack_bands": (False, "not in Linux: tcp_rack_detect_loss judges every segment against the latest delivered"),
    "quick_ack": (True, "tcp_input.c tcp_event_data_recv / tcp_incr_quickack, TCP_MAX_QUICKACKS 16"),
    "hystart": (True, "tcp_cubic.c module parameters hystart=1, hystart_detect=3 (ACK train + delay), low window 16"),
    "rto_restart": ("linux", "tcp_output.c tcp_xmit_retransmit_queue: retransmitting the head restarts the RTO"),
    "tlp_timer": (
        "linux",
        "tcp_output.c tcp_schedule_loss_probe: 2·SRTT + 2 ms (+ rto_min if 1 in flight), Open state only",
    ),
}

# The defaults of ns-2.33's Agent/TCP/FullTcp (Reno) and of Agent/TCP it inherits from.
# Values ns-2 states in segments or seconds are converted with segsize_ = 536.
NS2_FULLTCP: dict[str, tuple[Any, str]] = {
    "recovery": ("reno", "Agent/TCP/FullTcp reno_fastrecov_ true (ns-default:1223); /Newreno is a subclass"),
    "sack": (False, "SACK is the subclass Agent/TCP/FullTcp/Sack (ns-default:1234-1240)"),
    "mss": (536, "FullTcp segsize_ 536 (ns-default:1212)"),
    "header_bytes": (40, "tcpip_base_hdr_size_ 40, timestamps_ false (ns-default:933, 942; tcp-full.cc:651-662)"),
    "initial_cwnd_segments": (2, "windowInit_ 2, windowInitOption_ 1 (ns-default:916-917; tcp-full.cc:2040)"),
    "nagle": (True, "FullTcp nodelay_ false (ns-default:1215; tcp-full.cc:1043-1061)"),
    "delayed_ack": (
        True,
        "ACK once segsperack_ 1 × segsize_ unacked, else the timer (ns-default:1210; tcp-full.cc:1422-1431)",
    ),
    "delayed_ack_ms": (
        100.0,
        "FullTcp interval_ 0.1 (ns-default:1219); fires on a 100-ms grid (tcp-full.cc:1550-1553)",
    ),
    "slow_start_restart": (
        True,
        "slow_start_restart_ true (ns-default:946); idle > RTO (tcp-full.cc:1007-1010, 1441-1457)",
    ),
    "min_rto_ms": (200.0, "minrto_ 0.2 (ns-default:952)"),
    "max_rto_ms": (60000.0, "maxrto_ 60 (ns-default:950)"),
    "initial_rto_ms": (3000.0, "rtxcur_init_ 3.0 (ns-default:957; tcp.cc:524)"),
    "clock_granularity_ms": (10.0, "tcpTick_ 0.01 (ns-default:948): RTT in ticks (tcp.cc:564-576)"),
    "rwnd_bytes": (20 * 536, "window_ 20 segments × segsize_ (ns-default:915; tcp-full.cc:968)"),
    "send_buffer_bytes": (0, "the application's bytes wait in the agent without a limit (curseq_)"),
    "send_buffer_autotune": (False, "no send buffer in ns-2.33's agents"),
    "dupthresh": (3, "FullTcp tcprexmtthresh_ 3 (ns-default:1213; tcp-full.cc:2129)"),
    "rtt_gain": ("rfc6298", "T_SRTT_BITS 3, T_RTTVAR_BITS 2: gains 1/8, 1/4 (ns-default:958-959; tcp.cc:585-594)"),
    "rto_formula": ("rfc6298", "rfc2988_ true: minrto_ clamps the RTO (ns-default:965; tcp.cc:531-537, 604)"),
    "rto_reset_after_idle": (False, "not in ns-2.33 (Ogawa §5.2)"),
    "sack_off_after_timeout": (False, "not in ns-2.33 (Ogawa §5.3)"),
    "rack_tlp": (False, "not in ns-2.33"),
    "rack_bands": (False, "not in ns-2.33"),
    "thin_linear_timeouts": (False, "not in ns-2.33"),
    "congestion_control": ("reno", "windowOption_ 1: Reno's increase (ns-default:921; tcp.cc opencwnd)"),
    "cwnd_unit": ("bytes", "window = int(cwnd_) × maxseg_ bytes (tcp-full.cc:968): a byte budget, grown per ACK"),
}

PROFILES: dict[str, dict[str, tuple[Any, str]]] = {"rfc": RFC, "linux": LINUX, "ns2-fulltcp": NS2_FULLTCP}


def profile_values(name: str) -> dict[str, Any]:
    """The ``[tcp]`` keys profile ``name`` sets, with their values."""
    return {key: value for key, (value, _) in PROFILES[name].items()}


def sources(name: str) -> dict[str, str]:
    """Where each value of profile ``name`` comes from."""
    return {key: source for key, (_, source) in PROFILES[name].items()}


def resolve(tcp: Mapping[str, Any]) -> dict[str, Any]:
    """A ``[tcp]`` table with its profile's keys filled in where the table does not set
    them. An unknown (or mistyped) ``profile`` is left for validation to report."""
    name = tcp.get("profile", "rfc")
    if not isinstance(name, str) or name not in PROFILES:
        return dict(tcp)
    return {**profile_values(name), **tcp}


def overlay(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> dict[str, Any]:
    """The ``[tcp]`` keys of a later layer over an earlier one's: key by key, except that a
    layer which sets ``profile`` starts afresh from it (the earlier keys are dropped)."""
    if "profile" in later:
        return dict(later)
    return {**earlier, **later}

"""Scenario files: load, validate and hand a complete scenario to the simulator.

The contract is ``docs/scenario.md``: one pydantic model per TOML section, every key with
the documented type, default and range. Validation is strict on types (TOML has real
booleans and integers, so ``sack = "yes"`` or ``pairs = 2.5`` is a mistake, not something
to coerce; an integer is still accepted where a float is expected) and rejects unknown
keys, so a typo never silently falls back to a default.

Every problem surfaces as a :class:`ScenarioError` whose message names the source and the
dotted key, one line per problem::

    scenarios/x.toml: tcp.min_rto_ms: Input should be greater than 0
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from . import tcp_profiles
from .files import ScenarioError, read_scenario_data
from .limits import (
    MAX_DURATION_S,
    MAX_PAIRS,
    MAX_ROWS,
    MAX_SEED,
    QUEUE_TRACE_PORTS,
    U32_MAX,
    U64_MAX,
    RunEstimate,
)

__all__ = [
    "ScenarioError",
    "Scenario",
    "ScenarioSection",
    "TopologySection",
    "QueueSection",
    "TcpSection",
    "TrafficSection",
    "RecordsSection",
    "MuxSection",
    "check_simulable",
    "QdsSection",
    "LabSection",
    "MUX_FRAME_PAYLOAD_BYTES",
    "load_scenario",
    "estimate_run",
    "scenario_from_dict",
    "read_scenario_data",
]


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario TOML file; ``scenario.name`` defaults to its stem.

    ``inherits`` is resolved first (:func:`thinwan.config.files.read_scenario_data`); the
    optional ``[lab]`` section is validated with the rest (:class:`LabSection`).
    """
    path = Path(path)
    return scenario_from_dict(read_scenario_data(path), source=str(path))


def scenario_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Scenario:
    """Validate a scenario given as nested dicts (sections → keys → values).

    ``source`` is used in error messages. The default ``scenario.name`` is its stem when
    it is a path (so a file path behaves like :func:`load_scenario`), else "scenario".
    """
    default_name = "scenario" if source.startswith("<") else Path(source).stem
    data = _with_default_name(dict(data), default_name)
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise ScenarioError(_describe(e, source)) from None


# ---------------------------------------------------------------------------------------
# Sections. Field order matters where a check compares with an earlier key: pydantic
# validates in declaration order, so the earlier value is in ``info.data``.


class _Section(BaseModel):
    # validate_default: cross-key checks must also run when only one of the keys is set
    # (e.g. min_rto_ms = 90000 with max_rto_ms left at its default of 60000).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False, validate_default=True)


class ScenarioSection(_Section):
    """``[scenario]``: what to run and for how long."""

    name: str = ""
    description: str = ""
    # Bounds: docs/limits.md (thinwan.config.limits).
    duration_s: float = Field(60.0, gt=0, le=MAX_DURATION_S)
    drain_s: float = Field(10.0, ge=0, le=MAX_DURATION_S)
    runs: int = Field(1, ge=1, le=1_000_000)
    seed: int = Field(1, ge=0, le=MAX_SEED)

    @field_validator("seed")
    @classmethod
    def _last_seed_fits(cls, v: int, info: ValidationInfo) -> int:
        runs = info.data.get("runs")
        if runs is not None and v + runs - 1 > MAX_SEED:
            raise ValueError(f"run k uses seed + k: seed + runs - 1 must be ≤ {MAX_SEED} (a u64)")
        return v

    start_stagger_ms: float = Field(0.25, ge=0)


class TopologySection(_Section):
    """``[topology]``: the dumbbell (servers — R1 — bottleneck — R2 — clients), the
    mux topology (the same with a last hop proxy → client, and the tunnel of ``[mux]``),
    or the middlebox topology of QDS (``servers`` servers — middlebox R1 — downlink —
    R2 — clients, each client with its own base one-way delay)."""

    kind: Literal["dumbbell", "mux", "middlebox"] = "dumbbell"
    pairs: int = Field(10, ge=1, le=MAX_PAIRS)
    access_rate_mbps: float = Field(100.0, gt=0)
    access_delay_ms: float = Field(1.0, ge=0)
    access_queue_packets: int = Field(1000, ge=1, le=U64_MAX)
    bottleneck_rate_mbps: float = Field(10.0, gt=0)
    bottleneck_delay_ms: float = Field(20.0, ge=0)
    bottleneck_loss: float = Field(0.0, ge=0, le=1)
    bottleneck_loss_rev: float = Field(0.0, ge=0, le=1)
    bottleneck_jitter_pct: float = Field(0.0, ge=0, le=100)
    last_hop_delay_ms: float = Field(50.0, ge=0)
    last_hop_rate_mbps: float = Field(100.0, gt=0)
    # Middlebox topology (docs/scenario.md): 0 servers = ceil(pairs / 2) (the spec's S = N/2).
    servers: int = Field(0, ge=0, le=U32_MAX)
    client_delay_mean_ms: float = Field(7.5, ge=0)
    client_delay_sd_ms: float = Field(1.25, ge=0)
    client_delay_min_ms: float = Field(5.0, ge=0)
    client_delay_max_ms: float = Field(10.0, ge=0)

    @field_validator("client_delay_max_ms")
    @classmethod
    def _delay_clip_ordered(cls, v: float, info: ValidationInfo) -> float:
        return _at_least(v, info, "client_delay_min_ms")


class QueueSection(_Section):
    """``[queue]``: the bottleneck port R1→R2 (and, with the same limits, R2→R1).

    Mirrors the core's ``QueueKeys`` (``crates/proto/src/qdisc/spec.rs``): same names,
    defaults and bounds. The static classes are parallel arrays (one entry per class)
    rather than an array of tables, so :meth:`Scenario.to_toml` writes them back as is.
    """

    discipline: Literal["droptail", "priority", "fq_codel", "classes", "qds"] = "droptail"
    limit_bytes: int = Field(0, ge=0, le=U64_MAX)
    limit_packets: int = Field(1000, ge=0, le=U64_MAX)
    priority_classifier: Literal["label", "gap"] = "label"
    classifier_gap_ms: float = Field(6.31, gt=0)
    # FQ-CoDel (RFC 8290; CoDel RFC 8289): defaults of RFC 8289 §4.3 and RFC 8290 §5.
    fq_codel_target_ms: float = Field(5.0, gt=0)
    fq_codel_interval_ms: float = Field(100.0, gt=0)
    fq_codel_quantum_bytes: int = Field(1514, ge=1, le=U32_MAX)
    fq_codel_flows: int = Field(1024, ge=1, le=65536)
    fq_codel_hash_seed: int = Field(0, ge=0, le=U64_MAX)
    # The class schedulers ("classes": static, "qds": driven by the QDS controller).
    class_quantum_bytes: int = Field(1514, ge=1, le=U32_MAX)
    class_rate_shares: tuple[Annotated[float, Field(ge=0, le=1)], ...] = Field((), strict=False)
    class_ceil_shares: tuple[Annotated[float, Field(gt=0, le=1)], ...] = Field((), strict=False)
    class_interactive: int = Field(-1, ge=-1, le=U32_MAX)
    class_flows: tuple[Annotated[tuple[Annotated[int, Field(ge=0, le=U64_MAX)], ...], Field(strict=False)], ...] = (
        Field((), strict=False)
    )
    # Class schedulers: CoDel (fq_codel_target_ms / _interval_ms) on every flow queue.
    class_codel: bool = False
    # "qds": serve by the budget classes' rates ("drr", the source's QDS) or each packet by
    # its deadline, arrival + its flow's remaining budget ("deadline", docs/qds.md).
    qds_order: Literal["drr", "deadline"] = "drr"
    # The class schedulers: when a flow is put into another class, its queued packets stay
    # in the old class ("leave", Linux HTB's u32 filters) or move with it ("move").
    class_change: Literal["leave", "move"] = "leave"
    # CoDel (fq_codel; the classes with class_codel) marks ECN-capable packets CE instead of
    # dropping them (RFC 8290 §5.2.7); a full buffer still drops.
    ecn: bool = False

    @field_validator("limit_packets")
    @classmethod
    def _some_limit(cls, v: int, info: ValidationInfo) -> int:
        if v == 0 and info.data.get("limit_bytes") == 0:
            raise ValueError("limit_bytes and limit_packets are both 0; set at least one > 0")
        return v

    @field_validator("fq_codel_interval_ms")
    @classmethod
    def _interval_at_least_target(cls, v: float, info: ValidationInfo) -> float:
        return _at_least(v, info, "fq_codel_target_ms")

    @field_validator("class_rate_shares")
    @classmethod
    def _rate_shares(cls, v: tuple[float, ...], info: ValidationInfo) -> tuple[float, ...]:
        if info.data.get("discipline") == "classes" and not v:
            raise ValueError('discipline "classes" needs at least one class')
        if sum(v) > 1 + 1e-9:
            raise ValueError(f"the shares sum to {sum(v)}, more than the link (1)")
        return v

    @field_validator("class_ceil_shares")
    @classmethod
    def _ceil_shares(cls, v: tuple[float, ...], info: ValidationInfo) -> tuple[float, ...]:
        rates = info.data.get("class_rate_shares")
        if rates is None or not v:
            return v
        if len(v) != len(rates):
            raise ValueError(
                f"{len(v)} entries for {len(rates)} classes (class_rate_shares); give one per class or none"
            )
        for i, (ceil, rate) in enumerate(zip(v, rates, strict=True)):
            if ceil < rate:
                raise ValueError(f"entry {i}: {ceil} is below its rate share {rate}")
        return v

    @field_validator("class_interactive")
    @classmethod
    def _interactive_class(cls, v: int, info: ValidationInfo) -> int:
        n = len(info.data.get("class_rate_shares") or ())
        if v != -1 and v >= n:
            raise ValueError(f"must be -1 or a class index below {n}, got {v}")
        return v

    @field_validator("class_flows")
    @classmethod
    def _class_flows(cls, v: tuple[tuple[int, ...], ...], info: ValidationInfo) -> tuple[tuple[int, ...], ...]:
        n = len(info.data.get("class_rate_shares") or ())
        if len(v) > n:
            raise ValueError(f"{len(v)} entries for {n} classes")
        seen: set[int] = set()
        for i, flows in enumerate(v):
            for f in flows:
                if f in seen:
                    raise ValueError(f"entry {i}: flow {f} is already in an earlier class")
                seen.add(f)
        return v


def _profile_hint(info: ValidationInfo, off: object) -> str:
    """When the profile, not the file, set the key being refused: how to turn it off."""
    profile = info.data.get("profile", "rfc")
    if not tcp_profiles.profile_values(profile).get(info.field_name):
        return ""
    shown = "false" if off is False else off
    return f' (tcp.profile = "{profile}" turns it on: set tcp.{info.field_name} = {shown} as well)'


class TcpSection(_Section):
    """``[tcp]``: every connection (sender = server, receiver = client).

    ``profile`` sets many keys at once (:mod:`.tcp_profiles`); a key given next to it wins
    over it. The model's ``model_fields_set`` stays the keys given, so that
    :meth:`Scenario.with_values` can layer overrides (a new profile restarts ``[tcp]``).
    """

    profile: Literal["rfc", "linux", "ns2-fulltcp"] = "rfc"
    recovery: Literal["reno", "newreno"] = "newreno"
    sack: bool = True
    mss: int = Field(1460, ge=100, le=9000)
    header_bytes: int = Field(40, ge=0, le=U32_MAX)
    initial_cwnd_segments: int = Field(10, ge=1, le=U32_MAX)
    nagle: bool = False
    delayed_ack: bool = True
    delayed_ack_ms: float = Field(40.0, gt=0)
    slow_start_restart: bool = True
    min_rto_ms: float = Field(200.0, gt=0)
    max_rto_ms: float = 60000.0
    initial_rto_ms: float = Field(1000.0, gt=0)
    clock_granularity_ms: float = Field(1.0, ge=0)
    rwnd_bytes: int = Field(4194304, le=U64_MAX)
    send_buffer_bytes: int = Field(0, ge=0, le=U64_MAX)
    # Linux's send-buffer autotuning (tcp_sndbuf_expand; docs/model.md "The send buffer"),
    # capped by send_buffer_bytes (0: tcp_wmem's 4 MiB).
    send_buffer_autotune: bool = False
    dupthresh: int = Field(3, ge=1, le=U32_MAX)
    rtt_gain: Literal["rfc6298", "asymmetric"] = "rfc6298"
    rto_formula: Literal["rfc6298", "linux"] = "rfc6298"
    rto_reset_after_idle: bool = False
    sack_off_after_timeout: bool = False
    rack_tlp: bool = False
    thin_linear_timeouts: bool = False
    dsack: bool = False
    rack_reo_wnd: Literal["static", "adaptive", "linux"] = "static"
    prr: bool = False
    quick_ack: bool = False
    # RACK per priority band (ours, docs/model.md "RACK per band"): a segment is judged
    # lost by RFC 8985's rule against later-sent segments of its own band (interactive or
    # not), against the other band's only an RTO after it left.
    rack_bands: bool = False

    # Window growth and reduction: RFC 5681 Reno or RFC 9438 CUBIC (docs/model.md).
    congestion_control: Literal["reno", "cubic"] = "reno"
    # What cwnd and ssthresh count: bytes (RFC 5681) or segments (Linux's snd_cwnd).
    cwnd_unit: Literal["bytes", "packets"] = "bytes"
    # CUBIC's slow start ends by Linux's HyStart (tcp_cubic.c; docs/model.md).
    hystart: bool = False
    # The tail-loss-probe timer: RFC 8985 §7.2, or Linux's tcp_schedule_loss_probe.
    tlp_timer: Literal["rfc", "linux"] = "rfc"
    # When the RTO restarts: RFC 6298 (5.3), or also on a recovery retransmission of the
    # oldest segment (Linux's tcp_xmit_retransmit_queue).
    rto_restart: Literal["rfc6298", "linux"] = "rfc6298"
    # ECN (RFC 3168 §6.1): data carries ECT(0); CE → ECE until CWR; one window reduction
    # per window of data, without a retransmission. Both ends alike (handshake assumed).
    ecn: bool = False

    @model_validator(mode="wrap")
    @classmethod
    def _apply_profile(cls, data: Any, handler: Any) -> TcpSection:
        # Resolved once, here, before the keys are checked together (a profile's rack_tlp
        # with a file's sack = false is refused like any other pair).
        if not isinstance(data, Mapping):
            return handler(data)
        section = handler(tcp_profiles.resolve(data))
        # What the scenario set itself, not what the profile filled in (pydantic's meaning).
        object.__setattr__(section, "__pydantic_fields_set__", set(data) & set(cls.model_fields))
        return section

    @field_validator("max_rto_ms")
    @classmethod
    def _max_rto_at_least_min(cls, v: float, info: ValidationInfo) -> float:
        return _at_least(v, info, "min_rto_ms")

    @field_validator("rwnd_bytes")
    @classmethod
    def _rwnd_at_least_mss(cls, v: int, info: ValidationInfo) -> int:
        return _at_least(v, info, "mss")

    @field_validator("sack_off_after_timeout", "rack_tlp", "dsack", "prr")
    @classmethod
    def _needs_sack(cls, v: bool, info: ValidationInfo) -> bool:
        if v and not info.data.get("sack"):
            raise ValueError(f"needs tcp.sack = true{_profile_hint(info, False)}")
        return v

    @field_validator("rack_bands")
    @classmethod
    def _bands_need_rack(cls, v: bool, info: ValidationInfo) -> bool:
        if v and not info.data.get("rack_tlp"):
            why = _profile_hint(info, "false") or " (it changes how RACK marks segments lost)"
            raise ValueError(f"needs tcp.rack_tlp = true{why}")
        return v

    @field_validator("rack_reo_wnd")
    @classmethod
    def _adaptive_needs_rack(cls, v: str, info: ValidationInfo) -> str:
        if v != "static" and not info.data.get("rack_tlp"):
            why = _profile_hint(info, '"static"') or " (it adapts RACK's reordering window)"
            raise ValueError(f'"{v}" needs tcp.rack_tlp = true{why}')
        return v

    @field_validator("hystart")
    @classmethod
    def _hystart_needs_cubic(cls, v: bool, info: ValidationInfo) -> bool:
        if v and info.data.get("congestion_control") != "cubic":
            why = _profile_hint(info, False) or " (HyStart is CUBIC's, tcp_cubic.c)"
            raise ValueError(f'needs tcp.congestion_control = "cubic"{why}')
        return v

    @field_validator("tlp_timer")
    @classmethod
    def _linux_tlp_needs_rack(cls, v: str, info: ValidationInfo) -> str:
        if v == "linux" and not info.data.get("rack_tlp"):
            why = _profile_hint(info, '"rfc"') or " (it times RACK-TLP's probe)"
            raise ValueError(f'"linux" needs tcp.rack_tlp = true{why}')
        return v


# The models a mix may hold (those whose writes are generated per pair).
MixModel = Literal["video", "data", "thin-client", "game"]
# One entry of traffic.mix: [model, pairs] (a TOML array, so not strict about tuples).
MixEntry = Annotated[tuple[MixModel, Annotated[int, Field(ge=0, le=U32_MAX, strict=True)]], Field(strict=False)]


class TrafficSection(_Section):
    """``[traffic]``: one independent source per server (Ogawa §1, docs/sources.md)."""

    model: Literal["thin-client", "bulk", "game", "pcap", "video", "data", "mix"] = "thin-client"
    p_interactive_to_bulk: float = Field(0.09, ge=0, le=1)
    p_bulk_to_interactive: float = Field(0.42, ge=0, le=1)
    gap_ii_s: float = Field(0.27, gt=0)
    gap_ib_s: float = Field(0.22, gt=0)
    gap_bi_s: float = Field(0.24, gt=0)
    gap_bb_s: float = Field(0.11, gt=0)
    gap_distribution: Literal["lognormal", "exponential", "constant"] = "lognormal"
    gap_lognormal_sigma: float = Field(1.0, gt=0)
    # Per transition (I→I, I→B, B→I, B→B); 0: gap_lognormal_sigma. `thinwan fit` sets them.
    gap_lognormal_sigma_ii: float = Field(0.0, ge=0)
    gap_lognormal_sigma_ib: float = Field(0.0, ge=0)
    gap_lognormal_sigma_bi: float = Field(0.0, ge=0)
    gap_lognormal_sigma_bb: float = Field(0.0, ge=0)
    # Per-stream activity (flows per second relative to the population, mean 1):
    # "identical" (every stream alike) or "lognormal" with σ of ln(activity).
    session_activity: Literal["identical", "lognormal"] = "identical"
    session_activity_sigma: float = Field(0.5, ge=0, le=5)
    interactive_bytes_mean: float = Field(137.2, gt=0)
    bulk_bytes_mean: float = Field(936.2, gt=0)
    size_spread: float = Field(0.5, ge=0, le=1)
    bulk_packets_mean: float = Field(7.4, ge=2)
    bulk_packets_max: int = Field(1000, ge=2, le=U32_MAX)
    bulk_pareto_shape: float = Field(1.5, gt=1)
    intra_bulk_gap_ms: float = Field(0.36, ge=0)
    separate_connections: bool = False
    # model = "pcap": the capture (relative to the scenario file) and the server's port
    # (0: the side that sends a flow's first payload). thinwan.trace says how it is read.
    pcap_file: str = ""
    pcap_server_port: int = Field(0, ge=0, le=65535)
    # Video, data and mixes (docs/scenario.md, docs/model.md "Video, data and mixes").
    video_rate_mbps: float = Field(5.0, gt=0)
    video_fps: float = Field(25.0, gt=0, le=1000)
    video_frame_spread: float = Field(0.2, ge=0, le=1)
    data_rate_mbps: float = Field(1.0, gt=0)
    data_object_kb: float = Field(50.0, gt=0, le=1e6)
    data_object_sigma: float = Field(1.0, gt=0, le=5)
    # model = "mix": [[model, pairs], ...] in pair order; e.g. [["video", 3], ["data", 9]].
    mix: tuple[MixEntry, ...] = Field((), strict=False)
    mix_change_s: float = Field(0.0, ge=0)
    mix_shift: int = Field(0, ge=0, le=U32_MAX)

    @model_validator(mode="after")
    def _pcap_needs_a_file(self) -> TrafficSection:
        if self.model == "pcap" and not self.pcap_file:
            raise ValueError('traffic.pcap_file: traffic.model = "pcap" needs a capture file')
        return self

    @field_validator("bulk_packets_max")
    @classmethod
    def _max_above_mean(cls, v: int, info: ValidationInfo) -> int:
        mean = info.data.get("bulk_packets_mean")
        if mean is not None and v <= mean:
            raise ValueError(f"must be greater than traffic.bulk_packets_mean ({mean})")
        return v


class RecordsSection(_Section):
    """``[records]``: which optional traces to keep."""

    traces: bool = True
    trace_interval_ms: float = Field(10.0, gt=0)
    trace_connections: Literal["all", "none"] = "all"
    # A tuple keeps the frozen model hashable; TOML arrays are accepted (strict=False).
    packet_log_conns: tuple[Annotated[int, Field(ge=0, le=U32_MAX)], ...] = Field((), strict=False)
    # The per-packet RTT table (docs/records.md "packet_rtt"); always on with topology.kind = "middlebox".
    packet_rtt: bool = False
    # A pcap of the simulated packets at one point of the network, written to
    # runs/run-<k>/<point>.pcap (docs/records.md "pcap").
    pcap: Literal["none", "server", "client", "bottleneck"] = "none"
    # The connections in that pcap; empty = all of them.
    pcap_conns: tuple[Annotated[int, Field(ge=0, le=U32_MAX)], ...] = Field((), strict=False)

    def connections(self, scenario: Scenario) -> int:
        """How many connections a run of ``scenario`` has (ids 0 … n−1, docs/records.md)."""
        t = scenario.topology
        n = t.pairs * (2 if scenario.traffic.separate_connections else 1)
        if t.kind == "mux" and scenario.mux.mode == "mux":
            n += 2 * scenario.mux.trunks  # forward and reverse trunk lanes
        return n


# The tunnel session's largest frame payload by default (crates/proto/src/mux/session.rs,
# the daemons' `limits.max_frame_payload`); tests/test_scenario.py checks it against the
# native module.
MUX_FRAME_PAYLOAD_BYTES = 16384
# thinwan-mux's most trunk lanes (crates/mux/src/config.rs).
MUX_MAX_LANES = 256


class MuxSection(_Section):
    """``[mux]``: the thin-stream tunnel of ``topology.kind = "mux"`` (ignored otherwise)."""

    # "direct": a TCP connection per stream; "mux": the tunnel; the peers users deploy,
    # lab only (:func:`check_simulable`): "ssh", OpenSSH local forwarding, and "yamux",
    # a yamux-multiplexed forwarder, each one connection for every stream (docs/mux.md
    # "OpenSSH as a peer", "yamux as a peer").
    mode: Literal["direct", "mux", "ssh", "yamux"] = "direct"
    # At most MUX_MAX_LANES lanes: thinwan-mux's limit (crates/mux/src/config.rs MAX_LANES,
    # for trunk.connections and trunk.max_connections), so a scenario the simulator runs also runs in the lab.
    trunks: int = Field(1, ge=1, le=MUX_MAX_LANES)
    frame_payload_bytes: int = Field(MUX_FRAME_PAYLOAD_BYTES, ge=512, le=1 << 20)
    # The daemons' `trunk.notsent_lowat` default (crates/mux/src/config.rs).
    notsent_lowat_bytes: int = Field(32768, ge=1, le=U32_MAX)
    # "fixed": `trunks` lanes all run; "adaptive": `trunks` at start, another lane (up to
    # `max_lanes`) while a lane's backlog stays above one RTT (docs/mux.md "Adaptive lanes").
    lanes: Literal["fixed", "adaptive"] = "fixed"
    max_lanes: int = Field(8, ge=1, le=MUX_MAX_LANES)
    # How adaptive lanes are judged (thinwan-mux `trunk.lane_rule`): None (unset) or
    # "backlog", as above; "held": double while over 35 % of the lanes' time a frame is
    # unacknowledged after 1.5 RTTs, halve (down to one) when under 10 % over the last
    # five windows (docs/mux.md "The held rule"). Unset is not hashed into sweep point
    # ids, so the ids of sweeps from before the key existed stay — and so it means the
    # backlog rule they ran, not the daemons' default (held).
    lane_rule: Literal["backlog", "held"] | None = None
    # Unacknowledged bulk bytes ≤ max(64 KiB, 2 × delivery rate × min RTT) (docs/mux.md).
    bulk_limit: bool = False
    # A stream opening while even all lanes stay backlogged goes on its own direct
    # connection; the slack keeps it in the tunnel unless that is expected to cost this
    # much more per message (docs/mux.md "Shedding").
    shed: bool = False
    shed_slack_ms: float = Field(100.0, ge=-60_000, le=60_000)
    # TCP_THIN_LINEAR_TIMEOUTS on the trunk sockets (thinwan-mux `trunk.thin_linear_timeouts`,
    # the simulator's lane connections): a lane with under four segments in flight keeps
    # its retransmission timeout for six retries instead of doubling it (docs/mux.md
    # "How many lanes"). The streams' own connections keep `[tcp]`.
    thin_linear_timeouts: bool = False
    # The trunk sockets' minimum retransmission timeout (thinwan-mux `trunk.rto_min_ms`,
    # Linux TCP_RTO_MIN_US, 5–200 ms: the kernel's range); None keeps tcp.min_rto_ms. A
    # lane carrying one or two thin streams repairs its losses by timeout, so this floor
    # is most of its repair time (docs/mux.md "The lanes' retransmission timeout").
    rto_min_ms: int | None = Field(None, ge=5, le=200)

    @model_validator(mode="after")
    def _max_lanes(self) -> MuxSection:
        if self.lanes == "adaptive" and self.max_lanes < self.trunks:
            raise ValueError(f"max_lanes ({self.max_lanes}) must be ≥ trunks ({self.trunks})")
        return self


# `mux.mode` values only the lab runs, and what the simulator answers to them
# (crates/sim/src/config.rs LAB_ONLY).
LAB_ONLY_MUX_MODES = ("ssh", "yamux")
LAB_ONLY = "runs only in the lab: thinwan lab run SCENARIO / thinwan sweep SWEEP --lab"


def check_simulable(scenario: Scenario, where: str | None = None) -> None:
    """Raise :class:`ScenarioError` (naming ``where``, default the scenario) for a
    scenario only the namespace lab can run: ``mux.mode = "ssh" | "yamux"`` run real
    programs (OpenSSH, the yamux peer), which the simulator has no model of."""
    mode = scenario.mux.mode
    if scenario.topology.kind == "mux" and mode in LAB_ONLY_MUX_MODES:
        raise ScenarioError(f'{where or scenario.name}: mux.mode: "{mode}" {LAB_ONLY}')


class QdsSection(_Section):
    """``[qds]``: the QDS controller that drives the downlink's class scheduler when
    ``queue.discipline = "qds"`` (docs/scenario.md "[qds]", docs/qds.md); ignored otherwise."""

    period_ms: float = Field(100.0, gt=0, le=60_000)
    alpha: float = Field(0.2, ge=0, le=10)
    beta: float = Field(1.0, ge=0, le=10)
    l_floor: float = Field(0.1, gt=0, le=1)
    variant: Literal["delay_only", "bandwidth_aware", "demand_first"] = "bandwidth_aware"
    classifier: Literal["model", "oracle"] = "model"
    # The classifier's model (JSON, docs/qds.md), relative to the scenario file; "" = the
    # model shipped with thinwan (crates/proto/data/qds-classifier.json).
    model_file: str = ""
    classes: int = Field(10, ge=1, le=64)
    class_step_ms: float = Field(10.0, gt=0, le=10_000)
    qt_video_ms: float = Field(50.0, gt=0, le=60_000)
    qt_audio_ms: float = Field(50.0, gt=0, le=60_000)
    qt_data_ms: float = Field(100.0, gt=0, le=60_000)
    qt_interactive_ms: float = Field(50.0, gt=0, le=60_000)
    rtt_samples: int = Field(8, ge=1, le=1024)
    rate_window_ms: float = Field(1000.0, gt=0, le=60_000)

    def qt_ms(self) -> dict[str, float]:
        """QT per controller type (video, audio, data, interactive), ms."""
        return {
            "video": self.qt_video_ms,
            "audio": self.qt_audio_ms,
            "data": self.qt_data_ms,
            "interactive": self.qt_interactive_ms,
        }


class LabSection(_Section):
    """``[lab]``: settings only the namespace lab reads (docs/lab.md); the simulator
    ignores them. ``loss``, ``loss_rev`` and ``jitter`` left unset take the
    ``[topology]`` values; set, they replace them (``loss = 0`` turns loss off)."""

    # Any algorithm the kernel has (bbr, …); unset: tcp.congestion_control.
    congestion_control: str | None = None
    # Linux ECN (net.ipv4.tcp_ecn) in the end namespaces; unset: on when tcp.ecn or
    # queue.ecn is (false with queue.ecn = true is refused: docs/lab.md).
    ecn: bool | None = None
    timestamps: bool = True
    rack: bool = False
    tlp: bool = False
    frto: bool = False
    jitter: str = "none"
    reorder: bool = False
    loss: float | None = Field(None, ge=0, le=1)  # server → client
    loss_rev: float | None = Field(None, ge=0, le=1)  # client → server
    # Gilbert–Elliott loss server → client: [p, r] or [p, r, loss_good, loss_bad].
    ge: tuple[float, float, float, float] | None = Field(None, strict=False)
    access_in_delay: bool = True
    overhead_bytes: int = Field(0, ge=0)
    notsent_lowat: int = Field(0, ge=0)  # 0 = not set
    pcap: bool = False
    port: int = Field(5001, ge=1, le=65535)

    @field_validator("ge", mode="before")
    @classmethod
    def _ge_defaults(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)) and len(v) == 2:
            return (*v, 0.0, 1.0)
        if isinstance(v, (list, tuple)) and len(v) != 4:
            raise ValueError("expected [p, r] or [p, r, loss_good, loss_bad]")
        return v


class Scenario(_Section):
    """A complete, validated scenario: one attribute per TOML section."""

    scenario: ScenarioSection = Field(default_factory=ScenarioSection)
    topology: TopologySection = Field(default_factory=TopologySection)
    queue: QueueSection = Field(default_factory=QueueSection)
    tcp: TcpSection = Field(default_factory=TcpSection)
    traffic: TrafficSection = Field(default_factory=TrafficSection)
    records: RecordsSection = Field(default_factory=RecordsSection)
    mux: MuxSection = Field(default_factory=MuxSection)
    qds: QdsSection = Field(default_factory=QdsSection)
    # Lab-only settings: validated with the rest, but not part of what is simulated, of a
    # run's recorded config or of a sweep point's id (so excluded from model_dump).
    lab: LabSection = Field(default_factory=LabSection, exclude=True)

    @model_validator(mode="after")
    def _mux_topology_needs_thin_streams(self) -> Scenario:
        if self.topology.kind == "mux" and (self.traffic.model == "bulk" or self.traffic.separate_connections):
            raise ValueError(
                'topology.kind: "mux" carries one thin stream per pair: needs traffic.model '
                '"game", "thin-client" or "pcap" and traffic.separate_connections = false'
            )
        return self

    @model_validator(mode="after")
    def _mix_counts_are_the_pairs(self) -> Scenario:
        flows = sum(n for _, n in self.traffic.mix)
        if self.traffic.model == "mix" and flows == 0:
            raise ValueError('traffic.mix: traffic.model = "mix" needs flows, e.g. mix = [["video", 3], ["data", 9]]')
        if self.traffic.model == "mix" and flows != self.topology.pairs:
            raise ValueError(
                f"traffic.mix: its counts add up to {flows} flows but topology.pairs = "
                f"{self.topology.pairs}; they must be equal (one flow per pair)"
            )
        return self

    @model_validator(mode="after")
    def _qds_has_its_classifier(self) -> Scenario:
        if self.qds.model_file:
            self.qds_model()  # read now, so errors come early
        return self

    @model_validator(mode="after")
    def _pcap_conns_exist(self) -> Scenario:
        n = self.records.connections(self)
        missing = [c for c in self.records.pcap_conns if c >= n]
        if missing:
            raise ValueError(
                f"records.pcap_conns: no connection {missing[0]}: this scenario's connections are 0 … {n - 1}"
            )
        size = pcap_bytes(self)
        if size > PCAP_MAX_BYTES:
            raise ValueError(
                f"records.pcap: a run would capture about {size / 1e9:.1f} GB (built in memory, "
                f"{PCAP_RECORD_BYTES} bytes a packet); at most {PCAP_MAX_BYTES / 1e9:.1f} GB: "
                "list fewer connections in records.pcap_conns or shorten scenario.duration_s"
            )
        return self

    @model_validator(mode="after")
    def _capture_has_the_streams(self) -> Scenario:
        if self.traffic.model == "pcap":
            self.trace_writes()  # read (and cache) the capture now, so errors come early
        return self

    @model_validator(mode="after")
    def _rows_fit_the_records(self) -> Scenario:
        e = estimate_run(self)
        for what, rows in (("messages", e.messages), ("connection-trace rows", e.conn_trace_rows)):
            if rows > MAX_ROWS:
                raise ValueError(
                    f"scenario.duration_s: {self.scenario.duration_s:g} s with topology.pairs = "
                    f"{self.topology.pairs} means about {rows:,} {what} per run; at most {MAX_ROWS:,} "
                    "(docs/limits.md)"
                )
        rtt_rows = packet_rtt_rows(self)
        if rtt_rows > MAX_ROWS:
            raise ValueError(
                f"scenario.duration_s: {self.scenario.duration_s:g} s at topology.bottleneck_rate_mbps = "
                f"{self.topology.bottleneck_rate_mbps:g} means up to {rtt_rows:.3g} packet_rtt rows per run; at most "
                f"{MAX_ROWS:,} (docs/limits.md)"
            )
        if e.queue_trace_rows > MAX_ROWS:
            raise ValueError(
                f"records.trace_interval_ms: {self.records.trace_interval_ms:g} ms over "
                f"{self.scenario.duration_s + self.scenario.drain_s:g} s means {e.queue_trace_rows:,} "
                f"queue-trace rows per run; at most {MAX_ROWS:,} (docs/limits.md)"
            )
        return self

    def qds_model(self) -> dict[str, Any] | None:
        """The classifier model of ``qds.model_file`` (its JSON), or None without one."""
        path = self.qds.model_file
        if not path:
            return None
        try:
            model = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"qds.model_file: {path}: {e}") from None
        if not isinstance(model, dict):
            raise ValueError(f"qds.model_file: {path}: expected a JSON object (a classifier model)")
        return model

    def trace_writes(self) -> list[list[tuple[float, int]]]:
        """``traffic.model = "pcap"``: each stream's writes (seconds, bytes)."""
        from .capture import TraceError, stream_writes

        t = self.traffic
        try:
            return stream_writes(t.pcap_file, t.pcap_server_port, self.topology.pairs, self.scenario.duration_s)
        except TraceError as e:
            raise ValueError(f"traffic.pcap_file: {t.pcap_file}: {e}") from None

    @property
    def name(self) -> str:
        """``scenario.name``: the label written into results."""
        return self.scenario.name

    def to_native_json(self) -> str:
        """The complete scenario (every section and key) as the simulator reads it; with
        ``traffic.model = "pcap"`` also the streams' writes (``traffic.trace``), with
        ``qds.model_file`` also the classifier model (``qds.model``)."""
        if self.traffic.model != "pcap" and not self.qds.model_file:
            return self.model_dump_json()
        data = self.model_dump()
        if self.traffic.model == "pcap":
            data["traffic"]["trace"] = self.trace_writes()
        if self.qds.model_file:
            data["qds"]["model"] = self.qds_model()
        return json.dumps(data)

    def to_toml(self) -> str:
        """The complete scenario as a TOML file that loads back to an equal scenario."""
        lines = []
        # TOML has no null: a key left unset (None) is left out, and loads back unset.
        for section, keys in self.model_dump(exclude_none=True).items():
            lines.append(f"[{section}]")
            # JSON scalars (strings, numbers, true/false) are valid TOML values.
            lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
            lines.append("")
        return "\n".join(lines)

    def with_overrides(self, runs: int | None = None, seed: int | None = None) -> Scenario:
        """A copy with ``scenario.runs`` / ``scenario.seed`` replaced where given."""
        values = {"scenario.runs": runs, "scenario.seed": seed}
        return self.with_values({k: v for k, v in values.items() if v is not None}, source="--runs/--seed")

    def with_values(self, values: Mapping[str, Any], source: str = "<overrides>") -> Scenario:
        """A copy with ``{"section.key": value}`` replaced, validated like a file.

        Errors name ``source``: where the new values came from (e.g. a sweep file), since
        the scenario's own file is not at fault.
        """
        data = {**self.model_dump(), "lab": self.lab.model_dump()}
        tcp = {}
        for dotted, value in values.items():
            section, _, key = dotted.partition(".")
            if not key or "." in key:
                raise ScenarioError(f"{source}: {dotted}: expected a 'section.key' name")
            if section == "tcp":
                tcp[key] = value
            else:
                data.setdefault(section, {})[key] = value
        # The overrides are a layer over this scenario's own [tcp] keys (not those its
        # profile filled in: they are filled in again, from the profile the copy has).
        own = {k: v for k, v in data["tcp"].items() if k in self.tcp.model_fields_set}
        data["tcp"] = tcp_profiles.overlay(own, tcp)
        return scenario_from_dict(data, source=source)


# ---------------------------------------------------------------------------------------
# Helpers


def _at_least(v: Any, info: ValidationInfo, other: str) -> Any:
    """Check ``v ≥`` the already validated key ``other`` (skipped if that one failed)."""
    bound = info.data.get(other)
    if bound is not None and v < bound:
        raise ValueError(f"must be ≥ {other} ({bound})")
    return v


def _with_default_name(data: dict[str, Any], default: str) -> dict[str, Any]:
    section = data.get("scenario", {})
    # A non-table [scenario] is left alone so that validation reports it.
    if isinstance(section, Mapping) and "name" not in section:
        data["scenario"] = {**section, "name": default}
    return data


def _describe(error: ValidationError, source: str) -> str:
    """One ``source: dotted.key: problem`` line per validation error."""
    # Whole-scenario checks have no location; their message starts with the key.
    return "\n".join(
        f"{source}: {'.'.join(map(str, e['loc'])) + ': ' if e['loc'] else ''}{_problem(e)}" for e in error.errors()
    )


def _problem(e: Any) -> str:
    kind = e["type"]
    if kind == "extra_forbidden":
        return "unknown section" if len(e["loc"]) == 1 else "unknown key"
    if kind == "model_type":
        return "expected a table ([section] or {...})"
    if kind == "value_error":
        # Our own checks: drop pydantic's "Value error, " prefix.
        return str(e["ctx"]["error"])
    return e["msg"]


# ----- what one run asks for (docs/limits.md; the costs live in .limits) -----------------


def estimate_run(scenario: Scenario) -> RunEstimate:
    """Expected rows and memory of one run of ``scenario`` (simulator)."""
    s, t, r = scenario.scenario, scenario.traffic, scenario.records
    span_s = s.duration_s + s.drain_s
    messages = math.ceil(writes_per_second(scenario) * s.duration_s)
    traces = r.traces
    queue_rows = math.ceil(QUEUE_TRACE_PORTS * span_s / (r.trace_interval_ms / 1000)) if traces else 0
    # The connection trace is sampled on change: at most one row per interval and
    # connection, and in practice about one per message (the table in .limits).
    conns = scenario.topology.pairs * (2 if t.separate_connections else 1)
    conn_rows = 0
    if traces and r.trace_connections == "all":
        conn_rows = min(messages, math.ceil(conns * span_s / (r.trace_interval_ms / 1000)))
    return RunEstimate(messages=messages, conn_trace_rows=conn_rows, queue_trace_rows=queue_rows)


def packet_rtt_rows(scenario: Scenario) -> float:
    """Most rows of the ``packet_rtt`` table in one run (0 when it is not recorded): one per
    full segment the bottleneck can carry in the window (a float: huge rates overflow ints)."""
    t, tcp = scenario.topology, scenario.tcp
    if not (scenario.records.packet_rtt or t.kind == "middlebox"):
        return 0.0
    per_s = t.bottleneck_rate_mbps * 1e6 / 8 / (tcp.mss + tcp.header_bytes)
    return per_s * scenario.scenario.duration_s


# records.pcap: bytes per captured packet (16-byte record header + 40 header bytes, more
# with SACK options; BENCHMARKS.md "Simulator pcap writing"), and the most one run may
# build in memory.
PCAP_RECORD_BYTES = 56
PCAP_MAX_BYTES = 4 << 30


def pcap_bytes(scenario: Scenario) -> float:
    """About how large the ``records.pcap`` file of one run is (0 without one): a full
    segment and an ACK per segment the bottleneck carries, over the whole run, for the
    captured share of the connections (a float: huge rates overflow ints)."""
    r, t, tcp = scenario.records, scenario.topology, scenario.tcp
    if r.pcap == "none":
        return 0.0
    per_s = t.bottleneck_rate_mbps * 1e6 / 8 / (tcp.mss + tcp.header_bytes)
    packets = 2 * per_s * (scenario.scenario.duration_s + scenario.scenario.drain_s)
    share = len(set(r.pcap_conns)) / r.connections(scenario) if r.pcap_conns else 1.0
    return packets * share * PCAP_RECORD_BYTES


def writes_per_second(scenario: Scenario) -> float:
    """Expected writes per second of all sources together (the traffic model's mean rate)."""
    t, topo, tcp = scenario.traffic, scenario.topology, scenario.tcp
    pairs = topo.pairs
    if t.model == "game":
        # docs/model.md "Game traffic": inter-arrival mean 632 ms.
        return pairs / 0.632
    if t.model == "bulk":
        # A greedy sender writes what the bottleneck carries: one segment per write at most.
        return topo.bottleneck_rate_mbps * 1e6 / 8 / (tcp.mss + tcp.header_bytes)
    if t.model == "pcap":
        writes = sum(len(w) for w in scenario.trace_writes())
        return writes / scenario.scenario.duration_s
    if t.model in ("video", "data"):
        return pairs * _app_writes_per_second(t, t.model)
    if t.model == "mix":
        return sum(n * _app_writes_per_second(t, m) for m, n in t.mix)
    return pairs * _thin_client_writes_per_second(t)


def _app_writes_per_second(t: TrafficSection, model: str) -> float:
    """One pair's mean writes per second under ``model`` (docs/model.md)."""
    if model == "video":
        return t.video_fps  # one write per frame
    if model == "data":
        return t.data_rate_mbps * 1e6 / 8 / (t.data_object_kb * 1e3)  # one write per object
    if model == "game":
        return 1 / 0.632
    return _thin_client_writes_per_second(t)


def _thin_client_writes_per_second(t: TrafficSection) -> float:
    """One thin-client source's mean writes per second."""
    # Thin-client: the two-state Markov chain of Ogawa §1 (docs/sources.md). Each step
    # is an interactive write or a bulk block of bulk_packets_mean writes; its gap
    # depends on the pair of states it joins.
    a, b = t.p_interactive_to_bulk, t.p_bulk_to_interactive
    if a + b == 0:
        pi_i = 1.0  # a source that never changes state stays in its first (interactive)
    else:
        pi_i = b / (a + b)
    pi_b = 1 - pi_i
    gap = pi_i * ((1 - a) * t.gap_ii_s + a * t.gap_ib_s) + pi_b * (b * t.gap_bi_s + (1 - b) * t.gap_bb_s)
    block = t.bulk_packets_mean * t.intra_bulk_gap_ms / 1000
    writes_per_step = pi_i + pi_b * t.bulk_packets_mean
    return writes_per_step / (gap + pi_b * block)

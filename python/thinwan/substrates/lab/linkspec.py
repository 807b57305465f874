"""What a lab is made of: link settings per direction, TCP settings per namespace, and
the lab-only options, derived from a scenario (docs/lab.md lists every mapping).

The scenario's dumbbell becomes one emulated link: the bottleneck's rate and queue, and
its one-way delay plus both access links' delays (the lab has no separate access
links). Linux cannot honour every ``[tcp]`` key; :func:`tcp_settings` says which ones
it approximates or ignores, and those notes travel into the run's metadata.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from typing import Any

from ...config.files import ScenarioError
from ...config.scenario import LabSection, QueueSection, Scenario
from ..binaries import find_binary

__all__ = [
    "DirLink",
    "LinkSpec",
    "TcpSettings",
    "LabSpec",
    "lab_spec",
    "qds_keys",
    "middlebox_client_delays",
    "last_hop_link",
    "LinkCheckError",
    "check_link_args",
]


# The scenario model owns the ``[queue]`` defaults (``QueueSection``, mirroring the core's
# ``QueueKeys``), not copies here.
_Q = QueueSection.model_fields

# The ``[queue]`` keys DirLink carries under their own names (the rest keep the
# QueueSection name: ``limit_packets`` is ``queue_packets`` here, ``limit_bytes``
# ``queue_bytes``).
_QUEUE_KEYS = (
    "discipline",
    "priority_classifier",
    "classifier_gap_ms",
    "fq_codel_target_ms",
    "fq_codel_interval_ms",
    "fq_codel_quantum_bytes",
    "fq_codel_flows",
    "fq_codel_hash_seed",
    "class_quantum_bytes",
    "class_rate_shares",
    "class_ceil_shares",
    "class_interactive",
    "class_flows",
    "class_codel",
    "class_change",
    "ecn",
)


@dataclass(frozen=True)
class DirLink:
    """One direction of the emulated link (``thinwan-link`` JSON, docs/lab.md); every
    ``[queue]`` key travels (docs/scenario.md has their meaning)."""

    rate_bps: int = 0  # 0 = unshaped
    delay_ms: float = 0.0
    jitter: str = "none"
    reorder: bool = False
    loss: float = 0.0
    ge: tuple[float, float, float, float] | None = None  # p, r, loss_good, loss_bad
    queue_packets: int = 1000
    queue_bytes: int = 0
    overhead_bytes: int = 0
    discipline: str = "droptail"  # priority | fq_codel | classes | qds
    priority_classifier: str = "label"  # priority: "label" (IP DSCP ≠ 0) or "gap" (per 5-tuple)
    classifier_gap_ms: float = _Q["classifier_gap_ms"].default
    fq_codel_target_ms: float = _Q["fq_codel_target_ms"].default
    fq_codel_interval_ms: float = _Q["fq_codel_interval_ms"].default
    fq_codel_quantum_bytes: int = _Q["fq_codel_quantum_bytes"].default
    fq_codel_flows: int = _Q["fq_codel_flows"].default
    fq_codel_hash_seed: int = _Q["fq_codel_hash_seed"].default
    class_quantum_bytes: int = _Q["class_quantum_bytes"].default
    class_rate_shares: tuple[float, ...] = ()
    class_ceil_shares: tuple[float, ...] = ()
    class_interactive: int = _Q["class_interactive"].default
    class_flows: tuple[tuple[int, ...], ...] = ()
    class_codel: bool = _Q["class_codel"].default
    class_change: str = _Q["class_change"].default  # "leave" (Linux HTB) | "move"
    ecn: bool = _Q["ecn"].default  # CoDel marks ECT packets CE instead of dropping them

    @classmethod
    def queue_of(cls, q: QueueSection) -> dict[str, Any]:
        """The DirLink fields of a scenario's ``[queue]`` section (every key)."""
        return {
            "queue_packets": q.limit_packets,
            "queue_bytes": q.limit_bytes,
            **{k: getattr(q, k) for k in _QUEUE_KEYS},
        }

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "rate_bps": int(self.rate_bps),
            "delay_ms": float(self.delay_ms),
            "jitter": self.jitter,
            "reorder": self.reorder,
            "loss": float(self.loss),
            "queue": {
                "limit_packets": self.queue_packets,
                "limit_bytes": self.queue_bytes,
                **{k: _json_value(getattr(self, k)) for k in _QUEUE_KEYS},
            },
            "overhead_bytes": self.overhead_bytes,
        }
        if self.ge is not None:
            p, r, lg, lb = self.ge
            d["ge"] = {"p": p, "r": r, "loss_good": lg, "loss_bad": lb}
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DirLink:
        """The inverse of :meth:`to_json` (e.g. ``thinwan-link --check``'s resolved config,
        which always has every key: a missing one is an error, not a default)."""
        q = d["queue"]
        ge = d.get("ge")
        return cls(
            rate_bps=int(d["rate_bps"]),
            delay_ms=float(d["delay_ms"]),
            jitter=str(d["jitter"]),
            reorder=bool(d["reorder"]),
            loss=float(d["loss"]),
            ge=(ge["p"], ge["r"], ge["loss_good"], ge["loss_bad"]) if ge else None,
            queue_packets=int(q["limit_packets"]),
            queue_bytes=int(q["limit_bytes"]),
            overhead_bytes=int(d["overhead_bytes"]),
            discipline=str(q["discipline"]),
            priority_classifier=str(q["priority_classifier"]),
            classifier_gap_ms=float(q["classifier_gap_ms"]),
            fq_codel_target_ms=float(q["fq_codel_target_ms"]),
            fq_codel_interval_ms=float(q["fq_codel_interval_ms"]),
            fq_codel_quantum_bytes=int(q["fq_codel_quantum_bytes"]),
            fq_codel_flows=int(q["fq_codel_flows"]),
            fq_codel_hash_seed=int(q["fq_codel_hash_seed"]),
            class_quantum_bytes=int(q["class_quantum_bytes"]),
            class_rate_shares=tuple(float(x) for x in q["class_rate_shares"]),
            class_ceil_shares=tuple(float(x) for x in q["class_ceil_shares"]),
            class_interactive=int(q["class_interactive"]),
            class_flows=tuple(tuple(int(f) for f in c) for c in q["class_flows"]),
            class_codel=bool(q["class_codel"]),
            class_change=str(q["class_change"]),
            ecn=bool(q["ecn"]),
        )


def _json_value(v: Any) -> Any:
    """Tuples (of tuples) as JSON lists; floats stay floats."""
    if isinstance(v, tuple):
        return [_json_value(x) for x in v]
    return v


@dataclass(frozen=True)
class LinkSpec:
    """Both directions plus the seed of their loss/jitter streams, and the QDS control
    loop's keys (``qds``: thinwan-link's ``qds`` object, docs/lab.md "QDS") when ``fwd``
    runs the ``qds`` discipline."""

    fwd: DirLink = field(default_factory=DirLink)  # server → client
    rev: DirLink = field(default_factory=DirLink)  # client → server
    seed: int = 1
    qds: dict[str, Any] | None = None
    #: thinwan-link's ``pairs`` object (docs/lab.md "Pairs"): each pair's fixed server
    #: port, its client's delay and the oracle's traffic; None = every packet alike.
    pairs: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"seed": self.seed, "fwd": self.fwd.to_json(), "rev": self.rev.to_json()}
        if self.qds is not None:
            d["qds"] = self.qds
        if self.pairs is not None:
            d["pairs"] = self.pairs
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LinkSpec:
        """The inverse of :meth:`to_json` (``thinwan-link --check`` always writes ``qds``;
        it is kept only where ``fwd`` runs the ``qds`` discipline)."""
        fwd = DirLink.from_json(d["fwd"])
        qds = d.get("qds") if fwd.discipline == "qds" else None
        return cls(fwd=fwd, rev=DirLink.from_json(d["rev"]), seed=int(d["seed"]), qds=qds, pairs=d.get("pairs"))

    @classmethod
    def symmetric(cls, seed: int = 1, **kwargs: Any) -> LinkSpec:
        d = DirLink(**kwargs)
        return cls(fwd=d, rev=d, seed=seed)


# The per-namespace minimum RTO (Linux ≥ 6.11); older kernels take it per route.
RTO_MIN_SYSCTL = "net.ipv4.tcp_rto_min_us"


@dataclass(frozen=True)
class TcpSettings:
    """Per-namespace TCP settings (both namespaces get the same)."""

    congestion_control: str = "reno"
    sack: bool = True
    slow_start_after_idle: bool = True
    ecn: bool = False
    timestamps: bool = True
    rack: bool = False  # net.ipv4.tcp_recovery (RACK-TLP loss detection)
    tlp: bool = False  # net.ipv4.tcp_early_retrans = 3 (tail loss probe)
    frto: bool = False
    min_rto_ms: float = 200.0
    max_rto_ms: float = 120000.0
    initcwnd: int = 10
    quickack: bool = False  # route option: no delayed ACKs
    reordering: int = 3  # initial dupthresh
    rmem_max: int = 6291456
    wmem_max: int = 4194304
    mtu: int = 1500

    def sysctls(self) -> dict[str, str]:
        """sysctl key → value, applied in each namespace."""
        return {
            "net.ipv4.tcp_congestion_control": self.congestion_control,
            "net.ipv4.tcp_sack": str(int(self.sack)),
            "net.ipv4.tcp_dsack": str(int(self.sack)),
            "net.ipv4.tcp_slow_start_after_idle": str(int(self.slow_start_after_idle)),
            "net.ipv4.tcp_ecn": "1" if self.ecn else "0",
            "net.ipv4.tcp_timestamps": str(int(self.timestamps)),
            "net.ipv4.tcp_recovery": "1" if self.rack else "0",
            "net.ipv4.tcp_early_retrans": "3" if self.tlp else "0",
            "net.ipv4.tcp_frto": "2" if self.frto else "0",
            RTO_MIN_SYSCTL: str(int(self.min_rto_ms * 1000)),
            "net.ipv4.tcp_rto_max_ms": str(int(self.max_rto_ms)),
            "net.ipv4.tcp_reordering": str(self.reordering),
            # The initial buffer never above the maximum, so a small maximum clamps
            # every socket from its first byte (the desktop's 16 KB windows).
            "net.ipv4.tcp_rmem": f"4096 {min(131072, self.rmem_max)} {self.rmem_max}",
            "net.ipv4.tcp_wmem": f"4096 {min(16384, self.wmem_max)} {self.wmem_max}",
            "net.ipv4.tcp_no_metrics_save": "1",
        }

    def route_options(self, rto_min_sysctl: bool) -> list[str]:
        """Options of the route to the other side (``ip route replace … OPTIONS``).
        ``rto_min_sysctl``: the kernel has ``net.ipv4.tcp_rto_min_us`` (Linux ≥ 6.11)."""
        # congctl as well as the sysctl: a namespace's default may only be an algorithm
        # of the root namespace's tcp_allowed_congestion_control (EPERM otherwise), the
        # per-route choice has no such limit.
        opts = ["initcwnd", str(self.initcwnd), "congctl", self.congestion_control]
        # The route's rto_min is a locked metric, which overrides a socket's own
        # TCP_RTO_MIN_US (Linux tcp_rto_min()): where the sysctl sets the same floor,
        # leave sockets free to set theirs, as on a host without such a route (the
        # tunnel's `mux.rto_min_ms`).
        if not rto_min_sysctl:
            opts += ["rto_min", f"{int(self.min_rto_ms)}ms"]
        if self.quickack:
            opts += ["quickack", "1"]
        return opts


@dataclass(frozen=True)
class LabSpec:
    """Everything needed to bring a lab up."""

    link: LinkSpec = field(default_factory=LinkSpec)
    tcp: TcpSettings = field(default_factory=TcpSettings)
    notes: tuple[str, ...] = ()  # scenario options the kernel cannot honour exactly


def lab_spec(scenario: Scenario, run: int = 0, opts: LabSection | None = None) -> LabSpec:
    """The lab for run ``run`` of ``scenario`` (seed ``scenario.seed + run``).

    The link is the bottleneck (the WAN of ``topology.kind = "mux"``): its loss both ways
    and jitter come from ``[topology]`` unless the ``[lab]`` section sets them (``opts``:
    another ``[lab]`` section than the scenario's own).
    """
    opts = scenario.lab if opts is None else opts
    t, q = scenario.topology, scenario.queue
    if q.discipline == "qds" and q.qds_order == "deadline":
        # thinwan-link's QDS loop does not hand the queue each flow's slack, so the
        # deadline order would silently run as per-flow FIFO there.
        raise ScenarioError(
            'queue.qds_order = "deadline" runs in the simulator only (thinwan-link does not '
            'compute the per-flow slack; docs/qds.md "Deadline order"): use "drr" in the lab'
        )
    if q.ecn and opts.ecn is False:
        # thinwan-link marks only ECN-capable packets, and Linux sends those only with
        # net.ipv4.tcp_ecn: CoDel would drop every packet the scenario asks it to mark.
        raise ScenarioError(
            "queue.ecn = true and [lab] ecn = false disagree: CoDel marks CE only in ECN-capable "
            "packets, and [lab] ecn = false leaves Linux's TCP without ECN (net.ipv4.tcp_ecn = 0), "
            "so every mark would be a drop; leave [lab] ecn unset (it follows queue.ecn and tcp.ecn) "
            "or set queue.ecn = false (docs/lab.md)"
        )
    delay = t.bottleneck_delay_ms + (2 * t.access_delay_ms if opts.access_in_delay else 0.0)
    notes: list[str] = []
    pairs = None
    if t.kind == "middlebox":
        # servers — access link — middlebox ══ downlink ══ client link: one way, the
        # servers' access delay and the downlink's; each client's own delay is added per
        # pair by thinwan-link (``pairs``, keyed by the pump's fixed ports; docs/lab.md).
        clients = middlebox_client_delays(scenario, run)
        delay = t.bottleneck_delay_ms + (t.access_delay_ms if opts.access_in_delay else 0.0)
        pairs = {"server_port_base": PAIR_PORT_BASE, "count": t.pairs}
        if clients["delays_ms"]:
            pairs["client_delays_ms"] = clients["delays_ms"]
        else:
            delay += clients["applied_ms"]
            notes.append(
                f"topology.kind=middlebox: no native module to draw the clients' delays, so every client gets "
                f"{clients['applied_ms']:.3f} ms ({clients['source']}) (docs/lab.md)"
            )
        if q.discipline == "qds":
            pairs["traffic"] = traffic_json(scenario)
        notes.append("topology.kind=middlebox: the servers are one server namespace, the clients one client namespace")
    jitter = opts.jitter
    if jitter == "none" and t.bottleneck_jitter_pct:
        jitter = f"uniform:{t.bottleneck_jitter_pct:g}%"  # as the simulator: ± pct of the delay, no reordering
    common = dict(
        rate_bps=int(round(t.bottleneck_rate_mbps * 1e6)),
        delay_ms=delay,
        jitter=jitter,
        reorder=opts.reorder,
        overhead_bytes=opts.overhead_bytes,
    )
    fwd = DirLink(
        **common,
        **DirLink.queue_of(q),
        loss=t.bottleneck_loss if opts.loss is None else opts.loss,
        ge=opts.ge,
    )
    # As the simulator: the scenario's discipline on the data direction, the ACK
    # direction a FIFO with the same limits.
    rev = DirLink(
        **common,
        queue_packets=q.limit_packets,
        queue_bytes=q.limit_bytes,
        loss=t.bottleneck_loss_rev if opts.loss_rev is None else opts.loss_rev,
    )
    qds = qds_keys(scenario) if q.discipline == "qds" else None
    link = LinkSpec(fwd=fwd, rev=rev, seed=scenario.scenario.seed + run, qds=qds, pairs=pairs)
    tcp, tcp_notes = tcp_settings(scenario, opts)
    notes += tcp_notes
    if q.discipline == "priority" and q.priority_classifier == "label":
        notes.append(
            "queue.priority_classifier=label: the emulator reads the IP DSCP (nonzero = interactive); the pump marks "
            "interactive writes with CS4 via IP_TOS, which Linux applies per transmitted segment, so coalesced or "
            "queued data may carry the other kind's mark (docs/lab.md)"
        )
    return LabSpec(link=link, tcp=tcp, notes=tuple(notes))


# Pair i's connection binds server port PAIR_PORT_BASE + i in the lab's middlebox runs
# (``thinwan-net pump --local-port-base``), below the namespace's ephemeral range
# (32768–60999), so thinwan-link knows each pair by port (docs/lab.md "Pairs").
PAIR_PORT_BASE = 20000


def traffic_json(scenario: Scenario) -> dict[str, Any]:
    """The pump's ``traffic.json``: the scenario's [traffic] keys plus the MSS, and with
    ``traffic.model = "pcap"`` each stream's writes from the capture (as the simulator's)."""
    traffic = {**scenario.traffic.model_dump(), "mss": scenario.tcp.mss}
    if scenario.traffic.model == "pcap":
        traffic["trace"] = scenario.trace_writes()
    return traffic


def middlebox_client_delays(scenario: Scenario, run: int = 0) -> dict[str, Any]:
    """The clients' base one-way delays of run ``run`` of a middlebox scenario: the
    core's draws (``_native.client_delays_ms``, ``thinwan_proto::clients``, same seed as
    the simulator), which thinwan-link adds per pair, and their mean (``applied_ms``,
    what one delay for all would be). Without the native module, the configured
    ``client_delay_mean_ms`` for everyone."""
    t = scenario.topology
    try:
        from ... import _native

        delays = [float(d) for d in _native.client_delays_ms(scenario.to_native_json(), run)]
    except (ImportError, AttributeError):
        return {"delays_ms": [], "applied_ms": t.client_delay_mean_ms, "source": "topology.client_delay_mean_ms"}
    applied = sum(delays) / len(delays) if delays else t.client_delay_mean_ms
    return {
        "delays_ms": delays,
        "applied_ms": applied,
        "source": "the core's draws (thinwan_proto::clients), as the simulator's",
    }


def qds_keys(scenario: Scenario) -> dict[str, Any]:
    """thinwan-link's ``qds`` object for ``scenario``: every ``[qds]`` key as is, the
    classifier's model inline (read once, here: thinwan-link does not see the scenario's
    directory). ``classifier = "oracle"`` takes each flow's true type from the pairs'
    traffic (``pairs.traffic``, by the pump's fixed ports), as the simulator's oracle."""
    q = scenario.qds
    keys = q.model_dump()
    keys.pop("model_file", None)
    model = scenario.qds_model()
    if model is not None:
        keys["model"] = model
    # No model: thinwan-link uses the core's shipped classifier, as the simulator does.
    return keys


def last_hop_link(scenario: Scenario, run: int = 0) -> LinkSpec:
    """The clean last hop of ``topology.kind = "mux"`` (edge → clients): its rate and
    delay both ways, the scenario's queue limits, no loss or jitter."""
    t, q = scenario.topology, scenario.queue
    d = DirLink(
        rate_bps=int(round(t.last_hop_rate_mbps * 1e6)),
        delay_ms=t.last_hop_delay_ms,
        queue_packets=q.limit_packets,
        queue_bytes=q.limit_bytes,
    )
    return LinkSpec(fwd=d, rev=d, seed=scenario.scenario.seed + run)


def tcp_settings(scenario: Scenario, opts: LabSection) -> tuple[TcpSettings, list[str]]:
    """Linux settings for the scenario's ``[tcp]`` section, and what Linux cannot honour."""
    tcp = scenario.tcp
    notes = []
    max_rto = min(max(tcp.max_rto_ms, 1000.0), 120000.0)
    if max_rto != tcp.max_rto_ms:
        notes.append(f"tcp.max_rto_ms={tcp.max_rto_ms:g}: Linux allows 1000..120000 ms; using {max_rto:g}")
    if tcp.initial_rto_ms != 1000.0:
        notes.append(f"tcp.initial_rto_ms={tcp.initial_rto_ms:g}: Linux's initial RTO is fixed at 1000 ms")
    if tcp.clock_granularity_ms != 1.0:
        notes.append("tcp.clock_granularity_ms: Linux uses its own timer granularity (not settable)")
    if tcp.delayed_ack and tcp.delayed_ack_ms != 40.0:
        notes.append(
            f"tcp.delayed_ack_ms={tcp.delayed_ack_ms:g}: Linux's delayed-ACK timer is adaptive (40–200 ms), not settable"
        )
    if not tcp.sack and tcp.recovery == "reno":
        notes.append("tcp.recovery=reno: Linux always uses NewReno recovery without SACK")
    if tcp.header_bytes != (52 if opts.timestamps else 40):
        notes.append(
            f"tcp.header_bytes={tcp.header_bytes}: Linux sends {52 if opts.timestamps else 40} header bytes per segment "
            f"(timestamps {'on' if opts.timestamps else 'off'}) plus SACK blocks when present"
        )
    if tcp.rto_formula != "linux":
        notes.append(
            f'tcp.rto_formula={tcp.rto_formula}: Linux puts rto_min on the variance term (rto_formula = "linux")'
        )
    if tcp.thin_linear_timeouts:
        notes.append("tcp.thin_linear_timeouts: not set in the lab (Linux: per socket, TCP_THIN_LINEAR_TIMEOUTS)")
    if tcp.nagle:
        notes.append("tcp.nagle: honoured by the pump (no TCP_NODELAY); other programs choose for themselves")
    if tcp.send_buffer_bytes:
        notes.append("tcp.send_buffer_bytes: approximated by net.ipv4.tcp_wmem's maximum (Linux counts overhead too)")
    elif not tcp.send_buffer_autotune:
        notes.append(
            "tcp.send_buffer_autotune=false: Linux autotunes the send buffer (tcp_sndbuf_expand), "
            "where the simulator's is unlimited"
        )
    notes.append("tcp.rwnd_bytes: approximated by net.ipv4.tcp_rmem's maximum (2 × rwnd; Linux advertises part of it)")
    if tcp.cwnd_unit != "packets":
        notes.append(f'tcp.cwnd_unit={tcp.cwnd_unit}: Linux counts cwnd in packets (cwnd_unit = "packets")')
    # What Linux does whatever the scenario says (docs/scenario.md "Profiles", linux).
    if tcp.sack and not tcp.dsack:
        notes.append("tcp.dsack=false: Linux reports DSACKs whenever SACK is on (net.ipv4.tcp_dsack follows tcp.sack)")
    if tcp.sack and not tcp.prr:
        notes.append("tcp.prr=false: Linux reduces the window by PRR in every recovery (tcp_cwnd_reduction)")
    if tcp.rack_tlp and tcp.rack_reo_wnd == "static":
        notes.append('tcp.rack_reo_wnd=static: Linux adapts RACK\'s reordering window (rack_reo_wnd = "adaptive")')
    if tcp.rack_bands:
        notes.append("tcp.rack_bands: not in Linux (RACK judges every segment against the latest delivered)")
    if tcp.delayed_ack and not tcp.quick_ack:
        notes.append("tcp.quick_ack=false: Linux's receivers ACK every segment in quick-ACK mode (tcp_incr_quickack)")
    # Linux ECN in the end namespaces: [lab] ecn when set, else on when the scenario asks
    # for ECN anywhere (as [lab] congestion_control follows tcp.congestion_control).
    ecn = opts.ecn if opts.ecn is not None else tcp.ecn or scenario.queue.ecn
    if ecn and opts.ecn is None and not tcp.ecn:
        notes.append(
            "queue.ecn without tcp.ecn: Linux ECN is on in the lab (net.ipv4.tcp_ecn = 1) so CoDel can mark; "
            "the simulator's TCP without tcp.ecn sends Not-ECT packets, which its CoDel drops"
        )
    settings = TcpSettings(
        congestion_control=opts.congestion_control or tcp.congestion_control,
        sack=tcp.sack,
        slow_start_after_idle=tcp.slow_start_restart,
        ecn=ecn,
        timestamps=opts.timestamps,
        rack=opts.rack or tcp.rack_tlp,
        tlp=opts.tlp or tcp.rack_tlp,
        frto=opts.frto,
        min_rto_ms=tcp.min_rto_ms,
        max_rto_ms=max_rto,
        initcwnd=tcp.initial_cwnd_segments,
        quickack=not tcp.delayed_ack,
        reordering=tcp.dupthresh,
        rmem_max=max(2 * tcp.rwnd_bytes, 131072),
        wmem_max=max(tcp.send_buffer_bytes, 4096) if tcp.send_buffer_bytes else 64 << 20,
        mtu=tcp.mss + 40,
    )
    return settings, notes


class LinkCheckError(Exception):
    """``thinwan-link --check`` refused a link option; the message is its own
    (``--FLAG: what is wrong``)."""


def check_link_args(config: LinkSpec, args: list[str]) -> LinkSpec:
    """The link ``thinwan-link`` would emulate given ``--config`` (``config``) and the
    link options ``args``, resolved by ``thinwan-link --check`` (which parses every link
    flag: thinwan does not parse them a second time). Raises :class:`LinkCheckError`
    for a bad option.
    """
    import tempfile

    binary = find_binary("thinwan-link")
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="thinwan-link-check-") as f:
        json.dump(config.to_json(), f)
        f.flush()
        done = subprocess.run(
            [str(binary), "--check", "--config", f.name, *args], capture_output=True, text=True, timeout=30
        )
    if done.returncode == 0:
        return LinkSpec.from_json(json.loads(done.stdout.strip().splitlines()[-1]))
    message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
    raise LinkCheckError(message.removeprefix("thinwan-link: ").removeprefix("error: "))

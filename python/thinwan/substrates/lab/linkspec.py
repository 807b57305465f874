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

from ...config.scenario import LabSection, QueueSection, Scenario
from ..binaries import find_binary

__all__ = [
    "DirLink",
    "LinkSpec",
    "TcpSettings",
    "LabSpec",
    "lab_spec",
    "last_hop_link",
    "LinkCheckError",
    "check_link_args",
]


@dataclass(frozen=True)
class DirLink:
    """One direction of the emulated link (``thinwan-link`` JSON, docs/lab.md)."""

    rate_bps: int = 0  # 0 = unshaped
    delay_ms: float = 0.0
    jitter: str = "none"
    reorder: bool = False
    loss: float = 0.0
    ge: tuple[float, float, float, float] | None = None  # p, r, loss_good, loss_bad
    queue_packets: int = 1000
    queue_bytes: int = 0
    overhead_bytes: int = 0
    discipline: str = "droptail"  # or "priority"
    priority_classifier: str = "label"  # priority: "label" (IP DSCP ≠ 0) or "gap" (per 5-tuple)
    # The scenario model owns the default (``[queue] classifier_gap_ms``), not a copy here.
    classifier_gap_ms: float = QueueSection.model_fields["classifier_gap_ms"].default

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "rate_bps": int(self.rate_bps),
            "delay_ms": float(self.delay_ms),
            "jitter": self.jitter,
            "reorder": self.reorder,
            "loss": float(self.loss),
            "queue": {
                "discipline": self.discipline,
                "limit_packets": self.queue_packets,
                "limit_bytes": self.queue_bytes,
                "priority_classifier": self.priority_classifier,
                "classifier_gap_ms": float(self.classifier_gap_ms),
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
        )


@dataclass(frozen=True)
class LinkSpec:
    """Both directions plus the seed of their loss/jitter streams."""

    fwd: DirLink = field(default_factory=DirLink)  # server → client
    rev: DirLink = field(default_factory=DirLink)  # client → server
    seed: int = 1

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "fwd": self.fwd.to_json(), "rev": self.rev.to_json()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LinkSpec:
        """The inverse of :meth:`to_json`."""
        return cls(fwd=DirLink.from_json(d["fwd"]), rev=DirLink.from_json(d["rev"]), seed=int(d["seed"]))

    @classmethod
    def symmetric(cls, seed: int = 1, **kwargs: Any) -> LinkSpec:
        d = DirLink(**kwargs)
        return cls(fwd=d, rev=d, seed=seed)


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
            "net.ipv4.tcp_rto_min_us": str(int(self.min_rto_ms * 1000)),
            "net.ipv4.tcp_rto_max_ms": str(int(self.max_rto_ms)),
            "net.ipv4.tcp_reordering": str(self.reordering),
            # The initial buffer never above the maximum, so a small maximum clamps
            # every socket from its first byte (the desktop's 16 KB windows).
            "net.ipv4.tcp_rmem": f"4096 {min(131072, self.rmem_max)} {self.rmem_max}",
            "net.ipv4.tcp_wmem": f"4096 {min(16384, self.wmem_max)} {self.wmem_max}",
            "net.ipv4.tcp_no_metrics_save": "1",
        }

    def route_options(self) -> list[str]:
        """Options of the route to the other side (``ip route replace … OPTIONS``)."""
        # congctl as well as the sysctl: a namespace's default may only be an algorithm
        # of the root namespace's tcp_allowed_congestion_control (EPERM otherwise), the
        # per-route choice has no such limit.
        opts = [
            "initcwnd",
            str(self.initcwnd),
            "rto_min",
            f"{int(self.min_rto_ms)}ms",
            "congctl",
            self.congestion_control,
        ]
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
    delay = t.bottleneck_delay_ms + (2 * t.access_delay_ms if opts.access_in_delay else 0.0)
    jitter = opts.jitter
    if jitter == "none" and t.bottleneck_jitter_pct:
        jitter = f"uniform:{t.bottleneck_jitter_pct:g}%"  # as the simulator: ± pct of the delay, no reordering
    common = dict(
        rate_bps=int(round(t.bottleneck_rate_mbps * 1e6)),
        delay_ms=delay,
        jitter=jitter,
        reorder=opts.reorder,
        queue_packets=q.limit_packets,
        queue_bytes=q.limit_bytes,
        overhead_bytes=opts.overhead_bytes,
        discipline=q.discipline,
        priority_classifier=q.priority_classifier,
        classifier_gap_ms=q.classifier_gap_ms,
    )
    link = LinkSpec(
        fwd=DirLink(**common, loss=t.bottleneck_loss if opts.loss is None else opts.loss, ge=opts.ge),
        rev=DirLink(**common, loss=t.bottleneck_loss_rev if opts.loss_rev is None else opts.loss_rev),
        seed=scenario.scenario.seed + run,
    )
    tcp, notes = tcp_settings(scenario, opts)
    if q.discipline == "priority" and q.priority_classifier == "label":
        notes.append(
            "queue.priority_classifier=label: the emulator reads the IP DSCP (nonzero = interactive); the pump marks "
            "interactive writes with CS4 via IP_TOS, which Linux applies per transmitted segment, so coalesced or "
            "queued data may carry the other kind's mark (docs/lab.md)"
        )
    return LabSpec(link=link, tcp=tcp, notes=tuple(notes))


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
    notes.append("tcp.rwnd_bytes: approximated by net.ipv4.tcp_rmem's maximum (2 × rwnd; Linux advertises part of it)")
    settings = TcpSettings(
        congestion_control=opts.congestion_control,
        sack=tcp.sack,
        slow_start_after_idle=tcp.slow_start_restart,
        ecn=opts.ecn,
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

"""The QDS middlebox in the lab: the three-namespace chain with real Linux HTB on the
middle namespace's downlink, driven by the ``thinwan-qds`` daemon.

::

    ┌ <id>-srv ────────┐  WAN link   ┌ <id>-mid ─────────────────────┐ last hop  ┌ <id>-cli ──┐
    │ 198.18.1.1 <id>-s│◀═thinwan═══▶│ <id>-w (uplink)  thinwan-qds  │◀═thinwan═▶│ <id>-c     │
    │ pumps (listen)   │ -link, clean│ <id>-l (downlink): HTB egress │ -link     │ 198.18.2.1 │
    │                  │             │   1:1 → 1:10 … (u32 per flow) │ client    │ sinks      │
    └──────────────────┘             └───────────────────────────────┘ delay     └────────────┘

The downlink's rate is HTB's (the last-hop emulator is unshaped and only adds the
client-side delay), so the shaping under test is the kernel's. The pumps listen on
fixed server ports in ``<id>-srv`` and the sinks connect from ``<id>-cli``, so a flow's
server end is ``198.18.1.1:port`` — what the daemon's tables match on.

:class:`QdsDaemon` writes the daemon's TOML (docs/qds-lab.md) from :class:`QdsSettings`,
starts ``thinwan-qds`` in the middle namespace, waits for its ready line and stops it
with SIGTERM (the daemon restores the original qdisc itself).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..binaries import find_binary
from .chain import SERVER_NET, Chain
from .labrun import wait_line
from .linkspec import DirLink, LinkSpec, TcpSettings
from .netns import LabError
from .topology import SERVER_ADDR

__all__ = [
    "QdsSettings",
    "QdsDaemon",
    "middlebox_chain",
    "daemon_toml",
    "tc_classes",
    "tc_filters",
    "tc_rate_bits",
    "start_bulk_flow",
    "ip_key",
]

READY_S = 10.0
STOP_S = 10.0


@dataclass(frozen=True)
class QdsSettings:
    """What the lab's daemon is told (the TOML keys of docs/qds-lab.md)."""

    capacity_mbps: float = 20.0
    period_ms: int = 100
    controller: str = "static"  # or "qds"
    #: ``controller = "static"``: class rates (Mbit/s) and server port → class.
    static_rates_mbps: tuple[float, ...] = (10.0, 10.0)
    static_ports: dict[int, int] = field(default_factory=dict)
    #: ``controller = "qds"``: server port → application type (oracle mode), else the model.
    oracle_ports: dict[int, str] = field(default_factory=dict)
    alpha: float = 0.2
    beta: float = 1.0
    variant: str = "bandwidth_aware"
    metrics: str | None = None  # "127.0.0.1:9464" inside the middle namespace
    class_queue_packets: int | None = None  # each class's pfifo; None = HTB's default leaf


def daemon_toml(s: QdsSettings, downlink: str, uplink: str, state_dir: Path) -> str:
    """The daemon's configuration file for ``s`` on the given interfaces."""
    lines = [
        f'downlink = "{downlink}"',
        f'uplink = "{uplink}"',
        f"capacity_mbps = {s.capacity_mbps}",
        f'state_dir = "{state_dir}"',
        f'controller = "{s.controller}"',
    ]
    if s.metrics:
        lines.append(f'metrics = "{s.metrics}"')
    if s.class_queue_packets:
        lines.append(f"class_queue_packets = {s.class_queue_packets}")
    lines += ["", "[servers]", f'nets = ["{SERVER_NET}"]']
    # [qds]: the scenario's keys, as thinwan-link reads them (docs/lab.md "QDS").
    lines += ["", "[qds]", f"period_ms = {s.period_ms}"]
    if s.controller == "qds":
        lines += [f"alpha = {s.alpha}", f"beta = {s.beta}", f'variant = "{s.variant}"']
        lines.append(f'classifier = "{"oracle" if s.oracle_ports else "model"}"')
        rows = ", ".join(f'{{ server_port = {p}, app = "{t}" }}' for p, t in sorted(s.oracle_ports.items()))
        if rows:
            lines.append(f"oracle = [{rows}]")
    if s.controller == "static":
        lines += ["", "[static]", f"rates_mbps = [{', '.join(str(r) for r in s.static_rates_mbps)}]"]
        lines += [f"[[static.flows]]\nport = {p}\nclass = {c}" for p, c in sorted(s.static_ports.items())]
    return "\n".join(lines) + "\n"


def middlebox_chain(
    workdir: Path | None = None, client_delay_ms: float = 5.0, congestion_control: str = "cubic", mtu: int = 1500
) -> Chain:
    """The chain for QDS: a clean WAN link (no delay, unshaped: the servers sit next to
    the middlebox) and a last hop that only adds ``client_delay_ms`` each way. TCP's
    congestion control is set explicitly (the namespaces' default here is bbr)."""
    clean = LinkSpec(fwd=DirLink(queue_packets=10000), rev=DirLink(queue_packets=10000))
    last_hop = LinkSpec(
        fwd=DirLink(delay_ms=client_delay_ms, queue_packets=10000),
        rev=DirLink(delay_ms=client_delay_ms, queue_packets=10000),
    )
    tcp = TcpSettings(congestion_control=congestion_control, mtu=mtu)
    return Chain(clean, last_hop, tcp, workdir=workdir, events=False)


class QdsDaemon:
    """``thinwan-qds`` in the middle namespace of ``chain`` (stopped by :meth:`stop`, or
    by the chain's teardown, which terminates every process it started)."""

    def __init__(self, chain: Chain, settings: QdsSettings, state_dir: Path | None = None, name: str = "qds") -> None:
        self.chain = chain
        self.settings = settings
        self.downlink = chain.tun["last_hop"]
        self.uplink = chain.tun["wan"]
        self.state_dir = state_dir or chain.workdir / "qds-state"
        self.name = name
        self.config = chain.workdir / f"{name}.toml"
        self.config.write_text(daemon_toml(settings, self.downlink, self.uplink, self.state_dir))
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        """Start the daemon and wait until HTB is installed."""
        self.runs += 1
        name = f"{self.name}-{self.runs}"
        self.stats_file = self.chain.workdir / f"{name}-stats.json"
        self.err_file = self.chain.workdir / f"{name}.err"
        self.flows_file = self.chain.workdir / f"{name}-flows.csv"
        argv = [
            str(find_binary("thinwan-qds")),
            str(self.config),
            "--stats",
            str(self.stats_file),
            "--flows-log",
            str(self.flows_file),
        ]
        self.proc = self.chain.popen("middle", argv, stdout=subprocess.PIPE, stderr=open(self.err_file, "wb"))  # noqa: SIM115
        try:
            wait_line(self.proc, b'"ready":true', READY_S, "thinwan-qds")
        except LabError as e:
            raise LabError(f"{e}: {self.err_file.read_text(errors='replace').strip()}") from None

    def stop(self, sig: int = signal.SIGTERM) -> dict[str, Any] | None:
        """Signal the daemon and wait; returns its counters (None after SIGKILL)."""
        if self.proc is None:
            return None
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise LabError(f"thinwan-qds did not stop within {STOP_S:g} s") from None
        self.proc = None
        if sig == signal.SIGKILL:
            return None
        if code != 0:
            raise LabError(f"thinwan-qds exited {code}: {self.err_file.read_text(errors='replace').strip()}")
        return json.loads(self.stats_file.read_text())

    def state_file(self) -> Path:
        return self.state_dir / f"thinwan-qds-{self.downlink}.json"


def start_bulk_flow(chain: Chain, port: int, duration_s: float, workdir: Path) -> tuple[Any, Any]:
    """A greedy TCP flow (``thinwan-net`` pump, bulk model) from ``198.18.1.1:port`` to a
    sink in the client namespace; returns (pump, sink) processes. Congestion control is
    the chain's (set explicitly on the socket too)."""
    net = str(find_binary("thinwan-net"))
    tag = f"bulk-{port}"
    pump = chain.popen(
        "server",
        [
            net,
            "pump",
            "--listen",
            f"{SERVER_ADDR}:{port}",
            "--model",
            "bulk",
            "--duration-s",
            str(duration_s),
            "--drain-s",
            "1",
            "--cc",
            chain.tcp.congestion_control,
            "--out",
            str(workdir / f"{tag}-pump.csv"),
            "--conns-out",
            str(workdir / f"{tag}-conns.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=open(workdir / f"{tag}-pump.err", "wb"),  # noqa: SIM115
    )
    wait_line(pump, b'"ready":true', 10.0, f"pump {port}")
    sink = chain.popen(
        "client",
        [
            net,
            "sink",
            "--connect",
            f"{SERVER_ADDR}:{port}",
            "--out",
            str(workdir / f"{tag}-sink.csv"),
            "--timeout-s",
            str(duration_s + 30),
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / f"{tag}-sink.err", "wb"),  # noqa: SIM115
    )
    return pump, sink


# -- reading the kernel's view back with tc (tests and reports; never in the daemon) ----

_CLASS = re.compile(r"class htb (\S+) (?:parent (\S+)|root).* rate (\S+) ceil (\S+)")


def tc_classes(chain: Chain, dev: str, stats: bool = False) -> dict[str, dict[str, Any]]:
    """``tc class show dev DEV`` in the middle namespace: classid → parent, rate and ceil
    as printed, and (``stats``) bytes sent."""
    argv = ["tc", *(["-s"] if stats else []), "class", "show", "dev", dev]
    out = chain.run("middle", argv).stdout
    classes: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for line in out.splitlines():
        m = _CLASS.match(line.strip())
        if m:
            current = m.group(1)
            classes[current] = {"parent": m.group(2), "rate": m.group(3), "ceil": m.group(4)}
        elif current and line.strip().startswith("Sent "):
            classes[current]["bytes"] = int(line.split()[1])
    return classes


def tc_filters(chain: Chain, dev: str) -> list[dict[str, Any]]:
    """``tc filter show dev DEV`` u32 nodes: handle, flowid and their (value/mask, offset) keys."""
    out = chain.run("middle", ["tc", "filter", "show", "dev", dev]).stdout
    filters: list[dict[str, Any]] = []
    for line in out.splitlines():
        line = line.strip()
        m = re.search(r"fh (\S+) .*flowid (\S+)", line)
        if m and "order" in line:
            filters.append({"handle": m.group(1), "flowid": m.group(2), "keys": []})
        km = re.match(r"match (\w+)/(\w+) at (\d+)", line)
        if km and filters:
            filters[-1]["keys"].append((km.group(1), km.group(2), int(km.group(3))))
    return filters


def tc_rate_bits(bits: int) -> str:
    """How ``tc`` prints a rate of ``bits`` bit/s set through netlink (whole bytes per
    second in the kernel; iproute2 ``print_rate`` takes a unit only while the value
    divides exactly or is ≥ 10^6 of it)."""
    units = ["", "K", "M", "G", "T"]
    bits = bits // 8 * 8  # the kernel keeps whole bytes per second
    i = 0
    while i < len(units) - 1:
        if bits < 1000 or (bits % 1000 != 0 and bits < 1000 * 1000):
            break
        bits //= 1000
        i += 1
    return f"{bits}{units[i]}bit"


def ip_key(addr: str) -> str:
    """An IPv4 address as u32 prints a match value (8 hex digits)."""
    return "".join(f"{int(x):02x}" for x in addr.split("."))


# -- `thinwan qds --lab`: the daemon on a fresh chain, in the foreground ---------------

_IFACE_KEY = re.compile(r"^\s*(downlink|uplink)\s*=.*$", re.MULTILINE)


def with_interfaces(config_text: str, downlink: str, uplink: str) -> str:
    """``config_text`` with its top-level ``downlink``/``uplink`` set to the given names
    (the lab's interfaces get fresh names every time)."""
    body = _IFACE_KEY.sub("", config_text)
    return f'downlink = "{downlink}"\nuplink = "{uplink}"\n{body}'


def run_on_lab(config: Path, extra: list[str], client_delay_ms: float, congestion_control: str) -> int:
    """Bring up the middlebox chain, run ``thinwan-qds`` with ``config`` (interfaces
    replaced by the chain's) in its middle namespace until it exits or Ctrl-C/SIGTERM,
    then tear everything down; the daemon's exit status."""
    # Check the configuration before creating anything (exit 2 and its message, as ever).
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / config.name
        probe.write_text(with_interfaces(config.read_text(), "probe-l", "probe-w"))
        done = subprocess.run([str(find_binary("thinwan-qds")), str(probe), "--check"], capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr.replace(str(probe), str(config)))
            return done.returncode
    with middlebox_chain(None, client_delay_ms, congestion_control) as chain:
        text = with_interfaces(config.read_text(), chain.tun["last_hop"], chain.tun["wan"])
        lab_config = chain.workdir / "qds.toml"
        lab_config.write_text(text)
        ns = chain.netns
        print(
            "\n".join(
                [
                    f"qds lab {chain.id} is up; thinwan-qds runs in {ns['middle']} (Ctrl-C stops it and tears down)",
                    f"  servers: netns {ns['server']}, {SERVER_ADDR} (e.g. ip netns exec {ns['server']} "
                    f"{find_binary('thinwan-net')} pump --listen {SERVER_ADDR}:5001 --model bulk --cc {congestion_control} …)",
                    f"  clients: netns {ns['client']}, 198.18.2.1 (e.g. ip netns exec {ns['client']} "
                    f"{find_binary('thinwan-net')} sink --connect {SERVER_ADDR}:5001 …)",
                    f"  HTB:     ip netns exec {ns['middle']} tc -s class show dev {chain.tun['last_hop']}",
                    f"  config:  {lab_config}",
                ]
            ),
            flush=True,
        )
        daemon = chain.popen("middle", [str(find_binary("thinwan-qds")), str(lab_config), *extra])
        try:
            return daemon.wait()
        except KeyboardInterrupt:
            daemon.send_signal(signal.SIGTERM)
            return daemon.wait(timeout=STOP_S)

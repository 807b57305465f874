"""One run of a scenario on the real lab.

Run *k* brings up a fresh lab (link seeded with ``seed + k``), starts the sink in the
client namespace and the pump in the server namespace (sources seeded like the
simulator's), waits for the drain period, tears the lab down and joins the three logs
into records (:mod:`thinwan.analysis.lab_join`). The raw logs (event log, pump/sink CSV,
TCP_INFO, link counters, pcap) stay in the run's raw directory. :mod:`thinwan.execute.labruns`
runs every run of a scenario this way (``thinwan lab run``, ``thinwan validate``).
"""

from __future__ import annotations

import json
import os
import platform
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ... import __version__
from ...analysis.lab_join import lab_records
from ...analysis.lab_qds import read_qds_log
from ...config.scenario import LabSection, Scenario
from ...records.evlog import read_events
from ...records.meta import git_revision
from ...records.schema import RunRecords
from ..binaries import find_binary
from .conntrace import SsSampler, conn_trace
from .linkspec import (
    PAIR_PORT_BASE,
    RTO_MIN_SYSCTL,
    LabSpec,
    TcpSettings,
    lab_spec,
    middlebox_client_delays,
    traffic_json,
)
from .netns import LabError, kernel_has_sysctl
from .topology import CLIENT_ADDR, Lab

__all__ = [
    "run_lab_once",
    "check_lab_capacity",
    "lab_capacity",
    "read_logs",
    "sink_argv",
    "pump_argv",
    "lab_meta",
    "wait_line",
    "wait_exit",
    "write_traffic",
    "run_limit_s",
    "middlebox_meta",
]

# Slack on top of duration + drain before a pump or sink is declared stuck.
STUCK_S = 30.0


# The connecting side's ephemeral ports: a fresh namespace's net.ipv4.ip_local_port_range
# is the kernel default 32768–60999, and every connection goes to the one sink address.
EPHEMERAL_PORTS = 60999 - 32768 + 1
# Tasks and descriptors left for everything else (the link emulator, the logger, ss, …).
TASK_RESERVE = 1024
FD_RESERVE = 64


def lab_capacity() -> tuple[int, str]:
    """The most connections the lab can run here, and what limits it.

    thinwan-net's pump and sink serve each connection on a thread of its own
    (crates/net/src/pump.rs) and each holds one socket per connection, so a run needs
    two kernel tasks and one descriptor in each process per connection, and one
    ephemeral port of the pump's namespace.
    """
    import resource

    tasks_max = min(_read_int("/proc/sys/kernel/pid_max"), _read_int("/proc/sys/kernel/threads-max"))
    running = _tasks_running()
    limits = [
        (
            (tasks_max - running - TASK_RESERVE) // 2,
            f"two threads per connection (pump and sink), and the kernel allows {tasks_max:,} tasks "
            f"(min of kernel.pid_max and kernel.threads-max) with {running:,} running",
        ),
        (EPHEMERAL_PORTS, f"one ephemeral port per connection: {EPHEMERAL_PORTS:,} in a fresh namespace"),
    ]
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY:
        limits.append(
            (soft - FD_RESERVE, f"one socket per connection in the pump and in the sink: ulimit -n is {soft:,}")
        )
    return min(limits)


def check_lab_capacity(scenario: Scenario) -> None:
    """Raise :class:`LabError`'s user-facing sibling, a ScenarioError, when the lab cannot
    run this many connections (:func:`lab_capacity`)."""
    from ...config.files import ScenarioError

    pairs = scenario.topology.pairs
    conns = pairs * (2 if scenario.traffic.separate_connections else 1)
    most, reason = lab_capacity()
    if conns > most:
        what = f"{conns:,} connections ({pairs:,} pairs × 2)" if conns != pairs else f"{conns:,} connections"
        raise ScenarioError(
            f"topology.pairs: the lab can run at most {max(most, 0):,} connections here, {what} asked for: "
            f"{reason} (docs/limits.md)"
        )


def _read_int(path: str) -> int:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # the kernel's default pid_max


def _tasks_running() -> int:
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[1])  # runnable/total scheduling entities
    except (OSError, ValueError, IndexError):
        return 0


def run_lab_once(scenario: Scenario, opts: LabSection, run: int, raw: Path) -> RunRecords:
    """Run ``run`` of ``scenario`` on a fresh lab; raw logs go to ``raw``."""
    if raw.exists():
        shutil.rmtree(raw)
    raw.mkdir(parents=True)
    spec = lab_spec(scenario, run, opts)
    write_traffic(scenario, raw)
    started = time.monotonic()
    limit = run_limit_s(scenario)
    with Lab(spec, workdir=raw, events=True, pcap=opts.pcap) as lab:
        sink = lab.popen(
            "client",
            sink_argv(scenario, raw, ["--listen", f"{CLIENT_ADDR}:{opts.port}"]),
            stdout=subprocess.PIPE,
            stderr=open(raw / "sink.err", "wb"),
        )  # noqa: SIM115
        wait_line(sink, b'"ready":true', 10.0, "sink")
        rec = scenario.records
        sampler = None
        if rec.traces and rec.trace_connections == "all":
            sampler = SsSampler(lab.netns["server"], opts.port, rec.trace_interval_ms / 1000.0).start()
        pump = lab.popen(
            "server",
            pump_argv(scenario, opts, run, raw, ["--connect", f"{CLIENT_ADDR}:{opts.port}"]),
            stderr=open(raw / "pump.err", "wb"),
        )  # noqa: SIM115
        try:
            wait_exit(pump, limit, "pump", raw / "pump.err")
        finally:
            samples = sampler.stop() if sampler else []
        wait_exit(sink, STUCK_S, "sink", raw / "sink.err")
        if not lab.emulator_alive():
            raise LabError(
                f"thinwan-link died during the run: {(raw / 'link.err').read_text(errors='replace').strip()}"
            )
        stats = lab.down()
        notes = list(lab.notes)
        link = spec.link.to_json()
    events = read_events(raw / "events.bin")
    meta = lab_meta(
        scenario, opts, run, raw, started, len(events), spec.tcp, notes, {"link": link, "link_stats": stats}
    )
    if sampler:
        meta["lab"]["conn_trace"] = {
            "source": "ss -tinm",
            "interval_s": sampler.interval,
            "samples": len(samples),
            "errors": sampler.errors,
        }
    if scenario.topology.kind == "middlebox":
        meta["lab"]["middlebox"] = middlebox_meta(scenario, run, spec)
    qds_file = raw / "events.qds.bin"
    qds_log = read_qds_log(qds_file) if qds_file.exists() else None
    pump, sink, conns = read_logs(raw)
    records = lab_records(scenario, events, pump, sink, conns, link, stats, meta, qds_log=qds_log)
    if samples:
        records.conn_trace = conn_trace(samples, conns["conns"], int(conns["t0_ns"]))
    return records


def middlebox_meta(scenario: Scenario, run: int, spec: LabSpec) -> dict[str, Any]:
    """What the lab made of ``topology.kind = "middlebox"`` (docs/lab.md "The middlebox
    in the lab"), for the run's meta: the clients' delays the simulator draws and the
    one the lab applies, the servers and clients it stands for, the downlink."""
    t = scenario.topology
    clients = middlebox_client_delays(scenario, run)
    return {
        "servers": min(t.servers, t.pairs) if t.servers else -(-t.pairs // 2),  # as the simulator's
        "clients": t.pairs,
        "server_namespaces": 1,
        "client_namespaces": 1,
        "client_delays_ms": clients["delays_ms"],
        "client_delay_mean_ms": clients["applied_ms"],
        "client_delay_source": clients["source"],
        "client_delay_applied": "per pair (thinwan-link pairs)" if spec.link.pairs and clients["delays_ms"] else "mean",
        "pair_port_base": PAIR_PORT_BASE,
        "one_way_delay_ms": spec.link.fwd.delay_ms,
        "downlink_rate_bps": spec.link.fwd.rate_bps,
        "discipline": spec.link.fwd.discipline,
        "congestion_control": spec.tcp.congestion_control,
        "per_packet_rtt": "thinwan-link event log: fwd arrival → first rev delivery covering the segment",
    }


def read_logs(raw: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The pump's and the sink's CSV logs and the pump's ``conns.json`` of a run."""
    return pd.read_csv(raw / "pump.csv"), pd.read_csv(raw / "sink.csv"), json.loads((raw / "conns.json").read_text())


def write_traffic(scenario: Scenario, raw: Path) -> None:
    """``traffic.json`` for the pump (:func:`traffic_json`)."""
    (raw / "traffic.json").write_text(json.dumps(traffic_json(scenario), indent=2) + "\n")


def run_limit_s(scenario: Scenario) -> float:
    """How long a pump may take before it is declared stuck."""
    return scenario.scenario.duration_s + scenario.scenario.drain_s + STUCK_S


def sink_argv(scenario: Scenario, raw: Path, peer: list[str]) -> list[str]:
    """``thinwan-net sink`` for ``scenario``; ``peer`` is ``--listen ADDR`` or ``--connect ADDR``."""
    tcp = scenario.tcp
    argv = [
        str(find_binary("thinwan-net")),
        "sink",
        *peer,
        "--conns",
        str(scenario.topology.pairs),
        "--out",
        str(raw / "sink.csv"),
        "--timeout-s",
        str(run_limit_s(scenario)),
    ]
    if not tcp.delayed_ack:
        argv.append("--quickack")
    if tcp.rwnd_bytes:
        argv += ["--rcvbuf", str(tcp.rwnd_bytes)]
    return argv


def pump_argv(scenario: Scenario, opts: LabSection, run: int, raw: Path, peer: list[str]) -> list[str]:
    """``thinwan-net pump`` for run ``run``; ``peer`` is ``--connect ADDR`` or ``--listen ADDR``."""
    sc, tcp = scenario.scenario, scenario.tcp
    argv = [
        str(find_binary("thinwan-net")),
        "pump",
        *peer,
        "--conns",
        str(scenario.topology.pairs),
        "--traffic",
        str(raw / "traffic.json"),
        "--seed",
        str(sc.seed + run),
        "--duration-s",
        str(sc.duration_s),
        "--drain-s",
        str(sc.drain_s),
        "--stagger",
        f"{sc.start_stagger_ms}ms",
        "--out",
        str(raw / "pump.csv"),
        "--conns-out",
        str(raw / "conns.json"),
    ]
    if not tcp.nagle:
        argv.append("--nodelay")
    if opts.notsent_lowat:
        argv += ["--notsent-lowat", str(opts.notsent_lowat)]
    if tcp.send_buffer_bytes:
        argv += ["--sndbuf", str(tcp.send_buffer_bytes)]
    if scenario.queue.discipline == "priority" and scenario.queue.priority_classifier == "label":
        argv.append("--mark-interactive")
    if scenario.topology.kind == "middlebox" and peer[0] == "--connect":
        # Pair i on server port PAIR_PORT_BASE + i: thinwan-link's per-pair delays and
        # the QDS oracle find it by port (docs/lab.md "Pairs").
        argv += ["--local-port-base", str(PAIR_PORT_BASE)]
    return argv


def lab_meta(
    scenario: Scenario,
    opts: LabSection,
    run: int,
    raw: Path,
    started: float,
    events: int,
    tcp: TcpSettings,
    notes: list[str],
    links: dict[str, Any],
) -> dict[str, Any]:
    """The run metadata of a lab run (``meta``, docs/records.md); ``links`` describes the
    emulated link(s) and their counters."""
    sc = scenario.scenario
    return {
        "scenario": scenario.name,
        "run": run,
        "seed": sc.seed + run,
        "version": __version__,
        "git_rev": git_revision(),
        "duration_s": sc.duration_s,
        "events": events,
        "wall_s": time.monotonic() - started,
        "substrate": "lab",
        "config": scenario.model_dump(mode="json"),
        "lab": {
            "options": opts.model_dump(mode="json"),
            **links,
            "tcp_sysctls": tcp.sysctls(),
            "tcp_routes": tcp.route_options(kernel_has_sysctl(RTO_MIN_SYSCTL)),
            "not_honoured": notes,
            "kernel": platform.release(),
            "raw": str(raw),
        },
    }


def wait_line(p: subprocess.Popen[Any], needle: bytes, timeout: float, what: str) -> None:
    """Wait until ``p`` prints ``needle`` on its stdout (a pipe)."""
    assert p.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    fd = p.stdout.fileno()
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise LabError(f"{what} exited early (status {p.returncode})")
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            chunk = os.read(fd, 4096)
            buf += chunk
            if needle in buf:
                return
    raise LabError(f"{what} did not become ready within {timeout:g} s")


def wait_exit(p: subprocess.Popen[Any], timeout: float, what: str, err: Path) -> None:
    """Wait for ``p`` to finish successfully; its stderr file ``err`` explains a failure."""
    try:
        code = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        raise LabError(f"{what} did not finish within {timeout:g} s") from None
    if code != 0:
        raise LabError(f"{what} failed (status {code}): {err.read_text(errors='replace').strip()}")

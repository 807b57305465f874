"""``thinwan lab run`` and ``thinwan validate``: scenarios on the real lab.

Run *k* brings up a fresh lab (link seeded with ``seed + k``), starts the sink in the
client namespace and the pump in the server namespace (sources seeded like the
simulator's), waits for the drain period, tears the lab down and joins the three logs
into records (:mod:`.records`). The output directory has the layout of ``thinwan run``
(``runs/run-<k>/``, ``summary.json``, ``report.html``), plus ``lab-raw/run-<k>/`` with
the raw logs (event log, pump/sink CSV, TCP_INFO, link counters, pcap).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..metrics import summarize_runs
from ..records import RunRecords, write_text_atomic
from ..report import digest_run, html_report, summary_table
from ..runner import dumps_json, git_revision, summary_document
from ..scenario import Scenario
from . import netns
from .conntrace import SsSampler, conn_trace
from .events import read_events
from .netns import LabError
from .records import lab_records
from .spec import LabOptions, TcpSettings, lab_spec
from .topology import CLIENT_ADDR, Lab, find_binary

__all__ = [
    "run_lab_scenario",
    "run_lab_once",
    "print_result",
    "validate",
    "sink_argv",
    "pump_argv",
    "lab_meta",
    "wait_line",
    "wait_exit",
    "write_traffic",
    "run_limit_s",
]

# Slack on top of duration + drain before a pump or sink is declared stuck.
STUCK_S = 30.0


def run_lab_scenario(
    scenario: Scenario, opts: LabOptions, out: str | Path, progress: bool = True, report: bool = True
) -> dict[str, Any]:
    """Run every run of ``scenario`` on the lab; write records, summary.json, report.html."""
    netns.require_root()
    out = Path(out)
    runs = scenario.scenario.runs
    for name in ("summary.json", "report.html"):
        (out / name).unlink(missing_ok=True)
    for d in (out / "runs").glob("run-*"):
        if d.name.removeprefix("run-").isdigit() and int(d.name.removeprefix("run-")) >= runs:
            shutil.rmtree(d)
    write_text_atomic(out / "scenario.toml", scenario.to_toml())
    write_text_atomic(out / "lab.json", json.dumps(dataclasses.asdict(opts), indent=2) + "\n")
    digests = []
    for k in range(runs):
        if progress:
            print(
                f"thinwan: lab run {k + 1}/{runs} ({scenario.scenario.duration_s + scenario.scenario.drain_s:g} s)…",
                file=sys.stderr,
            )
        records = run_lab_once(scenario, opts, k, out / "lab-raw" / f"run-{k}")
        records.write(out / "runs" / f"run-{k}")
        digests.append(digest_run(records, scenario))
    summaries = [d.summary for d in digests]
    document = {**summary_document(scenario, summaries), "substrate": "lab", "out": str(out)}
    write_text_atomic(out / "summary.json", dumps_json(document) + "\n")
    if report:
        write_text_atomic(out / "report.html", html_report(scenario, digests, summarize_runs(summaries)))
    return document


def run_lab_once(scenario: Scenario, opts: LabOptions, run: int, raw: Path) -> RunRecords:
    """Run ``run`` of ``scenario`` on a fresh lab; raw logs go to ``raw``."""
    if raw.exists():
        shutil.rmtree(raw)
    raw.mkdir(parents=True)
    spec = lab_spec(scenario, opts, run)
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
            "source": "ss -tin",
            "interval_s": sampler.interval,
            "samples": len(samples),
            "errors": sampler.errors,
        }
    records = lab_records(scenario, events, raw / "pump.csv", raw / "sink.csv", raw / "conns.json", link, stats, meta)
    if samples:
        conns = json.loads((raw / "conns.json").read_text())
        records.conn_trace = conn_trace(samples, conns["conns"], int(conns["t0_ns"]))
    return records


def write_traffic(scenario: Scenario, raw: Path) -> None:
    """``traffic.json`` for the pump: the scenario's [traffic] keys plus the MSS, and with
    ``traffic.model = "pcap"`` each stream's writes from the capture (as the simulator's)."""
    traffic = {**scenario.traffic.model_dump(), "mss": scenario.tcp.mss}
    if scenario.traffic.model == "pcap":
        traffic["trace"] = scenario.trace_writes()
    (raw / "traffic.json").write_text(json.dumps(traffic, indent=2) + "\n")


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


def pump_argv(scenario: Scenario, opts: LabOptions, run: int, raw: Path, peer: list[str]) -> list[str]:
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
    return argv


def lab_meta(
    scenario: Scenario,
    opts: LabOptions,
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
            "options": dataclasses.asdict(opts),
            **links,
            "tcp_sysctls": tcp.sysctls(),
            "tcp_routes": tcp.route_options(),
            "not_honoured": notes,
            "kernel": platform.release(),
            "raw": str(raw),
        },
    }


def print_result(document: dict[str, Any], scenario: Scenario, as_json: bool, out: Path, report: bool = True) -> None:
    """Print like ``thinwan run``: one JSON object, or the summary table."""
    if as_json:
        print(dumps_json(document))
        return
    seeds = document["seeds"]
    print(f"{scenario.name} (lab): {len(seeds)} run(s), seeds {seeds[0]}–{seeds[-1]}")
    print(summary_table(document["summary"], scenario))
    print()
    print(f"report: {out / 'report.html'}" if report else f"results: {out}")


def validate(
    scenario: Scenario, opts: LabOptions, out: Path, as_json: bool = False, progress: bool = True
) -> dict[str, Any]:
    """Run ``scenario`` in the simulator and on the lab; print the summaries side by side."""
    from ..runner import run_scenario

    netns.require_root()
    sim = summarize_runs(run_scenario(scenario, out / "sim", progress=progress, report=True))
    lab = run_lab_scenario(scenario, opts, out / "lab", progress=progress, report=True)["summary"]
    keys = [k for k in sim if isinstance(sim.get(k), (int, float)) and k in lab]
    doc = {
        "scenario": scenario.name,
        "sim": sim,
        "lab": lab,
        "out": str(out),
        "config": scenario.model_dump(mode="json"),
    }
    write_text_atomic(out / "validate.json", dumps_json(doc) + "\n")
    if as_json:
        print(dumps_json(doc))
        return doc
    print(f"{scenario.name}: simulator vs lab ({scenario.scenario.runs} run(s) each)")
    print(f"{'metric':<28}{'sim':>14}{'lab':>14}{'lab/sim':>10}")
    for k in keys:
        a, b = float(sim[k]), float(lab[k])
        ratio = b / a if a and math.isfinite(a) and math.isfinite(b) else math.nan
        print(f"{k:<28}{a:>14.4g}{b:>14.4g}{ratio:>10.3g}")
    print(f"\nreports: {out / 'sim' / 'report.html'}  {out / 'lab' / 'report.html'}")
    return doc


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

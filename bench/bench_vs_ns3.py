#!/usr/bin/env python3
"""Speed benchmark: thinwan's simulator against ns-3 on the same thin-client workload.

(a) thinwan: ``thinwan run SCENARIO --runs 1 --out <tmp>/thinwan --json``, timed end to end
    (wall clock, as a user sees it: start-up, simulation, records, summary and report);
    the simulation-only time and the event count come from the run's ``meta.json``
    (``wall_s``, ``events``).
(b) ns-3: ``bench/ns3/dumbbell.py --traffic schedule`` replaying thinwan's own
    ``messages.parquet`` (every write of every server, at its time, on one persistent
    connection per pair) with the run's validated scenario (``--scenario-json`` on the
    run's ``meta.json``), timed end to end; ``run_s`` is ``Simulator::Run()`` alone and
    ``events`` is ``Simulator::GetEventCount()``.

So both simulators carry the same offered load over the same dumbbell and TCP settings;
ns-3 has no Reno (RFC 5681) recovery and runs NewReno where the scenario says
``recovery = "reno"`` (see bench/ns3/README.md), so loss dynamics, and hence event
counts, are not identical. The runs are sequential; on a shared machine the load average
is recorded with the results.

Writes one JSON document (``--out``) and prints a summary and a Markdown table fragment
for BENCHMARKS.md.

    .venv/bin/python -m bench.bench_vs_ns3                       # the real thing (~1 min)
    .venv/bin/python -m bench.bench_vs_ns3 --pairs 10 --duration 30 --out /tmp/quick.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from thinwan.config.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
DUMBBELL = ROOT / "bench" / "ns3" / "dumbbell.py"
DEFAULT_SCENARIO = ROOT / "scenarios" / "ogawa2011" / "large-buffer.toml"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", type=Path, default=DEFAULT_SCENARIO, help="scenario TOML")
    p.add_argument("--pairs", type=int, help="override topology.pairs (quick variant)")
    p.add_argument("--duration", type=float, help="override scenario.duration_s (quick variant)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "vs_ns3.json", help="JSON results file")
    p.add_argument("--keep", type=Path, help="keep the run directories here instead of a temp dir")
    a = p.parse_args(argv)

    work = a.keep or Path(tempfile.mkdtemp(prefix="bench_vs_ns3_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = bench(a, work)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)

    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(human_summary(result))
    print()
    print(result["markdown"])
    print(f"\nresults: {a.out}")
    return 0


def bench(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    scenario_path = a.scenario
    overrides = {}
    if a.pairs is not None:
        overrides["topology.pairs"] = a.pairs
    if a.duration is not None:
        overrides["scenario.duration_s"] = a.duration
    if overrides:  # a modified copy of the scenario, loaded by the CLI like any file
        sc = load_scenario(a.scenario).with_values(overrides, source="bench_vs_ns3 overrides")
        scenario_path = work / f"{a.scenario.stem}-variant.toml"
        scenario_path.write_text(sc.to_toml())
    load_before = os.getloadavg()

    # (a) thinwan, the whole command.
    thinwan_exe = Path(sys.executable).with_name("thinwan")
    cmd = [
        str(thinwan_exe) if thinwan_exe.exists() else "thinwan",
        "run",
        str(scenario_path),
        "--runs",
        "1",
        "--out",
        str(work / "thinwan"),
        "--json",
    ]
    t0 = time.perf_counter()
    tw = subprocess.run(cmd, capture_output=True, text=True)
    tw_whole = time.perf_counter() - t0
    if tw.returncode != 0:
        raise SystemExit(f"thinwan failed ({tw.returncode}):\n{tw.stderr[-3000:]}")
    run_dir = work / "thinwan" / "runs" / "run-0"
    meta = json.loads((run_dir / "meta.json").read_text())
    config = meta["config"]

    # (b) ns-3 replaying thinwan's writes with the same validated scenario.
    cmd_ns3 = [
        sys.executable,
        str(DUMBBELL),
        "--traffic",
        "schedule",
        "--schedule",
        str(run_dir / "messages.parquet"),
        "--scenario-json",
        str(run_dir / "meta.json"),
    ]
    t0 = time.perf_counter()
    ns = subprocess.run(cmd_ns3, capture_output=True, text=True)
    ns_whole = time.perf_counter() - t0
    if ns.returncode != 0:
        raise SystemExit(f"dumbbell.py failed ({ns.returncode}):\n{ns.stderr[-3000:]}")
    ns3 = json.loads(ns.stdout)
    load_after = os.getloadavg()

    ours = thinwan_outcome(run_dir, config)
    sim_time = config["scenario"]["duration_s"] + config["scenario"]["drain_s"]
    tw_sim, tw_events = float(meta["wall_s"]), int(meta["events"])
    ns_run, ns_events = float(ns3["run_s"]), int(ns3["events"])

    result: dict[str, Any] = {
        "workload": {
            "scenario": config["scenario"]["name"],
            "scenario_file": str(a.scenario),
            "overrides": overrides,
            "pairs": config["topology"]["pairs"],
            "duration_s": config["scenario"]["duration_s"],
            "drain_s": config["scenario"]["drain_s"],
            "simulated_s": sim_time,
            "seed": meta.get("seed"),
            "writes": ours["writes"],
            "bytes_written": ours["bytes_written"],
            "ns3_writes_replayed": ns3["writes"],
            "ns3_bytes_replayed": sum(ns3["written_bytes_per_pair"]),
            "ns3_late_writes": ns3["late_writes"],
        },
        "thinwan": {
            "command": cmd,
            "whole_s": tw_whole,
            "simulate_s": tw_sim,
            "events": tw_events,
            "packets": int(meta["packets"]["created"]),
            "events_per_s": tw_events / tw_sim if tw_sim > 0 else None,
            "version": meta.get("version"),
            "git_rev": meta.get("git_rev"),
            "outcome": ours,
        },
        "ns3": {
            "command": cmd_ns3,
            "whole_s": ns_whole,
            "run_s": ns_run,
            "setup_s": ns3["setup_s"],
            "total_s_inside": ns3["total_s"],
            "events": ns_events,
            "events_per_s": ns_events / ns_run if ns_run > 0 else None,
            "version": "ns3 3.44.post0 (PyPI wheel, release build with NS_LOG/NS_ASSERT "
            "compiled in; driven through cppyy, the simulation loop is C++)",
            "warnings": ns3["warnings"],
            "outcome": {
                "goodput_bps": ns3["goodput_bps"],
                "bottleneck_drops": ns3["bottleneck_drops"],
                "bottleneck_packets_tx": ns3["bottleneck_packets_tx"],
                "timeouts": ns3["timeouts"],
                "fast_recoveries": ns3["fast_recoveries"],
                "retransmitted_segments": ns3["retransmitted_segments"],
            },
        },
        "ratios": {
            "ns3_run_over_thinwan_simulate": ns_run / tw_sim if tw_sim > 0 else None,
            "ns3_whole_over_thinwan_whole": ns_whole / tw_whole,
        },
        "machine": machine(load_before, load_after),
    }
    result["markdown"] = markdown(result)
    return result


def thinwan_outcome(run_dir: Path, config: dict[str, Any]) -> dict[str, Any]:
    """Goodput, drops and counts of thinwan's run, for a side-by-side sanity check."""
    msgs = pq.read_table(run_dir / "messages.parquet", columns=["bytes"]).column("bytes")
    conns = pq.read_table(run_dir / "connections.parquet").to_pydict()
    ports = pq.read_table(run_dir / "ports.parquet").to_pydict()
    row = ports["port"].index("bottleneck")
    duration = config["scenario"]["duration_s"]
    return {
        "writes": len(msgs),
        "bytes_written": int(sum(msgs.to_pylist())),
        # Delivered over the whole run (incl. drain); ns-3's goodput_bps counts [0, duration].
        "delivered_bps_incl_drain": sum(conns["bytes_delivered"]) * 8.0 / duration,
        "bottleneck_drops": int(ports["drops_overflow"][row]),
        "bottleneck_packets_tx": int(ports["packets_tx"][row]),
        "timeouts": int(sum(conns["timeouts"])),
        "fast_retransmits": int(sum(conns["fast_retransmits"])),
    }


def machine(load_before: tuple, load_after: tuple) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def human_summary(r: dict[str, Any]) -> str:
    w, t, n, q = r["workload"], r["thinwan"], r["ns3"], r["ratios"]
    lines = [
        f"workload: {w['scenario']}, {w['pairs']} pairs x {w['duration_s']:g} s "
        f"(+{w['drain_s']:g} s drain), {w['writes']} writes, {w['bytes_written'] / 1e6:.1f} MB",
        f"thinwan: simulate {t['simulate_s']:.3f} s, whole {t['whole_s']:.2f} s, "
        f"{t['events']} events ({_rate(t['events_per_s'])})",
        f"ns-3:    Run() {n['run_s']:.3f} s, whole {n['whole_s']:.2f} s "
        f"(setup {n['setup_s']:.2f} s), {n['events']} events ({_rate(n['events_per_s'])})",
        f"ratios:  ns-3 Run / thinwan simulate = {_x(q['ns3_run_over_thinwan_simulate'])}, "
        f"ns-3 whole / thinwan whole = {_x(q['ns3_whole_over_thinwan_whole'])}",
        f"outcome: thinwan drops {t['outcome']['bottleneck_drops']}, timeouts "
        f"{t['outcome']['timeouts']}; ns-3 drops {n['outcome']['bottleneck_drops']}, timeouts "
        f"{n['outcome']['timeouts']} (ns-3 runs NewReno where thinwan runs Reno)",
        f"machine: {r['machine']['cpu']}, {r['machine']['cpus']} CPUs, load "
        f"{r['machine']['loadavg_before'][0]:.2f} -> {r['machine']['loadavg_after'][0]:.2f}",
    ]
    if (w["ns3_writes_replayed"], w["ns3_bytes_replayed"]) != (w["writes"], w["bytes_written"]):
        lines.append(
            f"WARNING: ns-3 replayed {w['ns3_writes_replayed']} writes / "
            f"{w['ns3_bytes_replayed']} B, thinwan wrote {w['writes']} / "
            f"{w['bytes_written']} B"
        )
    if n["warnings"]:
        lines.append("ns-3 cannot reproduce: " + "; ".join(n["warnings"]))
    return "\n".join(lines)


def markdown(r: dict[str, Any]) -> str:
    w, t, n, q = r["workload"], r["thinwan"], r["ns3"], r["ratios"]
    head = (
        f"Workload: `{w['scenario']}`, {w['pairs']} pairs × {w['duration_s']:g} s "
        f"(+{w['drain_s']:g} s drain), 1 run, {w['writes']:,} writes; "
        f"{r['machine']['cpu']}, {r['machine']['cpus']} CPUs, {r['machine']['date']}."
    )
    rows = [
        "| simulator | simulation only (s) | whole command (s) | events | events/s |",
        "|---|---:|---:|---:|---:|",
        f"| thinwan {t['version']} (`{(t['git_rev'] or '')[:8]}`) | {t['simulate_s']:.3f} "
        f"| {t['whole_s']:.2f} | {t['events']:,} | {_rate(t['events_per_s'])} |",
        f"| ns-3 3.44 (PyPI, cppyy) | {n['run_s']:.3f} | {n['whole_s']:.2f} "
        f"| {n['events']:,} | {_rate(n['events_per_s'])} |",
        f"| **ns-3 / thinwan** | **{_x(q['ns3_run_over_thinwan_simulate'])}** "
        f"| **{_x(q['ns3_whole_over_thinwan_whole'])}** | | |",
    ]
    foot = (
        "Simulation only: thinwan `meta.json` `wall_s`; ns-3 `Simulator::Run()`. Whole: "
        "`thinwan run … --runs 1 --json` (incl. records and report) vs `dumbbell.py` "
        "(incl. ~8 s of ns-3 import and C++ JIT). ns-3 counts every popped event, "
        "cancelled timers included, and runs NewReno for Reno: compare times, not events."
    )
    return "\n".join([head, "", *rows, "", foot])


def _rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v / 1e6:.2f} M/s" if v >= 1e6 else f"{v / 1e3:.0f} k/s"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}×"


if __name__ == "__main__":
    sys.exit(main())

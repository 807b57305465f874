"""Simulator scaling and memory benchmark (issue: simulator core, "Speed").

- Scaling: the base thin-client dumbbell with 100, 1,000 and 10,000 pairs for 60 s, the
  bottleneck scaled with the pair count (10 Mbit/s per 100 pairs, buffer likewise), one
  run each, in this process. Reports events, packets, wall time, events/s and ns per
  packet; cost should grow about linearly with packets simulated.
- Memory: peak RSS of the whole `thinwan run scenarios/ogawa2011/large-buffer.toml
  --runs 1` command with full records (traces on), measured over the process tree.

Each size runs `--repeat` times (default 3) and the fastest run counts: the machine is
shared, and a slower run measures the neighbours, not the simulator.

Usage: .venv/bin/python bench/bench_scaling.py [--pairs 100,1000,10000] [--duration 60]
       [--repeat 3] [--out bench/results/scaling.json] [--skip-memory]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import thinwan
import thinwan._native as native
from thinwan.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "scenarios/ogawa2011/large-buffer.toml"


def scaled(pairs: int, duration: float):
    k = pairs / 100
    sc = load_scenario(BASE)
    return sc.with_values({
        "topology.pairs": pairs,
        "topology.bottleneck_rate_mbps": 10.0 * k,
        "queue.limit_bytes": int(2_500_000 * k),
        "scenario.duration_s": duration,
        "scenario.runs": 1,
        "records.traces": False,
    })


def scaling(pairs_list: list[int], duration: float, repeat: int) -> list[dict]:
    rows = []
    for pairs in pairs_list:
        config = scaled(pairs, duration).to_native_json()
        best = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = native.simulate(config, 0)
            wall = time.perf_counter() - t0
            if best is None or r["meta"]["wall_s"] < best[0]["meta"]["wall_s"]:
                best = (r, wall)
            del r
        r, wall = best
        meta = r["meta"]
        packets = meta["packets"]["created"]
        rows.append({
            "pairs": pairs,
            "duration_s": duration,
            "events": meta["events"],
            "packets": packets,
            "messages": int(len(r["messages"]["conn"])),
            "sim_wall_s": meta["wall_s"],
            "call_wall_s": wall,
            "events_per_s": meta["events"] / meta["wall_s"],
            "ns_per_packet": meta["wall_s"] * 1e9 / packets,
            "repeat": repeat,
        })
        print(f"pairs={pairs:>6}  events={meta['events']:>11,}  packets={packets:>10,}  "
              f"sim={meta['wall_s']:7.2f}s  {rows[-1]['events_per_s']/1e6:5.2f} Mev/s  "
              f"{rows[-1]['ns_per_packet']:6.0f} ns/packet", file=sys.stderr)
        del r, best
    return rows


def memory() -> dict:
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.perf_counter()
        subprocess.run([str(ROOT / ".venv/bin/thinwan"), "run", str(BASE), "--runs", "1",
                        "--out", out, "--json"], check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    row = {"command": "thinwan run scenarios/ogawa2011/large-buffer.toml --runs 1",
           "peak_rss_mb": peak_kb / 1024, "wall_s": wall,
           "note": "max over the command's processes (ru_maxrss of waited-for children)"}
    if before > peak_kb:
        row["note"] += "; an earlier child was larger, figure is an upper bound"
    print(f"peak RSS {row['peak_rss_mb']:.0f} MB, whole command {wall:.1f} s", file=sys.stderr)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", default="100,1000,10000")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--out", default=str(ROOT / "bench/results/scaling.json"))
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the fastest counts")
    ap.add_argument("--skip-memory", action="store_true")
    a = ap.parse_args()
    res: dict = {"version": thinwan.__version__, "cpu_count": os.cpu_count()}
    # Memory first: a child forked from this process once it holds a big run would count
    # the parent's pages in its own peak RSS.
    if not a.skip_memory:
        res["memory"] = memory()
    res["scaling"] = scaling([int(x) for x in a.pairs.split(",")], a.duration, a.repeat)
    base = res["scaling"][0]
    for row in res["scaling"]:
        row["cost_per_packet_vs_smallest"] = row["ns_per_packet"] / base["ns_per_packet"]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()

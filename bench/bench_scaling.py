"""Simulator scaling and memory benchmark (issue: simulator core, "Speed").

- Scaling: the base thin-client dumbbell with 100, 1,000 and 10,000 pairs for 60 s, the
  bottleneck scaled with the pair count (10 Mbit/s per 100 pairs, buffer likewise), one
  run each, in this process. Reports events, packets, wall time, events/s and ns per
  packet; cost should grow about linearly with packets simulated.
  The summary fits cost = a * packets^b over the sizes (least squares on logs): b = 1
  is linear; it also gives b between consecutive sizes.
- Reference (`--ns3 100,1000`, off by default: ns-3 needs minutes per 1,000 pairs): the
  same scaled workloads for `--ns3-duration` seconds in thinwan and in ns-3
  (bench_vs_ns3.py: ns-3 replays thinwan's writes over the same dumbbell), so that how
  each simulator's cost grows is measured in one run. Cost is normalised by thinwan's
  packet count for both (the same offered load; ns-3 counts packets differently). Needs
  the ns-3 wheel (`THINWAN_EXTRAS=test,ns3 bash scripts/setup.sh`).
- Memory: peak RSS of the whole `thinwan run scenarios/ogawa2011/large-buffer.toml
  --runs 1` command with full records (traces on), measured over the process tree.

Each size runs `--repeat` times (default 3) and the fastest run counts: the machine is
shared, and a slower run measures the neighbours, not the simulator.

Usage: .venv/bin/python -m bench.bench_scaling [--pairs 100,1000,10000] [--duration 60]
       [--repeat 3] [--out bench/results/scaling.json] [--skip-memory]
       [--ns3 100,1000] [--ns3-duration 20]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import thinwan._native as native

import thinwan
from bench import bench_vs_ns3
from thinwan.config.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "scenarios/ogawa2011/large-buffer.toml"


def scaled(pairs: int, duration: float):
    k = pairs / 100
    sc = load_scenario(BASE)
    return sc.with_values(
        {
            "topology.pairs": pairs,
            "topology.bottleneck_rate_mbps": 10.0 * k,
            "queue.limit_bytes": int(2_500_000 * k),
            "scenario.duration_s": duration,
            "scenario.runs": 1,
            "records.traces": False,
        }
    )


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
        rows.append(
            {
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
            }
        )
        print(
            f"pairs={pairs:>6}  events={meta['events']:>11,}  packets={packets:>10,}  "
            f"sim={meta['wall_s']:7.2f}s  {rows[-1]['events_per_s'] / 1e6:5.2f} Mev/s  "
            f"{rows[-1]['ns_per_packet']:6.0f} ns/packet",
            file=sys.stderr,
        )
        del r, best
    return rows


def exponent(rows: list[dict], cost: str = "sim_wall_s") -> float:
    """b of cost = a * packets^b, fitted by least squares on the logs of `rows`."""
    xs = [math.log(r["packets"]) for r in rows]
    ys = [math.log(r[cost]) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def exponents(rows: list[dict], cost: str = "sim_wall_s") -> dict:
    """The fitted exponent over all rows, and between each consecutive pair of sizes."""
    out = {"all": exponent(rows, cost)} if len(rows) > 1 else {}
    for a, b in zip(rows, rows[1:]):
        out[f"{a['pairs']}-{b['pairs']}"] = exponent([a, b], cost)
    return out


def ns3_reference(pairs_list: list[int], duration: float) -> list[dict]:
    """Each scaled workload in thinwan and in ns-3, by bench_vs_ns3.py's method."""
    rows = []
    for pairs in pairs_list:
        with tempfile.TemporaryDirectory(prefix="bench_scaling_ns3_") as tmp:
            path = Path(tmp) / f"scaled-{pairs}.toml"
            path.write_text(scaled(pairs, duration).to_toml())
            print(f"ns-3 reference: {pairs} pairs x {duration:g} s ...", file=sys.stderr, flush=True)
            args = argparse.Namespace(scenario=path, pairs=None, duration=None)
            r = bench_vs_ns3.bench(args, Path(tmp))
        packets = r["thinwan"]["packets"]
        rows.append(
            {
                "pairs": pairs,
                "duration_s": duration,
                "packets": packets,
                "thinwan_simulate_s": r["thinwan"]["simulate_s"],
                "ns3_run_s": r["ns3"]["run_s"],
                "ns3_events": r["ns3"]["events"],
                "thinwan_ns_per_packet": r["thinwan"]["simulate_s"] * 1e9 / packets,
                "ns3_ns_per_packet": r["ns3"]["run_s"] * 1e9 / packets,
                "ns3_over_thinwan": r["ratios"]["ns3_run_over_thinwan_simulate"],
                "ns3_version": r["ns3"]["version"],
                "loadavg": [r["machine"]["loadavg_before"], r["machine"]["loadavg_after"]],
            }
        )
        print(
            f"  thinwan {rows[-1]['thinwan_ns_per_packet']:8.0f} ns/packet   "
            f"ns-3 {rows[-1]['ns3_ns_per_packet']:10.0f} ns/packet",
            file=sys.stderr,
        )
    for k in ("thinwan", "ns3"):
        vs_smallest(rows, f"{k}_ns_per_packet", f"{k}_cost_per_packet_vs_smallest")
    return rows


def vs_smallest(rows: list[dict], key: str, out: str) -> None:
    """Set `out` in each row to its `key` over the first (smallest) row's."""
    for row in rows:
        row[out] = row[key] / rows[0][key]


def pair_counts(text: str) -> list[int]:
    """A comma-separated list of pair counts, e.g. 100,1000."""
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of pair counts (e.g. 100,1000)")
    return counts


def memory() -> dict:
    with tempfile.TemporaryDirectory() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.perf_counter()
        subprocess.run(
            [str(ROOT / ".venv/bin/thinwan"), "run", str(BASE), "--runs", "1", "--out", out, "--json"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    row = {
        "command": "thinwan run scenarios/ogawa2011/large-buffer.toml --runs 1",
        "peak_rss_mb": peak_kb / 1024,
        "wall_s": wall,
        "note": "max over the command's processes (ru_maxrss of waited-for children)",
    }
    if before > peak_kb:
        row["note"] += "; an earlier child was larger, figure is an upper bound"
    print(f"peak RSS {row['peak_rss_mb']:.0f} MB, whole command {wall:.1f} s", file=sys.stderr)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", default="100,1000,10000", type=pair_counts, help="sizes, comma-separated")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--out", default=str(ROOT / "bench/results/scaling.json"))
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the fastest counts")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument(
        "--ns3",
        metavar="PAIRS",
        type=pair_counts,
        default=[],
        help="also run these sizes in thinwan and ns-3 (e.g. 100,1000; minutes each)",
    )
    ap.add_argument("--ns3-duration", type=float, default=20.0, help="simulated seconds of the ns-3 reference")
    a = ap.parse_args()
    res: dict = {"version": thinwan.__version__, "cpu_count": os.cpu_count()}
    # Memory first: a child forked from this process once it holds a big run would count
    # the parent's pages in its own peak RSS.
    if not a.skip_memory:
        res["memory"] = memory()
    res["scaling"] = scaling(a.pairs, a.duration, a.repeat)
    vs_smallest(res["scaling"], "ns_per_packet", "cost_per_packet_vs_smallest")
    res["exponent"] = exponents(res["scaling"])
    if a.ns3:
        ref = ns3_reference(a.ns3, a.ns3_duration)
        res["ns3_reference"] = {
            "rows": ref,
            "exponent_thinwan": exponents(ref, "thinwan_simulate_s"),
            "exponent_ns3": exponents(ref, "ns3_run_s"),
        }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    fits = ", ".join(f"{k}: {v:.2f}" for k, v in res["exponent"].items())
    print(f"cost ~ packets^b: {fits}", file=sys.stderr)
    if a.ns3:
        for k in ("thinwan", "ns3"):
            fits = ", ".join(f"{p}: {v:.2f}" for p, v in res["ns3_reference"][f"exponent_{k}"].items())
            print(f"reference, {k}: cost ~ packets^b: {fits}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""What `[records] pcap` costs a simulated run: ns per captured packet and bytes per packet.

    .venv/bin/python -m bench.fit.pcap_cost [--duration 300] [--repeat 7] [--before OLD.so]

Runs the large-buffer base scenario (100 pairs) with `records.pcap` off and at each
point, alternating, `--repeat` times each; the fastest run of each counts, timed in this
thread's CPU time (the simulator runs in the calling thread), which a shared machine's
load disturbs far less than wall time does. The cost per packet is (fastest with − fastest without) / packets captured,
so it includes encoding the headers and appending the record to the in-memory file, not
writing the file to disk (which the records writer does with the Parquet tables). With
``--before``, a build from before `records.pcap` existed runs the same scenario without
it, alternating with this one: what the pcap hooks cost a run that does not capture.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench._native_loader import load_native
from thinwan import _native
from thinwan.config.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
POINTS = ("none", "server", "client", "bottleneck")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=300.0, help="scenario.duration_s (default 300)")
    ap.add_argument("--repeat", type=int, default=7, help="runs per point (default 7)")
    ap.add_argument("--before", help="a _native.abi3.so built before records.pcap, to time without it")
    a = ap.parse_args()
    base = load_scenario(ROOT / "scenarios" / "ogawa2011" / "large-buffer.toml")
    old = load_native(a.before) if a.before else None
    old_best = float("inf")
    best: dict[str, float] = {}
    packets: dict[str, int] = {}
    size: dict[str, int] = {}
    for _ in range(a.repeat):
        if old is not None:
            # The old build has no records.pcap key: its JSON is the scenario without it.
            sc = base.with_values({"scenario.duration_s": a.duration})
            doc = json.loads(sc.to_native_json())
            for k in ("pcap", "pcap_conns"):
                doc["records"].pop(k)
            t0 = time.thread_time()
            old.simulate(json.dumps(doc), 0)
            old_best = min(old_best, time.thread_time() - t0)
        for point in POINTS:
            sc = base.with_values({"scenario.duration_s": a.duration, "records.pcap": point})
            text = sc.to_native_json()
            t0 = time.thread_time()
            out = _native.simulate(text, 0)
            wall = time.thread_time() - t0
            best[point] = min(best.get(point, wall), wall)
            cap = out.get("pcap")
            packets[point] = cap["packets"] if cap else 0
            size[point] = len(cap["bytes"]) if cap else 0
    result = {"duration_s": a.duration, "repeat": a.repeat, "cpu_s_fastest": best, "points": {}}
    print(f"without pcap: {best['none']:.3f} s")
    if old is not None:
        result["before_cpu_s_fastest"] = old_best
        print(f"without pcap, build before it: {old_best:.3f} s ({best['none'] / old_best - 1:+.1%} now)")
    for point in POINTS[1:]:
        n = packets[point]
        ns = (best[point] - best["none"]) / n * 1e9
        per = size[point] / n
        result["points"][point] = {"packets": n, "ns_per_packet": ns, "bytes_per_packet": per}
        print(f"{point:>10}: {best[point]:.3f} s, {n:,} packets, {ns:.0f} ns/packet, {per:.1f} bytes/packet")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

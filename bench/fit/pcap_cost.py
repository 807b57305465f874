"""What `[records] pcap` costs a simulated run: ns per captured packet and bytes per packet.

    .venv/bin/python -m bench.fit.pcap_cost [--duration 60] [--repeat 5]

Runs the large-buffer base scenario (100 pairs) with `records.pcap` off and at each
point, alternating, `--repeat` times each; the fastest run of each counts (the machine
is shared). The cost per packet is (fastest with − fastest without) / packets captured,
so it includes encoding the headers and appending the record to the in-memory file, not
writing the file to disk (which the records writer does with the Parquet tables).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from thinwan import _native
from thinwan.config.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
POINTS = ("none", "server", "client", "bottleneck")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=60.0, help="scenario.duration_s (default 60)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per point (default 5)")
    a = ap.parse_args()
    base = load_scenario(ROOT / "scenarios" / "ogawa2011" / "large-buffer.toml")
    best: dict[str, float] = {}
    packets: dict[str, int] = {}
    size: dict[str, int] = {}
    for _ in range(a.repeat):
        for point in POINTS:
            sc = base.with_values({"scenario.duration_s": a.duration, "records.pcap": point})
            out = _native.simulate(sc.to_native_json(), 0)
            wall = out["meta"]["wall_s"]
            best[point] = min(best.get(point, wall), wall)
            cap = out.get("pcap")
            packets[point] = cap["packets"] if cap else 0
            size[point] = len(cap["bytes"]) if cap else 0
    result = {"duration_s": a.duration, "repeat": a.repeat, "wall_s_fastest": best, "points": {}}
    print(f"without pcap: {best['none']:.3f} s")
    for point in POINTS[1:]:
        n = packets[point]
        ns = (best[point] - best["none"]) / n * 1e9
        per = size[point] / n
        result["points"][point] = {"packets": n, "ns_per_packet": ns, "bytes_per_packet": per}
        print(f"{point:>10}: {best[point]:.3f} s, {n:,} packets, {ns:.0f} ns/packet, {per:.1f} bytes/packet")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

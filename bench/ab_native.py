"""Time two (or more) builds of the simulator against each other in one process.

The machine is shared and noisy, so a change is measured against the build before it in
the same process, alternating runs, the fastest of `--repeat` counting for each:

    .venv/bin/python -m bench.ab_native before.so after.so --sizes 1000x60,10000x20

Sizes are PAIRSxSECONDS of bench_scaling.py's workload (the base thin-client dumbbell,
bottleneck scaled with the pairs). Prints ns per simulated packet, and for each build
after the first the median over repeats of its time divided by the first build's in the
same round: the neighbours' load comes in phases longer than a round, and a ratio taken
within one round cancels most of it.
"""

from __future__ import annotations

import argparse
import gc
import statistics
from pathlib import Path

from bench._native_loader import load_native, sizes
from bench.bench_scaling import scaled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("natives", nargs="+", help="built thinwan/_native.abi3.so files")
    ap.add_argument("--sizes", default="1000x60,10000x20", type=sizes, help="comma-separated PAIRSxSECONDS")
    ap.add_argument("--repeat", type=int, default=3, help="runs per build and size; the fastest counts")
    a = ap.parse_args()
    modules = [load_native(p) for p in a.natives]
    names = [Path(p).name for p in a.natives]
    for pairs, seconds in a.sizes:
        config = scaled(pairs, seconds).to_native_json()
        rounds = []
        for _ in range(a.repeat):
            ns = []
            for m in modules:
                meta = m.simulate(config, 0)["meta"]
                ns.append(meta["wall_s"] * 1e9 / meta["packets"]["created"])
                gc.collect()
            rounds.append(ns)
        best = [min(r[i] for r in rounds) for i in range(len(modules))]
        cells = "  ".join(f"{n}={b:.0f}" for n, b in zip(names, best))
        ratios = "  ".join(
            f"{n}/{names[0]}={statistics.median(r[i] / r[0] for r in rounds):.3f}" for i, n in enumerate(names) if i > 0
        )
        if ratios:
            ratios = f"  {ratios}  (median ratio)"
        print(f"{pairs:>6} pairs x {seconds:g} s: {cells}  (ns/packet, fastest){ratios}", flush=True)


if __name__ == "__main__":
    main()

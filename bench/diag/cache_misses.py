"""Cache misses and instructions per simulated packet, counted by Cachegrind: the same
numbers on every run, whatever the neighbours on this shared machine are doing.

A diagnostic for changes to the simulator's memory footprint, whose effect on wall
time (a few per cent) drowns in this machine's noise (±10 % between minutes). For each
build and each size it runs the scaled base workload (bench_scaling.py's) under
`valgrind --tool=cachegrind --cache-sim=yes` twice, for S and 2·S simulated seconds,
and reports the *difference* divided by the difference in packets, so that start-up
(building 10⁴ pairs) and the records' conversion at the end cancel out:

    .venv/bin/python -m bench.diag.cache_misses OLD.so NEW.so [--sizes 1000x20,10000x4]
        [--ll-kb 4096] [--jobs 2]

(from the repository root). What a larger per-connection state would cost: NEW.so built
with the simulator's `diag-footprint-pad` feature (six more cache lines per connection,
touched by every ACK and transmission at the server), OLD.so without:

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -q --features diag-footprint-pad
    cp python/thinwan/_native.abi3.so /tmp/pad.so
    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -q
    cp python/thinwan/_native.abi3.so /tmp/base.so
    .venv/bin/python -m bench.diag.cache_misses /tmp/base.so /tmp/pad.so

Columns: instructions (Ir), first-level data misses (D1mr + D1mw) and last-level data
misses (DLmr + DLmw) per packet. Cachegrind models one first level and one last level
(`--ll-kb`, default 4096: where this VM's load latency leaves the caches,
`bench/diag/mem_latency.c`) and ignores prefetch instructions, so the LL misses count
the lines a packet's events touch that a cache of that size would not hold — the
footprint, not the stall time. Needs valgrind (`apt-get install valgrind`); each
10,000-pair run takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench._native_loader import child_code, sizes

# Cachegrind's summary: "==PID== I   refs:      1,234" and "==PID== D1  misses: 12 (10 rd + 2 wr)".
SUMMARY = {
    "Ir": re.compile(r"I\s+refs:\s+([\d,]+)"),
    "D1": re.compile(r"D1\s+misses:\s+([\d,]+)"),
    "LLd": re.compile(r"LLd misses:\s+([\d,]+)"),
}


def measure(so: Path, pairs: int, seconds: float, ll_bytes: int) -> dict[str, int]:
    """Totals of one run under Cachegrind, and its packet count."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=yes",
            f"--LL={ll_bytes},16,64",
            f"--cachegrind-out-file={tmp}/cg.out",
            sys.executable,
            "-c",
            child_code(so, pairs, seconds),
        ]
        # One BLAS thread: NumPy's idle OpenBLAS threads otherwise spin under Cachegrind
        # (which runs threads one at a time) and add 0–200 instructions per packet.
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"error: {so} at {pairs} pairs x {seconds:g} s: valgrind exited {p.returncode}:\n{p.stderr[-2000:]}")
    out = {"packets": int(p.stdout.split()[-1])}
    for key, rx in SUMMARY.items():
        m = rx.search(p.stderr)
        if not m:
            sys.exit(f"error: no '{key}' line in Cachegrind's summary for {so} (valgrind too old?)")
        out[key] = int(m.group(1).replace(",", ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("natives", nargs="+", type=Path, help="built thinwan/_native.abi3.so files")
    ap.add_argument(
        "--sizes",
        default="1000x20,10000x4",
        type=sizes,
        help="comma-separated PAIRSxSECONDS; each runs for S and 2·S seconds (default 1000x20,10000x4)",
    )
    ap.add_argument("--ll-kb", type=int, default=4096, help="simulated last-level cache, KB (default 4096)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("error: valgrind not found (apt-get install valgrind)")
    for so in a.natives:
        if not so.is_file():
            sys.exit(f"error: {so}: no such file")
    runs = [(so, pairs, s * k) for pairs, s in a.sizes for so in a.natives for k in (1, 2)]
    with ThreadPoolExecutor(a.jobs) as pool:
        results = dict(zip(runs, pool.map(lambda r: measure(*r, a.ll_kb * 1024), runs)))
    print(f"per packet, steady state (runs of S and 2·S s differenced), LL = {a.ll_kb} KB")
    print(f"{'build':>24} {'pairs':>7} {'packets':>10} {'instr':>8} {'D1 miss':>8} {'LL miss':>8}")
    for pairs, s in a.sizes:
        for so in a.natives:
            short, long = results[(so, pairs, s)], results[(so, pairs, 2 * s)]
            n = long["packets"] - short["packets"]
            per = {k: (long[k] - short[k]) / n for k in SUMMARY}
            print(
                f"{so.name:>24} {pairs:>7} {n:>10} {per['Ir']:>8.0f} {per['D1']:>8.2f} {per['LLd']:>8.2f}", flush=True
            )


if __name__ == "__main__":
    main()

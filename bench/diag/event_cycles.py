"""Where the per-packet cost grows with the pair count: TSC cycles per event kind.

A diagnostic, not a benchmark: it needs a build with the simulator's `diag-event-cycles`
cargo feature (it times every event with RDTSC, which itself costs ~10 % and moves the
numbers a little), and prints, for the scaled base workload at two sizes, the cycles per
event of each kind and their share per simulated packet. From the repository root:

    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -q --features diag-event-cycles
    cp python/thinwan/_native.abi3.so /tmp/cycles.so
    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin develop --release -q   # the plain build back
    .venv/bin/python -m bench.diag.event_cycles /tmp/cycles.so [--sizes 1000x60,10000x60]

A kind's cycles include the pop of the event after it. Arrivals are split by where the
packet arrives: a router (R1, R2) or its endpoint (client, server). The feature also times
the parts of a write and of an ACK at the server (`SECTIONS`; a segment's transmission
and its first port are counted whoever sends it, a write or an ACK), printed per packet
in a second table.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

from bench._native_loader import child_code, sizes

KINDS = [
    "write",
    "port free",
    "data @R1",
    "data @R2",
    "data @client",
    "ack @R2",
    "ack @R1",
    "ack @server",
    "RTO timer",
    "delACK timer",
]
# The feature's sections (crates/sim/src/world/diag.rs `Section`), in order.
SECTIONS = [
    "write: source, calendar",
    "write: TCP write, row",
    "write: transmit (all)",
    "transmit: poll_transmit",
    "transmit: mark rows",
    "transmit: send",
    "transmit: arm timer",
    "transmit: trace",
    "ack: Sender::handle_ack",
    "ack: acked cursor",
    "ack: blocked writes",
    "ack: transmit (all)",
    "send: slab, log",
    "send: read port",
    "send: idle port",
    "send: queue",
]


def measure(so: str, pairs: int, seconds: float) -> tuple[dict[int, list[int]], int]:
    """One run in a fresh process (the counters are per thread and never reset)."""
    out = subprocess.run(
        [sys.executable, "-c", child_code(so, pairs, seconds)], capture_output=True, text=True, check=True
    )
    rows = {int(m[1]): [int(x) for x in m[2].split(",")] for m in re.finditer(r"row(\d) \[(.*)\]", out.stderr)}
    if set(rows) != {0, 1, 2, 3}:
        sys.exit(f"event_cycles: {so} printed no counters: was it built with --features diag-event-cycles?")
    sec = re.search(r"^sec \[(.*)\]", out.stderr, re.M)
    rows[4] = [int(x) for x in sec[1].split(",")] if sec else []
    return rows, int(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("native", help="a _native.abi3.so built with --features diag-event-cycles")
    ap.add_argument("--sizes", default="1000x60,10000x60", type=sizes, help="two PAIRSxSECONDS, small then large")
    ap.add_argument("--repeat", type=int, default=2, help="runs per size; the cheapest counts")
    a = ap.parse_args()
    if len(a.sizes) != 2:
        ap.error(f"--sizes: give two PAIRSxSECONDS (e.g. 1000x60,10000x60), not {len(a.sizes)}")
    res = []
    for pairs, seconds in a.sizes:
        runs = [measure(a.native, pairs, seconds) for _ in range(a.repeat)]
        res.append(min(runs, key=lambda r: (sum(r[0][1]) + sum(r[0][2])) / r[1]))
    (small, pk_s), (large, pk_l) = res
    (n_s, _), (n_l, _) = a.sizes
    print(f"{'kind':13} {'per packet':>10} {'cycles/event':>25} {'cycles/packet':>25}")
    print(f"{'':13} {'':>10} {n_s:>8} {n_l:>8} {'':>7} {n_s:>8} {n_l:>8} {'growth':>7}")
    for k, name in enumerate(KINDS):
        if large[3][k] == 0:
            continue
        cs, cl = small[1][k] + small[2][k], large[1][k] + large[2][k]
        print(
            f"{name:13} {large[3][k] / pk_l:10.2f} {cs / max(small[3][k], 1):8.0f} {cl / large[3][k]:8.0f} "
            f"{'':>7} {cs / pk_s:8.0f} {cl / pk_l:8.0f} {cl / pk_l - cs / pk_s:+7.0f}"
        )
    ts, tl = (sum(small[1]) + sum(small[2])) / pk_s, (sum(large[1]) + sum(large[2])) / pk_l
    print(f"{'all':13} {'':>10} {'':>8} {'':>8} {'':>7} {ts:8.0f} {tl:8.0f} {tl - ts:+7.0f}  (ratio {tl / ts:.2f})")
    if small[4] and large[4]:
        print(f"\n{'section':26} {'cycles/packet':>17}")
        print(f"{'':26} {n_s:>8} {n_l:>8} {'growth':>7}")
        for name, cs, cl in zip(SECTIONS, small[4], large[4]):
            print(f"{name:26} {cs / pk_s:8.0f} {cl / pk_l:8.0f} {cl / pk_l - cs / pk_s:+7.0f}")


if __name__ == "__main__":
    main()

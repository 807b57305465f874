"""Hash every records table of a set of scenarios, run with one build of the simulator.

A change meant to make the simulator faster without changing what it computes must give
the same digests before and after:

    .venv/bin/python -m bench.records_digest before.so
    .venv/bin/python -m bench.records_digest after.so

Scenarios: both Ogawa buffers (with a packet log), separate connections, priority queue
with SACK and RACK-TLP, the proposed TCP fixes, the Carlmar base direct and through a
4-lane tunnel, a lossy jittered WAN link, and the 2,000-pair scaled workload of
bench_scaling.py (shortened to 10–30 s each).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

from bench._native_loader import load_native
from bench.bench_scaling import scaled
from thinwan.config.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("ogawa2011/large-buffer.toml", {"scenario.duration_s": 30.0, "records.packet_log_conns": [3, 7]}),
    ("ogawa2011/small-buffer.toml", {"scenario.duration_s": 30.0}),
    ("ogawa2011/small-buffer-separate.toml", {"scenario.duration_s": 30.0}),
    ("ogawa2011/small-buffer-prio-sack.toml", {"scenario.duration_s": 30.0, "tcp.rack_tlp": True}),
    ("ogawa2011/small-buffer-proposed.toml", {"scenario.duration_s": 30.0}),
    ("carlmar2011/base.toml", {"scenario.duration_s": 20.0}),
    ("carlmar2011/base.toml", {"scenario.duration_s": 20.0, "mux.mode": "mux", "mux.trunks": 4}),
    (
        "carlmar2011/base.toml",
        {"scenario.duration_s": 20.0, "topology.bottleneck_loss": 0.05, "topology.bottleneck_jitter_pct": 10.0},
    ),
]


def digest(result: dict) -> bytes:
    h = hashlib.sha256()
    for table in sorted(k for k in result if k != "meta"):
        value = result[table]
        if isinstance(value, dict):
            for col in sorted(value):
                x = value[col]
                h.update(col.encode())
                h.update(repr(x).encode() if isinstance(x, list) else np.asarray(x).tobytes())
        else:
            h.update(repr(value).encode())
    h.update(repr(result["meta"].get("packets")).encode())
    h.update(repr(result["meta"].get("events")).encode())
    return h.digest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("native", help="a built thinwan/_native.abi3.so")
    a = ap.parse_args()
    native = load_native(a.native)
    total = hashlib.sha256()
    scenarios = [(f, load_scenario(ROOT / "scenarios" / f).with_values(kv), kv) for f, kv in CASES]
    scenarios.append(("bench_scaling 2,000 pairs", scaled(2000, 10.0), {}))
    for name, sc, kv in scenarios:
        d = digest(native.simulate(sc.to_native_json(), 0))
        total.update(d)
        print(f"{d.hex()[:16]}  {name} {kv or ''}")
    print(f"all: {total.hexdigest()[:16]}")


if __name__ == "__main__":
    main()

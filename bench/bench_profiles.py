"""Simulator speed per TCP profile (issue 21: "each profile keeps the simulator within
1.5x of today's events per second on the base scenario").

    .venv/bin/python -m bench.bench_profiles [--repeat 5] [--scenario FILE]

Runs the base scenario (large-buffer.toml: 100 pairs, 300 s) once per profile and
round, alternating, in this process; a profile is set as a scenario layer would set it,
with the source's three application settings kept (Ogawa §3), as in
scenarios/ogawa2011/*-linux.toml. For each profile: events, the fastest simulation time,
events/s, and the median over rounds of its events/s divided by the reference's (the
first, the file as it is) in the same round — the machine's load comes in phases longer
than a round, and a ratio within one round cancels most of it. Writes
bench/results/profiles.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
from pathlib import Path
from typing import Any

from thinwan import _native
from thinwan.config.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "scenarios" / "ogawa2011" / "large-buffer.toml"
OGAWA_APP = {"tcp.nagle": False, "tcp.delayed_ack": False, "tcp.slow_start_restart": False}


def variants(base: Scenario) -> dict[str, Scenario]:
    """The reference (the file as it is) and each profile over it."""
    out = {"file": base}
    for profile in ("rfc", "linux", "ns2-fulltcp"):
        out[profile] = base.with_values({"tcp.profile": profile, **OGAWA_APP}, source="bench_profiles")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", type=Path, default=DEFAULT, help="base scenario TOML")
    p.add_argument("--repeat", type=int, default=5, help="rounds; the fastest run of each profile counts")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "profiles.json", help="JSON results")
    a = p.parse_args(argv)
    configs = {name: s.to_native_json() for name, s in variants(load_scenario(a.scenario)).items()}
    rounds: list[dict[str, dict[str, Any]]] = []
    for k in range(a.repeat):
        row = {}
        for name, config in configs.items():
            meta = _native.simulate(config, 0)["meta"]
            row[name] = {"events": meta["events"], "wall_s": meta["wall_s"]}
            gc.collect()
        rounds.append(row)
        print(f"round {k + 1}/{a.repeat}: " + "  ".join(f"{n} {r['wall_s']:.3f}s" for n, r in row.items()), flush=True)
    ref = next(iter(configs))
    result = {}
    for name in configs:
        events = rounds[0][name]["events"]
        best = min(r[name]["wall_s"] for r in rounds)
        ratio = statistics.median(
            (r[name]["events"] / r[name]["wall_s"]) / (r[ref]["events"] / r[ref]["wall_s"]) for r in rounds
        )
        result[name] = {"events": events, "best_wall_s": best, "events_per_s": events / best, "ratio_vs_file": ratio}
        print(
            f"{name:>12}: {events:>10,} events  {best:6.3f} s  {events / best / 1e6:5.2f} Mev/s  x{ratio:.3f} of file"
        )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"scenario": str(a.scenario), "repeat": a.repeat, "profiles": result}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

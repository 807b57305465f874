"""Where the time of one `thinwan run --runs 1` goes, phase by phase, in one process.

Usage: .venv/bin/python -m bench.bench_breakdown [SCENARIO.toml]  (default: the base
large-buffer scenario). Prints seconds per phase; the phases are the ones
`thinwan.runner.run_scenario` performs for a single run.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

t0 = time.perf_counter()
from thinwan import _native  # noqa: E402
from thinwan.analysis.digest import digest_run  # noqa: E402
from thinwan.analysis.metrics import summarize_runs  # noqa: E402
from thinwan.config.scenario import load_scenario  # noqa: E402
from thinwan.records.schema import RunRecords  # noqa: E402
from thinwan.report.run_page import html_report  # noqa: E402

phases = {"import thinwan (numpy, pandas, pyarrow, pydantic)": time.perf_counter() - t0}


def timed(name: str, f):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = f()
    phases[name] = time.perf_counter() - t
    return out


path = (
    sys.argv[1]
    if len(sys.argv) > 1
    else str(Path(__file__).resolve().parents[1] / "scenarios/ogawa2011/large-buffer.toml")
)
sc = timed("load scenario", lambda: load_scenario(path).with_overrides(runs=1))
raw = timed("simulate", lambda: _native.simulate(sc.to_native_json(), 0))
rec = timed("records from native", lambda: RunRecords.from_native(raw))
with tempfile.TemporaryDirectory() as d:
    timed("write Parquet", lambda: rec.write(Path(d) / "run-0"))
dig = timed("metrics digest", lambda: digest_run(rec, sc))
summary = summarize_runs([dig.summary])
timed("report: Plotly specs + HTML", lambda: html_report(sc, [dig], summary))
total = sum(phases.values())
for k, v in phases.items():
    print(f"{v:7.3f} s  {k}")
print(f"{total:7.3f} s  total (plus interpreter start-up)")

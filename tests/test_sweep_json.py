"""Pooled delay statistics of a tunnel sweep: per-run histograms (thinwan.delay_hist) and
the grid-point shape of ``thinwan sweep --json`` for sweeps that vary ``mux.mode``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from thinwan import _native
from thinwan.analysis.aggregate import point_entries
from thinwan.analysis.delay_hist import QUANTILES, delay_histogram, pooled_delay_stats_ms
from thinwan.analysis.metrics import message_delays
from thinwan.config.sweepfile import load_sweep
from thinwan.execute.sweeps import run_sweep
from thinwan.records.schema import RunRecords
from thinwan.report.sweep_page import write_sweep_report
from thinwan.report.text import comparison_table

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "scenarios" / "carlmar2011"
STATS = ("min", "q1", "median", "q3", "max", "p99", "p999")


def exact_ms(seconds: np.ndarray) -> dict[str, float]:
    return {k: float(np.quantile(seconds, q, method="inverted_cdf")) * 1000.0 for k, q in QUANTILES.items()}


def pooled(*samples: np.ndarray) -> dict[str, float]:
    finite_or_inf = [s[~np.isnan(s)] for s in samples]
    return pooled_delay_stats_ms(
        [delay_histogram(s) for s in samples],
        [float(s.min()) * 1000.0 for s in finite_or_inf],
        [float(s.max()) * 1000.0 for s in finite_or_inf],
    )


def test_pooled_quantiles_are_those_of_all_messages_within_a_bin() -> None:
    rng = np.random.default_rng(7)
    # Two runs that differ a lot: the mean of their medians is far from the pooled median.
    a, b = rng.lognormal(np.log(0.15), 0.3, 4000), rng.lognormal(np.log(0.6), 1.2, 1000)
    got, want = pooled(a, b), exact_ms(np.concatenate([a, b]))
    assert got["min"] == want["min"] and got["max"] == want["max"]
    for key in ("q1", "median", "q3", "p99", "p999"):
        assert got[key] == pytest.approx(want[key], rel=0.00025), key
    mean_of_medians = (np.median(a) + np.median(b)) / 2 * 1000.0
    assert abs(mean_of_medians - want["median"]) > 0.1 * want["median"]


def test_unread_messages_are_infinite_and_nan_ignored() -> None:
    run = np.concatenate([np.full(990, 0.2), np.full(10, math.inf), [math.nan]])
    got = pooled(run)
    assert got["max"] == math.inf and got["p999"] == math.inf
    assert got["p99"] == pytest.approx(200.0, rel=0.00025)
    assert delay_histogram(run)[1].sum() == 1000


def test_no_messages_gives_nan() -> None:
    assert all(math.isnan(v) for v in pooled_delay_stats_ms([delay_histogram([])], [math.nan], [math.nan]).values())


def write_tunnel_sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "mini.toml"
    sweep.write_text(
        f"""
[sweep]
base = "{GRID / "base.toml"}"
runs = 2
[set]
"topology.pairs" = 8
"scenario.duration_s" = 8.0
[vary]
"topology.bottleneck_delay_ms" = [100.0, 300.0]
[vary.config]
direct = {{ "mux.mode" = "direct" }}
mux-2 = {{ "mux.mode" = "mux", "mux.trunks" = 2 }}
"""
    )
    return sweep


def test_tunnel_sweep_document_pools_every_run_per_configuration(tmp_path: Path) -> None:
    sweep = load_sweep(write_tunnel_sweep(tmp_path))
    result = run_sweep(sweep, tmp_path / "out", jobs=1, progress=False)
    write_sweep_report(tmp_path / "out", sweep, result.frame, result.document)
    doc = result.document
    assert doc["configurations"]["axis"] == "config"
    assert [p["params"] for p in doc["points"]] == [
        {"topology.bottleneck_delay_ms": 100.0},
        {"topology.bottleneck_delay_ms": 300.0},
    ]
    for grid in doc["points"]:
        assert list(grid["configs"]) == ["direct", "mux-2"]
        for stats in grid["configs"].values():
            values = [stats[k] for k in STATS]
            assert values[:5] == sorted(values[:5]) and stats["p99"] <= stats["p999"] <= stats["max"]
            assert stats["summary"]["runs"] == 2
    assert len(point_entries(doc)) == len(sweep.points)
    # The pooled statistics are those of both runs' messages together.
    point = next(p for p in sweep.points if p.params == {"topology.bottleneck_delay_ms": 300.0, "config": "mux-2"})
    delays = []
    for run in range(2):
        records = RunRecords.from_native(_native.simulate(point.scenario.to_native_json(), run))
        e2e = message_delays(records.messages, point.scenario.scenario.duration_s)["end_to_end"].dropna()
        delays.append(e2e.to_numpy())
    want = exact_ms(np.concatenate(delays))
    got = doc["points"][1]["configs"]["mux-2"]
    assert got["messages"] == sum(len(d) for d in delays)
    for key in STATS:
        assert got[key] == pytest.approx(want[key], rel=0.00025), key
    html = (tmp_path / "out" / "report.html").read_text()
    assert "per grid point (box plots)" in html and "(lab)" not in html
    # The table the grid's targets compare leads the report and closes the CLI table:
    # median / p99 / max per grid point and configuration, the pooled figures above.
    cell = " / ".join(f"{got[k]:,.0f}" for k in ("median", "p99", "max"))
    assert html.index("End-to-end delay per grid point and configuration") < html.index("Configurations compared")
    assert f'<td class="num">{cell}</td>' in html
    text = comparison_table(sweep, doc).splitlines()
    at = text.index("End-to-end delay, ms: median / p99 / max of all messages of all runs")
    assert text[at + 2].split() == ["bottleneck_delay_ms", "direct", "mux-2"]
    assert text[-1].split()[0] == "300" and text[-1].endswith(cell)


def test_sweep_json_cli_prints_the_grid_document(tmp_path: Path) -> None:
    sweep = write_tunnel_sweep(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "thinwan",
            "sweep",
            str(sweep),
            "--out",
            str(tmp_path / "out"),
            "--json",
            "--quiet",
            "--jobs",
            "1",
            "--runs",
            "1",
            "--duration",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["runs"] == 1 and doc["substrate"] == "sim"
    assert {tuple(g["configs"]) for g in doc["points"]} == {("direct", "mux-2")}
    assert all(set(STATS) <= set(c) for g in doc["points"] for c in g["configs"].values())
    assert all(c["summary"]["runs"] == 1 for c in point_entries(doc))
    assert all("duration_s = 5.0" in f.read_text() for f in (tmp_path / "out" / "points").glob("*.toml"))


def test_duration_override_refuses_a_varied_duration(tmp_path: Path) -> None:
    sweep = tmp_path / "d.toml"
    sweep.write_text(f'[sweep]\nbase = "{GRID / "base.toml"}"\n[vary]\n"scenario.duration_s" = [5.0, 10.0]\n')
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", "sweep", str(sweep), "--duration", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "d.toml: --duration: scenario.duration_s is varied by an axis" in done.stderr


def test_keep_raw_without_the_lab_is_refused(tmp_path: Path) -> None:
    """The simulator writes no raw logs: `--keep-raw` without `--lab` is a mistake, said
    before anything runs."""
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", "sweep", str(GRID / "grid.toml"), "--keep-raw", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--keep-raw: the raw logs are the lab's; add --lab" in done.stderr
    assert not (tmp_path / "o").exists()

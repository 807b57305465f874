"""Sweeps: loading and validation, task results, local vs Dask, resume, CLI and report.

Everything that simulates uses a tiny base scenario (3 pairs, 2 s) so each task takes
a few tens of milliseconds; the time goes into starting worker processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

import thinwan
from thinwan.analysis.aggregate import CCDF_COLUMNS, CCDF_GRID_S, ccdf_on_grid, check_column_names, task_result
from thinwan.cli import main as thinwan_main
from thinwan.cli.sweep_cmd import add_sweep_subcommand
from thinwan.config.scenario import ScenarioError, load_scenario
from thinwan.config.sweepfile import SweepError, load_sweep
from thinwan.execute.sweeps import run_sweep, sweep_tasks
from thinwan.records.schema import RunRecords
from thinwan.report.sweep_page import figure_titles

REPO = Path(__file__).resolve().parents[1]
DELAY_SWEEP = REPO / "scenarios" / "ogawa2011" / "delay-sweep.toml"

BASE = """
[scenario]
duration_s = 2.0
drain_s = 1.0
runs = 1

[topology]
pairs = 3

[queue]
limit_bytes = 25000
limit_packets = 0
"""

# 2 delays × 2 configurations = 4 points, 2 runs each.
SWEEP = """
[sweep]
name = "mini"
description = "a tiny sweep for tests"
base = "base.toml"
runs = 2

[vary]
"topology.bottleneck_delay_ms" = [10, 50]

[vary.config]
sack = {}
reno = { "tcp.sack" = false, "tcp.recovery" = "reno" }
"""


def write_sweep(directory: Path, text: str = SWEEP, base: str = BASE, name: str = "mini.toml") -> Path:
    (directory / "base.toml").write_text(base)
    path = directory / name
    path.write_text(text)
    return path


# --- loading ------------------------------------------------------------------------------


def test_a_good_file_loads_into_the_cartesian_product(tmp_path: Path) -> None:
    sweep = load_sweep(write_sweep(tmp_path))
    assert (sweep.name, sweep.runs) == ("mini", 2)
    assert [a.name for a in sweep.axes] == ["topology.bottleneck_delay_ms", "config"]
    assert [p.name for p in sweep.points] == [
        "bottleneck_delay_ms=10,config=sack",
        "bottleneck_delay_ms=10,config=reno",
        "bottleneck_delay_ms=50,config=sack",
        "bottleneck_delay_ms=50,config=reno",
    ]
    reno50 = sweep.points[3]
    assert reno50.params == {"topology.bottleneck_delay_ms": 50, "config": "reno"}
    assert reno50.values == {"topology.bottleneck_delay_ms": 50.0, "tcp.sack": False, "tcp.recovery": "reno"}
    assert reno50.scenario.topology.bottleneck_delay_ms == 50.0
    assert reno50.scenario.tcp.sack is False
    assert reno50.scenario.scenario.runs == 2
    assert reno50.scenario.topology.pairs == 3  # from the base
    assert len({p.id for p in sweep.points}) == 4
    assert (sweep.x_axis, sweep.line_axis, sweep.panel_axes) == ("topology.bottleneck_delay_ms", "config", ())
    assert len(sweep_tasks(sweep)) == 8


def test_set_and_nested_keys_and_report_roles(tmp_path: Path) -> None:
    text = """
[sweep]
base = "base.toml"
[set]
"scenario.seed" = 5
tcp = { min_rto_ms = 300.0 }
[vary.buffer]
small = { queue.limit_bytes = 5000 }
large = { queue = { limit_bytes = 500000 } }
[vary.config]
a = {}
b = { "tcp.sack" = false }
[report]
lines = "buffer"
"""
    sweep = load_sweep(write_sweep(tmp_path, text, name="x.toml"))
    assert sweep.name == "x"  # the file stem
    assert sweep.runs == 1  # the base's
    assert sweep.fixed == {"scenario.seed": 5, "tcp.min_rto_ms": 300.0}
    assert [p.scenario.queue.limit_bytes for p in sweep.points] == [5000, 5000, 500000, 500000]
    assert all(p.scenario.scenario.seed == 5 and p.scenario.tcp.min_rto_ms == 300.0 for p in sweep.points)
    assert (sweep.x_axis, sweep.line_axis, sweep.panel_axes) == (None, "buffer", ("config",))


def test_point_ids_change_only_for_changed_points(tmp_path: Path) -> None:
    before = {p.name: p.id for p in load_sweep(write_sweep(tmp_path)).points}
    edited = SWEEP.replace('reno = { "tcp.sack" = false', 'reno = { "tcp.sack" = true')
    after = {p.name: p.id for p in load_sweep(write_sweep(tmp_path, edited)).points}
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"bottleneck_delay_ms=10,config=reno", "bottleneck_delay_ms=50,config=reno"}
    # More runs or another sweep name do not change what a run simulates.
    renamed = SWEEP.replace("runs = 2", "runs = 5").replace('name = "mini"', 'name = "other"')
    assert {p.name: p.id for p in load_sweep(write_sweep(tmp_path, renamed)).points} == before


def test_an_optional_key_left_unset_keeps_earlier_point_ids(tmp_path: Path) -> None:
    """A key added later with no value (None) is not hashed, so sweeps keep their ids and
    finished runs across versions; setting it is a change."""
    # The ids this sweep had before `mux.rto_min_ms` (an optional key) existed.
    earlier = {
        "bottleneck_delay_ms=10,config=sack": "15198695f3de",
        "bottleneck_delay_ms=10,config=reno": "d4a0edec9c27",
        "bottleneck_delay_ms=50,config=sack": "4dd8b53ea960",
        "bottleneck_delay_ms=50,config=reno": "f46c2fa86521",
    }
    sweep = load_sweep(write_sweep(tmp_path))
    assert all(p.scenario.mux.rto_min_ms is None for p in sweep.points)
    assert {p.name: p.id for p in sweep.points} == earlier
    edited = SWEEP.replace('reno = { "tcp.sack" = false', 'reno = { "tcp.sack" = false, "mux.rto_min_ms" = 50')
    after = {p.name: p.id for p in load_sweep(write_sweep(tmp_path, edited)).points}
    assert {name for name in earlier if earlier[name] != after[name]} == {
        "bottleneck_delay_ms=10,config=reno",
        "bottleneck_delay_ms=50,config=reno",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # an unknown key in a bundle: named with the bundle that holds it
        ('[vary.config]\na = {}\nb = { "tcp.sackk" = true }\n', "bad.toml: vary.config.b: tcp.sackk: unknown key"),
        ('[vary.config]\nb = { "tpc.sack" = true }\n', "bad.toml: vary.config.b: tpc.sack: unknown section"),
        # a bad value: named with the point whose scenario it breaks
        ('[vary.config]\na = {}\nb = { "tcp.sack" = "yes" }\n', "bad.toml: point config=b: tcp.sack:"),
        ('[vary]\n"tcp.min_rto_ms" = [100.0, -1.0]\n', "bad.toml: point min_rto_ms=-1: tcp.min_rto_ms:"),
        ('[vary]\n"topology.pairz" = [1, 2]\n', "bad.toml: vary: topology.pairz: unknown key"),
        ('[vary]\n"topology.pairs" = []\n', "empty list of values"),
        ('[vary]\n"topology.pairs" = [1, 2, 1]\n', "value 1 is listed twice"),
        ("[vary]\npairs = [1, 2]\n", 'name it "section.key"'),
        ("[vary]\ntopology.pairs = [1, 2]\n", 'quote it: "topology.pairs" = [...]'),
        ("[vary.config]\n", "vary.config: no bundles"),
        ('[vary.config]\nx = { "scenario.runs" = 3 }\n', "scenario.runs: cannot be set here (use 'runs' in [sweep])"),
        (
            '[vary]\n"queue.limit_bytes" = [1000, 2000]\n[vary.buffer]\nb = { "queue.limit_bytes" = 5 }\n',
            "vary: queue.limit_bytes is set both by axis queue.limit_bytes and by axis buffer",
        ),
        ('[set]\n"tcp.sack" = true\n[vary]\n"tcp.sack" = [true, false]\n', "set both by [set] and by axis tcp.sack"),
        ('[report]\nx = "config"\n[vary.config]\na = {}\n', "report.x: 'config' is not a plain axis of numbers"),
        ("[vary.run]\na = {}\n", "vary.run: this name is taken by a column of the results"),
        ("[vary.utilisation]\na = {}\n", "vary.utilisation: this name is taken by a column of the results"),
        ("[sweeps]\n", "sweeps: unknown section"),
        ("", "sweep: missing section"),
        ("[sweep]\nruns = 2\n", "sweep.base: missing key"),
        ('[sweep]\nbase = "base.toml"\nruns = 0\n', "sweep.runs: Input should be greater than or equal to 1"),
        ('[sweep]\nbase = "base.toml"\nrun = 2\n', "sweep.run: unknown key"),
        ("[sweep\n", "bad.toml: invalid TOML"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path: Path, text: str, expected: str) -> None:
    if not text.startswith("[sweep") and text:
        text = '[sweep]\nbase = "base.toml"\n' + text
    with pytest.raises(SweepError) as info:
        # Result column names are the analysis stage's: checked before anything runs.
        check_column_names(load_sweep(write_sweep(tmp_path, text, name="bad.toml")))
    assert expected in str(info.value)
    assert str(info.value).startswith(str(tmp_path / "bad.toml"))


def test_a_missing_base_or_sweep_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[sweep]\nbase = "nope/base.toml"\n')
    with pytest.raises(SweepError, match=r"s\.toml: sweep\.base: no such scenario file: .*nope/base\.toml"):
        load_sweep(path)
    with pytest.raises(SweepError, match=r"missing\.toml: no such file"):
        load_sweep(tmp_path / "missing.toml")


def test_a_bad_base_scenario_names_the_base_file(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, base="[tcp]\nmin_rto_ms = 0\n")
    with pytest.raises(ScenarioError, match=r"base\.toml: tcp\.min_rto_ms:"):
        load_sweep(path)


def test_the_delay_sweep_has_84_points() -> None:
    sweep = load_sweep(DELAY_SWEEP)
    assert len(sweep.points) == 6 * 7 * 2
    assert sweep.runs == 7
    assert [a.name for a in sweep.axes] == ["topology.bottleneck_delay_ms", "config", "buffer"]
    assert list(sweep.axis("config").labels) == [
        "none",
        "prio-sack",
        "proposed",
        "rack-tlp",
        "separate",
        "separate-prio-sack",
        "separate-proposed",
    ]
    assert (sweep.x_axis, sweep.line_axis, sweep.panel_axes) == ("topology.bottleneck_delay_ms", "config", ("buffer",))
    by_name = {p.name: p.scenario for p in sweep.points}
    none = by_name["bottleneck_delay_ms=7,config=none,buffer=small"]
    assert (none.queue.discipline, none.tcp.sack, none.queue.limit_bytes) == ("droptail", False, 25_000)
    assert none.topology.pairs == 100 and none.scenario.duration_s == 300.0  # large-buffer.toml
    proposed = by_name["bottleneck_delay_ms=70,config=proposed,buffer=large"]
    assert proposed.topology.bottleneck_delay_ms == 70.0
    assert proposed.queue.limit_bytes == 2_500_000
    assert (proposed.queue.discipline, proposed.tcp.sack, proposed.tcp.rtt_gain) == ("priority", True, "asymmetric")
    assert proposed.tcp.rto_reset_after_idle and proposed.tcp.sack_off_after_timeout
    assert not proposed.tcp.rack_tlp
    rack = by_name["bottleneck_delay_ms=20,config=rack-tlp,buffer=small"]
    assert rack.tcp.rack_tlp and rack.tcp.sack and rack.tcp.rtt_gain == "rfc6298"
    # Ogawa §6 case 2: at the base delay each separate-* bundle is its scenario file.
    for config in ("separate", "separate-prio-sack", "separate-proposed"):
        for buffer in ("small", "large"):
            point = by_name[f"bottleneck_delay_ms=20,config={config},buffer={buffer}"].model_dump()
            file = load_scenario(DELAY_SWEEP.parent / f"{buffer}-buffer-{config}.toml").model_dump()
            for s in (point, file):
                del s["scenario"]["name"], s["scenario"]["description"]
            assert point == file, (config, buffer)


# --- pure pieces --------------------------------------------------------------------------


def test_ccdf_on_grid() -> None:
    grid = np.array([0.001, 0.01, 0.1, 1.0])
    p = ccdf_on_grid([0.005, 0.05, 0.05, np.inf, np.nan], grid)
    assert p.dtype == np.float32
    np.testing.assert_allclose(p, [1.0, 0.75, 0.25, 0.25])  # inf counts, nan does not
    assert np.isnan(ccdf_on_grid([np.nan], grid)).all()
    assert CCDF_GRID_S[0] == pytest.approx(1e-4) and CCDF_GRID_S[-1] == pytest.approx(100.0)
    assert len(CCDF_GRID_S) == 121


def test_task_result_is_small(tmp_path: Path, fake_native: Callable[..., dict[str, Any]]) -> None:
    point = load_sweep(write_sweep(tmp_path)).points[0]
    result = task_result(RunRecords.from_native(fake_native(run=1)), point.scenario, 1)
    assert set(result["ccdf"]) == set(CCDF_COLUMNS)
    assert all(v.shape == CCDF_GRID_S.shape and v.dtype == np.float32 for v in result["ccdf"].values())
    assert {"r_I150", "r_I1000", "T_I150_s", "T_I1000_s", "timeouts_per_conn"} <= result["summary"].keys()
    assert (result["seed"], result["version"]) == (2, thinwan.__version__)
    as_lists = {
        **result,
        "ccdf": {k: v.tolist() for k, v in result["ccdf"].items()},
        "delay_hist": [a.tolist() for a in result["delay_hist"]],
    }
    assert len(json.dumps(as_lists)) < 50_000


# --- running ------------------------------------------------------------------------------


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=["wall_s", *CCDF_COLUMNS]).sort_values(["point_id", "run"]).reset_index(drop=True)


def test_local_and_dask_give_identical_rows(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    sweep = load_sweep(write_sweep(tmp_path))
    local = run_sweep(sweep, tmp_path / "local", jobs=2, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        remote = run_sweep(sweep, tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False)
    assert len(local.ran) == len(remote.ran) == 8
    a, b = local.frame.sort_values(["point_id", "run"]), remote.frame.sort_values(["point_id", "run"])
    pd.testing.assert_frame_equal(_comparable(a), _comparable(b))
    for column in CCDF_COLUMNS:
        for x, y in zip(a[column], b[column]):
            np.testing.assert_array_equal(x, y)
    # Same seeds, different seeds across runs: 1 and 2 at every point.
    assert sorted(a["seed"].unique()) == [1, 2]


def test_one_dataset_one_row_per_point_and_run(tmp_path: Path) -> None:
    sweep = load_sweep(write_sweep(tmp_path))
    result = run_sweep(sweep, tmp_path / "out", jobs=1, progress=False)
    table = ds.dataset(tmp_path / "out" / "runs.parquet", format="parquet").to_table()
    assert table.num_rows == 8
    frame = table.to_pandas()
    assert {"point_id", "point", "run", "seed", "version", "git_rev", "config", "topology.bottleneck_delay_ms",
            "tcp.sack", "tcp.recovery", "r_I150", "r_I1000", "T_I150_s", "T_I1000_s", "timeouts_per_conn",
            "spurious_timeouts_per_conn", "fast_retransmits_per_conn", "utilisation",
            "utilisation_interactive", *CCDF_COLUMNS} <= set(frame.columns)  # fmt: skip
    assert frame["version"].eq(thinwan.__version__).all()
    assert len(frame.iloc[0]["ccdf_interactive_router"]) == len(CCDF_GRID_S)
    assert set(frame["config"]) == {"sack", "reno"}
    # The delay grid travels in each file's metadata.
    grid = json.loads(ds.dataset(tmp_path / "out" / "runs.parquet").schema.metadata[b"thinwan.ccdf_grid_s"])
    np.testing.assert_allclose(grid, CCDF_GRID_S)
    # Each point's scenario is there, complete and runnable.
    for point in sweep.points:
        assert load_scenario(tmp_path / "out" / "points" / f"{point.id}.toml") == point.scenario
    assert result.reused == 0


def test_an_interrupted_sweep_resumes_without_redoing_finished_runs(tmp_path: Path) -> None:
    path = write_sweep(tmp_path)
    out = tmp_path / "out"
    first = run_sweep(load_sweep(path), out, jobs=1, progress=False)
    assert len(first.ran) == 8
    files = sorted((out / "runs.parquet").glob("*.parquet"))
    mtimes = {f.name: f.stat().st_mtime_ns for f in files}
    lost = files[3]
    lost.unlink()  # as if the sweep had been stopped before this task finished
    (out / "runs.parquet" / f".{files[0].name}.tmp-123-abcd").write_bytes(b"half")  # a crash's leftover

    second = run_sweep(load_sweep(path), out, jobs=1, progress=False)
    point_id, _, run = lost.stem.partition("-run")
    assert second.ran == [(point_id, int(run))]
    assert second.reused == 7
    for f in files:
        if f != lost:
            assert f.stat().st_mtime_ns == mtimes[f.name], f.name
    pd.testing.assert_frame_equal(_comparable(first.frame), _comparable(second.frame))

    # Edit one bundle: only its two points run again; the old rows are set aside ...
    edited = SWEEP.replace('"tcp.recovery" = "reno"', '"tcp.recovery" = "newreno"')
    third = run_sweep(load_sweep(write_sweep(tmp_path, edited, name="edited.toml")), out, jobs=1, progress=False)
    assert len(third.ran) == 4 and third.reused == 4
    assert len(list((out / "runs.parquet").glob("*.parquet"))) == 8
    assert len(list((out / "unused").glob("*.parquet"))) == 4
    # ... and come back when the edit is undone.
    fourth = run_sweep(load_sweep(path), out, jobs=1, progress=False)
    assert fourth.ran == []
    assert sorted(f.name for f in (out / "unused").glob("*.parquet")) == sorted(
        f"{point_id}-run{run}.parquet" for point_id, run in third.ran
    )


# --- command line and report --------------------------------------------------------------


def as_module(module: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m MODULE ARGS`` as a user would."""
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_json_output_and_report(tmp_path: Path) -> None:
    path = write_sweep(tmp_path)
    out = tmp_path / "out"
    done = as_module("thinwan", "sweep", str(path), "--json", "--jobs", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # exactly one JSON object
    assert {"sweep", "points", "version", "out", "git_rev", "axes", "tasks"} <= document.keys()
    assert (document["sweep"], document["version"], document["out"]) == ("mini", thinwan.__version__, str(out))
    assert document["tasks"] == {"total": 8, "ran": 8, "reused": 0}
    assert len(document["points"]) == 4
    point = document["points"][1]
    assert {"id", "name", "params", "values", "seeds", "summary"} <= point.keys()
    assert point["name"] == "bottleneck_delay_ms=10,config=reno"
    assert point["params"] == {"topology.bottleneck_delay_ms": 10, "config": "reno"}
    assert point["seeds"] == [1, 2]
    summary = point["summary"]
    assert summary["runs"] == 2
    for key in ("r_I150", "r_I1000", "T_I150_s", "T_I1000_s", "timeouts_per_conn", "spurious_timeouts_per_conn"):
        assert key in summary and key in summary["min"] and key in summary["max"]
    assert json.loads((out / "summary.json").read_text())["points"] == document["points"]
    assert "thinwan: mini: 4 point(s) × 2 run(s) = 8 task(s)" in done.stderr
    assert "Traceback" not in done.stderr

    html = (out / "report.html").read_text()
    titles = figure_titles(load_sweep(path))
    assert titles["t_vs_x"] == "T_I150 and T_I1000 against WAN delay"
    for title in titles.values():
        assert title in html, title
    # T and r plots, one CCDF overlay per delay: Plotly figures, like the run report's.
    assert html.count('<div class="plot" id="fig-') == 2 + 2
    assert "Plotly.newPlot" in html


def test_table_without_json_and_quiet(tmp_path: Path) -> None:
    path = write_sweep(tmp_path)
    done = as_module("thinwan", "sweep", str(path), "--quiet", "--jobs", "1", "--no-report", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0].split()[:6] == ["config", "bottleneck_delay_ms", "r_I150", "r_I1000", "T_I150", "T_I1000"]
    assert sum(line.startswith(("sack ", "reno ")) for line in lines) == 4
    assert "results: results/mini" in done.stdout
    assert not (tmp_path / "results" / "mini" / "report.html").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["bad"], "vary.config.b: tcp.sackk: unknown key"),
        (["nope"], "nope.toml: no such file"),
        (["good", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:9"], "not allowed with argument"),
        (["good", "--jobs", "0"], "argument --jobs: must be ≥ 1"),
    ],
)
def test_user_errors_exit_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    write_sweep(tmp_path, name="good.toml")
    write_sweep(tmp_path, '[sweep]\nbase = "base.toml"\n[vary.config]\nb = { "tcp.sackk" = 1 }\n', name="bad.toml")
    argv = [str(tmp_path / f"{args[0]}.toml"), *args[1:]]
    try:
        status = thinwan_main(["sweep", *argv])
    except SystemExit as e:  # argparse's own errors
        status = e.code
    assert status == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("thinwan: error: ") and expected in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_an_unreachable_scheduler_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    path = write_sweep(tmp_path)
    # A port nothing listens on: connection refused, retried until the connect timeout.
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        status = thinwan_main(
            ["sweep", str(path), "--scheduler", "tcp://127.0.0.1:9", "--quiet", "--out", str(tmp_path / "o")]
        )
    assert status == 2
    assert "cannot connect to the Dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err


def test_add_sweep_subcommand_plugs_into_a_parser() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="thinwan")
    add_sweep_subcommand(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", "s.toml", "--scheduler", "tcp://h:8786", "--json"])
    assert (args.sweep, args.scheduler, args.json, args.jobs, args.out) == ("s.toml", "tcp://h:8786", True, None, None)
    assert callable(args.func)

"""Sweeps: many scenarios from one base, run locally or on a Dask cluster, one dataset.

A sweep file is data, like a flent batch file (``docs/sweeps.md``): a base scenario, fixed
overrides, and *axes* — lists of values for one key, or named bundles of overrides. The
points of the sweep are every combination of the axes; each (point, run) is one task that
calls ``_native.simulate`` in a worker process and returns one small row (summary metrics
plus CCDFs on a fixed delay grid, never the records). Rows land as one Parquet file per
task under ``<out>/runs.parquet/``, which reads back as one dataset::

    <out>/runs.parquet/<point id>-run<k>.parquet   one row per (point, run)
    <out>/points/<point id>.toml                   each point's complete scenario
    <out>/summary.json                             what --json prints
    <out>/report.html                              the comparison report (thinwan.compare)
    <out>/unused/                                  rows of points no longer in the sweep

A point's id is a hash of its complete scenario (less name, description, runs and
``[records]``, which do not change what is simulated) and of its bundle names, so a re-run
into the same directory skips every task whose file is there and re-runs only the points
that changed. Rows of points that left the sweep are moved to ``unused/`` (and moved back
if the points return), so the dataset always holds exactly the current sweep.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import re
import secrets
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tqdm import tqdm

from . import __version__, _native
from .delay_hist import QUANTILES as DELAY_STATS
from .delay_hist import delay_histogram, pooled_delay_stats_ms
from .metrics import BULK, COMPONENTS, INTERACTIVE, message_delays, summarize_run, summarize_runs
from .records import RunRecords, empty_table, write_text_atomic
from .runner import RunError, dumps_json, git_revision
from .scenario import Scenario, ScenarioError, load_scenario, read_toml

__all__ = [
    "SweepError",
    "Axis",
    "Point",
    "Sweep",
    "SweepTask",
    "SweepResult",
    "CCDF_GRID_S",
    "CCDF_COLUMNS",
    "load_sweep",
    "run_sweep",
    "run_task",
    "task_result",
    "ccdf_on_grid",
    "read_rows",
    "sweep_document",
    "add_sweep_subcommand",
    "main",
]

# One fixed grid for every per-run CCDF: 0.1 ms … 100 s, 20 points per decade (121 in
# all, each 12 % above the previous), so runs and points can be averaged and overlaid
# without keeping per-message delays. Stored with every file (Parquet schema metadata).
CCDF_GRID_S = np.logspace(-4, 2, 121)
_CCDF_KINDS = ((INTERACTIVE, "interactive"), (BULK, "bulk"))
_CCDF_SERIES = ("end_to_end", *COMPONENTS)
# Row columns holding a CCDF: ccdf_<interactive|bulk>_<end_to_end|component>.
CCDF_COLUMNS = tuple(f"ccdf_{kind}_{series}" for _, kind in _CCDF_KINDS for series in _CCDF_SERIES)
# Row columns holding the histogram of all messages' end-to-end delays (thinwan.delay_hist:
# occupied slots and their counts), so that a point's runs pool into quantiles of all its
# messages.
HIST_COLUMNS = ("delay_hist_slots", "delay_hist_counts")
# Row columns that every row has besides parameters, metrics and CCDFs.
ID_COLUMNS = ("point_id", "point", "run", "seed", "version", "git_rev", "wall_s", "events", "substrate")

RUNS_DIR = "runs.parquet"
UNUSED_DIR = "unused"
POINTS_DIR = "points"
_TASK_FILE = re.compile(r"(?P<id>[0-9a-f]{12})-run(?P<run>\d+)\.parquet")
_GRID_METADATA_KEY = b"thinwan.ccdf_grid_s"
# Keys the sweep sets itself on every point.
_RESERVED_KEYS = {
    "scenario.name": "set by the sweep for each point",
    "scenario.description": "set by the sweep for each point",
    "scenario.runs": "use 'runs' in [sweep]",
}
_DEFAULT_X = "topology.bottleneck_delay_ms"


class SweepError(ScenarioError):
    """A sweep that cannot be used (bad file, bad option): a user error, exit status 2."""


# ---------------------------------------------------------------------------------------
# The sweep definition


@dataclass(frozen=True)
class Axis:
    """One dimension of a sweep.

    A *plain* axis varies one key: ``name`` is the dotted key and ``labels`` its values. A
    *named* axis has bundles: ``labels`` are the bundle names. ``overrides[i]`` is what
    label ``i`` sets, as ``{"section.key": value}``.
    """

    name: str
    plain: bool
    labels: tuple[Any, ...]
    overrides: tuple[dict[str, Any], ...]

    @property
    def keys(self) -> list[str]:
        """Every dotted key some label of this axis sets, in first-seen order."""
        return list(dict.fromkeys(k for o in self.overrides for k in o))


@dataclass(frozen=True)
class Point:
    """One combination of axis labels and the complete scenario it gives."""

    id: str  # 12 hex digits of the content hash; stable across edits of other points
    name: str  # e.g. "bottleneck_delay_ms=20,config=none,buffer=small"
    index: tuple[int, ...]  # label index on each axis, in axis order
    params: dict[str, Any]  # axis name → label (the value, for a plain axis)
    values: dict[str, Any]  # every key any axis varies → its value at this point
    scenario: Scenario


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file: its axes, its points, and the roles of axes in the report."""

    name: str
    description: str
    path: Path
    base_path: Path
    runs: int
    fixed: dict[str, Any]  # [set]
    axes: tuple[Axis, ...]
    points: tuple[Point, ...]
    x_axis: str | None = None  # plain numeric axis on the x of the report's line plots
    line_axis: str | None = None  # axis drawn as one line per label
    panel_axes: tuple[str, ...] = field(default=())  # every other axis: one panel per combination
    substrate: str = "sim"  # "sim": the simulator; "lab": real TCP in the namespace lab

    def axis(self, name: str) -> Axis:
        """The axis called ``name``."""
        return next(a for a in self.axes if a.name == name)

    @property
    def varied_keys(self) -> list[str]:
        """Every dotted key some axis varies, in axis order."""
        return [k for a in self.axes for k in a.keys]

    def tasks(self) -> list[SweepTask]:
        """One task per (point, run), in point order."""
        return [SweepTask(p.id, k, p.scenario) for p in self.points for k in range(self.runs)]


def load_sweep(
    path: str | Path, *, runs: int | None = None, duration_s: float | None = None, substrate: str = "sim"
) -> Sweep:
    """Read and validate a sweep file; every error names the file and the key (or point).

    ``runs`` and ``duration_s`` override the file's runs per point and every point's
    ``scenario.duration_s`` (real-time lab runs are long). ``substrate = "lab"`` gives the
    points ids of their own, so lab and simulator rows never stand in for each other.
    """
    path = Path(path)
    data = read_toml(path, SweepError, "a sweep file")
    return _parse_sweep(data, path, runs=runs, duration_s=duration_s, substrate=substrate)


# ---------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class SweepTask:
    """Run ``run`` of one point: all a worker needs (no paths, so it runs anywhere)."""

    point_id: str
    run: int
    scenario: Scenario

    @property
    def filename(self) -> str:
        return f"{self.point_id}-run{self.run}.parquet"


@dataclass
class SweepResult:
    """What :func:`run_sweep` did and found."""

    document: dict[str, Any]  # summary.json / --json
    frame: pd.DataFrame  # one row per (point, run) of the current sweep
    ran: list[tuple[str, int]]  # (point id, run) of the tasks simulated by this call
    reused: int  # tasks whose rows were already there


def run_sweep(
    sweep: Sweep,
    out_dir: str | Path,
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
    report: bool = True,
    log: Callable[[str], None] | None = None,
) -> SweepResult:
    """Run every (point, run) of ``sweep`` not already in ``out_dir``; write the dataset.

    Tasks go to ``jobs`` local worker processes (default: one per CPU), or to the Dask
    scheduler at ``scheduler`` (e.g. ``tcp://host:8786``) when given, or one at a time to
    the namespace lab for a ``substrate = "lab"`` sweep (root). Each finished task's
    row is written at once, so an interrupted sweep resumes where it stopped. ``log``
    receives one-line progress messages (default: none).
    """
    lab = sweep.substrate == "lab"
    if not lab and not hasattr(_native, "simulate"):
        raise RunError("the native simulator is not built (run scripts/setup.sh)")
    log = log or (lambda _: None)
    out = Path(out_dir)
    tasks = sweep.tasks()
    # Written again at the end; until then, none that disagrees with runs.parquet/.
    for name in ("summary.json", "report.html"):
        (out / name).unlink(missing_ok=True)
    _write_points(sweep, out)
    present = _arrange_files(out, tasks)
    todo = [t for t in tasks if t.filename not in present]
    if lab:
        where = "the namespace lab, one at a time"
    else:
        where = f"the Dask cluster at {scheduler}" if scheduler else _local_where(jobs, len(todo))
    log(
        f"{sweep.name}: {len(sweep.points)} point(s) × {sweep.runs} run(s) = {len(tasks)} task(s); "
        f"{len(tasks) - len(todo)} already done, "
        + (f"{len(todo)} to run on {where}" if todo else "nothing to run")
        + f" → {out}"
    )
    ran: list[tuple[str, int]] = []
    if todo:
        git_rev = git_revision()
        points = {p.id: p for p in sweep.points}
        bar = tqdm(
            total=len(tasks),
            initial=len(tasks) - len(todo),
            desc=sweep.name,
            unit="run",
            file=sys.stderr,
            disable=not (progress and sys.stderr.isatty()),
        )
        if lab:
            from .lab.sweep import lab_results  # namespaces and daemons: only for lab sweeps

            results = lab_results(todo, out, log)
        else:
            results = _dask_results(todo, scheduler) if scheduler else _local_results(todo, jobs)
        with bar, contextlib.closing(results):
            for task, result in results:
                row = build_row(points[task.point_id], task.run, result, git_rev)
                _write_row(out / RUNS_DIR / task.filename, row)
                ran.append((task.point_id, task.run))
                bar.update()
    frame = read_rows([out / RUNS_DIR / t.filename for t in tasks])
    document = {**sweep_document(sweep, frame), "out": str(out)}
    document["tasks"] = {"total": len(tasks), "ran": len(ran), "reused": len(tasks) - len(ran)}
    write_text_atomic(out / "summary.json", dumps_json(document, indent=2) + "\n")
    if report:
        from .compare import html_comparison  # matplotlib: only where a report is made

        write_text_atomic(out / "report.html", html_comparison(sweep, frame, document))
    return SweepResult(document=document, frame=frame, ran=ran, reused=len(tasks) - len(ran))


def run_task(task: SweepTask) -> dict[str, Any]:
    """Worker: simulate one run of one point and reduce it to :func:`task_result`.

    The same function runs in local worker processes and on Dask workers. Traces are
    switched off: a sweep keeps no time series, and a 100-pair run's TCP traces are big.
    """
    native = task.scenario.with_values({"records.traces": False})
    records = RunRecords.from_native(_native.simulate(native.to_native_json(), task.run))
    return task_result(records, task.scenario, task.run)


def task_result(records: RunRecords, scenario: Scenario, run: int) -> dict[str, Any]:
    """What a worker sends back for one run: metadata, summary and CCDFs (a few kB).

    ``summary`` is :func:`thinwan.metrics.summarize_run`; ``ccdf`` has one float32 array
    on :data:`CCDF_GRID_S` per :data:`CCDF_COLUMNS` entry; ``delay_hist`` the histogram of
    every message's end-to-end delay (:func:`thinwan.delay_hist.delay_histogram`).
    """
    meta = records.meta
    delays = message_delays(records.messages, scenario.scenario.duration_s)
    ccdfs = {
        f"ccdf_{label}_{series}": ccdf_on_grid(delays.loc[delays["kind"] == kind, series])
        for kind, label in _CCDF_KINDS
        for series in _CCDF_SERIES
    }
    return {
        "seed": int(meta.get("seed", scenario.scenario.seed + run)),
        "version": __version__,
        "wall_s": float(meta.get("wall_s", math.nan)),
        "events": int(meta["events"]) if "events" in meta else None,
        "substrate": str(meta.get("substrate", "sim")),
        "summary": summarize_run(records, scenario),
        "ccdf": ccdfs,
        "delay_hist": delay_histogram(delays["end_to_end"]),
    }


def ccdf_on_grid(seconds: Any, grid: np.ndarray = CCDF_GRID_S) -> np.ndarray:
    """P(delay > x) at each ``x`` of ``grid`` (float32; all ``nan`` if there are no values).

    ``nan`` values are left out; ``inf`` (never read) counts, so the curve levels off at
    the share of such messages, as :func:`thinwan.metrics.ccdf` does.
    """
    v = np.asarray(seconds, dtype=float)
    v = np.sort(v[~np.isnan(v)])
    if v.size == 0:
        return np.full(grid.size, np.nan, dtype=np.float32)
    return (1.0 - np.searchsorted(v, grid, side="right") / v.size).astype(np.float32)


def build_row(point: Point, run: int, result: Mapping[str, Any], git_rev: str) -> dict[str, Any]:
    """The dataset row of one task: ids, parameters, metadata, summary, CCDFs."""
    row: dict[str, Any] = {
        "point_id": point.id,
        "point": point.name,
        "run": run,
        "seed": result["seed"],
        "version": result["version"],
        "git_rev": git_rev,
        "wall_s": result["wall_s"],
        "events": result["events"],
        "substrate": result["substrate"],
    }
    row.update(point.params)
    row.update(point.values)
    for key, value in result["summary"].items():
        if key in row:  # an axis named like a metric was refused at load; this is a bug
            raise RunError(f"metric {key!r} collides with a column of the sweep")
        row[key] = float(value)
    row.update(result["ccdf"])
    row.update(zip(HIST_COLUMNS, result["delay_hist"]))
    return row


def read_rows(paths: Sequence[Path]) -> pd.DataFrame:
    """Rows of the given task files as one DataFrame (CCDF cells are float32 arrays)."""
    tables = [pq.read_table(p) for p in paths]
    if not tables:
        return pd.DataFrame(columns=list(ID_COLUMNS))
    # Rows written by an older thinwan may lack newer metric columns: fill with nulls.
    table = pa.concat_tables([t.replace_schema_metadata(None) for t in tables], promote_options="default")
    frame = table.to_pandas()
    for column in CCDF_COLUMNS:
        if column in frame:
            frame[column] = [np.asarray(v, dtype=np.float32) for v in frame[column]]
    for column in HIST_COLUMNS:
        if column in frame:
            frame[column] = [None if v is None else np.asarray(v, dtype=np.uint32) for v in frame[column]]
    return frame


def sweep_document(sweep: Sweep, frame: pd.DataFrame) -> dict[str, Any]:
    """The machine-readable result: per point, its parameters and means/min/max over runs.

    A sweep that compares the tunnel with direct TCP (an axis sets ``mux.mode``, see
    :func:`configuration_axis`) groups its points by grid point instead: ``points`` lists
    the grid points (every axis but that one), each with ``configs``: per label of the
    configuration axis, the point's entry plus the delay statistics of all its runs'
    messages pooled (``min``, ``q1``, ``median``, ``q3``, ``max``, ``p99``, ``p999`` in ms;
    :mod:`thinwan.delay_hist`).
    """
    metrics = metric_columns(sweep, frame)
    entries = [_point_entry(p, frame.loc[frame["point_id"] == p.id].sort_values("run"), metrics) for p in sweep.points]
    document: dict[str, Any] = {
        "sweep": sweep.name,
        "description": sweep.description,
        "source": str(sweep.path),
        "base": str(sweep.base_path),
        "runs": sweep.runs,
        "substrate": sweep.substrate,
        "axes": [{"name": a.name, "labels": list(a.labels)} for a in sweep.axes],
        "points": entries,
        "version": __version__,
        "git_rev": git_revision(),
    }
    config = configuration_axis(sweep)
    if config is not None:
        document["points"] = _grid_points(sweep, config, entries, frame)
        document["configurations"] = {
            "axis": config,
            "labels": list(sweep.axis(config).labels),
            "delay_stats": "per-message end-to-end delay (server write → client read), ms, of all messages of "
            "all runs: per-run histograms (10,000 log bins per decade) added, quantiles interpolated within a bin "
            "(≤ 0.023 % off); min and max exact; inf: a message was never read",
        }
    return document


def configuration_axis(sweep: Sweep) -> str | None:
    """The axis that switches the tunnel (sets ``mux.mode``), or None."""
    return next((a.name for a in sweep.axes if "mux.mode" in a.keys), None)


def point_entries(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every sweep point's entry of a :func:`sweep_document`, whatever its grouping."""
    if "configurations" in document:
        return [entry for grid in document["points"] for entry in grid["configs"].values()]
    return list(document["points"])


def _point_entry(p: Point, rows: pd.DataFrame, metrics: Sequence[str]) -> dict[str, Any]:
    summaries = rows[metrics].astype(float).to_dict("records")
    return {
        "id": p.id,
        "name": p.name,
        "params": p.params,
        "values": p.values,
        "seeds": [int(s) for s in rows["seed"]],
        "summary": summarize_runs(summaries) if summaries else {"runs": 0},
    }


def _grid_points(
    sweep: Sweep, config: str, entries: Sequence[dict[str, Any]], frame: pd.DataFrame
) -> list[dict[str, Any]]:
    """Entries grouped by grid point (the labels of every axis but ``config``), in sweep order."""
    others = [a.name for a in sweep.axes if a.name != config]
    short = _short_names(sweep.axes)
    grid: dict[tuple[Any, ...], dict[str, Any]] = {}
    for p, entry in zip(sweep.points, entries):
        labels = tuple(p.params[a] for a in others)
        if labels not in grid:
            name = ",".join(f"{short[a]}={_label(v)}" for a, v in zip(others, labels)) or "base"
            grid[labels] = {"name": name, "params": dict(zip(others, labels)), "configs": {}}
        rows = frame.loc[frame["point_id"] == p.id]
        grid[labels]["configs"][_label(p.params[config])] = {**_pooled_delays(rows), **entry}
    return list(grid.values())


def _pooled_delays(rows: pd.DataFrame) -> dict[str, Any]:
    """:data:`DELAY_STATS` over all messages of ``rows`` (nan if a row has no histogram)."""
    slots, counts = HIST_COLUMNS
    if rows.empty or counts not in rows or rows[counts].isna().any():
        return {**dict.fromkeys(DELAY_STATS, math.nan), "messages": 0}
    stats = pooled_delay_stats_ms(zip(rows[slots], rows[counts]), rows["delay_min_ms"], rows["delay_max_ms"])
    return {**stats, "messages": int(sum(int(np.sum(c)) for c in rows[counts]))}


def metric_columns(sweep: Sweep, frame: pd.DataFrame) -> list[str]:
    """The summary-metric columns of ``frame`` (everything but ids, parameters, CCDFs)."""
    other = {*ID_COLUMNS, *CCDF_COLUMNS, *HIST_COLUMNS, *(a.name for a in sweep.axes), *sweep.varied_keys}
    return [c for c in frame.columns if c not in other]


# ---------------------------------------------------------------------------------------
# Command line


def add_sweep_subcommand(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``sweep`` to the ``thinwan`` command's subparsers; returns its parser.

    Errors raise :class:`SweepError` (a :class:`~thinwan.scenario.ScenarioError`: exit 2)
    or :class:`~thinwan.runner.RunError` (exit 1), as ``thinwan run`` does.
    """
    p = subparsers.add_parser("sweep", help="run a sweep file", description=_cmd_sweep.__doc__)
    p.add_argument("sweep", metavar="SWEEP.toml", help="sweep file (docs/sweeps.md)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: results/<sweep name>)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--jobs", metavar="N", type=_positive_int, help="local worker processes (default: CPUs)")
    where.add_argument("--scheduler", metavar="ADDRESS", help="run on the Dask cluster at ADDRESS (tcp://host:port)")
    where.add_argument(
        "--lab",
        action="store_true",
        help="run every point in the namespace lab (real TCP, thinwan-link, thinwan-mux; needs root) instead of the simulator",
    )
    p.add_argument("--runs", metavar="N", type=_positive_int, help="runs per point (overrides the sweep file)")
    p.add_argument("--duration", metavar="S", type=_positive_float, help="override every point's scenario.duration_s")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--quiet", action="store_true", help="no progress bar or log lines on stderr")
    p.set_defaults(func=_cmd_sweep)
    return p


def _cmd_sweep(args: argparse.Namespace) -> int:
    """Run every point of a sweep file (skipping finished runs), write the dataset and a report."""
    substrate = "lab" if args.lab else "sim"
    sweep = load_sweep(args.sweep, runs=args.runs, duration_s=args.duration, substrate=substrate)
    out = Path(args.out) if args.out else Path("results") / (sweep.name + ("-lab" if args.lab else ""))
    log = (lambda _: None) if args.quiet else (lambda line: print(f"thinwan: {line}", file=sys.stderr))
    started = time.monotonic()
    result = run_sweep(
        sweep,
        out,
        jobs=args.jobs,
        scheduler=args.scheduler,
        progress=not args.quiet,
        report=not args.no_report,
        log=log,
    )
    log(f"{sweep.name}: {len(result.ran)} run(s) in {time.monotonic() - started:.1f} s")
    if args.json:
        print(dumps_json(result.document))
        return 0
    from .compare import comparison_table

    print(comparison_table(sweep, result.document))
    print()
    print(f"report: {out / 'report.html'}" if not args.no_report else f"results: {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m thinwan.sweep SWEEP.toml …``: the same as ``thinwan sweep SWEEP.toml …``."""
    from .cli import main as thinwan_main

    return thinwan_main(["sweep", *(sys.argv[1:] if argv is None else argv)])


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be ≥ 1, got {value}")
    return value


# ---------------------------------------------------------------------------------------
# Parsing the sweep file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _SweepSection(_Strict):
    name: str = ""
    description: str = ""
    base: str
    runs: int | None = Field(None, ge=1)


class _ReportSection(_Strict):
    x: str | None = None
    lines: str | None = None


_SECTIONS = ("sweep", "set", "vary", "report")


def _parse_sweep(
    data: Mapping[str, Any], path: Path, *, runs: int | None, duration_s: float | None, substrate: str
) -> Sweep:
    where = str(path)
    for section in data:
        if section not in _SECTIONS:
            raise SweepError(f"{where}: {section}: unknown section (expected {', '.join(_SECTIONS)})")
    if "sweep" not in data:
        raise SweepError(f'{where}: sweep: missing section (it names the base scenario: base = "….toml")')
    head = _validate(_SweepSection, data["sweep"], where, "sweep")
    report = _validate(_ReportSection, data.get("report", {}), where, "report")

    base_path = path.parent / head.base
    if not base_path.is_file():
        raise SweepError(f"{where}: sweep.base: no such scenario file: {base_path}")
    base = load_scenario(base_path)  # its errors name the base file
    known = _known_keys()
    fixed = _overrides(_table(data.get("set", {}), where, "set"), where, "set", known)
    axes = _parse_axes(_table(data.get("vary", {}), where, "vary"), where, known)
    _check_disjoint(axes, fixed, where)
    if duration_s is not None:
        if any("scenario.duration_s" in a.keys for a in axes):
            raise SweepError(f"{where}: --duration: scenario.duration_s is varied by an axis")
        fixed = {**fixed, "scenario.duration_s": duration_s}
    _check_column_names(axes, base, where)

    name = head.name or path.stem
    runs = runs or head.runs or base.scenario.runs
    points = _points(name, base, head.base, runs, fixed, axes, where, substrate)
    x_axis, line_axis = _report_roles(report, axes, where)
    panels = tuple(a.name for a in axes if a.name not in (x_axis, line_axis))
    return Sweep(
        name=name,
        description=head.description,
        path=path,
        base_path=base_path,
        runs=runs,
        fixed=fixed,
        axes=tuple(axes),
        points=tuple(points),
        x_axis=x_axis,
        line_axis=line_axis,
        panel_axes=panels,
        substrate=substrate,
    )


def _parse_axes(vary: Mapping[str, Any], where: str, known: set[str]) -> list[Axis]:
    axes = []
    for name, spec in vary.items():
        here = f"vary.{_toml_key(name)}"
        if isinstance(spec, list):
            axes.append(_plain_axis(name, spec, where, here, known))
        elif isinstance(spec, dict):
            if "." in name:
                raise SweepError(
                    f"{where}: {here}: to vary one key give a list of values; "
                    "an axis of named bundles needs a name without dots"
                )
            axes.append(_named_axis(name, spec, where, here, known))
        else:
            raise SweepError(
                f'{where}: {here}: expected a list of values ("section.key" = [...]) '
                "or a table of named bundles ([vary.NAME])"
            )
    return axes


def _plain_axis(name: str, values: list[Any], where: str, here: str, known: set[str]) -> Axis:
    if "." not in name:
        raise SweepError(f'{where}: {here}: a list of values varies one key: name it "section.key"')
    _check_key(name, where, "vary", known)
    if not values:
        raise SweepError(f"{where}: {here}: empty list of values")
    for i, v in enumerate(values):
        if isinstance(v, (dict, list)):
            raise SweepError(f"{where}: {here}: value {i + 1} is not a single value")
        if any(_same(v, w) for w in values[:i]):
            raise SweepError(f"{where}: {here}: value {v!r} is listed twice")
    return Axis(name, plain=True, labels=tuple(values), overrides=tuple({name: v} for v in values))


def _named_axis(name: str, bundles: Mapping[str, Any], where: str, here: str, known: set[str]) -> Axis:
    if not bundles:
        raise SweepError(f"{where}: {here}: no bundles (an empty bundle is written NAME = {{}})")
    labels, overrides = [], []
    for label, bundle in bundles.items():
        at = f"{here}.{_toml_key(label)}"
        if not isinstance(bundle, dict):
            hint = ""
            if isinstance(bundle, list) and f"{name}.{label}" in known:
                hint = f'; to vary {name}.{label}, quote it: "{name}.{label}" = [...] under [vary]'
            raise SweepError(f'{where}: {at}: a bundle is a table of overrides {{ "section.key" = value }}{hint}')
        labels.append(label)
        overrides.append(_overrides(bundle, where, at, known))
    return Axis(name, plain=False, labels=tuple(labels), overrides=tuple(overrides))


def _overrides(table: Mapping[str, Any], where: str, here: str, known: set[str]) -> dict[str, Any]:
    """``{"section.key": value}`` from a table; ``{section = {key = value}}`` is accepted too."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):  # unquoted dotted keys: tcp.sack = true
            for sub, v in value.items():
                flat[f"{key}.{sub}"] = v
        else:
            flat[key] = value
    for key in flat:
        _check_key(key, where, here, known)
    return flat


def _check_key(key: str, where: str, here: str, known: set[str]) -> None:
    if key in _RESERVED_KEYS:
        raise SweepError(f"{where}: {here}: {key}: cannot be set here ({_RESERVED_KEYS[key]})")
    if key not in known:
        section = key.partition(".")[0]
        sections = {k.partition(".")[0] for k in known}
        problem = "unknown key" if section in sections else "unknown section"
        raise SweepError(f"{where}: {here}: {key}: {problem} (see docs/scenario.md)")


def _check_disjoint(axes: Sequence[Axis], fixed: Mapping[str, Any], where: str) -> None:
    """Each key has one owner: two axes (or an axis and [set]) setting it would be ambiguous."""
    owner = {key: "[set]" for key in fixed}
    for axis in axes:
        for key in axis.keys:
            if key in owner:
                raise SweepError(f"{where}: vary: {key} is set both by {owner[key]} and by axis {axis.name}")
            owner[key] = f"axis {axis.name}"


def _check_column_names(axes: Sequence[Axis], base: Scenario, where: str) -> None:
    """A named axis becomes a column: it must not shadow an id, metric or CCDF column."""
    empty = RunRecords(*(empty_table(name) for name in ("messages", "connections", "ports")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # metrics of nothing: nan, with numpy's warnings
        taken = {*ID_COLUMNS, *CCDF_COLUMNS, *HIST_COLUMNS, *summarize_run(empty, base)}
    for axis in axes:
        if axis.name in taken:
            raise SweepError(f"{where}: vary.{axis.name}: this name is taken by a column of the results")


def _points(
    sweep_name: str,
    base: Scenario,
    base_name: str,
    runs: int,
    fixed: Mapping[str, Any],
    axes: Sequence[Axis],
    where: str,
    substrate: str,
) -> list[Point]:
    varied = [k for a in axes for k in a.keys]
    short = _short_names(axes)
    points = []
    for index in itertools.product(*(range(len(a.labels)) for a in axes)):
        name = ",".join(f"{short[a.name]}={_label(a.labels[i])}" for a, i in zip(axes, index)) or "base"
        values: dict[str, Any] = dict(fixed)
        for a, i in zip(axes, index):
            values.update(a.overrides[i])
        values["scenario.runs"] = runs
        values["scenario.name"] = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{sweep_name}-{name}")
        values["scenario.description"] = f"point {name} of sweep {sweep_name} (base: {base_name})"
        try:
            scenario = base.with_values(values, source=f"{where}: point {name}")
        except ScenarioError as e:
            raise SweepError(str(e)) from None
        named = {a.name: a.labels[i] for a, i in zip(axes, index) if not a.plain}
        points.append(
            Point(
                id=_point_id(scenario, named, substrate),
                name=name,
                index=index,
                params={a.name: a.labels[i] for a, i in zip(axes, index)},
                values={k: _get(scenario, k) for k in varied},
                scenario=scenario,
            )
        )
    return points


def _point_id(scenario: Scenario, bundle_names: Mapping[str, str], substrate: str) -> str:
    """Hash of what is simulated (and of the bundle names, so that ids are unique); lab
    points hash their substrate too (simulator ids stay those of earlier versions)."""
    content = scenario.model_dump()
    del content["records"]  # what is recorded, not what happens
    for key in ("name", "description", "runs"):  # run k does not depend on how many runs
        del content["scenario"][key]
    key = {"scenario": content, "bundles": bundle_names, **({"substrate": substrate} if substrate != "sim" else {})}
    text = json.dumps(key, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _report_roles(report: _ReportSection, axes: Sequence[Axis], where: str) -> tuple[str | None, str | None]:
    by_name = {a.name: a for a in axes}
    numeric = [a.name for a in axes if a.plain and all(_is_number(v) for v in a.labels)]
    if report.x is not None:
        if report.x not in numeric:
            raise SweepError(
                f"{where}: report.x: {report.x!r} is not a plain axis of numbers "
                f"(numeric axes: {', '.join(numeric) or 'none'})"
            )
        x = report.x
    else:
        x = _DEFAULT_X if _DEFAULT_X in numeric else (numeric[0] if numeric else None)
    if report.lines is not None:
        if report.lines not in by_name or report.lines == x:
            raise SweepError(f"{where}: report.lines: {report.lines!r} is not an axis other than report.x")
        lines = report.lines
    else:
        rest = [a for a in axes if a.name != x]
        named = [a.name for a in rest if not a.plain]
        lines = named[0] if named else (rest[0].name if rest else None)
    return x, lines


# ---------------------------------------------------------------------------------------
# Helpers: parsing


def _validate(model: type[BaseModel], data: Any, where: str, section: str) -> Any:
    if not isinstance(data, dict):
        raise SweepError(f"{where}: {section}: expected a table ([{section}])")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            key = ".".join([section, *map(str, err["loc"])])
            problem = {"extra_forbidden": "unknown key", "missing": "missing key"}.get(err["type"], err["msg"])
            lines.append(f"{where}: {key}: {problem}")
        raise SweepError("\n".join(lines)) from None


def _table(value: Any, where: str, section: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise SweepError(f"{where}: {section}: expected a table ([{section}])")
    return value


def _known_keys() -> set[str]:
    """Every ``section.key`` of the scenario model (the lead's docs/scenario.md)."""
    return {
        f"{section}.{key}"
        for section, info in Scenario.model_fields.items()
        for key in info.annotation.model_fields  # type: ignore[union-attr]
    }


def _get(scenario: Scenario, dotted: str) -> Any:
    section, _, key = dotted.partition(".")
    return getattr(getattr(scenario, section), key)


def _short_names(axes: Sequence[Axis]) -> dict[str, str]:
    """``bottleneck_delay_ms`` for ``topology.bottleneck_delay_ms`` unless that is ambiguous."""
    last = [a.name.rpartition(".")[2] for a in axes]
    return {a.name: s if last.count(s) == 1 else a.name for a, s in zip(axes, last)}


def _label(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _same(a: Any, b: Any) -> bool:
    """Equal values (7 and 7.0 are the same delay; true and 1 are not the same thing)."""
    return (type(a) is type(b) or (_is_number(a) and _is_number(b))) and a == b


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


# ---------------------------------------------------------------------------------------
# Helpers: executing


def _local_where(jobs: int | None, tasks: int) -> str:
    n = max(1, min(jobs or os.cpu_count() or 1, tasks))
    return f"{n} local worker process{'es' if n > 1 else ''}"


def _local_results(tasks: Sequence[SweepTask], jobs: int | None) -> Iterator[tuple[SweepTask, dict[str, Any]]]:
    workers = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    # spawn, not fork: the parent may hold threads (tqdm's monitor) and their locks.
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(run_task, t): t for t in tasks}
        for future in as_completed(futures):
            task = futures[future]
            try:
                result = future.result()
            except BrokenProcessPool:
                raise RunError(f"{_task_name(task)}: a worker process died (crash in the native simulator?)") from None
            except Exception as e:
                raise RunError(f"{_task_name(task)} failed: {type(e).__name__}: {e}") from e
            yield task, result
    finally:
        # Tasks not started are dropped; running ones are waited for.
        pool.shutdown(wait=True, cancel_futures=True)


def _dask_results(tasks: Sequence[SweepTask], address: str) -> Iterator[tuple[SweepTask, dict[str, Any]]]:
    try:
        import distributed
    except ImportError:
        raise SweepError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
    try:
        # Waits up to dask's distributed.comm.timeouts.connect (30 s unless configured).
        client = distributed.Client(address)
    except (OSError, TimeoutError, ValueError) as e:
        raise SweepError(f"--scheduler: cannot connect to the Dask scheduler at {address}: {e}") from None
    futures = []
    try:
        # Keys name the task, so a resubmitted task (same point, same run) is the same key.
        futures = [client.submit(run_task, t, key=f"thinwan-{t.point_id}-run{t.run}") for t in tasks]
        by_key = dict(zip((f.key for f in futures), tasks))
        for future in distributed.as_completed(futures):
            task = by_key[future.key]
            try:
                result = future.result()
            except Exception as e:  # includes KilledWorker: a worker died running it, repeatedly
                raise RunError(f"{_task_name(task)} failed: {type(e).__name__}: {e}") from e
            yield task, result
    finally:
        if futures:
            client.cancel(futures)
        client.close()


def _task_name(task: SweepTask) -> str:
    return f"point {task.point_id} ({task.scenario.name}), run {task.run}"


# ---------------------------------------------------------------------------------------
# Helpers: files


def _write_points(sweep: Sweep, out: Path) -> None:
    """``points/<id>.toml``: each point's complete scenario, runnable with ``thinwan run``."""
    directory = out / POINTS_DIR
    wanted = {f"{p.id}.toml": p for p in sweep.points}
    if directory.is_dir():
        for stale in directory.glob("*.toml"):
            if stale.name not in wanted:
                stale.unlink()
    for filename, point in wanted.items():
        text = f"# point {point.name} of sweep {sweep.name} ({sweep.path})\n\n{point.scenario.to_toml()}"
        target = directory / filename
        if not target.is_file() or target.read_text() != text:
            write_text_atomic(target, text)


def _arrange_files(out: Path, tasks: Sequence[SweepTask]) -> set[str]:
    """Make ``runs.parquet/`` hold exactly this sweep's finished tasks; return their names.

    Rows of other tasks move to ``unused/`` (a smaller or edited sweep must not lose hours
    of runs); this sweep's rows found there move back. Unreadable files are deleted.
    """
    runs_dir, unused = out / RUNS_DIR, out / UNUSED_DIR
    runs_dir.mkdir(parents=True, exist_ok=True)
    wanted = {t.filename for t in tasks}
    for f in list(runs_dir.glob("*.parquet")):
        if _TASK_FILE.fullmatch(f.name) and f.name not in wanted:
            unused.mkdir(exist_ok=True)
            os.replace(f, unused / f.name)
    if unused.is_dir():
        for f in list(unused.glob("*.parquet")):
            if f.name in wanted and not (runs_dir / f.name).exists():
                os.replace(f, runs_dir / f.name)
    present = set()
    for name in wanted:
        f = runs_dir / name
        if not f.exists():
            continue
        try:
            pq.read_metadata(f)
        except Exception:  # not a Parquet file we wrote: run the task again
            f.unlink()
            continue
        present.add(name)
    return present


def _write_row(path: Path, row: Mapping[str, Any]) -> None:
    """One row as a Parquet file, written under a temporary name and renamed into place."""
    columns = {}
    for key, value in row.items():
        if key in CCDF_COLUMNS:
            columns[key] = pa.array([np.asarray(value, dtype=np.float32)], type=pa.list_(pa.float32()))
        elif key in HIST_COLUMNS:
            columns[key] = pa.array([np.asarray(value, dtype=np.uint32)], type=pa.list_(pa.uint32()))
        elif key in ("run", "seed", "events"):
            columns[key] = pa.array([value], type=pa.int64())
        elif key == "wall_s":
            columns[key] = pa.array([value], type=pa.float64())
        else:
            columns[key] = pa.array([value])
    table = pa.table(columns).replace_schema_metadata({_GRID_METADATA_KEY: json.dumps(CCDF_GRID_S.tolist()).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: its files are private (0600); results are for sharing, so the umask rules.
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


if __name__ == "__main__":
    # Run the package's module, not this __main__ copy, so run_task pickles by its real
    # name (thinwan.sweep.run_task) for worker processes and Dask workers alike.
    from thinwan.sweep import main as _main

    sys.exit(_main())

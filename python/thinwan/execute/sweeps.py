"""Running a sweep (:mod:`thinwan.config.sweepfile`) on an executor, into one dataset.

Each (point, run) is one task that calls ``_native.simulate`` in a worker process (or a
lab run, for a lab sweep) and returns one small row (summary metrics
plus CCDFs on a fixed delay grid, never the records). Rows land as one Parquet file per
task under ``<out>/runs.parquet/``, which reads back as one dataset::

    <out>/runs.parquet/<point id>-run<k>.parquet   one row per (point, run)
    <out>/points/<point id>.toml                   each point's complete scenario
    <out>/summary.json                             what --json prints
    <out>/report.html                              the comparison report (thinwan.report.sweep_page)
    <out>/unused/                                  rows of points no longer in the sweep

A point's id is a hash of its complete scenario (less name, description, runs and
``[records]``, which do not change what is simulated) and of its bundle names, so a re-run
into the same directory skips every task whose file is there and re-runs only the points
that changed. Rows of points that left the sweep are moved to ``unused/`` (and moved back
if the points return), so the dataset always holds exactly the current sweep.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis.aggregate import (
    CCDF_GRID_S,
    HIST_COLUMNS,
    ID_COLUMNS,
    build_row,
    check_column_names,
    is_ccdf_column,
    sweep_document,
    task_result,
)
from ..config.scenario import Scenario, check_simulable, estimate_run
from ..config.sweepfile import Sweep, SweepTask
from ..records.meta import dumps_json, git_revision
from ..records.schema import write_text_atomic
from ..substrates.sim import native_available, simulate
from .errors import RunError
from .executors import Executor, progress_bar

__all__ = ["SweepResult", "sweep_tasks", "run_sweep", "run_task", "read_rows", "RUNS_DIR"]

RUNS_DIR = "runs.parquet"
UNUSED_DIR = "unused"
POINTS_DIR = "points"
_TASK_FILE = re.compile(r"(?P<id>[0-9a-f]{12})-run(?P<run>\d+)\.parquet")
_GRID_METADATA_KEY = b"thinwan.ccdf_grid_s"


@dataclass
class SweepResult:
    """What :func:`run_sweep` did and found."""

    document: dict[str, Any]  # summary.json / --json
    frame: pd.DataFrame  # one row per (point, run) of the current sweep
    ran: list[tuple[str, int]]  # (point id, run) of the tasks simulated by this call
    reused: int  # tasks whose rows were already there


def sweep_tasks(sweep: Sweep) -> list[SweepTask]:
    """One task per (point, run), in point order."""
    return [SweepTask(p.id, k, p.scenario) for p in sweep.points for k in range(sweep.runs)]


def check_sweep_simulable(sweep: Sweep) -> None:
    """:func:`~thinwan.config.scenario.check_simulable` for every point, the error naming
    the sweep file and the point (a lab-only configuration such as ``mux.mode = "ssh"``)."""
    for point in sweep.points:
        check_simulable(point.scenario, f"{sweep.path}: point {point.name}")


def run_sweep(
    sweep: Sweep,
    out_dir: str | Path,
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    executor: Executor | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    keep_raw: bool = False,
) -> SweepResult:
    """Run every (point, run) of ``sweep`` not already in ``out_dir``; write the dataset
    and ``summary.json`` (the report is the caller's: :mod:`thinwan.report.sweep_page`).

    Tasks go to ``executor``; by default ``jobs`` local worker processes (one per CPU),
    the Dask scheduler at ``scheduler`` (e.g. ``tcp://host:8786``) when given, or the
    namespace lab one at a time for a ``substrate = "lab"`` sweep (root). Each finished
    task's row is written at once, so an interrupted sweep resumes where it stopped.
    ``log`` receives one-line progress messages (default: none). ``keep_raw``: a lab
    sweep keeps every task's raw logs, not only a failed task's.
    """
    from .executors import DaskCluster, LocalProcesses, SerialLab

    check_column_names(sweep)
    log = log or (lambda _: None)
    out = Path(out_dir)
    lab = sweep.substrate == "lab"
    if not lab:
        check_sweep_simulable(sweep)  # before anything runs, like the limits below
    if not lab and not native_available():
        raise RunError("the native simulator is not built (run scripts/setup.sh)")
    if executor is None:
        executor = SerialLab() if lab else DaskCluster(scheduler) if scheduler else LocalProcesses(jobs)
    tasks = sweep_tasks(sweep)
    _check_limits(sweep, executor, len(tasks))
    # Written again at the end; until then, none that disagrees with runs.parquet/.
    for name in ("summary.json", "report.html"):
        (out / name).unlink(missing_ok=True)
    _write_points(sweep, out)
    present = _arrange_files(out, tasks)
    todo = [t for t in tasks if t.filename not in present]
    log(
        f"{sweep.name}: {len(sweep.points)} point(s) × {sweep.runs} run(s) = {len(tasks)} task(s); "
        f"{len(tasks) - len(todo)} already done, "
        + (f"{len(todo)} to run on {executor.where(len(todo))}" if todo else "nothing to run")
        + f" → {out}"
    )
    ran: list[tuple[str, int]] = []
    if todo:
        git_rev = git_revision()
        points = {p.id: p for p in sweep.points}
        if lab:
            from .labtasks import LabTask  # namespaces and daemons: only for lab sweeps

            fn: Callable[[SweepTask], dict[str, Any]] = LabTask(out, log, len(todo), keep_raw=keep_raw)
        else:
            fn = run_task
        bar = progress_bar(len(tasks), sweep.name, progress, initial=len(tasks) - len(todo))
        results = executor.map(fn, todo, describe=_task_name, key=lambda t: f"thinwan-{t.point_id}-run{t.run}")
        with bar, contextlib.closing(results):
            for task, result in results:
                row = build_row(points[task.point_id], task.run, result, git_rev)
                _write_row(out / RUNS_DIR / task.filename, row)
                ran.append((task.point_id, task.run))
                bar.update()
    frame = read_rows([out / RUNS_DIR / t.filename for t in tasks])
    document = {**sweep_document(sweep, frame), "out": str(out)}
    if lab and any(p.scenario.topology.kind == "middlebox" for p in sweep.points):
        from .labruns import sim_companion  # the report's simulator side (docs/qds-lab.md)

        document["sim"] = {p.id: sim_companion(p.scenario, sweep.runs) for p in sweep.points}
    document["tasks"] = {"total": len(tasks), "ran": len(ran), "reused": len(tasks) - len(ran)}
    write_text_atomic(out / "summary.json", dumps_json(document, indent=2) + "\n")
    return SweepResult(document=document, frame=frame, ran=ran, reused=len(tasks) - len(ran))


def run_task(task: SweepTask) -> dict[str, Any]:
    """Worker: simulate one run of one point and reduce it to :func:`task_result`.

    The same function runs in local worker processes and on Dask workers. Traces are
    switched off: a sweep keeps no time series, and a 100-pair run's TCP traces are big.
    """
    records = simulate(task.scenario.with_values({"records.traces": False}), task.run)
    return task_result(records, task.scenario, task.run)


def _check_limits(sweep: Sweep, executor: Executor, tasks: int) -> None:
    """Refuse, before anything runs, points the lab cannot run or local workers cannot
    hold in memory (docs/limits.md)."""
    from .executors import LocalProcesses
    from .runs import check_memory

    if sweep.substrate == "lab":
        from ..substrates.lab.labrun import check_lab_capacity

        biggest = max(sweep.points, key=lambda p: p.scenario.topology.pairs)
        check_lab_capacity(biggest.scenario)
    elif isinstance(executor, LocalProcesses):
        # Tasks run with traces off (run_task); the biggest point decides.
        biggest = max(sweep.points, key=lambda p: estimate_run(_without_traces(p.scenario)).bytes)
        check_memory(_without_traces(biggest.scenario), executor.workers(tasks))


def _without_traces(scenario: Scenario) -> Scenario:
    return scenario.with_values({"records.traces": False})


def _task_name(task: SweepTask) -> str:
    return f"point {task.point_id} ({task.scenario.name}), run {task.run}"


def read_rows(paths: Sequence[Path]) -> pd.DataFrame:
    """Rows of the given task files as one DataFrame (CCDF cells are float32 arrays)."""
    tables = [pq.read_table(p) for p in paths]
    if not tables:
        return pd.DataFrame(columns=list(ID_COLUMNS))
    # Rows written by an older thinwan may lack newer metric columns: fill with nulls.
    table = pa.concat_tables([t.replace_schema_metadata(None) for t in tables], promote_options="default")
    frame = table.to_pandas()
    # A per-type RTT CCDF is absent (null) in rows of points without that type: all nan.
    missing = np.full(CCDF_GRID_S.size, np.nan, dtype=np.float32)
    for column in [c for c in frame.columns if is_ccdf_column(c)]:
        frame[column] = [missing if v is None else np.asarray(v, dtype=np.float32) for v in frame[column]]
    for column in HIST_COLUMNS:
        if column in frame:
            frame[column] = [None if v is None else np.asarray(v, dtype=np.uint32) for v in frame[column]]
    return frame


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


def _value_array(value: Any) -> pa.Array:
    """A one-row column of a parameter value; one Arrow cannot type (a list of mixed
    types, e.g. ``traffic.mix = [["video", 3], ["data", 9]]``) as its JSON text."""
    try:
        return pa.array([value])
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return pa.array([json.dumps(value)])


def _write_row(path: Path, row: Mapping[str, Any]) -> None:
    """One row as a Parquet file, written under a temporary name and renamed into place."""
    columns = {}
    for key, value in row.items():
        if is_ccdf_column(key):
            columns[key] = pa.array([np.asarray(value, dtype=np.float32)], type=pa.list_(pa.float32()))
        elif key in HIST_COLUMNS:
            columns[key] = pa.array([np.asarray(value, dtype=np.uint32)], type=pa.list_(pa.uint32()))
        elif key in ("run", "seed", "events"):
            columns[key] = pa.array([value], type=pa.int64())
        elif key == "wall_s":
            columns[key] = pa.array([value], type=pa.float64())
        else:
            columns[key] = _value_array(value)
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

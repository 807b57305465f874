"""Run all runs of a scenario in parallel worker processes and write the results.

Layout of an output directory (one invocation's results; older ones are replaced)::

    <out>/scenario.toml          the complete validated scenario, re-runnable as is
    <out>/runs/run-<k>/          records of run k (docs/records.md), written as it finishes
    <out>/summary.json           per-run summaries, means/min/max over runs, seeds, version
    <out>/report.html            plots and tables (unless disabled)

The native simulator is only ever called in worker processes: a crash in it (or a run
that exhausts memory) takes down one worker, not the caller. Each worker writes its own
records and returns only a small :class:`~thinwan.report.RunDigest`, so the parent never
holds more than the digests.
"""

from __future__ import annotations

import functools
import json
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from tqdm import tqdm

from . import __version__, _native
from .metrics import summarize_runs
from .records import RunRecords, write_text_atomic
from .report import RunDigest, digest_run, html_report
from .scenario import Scenario

__all__ = ["RunError", "run_scenario", "summary_document", "dumps_json", "git_revision"]


class RunError(Exception):
    """A run could not be completed (simulator missing, failed or crashed)."""


def run_scenario(
    scenario: Scenario,
    out_dir: str | Path,
    jobs: int | None = None,
    progress: bool = True,
    report: bool = True,
) -> list[dict[str, Any]]:
    """Run ``scenario.scenario.runs`` runs and write everything under ``out_dir``.

    Run *k* is ``_native.simulate(scenario.to_native_json(), k)`` (seed ``seed + k``).
    ``jobs`` worker processes (default: one per CPU; never more than runs). Returns the
    per-run summaries (:func:`thinwan.metrics.summarize_run`) in run order.
    """
    out = Path(out_dir)
    runs = scenario.scenario.runs
    _clear_previous_results(out, runs)
    write_text_atomic(out / "scenario.toml", scenario.to_toml())
    digests = _run_all(scenario, out, min(jobs or os.cpu_count() or 1, runs), progress)
    summaries = [d.summary for d in digests]
    document = summary_document(scenario, summaries)
    write_text_atomic(out / "summary.json", dumps_json(document, indent=2) + "\n")
    if report:
        write_text_atomic(out / "report.html", html_report(scenario, digests, document["summary"]))
    return summaries


def summary_document(scenario: Scenario, run_summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The machine-readable result of a scenario: what ``summary.json`` holds."""
    return {
        "scenario": scenario.name,
        "summary": summarize_runs(run_summaries),
        "runs": list(run_summaries),
        "seeds": [scenario.scenario.seed + k for k in range(len(run_summaries))],
        "version": __version__,
        "git_rev": git_revision(),
        "config": scenario.model_dump(mode="json"),
    }


def dumps_json(obj: Any, **kwargs: Any) -> str:
    """Strict JSON where ``inf`` and ``nan`` (e.g. T_I with no violations) become ``null``."""
    return json.dumps(_finite(obj), allow_nan=False, **kwargs)


@functools.cache
def git_revision() -> str:
    """``git rev-parse HEAD`` of the thinwan source tree, or "unknown"."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


# ---------------------------------------------------------------------------------------


def _run_all(scenario: Scenario, out: Path, jobs: int, progress: bool) -> list[RunDigest]:
    runs = scenario.scenario.runs
    if jobs == 1:
        # One worker would only add a process start and a second import of everything
        # (about a second); run in this process instead.
        git_rev = git_revision()
        digests = []
        for k in tqdm(
            range(runs), desc=scenario.name, unit="run", file=sys.stderr, disable=not (progress and sys.stderr.isatty())
        ):
            try:
                digests.append(_run_one(scenario, k, out, git_rev))
            except (OSError, KeyboardInterrupt):
                raise
            except Exception as e:
                raise RunError(f"run {k} failed: {type(e).__name__}: {e}") from e
        return digests
    # spawn, not fork: the parent may hold threads (tqdm's monitor) and their locks, which
    # a forked child would inherit in an undefined state.
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
    bar = tqdm(
        total=runs,
        desc=scenario.name,
        unit="run",
        file=sys.stderr,
        disable=not (progress and sys.stderr.isatty()),
    )
    digests = []
    try:
        futures = {pool.submit(_run_one, scenario, k, out, git_revision()): k for k in range(runs)}
        for future in as_completed(futures):
            digests.append(_result(future, futures[future]))
            bar.update()
    finally:
        # On failure, runs not yet started are dropped; running ones are waited for (on
        # Ctrl-C in a terminal they got the signal too and stop at once).
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    return sorted(digests, key=lambda d: d.meta["run"])


def _run_one(scenario: Scenario, run: int, out: Path, git_rev: str) -> RunDigest:
    """Worker: simulate run ``run``, write its records, return its digest."""
    records = RunRecords.from_native(_native.simulate(scenario.to_native_json(), run))
    meta = records.meta
    meta.setdefault("scenario", scenario.name)
    meta.setdefault("run", run)
    meta.setdefault("seed", scenario.scenario.seed + run)
    meta.setdefault("version", __version__)
    meta.setdefault("substrate", "sim")
    meta.setdefault("duration_s", scenario.scenario.duration_s)
    meta.setdefault("config", scenario.model_dump(mode="json"))
    meta["git_rev"] = git_rev
    records.write(out / "runs" / f"run-{run}")
    return digest_run(records, scenario)


def _result(future: Future[RunDigest], run: int) -> RunDigest:
    try:
        return future.result()
    except BrokenProcessPool:
        raise RunError(f"run {run}: a worker process died (crash in the native simulator?)") from None
    except Exception as e:
        raise RunError(f"run {run} failed: {type(e).__name__}: {e}") from e


def _clear_previous_results(out: Path, runs: int) -> None:
    """Remove what an earlier invocation left that this one would not overwrite.

    Otherwise a failed or smaller invocation would leave a directory whose runs and
    summary disagree.
    """
    for name in ("summary.json", "report.html"):
        (out / name).unlink(missing_ok=True)
    for run_dir in (out / "runs").glob("run-*"):
        index = run_dir.name.removeprefix("run-")
        if index.isdigit() and int(index) >= runs:
            shutil.rmtree(run_dir)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj

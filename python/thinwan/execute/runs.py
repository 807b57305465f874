"""``thinwan run``: every run of a scenario on an executor, written as it finishes.

Layout of an output directory (one invocation's results; older ones are replaced)::

    <out>/scenario.toml          the complete validated scenario, re-runnable as is
    <out>/runs/run-<k>/          records of run k (docs/records.md), written as it finishes
    <out>/summary.json           per-run summaries, means/min/max over runs, seeds, version
    <out>/report.html            plots and tables (the caller's: thinwan.report.run_page)

The native simulator is only ever called in worker processes when there are several: a
crash in it (or a run that exhausts memory) takes down one worker, not the caller. Each
worker writes its own records and returns only a small
:class:`~thinwan.analysis.digest.RunDigest`, so the parent never holds more than the digests.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..analysis.digest import RunDigest, digest_run
from ..analysis.metrics import summarize_runs
from ..config.scenario import Scenario
from ..records.meta import dumps_json, git_revision
from ..records.schema import write_text_atomic
from ..substrates.sim import simulate
from .errors import RunError
from .executors import Executor, LocalProcesses, progress_bar

__all__ = ["RunError", "RunResult", "run_scenario", "summary_document", "clear_previous_results"]


@dataclass
class RunResult:
    """What :func:`run_scenario` wrote: the summary document and each run's digest."""

    document: dict[str, Any]  # summary.json
    digests: list[RunDigest]  # in run order

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """Per-run summaries (:func:`thinwan.analysis.metrics.summarize_run`), in run order."""
        return [d.summary for d in self.digests]


@dataclass(frozen=True)
class RunJob:
    """Run ``run`` of ``scenario``, records into ``out/runs/run-<run>``."""

    scenario: Scenario
    run: int
    out: Path
    git_rev: str


def run_scenario(
    scenario: Scenario,
    out_dir: str | Path,
    jobs: int | None = None,
    progress: bool = True,
    executor: Executor | None = None,
) -> RunResult:
    """Run ``scenario.scenario.runs`` runs and write records and ``summary.json``.

    Run *k* is ``_native.simulate(scenario.to_native_json(), k)`` (seed ``seed + k``), on
    ``executor`` (default: ``jobs`` local worker processes, one per CPU, never more
    than runs).
    """
    if not _native_built():
        raise RunError("the native simulator is not built (run scripts/setup.sh)")
    out = Path(out_dir)
    runs = scenario.scenario.runs
    clear_previous_results(out, runs)
    write_text_atomic(out / "scenario.toml", scenario.to_toml())
    executor = executor or LocalProcesses(jobs)
    git_rev = git_revision()
    jobs_ = [RunJob(scenario, k, out, git_rev) for k in range(runs)]
    digests = []
    bar = progress_bar(runs, scenario.name, progress)
    results = executor.map(run_one, jobs_, describe=lambda j: f"run {j.run}")
    with bar, contextlib.closing(results):
        for _, digest in results:
            digests.append(digest)
            bar.update()
    digests.sort(key=lambda d: d.meta["run"])
    document = summary_document(scenario, [d.summary for d in digests])
    write_text_atomic(out / "summary.json", dumps_json(document, indent=2) + "\n")
    return RunResult(document=document, digests=digests)


def run_one(job: RunJob) -> RunDigest:
    """Worker: simulate one run, write its records, return its digest."""
    records = simulate(job.scenario, job.run, job.git_rev)
    records.write(job.out / "runs" / f"run-{job.run}")
    return digest_run(records, job.scenario)


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


def clear_previous_results(out: Path, runs: int) -> None:
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


def _native_built() -> bool:
    from ..substrates.sim import native_available

    return native_available()

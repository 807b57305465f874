"""``thinwan run``: every run of a scenario on an executor, written as it finishes.

Layout of an output directory (one invocation's results: written aside and swapped in
whole when complete, :mod:`thinwan.records.staging`; an interrupted invocation leaves the
earlier results as they were)::

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..analysis.digest import RunDigest, digest_run
from ..analysis.metrics import summarize_runs
from ..config.files import ScenarioError
from ..config.limits import check_fits, mem_available_bytes
from ..config.scenario import Scenario, check_simulable, estimate_run
from ..records.meta import dumps_json, git_revision
from ..records.schema import write_text_atomic
from ..records.staging import staged_output
from ..substrates.sim import simulate
from .errors import RunError
from .executors import Executor, LocalProcesses, progress_bar

__all__ = ["RunError", "RunResult", "run_scenario", "summary_document", "check_memory"]


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
    finish: Callable[[Path, RunResult], None] | None = None,
) -> RunResult:
    """Run ``scenario.scenario.runs`` runs and write records and ``summary.json``.

    Run *k* is ``_native.simulate(scenario.to_native_json(), k)`` (seed ``seed + k``), on
    ``executor`` (default: ``jobs`` local worker processes, one per CPU, never more
    than runs). Everything is written to a staging directory; ``finish(directory,
    result)`` may add to it (the report) before it replaces ``out_dir``. Runs that would
    not fit in memory are refused first (:func:`check_memory`).
    """
    check_simulable(scenario)
    if not _native_built():
        raise RunError("the native simulator is not built (run scripts/setup.sh)")
    runs = scenario.scenario.runs
    if executor is None:
        executor = LocalProcesses(jobs)
        check_memory(scenario, executor.workers(runs))
    git_rev = git_revision()
    with staged_output(Path(out_dir)) as out:
        write_text_atomic(out / "scenario.toml", scenario.to_toml())
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
        result = RunResult(document=document, digests=digests)
        if finish is not None:
            finish(out, result)
    return result


def check_memory(scenario: Scenario, workers: int = 1, available: int | None = None) -> None:
    """Raise :class:`ScenarioError` when ``workers`` simulated runs of ``scenario`` at once
    would not fit in the available memory (:mod:`thinwan.config.limits`)."""
    available = mem_available_bytes() if available is None else available
    need = estimate_run(scenario).bytes
    problem = check_fits(need, workers, available)
    if problem is None:
        return
    hint = "lower scenario.duration_s or topology.pairs, or set records.traces = false"
    if available is not None and workers > 1 and need <= available:
        hint = f"--jobs {max(1, available // need)} fits"
    raise ScenarioError(f"{scenario.name}: {problem}; {hint} (docs/limits.md)")


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


def _native_built() -> bool:
    from ..substrates.sim import native_available

    return native_available()

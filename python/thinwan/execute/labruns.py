"""``thinwan lab run`` and ``thinwan validate``: every run of a scenario on the lab.

The output directory has the layout of ``thinwan run`` (``runs/run-<k>/``,
``summary.json``; the report is the caller's), plus ``lab.json`` (the ``[lab]``
settings) and ``lab-raw/run-<k>/`` with the raw logs (event log, pump/sink CSV,
TCP_INFO, link counters, pcap).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis.digest import digest_run
from ..analysis.lab_qds import by_type_side_by_side
from ..analysis.metrics import summarize_runs
from ..config.scenario import Scenario
from ..records.meta import dumps_json
from ..records.schema import write_text_atomic
from ..records.staging import staged_output
from .executors import SerialLab
from .runs import RunResult, run_scenario, summary_document

__all__ = ["run_lab_scenario", "validate"]


def run_lab_scenario(
    scenario: Scenario,
    out: str | Path,
    progress: bool = True,
    finish: Callable[[Path, RunResult], None] | None = None,
) -> RunResult:
    """Run every run of ``scenario`` on the lab (its ``[lab]`` settings); write records,
    ``lab.json`` and ``summary.json`` (with ``substrate = "lab"`` and ``out``), into a
    staging directory that replaces ``out`` when complete (``finish`` as in
    :func:`~thinwan.execute.runs.run_scenario`)."""
    from ..substrates.lab.labrun import check_lab_capacity, run_lab_once

    final = Path(out)
    runs = scenario.scenario.runs
    executor = SerialLab()
    executor.check()
    check_lab_capacity(scenario)
    with staged_output(final) as stage:
        write_text_atomic(stage / "scenario.toml", scenario.to_toml())
        write_text_atomic(stage / "lab.json", json.dumps(scenario.lab.model_dump(mode="json"), indent=2) + "\n")

        def one(k: int) -> Any:
            if progress:
                span = scenario.scenario.duration_s + scenario.scenario.drain_s
                print(f"thinwan: lab run {k + 1}/{runs} ({span:g} s)…", file=sys.stderr)
            records = run_lab_once(scenario, scenario.lab, k, stage / "lab-raw" / f"run-{k}")
            records.write(stage / "runs" / f"run-{k}")
            return digest_run(records, scenario)

        digests = []
        results = executor.map(one, list(range(runs)), describe=lambda k: f"lab run {k}")
        with contextlib.closing(results):
            digests = [digest for _, digest in results]
        summaries = [d.summary for d in digests]
        document = {**summary_document(scenario, summaries), "substrate": "lab", "out": str(final)}
        write_text_atomic(stage / "summary.json", dumps_json(document) + "\n")
        result = RunResult(document=document, digests=digests)
        if finish is not None:
            finish(stage, result)
    return result


def validate(
    scenario: Scenario,
    out: Path,
    progress: bool = True,
    finish: Callable[[Path, RunResult], None] | None = None,
) -> tuple[dict[str, Any], RunResult, RunResult]:
    """Run ``scenario`` in the simulator and on the lab; write ``validate.json``
    (with per-packet RTTs, e.g. the middlebox topology: ``by_type``, each type's metrics
    of both substrates side by side, :func:`~thinwan.analysis.lab_qds.by_type_side_by_side`).

    Both go to ``out/sim`` and ``out/lab`` of one staging directory that replaces ``out``
    when both are complete (``finish`` is called on each of the two). Returns its
    document (both summaries) and both substrates' results.
    """
    from ..substrates.lab.labrun import check_lab_capacity

    SerialLab().check()
    check_lab_capacity(scenario)
    with staged_output(Path(out)) as stage:
        sim = run_scenario(scenario, stage / "sim", progress=progress, finish=finish)
        lab = run_lab_scenario(scenario, stage / "lab", progress=progress, finish=finish)
        doc = {
            "scenario": scenario.name,
            "sim": summarize_runs(sim.summaries),
            "lab": lab.document["summary"],
            "out": str(out),
            "config": scenario.model_dump(mode="json"),
        }
        if "by_type" in doc["sim"] or "by_type" in doc["lab"]:
            # QDS scenarios: the per-type metrics of both substrates next to each other.
            doc["by_type"] = by_type_side_by_side(doc["sim"].get("by_type", {}), doc["lab"].get("by_type", {}))
        write_text_atomic(stage / "validate.json", dumps_json(doc) + "\n")
    return doc, sim, lab

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
from pathlib import Path
from typing import Any

from ..analysis.digest import digest_run
from ..analysis.metrics import summarize_runs
from ..config.scenario import Scenario
from ..records.meta import dumps_json
from ..records.schema import write_text_atomic
from .executors import SerialLab
from .runs import RunResult, clear_previous_results, run_scenario, summary_document

__all__ = ["run_lab_scenario", "validate"]


def run_lab_scenario(scenario: Scenario, out: str | Path, progress: bool = True) -> RunResult:
    """Run every run of ``scenario`` on the lab (its ``[lab]`` settings); write records,
    ``lab.json`` and ``summary.json`` (with ``substrate = "lab"`` and ``out``)."""
    from ..substrates.lab.labrun import run_lab_once

    out = Path(out)
    runs = scenario.scenario.runs
    executor = SerialLab()
    executor.check()
    clear_previous_results(out, runs)
    write_text_atomic(out / "scenario.toml", scenario.to_toml())
    write_text_atomic(out / "lab.json", json.dumps(scenario.lab.model_dump(mode="json"), indent=2) + "\n")

    def one(k: int) -> Any:
        if progress:
            span = scenario.scenario.duration_s + scenario.scenario.drain_s
            print(f"thinwan: lab run {k + 1}/{runs} ({span:g} s)…", file=sys.stderr)
        records = run_lab_once(scenario, scenario.lab, k, out / "lab-raw" / f"run-{k}")
        records.write(out / "runs" / f"run-{k}")
        return digest_run(records, scenario)

    digests = []
    results = executor.map(one, list(range(runs)), describe=lambda k: f"lab run {k}")
    with contextlib.closing(results):
        digests = [digest for _, digest in results]
    summaries = [d.summary for d in digests]
    document = {**summary_document(scenario, summaries), "substrate": "lab", "out": str(out)}
    write_text_atomic(out / "summary.json", dumps_json(document) + "\n")
    return RunResult(document=document, digests=digests)


def validate(scenario: Scenario, out: Path, progress: bool = True) -> tuple[dict[str, Any], RunResult, RunResult]:
    """Run ``scenario`` in the simulator and on the lab; write ``validate.json``.

    Returns its document (both summaries) and both substrates' results (for reports).
    """
    SerialLab().check()
    sim = run_scenario(scenario, out / "sim", progress=progress)
    lab = run_lab_scenario(scenario, out / "lab", progress=progress)
    doc = {
        "scenario": scenario.name,
        "sim": summarize_runs(sim.summaries),
        "lab": lab.document["summary"],
        "out": str(out),
        "config": scenario.model_dump(mode="json"),
    }
    write_text_atomic(out / "validate.json", dumps_json(doc) + "\n")
    return doc, sim, lab

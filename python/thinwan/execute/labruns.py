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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..analysis.agreement import DEFAULT_TOLERANCES, Tolerance, agreement_json, compare, tolerance_json, validate_values
from ..analysis.digest import digest_run
from ..analysis.lab_qds import by_type_side_by_side
from ..analysis.metrics import summarize_runs
from ..config.scenario import Scenario
from ..records.meta import dumps_json
from ..records.schema import write_text_atomic
from ..records.staging import staged_output
from .executors import SerialLab
from .runs import RunResult, run_scenario, summary_document

__all__ = ["run_lab_scenario", "sim_companion", "validate", "agreement_document", "not_compared"]


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
    from ..substrates.lab.tunnel import run_tunnel_once

    # A tunnel-grid scenario runs on the three-namespace chain (WAN, edge, last hop) with
    # the real daemons, as a lab sweep point does (execute.labtasks); the two-namespace
    # lab would leave out the last hop and the tunnel.
    once = run_tunnel_once if scenario.topology.kind == "mux" else run_lab_once
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
            records = once(scenario, scenario.lab, k, stage / "lab-raw" / f"run-{k}")
            records.write(stage / "runs" / f"run-{k}")
            return digest_run(records, scenario)

        digests = []
        results = executor.map(one, list(range(runs)), describe=lambda k: f"lab run {k}")
        with contextlib.closing(results):
            digests = [digest for _, digest in results]
        summaries = [d.summary for d in digests]
        document = {**summary_document(scenario, summaries), "substrate": "lab", "out": str(final)}
        if scenario.topology.kind == "middlebox":
            # The reports show the lab's per-type metrics next to the simulator's.
            document["sim"] = sim_companion(scenario, runs)
        write_text_atomic(stage / "summary.json", dumps_json(document) + "\n")
        result = RunResult(document=document, digests=digests)
        if finish is not None:
            finish(stage, result)
    return result


def sim_companion(scenario: Scenario, runs: int) -> dict[str, Any]:
    """The simulator's side of a lab run or lab sweep point of a middlebox scenario, for
    the reports (docs/qds-lab.md "Reports"): runs 0..``runs``−1 of ``scenario`` simulated
    with the lab's seeds; ``by_type`` (means and sd over runs, as a lab or simulator
    summary has it) and ``rtt_ccdf`` (per type, the mean over runs of the per-run packet
    RTT CCDF on :data:`~thinwan.analysis.aggregate.CCDF_GRID_S`, as a sweep row holds it).
    A 60-s QDS run simulates in ~0.2 s, so this costs a fraction of one lab run."""
    import numpy as np

    from ..analysis.aggregate import RTT_CCDF_PREFIX, task_result
    from ..analysis.by_type import summarize_by_type_runs
    from ..substrates.sim import simulate

    quiet = scenario.with_values({"records.traces": False})
    results = [task_result(simulate(quiet, k), quiet, k) for k in range(runs)]
    curves: dict[str, list[np.ndarray]] = {}
    for r in results:
        for key, c in r["ccdf"].items():
            if key.startswith(RTT_CCDF_PREFIX):
                curves.setdefault(key.removeprefix(RTT_CCDF_PREFIX), []).append(np.asarray(c, dtype=float))
    return {
        "runs": runs,
        "seeds": [int(r["seed"]) for r in results],
        "by_type": summarize_by_type_runs([r["summary"] for r in results]),
        "rtt_ccdf": {t: [round(float(v), 6) for v in np.mean(cs, axis=0)] for t, cs in curves.items()},
    }


def validate(
    scenario: Scenario,
    out: Path,
    progress: bool = True,
    finish: Callable[[Path, RunResult], None] | None = None,
    tolerances: Mapping[str, Tolerance | None] = DEFAULT_TOLERANCES,
    page: Callable[[Path, dict[str, Any]], None] | None = None,
) -> tuple[dict[str, Any], RunResult, RunResult]:
    """Run ``scenario`` in the simulator and on the lab; write ``validate.json``: both
    summaries, ``agreement`` (metric → ``{sim, lab, rel_diff, ok}``,
    :func:`~thinwan.analysis.agreement.compare` under ``tolerances``) and ``tolerance``
    (metric → ``25%`` / ``x2``); with per-packet RTTs, e.g. the middlebox topology, also
    ``by_type``, each type's metrics of both substrates side by side
    (:func:`~thinwan.analysis.lab_qds.by_type_side_by_side`).

    Both go to ``out/sim`` and ``out/lab`` of one staging directory that replaces ``out``
    when both are complete (``finish`` is called on each of the two, ``page`` on the
    staging directory with the document, e.g. to write ``out/report.html``). Returns its
    document and both substrates' results.
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
        doc.update(agreement_document(doc["sim"], doc["lab"], sim, lab, tolerances, not_compared(scenario)))
        if "by_type" in doc["sim"] or "by_type" in doc["lab"]:
            # QDS scenarios: the per-type metrics of both substrates next to each other.
            doc["by_type"] = by_type_side_by_side(doc["sim"].get("by_type", {}), doc["lab"].get("by_type", {}))
        write_text_atomic(stage / "validate.json", dumps_json(doc) + "\n")
        if page is not None:
            page(stage, doc)
    return doc, sim, lab


def agreement_document(
    sim_summary: Mapping[str, Any],
    lab_summary: Mapping[str, Any],
    sim: RunResult,
    lab: RunResult,
    tolerances: Mapping[str, Tolerance | None],
    unlike: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``validate.json``'s ``agreement``, ``tolerance`` and ``not_compared`` keys
    (docs/lab.md "Agreement"): means over runs, interactive p50/p99 over all runs'
    messages; the metrics of ``unlike`` (metric → why) get no verdict."""
    unlike = unlike or {}
    rows = compare(
        validate_values(sim_summary, (d.delays for d in sim.digests)),
        validate_values(lab_summary, (d.delays for d in lab.digests)),
        tolerances,
        unlike,
    )
    return {"agreement": agreement_json(rows), "tolerance": tolerance_json(tolerances), "not_compared": dict(unlike)}


def not_compared(scenario: Scenario) -> dict[str, str]:
    """Metrics the two substrates measure differently for ``scenario`` (metric → why),
    so that a verdict on them would compare unlike things."""
    # analysis.lab_join leaves ports.drops_loss at its default 0: thinwan-link's random
    # losses are in its counters, not in the records.
    unlike = {
        "link_loss_drops": "lab: the emulator's random losses are not in its records (always 0)",
        # analysis.lab_join: the lab sees retransmissions on the wire, not the sender's
        # state, so its count also holds tail-loss probes and lone RACK retransmissions;
        # both substrates count retransmit_episodes alike, and that is judged instead.
        "fast_retransmits_per_conn": "lab: estimated as retransmission episodes − timeouts "
        "(judged: retransmit_episodes_per_conn)",
    }
    if scenario.topology.kind == "mux" and scenario.mux.mode == "mux":
        # substrates/lab/tunnel.py: a tunnelled message travels inside a trunk the lab's
        # join cannot see into.
        why = "lab: the connections are the pump ↔ core sockets, not the trunks"
        return unlike | {
            "timeouts_per_conn": why,
            "spurious_timeouts_per_conn": why,
            "fast_retransmits_per_conn": why,
            "retransmit_episodes_per_conn": why,
            "utilisation_interactive": "lab: trunk packets are not attributed to messages",
        }
    return unlike

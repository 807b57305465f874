"""``thinwan validate-model``: the capture replayed and its fitted model, on one network.

Both runs are the scenario's own dumbbell with the same pairs, duration, runs and seeds;
only ``[traffic]`` differs: the replay is ``traffic.model = "pcap"`` on the capture (each
pair's server writes what one of the capture's servers wrote, when it wrote it), the
model is the scenario's thin-client source. Each is an ordinary :func:`run_scenario`
(records, ``summary.json`` and ``report.html`` in ``<out>/replay`` and ``<out>/model``);
their messages are then measured alike by :mod:`thinwan.analysis.model_check`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.model_check import gap_rule_metrics
from ..config.capture import TraceError, read_flows
from ..config.files import ScenarioError
from ..config.scenario import Scenario, scenario_from_dict
from ..records.schema import RunRecords
from .runs import RunResult, run_scenario

__all__ = ["Validation", "validate_model", "KINDS"]

KINDS = ("replay", "model")


@dataclass
class Validation:
    """Both runs: their scenarios, results and gap-rule metrics per run."""

    capture: str
    gap_ms: float
    scenarios: dict[str, Scenario]
    results: dict[str, RunResult]
    # Per kind, per run: analysis.model_check.gap_rule_metrics.
    metrics: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """JSON-ready: per kind the gap-rule r_I (mean and per run) and the run summary."""
        doc: dict[str, Any] = {"capture": self.capture, "gap_ms": self.gap_ms}
        for kind in KINDS:
            runs = [{k: v for k, v in m.items() if k != "interactive_delays_s"} for m in self.metrics[kind]]
            sc = self.scenarios[kind]
            doc[kind] = {
                "r_I150": _mean([r["r_I150"] for r in runs]),
                "r_I1000": _mean([r["r_I1000"] for r in runs]),
                "runs": runs,
                "pairs": sc.topology.pairs,
                "duration_s": sc.scenario.duration_s,
                "seeds": self.results[kind].document["seeds"],
                "summary": self.results[kind].document["summary"],
            }
        return doc


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def validate_model(
    capture: str | Path,
    scenario: Scenario,
    out: str | Path,
    *,
    server_port: int = 0,
    gap_ms: float,
    pairs: int | None = None,
    duration_s: float | None = None,
    runs: int | None = None,
    progress: bool = True,
    report: Callable[[Path, Scenario, RunResult], None] | None = None,
) -> Validation:
    """Run the replay and the model; raises :class:`ScenarioError` on a bad capture.
    ``report(directory, scenario, result)`` may add to each run's directory (the CLI
    writes the run page there)."""
    capture = Path(capture).resolve()
    try:
        flows = read_flows(capture, server_port)
    except TraceError as e:
        raise ScenarioError(f"{capture}: {e}") from None
    if not flows:
        raise ScenarioError(f"{capture}: no server → client flow with payload (check --server-port)")
    t0 = flows[0].first
    span = max(f.writes[-1][0] for f in flows) - t0
    pairs = pairs or min(len(flows), scenario.topology.pairs)
    if pairs > len(flows):
        raise ScenarioError(f"{capture}: --pairs {pairs} but the capture has {len(flows)} server → client flow(s)")
    duration = duration_s or min(scenario.scenario.duration_s, span)
    if duration <= 0:
        raise ScenarioError(f"{capture}: the capture spans no time (one payload packet?)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base = scenario.model_dump(mode="python")
    base["scenario"].update(duration_s=duration)
    if runs:
        base["scenario"]["runs"] = runs
    base["topology"]["pairs"] = pairs
    scenarios, results, metrics = {}, {}, {}
    for kind in KINDS:
        data = {k: dict(v) for k, v in base.items()}
        data["scenario"]["name"] = f"{scenario.name}-{kind}"
        if kind == "replay":
            data["traffic"].update(model="pcap", pcap_file=str(capture), pcap_server_port=server_port)
        sc = scenario_from_dict(data, f"{scenario.name} ({kind})")
        scenarios[kind] = sc

        def finish(directory: Path, result: RunResult, sc: Scenario = sc) -> None:
            if report is not None:
                report(directory, sc, result)

        results[kind] = run_scenario(sc, out / kind, progress=progress, finish=finish)
        metrics[kind] = [
            gap_rule_metrics(RunRecords.read(out / kind / "runs" / f"run-{k}").messages, sc, gap_ms / 1000.0)
            for k in range(sc.scenario.runs)
        ]
    return Validation(str(capture), gap_ms, scenarios, results, metrics)

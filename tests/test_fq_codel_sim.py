"""FQ-CoDel and the class scheduler through the Python API: the ``[queue]`` keys
(QueueSection mirrors the core's QueueKeys) and Ogawa's large-buffer dumbbell with
``discipline = "fq_codel"`` against the 2500-KB tail-drop FIFO."""

from __future__ import annotations

from pathlib import Path

import pytest

from thinwan import _native
from thinwan.analysis.metrics import summarize_run
from thinwan.config.scenario import QueueSection, Scenario, ScenarioError, load_scenario, scenario_from_dict
from thinwan.records.schema import RunRecords

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("queue", "message"),
    [
        ({"discipline": "fq-codel"}, "queue.discipline: Input should be"),
        ({"fq_codel_target_ms": 0}, "queue.fq_codel_target_ms: Input should be greater than 0"),
        ({"fq_codel_target_ms": 50, "fq_codel_interval_ms": 10}, "queue.fq_codel_interval_ms: must be ≥"),
        ({"fq_codel_flows": 70000}, "queue.fq_codel_flows: Input should be less than or equal to 65536"),
        ({"fq_codel_quantum_bytes": 0}, "queue.fq_codel_quantum_bytes: Input should be greater than or equal to 1"),
        ({"class_quantum_bytes": 0}, "queue.class_quantum_bytes: Input should be greater than or equal to 1"),
        ({"discipline": "classes"}, 'queue.class_rate_shares: discipline "classes" needs'),
        ({"class_rate_shares": [0.6, 0.6]}, "queue.class_rate_shares: the shares sum to 1.2"),
        ({"class_rate_shares": [0.5], "class_ceil_shares": [0.4]}, "queue.class_ceil_shares: entry 0"),
        ({"class_rate_shares": [0.5], "class_ceil_shares": [1, 1]}, "queue.class_ceil_shares: 2 entries"),
        ({"class_rate_shares": [0.5], "class_interactive": 1}, "queue.class_interactive: must be -1"),
        ({"class_rate_shares": [0.5, 0.5], "class_flows": [[1], [1]]}, "queue.class_flows: entry 1"),
    ],
)
def test_bad_queue_values_name_the_key(queue: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        scenario_from_dict({"queue": queue})


def test_class_keys_reach_the_simulator_and_survive_toml() -> None:
    queue = {
        "discipline": "classes",
        "class_rate_shares": [0.3, 0.7],
        "class_ceil_shares": [1.0, 0.9],
        "class_interactive": 0,
        "class_flows": [[], [2, 3]],
    }
    s = scenario_from_dict({"scenario": {"duration_s": 2.0}, "topology": {"pairs": 4}, "queue": queue})
    assert scenario_from_dict(__import__("tomllib").loads(s.to_toml())) == s
    # The core parses the same keys (an unknown one would fail there).
    records = _native.simulate(s.to_native_json(), 0)
    assert records["meta"]["drops"]["codel"] == 0
    assert QueueSection().fq_codel_flows == 1024 and QueueSection().class_interactive == -1


def test_fq_codel_cuts_interactive_delay_against_a_big_droptail_buffer() -> None:
    base = load_scenario(ROOT / "scenarios" / "ogawa2011" / "large-buffer.toml").with_values(
        {"scenario.duration_s": 30.0}
    )

    def run(discipline: str) -> tuple[dict, dict]:
        sc: Scenario = base.with_values({"queue.discipline": discipline})
        raw = _native.simulate(sc.to_native_json(), 0)
        return summarize_run(RunRecords.from_native(raw), sc), raw["meta"]["drops"]

    (fifo, fifo_drops), (fq, fq_drops) = run("droptail"), run("fq_codel")
    # Measured (30 s, seed 1): p99 286.6 → 26.0 ms; r_I150 0.0275 → 0.0013.
    assert fq["interactive_delay_p99_ms"] < 0.5 * fifo["interactive_delay_p99_ms"], (fq, fifo)
    assert fq["r_I150"] < fifo["r_I150"], (fq["r_I150"], fifo["r_I150"])
    assert fq_drops["codel"] > 0 and fifo_drops["codel"] == 0

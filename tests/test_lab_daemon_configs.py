"""The daemons' configs the lab writes for a tunnel scenario (thinwan.substrates.lab.tunnel):
what the scenario says reaches thinwan-mux, and nothing is left to the daemons' defaults
where those differ from the scenario's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomllib

from thinwan.config.scenario import LabSection, load_scenario
from thinwan.substrates.lab.tunnel import daemon_configs

BASE = Path(__file__).resolve().parent.parent / "scenarios" / "carlmar2011" / "base.toml"


def edge_trunk(**values: Any) -> dict[str, Any]:
    scenario = load_scenario(BASE).with_values({"mux.mode": "mux", "mux.trunks": 4, **values})
    core, edge = daemon_configs(scenario, LabSection())
    assert "lane_rule" not in tomllib.loads(core)["trunk"]  # the core follows the edge
    return tomllib.loads(edge)["trunk"]


@pytest.mark.parametrize(
    ("rule", "written"),
    # Unset in a scenario is the backlog rule, the daemons' default the held rule.
    [(None, "backlog"), ("backlog", "backlog"), ("held", "held")],
)
def test_the_lane_rule_is_always_written_for_adaptive_lanes(rule: str | None, written: str) -> None:
    values: dict[str, Any] = {"mux.lanes": "adaptive", "mux.max_lanes": 64}
    if rule is not None:
        values["mux.lane_rule"] = rule
    trunk = edge_trunk(**values)
    assert (trunk["connections"], trunk["lanes"], trunk["max_connections"]) == (4, "adaptive", 64)
    assert trunk["lane_rule"] == written


def test_fixed_lanes_write_no_adaptive_keys() -> None:
    # thinwan-mux refuses `lane_rule` and `max_connections` without adaptive lanes.
    trunk = edge_trunk()
    assert trunk["connections"] == 4 and not {"lanes", "lane_rule", "max_connections"} & trunk.keys()

"""Ogawa §6 case 2 as the source ran it: scenarios/ogawa2011/*-separate-{prio-sack,proposed}.toml
are the case-1 files with separate connections, and a short run of each keeps interactive
and bulk writes on their own connections (docs/findings.md has the full runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from thinwan.config.scenario import load_scenario
from thinwan.substrates.sim import native_available, simulate

OGAWA = Path(__file__).resolve().parent.parent / "scenarios" / "ogawa2011"
CASES = [(buffer, config) for buffer in ("small", "large") for config in ("prio-sack", "proposed")]


def _without_labels(dump: dict) -> dict:
    del dump["scenario"]["name"], dump["scenario"]["description"]
    return dump


@pytest.mark.parametrize(("buffer", "config"), CASES)
def test_case2_file_is_the_case1_file_with_separate_connections(buffer: str, config: str) -> None:
    case2 = load_scenario(OGAWA / f"{buffer}-buffer-separate-{config}.toml")
    case1 = load_scenario(OGAWA / f"{buffer}-buffer-{config}.toml")
    assert case2.name == f"ogawa2011-{buffer}-buffer-separate-{config}"
    assert case2.traffic.separate_connections and not case1.traffic.separate_connections
    assert (case2.queue.discipline, case2.tcp.sack) == ("priority", True)
    assert case2.tcp.sack_off_after_timeout == (config == "proposed")
    want = _without_labels(case1.with_values({"traffic.separate_connections": True}).model_dump())
    assert _without_labels(case2.model_dump()) == want


@pytest.mark.skipif(not native_available(), reason="needs the native simulator")
@pytest.mark.parametrize(("buffer", "config"), CASES)
def test_case2_short_run_splits_the_kinds(buffer: str, config: str) -> None:
    scenario = load_scenario(OGAWA / f"{buffer}-buffer-separate-{config}.toml").with_values(
        {"topology.pairs": 4, "scenario.duration_s": 5.0, "scenario.drain_s": 2.0, "scenario.runs": 1}
    )
    records = simulate(scenario, 0)
    conns = records.connections
    assert len(conns) == 8 and sorted(conns["role"].tolist()) == [0] * 4 + [1] * 4
    role = dict(zip(conns["conn"], conns["role"], strict=True))
    messages = records.messages
    assert set(messages["kind"]) == {0, 1}
    # Interactive writes (kind 0) on the role-0 connection, bulk (kind 1) on role 1.
    assert all(role[c] == k for c, k in zip(messages["conn"], messages["kind"], strict=True))
    assert (messages["t_read"].notna()).mean() > 0.9

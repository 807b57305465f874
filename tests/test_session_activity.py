"""`traffic.session_activity` through the simulator: lognormal activity spreads the
streams' flow counts as its σ says, is deterministic, and "identical" changes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from thinwan.config.scenario import scenario_from_dict
from thinwan.substrates.sim import native_available, simulate

pytestmark = pytest.mark.skipif(not native_available(), reason="native simulator not built")


def scenario(**traffic: object):
    return scenario_from_dict(
        {
            "scenario": {"duration_s": 120.0, "drain_s": 1.0, "seed": 3},
            "topology": {"pairs": 60, "bottleneck_rate_mbps": 100.0},
            "queue": {"limit_bytes": 10_000_000},
            "traffic": traffic,
            "records": {"traces": False},
        }
    )


def writes_per_conn(records) -> np.ndarray:
    return records.messages.groupby("conn").size().to_numpy()


def test_lognormal_activity_spreads_the_streams() -> None:
    same = writes_per_conn(simulate(scenario(), 0))
    spread = writes_per_conn(simulate(scenario(session_activity="lognormal", session_activity_sigma=0.8), 0))
    # Identical streams: ~480 flows each, their counts differ by sampling noise only
    # (sd of ln ≈ 0.1); with σ = 0.8 the flow rates differ by that much.
    sd_same, sd_spread = np.std(np.log(same)), np.std(np.log(spread))
    assert sd_same < 0.25, sd_same
    assert 0.55 < sd_spread < 1.1, sd_spread
    # E[activity] = 1: the population writes about as much in total.
    assert spread.sum() / same.sum() == pytest.approx(1.0, abs=0.2)


def test_activity_is_deterministic_and_identical_is_the_default() -> None:
    a = simulate(scenario(session_activity="lognormal", session_activity_sigma=0.5), 0).messages
    b = simulate(scenario(session_activity="lognormal", session_activity_sigma=0.5), 0).messages
    assert a.equals(b)
    base = simulate(scenario(), 0).messages
    explicit = simulate(scenario(session_activity="identical", session_activity_sigma=2.0), 0).messages
    assert base.equals(explicit), "σ is unused with identical streams"
    assert not base.equals(a)


def test_per_transition_sigma_reaches_the_source() -> None:
    base = simulate(scenario(), 0).messages
    same = simulate(scenario(gap_lognormal_sigma_ii=1.0), 0).messages  # = the common σ
    other = simulate(scenario(gap_lognormal_sigma_ii=0.3), 0).messages
    assert base.equals(same)
    assert not base.equals(other)

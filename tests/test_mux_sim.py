"""The simulated thin-stream mux test grid (Carlmar, docs/sources.md): scenario files,
records of the mux topology, and the box-plot statistics of the sweep rows."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from thinwan import _native
from thinwan.analysis.metrics import DELAY_QUANTILES, summarize_run
from thinwan.config.scenario import Scenario, load_scenario
from thinwan.config.sweepfile import SweepTask, load_sweep
from thinwan.execute.sweeps import run_task
from thinwan.records.schema import RunRecords

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "scenarios" / "carlmar2011"


def small(mode: str, trunks: int = 1, loss: float = 0.05) -> Scenario:
    """The grid's base, shrunk: 20 streams for 20 s."""
    return load_scenario(GRID / "base.toml").with_values(
        {
            "topology.pairs": 20,
            "scenario.duration_s": 20.0,
            "topology.bottleneck_loss": loss,
            "topology.bottleneck_loss_rev": loss,
            "mux.mode": mode,
            "mux.trunks": trunks,
        }
    )


def simulate(scenario: Scenario) -> RunRecords:
    return RunRecords.from_native(_native.simulate(scenario.to_native_json(), 0))


def test_grid_file_covers_the_published_grid() -> None:
    sweep = load_sweep(GRID / "grid.toml")
    assert len(sweep.points) == 2 * 2 * 2 * 7
    seen = {
        (
            p.scenario.topology.bottleneck_loss,
            p.scenario.topology.bottleneck_loss_rev,
            p.scenario.topology.bottleneck_delay_ms,
            p.scenario.topology.bottleneck_jitter_pct,
            p.scenario.mux.mode,
            p.scenario.mux.trunks,
            p.scenario.mux.lanes,
            p.scenario.mux.shed,
            p.scenario.mux.lane_rule,
        )
        for p in sweep.points
    }
    configs = {
        ("direct", 1, "fixed", False, None),
        ("mux", 1, "fixed", False, None),
        ("mux", 4, "fixed", False, None),
        ("mux", 16, "adaptive", False, None),
        ("mux", 16, "adaptive", False, "held"),
        ("mux", 16, "adaptive", True, None),
        ("mux", 1, "adaptive", False, None),
    }
    assert seen == {
        (loss, loss, delay, jitter, mode, trunks, lanes, shed, rule)
        for loss in (0.01, 0.05)
        for delay in (100.0, 300.0)
        for jitter in (0.0, 10.0)
        for mode, trunks, lanes, shed, rule in configs
    }
    base = sweep.points[0].scenario
    assert (base.topology.last_hop_delay_ms, base.topology.last_hop_rate_mbps) == (50.0, 100.0)
    assert base.scenario.runs == 3 and sweep.runs == 3


@pytest.mark.parametrize(("mode", "trunks"), [("direct", 1), ("mux", 1), ("mux", 3)])
def test_records_keep_one_row_per_server_write(mode: str, trunks: int) -> None:
    scenario = small(mode, trunks)
    r = simulate(scenario)
    m, c = r.messages, r.connections
    assert set(m["conn"]) <= set(range(20)) and (m["kind"] == 0).all()
    assert m["t_read"].notna().all(), "every write reaches its client"
    assert ((m["t_read"] - m["t_write"]) >= 0.150).all(), "WAN 100 ms + last hop 50 ms"
    expected_roles = [0] * 20 if mode == "direct" else [3] * 20 + [2] * trunks + [4] * trunks
    assert c["role"].tolist() == expected_roles
    streams = c["role"].isin([0, 3])
    assert (c["bytes_delivered"] == c["bytes_written"])[streams].all()
    # Trunk lanes may end with a control frame (ping, ack) in flight.
    assert ((c["bytes_written"] - c["bytes_delivered"])[~streams] <= 64).all()
    assert r.ports["drops_loss"].iloc[0] > 0 and r.meta["drops"]["loss"] == r.ports["drops_loss"].sum()


def test_direct_and_mux_see_the_same_writes() -> None:
    a, b = simulate(small("direct")), simulate(small("mux", 2))
    np.testing.assert_array_equal(a.messages["t_write"], b.messages["t_write"])
    np.testing.assert_array_equal(a.messages["bytes"], b.messages["bytes"])


def test_sweep_rows_carry_box_plot_statistics() -> None:
    scenario = small("mux", 1)
    row = run_task(SweepTask("x", 0, scenario))["summary"]
    q = [row[k] for k in DELAY_QUANTILES]
    assert all(math.isfinite(v) for v in q)
    assert row["delay_min_ms"] >= 150.0
    assert row["delay_min_ms"] <= row["delay_q1_ms"] <= row["delay_median_ms"] <= row["delay_q3_ms"]
    assert row["delay_q3_ms"] <= row["delay_p99_ms"] <= row["delay_p999_ms"] <= row["delay_max_ms"]
    assert row["link_loss_drops"] > 0
    assert row == pytest.approx(summarize_run(simulate(scenario), scenario), nan_ok=True)


def test_sweep_report_has_box_plots_when_the_tunnel_is_compared(tmp_path: Path) -> None:
    from thinwan.execute.sweeps import run_sweep
    from thinwan.report.sweep_page import write_sweep_report

    sweep_file = tmp_path / "mini.toml"
    sweep_file.write_text(
        f"""
[sweep]
base = "{GRID / "base.toml"}"
runs = 1
[set]
"topology.pairs" = 10
"scenario.duration_s" = 10.0
[vary]
"topology.bottleneck_delay_ms" = [100.0, 300.0]
[vary.config]
direct = {{ "mux.mode" = "direct" }}
mux-2 = {{ "mux.mode" = "mux", "mux.trunks" = 2 }}
"""
    )
    sweep = load_sweep(sweep_file)
    result = run_sweep(sweep, tmp_path / "out", jobs=1, progress=False)
    write_sweep_report(tmp_path / "out", sweep, result.frame, result.document)
    html = (tmp_path / "out" / "report.html").read_text()
    assert "per grid point (box plots)" in html

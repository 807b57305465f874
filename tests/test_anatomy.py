"""`thinwan anatomy`: explains a real timeout of a real (re-)run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import thinwan._native as native

from thinwan.analysis.anatomy import TIMEOUT
from thinwan.config.scenario import ScenarioError, scenario_from_dict
from thinwan.records.schema import RunRecords
from thinwan.substrates.sim import timeout_anatomy as anatomy

LOSSY = {
    "scenario": {"name": "lossy", "duration_s": 20.0, "drain_s": 5.0},
    "topology": {"pairs": 20, "bottleneck_rate_mbps": 2.0},
    "queue": {"limit_packets": 0, "limit_bytes": 8000},
    "tcp": {"recovery": "reno", "sack": False, "delayed_ack": False},
}


def test_the_anatomy_rerun_is_the_same_run_and_finds_a_timeout() -> None:
    sc = scenario_from_dict(LOSSY)
    plain = RunRecords.from_native(native.simulate(sc.to_native_json(), 0))
    a = anatomy(sc, run=0)
    # The chosen connection is the one with the most timeouts, and logging did not
    # change the run: the same number of timeouts, in the log and in the counters.
    worst = plain.connections.loc[plain.connections["timeouts"].idxmax()]
    assert a.conn == int(worst["conn"])
    assert a.timeouts_total == int(worst["timeouts"]) > 0
    assert a.window[0] < a.t_timeout < a.window[1]
    assert (a.packets["event"] == TIMEOUT).any()
    text = a.explain()
    assert "retransmission timeout" in text and f"byte {a.seq}" in text
    assert ("spurious" in text) != ("genuine loss" in text)


def test_a_run_without_timeouts_is_a_clear_error() -> None:
    calm = scenario_from_dict({"scenario": {"duration_s": 3.0}, "topology": {"pairs": 1}})
    with pytest.raises(ScenarioError, match="no retransmission timeout"):
        anatomy(calm)


def test_cli_writes_the_picture(tmp_path: Path) -> None:
    toml = tmp_path / "lossy.toml"
    toml.write_text(
        "[scenario]\nduration_s = 20.0\n[topology]\npairs = 20\nbottleneck_rate_mbps = 2.0\n"
        '[queue]\nlimit_packets = 0\nlimit_bytes = 8000\n[tcp]\nrecovery = "reno"\nsack = false\n'
    )
    out = tmp_path / "a.html"
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", "anatomy", str(toml), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="fig-anatomy"' in page and "Plotly.newPlot" in page
    assert "retransmission timeout" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "thinwan", "anatomy", str(toml), "--timeout", "999"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--timeout 999" in bad.stderr

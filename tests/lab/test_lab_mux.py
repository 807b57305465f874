"""The tunnel grid in the lab: three namespaces, two emulated links, the real thinwan-mux
daemons (``thinwan sweep --lab``, thinwan.lab.tunnel). Needs root and the binaries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.lab.conftest import LAST_HOP_MS, WAN_MS
from tests.lab.conftest import small_grid as small
from thinwan.analysis.metrics import message_delays
from thinwan.config.scenario import LabSection
from thinwan.substrates.binaries import MissingBinary, find_binary
from thinwan.substrates.lab.netns import list_netns
from thinwan.substrates.lab.tunnel import run_tunnel_once

pytestmark = pytest.mark.usefixtures("lab_env")

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "scenarios" / "carlmar2011" / "base.toml"
STATS = ("min", "q1", "median", "q3", "max", "p99", "p999")


@pytest.fixture(scope="module", autouse=True)
def mux_built() -> None:
    try:
        find_binary("thinwan-mux")
    except MissingBinary as e:
        pytest.fail(str(e))


def test_tunnel_carries_every_byte_through_the_daemons(tmp_path: Path) -> None:
    before = set(list_netns())
    scenario = small(**{"mux.mode": "mux", "mux.trunks": 2})
    raw = tmp_path / "raw"
    records = run_tunnel_once(scenario, LabSection(), 0, raw)
    assert set(list_netns()) == before  # namespaces, devices and processes are gone
    m = records.messages
    assert len(m) > 10 and set(m.conn) == {0, 1, 2}
    # Byte-exact: the sink checked every byte and id; every byte written was read.
    c = records.connections
    assert (c.bytes_delivered == c.bytes_written).all() and (c.bytes_written > 0).all()
    assert m.t_read.notna().all()
    e2e = message_delays(m, 4.0)["end_to_end"]
    assert (e2e >= (WAN_MS + LAST_HOP_MS) / 1000.0).all()
    # It went through the tunnel: the pump's peers are the core (same namespace), both
    # lanes came up, and the link carried the trunk (port 7400), not the streams.
    conns = json.loads((raw / "conns.json").read_text())["conns"]
    assert all(c["remote"].startswith("198.18.1.1:") for c in conns)
    mux = records.meta["lab"]["mux"]
    assert mux["trunks"] == 2 and mux["lanes_up"] == [0, 1] and mux["streams_reset"] == 0
    assert "trunk lane up" in (raw / "edge.log").read_text()


def test_lab_sweep_json_has_both_configurations_and_no_loss(tmp_path: Path) -> None:
    sweep = tmp_path / "mini.toml"
    sweep.write_text(
        f"""
[sweep]
base = "{BASE}"
runs = 1
[set]
"topology.pairs" = 2
"scenario.drain_s" = 30.0
"topology.last_hop_delay_ms" = {LAST_HOP_MS}
[vary]
"topology.bottleneck_delay_ms" = [{WAN_MS}]
[vary.config]
direct = {{ "mux.mode" = "direct" }}
mux-1 = {{ "mux.mode" = "mux", "mux.trunks" = 1 }}
"""
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", "sweep", str(sweep), "--lab", "--duration", "4", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["substrate"] == "lab" and doc["configurations"]["labels"] == ["direct", "mux-1"]
    (grid,) = doc["points"]
    assert grid["params"] == {"topology.bottleneck_delay_ms": WAN_MS}
    for name, stats in grid["configs"].items():
        values = [stats[k] for k in STATS]
        assert all(v is not None and np.isfinite(v) for v in values), (name, stats)
        assert (WAN_MS + LAST_HOP_MS) <= stats["min"] <= stats["median"] <= stats["max"], name
        summary = stats["summary"]
        assert summary["undelivered"] == 0 and stats["messages"] == summary["messages"] > 5, name
    html = (out / "report.html").read_text()
    assert "Sweep mini (lab)" in html and "Measured in the namespace lab" in html and "box plots" in html
    assert not (out / "lab-raw").exists() or not any((out / "lab-raw").iterdir())
    # A second run per point, resumed in the same directory with --keep-raw: only the new
    # tasks run, and their raw logs stay.
    again = subprocess.run(
        [sys.executable, "-m", "thinwan", "sweep", str(sweep), "--lab", "--duration", "4", "--out", str(out),
         "--runs", "2", "--keep-raw", "--quiet", "--no-report"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    kept = sorted(p.name for p in (out / "lab-raw").iterdir())
    assert len(kept) == 2 and all(name.endswith("-run1") for name in kept), kept
    assert all((out / "lab-raw" / name / "sink.csv").stat().st_size > 0 for name in kept)


def test_adaptive_lanes_and_bulk_limit_reach_the_daemons(tmp_path: Path) -> None:
    """`mux.lanes = "adaptive"` (by the held rule), `mux.bulk_limit`,
    `mux.thin_linear_timeouts` and `mux.rto_min_ms` run in the lab's daemons (the edge
    starts with `trunks` lanes and may open up to `max_lanes`, here more than the 64 the
    core once refused), every byte
    intact, the trunk sockets take the options, and the edge's lane reports (every 5 s)
    reach the run's metadata."""
    scenario = small(**{"mux.mode": "mux", "mux.trunks": 1, "mux.lanes": "adaptive", "mux.max_lanes": 100,
                        "mux.lane_rule": "held", "mux.bulk_limit": True, "mux.thin_linear_timeouts": True, "mux.rto_min_ms": 50,
                        "scenario.duration_s": 6.0})  # fmt: skip
    raw = tmp_path / "raw"
    records = run_tunnel_once(scenario, LabSection(), 0, raw)
    edge, core = (raw / "edge.toml").read_text(), (raw / "core.toml").read_text()
    assert 'lanes = "adaptive"' in edge and "max_connections = 100" in edge and 'lane_rule = "held"' in edge
    for text in (edge, core):
        assert "bulk_limit = true" in text and "thin_linear_timeouts = true" in text and "rto_min_ms = 50" in text
    for role in ("edge", "core"):
        log = (raw / f"{role}.log").read_text()
        assert "TCP_THIN_LINEAR_TIMEOUTS not set" not in log and "TCP_RTO_MIN_US not set" not in log
    c = records.connections
    assert (c.bytes_delivered == c.bytes_written).all() and (c.bytes_written > 0).all()
    mux = records.meta["lab"]["mux"]
    assert 0 in mux["lanes_up"] and mux["streams_reset"] == 0
    for role in ("edge", "core"):
        assert mux["lane_reports"][role], f"{role}: a 6-s run spans at least one report"
        for r in mux["lane_reports"][role]:
            assert 1 <= r["wanted"] <= 100 and len(r["streams"]) == r["wanted"] and sum(r["streams"]) <= 3, r


def test_shedding_reaches_the_edge_config(tmp_path: Path) -> None:
    """`mux.shed` in the lab: the edge's forward gets `shed.direct` = the pump across the
    WAN. The lab's sink opens every connection at the start (`start_stagger_ms` delays
    only the first write), before the lane's first ping came back, so even a slack of
    −10 s sheds nothing: every stream goes through the core (its pump-side peer is local,
    no role 5) and every byte arrives."""
    from thinwan.analysis.metrics import ROLE_SHED, summarize_run

    scenario = small(**{"mux.mode": "mux", "mux.trunks": 1, "mux.shed": True, "mux.shed_slack_ms": -10_000.0})
    raw = tmp_path / "raw"
    records = run_tunnel_once(scenario, LabSection(), 0, raw)
    assert 'shed = { direct = "198.18.1.1:' in (raw / "edge.toml").read_text()
    c = records.connections
    assert (c.bytes_delivered == c.bytes_written).all() and (c.bytes_written > 0).all()
    assert len(c) == 3 and (c.role != ROLE_SHED).all()
    assert summarize_run(records, scenario)["streams_shed"] == 0

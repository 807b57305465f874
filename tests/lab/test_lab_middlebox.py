"""``thinwan lab run`` of the QDS middlebox topology (docs/lab.md "The middlebox in the
lab"): the scenario's downlink discipline in thinwan-link, real Linux TCP, the pump's
video/data mix, and the simulator's per-type metrics from the lab's per-packet RTTs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.lab.conftest import lab_run_cli
from thinwan.analysis.by_type import APP_NAMES
from thinwan.records.schema import SCHEMA, RunRecords

pytestmark = pytest.mark.usefixtures("lab_env")

# c = 8 Mbit/s, one video flow (5 Mbit/s) and five data flows (1 Mbit/s each): 10 Mbit/s
# offered, 25 % overload, so the downlink is busy and the types' throughputs add up to it.
SCENARIO = """
[scenario]
name = "lab-middlebox"
duration_s = {duration}
drain_s = 1.0
seed = 4

[topology]
kind = "middlebox"
pairs = 6
access_rate_mbps = 1000.0
access_delay_ms = 0.1
bottleneck_rate_mbps = 8.0
bottleneck_delay_ms = 0.0

[queue]
discipline = "{discipline}"
limit_packets = 100

[qds]
model_file = ""  # the core's shipped classifier, in thinwan-link as in the simulator

[tcp]
delayed_ack = false

[traffic]
model = "mix"
mix = [["video", 1], ["data", 5]]

[records]
traces = false
trace_connections = "none"
"""


def lab_run(tmp_path: Path, discipline: str, duration: float) -> tuple[dict, RunRecords]:
    scn = tmp_path / "s.toml"
    scn.write_text(SCENARIO.format(discipline=discipline, duration=duration))
    out = tmp_path / "out"
    done = lab_run_cli(scn, out, "--runs", "1")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), RunRecords.read(out / "runs" / "run-0")


def test_fq_codel_middlebox_gives_by_type_and_per_packet_rtts(tmp_path: Path) -> None:
    doc, rec = lab_run(tmp_path, "fq_codel", 8.0)
    by_type = doc["summary"]["by_type"]
    assert set(by_type) == {"video", "data"}
    mb = rec.meta["lab"]["middlebox"]
    assert mb["discipline"] == "fq_codel" and mb["downlink_rate_bps"] == 8_000_000
    # The downlink is saturated: the types' goodputs add up to its rate less the headers
    # (1448 of 1500 bytes with timestamps) and the first round trips of slow start.
    total = by_type["video"]["throughput_mbps"] + by_type["data"]["throughput_mbps"]
    assert 0.85 * 8.0 <= total <= 8.0, by_type
    # The per-packet RTT table: the simulator's columns, rows for every connection, each
    # RTT at least the base RTT the link applies (both directions' one-way delay).
    prt = rec.packet_rtt
    assert list(prt.columns)[: len(SCHEMA["packet_rtt"])] == list(SCHEMA["packet_rtt"])
    assert set(prt["conn"]) == set(range(6))
    acked = prt["rtt"].dropna().to_numpy()
    assert len(acked) > 0.95 * len(prt)
    base_s = 2 * mb["one_way_delay_ms"] / 1e3
    assert acked.min() >= base_s, (acked.min(), base_s)
    # Labels from the mix: pair 0 video, pairs 1–5 data.
    apps = prt.groupby("conn")["app"].unique()
    assert [APP_NAMES[a] for a in apps[0]] == ["video"]
    assert all([APP_NAMES[a] for a in apps[c]] == ["data"] for c in range(1, 6))
    # With a queue in front of it most packets wait: the mean RTT lies above the base.
    assert np.mean(acked) > base_s


def test_qds_middlebox_records_the_control_loop(tmp_path: Path) -> None:
    doc, rec = lab_run(tmp_path, "qds", 5.0)
    classes, flows = rec.qds_classes, rec.qds_flows
    assert list(classes.columns)[: len(SCHEMA["qds_classes"])] == list(SCHEMA["qds_classes"])
    periods = classes["t"].nunique()
    assert periods >= 20  # 100-ms periods over ≥ 5 s
    assert len(classes) == periods * classes["class"].nunique()
    # Each period's class rates share the downlink (plan: w_norm · c) once flows are timed.
    busy = classes[classes.groupby("t")["flows"].transform("sum") > 0]
    sums = busy.groupby("t")["rate_bps"].sum().to_numpy()
    assert len(sums) and np.allclose(sums, 8e6, rtol=1e-6)
    assert not flows.empty and set(flows["conn"]) <= set(range(6))
    assert set(flows.loc[flows["conn"] == 0, "app_true"]) == {0}  # video (AppType index)
    assert "qds_classifier_accuracy" in doc["summary"]
    assert set(doc["summary"]["by_type"]) == {"video", "data"}

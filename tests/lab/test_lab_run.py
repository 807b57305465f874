"""``lab run``: pump, sink and emulator logs joined into the simulator's records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from thinwan.metrics import message_delays
from thinwan.records import SCHEMA, RunRecords

pytestmark = pytest.mark.usefixtures("lab_env")

SCENARIO = """
[scenario]
name = "lab-small"
duration_s = 4.0
drain_s = 1.0
seed = 3

[topology]
pairs = 3
bottleneck_rate_mbps = 10.0
bottleneck_delay_ms = 10.0
access_delay_ms = 0.5

[queue]
limit_packets = 100

[lab]
congestion_control = "reno"
"""


def test_lab_run_writes_records_like_the_simulator(tmp_path: Path) -> None:
    scn = tmp_path / "s.toml"
    scn.write_text(SCENARIO)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "thinwan.lab.cli", "lab", "run", str(scn), "--out", str(out), "--json", "--quiet"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["substrate"] == "lab" and doc["summary"]["runs"] == 1
    rec = RunRecords.read(out / "runs" / "run-0")
    for table in ("messages", "connections", "ports"):
        assert list(getattr(rec, table).columns)[: len(SCHEMA[table])] == list(SCHEMA[table])
    m = rec.messages
    assert len(m) > 20 and set(m.conn) == {0, 1, 2}
    assert m.t_read.notna().all() and m.t_deq.notna().all()
    d = message_delays(m, 4.0)
    # Components add up, and "propagation" is the configured 10 + 2·0.5 ms.
    assert np.allclose(d[["server", "router", "retransmission", "client", "propagation"]].sum(axis=1), d.end_to_end)
    assert abs(d.propagation.median() - 0.011) < 0.0005
    assert (m.t_write <= m.t_first_tx).all() and (m.t_enq <= m.t_deq).all() and (m.t_arrive <= m.t_read).all()
    assert rec.meta["substrate"] == "lab" and rec.meta["lab"]["not_honoured"]
    assert (out / "report.html").exists() and (out / "summary.json").exists()

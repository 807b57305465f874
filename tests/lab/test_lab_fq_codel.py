"""``lab run`` with the core's FQ-CoDel in thinwan-link: real Linux TCP fills the
buffer, CoDel drops at the head (event-log reason 8, ``codel``), and every message
still arrives."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab.conftest import lab_run_cli
from thinwan.records.schema import RunRecords

pytestmark = pytest.mark.usefixtures("lab_env")

SCENARIO = """
[scenario]
name = "lab-fq-codel"
duration_s = 4.0
drain_s = 1.0
seed = 5

[topology]
pairs = 3
bottleneck_rate_mbps = 2.0
bottleneck_delay_ms = 10.0
access_delay_ms = 0.5

[traffic]
model = "bulk"

[queue]
discipline = "fq_codel"
limit_packets = 1000
"""


def test_lab_run_with_fq_codel_drops_at_the_head(tmp_path: Path) -> None:
    from thinwan.records.evlog import DROP, FWD, REASONS, read_events

    scn = tmp_path / "s.toml"
    scn.write_text(SCENARIO)
    out = tmp_path / "out"
    done = lab_run_cli(scn, out, "--no-report")
    assert done.returncode == 0, done.stderr
    rec = RunRecords.read(out / "runs" / "run-0")
    assert rec.meta["lab"]["link"]["fwd"]["queue"]["discipline"] == "fq_codel"
    ev = read_events(out / "lab-raw" / "run-0" / "events.bin")
    drops = ev[(ev.dir == FWD) & (ev.event == DROP)]
    reasons = {REASONS[int(r)] for r in drops.reason}
    # Three greedy Linux TCP senders into a 1000-packet buffer at 2 Mbit/s: the
    # standing queue stays above 5 ms, so CoDel drops, and the buffer never overflows.
    assert "codel" in reasons, reasons
    assert "overflow" not in reasons, reasons

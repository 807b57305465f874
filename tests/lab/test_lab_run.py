"""``lab run``: pump, sink and emulator logs joined into the simulator's records."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.captures import write_capture
from tests.lab.conftest import lab_run_cli, lab_run_records
from thinwan.analysis.metrics import message_delays
from thinwan.records.schema import SCHEMA, RunRecords

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
    done = lab_run_cli(scn, out)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["substrate"] == "lab" and doc["summary"]["runs"] == 1
    rec = RunRecords.read(out / "runs" / "run-0")
    for table in ("messages", "connections", "ports"):
        assert list(getattr(rec, table).columns)[: len(SCHEMA[table])] == list(SCHEMA[table])
    m = rec.messages
    assert len(m) > 20 and set(m.conn) == {0, 1, 2}
    assert m.t_read.notna().all() and m.t_deq.notna().all()
    # Byte-exact: the sink verified every byte (filler and message sequence; it fails the
    # run otherwise), and it read as many bytes as the pump wrote on each connection.
    c = rec.connections
    assert (c.bytes_delivered == c.bytes_written).all() and (c.bytes_written > 0).all()
    assert (c.writes_waited >= c.writes_blocked).all()
    d = message_delays(m, 4.0)
    # Components add up, and "propagation" is the configured 10 + 2·0.5 ms.
    assert np.allclose(d[["server", "router", "retransmission", "client", "propagation"]].sum(axis=1), d.end_to_end)
    assert abs(d.propagation.median() - 0.011) < 0.0005
    assert (m.t_write <= m.t_first_tx).all() and (m.t_enq <= m.t_deq).all() and (m.t_arrive <= m.t_read).all()
    assert rec.meta["substrate"] == "lab" and rec.meta["lab"]["not_honoured"]
    assert (out / "report.html").exists() and (out / "summary.json").exists()


PRIORITY = """
[scenario]
name = "lab-priority"
duration_s = 3.0
drain_s = 1.0
seed = 5

[topology]
pairs = 4
bottleneck_rate_mbps = 2.0
bottleneck_delay_ms = 10.0
access_delay_ms = 0.5

[queue]
discipline = "priority"
limit_packets = 50
priority_classifier = "{classifier}"
"""


@pytest.mark.parametrize("classifier", ["label", "gap"])
def test_lab_run_with_priority_queue(tmp_path: Path, classifier: str) -> None:
    from thinwan.records.evlog import ARRIVAL, FWD, read_events

    scn = tmp_path / "s.toml"
    scn.write_text(PRIORITY.format(classifier=classifier))
    out = tmp_path / "out"
    done = lab_run_cli(scn, out, "--no-report")
    assert done.returncode == 0, done.stderr
    rec = RunRecords.read(out / "runs" / "run-0")
    q = rec.meta["lab"]["link"]["fwd"]["queue"]
    assert (q["discipline"], q["priority_classifier"]) == ("priority", classifier)
    m = rec.messages
    assert len(m) > 20 and m.t_read.notna().all()
    ev = read_events(out / "lab-raw" / "run-0" / "events.bin")
    data = ev[(ev.dir == FWD) & (ev.event == ARRIVAL) & (ev.payload > 0)]
    marked = (data.tos.to_numpy() >> 2) != 0
    if classifier == "label":
        # The pump marks interactive writes (CS4); bulk blocks go out unmarked.
        assert marked.any() and (~marked).any()
        assert set(data.tos.to_numpy()[marked] >> 2) == {32}
    else:
        assert not marked.any()


def test_lab_run_samples_conn_trace(tmp_path: Path) -> None:
    scn = tmp_path / "s.toml"
    scn.write_text(
        SCENARIO.replace("duration_s = 4.0", "duration_s = 2.0") + "\n[records]\ntrace_interval_ms = 100.0\n"
    )
    out = tmp_path / "out"
    done = lab_run_cli(scn, out, "--no-report")
    assert done.returncode == 0, done.stderr
    rec = RunRecords.read(out / "runs" / "run-0")
    ct = rec.conn_trace
    assert list(ct.columns)[: len(SCHEMA["conn_trace"])] == list(SCHEMA["conn_trace"])
    assert set(ct.conn) == {0, 1, 2}
    # ~100 ms samples over the 2 s run + 1 s drain, per connection.
    per_conn = ct.groupby("conn").size()
    assert (per_conn >= 10).all(), per_conn
    assert (ct.cwnd >= 1448).all() and (ct.cwnd % 1448 == 0).all()  # whole segments of the MSS (1460 − 12 B timestamps)
    # RTO ≥ min RTO (200 ms); srtt ≈ the 2 × 11 ms round trip.
    assert (ct.rto >= 0.2).all() and ct.srtt.between(0.02, 0.2).all()
    assert ct.t.is_monotonic_increasing or (ct.groupby("conn").t.apply(lambda t: t.is_monotonic_increasing)).all()
    assert rec.meta["lab"]["conn_trace"]["samples"] >= 10


def test_lab_run_replays_a_capture(tmp_path: Path) -> None:
    """traffic.model = "pcap": the pump writes the capture's flows with their timing and
    sizes, the same writes the simulator replays."""
    write_capture(tmp_path / "game.pcap")
    scn = tmp_path / "s.toml"
    scn.write_text(
        SCENARIO.replace('name = "lab-small"', 'name = "lab-pcap"')
        + '\n[traffic]\nmodel = "pcap"\npcap_file = "game.pcap"\npcap_server_port = 7777\n'
    )
    out = tmp_path / "out"
    done = lab_run_cli(scn, out)
    assert done.returncode == 0, done.stderr
    m = RunRecords.read(out / "runs" / "run-0").messages.sort_values(["conn", "t_write"])
    # The capture's writes before duration_s = 4 s (the one at 2.49 s included).
    assert list(zip(m.conn, np.round(m.t_write, 2), m.bytes)) == [
        (0, 0.0, 100),
        (0, 0.3, 30),
        (0, 2.49, 7),
        (1, 0.04, 40),
        (1, 0.41, 60),
        (2, 0.39, 12),
    ]
    assert m.t_read.notna().all()


BLOCKED = """
[scenario]
name = "lab-blocked"
duration_s = 2.0
drain_s = 2.0
seed = 7

[topology]
pairs = 1
bottleneck_rate_mbps = 2.0
bottleneck_delay_ms = 10.0

[traffic]
model = "bulk"

[tcp]
send_buffer_bytes = 32768
"""


def test_lab_run_tells_blocked_writes_from_late_ones(tmp_path: Path) -> None:
    # A greedy source into a 32-KB send buffer on a 2-Mbit/s path: write() blocks until
    # the buffer drains, and every write after the first is taken long after its
    # schedule (the greedy source's writes are all due at once).
    rec, _ = lab_run_records(tmp_path, BLOCKED, "--no-report")
    c = rec.connections
    assert int(c.writes_blocked.iloc[0]) > 0, c
    assert int(c.writes_waited.iloc[0]) >= int(c.writes_blocked.iloc[0])
    # Delays count from the schedule: the waits are in the messages' "server" part.
    d = message_delays(rec.messages, 2.0)
    assert d.server.max() > 0.5

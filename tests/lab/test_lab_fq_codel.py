"""``lab run`` with the core's FQ-CoDel in thinwan-link: real Linux TCP fills the
buffer, CoDel drops at the head (event-log reason 8, ``codel``), and every message
still arrives."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab.conftest import lab_run_cli, lab_run_records
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

    rec, out = lab_run_records(tmp_path, SCENARIO, "--no-report")
    assert rec.meta["lab"]["link"]["fwd"]["queue"]["discipline"] == "fq_codel"
    ev = read_events(out / "lab-raw" / "run-0" / "events.bin")
    drops = ev[(ev.dir == FWD) & (ev.event == DROP)]
    reasons = {REASONS[int(r)] for r in drops.reason}
    # Three greedy Linux TCP senders into a 1000-packet buffer at 2 Mbit/s: the
    # standing queue stays above 5 ms, so CoDel drops, and the buffer never overflows.
    assert "codel" in reasons, reasons
    assert "overflow" not in reasons, reasons


def test_lab_run_with_fq_codel_and_ecn_marks_ce_and_linux_reacts(tmp_path: Path) -> None:
    """``queue.ecn`` (with ``tcp.ecn``): the same three greedy senders, now ECN-capable
    (Linux ``net.ipv4.tcp_ecn = 1``, turned on by the scenario's keys). Where CoDel
    dropped above, thinwan-link marks CE (RFC 8290 §5.2.7) and drops no ECT packet;
    the receivers echo ECE (RFC 3168 §6.1.3) and the senders answer with CWR after
    reducing their windows (§6.1.2), with no retransmission needed."""
    import json

    from thinwan.records.evlog import ARRIVAL, DEQUEUE, DROP, FWD, REV, read_events

    ce, ece, cwr, syn = 0b11, 0x40, 0x80, 0x02
    scn = tmp_path / "s.toml"
    scn.write_text(
        SCENARIO.replace('name = "lab-fq-codel"', 'name = "lab-fq-codel-ecn"') + "ecn = true\n\n[tcp]\necn = true\n"
    )
    out = tmp_path / "out"
    done = lab_run_cli(scn, out, "--no-report")
    assert done.returncode == 0, done.stderr
    rec = RunRecords.read(out / "runs" / "run-0")
    lab = rec.meta["lab"]
    assert lab["link"]["fwd"]["queue"]["ecn"] is True
    assert lab["tcp_sysctls"]["net.ipv4.tcp_ecn"] == "1"
    ev = read_events(out / "lab-raw" / "run-0" / "events.bin")
    fwd, rev = ev[ev.dir == FWD], ev[ev.dir == REV]
    data = fwd[(fwd.event == ARRIVAL) & (fwd.payload > 0)]
    # Linux sends new data ECT(0) once ECN is negotiated (RFC 3168 §6.1.1).
    assert ((data.tos & ce) == 0b10).mean() > 0.9
    # Marks: counted by the link, visible on dequeue, and in the records' ports.
    marks = int(lab["link_stats"]["fwd"]["marks_ce"])
    marked = fwd[(fwd.event == DEQUEUE) & ((fwd.tos & ce) == ce)]
    assert marks > 0 and len(marked) == marks
    bottleneck = rec.ports[rec.ports.port == "bottleneck"]
    assert int(bottleneck.marks_ce.iloc[0]) == marks
    # CoDel drops no ECT packet: what it still drops (if anything) is Not-ECT, Linux's
    # retransmissions (RFC 3168 §6.1.5); the buffer never overflows.
    drops = fwd[fwd.event == DROP]
    assert ((drops.tos & ce) == 0).all(), drops[["reason", "tos"]]
    assert int(lab["link_stats"]["fwd"]["drops_overflow"]) == 0
    assert int(lab["link_stats"]["fwd"]["drops_codel"]) < marks / 10
    # Linux reacts: the receivers echo ECE, the senders answer with CWR on new data,
    # and their TCP_INFO says ECN was negotiated and CE-marked data was acknowledged.
    assert (((rev.event == ARRIVAL) & ((rev["flags"] & ece) != 0) & ((rev["flags"] & syn) == 0)).sum()) > 0
    assert (((data["flags"] & cwr) != 0) & ((data["flags"] & syn) == 0)).sum() > 0
    conns = json.loads((out / "lab-raw" / "run-0" / "conns.json").read_text())["conns"]
    assert all(int(c["tcp_info"]["options"]) & 8 for c in conns), [c["tcp_info"] for c in conns]
    assert sum(int(c["tcp_info"]["delivered_ce"]) for c in conns) > 0

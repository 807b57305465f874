"""thinwan-link's queue keys and QDS control loop in the namespace lab.

- Every ``[queue]`` key reaches thinwan-link (its own resolved configuration, the
  ``ready`` line it prints), and the ACK direction is a FIFO with the same limits, as in
  the simulator.
- With ``discipline = "qds"`` the loop runs on real Linux TCP: two greedy flows, one
  video (QT 50 ms) and one data (QT 100 ms) by the oracle table, share a 4-Mbit/s
  downlink; the QDS log (``events.qds.bin``, docs/lab.md "QDS log") shows the class
  rates (delay-only weights) favouring the video flow, whose budget is the smaller.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from thinwan.analysis.lab_qds import read_qds_log
from thinwan.analysis.qds import CONTROLLER_TYPES
from thinwan.config.scenario import scenario_from_dict
from thinwan.substrates.lab.linkspec import DirLink, LabSpec, LinkSpec, TcpSettings, lab_spec
from thinwan.substrates.lab.topology import CLIENT_ADDR, Lab

pytestmark = pytest.mark.usefixtures("lab_env")
PY = sys.executable

VIDEO, DATA = CONTROLLER_TYPES.index("video"), CONTROLLER_TYPES.index("data")  # AppType::index


def resolved_link(lab: Lab) -> dict:
    """The configuration thinwan-link runs with (its ``ready`` line)."""
    for line in (lab.workdir / "link.out").read_text().splitlines():
        if '"ready":true' in line:
            return json.loads(line)["config"]
    raise AssertionError("no ready line")


def test_every_queue_key_reaches_thinwan_link(tmp_path: Path) -> None:
    scn = scenario_from_dict(
        {
            "topology": {"bottleneck_rate_mbps": 5.0, "bottleneck_delay_ms": 5.0},
            "queue": {
                "discipline": "fq_codel",
                "limit_packets": 300,
                "fq_codel_target_ms": 7.5,
                "fq_codel_interval_ms": 150.0,
                "fq_codel_flows": 64,
                "fq_codel_quantum_bytes": 3000,
                "class_quantum_bytes": 2000,
            },
        }
    )
    with Lab(lab_spec(scn), workdir=tmp_path) as lab:
        cfg = resolved_link(lab)
    fwd, rev = cfg["fwd"]["queue"], cfg["rev"]["queue"]
    assert fwd["discipline"] == "fq_codel"
    assert (fwd["fq_codel_target_ms"], fwd["fq_codel_interval_ms"]) == (7.5, 150.0)
    assert (fwd["fq_codel_flows"], fwd["fq_codel_quantum_bytes"], fwd["class_quantum_bytes"]) == (64, 3000, 2000)
    # The ACK direction: a FIFO with the same limits, as the simulator's bottleneck-rev.
    assert (rev["discipline"], rev["limit_packets"], rev["limit_bytes"]) == ("droptail", 300, 0)


SINK = textwrap.dedent(
    """
    import socket, sys, threading
    def listener(port):
        ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((sys.argv[1], port)); ls.listen(1)
        return ls
    def drain(ls):
        c, _ = ls.accept()
        while c.recv(1 << 16):
            pass
    ts = [threading.Thread(target=drain, args=(listener(p),)) for p in (6001, 6002)]
    print("ready", flush=True)
    [t.start() for t in ts]
    [t.join() for t in ts]
    """
)

PUMP = textwrap.dedent(
    """
    import socket, sys, threading, time
    def pump(port):
        s = socket.create_connection((sys.argv[1], port))
        end, chunk = time.monotonic() + float(sys.argv[2]), b"x" * 16384
        while time.monotonic() < end:
            s.sendall(chunk)
        s.close()
    ts = [threading.Thread(target=pump, args=(p,)) for p in (6001, 6002)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    """
)


def test_qds_loop_favours_the_flow_with_the_smaller_budget(tmp_path: Path) -> None:
    # 4 Mbit/s, 5 ms each way, a 15-packet buffer (≤ 45 ms of queue): RTTs stay within
    # 10–60 ms, so the video flow (QT 50) has a budget of at most 40 ms and the data flow
    # (QT 100) at least 40 ms.
    d = dict(rate_bps=4_000_000, delay_ms=5.0, queue_packets=15)
    # Delay-only weights depend on the budgets alone, so in every period the smaller
    # budget must get the larger class rate; bandwidth-aware ones also scale with the
    # flows' measured rates, and a data flow that happens to be faster can outweigh.
    qds = {
        "variant": "delay_only",
        "classifier": "oracle",
        "oracle": [{"app": "video", "client_port": 6001}, {"app": "data", "client_port": 6002}],
    }
    link = LinkSpec(fwd=DirLink(**d, discipline="qds"), rev=DirLink(**d), seed=3, qds=qds)
    with Lab(LabSpec(link=link, tcp=TcpSettings()), workdir=tmp_path) as lab:
        assert resolved_link(lab)["qds"]["oracle"][1]["client_port"] == 6002
        sink = lab.popen("client", [PY, "-c", SINK, CLIENT_ADDR], stdout=subprocess.PIPE)
        assert sink.stdout is not None
        assert b"ready" in sink.stdout.readline()
        lab.run("server", [PY, "-c", PUMP, CLIENT_ADDR, "4"], timeout=30)
        sink.wait(timeout=10)
        stats = lab.down()
    assert stats is not None and stats["qds_periods"] >= 35, stats
    log = read_qds_log(tmp_path / "events.qds.bin").to_records(index=False)
    flows, classes = log[log["kind"] == 0], log[log["kind"] == 1]
    assert len(flows) > 0 and stats["qds_logged"] == len(log)
    assert set(np.unique(flows["cport"])) == {6001, 6002}
    # The oracle's types are what the controller used.
    assert (flows["app"][flows["cport"] == 6001] == VIDEO).all()
    assert (flows["app"][flows["cport"] == 6002] == DATA).all()
    # Per period: each flow's class and that class's rate.
    rate = {(int(c["t_ns"]), int(c["cls"])): float(c["rate_bps"]) for c in classes}
    by_t: dict[int, dict[int, tuple[int, float, float]]] = {}
    for f in flows:
        t = int(f["t_ns"])
        by_t.setdefault(t, {})[int(f["cport"])] = (int(f["cls"]), rate[(t, int(f["cls"]))], float(f["value"]))
    both = [v for v in by_t.values() if len(v) == 2 and v[6001][0] != v[6002][0]]
    assert len(both) >= 20, f"{len(both)} periods with the two flows in different classes"
    # Budgets DB = QT − RTT from the logged RTT estimates (QT: video 50, data 100 ms).
    video_urgent = [v for v in both if 0.050 - v[6001][2] < 0.100 - v[6002][2]]
    share_urgent = len(video_urgent) / len(both)
    in_front = sum(v[6001][0] < v[6002][0] for v in video_urgent) / len(video_urgent)
    favoured = sum(v[6001][1] > v[6002][1] for v in video_urgent) / len(video_urgent)
    print(
        f"periods {len(both)}: video's budget the smaller in {share_urgent:.0%}; then its class "
        f"more urgent in {in_front:.0%} and its class rate higher in {favoured:.0%}"
    )
    # Starved of rate, the data flow's RTT grows until its budget is the smaller now and
    # then (QDS trades data latency for video latency); mostly it is the video's.
    assert share_urgent >= 0.6, share_urgent
    assert in_front == 1.0, "the smaller budget is always the more urgent class"
    assert favoured >= 0.95, favoured
    # And the video flow gets the larger share of the downlink (the monitor's rates
    # over the second half of the run, after slow start).
    late = flows[flows["t_ns"] >= np.median(flows["t_ns"])]
    video = late["rate_bps"][late["cport"] == 6001].mean()
    data = late["rate_bps"][late["cport"] == 6002].mean()
    print(f"rates: video {video / 1e6:.2f} Mbit/s, data {data / 1e6:.2f} Mbit/s")
    assert video > 1.2 * data, (video, data)
    # RTT estimates are real: at least the 10-ms base, and under a second. A flow logged
    # before its first timed round trip carries NaN ("not yet timed", crates/net/src/qds/
    # log.rs): on a loaded machine the first period can log some (two rows in a CI run).
    rtt = flows["value"]
    timed = rtt[~np.isnan(rtt)]
    assert len(timed) >= 0.9 * len(rtt), f"{len(rtt) - len(timed)} of {len(rtt)} rows not timed"
    assert (timed >= 0.0095).all() and (timed < 1.0).all(), (timed.min(), timed.max())

"""The lab's per-packet RTT and application labels (python/thinwan/analysis/lab_qds.py)
on hand-made event logs: no root needed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from thinwan.analysis.by_type import APP_NAMES, by_type
from thinwan.analysis.lab_qds import message_apps, packet_rtt, qds_tables
from thinwan.config.scenario import scenario_from_dict
from thinwan.records.evlog import ARRIVAL, DELIVER, FWD, REV, ip_to_int

SERVER, CLIENT = "10.0.0.1", "10.0.1.2"
SPORT, CPORT = 40000, 5000
ISN = (1 << 32) - 100  # the stream's sequence numbers wrap inside the test
T0 = 1_000_000_000  # the pump's t0, ns
SYN, ACK = 0x02, 0x10


def seg(t: float, rel: int, payload: int, flags: int = ACK) -> dict:
    """A data segment (relative offset ``rel``) arriving at the link from the server."""
    return {
        "t": t,
        "dir": FWD,
        "event": ARRIVAL,
        "src": ip_to_int(SERVER),
        "dst": ip_to_int(CLIENT),
        "sport": SPORT,
        "dport": CPORT,
        "seq": (ISN + 1 + rel) % (1 << 32),
        "ack": 1,
        "payload": payload,
        "flags": flags,
    }


def ack(t: float, rel: int) -> dict:
    """An ACK of everything below relative offset ``rel`` delivered to the server."""
    return {
        "t": t,
        "dir": REV,
        "event": DELIVER,
        "src": ip_to_int(CLIENT),
        "dst": ip_to_int(SERVER),
        "sport": CPORT,
        "dport": SPORT,
        "seq": 1,
        "ack": (ISN + 1 + rel) % (1 << 32),
        "payload": 0,
        "flags": ACK,
    }


def events(rows: list[dict]) -> pd.DataFrame:
    ev = pd.DataFrame(rows)
    ev["proto"] = 6
    ev["t_ns"] = (T0 + ev["t"] * 1e9).round().astype(np.int64)
    ev["pkt"] = np.arange(len(ev))
    return ev


CONNS = [{"conn": 0, "local": f"{SERVER}:{SPORT}", "remote": f"{CLIENT}:{CPORT}"}]


def scenario(**traffic: object):
    return scenario_from_dict({"topology": {"kind": "middlebox", "pairs": 3}, "traffic": {"model": "mix", **traffic}})


def test_rtt_runs_from_transmission_to_the_covering_ack() -> None:
    # A, B, C of 1448 bytes after the 4-byte preamble; B is lost and sent again at 50 ms;
    # the first ACK covers A at 20 ms, a duplicate follows, the one covering B and C
    # arrives at 70 ms.
    mss = 1448
    a, b, c = 4, 4 + mss, 4 + 2 * mss
    ev = events(
        [
            seg(-0.010, -1, 0, SYN),
            seg(-0.005, 0, 4),  # the preamble, before t0: no row
            seg(0.000, a, mss),
            seg(0.001, b, mss),
            seg(0.002, c, mss),
            ack(0.020, b),
            ack(0.022, b),
            seg(0.050, b, mss),  # the retransmission: no row of its own
            ack(0.070, c + mss),
        ]
    )
    pump = pd.DataFrame({"conn": [0, 0], "msg": [0, 1], "end_offset": [1000, 4 + 3 * mss], "t_write_ns": [T0, T0]})
    prt = packet_rtt(scenario(mix=[["video", 1], ["data", 2]]), ev, pump, CONNS, T0)
    assert prt["t_tx"].tolist() == pytest.approx([0.0, 0.001, 0.002])
    assert prt["rtt"].tolist() == pytest.approx([0.020, 0.069, 0.068])
    assert prt["retx"].tolist() == [0, 1, 0]  # only B's bytes went out twice before its ACK
    assert prt["bytes"].tolist() == [mss] * 3
    assert {APP_NAMES[x] for x in prt["app"]} == {"video"}  # pair 0 of [video, data, data]
    # by_type reads the lab's table as it reads the simulator's.
    t = by_type(prt, 1.0, {"video": 50.0})
    assert t["video"]["share_within_qt"] == pytest.approx(1 / 3)
    assert t["video"]["throughput_mbps"] == pytest.approx(3 * mss * 8 / 1e6)


def test_an_unacknowledged_segment_has_no_rtt() -> None:
    ev = events([seg(-0.01, -1, 0, SYN), seg(0.0, 4, 100), seg(0.001, 104, 100), ack(0.03, 104)])
    pump = pd.DataFrame({"conn": [0], "msg": [0], "end_offset": [204], "t_write_ns": [T0]})
    prt = packet_rtt(scenario(mix=[["data", 3]]), ev, pump, CONNS, T0)
    assert prt["rtt"].iloc[0] == pytest.approx(0.03)
    assert math.isnan(prt["rtt"].iloc[1])
    assert {APP_NAMES[x] for x in prt["app"]} == {"data"}


def test_a_changing_mix_labels_writes_by_phase() -> None:
    # [video, data, data], a change every 60 s moving by the first entry's count (1):
    # phase k, pair i runs position (i + k) mod 3.
    scn = scenario(mix=[["video", 1], ["data", 2]], mix_change_s=60.0)
    t = np.array([10.0, 59.9, 60.0, 130.0, 200.0])
    names = lambda conn: [APP_NAMES[x] for x in message_apps(scn, conn, t)]  # noqa: E731
    assert names(0) == ["video", "video", "data", "data", "video"]
    assert names(2) == ["data", "data", "video", "data", "data"]


def test_qds_log_rows_become_the_simulators_tables() -> None:
    from thinwan.analysis.lab_qds import QDS_DTYPE

    log = np.zeros(3, dtype=QDS_DTYPE)
    log["t_ns"] = T0 + 100_000_000
    log["kind"] = [0, 1, 1]
    log["server"][0], log["sport"][0], log["cls"] = ip_to_int(SERVER), SPORT, [3, 0, 1]
    log["value"] = [0.025, 0.75, 0.25]
    log["rate_bps"] = [4e6, 6e6, 2e6]
    log["app"][0] = 2
    log["flows"] = [0, 0, 1]
    prt = pd.DataFrame({"conn": [0], "app": [APP_NAMES.index("video")], "t_tx": [0.05]})
    flows, classes = qds_tables(pd.DataFrame(log).drop(columns="_pad"), CONNS, T0, prt)
    assert flows[["t", "conn", "app_true", "app", "rtt", "class"]].values.tolist() == [[0.1, 0, 0, 2, 0.025, 3]]
    assert classes[["class", "weight", "rate_bps", "flows"]].values.tolist() == [[0, 0.75, 6e6, 0], [1, 0.25, 2e6, 1]]

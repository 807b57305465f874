"""`[records] pcap`: the simulator's captures, read back by tshark and checked against
the simulator's own per-packet records (docs/records.md "pcap")."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thinwan.config.scenario import ScenarioError, scenario_from_dict
from thinwan.execute.runs import run_scenario
from thinwan.records.schema import RunRecords

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")

# Twelve pairs over a small buffer, SACK on: drops, retransmissions and SACK blocks in 8 s.
LOSSY = {
    "scenario": {"name": "pcap", "duration_s": 8.0, "drain_s": 2.0, "runs": 1},
    "topology": {"pairs": 12, "bottleneck_rate_mbps": 1.0},
    "queue": {"limit_packets": 0, "limit_bytes": 6000},
    "tcp": {"sack": True},
    "records": {"packet_log_conns": list(range(12)), "packet_rtt": True, "traces": False},
}
SERVER_PORT = 5900  # crates/sim/src/world/pcap.rs
CLIENT_PORT_BASE = 10_000
FIELDS = [
    "frame.time_epoch",
    "frame.len",
    "ip.src",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.len",
    "tcp.flags",
    "tcp.window_size_value",
    "tcp.options.sack_le",
    "tcp.options.sack_re",
]
# packet_log events (docs/records.md)
DATA_SENT, DATA_ARRIVED, ACK_SENT, ACK_ARRIVED = 0, 2, 3, 4


def run(tmp_path: Path, **records: object) -> tuple[RunRecords, Path]:
    cfg = {**LOSSY, "records": {**LOSSY["records"], **records}}
    sc = scenario_from_dict(cfg)
    out = tmp_path / "out"
    run_scenario(sc, out, jobs=1, progress=False)
    return RunRecords.read(out / "runs" / "run-0"), out / "runs" / "run-0"


def tshark(path: Path) -> pd.DataFrame:
    """Every packet of ``path`` as tshark decodes it (absolute sequence numbers)."""
    cmd = ["tshark", "-r", str(path), "-o", "tcp.relative_sequence_numbers:FALSE", "-T", "fields"]
    for f in FIELDS:
        cmd += ["-e", f]
    cmd += ["-E", "separator=;", "-E", "occurrence=a", "-E", "aggregator=,"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    rows = [line.split(";") for line in done.stdout.splitlines()]
    df = pd.DataFrame(rows, columns=FIELDS)
    for c in FIELDS[:2] + FIELDS[3:9]:
        df[c] = pd.to_numeric(df[c], errors="raise") if c != "tcp.flags" else df[c].map(lambda x: int(x, 16))
    df["tcp.window_size_value"] = pd.to_numeric(df["tcp.window_size_value"])
    return df


def log_of(rec: RunRecords, event: int) -> pd.DataFrame:
    log = rec.packet_log
    return log[log["event"] == event].sort_values("t", kind="stable").reset_index(drop=True)


def test_server_capture_is_what_the_server_sent_and_received(tmp_path: Path) -> None:
    rec, d = run(tmp_path, pcap="server")
    assert sorted(p.name for p in d.glob("*.pcap")) == ["server.pcap"]
    cap = tshark(d / "server.pcap")
    data = cap[cap["tcp.srcport"] == SERVER_PORT].reset_index(drop=True)
    acks = cap[cap["tcp.dstport"] == SERVER_PORT].reset_index(drop=True)
    assert len(data) + len(acks) == len(cap)
    sent, acked = log_of(rec, DATA_SENT), log_of(rec, ACK_ARRIVED)
    assert (rec.connections["bytes_retransmitted"] > 0).any(), "the case should have losses"
    # Every data segment TCP sent, in time order: connection, sequence number, length, time.
    assert len(data) == len(sent) > 500
    np.testing.assert_array_equal(data["tcp.dstport"] - CLIENT_PORT_BASE, sent["conn"])
    np.testing.assert_array_equal(data["tcp.seq_raw"], sent["seq"] % 2**32)
    np.testing.assert_array_equal(data["tcp.len"], sent["len"])
    np.testing.assert_allclose(data["frame.time_epoch"], sent["t"], atol=1e-6)
    assert (data["tcp.flags"] == 0x18).all(), "data segments are ACK|PSH"
    # A plain segment is 40 header bytes plus its (zero-filled) payload on the wire.
    assert (data["frame.len"] == data["tcp.len"] + 40).all()
    # Every ACK that reached a server, with its cumulative ACK.
    assert len(acks) == len(acked)
    np.testing.assert_array_equal(acks["tcp.ack_raw"], acked["seq"] % 2**32)
    np.testing.assert_allclose(acks["frame.time_epoch"], acked["t"], atol=1e-6)
    # SACK blocks (RFC 2018) on some ACKs, each above the cumulative ACK it comes with.
    sacked = acks[acks["tcp.options.sack_le"] != ""]
    assert len(sacked) > 0
    for _, a in sacked.iterrows():
        le = [int(x) for x in a["tcp.options.sack_le"].split(",")]
        re = [int(x) for x in a["tcp.options.sack_re"].split(",")]
        assert 1 <= len(le) == len(re) <= 4
        assert all(a["tcp.ack_raw"] < x < y for x, y in zip(le, re, strict=True))
    # The truth a capture analysis is checked against: the first transmissions of
    # packet_rtt are the capture's non-retransmitted data packets, in order.
    rtt = rec.packet_rtt.sort_values("t_tx", kind="stable").reset_index(drop=True)
    first = data[~sent["retx"].astype(bool)].reset_index(drop=True)
    assert len(first) == len(rtt)
    np.testing.assert_array_equal(first["tcp.seq_raw"], rtt["seq"] % 2**32)
    np.testing.assert_array_equal(first["tcp.dstport"] - CLIENT_PORT_BASE, rtt["conn"])
    assert set(rtt["kind"]) == {0, 1}
    # Flows are numbered from 0 per connection in stream order, each of one kind (a flow
    # may have no row of its own when TCP merged its writes into an earlier segment).
    for _, g in rtt.sort_values(["conn", "seq"]).groupby("conn"):
        assert g["flow"].iloc[0] <= 1 and (np.diff(g["flow"].to_numpy(np.int64)) >= 0).all()
        assert (g.groupby("flow")["kind"].nunique() == 1).all()
    per_flow = rtt.groupby(["conn", "flow"]).size()
    kinds = rtt.groupby(["conn", "flow"])["kind"].first()
    assert per_flow[kinds == 1].mean() > 2 > per_flow[kinds == 0].mean(), "blocks are long, interactive flows single"


def test_client_capture_is_what_the_client_received_and_acknowledged(tmp_path: Path) -> None:
    rec, d = run(tmp_path, pcap="client", pcap_conns=[1, 3])
    cap = tshark(d / "client.pcap")
    data = cap[cap["tcp.srcport"] == SERVER_PORT].reset_index(drop=True)
    acks = cap[cap["tcp.dstport"] == SERVER_PORT].reset_index(drop=True)
    assert set(cap["ip.src"]) == {"10.64.0.2", "10.64.0.4", "10.128.0.2", "10.128.0.4"}
    log = rec.packet_log[rec.packet_log["conn"].isin([1, 3])]
    arrived = log[log["event"] == DATA_ARRIVED].sort_values("t", kind="stable").reset_index(drop=True)
    ack_sent = log[log["event"] == ACK_SENT].sort_values("t", kind="stable").reset_index(drop=True)
    assert len(data) == len(arrived) > 100
    np.testing.assert_array_equal(data["tcp.seq_raw"], arrived["seq"] % 2**32)
    np.testing.assert_array_equal(data["tcp.len"], arrived["len"])
    np.testing.assert_allclose(data["frame.time_epoch"], arrived["t"], atol=1e-6)
    assert len(acks) == len(ack_sent)
    np.testing.assert_array_equal(acks["tcp.ack_raw"], ack_sent["seq"] % 2**32)
    # The default 4 MiB receive window fits 16 bits shifted by 7 (docs/records.md); it
    # shrinks while out-of-order data waits in the buffer.
    win = acks["tcp.window_size_value"]
    assert win.max() == (4 << 20) >> 7 and win.min() > 0


def test_bottleneck_capture_is_what_crossed_the_wan_link(tmp_path: Path) -> None:
    rec, d = run(tmp_path, pcap="bottleneck")
    cap = tshark(d / "bottleneck.pcap")
    ports = rec.ports.set_index("port")
    rate = LOSSY["topology"]["bottleneck_rate_mbps"] * 1e6
    duration = LOSSY["scenario"]["duration_s"]
    # The ports table counts what finished serialising within the window; a frame's
    # timestamp is when it started: add its transmission time (40-byte headers, as the
    # simulator counts them).
    wire = cap["tcp.len"] + 40
    done = cap["frame.time_epoch"] + wire * 8 / rate
    for name, toward_client in (("bottleneck", True), ("bottleneck-rev", False)):
        mine = (cap["tcp.srcport"] == SERVER_PORT) == toward_client
        within = mine & (done <= duration)
        assert within.sum() == ports.loc[name, "packets_tx"] > 0
        assert wire[within].sum() == ports.loc[name, "bytes_tx"]
    # What the queue dropped never reached the link: fewer data packets than were sent.
    sent = log_of(rec, DATA_SENT)
    log = rec.packet_log
    dropped = ((log["event"] == 1) & (log["len"] > 0)).sum()
    assert dropped > 0
    assert (cap["tcp.srcport"] == SERVER_PORT).sum() == len(sent) - dropped


def test_bad_pcap_keys_name_the_key() -> None:
    with pytest.raises(ScenarioError, match=r"records\.pcap_conns: no connection 12"):
        scenario_from_dict({**LOSSY, "records": {"pcap": "server", "pcap_conns": [1, 12, 99]}})
    with pytest.raises(ScenarioError, match=r"records\.pcap"):
        scenario_from_dict({**LOSSY, "records": {"pcap": "sever"}})
    # 10 Gbit/s for an hour: ~3 billion packets, far beyond what a run may hold in memory;
    # one connection of 10,000 fits.
    huge = {"scenario": {"duration_s": 3600.0}, "topology": {"pairs": 10_000, "bottleneck_rate_mbps": 10_000.0}}
    with pytest.raises(ScenarioError, match=r"records\.pcap: a run would capture about \d+\.\d GB"):
        scenario_from_dict({**huge, "records": {"pcap": "bottleneck", "traces": False}})
    scenario_from_dict({**huge, "records": {"pcap": "bottleneck", "pcap_conns": [7], "traces": False}})

"""Thin-stream traffic from a packet capture (traffic.model = "pcap", thinwan.config.capture)."""

from __future__ import annotations

from pathlib import Path

import dpkt
import numpy as np
import pytest

from tests.captures import SERVER, tcp_frame, write_capture
from thinwan import _native
from thinwan.config.capture import read_flows, stream_writes
from thinwan.config.scenario import ScenarioError, load_scenario
from thinwan.records.schema import RunRecords


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    p = tmp_path / "game.pcap"
    write_capture(p)
    return p


def test_flows_are_the_new_server_bytes_in_capture_order(capture: Path) -> None:
    flows = read_flows(capture, server_port=7777)
    assert [f.key[0] for f in flows] == ["tcp", "tcp", "udp"]
    assert [(round(t - flows[0].first, 3), b) for t, b in flows[0].writes] == [(0.0, 100), (0.3, 30), (2.49, 7)]
    assert [b for _, b in flows[1].writes] == [40, 60]
    assert [b for _, b in flows[2].writes] == [12]
    # Without the port, each conversation's server is the side that spoke first: the
    # client's "hello" makes 10.0.0.2 the server of the first conversation.
    auto = read_flows(capture)
    assert auto[0].key[1] == "10.0.0.2" and [b for _, b in auto[0].writes] == [5]


def test_stream_writes_are_relative_to_the_first_payload_and_cut_at_the_duration(capture: Path) -> None:
    w = stream_writes(capture, 7777, streams=2, duration_s=1.0)
    assert [[(round(t, 3), b) for t, b in s] for s in w] == [[(0.0, 100), (0.3, 30)], [(0.04, 40), (0.41, 60)]]


def scenario_file(tmp_path: Path, capture: Path, pairs: int, extra: str = "") -> Path:
    p = tmp_path / "pcap.toml"
    p.write_text(
        f"""[scenario]
duration_s = 3.0
drain_s = 5.0
runs = 1
[topology]
kind = "mux"
pairs = {pairs}
bottleneck_rate_mbps = 100.0
bottleneck_delay_ms = 100.0
[traffic]
model = "pcap"
pcap_file = "{capture.name}"
pcap_server_port = 7777
{extra}
"""
    )
    return p


@pytest.mark.parametrize("mode", ["direct", "mux"])
def test_the_simulator_replays_the_capture(tmp_path: Path, capture: Path, mode: str) -> None:
    sc = load_scenario(scenario_file(tmp_path, capture, 3)).with_values({"mux.mode": mode})
    assert Path(sc.traffic.pcap_file).is_absolute(), "resolved against the scenario file"
    r = RunRecords.from_native(_native.simulate(sc.to_native_json(), 0))
    m = r.messages.sort_values(["conn", "t_write"])
    assert list(zip(m.conn, np.round(m.t_write, 3), m.bytes)) == [
        (0, 0.0, 100),
        (0, 0.3, 30),
        (0, 2.49, 7),
        (1, 0.04, 40),
        (1, 0.41, 60),
        (2, 0.39, 12),
    ]
    assert (m.t_read - m.t_write >= 0.15).all(), "one way: 100 ms WAN + 50 ms last hop"


def test_capture_errors_name_the_key_and_the_file(tmp_path: Path, capture: Path) -> None:
    with pytest.raises(
        ScenarioError, match=r"traffic\.pcap_file: .*game\.pcap: has 3 server → client flow\(s\).*asks for 5"
    ):
        load_scenario(scenario_file(tmp_path, capture, 5))
    capture.write_bytes(b"not a capture at all")
    with pytest.raises(ScenarioError, match="traffic.pcap_file: .*not a pcap or pcapng file"):
        load_scenario(scenario_file(tmp_path, capture, 1))
    capture.unlink()
    with pytest.raises(ScenarioError, match="traffic.pcap_file: .*No such file"):
        load_scenario(scenario_file(tmp_path, capture, 1))
    (tmp_path / "nofile.toml").write_text('[traffic]\nmodel = "pcap"\n')
    with pytest.raises(ScenarioError, match="traffic.pcap_file"):
        load_scenario(tmp_path / "nofile.toml")


@pytest.mark.parametrize("fmt", ["pcap-raw-ip", "pcapng-ethernet"])
def test_other_link_types_and_pcapng(tmp_path: Path, fmt: str) -> None:
    frame = tcp_frame(SERVER, "10.0.0.9", 7777, 40009, 1, b"z" * 33)
    p = tmp_path / "x.cap"
    with p.open("wb") as f:
        if fmt == "pcap-raw-ip":
            w = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_RAW)
            w.writepkt(bytes(dpkt.ethernet.Ethernet(frame).data), ts=5.0)
        else:
            w = dpkt.pcapng.Writer(f)
            w.writepkt(frame, ts=5.0)
    flows = read_flows(p, 7777)
    assert [(f.key, f.writes) for f in flows] == [(("tcp", SERVER, "10.0.0.9", 7777, 40009), [(5.0, 33)])]

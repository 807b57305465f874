"""The yamux peer in the lab (``mux.mode = "yamux"``, ``thinwan-yamux-peer``): its core
next to the pump, its edge in the middle namespace, one yamux connection across the WAN.
Needs root and the lab binaries."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.lab.conftest import small_grid
from thinwan.config.scenario import LabSection
from thinwan.substrates.binaries import MissingBinary, find_binary
from thinwan.substrates.lab.netns import list_netns, pid_cmdline
from thinwan.substrates.lab.tunnel import run_tunnel_once

pytestmark = pytest.mark.usefixtures("lab_env")


def test_yamux_peer_delivers_every_message_and_leaves_nothing(tmp_path: Path) -> None:
    try:
        binary = str(find_binary("thinwan-yamux-peer"))
    except MissingBinary as e:
        pytest.fail(str(e))
    before = set(list_netns())
    scenario = small_grid(**{"mux.mode": "yamux"})
    raw = tmp_path / "raw"
    records = run_tunnel_once(scenario, LabSection(), 0, raw)
    m, c = records.messages, records.connections
    assert len(m) > 10 and set(m.conn) == {0, 1, 2} and m.t_read.notna().all()
    assert (c.bytes_delivered == c.bytes_written).all() and (c.bytes_written > 0).all()
    # Through the peer: the pump's peers are its core (same namespace).
    conns = json.loads((raw / "conns.json").read_text())["conns"]
    assert all(conn["remote"].startswith("198.18.1.1:") for conn in conns)
    assert records.meta["lab"]["yamux"]["connections"] == 1
    assert set(list_netns()) == before
    left = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and binary in pid_cmdline(int(pid)) and "198.18." in pid_cmdline(int(pid))
    ]
    assert left == []

"""`thinwan validate-model` on a short hand-made capture, the gap-rule labelling of
messages, and clear errors on bad input."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import dpkt
import numpy as np
import pandas as pd
import pytest

from thinwan.analysis.model_check import gap_rule_kinds
from thinwan.cli import main
from thinwan.substrates.sim import native_available

ROOT = Path(__file__).resolve().parents[1]
LARGE = ROOT / "scenarios" / "ogawa2011" / "large-buffer.toml"


def write_capture(path: Path, conns: int = 6, duration: float = 8.0, seed: int = 1) -> int:
    """A server (port 3389) writing to ``conns`` clients: single packets and blocks of
    2–19 packets 0.4 ms apart, flows ~0.25 s apart. Returns the packets written."""
    rng = np.random.default_rng(seed)
    pkts = []
    for c in range(conns):
        t, seq = rng.uniform(0, 0.5), 1000
        while t < duration:
            n = 1 if rng.random() < 0.8 else int(rng.integers(2, 20))
            for i in range(n):
                size = int(rng.uniform(70, 200)) if n == 1 else int(rng.uniform(600, 1400))
                pkts.append((t + i * 0.0004, c, seq, size))
                seq += size
            t += rng.lognormal(np.log(0.25) - 0.5, 1.0)
    pkts.sort()
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for t, c, seq, size in pkts:
            tcp = dpkt.tcp.TCP(sport=3389, dport=40000 + c, seq=seq, flags=dpkt.tcp.TH_ACK, data=b"\0" * size)
            ip = dpkt.ip.IP(src=socket.inet_aton("10.0.0.1"), dst=socket.inet_aton(f"10.0.1.{c + 1}"), p=6, data=tcp)
            ip.len = len(ip)
            w.writepkt(bytes(dpkt.ethernet.Ethernet(type=0x0800, data=ip)), ts=1000.0 + t)
    return len(pkts)


def test_gap_rule_kinds_by_hand() -> None:
    m = pd.DataFrame(
        {
            # conn 0: 0.0 alone; 0.100 + 0.102 a block; 0.200 alone. conn 1: 0.101 alone
            # (close to conn 0's writes, but another connection).
            "conn": [0, 0, 1, 0, 0],
            "t_write": [0.0, 0.100, 0.101, 0.102, 0.200],
        },
        index=[10, 11, 12, 13, 14],
    )
    assert gap_rule_kinds(m, 0.0063).tolist() == [0, 1, 0, 1, 0]
    assert gap_rule_kinds(m, 0.0001).tolist() == [0, 0, 0, 0, 0]


@pytest.mark.skipif(not native_available(), reason="native simulator not built")
def test_validate_model_on_a_short_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "cap.pcap"
    write_capture(cap)
    out = tmp_path / "val"
    status = main(["validate-model", str(cap), str(LARGE), "--out", str(out), "--runs", "2", "--json", "--quiet"])
    assert status == 0
    doc = json.loads(capsys.readouterr().out)
    assert Path(doc["report"]).is_file() and (out / "replay" / "report.html").is_file()
    rep, mod = doc["replay"], doc["model"]
    assert rep["pairs"] == mod["pairs"] == 6
    assert rep["seeds"] == mod["seeds"] == [1, 2]
    assert rep["duration_s"] == mod["duration_s"] < 8.0
    for d in (rep, mod):
        assert 0.0 <= d["r_I150"] <= 1.0 and d["r_I1000"] <= d["r_I150"]
        assert all(r["interactive_messages"] < r["messages"] for r in d["runs"])
    # The replay writes the capture's packets in the window: about 2/3 of them belong to
    # blocks, so the gap rule must find bulk messages in a replay labelled all interactive.
    assert rep["runs"][0]["label_agreement"] < 0.6
    # The model's own labels and the gap rule's agree (blocks are written 0.36 ms apart).
    assert all(r["label_agreement"] > 0.98 for r in mod["runs"])
    assert mod["summary"]["r_I150"] == pytest.approx(
        json.loads((out / "model" / "summary.json").read_text())["summary"]["r_I150"], nan_ok=True
    )
    html = Path(doc["report"]).read_text()
    assert "replayed vs fitted model" in html and "fig-ccdf" in html


def test_bad_input_gives_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.pcap"
    assert main(["fit", str(missing)]) == 2
    assert f"{missing}: no such file" in capsys.readouterr().err
    assert main(["validate-model", str(missing), str(LARGE)]) == 2
    assert "no such file" in capsys.readouterr().err
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(np.random.default_rng(0).bytes(3000))
    assert main(["validate-model", str(junk), str(LARGE), "--out", str(tmp_path / "v")]) == 2
    assert str(junk) in capsys.readouterr().err
    game = tmp_path / "game.toml"
    game.write_text('[traffic]\nmodel = "game"\n')
    cap = tmp_path / "cap.pcap"
    write_capture(cap, conns=2, duration=1.0)
    assert main(["validate-model", str(cap), str(game)]) == 2
    assert 'not "thin-client"' in capsys.readouterr().err
    assert main(["validate-model", str(cap), str(LARGE), "--pairs", "5", "--out", str(tmp_path / "v")]) == 2
    assert "--pairs 5 but the capture has 2" in capsys.readouterr().err
    assert main(["fit", str(cap), "--base", str(tmp_path / "nobase.toml")]) == 2
    assert "no such base scenario" in capsys.readouterr().err

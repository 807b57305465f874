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


def write_capture(
    path: Path, conns: int = 6, duration: float = 8.0, seed: int = 1, block_share: float = 0.2, snaplen: int = 0
) -> int:
    """A server (port 3389) writing to ``conns`` clients: single packets and blocks of
    2–19 packets 0.4 ms apart, flows ~0.25 s apart; with ``snaplen``, each frame cut to
    that many bytes (as tcpdump -s does). Returns the packets written."""
    rng = np.random.default_rng(seed)
    pkts = []
    for c in range(conns):
        t, seq = rng.uniform(0, 0.5), 1000
        while t < duration:
            n = 1 if rng.random() >= block_share else int(rng.integers(2, 20))
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
            frame = bytes(dpkt.ethernet.Ethernet(type=0x0800, data=ip))
            w.writepkt(frame[:snaplen] if snaplen else frame, ts=1000.0 + t)
    return len(pkts)


def test_a_capture_cut_at_a_snaplen_replays_its_sizes(tmp_path: Path) -> None:
    from thinwan.config.capture import read_flows

    full, cut = tmp_path / "full.pcap", tmp_path / "cut.pcap"
    write_capture(full, conns=3, duration=3.0)
    write_capture(cut, conns=3, duration=3.0, snaplen=54)  # Ethernet + IPv4 + TCP headers
    a, b = read_flows(full, 3389), read_flows(cut, 3389)
    assert [f.writes for f in a] == [f.writes for f in b]
    assert sum(len(f.writes) for f in a) > 50


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
    # The analyzer's errors name the file; the fit's say what is missing.
    assert main(["fit", str(junk), "--out", str(tmp_path / "j.toml")]) == 2
    err = capsys.readouterr().err
    assert str(junk) in err and err.startswith("thinwan: error:") and "Traceback" not in err
    assert main(["fit", str(cap), "--server-port", "1234", "--out", str(tmp_path / "p.toml")]) == 2
    assert "thinwan: error:" in capsys.readouterr().err
    single = tmp_path / "single.pcap"
    write_capture(single, conns=2, duration=5.0, block_share=0.0)
    assert main(["fit", str(single), "--server-port", "3389", "--out", str(tmp_path / "s.toml")]) == 2
    assert "α and β cannot be estimated" in capsys.readouterr().err
    assert not (tmp_path / "s.toml").exists()


@pytest.mark.skipif(not native_available(), reason="native module not built")
def test_fit_command_on_a_hand_made_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "cap.pcap"
    write_capture(cap, conns=6, duration=60.0)
    out = tmp_path / "f.toml"
    assert main(["fit", str(cap), "--server-port", "3389", "--out", str(out), "--min-session-s", "10"]) == 0
    printed = capsys.readouterr().out
    assert f"scenario: {out}" in printed and "gap laws" in printed
    text = out.read_text()
    assert "from the capture cap.pcap" in text and "thinwan validate-model cap.pcap f.toml" in text
    assert main(["fit", str(cap), "--server-port", "3389", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # 80 % of the flows are single packets; blocks have 2–19 packets 0.4 ms apart.
    k = doc["keys"]
    assert k["p_interactive_to_bulk"] == pytest.approx(0.2, abs=0.05)
    assert k["p_bulk_to_interactive"] == pytest.approx(0.8, abs=0.07)
    assert k["intra_bulk_gap_ms"] == pytest.approx(0.4, rel=0.03)  # µs stamps, rare merged flows
    assert 8 < k["bulk_packets_mean"] < 13
    assert doc["capture"]["flows"] == 6 and doc["out"] == str(out)

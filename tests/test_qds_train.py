"""``thinwan qds train`` / ``evaluate`` and the capture → classifier-features path
(crates/capture/src/qds.rs through ``_native.qds_capture_features``), on small captures
built here: known flows give a known number of (period, flow) rows with the features of
their packets; a model trained on them names them back; the CLI's mistakes end in one
line naming the file or the value, exit status 2."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import dpkt
import numpy as np
import pandas as pd
import pytest

from thinwan import _native
from thinwan.cli import main
from thinwan.execute import qds_train as qt

SERVER, CLIENT = "198.18.1.1", "198.18.2.1"
PORT = 5900
T0 = 1_700_000_000.0


def write_stream(path: Path, size: int, gap_ms: float, seconds: float, port: int = PORT, cport: int = 40_000) -> None:
    """A server on ``port`` sending ``size``-byte segments every ``gap_ms`` for
    ``seconds``, each acknowledged by the client 20 ms later (LINKTYPE_RAW, no options)."""

    def frame(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, payload: bytes) -> bytes:
        tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=dpkt.tcp.TH_ACK, data=payload)
        ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_TCP, data=tcp)
        ip.len = len(bytes(ip))
        return bytes(ip)

    packets = []
    n = int(round(seconds * 1000 / gap_ms))
    for k in range(n):
        t = k * gap_ms / 1000
        seq = 1000 + k * size
        packets.append((t, frame(SERVER, CLIENT, port, cport, seq, 1, b"x" * size)))
        packets.append((t + 0.020, frame(CLIENT, SERVER, cport, port, 1, seq + size, b"")))
    packets.sort(key=lambda p: p[0])
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f, linktype=101)  # LINKTYPE_RAW
        for t, data in packets:
            w.writepkt(data, ts=T0 + t)


@pytest.fixture()
def captures(tmp_path: Path) -> dict[str, Path]:
    """A "video" stream (1,448-byte segments every 2 ms: 5.9 Mbit/s) and an
    "interactive" one (100-byte updates every 100 ms), 4 s each."""
    video, inter = tmp_path / "video.pcap", tmp_path / "typing.pcap"
    write_stream(video, 1448, 2.0, 4.0)
    write_stream(inter, 100, 100.0, 4.0)
    return {"video": video, "interactive": inter}


def test_feature_names_are_the_cores() -> None:
    model = json.loads(_native.qds_train([[1.0] * 8], ["data"]))
    assert tuple(model["features"]) == qt.FEATURES
    assert tuple(json.loads(_native.qds_shipped_model())["features"]) == qt.FEATURES


def test_one_row_per_period_with_the_streams_features(captures: dict[str, Path]) -> None:
    r = _native.qds_capture_features(str(captures["video"]), PORT)
    rows = r["rows"]
    assert len(r["flows"]) == 1 and r["flows"][0]["server"] == f"{SERVER}:{PORT}"
    # Last packet: the ACK of the segment sent at 3.998 s, at 4.018 s. Ticks every 100 ms
    # from the first packet: 0.1 … 4.0 s, plus the final one at 4.1 s = 41. The first RTT
    # sample (the client's ACK, 20 ms) closes before the first tick, so every tick has a row.
    assert r["ticks"] == 41
    assert len(rows["t_s"]) == 41
    assert rows["t_s"][0] == pytest.approx(0.1) and rows["t_s"][-1] == pytest.approx(4.1)
    assert not rows["idle"].any()
    mid = int((rows["t_s"] > 2.0).argmax())
    # 1,448 bytes + 20 (IP) + 20 (TCP) on the wire, one every 2 ms, all full.
    assert rows["f_size_mean"][mid] == 1488.0
    assert rows["f_iat_mean_us"][mid] == pytest.approx(2000.0, rel=1e-3)
    assert rows["f_full_share"][mid] == 1.0
    assert rows["rate_bps"][mid] == pytest.approx(1488 * 8 * 500, rel=0.02)
    assert rows["rtt_s"][mid] == pytest.approx(0.020)
    typing = _native.qds_capture_features(str(captures["interactive"]), PORT)["rows"]
    assert typing["f_size_mean"][mid] == 140.0
    assert typing["f_iat_mean_us"][mid] == pytest.approx(100_000.0, rel=1e-3)


def test_rows_of_drops_the_warmup_and_labels(captures: dict[str, Path]) -> None:
    src = qt.CaptureSource(file=captures["video"], label="video", port=PORT, group="g")
    rows = qt.rows_of([src], qt.RowOptions(warmup_s=2.0))
    # Ticks at 2.0 … 4.1 s.
    assert len(rows) == 22
    assert set(rows["label"]) == {"video"} and set(rows["group"]) == {"g"}
    assert len(qt.rows_of([src], qt.RowOptions(warmup_s=0.0))) == 41


def test_train_then_evaluate_names_both_back(captures: dict[str, Path], tmp_path: Path, capsys) -> None:
    model = tmp_path / "model.json"
    args = [f"--capture=video={captures['video']}:{PORT}", f"--capture=interactive={captures['interactive']}:{PORT}"]
    assert main(["qds", "train", *args, "--out", str(model), "--json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["on_training_rows"]["accuracy"] == 1.0
    m = json.loads(model.read_text())
    assert [c["app"] for c in m["classes"]] == ["video", "interactive"]
    # From 2 s (the warm-up) on: video ticks 2.0 … 4.1 s (22); the updates end at 3.9 s,
    # their last ACK at 3.92 s, so the final tick is at 4.0 s: 2.0 … 4.0 (21).
    assert [c["samples"] for c in m["classes"]] == [22, 21]
    assert main(["qds", "evaluate", *args, "--model", str(model), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["rows"] == 43 and r["accuracy"] == 1.0
    assert r["confusion"]["video"]["video"] == 22 and r["confusion"]["interactive"]["interactive"] == 21
    assert r["recall"] == {"video": 1.0, "audio": None, "data": None, "interactive": 1.0}
    assert set(r["by_group"]) == {str(captures["video"]), str(captures["interactive"])}
    # The shipped model on the same rows: whatever it says, the counts add up.
    assert main(["qds", "evaluate", *args, "--json"]) == 0
    shipped = json.loads(capsys.readouterr().out)
    assert shipped["model"] == "shipped" and sum(sum(row.values()) for row in shipped["confusion"].values()) == 43
    # The table form names the types.
    assert main(["qds", "evaluate", *args, "--model", str(model)]) == 0
    out = capsys.readouterr().out
    assert "accuracy 1.000" in out and "interactive" in out


def test_a_training_set_file_and_leave_one_out(captures: dict[str, Path], tmp_path: Path, capsys) -> None:
    s = tmp_path / "set.toml"
    s.write_text(
        "\n".join(
            f'[[capture]]\nfile = "{p.name}"\nlabel = "{label}"\nport = {PORT}\ngroup = "{g}"\n'
            for label, p, g in [
                ("video", captures["video"], "a"),
                ("interactive", captures["interactive"], "a"),
                ("video", captures["video"], "b"),
                ("interactive", captures["interactive"], "b"),
            ]
        )
    )
    assert main(["qds", "evaluate", str(s), "--leave-one-out", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    # Group b's copy of each stream is named from group a's and back.
    assert r["accuracy"] == 1.0 and r["by_group"]["a"]["train_rows"] == 43


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--capture", "video=/nonexistent/v.pcap:5900"], "/nonexistent/v.pcap: no such file"),
        (["--capture", "movie={video}:5900"], "label 'movie' is not an application type"),
        (["--capture", "video={video}"], "expected LABEL=FILE:PORT"),
        (["--capture", "video={video}:99999"], "port must be 1..65535"),
        (["--capture", "video={video}:3389"], "no packet of TCP port 3389"),
        (["--capture", "video={video}:5900", "--model", "/nonexistent/m.json"], "/nonexistent/m.json: no such file"),
        (["--capture", "video={video}:5900", "--model", "{video}"], "not a model"),
        ([], "give a training set file or at least one --capture"),
        (["{badset}"], "capture[0]: unknown key(s) ['lable']"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(captures: dict[str, Path], tmp_path: Path, capsys, args, message) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[capture]]\nfile = "x.pcap"\nlable = "video"\nport = 1\n')
    args = [a.format(video=captures["video"], badset=bad) for a in args]
    assert main(["qds", "evaluate", *args]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


def test_a_model_trained_on_other_features_is_refused(captures: dict[str, Path], tmp_path: Path, capsys) -> None:
    m = json.loads(_native.qds_train([[1.0] * 8, [2.0] * 8], ["data", "video"]))
    m["features"][0] = "payload_entropy"
    f = tmp_path / "old.json"
    f.write_text(json.dumps(m))
    assert main(["qds", "evaluate", "--capture", f"video={captures['video']}:{PORT}", "--model", str(f)]) == 2
    assert "retrain it" in capsys.readouterr().err


def test_the_shipped_training_sets_and_real_model_load() -> None:
    root = Path(__file__).resolve().parents[1] / "scenarios" / "qds" / "train"
    for name, runs in (("sim-train.toml", (0, 1, 2, 3)), ("sim-test.toml", (100, 101))):
        sources = qt.read_train_set(root / name).sources
        assert len(sources) == 5 and all(isinstance(s, qt.SimSource) and s.runs == runs for s in sources)
        assert all(s.scenario.is_file() for s in sources)
    real = qt.read_train_set(root / "real-captures.toml").sources
    assert {s.group for s in real} == {"tigervnc", "x11", "x11vnc", "xrdp"}
    assert all(s.port_at_client == (s.group == "x11") for s in real)
    session = qt.read_train_set(root / "fitted-session.toml").sources
    assert [s.label for s in session] == ["interactive", "data"] and all(s.file.is_file() for s in session)
    model = json.loads(qt.read_model(root / "qds-classifier-real.json") or "")
    assert [c["app"] for c in model["classes"]] == ["video", "data", "interactive"]


def test_windows_and_the_busiest_flow_narrow_the_label(tmp_path: Path) -> None:
    # Two flows of one server in one capture: a 5.9-Mbit/s stream and a side connection
    # of 100-byte updates (as plain X11's window manager beside the application).
    big, small = tmp_path / "big.pcap", tmp_path / "small.pcap"
    write_stream(big, 1448, 2.0, 4.0, cport=40_001)
    write_stream(small, 100, 100.0, 4.0, cport=40_002)
    both = tmp_path / "both.pcap"
    with both.open("wb") as f:
        w = dpkt.pcap.Writer(f, linktype=101)
        packets = [(ts, buf) for p in (big, small) for ts, buf in dpkt.pcap.Reader(p.open("rb"))]
        for ts, buf in sorted(packets, key=lambda x: x[0]):
            w.writepkt(buf, ts=ts)
    flows = _native.qds_capture_features(str(both), PORT)["flows"]
    assert [f["bytes_down"] for f in flows] == [2000 * 1488, 40 * 140]
    s = tmp_path / "set.toml"
    s.write_text(f'[[capture]]\nfile = "both.pcap"\nlabel = "video"\nport = {PORT}\nflows = "busiest"\n')
    rows = qt.rows_of(qt.read_train_set(s).sources)
    assert set(rows["flow"]) == {0} and len(rows) == 22
    # A window from 2.5 to 3.0 s of the capture clock keeps ticks 2.5 … 4.0 s (end + the
    # 1-s rate window).
    s.write_text(
        f'[[capture]]\nfile = "both.pcap"\nlabel = "video"\nport = {PORT}\nflows = "busiest"\n'
        f"windows = [[{T0 + 2.5}, {T0 + 3.0}]]\n"
    )
    rows = qt.rows_of(qt.read_train_set(s).sources)
    assert rows["t_s"].round(1).tolist() == [x / 10 for x in range(25, 41)]
    # windows = "web-pages": the same span from the web benchmark's table beside the capture
    # (a page without an end carries no label), found under captures_root.
    sub = tmp_path / "runs" / "web"
    sub.mkdir(parents=True)
    both.rename(sub / "web.pcap")
    pd.DataFrame({"t_input": [T0 + 2.5, T0 + 3.5], "t_end": [T0 + 3.0, np.nan]}).to_parquet(sub / "web-pages.parquet")
    body = f'file = "web/web.pcap"\nlabel = "data"\nport = {PORT}\nflows = "busiest"\nwindows = "web-pages"\n'
    s.write_text(f'captures_root = "runs"\n[[capture]]\n{body}')
    pages = qt.rows_of(qt.read_train_set(s).sources)
    assert pages["t_s"].tolist() == rows["t_s"].tolist() and set(pages["label"]) == {"data"}
    # --captures-root overrides the file's root; a missing one is named with the hint.
    s.write_text(f"[[capture]]\n{body}")
    assert len(qt.rows_of(qt.read_train_set(s, tmp_path / "runs").sources)) == len(pages)
    with pytest.raises(qt.TrainSetError, match=r"web/web.pcap: no such file \(a set's captures_root"):
        qt.rows_of(qt.read_train_set(s).sources)
    (sub / "web-pages.parquet").unlink()
    with pytest.raises(qt.TrainSetError, match='windows = "web-pages": no .*web-pages.parquet'):
        qt.rows_of(qt.read_train_set(s, tmp_path / "runs").sources)
    s.write_text('captures_root = 3\n[[capture]]\nfile = "x.pcap"\nlabel = "video"\nport = 1\n')
    with pytest.raises(qt.TrainSetError, match="captures_root must be a path"):
        qt.read_train_set(s)
    s.write_text(f'[[capture]]\nfile = "both.pcap"\nlabel = "video"\nport = {PORT}\nflows = "first"\n')
    with pytest.raises(qt.TrainSetError, match='flows must be "all" or "busiest"'):
        qt.read_train_set(s)

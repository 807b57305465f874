"""``thinwan analyze``: the CLI on captures built here (records, JSON, errors without a
traceback), ``point_model`` on a hand-made pooled dict, and the round trip through the
simulator: simulate the base dumbbell with known traffic parameters, write the
server-side pcap, analyse it and find the parameters, the simulator's write kinds and
its exact per-packet RTTs again."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thinwan.analysis.capture_model import MODEL_KEYS, analyze, default_gap_ms, point_model
from thinwan.cli import main

ROOT = Path(__file__).resolve().parents[1]
# The simulator's pcap (docs/records.md "pcap"): the data sender's port, the receiver's 10000 + conn.
SIM_SERVER_PORT, SIM_CLIENT_PORT_BASE = 5900, 10_000
T0_NS = 1_700_000_000 * 10**9
SERVER_PORT = 5900


# --- a pcap writer for tests: headers only (40-byte IPv4/TCP), the IP length as sent ---


def write_pcap(path: Path, t_ns: np.ndarray, conn: np.ndarray, from_server: np.ndarray, seq, ack, payload) -> None:
    """One packet per entry (all arrays the same length, in capture order): connection
    ``conn`` is 10.1.0.0+conn:40000+conn (client) ↔ 10.2.0.0+conn:5900 (server);
    nanosecond pcap, LINKTYPE_RAW, 40 bytes captured of each."""
    n = len(t_ns)
    rec = np.zeros((n, 16 + 40), np.uint8)
    hdr = rec[:, :16].view("<u4")
    t_ns = np.asarray(t_ns, np.int64)
    hdr[:, 0] = t_ns // 10**9
    hdr[:, 1] = t_ns % 10**9
    hdr[:, 2] = 40
    hdr[:, 3] = 40 + np.asarray(payload, np.int64)
    ip = rec[:, 16:]
    ip[:, 0] = 0x45
    ip[:, 2:4] = (40 + np.asarray(payload, np.int64)).astype(">u2").view(np.uint8).reshape(n, 2)
    ip[:, 8] = 64
    ip[:, 9] = 6
    conn = np.asarray(conn, np.int64)
    cli = (np.uint32(0x0A010000) + conn).astype(">u4").view(np.uint8).reshape(n, 4)
    srv = (np.uint32(0x0A020000) + conn).astype(">u4").view(np.uint8).reshape(n, 4)
    cport = (40000 + conn).astype(">u2").view(np.uint8).reshape(n, 2)
    sport = np.full(n, SERVER_PORT, ">u2").view(np.uint8).reshape(n, 2)
    fs = np.asarray(from_server, bool)[:, None]
    ip[:, 12:16] = np.where(fs, srv, cli)
    ip[:, 16:20] = np.where(fs, cli, srv)
    ip[:, 20:22] = np.where(fs, sport, cport)
    ip[:, 22:24] = np.where(fs, cport, sport)
    ip[:, 24:28] = (np.asarray(seq, np.int64) % 2**32).astype(">u4").view(np.uint8).reshape(n, 4)
    ip[:, 28:32] = (np.asarray(ack, np.int64) % 2**32).astype(">u4").view(np.uint8).reshape(n, 4)
    ip[:, 32] = 5 << 4
    ip[:, 33] = np.where(np.asarray(payload) > 0, 0x18, 0x10)  # PSH+ACK / ACK
    ip[:, 34:36] = np.full(n, 65535, ">u2").view(np.uint8).reshape(n, 2)
    with open(path, "wb") as f:
        f.write(np.array([0xA1B23C4D], "<u4").tobytes() + np.array([2, 4], "<u2").tobytes())
        f.write(np.array([0, 0, 65535, 101], "<u4").tobytes())
        f.write(rec.tobytes())


def small_capture(path: Path) -> None:
    """One connection: interactive packets at 0 and 100 ms, a block of 3 at 200 ms
    (0.5 ms apart), an interactive one at 400 ms, each ACKed 20 ms later; a
    retransmission of the first at 50 ms."""
    rows = []  # (ms, from_server, seq, ack, payload)
    seq = 1000
    for ms, size in [(0, 100), (100, 120), (200, 1000), (200.5, 1000), (201, 1000), (400, 80)]:
        rows.append((ms, True, seq, 1, size))
        seq += size
        rows.append((ms + 20, False, 1, seq, 0))
    rows.append((50, True, 1000, 1, 100))
    rows.sort(key=lambda r: r[0])
    a = list(zip(*rows))
    t = T0_NS + (np.asarray(a[0]) * 1e6).astype(np.int64)
    write_pcap(path, t, np.zeros(len(rows), int), np.asarray(a[1]), a[2], a[3], np.asarray(a[4]))


# --- point_model on a hand-made pooled dict ---


def test_point_model_on_hand_counted_statistics() -> None:
    empty = {"counts": [0] * 200, "n": 0, "sum": 0.0, "sum_ln": 0.0, "sum_ln2": 0.0}
    sizes_i = [0] * 65536
    sizes_i[100], sizes_i[200] = 3, 1  # mean (300 + 200) / 4 = 125
    sizes_b = [0] * 65536
    sizes_b[1000] = 10
    pooled = {
        "transitions": {"ii": 9, "ib": 1, "bi": 3, "bb": 1},
        "gaps": {
            "ii": {**empty, "n": 9, "sum": 2.7},
            "ib": {**empty, "n": 1, "sum": 0.5},
            "bi": {**empty, "n": 3, "sum": 0.6},
            "bb": {**empty, "n": 1, "sum": 0.1},
            "intra": {**empty, "n": 8, "sum": 0.004},
            "request": empty,
            "response": empty,
        },
        "sizes": {"interactive": sizes_i, "bulk": sizes_b},
        "block_lengths": {"counts": {2: 1, 3: 1}, "overflow": [5000]},
        "flows": {"interactive": 4, "bulk": 3},
        "sessions": [],
    }
    m = point_model(pooled)
    assert tuple(m) == MODEL_KEYS
    assert m["p_interactive_to_bulk"] == pytest.approx(0.1)  # 1 / (9 + 1)
    assert m["p_bulk_to_interactive"] == pytest.approx(0.75)  # 3 / (3 + 1)
    assert (m["gap_ii_s"], m["gap_ib_s"], m["gap_bi_s"], m["gap_bb_s"]) == pytest.approx((0.3, 0.5, 0.2, 0.1))
    assert m["interactive_bytes_mean"] == pytest.approx(125.0)
    assert m["bulk_bytes_mean"] == pytest.approx(1000.0)
    assert m["bulk_packets_mean"] == pytest.approx((2 + 3 + 5000) / 3)
    assert m["intra_bulk_gap_ms"] == pytest.approx(0.5)
    pooled["transitions"] = {"ii": 0, "ib": 0, "bi": 0, "bb": 0}
    assert math.isnan(point_model(pooled)["p_interactive_to_bulk"])


def test_the_default_gap_is_the_scenarios() -> None:
    from thinwan.config.scenario import QueueSection

    assert default_gap_ms() == QueueSection().classifier_gap_ms


# --- the CLI ---


def test_cli_writes_records_report_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "small.pcap"
    small_capture(cap)
    out = tmp_path / "out"
    assert main(["analyze", str(cap), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"flows", "model", "packets", "version"}
    assert doc["packets"] == {"total": 13, "tcp": 13, "matched": 13}
    [f] = doc["flows"]
    # I, I, B(3), I: II, IB, BI; the retransmission at 50 ms is not a flow.
    assert (f["flows_interactive"], f["flows_bulk"], f["retrans_s2c"], f["ooo_s2c"]) == (3, 1, 1, 0)
    assert (f["transitions_ii"], f["transitions_ib"], f["transitions_bi"]) == (1, 1, 1)
    assert f["server_port"] == SERVER_PORT and f["server_by"] == "lower_port"
    assert f["rtt_client_median_ms"] == pytest.approx(20.0, abs=0.01)
    m = doc["model"]
    assert m["p_interactive_to_bulk"] == 0.5 and m["p_bulk_to_interactive"] == 1.0
    assert m["gap_ib_s"] == pytest.approx(0.1) and m["gap_bi_s"] == pytest.approx(0.2)
    assert m["bulk_packets_mean"] == 3 and m["intra_bulk_gap_ms"] == pytest.approx(0.5)
    assert m["gap_bb_s"] is None  # nothing to estimate it from
    flows = pd.read_parquet(out / "flows.parquet")
    assert flows.loc[0, "flows_bulk"] == 1 and flows["rtt_server_median_ms"].isna().all()
    hist = pd.read_parquet(out / "histograms.parquet")
    assert hist[hist.histogram == "intra"]["count"].sum() == 2
    assert set(pd.read_parquet(out / "sizes.parquet").kind) == {"interactive", "bulk"}
    assert pd.read_parquet(out / "block_lengths.parquet").to_dict("list") == {"packets": [3], "count": [1]}
    meta = json.loads((out / "analysis.json").read_text())
    assert meta["gap_ms"] == default_gap_ms() and meta["model"]["bulk_packets_mean"] == 3
    page = (out / "report.html").read_text()
    assert "Inter-arrival" in page and f"gap {default_gap_ms():g} ms" in page

    # A gap of 0.4 ms splits the block: 0.5 ms apart is now a new flow each time.
    assert main(["analyze", str(cap), "--out", str(out), "--json", "--gap-ms", "0.4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["flows"][0]["flows_bulk"] == 0 and doc["flows"][0]["flows_interactive"] == 6


def test_cli_summary_and_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "small.pcap"
    small_capture(cap)
    assert main(["analyze", str(cap), "--out", str(tmp_path / "o"), "--filter", "port 5900 and net 10.0.0.0/8"]) == 0
    text = capsys.readouterr().out
    assert "p_interactive_to_bulk" in text and "retransmitted segments: 1" in text


@pytest.mark.parametrize(
    ("name", "content", "args", "expect"),
    [
        ("empty.pcap", b"", [], "it is empty"),
        ("random.pcap", bytes(range(256)) * 8, [], "not a pcap or pcapng file"),
        ("truncated.pcap", None, [], "ends inside packet 13"),
        ("noport.pcap", "small", ["--server-port", "3389"], "no packet of TCP port 3389"),
        ("nomatch.pcap", "small", ["--filter", "host 1.2.3.4"], "no packet of the filter 'host 1.2.3.4'"),
        ("badfilter.pcap", "small", ["--filter", "port 1 or udp"], 'at position 11: unknown word "udp"'),
        ("notcp.pcap", "udp", [], "none of its 1 packets is TCP"),
    ],
)
def test_bad_captures_exit_2_naming_file_and_packet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content, args: list[str], expect: str
) -> None:
    cap = tmp_path / name
    if content == "small" or content is None:
        small_capture(cap)
        if content is None:
            cap.write_bytes(cap.read_bytes()[:-7])
    elif content == "udp":
        small_capture(cap)
        b = bytearray(cap.read_bytes()[: 24 + 56])
        b[24 + 16 + 9] = 17  # the first packet only, as UDP
        cap.write_bytes(bytes(b))
    else:
        cap.write_bytes(content)
    assert main(["analyze", str(cap), "--out", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert expect in err, err
    if name != "badfilter.pcap":  # a filter's error is about the option, not the file
        assert name in err, err


# --- the round trip through the simulator ---

# Known traffic parameters (the base dumbbell's, with a lighter-tailed block length and a
# larger initial window so that a block leaves the server as written: the analyser is
# under test here, not TCP's splitting of blocks).
KNOWN = {
    "traffic.p_interactive_to_bulk": 0.15,
    "traffic.p_bulk_to_interactive": 0.42,
    "traffic.gap_ii_s": 0.27,
    "traffic.gap_ib_s": 0.22,
    "traffic.gap_bi_s": 0.24,
    "traffic.gap_bb_s": 0.11,
    "traffic.bulk_packets_mean": 7.4,
    "traffic.bulk_packets_max": 100,
    "traffic.bulk_pareto_shape": 2.5,
}


def pcap_packets(path: Path) -> pd.DataFrame:
    """Packet number, ports, sequence number and payload of every packet of a
    LINKTYPE_RAW IPv4 pcap (the simulator's), read here independently of the analyser."""
    data = path.read_bytes()
    rows, off, number = [], 24, 0
    while off < len(data):
        incl = int.from_bytes(data[off + 8 : off + 12], "little")
        ip = data[off + 16 : off + 16 + incl]
        number += 1
        ihl = (ip[0] & 15) * 4
        doff = (ip[ihl + 12] >> 4) * 4
        payload = int.from_bytes(ip[2:4], "big") - ihl - doff
        sport, dport = int.from_bytes(ip[ihl : ihl + 2], "big"), int.from_bytes(ip[ihl + 2 : ihl + 4], "big")
        rows.append((number, sport, dport, int.from_bytes(ip[ihl + 4 : ihl + 8], "big"), payload))
        off += 16 + incl
    return pd.DataFrame(rows, columns=["number", "sport", "dport", "seq", "payload"])


def test_round_trip_through_the_simulator(tmp_path: Path) -> None:
    """The simulator's own server-side pcap (`records.pcap = "server"`), analysed, against
    the simulator's truth in packet_rtt (kind of every first transmission, exact RTT)."""
    from thinwan import _native
    from thinwan.config.scenario import load_scenario

    pairs = 40
    # The small (BDP) buffer: some losses, so retransmissions are in the capture too.
    sc = load_scenario(ROOT / "scenarios" / "ogawa2011" / "small-buffer.toml").with_values(
        {
            **KNOWN,
            "scenario.duration_s": 150.0,
            "topology.pairs": pairs,
            "tcp.initial_cwnd_segments": 100,
            "records.pcap": "server",
            "records.packet_rtt": True,
            "records.traces": False,
        }
    )
    raw = _native.simulate(sc.to_native_json(), 0)
    cap = tmp_path / "server.pcap"
    cap.write_bytes(raw["pcap"]["bytes"])
    res = analyze(cap, server_port=SIM_SERVER_PORT, labels=True)
    m = point_model(res["pooled"])
    want = {k.split(".")[1]: v for k, v in KNOWN.items()}
    # Measured (seed 1): α +0.4 %, β +0.0 %, gaps −3.8 … +1.8 %, c_B −2.0 %; labels agree on
    # 99.90 % of 68,236 packets; RTT medians within 0.045 ms; 436 retransmissions found.
    for key in ("p_interactive_to_bulk", "p_bulk_to_interactive"):
        assert m[key] == pytest.approx(want[key], rel=0.10), (key, m[key])
    for t in ("ii", "ib", "bi", "bb"):
        assert m[f"gap_{t}_s"] == pytest.approx(want[f"gap_{t}_s"], rel=0.10), (t, m)
    assert m["bulk_packets_mean"] == pytest.approx(want["bulk_packets_mean"], rel=0.15), m

    # Labels: the gap rule's kind of every new data segment against the source's write
    # kind (packet_rtt: one row per first transmission, joined on connection and sequence).
    truth = pd.DataFrame({k: raw["packet_rtt"][k] for k in ("conn", "seq", "kind", "retx", "rtt")})
    pk = pcap_packets(cap).set_index("number")
    lab = pd.DataFrame({"number": res["labels"]["number"], "bulk": res["labels"]["bulk"]})
    lab = lab.join(pk, on="number")
    lab["conn"] = lab.dport - SIM_CLIENT_PORT_BASE
    truth["seq32"] = truth.seq.astype(np.int64) % 2**32
    joined = lab.merge(truth, left_on=["conn", "seq"], right_on=["conn", "seq32"], how="outer", indicator=True)
    assert (joined["_merge"] == "both").all(), "every first transmission labelled once, nothing else"
    agree = float((joined.bulk.astype(int) == joined.kind.astype(int)).mean())
    assert agree >= 0.99, agree

    # Passive RTT (client half at the server = data → covering ACK) against packet_rtt.
    exact = truth[truth.retx == 0].groupby("conn").rtt.median() * 1e3
    flows = pd.DataFrame(res["flows"])
    passive = flows.set_index(flows.client_port - SIM_CLIENT_PORT_BASE).rtt_client_median_ms
    both = pd.concat([exact.rename("exact"), passive.rename("passive")], axis=1).dropna()
    assert len(both) == pairs
    assert (both.exact - both.passive).abs().max() < 1.0, both

    # Every retransmission the servers made is counted as one, nothing is out of order.
    data = pk[(pk.sport == SIM_SERVER_PORT) & (pk.payload > 0)]
    assert len(data) > len(truth) > 0, "the lossy run retransmitted"
    assert sum(f["retrans_s2c"] for f in res["flows"]) == len(data) - len(truth)
    assert sum(f["ooo_s2c"] for f in res["flows"]) == 0, "nothing is out of order at the sender"

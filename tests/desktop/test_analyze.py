"""The capture analyser on pcaps built here: known timestamps → exact latencies, pcapng,
damaged files and captures without an idle gap → clear errors; ``thinwan desktop
analyze`` as a command (needs no root)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thinwan.analysis.desktop_ops import attribute, summarize, wan_minus_lan
from thinwan.substrates.desktop.opsplit import CaptureError, split_capture

SRV, CLI = bytes([198, 18, 1, 1]), bytes([198, 18, 2, 1])
T0_NS = 1_700_000_000 * 10**9


def ip_tcp(src: bytes, dst: bytes, sport: int, dport: int, payload: int, seq: int = 0) -> bytes:
    total = 40 + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0, 64, 6, 0, src, dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x18, 65535, 0, 0)
    return ip + tcp + bytes(payload)


def vnc(spec: list[tuple[float, bool, int]]) -> list[tuple[int, bytes]]:
    """(ms after T0, server→client?, payload) → (epoch ns, raw IP packet); each direction's
    sequence numbers run on with its payload (a repeated range would be a resend)."""
    seq = {True: 1, False: 1}
    out = []
    for ms, s2c, n in spec:
        p = ip_tcp(SRV, CLI, 5900, 40000, n, seq[s2c]) if s2c else ip_tcp(CLI, SRV, 40000, 5900, n, seq[s2c])
        seq[s2c] += n
        out.append((T0_NS + round(ms * 1e6), p))
    return out


def write_pcap(path: Path, pkts: list[tuple[int, bytes]], snaplen: int = 65535) -> Path:
    """libpcap, nanosecond timestamps, LINKTYPE_RAW (what tcpdump writes on our TUN)."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snaplen, 101)]
    for t, p in pkts:
        ns = t
        cap = p[:snaplen]
        out.append(struct.pack("<IIII", ns // 10**9, ns % 10**9, len(cap), len(p)) + cap)
    path.write_bytes(b"".join(out))
    return path


def write_pcapng(path: Path, pkts: list[tuple[int, bytes]]) -> Path:
    """pcapng, microsecond ticks (the default if_tsresol), one raw-IP interface."""

    def block(kind: int, body: bytes) -> bytes:
        body += bytes(-len(body) % 4)
        n = 12 + len(body)
        return struct.pack("<II", kind, n) + body + struct.pack("<I", n)

    out = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)), block(1, struct.pack("<HHI", 101, 0, 0))]
    for t, p in pkts:
        us = t // 1000
        out.append(block(6, struct.pack("<IIIII", 0, us >> 32, us & 0xFFFFFFFF, len(p), len(p)) + p))
    path.write_bytes(b"".join(out))
    return path


# Three operations 1 s apart (times in ms):
#   0: key at 1000 (two packets), the update at 1025.0 and 1025.4        → 25.4 ms, 1 round trip
#   1: click at 2000, update 2050, a request at 2099, more at 2160       → 160 ms, 2 round trips
#   2: key at 3000, update at 3000.9 (a LAN)                             → 0.9 ms
THREE = [
    (1000.0, False, 20),
    (1000.3, False, 20),
    (1025.0, True, 1400),
    (1025.4, True, 300),
    (1026.0, False, 0),  # a pure ACK: counted, never ends or extends an operation
    (2000.0, False, 10),
    (2050.0, True, 100),
    (2099.0, False, 10),
    (2160.0, True, 100),
    (3000.0, False, 8),
    (3000.9, True, 50),
]
EXPECTED_MS = [25.4, 160.0, 0.9]


def test_exact_latencies_pcap(tmp_path: Path) -> None:
    res = split_capture(write_pcap(tmp_path / "a.pcap", vnc(THREE), snaplen=60), 5900, idle_ms=300, keep_packets=True)
    assert res.ops["latency_ms"].round(6).tolist() == EXPECTED_MS
    assert res.ops["round_trips"].tolist() == [1, 2, 1]
    # Bytes come from the IP header: a 60-byte snap length does not shorten them.
    assert res.ops["bytes_s2c"].tolist() == [40 * 2 + 1700, 40 * 2 + 200, 90]
    assert res.ops["packets_c2s"].tolist() == [3, 2, 1]
    assert res.ops["first_update_ms"].round(6).tolist() == [25.0, 50.0, 0.9]
    assert res.meta["format"] == "pcap" and res.meta["packets_matched"] == 11
    assert res.packets is not None and res.packets["op"].tolist() == [0] * 5 + [1] * 4 + [2] * 2


def test_exact_latencies_pcapng(tmp_path: Path) -> None:
    res = split_capture(write_pcapng(tmp_path / "a.pcapng", vnc(THREE)), 5900, idle_ms=300)
    assert res.ops["latency_ms"].round(6).tolist() == EXPECTED_MS
    assert res.meta["format"] == "pcapng"


def test_idle_gap_decides_the_end_of_an_update(tmp_path: Path) -> None:
    """TigerVNC's lossless refresh: the lossy update at +10 ms, the refresh at +110 ms. A
    100-ms gap ends the update before the refresh (and makes the refresh a burst of its
    own); a longer one counts the refresh in the operation."""
    pk = vnc([(0, False, 10), (10, True, 5000), (110, True, 20000), (1000, False, 10), (1010, True, 5000)])
    path = write_pcap(tmp_path / "refresh.pcap", pk)
    short = split_capture(path, 5900, idle_ms=100)
    assert short.ops["latency_ms"].round(6).tolist()[:1] == [10.0]
    assert len(short.ops) == 3 and not short.ops["client_started"][1]
    long = split_capture(path, 5900, idle_ms=500)
    assert long.ops["latency_ms"].round(6).tolist() == [110.0, 10.0]


def test_damaged_captures_fail_naming_file_and_packet(tmp_path: Path) -> None:
    path = write_pcap(tmp_path / "cut.pcap", vnc(THREE))
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(CaptureError, match=r"cut\.pcap: truncated: the file ends inside packet 11"):
        split_capture(path, 5900, idle_ms=300)
    ng = write_pcapng(tmp_path / "cut.pcapng", vnc(THREE))
    ng.write_bytes(ng.read_bytes()[:-7])
    with pytest.raises(CaptureError, match=r"cut\.pcapng: truncated: the file ends inside packet 11"):
        split_capture(ng, 5900, idle_ms=300)
    (tmp_path / "x.pcap").write_text("not a capture")
    with pytest.raises(CaptureError, match=r"x\.pcap: not a pcap or pcapng file"):
        split_capture(tmp_path / "x.pcap", 5900)
    good = write_pcap(tmp_path / "good.pcap", vnc(THREE))
    with pytest.raises(
        CaptureError, match=r"good\.pcap: no packet of TCP port 3389 among its 11 packets; its busiest TCP ports: 5900"
    ):
        split_capture(good, 3389)
    with pytest.raises(CaptureError, match=r"good\.pcap: no idle gap of 5000 ms or more: packets 1–11 form one burst"):
        split_capture(good, 5900, idle_ms=5000)


def test_attribute_merges_the_bursts_of_one_input() -> None:
    ops = pd.DataFrame(
        {
            "t_start": [1.0, 1.6, 3.0],
            "t_input": [1.0, np.nan, 3.0],
            "t_first_update": [1.01, np.nan, 3.02],
            "t_end": [1.01, np.nan, 3.02],
            "latency_ms": [10.0, np.nan, 20.0],
            "first_update_ms": [10.0, np.nan, 20.0],
            "first_packet": [1, 5, 9],
            "last_packet": [4, 6, 10],
            "bytes_s2c": [100, 50, 70],
            "bytes_c2s": [60, 0, 60],
            "packets_s2c": [2, 1, 1],
            "packets_c2s": [1, 0, 1],
            "round_trips": [1, 0, 1],
        }
    )
    # The retransmission at 1.6 s (a burst of its own: a timeout inside the update).
    ops.loc[1, "t_end"] = 1.6
    got = attribute(ops, [(0.9, 2.9), (2.9, 4.0), (5.0, 6.0)])
    assert got["bursts"].tolist() == [2, 1, 0]
    assert got["latency_ms"].round(6).tolist()[:2] == [600.0, 20.0]
    assert np.isnan(got["latency_ms"][2])
    assert got["bytes_s2c"].tolist() == [150, 70, 0]


def test_summary_and_wan_minus_lan() -> None:
    rows = [
        {
            "platform": "p",
            "env": e,
            "operation": "fill",
            "latency_ms": v,
            "bytes_s2c": 10,
            "bytes_c2s": 5,
            "round_trips": 1,
        }
        for e, vals in (("lan", [1.0, 2.0, 3.0]), ("wan", [51.0, 52.0, 60.0]))
        for v in vals
    ]
    s = summarize(pd.DataFrame(rows))
    assert s["latency_ms_median"].tolist() == [2.0, 52.0] and s["n"].tolist() == [3, 3]
    d = wan_minus_lan(s, {"wan": 50.0})
    assert d["delta_ms"].tolist() == [50.0] and d["delta_rtts"].tolist() == [1.0]


def thinwan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "thinwan", *args], capture_output=True, text=True, timeout=60)


def test_analyze_command(tmp_path: Path) -> None:
    path = write_pcap(tmp_path / "a.pcap", vnc(THREE))
    done = thinwan(
        "desktop",
        "analyze",
        str(path),
        "--server-port",
        "5900",
        "--idle-ms",
        "300",
        "--json",
        "--parquet",
        str(tmp_path / "ops.parquet"),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [round(o["latency_ms"], 6) for o in doc["operations"]] == EXPECTED_MS
    assert doc["meta"]["operations"] == 3
    assert pd.read_parquet(tmp_path / "ops.parquet")["round_trips"].tolist() == [1, 2, 1]
    done = thinwan("desktop", "analyze", str(path), "--server-port", "5900", "--server-addr", "198.18.1.1")
    assert done.returncode == 0 and "25.40" in done.stdout and "160.00" in done.stdout, done.stdout
    path.write_bytes(path.read_bytes()[:-5])
    done = thinwan("desktop", "analyze", str(path), "--server-port", "5900")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"thinwan: error: {path}: truncated"), done.stderr
    done = thinwan("desktop", "analyze", str(path), "--server-port", "70000")
    assert done.returncode == 2 and "must be 1..65535" in done.stderr


def test_a_later_burst_that_the_server_resumes_ends_the_update() -> None:
    """10 % loss: the update stops for 0.9 s (backed-off retransmission timeouts of
    resends the client already had, which carry no update), then the server's next new
    segment arrives before the client's next request: that burst has no ``t_end`` of its
    own (its input comes after), yet its server→client packet is the end of the update."""
    ops = pd.DataFrame(
        {
            "t_start": [1.0, 2.9],
            "t_input": [1.0, 2.9005],
            "t_first_update": [1.07, np.nan],
            "t_end": [1.98, np.nan],
            "t_last_s2c": [1.98, 2.9],
            "latency_ms": [980.0, np.nan],
            "first_update_ms": [70.0, np.nan],
            "first_packet": [1, 50],
            "last_packet": [49, 52],
            "bytes_s2c": [9000, 272],
            "bytes_c2s": [600, 62],
            "packets_s2c": [9, 1],
            "packets_c2s": [6, 1],
            "round_trips": [5, 0],
        }
    )
    got = attribute(ops, [(0.99, 5.0)])
    assert round(got["latency_ms"][0], 6) == 1900.0
    # Without the column (an older table) the later burst's own t_end is all there is.
    assert round(attribute(ops.drop(columns="t_last_s2c"), [(0.99, 5.0)])["latency_ms"][0], 6) == 980.0


def test_a_resent_request_does_not_start_the_next_input(tmp_path: Path) -> None:
    """The measured case (x11vnc `fill` #12 on `wan-loss-1`, docs/desktop.md): the update
    request sent after the previous update was lost on the WAN (its first copy is in the
    capture, made before the WAN); its retransmission at +60.2 ms, after the pause, is
    no input; the click TCP held back until the request's ACK (+126.8 ms) is, and the
    latency runs from it to the update's end (+216.1 ms): 89.3 ms, not 155.9 ms. The
    retransmission still counts, as a packet and IP bytes, with the burst it follows."""
    spec = [
        (0.0, False, 12),  # the previous click
        (40.0, True, 1400),  # its update
        (40.5, False, 10),  # the next request (lost on the WAN)
        (1126.8, False, 12),  # the click
        (1216.1, True, 1400),  # its update
    ]
    pk = vnc(spec)
    t0 = T0_NS + 1_060_200_000  # the pause's end + 60.2 ms: the request again
    pk.insert(3, (t0, pk[2][1]))
    pk.insert(4, (t0 + 33_000_000, ip_tcp(SRV, CLI, 5900, 40000, 0, 1401)))  # its ACK
    res = split_capture(write_pcap(tmp_path / "resent.pcap", pk), 5900, idle_ms=500, keep_packets=True)
    assert len(res.ops) == 2
    assert res.ops["latency_ms"].round(6).tolist() == [40.0, 89.3]
    assert res.ops["first_packet"].tolist() == [1, 6]
    assert res.ops["packets_c2s"].tolist() == [3, 1] and res.ops["bytes_c2s"].tolist() == [3 * 40 + 32, 52]
    assert res.ops["packets_s2c"].tolist() == [2, 1]
    # In the packets table its payload is 0 (nothing new), and it belongs to the first.
    assert res.packets is not None
    assert res.packets["payload"].tolist() == [12, 1400, 10, 0, 0, 12, 1400]
    assert res.packets["op"].tolist() == [0] * 5 + [1] * 2
    # The window from just before the click (the benchmark's attribution) starts at it.
    windows = [(T0_NS / 1e9 - 0.001, T0_NS / 1e9 + 1.0), (T0_NS / 1e9 + 1.0, np.inf)]
    att = attribute(res.ops, windows)
    assert att["latency_ms"].round(6).tolist() == [40.0, 89.3]

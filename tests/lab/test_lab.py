"""The namespace lab end to end: topology life cycle, link accuracy, robustness.

Each test brings up its own lab (unique ``tw-xxxxxx`` names, so they can run beside
other labs) and must leave nothing behind.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thinwan.records.evlog import DELIVER, DROP, read_events
from thinwan.substrates.lab import netns
from thinwan.substrates.lab.linkspec import RTO_MIN_SYSCTL, LabSpec, LinkSpec, TcpSettings
from thinwan.substrates.lab.netns import LabError
from thinwan.substrates.lab.topology import CLIENT_ADDR, Lab

pytestmark = pytest.mark.usefixtures("lab_env")
PY = sys.executable


def leftovers(lab_id: str) -> list[str]:
    found = [ns for ns in netns.list_netns() if ns.startswith(lab_id)]
    if netns.state_dir(lab_id).exists():
        found.append(str(netns.state_dir(lab_id)))
    out = subprocess.run(["pgrep", "-af", lab_id], capture_output=True, text=True).stdout
    found += [line for line in out.splitlines() if "thinwan-link" in line]
    return found


def spec(**kwargs) -> LabSpec:
    return LabSpec(link=LinkSpec.symmetric(seed=7, **kwargs), tcp=TcpSettings())


def probes(lab: Lab, net_bin: str, out: Path, count: int, interval: str = "2ms", size: int = 64) -> pd.DataFrame:
    recv = lab.popen(
        "client",
        [
            net_bin,
            "probe-recv",
            "--listen",
            f"{CLIENT_ADDR}:6000",
            "--count",
            str(count),
            "--timeout",
            "1s",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
    )
    assert recv.stdout is not None
    assert b"ready" in recv.stdout.readline()
    lab.run(
        "server",
        [
            net_bin,
            "probe-send",
            "--to",
            f"{CLIENT_ADDR}:6000",
            "--count",
            str(count),
            "--interval",
            interval,
            "--size",
            str(size),
        ],
    )
    recv.wait(timeout=30)
    return pd.read_csv(out)


def test_up_down_leaves_nothing(tmp_path: Path) -> None:
    with Lab(spec(delay_ms=1.0), workdir=tmp_path) as lab:
        lab_id = lab.id
        assert set(lab.netns.values()) <= set(netns.list_netns())
        assert lab.emulator_alive()
        # Both sides see their TUN up with the right address.
        assert CLIENT_ADDR in lab.run("client", ["ip", "-br", "addr"]).stdout
    assert leftovers(lab_id) == []


def test_tcp_settings_are_applied(tmp_path: Path) -> None:
    tcp = TcpSettings(
        congestion_control="reno", sack=False, slow_start_after_idle=False, min_rto_ms=50.0, quickack=True
    )
    with Lab(LabSpec(link=LinkSpec.symmetric(), tcp=tcp), workdir=tmp_path) as lab:
        for side in ("server", "client"):
            ns = lab.netns[side]
            assert netns.read_sysctl(ns, "net.ipv4.tcp_congestion_control") == "reno"
            assert netns.read_sysctl(ns, "net.ipv4.tcp_sack") == "0"
            assert netns.read_sysctl(ns, "net.ipv4.tcp_slow_start_after_idle") == "0"
            route = lab.run(side, ["ip", "route"]).stdout
            assert "quickack 1" in route
            # The sysctl where the kernel has it (sockets may then set their own), else
            # the route's locked metric.
            if netns.kernel_has_sysctl(RTO_MIN_SYSCTL):
                assert netns.read_sysctl(ns, RTO_MIN_SYSCTL) == "50000" and "rto_min" not in route
            else:
                assert "rto_min lock 50ms" in route


def test_a_socket_may_lower_its_own_minimum_rto(tmp_path: Path) -> None:
    """The lab's minimum RTO (200 ms here) is every socket's default, not a locked route
    metric: a socket that sets TCP_RTO_MIN_US (the tunnel's `trunk.rto_min_ms`) gets its
    own floor, as on a host without such a route. Checked with the kernel's RTO (ss)."""
    if not netns.kernel_has_sysctl(RTO_MIN_SYSCTL):
        pytest.skip("this kernel has no per-namespace minimum RTO (Linux < 6.11), so the lab locks it per route")
    # The kernel acknowledges what the listener never reads; it only has to accept.
    listener = (
        "import socket, time\n"
        f"l = socket.create_server(({CLIENT_ADDR!r}, 6100))\n"
        "print('ready', flush=True)\n"
        "conns = [l.accept() for _ in range(2)]\n"
        "time.sleep(30)\n"
    )
    sender = (
        "import socket, subprocess, time\n"
        "rtos = {}\n"
        "for floor_us in (None, 50000):\n"
        "    s = socket.socket()\n"
        "    if floor_us: s.setsockopt(socket.IPPROTO_TCP, 45, floor_us)  # TCP_RTO_MIN_US\n"
        f"    s.connect(({CLIENT_ADDR!r}, 6100))\n"
        "    for _ in range(5): s.send(b'x' * 100); time.sleep(0.05)\n"
        "    port = s.getsockname()[1]\n"
        "    out = subprocess.run(['ss', '-tiH', 'sport', '=', f':{port}'], capture_output=True, text=True).stdout\n"
        "    print(floor_us, out.split('rto:')[1].split()[0])\n"
        "    s.close()\n"
    )
    with Lab(spec(delay_ms=5.0), workdir=tmp_path) as lab:
        recv = lab.popen("client", [PY, "-c", listener], stdout=subprocess.PIPE)
        assert recv.stdout is not None and b"ready" in recv.stdout.readline()
        out = lab.run("server", [PY, "-c", sender]).stdout.split()
        rto = {out[i]: float(out[i + 1]) for i in range(0, len(out), 2)}
    # RTO = SRTT + max(4·RTTVAR, floor) on a 10-ms path: ≥ 210 ms by default, ~60 with 50 ms.
    assert rto["None"] >= 200.0 and rto["50000"] < 100.0, rto


def test_ctrl_c_and_sigterm_clean_up(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from thinwan.substrates.lab.linkspec import LabSpec, LinkSpec, TcpSettings
        from thinwan.substrates.lab.topology import Lab
        with Lab(LabSpec(link=LinkSpec.symmetric(), tcp=TcpSettings()), workdir={str(tmp_path)!r}) as lab:
            print(lab.id, flush=True)
            time.sleep(60)
        """
    )
    for sig in (signal.SIGINT, signal.SIGTERM):
        p = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None
        lab_id = p.stdout.readline().strip()
        assert lab_id.startswith("tw-")
        p.send_signal(sig)
        p.wait(timeout=30)
        assert leftovers(lab_id) == [], sig


def test_killed_run_is_removed_by_clean(tmp_path: Path) -> None:
    # A detached lab (as `thinwan lab up` makes) whose emulator is killed, and an
    # in-process lab whose owner is killed: both are dead; `clean` removes them.
    up = subprocess.run(
        [PY, "-m", "thinwan", "lab", "up", "--delay", "1ms", "--json", "--no-events"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    detached = json.loads(up.stdout)
    script = textwrap.dedent(
        f"""
        import time
        from thinwan.substrates.lab.linkspec import LabSpec, LinkSpec, TcpSettings
        from thinwan.substrates.lab.topology import Lab
        lab = Lab(LabSpec(link=LinkSpec.symmetric(), tcp=TcpSettings()), workdir={str(tmp_path)!r})
        lab.up()
        print(lab.id, flush=True)
        time.sleep(60)
        """
    )
    p = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    owned = p.stdout.readline().strip()
    os.kill(detached["owner_pid"], signal.SIGKILL)
    p.kill()
    p.wait()
    time.sleep(0.2)
    dead = {s["id"] for s in netns.list_labs() if not s["alive"]}
    assert {detached["id"], owned} <= dead
    done = subprocess.run([PY, "-m", "thinwan", "lab", "clean"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert leftovers(detached["id"]) == [] and leftovers(owned) == []


def test_delay_is_accurate(tmp_path: Path, net_bin: str) -> None:
    with Lab(spec(delay_ms=10.0), workdir=tmp_path) as lab:
        p = probes(lab, net_bin, tmp_path / "p.csv", 400)
    assert len(p) == 400
    one_way_ms = (p.t_recv_ns - p.t_send_ns) / 1e6
    assert 10.0 <= one_way_ms.min()
    assert one_way_ms.median() < 10.2, one_way_ms.describe()
    # The emulator's own lateness (delivery vs due time) is tiny.
    ev = read_events(tmp_path / "events.bin")
    d = ev[ev.event == DELIVER]
    late_us = (d.t_ns.astype(np.int64) - d.due_ns.astype(np.int64)) / 1e3
    assert (late_us >= 0).all() and late_us.median() < 50


def test_rate_is_accurate(tmp_path: Path, net_bin: str) -> None:
    # One TCP flow, 10 Mbit/s, 10 ms each way, a BDP-sized buffer (25 kB ≈ 17 packets).
    s = LabSpec(
        link=LinkSpec.symmetric(rate_bps=10_000_000, delay_ms=10.0, queue_packets=0, queue_bytes=50_000),
        tcp=TcpSettings(congestion_control="cubic"),
    )
    with Lab(s, workdir=tmp_path) as lab:
        sink = lab.popen(
            "client",
            [
                net_bin,
                "sink",
                "--listen",
                f"{CLIENT_ADDR}:5001",
                "--out",
                str(tmp_path / "sink.csv"),
                "--timeout-s",
                "30",
            ],
            stdout=subprocess.PIPE,
        )
        assert sink.stdout is not None and b"ready" in sink.stdout.readline()
        lab.run(
            "server",
            [
                net_bin,
                "pump",
                "--connect",
                f"{CLIENT_ADDR}:5001",
                "--model",
                "bulk",
                "--duration-s",
                "5",
                "--drain-s",
                "0.5",
                "--cc",
                "cubic",
                "--out",
                str(tmp_path / "pump.csv"),
                "--conns-out",
                str(tmp_path / "conns.json"),
            ],
            timeout=30,
        )
        sink.wait(timeout=30)
        stats = lab.down()
    r = pd.read_csv(tmp_path / "sink.csv")
    t = (r.t_read_ns - r.t_read_ns.min()) / 1e9
    steady = r[(t > 1.0) & (t <= 4.5)]
    goodput = steady.bytes.sum() * 8 / 3.5
    # Ceiling: 10 Mbit/s × 1448/1500 payload share = 9.65 Mbit/s.
    assert 9.0e6 < goodput < 9.8e6, goodput
    assert stats is not None and stats["fwd"]["malformed"] == 0


def test_loss_is_seeded_and_measured(tmp_path: Path, net_bin: str) -> None:
    with Lab(spec(delay_ms=1.0, loss=0.1), workdir=tmp_path) as lab:
        p = probes(lab, net_bin, tmp_path / "p.csv", 3000, interval="0.2ms")
    ev = read_events(tmp_path / "events.bin")
    lost = ev[(ev.event == DROP) & (ev.reason == 3) & (ev.proto == 17)]
    assert len(lost) + len(p) == 3000
    assert 0.08 < len(lost) / 3000 < 0.12


def test_junk_frames_are_dropped_not_fatal(tmp_path: Path, net_bin: str) -> None:
    junk = textwrap.dedent(
        """
        import os, socket, sys
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((sys.argv[1], 0))
        frames = [b"", b"\\x00", b"junk" * 10, b"\\x45" + os.urandom(30), b"\\x60" + os.urandom(60), os.urandom(1400)]
        n = 0
        for i in range(200):
            f = frames[i % len(frames)]
            if f:
                s.send(f)
                n += 1
        print(n)
        """
    )
    with Lab(spec(delay_ms=1.0), workdir=tmp_path) as lab:
        sent = int(lab.run("server", [sys.executable, "-c", junk, lab.tun["server"]]).stdout)
        p = probes(lab, net_bin, tmp_path / "p.csv", 100, interval="1ms")
        assert lab.emulator_alive()
        stats = lab.down()
    assert len(p) == 100
    assert stats is not None
    # Random bytes occasionally form a valid header; everything else is counted.
    assert stats["fwd"]["malformed"] >= sent * 0.6


def test_pcap_is_readable(tmp_path: Path, net_bin: str) -> None:
    with Lab(spec(delay_ms=1.0), workdir=tmp_path, pcap=True) as lab:
        probes(lab, net_bin, tmp_path / "p.csv", 50)
    for side in ("server", "client"):
        data = (tmp_path / "pcap" / f"{side}.pcap").read_bytes()
        magic, _, _, _, _, snaplen, linktype = struct.unpack("=IHHiIII", data[:24])
        assert magic == 0xA1B23C4D and linktype == 101  # ns timestamps, LINKTYPE_RAW
        # Walk the records: 50 probe datagrams on each side.
        off, n = 24, 0
        while off < len(data):
            _, _, incl, _ = struct.unpack("=IIII", data[off : off + 16])
            assert data[off + 16] >> 4 == 4
            off += 16 + incl
            n += 1
        assert n == 50 and off == len(data)


def test_not_root_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LabError, match="needs root"):
        netns.require_root()

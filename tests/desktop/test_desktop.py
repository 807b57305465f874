"""Real remote desktops across the lab (docs/desktop.md): TigerVNC up and down leaves
nothing behind (also on SIGTERM), an operation produces server→client traffic in the
client-side capture, and the client's screen changes with ``fill``. Needs root, the lab
binaries and the packages of scripts/setup-desktop.sh."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from thinwan.substrates.desktop import Desktop, DesktopSettings, platform_status
from thinwan.substrates.desktop.quicklook import op_latencies, read_packets
from thinwan.substrates.lab.linkspec import LabSpec, LinkSpec
from thinwan.substrates.lab.netns import list_netns
from thinwan.substrates.lab.topology import Lab

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tigervnc(lab_env: None) -> None:
    reason = platform_status("tigervnc")
    if reason:
        pytest.fail(f"tigervnc cannot run here: {reason}")


def _x_files() -> set[str]:
    files = {p.name for p in Path("/tmp").glob(".X*-lock")}
    if Path("/tmp/.X11-unix").is_dir():
        files |= {p.name for p in Path("/tmp/.X11-unix").iterdir()}
    return files


def _desktop_dirs() -> set[str]:
    return {p.name for p in Path("/tmp").glob("thinwan-desktop-*")}


def _procs(names: tuple[str, ...] = ("Xvnc", "Xvfb", "vncviewer", "tcpdump")) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() in names:
                    out.add(int(d.name))
            except OSError:
                pass
    return out


def _snapshot() -> tuple[set[str], set[str], set[str], set[int]]:
    return _x_files(), _desktop_dirs(), set(list_netns()), _procs()


def _assert_nothing_left(before: tuple[set[str], set[str], set[str], set[int]]) -> None:
    x, dirs, ns, procs = before
    assert _x_files() - x == set(), "X lock files or sockets left behind"
    assert _desktop_dirs() - dirs == set(), "temporary directories left behind"
    assert set(list_netns()) - ns == set(), "namespaces left behind"
    assert _procs() - procs == set(), "processes left behind"


def test_tigervnc_up_down_leaves_nothing(tigervnc: None) -> None:
    before = _snapshot()
    with Lab(LabSpec()) as lab, Desktop("tigervnc", lab) as d:
        assert d.server_x is not None and d.client_x is not None
        assert d.server_x.number != d.client_x.number
        assert Path(f"/tmp/.X{d.server_x.number}-lock").exists()
        assert d.versions()["tigervnc-standalone-server"] != "not installed"
        workdir = d.dir
        assert workdir.is_dir()
    assert not workdir.exists()
    _assert_nothing_left(before)


def test_a_relative_workdir_is_made_absolute(tigervnc: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `thinwan desktop run --out rel/dir` (and its default, results/NAME): xrdp opens the
    # paths it is given after changing to /, so a relative one failed it at start-up.
    monkeypatch.chdir(tmp_path)
    with Lab(LabSpec()) as lab, Desktop("tigervnc", lab, workdir="rel") as d:
        assert d.dir.is_absolute() and d.dir.parent == tmp_path / "rel"


def test_tigervnc_sigterm_tears_down(tigervnc: None, tmp_path: Path) -> None:
    """A SIGTERM while the desktop is up (as from `kill`) still tears everything down."""
    before = _snapshot()
    script = tmp_path / "up.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from thinwan.substrates.lab.linkspec import LabSpec
            from thinwan.substrates.lab.topology import Lab
            from thinwan.substrates.desktop import Desktop
            with Lab(LabSpec()) as lab, Desktop("tigervnc", lab) as d:
                print("up", flush=True)
                time.sleep(60)
            """
        )
    )
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "up"
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    time.sleep(0.2)
    _assert_nothing_left(before)


def test_tigervnc_operations_over_lan_and_wan(tigervnc: None, tmp_path: Path) -> None:
    """Each operation's update crosses the WAN as
    server→client traffic in the client-side capture; a 25 ms-each-way link adds at
    least one round trip (50 ms) to letter and fill."""
    settings = DesktopSettings(pause_s=0.3, idle_s=0.3)
    medians = {}
    for delay in (0.0, 25.0):
        spec = LabSpec(link=LinkSpec.symmetric(delay_ms=delay))
        with Lab(spec) as lab, Desktop("tigervnc", lab, settings) as d:
            pcap = tmp_path / f"run-{delay:g}.pcap"
            d.start_capture(pcap)
            recs = [d.do(op) for op in ("fill", "letter", "fill", "letter", "fill", "letter")]
            d.screenshot(tmp_path / f"letter-{delay:g}.png")
            cap = d.stop_capture()
            assert cap.dropped_kernel == 0 and cap.tshark_packets == cap.packets > 0
            assert all(r.settled and r.verified for r in recs)
            pk = read_packets(pcap, d.server_port)
            lats = op_latencies(pcap, d.server_port, recs)
            for r, lat in zip(recs, lats, strict=True):
                window = pk[(pk["t"] >= r.t_input) & (pk["t"] < r.t_settled)]
                assert (window["s2c"] & (window["payload"] > 0)).any(), f"{r.op}: no server→client traffic"
                assert lat.latency_ms is not None
            for op in ("fill", "letter"):
                medians[(op, delay)] = float(np.median([x.latency_ms for x in lats if x.op == op]))
    for op in ("fill", "letter"):
        assert medians[(op, 25.0)] >= medians[(op, 0.0)] + 50.0 * 0.95, medians


def test_fill_changes_the_screen(tigervnc: None, tmp_path: Path) -> None:
    with Lab(LabSpec()) as lab, Desktop("tigervnc", lab, DesktopSettings(pause_s=0.3, idle_s=0.3)) as d:
        d.do("letter")  # anything but a red area
        before = d.screenshot(tmp_path / "before.png")
        rec = d.do("fill")
        after = d.screenshot(tmp_path / "after.png")
        assert rec.verified
        a = np.asarray(after, dtype=int)
        b = np.asarray(before, dtype=int)
        assert np.abs(a - b).max() > 0
        s = d.settings
        area = a[s.app_y : s.app_y + 240, s.app_x : s.app_x + 320]
        assert ((area[..., 0] > 200) & (area[..., 1] < 60) & (area[..., 2] < 60)).mean() > 0.95


def test_screen_check_looks_again_when_traffic_resumes(tigervnc: None) -> None:
    """A pause that ends inside an update (here: an idle watch of 5 ms on a 1 Mbit/s
    link, where the photograph's ~100 KB take most of a second; on wan-loss-10, a
    backed-off retransmission timeout) does not fail the screen check: it looks again
    each time traffic resumes, and passes once the whole picture is there."""
    settings = DesktopSettings(pause_s=0.005, idle_s=0.005)
    spec = LabSpec(link=LinkSpec.symmetric(rate_bps=1_000_000))
    with Lab(spec) as lab, Desktop("tigervnc", lab, settings) as d:
        d.start_capture(Path(d.dir) / "run.pcap")
        rec = d.do("image")
        d.stop_capture()
    assert rec.verified and rec.settled
    assert rec.rechecks >= 1, "the first check came after the whole update: the link is not slow enough to test this"


def test_unknown_platform_is_unavailable_with_a_reason() -> None:
    assert "unknown platform" in (platform_status("nope") or "")
    if os.geteuid() == 0:
        assert platform_status("tigervnc") is None or "package" in str(platform_status("tigervnc"))

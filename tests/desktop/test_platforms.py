"""Every platform besides TigerVNC (which the other desktop tests run throughout) comes up
across the lab, answers the latency benchmark's operations with server→client traffic in
the client-side capture, and leaves nothing behind; xrdp, the web method check's
platform, also runs a short web benchmark with that check from a relative ``--out`` (the
path that once stopped xrdp at start-up unseen), on a slice of its pages (``--pages``).
Needs root, the lab binaries and scripts/setup-desktop.sh's packages."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from thinwan.substrates.desktop import Desktop, DesktopSettings, PlatformUnavailable, platform_status
from thinwan.substrates.desktop.quicklook import op_latencies, read_packets
from thinwan.substrates.lab.linkspec import LabSpec
from thinwan.substrates.lab.netns import list_netns
from thinwan.substrates.lab.topology import Lab

WEB = """
[benchmark]
platforms = ["xrdp"]
envs = ["lan"]
operations = ["web"]

[web]
pages = 3
method_check = "xrdp"
"""


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user may enter (pytest's own are root's only, and xrdp's session
    runs as its test user)."""
    d = Path(tempfile.mkdtemp(prefix="thinwan-test-platforms-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _available(platform: str) -> None:
    reason = platform_status(platform)
    if reason:
        pytest.fail(f"{platform} cannot run here: {reason} (scripts/setup-desktop.sh installs it)")


@pytest.mark.parametrize("platform", ["x11vnc", "x11", "xrdp"])
def test_platform_answers_operations_and_leaves_nothing(
    lab_env: None, platform: str, open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _available(platform)
    monkeypatch.chdir(open_dir)
    before = set(list_netns())
    with Lab(LabSpec()) as lab, Desktop(platform, lab, DesktopSettings(pause_s=0.3, idle_s=0.3), workdir="rel") as d:
        pcap = d.dir / "ops.pcap"
        d.start_capture(pcap)
        recs = [d.do(op) for op in ("fill", "letter", "fill", "letter")]
        cap = d.stop_capture()
        assert cap.packets > 0 and cap.dropped_kernel == 0
        assert all(r.settled and r.verified for r in recs), recs
        # Direction from the addresses: for x11 the listening port is the client's X server.
        pk = read_packets(pcap, d.server_port)
        for r, lat in zip(recs, op_latencies(pcap, d.server_port, recs), strict=True):
            window = pk[(pk["t"] >= r.t_input) & (pk["t"] < r.t_settled)]
            assert (window["s2c"] & (window["payload"] > 0)).any(), f"{platform} {r.op}: no update crossed"
            assert lat.latency_ms is not None and lat.latency_ms > 0
    assert set(list_netns()) - before == set(), "namespaces left behind"


def test_xrdp_names_a_directory_its_session_cannot_enter(lab_env: None, open_dir: Path) -> None:
    _available("xrdp")
    closed = open_dir / "closed"
    closed.mkdir(mode=0o700)
    with Lab(LabSpec()) as lab, pytest.raises(PlatformUnavailable, match=f"cannot enter {closed} \\(mode 0700\\)"):
        with Desktop("xrdp", lab, workdir=closed / "run"):
            pass


def test_xrdp_web_with_the_method_check_from_a_relative_out(lab_env: None, open_dir: Path) -> None:
    _available("xrdp")
    (open_dir / "web.toml").write_text(WEB)
    argv = [sys.executable, "-m", "thinwan", "desktop", "run", "web.toml", "--pages", "2-3", "--out", "out"]
    done = subprocess.run([*argv, "--json", "--quiet"], cwd=open_dir, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    web = {r["pass"]: r for r in doc["results"] if r["operation"] == "web"}
    assert set(web) == {1, 2} and all(r["n"] == 2 and r["latency_ms_mean"] > 0 for r in web.values())
    (check,) = doc["checks"]["web_slow_motion"]
    assert check["platform"] == "xrdp" and check["bytes_no_pause"] > 0 and check["bytes_slow_motion"] > 0
    run = open_dir / "out" / "xrdp" / "lan" / "web"
    assert (run / "web-nopause.pcap").stat().st_size > 0
    # The slice's pages, by their numbers in the whole site; the second pass from the cache.
    pages = pd.read_parquet(run / "web-pages.parquet")
    assert list(zip(pages["pass"], pages["page"])) == [(1, 2), (1, 3), (2, 2), (2, 3)]
    assert (pages[pages["pass"] == 1]["requests"] > 0).all() and (pages[pages["pass"] == 2]["requests"] == 0).all()
    # …and the report says which pages it covers.
    assert "2 pages (a slice: pages 2–3), 2 passes" in (open_dir / "out" / "report.html").read_text()

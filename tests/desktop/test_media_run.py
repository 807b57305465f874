"""The web and video benchmarks end to end on TigerVNC over the lab's LAN, shortened (3
pages twice, a 2-s clip): rows in the --json document, the second pass from the cache,
the run without pauses, screenshots, and nothing left behind. Needs root, the lab
binaries and scripts/setup-desktop.sh's packages (chromium, mpv, ffmpeg)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from thinwan.substrates.desktop import platform_status
from thinwan.substrates.lab.netns import list_netns

BENCH = """
[benchmark]
platforms = ["tigervnc"]
envs = ["lan"]
operations = ["web", "video"]

[web]
pages = 3
method_check = "tigervnc"

[video]
frames = 48
ref_frames = 4
"""


def _ours(path: Path) -> set[int]:
    """Processes whose command line names ``path`` (the run's directory: every program of
    its desktops — X servers, viewer, browser, web server, player, tcpdump — does). Other
    labs may run beside this test, so a global snapshot would not tell ours apart."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if str(path).encode() in (d / "cmdline").read_bytes():
                    out.add(int(d.name))
            except OSError:
                pass
    return out


def test_web_and_video_on_tigervnc(lab_env: None, tmp_path: Path) -> None:
    reason = platform_status("tigervnc")
    if reason:
        pytest.fail(f"tigervnc cannot run here: {reason}")
    bench = tmp_path / "media.toml"
    bench.write_text(BENCH)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "thinwan", "desktop", "run", str(bench), "--out", str(out), "--json", "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    web = {r["pass"]: r for r in doc["results"] if r["operation"] == "web"}
    video = [r for r in doc["results"] if r["operation"] == "video"]
    assert set(web) == {1, 2} and all(r["n"] == 3 and r["latency_ms_mean"] > 0 for r in web.values())
    assert all(r["bytes_per_page"] > 10_000 for r in web.values())  # a page is a screenful
    (v,) = video
    assert 0 < v["quality"] and v["playback_s"] >= 47 / 24 * 0.95 and v["bytes"] > 0
    # Counted from the frame marks the client's screen showed: frames, not pictures, so
    # never more than the clip has (the picture count of partial frames could be).
    assert v["frames_counted_by"] == "frame marks" and 0 < v["frames_displayed"] <= 48
    assert v["fps_displayed"] > 0
    # The run without pauses happened and was compared (TigerVNC may merge updates, so
    # only that the figures exist is checked here; docs/desktop.md has the x11 result).
    (check,) = doc["checks"]["web_slow_motion"]
    assert check["bytes_no_pause"] > 0 and check["bytes_slow_motion"] > 0
    # Each cell's run time against its floor (the display's own time for what it measured).
    dur = {d["operation"]: d for d in doc["durations"]}
    assert set(dur) == {"web", "video"} and all(0 < d["updates_s"] < d["run_s"] for d in dur.values())
    run = out / "tigervnc" / "lan"
    pages = __import__("pandas").read_parquet(run / "web" / "web-pages.parquet")
    assert (pages[pages["pass"] == 1]["requests"] > 0).all() and (pages[pages["pass"] == 2]["requests"] == 0).all()
    # Every page reported the click reaching the browser, then its load (before the
    # update's end).
    assert (pages["clicks"] >= 1).all() and (pages["click_ms"] > 0).all()
    assert (pages["load_ms"] > pages["click_ms"]).all()
    assert (pages["load_ms"] < pages["latency_ms"]).all()
    # …and changed the client's screen before the next click (the web pause's screen check).
    assert pages["screen_changed"].all() and (pages["rechecks"] >= 0).all()
    for f in ("web/web.pcap", "web/web.png", "web/web-nopause.pcap", "video/video.pcap", "video/video.png"):
        assert (run / f).stat().st_size > 0, f
    assert _ours(tmp_path) == set(), "processes left behind"
    ours = {ns for p in run.glob("*/*-inputs.json") for ns in json.loads(p.read_text())["desktop"]["netns"].values()}
    assert len(ours) >= 2 and not ours & set(list_netns()), "namespaces left behind"
    # Run again into the same directory: every cell is finished, so nothing runs again
    # (no new capture) and the results are the same, re-analysed from the kept files.
    stamp = (run / "video" / "video.pcap").stat().st_mtime_ns
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["results"] == doc["results"]
    assert json.loads(again.stdout)["durations"] == doc["durations"]  # from cell.json
    assert (run / "video" / "video.pcap").stat().st_mtime_ns == stamp

"""The web and video benchmarks' pieces that need no lab: the generated pages
(deterministic, chained, cached second pass), the clip, the quality formula on a
hand-worked capture, the frame count, the benchmark file's sections."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.desktop.test_analyze import T0_NS, vnc, write_pcap

from thinwan.analysis.desktop_media import count_frames, video_quality, web_summary
from thinwan.config.desktop_bench import bench_from_data
from thinwan.config.files import ScenarioError
from thinwan.execute.desktop_media_runs import analyse_video, media_steps, method_checked
from thinwan.substrates.desktop import DesktopSettings, videoclip, webpages


def test_pages_are_deterministic_and_documented(tmp_path: Path) -> None:
    a = webpages.write_site(tmp_path / "a")
    b = webpages.write_site(tmp_path / "b")
    c = webpages.write_site(tmp_path / "c", seed=7)
    assert a.sha256 == b.sha256 != c.sha256
    assert len(a.pages) == 54
    # Six of each kind, in the documented cycle; every image the manifest lists exists
    # with the size it records.
    assert [p.kind for p in a.pages] == list(webpages.KINDS) * 6
    for p in a.pages:
        assert (tmp_path / "a" / p.name).stat().st_size == p.html_bytes
        for name, size in p.images:
            assert (tmp_path / "a" / name).stat().st_size == size
    sizes = sorted(p.total_bytes for p in a.pages)
    assert sizes[0] > 1000 and sizes[-1] > 30_000  # text pages to large photographs
    assert a.to_json()["bytes_total"] == sum(sizes)


def test_pages_chain_and_wrap(tmp_path: Path) -> None:
    webpages.write_site(tmp_path, pages=3)

    def nav(name: str) -> tuple[str, str, str]:
        m = re.search(r"var NEXT='([^']+)',LAST=(\w+),START=(\w+)", (tmp_path / name).read_text())
        assert m, name
        return m.group(1), m.group(2), m.group(3)

    assert nav(webpages.START_PAGE) == ("p01.html", "false", "true")
    assert nav("p01.html") == ("p02.html", "false", "false")
    assert nav("p03.html") == ("p01.html", "true", "false")  # the second pass reloads page 1
    with pytest.raises(ValueError, match="at least one page"):
        webpages.write_site(tmp_path / "none", pages=0)


def test_a_slice_of_pages_is_the_same_pages(tmp_path: Path) -> None:
    # Pages 9–11 alone (`desktop run --pages 9-11`) are the whole site's pages 9–11, byte
    # for byte, but for the last one's link back to the slice's first.
    whole = webpages.write_site(tmp_path / "whole", pages=12)
    part = webpages.write_site(tmp_path / "part", pages=3, first=9)
    assert [p.name for p in part.pages] == ["p09.html", "p10.html", "p11.html"]
    assert part.pages[:2] == whole.pages[8:10]  # kinds, sizes, images
    assert (part.pages[2].kind, part.pages[2].images) == (whole.pages[10].kind, whole.pages[10].images)
    for p in part.pages:
        for name, _ in p.images:
            assert (tmp_path / "part" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    assert (tmp_path / "part" / "p09.html").read_bytes() == (tmp_path / "whole" / "p09.html").read_bytes()
    nav = re.compile(r"var NEXT='([^']+)',LAST=(\w+)")
    assert nav.search((tmp_path / "part" / webpages.START_PAGE).read_text())[1] == "p09.html"
    assert nav.search((tmp_path / "part" / "p11.html").read_text()).groups() == ("p09.html", "true")
    assert not (tmp_path / "part" / "p01.html").exists()
    with pytest.raises(ValueError, match="numbered from 1"):
        webpages.write_site(tmp_path / "none", first=0)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg not installed (scripts/setup-desktop.sh)")
def test_clip_is_what_the_source_asks(tmp_path: Path) -> None:
    clip = videoclip.write_clip(tmp_path, frames=48)
    again = videoclip.write_clip(tmp_path / "again", frames=48)
    assert clip.sha256 == again.sha256 and clip.bytes > 10_000
    assert videoclip.CLIP_FRAMES / videoclip.CLIP_FPS == 34.75
    argv = videoclip.mpv_argv(clip, 64, 64, tmp_path / "input.conf", speed=1 / 24, frames=10)
    assert "--geometry=352x240+64+64" in argv and "--speed=0.0416666667" in argv and "--frames=10" in argv


def test_frame_marks_read_back_from_the_decoded_clip(tmp_path: Path) -> None:
    # Every frame's number, drawn by ffmpeg and read by the screen watcher's decoder from
    # the decoded (lossy) picture as X hands it over (32-bit BGRX rows).
    import subprocess

    from thinwan.substrates.desktop.screenwatch import decode_mark

    clip = videoclip.write_clip(tmp_path, frames=40)
    w, h = clip.size
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(clip.path), "-f", "rawvideo", "-pix_fmt", "bgr0", "-"],
        capture_output=True,
        check=True,
    ).stdout
    size = w * h * 4
    assert len(raw) == 40 * size
    got = [
        decode_mark(raw[i * size : (i + 1) * size], w, 0, h - videoclip.MARK_BLOCK, videoclip.MARK_BLOCK, 10)
        for i in range(40)
    ]
    assert got == list(range(40))
    # Without the guards (a picture half-way through being drawn, another window): -1.
    assert decode_mark(bytes(size), w, 0, h - videoclip.MARK_BLOCK, videoclip.MARK_BLOCK, 10) == -1
    with pytest.raises(videoclip.ClipError, match="do not fit the clip's 10-bit frame marks"):
        videoclip.write_clip(tmp_path / "long", frames=2000)


def test_marked_frames_count_each_frame_once() -> None:
    from thinwan.analysis.desktop_media import count_marked_frames
    from thinwan.analysis.desktop_ops import ScreenLog

    log = ScreenLog.parse(
        "1.0 ready\n1.1 area aa 0.3 0\n1.2 10 10 5 5\n1.3 area bb 0.3 1\n1.4 area cc 0.3 1\n"
        "1.5 area dd 0.3 -1\n1.6 area ee 0.3 3\n1.7 area ff 0.3\n"
    )
    assert log.changes == [(1.2, 10, 10, 5, 5)] and len(log.areas) == 6
    # Frame 1 drawn in two pieces counts once, a picture without a mark not at all, frame
    # 2 was never shown.
    assert count_marked_frames(log.frames, 1.25, 2.0) == 2
    assert count_marked_frames(log.frames, 0.0, 2.0) == 3


def test_quality_formula() -> None:
    # Every frame's data delivered in the frame time: 1. Half the data per frame: 0.5.
    assert video_quality(24_000, 1.0, 24, 1000, 1.0, 1) == pytest.approx(1.0)
    assert video_quality(12_000, 1.0, 24, 1000, 1.0, 1) == pytest.approx(0.5)
    # Playing longer than the clip (the client could not keep up) lowers it too.
    assert video_quality(24_000, 2.0, 24, 1000, 1.0, 1) == pytest.approx(0.5)
    assert np.isnan(video_quality(1, 0.0, 24, 1, 1.0, 1))


def test_video_analysis_on_a_hand_worked_capture(tmp_path: Path) -> None:
    # The play: a click at 1 s, then 48 frame updates of 1,000 payload bytes 1/24 s apart;
    # the reference: a click at 10 s, then 4 updates of 3,000 bytes 1 s apart.
    spec = [(1000.0, False, 12)]
    spec += [(1010.0 + k * 1000 / 24, True, 1000) for k in range(48)]
    spec += [(10_000.0, False, 12)]
    spec += [(10_020.0 + k * 1000.0, True, 3000) for k in range(4)]
    write_pcap(tmp_path / "video.pcap", vnc(spec))
    t0 = T0_NS / 1e9
    records = [
        {"play": "play", "t_input": t0 + 0.999, "t_settled": t0 + 5.0, "settled": True, "frames_shown": 47},
        {"play": "reference", "t_input": t0 + 9.999, "t_settled": t0 + 15.0, "settled": True, "frames_shown": 3},
    ]
    info = {"platform": "tigervnc", "server_port": 5900, "settings": {"app_x": 64, "app_y": 64}}
    # The client's screen: 40 of the 48 frames drawn (as 2 rectangles each), 8 merged away.
    changes = [(t0 + 1.02 + k / 24 + d, 64, 64, 352, 120) for k in range(40) for d in (0, 0.001)]
    doc = {"records": records, "desktop": info, "server": {"screen_changes": changes}}
    (tmp_path / "video-inputs.json").write_text(json.dumps(doc))
    bench = bench_from_data({"benchmark": {"operations": ["video"]}, "video": {"frames": 48, "ref_frames": 4}})
    row = analyse_video(tmp_path, "lan", 500.0, {"server": "198.18.1.1", "client": "198.18.2.1"}, bench)
    # Bytes are IP bytes server→client (40-byte headers); times from the click's packet
    # to the last update packet.
    b24, t24 = 48 * 1040, (1010.0 + 47 * 1000 / 24 - 1000.0) / 1e3
    bref, tref = 4 * 3040, (10_020.0 + 3000.0 - 10_000.0) / 1e3
    assert row["bytes"] == b24 and row["reference_bytes"] == bref
    assert row["playback_s"] == pytest.approx(t24, abs=1e-6)
    assert row["reference_playback_s"] == pytest.approx(tref, abs=1e-6)
    assert row["quality"] == pytest.approx((b24 / t24 / 24) / (bref / tref / 1), rel=1e-6)
    assert row["frames_displayed"] == 40
    assert row["fps_displayed"] == pytest.approx(40 / t24)


def test_frame_count_groups_rectangles_and_ignores_other_areas() -> None:
    area = (0, 0, 100, 100)
    changes = [(0.0, 0, 0, 10, 10), (0.001, 50, 50, 10, 10), (0.05, 0, 0, 10, 10), (0.06, 500, 500, 10, 10)]
    assert count_frames(changes, area, 0.0, 1.0, gap_s=0.02) == 2
    assert count_frames(changes, area, 0.04, 1.0, gap_s=0.02) == 1
    assert count_frames([], area, 0.0, 1.0, gap_s=0.02) == 0


def test_web_summary_per_pass() -> None:
    pages = pd.DataFrame(
        {
            "platform": ["x11"] * 4,
            "env": ["lan"] * 4,
            "pass": [1, 1, 2, 2],
            "latency_ms": [100.0, 300.0, 50.0, np.nan],
            "bytes_s2c": [1000, 3000, 500, 700],
            "bytes_c2s": [100, 100, 100, 100],
        }
    )
    s = web_summary(pages).set_index("pass")
    assert s.loc[1, "latency_ms_mean"] == 200.0 and s.loc[1, "bytes_per_page"] == 2100.0
    assert s.loc[2, "latency_ms_mean"] == 50.0 and s.loc[2, "n"] == 1
    assert s.loc[2, "bytes_per_page"] == 700.0


def test_bench_file_sections() -> None:
    b = bench_from_data({"benchmark": {"operations": ["web", "video"]}, "web": {"pages": 3}})
    assert b.web.pages == 3 and b.web.passes == 2 and b.video.frames == 834 and b.video.ref_fps == 1.0
    with pytest.raises(ScenarioError, match="web.method_check: unknown platform 'vnc'"):
        bench_from_data({"web": {"method_check": "vnc"}}, "f.toml")
    with pytest.raises(ScenarioError, match="web.method_check_envs.1: unknown environment 'moon'"):
        bench_from_data({"web": {"method_check_envs": ["lan", "moon"]}}, "f.toml")
    # The run without pauses: on the named platform, in the named environments only.
    b = bench_from_data({"benchmark": {"envs": ["lan", "wan", "wan-loss-1"], "operations": ["web"]}}, "f.toml")
    assert [method_checked(b, p, e) for p, e in [("xrdp", "lan"), ("xrdp", "wan"), ("xrdp", "wan-loss-1")]] == [
        True,
        True,
        False,
    ]
    assert not method_checked(b, "x11", "lan")
    assert media_steps(b, "web", "xrdp", "lan") == 109 and media_steps(b, "web", "xrdp", "wan-loss-1") == 108
    with pytest.raises(ScenarioError, match="f.toml: video.pages: unknown key"):
        bench_from_data({"video": {"pages": 3}}, "f.toml")
    with pytest.raises(ScenarioError, match="video.width/height"):
        bench_from_data({"video": {"width": 2000}}, "f.toml")


def test_pages_narrows_the_web_benchmark_to_a_slice() -> None:
    from thinwan.execute.desktop_runs import _cell_key

    b = bench_from_data({"benchmark": {"envs": ["wan-loss-10"], "operations": ["web"]}}, "f.toml")
    part = b.select(pages=(9, 22))
    assert (part.web.first_page, part.web.pages) == (9, 14) and (b.web.first_page, b.web.pages) == (1, 54)
    assert media_steps(part, "web", "x11", "wan-loss-10") == 28
    # A slice is its own cell; the whole run keeps the key it had before slices existed.
    keys = {_cell_key(x, "wan-loss-10", "web", []) for x in (b, part, b.select(pages=(1, 54)))}
    assert len(keys) == 2
    for pages, msg in [((50, 55), "50-55 is not within the file's web pages 1-54"), ((0, 3), "0-3")]:
        with pytest.raises(ScenarioError, match=f"--pages: {msg}.*f.toml: web.first_page, web.pages"):
            b.select(pages=pages)
    with pytest.raises(ScenarioError, match="--pages: f.toml runs no web benchmark"):
        bench_from_data({"benchmark": {"operations": ["video"]}}, "f.toml").select(pages=(1, 2))


def test_an_environment_runs_with_the_same_seed_alone_or_in_the_matrix() -> None:
    # The seed follows the environment's place in the file, not among those chosen with
    # --env: `--env wan-loss-10` alone runs the loss pattern the whole matrix runs.
    b = bench_from_data({"benchmark": {"envs": ["lan", "wan", "wan-loss-10"], "seed": 7}}, "f.toml")
    whole = {e: b.env_seed(e) for e in b.envs}
    assert whole == {"lan": 7, "wan": 8, "wan-loss-10": 9}
    alone = b.select(envs=["wan-loss-10"])
    assert alone.env_seed("wan-loss-10") == 9
    from thinwan.substrates.desktop.envlab import env_json

    assert env_json(alone.envs["wan-loss-10"], alone.env_seed("wan-loss-10"))["seed"] == 9  # in the results
    # An environment the file does not list (a built-in named with --env) comes after its own.
    extra = b.select(envs=["wan-1mb", "lan"])
    assert extra.env_seed("lan") == 7 and extra.env_seed("wan-1mb") > 9


def test_pictures_count_new_pictures_only() -> None:
    from thinwan.analysis.desktop_media import count_pictures

    areas = [(0.0, "a"), (1.0, "b"), (1.1, "b"), (1.2, "c"), (1.3, "b"), (5.0, "d")]
    # From 0.5 s: b (new), b (a repaint), c, b (new again); d is after the window.
    assert count_pictures(areas, 0.5, 2.0) == 3
    assert count_pictures(areas, 1.05, 2.0) == 2  # the picture before the window was b
    assert count_pictures([], 0.0, 1.0) == 0


def test_report_header_counts_repetitions_only_for_latency_operations() -> None:
    from thinwan.report.desktop_page import _repeats

    assert _repeats(["web"], 10) == "" and _repeats(["video", "web"], 10) == ""
    assert _repeats(["letter", "web"], 10) == ", 10 repetitions of each latency operation"


def test_a_silent_mpv_is_a_desktop_error_naming_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # mpv's IPC socket accepts but never answers (it hung behind a slow X connection):
    # a DesktopError the run reports for that cell, not a bare "timed out" for the run.
    import socket

    from thinwan.substrates.desktop import DesktopError, workloads
    from thinwan.substrates.desktop.workloads import VideoPlayer

    monkeypatch.setattr(workloads, "IPC_TIMEOUT_S", 0.5)  # the real 30 s, shortened
    player = VideoPlayer()
    path = tmp_path / "mpv.sock"
    player.socket_path = lambda d: path  # type: ignore[method-assign]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(str(path))
        srv.listen(1)
        with pytest.raises(DesktopError, match="mpv did not answer 'get_property pause' on its IPC socket: timed out"):
            player.command(None, "get_property", "pause")  # type: ignore[arg-type]


class _Headless:
    """What VideoPlayer asks of a desktop, for a real mpv with no display (``--vo=null``)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.settings = DesktopSettings()

    def check_alive(self) -> None:
        assert self.proc.poll() is None, "mpv exited"


@pytest.mark.skipif(
    shutil.which("mpv") is None or shutil.which("ffmpeg") is None, reason="mpv/ffmpeg not installed (setup-desktop.sh)"
)
def test_a_play_past_its_limit_is_stopped_and_marked_truncated(tmp_path: Path) -> None:
    # mpv over plain X on a slow path plays for hours: the benchmark stops it at its limit
    # and measures what it showed, instead of failing the cell with no numbers.
    from thinwan.substrates.desktop.workloads import VideoPlayer

    clip = videoclip.write_clip(tmp_path, frames=48)
    player = VideoPlayer(frames=48)
    sock = tmp_path / "mpv.sock"
    player.socket_path = lambda d: sock  # type: ignore[method-assign]
    argv = videoclip.mpv_argv(clip, 0, 0, tmp_path / "none.conf")[:-1]
    argv = [a.replace("--vo=x11", "--vo=null") for a in argv if not a.startswith("--input-conf")]
    proc = subprocess.Popen([*argv, "--idle=yes", f"--input-ipc-server={sock}"], stdin=subprocess.DEVNULL)
    try:
        d = _Headless(proc)
        deadline = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        player.clip = clip
        player.load(d, speed=0.1, frames=None)  # 48 frames at 2.4 fps: 20 s
        player.command(d, "set_property", "pause", False)  # the click
        counts = player.wait_end(d, 1.0)
        assert counts["truncated"] is True and counts["frames_shown"] < 48
        assert player.command(d, "get_property", "pause") is True  # stopped, not left running
        player.load(d, speed=4.0, frames=None)  # the whole clip in 0.5 s
        player.command(d, "set_property", "pause", False)
        counts = player.wait_end(d, 20.0)
        assert counts["truncated"] is False and counts["frames_shown"] >= 47
    finally:
        proc.kill()
        proc.wait()


def test_web_problems_name_each_page_and_check() -> None:
    from thinwan.execute.desktop_media_runs import web_problems

    pages = pd.DataFrame(
        {
            "pass": [1, 1, 1, 2, 2],
            "page": [1, 2, 3, 1, 2],
            "latency_ms": [120.0, np.nan, 130.0, 90.0, 95.0],
            "load_ms": [40.0, 50.0, 45.0, 30.0, 35.0],
            "settled": [True, True, True, False, True],
            "requests": [3, 2, 4, 0, 0],
        }
    )
    # As analyse_web builds it: numpy booleans, NA for runs from before the screen check.
    pages["screen_changed"] = pd.array([True, True, False, True, None], dtype="boolean")
    assert web_problems(pages) == [
        "web pass 1 page 2: showed no update after the click",
        "web pass 1 page 3: the client's screen did not change within max_wait_s of the click",
        "web pass 2 page 1: traffic was still flowing when the pause ended (max_wait_s)",
    ]
    # A page the browser had the click for but did not load (plain X over 10 % loss can
    # take longer than max_wait_s): named, and the run's other pages still count.
    pages.loc[2, "load_ms"] = np.nan
    assert web_problems(pages)[1] == "web pass 1 page 3: the browser did not load it within max_wait_s of the click"
    pages.loc[0, "requests"], pages.loc[4, "requests"] = 0, 1
    assert web_problems(pages)[-2:] == [
        "web: a page of the first pass fetched nothing from the server (the click did not load it)",
        "web: later passes fetched from the server (the browser's cache did not serve them)",
    ]


def test_durations_table_shows_run_time_against_its_floor() -> None:
    from thinwan.report.desktop_media_page import durations_table

    rows = [
        {"platform": "x11", "env": "wan", "operation": "web", "run_s": 300.0, "updates_s": 120.0},
        # A cell finished before cell.json kept its run time.
        {"platform": "xrdp", "env": "lan", "operation": "video", "run_s": None, "updates_s": 150.0},
    ]
    lines = durations_table(rows).splitlines()
    assert lines[2].split() == ["x11", "wan", "web", "5.0", "2.0", "2.50"]
    assert lines[3].split() == ["xrdp", "lan", "video", "—", "2.5", "—"]

"""The web and video benchmarks of ``thinwan desktop run`` (operations ``web`` and
``video``; Lai and Nieh 2006 "Benchmarks"), one platform in one environment at a time,
each on a desktop of its own (Chromium or mpv instead of the latency application).

- **web**: the pages, ``passes`` times (the second from the browser's cache), one click
  at the client per page and the slow-motion pause after it. On ``method_check``'s
  platform, a second desktop (a fresh browser, so a cold cache again) runs the same
  passes with no pauses (each page loads the next as soon as it has loaded) for the
  check that slow motion does not change the total data.
- **video**: the clip at its frame rate, then the reference play (``ref_frames`` frames at
  ``ref_fps``), each started by a click at the client.

Layout under ``<platform>/<env>/``::

    web/web.pcap, web-inputs.json, web-pages.parquet, web.png, [web-nopause.pcap …]
    video/video.pcap, video-inputs.json, video.parquet, video.png
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.desktop_media import count_frames, count_marked_frames, count_pictures, video_quality, web_summary
from ..analysis.desktop_ops import attribute_packets
from ..config.desktop_bench import Bench
from ..substrates.desktop import Desktop, DesktopError, DesktopSettings
from ..substrates.desktop.opsplit import split_capture
from ..substrates.desktop.webpages import DONE_PATH, START_PAGE, is_beacon, page_name
from ..substrates.desktop.workloads import VideoPlayer, WebBrowser

__all__ = [
    "MEDIA_OPERATIONS",
    "media_steps",
    "method_checked",
    "run_web",
    "run_video",
    "analyse_web",
    "analyse_video",
    "web_problems",
    "web_rows",
]

MEDIA_OPERATIONS = ("web", "video")
CLICK_TRIES = 3  # clicks per page before the run fails
# A click that no page has reported by then was lost (x11vnc over the WAN loses one now
# and then). Only the click's arrival is timed so: the load that follows may take far
# longer where the browser's own display connection crosses the WAN (plain X over 10 %
# loss), and it has max_wait_s.
CLICK_TIMEOUT_S = 10.0


def play_limit_s(seconds: float) -> float:
    """How long after its click a play of ``seconds`` may run before it is stopped and
    measured as far as it went (``truncated``): three times its length, plus a minute for
    the first frame to cross a slow path."""
    return 3 * seconds + 60


def method_checked(bench: Bench, platform: str, env: str) -> bool:
    """Does the web benchmark also run without pauses on ``platform`` in ``env``?"""
    return bench.web.method_check == platform and env in bench.web.method_check_envs


def media_steps(bench: Bench, op: str, platform: str, env: str) -> int:
    """Progress-bar steps of ``op`` for one platform in one environment."""
    if op == "web":
        return bench.web.pages * bench.web.passes + (1 if method_checked(bench, platform, env) else 0)
    return 2


def _measure(
    pcap: Path, info: dict[str, Any], addr: dict[str, str], idle_ms: float, windows: list[tuple[float, float]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per window (t_from, t_to): from its first client→server payload packet (the
    click) to its last server→client payload packet, with the bytes each way. Straight
    from the packets, not the idle-gap bursts: a page or a slowed-down video pauses
    longer than the idle gap inside itself, and server-push platforms then send on with
    no input in the later bursts. Also returns the packets."""
    x11 = info["platform"] == "x11"
    res = split_capture(
        pcap,
        info["server_port"],
        addr=addr["client" if x11 else "server"],
        port_at_client=x11,
        idle_ms=idle_ms,
        keep_packets=True,
        require_gap=False,
    )
    assert res.packets is not None
    empty = {"t_input": np.nan, "t_end": np.nan, "latency_ms": np.nan, "bytes_s2c": 0, "bytes_c2s": 0}
    return pd.DataFrame([attribute_packets(res.packets, a, b) or empty for a, b in windows]), res.packets


# --- web -------------------------------------------------------------------------------


def run_web(
    bench: Bench, lab: Any, platform: str, env: str, settings: DesktopSettings, run_dir: Path, bar: Any
) -> None:
    """The web benchmark's runs; what they leave in ``run_dir`` is analysed by
    :func:`analyse_web`."""
    w = bench.web
    run_dir.mkdir(parents=True, exist_ok=True)
    site = WebBrowser(w.pages, w.seed, first=w.first_page)
    with Desktop(platform, lab, settings, workdir=run_dir, workload=site) as d:
        d.start_capture(run_dir / "web.pcap")
        records = []
        screen = d.screenshot()
        for k in range(w.passes):
            for page in range(w.first_page, w.first_page + w.pages):
                # A user clicks again when a click was lost: the page's click report
                # tells, and the page's window starts at the click that arrived.
                clicks, clicked = 0, None
                while clicked is None:
                    if clicks == CLICK_TRIES:
                        raise DesktopError(
                            f"web pass {k + 1} page {page}: none of {CLICK_TRIES} clicks reached the browser"
                            f" within {CLICK_TIMEOUT_S:g} s"
                        )
                    clicks += 1
                    t, started = d.inject("click", "1"), time.monotonic()
                    clicked = site.wait_clicked(d, t, CLICK_TIMEOUT_S)
                # None: not loaded within max_wait_s of the click (a failure the checks
                # name); the run goes on, as for a page still sending at max_wait_s.
                left = settings.max_wait_s - (time.monotonic() - started)
                loaded = site.wait_loaded(d, page_name(page), t, max(0.0, left))
                # The page must change the client's screen before the next click: a pause
                # that ended inside a backed-off retransmission timeout looks again when
                # traffic resumes (x11vnc and xrdp over 10 % loss each lost a page so).
                settled, rechecks, changed, screen = d.settle_screen(screen, started)
                records.append(
                    {
                        "pass": k + 1,
                        "page": page,
                        "clicks": clicks,
                        "t_input": t,
                        "t_clicked": clicked,
                        "t_loaded": loaded,
                        "t_settled": time.time(),
                        "settled": settled,
                        "rechecks": rechecks,
                        "screen_changed": changed,
                    }
                )
                bar.update(1)
        d.screenshot(run_dir / "web.png")
        cap = d.stop_capture()
        requests = site.requests(d)
        info = d.info()
    _write(run_dir, "web", cap.to_json(), records, info, requests)
    if method_checked(bench, platform, env):
        _run_web_nopause(bench, lab, platform, settings, run_dir)
        bar.update(1)


def _run_web_nopause(bench: Bench, lab: Any, platform: str, settings: DesktopSettings, run_dir: Path) -> None:
    w = bench.web
    site = WebBrowser(w.pages, w.seed, auto_passes=w.passes, first=w.first_page)
    with Desktop(platform, lab, settings, workdir=run_dir, workload=site) as d:
        d.start_capture(run_dir / "web-nopause.pcap")
        t = d.inject("click", "1")
        deadline = time.monotonic() + w.max_run_s
        while DONE_PATH not in d.app_events():
            if time.monotonic() > deadline:
                raise DesktopError(f"the pages without pauses did not finish within {w.max_run_s:g} s (web.max_run_s)")
            d.check_alive()
            time.sleep(0.1)
        _, settled = d.settle()
        records = [{"pass": 0, "page": 0, "t_input": t, "t_settled": time.time(), "settled": settled}]
        cap = d.stop_capture()
        requests = site.requests(d)
        info = d.info()
    _write(run_dir, "web-nopause", cap.to_json(), records, info, requests)


def _write(
    run_dir: Path, name: str, capture: dict[str, Any], records: list[dict[str, Any]], info: dict[str, Any], extra: Any
) -> None:
    (run_dir / f"{name}-capture.json").write_text(json.dumps(capture, indent=1) + "\n")
    doc = {"records": records, "desktop": info, "server": extra}
    (run_dir / f"{name}-inputs.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")


def analyse_web(run_dir: Path, env: str, idle_ms: float, addr: dict[str, str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One row per page load (``web-pages.parquet``) and the method check's figures."""
    doc = json.loads((run_dir / "web-inputs.json").read_text())
    info, records = doc["desktop"], doc["records"]
    windows = [
        (r["t_input"], records[i + 1]["t_input"] if i + 1 < len(records) else np.inf) for i, r in enumerate(records)
    ]
    att, _ = _measure(run_dir / "web.pcap", info, addr, idle_ms, windows)
    att.insert(0, "platform", info["platform"])
    att.insert(1, "env", env)
    att.insert(2, "pass", [r["pass"] for r in records])
    att.insert(3, "page", [r["page"] for r in records])
    att["settled"] = [r["settled"] for r in records]
    att["clicks"] = [r.get("clicks", 1) for r in records]
    # The screen check (runs from before 2026-11-27 had none: None).
    att["rechecks"] = [r.get("rechecks", 0) for r in records]
    att["screen_changed"] = pd.array([r.get("screen_changed") for r in records], dtype="boolean")
    # The browser's own load time (its load event, reported to the server on the same
    # host's clock) next to the client's latency: the rest is the display's cost.
    att["load_ms"] = [(r["t_loaded"] - r["t_input"]) * 1e3 if r.get("t_loaded") else np.nan for r in records]
    # How long the click took to reach the browser (runs before 2026-11-28 did not ask: NaN).
    att["click_ms"] = [(r["t_clicked"] - r["t_input"]) * 1e3 if r.get("t_clicked") else np.nan for r in records]
    # What the browser fetched while each page loaded: everything in pass 1, nothing after.
    req_t = np.array(
        [t for t, path in doc["server"] if path != f"/{START_PAGE}" and not is_beacon(path)],
        dtype=float,
    )
    att["requests"] = [int(((req_t >= a) & (req_t < b)).sum()) for a, b in windows]
    att.to_parquet(run_dir / "web-pages.parquet", index=False)
    check: dict[str, Any] = {}
    if (run_dir / "web-nopause-inputs.json").exists():
        nd = json.loads((run_dir / "web-nopause-inputs.json").read_text())
        r = nd["records"][0]
        total_nopause, _ = _measure(
            run_dir / "web-nopause.pcap", nd["desktop"], addr, idle_ms, [(r["t_input"], np.inf)]
        )
        slow = float((att["bytes_s2c"] + att["bytes_c2s"]).sum())
        fast = float(total_nopause["bytes_s2c"].iloc[0] + total_nopause["bytes_c2s"].iloc[0])
        check = {
            "platform": info["platform"],
            "env": env,
            "bytes_slow_motion": slow,
            "bytes_no_pause": fast,
            "ratio": fast / slow if slow else float("nan"),
            "pass": bool(slow and abs(fast / slow - 1) <= 0.05),
        }
    return att, check


def web_problems(pages: pd.DataFrame) -> list[str]:
    """What the web benchmark's checks found wrong in its pages (one row per page load,
    :func:`analyse_web`): a page the browser did not load, a page with no update, a
    screen that never changed, traffic still flowing at the next click, the first pass not
    fetching or a later one fetching."""
    problems = []
    for k, page, lat, load, settled, changed in zip(
        pages["pass"], pages["page"], pages["latency_ms"], pages["load_ms"], pages["settled"], pages["screen_changed"]
    ):
        if np.isnan(load):
            problems.append(f"web pass {k} page {page}: the browser did not load it within max_wait_s of the click")
        if np.isnan(lat):
            problems.append(f"web pass {k} page {page}: showed no update after the click")
        elif changed is not pd.NA and not changed:  # NA: a run from before the screen check
            problems.append(
                f"web pass {k} page {page}: the client's screen did not change within max_wait_s of the click"
            )
        if not settled:
            problems.append(f"web pass {k} page {page}: traffic was still flowing when the pause ended (max_wait_s)")
    first, later = pages[pages["pass"] == 1], pages[pages["pass"] > 1]
    if (first["requests"] == 0).any():
        problems.append("web: a page of the first pass fetched nothing from the server (the click did not load it)")
    if len(later) and later["requests"].sum() > 0:
        problems.append("web: later passes fetched from the server (the browser's cache did not serve them)")
    return problems


def web_rows(pages: pd.DataFrame) -> list[dict[str, Any]]:
    """The document's ``results`` rows of operation ``web``: one per platform × env × pass."""
    rows = []
    for r in web_summary(pages).to_dict("records"):
        rows.append({"operation": "web", **{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}})
    return rows


def _timeline(packets: pd.DataFrame, t_from: float, t_to: float, bin_s: float = 0.1) -> pd.DataFrame:
    """IP bytes each way per ``bin_s`` from ``t_from`` (the click) to ``t_to``: how a
    platform paces a video's updates (server push: steady; client pull: one per RTT)."""
    w = packets[(packets["t"] >= t_from) & (packets["t"] < t_to)]
    k = ((w["t"] - t_from) // bin_s).astype("int64")
    n = int(k.max()) + 1 if len(k) else 0
    s2c = np.bincount(k[w["s2c"]], weights=w["ip_len"][w["s2c"]], minlength=n)
    c2s = np.bincount(k[~w["s2c"]], weights=w["ip_len"][~w["s2c"]], minlength=n)
    return pd.DataFrame({"t": np.arange(n) * bin_s, "bytes_s2c": s2c, "bytes_c2s": c2s})


# --- video -----------------------------------------------------------------------------


def run_video(bench: Bench, lab: Any, platform: str, settings: DesktopSettings, run_dir: Path, bar: Any) -> None:
    """The clip at its rate, then the reference play; analysed by :func:`analyse_video`."""
    v = bench.video
    run_dir.mkdir(parents=True, exist_ok=True)
    player = VideoPlayer(v.frames, v.fps, (v.width, v.height))
    plays = [
        ("play", 1.0, None, v.frames / v.fps),
        ("reference", v.ref_fps / v.fps, v.ref_frames, v.ref_frames / v.ref_fps),
    ]
    with Desktop(platform, lab, settings, workdir=run_dir, workload=player) as d:
        d.start_capture(run_dir / "video.pcap")
        records = []
        for label, speed, frames, seconds in plays:
            if label != "play":
                player.load(d, speed, frames)
                d.settle()
            t = d.inject("click", "1")
            counts = player.wait_end(d, play_limit_s(seconds))
            _, settled = d.settle()
            records.append({"play": label, "t_input": t, "t_settled": time.time(), "settled": settled, **counts})
            bar.update(1)
            if label == "play":
                d.screenshot(run_dir / "video.png")
        cap = d.stop_capture()
        screen = d.screen_changes()
        info = d.info()
    extra = {"screen_changes": screen.changes, "screen_areas": screen.areas, "screen_frames": screen.frames}
    _write(run_dir, "video", cap.to_json(), records, info, extra)


def analyse_video(run_dir: Path, env: str, idle_ms: float, addr: dict[str, str], bench: Bench) -> dict[str, Any]:
    """The document's ``results`` row of operation ``video`` (also ``video.json``)."""
    v = bench.video
    doc = json.loads((run_dir / "video-inputs.json").read_text())
    info, records = doc["desktop"], doc["records"]
    windows = [(r["t_input"], r["t_settled"]) for r in records]
    att, packets = _measure(run_dir / "video.pcap", info, addr, idle_ms, windows)
    att.insert(0, "play", [r["play"] for r in records])
    att.to_parquet(run_dir / "video.parquet", index=False)
    _timeline(packets, *windows[0]).to_parquet(run_dir / "video-timeline.parquet", index=False)
    play, ref = att.iloc[0], att.iloc[1]
    s = info["settings"]
    area = (s["app_x"], s["app_y"], v.width, v.height)
    gap = (v.frame_gap_ms / 1e3) if v.frame_gap_ms > 0 else 0.5 / v.fps
    # Frames the client showed: the distinct frame numbers its screen showed, read from
    # the clip's frame marks; in runs from before the marks, new pictures of the watched
    # area (partial frames count too), else bursts of change reports inside the video.
    marks = [(float(t), int(n)) for t, n in doc["server"].get("screen_frames", [])]
    pictures = [(float(t), str(h)) for t, h in doc["server"].get("screen_areas", [])]
    changes = [tuple(c) for c in doc["server"]["screen_changes"]]
    if marks:
        shown, how = count_marked_frames(marks, *windows[0]), "frame marks"
    elif pictures:
        shown, how = count_pictures(pictures, *windows[0]), "pictures"
    elif changes:
        shown, how = count_frames(changes, area, *windows[0], gap), "damage bursts"
    else:
        shown, how = None, None
    t_play = play["latency_ms"] / 1e3
    t_ref = ref["latency_ms"] / 1e3
    row = {
        "platform": info["platform"],
        "env": env,
        "operation": "video",
        "quality": video_quality(play["bytes_s2c"], t_play, v.fps, ref["bytes_s2c"], t_ref, v.ref_fps),
        "playback_s": t_play,
        "bytes": int(play["bytes_s2c"]),
        "reference_playback_s": t_ref,
        "reference_bytes": int(ref["bytes_s2c"]),
        "frames_displayed": shown,
        "frames_counted_by": how,
        "fps_displayed": (shown / t_play) if shown and t_play > 0 else None,
        "player_frames": records[0].get("frames_shown"),
        "player_dropped": records[0].get("frames_dropped"),
        # Stopped at play_limit_s: the figures cover the part played (records of runs from
        # before 2026-11-27 have no such field: their plays always ended).
        "truncated": bool(records[0].get("truncated", False)),
        "reference_truncated": bool(records[1].get("truncated", False)),
    }
    row = {k: (None if isinstance(x, float) and not np.isfinite(x) else x) for k, x in row.items()}
    (run_dir / "video.json").write_text(json.dumps(row, indent=1, default=float) + "\n")
    return row

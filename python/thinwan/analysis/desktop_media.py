"""Web and video benchmark results (Lai and Nieh 2006, "Benchmarks"; pure: tables in,
tables out).

A web run is 2 passes over the pages, one click per page; :func:`attribute` (in
``desktop_ops``) gives each click its latency and bytes, and :func:`web_summary` makes
the per-pass averages. A video run plays the clip once at its frame rate and once slowed
down (the reference, where no frame can be merged or dropped); :func:`video_quality` is
the source's formula and :func:`count_frames` counts the frames the client's screen
showed (from the screen watcher's change reports).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["video_quality", "count_frames", "count_pictures", "count_marked_frames", "web_summary", "WEB_KEYS"]

WEB_KEYS = ["platform", "env", "pass"]


def video_quality(
    bytes_play: float, seconds_play: float, fps: float, bytes_ref: float, seconds_ref: float, ref_fps: float
) -> float:
    """The source's video quality:

    ``(data(fps) / time(fps) / fps) / (data(ref) / time(ref) / ref_fps)``

    — the data the client received per frame it should have shown, relative to the
    reference run's (played so slowly that every frame is delivered). 1 = every frame
    arrived in full; 0.5 = half the frames' data (frames merged, dropped or degraded).
    Data counts server→client bytes; times are playback times at the client."""
    if min(seconds_play, seconds_ref, fps, ref_fps) <= 0 or bytes_ref <= 0:
        return float("nan")
    return (bytes_play / seconds_play / fps) / (bytes_ref / seconds_ref / ref_fps)


def count_frames(
    changes: Sequence[tuple[float, int, int, int, int]],
    area: tuple[int, int, int, int],
    t_from: float,
    t_to: float,
    gap_s: float,
) -> int:
    """Frames the client's screen showed inside ``area`` (x, y, w, h) between ``t_from``
    and ``t_to``: change reports grouped into bursts, a new frame after ``gap_s`` of no
    change (a platform draws one frame as a run of rectangles microseconds apart; at 24
    fps frames are 41.7 ms apart, so half that separates them)."""
    if not changes:
        return 0
    ax, ay, aw, ah = area
    c = np.array(changes, dtype=float)
    inside = (c[:, 1] < ax + aw) & (c[:, 1] + c[:, 3] > ax) & (c[:, 2] < ay + ah) & (c[:, 2] + c[:, 4] > ay)
    t = np.sort(c[inside & (c[:, 0] >= t_from) & (c[:, 0] < t_to), 0])
    if not len(t):
        return 0
    return int(1 + (np.diff(t) > gap_s).sum())


def count_pictures(areas: Sequence[tuple[float, str]], t_from: float, t_to: float) -> int:
    """Frames the client's screen showed, from the screen watcher's pictures of the watched
    area (``(t, hash)`` once each drawing has settled): how many times, between
    ``t_from`` and ``t_to``, the area showed a picture other than the one before — a frame
    drawn in several pieces with pauses between them still counts once per new picture,
    and a repaint of the same pixels not at all."""
    prev = None
    n = 0
    for t, h in sorted(areas):
        if t < t_from:
            prev = h
        elif t < t_to:
            if h != prev:
                n += 1
            prev = h
    return n


def count_marked_frames(frames: Sequence[tuple[float, int]], t_from: float, t_to: float) -> int:
    """Frames the client's screen showed between ``t_from`` and ``t_to``: the distinct
    frame numbers read from the clip's frame marks (``(t, n)``, n = -1 when no mark was
    readable). A frame drawn in pieces counts once, a frame never shown not at all; the
    first frame, on screen before the play started (paused), counts if still shown."""
    return len({n for t, n in frames if t_from <= t < t_to and n >= 0})


def web_summary(pages: pd.DataFrame) -> pd.DataFrame:
    """Per platform × env × pass: mean page latency, data per page (both directions and
    server→client), pages with a latency, from one row per page load (columns
    ``platform``, ``env``, ``pass``, ``latency_ms``, ``bytes_s2c``, ``bytes_c2s``)."""
    p = pages.assign(bytes_total=pages["bytes_s2c"] + pages["bytes_c2s"])
    ok = p.dropna(subset=["latency_ms"])
    lat = ok.groupby(WEB_KEYS, sort=False)["latency_ms"].agg(["mean", "median", "max", "size"])
    data = p.groupby(WEB_KEYS, sort=False)[["bytes_total", "bytes_s2c"]].mean()
    out = lat.join(data, how="outer").reset_index()
    return out.rename(
        columns={
            "mean": "latency_ms_mean",
            "median": "latency_ms_median",
            "max": "latency_ms_max",
            "size": "n",
            "bytes_total": "bytes_per_page",
            "bytes_s2c": "bytes_s2c_per_page",
        }
    )

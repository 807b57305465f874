"""The web and video sections of ``thinwan desktop run``'s report (docs/desktop.md "Web
and video"): page latency and data per page per platform and environment, the
distribution of page latencies, video quality, and one timeline per platform of the video
play (bytes per 100 ms each way), which shows how the platform paces updates."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .figures import PALETTE, ccdf_trace, finite, grid_layout, panel_title, png_figure

__all__ = ["media_sections"]


def media_sections(out: Path, doc: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """HTML parts and figures (by element name) for the web and video results of ``doc``."""
    parts: list[str] = []
    figs: dict[str, Any] = {}
    envs = list(doc["envs"])
    web = pd.DataFrame([r for r in doc["results"] if r.get("operation") == "web"])
    if len(web):
        parts.append("<h2>Web</h2>")
        w = doc.get("web", {})
        if w:
            first, n = w.get("first_page", 1), w["pages"]
            slice_note = f" (a slice: pages {first}–{first + n - 1})" if first != 1 else ""
            parts.append(f"<p>{n} pages{slice_note}, {w['passes']} passes (seed {w['seed']}).</p>")
        parts.append(f"<pre>{html.escape(web_table(web))}</pre>")
        for check in doc.get("checks", {}).get("web_slow_motion", []):
            parts.append(
                f"<p>Slow motion vs no pauses ({html.escape(check['platform'])}, {html.escape(check['env'])}): "
                f"{check['bytes_slow_motion'] / 1e6:.2f} MB vs {check['bytes_no_pause'] / 1e6:.2f} MB, "
                f"ratio {check['ratio']:.3f} — {'within' if check['pass'] else 'NOT within'} 5 %.</p>"
            )
        figs["web-bars"] = _bars(web, envs, "pass", "latency_ms_mean", "Mean page latency (ms)", "pass {}")
        figs["web-data"] = _bars(web, envs, "pass", "bytes_per_page", "Data per page (bytes, both ways)", "pass {}")
        parts.append('<div class="plot" id="fig-web-bars"></div><div class="plot" id="fig-web-data"></div>')
        pages_file = out / "web-pages.parquet"
        if pages_file.exists():
            fig = _page_ccdf(pd.read_parquet(pages_file), envs)
            if fig:
                figs["web-ccdf"] = fig
                parts.append(f'<div class="plot" style="height:{fig["layout"]["height"]}px" id="fig-web-ccdf"></div>')
        parts.append("<h3>The client's screen after the last page</h3>" + _shots(out, web, "web", None))
    video = pd.DataFrame([r for r in doc["results"] if r.get("operation") == "video"])
    if len(video):
        video = video.assign(play="24 fps")
        parts.append("<h2>Video</h2>")
        parts.append(f"<pre>{html.escape(video_table(video))}</pre>")
        figs["video-bars"] = _bars(video, envs, "play", "quality", "Video quality (1 = every frame's data)", "{}")
        parts.append('<div class="plot" id="fig-video-bars"></div>')
        fig = _video_timelines(out, video, envs)
        if fig:
            figs["video-tl"] = fig
            parts.append(f'<div class="plot" style="height:{fig["layout"]["height"]}px" id="fig-video-tl"></div>')
        d = doc.get("desktop", {})
        x, y = d.get("app_x", 64), d.get("app_y", 64)
        box = (x, y, x + int(doc.get("video", {}).get("width", 352)), y + int(doc.get("video", {}).get("height", 240)))
        parts.append("<h3>The client's screen at the end of the 24 fps play</h3>" + _shots(out, video, "video", box))
    durations = doc.get("durations", [])
    if durations:
        parts.append(
            "<h3>Run time per cell</h3><p>How long each benchmark took on one platform in one environment, "
            "against its floor: the time the display itself took for what was measured (the page latencies; "
            "the two plays).</p>"
        )
        parts.append(f"<pre>{html.escape(durations_table(durations))}</pre>")
    return parts, figs


def durations_table(durations: Sequence[Mapping[str, Any]]) -> str:
    head = f"{'platform':<10} {'env':<17} {'benchmark':<9} {'run min':>8} {'floor min':>9} {'run/floor':>9}"
    lines = [head, "-" * len(head)]
    for d in durations:
        run, floor = d.get("run_s"), d["updates_s"]
        run_min = f"{run / 60:.1f}" if run is not None else "—"
        ratio = f"{run / floor:.2f}" if run is not None and floor > 0 else "—"
        lines.append(
            f"{d['platform']:<10} {d['env']:<17} {d['operation']:<9} {run_min:>8} {floor / 60:>9.1f} {ratio:>9}"
        )
    return "\n".join(lines)


def _shots(out: Path, rows: pd.DataFrame, name: str, box: tuple[int, int, int, int] | None) -> str:
    """``<platform>/<env>/<name>/<name>.png`` of every platform × env, embedded."""
    figs = []
    for p, env in dict.fromkeys(zip(rows["platform"], rows["env"])):
        path = out / p / env / name / f"{name}.png"
        if path.exists():
            figs.append(png_figure(path, f"{p} · {env}", box, width=360 if box is None else box[2] - box[0]))
    return "<div>" + "".join(figs) + "</div>"


def web_table(web: pd.DataFrame) -> str:
    head = f"{'platform':<10} {'env':<17} {'pass':>4} {'mean ms':>9} {'median':>8} {'max':>8} {'KB/page':>9} {'n':>4}"
    lines = [head, "-" * len(head)]
    for r in web.itertuples(index=False):
        lines.append(
            f"{r.platform:<10} {r.env:<17} {r[web.columns.get_loc('pass')]:>4} {r.latency_ms_mean:>9.1f} "
            f"{r.latency_ms_median:>8.1f} {r.latency_ms_max:>8.1f} {r.bytes_per_page / 1e3:>9.1f} {int(r.n):>4}"
        )
    return "\n".join(lines)


def video_table(video: pd.DataFrame) -> str:
    head = f"{'platform':<10} {'env':<17} {'quality':>8} {'play s':>7} {'MB':>7} {'ref MB/frame':>12} {'fps shown':>9}"
    lines = [head, "-" * len(head)]
    for r in video.itertuples(index=False):
        ref = r.reference_bytes / 1e6 / max(r.reference_playback_s or 1, 1e-9)
        fps = f"{r.fps_displayed:.1f}" if r.fps_displayed is not None and np.isfinite(r.fps_displayed) else "—"
        q = f"{r.quality:.3f}" if r.quality is not None else "—"
        cut = "*" if getattr(r, "truncated", False) is True else " "
        lines.append(
            f"{r.platform:<10} {r.env:<17} {q:>8} {r.playback_s:>6.2f}{cut} {r.bytes / 1e6:>7.2f} {ref:>12.3f} {fps:>9}"
        )
    if "truncated" in video and video["truncated"].eq(True).any():
        lines.append("* the play did not end within its limit: stopped there, figures cover the part played")
    return "\n".join(lines)


def _bars(
    rows: pd.DataFrame, envs: Sequence[str], panel_key: str, value: str, title: str, label: str
) -> dict[str, Any]:
    """Grouped bars: one panel per ``panel_key`` value, platforms on x, one bar per env."""
    panels = list(dict.fromkeys(rows[panel_key]))
    layout = grid_layout(title, 1, len(panels), gap_x=0.06)
    layout["barmode"] = "group"
    data = []
    for k, pv in enumerate(panels, start=1):
        sub = rows[rows[panel_key] == pv]
        platforms = list(dict.fromkeys(sub["platform"]))
        suffix = "" if k == 1 else str(k)
        for i, env in enumerate(envs):
            e = sub[sub["env"] == env].set_index("platform").reindex(platforms)
            data.append(
                {
                    "type": "bar",
                    "name": env,
                    "legendgroup": env,
                    "showlegend": k == 1,
                    "x": platforms,
                    "y": finite(pd.to_numeric(e[value], errors="coerce")),
                    "marker": {"color": PALETTE[i % len(PALETTE)]},
                    "xaxis": f"x{suffix}",
                    "yaxis": f"y{suffix}",
                }
            )
        layout["annotations"].append(panel_title(f"<b>{label.format(pv)}</b>", k))
        layout[f"yaxis{suffix}"]["rangemode"] = "tozero"
    return {"data": data, "layout": layout}


def _page_ccdf(pages: pd.DataFrame, envs: Sequence[str]) -> dict[str, Any] | None:
    """Per environment, the CCDF of page latency per platform (both passes)."""
    envs = [e for e in envs if (pages["env"] == e).any()]
    if not envs:
        return None
    cols = min(3, len(envs))
    rows = -(-len(envs) // cols)
    layout = grid_layout("Page latency: P(latency > x)", rows, cols)
    data = []
    platforms = list(dict.fromkeys(pages["platform"]))
    for k, env in enumerate(envs, start=1):
        suffix = "" if k == 1 else str(k)
        for i, p in enumerate(platforms):
            sel = pages[(pages["env"] == env) & (pages["platform"] == p)]["latency_ms"].dropna()
            t = ccdf_trace(sel / 1e3, p, PALETTE[i % len(PALETTE)])
            if t:
                t |= {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}", "legendgroup": p, "showlegend": k == 1}
                data.append(t)
        layout[f"xaxis{suffix}"] |= {"type": "log", "title": {"text": "page latency (ms)"}}
        layout[f"yaxis{suffix}"] |= {"type": "log"}
        layout["annotations"].append(panel_title(f"<b>{env}</b>", k))
    layout["height"] = 330 * rows
    return {"data": data, "layout": layout}


def _video_timelines(out: Path, video: pd.DataFrame, envs: Sequence[str]) -> dict[str, Any] | None:
    """One row per platform, one column per environment: IP bytes per 100 ms of the
    24 fps play, server→client up and client→server down."""
    platforms = list(dict.fromkeys(video["platform"]))
    envs = [e for e in envs if (video["env"] == e).any()]
    layout = grid_layout(
        "Video play: bytes per 100 ms (server→client up, client→server down)", len(platforms), len(envs)
    )
    data: list[dict[str, Any]] = []
    for pi, p in enumerate(platforms):
        for ei, env in enumerate(envs):
            k = pi * len(envs) + ei + 1
            f = out / p / env / "video" / "video-timeline.parquet"
            if not f.exists():
                continue
            tl = pd.read_parquet(f)
            suffix = "" if k == 1 else str(k)
            for col, sign, name, color in (
                ("bytes_s2c", 1, "server→client", PALETTE[0]),
                ("bytes_c2s", -1, "client→server", PALETTE[3]),
            ):
                data.append(
                    {
                        "type": "bar",
                        "name": name,
                        "legendgroup": name,
                        "showlegend": k == 1,
                        "x": finite(tl["t"]),
                        "y": finite(tl[col] * sign),
                        "marker": {"color": color},
                        "xaxis": f"x{suffix}",
                        "yaxis": f"y{suffix}",
                    }
                )
            layout["annotations"].append(panel_title(f"{p} · {env}", k))
    if not data:
        return None
    layout["barmode"] = "relative"
    layout["bargap"] = 0
    layout["height"] = max(320, 220 * len(platforms))
    return {"data": data, "layout": layout}

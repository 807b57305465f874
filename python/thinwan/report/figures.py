"""The one figure stack of every report: Plotly figure specs (JSON), drawn in the
browser by plotly.js, which each page embeds, so a page is one self-contained file that
can be mailed around and whose plots zoom (log-scale CCDF tails and long time series
need it). Building a spec takes milliseconds; drawing the same figures with matplotlib
took most of a one-run command's time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.metrics import ccdf

__all__ = [
    "CCDF_POINTS",
    "PALETTE",
    "ccdf_trace",
    "curve_trace",
    "line",
    "ccdf_layout",
    "threshold_lines",
    "grid_layout",
    "panel_title",
    "panel_note",
    "finite",
    "plotly_js",
    "script_json",
    "PLOT_SCRIPT",
]

# Points kept per CCDF curve: enough for a smooth line, few enough for a quick page.
CCDF_POINTS = 2000
# matplotlib's "tab10" colours, the ones of every earlier thinwan figure (C0, C1, …).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
# Draws every figure of a page's FIGURES object into the element "fig-<name>".
PLOT_SCRIPT = """
for (const [name, fig] of Object.entries(FIGURES)) {
  Plotly.newPlot("fig-" + name, fig.data, fig.layout, {responsive: true, displaylogo: false});
}
"""


def ccdf_trace(seconds: pd.Series, label: str, color: str) -> dict[str, Any] | None:
    """The CCDF of ``seconds`` in ms as a step line; None if nothing is > 0 and finite."""
    x, p = ccdf(seconds.to_numpy(dtype=float) * 1000.0)
    # A log x axis cannot show 0 ms (e.g. no retransmission), nor ∞ (never read; it stays
    # in the total, so the curve levels off at the share of such messages).
    shown = (x > 0) & np.isfinite(x)
    if not shown.any():
        return None
    first = int(np.argmax(shown))
    # Start with the drop at the first shown value, from P(X ≥ x) to P(X > x); p = 0 at
    # the end is clipped by the log axis, so the last drop runs off the bottom.
    x = np.concatenate([x[first : first + 1], x[shown]])
    p = np.concatenate([[p[first - 1] if first else 1.0], p[shown]])
    if x.size > CCDF_POINTS:
        # Evenly spaced in log p: dense in the tail, where the interesting part is.
        idx = np.sort(x.size - np.unique(np.geomspace(1, x.size, CCDF_POINTS).astype(int)))
        x, p = x[idx], p[idx]
    p = np.where(p > 0, p, np.nan)  # log y: leave the final zero out
    return {
        "type": "scattergl",
        "mode": "lines",
        "name": label,
        "x": finite(x),
        "y": finite(p),
        "line": {"shape": "hv", "color": color, "width": 1.5},
    }


def line(x: pd.Series, y: pd.Series, name: str, color: str, step: bool = False, axis: int = 1) -> dict[str, Any]:
    return {
        "type": "scattergl",
        "mode": "lines",
        "name": name,
        "x": finite(x),
        "y": finite(y),
        "xaxis": "x",
        "yaxis": "y" if axis == 1 else f"y{axis}",
        "line": {"color": color, "width": 1, **({"shape": "hv"} if step else {})},
    }


def ccdf_layout(title: str, thresholds_ms: Sequence[float], panels: int, cols: int = 1) -> dict[str, Any]:
    rows = -(-panels // cols)
    layout: dict[str, Any] = {
        "title": {"text": title},
        "margin": {"t": 60, "b": 45},
        "annotations": [],
        "shapes": [],
        "legend": {"orientation": "h", "y": -0.12},
    }
    gap_x, gap_y = 0.06, 0.2
    for i in range(1, panels + 1):
        r, c = divmod(i - 1, cols)
        x0 = c / cols + (gap_x / 2 if c else 0)
        x1 = (c + 1) / cols - (gap_x / 2 if c < cols - 1 else 0)
        y1 = 1 - r / rows - (gap_y / 2 if r else 0)
        y0 = 1 - (r + 1) / rows + (gap_y / 2 if r < rows - 1 else 0)
        suffix = "" if i == 1 else str(i)
        layout[f"xaxis{suffix}"] = {
            "type": "log",
            "domain": [x0, x1],
            "anchor": f"y{suffix}",
            "title": {"text": "delay (ms)"},
            "exponentformat": "power",
        }
        layout[f"yaxis{suffix}"] = {
            "type": "log",
            "domain": [y0, y1],
            "anchor": f"x{suffix}",
            "title": {"text": "P(delay > x)"},
            "exponentformat": "power",
        }
        threshold_lines(layout, suffix, thresholds_ms)
    return layout


def threshold_lines(
    layout: dict[str, Any], suffix: str, thresholds_ms: Sequence[float], color: str = "gray", dash: str = "dash"
) -> None:
    """The usability thresholds as dashed vertical lines on the panel of axes ``suffix``."""
    for t in thresholds_ms:
        if t > 0:  # a WAN delay ≥ the threshold leaves nothing to draw
            layout["shapes"].append(
                {
                    "type": "line",
                    "xref": f"x{suffix}",
                    "x0": t,
                    "x1": t,
                    "yref": f"y{suffix} domain",
                    "y0": 0,
                    "y1": 1,
                    "line": {"color": color, "dash": dash, "width": 1},
                }
            )


def panel_title(text: str, i: int) -> dict[str, Any]:
    suffix = "" if i == 1 else str(i)
    return {
        "text": text,
        "showarrow": False,
        "xref": f"x{suffix} domain",
        "yref": f"y{suffix} domain",
        "x": 0.5,
        "y": 1.0,
        "xanchor": "center",
        "yanchor": "bottom",
        "font": {"size": 13},
    }


def panel_note(text: str, i: int) -> dict[str, Any]:
    suffix = "" if i == 1 else str(i)
    return {
        "text": text,
        "showarrow": False,
        "xref": f"x{suffix} domain",
        "yref": f"y{suffix} domain",
        "x": 0.5,
        "y": 0.5,
        "font": {"color": "gray"},
    }


def finite(values: Any) -> list[float | None]:
    """JSON numbers for plotly.js: NaN and ±∞ become null (a gap in the line)."""
    a = np.asarray(values, dtype=float)
    return [v if math.isfinite(v) else None for v in a.tolist()]


def plotly_js() -> str:
    """plotly.js as shipped inside the plotly Python package (no network needed)."""
    from importlib.resources import files

    return (files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def script_json(obj: Any) -> str:
    """JSON safe to place inside a <script> element."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def curve_trace(x_ms: np.ndarray, p: np.ndarray, label: str, color: str, **extra: Any) -> dict[str, Any] | None:
    """A CCDF already on a grid (``p`` at each ``x_ms``) as a line; None if nothing > 0."""
    shown = np.asarray(p) > 0
    if not shown.any():
        return None
    return {
        "type": "scatter",
        "mode": "lines",
        "name": label,
        "x": finite(np.asarray(x_ms)[shown]),
        "y": finite(np.asarray(p)[shown]),
        "line": {"color": color, "width": 1.5},
        **extra,
    }


def grid_layout(
    title: str, rows: int, cols: int, gap_x: float = 0.06, gap_y: float = 0.12, shared_x: bool = False
) -> dict[str, Any]:
    """A layout of ``rows × cols`` panels, numbered row by row from 1 (axes ``x``/``y``,
    ``x2``/``y2``, …); callers fill in axis types and titles."""
    layout: dict[str, Any] = {"title": {"text": title}, "margin": {"t": 70, "b": 45}, "annotations": [], "shapes": []}
    for i in range(1, rows * cols + 1):
        r, c = divmod(i - 1, cols)
        x0 = c / cols + (gap_x / 2 if c else 0)
        x1 = (c + 1) / cols - (gap_x / 2 if c < cols - 1 else 0)
        y1 = 1 - r / rows - (gap_y / 2 if r else 0)
        y0 = 1 - (r + 1) / rows + (gap_y / 2 if r < rows - 1 else 0)
        suffix = "" if i == 1 else str(i)
        layout[f"xaxis{suffix}"] = {"domain": [x0, x1], "anchor": f"y{suffix}"}
        if shared_x and i > 1:
            layout[f"xaxis{suffix}"]["matches"] = "x"
        layout[f"yaxis{suffix}"] = {"domain": [y0, y1], "anchor": f"x{suffix}"}
    return layout


def png_figure(path: Any, caption: str, box: tuple[int, int, int, int] | None = None, width: int = 240) -> str:
    """A screenshot as a ``<figure>`` with the PNG embedded (``box``: crop to it first)."""
    import base64
    import html
    import io

    from PIL import Image

    with Image.open(path) as im:
        if box is not None and im.width >= box[2] and im.height >= box[3]:
            im = im.crop(box)
        buf = io.BytesIO()
        im.save(buf, "PNG")
    b64 = base64.b64encode(buf.getvalue()).decode()
    return (
        f'<figure><img src="data:image/png;base64,{b64}" width="{width}" alt="{html.escape(caption)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )

"""The picture of a timeout's anatomy (:class:`~thinwan.analysis.anatomy.Anatomy`): four
panels on one time axis — sequence numbers (sent, retransmitted, arrived, dropped, the
cumulative ACK at the server), cwnd and ssthresh, RTT samples / SRTT / RTTVAR / RTO, and
the bottleneck queue — as a self-contained HTML page (Plotly, :mod:`.figures`)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.anatomy import ACK_ARRIVED, DATA_ARRIVED, DATA_SENT, DROPPED, TIMEOUT, Anatomy
from ..records.schema import write_text_atomic
from .figures import PALETTE, PLOT_SCRIPT, finite, grid_layout, plotly_js, script_json

__all__ = ["anatomy_figure", "anatomy_html", "write_anatomy_page"]


def anatomy_figure(a: Anatomy) -> dict[str, Any]:
    """The four-panel figure (a Plotly spec)."""
    title = f"Anatomy of a timeout: {a.scenario.name}, run {a.run}, connection {a.conn}, t = {a.t_timeout:.3f} s"
    layout = grid_layout(title, 4, 1, gap_y=0.05, shared_x=True)
    layout.update(height=1000, legend={"orientation": "h", "y": -0.05})
    p = a.packets
    data_rows = p["event"] != TIMEOUT
    base = int(p.loc[data_rows, "seq"].min()) if data_rows.any() else a.seq

    def kb(s: Any) -> list[float | None]:
        return finite((s.astype(float) - base) / 1000.0)

    def points(rows: Any, y: Any, name: str, color: str, size: int, symbol: str = "circle") -> dict[str, Any]:
        return {
            "type": "scattergl",
            "mode": "markers",
            "name": name,
            "x": finite(rows["t"]),
            "y": y,
            "marker": {"color": color, "size": size, "symbol": symbol},
        }

    def step(x: Any, y: Any, name: str, color: str, axis: int, dash: str = "solid") -> dict[str, Any]:
        return {
            "type": "scattergl",
            "mode": "lines",
            "name": name,
            "x": finite(x),
            "y": finite(y),
            "line": {"shape": "hv", "color": color, "width": 1, "dash": dash},
            "xaxis": "x" if axis == 1 else f"x{axis}",
            "yaxis": "y" if axis == 1 else f"y{axis}",
        }

    sent = p.loc[p["event"] == DATA_SENT]
    data = []
    for retx, color, name in ((0, PALETTE[0], "sent"), (1, PALETTE[3], "retransmitted")):
        part = sent.loc[sent["retx"] == retx]
        data.append(points(part, kb(part["seq"]), name, color, 4))
    arrived = p.loc[p["event"] == DATA_ARRIVED]
    data.append(points(arrived, kb(arrived["seq"]), "arrived at client", PALETTE[2], 3))
    dropped = p.loc[(p["event"] == DROPPED) & (p["len"] > 0)]
    data.append(points(dropped, kb(dropped["seq"]), "dropped", "black", 9, "x"))
    acks = p.loc[p["event"] == ACK_ARRIVED]
    data.append(step(acks["t"], (acks["seq"].astype(float) - base) / 1000.0, "cum. ACK at server", PALETTE[1], 1))
    tr = a.trace
    mss = a.scenario.tcp.mss
    data.append(step(tr["t"], tr["cwnd"] / mss, "cwnd", PALETTE[0], 2))
    data.append(step(tr["t"], tr["ssthresh"].where(np.isfinite(tr["ssthresh"])) / mss, "ssthresh", PALETTE[1], 2))
    for col, color, dash in (
        ("rto", PALETTE[2], "solid"),
        ("srtt", PALETTE[3], "solid"),
        ("rttvar", PALETTE[4], "dot"),
    ):
        data.append(step(tr["t"], tr[col] * 1000.0, col.upper(), color, 3, dash))
    rtt = points(tr, finite(tr["rtt"] * 1000.0), "RTT sample", "gray", 4)
    rtt.update(xaxis="x3", yaxis="y3")
    data.append(rtt)
    queue = step(a.queue["t"], a.queue["bytes"] / 1000.0, "bottleneck queue", PALETTE[0], 4)
    queue["line"].pop("shape")
    data.append(queue)
    labels = (f"sequence − {base} (kB)", "segments", "ms", "bottleneck queue (kB)")
    for i, text in enumerate(labels, start=1):
        suffix = "" if i == 1 else str(i)
        layout[f"yaxis{suffix}"]["title"] = {"text": text}
        layout[f"xaxis{suffix}"].update(range=list(a.window), showticklabels=i == 4)
        layout["shapes"].append(
            {
                "type": "line",
                "xref": f"x{suffix}",
                "x0": a.t_timeout,
                "x1": a.t_timeout,
                "yref": f"y{suffix} domain",
                "y0": 0,
                "y1": 1,
                "line": {"color": PALETTE[3], "dash": "dash", "width": 1},
            }
        )
    layout["xaxis4"]["title"] = {"text": "time (s)"}
    return {"data": data, "layout": layout}


def anatomy_html(a: Anatomy) -> str:
    """A self-contained page: the explanation in words and the picture."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f"<title>thinwan anatomy: {html.escape(a.scenario.name)}</title>\n"
        "<style>body { font-family: system-ui, sans-serif; max-width: 1300px; margin: 2em auto; padding: 0 1em; }"
        " pre { background: #f6f6f6; padding: 0.8em; } .plot { width: 100%; }</style></head>\n<body>\n"
        f"<pre>{html.escape(a.explain())}</pre>\n"
        '<div class="plot" id="fig-anatomy"></div>\n'
        f"<script>{plotly_js()}</script>\n"
        f"<script>\nconst FIGURES = {script_json({'anatomy': anatomy_figure(a)})};\n{PLOT_SCRIPT}</script>\n"
        "</body></html>\n"
    )


def write_anatomy_page(path: str | Path, a: Anatomy) -> Path:
    """Write the page to ``path`` (atomically)."""
    return write_text_atomic(path, anatomy_html(a))

"""``thinwan analyze``'s output: the terminal summary and the HTML report (the source's
inter-arrival histogram with the gap threshold, transition probabilities, gaps by
transition, sizes, block lengths, and the per-connection table)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..records.meta import short_revision
from .figures import PALETTE, PLOT_SCRIPT, finite, grid_layout, plotly_js, script_json

__all__ = ["analyze_html", "summary_text"]

# Rows of the per-connection table in the HTML page (all are in flows.parquet).
TABLE_ROWS = 500


def _f(v: Any, spec: str = ".3g") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return format(v, spec)


def summary_text(res: Mapping[str, Any], model: Mapping[str, float], out: str | None) -> str:
    """The terminal summary: what was read, the model, where the records went."""
    tr = res["pooled"]["transitions"]
    fl = res["pooled"]["flows"]
    lines = [
        f"{res['file']} ({res['format']}): {res['packets']} packets, {res['tcp']} TCP, {res['matched']} analysed; "
        f"{len(res['flows'])} connections; gap rule {res['gap_ms']:g} ms",
        f"flows: {fl['interactive']} interactive, {fl['bulk']} bulk; transitions II {tr['ii']}, IB {tr['ib']}, "
        f"BI {tr['bi']}, BB {tr['bb']}",
        "",
        "[traffic] point estimates:",
    ]
    width = max(len(k) for k in model)
    lines += [f"  {k.ljust(width)} = {_f(v, '.4g')}" for k, v in model.items()]
    retx = sum(f["retrans_s2c"] + f["retrans_c2s"] for f in res["flows"])
    ooo = sum(f["ooo_s2c"] + f["ooo_c2s"] for f in res["flows"])
    lines += ["", f"retransmitted segments: {retx}, out of order: {ooo}"]
    if out:
        lines.append(f"records and report: {out}")
    return "\n".join(lines)


def analyze_html(res: Mapping[str, Any], model: Mapping[str, float], meta: Mapping[str, Any]) -> str:
    """The self-contained HTML report."""
    pooled = res["pooled"]
    edges = np.asarray(pooled["bin_edges_s"])
    gap_s = res["gap_ms"] / 1e3
    figs: dict[str, Any] = {
        "iat": iat_figure(pooled, edges, gap_s),
        "gaps": gaps_figure(pooled, edges),
        "sizes": sizes_figure(pooled),
        "blocks": blocks_figure(pooled),
    }
    title = f"thinwan analyze: {meta['file_name']}"
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(str(res['file']))} ({res['format']}): {res['packets']} packets, {res['tcp']} TCP, "
        f"{res['matched']} analysed ({html.escape(meta['selection'])}); {len(res['flows'])} connections. "
        f"Gap rule: response packets less than {res['gap_ms']:g} ms apart form one flow. "
        f"thinwan {html.escape(str(meta['version']))} ({html.escape(short_revision(str(meta['git_rev'])))}), "
        f"{html.escape(str(meta['created']))}.</p>",
        "<h2>Inter-arrival of request and response packets</h2>"
        "<p>Consecutive payload packets of one connection, each direction (retransmissions left out). The dashed "
        "line is the gap threshold: pick it in the trough between the packets written back to back (left) and "
        "the think times (right); <code>--gap-ms</code> moves it.</p>",
        '<div class="plot" id="fig-iat"></div>',
        "<h2>The two-state model</h2>",
        transition_table(pooled["transitions"]),
        model_table(model),
        "<h2>Gaps by transition</h2><p>Start-to-start gap between consecutive flows, by the kinds of the two; "
        "and the gap between consecutive packets of one block.</p>",
        '<div class="plot" id="fig-gaps"></div>',
        "<h2>Sizes and block lengths</h2>",
        '<div class="plot" id="fig-sizes"></div>',
        '<div class="plot" id="fig-blocks"></div>',
        "<h2>Connections</h2>",
        flows_table(res["flows"]),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n"
        "<style>body { font-family: system-ui, sans-serif; max-width: 1300px; margin: 2em auto; padding: 0 1em; }"
        " .plot { width: 100%; height: 420px; } table { border-collapse: collapse; margin: 0.5em 0 1em; }"
        " td, th { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; font-size: 0.9em; }"
        " th { background: #f0f0f0; }</style></head>\n<body>\n"
        + "\n".join(parts)
        + f"\n<script>{plotly_js()}</script>\n"
        f"<script>\nconst FIGURES = {script_json(figs)};\n{PLOT_SCRIPT}</script>\n"
        "</body></html>\n"
    )


def _centres(edges: np.ndarray) -> np.ndarray:
    return np.sqrt(edges[:-1] * edges[1:])


def _hist_trace(h: Mapping[str, Any], edges: np.ndarray, name: str, color: str, axis: str = "") -> dict[str, Any]:
    """Fraction of the histogram's values per bin, at the bins' geometric centres."""
    c = np.asarray(h["counts"], dtype=float)
    n = c.sum()
    frac = c / n if n else c
    keep = np.nonzero(c)[0]
    lo, hi = (keep.min(), keep.max() + 1) if len(keep) else (0, 0)
    return {
        "type": "scatter",
        "mode": "lines",
        "line": {"shape": "hvh", "color": color, "width": 1.5},
        "name": f"{name} (n = {int(n)})",
        "x": finite(_centres(edges)[lo:hi]),
        "y": finite(frac[lo:hi]),
        "xaxis": f"x{axis}",
        "yaxis": f"y{axis}",
    }


def iat_figure(pooled: Mapping[str, Any], edges: np.ndarray, gap_s: float) -> dict[str, Any]:
    g = pooled["gaps"]
    data = [
        _hist_trace(g["response"], edges, "response (server → client)", PALETTE[0]),
        _hist_trace(g["request"], edges, "request (client → server)", PALETTE[1]),
    ]
    layout = {
        "title": {"text": "Inter-arrival time, 20 bins per decade"},
        "xaxis": {"type": "log", "title": {"text": "seconds"}, "exponentformat": "power"},
        "yaxis": {"title": {"text": "fraction of inter-arrivals"}},
        "shapes": [
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": gap_s,
                "x1": gap_s,
                "y0": 0,
                "y1": 1,
                "line": {"dash": "dash", "color": "#444"},
            }
        ],
        "annotations": [
            {
                "x": math.log10(gap_s),
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "text": f"gap {gap_s * 1e3:g} ms",
                "showarrow": False,
                "xanchor": "left",
                "yanchor": "top",
            }
        ],
        "margin": {"t": 50, "b": 50},
    }
    return {"data": data, "layout": layout}


def gaps_figure(pooled: Mapping[str, Any], edges: np.ndarray) -> dict[str, Any]:
    g = pooled["gaps"]
    names = {"ii": "I → I", "ib": "I → B", "bi": "B → I", "bb": "B → B", "intra": "within a block"}
    data = [_hist_trace(g[k], edges, label, PALETTE[i]) for i, (k, label) in enumerate(names.items())]
    layout = {
        "title": {"text": "Gaps by transition (start to start) and within blocks"},
        "xaxis": {"type": "log", "title": {"text": "seconds"}, "exponentformat": "power"},
        "yaxis": {"title": {"text": "fraction"}},
        "margin": {"t": 50, "b": 50},
    }
    return {"data": data, "layout": layout}


def sizes_figure(pooled: Mapping[str, Any]) -> dict[str, Any]:
    """Payload per packet, in 16-byte bins, interactive and bulk side by side."""
    layout = grid_layout("Payload bytes per packet (16-byte bins)", 1, 2, gap_x=0.08)
    data = []
    for i, kind in enumerate(("interactive", "bulk"), start=1):
        c = np.asarray(pooled["sizes"][kind], dtype=float)
        n = c.sum()
        top = int(np.nonzero(c)[0].max()) + 1 if n else 16
        binned = np.add.reduceat(c[:top], np.arange(0, top, 16))
        suffix = "" if i == 1 else str(i)
        data.append(
            {
                "type": "bar",
                "name": f"{kind} (n = {int(n)})",
                "x": (np.arange(len(binned)) * 16 + 8).tolist(),
                "y": finite(binned / n if n else binned),
                "marker": {"color": PALETTE[i - 1]},
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
            }
        )
        layout[f"xaxis{suffix}"]["title"] = {"text": f"{kind}: bytes"}
        layout[f"yaxis{suffix}"]["title"] = {"text": "fraction of packets"}
    layout["height"] = 420
    return {"data": data, "layout": layout}


def blocks_figure(pooled: Mapping[str, Any]) -> dict[str, Any]:
    """Blocks per length (log–log: a heavy tail is a straight line)."""
    bl = pooled["block_lengths"]
    counts: dict[int, int] = {int(k): int(v) for k, v in bl["counts"].items()}
    for x in bl["overflow"]:
        counts[int(x)] = counts.get(int(x), 0) + 1
    xs = sorted(counts)
    n = sum(counts.values())
    ccdf = np.cumsum([counts[x] for x in reversed(xs)])[::-1] / n if n else np.array([])
    data = [
        {"type": "scatter", "mode": "markers", "name": "blocks of this length", "x": xs, "y": [counts[x] for x in xs]},
        {
            "type": "scatter",
            "mode": "lines",
            "line": {"shape": "hv"},
            "name": "P(length ≥ x)",
            "x": xs,
            "y": finite(ccdf),
            "yaxis": "y2",
        },
    ]
    layout = {
        "title": {"text": f"Block lengths ({n} blocks)"},
        "xaxis": {"type": "log", "title": {"text": "packets per block"}},
        "yaxis": {"type": "log", "title": {"text": "blocks"}},
        "yaxis2": {
            "type": "log",
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            "exponentformat": "power",
            "title": {"text": "P(length ≥ x)"},
        },
        "margin": {"t": 50, "b": 50},
    }
    return {"data": data, "layout": layout}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def transition_table(tr: Mapping[str, int]) -> str:
    """The chain's transition counts and probabilities (rows: from, columns: to)."""

    def row(a: str, b: str, name: str) -> list[str]:
        n = tr[a] + tr[b]
        return [
            name,
            f"{tr[a]} ({_f(tr[a] / n if n else math.nan, '.3f')})",
            f"{tr[b]} ({_f(tr[b] / n if n else math.nan, '.3f')})",
        ]

    return _table(
        ["from \\ to", "interactive", "bulk"],
        [row("ii", "ib", "interactive"), row("bi", "bb", "bulk")],
    )


def model_table(model: Mapping[str, float]) -> str:
    return _table(["[traffic] key", "value"], [[k, _f(v, ".4g")] for k, v in model.items()])


FLOW_COLUMNS = (
    ("id", "id"),
    ("client", None),
    ("server", None),
    ("by", "server_by"),
    ("end", "end"),
    ("s", None),
    ("pkts ↓", "packets_s2c"),
    ("pkts ↑", "packets_c2s"),
    ("bytes ↓", "bytes_s2c"),
    ("I", "flows_interactive"),
    ("B", "flows_bulk"),
    ("retx ↓", "retrans_s2c"),
    ("retx ↑", "retrans_c2s"),
    ("ooo ↓", "ooo_s2c"),
    ("ooo ↑", "ooo_c2s"),
    ("client half ms (med / p90)", None),
    ("server half ms (med / p90)", None),
)


def flows_table(flows: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for f in flows[:TABLE_ROWS]:
        r = []
        for _, key in FLOW_COLUMNS:
            if key is not None:
                r.append(str(f[key]))
        r.insert(1, f"{f['client_addr']}:{f['client_port']}")
        r.insert(2, f"{f['server_addr']}:{f['server_port']}")
        r.insert(5, f"{f['last_s'] - f['first_s']:.1f}")
        for half in ("client", "server"):
            r.append(f"{_f(f[f'rtt_{half}_median_ms'], '.2f')} / {_f(f[f'rtt_{half}_p90_ms'], '.2f')}")
        rows.append(r)
    note = (
        f"<p>The first {TABLE_ROWS} of {len(flows)} connections (all are in flows.parquet).</p>"
        if len(flows) > TABLE_ROWS
        else ""
    )
    return note + _table([h for h, _ in FLOW_COLUMNS], rows)

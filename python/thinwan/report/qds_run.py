"""The QDS section of the run report (issue 18, "Report"): per application type the
source's metrics (docs/scenario.md "Per-type metrics"), the RTT CCDF of each type against
its QT, what the control loop did over time (each flow's class, flows and rate per
class) and how often the classifier named a flow's type right.

Plotting only consumes results: the run summary's ``by_type`` (means over runs of
:func:`thinwan.analysis.by_type.by_type`) and the digests' ``packet_rtt``, ``qds_flows``
and ``qds_classes`` (:class:`~thinwan.analysis.digest.RunDigest`). A lab run of a
middlebox scenario (``thinwan lab run``, ``thinwan validate``) also carries the
simulator's side (``sim``: :func:`thinwan.execute.labruns.sim_companion`): the Table I
metrics of both substrates side by side, and the simulator's RTT CCDFs (dashed) over
the lab's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.aggregate import CCDF_GRID_S
from ..analysis.by_type import APP_NAMES
from ..analysis.digest import RunDigest
from ..analysis.qds import CONTROLLER_TYPES, confusion
from ..config.scenario import Scenario
from .figures import PALETTE, ccdf_layout, ccdf_trace, curve_trace, finite, grid_layout, panel_note, threshold_lines

__all__ = [
    "QDS_TITLES",
    "TYPE_COLORS",
    "qds_context",
    "type_rows",
    "side_by_side_rows",
    "ordered_types",
    "class_colors",
]

QDS_TITLES = {
    "rtt_ccdf": "CCDF of packet RTT per application type",
    "flow_classes": "Class of each flow over time",
    "class_load": "Flows and rate per class over time",
    "confusion": "Classifier confusion matrix",
}

# One colour per application type, the same in every QDS figure (run and sweep report).
TYPE_COLORS = {
    "video": PALETTE[3],
    "data": PALETTE[0],
    "thin-client": PALETTE[2],
    "game": PALETTE[4],
    "bulk": PALETTE[5],
    "pcap": PALETTE[6],
    "constant": PALETTE[7],
    "audio": PALETTE[1],
    "interactive": PALETTE[2],
}


def qds_context(
    scenario: Scenario,
    digests: Sequence[RunDigest],
    summary: Mapping[str, Any],
    sim: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the run page's QDS section shows: ``{"present": False}`` for a run without
    per-type records; otherwise the per-type table rows, figure specs (``figures``) and
    the texts around them. ``sim``: the simulator's side of a lab run (its ``by_type``
    and per-type ``rtt_ccdf``), shown next to the lab's."""
    table = summary.get("by_type") or {}
    if not table:
        return {"present": False, "figures": {}}
    figures: dict[str, Any] = {}
    packets = _concat(d.packet_rtt for d in digests)
    if not packets.empty:
        figures["qds_rtt_ccdf"] = _fig_rtt_ccdf(packets, table, (sim or {}).get("rtt_ccdf", {}))
    loop_run = next((d for d in digests if not d.qds_flows.empty), None)
    if loop_run is not None:
        figures["qds_flow_classes"] = _fig_flow_classes(loop_run.qds_flows)
        figures["qds_class_load"] = _fig_class_load(loop_run.qds_classes)
    flows = _concat(d.qds_flows for d in digests)
    oracle = scenario.qds.classifier == "oracle"
    classifier = None
    if not flows.empty:
        counts = confusion(flows)
        figures["qds_confusion"] = _fig_confusion(counts)
        classifier = {
            "accuracy": float(np.trace(counts.to_numpy())) / max(int(counts.to_numpy().sum()), 1),
            "rows": int(counts.to_numpy().sum()),
        }
    return {
        "present": True,
        "titles": QDS_TITLES,
        "rows": type_rows(table),
        "loop_run": loop_run.meta.get("run", "?") if loop_run is not None else None,
        "binned": loop_run is not None and len(_binned(loop_run.qds_classes)) < len(loop_run.qds_classes),
        "loop": scenario.queue.discipline == "qds",
        "oracle": oracle,
        "classifier": classifier,
        "variant": scenario.qds.variant,
        "alpha": scenario.qds.alpha,
        "beta": scenario.qds.beta,
        "figures": figures,
        "sim": None
        if sim is None
        else {"runs": sim.get("runs"), "seeds": sim.get("seeds"), "rows": side_by_side_rows(sim["by_type"], table)},
    }


def _concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """The non-empty frames one after the other; empty when there are none (a middlebox
    run without the QDS loop has per-packet RTTs but no loop records)."""
    full = [f for f in frames if not f.empty]
    return pd.concat(full, ignore_index=True) if full else pd.DataFrame()


def ordered_types(names: Iterable[str]) -> list[str]:
    """Application types in the order of every QDS table and figure: the source's two
    (video, data) first, the rest alphabetically."""
    present = set(names)
    return [t for t in ("video", "data") if t in present] + sorted(present - {"video", "data"})


def type_rows(table: Mapping[str, Mapping[str, float]]) -> list[dict[str, str]]:
    """One row of display strings per application type of a ``by_type`` table (means over
    runs; ``*_runs_sd``, the sd over runs, when there is more than one run)."""
    rows = []
    for t in ordered_types(table):
        m = table[t]
        qt = m.get("qt_ms", math.nan)
        rows.append(
            {
                "type": t,
                "qt": _num(qt, "{:g} ms"),
                "qt12": _num(1.2 * qt, "{:g} ms"),
                "rtt": f"{_num(m.get('rtt_mean_ms'), '{:.1f}')} ± {_num(m.get('rtt_sd_ms'), '{:.1f}')} ms",
                "within_qt": _num(_pct(m.get("share_within_qt")), "{:.1f} %"),
                "within_12qt": _num(_pct(m.get("share_within_1_2qt")), "{:.1f} %"),
                "throughput": _num(m.get("throughput_mbps"), "{:.2f} Mbit/s"),
                "packets": _num(m.get("packets"), "{:,.0f}"),
                "unacked": _num(m.get("unacked"), "{:,.0f}"),
                "within_qt_sd": _num(_pct(m.get("share_within_qt_runs_sd")), "± {:.1f}"),
                "within_12qt_sd": _num(_pct(m.get("share_within_1_2qt_runs_sd")), "± {:.1f}"),
                "throughput_sd": _num(m.get("throughput_mbps_runs_sd"), "± {:.2f}"),
                "rtt_sd_runs": _num(m.get("rtt_mean_ms_runs_sd"), "± {:.1f}"),
            }
        )
    return rows


def side_by_side_rows(
    sim: Mapping[str, Mapping[str, float]], lab: Mapping[str, Mapping[str, float]]
) -> list[dict[str, str]]:
    """Per application type, the Table I metrics of the simulator and the lab (means over
    runs; the range over runs when there are several is in the per-substrate tables)."""
    rows = []
    for t in ordered_types([*sim, *lab]):
        s, b = sim.get(t, {}), lab.get(t, {})
        qt = b.get("qt_ms", s.get("qt_ms", math.nan))
        row = {"type": t, "qt": _num(qt, "{:g} ms")}
        for key, metric, pattern in (
            ("within_qt", "share_within_qt", "{:.1f} %"),
            ("within_12qt", "share_within_1_2qt", "{:.1f} %"),
        ):
            row[f"{key}_sim"] = _num(_pct(s.get(metric)), pattern)
            row[f"{key}_lab"] = _num(_pct(b.get(metric)), pattern)
        for key, metric, pattern in (
            ("rtt", "rtt_mean_ms", "{:.1f} ms"),
            ("throughput", "throughput_mbps", "{:.2f} Mbit/s"),
        ):
            row[f"{key}_sim"] = _num(s.get(metric), pattern)
            row[f"{key}_lab"] = _num(b.get(metric), pattern)
        rows.append(row)
    return rows


def class_colors(n: int) -> list[str]:
    """``n`` colours from the heat map's scale, class 0 (most urgent) dark."""
    from plotly.colors import sample_colorscale

    return sample_colorscale("Viridis", [i / max(n - 1, 1) for i in range(n)]) if n else []


def _pct(v: float | None) -> float | None:
    return None if v is None else float(v) * 100.0


def _num(v: float | None, pattern: str) -> str:
    if v is None or not math.isfinite(float(v)):
        return "n/a" if v is None or math.isnan(float(v)) else "∞"
    return pattern.format(float(v))


# ---------------------------------------------------------------------------------------
# Figures


def _fig_rtt_ccdf(
    packets: pd.DataFrame, table: Mapping[str, Mapping[str, float]], sim: Mapping[str, Sequence[float]]
) -> dict[str, Any]:
    """All runs pooled, one line per type; its QT (dashed) and 1.2·QT (dotted) in its
    colour; with ``sim`` (a lab run's simulator side, per type the mean CCDF on the sweep
    grid) the simulator's curve of each type dashed in the same colour."""
    layout = ccdf_layout(QDS_TITLES["rtt_ccdf"], [], 1)
    layout["height"] = 450
    layout["xaxis"]["title"] = {"text": "packet RTT (ms)"}
    layout["yaxis"]["title"] = {"text": "P(RTT > x)"}
    data = []
    for code, rows in packets.groupby("app", sort=True):
        name = APP_NAMES[int(code)] if int(code) < len(APP_NAMES) else f"app-{int(code)}"
        color = TYPE_COLORS.get(name, PALETTE[9])
        trace = ccdf_trace(rows["rtt_ms"].astype(float) / 1000.0, name, color)
        if trace is None:
            continue
        if sim:
            trace["name"] = f"{name} (lab)"
        data.append(trace)
        if name in sim:
            p = np.asarray(sim[name], dtype=float)
            # From the last grid point still at 1 (the grid starts at 0.1 ms, far below any RTT).
            first = int(np.flatnonzero(p >= 1.0 - 1e-9).max(initial=0))
            twin = curve_trace(CCDF_GRID_S[first:] * 1000.0, p[first:], f"{name} (simulator)", color)
            if twin is not None:
                twin["line"]["dash"] = "dash"
                data.append(twin)
        qt = float(table.get(name, {}).get("qt_ms", math.nan))
        if math.isfinite(qt):
            threshold_lines(layout, "", [qt], color=color, dash="dash")
            threshold_lines(layout, "", [1.2 * qt], color=color, dash="dot")
            layout["annotations"].append(
                {
                    "text": f"{name} QT",
                    "showarrow": False,
                    "x": math.log10(qt),
                    "xref": "x",
                    "y": 1.0,
                    "yref": "y domain",
                    "yanchor": "bottom",
                    "font": {"color": color, "size": 11},
                }
            )
    return {"data": data, "layout": layout}


def _fig_flow_classes(flows: pd.DataFrame) -> dict[str, Any]:
    """A heat map: one row per flow (labelled with its true type), one column per period."""
    grid = flows.pivot_table(index="conn", columns="t", values="class", aggfunc="first")
    # A flow of a changing mix (traffic.mix_change_s) has several true types: all are named.
    true_types = flows.groupby("conn")["app_true"].agg(lambda s: "/".join(CONTROLLER_TYPES[int(c)] for c in s.unique()))
    labels = [f"{int(c)} · {true_types[c]}" for c in grid.index]
    n_classes = int(flows["class"].max()) + 1
    data = [
        {
            "type": "heatmap",
            "x": finite(grid.columns),
            "y": labels,
            "z": [finite(row) for row in grid.to_numpy(dtype=float)],
            "zmin": 0,
            "zmax": max(n_classes - 1, 1),
            "colorscale": "Viridis",
            "colorbar": {"title": {"text": "class", "side": "right"}},
            "hovertemplate": "t = %{x:.1f} s<br>flow %{y}<br>class %{z}<extra></extra>",
        }
    ]
    layout = {
        "title": {"text": QDS_TITLES["flow_classes"]},
        # 22 px a flow up to 40 flows; beyond, the labels thin out (plotly) and the map stays on screen.
        "height": max(300, 22 * min(len(labels), 40) + 130),
        "margin": {"t": 50, "b": 45, "l": 140},
        "xaxis": {"title": {"text": "time (s)"}},
        "yaxis": {"title": {"text": "flow · true type"}, "type": "category", "autorange": "reversed"},
    }
    return {"data": data, "layout": layout}


def _fig_class_load(classes: pd.DataFrame) -> dict[str, Any]:
    """Two stacked-area panels over time: flows per class and the rate set on each class."""
    layout = grid_layout(QDS_TITLES["class_load"], 2, 1, gap_y=0.14, shared_x=True)
    layout["height"] = 620
    layout["legend"] = {"title": {"text": "class"}, "traceorder": "normal"}
    classes = _binned(classes)
    n = int(classes["class"].max()) + 1 if not classes.empty else 0
    colors = class_colors(n)
    data = []
    for k, rows in classes.groupby("class", sort=True):
        rows = rows.sort_values("t")
        color = colors[int(k)]
        common = {"type": "scatter", "mode": "lines", "line": {"width": 0.5, "color": color}, "fillcolor": color}
        data.append(
            {
                **common,
                "name": str(int(k)),
                "x": finite(rows["t"]),
                "y": finite(rows["flows"]),
                "stackgroup": "flows",
                "legendgroup": str(int(k)),
                "xaxis": "x",
                "yaxis": "y",
            }
        )
        data.append(
            {
                **common,
                "name": str(int(k)),
                "x": finite(rows["t"]),
                "y": finite(rows["rate_bps"] / 1e6),
                "stackgroup": "rates",
                "legendgroup": str(int(k)),
                "showlegend": False,
                "xaxis": "x2",
                "yaxis": "y2",
            }
        )
    layout["yaxis"]["title"] = {"text": "flows"}
    layout["yaxis2"]["title"] = {"text": "class rate (Mbit/s)"}
    layout["xaxis2"]["title"] = {"text": "time (s)"}
    if not data:
        layout["annotations"].append(panel_note("no control periods", 1))
    return {"data": data, "layout": layout}


# Periods averaged into one point of the flows/rates plot for runs of at least this many
# periods: a 100-ms period makes a 60-s run's stacked areas an unreadable band.
BIN_S = 1.0


def _binned(classes: pd.DataFrame) -> pd.DataFrame:
    """Means of flows and rate per class over :data:`BIN_S` intervals (t: their start)."""
    if classes.empty or classes["t"].max() < 20 * BIN_S:
        return classes
    t = np.floor(classes["t"] / BIN_S) * BIN_S
    return classes.groupby([t, "class"])[["flows", "rate_bps"]].mean().reset_index()


def _fig_confusion(counts: pd.DataFrame) -> dict[str, Any]:
    """Counts of (period, flow) rows, true type × type used; only types that occur."""
    rows = [t for t in counts.index if counts.loc[t].sum() > 0]
    cols = [t for t in counts.columns if t in rows or counts[t].sum() > 0]
    counts = counts.loc[rows, cols]
    totals = counts.sum(axis=1).replace(0, np.nan)
    share = counts.div(totals, axis=0)
    text = [
        [f"{int(c):,}<br>({s * 100:.1f} %)" for c, s in zip(cr, sr)]
        for cr, sr in zip(counts.to_numpy(), share.fillna(0).to_numpy())
    ]
    data = [
        {
            "type": "heatmap",
            "x": cols,
            "y": rows,
            "z": [finite(r) for r in share.to_numpy(dtype=float)],
            "zmin": 0,
            "zmax": 1,
            "text": text,
            "texttemplate": "%{text}",
            "colorscale": "Blues",
            "reversescale": True,  # plotly's Blues runs dark → light: 1 dark here
            "colorbar": {"title": {"text": "share of row"}},
            "hovertemplate": "true %{y}, used %{x}: %{text}<extra></extra>",
        }
    ]
    layout = {
        "title": {"text": QDS_TITLES["confusion"], "x": 0.02, "xanchor": "left"},
        "height": 120 + 90 * len(rows),
        "width": 760,
        "margin": {"t": 50, "b": 60, "l": 100},
        "xaxis": {"title": {"text": "type the controller used"}, "type": "category"},
        "yaxis": {"title": {"text": "true type"}, "type": "category", "autorange": "reversed"},
    }
    return {"data": data, "layout": layout}

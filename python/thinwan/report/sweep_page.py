"""The sweep report: a self-contained HTML page comparing the points of a sweep.

Plotting only consumes results: the sweep document
(:func:`thinwan.analysis.aggregate.sweep_document`, means/min/max over runs per point) and
the rows of the dataset (for the per-run CCDFs on the fixed grid). Axes play the roles
chosen in the sweep file's ``[report]`` section (``docs/sweeps.md``): ``x`` is the numeric
axis on the x of the line plots (the WAN delay by default), ``lines`` the axis drawn as one
line per label (the first named axis, e.g. the configuration), and every other axis gets
its own panel (e.g. buffer small / large). Figures are Plotly specs (:mod:`.figures`),
like the run report's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd

from .. import __version__
from ..analysis.aggregate import CCDF_GRID_S, configuration_axis, mean_ccdfs, point_entries
from ..analysis.metrics import COMPONENTS, thresholds_s
from ..config.sweepfile import Point, Sweep, label
from ..records.schema import write_text_atomic
from .figures import (
    PALETTE,
    PLOT_SCRIPT,
    curve_trace,
    grid_layout,
    panel_note,
    panel_title,
    plotly_js,
    script_json,
    threshold_lines,
)
from .qds_sweep import qds_sweep_context
from .sensitivity_page import sensitivity_context
from .text import TABLE_METRICS, delay_grid, display_axes, display_order, metric_cell, number, short_axis

__all__ = ["html_comparison", "write_sweep_report", "figure_titles"]

# Panels of a CCDF overlay: (row column of the dataset, panel title).
_CCDF_PANELS = (
    ("ccdf_interactive_end_to_end", "interactive: end-to-end"),
    *((f"ccdf_interactive_{c}", f"interactive: {c}") for c in COMPONENTS),
    ("ccdf_bulk_end_to_end", "bulk: end-to-end"),
)


def figure_titles(sweep: Sweep) -> dict[str, str]:
    """Titles of the report's sections and figures (the x axis is named after its key)."""
    x = _x_label(sweep.x_axis) if sweep.x_axis else ""
    titles = {
        "table": "Configurations compared",
        "t_vs_x": f"T_I150 and T_I1000 against {x}",
        "r_vs_x": f"r_I150 and r_I1000 against {x}",
        "ccdf": "Delay components by configuration (mean CCDF over runs)",
    }
    if configuration_axis(sweep) is not None:
        titles["grid"] = "End-to-end delay per grid point and configuration"
        titles["boxes"] = "End-to-end delay of all messages per grid point (box plots)"
    return titles


def html_comparison(sweep: Sweep, frame: pd.DataFrame, document: Mapping[str, Any]) -> str:
    """A self-contained HTML page comparing the points of ``sweep``."""
    titles = figure_titles(sweep)
    columns = display_axes(sweep)
    summaries = {p["id"]: p["summary"] for p in point_entries(document)}
    # Metrics no point has (the interactive ones of a QDS sweep) would only be n/a columns.
    metrics = [(key, h) for key, h in TABLE_METRICS if any(number(s.get(key)) is not None for s in summaries.values())]
    table = [
        (
            [label(p.params[a]) for a in columns],
            [metric_cell(summaries[p.id], key) for key, _ in metrics],
            summaries[p.id].get("runs", 0),
        )
        for p in display_order(sweep)
    ]
    figures: dict[str, Any] = {}
    against = []
    # Without interactive messages (a QDS sweep) every point's r and T are n/a: no plots of them.
    interactive = any(k in dict(metrics) for k in ("r_I150", "r_I1000"))
    if sweep.x_axis and interactive:
        for name, keys in (("t_vs_x", ("T_I150_s", "T_I1000_s")), ("r_vs_x", ("r_I150", "r_I1000"))):
            figures[name] = _fig_against_x(sweep, summaries, keys, titles[name])
            against.append((name, titles[name]))
    # Box plots per grid point when the sweep compares the tunnel with direct TCP
    # (the tunnel paper's figures: min, Q1, median, Q3, max per grid point; docs/sweeps.md).
    boxes = "boxes" in titles
    if boxes:
        figures["boxes"] = _fig_delay_boxes(document, titles["boxes"])
    grid = delay_grid(sweep, document)
    ccdfs = mean_ccdfs(frame)
    qds = qds_sweep_context(sweep, document, ccdfs)
    figures.update(qds["figures"])
    sensitivity = sensitivity_context(document)  # [report] sensitivity (docs/sweeps.md)
    figures.update(sensitivity["figures"])
    overlays = []
    # The overlays are of interactive messages' delay components but one panel: without
    # any (a QDS sweep, whose per-type RTT CCDFs are above) they would be empty figures.
    for i, (group_label, group) in enumerate(_ccdf_groups(sweep) if interactive or not qds["present"] else []):
        figures[f"ccdf{i}"] = _fig_ccdf_group(sweep, group, ccdfs, f"{titles['ccdf']}: {group_label}")
        overlays.append((f"ccdf{i}", group_label))
    return _TEMPLATE.render(
        sweep=sweep,
        document=document,
        version=__version__,
        titles=titles,
        axis_headers=[short_axis(sweep, a) for a in columns],
        metric_headers=[h for _, h in metrics],
        table=table,
        against=against,
        interactive=interactive,
        x_label=_x_label(sweep.x_axis) if sweep.x_axis else None,
        overlays=overlays,
        boxes=boxes,
        grid=grid,
        axes=[
            (a.name, [(label(lab), _overrides_text(o)) for lab, o in zip(a.labels, a.overrides)]) for a in sweep.axes
        ],
        roles={"x": sweep.x_axis, "lines": sweep.line_axis, "panels": ", ".join(sweep.panel_axes) or "none"},
        figures=script_json(figures),
        plotly_js=plotly_js(),
        plot_script=PLOT_SCRIPT,
        qds=qds,
        sensitivity=sensitivity,
        figure_names=set(figures),
    )


def write_sweep_report(out: str | Path, sweep: Sweep, frame: pd.DataFrame, document: Mapping[str, Any]) -> Path:
    """Write ``<out>/report.html`` (atomically); returns its path."""
    return write_text_atomic(Path(out) / "report.html", html_comparison(sweep, frame, document))


# ---------------------------------------------------------------------------------------
# Figures


def _fig_against_x(
    sweep: Sweep, summaries: Mapping[str, Mapping[str, Any]], keys: Sequence[str], title: str
) -> dict[str, Any]:
    """One row per metric, one column per panel; one line per label of the line axis."""
    assert sweep.x_axis is not None
    panels = _panel_combinations(sweep)
    layout = grid_layout(title, len(keys), len(panels), gap_y=0.16, shared_x=True)
    layout["height"] = int(320 * len(keys) + 90)
    layout["legend"] = {"title": {"text": sweep.line_axis or ""}}
    lines = _line_labels(sweep)
    data: list[dict[str, Any]] = []
    for col, panel in enumerate(panels):
        for row, key in enumerate(keys):
            i_panel = row * len(panels) + col + 1
            suffix = "" if i_panel == 1 else str(i_panel)
            any_finite = False
            for i, line_label in enumerate(lines):
                points = [p for p in sweep.points if _matches(sweep, p, panel, line_label)]
                points.sort(key=lambda p: p.values[sweep.x_axis])
                name = label(line_label) if line_label is not None else "all"
                trace, infinite = _metric_line(points, sweep.x_axis, summaries, key, PALETTE[i % 10], name)
                trace.update(xaxis=f"x{suffix}", yaxis=f"y{suffix}", legendgroup=name, showlegend=i_panel == 1)
                data.append(trace)
                any_finite = any_finite or bool(trace["x"])
                for xv in infinite:  # T = ∞ on average: no violation in some run; shown at the top edge
                    layout["annotations"].append(
                        {
                            "text": "▲",
                            "showarrow": False,
                            "x": xv,
                            "xref": f"x{suffix}",
                            "y": 0.97,
                            "yref": f"y{suffix} domain",
                            "font": {"color": PALETTE[i % 10]},
                        }
                    )
            layout[f"xaxis{suffix}"]["title"] = {"text": _x_axis_label(sweep.x_axis)}
            y = layout[f"yaxis{suffix}"]
            if key.startswith("r_"):
                y.update(title={"text": f"{key} (%)"}, rangemode="tozero")
            else:
                y.update(title={"text": f"{key.removesuffix('_s')} (s)"})
                if any_finite:
                    y["type"] = "log"
            if row == 0:
                layout["annotations"].append(panel_title(_panel_title(sweep, panel) or key, i_panel))
    return {"data": data, "layout": layout}


def _metric_line(
    points: Sequence[Point],
    x_key: str,
    summaries: Mapping[str, Mapping[str, Any]],
    key: str,
    color: str,
    name: str,
) -> tuple[dict[str, Any], list[float]]:
    """A line with min–max error bars, and the x of points whose mean is ∞."""
    scale = 100.0 if key.startswith("r_") else 1.0
    x, mean, lo, hi, infinite = [], [], [], [], []
    for p in points:
        s = summaries[p.id]
        m = number(s.get(key))
        if m is None:
            continue
        xv = float(p.values[x_key])
        if math.isinf(m):
            infinite.append(xv)
            continue
        low, high = number(s.get("min", {}).get(key)), number(s.get("max", {}).get(key))
        x.append(xv)
        mean.append(m * scale)
        lo.append((m - (low if low is not None else m)) * scale)
        # A run without violations has T = ∞: its error bar is left open (only the mean).
        hi.append(((high if high is not None and math.isfinite(high) else m) - m) * scale)
    trace = {
        "type": "scatter",
        "mode": "lines+markers",
        "name": name,
        "x": x,
        "y": mean,
        "error_y": {"type": "data", "symmetric": False, "array": hi, "arrayminus": lo, "width": 3},
        "line": {"color": color, "width": 1},
        "marker": {"color": color, "size": 5},
    }
    return trace, infinite


def _fig_ccdf_group(
    sweep: Sweep, group: Sequence[Point], ccdfs: Mapping[str, Mapping[str, np.ndarray]], title: str
) -> dict[str, Any]:
    """Overlay the mean CCDFs of ``group`` (one line per point) in one panel per component."""
    grid_ms = CCDF_GRID_S * 1000.0
    thresholds = sorted({t * 1000.0 for p in group for t in thresholds_s(p.scenario)})
    layout = grid_layout(title, 2, 4, gap_y=0.2)
    layout["height"] = 680
    layout["legend"] = {"title": {"text": sweep.line_axis or "point"}, "x": 0.78, "y": 0.25}
    lines = _line_labels(sweep)
    pos = [a.name for a in sweep.axes].index(sweep.line_axis) if sweep.line_axis else None
    data: list[dict[str, Any]] = []
    shown_labels: set[str] = set()
    for i_panel, (column, panel) in enumerate(_CCDF_PANELS, start=1):
        suffix = "" if i_panel == 1 else str(i_panel)
        drawn = False
        for p in group:
            curve = ccdfs.get(p.id, {}).get(column)
            if curve is None:
                continue
            i = p.index[pos] if pos is not None else 0
            name = label(lines[i]) if pos is not None else p.name
            trace = curve_trace(
                grid_ms,
                curve,
                name,
                PALETTE[i % 10],
                xaxis=f"x{suffix}",
                yaxis=f"y{suffix}",
                legendgroup=name,
                showlegend=name not in shown_labels,
            )
            if trace is None:
                continue
            shown_labels.add(name)
            data.append(trace)
            drawn = True
        _ccdf_axes(layout, suffix, thresholds)
        layout["annotations"].append(panel_title(panel, i_panel))
        if not drawn:
            layout["annotations"].append(panel_note("no delay > 0 ms", i_panel))
    # The eighth panel holds the legend.
    layout["xaxis8"]["visible"] = False
    layout["yaxis8"]["visible"] = False
    return {"data": data, "layout": layout}


def _ccdf_axes(layout: dict[str, Any], suffix: str, thresholds_ms: Sequence[float]) -> None:
    """Log-log CCDF axes with the usability thresholds as dashed lines."""
    layout[f"xaxis{suffix}"].update(type="log", title={"text": "delay (ms)"}, exponentformat="power")
    layout[f"yaxis{suffix}"].update(type="log", title={"text": "P(delay > x)"}, exponentformat="power")
    threshold_lines(layout, suffix, thresholds_ms)


def _fig_delay_boxes(document: Mapping[str, Any], title: str) -> dict[str, Any]:
    """One panel per grid point, one box per configuration (the document's ``configs``).

    Box: Q1, median, Q3; whiskers: min and max; ▼: p99 — each over all messages of all
    runs pooled (:func:`thinwan.analysis.aggregate.sweep_document`). A maximum of ∞ (a
    message never read) is drawn as ▲ at the top edge.
    """
    groups = document["points"]
    cols = min(4, len(groups))
    rows = math.ceil(len(groups) / cols)
    layout = grid_layout(title, rows, cols, gap_x=0.08, gap_y=0.25 if rows > 1 else 0.1)
    # The first row's panel titles (one line per grid axis) sit above its plots: room for
    # them under the figure's title.
    title_lines = max(g["name"].count(",") + 1 for g in groups)
    layout["margin"]["t"] += 16 * title_lines
    layout["height"] = int(300 * rows + 120 + 16 * title_lines)
    layout["showlegend"] = False
    data: list[dict[str, Any]] = []
    for i_panel, group in enumerate(groups, start=1):
        suffix = "" if i_panel == 1 else str(i_panel)
        axes = {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
        names, stats, p99, open_top = [], [], [], []
        for name, s in group["configs"].items():
            values = [number(s.get(k)) for k in ("min", "q1", "median", "q3", "max")]
            if any(v is None for v in values) or not all(math.isfinite(v) for v in values[1:4]):  # type: ignore[arg-type]
                continue
            low, q1, med, q3, high = (float(v) for v in values)  # type: ignore[arg-type]
            if not math.isfinite(high):
                open_top.append(name)
                high = q3
            names.append(name)
            stats.append((low, q1, med, q3, high))
            p99.append(number(s.get("p99")))
        layout["annotations"].append(panel_title(group["name"].replace(",", "<br>"), i_panel))
        if not stats:
            layout[f"xaxis{suffix}"]["visible"] = False
            layout[f"yaxis{suffix}"]["visible"] = False
            continue
        lows, q1s, meds, q3s, highs = (list(v) for v in zip(*stats))
        data.append(
            {
                "type": "box",
                "name": "delay",
                "x": names,
                "lowerfence": lows,
                "q1": q1s,
                "median": meds,
                "q3": q3s,
                "upperfence": highs,
                "marker": {"color": PALETTE[0]},
                **axes,
            }
        )
        marks = [(n, v) for n, v in zip(names, p99) if v is not None and math.isfinite(v)]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "p99",
                "x": [n for n, _ in marks],
                "y": [v for _, v in marks],
                "marker": {"symbol": "triangle-down", "color": PALETTE[3], "size": 8},
                **axes,
            }
        )
        for name in open_top:
            layout["annotations"].append(
                {
                    "text": "▲",
                    "showarrow": False,
                    "x": name,
                    "xref": f"x{suffix}",
                    "y": 0.97,
                    "yref": f"y{suffix} domain",
                    "font": {"color": PALETTE[3]},
                }
            )
        layout[f"yaxis{suffix}"].update(type="log", title={"text": "end-to-end delay (ms)"})
    for i_panel in range(len(groups) + 1, rows * cols + 1):
        layout[f"xaxis{i_panel}"]["visible"] = False
        layout[f"yaxis{i_panel}"]["visible"] = False
    return {"data": data, "layout": layout}


# ---------------------------------------------------------------------------------------
# Grouping


def _panel_combinations(sweep: Sweep) -> list[dict[str, Any]]:
    """Every combination of the panel axes' labels (one empty dict when there are none)."""
    axes = [sweep.axis(name) for name in sweep.panel_axes]
    return [dict(zip(sweep.panel_axes, labels)) for labels in itertools.product(*(a.labels for a in axes))]


def _line_labels(sweep: Sweep) -> list[Any]:
    return list(sweep.axis(sweep.line_axis).labels) if sweep.line_axis else [None]


def _matches(sweep: Sweep, point: Point, panel: Mapping[str, Any], line: Any) -> bool:
    if any(point.params[a] != v for a, v in panel.items()):
        return False
    return sweep.line_axis is None or point.params[sweep.line_axis] == line


def _ccdf_groups(sweep: Sweep) -> list[tuple[str, list[Point]]]:
    """Points that share every label but the line axis's, labelled by those labels."""
    others = [a for a in display_axes(sweep) if a != sweep.line_axis]
    groups: dict[tuple[Any, ...], list[Point]] = {}
    for p in display_order(sweep):
        groups.setdefault(tuple(p.params[a] for a in others), []).append(p)
    return [
        (", ".join(f"{short_axis(sweep, a)}={label(v)}" for a, v in zip(others, key)) or "all points", points)
        for key, points in groups.items()
    ]


def _panel_title(sweep: Sweep, panel: Mapping[str, Any]) -> str:
    return ", ".join(f"{short_axis(sweep, a)}={label(v)}" for a, v in panel.items())


def _x_label(key: str) -> str:
    return "WAN delay" if key == "topology.bottleneck_delay_ms" else key


def _x_axis_label(key: str) -> str:
    return "one-way WAN delay (ms)" if key == "topology.bottleneck_delay_ms" else key


def _overrides_text(overrides: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} = {label(v)}" for k, v in overrides.items()) or "(no change)"


_TEMPLATE = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>thinwan sweep: {{ sweep.name }}</title>
<style>
 body { font-family: system-ui, sans-serif; max-width: 1500px; margin: 2em auto; padding: 0 1em; }
 table { border-collapse: collapse; margin: 1em 0; }
 td, th { border: 1px solid #ccc; padding: 0.2em 0.5em; }
 td.num { text-align: right; font-variant-numeric: tabular-nums; }
 td.span { color: #666; font-size: 85%; text-align: right; font-variant-numeric: tabular-nums; }
 .plot { width: 100%; }
 .missing { color: #777; font-style: italic; }
 .span { color: #666; font-size: 85%; }
 table.table1 td.num { white-space: nowrap; }
</style></head>
<body>
<h1>Sweep {{ sweep.name }}{% if sweep.substrate == "lab" %} (lab){% endif %}</h1>
{% if sweep.substrate == "lab" %}<p><strong>Measured in the namespace lab</strong>: real Linux TCP in network
namespaces across the thinwan-link WAN emulator{% if boxes %}, the tunnel configurations through the real
thinwan-mux core and edge daemons{% endif %} — not the simulator (docs/lab.md, "The tunnel grid in the lab").</p>{% endif %}
{% if sweep.description %}<p>{{ sweep.description }}</p>{% endif %}
<p>thinwan {{ version }}, git {{ document.git_rev }}; {{ sweep.points | length }} point(s) ×
{{ sweep.runs }} run(s) of {{ sweep.base_path.name }} (base scenario). Sweep file
<code>{{ sweep.path }}</code>; results in <code>{{ document.out }}</code> (one Parquet row per
point and run in <code>runs.parquet/</code>, each point's scenario in <code>points/</code>).</p>

{% if sensitivity.present %}{{ sensitivity.html | safe }}{% endif %}

{% if boxes %}
<h2>{{ titles.grid }}</h2>
<p>Per grid point and configuration: median / p99 / max of the end-to-end delay (server write → client
read) of all messages of all runs, ms; ∞: a message was never read. The box plots below show the same
distributions.</p>
<table>
<tr>{% for h in grid[0] %}<th>{{ h }}</th>{% endfor %}{% for c in grid[1] %}<th>{{ c }}</th>{% endfor %}</tr>
{% for labels, cells in grid[2] %}
<tr>{% for l in labels %}<td>{{ l }}</td>{% endfor %}{% for c in cells %}<td class="num">{{ c }}</td>{% endfor %}</tr>
{% endfor %}
</table>

<h2>{{ titles.boxes }}</h2>
<p>Server write → client read, all messages of all runs pooled. Box: Q1, median, Q3;
whiskers: min and max; ▼ p99; ▲ at the top: a message never read.</p>
<div class="plot" id="fig-boxes"></div>
{% endif %}

<h2>{{ titles.table }}</h2>
<p>Mean over runs, with min – max below. r_I150 / r_I1000: share of interactive writes
whose end-to-end delay exceeds 150 ms / 1000 ms minus the point's one-way WAN delay;
T_I: mean time between such violations (∞: none in some run).</p>
<table>
<tr>{% for h in axis_headers %}<th>{{ h }}</th>{% endfor %}{% for h in metric_headers %}<th>{{ h }}</th>{% endfor %}<th>runs</th></tr>
{% for labels, cells, runs in table %}
<tr>{% for l in labels %}<td>{{ l }}</td>{% endfor %}
{% for mean, span in cells %}<td class="num">{{ mean }}<br><span class="span">{{ span }}</span></td>{% endfor %}
<td class="num">{{ runs }}</td></tr>
{% endfor %}
</table>

{% if qds.present %}
<h2 id="qds">{{ qds.titles.table }}{% if qds.lab %} (lab){% endif %}</h2>
<p>Per point and application type (docs/scenario.md "Per-type metrics"): the share of packets whose exact
RTT is within the type's QoE threshold QT and within 1.2·QT (a packet never acknowledged is beyond both), the
packet RTT mean ± sd over packets, and the type's throughput; means over runs{% if qds.runs_sd %}, ± sd over
runs below{% endif %}.
QT: {% for t, qt, qt12 in qds.types %}{{ t }} {{ qt }} (1.2·QT {{ qt12 }}){% if not loop.last %}, {% endif %}{% endfor %}.</p>
<table class="table1">
<tr>{% for h in qds.axis_headers %}<th rowspan="2">{{ h }}</th>{% endfor %}
{% for t, qt, qt12 in qds.types %}<th colspan="4">{{ t }}</th>{% endfor %}</tr>
<tr>{% for t, qt, qt12 in qds.types %}<th>≤ QT</th><th>≤ 1.2·QT</th><th>RTT (ms)</th><th>throughput (Mbit/s)</th>{% endfor %}</tr>
{% for labels, cells in qds.table %}
<tr>{% for l in labels %}<td>{{ l }}</td>{% endfor %}
{% for c in cells %}{% if c %}
<td class="num">{{ c.within_qt }}{% if qds.runs_sd %}<br><span class="span">{{ c.within_qt_sd }}</span>{% endif %}</td>
<td class="num">{{ c.within_12qt }}{% if qds.runs_sd %}<br><span class="span">{{ c.within_12qt_sd }}</span>{% endif %}</td>
<td class="num">{{ c.rtt | replace(" ms", "") }}</td>
<td class="num">{{ c.throughput | replace(" Mbit/s", "") }}{% if qds.runs_sd %}<br><span class="span">{{ c.throughput_sd }}</span>{% endif %}</td>
{% else %}<td colspan="4" class="missing">no packets</td>{% endif %}{% endfor %}</tr>
{% endfor %}
</table>
{% if qds.side_by_side %}
<h3>{{ qds.titles.side_by_side }}</h3>
<p>Each point's scenario simulated with the lab's seeds ({{ qds.sim_runs }} run(s) each), means over runs,
next to the lab's (docs/qds-lab.md).</p>
<table class="table1">
<tr>{% for h in qds.axis_headers %}<th rowspan="3">{{ h }}</th>{% endfor %}
{% for t, qt, qt12 in qds.types %}<th colspan="4">{{ t }}</th>{% endfor %}</tr>
<tr>{% for t, qt, qt12 in qds.types %}<th colspan="2">≤ QT</th><th colspan="2">≤ 1.2·QT</th>{% endfor %}</tr>
<tr>{% for t, qt, qt12 in qds.types %}<th>sim</th><th>lab</th><th>sim</th><th>lab</th>{% endfor %}</tr>
{% for labels, cells in qds.side_by_side %}
<tr>{% for l in labels %}<td>{{ l }}</td>{% endfor %}
{% for c in cells %}{% if c %}
<td class="num">{{ c.within_qt_sim }}</td><td class="num">{{ c.within_qt_lab }}</td>
<td class="num">{{ c.within_12qt_sim }}</td><td class="num">{{ c.within_12qt_lab }}</td>
{% else %}<td colspan="4" class="missing">no packets</td>{% endif %}{% endfor %}</tr>
{% endfor %}
</table>
{% endif %}
{% if "qds_bars" in figure_names %}
<h3>{{ qds.titles.bars }}</h3>
<p>One bar per {{ qds.group_axis }}; error bars: sd over runs.</p>
<div class="plot" id="fig-qds_bars"></div>
{% endif %}
{% if "qds_rtt_ccdf" in figure_names %}
<h3>{{ qds.titles.rtt_ccdf }}</h3>
<p>Per-run CCDFs of packet RTT on the fixed delay grid (0.1 ms – 100 s, 20 points per decade), averaged over
runs. Dashed vertical: the type's QT; dotted: 1.2·QT.{% if qds.side_by_side %} Solid curves: the lab;
dashed curves: the simulator with the same seeds.{% endif %}</p>
<div class="plot" id="fig-qds_rtt_ccdf"></div>
{% elif qds.group_axis %}
<p class="missing">No per-type RTT CCDFs in these rows (written by an older thinwan): re-run the sweep into a new
directory, or run a point's scenario (points/&lt;id&gt;.toml) with thinwan run for its full report.</p>
{% endif %}
{% if qds.alpha_beta %}
<h3>{{ qds.titles.alpha_beta }}</h3>
<p>x: {{ qds.alpha_beta[0] }}, one line per {{ qds.alpha_beta[1] }}, one row of panels per combination of the
other axes; error bars: sd over runs.</p>
<div class="plot" id="fig-qds_alpha_beta"></div>
{% endif %}
{% endif %}

{% if against %}
{% for name, title in against %}
<h2>{{ title }}</h2>
<p>One line per {{ roles.lines }}, one panel per {{ roles.panels }}; error bars: min – max over
runs. ▲ at the top: T = ∞ (no violation in some run).</p>
<div class="plot" id="fig-{{ name }}"></div>
{% endfor %}
{% elif not interactive %}
<p class="missing">No interactive messages at any point: no r_I / T_I plots.</p>
{% elif not sensitivity.present %}
<p class="missing">No numeric axis to plot against (see [report] x in docs/sweeps.md).</p>
{% endif %}

<h2>{{ titles.ccdf }}</h2>
{% if not overlays %}
<p class="missing">No interactive messages at any point: the delay-component overlays are left out (the per-type
RTT CCDFs above show the QDS metrics).</p>
{% else %}
<p>Per-run CCDFs on a fixed grid of delays, averaged over runs. Dashed lines: the usability
thresholds (150 ms and 1000 ms minus the WAN delay).</p>
{% for name, label in overlays %}
<h3>{{ label }}</h3>
<div class="plot" id="fig-{{ name }}"></div>
{% endfor %}
{% endif %}

<h2>Sweep definition</h2>
<p>Report roles: x = {{ roles.x or "none" }}, lines = {{ roles.lines or "none" }}, panels = {{ roles.panels }}.</p>
{% if sweep.fixed %}<p>Fixed overrides ([set]): {% for k, v in sweep.fixed.items() %}<code>{{ k }} = {{ v }}</code> {% endfor %}</p>{% endif %}
<table>
<tr><th>axis</th><th>label</th><th>overrides</th></tr>
{% for name, labels in axes %}{% for label, text in labels %}
<tr><td>{{ name }}</td><td>{{ label }}</td><td><code>{{ text }}</code></td></tr>
{% endfor %}{% endfor %}
</table>
<script>{{ plotly_js | safe }}</script>
<script>
const FIGURES = {{ figures | safe }};
{{ plot_script | safe }}
</script>
</body></html>
"""
)

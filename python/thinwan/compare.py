"""Comparison of the points of a sweep: a terminal table and a self-contained HTML page.

Plotting only consumes results: the sweep document (:func:`thinwan.sweep.sweep_document`,
means/min/max over runs per point) and the rows of the dataset (for the per-run CCDFs on
the fixed grid). Axes play the roles chosen in the sweep file's ``[report]`` section
(``docs/sweeps.md``): ``x`` is the numeric axis on the x of the line plots (the WAN delay
by default), ``lines`` the axis drawn as one line per label (the first named axis, e.g.
the configuration), and every other axis gets its own panel (e.g. buffer small / large).
Figures are built as bare matplotlib ``Figure`` objects, like :mod:`thinwan.report`.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jinja2
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from . import __version__
from .metrics import COMPONENTS, thresholds_s
from .report import decorate_ccdf, png
from .sweep import CCDF_GRID_S, Point, Sweep, configuration_axis, point_entries

__all__ = ["comparison_table", "html_comparison", "figure_titles", "mean_ccdfs", "TABLE_METRICS"]

# (key, column header, formatter) of the comparison table; thresholds follow each point's
# WAN delay t0 (150 ms − t0 and 1000 ms − t0, metrics.thresholds_s).
TABLE_METRICS: tuple[tuple[str, str], ...] = (
    ("r_I150", "r_I150"),
    ("r_I1000", "r_I1000"),
    ("T_I150_s", "T_I150"),
    ("T_I1000_s", "T_I1000"),
    ("timeouts_per_conn", "timeouts/conn"),
    ("spurious_timeouts_per_conn", "spurious/conn"),
)
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
        titles["boxes"] = "End-to-end delay of all messages per grid point (box plots)"
    return titles


def comparison_table(sweep: Sweep, document: Mapping[str, Any]) -> str:
    """Aligned plain-text table: one line per point, ``mean (min–max)`` over runs."""
    columns = _display_axes(sweep)
    header = [*(_short(sweep, a) for a in columns), *(h for _, h in TABLE_METRICS), "runs"]
    summaries = {p["id"]: p["summary"] for p in point_entries(document)}
    rows = [header]
    for point in _display_order(sweep):
        s = summaries[point.id]
        cells = [_label(point.params[a]) for a in columns]
        cells += [_cell(s, key) for key, _ in TABLE_METRICS]
        rows.append([*cells, str(s.get("runs", 0))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    n_axes = len(columns)
    lines = [
        "  ".join(c.ljust(w) if i < n_axes else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]
    lines.insert(1, "-" * max(len(line) for line in lines))
    note = "r_I150 / r_I1000: share of interactive writes later than 150 ms / 1000 ms minus the WAN delay"
    return "\n".join([*lines, "", note])


def html_comparison(sweep: Sweep, frame: pd.DataFrame, document: Mapping[str, Any]) -> str:
    """A self-contained HTML page comparing the points of ``sweep``."""
    titles = figure_titles(sweep)
    columns = _display_axes(sweep)
    summaries = {p["id"]: p["summary"] for p in point_entries(document)}
    table = [
        (
            [_label(p.params[a]) for a in columns],
            [_html_cell(summaries[p.id], key) for key, _ in TABLE_METRICS],
            summaries[p.id].get("runs", 0),
        )
        for p in _display_order(sweep)
    ]
    against = []
    if sweep.x_axis:
        against = [
            (titles["t_vs_x"], png(_fig_against_x(sweep, summaries, ("T_I150_s", "T_I1000_s"), titles["t_vs_x"]))),
            (titles["r_vs_x"], png(_fig_against_x(sweep, summaries, ("r_I150", "r_I1000"), titles["r_vs_x"]))),
        ]
    # Box plots per grid point when the sweep compares the tunnel with direct TCP
    # (spec thin-stream-mux.md: "box plots (min, Q1, median, Q3, max) per grid point").
    boxes = png(_fig_delay_boxes(sweep, document, titles["boxes"])) if "boxes" in titles else None
    ccdfs = mean_ccdfs(frame)
    overlays = [
        (label, png(_fig_ccdf_group(sweep, group, ccdfs, f"{titles['ccdf']}: {label}")))
        for label, group in _ccdf_groups(sweep)
    ]
    return _TEMPLATE.render(
        sweep=sweep,
        document=document,
        version=__version__,
        titles=titles,
        axis_headers=[_short(sweep, a) for a in columns],
        metric_headers=[h for _, h in TABLE_METRICS],
        table=table,
        against=against,
        x_label=_x_label(sweep.x_axis) if sweep.x_axis else None,
        overlays=overlays,
        boxes=boxes,
        axes=[
            (a.name, [(_label(lab), _overrides_text(o)) for lab, o in zip(a.labels, a.overrides)]) for a in sweep.axes
        ],
        roles={"x": sweep.x_axis, "lines": sweep.line_axis, "panels": ", ".join(sweep.panel_axes) or "none"},
    )


def mean_ccdfs(frame: pd.DataFrame) -> dict[str, dict[str, np.ndarray]]:
    """Per point id, per CCDF column: the mean over runs of the per-run CCDFs (runs equal)."""
    result: dict[str, dict[str, np.ndarray]] = {}
    columns = [c for c in frame.columns if c.startswith("ccdf_")]
    for point_id, rows in frame.groupby("point_id"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a kind absent in every run → nan
            result[str(point_id)] = {
                c: np.nanmean(np.stack([np.asarray(v, dtype=float) for v in rows[c]]), axis=0) for c in columns
            }
    return result


# ---------------------------------------------------------------------------------------
# Figures


def _fig_against_x(sweep: Sweep, summaries: Mapping[str, Mapping[str, Any]], keys: Sequence[str], title: str) -> Figure:
    """One row per metric, one column per panel; one line per label of the line axis."""
    assert sweep.x_axis is not None
    panels = _panel_combinations(sweep)
    fig = Figure(figsize=(4.5 * len(panels) + 1.5, 3.2 * len(keys) + 0.6), layout="constrained")
    grid = np.atleast_2d(fig.subplots(len(keys), len(panels), sharex=True, squeeze=False))
    lines = _line_labels(sweep)
    for col, panel in enumerate(panels):
        for row, key in enumerate(keys):
            ax = grid[row, col]
            for i, line in enumerate(lines):
                points = [p for p in sweep.points if _matches(sweep, p, panel, line)]
                points.sort(key=lambda p: p.values[sweep.x_axis])
                _metric_line(
                    ax, points, sweep.x_axis, summaries, key, f"C{i % 10}", _label(line) if line is not None else "all"
                )
            _decorate_metric_axes(ax, key, sweep.x_axis)
            if row == 0:
                ax.set_title(_panel_title(sweep, panel) or key)
    grid[0, -1].legend(fontsize=8, title=sweep.line_axis, title_fontsize=8)
    fig.suptitle(title)
    return fig


def _metric_line(
    ax: Axes,
    points: Sequence[Point],
    x_key: str,
    summaries: Mapping[str, Mapping[str, Any]],
    key: str,
    color: str,
    label: str,
) -> None:
    scale = 100.0 if key.startswith("r_") else 1.0
    x, mean, lo, hi, infinite = [], [], [], [], []
    for p in points:
        s = summaries[p.id]
        m = _num(s.get(key))
        if m is None:
            continue
        xv = float(p.values[x_key])
        if math.isinf(m):
            infinite.append(xv)
            continue
        low, high = _num(s.get("min", {}).get(key)), _num(s.get("max", {}).get(key))
        x.append(xv)
        mean.append(m * scale)
        lo.append((m - (low if low is not None else m)) * scale)
        # A run without violations has T = ∞: its error bar is left open (only the mean).
        hi.append(((high if high is not None and math.isfinite(high) else m) - m) * scale)
    ax.errorbar(x, mean, yerr=[lo, hi], color=color, label=label, marker="o", markersize=3, capsize=3, linewidth=1)
    if infinite:  # T = ∞ on average: no violation in some run; shown at the top edge
        ax.plot(
            infinite,
            [0.97] * len(infinite),
            linestyle="none",
            marker="^",
            color=color,
            transform=ax.get_xaxis_transform(),
            clip_on=False,
        )


def _decorate_metric_axes(ax: Axes, key: str, x_key: str) -> None:
    ax.set_xlabel(_x_axis_label(x_key))
    if key.startswith("r_"):
        ax.set_ylabel(f"{key} (%)")
        ax.set_ylim(bottom=0)
    else:
        ax.set_ylabel(f"{key.removesuffix('_s')} (s)")
        if any(line.get_ydata().size for line in ax.get_lines()):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # log of an empty/zero axis
                ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)


def _fig_ccdf_group(
    sweep: Sweep, group: Sequence[Point], ccdfs: Mapping[str, Mapping[str, np.ndarray]], title: str
) -> Figure:
    """Overlay the mean CCDFs of ``group`` (one line per point) in one panel per component."""
    grid_ms = CCDF_GRID_S * 1000.0
    thresholds = sorted({t * 1000.0 for p in group for t in thresholds_s(p.scenario)})
    fig = Figure(figsize=(15, 7), layout="constrained")
    flat = fig.subplots(2, 4, sharex=True, sharey=True).ravel()
    lines = _line_labels(sweep)
    pos = [a.name for a in sweep.axes].index(sweep.line_axis) if sweep.line_axis else None
    for ax, (column, panel_title) in zip(flat, _CCDF_PANELS):
        drawn = False
        for p in group:
            curve = ccdfs.get(p.id, {}).get(column)
            if curve is None:
                continue
            shown = curve > 0
            if not shown.any():
                continue
            i = p.index[pos] if pos is not None else 0
            label = _label(lines[i]) if pos is not None else p.name
            ax.plot(grid_ms[shown], curve[shown], color=f"C{i % 10}", label=label, linewidth=1.2)
            drawn = True
        decorate_ccdf(ax, thresholds, drawn)
        if ax.get_legend() is not None:  # one shared legend, in the spare panel
            ax.get_legend().remove()
        ax.set_title(panel_title)
    flat[-1].axis("off")
    handles, labels = flat[0].get_legend_handles_labels()
    if handles:
        flat[-1].legend(handles, labels, title=sweep.line_axis, loc="center")
    fig.suptitle(title)
    return fig


def _fig_delay_boxes(sweep: Sweep, document: Mapping[str, Any], title: str) -> Figure:
    """One panel per grid point, one box per configuration (the document's ``configs``).

    Box: Q1, median, Q3; whiskers: min and max; ▼: p99 — each over all messages of all
    runs pooled (:func:`thinwan.sweep.sweep_document`). A maximum of ∞ (a message never
    read) is drawn as ▲ at the top edge.
    """
    groups = document["points"]
    ncols = min(4, len(groups))
    nrows = math.ceil(len(groups) / ncols)
    fig = Figure(figsize=(3.4 * ncols + 0.6, 3.0 * nrows + 0.7), layout="constrained")
    flat = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, group in zip(flat, groups):
        stats, p99, open_top = [], [], []
        for name, s in group["configs"].items():
            values = [_num(s.get(k)) for k in ("min", "q1", "median", "q3", "max")]
            if any(v is None for v in values) or not all(math.isfinite(v) for v in values[1:4]):  # type: ignore[arg-type]
                continue
            low, q1, med, q3, high = (float(v) for v in values)  # type: ignore[arg-type]
            if not math.isfinite(high):
                open_top.append(len(stats) + 1)
                high = q3
            stats.append({"label": name, "whislo": low, "q1": q1, "med": med, "q3": q3, "whishi": high, "fliers": []})
            p99.append(_num(s.get("p99")))
        if not stats:
            ax.axis("off")
            continue
        ax.bxp(stats, showfliers=False)
        xs = [i + 1 for i, v in enumerate(p99) if v is not None and math.isfinite(v)]
        ax.plot(xs, [p99[i - 1] for i in xs], linestyle="none", marker="v", color="C3", label="p99")
        if open_top:
            ax.plot(
                open_top,
                [0.97] * len(open_top),
                linestyle="none",
                marker="^",
                color="C3",
                transform=ax.get_xaxis_transform(),
                clip_on=False,
            )
        ax.set_yscale("log")
        ax.set_ylabel("end-to-end delay (ms)")
        ax.set_title(group["name"].replace(",", "\n"), fontsize=8)
        ax.grid(True, axis="y", which="major", alpha=0.3)
    for ax in flat[len(groups) :]:
        ax.axis("off")
    fig.suptitle(title)
    return fig


# ---------------------------------------------------------------------------------------
# Grouping and ordering


def _display_axes(sweep: Sweep) -> list[str]:
    """Axes from the outermost grouping to the innermost: panels, lines, x."""
    roles = [*sweep.panel_axes, sweep.line_axis, sweep.x_axis]
    return [a for a in roles if a is not None]


def _display_order(sweep: Sweep) -> list[Point]:
    pos = {a.name: i for i, a in enumerate(sweep.axes)}
    order = [pos[a] for a in _display_axes(sweep)]
    return sorted(sweep.points, key=lambda p: tuple(p.index[i] for i in order))


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
    others = [a for a in _display_axes(sweep) if a != sweep.line_axis]
    groups: dict[tuple[Any, ...], list[Point]] = {}
    for p in _display_order(sweep):
        groups.setdefault(tuple(p.params[a] for a in others), []).append(p)
    return [
        (", ".join(f"{_short(sweep, a)}={_label(v)}" for a, v in zip(others, key)) or "all points", points)
        for key, points in groups.items()
    ]


def _panel_title(sweep: Sweep, panel: Mapping[str, Any]) -> str:
    return ", ".join(f"{_short(sweep, a)}={_label(v)}" for a, v in panel.items())


# ---------------------------------------------------------------------------------------
# Formatting


def _short(sweep: Sweep, axis: str) -> str:
    last = axis.rpartition(".")[2]
    clash = sum(a.name.rpartition(".")[2] == last for a in sweep.axes) > 1
    return axis if clash else last


def _x_label(key: str) -> str:
    return "WAN delay" if key == "topology.bottleneck_delay_ms" else key


def _x_axis_label(key: str) -> str:
    return "one-way WAN delay (ms)" if key == "topology.bottleneck_delay_ms" else key


def _label(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _num(v: Any) -> float | None:
    """A number, or None for a missing/null/nan one (JSON has no nan or inf: null)."""
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def _format(key: str) -> Callable[[float], str]:
    if key.startswith("r_"):
        return lambda v: f"{v * 100:.3g}%"
    if key.endswith("_s"):
        return lambda v: f"{v:.3g}s"
    return lambda v: f"{v:.2f}"


def _fmt(v: Any, fmt: Callable[[float], str]) -> str:
    n = _num(v)
    if n is None:
        return "n/a"
    return "∞" if math.isinf(n) else fmt(n)


def _cell(summary: Mapping[str, Any], key: str) -> str:
    if key not in summary:
        return "n/a"
    fmt = _format(key)
    mean = _fmt(summary[key], fmt)
    if summary.get("runs", 0) <= 1:
        return mean
    return f"{mean} ({_fmt(summary['min'][key], fmt)}–{_fmt(summary['max'][key], fmt)})"


def _html_cell(summary: Mapping[str, Any], key: str) -> tuple[str, str]:
    """(mean, min–max) for the HTML table."""
    if key not in summary:
        return "n/a", ""
    fmt = _format(key)
    return _fmt(summary[key], fmt), f"{_fmt(summary['min'][key], fmt)} – {_fmt(summary['max'][key], fmt)}"


def _overrides_text(overrides: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} = {_label(v)}" for k, v in overrides.items()) or "(no change)"


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
 img { max-width: 100%; }
 .missing { color: #777; font-style: italic; }
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

{% if against %}
{% for title, png in against %}
<h2>{{ title }}</h2>
<p>One line per {{ roles.lines }}, one panel per {{ roles.panels }}; error bars: min – max over
runs. ▲ at the top: T = ∞ (no violation in some run).</p>
<img alt="{{ title }}" src="data:image/png;base64,{{ png }}">
{% endfor %}
{% else %}
<p class="missing">No numeric axis to plot against (see [report] x in docs/sweeps.md).</p>
{% endif %}

{% if boxes %}
<h2>{{ titles.boxes }}</h2>
<p>Server write → client read, all messages of all runs pooled. Box: Q1, median, Q3;
whiskers: min and max; ▼ p99; ▲ at the top: a message never read.</p>
<img alt="{{ titles.boxes }}" src="data:image/png;base64,{{ boxes }}">
{% endif %}

<h2>{{ titles.ccdf }}</h2>
<p>Per-run CCDFs on a fixed grid of delays, averaged over runs. Dashed lines: the usability
thresholds (150 ms and 1000 ms minus the WAN delay).</p>
{% for label, png in overlays %}
<h3>{{ label }}</h3>
<img alt="{{ titles.ccdf }}: {{ label }}" src="data:image/png;base64,{{ png }}">
{% endfor %}

<h2>Sweep definition</h2>
<p>Report roles: x = {{ roles.x or "none" }}, lines = {{ roles.lines or "none" }}, panels = {{ roles.panels }}.</p>
{% if sweep.fixed %}<p>Fixed overrides ([set]): {% for k, v in sweep.fixed.items() %}<code>{{ k }} = {{ v }}</code> {% endfor %}</p>{% endif %}
<table>
<tr><th>axis</th><th>label</th><th>overrides</th></tr>
{% for name, labels in axes %}{% for label, text in labels %}
<tr><td>{{ name }}</td><td>{{ label }}</td><td><code>{{ text }}</code></td></tr>
{% endfor %}{% endfor %}
</table>
</body></html>
"""
)

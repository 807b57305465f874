"""Reports: a plain-text summary table and a self-contained HTML page.

Plotting only consumes results. A run is first reduced to a :class:`RunDigest` (its
summary, metadata, per-message delays as float32, the bottleneck queue trace and the TCP
trace of its connection with the most timeouts); digests are small enough to send back
from a worker process, and the page is built from them alone. Figures are Plotly specs
(JSON) drawn in the browser by plotly.js, embedded in the page with the data, so the page
is one file that can be mailed around and its plots zoom. The matplotlib helpers at the end
serve the sweep report's PNG figures; matplotlib is imported only when one is made.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jinja2
import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

from . import __version__
from .metrics import (
    BOTTLENECK,
    BULK,
    COMPONENTS,
    INTERACTIVE,
    ccdf,
    message_delays,
    summarize_run,
    thresholds_s,
)
from .records import RunRecords
from .scenario import Scenario

__all__ = ["RunDigest", "digest_run", "summary_table", "html_report", "FIGURE_TITLES"]

FIGURE_TITLES = {
    "end_to_end": "CCDF of end-to-end delay",
    "components": "CCDF of the delay components",
    "queue": "Bottleneck queue length over time",
    "conn": "cwnd and RTO of the connection with the most timeouts",
}
# Points kept per CCDF curve: enough for a smooth line, few enough for a quick PNG.
CCDF_POINTS = 2000


@dataclass
class RunDigest:
    """What the report needs from one run."""

    summary: dict[str, Any]
    meta: dict[str, Any]
    delays: pd.DataFrame  # metrics.message_delays, float32 seconds
    queue_trace: pd.DataFrame  # bottleneck rows of the queue trace (may be empty)
    conn_trace: pd.DataFrame  # TCP trace of `worst_conn` (may be empty)
    worst_conn: int | None  # connection with the most timeouts (None: no connections)
    worst_conn_timeouts: int


def digest_run(records: RunRecords, scenario: Scenario) -> RunDigest:
    """Reduce one run's records to a :class:`RunDigest`."""
    delays = message_delays(records.messages, scenario.scenario.duration_s)
    delays = delays.astype({c: "float32" for c in delays.columns if c != "kind"})
    conns = records.connections
    worst = conns.loc[conns["timeouts"].idxmax()] if not conns.empty else None
    worst_conn = int(worst["conn"]) if worst is not None else None
    qt, ct = records.queue_trace, records.conn_trace
    return RunDigest(
        summary=summarize_run(records, scenario),
        meta=records.meta,
        delays=delays,
        queue_trace=qt.loc[qt["port"] == BOTTLENECK].reset_index(drop=True),
        conn_trace=ct.loc[ct["conn"] == worst_conn].reset_index(drop=True),
        worst_conn=worst_conn,
        worst_conn_timeouts=int(worst["timeouts"]) if worst is not None else 0,
    )


def summary_table(summary: Mapping[str, Any], scenario: Scenario) -> str:
    """Aligned plain-text table: metric, mean over runs, min–max over runs."""
    header = ("metric", "mean", f"min – max ({summary['runs']} runs)")
    rows = [header, *_summary_rows(summary, scenario)]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}".rstrip() for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def html_report(scenario: Scenario, digests: Sequence[RunDigest], summary: Mapping[str, Any]) -> str:
    """A self-contained HTML page for the runs of ``scenario``."""
    digests = sorted(digests, key=lambda d: d.meta.get("run", 0))
    thresholds_ms = [t * 1000.0 for t in thresholds_s(scenario)]
    delays = pd.concat([d.delays for d in digests], ignore_index=True)
    queue_run = next((d for d in digests if not d.queue_trace.empty), None)
    conn_run = max(digests, key=lambda d: d.worst_conn_timeouts)
    figures = {
        "end_to_end": _fig_end_to_end(delays, thresholds_ms),
        "components": _fig_components(delays, thresholds_ms),
    }
    if queue_run is not None:
        figures["queue"] = _fig_queue(queue_run.queue_trace, scenario)
    if not conn_run.conn_trace.empty:
        figures["conn"] = _fig_conn(conn_run, scenario)
    return _TEMPLATE.render(
        scenario=scenario,
        version=__version__,
        git_rev=digests[0].meta.get("git_rev", "unknown"),
        summary_rows=_summary_rows(summary, scenario),
        runs=summary["runs"],
        run_rows=[_run_row(d) for d in digests],
        titles=FIGURE_TITLES,
        figures=_script_json(figures),
        plotly_js=_plotly_js(),
        queue=queue_run is not None,
        queue_run=queue_run,
        conn=not conn_run.conn_trace.empty,
        conn_run=conn_run,
        scenario_toml=scenario.to_toml(),
        metas=[(d.meta.get("run", "?"), _meta_json(d.meta)) for d in digests],
    )


# ---------------------------------------------------------------------------------------
# Tables


def _fmt_pct(v: float) -> str:
    return f"{v * 100:.3g} %"


def _fmt_seconds(v: float) -> str:
    return f"{v:.3g} s"


def _fmt_ms(v: float) -> str:
    return f"{v:.1f} ms"


def _fmt_plain(v: float) -> str:
    return f"{v:.2f}"


def _fmt_count(v: float) -> str:
    return f"{v:,.0f}"


def _summary_metrics(scenario: Scenario) -> list[tuple[str, str, Callable[[float], str]]]:
    t150, t1000 = (f"{t * 1000:g} ms" for t in thresholds_s(scenario))
    return [
        ("r_I150", f"r_I150 (interactive delay > {t150})", _fmt_pct),
        ("r_I1000", f"r_I1000 (interactive delay > {t1000})", _fmt_pct),
        ("T_I150_s", "T_I150 (mean time between violations)", _fmt_seconds),
        ("T_I1000_s", "T_I1000 (mean time between violations)", _fmt_seconds),
        ("interactive_delay_p50_ms", "interactive delay, median", _fmt_ms),
        ("interactive_delay_p99_ms", "interactive delay, 99th percentile", _fmt_ms),
        ("timeouts_per_conn", "timeouts per connection", _fmt_plain),
        ("spurious_timeouts_per_conn", "spurious timeouts per connection", _fmt_plain),
        ("fast_retransmits_per_conn", "fast retransmits per connection", _fmt_plain),
        ("utilisation", "bottleneck utilisation", _fmt_pct),
        ("utilisation_interactive", "bottleneck utilisation, interactive", _fmt_pct),
        ("messages", "messages", _fmt_count),
        ("undelivered", "messages never read", _fmt_count),
        ("bottleneck_drops", "bottleneck drops", _fmt_count),
    ]


def _summary_rows(summary: Mapping[str, Any], scenario: Scenario) -> list[tuple[str, str, str]]:
    rows = []
    for key, label, fmt in _summary_metrics(scenario):
        if key not in summary:
            continue
        lo, hi = summary["min"][key], summary["max"][key]
        rows.append((label, _fmt(summary[key], fmt), f"{_fmt(lo, fmt)} – {_fmt(hi, fmt)}"))
    return rows


def _fmt(v: float | None, fmt: Callable[[float], str]) -> str:
    if v is None or math.isnan(v):
        return "n/a"
    return "∞" if math.isinf(v) else fmt(v)


def _run_row(d: RunDigest) -> dict[str, str]:
    s = d.summary
    return {
        "run": str(d.meta.get("run", "?")),
        "seed": str(d.meta.get("seed", "?")),
        "r_I150": _fmt(s["r_I150"], _fmt_pct),
        "r_I1000": _fmt(s["r_I1000"], _fmt_pct),
        "T_I150": _fmt(s["T_I150_s"], _fmt_seconds),
        "T_I1000": _fmt(s["T_I1000_s"], _fmt_seconds),
        "timeouts": _fmt(s["timeouts_per_conn"], _fmt_plain),
        "spurious": _fmt(s["spurious_timeouts_per_conn"], _fmt_plain),
        "utilisation": _fmt(s["utilisation"], _fmt_pct),
        "wall": _fmt(d.meta.get("wall_s", math.nan), _fmt_seconds),
    }


def _meta_json(meta: Mapping[str, Any]) -> str:
    # The config is shown once, as TOML; repeating it per run only adds noise.
    shown = {k: v for k, v in meta.items() if k != "config"}
    return json.dumps(shown, indent=1, default=str)


# ---------------------------------------------------------------------------------------
# Figures of the run report: Plotly specs (JSON) drawn in the browser by plotly.js, which
# the page embeds. Building a spec is a few milliseconds; drawing the same figures with
# matplotlib took most of a one-run command's time. The page stays one self-contained
# file, and its plots zoom — which log-scale CCDF tails and long time series need.

_KINDS = ((INTERACTIVE, "interactive", "#d62728"), (BULK, "bulk", "#1f77b4"))
# Distinct from the interactive/bulk pair, which every other panel uses.
_COMPONENT_COLORS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _fig_end_to_end(delays: pd.DataFrame, thresholds_ms: Sequence[float]) -> dict[str, Any]:
    data = [
        t
        for kind, label, color in _KINDS
        if (t := _ccdf_trace(delays.loc[delays["kind"] == kind, "end_to_end"], label, color)) is not None
    ]
    layout = _ccdf_layout(FIGURE_TITLES["end_to_end"] + " (never-read messages count as ∞)", thresholds_ms, 1)
    layout["height"] = 430
    return {"data": data, "layout": layout}


def _fig_components(delays: pd.DataFrame, thresholds_ms: Sequence[float]) -> dict[str, Any]:
    """A 2 × 3 grid: one panel per component (interactive vs bulk), and a last panel with
    every component of interactive messages (which one dominates the tail, spec §7)."""
    panels = [(c, f"{c} delay") for c in COMPONENTS] + [(None, "interactive: all components")]
    layout = _ccdf_layout(FIGURE_TITLES["components"], thresholds_ms, len(panels), cols=3)
    layout["height"] = 720
    data = []
    for i, (component, title) in enumerate(panels, start=1):
        axes = {"xaxis": f"x{i}", "yaxis": f"y{i}"}
        if component is None:
            interactive = delays.loc[delays["kind"] == INTERACTIVE]
            lines = [(interactive[c], c, color) for c, color in zip(COMPONENTS, _COMPONENT_COLORS)]
        else:
            lines = [(delays.loc[delays["kind"] == k, component], label, color) for k, label, color in _KINDS]
        drawn = False
        for values, label, color in lines:
            t = _ccdf_trace(values, label, color)
            if t is not None:
                # One legend entry per name: the interactive/bulk pair repeats in every panel.
                t.update(axes, legendgroup=label, showlegend=(i == 1 or component is None))
                data.append(t)
                drawn = True
        layout["annotations"].append(_panel_title(title, i))
        if not drawn:
            layout["annotations"].append(_panel_note("no delay > 0 ms", i))
    return {"data": data, "layout": layout}


def _fig_queue(trace: pd.DataFrame, scenario: Scenario) -> dict[str, Any]:
    data = [_line(trace["t"], trace["bytes"] / 1000.0, "queue", "#1f77b4")]
    shapes = []
    if scenario.queue.limit_bytes:
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": scenario.queue.limit_bytes / 1000.0,
                "y1": scenario.queue.limit_bytes / 1000.0,
                "line": {"color": "gray", "dash": "dash", "width": 1},
            }
        )
    layout = {
        "title": {"text": FIGURE_TITLES["queue"]},
        "height": 330,
        "shapes": shapes,
        "xaxis": {"title": {"text": "time (s)"}},
        "yaxis": {"title": {"text": "queue length (kB)"}},
        "margin": {"t": 50, "b": 45},
    }
    return {"data": data, "layout": layout}


def _fig_conn(digest: RunDigest, scenario: Scenario) -> dict[str, Any]:
    trace = digest.conn_trace
    mss = scenario.tcp.mss
    ssthresh = trace["ssthresh"].where(np.isfinite(trace["ssthresh"]))  # inf: no loss yet
    data = [
        _line(trace["t"], trace["cwnd"] / mss, "cwnd", "#1f77b4", step=True),
        _line(trace["t"], ssthresh / mss, "ssthresh", "#ff7f0e", step=True),
        _line(trace["t"], trace["rto"] * 1000.0, "RTO", "#2ca02c", step=True, axis=2),
        _line(trace["t"], trace["srtt"] * 1000.0, "srtt", "#d62728", step=True, axis=2),
    ]
    title = (
        f"{FIGURE_TITLES['conn']}: run {digest.meta.get('run', '?')}, "
        f"connection {digest.worst_conn} ({digest.worst_conn_timeouts} timeouts)"
    )
    layout = {
        "title": {"text": title},
        "height": 560,
        "margin": {"t": 60, "b": 45},
        "xaxis": {"anchor": "y2", "title": {"text": "time (s)"}},
        "yaxis": {"domain": [0.55, 1.0], "title": {"text": "segments (of MSS)"}},
        "yaxis2": {"domain": [0.0, 0.45], "title": {"text": "time (ms)"}},
    }
    return {"data": data, "layout": layout}


def _ccdf_trace(seconds: pd.Series, label: str, color: str) -> dict[str, Any] | None:
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
        "x": _num(x),
        "y": _num(p),
        "line": {"shape": "hv", "color": color, "width": 1.5},
    }


def _line(x: pd.Series, y: pd.Series, name: str, color: str, step: bool = False, axis: int = 1) -> dict[str, Any]:
    return {
        "type": "scattergl",
        "mode": "lines",
        "name": name,
        "x": _num(x),
        "y": _num(y),
        "xaxis": "x",
        "yaxis": "y" if axis == 1 else f"y{axis}",
        "line": {"color": color, "width": 1, **({"shape": "hv"} if step else {})},
    }


def _ccdf_layout(title: str, thresholds_ms: Sequence[float], panels: int, cols: int = 1) -> dict[str, Any]:
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
                        "line": {"color": "gray", "dash": "dash", "width": 1},
                    }
                )
    return layout


def _panel_title(text: str, i: int) -> dict[str, Any]:
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


def _panel_note(text: str, i: int) -> dict[str, Any]:
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


def _num(values: Any) -> list[float | None]:
    """JSON numbers for plotly.js: NaN and ±∞ become null (a gap in the line)."""
    a = np.asarray(values, dtype=float)
    return [v if math.isfinite(v) else None for v in a.tolist()]


def _plotly_js() -> str:
    """plotly.js as shipped inside the plotly Python package (no network needed)."""
    from importlib.resources import files

    return (files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def _script_json(obj: Any) -> str:
    """JSON safe to place inside a <script> element."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


# ---------------------------------------------------------------------------------------
# matplotlib helpers for the PNG figures of the sweep report (compare.py).


def decorate_ccdf(ax: Axes, thresholds_ms: Sequence[float], drawn: bool) -> None:
    """Log-log CCDF axes with the usability thresholds as dashed lines."""
    for t in thresholds_ms:
        if t > 0:  # a WAN delay ≥ the threshold leaves nothing to draw
            ax.axvline(t, color="gray", linestyle="--", linewidth=1)
            ax.text(
                t,
                0.03,
                f" {t:g} ms",
                rotation=90,
                fontsize=8,
                color="gray",
                transform=ax.get_xaxis_transform(),
                va="bottom",
                ha="right",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    # Minor ticks on log axes are hundreds of artists per panel; majors (decades) suffice.
    from matplotlib.ticker import NullLocator

    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("delay (ms)")
    ax.set_ylabel("P(delay > x)")
    ax.grid(True, which="major", alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no delay > 0 ms", transform=ax.transAxes, ha="center", color="gray")


def png(fig: Figure) -> str:  # also used by the sweep report (compare.py)
    """Render ``fig`` as a base64 PNG for an ``<img src="data:…">``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


_TEMPLATE = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>thinwan: {{ scenario.name }}</title>
<style>
 body { font-family: system-ui, sans-serif; max-width: 1300px; margin: 2em auto; padding: 0 1em; }
 table { border-collapse: collapse; margin: 1em 0; }
 td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; }
 td.num { text-align: right; font-variant-numeric: tabular-nums; }
 pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
 img { max-width: 100%; }
 .plot { width: 100%; }
 .missing { color: #777; font-style: italic; }
</style></head>
<body>
<h1>{{ scenario.name }}</h1>
{% if scenario.scenario.description %}<p>{{ scenario.scenario.description }}</p>{% endif %}
<p>thinwan {{ version }}, git {{ git_rev }}; {{ runs }} run(s) of
{{ scenario.scenario.duration_s }} s with {{ scenario.topology.pairs }} pairs.</p>

<h2>Summary</h2>
<table>
<tr><th>metric</th><th>mean</th><th>min – max over {{ runs }} run(s)</th></tr>
{% for label, mean, span in summary_rows %}
<tr><td>{{ label }}</td><td class="num">{{ mean }}</td><td class="num">{{ span }}</td></tr>
{% endfor %}
</table>

<h2>Runs</h2>
<table>
<tr><th>run</th><th>seed</th><th>r_I150</th><th>r_I1000</th><th>T_I150</th><th>T_I1000</th>
<th>timeouts/conn</th><th>spurious/conn</th><th>utilisation</th><th>wall time</th></tr>
{% for r in run_rows %}
<tr><td>{{ r.run }}</td><td class="num">{{ r.seed }}</td><td class="num">{{ r.r_I150 }}</td>
<td class="num">{{ r.r_I1000 }}</td><td class="num">{{ r.T_I150 }}</td><td class="num">{{ r.T_I1000 }}</td>
<td class="num">{{ r.timeouts }}</td><td class="num">{{ r.spurious }}</td>
<td class="num">{{ r.utilisation }}</td><td class="num">{{ r.wall }}</td></tr>
{% endfor %}
</table>

<h2>Delay</h2>
<p>All runs pooled. Dashed lines: the usability thresholds (150 ms and 1000 ms minus the
{{ scenario.topology.bottleneck_delay_ms }} ms WAN delay).</p>
<h3>{{ titles.end_to_end }}</h3>
<div class="plot" id="fig-end_to_end"></div>
<h3>{{ titles.components }}</h3>
<div class="plot" id="fig-components"></div>

<h2>Bottleneck queue</h2>
<h3>{{ titles.queue }}</h3>
{% if queue %}
<p>Run {{ queue_run.meta.get("run", "?") }}.</p>
<div class="plot" id="fig-queue"></div>
{% else %}
<p class="missing">No queue trace in these records (enable it with <code>[records] traces = true</code>).</p>
{% endif %}

<h2>TCP</h2>
<h3>{{ titles.conn }}</h3>
{% if conn %}
<div class="plot" id="fig-conn"></div>
{% elif conn_run.worst_conn is none %}
<p class="missing">No connections in these records.</p>
{% else %}
<p class="missing">No TCP trace for connection {{ conn_run.worst_conn }} (run
{{ conn_run.meta.get("run", "?") }}, {{ conn_run.worst_conn_timeouts }} timeouts) in these
records (enable it with <code>[records] traces = true</code> and
<code>trace_connections = "all"</code>).</p>
{% endif %}

<h2>Run metadata</h2>
<h3>Scenario</h3>
<pre>{{ scenario_toml }}</pre>
{% for run, meta in metas %}
<h3>Run {{ run }}</h3>
<pre>{{ meta }}</pre>
{% endfor %}
<script>{{ plotly_js | safe }}</script>
<script>
const FIGURES = {{ figures | safe }};
for (const [name, fig] of Object.entries(FIGURES)) {
  Plotly.newPlot("fig-" + name, fig.data, fig.layout, {responsive: true, displaylogo: false});
}
</script>
</body></html>
"""
)

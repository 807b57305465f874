"""The run report: a self-contained HTML page for the runs of one scenario.

Plotting only consumes results: the page is built from the runs'
:class:`~thinwan.analysis.digest.RunDigest` alone (summary, metadata, per-message delays
as float32, the bottleneck queue trace and the TCP trace of the connection with the
most timeouts). Figures are Plotly specs (:mod:`.figures`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd

from .. import __version__
from ..analysis.digest import RunDigest
from ..analysis.metrics import BULK, COMPONENTS, INTERACTIVE, thresholds_s
from ..config.scenario import Scenario
from ..records.schema import write_text_atomic
from .figures import (
    PLOT_SCRIPT,
    ccdf_layout,
    ccdf_trace,
    line,
    panel_note,
    panel_title,
    plotly_js,
    script_json,
)
from .qds_run import ordered_types, qds_context
from .text import fmt, fmt_pct, fmt_plain, fmt_seconds, summary_rows

__all__ = ["html_report", "write_run_report", "FIGURE_TITLES"]

FIGURE_TITLES = {
    "end_to_end": "CCDF of end-to-end delay",
    "components": "CCDF of the delay components",
    "queue": "Bottleneck queue length over time",
    "conn": "cwnd and RTO of the connection with the most timeouts",
}


def html_report(
    scenario: Scenario,
    digests: Sequence[RunDigest],
    summary: Mapping[str, Any],
    sim: Mapping[str, Any] | None = None,
) -> str:
    """A self-contained HTML page for the runs of ``scenario``; ``sim``: the simulator's
    side of a lab run (:func:`thinwan.report.qds_run.qds_context`)."""
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
    qds = qds_context(scenario, digests, summary, sim)
    figures.update(qds["figures"])
    run_types = ordered_types(t for d in digests for t in d.summary.get("by_type", {}))
    # The per-type metrics get their own table in the QDS section.
    summary = {k: v for k, v in summary.items() if k != "by_type"}
    return _TEMPLATE.render(
        scenario=scenario,
        version=__version__,
        git_rev=digests[0].meta.get("git_rev", "unknown"),
        summary_rows=summary_rows(summary, scenario),
        runs=summary["runs"],
        run_rows=[_run_row(d, run_types) for d in digests],
        run_types=run_types,
        interactive=any(not math.isnan(d.summary["r_I150"]) for d in digests),
        titles=FIGURE_TITLES,
        figures=script_json(figures),
        figure_names=set(figures),
        plotly_js=plotly_js(),
        plot_script=PLOT_SCRIPT,
        queue=queue_run is not None,
        queue_run=queue_run,
        conn=not conn_run.conn_trace.empty,
        conn_run=conn_run,
        scenario_toml=scenario.to_toml(),
        metas=[(d.meta.get("run", "?"), _meta_json(d.meta)) for d in digests],
        qds=qds,
    )


def write_run_report(
    out: str | Path,
    scenario: Scenario,
    digests: Sequence[RunDigest],
    summary: Mapping[str, Any],
    sim: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``<out>/report.html`` (atomically); returns its path."""
    return write_text_atomic(Path(out) / "report.html", html_report(scenario, digests, summary, sim))


def _run_row(d: RunDigest, types: Sequence[str]) -> dict[str, Any]:
    s = d.summary
    return {
        # QDS: per type, the share of packets within QT (analysis.by_type).
        "by_type": [fmt(s.get("by_type", {}).get(t, {}).get("share_within_qt", math.nan), fmt_pct) for t in types],
        "run": str(d.meta.get("run", "?")),
        "seed": str(d.meta.get("seed", "?")),
        "r_I150": fmt(s["r_I150"], fmt_pct),
        "r_I1000": fmt(s["r_I1000"], fmt_pct),
        "T_I150": fmt(s["T_I150_s"], fmt_seconds),
        "T_I1000": fmt(s["T_I1000_s"], fmt_seconds),
        "timeouts": fmt(s["timeouts_per_conn"], fmt_plain),
        "spurious": fmt(s["spurious_timeouts_per_conn"], fmt_plain),
        "utilisation": fmt(s["utilisation"], fmt_pct),
        "wall": fmt(d.meta.get("wall_s", math.nan), fmt_seconds),
    }


def _meta_json(meta: Mapping[str, Any]) -> str:
    # The config is shown once, as TOML; repeating it per run only adds noise.
    shown = {k: v for k, v in meta.items() if k != "config"}
    return json.dumps(shown, indent=1, default=str)


# ---------------------------------------------------------------------------------------
# Figures of the run report

_KINDS = ((INTERACTIVE, "interactive", "#d62728"), (BULK, "bulk", "#1f77b4"))
# Distinct from the interactive/bulk pair, which every other panel uses.
_COMPONENT_COLORS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _fig_end_to_end(delays: pd.DataFrame, thresholds_ms: Sequence[float]) -> dict[str, Any]:
    data = [
        t
        for kind, label, color in _KINDS
        if (t := ccdf_trace(delays.loc[delays["kind"] == kind, "end_to_end"], label, color)) is not None
    ]
    layout = ccdf_layout(FIGURE_TITLES["end_to_end"] + " (never-read messages count as ∞)", thresholds_ms, 1)
    layout["height"] = 430
    return {"data": data, "layout": layout}


def _fig_components(delays: pd.DataFrame, thresholds_ms: Sequence[float]) -> dict[str, Any]:
    """A 2 × 3 grid: one panel per component (interactive vs bulk), and a last panel with
    every component of interactive messages (which one dominates the tail, Ogawa §7, docs/sources.md)."""
    panels = [(c, f"{c} delay") for c in COMPONENTS] + [(None, "interactive: all components")]
    layout = ccdf_layout(FIGURE_TITLES["components"], thresholds_ms, len(panels), cols=3)
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
            t = ccdf_trace(values, label, color)
            if t is not None:
                # One legend entry per name: the interactive/bulk pair repeats in every panel.
                t.update(axes, legendgroup=label, showlegend=(i == 1 or component is None))
                data.append(t)
                drawn = True
        layout["annotations"].append(panel_title(title, i))
        if not drawn:
            layout["annotations"].append(panel_note("no delay > 0 ms", i))
    return {"data": data, "layout": layout}


def _fig_queue(trace: pd.DataFrame, scenario: Scenario) -> dict[str, Any]:
    data = [line(trace["t"], trace["bytes"] / 1000.0, "queue", "#1f77b4")]
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
        line(trace["t"], trace["cwnd"] / mss, "cwnd", "#1f77b4", step=True),
        line(trace["t"], ssthresh / mss, "ssthresh", "#ff7f0e", step=True),
        line(trace["t"], trace["rto"] * 1000.0, "RTO", "#2ca02c", step=True, axis=2),
        line(trace["t"], trace["srtt"] * 1000.0, "srtt", "#d62728", step=True, axis=2),
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
 .span { color: #666; font-size: 85%; }
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
<tr><th>run</th><th>seed</th>{% if interactive %}<th>r_I150</th><th>r_I1000</th><th>T_I150</th><th>T_I1000</th>{% endif %}
{% for t in run_types %}<th>{{ t }}: RTT ≤ QT</th>{% endfor %}
<th>timeouts/conn</th><th>spurious/conn</th><th>utilisation</th><th>wall time</th></tr>
{% for r in run_rows %}
<tr><td>{{ r.run }}</td><td class="num">{{ r.seed }}</td>{% if interactive %}<td class="num">{{ r.r_I150 }}</td>
<td class="num">{{ r.r_I1000 }}</td><td class="num">{{ r.T_I150 }}</td><td class="num">{{ r.T_I1000 }}</td>{% endif %}
{% for v in r.by_type %}<td class="num">{{ v }}</td>{% endfor %}
<td class="num">{{ r.timeouts }}</td><td class="num">{{ r.spurious }}</td>
<td class="num">{{ r.utilisation }}</td><td class="num">{{ r.wall }}</td></tr>
{% endfor %}
</table>

{% if qds.present %}
<h2 id="qds">Per application type (QDS)</h2>
<p>Every first transmission of a data segment in the {{ scenario.scenario.duration_s }}-s window, its
RTT exact (server transmission → the covering ACK back at the server; docs/records.md "packet_rtt").
QT: the type's QoE threshold ([qds] qt_&lt;type&gt;_ms). Mean over {{ runs }} run(s){% if runs > 1 %}, ± sd over
runs below{% endif %}; RTT: mean ± sd over packets. A packet never acknowledged counts as beyond every threshold.</p>
<table class="bytype">
<tr><th>type</th><th>QT</th><th>packet RTT</th><th>RTT ≤ QT</th><th>RTT ≤ 1.2·QT</th><th>throughput</th>
<th>packets / run</th><th>never acked / run</th></tr>
{% for r in qds.rows %}
<tr><td>{{ r.type }}</td><td class="num">{{ r.qt }}</td>
<td class="num">{{ r.rtt }}{% if runs > 1 %}<br><span class="span">{{ r.rtt_sd_runs }}</span>{% endif %}</td>
<td class="num">{{ r.within_qt }}{% if runs > 1 %}<br><span class="span">{{ r.within_qt_sd }}</span>{% endif %}</td>
<td class="num">{{ r.within_12qt }} <span class="span">(≤ {{ r.qt12 }})</span>{% if runs > 1 %}<br><span class="span">{{ r.within_12qt_sd }}</span>{% endif %}</td>
<td class="num">{{ r.throughput }}{% if runs > 1 %}<br><span class="span">{{ r.throughput_sd }}</span>{% endif %}</td>
<td class="num">{{ r.packets }}</td><td class="num">{{ r.unacked }}</td></tr>
{% endfor %}
</table>
{% if qds.sim %}
<h3>Lab and simulator side by side (Table I)</h3>
<p>The same scenario and seeds ({{ qds.sim.seeds | join(", ") }}) in the simulator, means over its
{{ qds.sim.runs }} run(s), next to this lab run's (docs/qds-lab.md).</p>
<table class="bytype">
<tr><th rowspan="2">type</th><th rowspan="2">QT</th><th colspan="2">RTT ≤ QT</th><th colspan="2">RTT ≤ 1.2·QT</th>
<th colspan="2">mean packet RTT</th><th colspan="2">throughput</th></tr>
<tr><th>simulator</th><th>lab</th><th>simulator</th><th>lab</th><th>simulator</th><th>lab</th><th>simulator</th><th>lab</th></tr>
{% for r in qds.sim.rows %}
<tr><td>{{ r.type }}</td><td class="num">{{ r.qt }}</td>
<td class="num">{{ r.within_qt_sim }}</td><td class="num">{{ r.within_qt_lab }}</td>
<td class="num">{{ r.within_12qt_sim }}</td><td class="num">{{ r.within_12qt_lab }}</td>
<td class="num">{{ r.rtt_sim }}</td><td class="num">{{ r.rtt_lab }}</td>
<td class="num">{{ r.throughput_sim }}</td><td class="num">{{ r.throughput_lab }}</td></tr>
{% endfor %}
</table>
{% endif %}
{% if "qds_rtt_ccdf" in figure_names %}
<h3>{{ qds.titles.rtt_ccdf }}</h3>
<p>All runs pooled. Dashed vertical: each type's QT, dotted: 1.2·QT, in the type's colour.{% if qds.sim %}
Solid curves: the lab; dashed curves: the simulator (mean of its runs' CCDFs).{% endif %}</p>
<div class="plot" id="fig-qds_rtt_ccdf"></div>
{% endif %}
{% if qds.loop %}
<h3>The QDS control loop</h3>
<p>{{ qds.variant }} controller, α = {{ qds.alpha }}, β = {{ qds.beta }}, types from the
{% if qds.oracle %}true labels (oracle){% else %}classifier{% endif %}. Class 0 has the
smallest delay budget (most urgent). A flow appears once the monitor has an RTT estimate for it.</p>
{% if qds.loop_run is not none %}
<h4>{{ qds.titles.flow_classes }} (run {{ qds.loop_run }})</h4>
<div class="plot" id="fig-qds_flow_classes"></div>
<h4>{{ qds.titles.class_load }} (run {{ qds.loop_run }})</h4>
<p>Stacked over classes (colours as in the heat map); {% if qds.binned %}means over 1-s intervals{% else %}every
control period{% endif %}. The class rates are the controller's plan: a class with no queued packet lends its rate
to the others (HTB borrowing).</p>
<div class="plot" id="fig-qds_class_load"></div>
<h4>{{ qds.titles.confusion }}</h4>
{% if qds.oracle %}
<p>Oracle mode: the controller used every flow's true type (accuracy 100 % by construction).</p>
{% else %}
<p>Classifier accuracy: <strong>{{ "%.1f" | format(qds.classifier.accuracy * 100) }} %</strong> of
{{ "{:,}".format(qds.classifier.rows) }} (period, flow) decisions, all runs.</p>
{% endif %}
<div class="plot" id="fig-qds_confusion"></div>
{% else %}
<p class="missing">No control-loop records (qds_flows) in these runs.</p>
{% endif %}
{% endif %}
{% endif %}

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
{{ plot_script | safe }}
</script>
</body></html>
"""
)

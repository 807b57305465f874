"""The ``thinwan validate-model`` page: replay vs fitted model, side by side.

Left: the CCDF of interactive messages' end-to-end delay (gap-rule labels, the same for
both runs); right: of all messages. Then r_I150 / r_I1000 of both, and links to each
run's own report.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from .. import __version__
from ..analysis.metrics import thresholds_s
from ..execute.validate_model import KINDS, Validation
from ..records.schema import write_text_atomic
from .figures import PLOT_SCRIPT, ccdf_layout, ccdf_trace, panel_title, plotly_js, script_json
from .text import fmt, fmt_pct

__all__ = ["validate_page", "write_validate_page", "validate_summary"]

COLORS = {"replay": "#000000", "model": "#d62728"}
LABELS = {"replay": "capture replayed", "model": "fitted model"}


def _rows(v: Validation) -> list[dict[str, str]]:
    doc = v.document()
    rows = []
    for kind in KINDS:
        d = doc[kind]
        runs = d["runs"]
        rows.append(
            {
                "what": f"{LABELS[kind]} (gap-rule labels)",
                "r_I150": fmt(d["r_I150"], fmt_pct),
                "r_I1000": fmt(d["r_I1000"], fmt_pct),
                "interactive": f"{sum(r['interactive_messages'] for r in runs):,} / {sum(r['messages'] for r in runs):,}",
            }
        )
    s = doc["model"]["summary"]
    rows.append(
        {
            "what": "fitted model (the source's own labels, as thinwan run reports)",
            "r_I150": fmt(s["r_I150"], fmt_pct),
            "r_I1000": fmt(s["r_I1000"], fmt_pct),
            "interactive": f"agreement of the labels: {fmt(_agreement(doc), fmt_pct)}",
        }
    )
    return rows


def _agreement(doc: dict[str, Any]) -> float:
    runs = doc["model"]["runs"]
    n = sum(r["messages"] for r in runs)
    return sum(r["label_agreement"] * r["messages"] for r in runs) / n if n else math.nan


def validate_page(v: Validation) -> str:
    """The page's HTML (self-contained)."""
    sc = v.scenarios["model"]
    thresholds_ms = [t * 1000.0 for t in thresholds_s(sc)]
    inter = {k: pd.concat([m["interactive_delays_s"] for m in v.metrics[k]], ignore_index=True) for k in KINDS}
    every = {k: pd.concat([d.delays["end_to_end"] for d in v.results[k].digests], ignore_index=True) for k in KINDS}
    data = []
    for panel, series in ((1, inter), (2, every)):
        for k in KINDS:
            t = ccdf_trace(series[k], LABELS[k], COLORS[k])
            if t is not None:
                t.update(xaxis=f"x{panel if panel > 1 else ''}", yaxis=f"y{panel if panel > 1 else ''}")
                t["showlegend"] = panel == 1
                data.append(t)
    layout = ccdf_layout("End-to-end delay, replay vs model (never-read messages count as ∞)", thresholds_ms, 2, 2)
    layout["annotations"] += [
        panel_title("interactive messages (gap rule)", 1),
        panel_title("all messages", 2),
    ]
    layout["height"] = 500
    layout["legend"] = {"orientation": "h", "y": -0.2}
    layout["margin"] = {"t": 60, "b": 90}
    return _TEMPLATE.render(
        v=v,
        sc=sc,
        version=__version__,
        rows=_rows(v),
        capture=Path(v.capture).name,
        seeds=v.results["model"].document["seeds"],
        figures=script_json({"ccdf": {"data": data, "layout": layout}}),
        plotly_js=plotly_js(),
        plot_script=PLOT_SCRIPT,
    )


def write_validate_page(out: str | Path, v: Validation) -> Path:
    """Write ``<out>/report.html``; returns its path."""
    return write_text_atomic(Path(out) / "report.html", validate_page(v))


def validate_summary(v: Validation) -> str:
    """What ``thinwan validate-model`` prints."""
    sc = v.scenarios["model"]
    lines = [
        f"{Path(v.capture).name} vs {sc.name.removesuffix('-model')}: {sc.topology.pairs} pairs, "
        f"{sc.scenario.duration_s:g} s, {sc.scenario.runs} run(s), gap rule {v.gap_ms:g} ms",
        f"{'':64} {'r_I150':>8} {'r_I1000':>8}",
    ]
    for r in _rows(v):
        lines.append(f"{r['what']:64} {r['r_I150']:>8} {r['r_I1000']:>8}   {r['interactive']}")
    return "\n".join(lines)


_TEMPLATE = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>thinwan: {{ capture }} replayed vs its model</title>
<style>
 body { font-family: system-ui, sans-serif; max-width: 1300px; margin: 2em auto; padding: 0 1em; }
 table { border-collapse: collapse; margin: 1em 0; }
 td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; }
 td.num { text-align: right; font-variant-numeric: tabular-nums; }
 .plot { width: 100%; }
</style></head>
<body>
<h1>{{ capture }}: replayed vs fitted model</h1>
<p>thinwan {{ version }}. The same network ({{ sc.topology.pairs }} pairs, bottleneck
{{ sc.topology.bottleneck_rate_mbps }} Mbit/s, {{ sc.topology.bottleneck_delay_ms }} ms one way,
queue {{ sc.queue.discipline }}), {{ "%g" | format(sc.scenario.duration_s) }} s, seeds {{ seeds | join(", ") }}:
once each server replays one of the capture's connections (<code>traffic.model = "pcap"</code>),
once it runs the fitted thin-client source. Messages of both runs are labelled by the
gap rule at {{ v.gap_ms }} ms (a write less than that after the previous one of its
connection joins its flow; flows of one write are interactive), as the fit labelled the
capture; thresholds {{ "%.0f" | format((0.15 - sc.topology.bottleneck_delay_ms / 1000) * 1000) }} ms and
{{ "%.0f" | format((1.0 - sc.topology.bottleneck_delay_ms / 1000) * 1000) }} ms (Ogawa §2).</p>

<table>
<tr><th></th><th>r_I150</th><th>r_I1000</th><th>interactive / all messages</th></tr>
{% for r in rows %}
<tr><td>{{ r.what }}</td><td class="num">{{ r.r_I150 }}</td><td class="num">{{ r.r_I1000 }}</td><td>{{ r.interactive }}</td></tr>
{% endfor %}
</table>

<div id="fig-ccdf" class="plot"></div>

<p>Each run's own report: <a href="replay/report.html">replay</a>, <a href="model/report.html">model</a>
(there the replay's messages are all labelled interactive, as <code>traffic.model = "pcap"</code> writes them).</p>
<script>{{ plotly_js | safe }}</script>
<script>
const FIGURES = {{ figures | safe }};
{{ plot_script | safe }}
</script>
</body></html>
"""
)

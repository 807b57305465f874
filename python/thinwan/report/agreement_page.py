"""The ``thinwan validate`` page: the agreement table of simulator vs lab, with verdicts.

One table (metric, sim, lab, relative difference, tolerance, verdict; green = within the
tolerance, red = not), the definitions, and links to each substrate's own run report
(``sim/report.html``, ``lab/report.html``), which carry the figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from .. import __version__
from ..records.schema import write_text_atomic
from .text import not_compared_notes, tolerance_label, validation_rows

__all__ = ["agreement_page", "write_agreement_page"]


def agreement_page(doc: Mapping[str, Any], runs: int) -> str:
    """The page's HTML (self-contained) for a ``validate`` document."""
    rows = [dict(zip(("metric", "sim", "lab", "rel_diff", "tolerance", "verdict"), r)) for r in validation_rows(doc)]
    judged = [a["ok"] for a in doc["agreement"].values() if a["ok"] is not None]
    return _TEMPLATE.render(
        doc=doc,
        runs=runs,
        rows=rows,
        version=__version__,
        tolerances=[(k, tolerance_label(v)) for k, v in doc.get("tolerance", {}).items()],
        within=sum(judged),
        notes=not_compared_notes(doc),
        judged=len(judged),
    )


def write_agreement_page(out: str | Path, doc: Mapping[str, Any], runs: int) -> Path:
    """Write ``<out>/report.html``; returns its path."""
    return write_text_atomic(Path(out) / "report.html", agreement_page(doc, runs))


_TEMPLATE = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>thinwan validate: {{ doc.scenario }}, simulator vs lab</title>
<style>
 body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; }
 table { border-collapse: collapse; margin: 1em 0; }
 td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; }
 th { background: #f4f4f4; }
 td.num { text-align: right; font-variant-numeric: tabular-nums; }
 td.ok { background: #d8f0d8; color: #155215; font-weight: 600; }
 td.differs { background: #f8d7d7; color: #8a1414; font-weight: 600; }
 td.undecided { background: #fff3cd; color: #6b5200; font-weight: 600; }
 tr.unjudged td { color: #666; }
</style></head>
<body>
<h1>{{ doc.scenario }}: simulator vs lab</h1>
<p>thinwan {{ version }}. The scenario file ran unchanged in the simulator and on real Linux
TCP in the namespace lab, {{ runs }} run(s) each with the same seeds.
<strong>{{ within }} of {{ judged }}</strong> judged metrics agree within their tolerance.</p>
<p>Values are means over runs, except the interactive delay p50 and p99, which are taken
over all runs' interactive messages together. r_I150 and r_I1000 count events: their
verdict is the 95 % interval of the ratio of the two event rates, and "undecided" when that
interval crosses the tolerance's edge (too few events: more runs decide).
rel. diff = (sim − lab) / lab (lab = 0: 0 when sim = 0 too, else ±∞).
A relative tolerance ±t holds when |rel. diff| ≤ t; a factor ×f when lab/f ≤ sim ≤ lab·f.
Tolerances: {% for k, t in tolerances %}<code>{{ k }}</code> {{ t }}{{ ", " if not loop.last }}{% endfor %}
(<code>--tolerance METRIC=SPEC</code> changes them; docs/lab.md "Agreement").</p>
<table>
<tr><th>metric</th><th>sim</th><th>lab</th><th>rel. diff</th><th>tolerance</th><th>verdict</th></tr>
{% for r in rows %}
{% set cls = r.verdict.split(" ")[0] %}
{% set judged = cls in ("ok", "differs", "undecided") %}
<tr{% if not judged %} class="unjudged"{% endif %}><td><code>{{ r.metric }}</code></td>
<td class="num">{{ r.sim }}</td><td class="num">{{ r.lab }}</td><td class="num">{{ r.rel_diff }}</td>
<td class="num">{{ r.tolerance }}</td><td{% if judged %} class="{{ cls }}"{% endif %}>{{ r.verdict }}</td></tr>
{% endfor %}
</table>
{% for why, keys in notes %}
<p>¹ {% for k in keys %}<code>{{ k }}</code>{{ ", " if not loop.last }}{% endfor %}: {{ why }}.</p>
{% endfor %}
<p>Each substrate's own report: <a href="sim/report.html">simulator</a>,
<a href="lab/report.html">lab</a>. The numbers: <code>validate.json</code>
(<code>agreement</code>, <code>tolerance</code>, <code>not_compared</code>).</p>
</body></html>
"""
)

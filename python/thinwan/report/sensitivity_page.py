"""The "Sensitivity" section of the sweep report (``[report] sensitivity``, docs/sweeps.md):
per metric a tornado chart (one horizontal bar per modelling choice, spanning the Δ from
the base over the choice's values, the largest on top; one panel per group, e.g. buffer),
and the ranked table. Also the same table as text for the terminal.

Plotting only consumes results: the ``sensitivity`` part of the sweep document
(:func:`thinwan.analysis.sensitivity.sensitivity_ranking`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jinja2

from ..config.sweepfile import label
from .figures import PALETTE, grid_layout, panel_title

__all__ = ["SENSITIVITY_TITLE", "sensitivity_context", "sensitivity_text"]

SENSITIVITY_TITLE = "Sensitivity: which results hang on which choice"
# How each metric's Δ is shown: shares in percentage points, counts as they are.
_UNITS = {"r_I150": "percentage points", "r_I1000": "percentage points", "timeouts_per_conn": "timeouts per connection"}


def sensitivity_context(document: Mapping[str, Any]) -> dict[str, Any]:
    """``{"present": False}`` without a ranking; else the section's HTML and figure specs
    (``sens_<metric>``; the HTML has their ``fig-…`` elements)."""
    sens = document.get("sensitivity")
    if not sens:
        return {"present": False, "html": "", "figures": {}}
    metrics = sens["metrics"]
    figures = {f"sens_{m}": _tornado(sens, m) for m in metrics}
    tables = [
        {
            "title": _group_title(g["params"]),
            "base": [(m, _fmt_value(m, g["base"][m])) for m in metrics],
            "rows": [
                {
                    "rank": row["rank"],
                    "choice": row["choice"],
                    "labels": ", ".join(map(label, row["labels"])),
                    "cells": [_effect_cells(m, row["metrics"][m]) for m in metrics],
                }
                for row in g["choices"]
            ],
        }
        for g in sens["groups"]
    ]
    html = _SECTION.render(sens=sens, metrics=metrics, tables=tables, title=SENSITIVITY_TITLE, figures=list(figures))
    return {"present": True, "html": html, "figures": figures}


def sensitivity_text(document: Mapping[str, Any]) -> str:
    """The ranked table for the terminal, one block per group ("" without a ranking)."""
    sens = document.get("sensitivity")
    if not sens:
        return ""
    metrics = sens["metrics"]
    lines = [
        f"sensitivity (axis {sens['axis']}, base {sens['base']!r}): largest Δ from the base over each choice's values"
    ]
    for g in sens["groups"]:
        lines.append("")
        lines.append(
            _group_title(g["params"]) + ": base " + ", ".join(f"{m} {_fmt_value(m, g['base'][m])}" for m in metrics)
        )
        head = ["rank", "choice", *metrics]
        rows = [head] + [
            [str(row["rank"]), row["choice"], *(_text_cell(_effect_cells(m, row["metrics"][m])) for m in metrics)]
            for row in g["choices"]
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------


def _tornado(sens: Mapping[str, Any], metric: str) -> dict[str, Any]:
    """One panel per group: per choice a bar from the smallest to the largest Δ over its
    values (0, the base, always inside), a dot per value; largest |Δ| on top."""
    groups = sens["groups"]
    scale = 100.0 if metric.startswith("r_") else 1.0
    layout = grid_layout(f"Δ {metric} from the base, per choice ({_UNITS.get(metric, metric)})", 1, len(groups), 0.3)
    data: list[dict[str, Any]] = []
    for i, g in enumerate(groups, start=1):
        suffix = "" if i == 1 else str(i)
        # Plotly draws the first category at the bottom: least sensitive first.
        rows = sorted(g["choices"], key=lambda r: (r["metrics"][metric]["abs_delta"] or 0.0, -r["rank"]))
        names, lo, hi, dots_x, dots_y, dots_text = [], [], [], [], [], []
        for row in rows:
            e = row["metrics"][metric]
            deltas = [(lab, d * scale) for lab, d in e["deltas"].items() if d is not None]
            names.append(row["choice"])
            lo.append(min([0.0, *(d for _, d in deltas)]))
            hi.append(max([0.0, *(d for _, d in deltas)]))
            for lab, d in deltas:
                dots_x.append(d)
                dots_y.append(row["choice"])
                dots_text.append(f"{label(lab)}: {d:+.4g}")
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "y": names,
                "x": [h - lo_ for lo_, h in zip(lo, hi)],
                "base": lo,
                "marker": {"color": PALETTE[0], "opacity": 0.55},
                "name": "range over values",
                "showlegend": False,
                "hoverinfo": "skip",
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": dots_x,
                "y": dots_y,
                "text": dots_text,
                "hoverinfo": "text",
                "marker": {"color": PALETTE[3], "size": 7},
                "name": "one value",
                "showlegend": False,
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
            }
        )
        unit = " (pp)" if metric.startswith("r_") else ""
        layout[f"xaxis{suffix}"].update(
            {"title": {"text": f"Δ {metric}{unit}"}, "zeroline": True, "zerolinecolor": "#444"}
        )
        layout[f"yaxis{suffix}"].update({"type": "category", "automargin": True, "tickfont": {"size": 11}})
        layout["annotations"].append(panel_title(_group_title(g["params"]), i))
    n = max((len(g["choices"]) for g in groups), default=1)
    layout["height"] = 140 + 26 * n
    layout["margin"] = {"t": 70, "b": 50, "l": 10}
    return {"data": data, "layout": layout}


def _group_title(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{a}={label(v)}" for a, v in params.items()) or "all points"


def _fmt_value(metric: str, v: Mapping[str, float | None]) -> str:
    f = _fmt_pct if metric.startswith("r_") else _fmt_num
    mean = "n/a" if v["mean"] is None else f(v["mean"])
    if v["min"] is None or v["max"] is None:
        return mean
    return f"{mean} ({f(v['min'])} – {f(v['max'])})"


def _effect_cells(metric: str, e: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(Δ ± its standard error, relative Δ and "noise" when |Δ| < 2 se, at which value, rank) as text."""
    if e["delta"] is None:
        return ("n/a", "", "", "–")
    scale, unit = (100.0, " pp") if metric.startswith("r_") else (1.0, "")
    se = e.get("se")
    pm = "" if se is None else f" ± {se * scale:.2g}"
    delta = f"{e['delta'] * scale:+.3g}{pm}{unit}"
    rel = "n/a" if e["rel_delta"] is None else f"{e['rel_delta'] * 100:+.0f} %"
    rel = f"({rel}, noise)" if e.get("noise") else f"({rel})"
    return (delta, rel, label(e["at"]), str(e["rank"]))


def _text_cell(cells: tuple[str, str, str, str]) -> str:
    delta, rel, at, _ = cells
    return f"{delta} {rel} @{at}" if at else delta


def _fmt_pct(v: float) -> str:
    return f"{v * 100:.3g} %"


def _fmt_num(v: float) -> str:
    return f"{v:.3g}"


_SECTION = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
    """<h2 id="sensitivity">{{ title }}</h2>
<p>Each choice of the one-at-a-time axis <code>{{ sens.axis }}</code> (a choice is the set of keys its bundles
set) is varied alone from the base point <code>{{ sens.base }}</code>. Δ = mean over runs at the value minus the
base's, the same seeds at every point; the effect of a choice is its largest |Δ| over its values (relative to the
base in brackets; n/a when the base is 0). Choices are ranked per metric by |Δ| (equal |Δ| share a rank) and
ordered by their mean rank. ± is the standard error of Δ from the paired per-run differences (same seed);
"noise": |Δ| is below two standard errors. The base's min – max over runs is given too. Charts: per
choice a bar over the range of Δ across its values (the base, Δ = 0, always inside), a dot per value (hover for
its label), the most sensitive choice on top.</p>
{% for name in figures %}<div class="plot" id="fig-{{ name }}"></div>
{% endfor %}
{% for t in tables %}
<h3>{{ t.title }}</h3>
<p>Base: {% for m, v in t.base %}{{ m }} {{ v }}{% if not loop.last %}; {% endif %}{% endfor %}.</p>
<table>
<tr><th rowspan="2">rank</th><th rowspan="2">choice</th><th rowspan="2">values</th>
{% for m in metrics %}<th colspan="2">{{ m }}</th>{% endfor %}</tr>
<tr>{% for m in metrics %}<th>largest Δ, at</th><th>rank</th>{% endfor %}</tr>
{% for r in t.rows %}
<tr><td class="num">{{ r.rank }}</td><td><code>{{ r.choice }}</code></td><td class="span">{{ r.labels }}</td>
{% for delta, rel, at, rank in r.cells %}<td class="num"><span style="white-space: nowrap">{{ delta }}</span><br><span class="span">{{ rel }}{% if at %} at
{{ at }}{% endif %}</span></td><td class="num">{{ rank }}</td>{% endfor %}</tr>
{% endfor %}
</table>
{% endfor %}
"""
)

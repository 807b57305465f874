"""The QDS part of the sweep report (issue 18, "Report"): the source's Table I (per
setting and discipline, per application type: share of packets within QT and 1.2·QT,
RTT mean ± sd, throughput), the shares as grouped bars (disciplines side by side), the
per-type RTT CCDFs per discipline, and the effect of the controller's α and β.

Plotting only consumes results: the points' ``summary.by_type`` of the sweep document
(means over runs, and the sd over runs, :func:`thinwan.analysis.by_type.summarize_by_type_runs`)
and, for the CCDFs, the dataset's per-run RTT CCDFs on the fixed grid
(``ccdf_rtt_<type>`` columns, :func:`thinwan.analysis.aggregate.task_result`). A lab
sweep of middlebox points (``thinwan sweep --lab``) also carries, per point, the
simulator's side with the same seeds (``document["sim"]``,
:func:`thinwan.execute.labruns.sim_companion`): Table I then has the simulator's and the
lab's shares side by side, and the CCDFs the simulator's curves dashed over the lab's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..analysis.aggregate import CCDF_GRID_S, point_entries
from ..config.sweepfile import Point, Sweep, label
from .figures import PALETTE, curve_trace, grid_layout, panel_note, panel_title, threshold_lines
from .qds_run import TYPE_COLORS, ordered_types, side_by_side_rows, type_rows
from .text import display_axes, short_axis

__all__ = ["QDS_SWEEP_TITLES", "qds_sweep_context"]

QDS_SWEEP_TITLES = {
    "table": "Per application type (Table I)",
    "bars": "Share of packets within QT and 1.2·QT per type",
    "rtt_ccdf": "CCDF of packet RTT per type and discipline (mean over runs)",
    "side_by_side": "Lab and simulator side by side (Table I)",
    "alpha_beta": "Effect of α and β: share of packets within QT",
}
# Keys that name the compared discipline and the controller's parameters.
_DISCIPLINE = "queue.discipline"
_ALPHA, _BETA = "qds.alpha", "qds.beta"


def qds_sweep_context(
    sweep: Sweep, document: Mapping[str, Any], ccdfs: Mapping[str, Mapping[str, np.ndarray]]
) -> dict[str, Any]:
    """The QDS part of the sweep page: ``{"present": False}`` when no point has per-type
    metrics; otherwise the Table I rows, figure specs and which figures exist."""
    summaries = {p["id"]: p["summary"] for p in point_entries(document)}
    tables = {pid: s.get("by_type") or {} for pid, s in summaries.items()}
    sim = document.get("sim") or {}
    types = _types(tables)
    if not types:
        return {"present": False, "figures": {}}
    group_axis = _axis_setting(sweep, _DISCIPLINE)
    # The source's Table I: per setting, the disciplines one under the other.
    columns = [a for a in display_axes(sweep) if a != group_axis] + ([group_axis] if group_axis else [])
    pos = {a.name: i for i, a in enumerate(sweep.axes)}
    table = []
    for p in sorted(sweep.points, key=lambda p: tuple(p.index[pos[a]] for a in columns)):
        rows = {r["type"]: r for r in type_rows(tables.get(p.id, {}))}
        table.append(([label(p.params[a]) for a in columns], [rows.get(t) for t in types]))
    side = []
    if sim:
        for p in sorted(sweep.points, key=lambda p: tuple(p.index[pos[a]] for a in columns)):
            twin = sim.get(p.id)
            rows = {r["type"]: r for r in side_by_side_rows(twin["by_type"], tables.get(p.id, {}))} if twin else {}
            side.append(([label(p.params[a]) for a in columns], [rows.get(t) for t in types]))
    figures: dict[str, Any] = {}
    if group_axis is not None:
        figures["qds_bars"] = _fig_bars(sweep, group_axis, tables, types)
        ccdf_groups = _ccdf_groups(sweep, group_axis)
        if any(f"ccdf_rtt_{t}" in c for c in ccdfs.values() for t in types):
            figures["qds_rtt_ccdf"] = _fig_rtt_ccdf(sweep, group_axis, ccdf_groups, ccdfs, tables, types, sim)
    alpha, beta = _axis_setting(sweep, _ALPHA), _axis_setting(sweep, _BETA)
    if alpha is not None and beta is not None:
        figures["qds_alpha_beta"] = _fig_alpha_beta(sweep, alpha, beta, tables, types)
    qt = {t: next((tb[t]["qt_ms"] for tb in tables.values() if t in tb), math.nan) for t in types}
    return {
        "present": True,
        "titles": QDS_SWEEP_TITLES,
        "types": [(t, _fmt_ms(qt[t]), _fmt_ms(1.2 * qt[t])) for t in types],
        "axis_headers": [short_axis(sweep, a) for a in columns],
        "table": table,
        "runs_sd": sweep.runs > 1,
        "lab": sweep.substrate == "lab",
        "side_by_side": side,
        "sim_runs": next((int(s.get("runs", 0)) for s in sim.values()), 0),
        "group_axis": group_axis,
        "alpha_beta": (alpha, beta) if "qds_alpha_beta" in figures else None,
        "figures": figures,
    }


def _types(tables: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return ordered_types(t for tb in tables.values() for t in tb)


def _axis_setting(sweep: Sweep, key: str) -> str | None:
    """The axis that varies ``key`` (named after it or setting it), or None."""
    return next((a.name for a in sweep.axes if a.name == key or key in a.keys), None)


def _fmt_ms(v: float) -> str:
    return f"{v:g} ms" if math.isfinite(v) else "n/a"


def _metric(tables: Mapping[str, Any], p: Point, t: str, key: str) -> float:
    v = tables.get(p.id, {}).get(t, {}).get(key)
    return float(v) if v is not None else math.nan


def _other_combinations(sweep: Sweep, exclude: Sequence[str]) -> list[dict[str, Any]]:
    """Every combination of the labels of the axes not in ``exclude`` (display order)."""
    names = [a for a in display_axes(sweep) if a not in exclude]
    labels = [sweep.axis(a).labels for a in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*labels)]


def _matches(p: Point, fixed: Mapping[str, Any]) -> bool:
    return all(p.params[a] == v for a, v in fixed.items())


def _combo_title(sweep: Sweep, combo: Mapping[str, Any]) -> str:
    return ", ".join(f"{short_axis(sweep, a)}={label(v)}" for a, v in combo.items()) or "all points"


# ---------------------------------------------------------------------------------------
# Figures


def _fig_bars(sweep: Sweep, group_axis: str, tables: Mapping[str, Any], types: Sequence[str]) -> dict[str, Any]:
    """Rows: within QT, within 1.2·QT; one panel per combination of the other axes; in
    each, the types on x and one bar per discipline (error bars: sd over runs)."""
    combos = _other_combinations(sweep, [group_axis])
    metrics = (("share_within_qt", "RTT ≤ QT (%)"), ("share_within_1_2qt", "RTT ≤ 1.2·QT (%)"))
    layout = grid_layout(QDS_SWEEP_TITLES["bars"], len(metrics), len(combos), gap_y=0.18)
    layout.update(height=300 * len(metrics) + 120, barmode="group")
    layout["legend"] = {"title": {"text": short_axis(sweep, group_axis)}}
    data = []
    groups = sweep.axis(group_axis).labels
    for row, (key, title) in enumerate(metrics):
        for col, combo in enumerate(combos):
            i_panel = row * len(combos) + col + 1
            suffix = "" if i_panel == 1 else str(i_panel)
            for g, group in enumerate(groups):
                point = next((p for p in sweep.points if _matches(p, {**combo, group_axis: group})), None)
                if point is None:
                    continue
                y = [_metric(tables, point, t, key) * 100 for t in types]
                sd = [_metric(tables, point, t, f"{key}_runs_sd") * 100 for t in types]
                data.append(
                    {
                        "type": "bar",
                        "name": label(group),
                        "x": list(types),
                        "y": [v if math.isfinite(v) else None for v in y],
                        "error_y": {"type": "data", "array": [v if math.isfinite(v) else None for v in sd]},
                        "marker": {"color": PALETTE[g % 10]},
                        "legendgroup": label(group),
                        "showlegend": i_panel == 1,
                        "xaxis": f"x{suffix}",
                        "yaxis": f"y{suffix}",
                    }
                )
            layout[f"yaxis{suffix}"].update(title={"text": title}, range=[0, 105])
            if row == 0:
                layout["annotations"].append(panel_title(_combo_title(sweep, combo), i_panel))
    return {"data": data, "layout": layout}


def _ccdf_groups(sweep: Sweep, group_axis: str) -> list[dict[str, Any]]:
    return _other_combinations(sweep, [group_axis])


def _fig_rtt_ccdf(
    sweep: Sweep,
    group_axis: str,
    combos: Sequence[Mapping[str, Any]],
    ccdfs: Mapping[str, Mapping[str, np.ndarray]],
    tables: Mapping[str, Any],
    types: Sequence[str],
    sim: Mapping[str, Any],
) -> dict[str, Any]:
    """Rows: combinations of the other axes; columns: types; one line per discipline,
    the type's QT (dashed) and 1.2·QT (dotted); with ``sim`` (a lab sweep) the
    simulator's curve of each discipline dashed in its colour."""
    grid_ms = CCDF_GRID_S * 1000.0
    layout = grid_layout(QDS_SWEEP_TITLES["rtt_ccdf"], len(combos), len(types), gap_x=0.08, gap_y=0.16)
    layout["height"] = 330 * len(combos) + 120
    layout["legend"] = {"title": {"text": short_axis(sweep, group_axis)}}
    groups = sweep.axis(group_axis).labels
    # From 1 ms (below any path's RTT) to just past the longest RTT of any curve: the grid
    # spans 0.1 ms – 100 s, most of it flat at 1 or 0.
    # From just below the shortest RTT to just past the longest of any curve: the grid
    # spans 0.1 ms – 100 s, most of it flat at 1 or 0.
    curves = [np.asarray(c) for cs in ccdfs.values() for k, c in cs.items() if k.startswith("ccdf_rtt_")]
    shortest = min((grid_ms[c < 0.999].min() for c in curves if (c < 0.999).any()), default=1.0)
    longest = max((grid_ms[c > 0].max() for c in curves if (c > 0).any()), default=1000.0)
    x_range = [math.log10(shortest) - 0.3, math.log10(longest) + 0.1]
    data = []
    for row, combo in enumerate(combos):
        for col, t in enumerate(types):
            i_panel = row * len(types) + col + 1
            suffix = "" if i_panel == 1 else str(i_panel)
            drawn = False
            qt = math.nan
            for g, group in enumerate(groups):
                point = next((p for p in sweep.points if _matches(p, {**combo, group_axis: group})), None)
                curve = ccdfs.get(point.id, {}).get(f"ccdf_rtt_{t}") if point is not None else None
                if point is None or curve is None:
                    continue
                qt = _metric(tables, point, t, "qt_ms") if math.isnan(qt) else qt
                trace = curve_trace(
                    grid_ms,
                    curve,
                    label(group),
                    PALETTE[g % 10],
                    xaxis=f"x{suffix}",
                    yaxis=f"y{suffix}",
                    legendgroup=label(group),
                    showlegend=i_panel == 1,
                )
                if trace is not None:
                    if sim:
                        trace["name"] = f"{label(group)} (lab)"
                    data.append(trace)
                    drawn = True
                twin_curve = sim.get(point.id, {}).get("rtt_ccdf", {}).get(t)
                if twin_curve is not None:
                    twin = curve_trace(
                        grid_ms,
                        np.asarray(twin_curve, dtype=float),
                        f"{label(group)} (simulator)",
                        PALETTE[g % 10],
                        xaxis=f"x{suffix}",
                        yaxis=f"y{suffix}",
                        legendgroup=f"{label(group)}-sim",
                        showlegend=i_panel == 1,
                    )
                    if twin is not None:
                        twin["line"]["dash"] = "dash"
                        data.append(twin)
            layout[f"xaxis{suffix}"].update(
                type="log", title={"text": "packet RTT (ms)"}, exponentformat="power", range=x_range
            )
            layout[f"yaxis{suffix}"].update(type="log", title={"text": "P(RTT > x)"}, exponentformat="power")
            if math.isfinite(qt):
                color = TYPE_COLORS.get(t, "gray")
                threshold_lines(layout, suffix, [qt], color=color, dash="dash")
                threshold_lines(layout, suffix, [1.2 * qt], color=color, dash="dot")
            layout["annotations"].append(panel_title(f"{t}: {_combo_title(sweep, combo)}", i_panel))
            if not drawn:
                layout["annotations"].append(panel_note("no RTT CCDF in these rows", i_panel))
    return {"data": data, "layout": layout}


def _fig_alpha_beta(
    sweep: Sweep, alpha: str, beta: str, tables: Mapping[str, Any], types: Sequence[str]
) -> dict[str, Any]:
    """Columns: types; rows: combinations of the other axes (variant, classifier, …);
    x: α, one line per β (error bars: sd over runs)."""
    combos = _other_combinations(sweep, [alpha, beta])
    layout = grid_layout(
        QDS_SWEEP_TITLES["alpha_beta"], len(combos), len(types), gap_x=0.08, gap_y=0.3 / len(combos) + 0.04
    )
    layout["height"] = 260 * len(combos) + 120
    layout["legend"] = {"title": {"text": "β"}}
    betas = sweep.axis(beta).labels
    # One y range per type, shared by its panels, so that rows compare at a glance.
    y_range = {}
    for t in types:
        shares = [_metric(tables, p, t, "share_within_qt") * 100 for p in sweep.points]
        shares = [v for v in shares if math.isfinite(v)] or [0.0, 100.0]
        pad = max(2.0, 0.08 * (max(shares) - min(shares)))
        y_range[t] = [max(0.0, min(shares) - pad), min(100.0, max(shares) + pad)]
    data = []
    for row, combo in enumerate(combos):
        for col, t in enumerate(types):
            i_panel = row * len(types) + col + 1
            suffix = "" if i_panel == 1 else str(i_panel)
            for b, bv in enumerate(betas):
                points = [p for p in sweep.points if _matches(p, {**combo, beta: bv})]
                points.sort(key=lambda p: float(p.values.get(_ALPHA, p.params[alpha])))
                x = [float(p.values.get(_ALPHA, p.params[alpha])) for p in points]
                y = [_metric(tables, p, t, "share_within_qt") * 100 for p in points]
                sd = [_metric(tables, p, t, "share_within_qt_runs_sd") * 100 for p in points]
                data.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "name": f"β = {label(bv)}",
                        "x": x,
                        "y": [v if math.isfinite(v) else None for v in y],
                        "error_y": {"type": "data", "array": [v if math.isfinite(v) else None for v in sd], "width": 3},
                        "line": {"color": PALETTE[b % 10], "width": 1.5},
                        "marker": {"color": PALETTE[b % 10], "size": 6},
                        "legendgroup": str(b),
                        "showlegend": i_panel == 1,
                        "xaxis": f"x{suffix}",
                        "yaxis": f"y{suffix}",
                    }
                )
            layout[f"xaxis{suffix}"]["title"] = {"text": "α"}
            layout[f"yaxis{suffix}"].update(title={"text": f"{t}: ≤ QT (%)"}, range=y_range[t])
            layout["annotations"].append(panel_title(f"{t}: {_combo_title(sweep, combo)}", i_panel))
    return {"data": data, "layout": layout}

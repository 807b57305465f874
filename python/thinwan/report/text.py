"""Terminal tables: a run's summary, a sweep's comparison, simulator vs lab."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..analysis.aggregate import point_entries
from ..analysis.metrics import thresholds_s
from ..config.scenario import Scenario
from ..config.sweepfile import Point, Sweep, label
from .qds_run import ordered_types

__all__ = [
    "summary_table",
    "summary_rows",
    "comparison_table",
    "display_axes",
    "display_order",
    "TABLE_METRICS",
    "metric_cell",
    "validation_table",
    "validation_rows",
    "not_compared_notes",
    "fmt_rel_diff",
    "tolerance_label",
    "verdict_label",
    "number_or_inf",
    "fmt",
    "fmt_pct",
    "fmt_seconds",
    "fmt_plain",
    "number",
    "short_axis",
]


def summary_table(summary: Mapping[str, Any], scenario: Scenario) -> str:
    """Aligned plain-text table: metric, mean over runs, min–max over runs."""
    header = ("metric", "mean", f"min – max ({summary['runs']} runs)")
    rows = [header, *summary_rows(summary, scenario)]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}".rstrip() for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def fmt_pct(v: float) -> str:
    return f"{v * 100:.3g} %"


def fmt_seconds(v: float) -> str:
    return f"{v:.3g} s"


def fmt_ms(v: float) -> str:
    return f"{v:.1f} ms"


def fmt_plain(v: float) -> str:
    return f"{v:.2f}"


def fmt_count(v: float) -> str:
    return f"{v:,.0f}"


def _summary_metrics(scenario: Scenario) -> list[tuple[str, str, Callable[[float], str]]]:
    t150, t1000 = (f"{t * 1000:g} ms" for t in thresholds_s(scenario))
    return [
        ("r_I150", f"r_I150 (interactive delay > {t150})", fmt_pct),
        ("r_I1000", f"r_I1000 (interactive delay > {t1000})", fmt_pct),
        ("T_I150_s", "T_I150 (mean time between violations)", fmt_seconds),
        ("T_I1000_s", "T_I1000 (mean time between violations)", fmt_seconds),
        ("interactive_delay_p50_ms", "interactive delay, median", fmt_ms),
        ("interactive_delay_p99_ms", "interactive delay, 99th percentile", fmt_ms),
        ("timeouts_per_conn", "timeouts per connection", fmt_plain),
        ("spurious_timeouts_per_conn", "spurious timeouts per connection", fmt_plain),
        ("fast_retransmits_per_conn", "fast retransmits per connection", fmt_plain),
        ("writes_waited_per_conn", "writes taken > 10 ms late, per connection", fmt_plain),
        ("utilisation", "bottleneck utilisation", fmt_pct),
        ("utilisation_interactive", "bottleneck utilisation, interactive", fmt_pct),
        ("messages", "messages", fmt_count),
        ("undelivered", "messages never read", fmt_count),
        ("bottleneck_drops", "bottleneck drops", fmt_count),
        ("bottleneck_marks_ce", "bottleneck CE marks (ECN)", fmt_count),
    ]


def summary_rows(summary: Mapping[str, Any], scenario: Scenario) -> list[tuple[str, str, str]]:
    """(label, mean, min – max) of every summary metric present."""
    rows = []
    for key, name, f in _summary_metrics(scenario):
        if key not in summary:
            continue
        lo, hi = summary["min"][key], summary["max"][key]
        if all(v is None or math.isnan(v) for v in (summary[key], lo, hi)):
            continue  # nothing to say (e.g. no interactive messages in a QDS run)
        rows.append((name, fmt(summary[key], f), f"{fmt(lo, f)} – {fmt(hi, f)}"))
    return rows + by_type_rows(summary.get("by_type", {}))


def by_type_rows(table: Mapping[str, Mapping[str, float]]) -> list[tuple[str, str, str]]:
    """(label, mean, ± sd over runs) of the per-application-type metrics (QDS)."""
    rows = []
    for t in ordered_types(table):
        m = table[t]
        qt = m.get("qt_ms", math.nan)
        for key, name, f in (
            ("rtt_mean_ms", "packet RTT, mean", fmt_ms),
            ("rtt_sd_ms", "packet RTT, sd", fmt_ms),
            ("share_within_qt", f"packets with RTT ≤ QT ({qt:g} ms)", fmt_pct),
            ("share_within_1_2qt", f"packets with RTT ≤ 1.2·QT ({1.2 * qt:g} ms)", fmt_pct),
            ("throughput_mbps", "throughput, Mbit/s", fmt_plain),
        ):
            if key in m:
                sd = m.get(f"{key}_runs_sd", math.nan)
                rows.append((f"{t}: {name}", fmt(m[key], f), f"± {fmt(sd, f)} (sd over runs)"))
    return rows


def fmt(v: float | None, f: Callable[[float], str]) -> str:
    """``f(v)``, or "n/a" for a missing number and "∞" for an infinite one."""
    if v is None or math.isnan(v):
        return "n/a"
    return "∞" if math.isinf(v) else f(v)


# ---------------------------------------------------------------------------------------
# A sweep's comparison table (thresholds follow each point's WAN delay t0: 150 ms − t0
# and 1000 ms − t0, analysis.metrics.thresholds_s)

TABLE_METRICS: tuple[tuple[str, str], ...] = (
    ("r_I150", "r_I150"),
    ("r_I1000", "r_I1000"),
    ("T_I150_s", "T_I150"),
    ("T_I1000_s", "T_I1000"),
    ("timeouts_per_conn", "timeouts/conn"),
    ("spurious_timeouts_per_conn", "spurious/conn"),
)


def comparison_table(sweep: Sweep, document: Mapping[str, Any]) -> str:
    """Aligned plain-text table: one line per point, ``mean (min–max)`` over runs; with
    per-type metrics (QDS), a second one in the shape of the source's Table I."""
    columns = display_axes(sweep)
    summaries = {p["id"]: p["summary"] for p in point_entries(document)}
    points = display_order(sweep)
    # Metrics no point has (e.g. the interactive ones in a QDS sweep) only add n/a columns.
    metrics = [
        (key, h) for key, h in TABLE_METRICS if any(number(summaries[p.id].get(key)) is not None for p in points)
    ]
    header = [*(short_axis(sweep, a) for a in columns), *(h for _, h in metrics), "runs"]
    rows = [header]
    for point in points:
        s = summaries[point.id]
        cells = [label(point.params[a]) for a in columns]
        cells += [_cell(s, key) for key, _ in metrics]
        rows.append([*cells, str(s.get("runs", 0))])
    out = _aligned(rows, len(columns))
    if len(metrics) < len(TABLE_METRICS):
        out.append("(columns without a value at any point left out)")
    if any(k in dict(metrics) for k in ("r_I150", "r_I1000")):
        out += ["", "r_I150 / r_I1000: share of interactive writes later than 150 ms / 1000 ms minus the WAN delay"]
    types = _by_type_names(summaries.values())
    if types:
        out += ["", *_table_i(sweep, columns, points, summaries, types)]
    grid = delay_grid(sweep, document)
    if grid is not None:
        headers, configs, grid_rows = grid
        out += ["", "End-to-end delay, ms: median / p99 / max of all messages of all runs", ""]
        out += _aligned([[*headers, *configs], *([*labels, *cells] for labels, cells in grid_rows)], len(headers))
    return "\n".join(out)


def delay_grid(
    sweep: Sweep, document: Mapping[str, Any]
) -> tuple[list[str], list[str], list[tuple[list[str], list[str]]]] | None:
    """A sweep with a configuration axis (the tunnel grids): per grid point, each
    configuration's pooled ``median / p99 / max`` delay in ms (∞: a message never read) —
    the figures the grid's targets compare. ``(axis headers, configurations, rows)``, or
    None for other sweeps."""
    if "configurations" not in document or not document["points"]:
        return None
    configs = list(document["configurations"]["labels"])
    axes = list(document["points"][0]["params"])
    rows = [
        ([label(g["params"][a]) for a in axes], [_delay_triple(g["configs"].get(c)) for c in configs])
        for g in document["points"]
    ]
    return [short_axis(sweep, a) for a in axes], configs, rows


def _delay_triple(stats: Mapping[str, Any] | None) -> str:
    if stats is None:
        return "n/a"
    values = [number(stats.get(k)) for k in ("median", "p99", "max")]
    return " / ".join("n/a" if v is None else "∞" if math.isinf(v) else f"{v:,.0f}" for v in values)


def _aligned(rows: list[list[str]], n_axes: int) -> list[str]:
    """Rows as lines: axis columns left-aligned, numbers right-aligned, a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) if i < n_axes else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return lines


def _by_type_names(summaries: Any) -> list[str]:
    """The types of any point, video and data first."""
    return ordered_types(t for s in summaries for t in s.get("by_type", {}))


def _table_i(
    sweep: Sweep, columns: list[str], points: list[Point], summaries: Mapping[str, Any], types: list[str]
) -> list[str]:
    """Per point and type: share within QT and 1.2·QT, RTT mean ± sd, throughput; per
    setting, the disciplines one under the other (the source's Table I)."""
    discipline = next((a.name for a in sweep.axes if "queue.discipline" in (a.name, *a.keys)), None)
    if discipline in columns:
        columns = [a for a in columns if a != discipline] + [discipline]
        pos = {a.name: i for i, a in enumerate(sweep.axes)}
        points = sorted(points, key=lambda p: tuple(p.index[pos[a]] for a in columns))
    header = [*(short_axis(sweep, a) for a in columns)]
    for t in types:
        header += [f"{t} ≤QT", "≤1.2QT", "RTT ms", "Mbit/s"]
    rows = [header]
    for point in points:
        table = summaries[point.id].get("by_type", {})
        cells = [label(point.params[a]) for a in columns]
        for t in types:
            m = table.get(t, {})
            cells += [
                _fmt_any(m.get("share_within_qt"), lambda v: f"{v * 100:.1f}%"),
                _fmt_any(m.get("share_within_1_2qt"), lambda v: f"{v * 100:.1f}%"),
                f"{_fmt_any(m.get('rtt_mean_ms'), lambda v: f'{v:.1f}')} ± {_fmt_any(m.get('rtt_sd_ms'), lambda v: f'{v:.1f}')}",
                _fmt_any(m.get("throughput_mbps"), lambda v: f"{v:.2f}"),
            ]
        rows.append(cells)
    qt = {
        t: next((s["by_type"][t].get("qt_ms") for s in summaries.values() if t in s.get("by_type", {})), None)
        for t in types
    }
    note = (
        "Per application type (means over runs): packets with RTT ≤ QT and ≤ 1.2·QT, RTT mean ± sd, throughput; QT "
        + ", ".join(f"{t} {_fmt_any(q, lambda v: f'{v:g} ms')}" for t, q in qt.items())
    )
    return [*_aligned(rows, len(columns)), "", note]


def metric_cell(summary: Mapping[str, Any], key: str) -> tuple[str, str]:
    """(mean, min – max) of one metric of a point, formatted for the HTML table."""
    if key not in summary:
        return "n/a", ""
    f = _metric_format(key)
    return _fmt_any(summary[key], f), f"{_fmt_any(summary['min'][key], f)} – {_fmt_any(summary['max'][key], f)}"


def display_axes(sweep: Sweep) -> list[str]:
    """Axes from the outermost grouping to the innermost: panels, lines, x."""
    roles = [*sweep.panel_axes, sweep.line_axis, sweep.x_axis]
    return [a for a in roles if a is not None]


def display_order(sweep: Sweep) -> list[Point]:
    """The points sorted by :func:`display_axes`."""
    pos = {a.name: i for i, a in enumerate(sweep.axes)}
    order = [pos[a] for a in display_axes(sweep)]
    return sorted(sweep.points, key=lambda p: tuple(p.index[i] for i in order))


def short_axis(sweep: Sweep, axis: str) -> str:
    """An axis's last key component unless another axis ends the same way."""
    last = axis.rpartition(".")[2]
    clash = sum(a.name.rpartition(".")[2] == last for a in sweep.axes) > 1
    return axis if clash else last


def number(v: Any) -> float | None:
    """A number, or None for a missing/null/nan one (JSON has no nan or inf: null)."""
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def _metric_format(key: str) -> Callable[[float], str]:
    if key.startswith("r_"):
        return lambda v: f"{v * 100:.3g}%"
    if key.endswith("_s"):
        return lambda v: f"{v:.3g}s"
    return lambda v: f"{v:.2f}"


def _fmt_any(v: Any, f: Callable[[float], str]) -> str:
    n = number(v)
    if n is None:
        return "n/a"
    return "∞" if math.isinf(n) else f(n)


def _cell(summary: Mapping[str, Any], key: str) -> str:
    if key not in summary:
        return "n/a"
    f = _metric_format(key)
    mean = _fmt_any(summary[key], f)
    if summary.get("runs", 0) <= 1:
        return mean
    return f"{mean} ({_fmt_any(summary['min'][key], f)}–{_fmt_any(summary['max'][key], f)})"


# ---------------------------------------------------------------------------------------
# Simulator vs lab (thinwan validate)


def validation_rows(doc: Mapping[str, Any]) -> list[tuple[str, str, str, str, str, str]]:
    """(metric, sim, lab, rel. diff, tolerance, verdict) of ``doc["agreement"]``
    (:func:`thinwan.execute.labruns.validate`), formatted; verdict ``ok``, ``differs``, or
    empty when the metric has no tolerance (or a side is n/a)."""
    tolerance = doc.get("tolerance", {})
    unlike = doc.get("not_compared", {})
    rows = []
    for k, a in doc["agreement"].items():
        f = _agreement_format(k)
        spec = None if k in unlike else tolerance.get(k)
        rows.append(
            (
                k,
                fmt(number_or_inf(a["sim"]), f),
                fmt(number_or_inf(a["lab"]), f),
                fmt_rel_diff(a["rel_diff"]),
                tolerance_label(spec),
                "not compared¹" if k in unlike else verdict_label(a["ok"], a.get("undecided", False), a.get("events")),
            )
        )
    return rows


def validation_table(doc: Mapping[str, Any], runs: int) -> str:
    """The agreement table of ``thinwan validate`` with its tolerances and how runs combine."""
    judged = [a["ok"] for a in doc["agreement"].values() if a["ok"] is not None]
    header = ("metric", "sim", "lab", "rel. diff", "tolerance", "verdict")
    table = [header, *validation_rows(doc)]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    # The metric and the verdict read as words (left), the numbers line up on the right.
    body = [
        "  ".join(c.ljust(w) if i in (0, 5) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in table
    ]
    lines = [
        f"{doc['scenario']}: simulator vs lab, {runs} run(s) each, the same seeds",
        "values: means over runs; interactive p50/p99 over all runs' messages; r_I150 and r_I1000"
        " judged on the 95 % interval of the ratio of their event rates",
        "rel. diff = (sim − lab)/lab; ok: |rel. diff| ≤ ±t, or lab/f ≤ sim ≤ lab·f for ×f;"
        " tolerances: " + ", ".join(f"{k} {tolerance_label(v)}" for k, v in doc.get("tolerance", {}).items()),
        body[0],
        "-" * max(map(len, body)),
        *body[1:],
        f"agreement: {sum(judged)} of {len(judged)} judged metrics within tolerance"
        + (f"; {undecided} undecided (too few events: more runs)" if (undecided := _undecided(doc)) else ""),
        *(f"¹ {', '.join(keys)}: {why}" for why, keys in not_compared_notes(doc)),
    ]
    return "\n".join(lines)


def _undecided(doc: Mapping[str, Any]) -> int:
    return sum(1 for a in doc["agreement"].values() if a.get("undecided"))


def not_compared_notes(doc: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(why, metrics) of ``doc["not_compared"]``, one entry per reason, in order."""
    notes: dict[str, list[str]] = {}
    for k, why in doc.get("not_compared", {}).items():
        notes.setdefault(why, []).append(k)
    return list(notes.items())


def number_or_inf(v: Any) -> float:
    """A JSON number (``None`` for a non-finite one) or an in-memory float, as a float."""
    return math.nan if v is None else float(v)


def fmt_rel_diff(v: float | None) -> str:
    """A relative difference as a signed percentage; ``None``/nan as "n/a"."""
    if v is None or math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "+∞" if v > 0 else "−∞"
    if v == 0:
        return "0 %"
    return f"{v * 100:+.1f} %".replace("-", "−")


def tolerance_label(spec: str | None) -> str:
    """``25%`` → ``±25 %``, ``x2`` → ``×2``, none → ``—``."""
    if spec is None:
        return "—"
    return f"×{spec[1:]}" if spec.startswith("x") else f"±{spec.removesuffix('%')} %"


def verdict_label(ok: bool | None, undecided: bool = False, events: Mapping[str, int] | None = None) -> str:
    """``ok``, ``differs``, ``undecided (S / L events)`` for a counted metric whose events
    cannot decide (analysis.agreement), or empty (no verdict)."""
    if undecided:
        return f"undecided ({events['sim']} / {events['lab']} events)" if events else "undecided"
    return "" if ok is None else ("ok" if ok else "differs")


def _agreement_format(key: str) -> Callable[[float], str]:
    if key.startswith("r_"):
        return lambda v: f"{v * 100:.3g} %"
    if key.startswith("utilisation"):
        return lambda v: f"{v * 100:.3g} %" if v < 0.01 else f"{v * 100:.1f} %"
    if key.endswith("_ms"):
        return lambda v: f"{v:,.1f} ms"
    if key.endswith("_s"):
        return lambda v: f"{v:.3g} s"
    if key.endswith("_per_conn"):
        return lambda v: f"{v:.3f}"
    return lambda v: f"{v:,.6g}"

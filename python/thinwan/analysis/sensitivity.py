"""One-at-a-time sensitivity: which modelling choice moves which result, and how far.

A sensitivity sweep (docs/sweeps.md, "Sensitivity") has one named axis whose bundles each
change one *choice* of the base scenario (``{}`` is the base point itself); every other
axis (the buffer, say) makes *groups*, each with its own base point. A choice is the set of
keys its bundles set, so ``"mss=536"`` and ``"mss=1448"`` are two values of the choice
``tcp.mss``, and a bundle setting two keys (``traffic.session_activity`` and its σ) is one
value of a two-key choice.

For each group, choice and metric the *effect* is the largest move from the base over the
choice's values: Δ = mean(variant) − mean(base), means over runs (the sweep's summary
table, :func:`thinwan.analysis.aggregate.sweep_document`), taken at the value with the
largest |Δ|; relative Δ = Δ / base (undefined, None, when the base is 0 and Δ is not).
Choices are ranked per metric by |Δ|, largest first (ties, to 9 significant digits, share a rank, as 1, 1, 3;
a choice whose every value is missing is unranked, last); the overall order is by the mean
of the per-metric ranks (an unranked metric counts as last). Every run of the sweep uses the
same seeds at every point, so a Δ compares the same random draws (common random numbers);
given the per-run values, the standard error of Δ comes from the paired per-run
differences, and a |Δ| below two standard errors is flagged as noise.

Pure functions on plain data: no I/O, no pandas.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SENSITIVITY_METRICS",
    "Choice",
    "choices_of",
    "competition_ranks",
    "choice_effect",
    "paired_se",
    "group_ranking",
    "sensitivity_ranking",
]

# The results the issue asks about: the share of late interactive messages at both
# thresholds (Ogawa §2) and the timeouts per connection.
SENSITIVITY_METRICS = ("r_I150", "r_I1000", "timeouts_per_conn")
# Two |Δ| closer than this are a tie (floating-point differences of the same move).
_TIE_REL, _TIE_ABS = 1e-9, 1e-15


@dataclass(frozen=True)
class Choice:
    """One modelling choice: the keys its bundles set, and those bundles' labels in file order."""

    keys: tuple[str, ...]
    labels: tuple[str, ...]

    @property
    def name(self) -> str:
        """``tcp.mss``; a choice of several keys joins them: ``a.x + a.y``."""
        return " + ".join(self.keys)


def choices_of(labels: Sequence[str], overrides: Sequence[Mapping[str, Any]]) -> tuple[str, list[Choice]]:
    """The base label (the one empty bundle) and the choices of a one-at-a-time axis.

    Bundles that set the same set of keys are values of one choice; choices keep the order
    of their first bundle. Raises ValueError unless exactly one bundle is empty.
    """
    empty = [lab for lab, o in zip(labels, overrides) if not o]
    if len(empty) != 1:
        found = ", ".join(map(str, empty)) or "none"
        raise ValueError(f"needs exactly one empty bundle {{}} (the base point); found: {found}")
    groups: dict[tuple[str, ...], list[str]] = {}
    for lab, o in zip(labels, overrides):
        if o:
            groups.setdefault(tuple(o), []).append(lab)
    return empty[0], [Choice(keys, tuple(labs)) for keys, labs in groups.items()]


def competition_ranks(values: Sequence[float | None]) -> list[int | None]:
    """Rank of each value, largest first; equal values share a rank (1, 1, 3); None → None.

    Equal means equal to 9 significant digits: 0.15 − 0.10 and 0.10 − 0.05 are one Δ.
    """
    present = [v for v in values if v is not None]

    def rank(v: float) -> int:
        return 1 + sum(w > v and not math.isclose(w, v, rel_tol=_TIE_REL, abs_tol=_TIE_ABS) for w in present)

    return [None if v is None else rank(v) for v in values]


def choice_effect(
    base: float | None,
    variants: Mapping[str, float | None],
    labels: Sequence[str],
    base_runs: Sequence[float | None] | None = None,
    variant_runs: Mapping[str, Sequence[float | None]] | None = None,
) -> dict[str, Any]:
    """The effect of one choice on one metric: ``delta`` (signed) at the value ``at`` with
    the largest |Δ| (the first such value on a tie), ``abs_delta``, ``rel_delta``, and
    ``deltas`` per value (None where the value or the base is missing).

    With the per-run values (``base_runs``, ``variant_runs[label]``, aligned by run: the
    same seeds), also ``se``: the standard error of Δ at ``at`` from the paired per-run
    differences (None with fewer than 2 pairs), and ``noise``: |Δ| < 2·se (None without se).
    """
    deltas: dict[str, float | None] = {}
    for lab in labels:
        v = _finite(variants.get(lab))
        deltas[lab] = None if base is None or v is None else v - base
    present = [(abs(d), lab) for lab, d in deltas.items() if d is not None]
    if not present:
        return {
            "delta": None,
            "abs_delta": None,
            "rel_delta": None,
            "at": None,
            "se": None,
            "noise": None,
            "deltas": deltas,
        }
    largest = max(a for a, _ in present)
    at = next(lab for a, lab in present if a == largest)
    delta = deltas[at]
    assert delta is not None and base is not None
    if base != 0:
        rel: float | None = delta / base
    else:
        rel = 0.0 if delta == 0 else None
    se = paired_se(base_runs or (), (variant_runs or {}).get(at) or ())
    noise = None if se is None else bool(abs(delta) < 2 * se)
    return {
        "delta": delta,
        "abs_delta": abs(delta),
        "rel_delta": rel,
        "at": at,
        "se": se,
        "noise": noise,
        "deltas": deltas,
    }


def paired_se(base_runs: Sequence[float | None], variant_runs: Sequence[float | None]) -> float | None:
    """Standard error of the mean of the per-run differences variant − base (runs paired by
    position, i.e. by seed; a run missing on either side is left out); None below 2 pairs."""
    diffs = [
        v - b for b, v in zip(map(_finite, base_runs), map(_finite, variant_runs)) if b is not None and v is not None
    ]
    if len(diffs) < 2:
        return None
    return statistics.stdev(diffs) / math.sqrt(len(diffs))


def group_ranking(
    summaries: Mapping[str, Mapping[str, Any]],
    base_label: str,
    choices: Sequence[Choice],
    metrics: Sequence[str] = SENSITIVITY_METRICS,
    runs: Mapping[str, Mapping[str, Sequence[float | None]]] | None = None,
) -> dict[str, Any]:
    """The ranking of one group: ``summaries`` maps each bundle label of the axis to its
    point's summary (means over runs, with ``min`` and ``max`` dicts; a missing label is
    a point without results); ``runs`` optionally maps a label to its per-run values per
    metric (aligned by run), for the standard errors of :func:`choice_effect`.

    Returns ``base`` (per metric: ``mean``, ``min``, ``max`` over runs) and ``choices``:
    one entry per choice, in the overall order, each with ``choice``, ``keys``,
    ``labels``, ``rank`` (overall, 1 = moves the results most) and per metric the
    :func:`choice_effect` with its ``rank``.
    """
    base_summary = summaries.get(base_label) or {}
    base = {
        m: {
            "mean": _finite(base_summary.get(m)),
            "min": _finite((base_summary.get("min") or {}).get(m)),
            "max": _finite((base_summary.get("max") or {}).get(m)),
        }
        for m in metrics
    }
    rows = []
    for c in choices:
        effects = {}
        for m in metrics:
            variants = {lab: (summaries.get(lab) or {}).get(m) for lab in c.labels}
            per_run = {lab: (runs or {}).get(lab, {}).get(m) or () for lab in c.labels}
            base_runs = (runs or {}).get(base_label, {}).get(m)
            effects[m] = choice_effect(base[m]["mean"], variants, c.labels, base_runs, per_run)
        rows.append({"choice": c.name, "keys": list(c.keys), "labels": list(c.labels), "metrics": effects})
    for m in metrics:
        for row, r in zip(rows, competition_ranks([row["metrics"][m]["abs_delta"] for row in rows])):
            row["metrics"][m]["rank"] = r
    worst = len(rows)
    for row in rows:
        ranks = [row["metrics"][m]["rank"] for m in metrics]
        row["mean_rank"] = sum(worst if r is None else r for r in ranks) / len(ranks) if ranks else float(worst)
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["mean_rank"], i))
    ranked = [rows[i] for i in order]
    for r, row in zip(competition_ranks([-row["mean_rank"] for row in ranked]), ranked):
        row["rank"] = r
    return {"base": base, "choices": ranked}


def sensitivity_ranking(
    points: Sequence[Mapping[str, Any]],
    axis: str,
    labels: Sequence[str],
    overrides: Sequence[Mapping[str, Any]],
    metrics: Sequence[str] = SENSITIVITY_METRICS,
    runs: Mapping[str, Mapping[str, Sequence[float | None]]] | None = None,
) -> dict[str, Any]:
    """The sensitivity of a sweep: ``points`` are the entries of the sweep document
    (``id``; ``params``: axis → label; ``summary``); ``axis`` is the one-at-a-time axis
    with its ``labels`` and bundle ``overrides``; ``runs`` optionally maps a point id to
    its per-run values per metric, in run order (for the standard errors).

    Returns ``axis``, ``base`` (its base label), ``metrics``, ``choices`` (name → keys and
    labels) and ``groups``: one per combination of the other axes' labels, in the order the
    points come, each ``{"params": {axis: label}, **group_ranking(...)}``.
    """
    base_label, choices = choices_of(labels, overrides)
    groups: dict[tuple[tuple[str, Any], ...], dict[str, Mapping[str, Any]]] = {}
    group_runs: dict[tuple[tuple[str, Any], ...], dict[str, Mapping[str, Sequence[float | None]]]] = {}
    for p in points:
        key = tuple((a, v) for a, v in p["params"].items() if a != axis)
        groups.setdefault(key, {})[p["params"][axis]] = p.get("summary") or {}
        group_runs.setdefault(key, {})[p["params"][axis]] = (runs or {}).get(p.get("id", ""), {})
    return {
        "axis": axis,
        "base": base_label,
        "metrics": list(metrics),
        "choices": {c.name: {"keys": list(c.keys), "labels": list(c.labels)} for c in choices},
        "groups": [
            {"params": dict(key), **group_ranking(summaries, base_label, choices, metrics, group_runs[key])}
            for key, summaries in groups.items()
        ],
    }


def _finite(v: Any) -> float | None:
    """A metric's value, or None when it is missing, null, NaN or infinite."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None

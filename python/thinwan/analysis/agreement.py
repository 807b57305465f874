"""How far the simulator is from the lab: per metric, the relative difference and a verdict.

``thinwan validate`` runs one scenario on both substrates; this module compares the two
results (pure functions over flat ``metric → number`` mappings, no I/O). Its targets are
those of issue #21: within 25 % on utilisation, interactive delay p50 and p99, timeouts
and fast retransmits per connection, and within a factor of 2 on r_I150 and r_I1000
(:data:`DEFAULT_TOLERANCES`). Every other metric both substrates report is compared too,
without a verdict unless a tolerance is given for it (``--tolerance METRIC=SPEC``).

Definitions (docs/lab.md "Agreement"):

- ``rel_diff = (sim − lab) / |lab|``. Equal values (both 0, both ∞) give 0; ``lab = 0``
  with ``sim ≠ 0`` gives ±∞ (no finite ratio says how far apart they are); ``lab = ±∞``
  with a finite ``sim`` gives −1 / +1 (the limit); a ``nan`` on either side gives ``nan``.
- A relative tolerance ``t`` holds when ``|rel_diff| ≤ t``; a factor ``f`` holds when
  ``lab/f ≤ sim ≤ lab·f`` (the same sign, or both 0): a zero on one side only is
  infinitely far from the other under both. The edge counts as agreement.
- ``ok`` is ``None`` (no verdict) when the metric has no tolerance, is one the two
  substrates measure differently (``not_compared`` of :func:`compare`), or a side is
  ``nan``.
- r_I150 and r_I1000 count events (interactive messages over a threshold): with a few
  events on each side their ratio is noise (0 against 1 is "+∞"). When both summaries say
  how many interactive messages they hold, the verdict is the 95 % interval of the ratio
  of the two rates (exact, conditional on the total count: Clopper–Pearson on the share
  of the simulator's events): inside the tolerance → ok, outside → differs, across its
  edge → ``ok = None`` with ``undecided`` (more runs will decide).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Tolerance",
    "Agreement",
    "JUDGED",
    "METRICS",
    "DEFAULT_TOLERANCES",
    "parse_tolerance",
    "rel_diff",
    "compare",
    "agreement_json",
    "tolerance_json",
    "validate_values",
]

# The metrics compared, in the order they are shown: the judged ones of issue #21 first,
# then every other number of a run's summary (analysis.metrics.summarize_run) that means
# the same on both substrates. tests/test_validate_agreement.py checks that each is a key
# of a real summary, so a renamed key cannot silently drop out of the table.
JUDGED = (
    "utilisation",
    "r_I150",
    "r_I1000",
    "interactive_delay_p50_ms",
    "interactive_delay_p99_ms",
    "timeouts_per_conn",
    "retransmit_episodes_per_conn",
)
METRICS = (
    *JUDGED,
    "fast_retransmits_per_conn",
    "utilisation_interactive",
    "T_I150_s",
    "T_I1000_s",
    "spurious_timeouts_per_conn",
    "writes_waited_per_conn",
    "writes_blocked_per_conn",
    "delay_min_ms",
    "delay_q1_ms",
    "delay_median_ms",
    "delay_q3_ms",
    "delay_p99_ms",
    "delay_p999_ms",
    "delay_max_ms",
    "messages",
    "interactive_messages",
    "undelivered",
    "bottleneck_drops",
    "link_loss_drops",
)

# Edges count as agreement: a value printed as exactly "25 %" apart is within ±25 %, even
# when the division rounds it a few ulps above.
_EDGE = 1e-9


@dataclass(frozen=True)
class Tolerance:
    """How far apart sim and lab may be and still agree.

    ``kind = "relative"``: ``|sim − lab| ≤ value·|lab|`` (``value`` 0.25 = 25 %);
    ``kind = "factor"``: ``lab/value ≤ sim ≤ lab·value`` (``value`` ≥ 1).
    """

    kind: Literal["relative", "factor"]
    value: float

    def holds(self, sim: float, lab: float) -> bool | None:
        """The verdict for one pair of values; ``None`` when either is ``nan``."""
        if math.isnan(sim) or math.isnan(lab):
            return None
        if self.kind == "relative":
            return abs(rel_diff(sim, lab)) <= self.value * (1 + _EDGE)
        if sim == lab:
            return True
        if sim == 0 or lab == 0 or (sim > 0) != (lab > 0) or math.isinf(sim) or math.isinf(lab):
            return False
        a, b = abs(sim), abs(lab)
        f = self.value * (1 + _EDGE)
        return b / f <= a <= b * f

    @property
    def spec(self) -> str:
        """The spelling ``--tolerance`` takes and the JSON shows: ``25%`` or ``x2``."""
        return f"{self.value * 100:g}%" if self.kind == "relative" else f"x{self.value:g}"

    def __str__(self) -> str:
        return f"±{self.value * 100:g} %" if self.kind == "relative" else f"×{self.value:g}"


DEFAULT_TOLERANCES: Mapping[str, Tolerance] = {
    "utilisation": Tolerance("relative", 0.25),
    "r_I150": Tolerance("factor", 2.0),
    "r_I1000": Tolerance("factor", 2.0),
    "interactive_delay_p50_ms": Tolerance("relative", 0.25),
    "interactive_delay_p99_ms": Tolerance("relative", 0.25),
    "timeouts_per_conn": Tolerance("relative", 0.25),
    "retransmit_episodes_per_conn": Tolerance("relative", 0.25),
}


@dataclass(frozen=True)
class Agreement:
    """One metric on both substrates: values, ``rel_diff`` and the verdict ``ok``."""

    metric: str
    sim: float
    lab: float
    rel_diff: float
    ok: bool | None
    tolerance: Tolerance | None
    # Counted metrics: (events in the simulator, events in the lab) and the 95 % interval
    # of the ratio of their rates; undecided = that interval crosses the tolerance's edge.
    events: tuple[int, int] | None = None
    ratio_interval: tuple[float, float] | None = None
    undecided: bool = False


_SPEC = re.compile(r"^(?P<metric>[A-Za-z0-9_]+)=(?:(?P<pct>[0-9.eE+-]+)%|[x×](?P<factor>[0-9.eE+-]+)|(?P<off>off))$")


def parse_tolerance(text: str) -> tuple[str, Tolerance | None]:
    """One ``--tolerance`` value: ``METRIC=25%`` (relative), ``METRIC=x2`` (a factor) or
    ``METRIC=off`` (no verdict). Raises ``ValueError`` with a message naming the mistake."""
    m = _SPEC.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r}: expected METRIC=25% (relative), METRIC=x2 (a factor) or METRIC=off")
    metric = m["metric"]
    if metric not in METRICS:
        raise ValueError(f"{text!r}: unknown metric {metric!r}; one of: {', '.join(METRICS)}")
    if m["off"]:
        return metric, None
    number = m["pct"] if m["pct"] is not None else m["factor"]
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r}: {number!r} is not a number") from None
    if m["pct"] is not None:
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{text!r}: a relative tolerance must be a finite percentage ≥ 0")
        return metric, Tolerance("relative", value / 100.0)
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"{text!r}: a factor must be finite and ≥ 1")
    return metric, Tolerance("factor", value)


def rel_diff(sim: float, lab: float) -> float:
    """``(sim − lab) / |lab|`` with the edge cases of the module docstring."""
    if math.isnan(sim) or math.isnan(lab):
        return math.nan
    if sim == lab:
        return 0.0
    if lab == 0:
        return math.copysign(math.inf, sim)
    if math.isinf(lab):
        return math.copysign(1.0, -lab) if math.isfinite(sim) else math.copysign(math.inf, sim)
    return (sim - lab) / abs(lab)


def compare(
    sim: Mapping[str, Any],
    lab: Mapping[str, Any],
    tolerances: Mapping[str, Tolerance | None] = DEFAULT_TOLERANCES,
    not_compared: Iterable[str] = (),
) -> list[Agreement]:
    """Every metric of :data:`METRICS` that both ``sim`` and ``lab`` hold as a number, in
    that order, then every other number both hold (sorted by name), each with its
    verdict under ``tolerances`` (a metric missing there, or ``None``, has none).
    Metrics in ``not_compared`` (the substrates measure different things under that
    name) are listed without a verdict."""
    skip = set(not_compared)
    rows = []
    extra = set(_numbers(sim)) & set(_numbers(lab)) - set(METRICS) - _NOT_METRICS
    for k in (*METRICS, *sorted(extra)):
        if not (_is_number(sim.get(k)) and _is_number(lab.get(k))):
            continue
        a, b = float(sim[k]), float(lab[k])
        tol = None if k in skip else tolerances.get(k)
        row = Agreement(k, a, b, rel_diff(a, b), tol.holds(a, b) if tol else None, tol)
        if k in COUNTED:
            row = _counted(row, sim, lab)
        rows.append(row)
    return rows


# Metrics that are a share of counted events, with the summary key of what they count
# among; analysis.metrics gives interactive_messages as a mean over ``runs`` runs.
COUNTED = {"r_I150": "interactive_messages", "r_I1000": "interactive_messages"}
CONFIDENCE = 0.95


def _counted(row: Agreement, sim: Mapping[str, Any], lab: Mapping[str, Any]) -> Agreement:
    """``row`` with its events, the interval of the rate ratio and the verdict from it (the
    module docstring); unchanged when a side does not say how many messages it counted."""
    sides = [_events(s, row.metric) for s in (sim, lab)]
    if any(x is None for x in sides):
        return row
    (k_s, n_s), (k_l, n_l) = sides  # type: ignore[misc]
    if n_s == 0 or n_l == 0:
        return row
    lo, hi = rate_ratio_interval(k_s, n_s, k_l, n_l)
    ok, undecided = row.ok, False
    tol = row.tolerance
    if tol is not None and tol.kind == "factor" and k_s + k_l > 0:
        edge = (1 + _EDGE) * tol.value
        if 1 / edge <= lo and hi <= edge:
            ok = True
        elif hi < 1 / edge or lo > edge:
            ok = False
        else:
            ok, undecided = None, True
    return replace(row, ok=ok, events=(k_s, k_l), ratio_interval=(lo, hi), undecided=undecided)


def _events(summary: Mapping[str, Any], metric: str) -> tuple[int, int] | None:
    """(events, messages) behind ``summary[metric]`` over all its runs, or None."""
    n, runs = summary.get(COUNTED[metric]), summary.get("runs", 1)
    if not (_is_number(n) and _is_number(runs) and _is_number(summary.get(metric))):
        return None
    total = round(float(n) * float(runs))
    return round(float(summary[metric]) * total), total


def rate_ratio_interval(k_s: int, n_s: int, k_l: int, n_l: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact interval of (k_s/n_s) / (k_l/n_l) as rates: given k = k_s + k_l events,
    k_s is binomial with p = ρ·n_s / (ρ·n_s + n_l); Clopper–Pearson bounds on p become
    bounds on ρ. ``(0, ∞)`` when there is no event at all."""
    from scipy.stats import beta  # imported here: `thinwan validate --help` stays light

    k = k_s + k_l
    if k == 0:
        return 0.0, math.inf
    alpha = 1 - confidence
    p_lo = 0.0 if k_s == 0 else float(beta.ppf(alpha / 2, k_s, k - k_s + 1))
    p_hi = 1.0 if k_s == k else float(beta.ppf(1 - alpha / 2, k_s + 1, k - k_s))

    def ratio(p: float) -> float:
        return math.inf if p >= 1 else p / (1 - p) * n_l / n_s

    return ratio(p_lo), ratio(p_hi)


def agreement_json(rows: Iterable[Agreement]) -> dict[str, dict[str, Any]]:
    """``metric → {sim, lab, rel_diff, ok}`` (``validate.json``'s ``agreement``; non-finite
    numbers become ``null`` when written, as everywhere in thinwan's JSON)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        a: dict[str, Any] = {"sim": r.sim, "lab": r.lab, "rel_diff": r.rel_diff, "ok": r.ok}
        if r.events is not None:
            a["events"] = {"sim": r.events[0], "lab": r.events[1]}
            a["ratio_interval"] = list(r.ratio_interval or ())
            a["undecided"] = r.undecided
        out[r.metric] = a
    return out


def tolerance_json(tolerances: Mapping[str, Tolerance | None]) -> dict[str, str]:
    """``metric → spec`` (``25%``, ``x2``) of every metric that has a verdict."""
    return {k: t.spec for k, t in tolerances.items() if t is not None}


def validate_values(summary: Mapping[str, Any], delays: Iterable[pd.DataFrame]) -> dict[str, Any]:
    """One substrate's side of the comparison: its summary (means over runs,
    :func:`~thinwan.analysis.metrics.summarize_runs`) with the interactive delay p50 and
    p99 taken over all runs' interactive messages together (``delays``: each run's
    :func:`~thinwan.analysis.metrics.message_delays`), as summarize_run takes them over
    one run's: a mean of per-run quantiles is not a quantile (analysis/delay_hist.py)."""
    # Imported here: ``thinwan validate --help`` shows DEFAULT_TOLERANCES, and building
    # the parser imports nothing heavy (thinwan.cli).
    import numpy as np
    import pandas as pd

    from .metrics import INTERACTIVE

    # "runs" stays: the counted metrics' events are their mean counts times the runs.
    values = {k: v for k, v in summary.items() if k not in _NOT_METRICS or k == "runs"}
    frames = [d.loc[d["kind"] == INTERACTIVE, "end_to_end"] for d in delays]
    e2e = pd.concat(frames, ignore_index=True).dropna().to_numpy(dtype=float) if frames else np.array([])
    for key, q in (("interactive_delay_p50_ms", 0.50), ("interactive_delay_p99_ms", 0.99)):
        if key in values:
            # The classical empirical quantile, as metrics._quantile_ms: an observed value.
            values[key] = float(np.quantile(e2e, q, method="inverted_cdf")) * 1000.0 if e2e.size else math.nan
    return values


# Numbers of a summary that are not measurements of the substrate.
_NOT_METRICS = frozenset({"runs", "min", "max", "by_type"})


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _numbers(d: Mapping[str, Any]) -> list[str]:
    return [k for k, v in d.items() if _is_number(v)]

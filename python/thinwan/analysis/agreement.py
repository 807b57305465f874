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
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
        rows.append(Agreement(k, a, b, rel_diff(a, b), tol.holds(a, b) if tol else None, tol))
    return rows


def agreement_json(rows: Iterable[Agreement]) -> dict[str, dict[str, Any]]:
    """``metric → {sim, lab, rel_diff, ok}`` (``validate.json``'s ``agreement``; non-finite
    numbers become ``null`` when written, as everywhere in thinwan's JSON)."""
    return {r.metric: {"sim": r.sim, "lab": r.lab, "rel_diff": r.rel_diff, "ok": r.ok} for r in rows}


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

    values = {k: v for k, v in summary.items() if k not in _NOT_METRICS}
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

"""Usability metrics of Ogawa §2 (docs/sources.md), computed only from records (pure functions, no I/O).

Delays are in seconds throughout. A message that was written while the sources were
active (``t_write < scenario.duration_s``) but never read has an end-to-end delay of
``inf``: the user never saw it, so it exceeds every threshold. Results that cannot be
computed (no interactive messages, no bottleneck port) are ``nan``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..config.scenario import Scenario, TrafficSection
from ..records.schema import RunRecords
from .by_type import by_type, scenario_qt_ms, summarize_by_type_runs
from .qds import summarize_qds

__all__ = [
    "INTERACTIVE",
    "BULK",
    "COMPONENTS",
    "message_delays",
    "ccdf",
    "thresholds_s",
    "violation_ratio",
    "mean_violation_interval_s",
    "utilisation",
    "per_connection_means",
    "summarize_run",
    "summarize_runs",
    "DELAY_QUANTILES",
    "delay_quantiles_ms",
]

INTERACTIVE = 0
BULK = 1
# connections.role of a stream the tunnel's edge shed to a direct connection (docs/records.md).
ROLE_SHED = 5
# Components of the end-to-end delay (docs/records.md), in the order they are reported.
COMPONENTS = ("server", "router", "retransmission", "client", "propagation")
BOTTLENECK = "bottleneck"
# Box-plot statistics of the end-to-end delay of all messages: key → quantile.
DELAY_QUANTILES = {
    "delay_min_ms": 0.0,
    "delay_q1_ms": 0.25,
    "delay_median_ms": 0.5,
    "delay_q3_ms": 0.75,
    "delay_max_ms": 1.0,
    "delay_p99_ms": 0.99,
    "delay_p999_ms": 0.999,
}


def message_delays(messages: pd.DataFrame, duration_s: float) -> pd.DataFrame:
    """Per-message end-to-end delay and its decomposition (docs/records.md).

    Returns columns ``kind``, ``end_to_end`` and one per :data:`COMPONENTS`, indexed like
    ``messages``. ``end_to_end`` is ``inf`` for a message written before ``duration_s``
    and never read, ``nan`` for one written later and never read (outside the measured
    window). Components are ``nan`` where the message was not delivered or a hop time is
    unknown; for delivered messages they sum to ``end_to_end``.
    """
    m = messages
    read = m["t_read"] - m["t_write"]
    undelivered = m["t_read"].isna()
    hops = pd.DataFrame(
        {
            "server": m["t_first_tx"] - m["t_write"],
            "router": m["t_deq"] - m["t_enq"],
            "retransmission": m["t_tx"] - m["t_first_tx"],
            "client": m["t_read"] - m["t_arrive"],
        }
    )
    # Partial components of an undelivered message would not add up to anything.
    hops = hops.mask(undelivered, math.nan, axis=0)
    return hops.assign(
        kind=m["kind"],
        end_to_end=read.mask(undelivered & (m["t_write"] < duration_s), math.inf),
        propagation=read - hops.sum(axis=1, skipna=False),
    )[["kind", "end_to_end", *COMPONENTS]]


def ccdf(values: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    """Empirical complementary CDF: ``p[i]`` = fraction of values ``> x[i]``.

    ``x`` is the sorted distinct values (``nan`` dropped, ``inf`` kept: it counts in the
    total, so the tail of ``p`` levels off at the share of infinite values).
    """
    v = np.asarray(values, dtype=float)
    v = np.sort(v[~np.isnan(v)])
    if v.size == 0:
        return v, v.copy()
    x, first = np.unique(v, return_index=True)
    # Values > x[i] are those after the last copy of x[i]; the next distinct value's first
    # index is exactly that count of values ≤ x[i].
    at_most = np.append(first[1:], v.size)
    return x, 1.0 - at_most / v.size


def thresholds_s(scenario: Scenario) -> tuple[float, float]:
    """The (150 ms − t0, 1000 ms − t0) thresholds of Ogawa §2; t0 = bottleneck delay."""
    t0 = scenario.topology.bottleneck_delay_ms / 1000.0
    return 0.150 - t0, 1.000 - t0


def violation_ratio(delays: pd.DataFrame, threshold_s: float) -> float:
    """r_I: share of interactive messages (delivered, or lost in the window) > threshold."""
    e2e = delays.loc[delays["kind"] == INTERACTIVE, "end_to_end"].dropna()
    return float((e2e > threshold_s).mean()) if len(e2e) else math.nan


def mean_violation_interval_s(traffic: TrafficSection, ratio: float) -> float:
    """T_I of Ogawa §2: mean time between threshold violations, in seconds.

    Implements Ogawa §2's formula as written, with α, β, the transition gaps and
    c_B = ``bulk_packets_mean`` from the scenario; ``inf`` when ``ratio`` is 0.
    """
    a, b = traffic.p_interactive_to_bulk, traffic.p_bulk_to_interactive
    if math.isnan(ratio) or a + b == 0:  # no interactive traffic, or no stationary mix
        return math.nan
    if ratio == 0:
        return math.inf
    p_i, p_b = b / (a + b), a / (a + b)
    if p_i == 0:  # the source never returns to interactive flows
        return math.inf
    interactive_part = (1 - a) * traffic.gap_ii_s + a * traffic.gap_ib_s
    bulk_part = (b * p_b * traffic.gap_bi_s + (1 - b) * p_b * traffic.gap_bb_s) / (traffic.bulk_packets_mean * p_i)
    return (interactive_part + bulk_part) / ratio


def utilisation(ports: pd.DataFrame, port: str = BOTTLENECK) -> tuple[float, float]:
    """(overall, interactive) utilisation of ``port``: ``bytes_tx·8 / (rate·window)``."""
    row = ports.loc[ports["port"] == port]
    if row.empty:
        return math.nan, math.nan
    capacity_bytes = float(row["rate_bps"].iloc[0] * row["window_s"].iloc[0]) / 8.0
    return (
        float(row["bytes_tx"].iloc[0]) / capacity_bytes,
        float(row["bytes_tx_interactive"].iloc[0]) / capacity_bytes,
    )


def per_connection_means(connections: pd.DataFrame) -> dict[str, float]:
    """Timeouts, spurious timeouts, fast retransmits, retransmission episodes (runs of
    retransmitted segments not interrupted by new data, what both substrates count the
    same way) and writes that waited more than 10 ms (all, and those blocked by a full
    send buffer) per connection (means)."""
    columns = (
        "timeouts",
        "spurious_timeouts",
        "fast_retransmits",
        "retransmit_episodes",
        "writes_waited",
        "writes_blocked",
    )
    if connections.empty:
        return {f"{c}_per_conn": math.nan for c in columns}
    return {f"{c}_per_conn": float(connections[c].mean()) for c in columns}


def summarize_run(records: RunRecords, scenario: Scenario) -> dict[str, Any]:
    """The metrics of Ogawa §3 for one run, as a flat dict of numbers.

    Keys: ``r_I150``, ``r_I1000``, ``T_I150_s``, ``T_I1000_s``, the per-connection means
    of :func:`per_connection_means`, ``utilisation``, ``utilisation_interactive``, and
    extras: interactive delay percentiles in ms, box-plot statistics of all messages'
    delays (:func:`delay_quantiles_ms`), message counts, bottleneck drops (queue
    overflow) and packets lost on links (``link_loss_drops``); with ``queue.ecn``, the
    bottleneck's CE marks (``bottleneck_marks_ce``); with ``mux.shed``, the
    streams the tunnel's edge shed (``streams_shed``); with per-packet RTTs
    (``packet_rtt``), ``by_type``: the per-application-type metrics of
    :func:`thinwan.analysis.by_type.by_type`; with the QDS loop, the keys of
    :func:`thinwan.analysis.qds.summarize_qds`.
    """
    delays = message_delays(records.messages, scenario.scenario.duration_s)
    interactive = delays.loc[delays["kind"] == INTERACTIVE, "end_to_end"].dropna()
    t150, t1000 = thresholds_s(scenario)
    r150, r1000 = violation_ratio(delays, t150), violation_ratio(delays, t1000)
    util, util_i = utilisation(records.ports)
    bottleneck = records.ports.loc[records.ports["port"] == BOTTLENECK]
    summary: dict[str, Any] = {
        "r_I150": r150,
        "r_I1000": r1000,
        "T_I150_s": mean_violation_interval_s(scenario.traffic, r150),
        "T_I1000_s": mean_violation_interval_s(scenario.traffic, r1000),
        **per_connection_means(records.connections),
        "utilisation": util,
        "utilisation_interactive": util_i,
        "interactive_delay_p50_ms": _quantile_ms(interactive, 0.50),
        "interactive_delay_p99_ms": _quantile_ms(interactive, 0.99),
        **delay_quantiles_ms(delays),
        "messages": len(delays),
        "interactive_messages": len(interactive),
        "undelivered": int(np.isinf(delays["end_to_end"]).sum()),
        "bottleneck_drops": int(bottleneck["drops_overflow"].sum()),
        "link_loss_drops": int(records.ports["drops_loss"].sum()) if "drops_loss" in records.ports else 0,
    }
    if scenario.queue.ecn and "marks_ce" in bottleneck:
        # CE marks instead of CoDel drops (RFC 3168 §5; docs/qds.md "ECN"): kept in the
        # summary so a lab sweep, which deletes its raw logs, still has them per run.
        summary["bottleneck_marks_ce"] = int(bottleneck["marks_ce"].sum())
    if scenario.topology.kind == "mux" and scenario.mux.mode == "mux" and scenario.mux.shed:
        # Shedding (docs/mux.md "Shedding"): streams the edge put on direct connections.
        summary["streams_shed"] = int((records.connections["role"] == ROLE_SHED).sum())
    summary.update(summarize_qds(records.qds_flows, records.qds_classes))
    if not records.packet_rtt.empty:
        # Per application type (QDS): analysis.by_type.
        summary["by_type"] = by_type(records.packet_rtt, scenario.scenario.duration_s, scenario_qt_ms(scenario))
    return summary


def delay_quantiles_ms(delays: pd.DataFrame) -> dict[str, float]:
    """Box-plot statistics (:data:`DELAY_QUANTILES`) of every message's end-to-end delay
    in ms, any kind: ``inf`` for messages lost in the window (so an undelivered tail shows
    as an infinite maximum), ``nan`` when there is no message."""
    e2e = delays["end_to_end"].dropna()
    return {k: _quantile_ms(e2e, q) for k, q in DELAY_QUANTILES.items()}


def summarize_runs(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means over runs of every numeric key, plus ``min`` and ``max`` dicts and ``runs``.

    ``nan`` entries (a metric a run could not compute) are left out of the statistics;
    a key that is ``nan`` in every run stays ``nan``.
    """
    keys = [k for k in summaries[0] if isinstance(summaries[0][k], (int, float))] if summaries else []
    values = {k: np.array([s[k] for s in summaries], dtype=float) for k in keys}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-nan columns → nan, on purpose
        result: dict[str, Any] = {k: float(np.nanmean(v)) for k, v in values.items()}
        result["min"] = {k: float(np.nanmin(v)) for k, v in values.items()}
        result["max"] = {k: float(np.nanmax(v)) for k, v in values.items()}
    result["runs"] = len(summaries)
    if any("by_type" in s for s in summaries):
        result["by_type"] = summarize_by_type_runs(summaries)
    return result


def _quantile_ms(values: pd.Series, q: float) -> float:
    # The classical empirical quantile (smallest x with F(x) ≥ q) is an observed value, so
    # an undelivered (inf) tail gives inf rather than the nan of interpolating towards inf.
    return float(np.quantile(values, q, method="inverted_cdf")) * 1000.0 if len(values) else math.nan

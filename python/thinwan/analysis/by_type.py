"""Per-application-type metrics of the QDS evaluation (spec "Evaluation set-up";
docs/records.md "packet_rtt"): from the exact per-packet RTTs, per application type the
mean and standard deviation of the RTT, the share of packets whose RTT is within the
type's QoE threshold QT and within 1.2·QT, and the throughput.

Which packets count: every first transmission of a data segment sent inside the
measurement window (``t_tx < scenario.duration_s``). A packet whose bytes were
retransmitted keeps its row, and its RTT holds the loss recovery (it is what the user
waited for); one never acknowledged by the end of the run counts as beyond every
threshold and is left out of the mean and sd (``unacked`` says how many).
Throughput: payload bytes of the acknowledged packets of the type, summed over its flows,
over the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .. import _native
from ..config.scenario import Scenario

__all__ = [
    "APP_NAMES",
    "CONTROLLER_TYPE",
    "by_type",
    "flatten_by_type",
    "nest_by_type",
    "scenario_qt_ms",
    "summarize_by_type_runs",
]

# The `app` codes of the packet_rtt table (thinwan_proto::traffic::App, in code order) and
# the QDS controller's type of each (the oracle's truth, thinwan_proto::qds::truth::app_type):
# its QT (the scenario's [qds] qt_<type>_ms, the same table the controller uses) is the
# application's threshold here. Both come from the core, which owns them.
_APPS, _ = _native.app_types()
APP_NAMES: tuple[str, ...] = tuple(name for name, _type in _APPS)
CONTROLLER_TYPE: dict[str, str] = dict(_APPS)

# The per-type metrics, in the order tables print them.
METRICS = ("rtt_mean_ms", "rtt_sd_ms", "share_within_qt", "share_within_1_2qt", "throughput_mbps")


def scenario_qt_ms(scenario: Scenario) -> dict[str, float]:
    """QT per application name, ms: the controller's QT of its type (``[qds]`` keys)."""
    qt = scenario.qds.qt_ms()
    return {name: qt[t] for name, t in CONTROLLER_TYPE.items()}


def by_type(packet_rtt: pd.DataFrame, duration_s: float, qt: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """``{type: {metric: value}}`` for every type with packets in the window.

    ``qt``: type name → QT in ms; a type without one gets NaN shares.
    """
    window = packet_rtt.loc[packet_rtt["t_tx"] < duration_s]
    out: dict[str, dict[str, float]] = {}
    for code, rows in window.groupby("app", sort=True):
        name = APP_NAMES[int(code)] if int(code) < len(APP_NAMES) else f"app-{int(code)}"
        rtt = rows["rtt"].to_numpy(dtype=float)
        acked = ~np.isnan(rtt)
        rtt_ms = rtt[acked] * 1e3
        q = qt.get(name, math.nan)
        n = len(rtt)
        out[name] = {
            "rtt_mean_ms": float(rtt_ms.mean()) if len(rtt_ms) else math.nan,
            "rtt_sd_ms": float(rtt_ms.std()) if len(rtt_ms) else math.nan,
            "share_within_qt": _share_within(rtt_ms, n, q),
            "share_within_1_2qt": _share_within(rtt_ms, n, 1.2 * q),
            "throughput_mbps": float(rows["bytes"].to_numpy()[acked].sum()) * 8 / duration_s / 1e6,
            "qt_ms": q,
            "packets": n,
            "unacked": int(n - acked.sum()),
            "retransmitted": int(rows["retx"].sum()),
        }
    return out


def _share_within(rtt_ms: np.ndarray, n: int, limit_ms: float) -> float:
    """Share of ``n`` packets whose RTT is ≤ ``limit_ms``; the unacknowledged ones (in
    ``n``, not in ``rtt_ms``) never are."""
    return float((rtt_ms <= limit_ms).sum()) / n if n and not math.isnan(limit_ms) else math.nan


def summarize_by_type_runs(summaries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Over runs: per type, the mean of every metric and ``<metric>_runs_sd`` (the
    standard deviation over runs, ddof = 1; NaN with one run)."""
    types = sorted({t for s in summaries for t in s.get("by_type", {})})
    out: dict[str, dict[str, float]] = {}
    for t in types:
        rows = [s["by_type"][t] for s in summaries if t in s.get("by_type", {})]
        stats: dict[str, float] = {}
        for k in rows[0]:
            v = np.array([r[k] for r in rows], dtype=float)
            v = v[~np.isnan(v)]
            stats[k] = float(v.mean()) if len(v) else math.nan
            if k in METRICS:
                stats[f"{k}_runs_sd"] = float(v.std(ddof=1)) if len(v) > 1 else math.nan
        stats["runs"] = len(rows)
        out[t] = stats
    return out


# Sweep rows are flat: ``summary.by_type`` travels as ``by_type.<type>.<metric>`` columns.
PREFIX = "by_type."


def flatten_by_type(table: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``{type: {metric: v}}`` as flat ``by_type.<type>.<metric>`` keys."""
    return {f"{PREFIX}{t}.{k}": float(v) for t, metrics in table.items() for k, v in metrics.items()}


def nest_by_type(row: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """Split a flat row into (the other keys, ``{type: {metric: v}}``). A type whose
    ``packets`` is NaN (it had no packets in this run, only in others) is left out."""
    rest: dict[str, Any] = {}
    table: dict[str, dict[str, float]] = {}
    for key, value in row.items():
        if not key.startswith(PREFIX):
            rest[key] = value
            continue
        t, _, metric = key[len(PREFIX) :].rpartition(".")
        table.setdefault(t, {})[metric] = value
    table = {t: m for t, m in table.items() if not math.isnan(float(m.get("packets", math.nan)))}
    return rest, table

"""Replay vs model (``thinwan validate-model``): measure both runs' messages alike.

A replayed capture's writes carry no interactive/bulk label (``traffic.model = "pcap"``
labels every write interactive), so r_I of the replay as summarised would count screen
updates too. Here the messages of either run are labelled by the gap rule the fit used
(docs/model.md "Fitting a capture"): per connection, a write less than ``gap_s`` after
the previous write joins its flow; a flow of one write is interactive. Then r_I150 and
r_I1000 are the run summary's own functions (:func:`metrics.violation_ratio`) on the
relabelled delays. No I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..config.scenario import Scenario
from .metrics import BULK, INTERACTIVE, message_delays, thresholds_s, violation_ratio

__all__ = ["gap_rule_kinds", "gap_rule_metrics"]


def gap_rule_kinds(messages: pd.DataFrame, gap_s: float) -> pd.Series:
    """Interactive (0) or bulk (1) per message, by the gap rule on its write times."""
    if messages.empty:
        return pd.Series([], dtype="uint8", index=messages.index)
    m = messages[["conn", "t_write"]].sort_values(["conn", "t_write"], kind="stable")
    conn = m["conn"].to_numpy()
    t = m["t_write"].to_numpy()
    new_conn = np.r_[True, conn[1:] != conn[:-1]]
    starts = new_conn | np.r_[True, np.diff(t) >= gap_s]
    flow = np.cumsum(starts)
    size = np.bincount(flow)[flow]
    kinds = np.where(size == 1, INTERACTIVE, BULK).astype("uint8")
    return pd.Series(kinds, index=m.index).reindex(messages.index)


def gap_rule_metrics(messages: pd.DataFrame, scenario: Scenario, gap_s: float) -> dict[str, Any]:
    """r_I150, r_I1000 and the interactive end-to-end delays (s) with gap-rule labels,
    and how often the labels agree with the source's own (model runs only)."""
    kinds = gap_rule_kinds(messages, gap_s)
    delays = message_delays(messages.assign(kind=kinds), scenario.scenario.duration_s)
    t150, t1000 = thresholds_s(scenario)
    inter = delays.loc[delays["kind"] == INTERACTIVE, "end_to_end"].dropna()
    return {
        "r_I150": violation_ratio(delays, t150),
        "r_I1000": violation_ratio(delays, t1000),
        "messages": len(delays),
        "interactive_messages": len(inter),
        "label_agreement": float((kinds.to_numpy() == messages["kind"].to_numpy()).mean()) if len(kinds) else np.nan,
        "interactive_delays_s": inter,
    }

"""A run reduced to what its report needs (:class:`RunDigest`): small enough to send
back from a worker process, so the parent never holds a run's records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..config.scenario import Scenario
from ..records.schema import RunRecords
from .metrics import BOTTLENECK, message_delays, summarize_run

__all__ = ["RunDigest", "digest_run"]


@dataclass
class RunDigest:
    """What the report needs from one run."""

    summary: dict[str, Any]
    meta: dict[str, Any]
    delays: pd.DataFrame  # metrics.message_delays, float32 seconds
    queue_trace: pd.DataFrame  # bottleneck rows of the queue trace (may be empty)
    conn_trace: pd.DataFrame  # TCP trace of `worst_conn` (may be empty)
    worst_conn: int | None  # connection with the most timeouts (None: no connections)
    worst_conn_timeouts: int
    # QDS (empty otherwise): per-packet RTTs in the window (``app`` code, ``rtt_ms``
    # float32, ∞ = never acknowledged: beyond every threshold, as in analysis.by_type),
    # and the control loop's per-period flows (t, conn, app_true, app, class) and classes.
    packet_rtt: pd.DataFrame = field(default_factory=pd.DataFrame)
    qds_flows: pd.DataFrame = field(default_factory=pd.DataFrame)
    qds_classes: pd.DataFrame = field(default_factory=pd.DataFrame)


def digest_run(records: RunRecords, scenario: Scenario) -> RunDigest:
    """Reduce one run's records to a :class:`RunDigest`."""
    delays = message_delays(records.messages, scenario.scenario.duration_s)
    delays = delays.astype({c: "float32" for c in delays.columns if c != "kind"})
    conns = records.connections
    worst = conns.loc[conns["timeouts"].idxmax()] if not conns.empty else None
    worst_conn = int(worst["conn"]) if worst is not None else None
    qt, ct = records.queue_trace, records.conn_trace
    return RunDigest(
        summary=summarize_run(records, scenario),
        meta=records.meta,
        delays=delays,
        queue_trace=qt.loc[qt["port"] == BOTTLENECK].reset_index(drop=True),
        conn_trace=ct.loc[ct["conn"] == worst_conn].reset_index(drop=True),
        worst_conn=worst_conn,
        worst_conn_timeouts=int(worst["timeouts"]) if worst is not None else 0,
        packet_rtt=_packet_rtt_ms(records.packet_rtt, scenario.scenario.duration_s),
        qds_flows=records.qds_flows[["t", "conn", "app_true", "app", "class"]].reset_index(drop=True),
        qds_classes=records.qds_classes.reset_index(drop=True),
    )


def _packet_rtt_ms(packet_rtt: pd.DataFrame, duration_s: float) -> pd.DataFrame:
    """The packets :func:`thinwan.analysis.by_type.by_type` counts, as (app, rtt_ms)."""
    window = packet_rtt.loc[packet_rtt["t_tx"] < duration_s]
    rtt_ms = (window["rtt"].to_numpy(dtype=float) * 1e3).astype(np.float32)
    return pd.DataFrame({"app": window["app"].to_numpy(), "rtt_ms": np.where(np.isnan(rtt_ms), np.inf, rtt_ms)})

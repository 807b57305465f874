"""Sweep aggregation, pure over DataFrames: one small result per (point, run) with its
summary, CCDFs on a fixed delay grid and a delay histogram; the dataset's rows; and the
sweep document (means/min/max over runs per point, pooled delay statistics per grid
point when the sweep compares the tunnel with direct TCP)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__
from ..config.scenario import Scenario
from ..config.sweepfile import Point, Sweep, SweepError, label, short_names
from ..records.meta import git_revision
from ..records.schema import RunRecords, empty_table
from .by_type import APP_NAMES, flatten_by_type, nest_by_type
from .delay_hist import QUANTILES as DELAY_STATS
from .delay_hist import delay_histogram, pooled_delay_stats_ms
from .metrics import BULK, COMPONENTS, INTERACTIVE, message_delays, summarize_run, summarize_runs
from .sensitivity import SENSITIVITY_METRICS, sensitivity_ranking

__all__ = [
    "CCDF_GRID_S",
    "CCDF_COLUMNS",
    "HIST_COLUMNS",
    "ID_COLUMNS",
    "task_result",
    "ccdf_on_grid",
    "build_row",
    "sweep_document",
    "configuration_axis",
    "point_entries",
    "metric_columns",
    "mean_ccdfs",
    "check_column_names",
    "is_ccdf_column",
]

# One fixed grid for every per-run CCDF: 0.1 ms … 100 s, 20 points per decade (121 in
# all, each 12 % above the previous), so runs and points can be averaged and overlaid
# without keeping per-message delays. Stored with every file (Parquet schema metadata).
CCDF_GRID_S = np.logspace(-4, 2, 121)
_CCDF_KINDS = ((INTERACTIVE, "interactive"), (BULK, "bulk"))
_CCDF_SERIES = ("end_to_end", *COMPONENTS)
# Row columns holding a CCDF: ccdf_<interactive|bulk>_<end_to_end|component>.
CCDF_COLUMNS = tuple(f"ccdf_{kind}_{series}" for _, kind in _CCDF_KINDS for series in _CCDF_SERIES)
# Row columns holding the histogram of all messages' end-to-end delays (thinwan.delay_hist:
# occupied slots and their counts), so that a point's runs pool into quantiles of all its
# messages.
HIST_COLUMNS = ("delay_hist_slots", "delay_hist_counts")
# With per-packet RTTs (QDS), also one CCDF of packet RTT per application type present:
# ccdf_rtt_<type> (unacknowledged packets count as ∞, as in analysis.by_type).
RTT_CCDF_PREFIX = "ccdf_rtt_"
# Row columns that every row has besides parameters, metrics and CCDFs.
ID_COLUMNS = ("point_id", "point", "run", "seed", "version", "git_rev", "wall_s", "events", "substrate")


def task_result(records: RunRecords, scenario: Scenario, run: int) -> dict[str, Any]:
    """What a worker sends back for one run: metadata, summary and CCDFs (a few kB).

    ``summary`` is :func:`thinwan.metrics.summarize_run`; ``ccdf`` has one float32 array
    on :data:`CCDF_GRID_S` per :data:`CCDF_COLUMNS` entry; ``delay_hist`` the histogram of
    every message's end-to-end delay (:func:`thinwan.delay_hist.delay_histogram`).
    """
    meta = records.meta
    delays = message_delays(records.messages, scenario.scenario.duration_s)
    ccdfs = {
        f"ccdf_{label}_{series}": ccdf_on_grid(delays.loc[delays["kind"] == kind, series])
        for kind, label in _CCDF_KINDS
        for series in _CCDF_SERIES
    }
    ccdfs.update(_rtt_ccdfs(records.packet_rtt, scenario.scenario.duration_s))
    return {
        "seed": int(meta.get("seed", scenario.scenario.seed + run)),
        "version": __version__,
        "wall_s": float(meta.get("wall_s", math.nan)),
        "events": int(meta["events"]) if "events" in meta else None,
        "substrate": str(meta.get("substrate", "sim")),
        "summary": summarize_run(records, scenario),
        "ccdf": ccdfs,
        "delay_hist": delay_histogram(delays["end_to_end"]),
    }


def is_ccdf_column(name: str) -> bool:
    """A row column holding a CCDF on :data:`CCDF_GRID_S` (fixed, or a per-type RTT one)."""
    return name in CCDF_COLUMNS or name.startswith(RTT_CCDF_PREFIX)


def _rtt_ccdfs(packet_rtt: pd.DataFrame, duration_s: float) -> dict[str, np.ndarray]:
    """Per application type, the CCDF of the packet RTTs that analysis.by_type counts."""
    window = packet_rtt.loc[packet_rtt["t_tx"] < duration_s]
    out = {}
    for code, rows in window.groupby("app", sort=True):
        name = APP_NAMES[int(code)] if int(code) < len(APP_NAMES) else f"app-{int(code)}"
        rtt = rows["rtt"].to_numpy(dtype=float)
        out[f"{RTT_CCDF_PREFIX}{name}"] = ccdf_on_grid(np.where(np.isnan(rtt), np.inf, rtt))
    return out


def ccdf_on_grid(seconds: Any, grid: np.ndarray = CCDF_GRID_S) -> np.ndarray:
    """P(delay > x) at each ``x`` of ``grid`` (float32; all ``nan`` if there are no values).

    ``nan`` values are left out; ``inf`` (never read) counts, so the curve levels off at
    the share of such messages, as :func:`thinwan.metrics.ccdf` does.
    """
    v = np.asarray(seconds, dtype=float)
    v = np.sort(v[~np.isnan(v)])
    if v.size == 0:
        return np.full(grid.size, np.nan, dtype=np.float32)
    return (1.0 - np.searchsorted(v, grid, side="right") / v.size).astype(np.float32)


def build_row(point: Point, run: int, result: Mapping[str, Any], git_rev: str) -> dict[str, Any]:
    """The dataset row of one task: ids, parameters, metadata, summary, CCDFs."""
    row: dict[str, Any] = {
        "point_id": point.id,
        "point": point.name,
        "run": run,
        "seed": result["seed"],
        "version": result["version"],
        "git_rev": git_rev,
        "wall_s": result["wall_s"],
        "events": result["events"],
        "substrate": result["substrate"],
    }
    row.update(point.params)
    row.update(point.values)
    summary = dict(result["summary"])
    # Per-type metrics (a nested dict) travel as flat by_type.<type>.<metric> columns.
    summary.update(flatten_by_type(summary.pop("by_type", {})))
    for key, value in summary.items():
        if key in row:  # an axis named like a metric was refused at load; this is a bug
            raise AssertionError(f"metric {key!r} collides with a column of the sweep")
        row[key] = float(value)
    row.update(result["ccdf"])
    row.update(zip(HIST_COLUMNS, result["delay_hist"]))
    return row


def sweep_document(sweep: Sweep, frame: pd.DataFrame) -> dict[str, Any]:
    """The machine-readable result: per point, its parameters and means/min/max over runs.

    A sweep that compares the tunnel with direct TCP (an axis sets ``mux.mode``, see
    :func:`configuration_axis`) groups its points by grid point instead: ``points`` lists
    the grid points (every axis but that one), each with ``configs``: per label of the
    configuration axis, the point's entry plus the delay statistics of all its runs'
    messages pooled (``min``, ``q1``, ``median``, ``q3``, ``max``, ``p99``, ``p999`` in ms;
    :mod:`thinwan.delay_hist`).
    """
    metrics = metric_columns(sweep, frame)
    entries = [_point_entry(p, frame.loc[frame["point_id"] == p.id].sort_values("run"), metrics) for p in sweep.points]
    document: dict[str, Any] = {
        "sweep": sweep.name,
        "description": sweep.description,
        "source": str(sweep.path),
        "base": str(sweep.base_path),
        "runs": sweep.runs,
        "substrate": sweep.substrate,
        "axes": [{"name": a.name, "labels": list(a.labels)} for a in sweep.axes],
        "points": entries,
        "version": __version__,
        "git_rev": git_revision(),
    }
    if sweep.sensitivity_axis is not None:  # [report] sensitivity (docs/sweeps.md)
        axis = sweep.axis(sweep.sensitivity_axis)
        runs = {
            p.id: {m: rows[m].tolist() for m in SENSITIVITY_METRICS if m in rows}
            for p in sweep.points
            for rows in [frame.loc[frame["point_id"] == p.id].sort_values("run")]
        }
        document["sensitivity"] = sensitivity_ranking(
            entries, axis.name, axis.labels, axis.overrides, SENSITIVITY_METRICS, runs
        )
    config = configuration_axis(sweep)
    if config is not None:
        document["points"] = _grid_points(sweep, config, entries, frame)
        document["configurations"] = {
            "axis": config,
            "labels": list(sweep.axis(config).labels),
            "delay_stats": "per-message end-to-end delay (server write → client read), ms, of all messages of "
            "all runs: per-run histograms (10,000 log bins per decade) added, quantiles interpolated within a bin "
            "(≤ 0.023 % off); min and max exact; inf: a message was never read",
        }
    return document


def configuration_axis(sweep: Sweep) -> str | None:
    """The axis that switches the tunnel (sets ``mux.mode``), or None."""
    return next((a.name for a in sweep.axes if "mux.mode" in a.keys), None)


def point_entries(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every sweep point's entry of a :func:`sweep_document`, whatever its grouping."""
    if "configurations" in document:
        return [entry for grid in document["points"] for entry in grid["configs"].values()]
    return list(document["points"])


def _point_entry(p: Point, rows: pd.DataFrame, metrics: Sequence[str]) -> dict[str, Any]:
    summaries = []
    for flat in rows[metrics].astype(float).to_dict("records"):
        rest, table = nest_by_type(flat)
        summaries.append({**rest, "by_type": table} if table else rest)
    return {
        "id": p.id,
        "name": p.name,
        "params": p.params,
        "values": p.values,
        "seeds": [int(s) for s in rows["seed"]],
        "summary": summarize_runs(summaries) if summaries else {"runs": 0},
    }


def _grid_points(
    sweep: Sweep, config: str, entries: Sequence[dict[str, Any]], frame: pd.DataFrame
) -> list[dict[str, Any]]:
    """Entries grouped by grid point (the labels of every axis but ``config``), in sweep order."""
    others = [a.name for a in sweep.axes if a.name != config]
    short = short_names(sweep.axes)
    grid: dict[tuple[Any, ...], dict[str, Any]] = {}
    for p, entry in zip(sweep.points, entries):
        labels = tuple(p.params[a] for a in others)
        if labels not in grid:
            name = ",".join(f"{short[a]}={label(v)}" for a, v in zip(others, labels)) or "base"
            grid[labels] = {"name": name, "params": dict(zip(others, labels)), "configs": {}}
        rows = frame.loc[frame["point_id"] == p.id]
        grid[labels]["configs"][label(p.params[config])] = {**_pooled_delays(rows), **entry}
    return list(grid.values())


def _pooled_delays(rows: pd.DataFrame) -> dict[str, Any]:
    """:data:`DELAY_STATS` over all messages of ``rows`` (nan if a row has no histogram)."""
    slots, counts = HIST_COLUMNS
    if rows.empty or counts not in rows or rows[counts].isna().any():
        return {**dict.fromkeys(DELAY_STATS, math.nan), "messages": 0}
    stats = pooled_delay_stats_ms(zip(rows[slots], rows[counts]), rows["delay_min_ms"], rows["delay_max_ms"])
    return {**stats, "messages": int(sum(int(np.sum(c)) for c in rows[counts]))}


def metric_columns(sweep: Sweep, frame: pd.DataFrame) -> list[str]:
    """The summary-metric columns of ``frame`` (everything but ids, parameters, CCDFs)."""
    other = {*ID_COLUMNS, *CCDF_COLUMNS, *HIST_COLUMNS, *(a.name for a in sweep.axes), *sweep.varied_keys}
    return [c for c in frame.columns if c not in other and not is_ccdf_column(c)]


def check_column_names(sweep: Sweep) -> None:
    """A named axis becomes a column: it must not shadow an id, metric or CCDF column."""
    empty = RunRecords(*(empty_table(name) for name in ("messages", "connections", "ports")))
    base = sweep.points[0].scenario if sweep.points else Scenario()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # metrics of nothing: nan, with numpy's warnings
        taken = {*ID_COLUMNS, *CCDF_COLUMNS, *HIST_COLUMNS, *summarize_run(empty, base)}
    for axis in sweep.axes:
        if axis.name in taken:
            raise SweepError(f"{sweep.path}: vary.{axis.name}: this name is taken by a column of the results")


def mean_ccdfs(frame: pd.DataFrame) -> dict[str, dict[str, np.ndarray]]:
    """Per point id, per CCDF column: the mean over runs of the per-run CCDFs (runs equal)."""
    result: dict[str, dict[str, np.ndarray]] = {}
    columns = [c for c in frame.columns if c.startswith("ccdf_")]
    for point_id, rows in frame.groupby("point_id"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a kind absent in every run → nan
            result[str(point_id)] = {
                c: np.nanmean(np.stack([np.asarray(v, dtype=float) for v in rows[c]]), axis=0) for c in columns
            }
    return result

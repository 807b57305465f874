"""Shared test helpers: a fake of ``_native.simulate``'s output with plausible values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from thinwan.config.scenario import Scenario, scenario_from_dict
from thinwan.records.schema import RunRecords


def fake_native_output(
    pairs: int = 3, duration_s: float = 10.0, traces: bool = True, seed: int = 0, run: int = 0
) -> dict[str, Any]:
    """A dict shaped like ``_native.simulate``'s result (columns as numpy arrays)."""
    rng = np.random.default_rng(seed)
    n = 400 * pairs
    conn = rng.integers(0, pairs, n).astype(np.uint32)
    t_write = np.sort(rng.uniform(0, duration_s, n))
    t_first_tx = t_write + rng.exponential(0.002, n)
    retx = (rng.random(n) < 0.05).astype(np.uint16)
    t_tx = t_first_tx + retx * 0.3
    t_enq = t_tx + 0.001
    t_deq = t_enq + rng.exponential(0.02, n)
    t_arrive = t_deq + 0.021
    t_read = t_arrive + rng.exponential(0.005, n) * (rng.random(n) < 0.2)
    lost = rng.random(n) < 0.01  # never arrived before the end
    for column in (t_tx, t_enq, t_deq, t_arrive, t_read):
        column[lost] = np.nan
    out: dict[str, Any] = {
        "messages": {
            "conn": conn,
            "pair": conn.copy(),
            "kind": (rng.random(n) < 0.2).astype(np.uint8),
            "bytes": rng.integers(50, 1400, n).astype(np.uint32),
            "t_write": t_write,
            "t_first_tx": t_first_tx,
            "t_tx": t_tx,
            "t_enq": t_enq,
            "t_deq": t_deq,
            "t_arrive": t_arrive,
            "t_read": t_read,
            "retx": retx,
        },
        "connections": {
            "conn": np.arange(pairs, dtype=np.uint32),
            "pair": np.arange(pairs, dtype=np.uint32),
            "timeouts": np.arange(pairs, dtype=np.uint32) * 2,
            "spurious_timeouts": np.arange(pairs, dtype=np.uint32),
            "fast_retransmits": np.full(pairs, 3, dtype=np.uint32),
            "sack_recoveries": np.zeros(pairs, dtype=np.uint32),
            **{
                c: np.full(pairs, 1000, dtype=np.uint64)
                for c in ("bytes_written", "bytes_delivered", "bytes_sent", "segments_sent")
            },
            "bytes_retransmitted": np.full(pairs, 10, dtype=np.uint64),
            **{
                c: np.zeros(pairs, dtype=np.uint32)
                for c in ("tlp_probes", "rack_marked_lost", "rto_resets", "retransmit_episodes", "ecn_reductions")
            },
            "role": np.zeros(pairs, dtype=np.uint8),
        },
        "ports": {
            "port": ["bottleneck", "bottleneck-rev"],  # strings come as a list, not an array
            "rate_bps": np.array([10e6, 10e6]),
            "window_s": np.array([duration_s, duration_s]),
            "bytes_tx": np.array([6_250_000, 100_000], dtype=np.uint64),
            "bytes_tx_interactive": np.array([1_250_000, 0], dtype=np.uint64),
            "packets_tx": np.array([5000, 4000], dtype=np.uint64),
            "drops_overflow": np.array([7, 0], dtype=np.uint64),
            "max_queue_bytes": np.array([30_000, 400], dtype=np.uint64),
            "marks_ce": np.array([0, 0], dtype=np.uint64),
        },
        "meta": {"run": run, "seed": 1 + run, "events": 12345, "wall_s": 0.5, "substrate": "sim"},
    }
    if traces:
        out["conn_trace"] = _conn_trace(rng, pairs, duration_s)
        out["queue_trace"] = _queue_trace(rng, duration_s)
    else:  # what the simulator returns with records.traces = false: empty columns
        out["conn_trace"] = _empty_like(_conn_trace(rng, pairs, duration_s))
        out["queue_trace"] = _empty_like(_queue_trace(rng, duration_s))
    return out


def _empty_like(columns: dict[str, Any]) -> dict[str, Any]:
    return {c: [] if c == "port" else v[:0] for c, v in columns.items()}


def _conn_trace(rng: np.random.Generator, pairs: int, duration_s: float) -> dict[str, np.ndarray]:
    k = 50
    ssthresh = np.full(k * pairs, np.inf)
    ssthresh[k // 2 :] = 20_000.0
    return {
        "conn": np.repeat(np.arange(pairs, dtype=np.uint32), k),
        "t": np.tile(np.linspace(0, duration_s, k), pairs),
        "cwnd": rng.uniform(1460, 40_000, k * pairs),
        "ssthresh": ssthresh,
        "srtt": rng.uniform(0.04, 0.2, k * pairs),
        "rttvar": rng.uniform(0.001, 0.05, k * pairs),
        "rto": rng.uniform(0.2, 1.0, k * pairs),
        "rtt": rng.uniform(0.04, 0.3, k * pairs),
    }


def _queue_trace(rng: np.random.Generator, duration_s: float) -> dict[str, Any]:
    t = np.arange(0, duration_s, 0.01)
    return {
        "port": ["bottleneck"] * len(t) + ["bottleneck-rev"] * len(t),
        "t": np.concatenate([t, t]),
        "bytes": rng.integers(0, 30_000, 2 * len(t)).astype(np.uint64),
        "packets": rng.integers(0, 30, 2 * len(t)).astype(np.uint64),
    }


@pytest.fixture
def fake_native() -> Callable[..., dict[str, Any]]:
    """:func:`fake_native_output`, for tests that need variations."""
    return fake_native_output


@pytest.fixture
def scenario() -> Scenario:
    return scenario_from_dict({"scenario": {"name": "fake", "duration_s": 10.0}, "topology": {"pairs": 3}})


@pytest.fixture
def records() -> RunRecords:
    return RunRecords.from_native(fake_native_output())


@pytest.fixture
def records_without_traces() -> RunRecords:
    return RunRecords.from_native(fake_native_output(traces=False))

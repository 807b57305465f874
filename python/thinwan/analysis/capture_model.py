"""A capture's pooled gap-rule statistics → the thin-client model's point estimates.

:func:`analyze` runs the native one-pass analyser (``crates/capture/src/flows.rs``,
``crates/proto/src/gaprule.rs``) and returns its dict (docs/analyze.md "The Python
view"); :func:`point_model` turns the dict's ``pooled`` part into the values of the
scenario's ``[traffic]`` keys, under those names:

- ``p_interactive_to_bulk`` α = n(I→B) / (n(I→I) + n(I→B)); ``p_bulk_to_interactive``
  β = n(B→I) / (n(B→I) + n(B→B)) (Ogawa §1, the maximum-likelihood estimates of a
  two-state Markov chain's transition probabilities);
- ``gap_ii_s`` … ``gap_bb_s``: mean start-to-start gap per transition (exact sums);
- ``interactive_bytes_mean``, ``bulk_bytes_mean``: mean payload per packet of
  interactive flows and of blocks;
- ``bulk_packets_mean`` (c_B): mean packets per block;
- ``intra_bulk_gap_ms``: mean gap between consecutive packets of a block.

A value with nothing to estimate it from (no transition out of a bulk flow, say) is NaN.
Distribution fitting, tails and goodness of fit are ``thinwan fit``'s
(``fit-model``); this module gives only the means.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = [
    "CaptureError",
    "MODEL_KEYS",
    "TRANSITIONS",
    "analyze",
    "default_gap_ms",
    "point_model",
    "records_tables",
    "summary",
]

#: The ``[traffic]`` keys :func:`point_model` fills, in the order a scenario lists them.
MODEL_KEYS = (
    "p_interactive_to_bulk",
    "p_bulk_to_interactive",
    "gap_ii_s",
    "gap_ib_s",
    "gap_bi_s",
    "gap_bb_s",
    "interactive_bytes_mean",
    "bulk_bytes_mean",
    "bulk_packets_mean",
    "intra_bulk_gap_ms",
)
#: Transition names, as the pooled dict and the scenario's gap keys spell them.
TRANSITIONS = ("ii", "ib", "bi", "bb")


class CaptureError(ValueError):
    """The capture cannot be analysed; the message names the file (and the packet)."""


def default_gap_ms() -> float:
    """The gap rule's default threshold: the scenario's ``queue.classifier_gap_ms``
    default (10^-2.2 s ≈ 6.31 ms, Ogawa §1), read from the scenario model, not retyped."""
    from ..config.scenario import QueueSection

    return float(QueueSection.model_fields["classifier_gap_ms"].default)


def analyze(
    path: str | Path,
    *,
    server_port: int | None = None,
    filter: str | None = None,  # noqa: A002 - the pcap-filter word, as the CLI option
    gap_ms: float | None = None,
    max_packets: int | None = None,
    idle_timeout_s: float | None = None,
    labels: bool = False,
    progress: bool = False,
) -> dict[str, Any]:
    """Analyse the capture at ``path`` (one pass); raises :class:`CaptureError`."""
    from .. import _native

    try:
        return _native.analyze_tcp_capture(
            str(path),
            server_port,
            filter,
            default_gap_ms() if gap_ms is None else float(gap_ms),
            max_packets,
            idle_timeout_s,
            labels,
            progress,
        )
    except ValueError as e:
        raise CaptureError(str(e)) from None


def point_model(pooled: dict[str, Any]) -> dict[str, float]:
    """The ``[traffic]`` point estimates (module docstring) from ``pooled``."""
    tr = pooled["transitions"]
    gaps = pooled["gaps"]
    sizes = pooled["sizes"]
    out: dict[str, float] = {
        "p_interactive_to_bulk": _ratio(tr["ib"], tr["ii"] + tr["ib"]),
        "p_bulk_to_interactive": _ratio(tr["bi"], tr["bi"] + tr["bb"]),
    }
    for t in TRANSITIONS:
        out[f"gap_{t}_s"] = _ratio(gaps[t]["sum"], gaps[t]["n"])
    out["interactive_bytes_mean"] = _size_mean(sizes["interactive"])
    out["bulk_bytes_mean"] = _size_mean(sizes["bulk"])
    out["bulk_packets_mean"] = block_length_mean(pooled["block_lengths"])
    out["intra_bulk_gap_ms"] = _ratio(gaps["intra"]["sum"] * 1e3, gaps["intra"]["n"])
    return out


def block_length_mean(block_lengths: dict[str, Any]) -> float:
    """Mean packets per block (c_B), from the exact counts and the overflow list."""
    counts = block_lengths["counts"]
    over = block_lengths["overflow"]
    n = sum(counts.values()) + len(over)
    total = sum(int(k) * v for k, v in counts.items()) + sum(over)
    return _ratio(total, n)


def summary(pooled: dict[str, Any]) -> dict[str, float]:
    """Counts that go with the model: flows by kind, their shares (p_I, p_B), packets
    per kind, the stationary shares β/(α+β) and α/(α+β) the chain implies."""
    fi, fb = pooled["flows"]["interactive"], pooled["flows"]["bulk"]
    m = point_model(pooled)
    a, b = m["p_interactive_to_bulk"], m["p_bulk_to_interactive"]
    return {
        "flows_interactive": float(fi),
        "flows_bulk": float(fb),
        "share_interactive": _ratio(fi, fi + fb),
        "share_bulk": _ratio(fb, fi + fb),
        "stationary_interactive": _ratio(b, a + b),
        "stationary_bulk": _ratio(a, a + b),
        "packets_interactive": float(sum(pooled["sizes"]["interactive"])),
        "packets_bulk": float(sum(pooled["sizes"]["bulk"])),
        "sessions": float(len(pooled["sessions"])),
    }


#: The time histograms of ``pooled["gaps"]``, in the order of histograms.parquet.
HISTOGRAMS = ("ii", "ib", "bi", "bb", "intra", "request", "response")
#: Float columns of the flows table (None in the dict → NaN).
_FLOAT_COLUMNS = (
    "first_s",
    "last_s",
    "rtt_client_median_ms",
    "rtt_client_p90_ms",
    "rtt_server_median_ms",
    "rtt_server_p90_ms",
)


def records_tables(res: dict[str, Any]) -> dict[str, Any]:
    """The analysis as the tables of docs/analyze.md "Records" (pandas DataFrames):
    ``flows`` (one row per connection), ``histograms`` (the non-empty bins of the time
    histograms), ``sizes`` (non-empty payload sizes), ``block_lengths`` and
    ``sessions``."""
    import numpy as np
    import pandas as pd

    flows = pd.DataFrame(res["flows"])
    if flows.empty:
        flows = pd.DataFrame(columns=["id"])
    for c in _FLOAT_COLUMNS:
        if c in flows:
            flows[c] = pd.to_numeric(flows[c], errors="coerce").astype("float64")
    pooled = res["pooled"]
    edges = np.asarray(pooled["bin_edges_s"])
    parts = []
    for name in HISTOGRAMS:
        c = np.asarray(pooled["gaps"][name]["counts"], dtype=np.int64)
        k = np.nonzero(c)[0]
        parts.append(pd.DataFrame({"histogram": name, "bin": k, "lo_s": edges[k], "hi_s": edges[k + 1], "count": c[k]}))
    hist = pd.concat(parts, ignore_index=True)
    sizes = []
    for kind in ("interactive", "bulk"):
        c = np.asarray(pooled["sizes"][kind], dtype=np.int64)
        k = np.nonzero(c)[0]
        sizes.append(pd.DataFrame({"kind": kind, "bytes": k.astype(np.int64), "count": c[k]}))
    bl = pooled["block_lengths"]
    counts = {int(k): int(v) for k, v in bl["counts"].items()}
    for x in bl["overflow"]:
        counts[int(x)] = counts.get(int(x), 0) + 1
    blocks = pd.DataFrame(
        {
            "packets": np.array(sorted(counts), dtype=np.int64),
            "count": np.array([counts[x] for x in sorted(counts)], dtype=np.int64),
        }
    )
    sessions = pd.DataFrame(pooled["sessions"], columns=["duration_s", "flows", "bytes"]).astype(
        {"duration_s": "float64", "flows": "int64", "bytes": "int64"}
    )
    return {
        "flows": flows,
        "histograms": hist,
        "sizes": pd.concat(sizes, ignore_index=True),
        "block_lengths": blocks,
        "sessions": sessions,
    }


def _size_mean(counts: Any) -> float:
    import numpy as np

    c = np.asarray(counts, dtype=np.float64)
    return _ratio(float((c * np.arange(len(c))).sum()), float(c.sum()))


def _ratio(num: float, den: float) -> float:
    return float(num) / den if den else math.nan

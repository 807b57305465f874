"""Any capture of any remote-display protocol → operations, by the native analyser
(``crates/capture`` reading the file, ``proto::capture`` splitting it at idle gaps;
docs/desktop.md "Analysing a capture" defines an operation, its latency and its round
trips). This module only calls it and turns its columns into DataFrames.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...config.desktop_defaults import DEFAULT_IDLE_MS

__all__ = ["CaptureError", "CaptureAnalysis", "split_capture", "DEFAULT_IDLE_MS", "OP_COLUMNS", "PACKET_COLUMNS"]


# Column → meaning of the operations table (docs/desktop.md "Records").
OP_COLUMNS = {
    "op": "operation number in the capture (0, 1, …)",
    "first_packet": "number in the file of its first payload packet",
    "last_packet": "number of its last payload packet",
    "t_start": "its first payload packet (s since the epoch)",
    "t_input": "first client→server payload packet: the input (NaN: none)",
    "t_first_update": "first server→client payload packet after the input",
    "t_end": "last server→client payload packet after the input: the end of the update",
    "latency_ms": "t_end − t_input (NaN: no input or no update)",
    "first_update_ms": "t_first_update − t_input",
    "client_started": "the burst began with a client→server packet",
    "packets_c2s": "client→server packets (pure ACKs up to the next operation included)",
    "bytes_c2s": "client→server IP bytes",
    "payload_c2s": "client→server TCP payload bytes",
    "packets_s2c": "server→client packets",
    "bytes_s2c": "server→client IP bytes",
    "payload_s2c": "server→client TCP payload bytes",
    "round_trips": "client→server then server→client turns among payload packets",
    "direction_changes": "changes of direction among payload packets",
    "gap_before_ms": "silence before it (NaN for the first)",
}
PACKET_COLUMNS = {
    "number": "packet number in the file",
    "t": "timestamp (s since the epoch)",
    "s2c": "server→client (False: client→server)",
    "ip_len": "IP length as sent",
    "payload": "TCP payload bytes",
    "op": "operation it was counted in (-1: before the first)",
}


class CaptureError(ValueError):
    """The capture cannot be analysed; the message names the file (and the packet)."""


@dataclass
class CaptureAnalysis:
    path: Path
    ops: pd.DataFrame  # OP_COLUMNS
    packets: pd.DataFrame | None  # PACKET_COLUMNS, when asked for
    meta: dict[str, Any]


def split_capture(
    path: str | Path,
    port: int,
    addr: str | None = None,
    port_at_client: bool = False,
    idle_ms: float = DEFAULT_IDLE_MS,
    keep_packets: bool = False,
    require_gap: bool = True,
) -> CaptureAnalysis:
    """Split the display traffic of ``path`` (TCP ``port`` at ``addr``, or at any address)
    into operations. ``port_at_client``: the listening end is the user's side (plain X11:
    the X server is the display). Raises :class:`CaptureError`."""
    from ... import _native

    if not 0 < port < 65536:
        raise CaptureError(f"port must be 1..65535, got {port}")
    try:
        raw = _native.analyze_capture(
            str(path),
            port,
            addr=addr,
            port_at_client=port_at_client,
            idle_ms=float(idle_ms),
            keep_packets=keep_packets,
            require_gap=require_gap,
        )
    except ValueError as e:
        raise CaptureError(str(e)) from None
    o = raw["ops"]

    def secs(col: str) -> np.ndarray:
        v = o[col].astype("float64")
        return np.where(v < 0, np.nan, v / 1e9)

    def ms(col: str) -> np.ndarray:
        v = o[col].astype("float64")
        return np.where(v < 0, np.nan, v / 1e6)

    n = len(o["first_packet"])
    ops = pd.DataFrame(
        {
            "op": np.arange(n, dtype="int64"),
            "first_packet": o["first_packet"].astype("int64"),
            "last_packet": o["last_packet"].astype("int64"),
            "t_start": o["t_start_ns"] / 1e9,
            "t_input": secs("t_input_ns"),
            "t_first_update": secs("t_first_update_ns"),
            "t_end": secs("t_end_ns"),
            "latency_ms": ms("latency_ns"),
            "first_update_ms": np.where(
                (o["t_first_update_ns"] < 0) | (o["t_input_ns"] < 0),
                np.nan,
                (o["t_first_update_ns"] - o["t_input_ns"]) / 1e6,
            ),
            "client_started": o["client_started"],
            "packets_c2s": o["packets_c2s"].astype("int64"),
            "bytes_c2s": o["bytes_c2s"].astype("int64"),
            "payload_c2s": o["payload_c2s"].astype("int64"),
            "packets_s2c": o["packets_s2c"].astype("int64"),
            "bytes_s2c": o["bytes_s2c"].astype("int64"),
            "payload_s2c": o["payload_s2c"].astype("int64"),
            "round_trips": o["round_trips"].astype("int64"),
            "direction_changes": o["direction_changes"].astype("int64"),
            "gap_before_ms": ms("gap_before_ns"),
        }
    )
    packets = None
    if raw["packets"] is not None:
        p = raw["packets"]
        packets = pd.DataFrame(
            {
                "number": p["number"].astype("int64"),
                "t": p["t_ns"] / 1e9,
                "s2c": p["s2c"],
                "ip_len": p["ip_len"].astype("int64"),
                "payload": p["payload"].astype("int64"),
                "op": p["op"],
            }
        )
    meta = {
        "capture": str(path),
        "format": raw["format"],
        "server_port": port,
        "server_addr": addr,
        "port_at_client": port_at_client,
        "idle_ms": float(idle_ms),
        "packets_total": int(raw["packets_total"]),
        "packets_tcp": int(raw["packets_tcp"]),
        "packets_matched": int(raw["packets_matched"]),
        "operations": n,
    }
    return CaptureAnalysis(Path(path), ops, packets, meta)

"""The emulator's per-packet event log (``thinwan-link --events``), as a DataFrame.

Format (crates/net/src/evlog.rs, docs/lab.md): a 16-byte header (``TWEVLOG\\0``,
version, record size) and fixed 64-byte little-endian records.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["EVENT_DTYPE", "EVENTS", "REASONS", "read_events", "events_to_parquet"]

MAGIC = b"TWEVLOG\0"
VERSION = 1
HEADER = 16

EVENT_DTYPE = np.dtype(
    [
        ("t_ns", "<u8"),
        ("pkt", "<u8"),
        ("due_ns", "<u8"),
        ("src", "<u4"),
        ("dst", "<u4"),
        ("seq", "<u4"),
        ("ack", "<u4"),
        ("q_bytes", "<u4"),
        ("sport", "<u2"),
        ("dport", "<u2"),
        ("ip_len", "<u2"),
        ("payload", "<u2"),
        ("q_pkts", "<u2"),
        ("dir", "u1"),
        ("event", "u1"),
        ("reason", "u1"),
        ("flags", "u1"),
        ("proto", "u1"),
        ("version", "u1"),
        ("tos", "u1"),  # IPv4 TOS / IPv6 traffic class (was padding: older logs read 0)
        ("_pad", "V3"),
    ]
)
assert EVENT_DTYPE.itemsize == 64

# Codes of the `event` and `reason` columns.
EVENTS = {0: "arrival", 1: "enqueue", 2: "dequeue", 3: "drop", 4: "deliver"}
ARRIVAL, ENQUEUE, DEQUEUE, DROP, DELIVER = range(5)
REASONS = {
    0: "",
    1: "overflow",
    2: "pushed_out",
    3: "loss",
    4: "burst_loss",
    5: "malformed",
    6: "shutdown",
    7: "write_error",
    8: "codel",
}
FWD, REV = 0, 1
SYN = 0x02


def read_events(path: str | Path) -> pd.DataFrame:
    """All records of an event log (columns as in :data:`EVENT_DTYPE`, without padding)."""
    path = Path(path)
    with path.open("rb") as f:
        head = f.read(HEADER)
    if len(head) < HEADER or head[:8] != MAGIC:
        raise ValueError(f"{path}: not a thinwan-link event log")
    version = int.from_bytes(head[8:12], "little")
    size = int.from_bytes(head[12:16], "little")
    if version != VERSION or size != EVENT_DTYPE.itemsize:
        raise ValueError(f"{path}: event log version {version} / record size {size} not supported")
    usable = (path.stat().st_size - HEADER) // size * size
    data = np.fromfile(path, dtype=EVENT_DTYPE, count=usable // size, offset=HEADER)
    frame = pd.DataFrame(data)
    return frame.drop(columns="_pad")


def events_to_parquet(path: str | Path, out: str | Path) -> Path:
    """Convert an event log to Parquet (event and reason codes kept as integers)."""
    frame = read_events(path)
    out = Path(out)
    frame.to_parquet(out, index=False)
    return out


def ip_to_int(addr: str) -> int:
    """Dotted IPv4 → the integer stored in ``src``/``dst``."""
    a, b, c, d = (int(x) for x in addr.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d

"""TCP state of the pump's connections over time, sampled with ``ss -tinm`` (iproute2).

Linux keeps no per-connection cwnd/RTO history the way the simulator does, so during
``lab run`` a thread asks ``ss`` inside the server namespace for every socket towards
the sink, every ``records.trace_interval_ms`` (100 ms at the least: one ``ss`` run
costs a few ms of a CPU the lab shares). Each sample is stamped with CLOCK_MONOTONIC
(``time.monotonic_ns``, the clock of every lab log) halfway through the ``ss`` run.
Sockets are mapped to connection ids by their local port (``conns.json``).

``ss`` reports what ``TCP_INFO`` holds: ``cwnd`` and ``ssthresh`` in segments of
``mss`` (``ssthresh`` is left out until the first loss: ``inf`` here, as in the
simulator), ``rtt:SRTT/RTTVAR`` and ``rto`` in ms (RTO with backoff). Linux keeps no
"latest RTT sample" in ``TCP_INFO``, so the ``rtt`` column is NaN. Two lab-only columns
follow the schema's: ``sndbuf`` (``skmem`` ``tb``: the socket's send buffer, ``sk_sndbuf``,
as autotuning has set it) and ``wmem_queued`` (``skmem`` ``w``: what the queue holds
against it, headers and skb overhead included; a ``write`` blocks while it is at
``sndbuf``), in bytes.
"""

from __future__ import annotations

import math
import re
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...records.schema import empty_table, table_from_columns

__all__ = ["SsSampler", "MIN_INTERVAL_S", "parse_ss", "conn_trace"]

MIN_INTERVAL_S = 0.1
_FIELD = re.compile(r"\b(rto|rtt|cwnd|ssthresh|mss):([0-9.]+)(?:/([0-9.]+))?")
_SKMEM = re.compile(r"\bskmem:\(([^)]*)\)")
_SKMEM_ITEM = re.compile(r"([a-z]+)([0-9]+)")
# skmem item → conn_trace column (ss(8): tb = sk_sndbuf, w = sk_wmem_queued).
_SKMEM_COLUMNS = {"tb": "sndbuf", "w": "wmem_queued"}


class SsSampler:
    """Runs ``ss -tinmH`` in ``netns`` every ``interval_s`` in a background thread."""

    def __init__(self, netns: str, dport: int, interval_s: float) -> None:
        self.argv = ["nsenter", f"--net=/run/netns/{netns}", "ss", "-tinmH", "dport", "=", f":{dport}"]
        self.interval = max(interval_s, MIN_INTERVAL_S)
        self.samples: list[tuple[int, str]] = []  # (CLOCK_MONOTONIC ns, ss output)
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tw-ss", daemon=True)

    def start(self) -> SsSampler:
        self._thread.start()
        return self

    def stop(self) -> list[tuple[int, str]]:
        self._stop.set()
        self._thread.join(timeout=10.0)
        return self.samples

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            before = time.monotonic_ns()
            try:
                done = subprocess.run(self.argv, capture_output=True, text=True, timeout=5.0)
                ok = done.returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            after = time.monotonic_ns()
            if ok:
                self.samples.append(((before + after) // 2, done.stdout))
            else:
                self.errors += 1
            next_t += self.interval
            # Behind schedule (a slow ss): skip ahead rather than sample in a burst.
            next_t = max(next_t, time.monotonic())
            self._stop.wait(next_t - time.monotonic())


def parse_ss(text: str) -> list[dict[str, Any]]:
    """Sockets of one ``ss -tinmH`` output: local/peer address, the TCP fields and the
    send-buffer fields of ``skmem``."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            cols = line.split()
            # State Recv-Q Send-Q Local:Port Peer:Port
            if len(cols) >= 5:
                out.append({"state": cols[0], "local": cols[-2], "peer": cols[-1]})
            continue
        if not out:
            continue
        sock = out[-1]
        for skmem in _SKMEM.findall(line):
            for key, value in _SKMEM_ITEM.findall(skmem):
                if key in _SKMEM_COLUMNS:
                    sock[_SKMEM_COLUMNS[key]] = float(value)
        for key, a, b in _FIELD.findall(_SKMEM.sub("", line)):
            if key == "rtt":
                sock["srtt_ms"], sock["rttvar_ms"] = float(a), float(b or "nan")
            else:
                sock[key] = float(a)
    return out


def conn_trace(samples: Sequence[tuple[int, str]], conns: Sequence[Mapping[str, Any]], t0_ns: int) -> pd.DataFrame:
    """The ``conn_trace`` table (docs/records.md) from sampler output and ``conns.json``."""
    by_port = {int(c["local"].rsplit(":", 1)[1]): int(c["conn"]) for c in conns}
    cols: dict[str, list[float]] = {
        k: [] for k in ("conn", "t", "cwnd", "ssthresh", "srtt", "rttvar", "rto", "rtt", *_SKMEM_COLUMNS.values())
    }
    for t_ns, text in samples:
        for s in parse_ss(text):
            try:
                port = int(s["local"].rsplit(":", 1)[1])
            except (ValueError, IndexError):
                continue
            conn = by_port.get(port)
            # Before the handshake completes the MSS is a placeholder (524) and there
            # is no RTT yet.
            if conn is None or s["state"].startswith("SYN") or "cwnd" not in s or "mss" not in s:
                continue
            mss = s["mss"]
            cols["conn"].append(conn)
            cols["t"].append((t_ns - t0_ns) / 1e9)
            cols["cwnd"].append(s["cwnd"] * mss)
            cols["ssthresh"].append(s["ssthresh"] * mss if "ssthresh" in s else math.inf)
            cols["srtt"].append(s.get("srtt_ms", math.nan) / 1e3)
            cols["rttvar"].append(s.get("rttvar_ms", math.nan) / 1e3)
            cols["rto"].append(s.get("rto", math.nan) / 1e3)
            cols["rtt"].append(math.nan)
            for col in _SKMEM_COLUMNS.values():
                cols[col].append(s.get(col, math.nan))
    if not cols["conn"]:
        return empty_table("conn_trace")
    frame = pd.DataFrame(cols).sort_values(["conn", "t"], kind="stable")
    return table_from_columns(
        "conn_trace", {k: frame[k].to_numpy(dtype=np.float64 if k != "conn" else np.uint32) for k in cols}
    )

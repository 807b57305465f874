"""A rough first look at a desktop capture, through tshark: enough to check the bring-up
(an operation produced server→client traffic; WAN latency exceeds LAN by a round trip).
It is not the analyser of issue 16 (idle-gap splitting, no timestamps from the driver,
any pcap): it uses the driver's input times (:class:`OpRecord`) to find each operation.

Latency of an operation = last server→client packet carrying payload before the next
input − first client→server packet carrying payload at or after the input.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .procs import DesktopError
from .session import OpRecord

__all__ = ["read_packets", "op_latencies", "OpLatency"]


def read_packets(pcap: str | Path, port: int, server_addr: str = "198.18.1.1") -> np.ndarray:
    """Packets of the platform's connection(s) (TCP ``port`` at either end): structured
    array with ``t`` (epoch s), ``s2c`` (bool), ``ip_len``, ``payload``. The direction
    comes from the address: for ``x11`` the listening port is the client's (the X
    server), while "server" is the side that runs the application."""
    done = subprocess.run(
        [
            "tshark",
            "-n",
            "-r",
            str(pcap),
            "-Y",
            f"tcp.port == {port}",
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "ip.src",
            "-e",
            "ip.len",
            "-e",
            "tcp.len",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise DesktopError(f"tshark cannot read {pcap}: {done.stderr.strip()[-500:]}")
    rows = [line.split("\t") for line in done.stdout.splitlines() if line.strip()]
    out = np.zeros(len(rows), dtype=[("t", "f8"), ("s2c", "?"), ("ip_len", "i4"), ("payload", "i4")])
    for i, (t, src, ip_len, tcp_len) in enumerate(rows):
        out[i] = (float(t), src == server_addr, int(ip_len), int(tcp_len or 0))
    return out


@dataclass(frozen=True)
class OpLatency:
    op: str
    index: int
    latency_ms: float | None  # None: no input packet or no update found
    first_update_ms: float | None
    bytes_s2c: int
    bytes_c2s: int
    packets_s2c: int

    def to_json(self) -> dict[str, object]:
        return self.__dict__.copy()


def op_latencies(
    pcap: str | Path, port: int, records: Sequence[OpRecord], server_addr: str = "198.18.1.1", gap_ms: float = 80.0
) -> list[OpLatency]:
    """Per record: latency to the last server→client payload packet, and to the end of the
    first burst of them (the first update; a burst ends at a gap of ``gap_ms``: TigerVNC,
    for one, sends a lossless refresh ~100 ms after a lossy JPEG update)."""
    pk = read_packets(pcap, port, server_addr)
    out = []
    for k, r in enumerate(records):
        # The window: from the measured input to the next record's first input (its reset
        # key if it had one), or to the end of this record's pause.
        end = r.t_settled
        if k + 1 < len(records):
            nxt = records[k + 1]
            end = min(end, nxt.t_reset if nxt.t_reset is not None else nxt.t_input)
        w = pk[(pk["t"] >= r.t_input) & (pk["t"] < end)]
        c2s = w[~w["s2c"] & (w["payload"] > 0)]
        s2c = w[w["s2c"] & (w["payload"] > 0)]
        lat = first = None
        if len(c2s) and len(s2c):
            t0 = c2s["t"][0]
            after = s2c[s2c["t"] > t0]["t"]
            if len(after):
                lat = (after[-1] - t0) * 1000.0
                gaps = np.flatnonzero(np.diff(after) * 1000.0 > gap_ms)
                first = ((after[gaps[0]] if len(gaps) else after[-1]) - t0) * 1000.0
        out.append(
            OpLatency(
                r.op,
                r.index,
                lat,
                first,
                int(w["ip_len"][w["s2c"]].sum()),
                int(w["ip_len"][~w["s2c"]].sum()),
                int(len(s2c)),
            )
        )
    return out

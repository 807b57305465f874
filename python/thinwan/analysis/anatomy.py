"""Anatomy of a timeout: why did this retransmission timer fire? (pure, over records)

Given the records of one run with the packet log on for one connection
(:func:`thinwan.substrates.sim.timeout_records` re-runs it so: runs are deterministic and
logging changes nothing), picks one of its timeouts and collects everything around it
on one time axis (drawn by :mod:`thinwan.report.anatomy_page`):

1. sequence numbers — data sent (retransmissions marked), dropped, arriving at the
   client, and the cumulative ACK as the server sees it;
2. cwnd and ssthresh;
3. RTT samples, SRTT, RTTVAR and the RTO;
4. the bottleneck queue.

It also says in words what happened: the RTO in force, the last RTT sample, and whether
the timed-out segment had actually been dropped (a spurious timeout when not).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..config.files import ScenarioError
from ..config.scenario import Scenario
from ..records.schema import RunRecords
from .metrics import BOTTLENECK

__all__ = ["Anatomy", "find_timeout", "worst_connection", "with_packet_log", "TIMEOUT"]

# packet_log event codes (docs/records.md)
DATA_SENT, DROPPED, DATA_ARRIVED, ACK_SENT, ACK_ARRIVED, TIMEOUT = range(6)


@dataclass
class Anatomy:
    """One timeout and the records around it."""

    scenario: Scenario
    run: int
    conn: int
    t_timeout: float
    seq: int
    window: tuple[float, float]
    packets: pd.DataFrame  # packet_log rows of `conn` inside the window
    trace: pd.DataFrame  # conn_trace rows of `conn` (from before the window on)
    queue: pd.DataFrame  # bottleneck queue_trace rows inside the window
    timeouts_total: int

    def explain(self) -> str:
        """A few lines saying why the timer fired."""
        before = self.trace.loc[self.trace["t"] < self.t_timeout]
        state = before.iloc[-1] if not before.empty else None
        sent = self.packets.loc[
            (self.packets["event"] == DATA_SENT)
            & (self.packets["seq"] <= self.seq)
            & (self.packets["seq"] + self.packets["len"] > self.seq)
            & (self.packets["t"] < self.t_timeout)
        ]
        drops = self.packets.loc[
            (self.packets["event"] == DROPPED)
            & (self.packets["seq"] <= self.seq)
            & (self.packets["seq"] + self.packets["len"] > self.seq)
            & (self.packets["t"] < self.t_timeout)
        ]
        lines = [
            f"run {self.run}, connection {self.conn}: retransmission timeout at "
            f"t = {self.t_timeout:.6f} s for byte {self.seq} "
            f"(timeout {self._index()} of {self.timeouts_total} on this connection)"
        ]
        if not sent.empty:
            last = sent.iloc[-1]
            lines.append(
                f"  the segment was last sent at t = {last['t']:.6f} s, "
                f"{(self.t_timeout - last['t']) * 1000:.1f} ms before the timeout"
            )
        if state is not None:
            lines.append(
                f"  RTO in force {state['rto'] * 1000:.1f} ms; SRTT {state['srtt'] * 1000:.1f} ms, "
                f"RTTVAR {state['rttvar'] * 1000:.1f} ms, last RTT sample {state['rtt'] * 1000:.1f} ms; "
                f"cwnd {state['cwnd']:.0f} B"
            )
        q = self.queue.loc[self.queue["t"] <= self.t_timeout]
        if not q.empty:
            lines.append(
                f"  bottleneck queue at the timeout: {q.iloc[-1]['bytes'] / 1000:.1f} kB "
                f"(max {self.queue['bytes'].max() / 1000:.1f} kB in the window)"
            )
        if drops.empty:
            lines.append(
                "  the segment had NOT been dropped: a spurious timeout (it was still queued or its ACK was on the way)"
            )
        else:
            lines.append(f"  the segment was dropped at t = {drops.iloc[-1]['t']:.6f} s: a genuine loss")
        return "\n".join(lines)

    def _index(self) -> int:
        t = self.packets.loc[self.packets["event"] == TIMEOUT, "t"]
        return int((t <= self.t_timeout).sum()) if not t.empty else 1


def worst_connection(records: RunRecords, scenario: Scenario, run: int) -> int:
    """The connection with the most timeouts (raises if the run has none)."""
    conns = records.connections
    if conns.empty or int(conns["timeouts"].max()) == 0:
        raise ScenarioError(f"{scenario.name}: run {run} has no retransmission timeout to explain")
    return int(conns.loc[conns["timeouts"].idxmax(), "conn"])


def find_timeout(
    rec: RunRecords,
    scenario: Scenario,
    run: int,
    conn: int,
    which: int = 1,
    before_s: float = 2.0,
    after_s: float = 0.5,
) -> Anatomy:
    """The ``which``-th timeout of ``conn`` in ``rec`` (records with ``conn``'s packet log)
    and the records around it."""
    if conn >= len(rec.connections):
        raise ScenarioError(f"--conn {conn}: the scenario has {len(rec.connections)} connections")
    log = rec.packet_log
    timeouts = log.loc[log["event"] == TIMEOUT].reset_index(drop=True)
    if timeouts.empty:
        raise ScenarioError(f"{scenario.name}: run {run}, connection {conn} has no retransmission timeout")
    if not 1 <= which <= len(timeouts):
        raise ScenarioError(f"--timeout {which}: connection {conn} has {len(timeouts)} timeout(s)")
    t0 = float(timeouts.loc[which - 1, "t"])
    seq = int(timeouts.loc[which - 1, "seq"])
    lo, hi = t0 - before_s, t0 + after_s
    qt = rec.queue_trace
    ct = rec.conn_trace
    return Anatomy(
        scenario=scenario,
        run=run,
        conn=conn,
        t_timeout=t0,
        seq=seq,
        window=(lo, hi),
        packets=log.loc[(log["t"] >= lo) & (log["t"] <= hi)].reset_index(drop=True),
        trace=ct.loc[(ct["conn"] == conn) & (ct["t"] <= hi)].reset_index(drop=True),
        queue=qt.loc[(qt["port"] == BOTTLENECK) & (qt["t"] >= lo) & (qt["t"] <= hi)].reset_index(drop=True),
        timeouts_total=len(timeouts),
    )


def with_packet_log(scenario: Scenario, conns: list[int]) -> Scenario:
    """``scenario`` with traces on and the packet log of ``conns`` (a finer queue trace
    for the picture; tracing and logging never change the run)."""
    interval = min(scenario.records.trace_interval_ms, 1.0)
    return scenario.with_values(
        {
            "records.traces": True,
            "records.trace_connections": "all",
            "records.trace_interval_ms": interval,
            "records.packet_log_conns": conns,
        }
    )

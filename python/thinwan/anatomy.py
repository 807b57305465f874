"""Anatomy of a timeout: why did this retransmission timer fire?

Re-runs one run of a scenario with the packet log on for one connection (runs are
deterministic and logging changes nothing, so it is the same run), picks one of its
timeouts, and draws everything around it on one time axis:

1. sequence numbers — data sent (retransmissions marked), dropped, arriving at the
   client, and the cumulative ACK as the server sees it;
2. cwnd and ssthresh;
3. RTT samples, SRTT, RTTVAR and the RTO;
4. the bottleneck queue.

It also says in words what happened: the RTO in force, the last RTT sample, and whether
the timed-out segment had actually been dropped (a spurious timeout when not).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import _native
from .metrics import BOTTLENECK
from .records import RunRecords
from .scenario import Scenario, ScenarioError, load_scenario

__all__ = ["Anatomy", "anatomy", "add_anatomy_subcommand"]

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


def anatomy(
    scenario: Scenario,
    run: int = 0,
    conn: int | None = None,
    which: int = 1,
    before_s: float = 2.0,
    after_s: float = 0.5,
) -> Anatomy:
    """Find the ``which``-th timeout of ``conn`` (default: the connection with the most
    timeouts) in run ``run`` and collect the records around it."""
    if conn is None:
        probe = RunRecords.from_native(_native.simulate(_with(scenario, []).to_native_json(), run))
        conns = probe.connections
        if conns.empty or int(conns["timeouts"].max()) == 0:
            raise ScenarioError(f"{scenario.name}: run {run} has no retransmission timeout to explain")
        conn = int(conns.loc[conns["timeouts"].idxmax(), "conn"])
    rec = RunRecords.from_native(_native.simulate(_with(scenario, [conn]).to_native_json(), run))
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


def _with(scenario: Scenario, conns: list[int]) -> Scenario:
    # A finer queue trace for the picture; tracing and logging never change the run.
    interval = min(scenario.records.trace_interval_ms, 1.0)
    return scenario.with_values(
        {
            "records.traces": True,
            "records.trace_connections": "all",
            "records.trace_interval_ms": interval,
            "records.packet_log_conns": conns,
        }
    )


def figure(a: Anatomy) -> Any:
    """The four-panel picture (a matplotlib Figure)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 10))
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.06, top=0.93, hspace=0.12)
    seq_ax, cwnd_ax, rtt_ax, q_ax = fig.subplots(4, 1, sharex=True)
    p = a.packets
    base = int(p.loc[p["event"] != TIMEOUT, "seq"].min()) if (p["event"] != TIMEOUT).any() else a.seq
    kb = lambda s: (s.astype(float) - base) / 1000.0  # noqa: E731
    sent = p.loc[p["event"] == DATA_SENT]
    for retx, color, label in ((0, "tab:blue", "sent"), (1, "tab:red", "retransmitted")):
        part = sent.loc[sent["retx"] == retx]
        seq_ax.scatter(part["t"], kb(part["seq"]), s=6, color=color, label=label, zorder=3)
    arrived = p.loc[p["event"] == DATA_ARRIVED]
    seq_ax.scatter(arrived["t"], kb(arrived["seq"]), s=3, color="tab:green", label="arrived at client")
    dropped = p.loc[(p["event"] == DROPPED) & (p["len"] > 0)]
    seq_ax.scatter(dropped["t"], kb(dropped["seq"]), s=30, marker="x", color="black", label="dropped", zorder=4)
    acks = p.loc[p["event"] == ACK_ARRIVED]
    seq_ax.step(acks["t"], kb(acks["seq"]), where="post", color="tab:orange", linewidth=0.9, label="cum. ACK at server")
    seq_ax.set_ylabel(f"sequence − {base} (kB)")
    seq_ax.legend(fontsize=7, loc="upper left", ncol=3)
    tr = a.trace
    mss = a.scenario.tcp.mss
    cwnd_ax.step(tr["t"], tr["cwnd"] / mss, where="post", label="cwnd")
    cwnd_ax.step(tr["t"], tr["ssthresh"].where(np.isfinite(tr["ssthresh"])) / mss, where="post", label="ssthresh")
    cwnd_ax.set_ylabel("segments")
    cwnd_ax.legend(fontsize=7, loc="upper left")
    for col, style in (("rto", "-"), ("srtt", "-"), ("rttvar", ":")):
        rtt_ax.step(tr["t"], tr[col] * 1000.0, where="post", linestyle=style, label=col.upper())
    rtt_ax.scatter(tr["t"], tr["rtt"] * 1000.0, s=5, color="gray", label="RTT sample", zorder=3)
    rtt_ax.set_ylabel("ms")
    rtt_ax.legend(fontsize=7, loc="upper left", ncol=4)
    q_ax.plot(a.queue["t"], a.queue["bytes"] / 1000.0, linewidth=0.8)
    q_ax.set_ylabel("bottleneck queue (kB)")
    q_ax.set_xlabel("time (s)")
    for ax in (seq_ax, cwnd_ax, rtt_ax, q_ax):
        ax.axvline(a.t_timeout, color="tab:red", linestyle="--", linewidth=1)
        ax.grid(True, alpha=0.3)
        ax.set_xlim(*a.window)
    fig.suptitle(f"Anatomy of a timeout: {a.scenario.name}, run {a.run}, connection {a.conn}, t = {a.t_timeout:.3f} s")
    return fig


def add_anatomy_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``anatomy`` to the ``thinwan`` command."""
    p = subparsers.add_parser(
        "anatomy",
        help="explain one retransmission timeout of a run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", metavar="SCENARIO.toml")
    p.add_argument("--run", type=int, default=0, help="run index (seed = scenario.seed + run; default 0)")
    p.add_argument("--conn", type=int, help="connection (default: the one with the most timeouts)")
    p.add_argument("--timeout", type=int, default=1, metavar="N", help="the N-th timeout of it (default 1)")
    p.add_argument("--before", type=float, default=2.0, metavar="S", help="seconds shown before it (default 2)")
    p.add_argument("--after", type=float, default=0.5, metavar="S", help="seconds shown after it (default 0.5)")
    p.add_argument("--out", metavar="FILE.png", help="picture (default: results/<name>/anatomy-run<K>-conn<C>-<N>.png)")
    p.set_defaults(func=_cmd_anatomy)
    return p


def _cmd_anatomy(args: argparse.Namespace) -> int:
    """Re-run one run with the packet log on, explain a timeout in words and in a picture."""
    scenario = load_scenario(args.scenario)
    if args.run < 0 or (args.conn is not None and args.conn < 0) or args.before < 0 or args.after < 0:
        raise ScenarioError("--run, --conn, --before and --after must not be negative")
    a = anatomy(scenario, args.run, args.conn, args.timeout, args.before, args.after)
    out = (
        Path(args.out)
        if args.out
        else (Path("results") / scenario.name / f"anatomy-run{a.run}-conn{a.conn}-{args.timeout}.png")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    figure(a).savefig(out, dpi=100)
    print(a.explain())
    print(f"picture: {out}", file=sys.stderr)
    return 0

"""Join pump, sink and emulator logs into the records of docs/records.md.

All three logs carry CLOCK_MONOTONIC nanoseconds; records are seconds since the pump's
``t0`` (the run start). The message log follows the data: a message's last byte sits
at stream offset ``end_offset − 1`` of its connection; the emulator saw every copy of
the TCP segment carrying it (server→client arrivals whose relative sequence range
covers that offset), and the copy that was delivered first gives ``t_tx``, ``t_enq``,
``t_deq`` and ``t_arrive`` (docs/lab.md, "From logs to records").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .. import _native
from ..config.scenario import Scenario
from ..records.evlog import ARRIVAL, DELIVER, DEQUEUE, DROP, ENQUEUE, FWD, REV, SYN, ip_to_int
from ..records.schema import SCHEMA, RunRecords, empty_table, table_from_columns
from .lab_qds import packet_rtt, qds_tables

__all__ = ["lab_records"]

NAN = math.nan
PORTS = {FWD: "bottleneck", REV: "bottleneck-rev"}
# A write "waited" when TCP took it more than this after its schedule (connections table):
# the simulator's threshold (crates/sim/src/records.rs WRITE_WAIT), one definition.
WRITE_WAIT_NS: int = _native.write_wait_ns()


def lab_records(
    scenario: Scenario,
    events: pd.DataFrame,
    pump: pd.DataFrame,
    sink: pd.DataFrame,
    conns: Mapping[str, Any],
    link: Mapping[str, Any],
    link_stats: Mapping[str, Any] | None,
    meta: Mapping[str, Any],
    qds_log: pd.DataFrame | None = None,
) -> RunRecords:
    """The records of one lab run from its logs, already read: the emulator's events
    (:func:`thinwan.records.evlog.read_events`), the pump's and the sink's CSV, and the
    pump's ``conns.json`` (connection ids, local addresses, ``t0_ns``); with
    ``topology.kind = "middlebox"`` or ``records.packet_rtt`` the ``packet_rtt`` table, and
    with thinwan-link's QDS log (``qds_log``, :func:`thinwan.analysis.lab_qds.read_qds_log`)
    ``qds_flows`` and ``qds_classes`` (:mod:`thinwan.analysis.lab_qds`)."""
    t0 = int(conns["t0_ns"])
    ev = events.sort_values(["dir", "t_ns"], kind="stable").reset_index(drop=True)
    ev["t"] = (ev["t_ns"].astype(np.int64) - t0) / 1e9

    messages, per_conn = _messages(pump, sink, ev, conns["conns"], t0)
    msg_table = (
        table_from_columns("messages", _complete("messages", messages))
        if len(messages["conn"])
        else empty_table("messages")
    )
    connections = _connections(conns["conns"], pump, sink, per_conn, scenario)
    ports = _ports(ev, pump, conns["conns"], link, link_stats, scenario)
    queue_trace = _queue_trace(ev, scenario) if scenario.records.traces else empty_table("queue_trace")
    records = RunRecords(
        messages=msg_table,
        connections=connections,
        ports=ports,
        queue_trace=queue_trace,
        meta={**meta, "t0_monotonic_ns": t0},
    )
    if scenario.topology.kind == "middlebox" or scenario.records.packet_rtt or qds_log is not None:
        records.packet_rtt = packet_rtt(scenario, ev, pump, conns["conns"], t0)
    if qds_log is not None:
        records.qds_flows, records.qds_classes = qds_tables(qds_log, conns["conns"], t0, records.packet_rtt)
    return records


def _complete(table: str, columns: dict[str, Any]) -> dict[str, Any]:
    """Fill columns the lab cannot observe (e.g. RACK/TLP counters of the simulator's
    model, which Linux does not report per connection) with 0, or NaN for floats."""
    n = len(next(iter(columns.values()))) if columns else 0
    for col, dtype in SCHEMA[table].items():
        if col not in columns:
            columns[col] = np.full(n, math.nan) if dtype.startswith("float") else np.zeros(n, dtype=dtype)
    return columns


def _flows(ev: pd.DataFrame, conn_list: list[dict[str, Any]]) -> dict[int, pd.DataFrame]:
    """Per connection: its server→client TCP packets (all event kinds), with the
    relative stream range ``[rel, rel_end)`` of each data packet."""
    fwd = ev[(ev["dir"] == FWD) & (ev["proto"] == 6)]
    out = {}
    for c in conn_list:
        host, port = c["local"].rsplit(":", 1)
        f = fwd[(fwd["src"] == ip_to_int(host)) & (fwd["sport"] == int(port))]
        syn = f[(f["event"] == ARRIVAL) & ((f["flags"] & SYN) != 0)]
        if syn.empty:
            out[c["conn"]] = f.iloc[0:0].assign(rel=np.int64(0), rel_end=np.int64(0))
            continue
        isn = int(syn["seq"].iloc[0])
        # Relative sequence, unwrapped: the stream starts at ISN + 1 and grows.
        # As signed 32-bit values, so the SYN itself (ISN = relative −1) does not look
        # like a wrap.
        rel32 = (f["seq"].astype(np.int64) - isn - 1 + (1 << 31)) % (1 << 32) - (1 << 31)
        rel = _unwrap32(rel32.to_numpy())
        out[c["conn"]] = f.assign(rel=rel, rel_end=rel + f["payload"].astype(np.int64))
    return out


def _unwrap32(x: np.ndarray) -> np.ndarray:
    """Undo 32-bit wrap of a mostly increasing sequence (retransmissions step back a bit)."""
    if x.size == 0:
        return x.astype(np.int64)
    d = np.diff(x)
    steps = np.concatenate([[0], np.cumsum(np.where(d < -(1 << 31), 1, 0) - np.where(d > (1 << 31), 1, 0))])
    return x.astype(np.int64) + steps * (1 << 32)


def _messages(
    pump: pd.DataFrame, sink: pd.DataFrame, ev: pd.DataFrame, conn_list: list[dict[str, Any]], t0: int
) -> tuple[dict[str, np.ndarray], dict[int, dict[str, int]]]:
    flows = _flows(ev, conn_list)
    read = ((sink["t_read_ns"].astype(np.int64) - t0) / 1e9).set_axis(pd.MultiIndex.from_frame(sink[["conn", "msg"]]))
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "conn",
            "pair",
            "kind",
            "bytes",
            "t_write",
            "t_first_tx",
            "t_tx",
            "t_enq",
            "t_deq",
            "t_arrive",
            "t_read",
            "retx",
        )
    }
    per_conn: dict[int, dict[str, int]] = {}
    for c in conn_list:
        conn = c["conn"]
        f = flows.get(conn)
        m = pump[pump["conn"] == conn].sort_values("msg")
        per_conn[conn] = _retransmission_episodes(f)
        if m.empty:
            continue
        data = f[(f["payload"] > 0)] if f is not None else None
        arr = data[data["event"] == ARRIVAL].sort_values("rel", kind="stable") if data is not None else None
        by_pkt = {k: g.set_index("pkt")["t"] for k, g in data.groupby("event")} if data is not None else {}
        rel_start = arr["rel"].to_numpy() if arr is not None else np.array([], dtype=np.int64)
        rel_end = arr["rel_end"].to_numpy() if arr is not None else rel_start
        t_arr = arr["t"].to_numpy() if arr is not None else rel_start.astype(float)
        pkt = arr["pkt"].to_numpy() if arr is not None else rel_start
        max_len = int((rel_end - rel_start).max()) if rel_start.size else 0
        deliver = by_pkt.get(DELIVER, pd.Series(dtype=float))
        enq = by_pkt.get(ENQUEUE, pd.Series(dtype=float))
        deq = by_pkt.get(DEQUEUE, pd.Series(dtype=float))
        for row in m.itertuples(index=False):
            last = int(row.end_offset) - 1
            lo = np.searchsorted(rel_start, last - max_len + 1, side="left")
            hi = np.searchsorted(rel_start, last, side="right")
            idx = [i for i in range(lo, hi) if rel_end[i] > last]
            first_tx = tx = t_enq = t_deq = t_arrive = NAN
            retx = 0
            if idx:
                idx.sort(key=lambda i: t_arr[i])
                first_tx = t_arr[idx[0]]
                delivered = [(deliver.get(pkt[i], NAN), i) for i in idx]
                delivered = [(t, i) for t, i in delivered if not math.isnan(t)]
                if delivered:
                    t_arrive, best = min(delivered)
                    tx = t_arr[best]
                    t_enq = float(enq.get(pkt[best], NAN))
                    t_deq = float(deq.get(pkt[best], NAN))
                    retx = sum(1 for i in idx if t_arr[i] < tx)
                else:
                    retx = len(idx)
            t_read = float(read.get((conn, int(row.msg)), NAN))
            cols["conn"].append(conn)
            cols["pair"].append(conn)
            cols["kind"].append(int(row.kind))
            cols["bytes"].append(int(row.bytes))
            # The schedule, as in the simulator: a write that waited (a late thread, a
            # full send buffer) counts its wait in the message's delay.
            cols["t_write"].append((int(row.t_due_ns) - t0) / 1e9)
            cols["t_first_tx"].append(first_tx)
            cols["t_tx"].append(tx)
            cols["t_enq"].append(t_enq)
            cols["t_deq"].append(t_deq)
            cols["t_arrive"].append(t_arrive)
            cols["t_read"].append(t_read)
            cols["retx"].append(min(retx, 65535))
    out = {k: np.asarray(v) for k, v in cols.items()}
    return out, per_conn


def _retransmission_episodes(f: pd.DataFrame | None) -> dict[str, int]:
    """Retransmitted data segments and recovery episodes seen at the emulator's input.

    A segment is a retransmission when it starts below the highest sequence sent
    before it; an episode is a run of retransmissions not interrupted by new data.
    """
    if f is None or f.empty:
        return {"retransmitted_segments": 0, "episodes": 0}
    a = f[(f["event"] == ARRIVAL) & (f["payload"] > 0)].sort_values("t_ns", kind="stable")
    if a.empty:
        return {"retransmitted_segments": 0, "episodes": 0}
    highest = np.maximum.accumulate(a["rel_end"].to_numpy())
    prev_high = np.concatenate([[0], highest[:-1]])
    is_retx = a["rel"].to_numpy() < prev_high
    starts = is_retx & ~np.concatenate([[False], is_retx[:-1]])
    return {"retransmitted_segments": int(is_retx.sum()), "episodes": int(starts.sum())}


def _connections(
    conn_list: list[dict[str, Any]],
    pump: pd.DataFrame,
    sink: pd.DataFrame,
    per_conn: Mapping[int, Mapping[str, int]],
    scenario: Scenario,
) -> pd.DataFrame:
    rows: dict[str, list[Any]] = {
        k: []
        for k in (
            "conn",
            "pair",
            "timeouts",
            "spurious_timeouts",
            "fast_retransmits",
            "sack_recoveries",
            "bytes_written",
            "bytes_delivered",
            "bytes_sent",
            "bytes_retransmitted",
            "segments_sent",
            "retransmit_episodes",
            "writes_waited",
            "writes_blocked",
        )
    }
    for c in conn_list:
        info = c.get("tcp_info", {})
        conn = c["conn"]
        timeouts = int(info.get("total_rto_recoveries", info.get("total_rto", 0)))
        episodes = per_conn.get(conn, {}).get("episodes", 0)
        fast = max(episodes - timeouts, 0)
        rows["conn"].append(conn)
        rows["pair"].append(conn)
        rows["timeouts"].append(int(info.get("total_rto", 0)))
        rows["spurious_timeouts"].append(0)
        rows["fast_retransmits"].append(fast)
        rows["sack_recoveries"].append(fast if scenario.tcp.sack else 0)
        rows["bytes_written"].append(int(pump.loc[pump["conn"] == conn, "wire_bytes"].sum()))
        rows["bytes_delivered"].append(int(sink.loc[sink["conn"] == conn, "bytes"].sum()))
        rows["bytes_sent"].append(int(info.get("bytes_sent", 0)))
        rows["bytes_retransmitted"].append(int(info.get("bytes_retrans", 0)))
        rows["segments_sent"].append(int(info.get("data_segs_out", 0)))
        rows["retransmit_episodes"].append(episodes)
        waited, blocked = _write_waits(pump[pump["conn"] == conn])
        rows["writes_waited"].append(waited)
        rows["writes_blocked"].append(blocked)
    return (
        table_from_columns("connections", _complete("connections", rows))
        if rows["conn"]
        else empty_table("connections")
    )


def _write_waits(m: pd.DataFrame) -> tuple[int, int]:
    """Writes of one connection's pump log (in order) that TCP took more than
    :data:`WRITE_WAIT_NS` after their schedule (``writes_waited``), and those among them
    held by a full send buffer (``writes_blocked``): the ``write`` call itself took that
    long, or the write started late only because the connection's previous write, itself
    held so, returned after this one's schedule. The rest started late because the pump's
    thread ran late."""
    m = m.sort_values("msg", kind="stable")
    due = m["t_due_ns"].to_numpy(dtype=np.int64)
    start = m["t_write_ns"].to_numpy(dtype=np.int64)
    written = m["t_written_ns"].to_numpy(dtype=np.int64)
    waited = written - due > WRITE_WAIT_NS
    blocked = 0
    held = False  # the previous write was held by the send buffer
    for i in np.flatnonzero(waited):
        behind = held and i > 0 and waited[i - 1] and written[i - 1] > due[i]
        held = bool(written[i] - start[i] > WRITE_WAIT_NS or behind)
        blocked += held
    return int(waited.sum()), blocked


def _interactive_packet_mask(f: pd.DataFrame, m: pd.DataFrame) -> np.ndarray:
    """Which packets of ``f`` (with rel/rel_end) carry a byte of an interactive message."""
    if f.empty or m.empty:
        return np.zeros(len(f), dtype=bool)
    m = m.sort_values("end_offset")
    ends = m["end_offset"].to_numpy()
    starts = ends - m["wire_bytes"].to_numpy()
    inter = np.concatenate([[0], np.cumsum(m["kind"].to_numpy() == 0)])
    rel, rel_end = f["rel"].to_numpy(), f["rel_end"].to_numpy()
    first = np.searchsorted(ends, rel, side="right")  # message containing byte rel
    last = np.searchsorted(ends, rel_end - 1, side="right")
    first = np.clip(first, 0, len(ends))
    last = np.clip(last, 0, len(ends) - 1)
    has = (inter[np.minimum(last + 1, len(ends))] - inter[first]) > 0
    return has & (f["payload"].to_numpy() > 0) & (rel_end > starts[0])


def _ports(
    ev: pd.DataFrame,
    pump: pd.DataFrame,
    conn_list: list[dict[str, Any]],
    link: Mapping[str, Any],
    stats: Mapping[str, Any] | None,
    scenario: Scenario,
) -> pd.DataFrame:
    window = scenario.scenario.duration_s
    flows = _flows(ev, conn_list)
    rows: dict[str, list[Any]] = {
        k: []
        for k in (
            "port",
            "rate_bps",
            "window_s",
            "bytes_tx",
            "bytes_tx_interactive",
            "packets_tx",
            "drops_overflow",
            "max_queue_bytes",
            "marks_ce",
        )
    }
    for d, name in PORTS.items():
        cfg = link["fwd" if d == FWD else "rev"]
        overhead = int(cfg.get("overhead_bytes", 0))
        e = ev[ev["dir"] == d]
        deq = e[(e["event"] == DEQUEUE) & (e["t"] >= 0) & (e["t"] <= window)]
        wire = deq["ip_len"].astype(np.int64) + overhead
        interactive = 0
        if d == FWD:
            for c in conn_list:
                f = flows[c["conn"]]
                fd = f[(f["event"] == DEQUEUE) & (f["t"] >= 0) & (f["t"] <= window)]
                mask = _interactive_packet_mask(fd, pump[pump["conn"] == c["conn"]])
                interactive += int((fd["ip_len"].astype(np.int64)[mask] + overhead).sum())
        drops = int(((e["event"] == DROP) & (e["reason"] == 1)).sum())
        st = (stats or {}).get("fwd" if d == FWD else "rev", {})
        rows["port"].append(name)
        rows["rate_bps"].append(float(cfg["rate_bps"]) if cfg["rate_bps"] else NAN)
        rows["window_s"].append(window)
        rows["bytes_tx"].append(int(wire.sum()))
        rows["bytes_tx_interactive"].append(interactive)
        rows["packets_tx"].append(len(deq))
        rows["drops_overflow"].append(drops)
        rows["max_queue_bytes"].append(int(st.get("max_queue_bytes", e["q_bytes"].max() if len(e) else 0)))
        rows["marks_ce"].append(int(st.get("marks_ce", _marks_ce(e))))
    return table_from_columns("ports", _complete("ports", rows))


def _marks_ce(e: pd.DataFrame) -> int:
    """Packets of one direction's events the link's CoDel marked CE (``queue.ecn``): a
    dequeue with ECN field CE (RFC 3168 §5) of a packet that arrived without it. The
    link's own counter (``marks_ce`` in its stats) says the same; this serves logs
    without one."""
    ce = 0b11
    arrived = e.loc[e["event"] == ARRIVAL, ["pkt", "tos"]].set_index("pkt")["tos"]
    deq = e[(e["event"] == DEQUEUE) & ((e["tos"] & ce) == ce)]
    before = arrived.reindex(deq["pkt"]).fillna(ce).astype(np.int64).to_numpy()
    return int(((before & ce) != ce).sum())


def _queue_trace(ev: pd.DataFrame, scenario: Scenario) -> pd.DataFrame:
    step = scenario.records.trace_interval_ms / 1000.0
    end = scenario.scenario.duration_s + scenario.scenario.drain_s
    grid = np.arange(0.0, end + step / 2, step)
    frames = []
    for d, name in PORTS.items():
        e = ev[ev["dir"] == d]
        t = e["t"].to_numpy()
        i = np.searchsorted(t, grid, side="right") - 1
        have = i >= 0
        qb = np.where(have, e["q_bytes"].to_numpy()[np.clip(i, 0, None)] if len(e) else 0, 0)
        qp = np.where(have, e["q_pkts"].to_numpy()[np.clip(i, 0, None)] if len(e) else 0, 0)
        frames.append(
            pd.DataFrame({"port": name, "t": grid, "bytes": qb.astype(np.uint64), "packets": qp.astype(np.uint64)})
        )
    return table_from_columns(
        "queue_trace", {c: pd.concat(frames)[c].to_numpy() for c in ("port", "t", "bytes", "packets")}
    )

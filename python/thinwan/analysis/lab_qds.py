"""The QDS tables of a lab run (docs/lab.md "The middlebox in the lab"): ``packet_rtt``
from thinwan-link's event log, and ``qds_flows`` / ``qds_classes`` from its QDS log, with
the simulator's columns (docs/records.md), so :mod:`thinwan.analysis.by_type` and
:mod:`thinwan.analysis.qds` read both substrates alike.

**Per-packet RTT** (issue 18: "server transmission → covering ACK back at the server").
thinwan-link is the middlebox at the servers' end of the downlink: a data segment's
``fwd`` *arrival* is the server's transmission (the server namespace hands it to the
TUN device at once), an ACK's ``rev`` *delivery* is its arrival at the server. So, per
connection, exactly as the simulator defines it: one row per first transmission of data
(a segment that carries bytes above everything sent before it), its RTT the time to the
first delivered ACK whose cumulative acknowledgment covers its last byte, ``retx`` = 1
when some of its bytes were sent again before that ACK. Only the stream's bytes from the
run start count (the pump's 4-byte connection-id preamble goes before ``t0``).

**Application labels.** A row's ``app`` is the application of the write holding the
segment's first byte (the simulator's rule). The pump logs each write's stream end
offset; the write's application follows from the scenario: one model for every
connection, or ``traffic.mix`` — pair *i* runs position ``(i + k·s) mod N`` of the
expanded mix in phase *k* = ⌊t / mix_change_s⌋, *t* the write's time from the run start
(the core's ``thinwan_proto::qds::truth::pair_app``, through ``_native.pair_apps``: the
same function thinwan-link's QDS oracle reads).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config.scenario import Scenario
from ..records.evlog import ARRIVAL, DELIVER, FWD, REV, SYN, ip_to_int
from ..records.schema import empty_table, table_from_columns
from .by_type import APP_NAMES, CONTROLLER_TYPE
from .qds import CONTROLLER_TYPES

__all__ = [
    "QDS_DTYPE",
    "app_code",
    "by_type_side_by_side",
    "message_apps",
    "packet_rtt",
    "qds_tables",
    "read_qds_log",
]

ACK = 0x10
PREAMBLE = 4  # the pump's connection-id preamble (crates/net/src/pump.rs)


def app_code(name: str) -> int:
    """The ``app`` code of an application (traffic model) name (``APP_NAMES``)."""
    return APP_NAMES.index(name)


def message_apps(scenario: Scenario, conn: int, t_write: np.ndarray) -> np.ndarray:
    """The app code of each write of pair ``conn`` written at ``t_write`` (s from the
    run start), as the pump's source chose it (module docstring). A mix's comes from the
    core (``_native.pair_apps``: ``thinwan_proto::qds::truth::pair_app``, which
    thinwan-link's QDS oracle reads too)."""
    tr = scenario.traffic
    if tr.model != "mix":
        return np.full(len(t_write), app_code("pcap" if tr.model == "pcap" else str(tr.model)), dtype=np.uint8)
    from .. import _native

    times = np.asarray(t_write, dtype=float)
    # PyO3 hands a Vec<u8> over as bytes.
    codes = _native.pair_apps(scenario.to_native_json(), int(conn), times.tolist())
    return np.frombuffer(codes, dtype=np.uint8).copy()


def packet_rtt(
    scenario: Scenario,
    ev: pd.DataFrame,
    pump: pd.DataFrame,
    conn_list: Sequence[Mapping[str, Any]],
    t0: int,
) -> pd.DataFrame:
    """The ``packet_rtt`` table of a lab run: ``ev`` the event log with a ``t`` column
    (s from ``t0``), ``pump`` the pump's message log, ``conn_list`` its connections."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("conn", "app", "t_tx", "rtt", "bytes", "retx")}
    tcp = ev[ev["proto"] == 6]
    # Data arrivals from the servers, ACK deliveries to them: grouped once by the server's end.
    fwd = dict(iter(tcp[(tcp["dir"] == FWD) & (tcp["event"] == ARRIVAL)].groupby(["src", "sport"])))
    rev = tcp[(tcp["dir"] == REV) & (tcp["event"] == DELIVER) & ((tcp["flags"] & ACK) != 0)]
    rev_by = dict(iter(rev.groupby(["dst", "dport"])))
    for c in conn_list:
        host, port = str(c["local"]).rsplit(":", 1)
        key = (ip_to_int(host), int(port))
        if key not in fwd:
            continue
        rows = _conn_rtt(fwd[key], rev_by.get(key, rev.iloc[0:0]))
        if rows is None:
            continue
        start, end, t_tx, rtt, retx = rows
        keep = t_tx >= 0.0
        start, end, t_tx, rtt, retx = start[keep], end[keep], t_tx[keep], rtt[keep], retx[keep]
        m = pump[pump["conn"] == c["conn"]].sort_values("msg")
        ends = m["end_offset"].to_numpy(dtype=np.int64)
        apps = message_apps(scenario, int(c["conn"]), (m["t_write_ns"].to_numpy(dtype=np.int64) - t0) / 1e9)
        if len(ends):
            # The write holding the first byte: the first whose end lies above it.
            i = np.minimum(np.searchsorted(ends, start, side="right"), len(ends) - 1)
            app = apps[i]
        else:
            app = message_apps(scenario, int(c["conn"]), t_tx)
        cols["conn"].append(np.full(len(t_tx), int(c["conn"]), dtype=np.uint32))
        cols["app"].append(app.astype(np.uint8))
        cols["t_tx"].append(t_tx)
        cols["rtt"].append(rtt)
        cols["bytes"].append((end - start).astype(np.uint32))
        cols["retx"].append(retx.astype(np.uint8))
    if not cols["conn"]:
        return empty_table("packet_rtt")
    table = table_from_columns("packet_rtt", {k: np.concatenate(v) for k, v in cols.items()})
    return table.sort_values(["t_tx", "conn"], kind="stable").reset_index(drop=True)


def _conn_rtt(
    fwd: pd.DataFrame, rev: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(new-data start, end, t_tx, rtt, retx) of one connection's first transmissions,
    stream offsets relative to ISN + 1, from its ``fwd`` arrivals and the ``rev``
    deliveries of its ACKs; None without a SYN in the log."""
    syn = fwd[(fwd["flags"] & SYN) != 0]
    if syn.empty:
        return None
    isn = int(syn["seq"].iloc[0])
    data = fwd[fwd["payload"] > 0].sort_values("t_ns", kind="stable")
    rel = _rel(data["seq"].to_numpy(), isn)
    rel_end = rel + data["payload"].to_numpy(dtype=np.int64)
    t = data["t"].to_numpy(dtype=float)
    highest = np.maximum.accumulate(rel_end) if len(rel_end) else rel_end
    prev = np.concatenate([[0], highest[:-1]]) if len(highest) else highest
    first = rel_end > prev
    start = np.maximum(rel, prev)[first]
    end, t_tx = rel_end[first], t[first]

    # ACKs as the server receives them (rev deliveries), in time order.
    rev = rev.sort_values("t_ns", kind="stable")
    acked = np.maximum.accumulate(_rel(rev["ack"].to_numpy(), isn)) if len(rev) else np.array([], dtype=np.int64)
    t_ack_all = rev["t"].to_numpy(dtype=float)
    i = np.searchsorted(acked, end, side="left")
    covered = i < len(acked)
    t_ack = np.full(len(end), math.nan)
    t_ack[covered] = t_ack_all[i[covered]]
    rtt = t_ack - t_tx

    # Bytes of a row sent again (any later arrival overlapping them) before its ACK.
    retx = np.zeros(len(end), dtype=bool)
    again = ~first
    for rs, re_, tr in zip(rel[again], rel_end[again], t[again], strict=True):
        lo = np.searchsorted(end, rs, side="right")
        hi = np.searchsorted(start, re_, side="left")
        if hi > lo:
            sl = slice(lo, hi)
            retx[sl] |= (tr > t_tx[sl]) & ~(tr >= t_ack[sl])  # NaN ACK time: never acknowledged
    return start, end, t_tx, rtt, retx


def _rel(seq: np.ndarray, isn: int) -> np.ndarray:
    """Sequence (or acknowledgment) numbers relative to ISN + 1, unwrapped; as signed
    32-bit differences so the SYN (−1) and ACKs of the SYN (0) do not look like a wrap."""
    rel32 = (seq.astype(np.int64) - isn - 1 + (1 << 31)) % (1 << 32) - (1 << 31)
    if rel32.size == 0:
        return rel32
    d = np.diff(rel32)
    steps = np.concatenate([[0], np.cumsum(np.where(d < -(1 << 31), 1, 0) - np.where(d > (1 << 31), 1, 0))])
    return rel32 + steps * (1 << 32)


# thinwan-link's QDS log (crates/net/src/qds/log.rs; docs/lab.md "QDS log").
QDS_MAGIC = b"TWQDSLG\0"
QDS_VERSION = 1
QDS_DTYPE = np.dtype(
    [
        ("t_ns", "<u8"),
        ("flow", "<u8"),
        ("rate_bps", "<f8"),
        ("value", "<f8"),
        ("extra", "<f8"),
        ("client", "<u4"),
        ("server", "<u4"),
        ("cport", "<u2"),
        ("sport", "<u2"),
        ("cls", "<u2"),
        ("kind", "u1"),
        ("app", "u1"),
        ("app_true", "u1"),
        ("flags", "u1"),
        ("_pad", "<u2"),
        ("flows", "<u4"),
    ]
)
assert QDS_DTYPE.itemsize == 64
FLOW_RECORD, CLASS_RECORD = 0, 1


def read_qds_log(path: str | Path) -> pd.DataFrame:
    """Every record of a QDS log (columns of :data:`QDS_DTYPE`, without padding)."""
    path = Path(path)
    with path.open("rb") as f:
        head = f.read(16)
    if len(head) < 16 or head[:8] != QDS_MAGIC:
        raise ValueError(f"{path}: not a thinwan-link QDS log")
    version, size = int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")
    if version != QDS_VERSION or size != QDS_DTYPE.itemsize:
        raise ValueError(f"{path}: QDS log version {version} / record size {size} not supported")
    count = (path.stat().st_size - 16) // size
    return pd.DataFrame(np.fromfile(path, dtype=QDS_DTYPE, count=count, offset=16)).drop(columns="_pad")


def qds_tables(
    log: pd.DataFrame, conn_list: Sequence[Mapping[str, Any]], t0: int, rtt: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``qds_flows`` and ``qds_classes`` of a lab run from its QDS log.

    A flow record's connection is the pump connection with its server address and port;
    records of other flows are left out. ``app_true`` is the controller type of the
    connection's latest first transmission at the period (``rtt``: the run's
    ``packet_rtt``), or of its first one before it sent any. The classifier's features
    are not in the log: NaN.
    """
    t = (log["t_ns"].to_numpy(dtype=np.int64) - t0) / 1e9
    cls = log[log["kind"] == CLASS_RECORD]
    classes = (
        table_from_columns(
            "qds_classes",
            {
                "t": t[(log["kind"] == CLASS_RECORD).to_numpy()],
                "class": cls["cls"].to_numpy(dtype=np.uint16),
                "weight": cls["value"].to_numpy(dtype=float),
                "rate_bps": cls["rate_bps"].to_numpy(dtype=float),
                "flows": cls["flows"].to_numpy(dtype=np.uint32),
            },
        )
        if len(cls)
        else empty_table("qds_classes")
    )
    is_flow = (log["kind"] == FLOW_RECORD).to_numpy()
    flows = log[is_flow]
    by_addr = {}
    for c in conn_list:
        host, port = str(c["local"]).rsplit(":", 1)
        by_addr[(ip_to_int(host), int(port))] = int(c["conn"])
    conn = np.array(
        [by_addr.get((int(a), int(p)), -1) for a, p in zip(flows["server"], flows["sport"], strict=True)],
        dtype=np.int64,
    )
    keep = conn >= 0
    if not keep.any():
        return empty_table("qds_flows"), classes
    ft = t[is_flow][keep]
    conn = conn[keep]
    flows = flows[keep]
    controller = {name: CONTROLLER_TYPES.index(ty) for name, ty in CONTROLLER_TYPE.items()}
    to_type = np.array([controller.get(name, CONTROLLER_TYPES.index("interactive")) for name in APP_NAMES])
    app_true = np.zeros(len(conn), dtype=np.uint8)
    for c in np.unique(conn):
        rows = rtt[rtt["conn"] == c].sort_values("t_tx", kind="stable")
        at = conn == c
        if rows.empty:
            app_true[at] = CONTROLLER_TYPES.index("data")
            continue
        i = np.maximum(np.searchsorted(rows["t_tx"].to_numpy(), ft[at], side="right") - 1, 0)
        app_true[at] = to_type[rows["app"].to_numpy()[i]]
    nan = np.full(len(conn), math.nan)
    columns: dict[str, Any] = {
        "t": ft,
        "conn": conn.astype(np.uint32),
        "app_true": app_true,
        "app": flows["app"].to_numpy(dtype=np.uint8),
        "rtt": flows["value"].to_numpy(dtype=float),
        "rate_bps": flows["rate_bps"].to_numpy(dtype=float),
        "class": flows["cls"].to_numpy(dtype=np.uint16),
    }
    for name in ("size_mean", "size_sd", "iat_mean_us", "iat_sd_us", "rate_down_bps", "rate_up_bps"):
        columns[f"f_{name}"] = nan
    columns["f_full_share"] = nan
    columns["f_burst_pkts"] = nan
    return table_from_columns("qds_flows", columns), classes


def by_type_side_by_side(
    sim: Mapping[str, Mapping[str, float]], lab: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, dict[str, float]]]:
    """``{type: {metric: {"sim": v, "lab": v}}}`` of two ``summary.by_type`` tables (means
    over runs), for every type and metric of either; a side without it gets NaN."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for t in sorted(set(sim) | set(lab)):
        s, b = sim.get(t, {}), lab.get(t, {})
        out[t] = {k: {"sim": float(s.get(k, math.nan)), "lab": float(b.get(k, math.nan))} for k in (*s, *b)}
    return out

"""Slow-motion benchmark results from operations (pure: DataFrames in, DataFrames out).

The capture analyser splits a capture into bursts at idle gaps (docs/desktop.md). A
benchmark run also knows when it gave each input, so :func:`attribute` gives each input
the bursts that began between it and the next input — normally exactly one; more when an
update paused longer than the idle gap inside itself (a retransmission timeout on a lossy
link), and they are then one operation: from the input to the last server→client packet
before the next input. :func:`summarize` and :func:`wan_minus_lan` make the tables of
the spec ("Compare environments").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "attribute",
    "attribute_packets",
    "screen_times",
    "ScreenLog",
    "RfbLog",
    "rfb_times",
    "TIMING_SOURCES",
    "timing_problems",
    "summarize",
    "wan_minus_lan",
    "agree",
    "within",
    "SUMMARY_KEYS",
]

SUMMARY_KEYS = ["platform", "env", "operation"]


def attribute(ops: pd.DataFrame, windows: Sequence[tuple[float, float]]) -> pd.DataFrame:
    """One row per window ``(t_from, t_to)`` (epoch s): the bursts of ``ops`` (the
    analyser's table) that began in it, merged. Columns: ``bursts``, ``first_packet``,
    ``last_packet``, ``t_input``, ``t_end``, ``latency_ms``, ``first_update_ms``,
    ``bytes_s2c``, ``bytes_c2s``, ``packets_s2c``, ``packets_c2s``, ``round_trips``.
    ``latency_ms`` is NaN when the window has no input packet or no update after it.

    The update ends at the last server→client payload packet of the window after the
    input: the input's burst's ``t_end`` or, from a later burst (the rest of the update
    after a silence longer than the idle gap), its ``t_last_s2c`` when ``ops`` has that
    column (the last server→client payload packet of the burst, whoever began it; a
    burst that resumes with the server's retransmission has its own ``t_end`` only after
    the client's next packet), else its ``t_end``."""
    rows = []
    starts = ops["t_start"].to_numpy()
    for t_from, t_to in windows:
        sel = ops[(starts >= t_from) & (starts < t_to)]
        with_input = sel[sel["t_input"].notna()]
        t_input = float(with_input["t_input"].iloc[0]) if len(with_input) else np.nan
        ends = sel["t_end"].dropna()
        if len(with_input) and "t_last_s2c" in sel:
            later = sel[sel["t_start"] > with_input["t_start"].iloc[0]]["t_last_s2c"].dropna()
            ends = pd.concat([with_input["t_end"].iloc[:1].dropna(), later[later >= t_input]])
        t_end = float(ends.max()) if len(ends) else np.nan
        latency = first_update = np.nan
        if len(with_input) and np.isfinite(t_end) and t_end >= t_input:
            b = with_input.iloc[0]
            # The analyser's own (ns-exact) latency, plus how much later the window's
            # last update ended when it came in a later burst.
            lat0 = float(b["latency_ms"]) if np.isfinite(b["latency_ms"]) else 0.0
            end0 = float(b["t_end"]) if np.isfinite(b["t_end"]) else t_input
            latency = lat0 + (t_end - end0) * 1e3
            first_update = float(b["first_update_ms"])
        rows.append(
            {
                "bursts": len(sel),
                "first_packet": int(sel["first_packet"].min()) if len(sel) else -1,
                "last_packet": int(sel["last_packet"].max()) if len(sel) else -1,
                "t_input": t_input,
                "t_end": t_end,
                "latency_ms": latency,
                "first_update_ms": first_update,
                "bytes_s2c": int(sel["bytes_s2c"].sum()),
                "bytes_c2s": int(sel["bytes_c2s"].sum()),
                "packets_s2c": int(sel["packets_s2c"].sum()),
                "packets_c2s": int(sel["packets_c2s"].sum()),
                "round_trips": int(sel["round_trips"].sum()),
            }
        )
    return pd.DataFrame(rows)


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Per platform × env × operation: median, min and max latency, median bytes each
    way and round trips, and ``n`` (operations with a latency)."""
    ok = results.dropna(subset=["latency_ms"])
    g = ok.groupby(SUMMARY_KEYS, sort=False)
    out = g.agg(
        latency_ms_median=("latency_ms", "median"),
        latency_ms_min=("latency_ms", "min"),
        latency_ms_max=("latency_ms", "max"),
        bytes_s2c=("bytes_s2c", "median"),
        bytes_c2s=("bytes_c2s", "median"),
        round_trips=("round_trips", "median"),
        n=("latency_ms", "size"),
    ).reset_index()
    return out


def wan_minus_lan(summary: pd.DataFrame, rtt_ms: Mapping[str, float], base: str = "lan") -> pd.DataFrame:
    """For every environment but ``base``: its median latency minus ``base``'s, in ms and
    in round trips of its configured RTT (``rtt_ms``: env → ms), per platform × operation."""
    lan = summary[summary["env"] == base].set_index(["platform", "operation"])["latency_ms_median"]
    rows = []
    for r in summary[summary["env"] != base].itertuples(index=False):
        key = (r.platform, r.operation)
        if key not in lan.index:
            continue
        delta = float(r.latency_ms_median) - float(lan[key])
        rtt = float(rtt_ms.get(r.env, 0.0))
        rows.append(
            {
                "platform": r.platform,
                "env": r.env,
                "operation": r.operation,
                "lan_ms": float(lan[key]),
                "env_ms": float(r.latency_ms_median),
                "delta_ms": delta,
                "rtt_ms": rtt,
                "delta_rtts": delta / rtt if rtt > 0 else np.nan,
            }
        )
    return pd.DataFrame(
        rows, columns=["platform", "env", "operation", "lan_ms", "env_ms", "delta_ms", "rtt_ms", "delta_rtts"]
    )


def agree(a: float, b: float, rel: float = 0.05, abs_ms: float = 1.0) -> bool:
    """The self-checks' tolerance: within ``rel`` (of the larger) or ``abs_ms``."""
    if not (np.isfinite(a) and np.isfinite(b)):
        return False
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_ms)


def within(a: float, lo: float, hi: float) -> bool:
    """``a`` lies in [``lo``, ``hi``] or agrees (:func:`agree`) with either end."""
    return agree(a, lo) or agree(a, hi) or (np.isfinite(a) and lo <= a <= hi)


@dataclass
class ScreenLog:
    """What the screen watcher (``screenwatch.py``) wrote: ``changes`` — ``(t, x, y, w,
    h)`` per DAMAGE report —, ``areas`` — ``(t, hash)``: the watched area's pixels once
    every report up to ``t`` was drawn (empty in logs written before the watcher hashed)
    — and ``frames`` — ``(t, n)``: the video frame number those pixels showed, read from
    the clip's frame marks (-1: none readable; empty without marks)."""

    changes: list[tuple[float, int, int, int, int]] = field(default_factory=list)
    areas: list[tuple[float, str]] = field(default_factory=list)
    frames: list[tuple[float, int]] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> ScreenLog:
        log = cls()
        for line in text.splitlines():
            f = line.split()
            try:
                if len(f) in (4, 5) and f[1] == "area":
                    log.areas.append((float(f[0]), f[2]))
                    if len(f) == 5:
                        log.frames.append((float(f[0]), int(f[4])))
                elif len(f) == 5:
                    log.changes.append((float(f[0]), int(f[1]), int(f[2]), int(f[3]), int(f[4])))
            except ValueError:
                continue  # a line cut short when the watcher was stopped
        return log


def screen_times(
    attributed: pd.DataFrame,
    windows: Sequence[tuple[float, float]],
    screen: ScreenLog,
    area: tuple[int, int, int, int],
) -> np.ndarray:
    """The client's own latency of each input (ms): when the client's screen **first
    showed the operation's final picture** in ``area`` − the input's first client→server
    packet. NaN when the window saw no new picture or has no input packet.

    The final picture is what the area shows at the last change in the input's window
    (``t_input`` to the window's end); the time is the first change of the trailing run
    of changes that all show it. A viewer repainting the same pixels later (TigerVNC's
    fullscreen notice fading out over the whole screen) adds changes but not a new
    picture, so it does not move the time; a picture that changes again (a lossy update,
    then its lossless refresh) counts at the last one. A window whose last picture is the
    one shown before the input (nothing new, or drawn and undone) gives NaN.

    Logs without area hashes (written before the watcher hashed) fall back to the last
    DAMAGE report inside ``area`` in the window."""
    out = np.full(len(attributed), np.nan)
    if screen.areas:
        t = np.array([a[0] for a in screen.areas])
        h = [a[1] for a in screen.areas]
        for i, ((_, t_to), t_in) in enumerate(zip(windows, attributed["t_input"])):
            if not np.isfinite(t_in):
                continue
            lo, hi = np.searchsorted(t, t_in, "left"), np.searchsorted(t, t_to, "left")
            if hi <= lo:
                continue
            final = h[hi - 1]
            if lo > 0 and h[lo - 1] == final:
                continue
            k = hi - 1
            while k > lo and h[k - 1] == final:
                k -= 1
            out[i] = (t[k] - t_in) * 1e3
        return out
    if not screen.changes:
        return out
    ax, ay, aw, ah = area
    c = np.array(screen.changes, dtype=float)
    inside = (c[:, 1] < ax + aw) & (c[:, 1] + c[:, 3] > ax) & (c[:, 2] < ay + ah) & (c[:, 2] + c[:, 4] > ay)
    ts = np.sort(c[inside, 0])
    for i, ((_, t_to), t_in) in enumerate(zip(windows, attributed["t_input"])):
        if not np.isfinite(t_in):
            continue
        sel = ts[(ts >= t_in) & (ts < t_to)]
        if len(sel):
            out[i] = (sel[-1] - t_in) * 1e3
    return out


# The client-timing self-check's sources (docs/desktop.md "Self-checks"): the column of
# ``inputs.parquet`` with the client's own latency, and how a message names that moment.
TIMING_SOURCES = {
    # screenwatch.py: when the client's screen first showed the operation's final picture.
    "screen": ("screen_ms", "the client's screen showed the final picture at"),
    # rfbclient.py: when the RFB client had received the operation's last update.
    "rfb": ("client_ms", "the RFB client had received the last update at"),
}


def timing_problems(inputs: pd.DataFrame, source: str = "screen") -> list[str]:
    """The client-timing self-check over one platform × environment's inputs (columns of
    ``inputs.parquet``): one message per input whose analyser latency and client timing
    (``source``, a key of :data:`TIMING_SOURCES`) disagree by more than 5 % or 1 ms
    (:func:`agree`), or that the client never showed or received. Empty when the client
    was not timed at all (no such column, or none timed: no screen watcher).

    The screen's check is one-sided: a screen that showed the final picture *later* than
    the analyser's end is the client's drawing or a wait for a CPU, never the analyser's
    error — the analyser's end is the last server→client packet of the input's window, and
    the screen's time lies in the same window, so no packet the analyser left out arrived
    between the two. A screen final *before* the analyser's end means the analyser counted
    traffic that changed nothing (docs/desktop.md "Self-checks"). The RFB client's timing
    is checked both ways, as a bracket: the update became readable at the client no later
    than its read returned (``client_ms``; later by the client's own wait for a CPU) and
    no earlier than the kernel's receive stamp of the last segment that read copied
    (``client_kernel_ms``, SO_TIMESTAMPNS; earlier when that segment had arrived out of
    order and waited for a retransmission to fill the hole before it: Linux keeps the
    arrival stamp of the segment it coalesces, ``tcp_try_coalesce``). The analyser's end
    must lie in [stamp, read], within 5 % or 1 ms of it (:func:`within`); without a stamp,
    within that of the read."""
    column, moment = TIMING_SOURCES[source]
    if column not in inputs or not inputs[column].notna().any():
        return []
    out = []
    for r in inputs.itertuples(index=False):
        if not np.isfinite(r.latency_ms):
            continue  # no update in the capture: the run's other check names it
        # The screen's messages keep their original wording ("client timing: …").
        what = f"client timing{'' if source == 'screen' else f' ({source})'}: {r.operation} #{r.repeat}"
        client = getattr(r, column)
        kernel = getattr(r, "client_kernel_ms", np.nan) if source == "rfb" else np.nan
        lo = min(kernel, client) if np.isfinite(kernel) else client
        if not np.isfinite(client):
            never = (
                "the client's screen never showed a new picture in the application's area"
                if source == "screen"
                else "the RFB client received no update after its input"
            )
            out.append(f"{what}: {never} (the analyser: {r.latency_ms:.1f} ms)")
        elif not within(r.latency_ms, lo, client) and (source != "screen" or client < r.latency_ms):
            off = (client if r.latency_ms > client else lo) - r.latency_ms
            socket = (
                f"; its socket stamped the last segment at {kernel:.1f} ms, and the analyser's end must lie "
                "between that stamp and the read"
                if np.isfinite(kernel)
                else ""
            )
            out.append(
                f"{what}: the analyser says {r.latency_ms:.1f} ms, {moment} "
                f"{client:.1f} ms ({off:+.1f} ms; allowed 5 % or 1 ms{socket}){_start_lag(r) if source == 'rfb' else ''}"
            )
    return out


def _start_lag(r: Any) -> str:
    """Why two latencies whose ends agree differ: the analyser starts at the first
    client→server packet of the input's window (``t_input``), the client when its input
    left the host (``t_client_tx``, the kernel's transmit stamp) or, without a stamp, at
    its send (``t_injected``). Against the stamp a gap is the analyser's: a packet that
    opened the window and is not the input. Against the send it may also be time the
    input spent in the client's own socket (its TCP recovering a loss holds new data)."""
    t_in, t_tx = getattr(r, "t_input", np.nan), getattr(r, "t_client_tx", np.nan)
    stamped = np.isfinite(t_tx)
    lag = (t_in - (t_tx if stamped else getattr(r, "t_injected", np.nan))) * 1e3
    if not np.isfinite(lag) or agree(lag, 0.0):
        return ""
    ends = abs(r.latency_ms + lag - getattr(r, "client_ms", np.nan))
    if stamped:
        return (
            f"; the analyser's first client→server packet came {lag:+.1f} ms from when the input left the client "
            f"(its kernel's transmit stamp; their ends are {ends:.1f} ms apart): a packet that is not the input "
            "opened the window"
        )
    return (
        f"; the analyser's first client→server packet came {lag:.1f} ms after the client sent its input "
        f"(their ends are {ends:.1f} ms apart): the input "
        "waited in the client's socket, or a retransmission of the previous exchange opened the window"
    )


@dataclass
class RfbLog:
    """What the RFB client (``rfbclient.py``) wrote: ``inputs`` — ``(t, what)`` per input
    message sent (t: just before the send call) —, ``tx`` — per input, ``(kind, t)``: when
    its last byte left the host by the kernel's transmit stamp, ``kind`` ``"tx"`` (the
    device driver's software stamp) or ``"sched"`` (the queueing discipline's, for a
    device without software stamps), ``("", nan)`` when the line has no stamp (older
    logs, or ``tx=0``: the kernel gave none) —, ``updates`` — ``(t, rects, bytes,
    t_kernel)`` per FramebufferUpdate fully received (t: the ``recv()`` that completed
    it; t_kernel: the kernel's receive time of its last segment, NaN if not logged) —,
    ``other`` — ``(t, kind, bytes)`` per other server message (bell, cut, colours) — and
    ``error``: the client's error line, if it stopped on one."""

    inputs: list[tuple[float, str]] = field(default_factory=list)
    tx: list[tuple[str, float]] = field(default_factory=list)
    updates: list[tuple[float, int, int, float]] = field(default_factory=list)
    other: list[tuple[float, str, int]] = field(default_factory=list)
    error: str | None = None

    @classmethod
    def parse(cls, text: str) -> RfbLog:
        log = cls()
        for line in text.splitlines():
            f = line.split()
            try:
                if len(f) >= 3 and f[1] == "input":
                    kind, _, value = f[-1].partition("=")
                    stamp = ("", np.nan)
                    if kind in ("tx", "sched") and value:
                        f = f[:-1]
                        if float(value) > 0:
                            stamp = (kind, float(value))
                    log.inputs.append((float(f[0]), " ".join(f[2:])))
                    log.tx.append(stamp)
                elif len(f) in (4, 5) and f[1] == "update":
                    tk = float(f[4]) if len(f) == 5 and float(f[4]) > 0 else np.nan
                    log.updates.append((float(f[0]), int(f[2]), int(f[3]), tk))
                elif len(f) >= 2 and f[1] == "error":
                    log.error = " ".join(f[2:])
                elif len(f) in (2, 3) and f[1] in ("bell", "cut", "colours"):
                    log.other.append((float(f[0]), f[1], int(f[2]) if len(f) == 3 else 1))
            except ValueError:
                continue  # a line cut short when the client was stopped
        return log


def rfb_times(windows: Sequence[tuple[float, float]], log: RfbLog) -> pd.DataFrame:
    """The RFB client's own latency of each input (one row per window): ``client_ms`` =
    the last FramebufferUpdate it received in the input's window − when the input left
    the host (its first input message in the window, ``t_from`` being just before the
    input was handed to it): the kernel's transmit stamp of the message's last byte
    (``t_client_tx``; ``client_start`` says which stamp: ``tx`` or ``sched``), or, for a
    log without stamps, when it called send (``client_start`` ``send``). NaN when no
    update came after the input. ``client_send_ms``: the same from the send call,
    always; ``client_tx_lag_ms`` = stamp − send call (time the input spent in the
    client's socket: TCP recovering a loss holds new data); ``client_kernel_ms``: the
    same start with the kernel's receive time of the last update's last segment (what
    the client's time would be without waiting for a CPU); ``client_updates``: how many
    updates came."""
    n = len(windows)
    ms, send_ms, kernel, lag, t_tx = (np.full(n, np.nan) for _ in range(5))
    start = np.full(n, "", dtype=object)
    count = np.zeros(n, dtype=int)
    t_in = np.array([t for t, _ in log.inputs])
    tx = log.tx if len(log.tx) == len(log.inputs) else [("", np.nan)] * len(log.inputs)
    t_up = np.array([u[0] for u in log.updates])
    t_k = np.array([u[3] for u in log.updates])
    for i, (t_from, t_to) in enumerate(windows):
        k = np.searchsorted(t_in, t_from, "left")
        if k >= len(t_in) or t_in[k] >= t_to:
            continue
        sent = t_in[k]
        kind, stamp = tx[k]
        begin = stamp if np.isfinite(stamp) else sent
        start[i] = kind if np.isfinite(stamp) else "send"
        t_tx[i] = stamp
        lag[i] = (stamp - sent) * 1e3
        sel = np.flatnonzero((t_up >= sent) & (t_up < t_to))
        count[i] = len(sel)
        if len(sel):
            last = sel[np.argmax(t_up[sel])]
            ms[i] = (t_up[last] - begin) * 1e3
            send_ms[i] = (t_up[last] - sent) * 1e3
            kernel[i] = (t_k[last] - begin) * 1e3
    return pd.DataFrame(
        {
            "client_ms": ms,
            "client_kernel_ms": kernel,
            "client_updates": count,
            "client_send_ms": send_ms,
            "client_tx_lag_ms": lag,
            "t_client_tx": t_tx,
            "client_start": start,
        }
    )


def attribute_packets(packets: pd.DataFrame, t_from: float, t_to: float) -> dict[str, float]:
    """An input that came while traffic was still flowing (no idle gap before it, so no
    burst began in its window — e.g. x11vnc sending a late piece of the previous update):
    its latency straight from the packets: the first client→server payload packet at or
    after ``t_from`` to the last server→client payload packet before ``t_to``."""
    w = packets[(packets["t"] >= t_from) & (packets["t"] < t_to)]
    pay = w[w["payload"] > 0]
    c2s = pay[~pay["s2c"]]
    if not len(c2s):
        return {}
    t_in = float(c2s["t"].iloc[0])
    after = pay[pay["t"] >= t_in]
    s2c = after[after["s2c"]]
    dirs = after["s2c"].to_numpy()
    turns = int(((~dirs[:-1]) & dirs[1:]).sum()) if len(dirs) > 1 else 0
    w = w[w["t"] >= t_in]
    return {
        "bursts": 0,
        "first_packet": int(c2s["number"].iloc[0]),
        "last_packet": int(after["number"].iloc[-1]),
        "t_input": t_in,
        "t_end": float(s2c["t"].iloc[-1]) if len(s2c) else np.nan,
        "latency_ms": (float(s2c["t"].iloc[-1]) - t_in) * 1e3 if len(s2c) else np.nan,
        "first_update_ms": (float(s2c["t"].iloc[0]) - t_in) * 1e3 if len(s2c) else np.nan,
        "bytes_s2c": int(w["ip_len"][w["s2c"]].sum()),
        "bytes_c2s": int(w["ip_len"][~w["s2c"]].sum()),
        "packets_s2c": int(w["s2c"].sum()),
        "packets_c2s": int((~w["s2c"]).sum()),
        "round_trips": turns,
    }

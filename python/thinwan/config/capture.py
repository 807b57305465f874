"""Thin-stream traffic from a packet capture (``traffic.model = "pcap"``).

Carlmar's test grid (docs/sources.md, "Test grid") loads the tunnel with a game server's
many concurrent streams; thinwan generates such streams from published statistics by
default and also accepts a real capture, replayed with its original timing and sizes. Here a capture becomes one write list per stream:

- a *flow* is a TCP or UDP 5-tuple in the server → client direction; the server side is
  the one whose port is ``traffic.pcap_server_port`` (0: the side that sent the flow's
  first payload);
- each packet with new payload is one write at its capture time, relative to the first
  payload packet of the capture (so flows keep their relative start times); TCP bytes
  already seen (retransmissions, overlaps) are not written again, so a write is exactly
  the new application bytes;
- flows are ordered by their first payload, and the first ``topology.pairs`` become the
  streams; writes after ``scenario.duration_s`` are dropped.

dpkt reads pcap and pcapng with Ethernet, raw IP, Linux cooked (v1/v2) and BSD loopback
link types.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dpkt

__all__ = ["TraceError", "Flow", "read_flows", "stream_writes"]

# (link type → how to get the IP packet out of a frame)
_DLT_NULL, _DLT_EN10MB, _DLT_RAW, _DLT_RAW_ALT, _DLT_LOOP, _DLT_LINUX_SLL, _DLT_LINUX_SLL2 = (
    0,
    1,
    101,
    12,
    108,
    113,
    276,
)


class TraceError(ValueError):
    """The capture cannot be used; the message names the file and what is wrong."""


@dataclass
class Flow:
    """One server → client flow: its key and its writes (seconds, bytes)."""

    key: tuple[str, str, int, int, int]  # proto, server addr, client addr, server port, client port
    first: float
    writes: list[tuple[float, int]] = field(default_factory=list)
    # TCP: one past the highest sequence number written (None until the first segment).
    next_seq: int | None = None


def _ip_of(linktype: int, frame: bytes) -> dpkt.Packet | None:
    if linktype == _DLT_EN10MB:
        eth = dpkt.ethernet.Ethernet(frame)
        return eth.data if isinstance(eth.data, (dpkt.ip.IP, dpkt.ip6.IP6)) else None
    if linktype in (_DLT_RAW, _DLT_RAW_ALT):
        version = frame[0] >> 4 if frame else 0
        return dpkt.ip.IP(frame) if version == 4 else dpkt.ip6.IP6(frame) if version == 6 else None
    if linktype in (_DLT_NULL, _DLT_LOOP):
        lo = dpkt.loopback.Loopback(frame)
        return lo.data if isinstance(lo.data, (dpkt.ip.IP, dpkt.ip6.IP6)) else None
    if linktype == _DLT_LINUX_SLL:
        sll = dpkt.sll.SLL(frame)
        return sll.data if isinstance(sll.data, (dpkt.ip.IP, dpkt.ip6.IP6)) else None
    if linktype == _DLT_LINUX_SLL2:
        sll = dpkt.sll2.SLL2(frame)
        return sll.data if isinstance(sll.data, (dpkt.ip.IP, dpkt.ip6.IP6)) else None
    raise TraceError(f"link type {linktype} is not supported (Ethernet, raw IP, Linux cooked or loopback)")


def _packets(path: Path) -> Iterator[tuple[float, int, bytes]]:
    """(time, link type, frame) of every packet in a pcap or pcapng file.

    A damaged file is an error naming the record, never a silent end: dpkt's readers
    stop quietly at a short read, so they read through :class:`_Records`.
    """
    with open(path, "rb") as raw:
        f = _Records(raw)
        bad_header = (ValueError, dpkt.NeedData, dpkt.UnpackError)
        try:
            reader = dpkt.pcap.Reader(f)
        except bad_header:
            f.seek(0)
            try:
                reader = dpkt.pcapng.Reader(f)
            except bad_header as e:
                raise TraceError("not a pcap or pcapng file") from e
        linktype = reader.datalink()
        f.start_records()
        for ts, frame in reader:
            yield float(ts), linktype, frame


# libpcap's largest snapshot length: no packet record holds more.
MAX_RECORD_BYTES = 262_144


class _Records:
    """The capture file as dpkt's readers see it, checked record by record.

    After the file header both formats alternate a fixed-size record header read (16
    bytes in pcap, 8 in pcapng; an empty read there is the end of the file) and a
    body read of the length that header gives. A body longer than any capture can hold
    means a damaged header; a short read anywhere means a truncated file.
    """

    def __init__(self, f: Any) -> None:
        self.f = f
        self.records = 0  # record headers read so far
        self.checking = False
        self.body_next = False

    def start_records(self) -> None:
        self.checking, self.body_next = True, False

    def read(self, n: int = -1) -> bytes:
        if not self.checking:
            return self.f.read(n)
        offset = self.f.tell()
        if self.body_next:
            self.body_next = False
            if n < 0 or n > MAX_RECORD_BYTES:
                raise TraceError(
                    f"packet {self.records} (record at byte {offset - self.header_len}) is damaged: its header "
                    f"says it holds {n:,} bytes, more than a capture holds per packet ({MAX_RECORD_BYTES:,})"
                )
            data = self.f.read(n)
            if len(data) < n:
                raise TraceError(
                    f"packet {self.records} (record at byte {offset - self.header_len}) is truncated: the file "
                    f"ends after {len(data):,} of its {n:,} bytes"
                )
            return data
        data = self.f.read(n)
        if not data:
            return data  # the end of the file, between records
        self.records += 1
        self.header_len = n
        if len(data) < n:
            raise TraceError(
                f"packet {self.records} (record at byte {offset}) is truncated: the file ends inside its header"
            )
        self.body_next = True
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)


def _addr(ip: dpkt.Packet) -> tuple[str, str]:
    family = socket.AF_INET if isinstance(ip, dpkt.ip.IP) else socket.AF_INET6
    return socket.inet_ntop(family, ip.src), socket.inet_ntop(family, ip.dst)


def _payload_len(ip: dpkt.Packet, l4: dpkt.Packet) -> int:
    """Payload bytes of a TCP/UDP packet by its IP and transport headers (at least what
    was captured)."""
    if isinstance(l4, dpkt.tcp.TCP):
        inner = (ip.len - ip.hl * 4 if isinstance(ip, dpkt.ip.IP) else ip.plen) - l4.off * 4
    else:
        inner = l4.ulen - 8
    return max(inner, len(l4.data))


def read_flows(path: str | Path, server_port: int = 0) -> list[Flow]:
    """Every server → client flow with payload in the capture, by first payload."""
    path = Path(path)
    flows: dict[tuple[str, str, int, int, int], Flow] = {}
    seen_from: dict[frozenset, tuple[str, int]] = {}  # conversation → its server endpoint
    n = 0
    try:
        for n, (ts, linktype, frame) in enumerate(_packets(path), start=1):  # noqa: B007 (n names the bad packet below)
            try:
                ip = _ip_of(linktype, frame)
            except TraceError:
                raise
            except (dpkt.UnpackError, IndexError, ValueError):
                continue  # a truncated or foreign frame carries no usable payload
            if ip is None or not isinstance(ip.data, (dpkt.tcp.TCP, dpkt.udp.UDP)):
                continue
            l4 = ip.data
            # The payload's length from the headers: a capture cut short (snaplen, or
            # the simulator's header-only pcaps) still says how much was sent.
            n_payload = _payload_len(ip, l4)
            if not n_payload:
                continue
            src, dst = _addr(ip)
            a, b = (src, l4.sport), (dst, l4.dport)
            conv = frozenset((a, b))
            if server_port:
                if l4.sport != server_port:
                    continue
            else:
                server = seen_from.setdefault(conv, a)
                if server != a:
                    continue  # the client's direction
            proto = "tcp" if isinstance(l4, dpkt.tcp.TCP) else "udp"
            key = (proto, src, dst, l4.sport, l4.dport)
            flow = flows.setdefault(key, Flow(key, ts))
            size = n_payload
            if proto == "tcp":
                # Only bytes beyond the highest already written are new (RFC 793 sequence
                # space, modulo 2^32): retransmissions and overlaps add nothing.
                if flow.next_seq is not None:
                    ahead = (l4.seq + size - flow.next_seq) % (1 << 32)
                    if ahead == 0 or ahead > size:
                        continue
                    size = ahead
                flow.next_seq = (l4.seq + n_payload) % (1 << 32)
            flow.writes.append((ts, size))
    except OSError as e:
        raise TraceError(e.strerror or str(e)) from e
    except (dpkt.NeedData, dpkt.UnpackError) as e:
        raise TraceError(f"unreadable after packet {n}: {e}") from e
    return sorted(flows.values(), key=lambda f: (f.first, f.key))


@functools.lru_cache(maxsize=8)
def _cached_flows(path: str, mtime_ns: int, server_port: int) -> tuple[tuple[tuple[float, int], ...], ...]:
    flows = read_flows(path, server_port)
    if not flows:
        return ()
    t0 = flows[0].first
    return tuple(tuple((t - t0, b) for t, b in f.writes) for f in flows)


def stream_writes(path: str | Path, server_port: int, streams: int, duration_s: float) -> list[list[tuple[float, int]]]:
    """The writes (seconds from the capture's first payload, bytes) of the first
    ``streams`` flows, up to ``duration_s``. Raises :class:`TraceError`."""
    path = Path(path)
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError as e:
        raise TraceError(e.strerror or str(e)) from e
    flows = _cached_flows(str(path), mtime, server_port)
    if len(flows) < streams:
        raise TraceError(f"has {len(flows)} server → client flow(s) with payload; topology.pairs asks for {streams}")
    out = []
    for f in flows[:streams]:
        writes, last = [], 0.0
        for t, b in f:
            last = max(last, t)  # a capture may hold slightly out-of-order stamps
            if last >= duration_s:
                break
            writes.append((last, b))
        out.append(writes)
    return out

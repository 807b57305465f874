"""Hand-made packet captures for the capture tests (tests/test_trace.py, the lab's
replay test)."""

from __future__ import annotations

import socket
from pathlib import Path

import dpkt

SERVER = "10.0.0.1"


def tcp_frame(src: str, dst: str, sport: int, dport: int, seq: int, payload: bytes) -> bytes:
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, data=payload)
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    ip.len = len(bytes(ip))
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def udp_frame(src: str, dst: str, sport: int, dport: int, payload: bytes) -> bytes:
    udp = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
    udp.ulen = len(bytes(udp))
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_UDP, data=udp)
    ip.len = len(bytes(ip))
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def write_capture(path: Path) -> None:
    """Three server → client flows on port 7777 (two TCP, one UDP), a client request,
    a TCP retransmission and a partial overlap."""
    t0 = 1_700_000_000.0
    c1, c2, c3 = ("10.0.0.2", 40001), ("10.0.0.3", 40002), ("10.0.0.4", 40003)
    frames = [
        (0.000, tcp_frame(c1[0], SERVER, c1[1], 7777, 500, b"hello")),  # the client speaks first
        (0.010, tcp_frame(SERVER, c1[0], 7777, c1[1], 1000, b"a" * 100)),
        (0.050, tcp_frame(SERVER, c2[0], 7777, c2[1], 9000, b"b" * 40)),
        (0.300, tcp_frame(SERVER, c1[0], 7777, c1[1], 1000, b"a" * 100)),  # retransmission
        (0.310, tcp_frame(SERVER, c1[0], 7777, c1[1], 1050, b"a" * 80)),  # 30 new bytes
        (0.400, udp_frame(SERVER, c3[0], 7777, c3[1], b"u" * 12)),
        (0.420, tcp_frame(SERVER, c2[0], 7777, c2[1], 9040, b"b" * 60)),
        (2.500, tcp_frame(SERVER, c1[0], 7777, c1[1], 1130, b"a" * 7)),
    ]
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for t, frame in frames:
            w.writepkt(frame, ts=t0 + t)

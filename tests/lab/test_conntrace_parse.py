"""Parsing ``ss -tin`` into conn_trace rows (no root needed)."""

from __future__ import annotations

import math

from thinwan.substrates.lab.conntrace import conn_trace, parse_ss

SS = """\
ESTAB 0      0      198.18.1.1:40000 198.18.2.1:5001
\t skmem:(r0,rb131072,t2304,tb46080,f1792,w46336,o0,bl0,d0) reno wscale:7,7 rto:416 backoff:1 rtt:20.5/3.25 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:7 ssthresh:5 bytes_sent:1000 minrtt:20.1 rcv_rtt:1 rcv_ssthresh:64088
ESTAB 0      0      198.18.1.1:40001 198.18.2.1:5001
\t reno wscale:7,7 rto:220 rtt:21/1 mss:1448 advmss:1448 cwnd:10 minrtt:20 rcv_ssthresh:64088
SYN-SENT 0   1      198.18.1.1:40002 198.18.2.1:5001
\t reno rto:1000 mss:524 cwnd:10
"""


def test_parse_ss_fields() -> None:
    socks = parse_ss(SS)
    assert [s["local"] for s in socks] == ["198.18.1.1:40000", "198.18.1.1:40001", "198.18.1.1:40002"]
    a = socks[0]
    # rcv_ssthresh, advmss, rcvmss, minrtt and rcv_rtt must not shadow the real fields.
    assert (a["rto"], a["srtt_ms"], a["rttvar_ms"], a["mss"], a["cwnd"], a["ssthresh"]) == (416, 20.5, 3.25, 1448, 7, 5)
    assert "ssthresh" not in socks[1]
    # skmem: tb = sk_sndbuf, w = sk_wmem_queued (here at the buffer: a write would block);
    # its "rb…" and "t…" items are not rto/rtt.
    assert (a["sndbuf"], a["wmem_queued"]) == (46080, 46336)
    assert "sndbuf" not in socks[1]


def test_conn_trace_maps_ports_and_units() -> None:
    conns = [
        {"conn": 0, "local": "198.18.1.1:40000"},
        {"conn": 1, "local": "198.18.1.1:40001"},
        {"conn": 2, "local": "198.18.1.1:40002"},
    ]
    t = conn_trace([(1_500_000_000, SS)], conns, t0_ns=1_000_000_000)
    assert list(t.conn) == [0, 1]  # the SYN-SENT socket has no real MSS or RTT yet
    r0, r1 = t.iloc[0], t.iloc[1]
    assert r0.t == 0.5 and r0.cwnd == 7 * 1448 and r0.ssthresh == 5 * 1448
    assert math.isclose(r0.srtt, 0.0205) and math.isclose(r0.rttvar, 0.00325) and math.isclose(r0.rto, 0.416)
    assert math.isinf(r1.ssthresh) and math.isnan(r1.rtt)
    assert (r0.sndbuf, r0.wmem_queued) == (46080, 46336) and math.isnan(r1.sndbuf)

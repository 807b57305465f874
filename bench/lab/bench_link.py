#!/usr/bin/env python3
"""Accuracy and throughput of the thinwan-link emulator (needs root).

Measures, each on a fresh lab:

1. **delay error** at 10 and 100 Mbit/s, 20 ms: UDP probes (200 B, 500/s) whose one-way
   delay is compared with the configured delay + the probe's serialisation time.
   Two views: *app* = receiver's read − sender's write (includes both hosts' socket
   wake-ups), *emulator* = delivery − due time from the event log (the emulator's own
   scheduling error).
2. **TCP goodput**, one flow through 10 Mbit/s, 20 ms each way, a BDP buffer
   (50 kB), reno and cubic: application bytes read per second in the steady state.
3. **unshaped forwarding**: one TCP flow, no rate limit, no delay.
4. **spurious drops**: drops inside the emulator and TX drops of the TUN devices in
   runs that should have none.

Usage: ``sudo .venv/bin/python bench/lab/bench_link.py [--json] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thinwan.lab.events import DELIVER, DROP, read_events
from thinwan.lab.spec import LabSpec, LinkSpec, TcpSettings
from thinwan.lab.topology import CLIENT_ADDR, Lab, find_binary

NET = str(find_binary("thinwan-net"))


def tun_tx_dropped(lab: Lab) -> int:
    total = 0
    for side in ("server", "client"):
        out = lab.run(side, ["ip", "-s", "-j", "link", "show", lab.tun[side]]).stdout
        total += int(json.loads(out)[0]["stats64"]["tx"]["dropped"])
    return total


def delay_error(rate_bps: int, delay_ms: float, count: int, work: Path) -> dict[str, Any]:
    size = 200  # UDP payload; IP packet = 228 B
    spec = LabSpec(link=LinkSpec.symmetric(rate_bps=rate_bps, delay_ms=delay_ms), tcp=TcpSettings())
    with Lab(spec, workdir=work) as lab:
        recv = lab.popen("client", [NET, "probe-recv", "--listen", f"{CLIENT_ADDR}:6000", "--count", str(count),
                                    "--timeout", "2s", "--out", str(work / "p.csv")], stdout=subprocess.PIPE)
        assert recv.stdout is not None
        recv.stdout.readline()
        lab.run("server", [NET, "probe-send", "--to", f"{CLIENT_ADDR}:6000", "--count", str(count),
                           "--interval", "2ms", "--size", str(size)], timeout=120)
        recv.wait(timeout=30)
        tx_drops = tun_tx_dropped(lab)
    p = pd.read_csv(work / "p.csv")
    ser_ns = (size + 28) * 8 * 1e9 / rate_bps if rate_bps else 0.0
    app_err = (p.t_recv_ns - p.t_send_ns - delay_ms * 1e6 - ser_ns) / 1e3
    ev = read_events(work / "events.bin")
    d = ev[(ev.event == DELIVER) & (ev.dir == 0)]
    emu_err = (d.t_ns.astype(np.int64) - d.due_ns.astype(np.int64)) / 1e3
    return {
        "rate_mbps": rate_bps / 1e6,
        "delay_ms": delay_ms,
        "probes": count,
        "received": len(p),
        "app_err_us": _pcts(app_err),
        "emulator_err_us": _pcts(emu_err),
        "tun_tx_dropped": tx_drops,
    }


def tcp_goodput(rate_bps: int, delay_ms: float, queue_bytes: int, cc: str, seconds: float, work: Path) -> dict[str, Any]:
    spec = LabSpec(
        link=LinkSpec.symmetric(rate_bps=rate_bps, delay_ms=delay_ms, queue_packets=0 if queue_bytes else 10000, queue_bytes=queue_bytes),
        tcp=TcpSettings(congestion_control=cc, rmem_max=64 << 20, wmem_max=64 << 20),
    )
    with Lab(spec, workdir=work, events=bool(rate_bps)) as lab:
        sink = lab.popen("client", [NET, "sink", "--listen", f"{CLIENT_ADDR}:5001", "--out", str(work / "sink.csv"),
                                    "--timeout-s", str(seconds + 30)], stdout=subprocess.PIPE)
        assert sink.stdout is not None
        sink.stdout.readline()
        lab.run("server", [NET, "pump", "--connect", f"{CLIENT_ADDR}:5001", "--model", "bulk", "--duration-s", str(seconds),
                           "--drain-s", "0.5", "--cc", cc, "--out", str(work / "pump.csv"), "--conns-out", str(work / "conns.json")],
                timeout=seconds + 60)
        sink.wait(timeout=60)
        tx_drops = tun_tx_dropped(lab)
        stats = lab.down()
    r = pd.read_csv(work / "sink.csv")
    t = (r.t_read_ns - r.t_read_ns.min()) / 1e9
    lo, hi = min(2.0, seconds / 3), seconds - 0.2
    steady = r[(t > lo) & (t <= hi)]
    info = json.loads((work / "conns.json").read_text())["conns"][0]["tcp_info"]
    fwd = (stats or {}).get("fwd", {})
    return {
        "rate_mbps": rate_bps / 1e6,
        "delay_ms": delay_ms,
        "queue_bytes": queue_bytes,
        "cc": cc,
        "goodput_mbps": float(steady.bytes.sum() * 8 / (hi - lo) / 1e6),
        "retransmitted_bytes": info.get("bytes_retrans"),
        "emulator_drops_overflow": fwd.get("drops_overflow"),
        "emulator_malformed": fwd.get("malformed"),
        "tun_tx_dropped": tx_drops,
    }


def _pcts(x: pd.Series) -> dict[str, float]:
    q = np.percentile(x, [50, 90, 99, 99.9])
    return {"p50": round(float(q[0]), 1), "p90": round(float(q[1]), 1), "p99": round(float(q[2]), 1),
            "p99.9": round(float(q[3]), 1), "max": round(float(x.max()), 1), "min": round(float(x.min()), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="fewer probes, shorter transfers")
    args = ap.parse_args()
    probes, seconds = (1000, 6.0) if args.quick else (5000, 15.0)
    results: dict[str, Any] = {"delay": [], "goodput": []}
    with tempfile.TemporaryDirectory(prefix="tw-bench-") as tmp:
        base = Path(tmp)
        for k, rate in enumerate((10_000_000, 100_000_000)):
            results["delay"].append(delay_error(rate, 20.0, probes, base / f"d{k}"))
        for k, cc in enumerate(("reno", "cubic")):
            results["goodput"].append(tcp_goodput(10_000_000, 20.0, 50_000, cc, seconds * 2, base / f"g{k}"))
        results["unshaped"] = tcp_goodput(0, 0.0, 0, "cubic", seconds, base / "u")
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("delay error vs configured (µs)            p50     p90     p99   p99.9     max")
    for d in results["delay"]:
        for view in ("app", "emulator"):
            e = d[f"{view}_err_us"]
            print(f"  {d['rate_mbps']:>5g} Mbit/s 20 ms, {view:<9}     {e['p50']:>7} {e['p90']:>7} {e['p99']:>7} {e['p99.9']:>7} {e['max']:>7}")
        print(f"      probes lost: {d['probes'] - d['received']}, TUN tx drops: {d['tun_tx_dropped']}")
    for g in results["goodput"]:
        print(f"TCP {g['cc']:<5} 10 Mbit/s 20 ms, BDP buffer: {g['goodput_mbps']:.2f} Mbit/s goodput "
              f"(retransmitted {g['retransmitted_bytes']} B, queue drops {g['emulator_drops_overflow']}, TUN drops {g['tun_tx_dropped']})")
    u = results["unshaped"]
    print(f"unshaped, one TCP flow: {u['goodput_mbps']:.0f} Mbit/s goodput (emulator drops {u['emulator_drops_overflow']}, TUN drops {u['tun_tx_dropped']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

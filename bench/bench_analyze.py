"""Speed and memory of ``thinwan analyze`` (issue 19: ≥ 1 M packets/s on one core on a
10 M-packet capture, next to ``tshark -r`` on the same file in the same run; memory
bounded by the live connections, not the capture's length).

    .venv/bin/python -m bench.bench_analyze [--packets 10000000] [--dir /tmp] [--no-tshark] [--keep]

The capture (built like bench/bench_desktop_analyze.py's: numpy chunks of fixed-size
records; LINKTYPE_RAW, nanosecond pcap, 40-byte IPv4/TCP headers captured, the IP length
as sent) holds 256 thin-client connections on port 3389 running side by side, each
repeating a 1-s cycle of 12 packets: an interactive response at 0 ms, its ACK at 40 ms, a
block of 6 responses 0.4 ms apart from 300 ms, their ACK at 350 ms, a request at 600 ms
and the server's ACK at 640 ms, an interactive response at 800 ms (sequence numbers
consistent, so nothing is a retransmission). Every result is checked: per cycle and
connection one I→B, one B→I and one I→I transition, so α = 0.5 and β = 1.

The machine may be shared: each reader's CPU time (user + system) is reported next to
its wall time, and packets per CPU-second is the one-core rate. Readers, each in its own
process, the file's pages dropped from the page cache before
each (posix_fadvise DONTNEED after fsync), then once more warm:
- ``thinwan analyze`` core pass: ``_native.analyze_tcp_capture`` (read, parse,
  connection table, sequence tracking, gap rule, histograms, passive RTT monitor; one
  thread) in a process that imports nothing else, with its peak RSS before and after; also run on the first tenth of the file, to show the peak RSS
  does not grow with the capture's length;
- the whole command (``thinwan analyze --no-report``: + records), cold only;
- ``tcpdump -r F -w /dev/null 'tcp port 3389'`` (libpcap + BPF);
- ``tshark -r F -T fields -e frame.time_epoch -e tcp.len -Y 'tcp.port == 3389'``
  (dissects every packet; TCP sequence analysis off, so it keeps less state than we do).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.bench_desktop_analyze import drop_cache

CONNS = 256
CYCLE = 12
# (offset ms, from server, payload bytes, ACK of the server's bytes up to this offset in the cycle)
PATTERN = [
    (0.0, True, 120),
    (40.0, False, 0),
    *[(300.0 + 0.4 * k, True, 1000) for k in range(6)],
    (350.0, False, 0),
    (600.0, False, 30),
    (640.0, True, 0),
    (800.0, True, 90),
]
SERVER_BYTES = sum(p for _, s, p in PATTERN if s)


def write_pcap(path: Path, n: int, chunk: int = 1_200_000) -> None:
    """``n`` packets (module docstring), in chunks of whole rounds over the connections."""
    off_ms = np.array([p[0] for p in PATTERN])
    from_server = np.array([p[1] for p in PATTERN])
    payload = np.array([p[2] for p in PATTERN], np.int64)
    # Server bytes sent before each packet in the cycle, client bytes likewise.
    srv_before = np.concatenate([[0], np.cumsum(np.where(from_server, payload, 0))[:-1]])
    cli_before = np.concatenate([[0], np.cumsum(np.where(~from_server, payload, 0))[:-1]])
    cli_per_cycle = int(payload[~from_server].sum())
    with open(path, "wb") as f:
        f.write(np.array([0xA1B23C4D], "<u4").tobytes() + np.array([2, 4], "<u2").tobytes())
        f.write(np.array([0, 0, 65535, 101], "<u4").tobytes())
        step = chunk - chunk % (CYCLE * CONNS)
        for start in range(0, n, step):
            i = np.arange(start, min(n, start + step), dtype=np.int64)
            c = i % CONNS
            j = (i // CONNS) % CYCLE
            cycle = i // (CONNS * CYCLE)
            fs = from_server[j]
            t = 1_700_000_000 * 10**9 + cycle * 10**9 + np.round(off_ms[j] * 1e6).astype(np.int64) + c * 1000
            srv_seq = 1_000 + cycle * SERVER_BYTES + srv_before[j]
            cli_seq = 5_000 + cycle * cli_per_cycle + cli_before[j]
            seq = np.where(fs, srv_seq, cli_seq)
            ack = np.where(fs, cli_seq, srv_seq)
            write_records(f, t, c, fs, seq, ack, payload[j])
        f.flush()
        os.fsync(f.fileno())


def write_records(f, t, c, fs, seq, ack, payload) -> None:  # noqa: ANN001 - numpy arrays
    n = len(t)
    rec = np.zeros((n, 56), np.uint8)
    hdr = rec[:, :16].view("<u4")
    hdr[:, 0], hdr[:, 1], hdr[:, 2], hdr[:, 3] = t // 10**9, t % 10**9, 40, 40 + payload
    ip = rec[:, 16:]
    ip[:, 0], ip[:, 8], ip[:, 9] = 0x45, 64, 6
    be = lambda a, dt, w: np.asarray(a).astype(dt).view(np.uint8).reshape(n, w)  # noqa: E731
    ip[:, 2:4] = be(40 + payload, ">u2", 2)
    cli = be(0x0A010000 + c, ">u4", 4)
    srv = be(np.full(n, 0x0A020001), ">u4", 4)
    cport = be(40000 + c, ">u2", 2)
    sport = be(np.full(n, 3389), ">u2", 2)
    s = fs[:, None]
    ip[:, 12:16], ip[:, 16:20] = np.where(s, srv, cli), np.where(s, cli, srv)
    ip[:, 20:22], ip[:, 22:24] = np.where(s, sport, cport), np.where(s, cport, sport)
    ip[:, 24:28], ip[:, 28:32] = be(seq % 2**32, ">u4", 4), be(ack % 2**32, ">u4", 4)
    ip[:, 32], ip[:, 33] = 5 << 4, np.where(payload > 0, 0x18, 0x10)
    ip[:, 34:36] = be(np.full(n, 65535), ">u2", 2)
    f.write(rec.tobytes())


# Run in a child process: the native pass's wall and CPU time, and the process's peak RSS
# before the pass (the interpreter and its imports) and after it.
CHILD = """
import json, sys, time
from thinwan import _native
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the (big) parent.
hwm = lambda: next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
rss0 = hwm()
t, c = time.perf_counter(), time.process_time()
res = _native.analyze_tcp_capture(sys.argv[1], 3389, None, float(sys.argv[3]), int(sys.argv[2]) or None)
wall, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "rss_before_mb": rss0,
                  "rss_mb": hwm(),
                  "pooled": res["pooled"], "matched": res["matched"], "live_max": res["live_max"]}))
"""


def core_pass(path: Path, max_packets: int, cold: bool) -> dict:
    """The native pass in a fresh process that imports only the native module."""
    from thinwan.analysis.capture_model import default_gap_ms, point_model

    if cold:
        drop_cache(path)
    argv = [sys.executable, "-c", CHILD, str(path), str(max_packets), str(default_gap_ms())]
    out = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    out["model"] = point_model(out["pooled"])
    out["transitions"] = out["pooled"]["transitions"]
    return out


def timed(argv: list[str], path: Path, cold: bool) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one command."""
    if cold:
        drop_cache(path)
    r0 = os.times()
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    r1 = os.times()
    return wall, (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=10_000_000)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--no-tshark", action="store_true", help="skip tshark (about a minute per 10 M packets)")
    ap.add_argument("--keep", action="store_true", help="keep the pcap")
    args = ap.parse_args()
    n = args.packets - args.packets % (CYCLE * CONNS)
    path = Path(args.dir) / f"thinwan-bench-analyze-{n}.pcap"
    t = time.perf_counter()
    write_pcap(path, n)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB, {n} packets) in {time.perf_counter() - t:.1f} s")

    rows = []
    cycles = n // (CYCLE * CONNS)
    for label, limit in (("first tenth", n // 10), ("whole file", 0)):
        cold = core_pass(path, limit, cold=True)
        warm = core_pass(path, limit, cold=False)
        k = limit or n
        tr = cold["transitions"]
        # Checked: α = 0.5, β = 1, one I→B and one B→I per cycle and connection (±1 at the cut).
        assert cold["matched"] == k and abs(cold["model"]["p_interactive_to_bulk"] - 0.5) < 0.01, cold
        assert cold["model"]["p_bulk_to_interactive"] == 1.0, cold
        if not limit:
            assert tr["ib"] == tr["bi"] == cycles * CONNS, (tr, cycles)
        row = {
            "reader": f"thinwan analyze core pass ({label})",
            "packets": k,
            "cold_s": cold["wall_s"],
            "cold_cpu_s": cold["cpu_s"],
            "warm_s": warm["wall_s"],
            "warm_cpu_s": warm["cpu_s"],
            "cold_mpps": k / cold["wall_s"] / 1e6,
            "cpu_mpps": k / cold["cpu_s"] / 1e6,
            "rss_before_mb": cold["rss_before_mb"],
            "peak_rss_mb": cold["rss_mb"],
            "live_max": cold["live_max"],
        }
        rows.append(row)
        print(
            f"{row['reader']:45s} cold {row['cold_s']:6.2f} s ({row['cold_mpps']:5.2f} M/s; CPU {row['cold_cpu_s']:.2f} s, "
            f"{row['cpu_mpps']:.2f} M/s)  warm {row['warm_s']:6.2f} s  peak RSS {row['rss_before_mb']:.0f} MB before, "
            f"{row['peak_rss_mb']:.0f} MB after"
        )
    out = Path(args.dir) / "thinwan-bench-analyze-out"
    argv_cli = [sys.executable, "-m", "thinwan", "analyze", str(path), "--server-port", "3389", "--out", str(out)]
    readers = {"thinwan analyze --no-report (whole command)": [*argv_cli, "--no-report"]}
    if shutil.which("tcpdump"):
        readers["tcpdump -r -w /dev/null 'tcp port 3389'"] = [
            "tcpdump",
            "-r",
            str(path),
            "-w",
            "/dev/null",
            "tcp port 3389",
        ]
    if shutil.which("tshark") and not args.no_tshark:
        readers["tshark -r -T fields -Y 'tcp.port == 3389'"] = [
            "tshark", "-n", "-o", "tcp.analyze_sequence_numbers:FALSE", "-r", str(path),
            "-T", "fields", "-e", "frame.time_epoch", "-e", "tcp.len", "-Y", "tcp.port == 3389",
        ]  # fmt: skip
    for name, argv in readers.items():
        cold, cpu = timed(argv, path, cold=True)
        row = {
            "reader": name,
            "packets": n,
            "cold_s": cold,
            "cold_cpu_s": cpu,
            "cold_mpps": n / cold / 1e6,
            "cpu_mpps": n / cpu / 1e6,
        }
        rows.append(row)
        print(f"{name:45s} cold {cold:6.2f} s ({n / cold / 1e6:5.2f} M/s; CPU {cpu:.2f} s, {n / cpu / 1e6:.2f} M/s)")
    print(json.dumps({"packets": n, "bytes": path.stat().st_size, "connections": CONNS, "readers": rows}))
    shutil.rmtree(out, ignore_errors=True)
    if not args.keep:
        path.unlink()


if __name__ == "__main__":
    main()

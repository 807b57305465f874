"""Speed of the capture analyser (issue 16: ≥ 1 M packets/s on one core, 10 M-packet pcap,
cold cache), against tcpdump and tshark reading the same file in the same run.

    .venv/bin/python -m bench.bench_desktop_analyze [--packets 10000000] [--dir /tmp] [--no-tshark]

The pcap is what the desktop runs write (tcpdump -s on the client's TUN: LINKTYPE_RAW,
nanosecond timestamps, IPv4/TCP headers of 52 bytes captured, the IP length as sent):
operations of 2 input packets, 20 update packets and 4 ACKs, 1 ms apart, 600 ms between
operations, on TCP port 5900, plus 10 % of other traffic (port 443). "Cold" = the file's
pages dropped from the page cache (posix_fadvise DONTNEED after fsync) before each
reader; each reader then runs warm too. Readers: thinwan (``split_capture``: read, filter,
split, columns to numpy; one thread), ``tcpdump -r F -w /dev/null 'tcp port 5900'``
(libpcap + BPF, writes the matching packets), ``tshark -r F -T fields -e frame.time_epoch
-e tcp.len -Y 'tcp.port == 5900'`` (dissects every packet, TCP sequence analysis off; what quicklook used).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from thinwan.substrates.desktop.opsplit import split_capture

OP_PACKETS = 26  # 2 input, 20 update, 4 ACKs


def write_pcap(path: Path, n: int, chunk: int = 1_000_000) -> None:
    """``n`` packets, built in numpy chunks of fixed-size records (16 + 52 bytes)."""
    rec = 16 + 52
    template_c2s = _ip_tcp((198, 18, 2, 1), (198, 18, 1, 1), 40000, 5900)
    template_s2c = _ip_tcp((198, 18, 1, 1), (198, 18, 2, 1), 5900, 40000)
    template_other = _ip_tcp((198, 18, 2, 1), (198, 18, 1, 1), 50000, 443)
    with open(path, "wb") as f:
        f.write(np.array([0xA1B23C4D], "<u4").tobytes() + np.array([2, 4], "<u2").tobytes())
        f.write(np.array([0, 0, 52, 101], "<u4").tobytes())
        t0 = 1_700_000_000 * 10**9
        for start in range(0, n, chunk):
            i = np.arange(start, min(n, start + chunk), dtype=np.int64)
            other = (i % 10) == 9  # every 10th packet is not display traffic
            k = i - i // 10  # index among display packets
            op, j = k // OP_PACKETS, k % OP_PACKETS
            t = t0 + op * 600_000_000 + j * 1_000_000 + other * 500_000
            kind = np.where(other, 2, np.where(j < 2, 0, np.where(j < 22, 1, 0)))
            payload = np.where(other, 100, np.where(j < 2, 20, np.where(j < 22, 1400, 0)))
            buf = np.zeros((len(i), rec), np.uint8)
            hdr = buf[:, :16].view("<u4")
            hdr[:, 0] = t // 10**9
            hdr[:, 1] = t % 10**9
            hdr[:, 2] = 52
            hdr[:, 3] = 52 + payload
            for kk, tpl in enumerate((template_c2s, template_s2c, template_other)):
                buf[kind == kk, 16:] = tpl
            total = (52 + payload).astype(">u2")
            buf[:, 18:20] = total.view(np.uint8).reshape(-1, 2)
            # Sequence numbers running on per direction (the analyser takes a segment
            # whose bytes it has seen as a retransmission: it starts nothing).
            seq = np.where(j < 2, (op * 2 + j) * 20, np.where(j < 22, (op * 20 + j - 2) * 1400, (op + 1) * 40))
            buf[:, 40:44] = (seq % 2**32).astype(">u4").view(np.uint8).reshape(-1, 4)
            f.write(buf.tobytes())
        f.flush()
        os.fsync(f.fileno())


def _ip_tcp(src: tuple[int, ...], dst: tuple[int, ...], sport: int, dport: int) -> np.ndarray:
    p = np.zeros(52, np.uint8)
    p[0], p[8], p[9] = 0x45, 64, 6
    p[12:16], p[16:20] = src, dst
    p[20:22] = divmod(sport, 256)
    p[22:24] = divmod(dport, 256)
    p[32] = 8 << 4  # 32-byte TCP header (timestamps), as Linux sends
    return p


def drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(fn: object, path: Path, cold: bool) -> float:
    if cold:
        drop_cache(path)
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=10_000_000)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--no-tshark", action="store_true", help="skip tshark (minutes on 10 M packets)")
    ap.add_argument("--keep", action="store_true", help="keep the pcap")
    args = ap.parse_args()
    path = Path(args.dir) / f"thinwan-bench-desktop-{args.packets}.pcap"
    t = time.perf_counter()
    write_pcap(path, args.packets)
    print(
        f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB, {args.packets} packets) in {time.perf_counter() - t:.1f} s"
    )
    n = args.packets
    ops_expected = (n - n // 10) // OP_PACKETS

    def thinwan() -> None:
        res = split_capture(path, 5900, idle_ms=100)
        assert abs(len(res.ops) - ops_expected) <= 1, (len(res.ops), ops_expected)

    readers = {"thinwan analyze": thinwan}
    if shutil.which("tcpdump"):
        readers["tcpdump -r (BPF filter, -w /dev/null)"] = lambda: _run(
            ["tcpdump", "-r", str(path), "-w", "/dev/null", "tcp port 5900"]
        )
    if shutil.which("tshark") and not args.no_tshark:
        readers["tshark -r -T fields -Y"] = lambda: _run(
            [
                "tshark",
                "-n",
                "-o",
                "tcp.analyze_sequence_numbers:FALSE",
                "-r",
                str(path),
                "-T",
                "fields",
                "-e",
                "frame.time_epoch",
                "-e",
                "tcp.len",
                "-Y",
                "tcp.port == 5900",
            ]
        )
    rows = []
    for name, fn in readers.items():
        cold = timed(fn, path, cold=True)
        warm = timed(fn, path, cold=False)
        rows.append(
            {"reader": name, "cold_s": cold, "warm_s": warm, "cold_mpps": n / cold / 1e6, "warm_mpps": n / warm / 1e6}
        )
        print(
            f"{name:40s} cold {cold:7.2f} s ({n / cold / 1e6:5.2f} M packets/s)   warm {warm:7.2f} s ({n / warm / 1e6:5.2f} M packets/s)"
        )
    print(json.dumps({"packets": n, "bytes": path.stat().st_size, "readers": rows}))
    if not args.keep:
        path.unlink()


def _run(argv: list[str]) -> None:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


if __name__ == "__main__":
    main()

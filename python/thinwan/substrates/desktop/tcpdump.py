"""Client-side packet capture (Lai and Nieh's method, docs/sources.md): tcpdump on the client namespace's TUN.

``-U --immediate-mode`` hands every packet to the file as it arrives (no batching, so the
file grows as traffic flows: :meth:`Capture.idle_for` watches it to tell when traffic has
fallen idle), ``-B 65536`` (KiB) gives the kernel a 64 MiB buffer so a burst never
overflows it, and the snap length keeps every IPv4 + TCP header (at most 60 + 60 bytes)
plus a little payload for eyes; the analyser reads lengths from the IP header, not from
the captured bytes. After stopping, tcpdump's own count of packets dropped by the kernel
must be 0, and tshark must read the file and count the same packets, or the capture
fails saying which.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .procs import DesktopError, Proc, start_proc, tail

__all__ = ["Capture", "CaptureResult", "SNAPLEN"]

SNAPLEN = 192
BUFFER_KIB = 65536


@dataclass(frozen=True)
class CaptureResult:
    path: Path
    packets: int  # tcpdump: packets captured
    dropped_kernel: int
    dropped_interface: int
    tshark_packets: int

    def to_json(self) -> dict[str, object]:
        return {
            "pcap": str(self.path),
            "packets": self.packets,
            "dropped_kernel": self.dropped_kernel,
            "dropped_interface": self.dropped_interface,
            "tshark_packets": self.tshark_packets,
        }


class Capture:
    """One tcpdump run writing one pcap."""

    def __init__(self, netns: str, interface: str, path: Path, logdir: Path) -> None:
        if shutil.which("tcpdump") is None:
            raise DesktopError("tcpdump is not installed (run scripts/setup-desktop.sh as root)")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.log = logdir / f"tcpdump-{self.path.stem}.log"
        argv = [
            "tcpdump",
            "-i",
            interface,
            "-n",
            "-U",
            "--immediate-mode",
            "-B",
            str(BUFFER_KIB),
            "-s",
            str(SNAPLEN),
            "-w",
            str(self.path),
        ]
        self.proc: Proc | None = start_proc(netns, "tcpdump", argv, self.log)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if not self.proc.alive():
                raise DesktopError(f"capture: {self.proc.describe_exit()}")
            if b"listening on" in self.log.read_bytes():
                return
            time.sleep(0.02)
        self.proc.stop()
        raise DesktopError(f"capture: tcpdump did not start listening within 10 s; log:\n{tail(self.log)}")

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def idle_for(self, idle_s: float, max_wait_s: float) -> float | None:
        """Wait until the capture has not grown for ``idle_s``; returns how long we waited,
        or None if traffic was still flowing after ``max_wait_s``."""
        start = time.monotonic()
        last_size, last_change = self.size(), start
        while True:
            now = time.monotonic()
            size = self.size()
            if size != last_size:
                last_size, last_change = size, now
            if now - last_change >= idle_s:
                return now - start
            if now - start >= max_wait_s:
                return None
            time.sleep(0.01)

    def grows_within(self, timeout_s: float) -> bool:
        """Wait until the capture grows (traffic resumes); False if it did not within
        ``timeout_s``."""
        start, size = time.monotonic(), self.size()
        while time.monotonic() - start < timeout_s:
            if self.size() != size:
                return True
            time.sleep(0.01)
        return False

    def stop(self) -> CaptureResult:
        """Stop tcpdump (SIGINT: it writes its counters) and check the capture."""
        if self.proc is None:
            raise DesktopError("capture already stopped")
        proc, self.proc = self.proc, None
        if not proc.alive():
            raise DesktopError(f"capture: tcpdump died during the run: {proc.describe_exit()}")
        proc.stop(sig=signal.SIGINT, grace=10.0)
        text = self.log.read_text(errors="replace")
        captured = _count(text, r"(\d+) packets? captured")
        dropped = _count(text, r"(\d+) packets? dropped by kernel")
        dropped_if = _count(text, r"(\d+) packets? dropped by interface", default=0)
        if captured is None or dropped is None:
            raise DesktopError(f"capture: tcpdump did not report its counters; log:\n{tail(self.log)}")
        if dropped > 0 or dropped_if > 0:
            raise DesktopError(
                f"capture {self.path}: tcpdump lost packets ({dropped} dropped by kernel, {dropped_if} by "
                "interface): latencies from it would be wrong; the run fails"
            )
        n = tshark_count(self.path)
        if n != captured:
            raise DesktopError(f"capture {self.path}: tcpdump captured {captured} packets but tshark reads {n}")
        return CaptureResult(self.path, captured, dropped, dropped_if, n)

    def abort(self) -> None:
        if self.proc is not None:
            self.proc.stop(sig=signal.SIGINT, grace=5.0)
            self.proc = None


def tshark_count(path: Path) -> int:
    """Packets tshark reads from ``path`` (fails with tshark's message if it cannot)."""
    if shutil.which("tshark") is None:
        raise DesktopError("tshark is not installed (run scripts/setup-desktop.sh as root)")
    done = subprocess.run(
        ["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "frame.number"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise DesktopError(f"tshark cannot read {path}: {done.stderr.strip()[-800:]}")
    return sum(1 for line in done.stdout.splitlines() if line.strip())


def _count(text: str, pattern: str, default: int | None = None) -> int | None:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else default

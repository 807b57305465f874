"""Bring a lab up and down: two namespaces, two TUN devices, the emulator between them.

:class:`Lab` is a context manager; leaving it (normally, on an exception, on Ctrl-C or
on SIGTERM) tears everything down. ``Lab.up(detach=True)`` starts the emulator in its
own session so the lab outlives the command (``thinwan lab up``), and
:func:`down` removes it later.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from . import netns
from .netns import LabError
from .spec import LabSpec

__all__ = ["Lab", "SERVER_ADDR", "CLIENT_ADDR", "find_binary", "down", "current_lab"]

SERVER_ADDR = "198.18.1.1"  # RFC 2544 benchmarking range, only inside our namespaces
CLIENT_ADDR = "198.18.2.1"
SERVER_NET = "198.18.1.0/24"
CLIENT_NET = "198.18.2.0/24"
SIDES = ("server", "client")
READY_TIMEOUT_S = 10.0


def find_binary(name: str) -> Path:
    """Locate ``thinwan-link`` / ``thinwan-net``: $THINWAN_NET_BIN_DIR, the repo's
    cargo target dirs, then $PATH."""
    candidates = []
    if env := os.environ.get("THINWAN_NET_BIN_DIR"):
        candidates.append(Path(env) / name)
    repo = Path(__file__).resolve().parents[3]
    for sub in ("target/net/release", "target/release", "target/net/debug", "target/debug"):
        candidates.append(repo / sub / name)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    found = shutil.which(name)
    if found:
        return Path(found)
    raise LabError(
        f"{name} not found; build it with: CARGO_TARGET_DIR=target/net cargo build --release -p thinwan-net "
        "(or set THINWAN_NET_BIN_DIR)"
    )


class Lab:
    """One lab: ``<id>-srv`` and ``<id>-cli`` namespaces joined by ``thinwan-link``."""

    def __init__(self, spec: LabSpec, workdir: str | Path | None = None, events: bool = True, pcap: bool = False) -> None:
        self.spec = spec
        self.id = netns.new_id()
        self.netns = {"server": f"{self.id}-srv", "client": f"{self.id}-cli"}
        self.tun = {"server": f"{self.id}-s", "client": f"{self.id}-c"}
        self.addr = {"server": SERVER_ADDR, "client": CLIENT_ADDR}
        self.workdir = Path(workdir) if workdir else netns.state_dir(self.id)
        self.events_path = self.workdir / "events.bin" if events else None
        self.pcap_dir = self.workdir / "pcap" if pcap else None
        self.stats_path = self.workdir / "link-stats.json"
        self.emulator: subprocess.Popen[bytes] | None = None
        self.emulator_pid: int | None = None
        self.notes: list[str] = list(spec.notes)
        self._procs: list[subprocess.Popen[Any]] = []
        self._old_handler: Any = None

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> Lab:
        self._old_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self.up()
        except BaseException:
            self.down()
            signal.signal(signal.SIGTERM, self._old_handler)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.down()
        finally:
            signal.signal(signal.SIGTERM, self._old_handler)

    def up(self, detach: bool = False) -> None:
        """Create the namespaces and TUNs, apply TCP settings, start the emulator.

        With ``detach`` the emulator owns the lab (its own session; the lab lives until
        ``down``); otherwise this process does.
        """
        netns.require_root()
        link_bin = find_binary("thinwan-link")
        self.workdir.mkdir(parents=True, exist_ok=True)
        # State first, so a crash at any later point leaves something `clean` can find.
        self._save_state(owner=os.getpid())
        for side in SIDES:
            self._make_side(side)
        config = self.workdir / "link.json"
        config.write_text(json.dumps(self.spec.link.to_json(), indent=2) + "\n")
        argv = [
            str(link_bin),
            "--server", f"{self.netns['server']}:{self.tun['server']}",
            "--client", f"{self.netns['client']}:{self.tun['client']}",
            "--config", str(config),
            "--stats", str(self.stats_path),
        ]
        if self.events_path:
            argv += ["--events", str(self.events_path)]
        if self.pcap_dir:
            argv += ["--pcap-dir", str(self.pcap_dir)]
        out = open(self.workdir / "link.out", "wb")  # noqa: SIM115 (owned by the child)
        err = open(self.workdir / "link.err", "wb")  # noqa: SIM115
        self.emulator = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=detach)
        out.close()
        err.close()
        self.emulator_pid = self.emulator.pid
        self._save_state(owner=self.emulator.pid if detach else os.getpid())
        self._wait_ready()

    def down(self) -> dict[str, Any] | None:
        """Stop every process and remove namespaces and devices; returns the emulator's
        final counters (None if it did not report)."""
        stats = None
        for p in self._procs:
            if p.poll() is None:
                p.terminate()
        for p in self._procs:
            _wait(p, 3.0)
        if self.emulator is not None and self.emulator.poll() is None:
            self.emulator.send_signal(signal.SIGTERM)
            _wait(self.emulator, 10.0)
        if self.stats_path.exists():
            try:
                stats = json.loads(self.stats_path.read_text())
            except ValueError:
                stats = None
        state = netns.read_state(self.id)
        netns.teardown(self.id, state)
        return stats

    # -- use -------------------------------------------------------------------------

    def popen(self, side: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside ``side``'s namespace; stopped by :meth:`down`."""
        p = subprocess.Popen(["ip", "netns", "exec", self.netns[side], *argv], **kwargs)
        self._procs.append(p)
        return p

    def run(self, side: str, argv: Sequence[str], timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside ``side``'s namespace to completion."""
        done = subprocess.run(
            ["ip", "netns", "exec", self.netns[side], *argv], capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise LabError(f"{side}: {' '.join(argv)}: {done.stderr.strip() or done.returncode}")
        return done

    def emulator_alive(self) -> bool:
        return self.emulator is not None and self.emulator.poll() is None

    def describe(self) -> str:
        """How to reach the lab (printed by ``thinwan lab up``)."""
        f, r = self.spec.link.fwd, self.spec.link.rev
        lines = [
            f"lab {self.id} is up (emulator pid {self.emulator_pid})",
            f"  server side: netns {self.netns['server']}, {self.addr['server']} on {self.tun['server']}",
            f"  client side: netns {self.netns['client']}, {self.addr['client']} on {self.tun['client']}",
            f"  server→client: {_fmt_dir(f)}",
            f"  client→server: {_fmt_dir(r)}",
            f"  TCP: cc {self.spec.tcp.congestion_control}, sack {int(self.spec.tcp.sack)}, "
            f"ssr {int(self.spec.tcp.slow_start_after_idle)}, ecn {int(self.spec.tcp.ecn)}, rto_min {self.spec.tcp.min_rto_ms:g} ms",
            f"  run a command:  thinwan lab exec server -- CMD   (or: ip netns exec {self.netns['server']} CMD)",
            f"  e.g. server:    thinwan lab exec server -- python3 -m http.server --bind {self.addr['server']} 8000",
            f"       client:    thinwan lab exec client -- curl http://{self.addr['server']}:8000/",
            f"  files:          {self.workdir}",
            f"  tear down:      thinwan lab down {self.id}",
        ]
        return "\n".join(lines)

    # -- internals -------------------------------------------------------------------

    def _make_side(self, side: str) -> None:
        ns, tun = self.netns[side], self.tun[side]
        other_net = CLIENT_NET if side == "server" else SERVER_NET
        netns.ip("netns", "add", ns)
        netns.ip("link", "set", "lo", "up", netns=ns)
        # No IPv6 inside: router solicitations and MLD reports would only add noise.
        for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
            netns.sysctl(ns, key, 1)
        netns.ip("tuntap", "add", "dev", tun, "mode", "tun", netns=ns)
        netns.ip("link", "set", tun, "mtu", str(self.spec.tcp.mtu), "txqueuelen", "10000", netns=ns)
        netns.ip("addr", "add", f"{self.addr[side]}/24", "dev", tun, netns=ns)
        netns.ip("link", "set", tun, "up", netns=ns)
        netns.ip("route", "replace", other_net, "dev", tun, *self.spec.tcp.route_options(), netns=ns)
        for key, value in self.spec.tcp.sysctls().items():
            try:
                ok = netns.sysctl(ns, key, value)
                note = f"{key}: not available in this kernel; left at its default"
            except LabError as e:
                if key != "net.ipv4.tcp_congestion_control":
                    raise
                ok = False  # still set per route (congctl)
                note = f"{key}={value}: not allowed as a namespace default here ({e}); set per route instead"
            if not ok and note not in self.notes:
                self.notes.append(note)

    def _wait_ready(self) -> None:
        assert self.emulator is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        out = self.workdir / "link.out"
        while time.monotonic() < deadline:
            if self.emulator.poll() is not None:
                err = (self.workdir / "link.err").read_text(errors="replace").strip()
                raise LabError(f"thinwan-link exited ({self.emulator.returncode}): {err}")
            if out.exists() and b'"ready":true' in out.read_bytes():
                return
            time.sleep(0.02)
        raise LabError(f"thinwan-link did not become ready within {READY_TIMEOUT_S:g} s")

    def _save_state(self, owner: int) -> None:
        netns.write_state(
            self.id,
            {
                "id": self.id,
                "owner_pid": owner,
                "created": time.time(),
                "pids": [p for p in (self.emulator_pid,) if p],
                "netns": self.netns,
                "tun": self.tun,
                "addr": self.addr,
                "workdir": str(self.workdir),
                "link": self.spec.link.to_json(),
                "notes": self.notes,
            },
        )


def current_lab(lab_id: str | None = None) -> dict[str, Any]:
    """State of the live lab ``lab_id``, or of the only live lab."""
    netns.require_root()
    live = [s for s in netns.list_labs() if s["alive"]]
    if lab_id:
        for s in live:
            if s["id"] == lab_id:
                return s
        raise LabError(f"no live lab {lab_id} (see: thinwan lab status)")
    if not live:
        raise LabError("no lab is up (start one with: thinwan lab up SCENARIO.toml)")
    if len(live) > 1:
        raise LabError(f"{len(live)} labs are up ({', '.join(s['id'] for s in live)}): name one with --id")
    return live[0]


def down(lab_id: str | None = None) -> list[str]:
    """Tear down a live lab (the only one, or ``lab_id``)."""
    st = current_lab(lab_id)
    pids = [p for p in st.get("pids", []) if netns.pid_alive(p)]
    netns.terminate(pids, grace=10.0)
    return netns.teardown(st["id"], st)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (so cleanup runs)."""
    old = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _wait(p: subprocess.Popen[Any], timeout: float) -> None:
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def _fmt_dir(d: Any) -> str:
    rate = "unshaped" if not d.rate_bps else f"{d.rate_bps / 1e6:g} Mbit/s"
    parts = [rate, f"{d.delay_ms:g} ms"]
    if d.jitter != "none":
        parts.append(f"jitter {d.jitter}")
    if d.loss:
        parts.append(f"loss {d.loss:g}")
    if d.ge:
        parts.append(f"GE p={d.ge[0]:g} r={d.ge[1]:g}")
    limits = [f"{d.queue_packets} pkts" if d.queue_packets else "", f"{d.queue_bytes} B" if d.queue_bytes else ""]
    disc = d.discipline
    if disc == "priority":
        disc += f" ({d.priority_classifier}" + (f" {d.classifier_gap_ms:g} ms)" if d.priority_classifier == "gap" else ")")
    parts.append(disc + " " + " / ".join(x for x in limits if x))
    return ", ".join(parts)

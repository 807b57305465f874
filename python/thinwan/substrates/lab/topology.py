"""Bring a lab up and down: two namespaces, two TUN devices, the emulator between them.

:class:`Lab` is a context manager; leaving it (normally, on an exception, on Ctrl-C or
on SIGTERM) tears everything down. ``Lab.up(detach=True)`` starts the emulator in its
own session so the lab outlives the command (``thinwan lab up``), and
:func:`down` removes it later.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..binaries import find_binary
from ..lifecycle import Managed
from . import netns
from .linkspec import RTO_MIN_SYSCTL, LabSpec, LinkSpec, TcpSettings
from .netns import LabError

__all__ = ["Namespaces", "Lab", "SERVER_ADDR", "CLIENT_ADDR", "down", "current_lab"]

SERVER_ADDR = "198.18.1.1"  # RFC 2544 benchmarking range, only inside our namespaces
CLIENT_ADDR = "198.18.2.1"
SERVER_NET = "198.18.1.0/24"
CLIENT_NET = "198.18.2.0/24"
READY_TIMEOUT_S = 10.0


class Namespaces(Managed):
    """What every lab shares: namespaces named after one id, emulators between them, and
    processes inside them — all removed by :meth:`down`, also on exceptions, Ctrl-C and
    SIGTERM when used as a context manager. Subclasses lay out the namespaces in ``up``.
    """

    def __init__(self, workdir: str | Path | None, notes: Sequence[str]) -> None:
        self.id = netns.new_id()
        self.workdir = Path(workdir) if workdir else netns.state_dir(self.id)
        self.notes: list[str] = list(notes)
        self.emulators: dict[str, subprocess.Popen[bytes]] = {}
        self._procs: list[subprocess.Popen[Any]] = []
        self.netns: dict[str, str] = {}

    @abstractmethod
    def up(self, detach: bool = False) -> None:
        """Create the namespaces, devices and emulators of this layout."""

    # -- lifecycle -------------------------------------------------------------------

    def stop(self) -> dict[str, Any]:
        """Stop every process and emulator; returns each emulator's final counters (None
        if it did not report). Namespaces stay until :meth:`down`."""
        for p in self._procs:
            if p.poll() is None:
                p.terminate()
        for p in self._procs:
            _wait(p, 3.0)
        for emulator in self.emulators.values():
            if emulator.poll() is None:
                emulator.send_signal(signal.SIGTERM)
                _wait(emulator, 10.0)
        return {name: _read_json(self.workdir / f"{name}-stats.json") for name in self.emulators}

    def down(self) -> Any:
        """:meth:`stop`, then remove namespaces and devices; returns :meth:`stop`'s counters."""
        stats = self.stop()
        netns.teardown(self.id, netns.read_state(self.id))
        return stats

    # -- use -------------------------------------------------------------------------

    def popen(self, side: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside ``side``'s namespace; stopped by :meth:`down`."""
        p = subprocess.Popen(["ip", "netns", "exec", self.netns[side], *argv], **kwargs)
        self._procs.append(p)
        return p

    def run(
        self, side: str, argv: Sequence[str], timeout: float = 60.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside ``side``'s namespace to completion."""
        done = subprocess.run(
            ["ip", "netns", "exec", self.netns[side], *argv], capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise LabError(f"{side}: {' '.join(argv)}: {done.stderr.strip() or done.returncode}")
        return done

    def emulator_alive(self) -> bool:
        return bool(self.emulators) and all(e.poll() is None for e in self.emulators.values())

    def processes_alive(self) -> bool:
        """Is every process started with :meth:`popen` still running?"""
        return all(p.poll() is None for p in self._procs)

    # -- building blocks -------------------------------------------------------------

    def _add_netns(
        self, ns: str, tcp: TcpSettings, tuns: Sequence[tuple[str, str]], routes: Sequence[tuple[str, str]]
    ) -> None:
        """Namespace ``ns`` with TUN devices ``(name, address/prefix)`` and routes ``(net,
        device)`` that carry the TCP route options; TCP sysctls applied, IPv6 off."""
        netns.ip("netns", "add", ns)
        netns.ip("link", "set", "lo", "up", netns=ns)
        # No IPv6 inside: router solicitations and MLD reports would only add noise.
        for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
            netns.sysctl(ns, key, 1)
        for tun, addr in tuns:
            netns.ip("tuntap", "add", "dev", tun, "mode", "tun", netns=ns)
            netns.ip("link", "set", tun, "mtu", str(tcp.mtu), "txqueuelen", "10000", netns=ns)
            netns.ip("addr", "add", addr, "dev", tun, netns=ns)
            netns.ip("link", "set", tun, "up", netns=ns)
        options = tcp.route_options(netns.kernel_has_sysctl(RTO_MIN_SYSCTL))
        for net, tun in routes:
            netns.ip("route", "replace", net, "dev", tun, *options, netns=ns)
        for key, value in tcp.sysctls().items():
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

    def _start_emulator(
        self,
        name: str,
        server: str,
        client: str,
        link: LinkSpec,
        events: bool,
        pcap: bool,
        detach: bool,
    ) -> subprocess.Popen[bytes]:
        """``thinwan-link`` between ``server`` and ``client`` (``NETNS:TUN``); its files
        are ``<name>.json``, ``<name>.out``/``.err``, ``<name>-stats.json``, and the event
        log ``<name>-events.bin`` (``events.bin`` for the one emulator of :class:`Lab`)."""
        config = self.workdir / f"{name}.json"
        config.write_text(json.dumps(link.to_json(), indent=2) + "\n")
        argv = [
            str(find_binary("thinwan-link")),
            "--server",
            server,
            "--client",
            client,
            "--config",
            str(config),
            "--stats",
            str(self.workdir / f"{name}-stats.json"),
        ]
        if events:
            argv += ["--events", str(self.events_file(name))]
        if pcap:
            argv += ["--pcap-dir", str(self.workdir / ("pcap" if name == "link" else f"{name}-pcap"))]
        out = open(self.workdir / f"{name}.out", "wb")  # noqa: SIM115 (owned by the child)
        err = open(self.workdir / f"{name}.err", "wb")  # noqa: SIM115
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=detach)
        out.close()
        err.close()
        self.emulators[name] = p
        return p

    def events_file(self, name: str) -> Path:
        return self.workdir / ("events.bin" if name == "link" else f"{name}-events.bin")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = dict(self.emulators)
        while waiting and time.monotonic() < deadline:
            for name, p in list(waiting.items()):
                if p.poll() is not None:
                    err = (self.workdir / f"{name}.err").read_text(errors="replace").strip()
                    raise LabError(f"thinwan-link ({name}) exited ({p.returncode}): {err}")
                out = self.workdir / f"{name}.out"
                if out.exists() and b'"ready":true' in out.read_bytes():
                    del waiting[name]
            time.sleep(0.02)
        if waiting:
            raise LabError(f"thinwan-link ({', '.join(waiting)}) did not become ready within {READY_TIMEOUT_S:g} s")

    def _save_state(self, owner: int, **extra: Any) -> None:
        netns.write_state(
            self.id,
            {
                "id": self.id,
                "owner_pid": owner,
                "created": time.time(),
                "pids": [p.pid for p in self.emulators.values()],
                "netns": self.netns,
                "workdir": str(self.workdir),
                "notes": self.notes,
                **extra,
            },
        )


class Lab(Namespaces):
    """One lab: ``<id>-srv`` and ``<id>-cli`` namespaces joined by ``thinwan-link``."""

    def __init__(
        self,
        spec: LabSpec,
        workdir: str | Path | None = None,
        events: bool = True,
        pcap: bool = False,
    ) -> None:
        super().__init__(workdir, spec.notes)
        self.spec = spec
        self.netns = {"server": f"{self.id}-srv", "client": f"{self.id}-cli"}
        self.tun = {"server": f"{self.id}-s", "client": f"{self.id}-c"}
        self.addr = {"server": SERVER_ADDR, "client": CLIENT_ADDR}
        self.events = events
        self.pcap = pcap
        self.emulator_pid: int | None = None

    def up(self, detach: bool = False) -> None:
        """Create the namespaces and TUNs, apply TCP settings, start the emulator.

        With ``detach`` the emulator owns the lab (its own session; the lab lives until
        ``down``); otherwise this process does.
        """
        netns.require_root()
        find_binary("thinwan-link")
        self.workdir.mkdir(parents=True, exist_ok=True)
        # State first, so a crash at any later point leaves something `clean` can find.
        self._save_state(owner=os.getpid())
        for side, other_net in (("server", CLIENT_NET), ("client", SERVER_NET)):
            self._add_netns(
                self.netns[side],
                self.spec.tcp,
                [(self.tun[side], f"{self.addr[side]}/24")],
                [(other_net, self.tun[side])],
            )
        emulator = self._start_emulator(
            "link",
            f"{self.netns['server']}:{self.tun['server']}",
            f"{self.netns['client']}:{self.tun['client']}",
            self.spec.link,
            self.events,
            self.pcap,
            detach,
        )
        self.emulator_pid = emulator.pid
        self._save_state(owner=emulator.pid if detach else os.getpid())
        self._wait_ready()

    def down(self) -> dict[str, Any] | None:
        """Stop every process and remove namespaces and devices; returns the emulator's
        final counters (None if it did not report)."""
        return super().down().get("link")

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

    def _save_state(self, owner: int, **extra: Any) -> None:
        super()._save_state(owner, tun=self.tun, addr=self.addr, link=self.spec.link.to_json())


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
        disc += f" ({d.priority_classifier}" + (
            f" {d.classifier_gap_ms:g} ms)" if d.priority_classifier == "gap" else ")"
        )
    parts.append(disc + " " + " / ".join(x for x in limits if x))
    return ", ".join(parts)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None

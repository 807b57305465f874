"""Low-level helpers: root check, running ``ip``, lab names, state files, leftovers.

Every object a lab creates carries its id, ``tw-`` + 6 hex digits: namespaces
``<id>-srv`` and ``<id>-cli`` (and ``<id>-mid`` in a chain), TUN devices ``<id>-s``,
``<id>-c`` … (inside them), and
a state directory ``/run/thinwan/lab/<id>/`` written *before* anything else exists, so
that :func:`clean` can always find and remove what a crashed run left behind. A lab is
alive while its owner process (recorded in ``state.json``) is.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STATE_ROOT = Path(os.environ.get("THINWAN_LAB_STATE", "/run/thinwan/lab"))
PREFIX = "tw-"
ID_RE = re.compile(r"^tw-[0-9a-f]{6}$")
NAMESPACE_SUFFIXES = ("srv", "mid", "cli")
NETNS_RE = re.compile(r"^(tw-[0-9a-f]{6})-(srv|mid|cli)$")


class LabError(Exception):
    """The lab cannot do what was asked (not root, a command failed, …)."""


def require_root() -> None:
    """Raise a clear :class:`LabError` unless we can create namespaces and TUNs."""
    if os.geteuid() != 0:
        raise LabError("the lab needs root (network namespaces, TUN devices, sysctls): run it with sudo")
    if not Path("/dev/net/tun").exists():
        raise LabError("/dev/net/tun is missing: this kernel or container has no TUN support")
    if shutil.which("ip") is None:
        raise LabError("the 'ip' command (iproute2) is missing: apt-get install iproute2")


def new_id() -> str:
    """A fresh lab id, ``tw-`` + 6 hex digits."""
    return PREFIX + secrets.token_hex(3)


def run(argv: Sequence[str], check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure raise :class:`LabError` with its stderr."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise LabError(f"{argv[0]}: command not found") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(argv)}: timed out after {timeout} s") from None
    if check and done.returncode != 0:
        raise LabError(f"{' '.join(argv)}: {done.stderr.strip() or f'exit status {done.returncode}'}")
    return done


def ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ip [-n NETNS] ARGS…``."""
    return run(["ip", *(["-n", netns] if netns else []), *args], check=check)


def sysctl(netns: str, key: str, value: Any) -> bool:
    """Set a sysctl inside ``netns`` (writes /proc/sys there); False if the key is absent."""
    path = "/proc/sys/" + key.replace(".", "/")
    done = run(["ip", "netns", "exec", netns, "sh", "-c", f"test -e {path} && echo '{value}' > {path}"], check=False)
    if done.returncode != 0:
        if "No such file" in done.stderr or done.stderr.strip() == "":
            return False
        raise LabError(f"{netns}: sysctl {key}={value}: {done.stderr.strip()}")
    return True


def kernel_has_sysctl(key: str) -> bool:
    """Does this kernel have sysctl ``key`` (looked up in the root namespace)?"""
    return Path("/proc/sys/" + key.replace(".", "/")).exists()


def read_sysctl(netns: str, key: str) -> str | None:
    """A sysctl's value inside ``netns``, or None if absent."""
    done = run(["ip", "netns", "exec", netns, "cat", "/proc/sys/" + key.replace(".", "/")], check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def list_netns() -> list[str]:
    """Names of all named network namespaces."""
    done = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def netns_pids(netns: str) -> list[int]:
    """PIDs of processes inside ``netns``."""
    done = run(["ip", "netns", "pids", netns], check=False)
    return [int(x) for x in done.stdout.split() if x.isdigit()]


def pid_alive(pid: int | None) -> bool:
    """Is there a (non-zombie) process ``pid``?"""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # Field 3 (after the parenthesised command) is the state; Z = zombie.
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def terminate(pids: Sequence[int], grace: float = 3.0) -> None:
    """SIGTERM the given processes, then SIGKILL those still alive after ``grace`` s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = [p for p in pids if pid_alive(p)]
        for p in live:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while live and time.monotonic() < deadline:
            time.sleep(0.02)
            live = [p for p in live if pid_alive(p)]
        if not live:
            return


# ---------------------------------------------------------------------------------------
# State


def state_dir(lab_id: str) -> Path:
    return STATE_ROOT / lab_id


def write_state(lab_id: str, state: dict[str, Any]) -> None:
    d = state_dir(lab_id)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, d / "state.json")


def read_state(lab_id: str) -> dict[str, Any] | None:
    try:
        return json.loads((state_dir(lab_id) / "state.json").read_text())
    except (OSError, ValueError):
        return None


def list_labs() -> list[dict[str, Any]]:
    """State of every lab with a state directory (alive or not), oldest first."""
    labs = []
    if STATE_ROOT.is_dir():
        for d in sorted(STATE_ROOT.iterdir()):
            if ID_RE.match(d.name):
                st = read_state(d.name) or {"id": d.name}
                st["alive"] = pid_alive(st.get("owner_pid"))
                labs.append(st)
    return sorted(labs, key=lambda s: s.get("created", 0))


def teardown(lab_id: str, state: dict[str, Any] | None = None) -> list[str]:
    """Remove everything of lab ``lab_id``: its processes, namespaces and state.

    Safe to call on a half-built or already removed lab. Returns what was removed.
    """
    if not ID_RE.match(lab_id):
        raise LabError(f"{lab_id!r} is not a lab id (tw-xxxxxx)")
    state = state or read_state(lab_id) or {}
    removed = []
    # The emulator runs in the root namespace: only kill it if it still is our binary.
    pids = [p for p in state.get("pids", []) if pid_alive(p) and "thinwan" in pid_cmdline(p)]
    namespaces = [f"{lab_id}-{suffix}" for suffix in NAMESPACE_SUFFIXES]
    existing = set(list_netns())
    for ns in namespaces:
        if ns in existing:
            pids += netns_pids(ns)
    pids = [p for p in dict.fromkeys(pids) if p != os.getpid()]
    if pids:
        terminate(pids)
        removed += [f"process {p}" for p in pids]
    for ns in namespaces:
        if ns in existing:
            # Deleting the namespace destroys the TUN devices inside it.
            ip("netns", "del", ns, check=False)
            removed.append(f"netns {ns}")
    d = state_dir(lab_id)
    if d.exists():
        shutil.rmtree(d, ignore_errors=True)
        removed.append(f"state {d}")
    return removed


def clean(force: bool = False) -> list[str]:
    """Remove the leftovers of dead labs (all labs with ``force``); returns what was removed.

    A lab is dead when its owner process is gone; a ``tw-xxxxxx-srv|mid|cli`` namespace
    without any state is a leftover too.
    """
    removed = []
    live = set()
    for st in list_labs():
        if st["alive"] and not force:
            live.add(st["id"])
            continue
        removed += teardown(st["id"], st)
    for ns in list_netns():
        m = NETNS_RE.match(ns)
        if m and m.group(1) not in live:
            removed += teardown(m.group(1))
    return removed

"""Processes inside the lab's namespaces, X displays and their authority files.

Every program of a desktop runs through ``ip netns exec`` in its own session (so Ctrl-C
reaches only the Python process, which then stops them in order: viewer before server, X
clients before X servers, so each X server removes its own lock file and socket). Each
one logs to a file in the desktop's work directory; errors quote the tail of that log.

X display numbers: ``/tmp/.X11-unix/X<n>`` and ``/tmp/.X<n>-lock`` live in the one
filesystem all namespaces share, while X's abstract sockets are per network namespace.
We never pass ``-displayfd`` (it makes the X server skip its lock file and start counting
at :0, so two servers in two namespaces both take :0 and clobber each other's socket).
We pick a number whose lock file and socket are absent, from :20 up, and let the X
server's own lock (created atomically) arbitrate a race with another lab: a server that
finds the display taken exits, and we try the next number.
"""

from __future__ import annotations

import os
import secrets
import signal
import struct
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DesktopError",
    "Proc",
    "XDisplay",
    "start_proc",
    "start_xserver",
    "write_xauthority",
    "tail",
    "FIRST_DISPLAY",
]

FIRST_DISPLAY = 20  # leave :0–:19 to people's own X servers
LAST_DISPLAY = 899
X_SOCKET_DIR = Path("/tmp/.X11-unix")


class DesktopError(Exception):
    """A desktop could not be brought up, driven or measured; the message says what failed."""


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text[-lines:]) or "    (empty log)"


@dataclass
class Proc:
    """A program we started in a namespace: its Popen, a name for messages, its log."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    argv: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def describe_exit(self) -> str:
        return f"{self.name} exited with status {self.popen.returncode}; its log ({self.log}) ends:\n{tail(self.log)}"

    def stop(self, sig: int = signal.SIGTERM, grace: float = 5.0) -> None:
        """Signal, wait ``grace`` seconds, then SIGKILL (only this process id)."""
        if self.popen.poll() is not None:
            return
        try:
            os.kill(self.popen.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.kill(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait()


def start_proc(
    netns: str,
    name: str,
    argv: Sequence[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Proc:
    """Start ``argv`` in ``netns`` with ``env`` added to a minimal environment."""
    # A small, explicit environment: the user's DISPLAY, XAUTHORITY or a venv on PATH must
    # not leak into the desktop's programs.
    base = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
    }
    base.update(env or {})
    full = ["ip", "netns", "exec", netns, "env", "-i", *(f"{k}={v}" for k, v in base.items()), *argv]
    out = open(log, "ab")  # noqa: SIM115 (handed to the child)
    try:
        p = subprocess.Popen(
            full, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, **kwargs
        )
    except FileNotFoundError as e:
        raise DesktopError(f"{name}: cannot start {argv[0]}: {e}") from None
    finally:
        out.close()
    return Proc(name, p, log, list(argv))


def write_xauthority(path: Path, cookie: bytes | None = None) -> bytes:
    """An Xauthority file with one MIT-MAGIC-COOKIE-1 for any host (FamilyWild) and any
    display (an empty display number matches all, in Xau's lookup): the same file serves
    local clients and ones connecting over TCP from the other namespace, and each X
    server given it with ``-auth`` accepts that cookie. Returns the cookie."""
    cookie = cookie or secrets.token_bytes(16)

    def field_(b: bytes) -> bytes:
        return struct.pack(">H", len(b)) + b

    data = struct.pack(">H", 0xFFFF) + field_(b"") + field_(b"") + field_(b"MIT-MAGIC-COOKIE-1") + field_(cookie)
    path.write_bytes(data)
    os.chmod(path, 0o644)  # read by the X servers and, for xrdp, by the test user's session
    return cookie


@dataclass
class XDisplay:
    """An X server we started: its display number and process."""

    number: int
    proc: Proc

    @property
    def name(self) -> str:
        return f":{self.number}"

    def stop(self) -> None:
        self.proc.stop(grace=5.0)
        remove_stale_display_files(self.number, self.proc.pid)


def display_free(n: int) -> bool:
    return not Path(f"/tmp/.X{n}-lock").exists() and not (X_SOCKET_DIR / f"X{n}").exists()


def remove_stale_display_files(n: int, pid: int) -> None:
    """After our X server ``pid`` is gone: remove its lock file and socket if it could not
    (killed). Only files that name our pid (the lock) or no live server are touched."""
    lock = Path(f"/tmp/.X{n}-lock")
    try:
        owner = int(lock.read_text().strip())
    except (OSError, ValueError):
        return
    if owner != pid or _pid_alive(pid):
        return
    lock.unlink(missing_ok=True)
    (X_SOCKET_DIR / f"X{n}").unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive: our own children are reaped by Popen.wait, others are not ours.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def start_xserver(
    netns: str,
    name: str,
    argv_for: Any,
    logdir: Path,
    timeout: float = 15.0,
    env: Mapping[str, str] | None = None,
) -> XDisplay:
    """Start an X server on the first free display from :20; ``argv_for(n)`` gives its
    command line for display ``n``. Ready when its lock file names its pid and its socket
    exists (a client connecting from then on is served)."""
    n = FIRST_DISPLAY
    attempts = 0
    while n <= LAST_DISPLAY:
        if not display_free(n):
            n += 1
            continue
        log = logdir / f"{name}.log"
        proc = start_proc(netns, name, argv_for(n), log, env=env)
        deadline = time.monotonic() + timeout
        lock = Path(f"/tmp/.X{n}-lock")
        while time.monotonic() < deadline:
            if not proc.alive():
                break
            try:
                owner = int(lock.read_text().strip())
            except (OSError, ValueError):
                owner = -1
            if owner == proc.pid and (X_SOCKET_DIR / f"X{n}").exists():
                return XDisplay(n, proc)
            time.sleep(0.05)
        if proc.alive():
            proc.stop()
            raise DesktopError(f"{name} (display :{n}) did not come up within {timeout:g} s; log:\n{tail(log)}")
        text = log.read_text(errors="replace")
        attempts += 1
        taken = "already active" in text or "Cannot establish any listening sockets" in text
        if taken and attempts < 20:
            n += 1  # another lab took this display between our check and the server's lock
            continue
        raise DesktopError(proc.describe_exit())
    raise DesktopError(f"{name}: no free X display between :{FIRST_DISPLAY} and :{LAST_DISPLAY}")

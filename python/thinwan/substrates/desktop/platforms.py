"""How each remote-display platform is brought up in a lab (docs/desktop.md has the exact
command lines and why each option is there).

Every platform ends in the same place: the benchmark application's 320×240 window on the
remote desktop at ``settings.app_x, app_y``, and a client-side X server (Xvfb in the
client namespace) where a user's input is injected and screenshots are taken. For the
three remote-desktop platforms a fullscreen viewer maps the remote desktop 1:1 onto the
client's screen; for ``x11`` the application draws on the client's X server itself.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .procs import DesktopError, start_proc, start_xserver

if TYPE_CHECKING:
    from .desktop import Desktop

__all__ = ["PLATFORMS", "Platform", "platform_status", "package_version"]

VNC_PORT = 5900
RDP_PORT = 3389


@dataclass(frozen=True)
class Platform:
    name: str
    packages: tuple[str, ...]  # Debian packages whose versions are the platform's version
    binaries: tuple[str, ...]  # programs that must be on PATH
    protocol: str
    up: Callable[[Desktop], None]
    viewer_class: str | None  # X class of the client window that takes the input (None: the app)


def package_version(pkg: str) -> str | None:
    """The installed version of a Debian package, or None."""
    if shutil.which("dpkg-query") is None:
        return None
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Status}\t${Version}", pkg], capture_output=True, text=True, check=False
    )
    if done.returncode != 0 or "install ok installed" not in done.stdout:
        return None
    return done.stdout.split("\t", 1)[1].strip()


COMMON_PACKAGES = ("xvfb", "xdotool", "imagemagick", "tcpdump", "tshark", "python3-tk", "python3-pil.imagetk")
COMMON_BINARIES = ("Xvfb", "xdotool", "import", "tcpdump", "tshark", "/usr/bin/python3")


def platform_status(name: str) -> str | None:
    """None if ``name`` can be brought up here, else why not (a missing package or
    program). A platform can still fail when it starts; :class:`Desktop` then raises
    :class:`PlatformUnavailable` with the failing program's log."""
    if name not in PLATFORMS:
        return f"unknown platform {name!r} (known: {', '.join(PLATFORMS)})"
    p = PLATFORMS[name]
    missing = [pkg for pkg in (*p.packages, *COMMON_PACKAGES) if package_version(pkg) is None]
    if missing:
        return f"package(s) not installed: {', '.join(missing)} (run scripts/setup-desktop.sh as root)"
    absent = [b for b in (*p.binaries, *COMMON_BINARIES) if shutil.which(b) is None]
    if absent:
        return f"program(s) not found: {', '.join(absent)}"
    return None


# -- common pieces ---------------------------------------------------------------------


def _client_xvfb(d: Desktop, listen_tcp: bool = False) -> None:
    """The client's screen: Xvfb in the client namespace (the viewer's display, or for
    ``x11`` the display the application connects to over the WAN)."""
    s = d.settings

    def argv(n: int) -> list[str]:
        a = [
            "Xvfb",
            f":{n}",
            "-screen",
            "0",
            f"{s.width}x{s.height}x{s.depth}",
            "-auth",
            str(d.xauthority),
            "-noreset",
            "-nolisten",
            "tcp",
        ]
        if listen_tcp:
            # The X protocol crosses the WAN: listen on TCP (port 6000 + n) too.
            a[-2:] = ["-listen", "tcp"]
        return a

    d.client_x = start_xserver(d.lab.netns["client"], "client-Xvfb", argv, d.dir)
    d.procs.append(d.client_x.proc)


def _vncviewer(d: Desktop) -> None:
    # FullScreen at the client's size: the remote desktop lands 1:1 on the client's screen,
    # so a click at (x, y) on the client is a click at (x, y) on the remote desktop.
    # RemoteResize off: the viewer must not ask the server to change the desktop's size.
    # Clipboard off: no selection traffic between operations.
    argv = [
        "vncviewer",
        f"{d.lab.addr['server']}::{VNC_PORT}",
        "-FullScreen",
        "-RemoteResize=0",
        "-SecurityTypes",
        "None",
        "-Shared",
        "-AcceptClipboard=0",
        "-SendClipboard=0",
        "-SendPrimary=0",
    ]
    d.options["viewer"] = argv
    d.viewer = start_proc(d.lab.netns["client"], "vncviewer", argv, d.dir / "vncviewer.log", env=d.client_env())
    d.procs.append(d.viewer)


def _wait_port(d: Desktop, side: str, port: int, who: str, timeout: float = 15.0) -> None:
    """Wait until something listens on ``port`` in ``side``'s namespace."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["ip", "netns", "exec", d.lab.netns[side], "ss", "-Hltn", f"sport = :{port}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.stdout.strip():
            return
        for p in d.procs:
            if not p.alive():
                raise DesktopError(p.describe_exit())
        time.sleep(0.05)
    raise DesktopError(f"{who}: nothing listens on port {port} in the {side} namespace after {timeout:g} s")


# -- the platforms ---------------------------------------------------------------------


def _up_tigervnc(d: Desktop) -> None:
    s = d.settings
    srv = d.lab.addr["server"]

    def argv(n: int) -> list[str]:
        # The desktop is Xvnc itself (an X server that is also a VNC server). No password
        # (SecurityTypes None): the port exists only inside the lab's server namespace.
        a = [
            "Xvnc",
            f":{n}",
            "-geometry",
            f"{s.width}x{s.height}",
            "-depth",
            str(s.depth),
            "-auth",
            str(d.xauthority),
            "-rfbport",
            str(VNC_PORT),
            "-interface",
            srv,
            "-SecurityTypes",
            "None",
            "-AlwaysShared",
            "-nolisten",
            "tcp",
            "-desktop",
            "thinwan",
        ]
        d.options["server"] = a
        return a

    d.server_x = start_xserver(d.lab.netns["server"], "Xvnc", argv, d.dir)
    d.procs.append(d.server_x.proc)
    _wait_port(d, "server", VNC_PORT, "Xvnc")
    d.start_app("server", d.server_x.name)
    _client_xvfb(d)
    _vncviewer(d)
    d.server_port = VNC_PORT


def _up_x11vnc(d: Desktop) -> None:
    s = d.settings
    srv = d.lab.addr["server"]

    def xvfb(n: int) -> list[str]:
        return [
            "Xvfb",
            f":{n}",
            "-screen",
            "0",
            f"{s.width}x{s.height}x{s.depth}",
            "-auth",
            str(d.xauthority),
            "-noreset",
            "-nolisten",
            "tcp",
        ]

    d.server_x = start_xserver(d.lab.netns["server"], "server-Xvfb", xvfb, d.dir)
    d.procs.append(d.server_x.proc)
    d.start_app("server", d.server_x.name)
    # x11vnc with its defaults (DAMAGE-driven polling of the screen), listening only on the
    # lab's server address; -forever/-shared so the viewer may reconnect; -norc so no
    # ~/.x11vncrc changes it; -nopw: no password (the port exists only in the lab).
    argv = [
        "x11vnc",
        "-display",
        d.server_x.name,
        "-auth",
        str(d.xauthority),
        "-rfbport",
        str(VNC_PORT),
        "-listen",
        srv,
        "-noipv6",
        "-forever",
        "-shared",
        "-norc",
        "-nopw",
    ]
    d.options["server"] = argv
    p = start_proc(d.lab.netns["server"], "x11vnc", argv, d.dir / "x11vnc.log", env={"XAUTHORITY": str(d.xauthority)})
    d.procs.append(p)
    _wait_port(d, "server", VNC_PORT, "x11vnc")
    _client_xvfb(d)
    _vncviewer(d)
    d.server_port = VNC_PORT


def _up_x11(d: Desktop) -> None:
    # Plain remote X: the X server is the client's; the application runs on the server side
    # and connects to it across the WAN (TCP 6000 + display), authenticated by the cookie.
    _client_xvfb(d, listen_tcp=True)
    assert d.client_x is not None
    n = d.client_x.number
    _wait_port(d, "client", 6000 + n, "client Xvfb")
    d.options["server"] = [f"DISPLAY={d.lab.addr['client']}:{n}"]
    d.start_app("server", f"{d.lab.addr['client']}:{n}")
    d.server_port = 6000 + n


PLATFORMS: dict[str, Platform] = {
    "tigervnc": Platform(
        "tigervnc",
        ("tigervnc-standalone-server", "tigervnc-viewer"),
        ("Xvnc", "vncviewer"),
        "RFB (VNC)",
        _up_tigervnc,
        "Vncviewer",
    ),
    "x11vnc": Platform(
        "x11vnc",
        ("x11vnc", "tigervnc-viewer"),
        ("x11vnc", "vncviewer"),
        "RFB (VNC)",
        _up_x11vnc,
        "Vncviewer",
    ),
    "x11": Platform("x11", ("xvfb",), ("Xvfb",), "X11", _up_x11, None),
}

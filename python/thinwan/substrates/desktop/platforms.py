"""How each remote-display platform is brought up in a lab (docs/desktop.md has the exact
command lines and why each option is there).

Every platform ends in the same place: the benchmark application's 320×240 window on the
remote desktop at ``settings.app_x, app_y``, and a client-side X server (Xvfb in the
client namespace) where a user's input is injected and screenshots are taken. For the
three remote-desktop platforms a fullscreen viewer maps the remote desktop 1:1 onto the
client's screen; for ``x11`` the application draws on the client's X server itself.
"""

from __future__ import annotations

import pwd
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..lab.topology import Lab
from .images import BenchImages
from .procs import DesktopError, Proc, XDisplay, start_proc, start_xserver
from .settings import DesktopSettings

__all__ = ["PLATFORMS", "Platform", "platform_status", "platform_version", "package_version"]

VNC_PORT = 5900
RDP_PORT = 3389


class Desktop(Protocol):
    """What a platform's ``up`` reads and sets on the :class:`~.session.Desktop` it brings
    up. A protocol, so the session can consult this table without the table importing
    the session."""

    lab: Lab
    settings: DesktopSettings
    dir: Path
    procs: list[Proc]
    server_x: XDisplay | None
    client_x: XDisplay | None
    viewer: Proc | None
    server_port: int
    options: dict[str, Any]
    xauthority: Path
    images: BenchImages | None
    app_log: Path
    sweep_server_namespace: bool
    workload: Any  # workloads.Workload: what runs on the remote desktop

    def cleanup(self, hook: Any) -> None: ...
    def client_env(self) -> dict[str, str]: ...
    def start_app(self, side: str, display: str) -> Proc: ...
    def wait_app_ready(self) -> None: ...


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


def platform_version(name: str) -> str:
    """The platform's packages and their versions, e.g. ``tigervnc-viewer 1.12.0+dfsg-8, …``."""
    return ", ".join(f"{pkg} {package_version(pkg) or 'not installed'}" for pkg in PLATFORMS[name].packages)


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
    # MenuKey empty: no menu key, so no "Press F8 to open the context menu" notice, which
    # the viewer fades in over the top middle of the screen (over the application's
    # area), shows for 3 s and fades out over 0.5 s at 60 Hz — a changing picture in
    # the first operation's window that no network traffic caused (docs/desktop.md
    # "Self-checks"). We never use the menu.
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
        "-MenuKey=",
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
    # -nosel: no selection exchange (the viewer's clipboard is off too), and -nocursor: no
    # cursor shapes. Without them x11vnc sent, after an operation's update was on the
    # client's screen, an empty ServerCutText (8 bytes, 175 ms later) or a 24×24
    # RichCursor shape (2.4 KB, 22 ms later; it switches to XFIXES cursors on its own
    # when it decides a window manager runs) — traffic that is not the update and that
    # the capture analyser, which decodes nothing, counted as its end (docs/desktop.md
    # "Self-checks"). -noxfixes: x11vnc needs no XFIXES with the two above (the results
    # were measured with it). It does not stop the one late pair that remains — an empty
    # cursor and an extended-clipboard message ~14 s after connecting, when TigerVNC's
    # viewer (AutoSelect) sends SetEncodings again and libvncserver re-enables cursor
    # updates; the check catches it (docs/desktop.md "Results").
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
        "-nosel",
        "-nocursor",
        "-noxfixes",
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


XRDP_USER = "thinwan-desk"  # created (password locked) by scripts/setup-desktop.sh


def _ini_set(text: str, section: str, values: dict[str, str]) -> str:
    """``text`` (an xrdp .ini) with ``values`` set in ``[section]`` (replaced or added)."""
    out, current, done = [], None, set()
    lines = text.splitlines()
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            if current == section:
                out += [f"{k}={v}" for k, v in values.items() if k not in done]
                done |= set(values)
            current = stripped[1:-1]
        elif current == section and "=" in stripped and not stripped.startswith((";", "#")):
            key = stripped.split("=", 1)[0].strip()
            if key in values:
                out.append(f"{key}={values[key]}")
                done.add(key)
                continue
        out.append(line)
    if current == section:
        out += [f"{k}={v}" for k, v in values.items() if k not in done]
    return "\n".join(out) + "\n"


def _closed_to(user: pwd.struct_passwd, path: Path) -> Path | None:
    """The first directory from ``/`` down to ``path`` that ``user`` may not enter, by its
    mode bits (no ACLs here), or None."""
    for p in [*reversed(path.parents), path]:
        st = p.stat()
        if st.st_uid == user.pw_uid:
            ok = st.st_mode & 0o100
        elif st.st_gid == user.pw_gid:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            return p
    return None


def _up_xrdp(d: Desktop) -> None:
    import os
    import secrets as _secrets
    from pathlib import Path

    s = d.settings
    srv = d.lab.addr["server"]
    try:
        user = pwd.getpwnam(XRDP_USER)
    except KeyError:
        raise DesktopError(f"xrdp needs the test user {XRDP_USER} (run scripts/setup-desktop.sh as root)") from None
    # sesman runs the session as the test user, who reads it from our directory: a root-only
    # directory above it (/root, pytest's /tmp/pytest-of-root) makes the session exit at
    # once and the client report only that the user logged off.
    closed = _closed_to(user, d.dir)
    if closed is not None:
        raise DesktopError(
            f"its session runs as the test user {XRDP_USER}, who cannot enter {closed} (mode "
            f"{closed.stat().st_mode & 0o777:04o}) above the desktop's directory {d.dir}: give --out a "
            "directory that every user may enter (e.g. under /srv or /tmp)"
        )
    # The session: sesman starts this script as the test user on xorgxrdp's Xorg; the
    # benchmark application *is* the session (Debian's default session exits at once
    # here, without a desktop environment), so the session lasts as long as it runs.
    session_dir = d.dir / "session"
    session_dir.mkdir()
    os.chown(session_dir, user.pw_uid, user.pw_gid)
    d.app_log = session_dir / "app-events.log"
    script = d.dir / "session.sh"
    script.write_text(
        "#!/bin/sh\n# thinwan: the xrdp session is the benchmark application\n"
        f"exec {shlex.join(d.workload.argv(d))} >{session_dir / 'app.log'} 2>&1\n"
    )
    script.chmod(0o755)
    # Our own copies of the configuration: listen on the lab's server address only, log to
    # our directory (no syslog), log the client straight into an Xorg session (autorun),
    # and start our session script instead of the user's or Debian's.
    xrdp_ini = _ini_set(
        Path("/etc/xrdp/xrdp.ini").read_text(),
        "Globals",
        {"port": f"tcp://{srv}:{RDP_PORT}", "autorun": "Xorg", "max_bpp": "32"},
    )
    xrdp_ini = _ini_set(xrdp_ini, "Logging", {"LogFile": str(d.dir / "xrdp-core.log"), "EnableSyslog": "false"})
    (d.dir / "xrdp.ini").write_text(xrdp_ini)
    sesman_ini = _ini_set(
        Path("/etc/xrdp/sesman.ini").read_text(),
        "Globals",
        {"EnableUserWindowManager": "false", "DefaultWindowManager": str(script)},
    )
    sesman_ini = _ini_set(sesman_ini, "Security", {"AllowRootLogin": "false"})
    sesman_ini = _ini_set(sesman_ini, "Sessions", {"X11DisplayOffset": "200"})
    sesman_ini = _ini_set(
        sesman_ini, "Logging", {"LogFile": str(d.dir / "xrdp-sesman-core.log"), "EnableSyslog": "false"}
    )
    sesman_ini = _ini_set(sesman_ini, "ChansrvLogging", {"EnableSyslog": "false"})
    (d.dir / "sesman.ini").write_text(sesman_ini)
    # xrdp, sesman and xorgxrdp meet in /run/xrdp (pid files, sockdir/xrdp_display_N),
    # a path compiled in. `ip netns exec` already runs its command in a private mount
    # namespace, so a tmpfs mounted there gives this desktop its own /run/xrdp: two labs
    # can each run xrdp, and nothing is left in the real /run/xrdp. The mount point
    # itself is the package's (systemd-tmpfiles makes it at boot): on a machine without
    # systemd it is missing after the install, so it is made here, empty, as tmpfiles would.
    wrapper = d.dir / "xrdp-run.sh"
    wrapper.write_text(
        "#!/bin/sh\nset -e\n"
        "mkdir -p /run/xrdp\n"
        "mount -t tmpfs -o mode=0755 thinwan-xrdp /run/xrdp\n"
        "mkdir -m 3777 /run/xrdp/sockdir\n"
        f"xrdp-sesman -n -c {d.dir / 'sesman.ini'} &\nsesman=$!\n"
        f"xrdp -n -c {d.dir / 'xrdp.ini'} &\nxrdp=$!\n"
        "trap 'kill -TERM $xrdp $sesman 2>/dev/null; wait' TERM INT\n"
        "wait\n"
    )
    d.options["server"] = ["xrdp -n", "xrdp-sesman -n", f"session: {script}"]
    p = start_proc(d.lab.netns["server"], "xrdp", ["sh", str(wrapper)], d.dir / "xrdp.log")
    d.procs.append(p)
    d.sweep_server_namespace = True  # sessions are sesman's children: swept at tear-down
    _wait_port(d, "server", RDP_PORT, "xrdp")
    _wait_port(d, "server", 3350, "xrdp-sesman")
    # The session writes into the test user's home (.Xauthority, Xorg's log, chansrv's
    # thinclient_drives, .local): whatever was not there before goes at tear-down.
    home = Path(user.pw_dir)
    before = set(os.listdir(home)) if home.is_dir() else set()

    def clean_home() -> None:
        import shutil

        for name in set(os.listdir(home)) - before if home.is_dir() else ():
            path = home / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    d.cleanup(clean_home)
    # A fresh random password for this login only; locked again at tear-down.
    password = _secrets.token_urlsafe(18)
    subprocess.run(["chpasswd"], input=f"{XRDP_USER}:{password}\n", text=True, check=True)
    d.cleanup(lambda: subprocess.run(["passwd", "-l", XRDP_USER], capture_output=True, check=False))
    _client_xvfb(d)
    # Fullscreen at the client's size; no certificate check (a self-signed one in a lab);
    # no clipboard, sound or drive channels, so only the display crosses between operations.
    argv = [
        "xfreerdp",
        f"/v:{srv}:{RDP_PORT}",
        f"/u:{XRDP_USER}",
        f"/p:{password}",
        "/cert:ignore",
        "/f",
        f"/size:{s.width}x{s.height}",
        f"/bpp:{32 if s.depth == 24 else s.depth}",
        "-clipboard",
        "/audio-mode:2",
        "-grab-keyboard",
        "/kbd:0x409",
    ]
    d.options["viewer"] = [a if not a.startswith("/p:") else "/p:***" for a in argv]
    d.viewer = start_proc(d.lab.netns["client"], "xfreerdp", argv, d.dir / "xfreerdp.log", env=d.client_env())
    d.procs.append(d.viewer)
    d.wait_app_ready()
    d.server_port = RDP_PORT


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
    "xrdp": Platform(
        "xrdp",
        ("xrdp", "xorgxrdp", "freerdp2-x11"),
        ("xrdp", "xrdp-sesman", "xfreerdp", "chpasswd"),
        "RDP",
        _up_xrdp,
        None,
    ),
}

"""What runs on the remote desktop: the application a benchmark drives (one process, which
on xrdp *is* the session, so every platform starts it the same way).

- :class:`LatencyApp` — our Tk micro-benchmark (``app.py``: letter, scroll, fill, red
  bitmap, image);
- :class:`WebBrowser` — Chromium in app mode (no browser chrome, 1024×768) on the
  generated pages (``webpages``), served from the server side by ``webserve.py``;
- :class:`VideoPlayer` — mpv on the generated clip (``videoclip``), idle until the driver
  loads a play over mpv's IPC socket (a local Unix socket on the server side: loading is
  set-up, not a user's input), started by a click at the client.

A workload says where it sits on the screen (:meth:`Workload.area`: the pointer goes to
its middle, its pixels tell that the desktop is up) and how to tell that it is ready.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import socket
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np

from . import images as _images
from . import videoclip, webpages
from .procs import DesktopError
from .settings import DesktopSettings

# The desktop a workload runs on (session.Desktop, which imports this module: named by
# this alias, not imported, so the two do not import each other).
Desktop = Any

__all__ = ["Workload", "LatencyApp", "WebBrowser", "VideoPlayer", "SYSTEM_PYTHON"]

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, with python3-tk and python3-pil
_HERE = Path(__file__).parent
WEB_PORT = 8080  # on 127.0.0.1 of the server namespace: the browser's pages never cross the WAN
# How long one mpv IPC command may wait for its answer. mpv answers from its core, which
# waits for its video output, and `--vo=x11` blocks while the X connection is full:
# plain X behind a 16-KB window or over 1 % loss moves a 350-KB frame in seconds, and
# 5 s was too short there (the cell failed with a silent socket).
IPC_TIMEOUT_S = 30.0


class Workload(ABC):
    """What every workload provides (``prepare``, ``argv`` and ``area`` have no default)."""

    name = ""

    @abstractmethod
    def prepare(self, d: Desktop) -> None:
        """Write the files the application needs into ``d.dir`` (readable by all: xrdp's
        session runs as its test user)."""

    @abstractmethod
    def argv(self, d: Desktop) -> list[str]:
        """The application's command line; it logs to ``d.app_log``, and may write in
        ``d.app_log.parent`` (the one directory the session's user owns on xrdp)."""

    def wait_ready(self, d: Desktop) -> None:
        """Return once the application shows its first picture; raise DesktopError if not."""
        d.wait_app_log("ready", "the application did not map its window")

    @abstractmethod
    def area(self, s: DesktopSettings) -> tuple[int, int, int, int]:
        """Where the application sits on the screen: x, y, w, h."""

    def watched_area(self, s: DesktopSettings) -> tuple[int, int, int, int]:
        """The area the client's screen watcher pictures after each change (the client's
        own timing of updates and its count of video frames)."""
        return self.area(s)

    def watched_marks(self, s: DesktopSettings) -> tuple[int, int, int, int] | None:
        """Where the watched area shows frame marks for the screen watcher to read (x, y
        of the strip, block size, bits; videoclip.py), or None."""
        return None

    def looks_up(self, pixels: np.ndarray) -> bool:
        """Does ``area``'s picture on the client's screen (H×W×3) show the application?"""
        return bool((pixels.min(axis=2) > 230).mean() > 0.9)  # mostly white

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.name}


class LatencyApp(Workload):
    name = "latency"

    def prepare(self, d: Desktop) -> None:
        shutil.copy(_HERE / "app.py", d.dir / "app.py")
        d.images = _images.write_images(d.dir)

    def argv(self, d: Desktop) -> list[str]:
        assert d.images is not None
        s = d.settings
        return [
            SYSTEM_PYTHON, str(d.dir / "app.py"), "--red", str(d.images.red), "--photo", str(d.images.photo),
            "--log", str(d.app_log), "--x", str(s.app_x), "--y", str(s.app_y),
        ]  # fmt: skip

    def area(self, s: DesktopSettings) -> tuple[int, int, int, int]:
        from .settings import APP_H, APP_W

        return (s.app_x, s.app_y, APP_W, APP_H)

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.name}


class WebBrowser(Workload):
    """Chromium on the generated pages; ``d.app_log`` is the web server's request log
    (``ready`` once it listens, then ``<t> <status> <path>`` per request)."""

    name = "web"

    def __init__(self, pages: int = webpages.N_PAGES, seed: int = 2006, auto_passes: int = 0, first: int = 1) -> None:
        self.pages = pages
        self.seed = seed
        self.first = first
        # > 0: open the pages as start.html#auto-K, so one click runs K passes with no
        # pauses (webpages.py), for the check that slow motion does not change the work.
        self.auto_passes = auto_passes
        self.site: webpages.Site | None = None

    def prepare(self, d: Desktop) -> None:
        self.site = webpages.write_site(d.dir / "site", self.pages, self.seed, self.first)
        shutil.copy(_HERE / "webserve.py", d.dir / "webserve.py")
        for p in [d.dir / "site", *(d.dir / "site").rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)

    def argv(self, d: Desktop) -> list[str]:
        s = d.settings
        own = d.app_log.parent  # writable by the application's user
        serve = [SYSTEM_PYTHON, str(d.dir / "webserve.py"), str(d.dir / "site"), str(WEB_PORT), str(d.app_log)]
        chromium = [
            "chromium",
            # The lab is ours and root cannot use Chromium's sandbox; --test-type hides the
            # warning bar that --no-sandbox would otherwise draw over every page.
            "--no-sandbox", "--test-type", "--disable-gpu", "--force-device-scale-factor=1",
            "--no-first-run", "--no-default-browser-check", "--noerrdialogs", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-features=Translate,MediaRouter", "--password-store=basic",
            f"--user-data-dir={own / 'chromium'}", f"--disk-cache-dir={own / 'chromium-cache'}",
            "--window-position=0,0", f"--window-size={s.width},{s.height}",
            f"--app=http://127.0.0.1:{WEB_PORT}/{webpages.START_PAGE}"
            + (f"#auto-{self.auto_passes}" if self.auto_passes else ""),
        ]  # fmt: skip
        # One process: the server in the background, the browser in the foreground (the
        # session lasts as long as the browser).
        return ["/bin/sh", "-c", f"{shlex.join(serve)} & exec {shlex.join(chromium)} >{own / 'chromium.log'} 2>&1"]

    def wait_ready(self, d: Desktop) -> None:
        d.wait_app_log(f"/{webpages.START_PAGE}", "the browser did not load its start page")

    def area(self, s: DesktopSettings) -> tuple[int, int, int, int]:
        return (0, 0, s.width, s.height)

    def watched_area(self, s: DesktopSettings) -> tuple[int, int, int, int]:
        # Not the whole screen: a 3-MB grab after every piece of every page would cost the
        # client more than it tells; the web benchmark times pages from the capture.
        from .settings import APP_H, APP_W

        return (s.app_x, s.app_y, APP_W, APP_H)

    def requests(self, d: Desktop) -> list[tuple[float, str]]:
        """(time, path) of every fetch the web server answered (not the pages' beacons)."""
        return [(t, p) for t, p in self._log(d) if not webpages.is_beacon(p)]

    def loads(self, d: Desktop) -> list[tuple[float, str]]:
        """(time, page) of every page the browser reported loaded."""
        return self._reports(d, webpages.LOADED_PREFIX)

    def wait_clicked(self, d: Desktop, after: float, timeout_s: float) -> float | None:
        """When a page reported a click after ``after`` (None: not within ``timeout_s``)."""
        return self._wait_report(d, webpages.CLICKED_PREFIX, None, after, timeout_s)

    def wait_loaded(self, d: Desktop, page: str, after: float, timeout_s: float) -> float | None:
        """When the browser reported ``page`` loaded after ``after`` (None: not within
        ``timeout_s``)."""
        return self._wait_report(d, webpages.LOADED_PREFIX, page, after, timeout_s)

    def _reports(self, d: Desktop, prefix: str) -> list[tuple[float, str]]:
        n = len(prefix)
        return [(t, p[n:]) for t, p in self._log(d) if p.startswith(prefix)]

    def _wait_report(self, d: Desktop, prefix: str, page: str | None, after: float, timeout_s: float) -> float | None:
        deadline = time.monotonic() + timeout_s
        while True:
            for t, p in self._reports(d, prefix):
                if (page is None or p == page) and t >= after:
                    return t
            if time.monotonic() > deadline:
                return None
            d.check_alive()
            time.sleep(0.02)

    @staticmethod
    def _log(d: Desktop) -> list[tuple[float, str]]:
        out = []
        for line in d.app_events().splitlines():
            f = line.split()
            if len(f) == 3:
                out.append((float(f[0]), f[2]))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.name,
            "auto_passes": self.auto_passes,
            "site": self.site.to_json() if self.site else None,
        }


class VideoPlayer(Workload):
    """mpv at the application's position; :meth:`load` puts a play on screen, paused."""

    name = "video"

    def __init__(
        self,
        frames: int = videoclip.CLIP_FRAMES,
        fps: int = videoclip.CLIP_FPS,
        size: tuple[int, int] = videoclip.CLIP_SIZE,
    ) -> None:
        self.frames, self.fps, self.size = frames, fps, size
        self.clip: videoclip.Clip | None = None
        # mpv's IPC socket: straight in /tmp (any user may create it there, xrdp's too),
        # because a Unix socket's path must stay under 108 bytes and results directories
        # can be deep.
        self._socket = Path(tempfile.gettempdir()) / f"thinwan-mpv-{secrets.token_hex(4)}.sock"

    def prepare(self, d: Desktop) -> None:
        try:
            self.clip = videoclip.write_clip(d.dir / "video", self.frames, self.fps, self.size)
        except videoclip.ClipError as e:
            raise DesktopError(str(e)) from None
        (d.dir / "video").chmod(0o755)
        self.clip.path.chmod(0o644)
        (d.dir / "video" / "input.conf").write_text(videoclip.MPV_INPUT)
        (d.dir / "video" / "input.conf").chmod(0o644)
        d.cleanup(lambda: self._socket.unlink(missing_ok=True))

    def socket_path(self, d: Desktop) -> Path:
        return self._socket

    def argv(self, d: Desktop) -> list[str]:
        assert self.clip is not None
        x, y, _, _ = self.area(d.settings)
        base = videoclip.mpv_argv(self.clip, x, y, d.dir / "video" / "input.conf")[:-1]  # no file: idle
        return [
            *base,
            "--idle=yes",
            "--force-window=immediate",
            f"--input-ipc-server={self.socket_path(d)}",
            f"--log-file={d.app_log}",
        ]

    def wait_ready(self, d: Desktop) -> None:
        deadline = time.monotonic() + d.settings.ready_timeout_s
        while time.monotonic() < deadline:
            d.check_alive()
            try:
                self._command(d, "get_property", "idle-active")  # raw: OSError until mpv listens
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise DesktopError(f"mpv's IPC socket {self.socket_path(d)} never answered")
        self.load(d, speed=1.0, frames=None)

    def area(self, s: DesktopSettings) -> tuple[int, int, int, int]:
        return (s.app_x, s.app_y, *self.size)

    def watched_marks(self, s: DesktopSettings) -> tuple[int, int, int, int] | None:
        x, y, _, h = self.area(s)
        return (x, y + h - videoclip.MARK_BLOCK, videoclip.MARK_BLOCK, videoclip.MARK_BITS)

    def looks_up(self, pixels: np.ndarray) -> bool:
        return bool((pixels.max(axis=2) > 40).mean() > 0.5)  # a frame, not mpv's black window

    def command(self, d: Desktop, *args: Any) -> Any:
        """One mpv IPC command (JSON over its Unix socket); its ``data``. A socket that
        fails or stays silent for ``IPC_TIMEOUT_S`` is a DesktopError naming the command,
        so the run goes on with its other cells."""
        try:
            return self._command(d, *args)
        except OSError as e:  # TimeoutError included: mpv stopped answering
            what = " ".join(map(str, args))
            raise DesktopError(f"mpv did not answer {what!r} on its IPC socket: {e or type(e).__name__}") from None

    def _command(self, d: Desktop, *args: Any) -> Any:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(IPC_TIMEOUT_S)
            sock.connect(str(self.socket_path(d)))
            sock.sendall(json.dumps({"command": list(args), "request_id": 1}).encode() + b"\n")
            buf = b""
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    raise OSError("mpv closed its IPC socket")
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if msg.get("request_id") == 1:
                        if msg.get("error") not in ("success", None):
                            raise DesktopError(f"mpv: {' '.join(map(str, args))}: {msg['error']}")
                        return msg.get("data")

    def load(self, d: Desktop, speed: float, frames: int | None) -> None:
        """Show the clip's first frame, paused; a click starts it at ``speed`` (1/24 plays
        24 fps at 1 fps) for ``frames`` frames (None: all)."""
        assert self.clip is not None
        opts = f"speed={speed:.9g},frames={frames if frames is not None else 'all'}"
        self.command(d, "set_property", "pause", True)
        self.command(d, "loadfile", str(self.clip.path), "replace", opts)
        deadline = time.monotonic() + d.settings.ready_timeout_s
        while time.monotonic() < deadline:
            try:
                if self.command(d, "get_property", "estimated-frame-number") == 0:
                    return
            except DesktopError:
                pass  # the property does not exist until the file is loaded
            time.sleep(0.05)
        raise DesktopError("mpv did not load the clip")

    def wait_end(self, d: Desktop, timeout_s: float) -> dict[str, Any]:
        """Wait for the click to start the play (mpv unpauses) and for the play to end
        (mpv pauses again: ``keep-open`` at the end of the file, ``frames`` after the last
        frame asked for); mpv's own counts of it. A play still running ``timeout_s`` after
        the click is paused there and reported ``truncated``: on a slow path a player that
        draws every frame in full (mpv over plain X: 350 KB a frame at tens of KB/s) would
        take hours, and what it showed until then is still the measurement."""
        deadline = time.monotonic() + timeout_s
        started = truncated = False
        while True:
            d.check_alive()
            paused = self.command(d, "get_property", "pause")
            if not started:
                started = not paused
            elif paused:
                break
            if time.monotonic() >= deadline:
                if not started:
                    raise DesktopError(
                        f"the video did not start within {timeout_s:g} s (the click did not reach the player)"
                    )
                self.command(d, "set_property", "pause", True)
                truncated = True
                break
            time.sleep(0.05)
        return {
            "frames_shown": self.command(d, "get_property", "estimated-frame-number"),
            "frames_dropped": self.command(d, "get_property", "frame-drop-count"),
            "truncated": truncated,
        }

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.name, "clip": self.clip.to_json() if self.clip else None}

"""A real remote desktop across a lab's emulated WAN, driven as a user would drive it.

::

    from thinwan.substrates.lab.linkspec import LabSpec
    from thinwan.substrates.lab.topology import Lab
    from thinwan.substrates.desktop import Desktop, DesktopSettings

    with Lab(spec) as lab, Desktop("tigervnc", lab, DesktopSettings()) as d:
        d.start_capture(out / "run.pcap")
        for _ in range(10):
            rec = d.do("letter")          # input at the client, then the slow-motion pause
        cap = d.stop_capture()            # fails if tcpdump dropped a packet
        d.screenshot(out / "letter.png")
        d.info()                          # platform, versions, ports, images, settings
        d.start_rfb_client(out / "rfbclient.log")  # VNC: the viewer gives way to rfbclient.py
        d.start_capture(out / "rfb.pcap"); d.do("fill"); d.stop_capture()  # input via RFB

``up`` (``__enter__``) raises :class:`PlatformUnavailable` (a :class:`DesktopError`) with
the reason when the platform's package is missing or it fails to come up; ``down``
(``__exit__``, also on exceptions, Ctrl-C and SIGTERM) stops every program in order and
removes the work directory, X lock files and sockets, leaving nothing behind.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ...analysis.desktop_ops import ScreenLog
from ...config.desktop_defaults import OPERATIONS
from ..lifecycle import Managed
from . import images as _images
from .platforms import PLATFORMS, package_version, platform_status
from .procs import DesktopError, Proc, XDisplay, start_proc, tail, write_xauthority
from .settings import APP_H, APP_W, DesktopSettings
from .tcpdump import Capture, CaptureResult
from .workloads import SYSTEM_PYTHON, LatencyApp, Workload

__all__ = ["Desktop", "DesktopSettings", "OpRecord", "PlatformUnavailable", "OPERATIONS"]

# The set-up key of each operation (see app.py): selects the mode and resets the area.
RESET_KEY = {"letter": "F1", "scroll": "F2", "fill": "F3", "red_bitmap": "F4", "image": "F5"}
# The measured input of each operation.
INPUT = {
    "letter": ("key", "a"),
    "scroll": ("key", "Next"),
    "fill": ("click", "1"),
    "red_bitmap": ("click", "1"),
    "image": ("click", "1"),
}
# Operations whose input changes nothing when repeated from the state it leaves (a second
# red fill draws the same pixels, which a VNC server may then not send at all): each
# repetition starts from a fresh reset. letter and scroll keep going (the next A, the next
# page) and reset only when another operation ran last.
RESET_EACH_TIME = {"fill", "red_bitmap", "image"}
SCREENWATCH_PY = Path(__file__).with_name("screenwatch.py")
RFBCLIENT_PY = Path(__file__).with_name("rfbclient.py")
# The platforms whose client can be timed at receive level by rfbclient.py.
RFB_PROTOCOL = "RFB (VNC)"


class PlatformUnavailable(DesktopError):
    """The platform cannot run here: its package is missing or it failed to come up."""


@dataclass
class OpRecord:
    """One operation: wall-clock times (the pcap's clock, CLOCK_REALTIME) of its inputs."""

    op: str
    index: int  # 0, 1, … per operation
    t_reset: float | None  # when the set-up key was injected (None: no reset this time)
    t_input: float  # just before the measured input was injected
    t_input_done: float  # when xdotool returned
    t_settled: float  # when the pause ended (traffic idle)
    waited_s: float  # how long the pause after the input lasted
    settled: bool  # False if traffic was still flowing after max_wait_s
    verified: bool | None  # the client's screen showed the expected update (None: not checked)
    rechecks: int = 0  # screen checks that failed before traffic resumed and a later one passed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Desktop(Managed):
    """One platform up across ``lab``; see the module docstring."""

    def __init__(
        self,
        platform: str,
        lab: Any,
        settings: DesktopSettings | None = None,
        workdir: str | Path | None = None,
        workload: Workload | None = None,
    ) -> None:
        self.platform = platform
        # What runs on the remote desktop (workloads.py): the latency app unless told.
        self.workload = workload or LatencyApp()
        self.lab = lab
        self.settings = settings or DesktopSettings()
        self._own_dir = workdir is None
        # Absolute: the paths under it go into daemons' configs and command lines, and
        # xrdp opens its log (and reads its config) after changing to /.
        self._workdir_arg = Path(workdir).absolute() if workdir else None
        self.dir = Path()
        self.procs: list[Proc] = []  # in start order; stopped in reverse
        self.server_x: XDisplay | None = None
        self.client_x: XDisplay | None = None
        self.viewer: Proc | None = None
        self.app: Proc | None = None
        self.server_port: int = 0
        self.options: dict[str, Any] = {}
        self.images: _images.BenchImages | None = None
        self.xauthority = Path()
        self._capture: Capture | None = None
        self._mode: str | None = None
        self._count: dict[str, int] = {}
        self._cleanup_hooks: list[Any] = []
        self.app_log = Path()  # where the application logs the inputs it handled
        self.sweep_server_namespace = False
        self.is_up = False
        self.screen_log: Path | None = None
        self._screen_watch: Proc | None = None
        self.rfb: Proc | None = None  # rfbclient.py, once it replaced the viewer
        self._rfb_fifo: Path | None = None

    # -- life cycle ------------------------------------------------------------------

    def up(self) -> None:
        reason = platform_status(self.platform)
        if reason:
            raise PlatformUnavailable(f"{self.platform}: {reason}")
        if self._workdir_arg is not None:
            self._workdir_arg.mkdir(parents=True, exist_ok=True)
            self.dir = Path(tempfile.mkdtemp(prefix=f"desktop-{self.platform}-", dir=self._workdir_arg))
        else:
            self.dir = Path(tempfile.mkdtemp(prefix=f"thinwan-desktop-{self.platform}-"))
        # Readable by every user: xrdp's session runs as its test user and reads the app,
        # the images and the Xauthority from here.
        os.chmod(self.dir, 0o755)
        self.app_log = self.dir / "app-events.log"
        self.xauthority = self.dir / "Xauthority"
        write_xauthority(self.xauthority)
        try:
            self.workload.prepare(self)
            PLATFORMS[self.platform].up(self)
            self._wait_visible()
        except DesktopError as e:
            raise PlatformUnavailable(f"{self.platform}: failed to come up: {e}") from None
        self.is_up = True

    def down(self) -> None:
        """Stop everything in reverse order of start and remove our files. Safe to call
        twice and on a half-built desktop."""
        self.is_up = False
        if self._capture is not None:
            self._capture.abort()
            self._capture = None
        self._rfb_quit()
        for p in reversed(self.procs):
            p.stop()
        if self._rfb_fifo is not None:
            self._rfb_fifo.unlink(missing_ok=True)
            self._rfb_fifo = None
        for x in (self.client_x, self.server_x):
            if x is not None:
                x.stop()
        if self.sweep_server_namespace:
            _sweep_netns(self.lab.netns["server"])
        for hook in reversed(self._cleanup_hooks):
            hook()
        self._cleanup_hooks.clear()
        if self._own_dir and self.dir != Path() and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers for platforms ---------------------------------------------------------

    def cleanup(self, hook: Any) -> None:
        """Run ``hook()`` at tear-down (after the programs are stopped)."""
        self._cleanup_hooks.append(hook)

    def display_env(self, display: str) -> dict[str, str]:
        return {"DISPLAY": display, "XAUTHORITY": str(self.xauthority)}

    def client_env(self) -> dict[str, str]:
        assert self.client_x is not None
        return self.display_env(self.client_x.name)

    def start_app(self, side: str, display: str) -> Proc:
        """Start the workload's application on ``side`` showing on ``display``."""
        argv = self.workload.argv(self)
        self.app = start_proc(self.lab.netns[side], "app", argv, self.dir / "app.log", env=self.display_env(display))
        self.procs.append(self.app)
        self.wait_app_ready()
        return self.app

    def wait_app_ready(self) -> None:
        """Wait until the application is ready (the workload says how)."""
        self.workload.wait_ready(self)

    def wait_app_log(self, text: str, what: str) -> None:
        """Wait until the application's log holds ``text``; else DesktopError(``what``)."""
        deadline = time.monotonic() + self.settings.ready_timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            if text in self.app_events():
                return
            time.sleep(0.05)
        logs = "; ".join(f"{p.name} log:\n{tail(p.log, 8)}" for p in self.procs)
        raise DesktopError(f"{what}; {logs}")

    def app_events(self) -> str:
        try:
            return self.app_log.read_text()
        except OSError:
            return ""

    # -- driving -----------------------------------------------------------------------

    def _xdo(self, *args: str, timeout: float = 10.0) -> str:
        assert self.client_x is not None
        done = subprocess_run(
            ["ip", "netns", "exec", self.lab.netns["client"], "env", *_env_args(self.client_env()), "xdotool", *args],
            timeout,
        )
        if done.returncode != 0:
            raise DesktopError(f"xdotool {' '.join(args)} failed: {done.stderr.strip()}")
        return str(done.stdout)

    def _target_ready(self) -> None:
        """Point at the middle of the application (the viewer forwards the pointer, so it is
        over the application on the remote desktop too) and focus the client window under
        the pointer, as a user's click would: the viewer, or for x11 the application.
        (Found by position: TigerVNC's fullscreen window has neither name nor class.)"""
        x, y, w, h = self.workload.area(self.settings)
        px, py = str(x + w // 2), str(y + h // 2)
        # Not --sync: it waits for a motion event, which never comes when the pointer is
        # already there (the screen's centre, where X starts it, is the browser's).
        self._xdo("mousemove", px, py)
        deadline = time.monotonic() + 5.0
        while True:
            loc = dict(line.split("=", 1) for line in self._xdo("getmouselocation", "--shell").split() if "=" in line)
            if (loc.get("X"), loc.get("Y")) == (px, py) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        window = loc.get("WINDOW")
        if not window or window == "0":
            raise DesktopError(f"no window under the pointer on the client's screen ({loc})")
        self._xdo("windowfocus", "--sync", window)

    def _inject(self, kind: str, what: str) -> None:
        if self.rfb is not None:
            self._rfb_command(f"key {what}" if kind == "key" else "click {} {}".format(*self._app_centre()))
            return
        if kind == "key":
            # Press and release back to back, as xdotool's click does (~0.1 ms apart).
            # With xdotool's default 12-ms delay the release came 6 ms after the press, a
            # second input of its own: over plain X on a LAN Tk answered it with a
            # NoOperation request (Tk's DisplayFileProc probes the connection whenever it
            # is readable and no event is left queued) ~5 ms *after* the glyph was on the
            # screen, so the capture's update "ended" at the reply to the release
            # (docs/desktop.md "Self-checks").
            self._xdo("key", "--delay", "0", what)
        else:
            self._xdo("click", what)

    def inject(self, kind: str, what: str) -> float:
        """Give one input at the client (``key``/``click``, xdotool's name of it); the
        wall-clock time just before it was injected."""
        if not self.is_up:
            raise DesktopError("the desktop is not up")
        self._check_alive()
        t = time.time()
        self._inject(kind, what)
        return t

    def settle(self) -> tuple[float, bool]:
        """The slow-motion pause: (seconds waited, whether traffic fell idle)."""
        return self._pause()

    def check_alive(self) -> None:
        """Raise DesktopError if a program of the desktop has exited."""
        self._check_alive()

    def _pause(self) -> tuple[float, bool]:
        start = time.monotonic()
        s = self.settings
        if self._capture is None:
            time.sleep(s.pause_s)
            return time.monotonic() - start, True
        waited = self._capture.idle_for(s.idle_s, s.max_wait_s)
        rest = s.pause_s - (time.monotonic() - start)
        if rest > 0:
            time.sleep(rest)
        return time.monotonic() - start, waited is not None

    def do(self, op: str) -> OpRecord:
        """Run one operation as a user would: if needed the set-up key and a pause, then
        the measured input and the slow-motion pause; with ``verify`` check on the
        client's screen that the update was displayed (raises DesktopError if not)."""
        if op not in OPERATIONS:
            raise ValueError(f"unknown operation {op!r} (known: {', '.join(OPERATIONS)})")
        if not isinstance(self.workload, LatencyApp):
            raise DesktopError(f"operation {op} needs the latency application, not the {self.workload.name} workload")
        if not self.is_up:
            raise DesktopError("the desktop is not up")
        self._check_alive()
        t_reset = None
        if self._mode != op or op in RESET_EACH_TIME:
            t_reset = time.time()
            self._inject("key", RESET_KEY[op])
            self._mode = op
            self._pause()
        # With the RFB client there is no client screen to look at (it draws nothing): the
        # application's own log must show that it handled the input.
        by_screen = self.settings.verify and self.rfb is None
        before = self.grab_app() if by_screen else None
        handled = self.app_events().count("\n")
        t_input, started = time.time(), time.monotonic()
        self._inject(*INPUT[op])
        t_done = time.time()
        waited, settled = self._pause()
        verified = None
        if self.settings.verify and self.rfb is not None:
            if self.app_events().count("\n") <= handled:
                raise DesktopError(
                    f"{self.platform}: operation {op} given by the RFB client never reached the application "
                    f"(its log has no new line); rfbclient log:\n{tail(self.rfb.log, 6)}"
                )
            verified = True
        rechecks = 0
        if before is not None:
            problem, rechecks = self._await_update(
                lambda: _check_update(op, before, self.grab_app(), self.images), started
            )
            if problem:
                raise DesktopError(
                    f"{self.platform}: operation {op} was not displayed on the client's screen: {problem} "
                    f"(application log: {self.app_events().strip().splitlines()[-1:]})"
                )
            verified = True
        index = self._count.get(op, 0)
        self._count[op] = index + 1
        return OpRecord(op, index, t_reset, t_input, t_done, time.time(), waited, settled, verified, rechecks)

    def settle_screen(self, before: Image.Image, started: float) -> tuple[bool, int, bool, Image.Image]:
        """The slow-motion pause after an input given at ``started`` (monotonic) whose
        update must change the client's screen from ``before``: while it has not, look
        again each time traffic resumes (as :meth:`do` does), until ``max_wait_s`` after
        the input. Returns (whether traffic fell idle, checks that failed first, whether
        the screen changed, the screen as left)."""
        _, settled = self._pause()
        after = before

        def check() -> str | None:
            nonlocal after
            after = self.screenshot()
            return None if _changed(before, after) else "the screen did not change"

        problem, rechecks = self._await_update(check, started)
        return settled, rechecks, problem is None, after

    def _await_update(self, check: Callable[[], str | None], started: float) -> tuple[str | None, int]:
        """Why the client's screen does not show the input's update (``check``'s answer;
        None: it does) and how many checks failed first, looking again each time traffic
        resumes until ``max_wait_s`` after the input. On a lossy path a retransmission
        timeout backed off a few times (266, 532, 1064, 2128 ms at 66 ms RTT) is a silence
        longer than the idle watch inside one update: the pause ended there, and an xrdp
        `image` over 10 % loss was checked half drawn. The analyser gives such an input
        every burst up to the next one, so its latency still ends at the update's last
        packet."""
        s = self.settings

        def left() -> float:
            return max(0.0, s.max_wait_s - (time.monotonic() - started))

        failed = 0
        while True:
            problem = check()
            if problem is None or self._capture is None or not self._capture.grows_within(left()):
                return problem, failed
            failed += 1
            self._capture.idle_for(s.idle_s, left())

    def _check_alive(self) -> None:
        for p in self.procs:
            if not p.alive() and p.name not in self.options.get("may_exit", ()):
                raise DesktopError(f"{self.platform}: {p.describe_exit()}")

    # -- the RFB client (the VNC platforms' client timing) --------------------------------

    def start_rfb_client(self, log: Path) -> None:
        """Replace the viewer with ``rfbclient.py`` (VNC platforms only): the viewer is
        stopped, the RFB client connects to the same server from the client namespace
        and from then on gives the inputs (as RFB KeyEvent / PointerEvent messages) and
        logs, to ``log``, when it sent each and when each FramebufferUpdate was fully
        received (docs/desktop.md "Self-checks"). Raises DesktopError if the platform
        does not speak RFB or the client does not come up."""
        if PLATFORMS[self.platform].protocol != RFB_PROTOCOL:
            raise DesktopError(f"{self.platform} does not speak RFB: its client cannot be timed by the RFB client")
        if self.rfb is not None:
            raise DesktopError("the RFB client is already running")
        if self._capture is not None:
            raise DesktopError("stop the capture before switching to the RFB client")
        if self.viewer is not None:
            self.viewer.stop()
            self.procs.remove(self.viewer)
            self.viewer = None
        self._rfb_fifo = self.dir / "rfb-commands"
        self._rfb_fifo.unlink(missing_ok=True)
        os.mkfifo(self._rfb_fifo, 0o600)
        log.unlink(missing_ok=True)
        argv = [
            SYSTEM_PYTHON,
            "-u",
            str(RFBCLIENT_PY),
            self.lab.addr["server"],
            str(self.server_port),
            str(self._rfb_fifo),
        ]
        self.options["timing_client"] = argv
        self.rfb = start_proc(self.lab.netns["client"], "rfbclient", argv, log)
        self.procs.append(self.rfb)
        deadline = time.monotonic() + self.settings.ready_timeout_s
        while b" ready " not in (log.read_bytes() if log.exists() else b""):
            if not self.rfb.alive() or time.monotonic() > deadline:
                raise DesktopError(f"the RFB client did not connect: {tail(log)}")
            time.sleep(0.02)
        # The pointer over the application, as the viewer left it: keys go where it is.
        self._rfb_command("move {} {}".format(*self._app_centre()))

    def _app_centre(self) -> tuple[int, int]:
        x, y, w, h = self.workload.area(self.settings)
        return x + w // 2, y + h // 2

    def _rfb_command(self, line: str) -> None:
        assert self._rfb_fifo is not None and self.rfb is not None
        if not self.rfb.alive():
            raise DesktopError(f"the RFB client: {self.rfb.describe_exit()}")
        # The client holds the FIFO open for reading, so this open does not block.
        try:
            fd = os.open(self._rfb_fifo, os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)
        except OSError as e:
            raise DesktopError(f"the RFB client does not take commands ({e}): {tail(self.rfb.log, 6)}") from None

    def _rfb_quit(self) -> None:
        if self.rfb is not None and self.rfb.alive():
            try:
                self._rfb_command("quit")
                self.rfb.popen.wait(timeout=2.0)
            except (DesktopError, subprocess.TimeoutExpired):
                pass

    # -- capture and screenshots -------------------------------------------------------

    def start_capture(self, path: str | Path) -> None:
        """Start tcpdump on the client's interface, writing ``path`` (one pcap per run)."""
        if self._capture is not None:
            raise DesktopError("a capture is already running")
        self._capture = Capture(self.lab.netns["client"], self.lab.tun["client"], Path(path), self.dir)
        if self.rfb is None:
            # The RFB client times itself; with it the client's screen shows nothing.
            self._start_screen_watch(Path(path).with_name(Path(path).stem + "-screen.log"))
        # Let the traffic of whatever came before (bring-up, an earlier run) die down.
        self._capture.idle_for(self.settings.idle_s, self.settings.max_wait_s)

    def _start_screen_watch(self, log: Path) -> None:
        """The client's own timing (screenwatch.py: a DAMAGE report per change of the
        client's screen, with its receive time, and a hash of the application's area
        after each change there) — when python3-xlib is installed."""
        self.screen_log = None
        done = subprocess_run([SYSTEM_PYTHON, "-c", "import Xlib.ext.damage"], 10.0)
        if done.returncode != 0:
            return
        log.unlink(missing_ok=True)
        marks = self.workload.watched_marks(self.settings)
        self._screen_watch = start_proc(
            self.lab.netns["client"],
            "screenwatch",
            [SYSTEM_PYTHON, "-u", str(SCREENWATCH_PY), *map(str, self.app_area()), *map(str, marks or ())],
            log,
            env=self.client_env(),
        )
        self.procs.append(self._screen_watch)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if log.exists() and b"ready" in log.read_bytes():
                self.screen_log = log
                return
            if not self._screen_watch.alive():
                break
            time.sleep(0.02)
        raise DesktopError(f"the screen watcher did not start: {tail(log)}")

    def screen_changes(self) -> ScreenLog:
        """What the screen watcher saw: every change of the client's screen (DAMAGE
        reports) and, for the application's area, a hash of what it showed after each
        (``ScreenLog``; empty without python3-xlib)."""
        if self.screen_log is None or not self.screen_log.exists():
            return ScreenLog()
        return ScreenLog.parse(self.screen_log.read_text(errors="replace"))

    def app_area(self) -> tuple[int, int, int, int]:
        """The area of the client's screen the screen watcher pictures: x, y, w, h (the
        workload's: the latency application's, the video's)."""
        return self.workload.watched_area(self.settings)

    def stop_capture(self) -> CaptureResult:
        """Stop the capture; fails (DesktopError) if tcpdump dropped any packet."""
        if self._capture is None:
            raise DesktopError("no capture is running")
        cap, self._capture = self._capture, None
        if self._screen_watch is not None:
            self._screen_watch.stop()
            self.procs.remove(self._screen_watch)
            self._screen_watch = None
        return cap.stop()

    def screenshot(
        self, path: str | Path | None = None, region: tuple[int, int, int, int] | None = None
    ) -> Image.Image:
        """The client's screen (``region`` = x, y, w, h) as an image; saved as PNG to ``path``."""
        args = ["import", "-silent", "-window", "root"]
        if region:
            x, y, w, h = region
            args += ["-crop", f"{w}x{h}+{x}+{y}", "+repage"]
        done = subprocess_run(
            ["ip", "netns", "exec", self.lab.netns["client"], "env", *_env_args(self.client_env()), *args, "png:-"],
            30.0,
            text=False,
        )
        if done.returncode != 0:
            raise DesktopError(f"screenshot (import) failed: {done.stderr.decode(errors='replace').strip()}")
        img = Image.open(io.BytesIO(done.stdout)).convert("RGB")
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            img.save(path, "PNG")
        return img

    def grab_app(self) -> Image.Image:
        """The application's area on the client's screen."""
        s = self.settings
        return self.screenshot(region=(s.app_x, s.app_y, APP_W, APP_H))

    def _wait_visible(self) -> None:
        """Up = the application's white area shows on the client's screen and the screen
        has stopped changing for a second (TigerVNC's viewer shows a fading "Press F8 for
        menu" notice over the desktop for a few seconds after it goes fullscreen)."""
        self._target_ready()
        deadline = time.monotonic() + self.settings.ready_timeout_s
        last: bytes | None = None
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            self._check_alive()
            screen = self.screenshot()
            x, y, w, h = self.workload.area(self.settings)
            a = np.asarray(screen.crop((x, y, x + w, y + h)), dtype=np.int16)
            now = time.monotonic()
            raw = screen.tobytes()
            if raw != last:
                last, stable_since = raw, now
            elif self.workload.looks_up(a) and now - stable_since >= 1.0:
                return
            time.sleep(0.2)
        raise DesktopError(
            f"the application never showed (steadily) on the client's screen within {self.settings.ready_timeout_s:g} s; "
            + "; ".join(f"{p.name} log:\n{tail(p.log, 6)}" for p in self.procs)
        )

    # -- what the results record -------------------------------------------------------

    def versions(self) -> dict[str, str]:
        """Package → installed version for this platform (the platform's version)."""
        p = PLATFORMS[self.platform]
        return {pkg: package_version(pkg) or "not installed" for pkg in p.packages}

    def info(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "protocol": PLATFORMS[self.platform].protocol,
            "versions": self.versions(),
            "server_port": self.server_port,
            "settings": asdict(self.settings),
            "workload": self.workload.to_json(),
            "netns": dict(self.lab.netns),
            "images": self.images.to_json() if self.images else None,
            "displays": {
                "server": self.server_x.name if self.server_x else None,
                "client": self.client_x.name if self.client_x else None,
            },
            "options": {k: v for k, v in self.options.items() if k != "may_exit"},
            "dir": str(self.dir),
        }


@dataclass
class _Done:
    returncode: int
    stdout: Any
    stderr: Any = field(default="")


def subprocess_run(argv: list[str], timeout: float, text: bool = True) -> Any:
    import subprocess

    try:
        return subprocess.run(argv, capture_output=True, text=text, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return _Done(124, "" if text else b"", f"{argv[argv.index('env') + 1 :]}: timed out after {timeout:g} s")


def _env_args(env: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in env.items()]


def _changed(before: Image.Image, after: Image.Image) -> bool:
    """Did any pixel change by more than a lossy encoder's noise (24 per channel)?"""
    a = np.asarray(after, dtype=np.int16)
    b = np.asarray(before, dtype=np.int16)
    return bool((np.abs(a - b).max(axis=2) > 24).any())


def _check_update(op: str, before: Image.Image, after: Image.Image, imgs: _images.BenchImages | None) -> str | None:
    """Why the client's screen does not show ``op``'s update, or None if it does."""
    if not _changed(before, after):
        return "the application's area did not change"
    a = np.asarray(after, dtype=np.int16)
    red = ((a[..., 0] > 200) & (a[..., 1] < 60) & (a[..., 2] < 60)).mean()
    if op in ("fill", "red_bitmap") and red < 0.95:
        return f"only {red:.0%} of the area is red"
    if op == "image" and imgs is not None:
        with Image.open(imgs.photo) as ph:
            ref = np.asarray(ph.convert("RGB"), dtype=np.int16)
        err = np.abs(a - ref).mean()
        if err > 20:
            return f"the area differs from the photograph by {err:.0f} per channel on average"
    if op == "letter" and (a.min(axis=2) < 100).sum() < 10:
        return "no letter drawn"
    return None


def _sweep_netns(netns: str, grace: float = 5.0) -> None:
    """Stop every process left in our lab's ``netns`` (xrdp's sessions: Xorg, the session
    script, chansrv — children of sesman, which does not stop them): SIGTERM first so each
    Xorg removes its lock file, SIGKILL after ``grace``; then remove lock files and sockets
    of X servers that were there and could not."""
    from ..lab import netns as labns
    from .procs import remove_stale_display_files

    def pids() -> list[int]:
        return [p for p in labns.netns_pids(netns) if p != os.getpid()]

    xlocks = {}
    ours = set(pids())
    for lock in Path("/tmp").glob(".X*-lock"):
        try:
            pid = int(lock.read_text().strip())
        except (OSError, ValueError):
            continue
        if pid in ours:
            xlocks[int(lock.name[2:-5])] = pid
    # Twice: a session's children may start while the first round stops their parents.
    for _ in range(2):
        left = pids()
        if not left:
            break
        labns.terminate(left, grace)
    for n, pid in xlocks.items():
        remove_stale_display_files(n, pid)

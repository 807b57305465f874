"""How a remote desktop is laid out and paced (:class:`DesktopSettings`): a module of its
own so the platform table (:mod:`.platforms`) and the session (:mod:`.session`) both use
it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

from ...config.desktop_defaults import IDLE_S, MAX_WAIT_S, PAUSE_S

__all__ = ["APP_W", "APP_H", "DesktopSettings"]

APP_W, APP_H = 320, 240  # the benchmark application's area (app.py)


@dataclass(frozen=True)
class DesktopSettings:
    width: int = 1024
    height: int = 768
    depth: int = 24  # colour depth of the desktop (and of the client's screen)
    app_x: int = 64  # where the 320×240 application sits on the remote desktop
    app_y: int = 64
    # Slow motion: after each input wait at least pause_s, and (while capturing) until the
    # capture has not grown for idle_s, but at most max_wait_s — so each update completes
    # and traffic is idle before the next input (docs/desktop.md: how long that takes).
    pause_s: float = PAUSE_S
    idle_s: float = IDLE_S
    max_wait_s: float = MAX_WAIT_S
    verify: bool = True  # check on the client's screen that each operation was displayed
    ready_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.depth not in (8, 16, 24):
            raise ValueError(f"depth: {self.depth} (expected 8, 16 or 24)")
        if self.width < self.app_x + APP_W or self.height < self.app_y + APP_H:
            raise ValueError(f"the {APP_W}x{APP_H} application at +{self.app_x}+{self.app_y} does not fit")

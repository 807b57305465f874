"""Real remote desktops across the lab's emulated WAN (issue 16, docs/desktop.md).

:class:`Desktop` brings one platform (``tigervnc``, ``x11vnc``, ``x11``, ``xrdp``) up in
a lab's namespaces with our benchmark application on the remote desktop, injects a
user's input at the client, captures the client's traffic and takes screenshots of the
client's screen. :func:`platform_status` says whether a platform can run here.
"""

from .platforms import PLATFORMS, platform_status
from .procs import DesktopError
from .session import OPERATIONS, Desktop, OpRecord, PlatformUnavailable
from .settings import DesktopSettings
from .tcpdump import CaptureResult

__all__ = [
    "Desktop",
    "DesktopSettings",
    "DesktopError",
    "PlatformUnavailable",
    "OpRecord",
    "CaptureResult",
    "OPERATIONS",
    "PLATFORMS",
    "platform_status",
]

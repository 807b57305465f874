"""Reading a child's output after a ``readline()`` on its pipe."""

from __future__ import annotations

import subprocess
import threading
from typing import IO


def rest_of(p: subprocess.Popen, stream: IO[str], timeout: float) -> str:
    """Wait up to ``timeout`` s for ``p`` to end and return what is left of ``stream``.

    Not ``p.communicate(timeout=...)``: with a timeout it reads the pipe's file descriptor
    directly, so whatever an earlier ``readline()`` pulled into the stream's buffer beyond
    its line is lost (it lost an RFB update line in CI). Reading the stream itself, in a
    thread so a full pipe cannot stall the child, keeps it. Raises
    :class:`subprocess.TimeoutExpired` like ``communicate``."""
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(stream.read()), daemon=True)
    reader.start()
    p.wait(timeout=timeout)
    reader.join(timeout=5)
    return out[0] if out else ""

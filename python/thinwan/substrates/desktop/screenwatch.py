"""The client's own timing of the screen: an X client on the client's X server that asks
for DAMAGE reports on the root window and prints, for every change of the screen, the
wall-clock time (CLOCK_REALTIME, the pcap's clock) it received the report and the
rectangle: ``<epoch s> <x> <y> <w> <h>``, one line each, flushed at once.

Run by Debian's /usr/bin/python3 with python3-xlib in the client namespace (it imports
nothing of thinwan), like app.py. The X server is local to it (a Unix socket), so a report
arrives within microseconds of the drawing; the self-check compares the time of the last
change after an input with the analyser's end of the update (docs/desktop.md).
"""

import os
import struct
import sys
import time


def _cookie() -> tuple[bytes, bytes]:
    """The first entry of $XAUTHORITY. Ours hold one FamilyWild cookie for any display,
    which python-xlib's own lookup (by family and display number) does not match."""
    with open(os.environ["XAUTHORITY"], "rb") as f:
        data = f.read()
    fields, at = [], 2
    for _ in range(4):
        (n,) = struct.unpack(">H", data[at : at + 2])
        fields.append(data[at + 2 : at + 2 + n])
        at += 2 + n
    return fields[2], fields[3]


def main() -> None:
    # Imported here: the module must import anywhere (the package's layout test imports
    # every module), python3-xlib exists only for Debian's python.
    from Xlib import display
    from Xlib.ext import damage
    from Xlib.support import unix_connect

    cookie = _cookie()
    unix_connect.get_auth = lambda *args: cookie
    d = display.Display()
    if not d.has_extension("DAMAGE"):
        sys.exit("the X server has no DAMAGE extension")
    d.damage_query_version()
    root = d.screen().root
    # Raw rectangles: one report per drawing request, nothing merged.
    root.damage_create(damage.DamageReportRawRectangles)
    d.sync()
    out = sys.stdout
    out.write(f"{time.time():.6f} ready\n")
    out.flush()
    while True:
        ev = d.next_event()
        t = time.time()
        if ev.type == d.extension_event.DamageNotify:
            a = ev.area
            out.write(f"{t:.6f} {a.x} {a.y} {a.width} {a.height}\n")
            out.flush()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass

"""The client's own timing of the screen: an X client on the client's X server that asks
for DAMAGE reports on the root window and writes, for every change of the screen, the
wall-clock time (CLOCK_REALTIME, the pcap's clock) it received the report and the
rectangle, and — for changes touching the watched area (the benchmark application's
320×240) — what the area then shows, as a hash of its pixels. One line each, flushed at
once::

    <epoch s> ready
    <epoch s> <x> <y> <w> <h>            a DAMAGE report (raw rectangle)
    <epoch s> area <hash> <grab ms>      the area's pixels once every report so far is drawn
    <epoch s> area <hash> <grab ms> <n>  ... with marks: the video frame number n it shows
                                         (-1: no readable mark, e.g. mid-way through a frame)

The hash is what makes the check compare *content*: a viewer that repaints the screen on
its own with the same pixels (TigerVNC's fullscreen notice fading out, docs/desktop.md
"Self-checks") writes new reports but not a new hash, so "the moment the screen first
showed the operation's final picture" is well defined whatever the viewer repaints.

Why the area line's time is right: the X server handles one request at a time and sends a
client its events and replies in order. The watcher reads every report that has arrived,
then asks for the area's pixels (GetImage); reports the server sent before it served the
GetImage arrive before the reply. The watcher grabs once the screen has been quiet for
2 ms (not between the pieces of an update, where it would compete with the viewer still
drawing). If any report arrived during the grab (``pending_events`` after the grab), the
pixels may already hold their drawing, so that grab is not written and the watcher reads
them and grabs again. A written hash is therefore the content after exactly the reports
read so far, and it carries the receive time of the last of them. A grab takes ~0.3–1 ms
(307 KB over the local socket); reports that arrive during one are stamped when read, up
to that much late; ``grab ms`` records it.

Run by Debian's /usr/bin/python3 with python3-xlib in the client namespace (it imports
nothing of thinwan), like app.py: ``screenwatch.py [X Y W H [MX MY BLOCK BITS]]`` (the
area; without it no area lines; with the video clip's frame marks — videoclip.py: guard
blocks white and black, then BITS blocks of BLOCK pixels from (MX, MY), screen
coordinates inside the area — each area line also carries the frame number shown). The X server is local to it (a Unix socket), so a report arrives within
microseconds of the drawing.
"""

import os
import select
import struct
import sys
import time
import zlib

# Silence on the screen before the watcher grabs the area (see main).
QUIET_S = 0.002


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


def decode_mark(data: bytes, width: int, x: int, y: int, block: int, bits: int) -> int:
    """The frame number of a video frame mark in ``data`` (32-bit pixels, ``width`` a
    row, as X's ZPixmap at depth 24 gives them) whose strip starts at (x, y) of that
    image; -1 unless the guards read white then black. Each block is read at its centre
    (the codec's blocking is worst at the edges): mean of the three channels > 127."""

    def white(k: int) -> bool | None:
        at = ((y + block // 2) * width + x + k * block + block // 2) * 4
        if at + 3 > len(data):
            return None
        level = (data[at] + data[at + 1] + data[at + 2]) / 3
        return level > 127

    if white(0) is not True or white(1) is not False:
        return -1
    n = 0
    for k in range(bits):
        if white(2 + k):
            n |= 1 << k
    return n


def main(argv: list[str]) -> None:
    # Imported here: the module must import anywhere (the package's layout test imports
    # every module), python3-xlib exists only for Debian's python.
    from Xlib import X, display
    from Xlib.ext import damage
    from Xlib.support import unix_connect

    area = tuple(int(v) for v in argv[:4]) if len(argv) >= 4 else None
    marks = tuple(int(v) for v in argv[4:8]) if len(argv) >= 8 else None
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
    notify = d.extension_event.DamageNotify

    def touches(a) -> bool:
        if area is None:
            return False
        x, y, w, h = area
        return a.x < x + w and a.x + a.width > x and a.y < y + h and a.y + a.height > y

    def grab() -> tuple[str, str]:
        """The area's hash and, with marks, " <frame number>" (else "")."""
        x, y, w, h = area
        img = root.get_image(x, y, w, h, X.ZPixmap, 0xFFFFFFFF)
        frame = ""
        if marks is not None:
            mx, my, block, bits = marks
            frame = f" {decode_mark(img.data, w, mx - x, my - y, block, bits)}"
        return f"{zlib.crc32(img.data):08x}", frame

    def log_event(ev) -> bool:
        t = time.time()
        if ev.type != notify:
            return False
        a = ev.area
        out.write(f"{t:.6f} {a.x} {a.y} {a.width} {a.height}\n")
        log_event.last_t = t
        return touches(a)

    log_event.last_t = time.time()

    def area_line(t: float, grabbed: tuple[str, str], took: float) -> str:
        h, frame = grabbed
        return f"{t:.6f} area {h} {took:.3f}{frame}\n"

    if area is not None:
        out.write(area_line(log_event.last_t, grab(), 0.0))
    out.write(f"{time.time():.6f} ready\n")
    out.flush()
    dirty = False
    fd = d.fileno()
    while True:
        dirty |= log_event(d.next_event())
        # Read reports until the screen has been quiet for QUIET_S, then grab once: a
        # grab between the pieces of an update would take the X server (and a core) from
        # the viewer that is still drawing it.
        while True:
            while d.pending_events():
                dirty |= log_event(d.next_event())
            if not dirty or not select.select([fd], [], [], QUIET_S)[0]:
                break
        while dirty:
            t0 = time.time()
            h = grab()
            took = (time.time() - t0) * 1e3
            if d.pending_events():
                # Drawing reported before the GetImage was served: the pixels may hold it.
                # Read those reports first, then grab again.
                while d.pending_events():
                    log_event(d.next_event())
                continue
            out.write(area_line(log_event.last_t, h, took))
            dirty = False
        out.flush()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        pass

"""A minimal RFB 3.8 client (RFC 6143) that times what it receives: the VNC platforms'
client-timing self-check (docs/desktop.md "Self-checks").

A real viewer draws an update after receiving it, and that drawing (1–1.3 ms for a
full 320×240 area here) is in any screen-based timing. This client draws nothing: it
reads the server's messages, delimits each FramebufferUpdate without decoding pixels,
and logs the wall-clock time (CLOCK_REALTIME, the pcap's clock) of the ``recv()`` that
completed it. Like a viewer it asks for the next update as soon as one has arrived
(incremental FramebufferUpdateRequest, RFC 6143 §7.5.3), and it gives input as
KeyEvent / PointerEvent messages (§7.5.4, §7.5.5).

Run by Debian's /usr/bin/python3 in the client namespace, like app.py and screenwatch.py
(stdlib only, it imports nothing of thinwan)::

    rfbclient.py HOST PORT COMMANDS

``COMMANDS`` is a FIFO it reads lines from: ``key KEYSYM`` (press and release together,
as ``xdotool key --delay 0``), ``click X Y`` (button 1 pressed and released at X, Y, as
``xdotool click``), ``move X Y``. One log line per event on stdout, flushed at once::

    <epoch s> ready <width> <height>        handshake done, first update requested
    <epoch s> input key <keysym hex> <tx>   just before the message was sent
    <epoch s> input click <x> <y> <tx>
    <epoch s> input move <x> <y> <tx>
    <epoch s> update <rects> <bytes> <kernel epoch s>   a FramebufferUpdate fully received
    <epoch s> bell
    <epoch s> cut <bytes>                   ServerCutText
    <epoch s> colours <bytes>               SetColourMapEntries
    <epoch s> error <message>               then exit status 1

The first time is when ``recv()`` returned the bytes that completed the update — the
client's own receive time, the check's verdict. The last is the kernel's receive time of
the last segment those bytes came in (SO_TIMESTAMPNS, socket(7): for TCP the timestamp of
the last skb read), 0 if the kernel gave none: their difference is how long the client
waited for a CPU, which tells a slow client from a wrong analyser.

``<tx>`` is when the input's last byte left the host: the kernel's transmit stamp of it
(SO_TIMESTAMPING, Documentation/networking/timestamping.rst: ``SOF_TIMESTAMPING_TX_SOFTWARE``,
taken when the device driver takes the packet, the moment a capture on that interface
sees it), ``tx=<epoch s>``; ``sched=<epoch s>`` when the device gives no software stamp
and the stamp is the one taken as the packet entered the queueing discipline
(``SOF_TIMESTAMPING_TX_SCHED``); ``tx=0`` when the kernel gave none. It differs from the
send time when TCP holds the input back — recovering a loss, the peer's window, the
congestion window — so the latency from it is the input's wire → update time, as the
capture sees it. The stamps come on the socket's error queue (``MSG_ERRQUEUE``), matched
to the input by the byte counter ``SOF_TIMESTAMPING_OPT_ID`` numbers them with (for TCP
the offset of the stamped byte from the option being set), so an input's line is written
when its stamp has come (or after ``STAMP_WAIT_S`` without one, or on quit): input
lines stay in input order, but may come after update lines that are later than their
send time. Logs from before the stamp (no ``<tx>`` field) still parse.

Encodings asked for (§7.7): ZRLE, CopyRect and Raw only, each of which can be delimited
without decoding (§7.7.1 Raw: width × height × 4 bytes at our 32-bpp pixel format;
§7.7.2 CopyRect: 4 bytes; §7.7.6 ZRLE: a u32 length and that many bytes of the
connection's zlib stream, kept as bytes, never inflated). No pseudo-encodings, so every
rectangle is one of these three and the rectangle count is exact (no LastRect).
Anything else — an encoding or message type we did not ask for, a truncated message —
is an error line and exit status 1: a timing built on a misparsed stream would be wrong.
"""

import os
import select
import socket
import struct
import sys
import time

# RFC 6143 §7.7 encoding numbers.
RAW, COPYRECT, ZRLE = 0, 1, 16
ENCODINGS = (ZRLE, COPYRECT, RAW)  # in order of preference (§7.5.2)
BYTES_PER_PIXEL = 4  # the pixel format we set (§7.5.1)
# Linux's SO_TIMESTAMPNS / SCM_TIMESTAMPNS (asm-generic/socket.h; the socket module has
# no name for them): a struct timespec with each read, the kernel's receive time.
SO_TIMESTAMPNS = 35
# SO_TIMESTAMPING (= SCM_TIMESTAMPING) and its flags (linux/net_tstamp.h), for the
# transmit stamps of the inputs (module docs).
SO_TIMESTAMPING = 37
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_ID = 1 << 7
SOF_TIMESTAMPING_TX_SCHED = 1 << 8
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11
# Linux ≥ 6.2: count from the bytes written, not the bytes acknowledged, when the option
# is set (the same here: nothing is unacknowledged after the ServerInit, which acknowledges
# the ClientInit), tried first.
SOF_TIMESTAMPING_OPT_ID_TCP = 1 << 16
TX_FLAGS = (
    SOF_TIMESTAMPING_TX_SOFTWARE
    | SOF_TIMESTAMPING_TX_SCHED
    | SOF_TIMESTAMPING_SOFTWARE
    | SOF_TIMESTAMPING_OPT_ID
    | SOF_TIMESTAMPING_OPT_TSONLY
)
# struct sock_extended_err (linux/errqueue.h): ee_info is the stamp's kind, ee_data its id.
SO_EE_ORIGIN_TIMESTAMPING = 4
SCM_TSTAMP_SND, SCM_TSTAMP_SCHED = 0, 1
IP_RECVERR, IPV6_RECVERR = 11, 25
# How long an input's line waits for its transmit stamp before it is written without.
STAMP_WAIT_S = 5.0

# X keysyms of the keys the benchmark gives (the RFB KeyEvent carries X keysyms, §7.5.4).
KEYSYMS = {
    "a": 0x61,
    "A": 0x41,
    "Next": 0xFF56,
    "Prior": 0xFF55,
    "Return": 0xFF0D,
    "F1": 0xFFBE,
    "F2": 0xFFBF,
    "F3": 0xFFC0,
    "F4": 0xFFC1,
    "F5": 0xFFC2,
}


class RfbError(Exception):
    """The server's stream is not what RFC 6143 and our requests allow."""


class UpdateParser:
    """Sans-IO parser of the server-to-client messages after the handshake (§7.6): feed it
    bytes as they arrive; it returns each message completed by them, as ``(kind, rects,
    size)`` — ``("update", rects, bytes)``, ``("bell", 0, 1)``, ``("cut", 0, bytes)``,
    ``("colours", 0, bytes)`` — where ``bytes`` is the whole message's length on the
    wire. :meth:`close` at end of stream raises :class:`RfbError` if a message was cut."""

    def __init__(self, bytes_per_pixel: int = BYTES_PER_PIXEL) -> None:
        self.bpp = bytes_per_pixel
        self.buf = bytearray()
        self.at = 0  # parse position in buf (the start of the current message)

    def feed(self, data: bytes) -> list[tuple[str, int, int]]:
        self.buf += data
        out = []
        while True:
            msg = self._one()
            if msg is None:
                break
            out.append(msg)
        # Drop what was consumed (amortised: only when it is most of the buffer).
        if self.at > len(self.buf) // 2:
            del self.buf[: self.at]
            self.at = 0
        return out

    def close(self) -> None:
        if self.at < len(self.buf):
            raise RfbError(
                f"stream ended inside a message ({len(self.buf) - self.at} bytes of it received, "
                f"type {self.buf[self.at]})"
            )

    def _need(self, pos: int, n: int) -> bytes | None:
        """``n`` bytes at ``pos`` (absolute in buf), or None if not all here yet."""
        if pos + n > len(self.buf):
            return None
        return bytes(self.buf[pos : pos + n])

    def _one(self) -> tuple[str, int, int] | None:
        start = self.at
        head = self._need(start, 1)
        if head is None:
            return None
        kind = head[0]
        if kind == 0:  # FramebufferUpdate (§7.6.1)
            h = self._need(start, 4)
            if h is None:
                return None
            (nrects,) = struct.unpack(">xxH", h)
            pos = start + 4
            for _ in range(nrects):
                r = self._need(pos, 12)
                if r is None:
                    return None
                x, y, w, hh, enc = struct.unpack(">HHHHi", r)
                pos += 12
                if enc == RAW:
                    pos += w * hh * self.bpp
                elif enc == COPYRECT:
                    pos += 4
                elif enc == ZRLE:
                    n = self._need(pos, 4)
                    if n is None:
                        return None
                    pos += 4 + struct.unpack(">I", n)[0]
                else:
                    raise RfbError(
                        f"FramebufferUpdate rectangle {x},{y} {w}x{hh} in encoding {enc}, which was not asked for"
                    )
                if pos > len(self.buf):
                    return None
            self.at = pos
            return ("update", nrects, pos - start)
        if kind == 1:  # SetColourMapEntries (§7.6.2): not sent for true colour, but delimitable
            h = self._need(start, 6)
            if h is None:
                return None
            (n,) = struct.unpack(">xxxxH", h)
            end = start + 6 + 6 * n
            if end > len(self.buf):
                return None
            self.at = end
            return ("colours", 0, end - start)
        if kind == 2:  # Bell (§7.6.3)
            self.at = start + 1
            return ("bell", 0, 1)
        if kind == 3:  # ServerCutText (§7.6.4)
            h = self._need(start, 8)
            if h is None:
                return None
            (n,) = struct.unpack(">xxxxI", h)
            if n & 0x80000000:
                raise RfbError("ServerCutText with a negative length (extended clipboard, not asked for)")
            end = start + 8 + n
            if end > len(self.buf):
                return None
            self.at = end
            return ("cut", 0, end - start)
        raise RfbError(f"unknown server message type {kind}")


# -- client-to-server messages (§7.5) ---------------------------------------------------


def set_pixel_format() -> bytes:
    """32 bpp, depth 24, little-endian true colour, 8 bits per channel (§7.5.1, §7.4)."""
    pf = struct.pack(">BBBBHHHBBBxxx", 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)
    return struct.pack(">Bxxx", 0) + pf


def set_encodings(encodings: tuple[int, ...] = ENCODINGS) -> bytes:
    return struct.pack(">BxH", 2, len(encodings)) + b"".join(struct.pack(">i", e) for e in encodings)


def update_request(incremental: bool, w: int, h: int) -> bytes:
    return struct.pack(">BBHHHH", 3, int(incremental), 0, 0, w, h)


def key_event(down: bool, keysym: int) -> bytes:
    return struct.pack(">BBxxI", 4, int(down), keysym)


def pointer_event(mask: int, x: int, y: int) -> bytes:
    return struct.pack(">BBHH", 5, mask, x, y)


# -- the handshake (§7.1–§7.3) ------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int, what: str) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise RfbError(f"the server closed the connection during {what} ({len(data)} of {n} bytes)")
        data += chunk
    return data


def handshake(sock: socket.socket) -> tuple[int, int]:
    """Protocol version 3.8, security type None, a shared ClientInit; returns the
    framebuffer's width and height (ServerInit)."""
    version = _recv_exact(sock, 12, "the ProtocolVersion")
    if not version.startswith(b"RFB ") or version[7:8] != b".":
        raise RfbError(f"not an RFB server: {version!r}")
    major, minor = int(version[4:7]), int(version[8:11])
    if (major, minor) < (3, 8):
        raise RfbError(f"the server speaks RFB {major}.{minor}; this client needs 3.8")
    sock.sendall(b"RFB 003.008\n")
    (n,) = _recv_exact(sock, 1, "the security types")
    if n == 0:
        (k,) = struct.unpack(">I", _recv_exact(sock, 4, "the failure reason"))
        raise RfbError(
            f"the server refused the connection: {_recv_exact(sock, k, 'the reason').decode(errors='replace')}"
        )
    types = _recv_exact(sock, n, "the security types")
    if 1 not in types:
        raise RfbError(f"the server does not offer security type None (offers {list(types)})")
    sock.sendall(b"\x01")
    (result,) = struct.unpack(">I", _recv_exact(sock, 4, "the SecurityResult"))
    if result != 0:
        (k,) = struct.unpack(">I", _recv_exact(sock, 4, "the failure reason"))
        raise RfbError(f"security handshake failed: {_recv_exact(sock, k, 'the reason').decode(errors='replace')}")
    sock.sendall(b"\x01")  # ClientInit: shared (§7.3.1)
    w, h = struct.unpack(">HH", _recv_exact(sock, 4, "the ServerInit"))
    _recv_exact(sock, 16, "the ServerInit's pixel format")
    (k,) = struct.unpack(">I", _recv_exact(sock, 4, "the desktop's name length"))
    _recv_exact(sock, k, "the desktop's name")
    return w, h


# -- the loop ------------------------------------------------------------------------------


def command_bytes(line: str) -> tuple[bytes, str]:
    """A command line → (the messages to send at once, what to log after ``input``)."""
    f = line.split()
    if len(f) == 2 and f[0] == "key":
        if f[1] not in KEYSYMS:
            raise RfbError(f"unknown key {f[1]!r} (known: {', '.join(KEYSYMS)})")
        k = KEYSYMS[f[1]]
        return key_event(True, k) + key_event(False, k), f"key {k:x}"
    if len(f) == 3 and f[0] in ("click", "move"):
        x, y = int(f[1]), int(f[2])
        if f[0] == "move":
            return pointer_event(0, x, y), f"move {x} {y}"
        return pointer_event(1, x, y) + pointer_event(0, x, y), f"click {x} {y}"
    raise RfbError(f"bad command {line!r} (key NAME, click X Y, move X Y)")


def _kernel_time(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The kernel's receive time (epoch s) from recvmsg's ancillary data, 0 if none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec + nsec * 1e-9
    return 0.0


class TxStamps:
    """The kernel's transmit stamps of what is sent on a TCP socket (module docs):
    :meth:`sent` numbers each send's last byte, :meth:`drain` reads the error queue,
    :meth:`stamp` gives a byte's stamp: ``("tx", t)`` (the device's software stamp),
    ``("sched", t)`` (the queueing discipline's, only once the socket has shown that its
    device gives no software stamp, or when ``final``), or None while none is usable."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.on = False
        for flags in (TX_FLAGS | SOF_TIMESTAMPING_OPT_ID_TCP, TX_FLAGS):
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
            except OSError:
                continue
            self.on = True
            break
        self.written = 0  # bytes sent since the option was set
        self.snd: dict[int, float] = {}
        self.sched: dict[int, float] = {}
        self.device_stamps = False  # a software (driver) stamp has come on this socket

    def sent(self, n: int) -> int:
        """Count ``n`` bytes just sent; the id of their last byte."""
        self.written += n
        return (self.written - 1) & 0xFFFFFFFF

    def drain(self) -> None:
        """Read every stamp waiting on the error queue."""
        while self.on:
            try:
                _, anc, _, _ = self.sock.recvmsg(64, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except OSError:  # nothing waiting (EAGAIN), or the socket is gone
                return
            t = kind = key = None
            for level, ctype, data in anc:
                if level == socket.SOL_SOCKET and ctype == SO_TIMESTAMPING and len(data) >= 16:
                    sec, nsec = struct.unpack("qq", data[:16])  # ts[0]: the software stamp
                    t = sec + nsec * 1e-9
                elif (level, ctype) in ((socket.IPPROTO_IP, IP_RECVERR), (socket.IPPROTO_IPV6, IPV6_RECVERR)):
                    _, origin, _, _, _, info, ident = struct.unpack("IBBBBII", data[:16])
                    if origin == SO_EE_ORIGIN_TIMESTAMPING:
                        kind, key = info, ident
            if t is None or key is None or t <= 0:
                continue
            if kind == SCM_TSTAMP_SND:
                self.device_stamps = True
                self.snd.setdefault(key, t)  # the first transmission, not a retransmission
            elif kind == SCM_TSTAMP_SCHED:
                self.sched.setdefault(key, t)

    def stamp(self, key: int, final: bool = False) -> tuple[str, float] | None:
        """The stamp of byte ``key``: its own, or the first one after it. TCP stamps the
        last byte of each send; a send appended to a segment not yet sent (TCP holding
        data back: a loss being recovered, a closed window) moves that segment's stamp to
        its own last byte, so the earlier bytes have none of their own and left with the
        first stamped byte after them (segments leave in sequence order, and stamps come
        in the order they are taken)."""
        own = _first_at_or_after(self.snd, key)
        if own is not None:
            return ("tx", self.snd[own])
        own = _first_at_or_after(self.sched, key)
        if own is not None and (final or not self.device_stamps):
            return ("sched", self.sched[own])
        return None

    def forget_before(self, key: int) -> None:
        """Drop the stamps of bytes before ``key`` (the update requests'): nobody asks."""
        for d in (self.snd, self.sched):
            for k in [k for k in d if _after(key, k)]:
                del d[k]


def _after(a: int, b: int) -> bool:
    """Byte id ``a`` comes after ``b`` (32-bit ids wrap, as TCP sequence numbers do)."""
    return a != b and ((a - b) & 0xFFFFFFFF) < 0x80000000


def _first_at_or_after(stamps: dict[int, float], key: int) -> int | None:
    """The first id in ``stamps`` at or after ``key``, or None."""
    later = [k for k in stamps if k == key or _after(k, key)]
    return min(later, key=lambda k: (k - key) & 0xFFFFFFFF) if later else None


def run(host: str, port: int, commands: str, out) -> None:
    def log(what: str, t: float | None = None) -> None:
        out.write(f"{time.time() if t is None else t:.6f} {what}\n")
        out.flush()

    sock = socket.create_connection((host, port), timeout=30)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    w, h = handshake(sock)
    stamps = TxStamps(sock)

    def send(data: bytes) -> int:
        sock.sendall(data)
        return stamps.sent(len(data))

    send(set_pixel_format() + set_encodings() + update_request(False, w, h))
    # O_RDWR: the FIFO never reports end-of-file while we hold a writer end ourselves.
    cmd_fd = os.open(commands, os.O_RDWR | os.O_NONBLOCK)
    log(f"ready {w} {h}")
    parser = UpdateParser()
    pending = b""
    waiting: list[tuple[float, str, int]] = []  # inputs sent, their stamps not yet come

    def log_inputs(final: bool = False) -> None:
        """Write the lines of the inputs whose stamps have come, in input order."""
        stamps.drain()
        now = time.time()
        while waiting:
            t_sent, what, key = waiting[0]
            got = stamps.stamp(key, final or now - t_sent > STAMP_WAIT_S)
            if got is None and not final and now - t_sent <= STAMP_WAIT_S:
                return
            kind, t_tx = got if got is not None else ("tx", 0.0)
            log(f"input {what} {kind}={t_tx:.6f}", t_sent)
            stamps.forget_before(key)
            waiting.pop(0)

    # Every input's line is written, with or without its stamp, however the loop ends.
    try:
        while True:
            ready, _, _ = select.select([sock, cmd_fd], [], [], 0.05 if waiting else None)
            log_inputs()
            if sock in ready:
                try:
                    data, anc, _, _ = sock.recvmsg(1 << 20, socket.CMSG_SPACE(16), socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    data, anc = None, []  # readable for the error queue (a stamp) only
                t = time.time()
                t_kernel = _kernel_time(anc)
                if data == b"":
                    parser.close()
                    raise RfbError("the server closed the connection")
                for kind, rects, size in parser.feed(data or b""):
                    if kind == "update":
                        # Like a viewer: the next (incremental) request once an update is in.
                        send(update_request(True, w, h))
                        log(f"update {rects} {size} {t_kernel:.6f}", t)
                    else:
                        log(f"{kind} {size}" if kind != "bell" else "bell", t)
            if cmd_fd in ready:
                pending += os.read(cmd_fd, 4096)
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if not line.strip():
                        continue
                    if line.strip() == b"quit":
                        return
                    msg, what = command_bytes(line.decode())
                    t = time.time()
                    waiting.append((t, what, send(msg)))
                    log_inputs()
    finally:
        log_inputs(final=True)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: rfbclient.py HOST PORT COMMANDS-FIFO\n")
        return 2
    try:
        run(argv[0], int(argv[1]), argv[2], sys.stdout)
    except (RfbError, OSError, ValueError) as e:
        sys.stdout.write(f"{time.time():.6f} error {e}\n")
        sys.stdout.flush()
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

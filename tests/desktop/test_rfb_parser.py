"""The RFB client's (rfbclient.py) message parser on hand-built byte streams (RFC 6143
§7.6), its log → the client's latency per input, the client against a fake RFB server on
loopback (handshake, requests, input messages, error exit), and a recorded timing pass
(TigerVNC over the 66-ms WAN, tests/desktop/data/tigervnc-wan-rfb) through the check.
No root."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.procs import rest_of

from thinwan.analysis.desktop_ops import RfbLog, rfb_times, timing_problems
from thinwan.substrates.desktop import rfbclient
from thinwan.substrates.desktop.opsplit import CaptureError
from thinwan.substrates.desktop.rfbclient import RfbError, UpdateParser

RFBCLIENT = Path(rfbclient.__file__)


def rect(x: int, y: int, w: int, h: int, enc: int, data: bytes) -> bytes:
    return struct.pack(">HHHHi", x, y, w, h, enc) + data


def update(*rects: bytes) -> bytes:
    return struct.pack(">BxH", 0, len(rects)) + b"".join(rects)


def raw(w: int, h: int) -> bytes:
    return rect(0, 0, w, h, rfbclient.RAW, bytes(range(256)) * (w * h * 4 // 256) + bytes(w * h * 4 % 256))


def zrle(payload: bytes) -> bytes:
    z = zlib.compress(payload)
    return rect(10, 20, 64, 64, rfbclient.ZRLE, struct.pack(">I", len(z)) + z)


COPY = rect(5, 5, 100, 50, rfbclient.COPYRECT, struct.pack(">HH", 200, 300))


def test_one_update_of_each_encoding_is_delimited_exactly() -> None:
    msg = update(raw(8, 4), COPY, zrle(b"\x01" * 500))
    assert UpdateParser().feed(msg) == [("update", 3, len(msg))]


def test_updates_split_anywhere_complete_at_the_byte_that_ends_them() -> None:
    a = update(raw(16, 16), zrle(os.urandom(3000)))
    b = update(COPY)
    stream = a + b + bytes([2]) + struct.pack(">BxxxI", 3, 5) + b"hello"
    for cut in (1, 2, 3, 4, 13, 100, len(a) - 1, len(a), len(a) + 1):
        p = UpdateParser()
        first, second = p.feed(stream[:cut]), p.feed(stream[cut:])
        assert first + second == [("update", 2, len(a)), ("update", 1, len(b)), ("bell", 0, 1), ("cut", 0, 13)]
        # Nothing is reported before the byte that completes it.
        assert first == ([("update", 2, len(a))] if cut >= len(a) else [])
        p.close()
    # Byte by byte: the first update completes exactly at its last byte.
    p = UpdateParser()
    done = [i for i in range(len(stream)) if p.feed(stream[i : i + 1])]
    assert done[0] == len(a) - 1 and done[1] == len(a) + len(b) - 1


def test_zrle_bytes_are_kept_not_inflated() -> None:
    """A ZRLE rectangle is its u32 length and that many bytes of the connection's zlib
    stream, which need not be a whole deflate block on its own: any bytes will do."""
    junk = b"\xff\x00 not zlib at all"
    msg = update(rect(0, 0, 64, 64, rfbclient.ZRLE, struct.pack(">I", len(junk)) + junk))
    assert UpdateParser().feed(msg) == [("update", 1, 4 + 12 + 4 + len(junk))]


def test_zero_rect_update_and_colour_map() -> None:
    cmap = struct.pack(">BxHH", 1, 0, 2) + bytes(12)
    assert UpdateParser().feed(update() + cmap) == [("update", 0, 4), ("colours", 0, 18)]


def test_truncated_message_is_an_error_at_close() -> None:
    msg = update(raw(8, 8))
    p = UpdateParser()
    assert p.feed(msg[:-1]) == []
    with pytest.raises(RfbError, match="stream ended inside a message"):
        p.close()


def test_unknown_message_or_encoding_is_an_error() -> None:
    with pytest.raises(RfbError, match="unknown server message type 9"):
        UpdateParser().feed(bytes([9, 0, 0, 0]))
    with pytest.raises(RfbError, match="encoding 7, which was not asked for"):
        UpdateParser().feed(update(rect(0, 0, 1, 1, 7, b"")))
    with pytest.raises(RfbError, match="negative length"):
        UpdateParser().feed(struct.pack(">BxxxI", 3, 0xFFFFFFF0))


def test_client_messages_are_rfc_6143_sized() -> None:
    assert len(rfbclient.set_pixel_format()) == 20
    assert rfbclient.set_encodings() == struct.pack(">BxHiii", 2, 3, 16, 1, 0)
    assert rfbclient.update_request(True, 1024, 768) == struct.pack(">BBHHHH", 3, 1, 0, 0, 1024, 768)
    msg, what = rfbclient.command_bytes("key Next")
    assert msg == struct.pack(">BBxxIBBxxI", 4, 1, 0xFF56, 4, 0, 0xFF56) and what == "key ff56"
    msg, what = rfbclient.command_bytes("click 224 184")
    assert msg == struct.pack(">BBHHBBHH", 5, 1, 224, 184, 5, 0, 224, 184) and what == "click 224 184"
    with pytest.raises(RfbError, match="unknown key"):
        rfbclient.command_bytes("key Hyper_Z")


# -- the log → the client's latency ------------------------------------------------------

T0 = 1_700_000_000.0


def test_rfb_times_take_the_last_update_after_the_client_sent_the_input() -> None:
    log = RfbLog.parse(
        "\n".join(
            [
                f"{T0:.6f} ready 1024 768",
                f"{T0 + 0.5:.6f} input key ffbe",  # the set-up key, before the window
                f"{T0 + 0.51:.6f} update 1 300",
                f"{T0 + 1.0002:.6f} input key 61",  # handed over at T0 + 1.0
                f"{T0 + 1.0092:.6f} update 1 412 {T0 + 1.0091:.6f}",
                f"{T0 + 1.0502:.6f} update 2 9000 {T0 + 1.0431:.6f}",  # a second update, read 7 ms late
                f"{T0 + 2.0:.6f} input click 224 184",
                f"{T0 + 2.5:.6f} input click 224 184",  # nothing came back
                f"{T0 + 2.9:.6f} upd",  # cut short
            ]
        )
    )
    assert log.error is None and len(log.updates) == 3 and len(log.inputs) == 4
    got = rfb_times([(T0 + 1.0, T0 + 1.9), (T0 + 2.4, T0 + 3.0), (T0 + 3.0, np.inf)], log)
    ms, n, kernel = got["client_ms"], got["client_updates"], got["client_kernel_ms"]
    assert round(ms[0], 3) == 50.0 and n[0] == 2 and round(kernel[0], 3) == 42.9
    assert np.isnan(ms[1]) and n[1] == 0
    assert np.isnan(ms[2])  # no input in the window
    assert np.isnan(log.updates[0][3])  # a line without the kernel's time (older logs)
    assert RfbLog.parse(f"{T0:.6f} error the server closed the connection").error == "the server closed the connection"


def test_rfb_times_start_at_the_kernels_transmit_stamp_when_logged() -> None:
    # The measured case (x11vnc fill on wan-loss-1): the click was sent at T0 + 1.0 but
    # left 126.8 ms later (TCP recovering a lost request); the update was read at
    # +216.1 ms. From the stamp the client says 89.3 ms, from the send 216.1 ms.
    log = RfbLog.parse(
        "\n".join(
            [
                f"{T0 + 0.5:.6f} input key ffbe tx={T0 + 0.5001:.6f}",
                f"{T0 + 1.0:.6f} input click 224 184 tx={T0 + 1.1268:.6f}",
                f"{T0 + 1.2161:.6f} update 1 412 {T0 + 1.2160:.6f}",
                f"{T0 + 2.0:.6f} input click 224 184 sched={T0 + 2.0003:.6f}",  # a device without driver stamps
                f"{T0 + 2.05:.6f} update 1 412 {T0 + 2.0499:.6f}",
                f"{T0 + 3.0:.6f} input key 61 tx=0.000000",  # the kernel gave none
                f"{T0 + 3.02:.6f} update 1 412 {T0 + 3.0199:.6f}",
                f"{T0 + 4.0:.6f} input key 61",  # a log from before the stamps
                f"{T0 + 4.03:.6f} update 1 412 {T0 + 4.0299:.6f}",
            ]
        )
    )
    assert [w for _, w in log.inputs] == ["key ffbe", "click 224 184", "click 224 184", "key 61", "key 61"]
    assert [k for k, _ in log.tx] == ["tx", "tx", "sched", "", ""]
    got = rfb_times([(T0 + 0.9, T0 + 1.9), (T0 + 1.9, T0 + 2.9), (T0 + 2.9, T0 + 3.9), (T0 + 3.9, np.inf)], log)
    assert list(got["client_start"]) == ["tx", "sched", "send", "send"]
    assert list(got["client_ms"].round(3)) == [89.3, 49.7, 20.0, 30.0]
    assert list(got["client_send_ms"].round(3)) == [216.1, 50.0, 20.0, 30.0]
    assert round(got["client_kernel_ms"][0], 3) == 89.2 and round(got["client_tx_lag_ms"][0], 3) == 126.8
    assert np.isnan(got["client_tx_lag_ms"][2]) and np.isnan(got["t_client_tx"][3])


def test_rfb_timing_problems_use_the_client_column() -> None:
    df = pd.DataFrame(
        {
            "operation": ["letter", "fill", "image"],
            "repeat": [0, 0, 0],
            "latency_ms": [10.0, 9.0, 120.0],
            "client_ms": [10.9, 10.3, np.nan],
            "client_kernel_ms": [10.8, 9.1, np.nan],
        }
    )
    # The socket's receive time decides (fill: read 1.3 ms late, received 0.1 ms after
    # the analyser's end: the client waited for a CPU, the analyser is right).
    got = timing_problems(df, "rfb")
    assert len(got) == 1 and got[0].startswith("client timing (rfb): image #0: the RFB client received no update")
    # A socket receive time that disagrees is named, with both times.
    late = timing_problems(df.assign(client_kernel_ms=10.3), "rfb")
    assert len(late) == 2 and late[0].startswith("client timing (rfb): fill #0: the analyser says 9.0 ms")
    assert "its socket stamped the last segment at 10.3 ms" in late[0]
    # Without a socket time the read time decides.
    assert len(timing_problems(df.drop(columns=["client_kernel_ms"]), "rfb")) == 2
    assert timing_problems(df, "screen") == []  # no screen_ms column: not timed that way


def test_rfb_timing_brackets_the_analyser_between_socket_stamp_and_read() -> None:
    # After a loss the last segment the read copied had arrived out of order one RTT
    # before the retransmission that made it readable: the kernel's stamp (389.8 ms) is
    # early, the read (456.2 ms) right; the analyser's end (the retransmission, 456.0 ms)
    # lies between them (measured: x11vnc on wan-loss-1).
    df = pd.DataFrame(
        {
            "operation": ["image", "scroll", "fill"],
            "repeat": [11, 12, 3],
            "latency_ms": [456.0, 300.0, 500.0],
            "client_ms": [456.2, 456.2, 456.2],
            "client_kernel_ms": [389.8, 389.8, 389.8],
        }
    )
    got = timing_problems(df, "rfb")
    # Earlier than the stamp, or later than the read (beyond 5 %), is the analyser's error.
    assert [g.split(":")[1].strip() for g in got] == ["scroll #12", "fill #3"]
    assert "(+89.8 ms;" in got[0] and "(-43.8 ms;" in got[1]
    assert "stamped the last segment at 389.8 ms" in got[0]
    # The ends agree but the starts do not (x11vnc fill on wan-loss-1): the input left
    # the client 60.2 ms after its send, behind a retransmission; the message says so.
    t = 1795505257.322124
    held = pd.DataFrame(
        {
            "operation": ["fill"],
            "repeat": [12],
            "latency_ms": [155.869],
            "client_ms": [216.126],
            "client_kernel_ms": [215.941],
            "t_injected": [t],
            "t_input": [t + 0.060222],
        }
    )
    (msg,) = timing_problems(held, "rfb")
    assert "first client→server packet came 60.2 ms after the client sent its input" in msg
    assert "their ends are 0.0 ms apart" in msg
    assert "after the client sent" not in timing_problems(held.assign(t_input=t + 0.0002, latency_ms=100.0), "rfb")[0]
    # With the kernel's transmit stamp (the click left at +126.8 ms) the client's start
    # is the wire's; a window the retransmission opened is then named as the analyser's.
    stamped = held.assign(client_ms=89.3, t_client_tx=t + 0.126757)
    (msg,) = timing_problems(stamped, "rfb")
    assert "came -66.5 ms from when the input left the client" in msg and "not the input" in msg
    assert timing_problems(stamped.assign(t_input=t + 0.126757, latency_ms=89.3), "rfb") == []


# -- the client itself, against a fake server on loopback --------------------------------


def _fake_server(sock: socket.socket, script: list[bytes], got: list[bytes]) -> None:
    """Accept one client: RFB 3.8 handshake with security None, then for each client
    message of type 3 (a request) send the next entry of ``script``; record what came."""
    conn, _ = sock.accept()
    with conn:
        conn.sendall(b"RFB 003.008\n")
        assert conn.recv(12) == b"RFB 003.008\n"
        conn.sendall(b"\x01\x01")
        assert conn.recv(1) == b"\x01"
        conn.sendall(struct.pack(">I", 0))
        assert conn.recv(1) == b"\x01"  # shared
        conn.sendall(struct.pack(">HH", 320, 240) + bytes(16) + struct.pack(">I", 4) + b"test")
        buf = b""
        sizes = {0: 20, 2: None, 3: 10, 4: 8, 5: 6}
        # Serve the script; once it is done, read until the client has been quiet for
        # 0.5 s (its inputs), then close.
        conn.settimeout(0.5)
        while True:
            try:
                data = conn.recv(4096)
            except TimeoutError:
                if script:
                    continue
                return
            if not data:
                return
            buf += data
            while buf:
                t = buf[0]
                n = 4 + 4 * struct.unpack(">H", buf[2:4])[0] if t == 2 and len(buf) >= 4 else sizes.get(t)
                if n is None or len(buf) < n:
                    break
                got.append(buf[:n])
                buf = buf[n:]
                if t == 3 and script:
                    conn.sendall(script.pop(0))


def _run_client(tmp_path: Path, script: list[bytes], commands: list[str]) -> tuple[int, list[str], list[bytes]]:
    srv = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []
    th = threading.Thread(target=_fake_server, args=(srv, script, got), daemon=True)
    th.start()
    with _client(tmp_path, srv, th) as (p, fd, first):
        for c in commands:
            os.write(fd, (c + "\n").encode())
            time.sleep(0.05)
        os.close(fd)
        out = rest_of(p, p.stdout, timeout=10)
    return p.returncode, [first, *out.splitlines()], got


@contextlib.contextmanager
def _client(tmp_path: Path, srv: socket.socket, server: threading.Thread) -> Iterator[tuple[Any, int, str]]:
    """rfbclient.py against ``srv`` (served by the thread ``server``): yields the process,
    the write end of its command FIFO and its ready line; kills it, closes ``srv`` and
    joins the thread on the way out."""
    fifo = tmp_path / "cmd"
    os.mkfifo(fifo)
    p = subprocess.Popen(
        [sys.executable, "-u", str(RFBCLIENT), "127.0.0.1", str(srv.getsockname()[1]), str(fifo)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        first = p.stdout.readline()
        assert " ready 320 240" in first, first
        yield p, os.open(fifo, os.O_WRONLY), first
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        srv.close()
        server.join(timeout=6)


def test_client_requests_after_each_update_and_logs_inputs(tmp_path: Path) -> None:
    u1 = update(raw(4, 4))
    u2 = update(COPY, zrle(b"x" * 100))
    rc, lines, got = _run_client(tmp_path, [u1, u2], ["key a", "click 10 20"])
    kinds = [m[0] for m in got]
    # SetPixelFormat, SetEncodings, the first (non-incremental) request, then one
    # incremental request after each update, and the inputs.
    assert kinds[:3] == [0, 2, 3] and got[2][1] == 0
    assert sum(1 for m in got if m[0] == 3 and m[1] == 1) == 2
    assert [m for m in got if m[0] == 4] == [struct.pack(">BBxxI", 4, 1, 0x61), struct.pack(">BBxxI", 4, 0, 0x61)]
    assert [m for m in got if m[0] == 5] == [struct.pack(">BBHH", 5, 1, 10, 20), struct.pack(">BBHH", 5, 0, 10, 20)]
    log = RfbLog.parse("\n".join(lines))
    assert [u[1:3] for u in log.updates] == [(1, len(u1)), (2, len(u2))]
    # The kernel's receive time of each (SO_TIMESTAMPNS) is there and not after the read.
    assert all(0 < t_k <= t + 1e-6 for t, _, _, t_k in log.updates)
    assert [w for _, w in log.inputs] == ["key 61", "click 10 20"]
    # Each input's transmit stamp (SO_TIMESTAMPING; on loopback the driver's software
    # stamp): there, not before its send call, and within the test's pace of it.
    assert [k for k, _ in log.tx] == ["tx", "tx"], lines
    assert all(t <= t_tx < t + 0.05 for (t, _), (_, t_tx) in zip(log.inputs, log.tx))
    # The server closed the connection after its script: an error line, status 1.
    assert rc == 1 and log.error == "the server closed the connection"


def test_client_stamps_an_input_tcp_held_back_when_it_left(tmp_path: Path) -> None:
    """A server that reads nothing for 1 s with a small receive buffer closes its window
    (RFC 9293 §3.8.6): 2000 pointer moves fill it, and the click after them waits in the
    client's socket until the server reads again — as the measured click on `wan-loss-1`
    waited behind a lost request. Its transmit stamp is when it left (≥ 0.5 s after its
    send), every move has one (sends appended to a segment not yet sent share the stamp
    of its last byte), and the stamps never go backwards."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)  # inherited by the accepted socket
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    reads: list[float] = []

    def stalled() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"RFB 003.008\n")
            conn.recv(12)
            conn.sendall(b"\x01\x01")
            conn.recv(1)
            conn.sendall(struct.pack(">I", 0))
            conn.recv(1)
            conn.sendall(struct.pack(">HH", 320, 240) + bytes(16) + struct.pack(">I", 4) + b"test")
            time.sleep(1.0)
            conn.settimeout(4.0)
            try:
                while conn.recv(65536):
                    reads.append(time.time())
            except TimeoutError:
                pass

    th = threading.Thread(target=stalled, daemon=True)
    th.start()
    with _client(tmp_path, srv, th) as (p, fd, _):
        os.write(fd, b"".join(f"move {i % 300} 1\n".encode() for i in range(2000)))
        time.sleep(0.05)
        os.write(fd, b"click 10 20\n")
        time.sleep(2.0)
        os.write(fd, b"quit\n")
        os.close(fd)
        out = rest_of(p, p.stdout, timeout=10)
    log = RfbLog.parse(out)
    assert len(log.inputs) == 2001 and log.inputs[-1][1] == "click 10 20"
    assert all(k == "tx" for k, _ in log.tx), {k for k, _ in log.tx}
    stamps = [t for _, t in log.tx]
    assert all(a <= b for a, b in zip(stamps, stamps[1:]))
    sent, left = log.inputs[-1][0], stamps[-1]
    assert left - sent >= 0.5, f"the click left {1e3 * (left - sent):.1f} ms after its send"
    assert reads and left <= reads[-1], "and before the server read the last of it"


def test_client_truncated_update_is_an_error_exit(tmp_path: Path) -> None:
    rc, lines, _ = _run_client(tmp_path, [update(raw(8, 8))[:-10]], [])
    assert rc == 1
    assert "error stream ended inside a message" in lines[-1]


def test_report_timing_table_shows_the_source_and_reads_old_documents() -> None:
    from thinwan.report.desktop_page import timing_table

    def entry(source: str, agree: int, client: str = "client_ms") -> dict[str, object]:
        return {
            "source": source,
            "inputs": 3,
            "timed": 3,
            "agree": agree,
            "diff_ms_median": 0.2,
            "diff_ms_min": 0.1,
            "diff_ms_max": 1.4,
            "worst": {"operation": "fill", "repeat": 1, "latency_ms": 9.0, client: 10.4},
            "pass": agree == 3,
        }

    old = entry("screen", 2, client="screen_ms")
    del old["source"]  # written before the RFB source existed
    text = timing_table({"tigervnc/lan": {**entry("rfb", 3), "screen": entry("screen", 2)}, "x11/lan": old})
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["platform/env", "source", "agree"]
    assert lines[2].split()[:3] == ["tigervnc/lan", "rfb", "3/3"] and lines[2].endswith("pass")
    assert lines[3].split()[:2] == ["(screen)", "2/3"] and lines[3].endswith("FAIL")
    assert lines[4].split()[:3] == ["x11/lan", "screen", "2/3"] and "9.0 vs 10.4 ms" in lines[4]


# -- a recorded timing pass -------------------------------------------------------------

RECORDED = Path(__file__).with_name("data") / "tigervnc-wan-rfb"
ADDR = {"server": "198.18.1.1", "client": "198.18.2.1"}


def _recorded(tmp_path: Path, edit: Any = None) -> Path:
    """TigerVNC over the 66-ms `wan`, the RFB client's pass cut to letter, scroll and fill
    (3 each; rfb.pcap, rfbclient.log, inputs.json, desktop.json), as a run leaves it."""
    d = tmp_path / "tigervnc" / "wan" / "rfb-timing"
    shutil.copytree(RECORDED, d)
    if edit is not None:
        log = d / "rfbclient.log"
        log.write_text(edit(log.read_text()))
    return d


def test_recorded_pass_agrees_and_a_late_socket_time_fails_it(tmp_path: Path) -> None:
    from thinwan.execute.desktop_runs import _check, analyse_rfb_pass

    df = analyse_rfb_pass(_recorded(tmp_path / "a"), 50.0, ADDR)
    assert list(df["operation"]) == ["letter"] * 3 + ["scroll"] * 3 + ["fill"] * 3
    assert list(df["repeat"]) == [10, 11, 12] * 3 and df["env"].eq("wan").all()
    assert (df["client_updates"] == 1).all()
    # One RTT (66 ms) plus the server: 75–79 ms; the kernel had each last update 0.01–0.03
    # ms after the capture, the client read it 0.04–0.33 ms after — except scroll #12,
    # read 3.2 ms late (the client waited for a CPU), inside 5 %.
    assert df["latency_ms"].between(75.0, 79.0).all()
    assert (df["client_kernel_ms"] - df["latency_ms"]).between(0.0, 0.05).all()
    assert round(float(df["client_diff_ms"].max()), 1) == 3.2
    assert _check(df, True, df) == []
    # The same pass with fill #11's update received 6 ms later at the socket (as if the
    # analyser had ended the update early): the check names it. Read 6 ms later only,
    # it is the client's wait for a CPU and passes.
    line = "1795494610.961097 update 5 135 1795494610.960786"  # its update line: read, rects, bytes, socket

    def late_socket(text: str) -> str:
        assert line in text
        return text.replace(line, "1795494610.967097 update 5 135 1795494610.966786")

    def late_read(text: str) -> str:
        return text.replace(line, "1795494610.967097 update 5 135 1795494610.960786")

    bad = analyse_rfb_pass(_recorded(tmp_path / "b", late_socket), 50.0, ADDR)
    problems = _check(bad, True, bad)
    assert len(problems) == 1 and problems[0].startswith("client timing (rfb): fill #11: the analyser says 75.7 ms")
    slow = analyse_rfb_pass(_recorded(tmp_path / "slow", late_read), 50.0, ADDR)
    assert _check(slow, True, slow) == []
    # A client that stopped on a parse error: the pass cannot be trusted.
    with pytest.raises(CaptureError, match="stopped on an error: unknown server message type 9"):
        analyse_rfb_pass(
            _recorded(tmp_path / "c", lambda t: t + "1795494613.0 error unknown server message type 9\n"), 50.0, ADDR
        )

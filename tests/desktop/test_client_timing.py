"""The client-timing self-check (docs/desktop.md "Self-checks") on hand-built inputs: the
screen watcher's log → the moment the client's screen first showed each operation's final
picture, compared with the analyser's latency; a disagreement fails the run naming the
operation (and, from the runner, the platform and environment). No root, no X server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dpkt
import numpy as np
import pandas as pd
from tests.captures import tcp_frame

from thinwan.analysis.desktop_ops import ScreenLog, screen_times, timing_problems
from thinwan.config.desktop_bench import bench_from_data
from thinwan.execute.desktop_runs import _check, analyse_run

T0 = 1_700_000_000.0
AREA = (64, 64, 320, 240)
SRV, CLI = "198.18.1.1", "198.18.2.1"


def inputs(*t_inputs: float) -> pd.DataFrame:
    return pd.DataFrame({"t_input": [T0 + t for t in t_inputs]})


def windows(*edges: float) -> list[tuple[float, float]]:
    return [(T0 + a, T0 + b) for a, b in zip(edges[:-1], edges[1:])]


def log(lines: list[str]) -> ScreenLog:
    return ScreenLog.parse("\n".join(lines))


def test_parse_reads_both_kinds_of_line_and_skips_a_cut_one() -> None:
    s = log(
        [
            f"{T0:.6f} area 0000aaaa 0",
            f"{T0:.6f} ready",
            f"{T0 + 1:.6f} 71 75 10 9",
            f"{T0 + 1:.6f} area 0000bbbb 0.41",
            f"{T0 + 2:.6f} 0 0 10",  # the watcher stopped mid-line
            f"{T0 + 2:.6f} area",
        ]
    )
    assert s.changes == [(T0 + 1, 71, 75, 10, 9)]
    assert s.areas == [(T0, "0000aaaa"), (T0 + 1, "0000bbbb")]


def test_a_repaint_with_the_same_picture_does_not_move_the_time() -> None:
    """TigerVNC's fullscreen notice fading out: ~30 full-screen repaints at 60 Hz from
    ~70 ms after the first letter, each a DAMAGE report over the application's area, but
    the area's pixels stay those of the letter. The letter was shown at 10.3 ms."""
    lines = [f"{T0:.6f} area white 0", f"{T0 + 1.0103:.6f} 71 75 10 9", f"{T0 + 1.0103:.6f} area A1 0.4"]
    for k in range(30):
        t = T0 + 1.08 + k / 60
        lines += [f"{t:.6f} 0 0 1024 768", f"{t:.6f} area A1 0.5"]
    s = log(lines)
    got = screen_times(inputs(1.0), windows(0.999, 2.0), s, AREA)
    assert round(got[0], 3) == 10.3
    # The last DAMAGE report (what the check compared before) would say ~570 ms.
    old = screen_times(inputs(1.0), windows(0.999, 2.0), ScreenLog(changes=s.changes), AREA)
    assert old[0] > 550


def test_a_changing_picture_counts_at_its_last_change() -> None:
    """A lossy update at 12 ms, its lossless refresh at 110 ms (TigerVNC's scroll): the
    final picture is the refresh's; a picture drawn and then drawn again differently
    counts at the last drawing; a window that ends on the picture it started with
    (nothing new) has no time."""
    s = log(
        [
            f"{T0:.6f} area white 0",
            f"{T0 + 1.012:.6f} area lossy 0.4",
            f"{T0 + 1.110:.6f} area exact 0.4",
            f"{T0 + 1.300:.6f} area exact 0.4",  # a same-picture repaint
            f"{T0 + 2.010:.6f} area red 0.4",
            f"{T0 + 2.020:.6f} area white 0.4",
            f"{T0 + 2.030:.6f} area red 0.4",
            f"{T0 + 3.005:.6f} area red 0.4",  # redrawn the same: nothing new for input 3
        ]
    )
    got = screen_times(inputs(1.0, 2.0, 3.0, 4.0), windows(0.9, 1.9, 2.9, 3.9, 5.0), s, AREA)
    assert np.round(got[:2], 3).tolist() == [110.0, 30.0]
    assert np.isnan(got[2]) and np.isnan(got[3])


def test_without_hashes_the_last_change_inside_the_area_counts() -> None:
    """Logs written before the watcher hashed: the last DAMAGE report that touches the
    area (the report outside it at 1.050 s does not count)."""
    s = log([f"{T0 + 1.009:.6f} 70 70 10 10", f"{T0 + 1.010:.6f} 100 100 5 5", f"{T0 + 1.050:.6f} 500 10 5 5"])
    assert round(screen_times(inputs(1.0), windows(0.9, 2.0), s, AREA)[0], 3) == 10.0


def rows(*triples: tuple[str, float, float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"operation": op, "repeat": i, "latency_ms": lat, "screen_ms": scr, "screen_diff_ms": scr - lat}
            for i, (op, lat, scr) in enumerate(triples)
        ]
    )


def test_timing_problems_name_the_operation_and_tolerate_5_percent_or_1_ms() -> None:
    ok = rows(("letter", 10.0, 10.9), ("scroll", 700.0, 734.0), ("fill", 0.8, 1.7))
    assert timing_problems(ok) == []
    bad = rows(("letter", 10.0, 8.0), ("fill", 9.3, np.nan), ("image", 700.0, 660.0))
    got = timing_problems(bad)
    assert len(got) == 3
    assert got[0].startswith("client timing: letter #0: the analyser says 10.0 ms") and "8.0 ms" in got[0]
    assert got[1].startswith("client timing: fill #1: the client's screen never showed")
    assert got[2].startswith("client timing: image #2:")
    # A screen final later than the analyser's end is the client's drawing (no packet
    # arrived in between): recorded, not a failure; the RFB receive time counts both ways.
    late = rows(("letter", 10.0, 580.0), ("image", 700.0, 740.0))
    assert timing_problems(late) == []
    rfb = late.rename(columns={"screen_ms": "client_ms"})
    assert len(timing_problems(rfb, "rfb")) == 2
    # Not timed at all (no screen watcher): nothing to check, nothing to fail.
    assert timing_problems(bad.drop(columns=["screen_ms"])) == []
    assert timing_problems(bad.assign(screen_ms=np.nan)) == []


def write_run(run_dir: Path, late_ms: float, same_picture: bool) -> None:
    """A recorded-like run directory (what ``desktop run`` keeps): one `fill` on a LAN —
    click at 1.000 s, the update 9 ms later — and a screen log in which the area turns red
    at 9.5 ms and is painted again ``late_ms`` after the click, with the same picture or
    with another one."""
    run_dir.mkdir(parents=True)
    pkts = [
        (T0 + 0.100, tcp_frame(SRV, CLI, 5900, 40000, 1, b"s" * 20)),  # the bring-up's last update
        (T0 + 1.000, tcp_frame(CLI, SRV, 40000, 5900, 1, b"c" * 12)),  # the click (RFB PointerEvent)
        (T0 + 1.009, tcp_frame(SRV, CLI, 5900, 40000, 21, b"u" * 300)),  # the update
    ]
    with (run_dir / "run.pcap").open("wb") as f:
        w = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_EN10MB)
        for t, frame in pkts:
            w.writepkt(frame, ts=t)
    late = f"{T0 + 1 + late_ms / 1e3:.6f}"
    (run_dir / "run-screen.log").write_text(
        "\n".join(
            [
                f"{T0:.6f} area white 0",
                f"{T0:.6f} ready",
                f"{T0 + 1.0095:.6f} 64 64 320 240",
                f"{T0 + 1.0095:.6f} area red 0.5",
                f"{late} 0 0 1024 768",
                f"{late} area {'red' if same_picture else 'other'} 0.5",
            ]
        )
        + "\n"
    )
    rec = {"op": "fill", "index": 0, "t_reset": T0 + 0.5, "t_input": T0 + 0.999, "t_input_done": T0 + 1.001}
    rec |= {"t_settled": T0 + 2.0, "waited_s": 1.0, "settled": True, "verified": True}
    (run_dir / "inputs.json").write_text(json.dumps([rec]))
    settings = {"app_x": 64, "app_y": 64}
    (run_dir / "desktop.json").write_text(
        json.dumps({"platform": "tigervnc", "server_port": 5900, "settings": settings})
    )


def test_a_late_new_picture_is_recorded_a_same_picture_repaint_ignored(tmp_path: Path) -> None:
    addr = {"server": SRV, "client": CLI}
    write_run(tmp_path / "a" / "lan", 450.0, same_picture=True)
    write_run(tmp_path / "b" / "lan", 450.0, same_picture=False)
    a = analyse_run(tmp_path / "a" / "lan", 500.0, addr)
    b = analyse_run(tmp_path / "b" / "lan", 500.0, addr)
    assert round(a["latency_ms"][0], 3) == round(b["latency_ms"][0], 3) == 9.0
    assert round(a["screen_ms"][0], 3) == 9.5 and _check(a) == []
    # A new picture 450 ms after the input with no packet after 9 ms: the client changed
    # its screen by itself, which the analyser cannot have missed (the check is one-sided,
    # timing_problems); the row keeps the disagreement for the report.
    assert round(b["screen_ms"][0], 3) == 450.0 and round(b["screen_diff_ms"][0], 3) == 441.0
    assert _check(b) == []
    # The screen final before the analyser's end (it counted traffic that changed nothing) fails.
    early = b.assign(latency_ms=600.0)
    problems = _check(early)
    assert len(problems) == 1 and problems[0].startswith("client timing: fill #0: the analyser says 600.0 ms")
    # The user's choice: report only.
    assert _check(early, client_timing=False) == []


def test_the_option_is_read_from_the_file_and_the_command_line() -> None:
    assert bench_from_data({}).client_timing == "fail"
    b = bench_from_data({"benchmark": {"client_timing": "report"}})
    assert b.client_timing == "report" and b.select(client_timing="fail").client_timing == "fail"


def test_an_environment_overrides_the_idle_watch_and_the_start_up_limit() -> None:
    from thinwan.substrates.desktop import DesktopSettings
    from thinwan.substrates.desktop.envlab import env_settings

    b = bench_from_data(
        {
            "benchmark": {"envs": ["wan", "wan-loss-10", "slow"]},
            "desktop": {"ready_timeout_s": 45.0},
            "env": {"slow": {"rtt_ms": 600.0, "ready_timeout_s": 300.0}},
        }
    )
    base = DesktopSettings(**b.desktop)
    assert base.ready_timeout_s == 45.0
    wan, lossy, slow = (env_settings(base, b.envs[e]) for e in ("wan", "wan-loss-10", "slow"))
    assert (wan.idle_s, wan.ready_timeout_s) == (base.idle_s, 45.0)
    assert (lossy.idle_s, lossy.ready_timeout_s) == (2.0, 120.0)
    assert (slow.idle_s, slow.ready_timeout_s) == (base.idle_s, 300.0)


# Recorded runs (tests/desktop/data, cut down from `desktop run` output directories with
# their pcap, screen-watcher log, inputs.json and desktop.json).
DATA = Path(__file__).with_name("data")
LAB = {"server": SRV, "client": CLI}


def recorded(name: str, tmp_path: Path) -> pd.DataFrame:
    run_dir = tmp_path / name / "lan"
    shutil.copytree(DATA / name / "lan", run_dir)
    return analyse_run(run_dir, 500.0, LAB)


def test_recorded_x11_keys_agree_with_the_screen(tmp_path: Path) -> None:
    """Plain X on the LAN, keys pressed and released together: 10 `letter` and 4
    `scroll`; the screen shows the final picture 0.05–1 ms after the last packet."""
    got = recorded("x11-lan-keys", tmp_path)
    assert got["operation"].tolist() == ["letter"] * 10 + ["scroll"] * 4
    assert _check(got) == []
    assert got["screen_diff_ms"].between(0.0, 1.0).all(), got["screen_diff_ms"].tolist()


def test_recorded_x11vnc_clipboard_message_fails_the_check(tmp_path: Path) -> None:
    """x11vnc before -nosel: 175 ms after `scroll` #2 was on the screen it sent an empty
    ServerCutText (8 bytes), which the analyser — decoding nothing — took as the end of
    the update. The check catches it; #1 (no such message) passes."""
    got = recorded("x11vnc-lan-scroll", tmp_path)
    problems = _check(got)
    assert len(problems) == 1 and problems[0].startswith("client timing: scroll #2: the analyser says 209.5 ms")
    assert round(got["screen_ms"][1], 1) == 34.6

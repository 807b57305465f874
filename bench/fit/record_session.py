"""Record a real remote-desktop session across the lab, captured at the client (issue 19 item 5).

    sudo .venv/bin/python -m bench.fit.record_session --out scenarios/fitted/tigervnc-wan.pcap

Brings a platform (default TigerVNC) up across a lab whose emulated path is one of the
desktop benchmark's environments (default ``wan``: 66 ms RTT, 45 Mbit/s), with the
desktop benchmark's own code (:class:`thinwan.substrates.desktop.Desktop` and its client
side tcpdump, :class:`~thinwan.substrates.desktop.tcpdump.Capture`: headers plus a few
payload bytes, ``SNAPLEN`` = 192, no packet lost or the recording fails), then plays a
seeded, scripted user for ``--minutes``: bursts of typing at a typist's pace, paging
through text, opening images and filling the area, with think times between them —
the benchmark application's operations (``letter``, ``scroll``, ``image``,
``red_bitmap``, ``fill``) driven at a user's pace instead of in slow motion — and, when
Chromium is installed, reading a long local web page (text and photographs) beside the
application, scrolled with the mouse wheel. Writes
the capture, ``<out>.png`` (the client's screen at the end) and ``<out>.json`` (platform, versions, environment, script, seed, the
actions with their wall-clock times, capture counters, command, date), from which a
README gives the provenance. Needs root (namespaces) and the desktop set-up
(``scripts/setup-desktop.sh``).

No fitting here: ``thinwan fit`` reads the capture (server port in ``<out>.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform as host_platform
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from thinwan import __version__
from thinwan.config.desktop_bench import BUILTIN_ENVS
from thinwan.records.meta import git_revision
from thinwan.substrates.desktop import Desktop, DesktopError, DesktopSettings
from thinwan.substrates.desktop.envlab import env_json, env_lab_spec
from thinwan.substrates.desktop.procs import start_proc
from thinwan.substrates.desktop.session import subprocess_run
from thinwan.substrates.desktop.settings import APP_H, APP_W
from thinwan.substrates.desktop.tcpdump import SNAPLEN, Capture
from thinwan.substrates.lab.topology import Lab

# The user's script: (activity, weight). Each activity is a run of the application's
# operations; the weights make typing the most common, as in an editing session.
ACTIVITIES = (("type", 0.45), ("scroll", 0.2), ("image", 0.1), ("red_bitmap", 0.05), ("fill", 0.05), ("browse", 0.15))
# The browser's window on the remote desktop, right of the application (x, y, w, h).
BROWSER = (420, 40, 580, 700)
BROWSER_START_S = 10.0  # Chromium's start and first paint before the session begins
# A typist's pace: inter-key time lognormal, median 180 ms (≈ 55 words a minute), σ 0.5.
KEY_MEDIAN_S, KEY_SIGMA = 0.18, 0.5
# Think time between activities: exponential, mean 2 s; between page-downs: 0.3–1.5 s.
THINK_MEAN_S = 2.0
PAGE_GAP_S = (0.3, 1.5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the pcap to write (its .json beside it)")
    ap.add_argument("--platform", default="tigervnc", help="desktop platform (default tigervnc)")
    ap.add_argument("--env", default="wan", choices=sorted(BUILTIN_ENVS), help="emulated path (default wan)")
    ap.add_argument("--minutes", type=float, default=3.0, help="length of the scripted session (default 3)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the user's script and of the lab (default 1)")
    ap.add_argument("--no-browser", action="store_true", help="leave the web page out even if Chromium is installed")
    a = ap.parse_args(argv)
    if a.minutes <= 0:
        ap.error("--minutes must be > 0")
    try:
        doc = record(a.out, a.platform, a.env, a.minutes * 60.0, a.seed, browser=not a.no_browser)
    except DesktopError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    doc["command"] = " ".join(["python -m bench.fit.record_session", *(argv if argv is not None else sys.argv[1:])])
    a.out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    c = doc["capture"]
    print(f"{a.out}: {c['packets']} packets, {a.out.stat().st_size / 1e6:.1f} MB, {len(doc['actions'])} actions")
    return 0


def record(out: Path, platform: str, env_name: str, seconds: float, seed: int, browser: bool = True) -> dict[str, Any]:
    """Bring the platform up, play the script for ``seconds`` while capturing at the
    client, and return the provenance document."""
    env = BUILTIN_ENVS[env_name]
    # Natural pace: no slow-motion pause after an input (the script's timing is the
    # user's), and no screen check (it would add screenshots between inputs).
    settings = DesktopSettings(pause_s=0.0, verify=False)
    rng = random.Random(seed)
    started = dt.datetime.now(dt.timezone.utc)
    with Lab(env_lab_spec(env, seed=seed), events=False) as lab, Desktop(platform, lab, settings) as d:
        out.parent.mkdir(parents=True, exist_ok=True)
        chromium = start_browser(d) if browser else None
        cap = Capture(lab.netns["client"], lab.tun["client"], out, d.dir)
        try:
            actions = play(d, rng, seconds, chromium is not None)
        except BaseException:
            cap.abort()
            raise
        result = cap.stop()
        # What the user saw at the end (the client's screen), beside the capture.
        d.screenshot(out.with_suffix(".png"))
        info = d.info()
    return {
        "platform": platform,
        "versions": info["versions"],
        "protocol": info["protocol"],
        "server_port": info["server_port"],
        "env": env_json(env, seed),
        "env_name": env_name,
        "seed": seed,
        "seconds": seconds,
        "script": {
            "activities": dict(ACTIVITIES),
            "key_median_s": KEY_MEDIAN_S,
            "key_sigma": KEY_SIGMA,
            "think_mean_s": THINK_MEAN_S,
            "page_gap_s": PAGE_GAP_S,
        },
        "desktop": info["settings"],
        "browser": chromium or "none (--no-browser, or Chromium not installed)",
        "capture": {**result.to_json(), "snaplen": SNAPLEN, "point": "client (tcpdump on the client's TUN)"},
        "actions": actions,
        "started_utc": started.isoformat(timespec="seconds"),
        "thinwan": {"version": __version__, "git_rev": git_revision()},
        "host": {"kernel": host_platform.release(), "python": host_platform.python_version()},
    }


def start_browser(d: Desktop) -> str | None:
    """Chromium on the remote desktop (the server's display) showing a long local page
    beside the application; its version, or None when it is not installed."""
    exe = shutil.which("chromium")
    if exe is None or d.server_x is None or d.images is None:
        return None
    page = d.dir / "page.html"
    photo = d.images.photo.name
    paragraphs = "".join(
        f"<h2>Section {i}</h2><p>{_TEXT}</p>" + (f'<img src="{photo}" width="520">' if i % 3 == 0 else "")
        for i in range(1, 41)
    )
    page.write_text(f"<!doctype html><html><body style='font:15px sans-serif'>{paragraphs}</body></html>")
    x, y, w, h = BROWSER
    argv = [
        exe,
        "--no-sandbox",  # as root in the lab's namespace
        "--no-first-run",
        "--disable-gpu",
        "--disable-features=Translate",
        f"--user-data-dir={d.dir / 'chromium'}",
        f"--window-position={x},{y}",
        f"--window-size={w},{h}",
        page.as_uri(),
    ]
    proc = start_proc(
        d.lab.netns["server"], "chromium", argv, d.dir / "chromium.log", env=d.display_env(d.server_x.name)
    )
    d.procs.append(proc)  # stopped with the desktop
    time.sleep(BROWSER_START_S)
    if not proc.alive():
        raise DesktopError(f"chromium: {proc.describe_exit()}")
    focus_app(d)
    return subprocess_version(exe)


def focus_app(d: Desktop) -> None:
    """Give the keyboard back to the application: Chromium takes the X input focus when
    its window maps (the bare X server has no window manager to refuse), and the user's
    keys would then reach it (F1 opens its help) instead of the application."""
    assert d.server_x is not None
    env = [f"{k}={v}" for k, v in d.display_env(d.server_x.name).items()]
    argv = ["ip", "netns", "exec", d.lab.netns["server"], "env", *env]
    argv += ["xdotool", "search", "--name", "^thinwan-deskapp$", "windowfocus", "--sync"]
    done = subprocess_run(argv, 10.0)
    if done.returncode != 0:
        raise DesktopError(f"cannot focus the application on the server's display: {done.stderr.strip()}")


def subprocess_version(exe: str) -> str:
    import subprocess

    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, check=False)
    return out.stdout.strip() or "chromium (version unknown)"


def browse(d: Desktop, rng: random.Random) -> int:
    """Read the web page: the pointer over it, a few wheel notches down, then back to the
    application so the next keys reach it (focus follows the pointer on the bare X
    server). Uses the desktop's own xdotool helper. Returns the notches."""
    x, y, w, h = BROWSER
    s = d.settings
    d._xdo("mousemove", "--sync", str(x + w // 2), str(y + h // 2))
    notches = rng.randint(2, 10)
    for _ in range(notches):
        d._xdo("click", "5")  # wheel down: scrolls the window under the pointer, no focus change
        time.sleep(rng.uniform(*PAGE_GAP_S))
    d._xdo("mousemove", "--sync", str(s.app_x + APP_W // 2), str(s.app_y + APP_H // 2))
    return notches


_TEXT = (
    "Thin-client traffic is a sequence of interactive flows, single packets that echo a "
    "keystroke, and bulk flows, blocks of packets that redraw part of the screen. " * 6
)


def play(d: Desktop, rng: random.Random, seconds: float, browser: bool) -> list[dict[str, Any]]:
    """The scripted user: activities drawn by weight until ``seconds`` have passed."""
    acts = [(n, w) for n, w in ACTIVITIES if browser or n != "browse"]
    names, weights = zip(*acts, strict=True)
    end = time.monotonic() + seconds
    actions: list[dict[str, Any]] = []

    def op(name: str) -> None:
        rec = d.do(name)
        actions.append({"op": name, "t_input": rec.t_input, "t_reset": rec.t_reset})

    while time.monotonic() < end:
        activity = rng.choices(names, weights)[0]
        if activity == "type":
            # A word or a few: 3–40 keystrokes at a typist's pace.
            for _ in range(rng.randint(3, 40)):
                op("letter")
                time.sleep(rng.lognormvariate(_ln(KEY_MEDIAN_S), KEY_SIGMA))
        elif activity == "browse":
            t = time.time()
            actions.append({"op": "browse", "t_input": t, "notches": browse(d, rng)})
        elif activity == "scroll":
            for _ in range(rng.randint(1, 6)):
                op("scroll")
                time.sleep(rng.uniform(*PAGE_GAP_S))
        else:
            op(activity)
        time.sleep(rng.expovariate(1.0 / THINK_MEAN_S))
    return actions


def _ln(x: float) -> float:
    import math

    return math.log(x)


if __name__ == "__main__":
    sys.exit(main())

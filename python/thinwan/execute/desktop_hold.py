"""``thinwan desktop up`` / ``down``: one platform kept up across an emulated WAN for a
user to look at and type into.

``up`` starts a *holder* — ``thinwan desktop _hold`` in its own session — that brings a
lab and the desktop up, writes ``/run/thinwan/desktop/<id>/state.json`` (``status``:
``starting`` → ``up`` or ``failed``) and then sleeps until SIGTERM, when it tears both
down (the same path as Ctrl-C in a run) and removes its state directory. ``down`` sends
SIGTERM and waits; a holder that is gone (killed) leaves a lab that ``down`` — or
``thinwan lab clean`` — removes, and a state directory that ``down`` removes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..config.desktop_bench import Env
from ..substrates.desktop import Desktop, DesktopError, DesktopSettings
from ..substrates.desktop.envlab import env_lab_spec, env_settings
from ..substrates.lab import netns
from ..substrates.lab.netns import LabError
from ..substrates.lab.topology import Lab

__all__ = ["start_holder", "hold", "down", "STATE_ROOT"]

STATE_ROOT = Path(os.environ.get("THINWAN_DESKTOP_STATE", "/run/thinwan/desktop"))
# How long `desktop up` waits beyond the platform's own start-up limit (its
# ready_timeout_s, which the holder writes into its state): the lab and the servers.
UP_TIMEOUT_S = 60.0


def start_holder(platform: str, env: str, bench: str | None) -> dict[str, Any]:
    """Start the holder and wait until the desktop is up; its state (with ``describe``)."""
    netns.require_root()
    desk_id = f"dk-{os.urandom(3).hex()}"
    state_dir = STATE_ROOT / desk_id
    state_dir.mkdir(parents=True)
    argv = [sys.executable, "-m", "thinwan", "desktop", "_hold", platform, "--env", env, "--state", str(state_dir)]
    if bench:
        argv += ["--bench", str(Path(bench).resolve())]
    with open(state_dir / "holder.log", "wb") as logf:
        holder = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True)
    start = time.monotonic()
    limit = UP_TIMEOUT_S + DesktopSettings.ready_timeout_s
    while time.monotonic() - start < limit:
        st = _read(state_dir)
        if st:
            limit = UP_TIMEOUT_S + st.get("ready_timeout_s", DesktopSettings.ready_timeout_s)
        if st and st.get("status") == "up":
            return st
        if st and st.get("status") == "failed" or holder.poll() is not None:
            holder.wait(timeout=60)
            reason = (st or {}).get("error") or _tail(state_dir / "holder.log")
            shutil.rmtree(state_dir, ignore_errors=True)
            raise LabError(f"desktop up {platform}: {reason}")
        time.sleep(0.2)
    down(desk_id)
    raise LabError(f"desktop up {platform}: not up after {limit:g} s")


def hold(platform: str, env_name: str, env: Env, desktop: dict[str, Any], state_dir: Path) -> int:
    """The holder: up, state, sleep until SIGTERM, down."""
    state: dict[str, Any] = {"id": state_dir.name, "pid": os.getpid(), "platform": platform, "env": env_name}
    _write(state_dir, {**state, "status": "starting"})
    old = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with Lab(env_lab_spec(env)) as lab:
            settings = env_settings(DesktopSettings(**desktop), env)
            state.update(lab=lab.id, ready_timeout_s=settings.ready_timeout_s)
            _write(state_dir, {**state, "status": "starting"})
            with Desktop(platform, lab, settings, workdir=state_dir) as d:
                info = d.info()
                state.update(
                    status="up",
                    netns=lab.netns,
                    client_display=info["displays"]["client"],
                    xauthority=str(d.xauthority),
                    server_port=d.server_port,
                    dir=str(d.dir),
                    rtt_ms=env.rtt_ms,
                )
                state["describe"] = _describe(state)
                _write(state_dir, state)
                while True:
                    signal.pause()
    except KeyboardInterrupt:
        return 0
    except (DesktopError, LabError) as e:
        _write(state_dir, {**state, "status": "failed", "error": str(e)})
        return 1
    finally:
        signal.signal(signal.SIGTERM, old)
        if _read(state_dir).get("status") != "failed":
            shutil.rmtree(state_dir, ignore_errors=True)


def down(desk_id: str | None = None) -> list[str]:
    """Stop the holder(s) (all, or ``desk_id``) and remove what a dead one left."""
    netns.require_root()
    removed: list[str] = []
    if not STATE_ROOT.is_dir():
        if desk_id:
            raise LabError(f"no desktop {desk_id} (none is up)")
        return removed
    dirs = [STATE_ROOT / desk_id] if desk_id else sorted(STATE_ROOT.iterdir())
    for d in dirs:
        if not d.is_dir():
            raise LabError(f"no desktop {d.name} (see /run/thinwan/desktop)")
        st = _read(d)
        pid = st.get("pid")
        if netns.pid_alive(pid) and "thinwan" in netns.pid_cmdline(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 60
            while netns.pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if netns.pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
            removed.append(f"desktop {d.name} ({st.get('platform')}, holder pid {pid})")
        if st.get("lab") and netns.read_state(st["lab"]) is not None:
            removed += netns.teardown(st["lab"])
        if d.exists():
            shutil.rmtree(d, ignore_errors=True)
            removed.append(f"state {d}")
    return removed


def _describe(st: dict[str, Any]) -> str:
    ns, disp, xa = st["netns"]["client"], st["client_display"], st["xauthority"]
    x = f"ip netns exec {ns} env DISPLAY={disp} XAUTHORITY={xa}"
    return "\n".join(
        [
            f"desktop {st['id']}: {st['platform']} is up across '{st['env']}' (RTT {st['rtt_ms']:g} ms), lab {st['lab']}",
            f"  the client's screen is {disp} in netns {ns}",
            f"  look at it:   {x} import -window root /tmp/{st['id']}.png",
            f"  type:         {x} xdotool key a",
            f"  click:        {x} xdotool mousemove 224 184 click 1",
            f"  files:        {st['dir']}",
            f"  tear down:    thinwan desktop down {st['id']}",
        ]
    )


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _read(d: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((d / "state.json").read_text()))
    except (OSError, ValueError):
        return {}


def _write(d: Path, st: dict[str, Any]) -> None:
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(st, indent=1) + "\n")
    os.replace(tmp, d / "state.json")


def _tail(path: Path, n: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-n:])
    except OSError:
        return "(no log)"

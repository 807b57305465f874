"""The simulator as a substrate: one run of a scenario through ``thinwan._native``,
returned as records with the run's metadata filled in."""

from __future__ import annotations

import threading
from typing import Any

from .. import __version__
from ..analysis.anatomy import Anatomy, find_timeout, with_packet_log, worst_connection
from ..config.scenario import Scenario, check_simulable
from ..records.schema import RunRecords

__all__ = ["simulate", "native_available", "timeout_anatomy"]


def simulate(scenario: Scenario, run: int, git_rev: str | None = None) -> RunRecords:
    """Run ``run`` of ``scenario`` (seed ``scenario.seed + run``) in this process.

    ``meta`` gets what the simulator does not know itself (scenario name, run, seed,
    version, substrate, duration, config) and, when given, the git revision.
    """
    check_simulable(scenario)  # a clear error for every caller (thinwan anatomy among them)
    records = RunRecords.from_native(_interruptible_simulate(scenario.to_native_json(), run))
    meta = records.meta
    meta.setdefault("scenario", scenario.name)
    meta.setdefault("run", run)
    meta.setdefault("seed", scenario.scenario.seed + run)
    meta.setdefault("version", __version__)
    meta.setdefault("substrate", "sim")
    meta.setdefault("duration_s", scenario.scenario.duration_s)
    meta.setdefault("config", scenario.model_dump(mode="json"))
    if git_rev is not None:
        meta["git_rev"] = git_rev
    return records


def _interruptible_simulate(config_json: str, run: int) -> Any:
    """``_native.simulate`` in a helper thread, so that Ctrl-C reaches this one at once.

    The native run loop releases the GIL but never checks for signals, so called here
    directly it would hold off a KeyboardInterrupt until the whole run is over (and
    then fail converting its result). In a thread, the caller's wait is interrupted at
    once; the abandoned thread is a daemon that ends with the process (the CLI exits
    130 right away), and its result, never collected, touches no file.
    """
    from .. import _native

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = _native.simulate(config_json, run)
        except BaseException as e:  # handed to the caller below
            box["error"] = e

    thread = threading.Thread(target=target, name=f"thinwan-sim-run{run}", daemon=True)
    thread.start()
    thread.join()  # interruptible: a KeyboardInterrupt leaves the thread behind
    if "error" in box:
        raise box["error"]
    return box["result"]


def native_available() -> bool:
    """Is the native simulator built into this installation?"""
    try:
        from .. import _native
    except ImportError:
        return False
    return hasattr(_native, "simulate")


def timeout_anatomy(
    scenario: Scenario,
    run: int = 0,
    conn: int | None = None,
    which: int = 1,
    before_s: float = 2.0,
    after_s: float = 0.5,
) -> Anatomy:
    """Re-run run ``run`` with the packet log of ``conn`` (default: the connection with
    the most timeouts, found by a first run) and explain its ``which``-th timeout."""
    if conn is None:
        probe = simulate(with_packet_log(scenario, []), run)
        conn = worst_connection(probe, scenario, run)
    records = simulate(with_packet_log(scenario, [conn]), run)
    return find_timeout(records, scenario, run, conn, which, before_s, after_s)

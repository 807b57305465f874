"""Sweep tasks on the namespace lab (``thinwan sweep --lab``), for the
:class:`~thinwan.execute.executors.SerialLab` executor.

Each task brings up a fresh lab — the two-namespace lab of ``thinwan lab run`` for a
dumbbell point, the three-namespace chain with the real thinwan-mux daemons for a
``topology.kind = "mux"`` point — runs its traffic in real time and is reduced to the
same result as a simulator task (:func:`thinwan.analysis.aggregate.task_result`). A
task's raw logs go to ``<out>/lab-raw/<point>-run<k>/`` while it runs and are removed
once its row is written (unless ``keep_raw``); a failed task's logs stay for a look.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis.aggregate import task_result
from ..config.scenario import LabSection
from ..config.sweepfile import SweepTask
from ..substrates.lab.labrun import run_lab_once
from ..substrates.lab.tunnel import run_tunnel_once

__all__ = ["LabTask", "RAW_DIR"]

RAW_DIR = "lab-raw"


class LabTask:
    """``fn(task)`` of a lab sweep: one lab run of one point, reduced to its result."""

    def __init__(self, out: Path, log: Callable[[str], None], total: int, *, keep_raw: bool = False) -> None:
        self.out, self.log, self.total, self.done, self.keep_raw = out, log, total, 0, keep_raw

    def __call__(self, task: SweepTask) -> dict[str, Any]:
        self.done += 1
        i, n = self.done, self.total
        sc = task.scenario.scenario
        self.log(
            f"lab task {i}/{n}: {task.scenario.name} run {task.run} "
            f"({sc.duration_s:g} s of traffic, up to {sc.drain_s:g} s drain)…"
        )
        started = time.monotonic()
        raw = self.out / RAW_DIR / task.filename.removesuffix(".parquet")
        once = run_tunnel_once if task.scenario.topology.kind == "mux" else run_lab_once
        # The lab's defaults, not the base scenario's [lab]: a point's id does not hash
        # [lab], so its rows must not depend on it (congestion control reno, as simulated).
        records = once(task.scenario, LabSection(), task.run, raw)
        result = task_result(records, task.scenario, task.run)
        s = result["summary"]
        self.log(
            f"lab task {i}/{n} done in {time.monotonic() - started:.0f} s: {int(s['messages'])} messages, "
            f"delay median {s['delay_median_ms']:.0f} ms, p99 {s['delay_p99_ms']:.0f} ms, max {s['delay_max_ms']:.0f} ms"
        )
        if not self.keep_raw:
            shutil.rmtree(raw, ignore_errors=True)
        return result

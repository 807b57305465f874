"""``thinwan sweep --lab``: the tasks of a sweep run one at a time in the namespace lab.

Each task (point, run) gets a fresh lab — the three-namespace chain with the tunnel
daemons for ``topology.kind = "mux"`` (:mod:`.tunnel`), the two-namespace lab otherwise
(:mod:`.run`) — and is reduced to the same row as a simulated task
(:func:`thinwan.sweep.task_result`), so the dataset, ``--json`` and the report are those
of a simulated sweep. Raw logs of a task live in ``<out>/lab-raw/<point>-run<k>/`` while
it runs and are removed once its row is written; a failed task's logs stay for a look.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..sweep import SweepTask, task_result
from . import netns
from .run import run_lab_once
from .spec import LabOptions
from .topology import sigterm_as_interrupt
from .tunnel import run_tunnel_once

__all__ = ["lab_results"]

RAW_DIR = "lab-raw"


def lab_results(
    tasks: Sequence[SweepTask], out: Path, log: Callable[[str], None]
) -> Iterator[tuple[SweepTask, dict[str, Any]]]:
    """Run ``tasks`` in the lab, in order; yield each with its row's contents."""
    netns.require_root()
    opts = LabOptions()  # the scenario's TCP settings; congestion control reno, as the simulator
    with sigterm_as_interrupt():
        for i, task in enumerate(tasks, 1):
            sc = task.scenario.scenario
            log(
                f"lab task {i}/{len(tasks)}: {task.scenario.name} run {task.run} "
                f"({sc.duration_s:g} s of traffic, up to {sc.drain_s:g} s drain)…"
            )
            started = time.monotonic()
            raw = out / RAW_DIR / task.filename.removesuffix(".parquet")
            once = run_tunnel_once if task.scenario.topology.kind == "mux" else run_lab_once
            records = once(task.scenario, opts, task.run, raw)
            result = task_result(records, task.scenario, task.run)
            s = result["summary"]
            log(
                f"lab task {i}/{len(tasks)} done in {time.monotonic() - started:.0f} s: {int(s['messages'])} messages, "
                f"delay median {s['delay_median_ms']:.0f} ms, p99 {s['delay_p99_ms']:.0f} ms, max {s['delay_max_ms']:.0f} ms"
            )
            shutil.rmtree(raw, ignore_errors=True)
            yield task, result

"""``connections.writes_waited`` / ``writes_blocked`` of a lab run from the pump's log
alone (no root): a write that returned > 10 ms after its schedule waited; a full send
buffer held it when its own ``write`` call took that long, or when it queued behind such a
write; else the pump's thread started it late."""

from __future__ import annotations

import pandas as pd

from thinwan.analysis.lab_join import _write_waits

MS = 1_000_000


def test_waits_are_told_apart_by_the_write_call() -> None:
    # (scheduled, write called, write returned), ms
    rows = [
        (0, 0, 0.1),  # on time
        (10, 10, 35),  # blocked in write: waited and blocked
        (20, 35, 35.1),  # queued behind it: waited and held by the same full buffer
        (40, 40.2, 49.9),  # 9.9 ms in write: neither (10 ms is the threshold)
        (60, 75, 75.1),  # the previous write ended before 60: the thread woke late
        (70, 75.1, 85),  # behind a late thread, not a full buffer: waited only
    ]
    pump = pd.DataFrame(
        [(i, int(d * MS), int(w * MS), int(r * MS)) for i, (d, w, r) in enumerate(rows)],
        columns=["msg", "t_due_ns", "t_write_ns", "t_written_ns"],
    )
    assert _write_waits(pump) == (4, 2)
    assert _write_waits(pump.iloc[0:0]) == (0, 0)

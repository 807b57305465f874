"""``ports.marks_ce`` of a lab run from thinwan-link's event log alone (no root): a mark
is a packet dequeued CE that did not arrive CE (RFC 3168 §5: CE stays CE)."""

from __future__ import annotations

import pandas as pd

from thinwan.analysis.lab_join import _marks_ce
from thinwan.records.evlog import ARRIVAL, DEQUEUE, DROP


def test_marks_are_ce_dequeues_of_packets_that_arrived_without_ce() -> None:
    ect0, ce, not_ect = 0b10, 0b11, 0b00
    rows = [
        (ARRIVAL, 0, 0x80 | ect0),  # marked: CE from its dequeue on, DSCP kept
        (DEQUEUE, 0, 0x80 | ce),
        (ARRIVAL, 1, ect0),  # not marked
        (DEQUEUE, 1, ect0),
        (ARRIVAL, 2, ce),  # arrived CE: not this link's mark
        (DEQUEUE, 2, ce),
        (ARRIVAL, 3, not_ect),  # dropped by CoDel
        (DROP, 3, not_ect),
        (ARRIVAL, 4, ect0),  # marked
        (DEQUEUE, 4, ce),
    ]
    events = pd.DataFrame(rows, columns=["event", "pkt", "tos"])
    assert _marks_ce(events) == 2
    assert _marks_ce(events.iloc[0:0]) == 0

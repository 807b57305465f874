"""Records: building from the native dict, and the Parquet round trip."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from thinwan.records.schema import SCHEMA, TABLES, RunRecords, write_text_atomic


def test_from_native_uses_documented_columns_and_dtypes(records: RunRecords) -> None:
    for name in TABLES:
        frame = getattr(records, name)
        assert list(frame.columns) == list(SCHEMA[name]), name
        assert [str(t) for t in frame.dtypes] == list(SCHEMA[name].values()), name
    assert records.meta["run"] == 0


def test_from_native_without_traces_gives_empty_typed_tables(records_without_traces: RunRecords) -> None:
    trace = records_without_traces.conn_trace
    assert trace.empty and list(trace.columns) == list(SCHEMA["conn_trace"])
    assert records_without_traces.queue_trace.empty


def test_from_native_accepts_absent_traces(fake_native: Callable[..., Any]) -> None:
    d = fake_native()
    del d["conn_trace"], d["queue_trace"]
    records = RunRecords.from_native(d)
    assert records.conn_trace.empty and records.queue_trace.empty
    assert list(records.queue_trace.columns) == list(SCHEMA["queue_trace"])


def test_from_native_casts_and_rejects_missing_columns(fake_native: Callable[..., Any]) -> None:
    d = fake_native()
    d["messages"]["kind"] = d["messages"]["kind"].astype(np.int64)  # producer sent wider ints
    assert RunRecords.from_native(d).messages["kind"].dtype == np.uint8
    del d["messages"]["t_read"]
    with pytest.raises(ValueError, match="t_read"):
        RunRecords.from_native(d)
    with pytest.raises(ValueError, match="'ports'"):
        RunRecords.from_native({**fake_native(), "ports": {}})


@pytest.mark.parametrize("traces", [True, False])
def test_write_read_round_trip(tmp_path: Path, traces: bool, fake_native: Callable[..., Any]) -> None:
    original = RunRecords.from_native(fake_native(traces=traces))
    target = original.write(tmp_path / "runs" / "run-0")
    assert sorted(p.name for p in target.iterdir()) == sorted([f"{name}.parquet" for name in TABLES] + ["meta.json"])
    back = RunRecords.read(target)
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(back, name), getattr(original, name))
    assert back.meta == original.meta
    assert np.isinf(back.conn_trace["ssthresh"]).any() == traces  # inf survives


def test_write_replaces_an_existing_run_and_leaves_no_temporaries(
    tmp_path: Path, fake_native: Callable[..., Any]
) -> None:
    target = tmp_path / "run-0"
    RunRecords.from_native(fake_native(seed=1)).write(target)
    (target / "stale.txt").write_text("from an older run")
    second = RunRecords.from_native(fake_native(seed=2))
    second.write(target)
    assert not (target / "stale.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["run-0"]
    pd.testing.assert_frame_equal(RunRecords.read(target).messages, second.messages)


def test_failed_write_leaves_no_partial_directory(tmp_path: Path, records: RunRecords) -> None:
    records.meta["unserialisable"] = object()
    with pytest.raises(TypeError):
        records.write(tmp_path / "run-0")
    assert list(tmp_path.iterdir()) == []


def test_write_text_atomic(tmp_path: Path) -> None:
    path = write_text_atomic(tmp_path / "sub" / "summary.json", json.dumps({"a": 1}))
    assert json.loads(path.read_text()) == {"a": 1}
    write_text_atomic(path, "{}")
    assert path.read_text() == "{}"
    assert [p.name for p in path.parent.iterdir()] == ["summary.json"]

"""Fuzzing the capture reader behind ``traffic.model = "pcap"`` (issue 15, "Keep them
found"): whatever bytes a file holds, reading it either gives flows or raises
:class:`TraceError` (which the scenario loader turns into an error naming the file and
the packet) — never another exception. Derandomized so CI sees the same cases every
time; THINWAN_FUZZ_EXAMPLES=100000 runs it long."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.captures import write_capture
from thinwan.config.capture import TraceError, read_flows

EXAMPLES = int(os.environ.get("THINWAN_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _valid(tmp_path: Path) -> bytes:
    path = tmp_path / "valid.pcap"
    write_capture(path)
    return path.read_bytes()


def _read(tmp_path: Path, data: bytes, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    try:
        read_flows(path)
    except TraceError:
        pass  # the one way a damaged capture may fail


@FUZZ
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes_never_escape_as_another_error(tmp_path: Path, data: bytes) -> None:
    _read(tmp_path, data, "arbitrary.pcap")


@FUZZ
@given(
    # Half the flips land in the 24-byte file header or a record header (where a reader
    # decides what to trust), half anywhere.
    flips=st.lists(
        st.tuples(
            st.one_of(st.integers(min_value=0, max_value=39), st.integers(min_value=0)),
            st.integers(min_value=0, max_value=255),
        ),
        max_size=8,
    ),
    cut=st.one_of(st.none(), st.integers(min_value=0)),
)
def test_a_mutated_capture_never_escapes_as_another_error(
    tmp_path: Path, flips: list[tuple[int, int]], cut: int | None
) -> None:
    data = bytearray(_valid(tmp_path))
    for at, value in flips:
        data[at % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    _read(tmp_path, bytes(data), "mutated.pcap")


def test_the_unmutated_capture_reads(tmp_path: Path) -> None:
    """The mutations start from a capture the reader accepts (else the test above
    would only ever exercise the error path)."""
    path = tmp_path / "valid.pcap"
    write_capture(path)
    assert read_flows(path)

"""Records of one run: the tables of ``docs/records.md`` as pandas DataFrames.

The same schema serves simulated runs, emulated runs and captures, so every metric is
computed from a :class:`RunRecords` and nothing else. On disk a run is a directory with one
Parquet file per table plus ``meta.json``; :meth:`RunRecords.write` builds it under a
temporary name and renames it into place, so a crash leaves either the old complete
directory or the new complete one, never a mix.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["RunRecords", "SCHEMA", "TABLES", "write_text_atomic"]

# Column → dtype per table, in documented order ("str" is pandas' string dtype).
SCHEMA: dict[str, dict[str, str]] = {
    "messages": {
        "conn": "uint32",
        "pair": "uint32",
        "kind": "uint8",
        "bytes": "uint32",
        "t_write": "float64",
        "t_first_tx": "float64",
        "t_tx": "float64",
        "t_enq": "float64",
        "t_deq": "float64",
        "t_arrive": "float64",
        "t_read": "float64",
        "retx": "uint16",
    },
    "connections": {
        "conn": "uint32",
        "pair": "uint32",
        "timeouts": "uint32",
        "spurious_timeouts": "uint32",
        "fast_retransmits": "uint32",
        "sack_recoveries": "uint32",
        "bytes_written": "uint64",
        "bytes_delivered": "uint64",
        "bytes_sent": "uint64",
        "bytes_retransmitted": "uint64",
        "segments_sent": "uint64",
        "tlp_probes": "uint32",
        "rack_marked_lost": "uint32",
        "rto_resets": "uint32",
        "retransmit_episodes": "uint32",
        "ecn_reductions": "uint32",
        "writes_waited": "uint32",
        "writes_blocked": "uint32",
        "role": "uint8",
    },
    "ports": {
        "port": "str",
        "rate_bps": "float64",
        "window_s": "float64",
        "bytes_tx": "uint64",
        "bytes_tx_interactive": "uint64",
        "packets_tx": "uint64",
        "drops_overflow": "uint64",
        "max_queue_bytes": "uint64",
        "drops_loss": "uint64",
        "marks_ce": "uint64",
    },
    "conn_trace": {
        "conn": "uint32",
        "t": "float64",
        "cwnd": "float64",
        "ssthresh": "float64",
        "srtt": "float64",
        "rttvar": "float64",
        "rto": "float64",
        "rtt": "float64",
    },
    "queue_trace": {
        "port": "str",
        "t": "float64",
        "bytes": "uint64",
        "packets": "uint64",
    },
    "packet_log": {
        "conn": "uint32",
        "t": "float64",
        "event": "uint8",
        "seq": "uint64",
        "len": "uint32",
        "retx": "uint8",
    },
    "packet_rtt": {
        "conn": "uint32",
        "app": "uint8",
        "t_tx": "float64",
        "rtt": "float64",
        "bytes": "uint32",
        "retx": "uint8",
    },
    "qds_flows": {
        "t": "float64",
        "conn": "uint32",
        "app_true": "uint8",
        "app": "uint8",
        "rtt": "float64",
        "rate_bps": "float64",
        "class": "uint16",
        "f_size_mean": "float64",
        "f_size_sd": "float64",
        "f_iat_mean_us": "float64",
        "f_iat_sd_us": "float64",
        "f_rate_down_bps": "float64",
        "f_rate_up_bps": "float64",
        "f_full_share": "float64",
        "f_burst_pkts": "float64",
    },
    "qds_classes": {
        "t": "float64",
        "class": "uint16",
        "weight": "float64",
        "rate_bps": "float64",
        "flows": "uint32",
    },
}
TABLES = tuple(SCHEMA)
# Columns added to the schema later, with the value a producer that predates them (an
# older records directory, the lab, a test fixture) implicitly reports: no such event.
LATER_COLUMNS: dict[str, dict[str, int]] = {
    "ports": {"drops_loss": 0, "marks_ce": 0},
    "connections": {"ecn_reductions": 0, "writes_waited": 0, "writes_blocked": 0},
}
# Tables a run may leave empty or out (records.traces = false).
OPTIONAL_TABLES = ("conn_trace", "queue_trace", "packet_log", "packet_rtt", "qds_flows", "qds_classes")


@dataclass
class RunRecords:
    """All tables of one run plus its metadata (seed, version, git rev, config, …)."""

    messages: pd.DataFrame
    connections: pd.DataFrame
    ports: pd.DataFrame
    conn_trace: pd.DataFrame = field(default_factory=lambda: empty_table("conn_trace"))
    queue_trace: pd.DataFrame = field(default_factory=lambda: empty_table("queue_trace"))
    packet_log: pd.DataFrame = field(default_factory=lambda: empty_table("packet_log"))
    packet_rtt: pd.DataFrame = field(default_factory=lambda: empty_table("packet_rtt"))
    qds_flows: pd.DataFrame = field(default_factory=lambda: empty_table("qds_flows"))
    qds_classes: pd.DataFrame = field(default_factory=lambda: empty_table("qds_classes"))
    meta: dict[str, Any] = field(default_factory=dict)
    # records.pcap: {point: the pcap file's bytes}, written as <point>.pcap (docs/records.md).
    pcaps: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def from_native(cls, d: Mapping[str, Any]) -> RunRecords:
        """Build from ``_native.simulate``'s dict of ``{table: {column: ndarray}, "meta": {}}``.

        Optional traces may be missing or empty. Columns are cast to the documented
        dtypes, so metrics can rely on them whatever the producer sent.
        """
        tables = {}
        for name in TABLES:
            columns = d.get(name) or {}
            if not columns and name not in OPTIONAL_TABLES:
                raise ValueError(f"native records lack the {name!r} table")
            tables[name] = table_from_columns(name, columns)
        cap = d.get("pcap")
        pcaps = {cap["point"]: cap["bytes"]} if cap else {}
        return cls(**tables, meta=dict(d.get("meta", {})), pcaps=pcaps)

    def write(self, directory: str | Path) -> Path:
        """Write ``<table>.parquet`` per table and ``meta.json`` into ``directory``.

        The directory is assembled next to its final place and renamed into it; an
        existing directory of the same name is replaced.
        """
        target = Path(directory)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
        try:
            for name in TABLES:
                table = pa.Table.from_pandas(getattr(self, name), preserve_index=False)
                # Dictionary encoding does not pay for float columns of distinct values:
                # without it the base run's records are written 3× faster and come out smaller.
                pq.write_table(table, staging / f"{name}.parquet", use_dictionary=False)
            (staging / "meta.json").write_text(json.dumps(self.meta, indent=2) + "\n")
            for point, data in self.pcaps.items():
                (staging / f"{point}.pcap").write_bytes(data)
            _replace_dir(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return target

    @classmethod
    def read(cls, directory: str | Path) -> RunRecords:
        """Read a directory written by :meth:`write`."""
        directory = Path(directory)
        meta = json.loads((directory / "meta.json").read_text())
        tables = {}
        for name in TABLES:
            path = directory / f"{name}.parquet"
            tables[name] = pq.read_table(path).to_pandas() if path.exists() else empty_table(name)
        return cls(**tables, meta=meta)


def table_from_columns(name: str, columns: Mapping[str, Any]) -> pd.DataFrame:
    """A DataFrame of table ``name`` from ``{column: array}``, in schema order and dtypes.

    An empty mapping gives an empty table with the right columns. Extra columns are
    kept after the documented ones (a newer producer may add some).
    """
    schema = SCHEMA[name]
    if not columns:
        return empty_table(name)
    n = len(next(iter(columns.values())))
    later = {c: np.full(n, v) for c, v in LATER_COLUMNS.get(name, {}).items() if c not in columns}
    columns = {**columns, **later}
    missing = [c for c in schema if c not in columns]
    if missing:
        raise ValueError(f"records table {name!r} lacks column(s) {', '.join(missing)}")
    frame = pd.DataFrame({c: np.asarray(v) for c, v in columns.items()})
    order = list(schema) + [c for c in frame.columns if c not in schema]
    return frame[order].astype(schema)


def empty_table(name: str) -> pd.DataFrame:
    """An empty table ``name`` with the documented columns and dtypes."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in SCHEMA[name].items()})


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        # mkstemp makes the file private (0600); results are ordinary files.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _replace_dir(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``; a previous ``target`` is moved aside first.

    A directory cannot be renamed over a non-empty one, so the old copy is renamed out
    of the way and deleted afterwards: at every moment ``target`` is absent or complete.
    """
    if not target.exists():
        os.replace(staging, target)
        return
    old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
    os.replace(target, old / target.name)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)

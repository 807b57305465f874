"""Training and evaluating the QDS classifier on labelled traffic (docs/qds.md "Real
captures"; ``thinwan qds train`` / ``thinwan qds evaluate``).

Every feature vector comes from the core: a capture is replayed through the middlebox's
flow monitor by ``_native.qds_capture_features`` (crates/capture/src/qds.rs), one row per
(control period, flow with an RTT estimate), exactly what the controller classifies; a
simulated run gives its ``qds_flows`` rows (the same monitor inside the simulator). The
model is the core's (``Model::train``, ``Model::predict`` through ``_native``); this
module only selects rows, labels them and counts.

A **training set** is a TOML file::

    captures_root = "../../../results/desktop"  # optional: where relative capture files
                               # are, relative to this file (default: its directory);
                               # --captures-root DIR overrides it
    [[capture]]
    file = "video/tigervnc/lan/video/video.pcap"
    label = "video"            # video | audio | data | interactive
    port = 5900                # the display server's TCP port
    port_at_client = false     # true: the listener is the user's display (plain X11)
    addr = "198.18.1.1"        # optional: the listener's address
    group = "tigervnc"         # optional (default: the file as written): --leave-one-out folds
    windows = [[1795485583.4, 1795485583.9]]  # optional: only these spans carry the label
                               # ("web-pages": the page loads of the web benchmark's
                               # web-pages.parquet beside the capture)
    flows = "all"              # or "busiest": only the flow that sent most toward the client

    [[sim]]
    scenario = "sim-c20-3-9.toml"  # a scenario with queue.discipline = "qds"
    runs = [1, 2, 3, 4]            # run indices (seed = scenario.seed + run)
    group = "sim"                  # optional (default: the scenario's name)

Rows kept (the same rule for every source): from ``warmup_s`` after the start of the
capture or run (the monitor's windows are still filling before), and — unless
``include_idle`` — not idle (no payload toward the client in the feature window: the
classifier has nothing to go on, and an idle flow sends nothing through the scheduler,
so its type does not matter there).

``windows`` (capture clock, seconds since the epoch, e.g. a benchmark's page loads from
``t_input`` to ``t_end``) narrows a capture's label to when the activity ran: a row is kept
only if its tick lies in some ``[start, end + rate window]`` — the feature window still
holds the activity's packets for one rate window after it ended. Without it, every row of
the capture has the label, its quiet periods included. ``windows = "web-pages"`` takes
the spans from the web benchmark's own table beside the capture (``web-pages.parquet``:
each page load from ``t_input`` to ``t_end``), so a set file names a capture's page loads
without copying its clock times, and fits any rerun of the benchmark. ``flows = "busiest"`` labels only
the flow that sent the most bytes toward the client: a plain X11 display also serves side
connections (the window manager) that carry none of the activity.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import _native
from ..analysis.qds import CONTROLLER_TYPES
from ..config.files import ScenarioError, read_toml

__all__ = [
    "FEATURES",
    "CaptureSource",
    "SimSource",
    "TrainSetError",
    "TrainSet",
    "RowOptions",
    "parse_capture_arg",
    "read_train_set",
    "rows_of",
    "train_model",
    "predict",
    "evaluate",
    "leave_one_out",
    "read_model",
]

# thinwan_proto::qds::classify::Features::NAMES, in order: the core's, as its shipped
# model names them.
FEATURES: tuple[str, ...] = tuple(json.loads(_native.qds_shipped_model())["features"])
FEATURE_COLUMNS = [f"f_{n}" for n in FEATURES]


class TrainSetError(ScenarioError):
    """A training set, capture or model that cannot be used; the message names it."""


@dataclass(frozen=True)
class CaptureSource:
    """A capture of one application type."""

    file: Path
    label: str
    port: int
    port_at_client: bool = False
    addr: str | None = None
    group: str = ""
    windows: tuple[tuple[float, float], ...] | None = None
    busiest_only: bool = False
    pages_windows: bool = False  # windows = "web-pages": read when the rows are built

    @property
    def name(self) -> str:
        return str(self.file)


@dataclass(frozen=True)
class SimSource:
    """Runs of a simulated QDS scenario, each row labelled with its flow's true type."""

    scenario: Path
    runs: tuple[int, ...]
    group: str = ""

    @property
    def name(self) -> str:
        return f"{self.scenario} runs {','.join(map(str, self.runs))}"


@dataclass
class TrainSet:
    """Labelled sources, in file order."""

    sources: list[CaptureSource | SimSource] = field(default_factory=list)


@dataclass(frozen=True)
class RowOptions:
    """Which rows count, and the monitor's clock (the ``[qds]`` keys of the deployment)."""

    warmup_s: float = 2.0
    include_idle: bool = False
    period_ms: float | None = None  # None: the core's default (qds.period_ms)
    rate_window_ms: float | None = None  # None: the core's default (qds.rate_window_ms)


def _check_label(label: Any, where: str) -> str:
    if label not in CONTROLLER_TYPES:
        raise TrainSetError(
            f"{where}: label {label!r} is not an application type (one of {', '.join(CONTROLLER_TYPES)})"
        )
    return str(label)


def _check_port(port: Any, where: str) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise TrainSetError(f"{where}: port must be 1..65535 (the display server's TCP port), got {port!r}")
    return port


def parse_capture_arg(text: str) -> CaptureSource:
    """``LABEL=FILE:PORT`` or ``LABEL=FILE:PORT:at-client`` (plain X11: the listener is
    the user's display), as ``--capture`` takes it; the group is the file's path."""
    where = f"--capture {text!r}"
    label, sep, rest = text.partition("=")
    if not sep or not rest:
        raise TrainSetError(f"{where}: expected LABEL=FILE:PORT[:at-client]")
    at_client = rest.endswith(":at-client")
    if at_client:
        rest = rest[: -len(":at-client")]
    file, sep, port = rest.rpartition(":")
    if not sep or not file:
        raise TrainSetError(f"{where}: expected LABEL=FILE:PORT[:at-client] (the server port is required)")
    try:
        port_n = int(port)
    except ValueError:
        raise TrainSetError(f"{where}: port must be 1..65535, got {port!r}") from None
    path = Path(file)
    return CaptureSource(
        file=path,
        label=_check_label(label, where),
        port=_check_port(port_n, where),
        port_at_client=at_client,
        group=str(path),
    )


_CAPTURE_KEYS = {"file", "label", "port", "port_at_client", "addr", "group", "windows", "flows"}
_SIM_KEYS = {"scenario", "runs", "group"}


def read_train_set(path: Path, captures_root: Path | None = None) -> TrainSet:
    """A training-set TOML file (module docstring); errors name the file and entry.
    ``captures_root`` (``--captures-root``) overrides the file's ``captures_root``."""
    path = Path(path)
    data = read_toml(path, TrainSetError, "a training set (TOML)")
    unknown = set(data) - {"capture", "sim", "captures_root"}
    if unknown:
        raise TrainSetError(
            f"{path}: unknown key(s) {sorted(unknown)} (expected captures_root, [[capture]] and [[sim]])"
        )
    root = data.get("captures_root", ".")
    if not isinstance(root, str):
        raise TrainSetError(f"{path}: captures_root must be a path (a string), got {root!r}")
    root_dir = Path(captures_root) if captures_root is not None else path.parent / root
    for table in ("capture", "sim"):
        if not isinstance(data.get(table, []), list):
            raise TrainSetError(f"{path}: {table}: expected an array of tables ([[{table}]])")
    out = TrainSet()
    for i, c in enumerate(data.get("capture", [])):
        where = f"{path}: capture[{i}]"
        _check_entry(c, where, "capture", _CAPTURE_KEYS)
        for key in ("file", "label", "port"):
            if key not in c:
                raise TrainSetError(f"{where}: missing key {key!r}")
        file = root_dir / str(c["file"])
        which = c.get("flows", "all")
        if which not in ("all", "busiest"):
            raise TrainSetError(f'{where}: flows must be "all" or "busiest", got {which!r}')
        at_client = c.get("port_at_client", False)
        if not isinstance(at_client, bool):
            raise TrainSetError(f"{where}: port_at_client must be true or false, got {at_client!r}")
        pages = c.get("windows") == "web-pages"
        out.sources.append(
            CaptureSource(
                file=file,
                label=_check_label(c["label"], where),
                port=_check_port(c["port"], where),
                port_at_client=at_client,
                addr=c.get("addr"),
                group=str(c.get("group", c["file"])),
                windows=None if pages else _windows(c.get("windows"), where),
                pages_windows=pages,
                busiest_only=which == "busiest",
            )
        )
    for i, s in enumerate(data.get("sim", [])):
        where = f"{path}: sim[{i}]"
        _check_entry(s, where, "sim", _SIM_KEYS)
        if "scenario" not in s:
            raise TrainSetError(f"{where}: missing key 'scenario'")
        runs = s.get("runs", [0])
        if not (isinstance(runs, list) and runs and all(isinstance(r, int) and r >= 0 for r in runs)):
            raise TrainSetError(f"{where}: runs must be a non-empty list of run indices ≥ 0, got {runs!r}")
        scenario = path.parent / str(s["scenario"])
        out.sources.append(SimSource(scenario=scenario, runs=tuple(runs), group=str(s.get("group", scenario.stem))))
    if not out.sources:
        raise TrainSetError(f"{path}: no [[capture]] or [[sim]] entry")
    return out


PAGES_FILE = "web-pages.parquet"  # the web benchmark's per-page table (docs/desktop-media.md)


def _check_entry(entry: Any, where: str, table: str, known: set[str]) -> None:
    """One ``[[table]]`` entry is a table of ``known`` keys only."""
    if not isinstance(entry, dict):
        raise TrainSetError(f"{where}: expected a table ([[{table}]])")
    bad = set(entry) - known
    if bad:
        raise TrainSetError(f"{where}: unknown key(s) {sorted(bad)} (known: {sorted(known)})")


def _windows(w: Any, where: str) -> tuple[tuple[float, float], ...] | None:
    if w is None:
        return None
    ok = isinstance(w, list) and all(
        isinstance(x, list)
        and len(x) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x)
        and x[0] <= x[1]
        for x in w
    )
    if not ok:
        raise TrainSetError(
            f'{where}: windows must be "web-pages" or a list of [start, end] pairs (s since the epoch, start ≤ end)'
        )
    return tuple((float(a), float(b)) for a, b in w)


def _pages_windows(capture: Path) -> tuple[tuple[float, float], ...]:
    """``windows = "web-pages"``: each page load of the web benchmark's table beside the
    capture, from ``t_input`` to ``t_end``."""
    pages = capture.parent / PAGES_FILE
    try:
        df = pd.read_parquet(pages, columns=["t_input", "t_end"])
    except FileNotFoundError:
        raise TrainSetError(
            f'{capture}: windows = "web-pages": no {pages} (the web benchmark writes it beside web.pcap)'
        ) from None
    except (OSError, ValueError, KeyError) as e:
        raise TrainSetError(f"{pages}: not the web benchmark's page table ({e})") from None
    # A page that showed no update has no end (NaN): it carries no label.
    return tuple((float(a), float(b)) for a, b in zip(df["t_input"], df["t_end"]) if a <= b)


def rows_of(sources: Iterable[CaptureSource | SimSource], opts: RowOptions = RowOptions()) -> pd.DataFrame:
    """Every kept row of every source: columns ``source``, ``group``, ``label``, ``t_s``,
    ``flow``, ``idle`` and the feature columns ``f_<name>``."""
    frames = [_capture_rows(s, opts) if isinstance(s, CaptureSource) else _sim_rows(s, opts) for s in sources]
    if not frames:
        return pd.DataFrame(columns=["source", "group", "label", "t_s", "flow", "idle", *FEATURE_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def _keep(df: pd.DataFrame, opts: RowOptions) -> pd.DataFrame:
    keep = df["t_s"] >= opts.warmup_s
    if not opts.include_idle:
        keep &= ~df["idle"].astype(bool)
    return df[keep]


def _capture_rows(src: CaptureSource, opts: RowOptions) -> pd.DataFrame:

    if not src.file.is_file():
        if src.file.exists():
            raise TrainSetError(f"{src.file}: not a file")
        raise TrainSetError(
            f"{src.file}: no such file"
            + (
                ""
                if src.file.parent.exists()
                else " (a set's captures_root, or --captures-root DIR: where your runs are)"
            )
        )
    windows = _pages_windows(src.file) if src.pages_windows else src.windows
    try:
        r = _native.qds_capture_features(
            str(src.file),
            src.port,
            addr=src.addr,
            port_at_client=src.port_at_client,
            period_ms=opts.period_ms,
            rate_window_ms=opts.rate_window_ms,
        )
    except ValueError as e:
        raise TrainSetError(str(e)) from None
    df = pd.DataFrame(r["rows"])
    if df.empty:
        raise TrainSetError(
            f"{src.file}: the server's flows on port {src.port} were never timed (no RTT estimate), so the "
            "controller classifies nothing in this capture"
        )
    if src.busiest_only:
        busiest = int(np.argmax([f["bytes_down"] for f in r["flows"]]))
        df = df[df["flow"] == busiest]
    df = _keep(df, opts)
    if windows is not None:
        after = (opts.rate_window_ms if opts.rate_window_ms is not None else _default_rate_window_ms()) / 1e3
        t = float(r["origin_s"]) + df["t_s"].to_numpy()
        inside = np.zeros(len(df), bool)
        for a, b in windows:
            inside |= (t >= a) & (t <= b + after)
        df = df[inside]
    df.insert(0, "source", src.name)
    df.insert(1, "group", src.group)
    df.insert(2, "label", src.label)
    return df[["source", "group", "label", "t_s", "flow", "idle", *FEATURE_COLUMNS]]


def _default_rate_window_ms() -> float:

    return float(json.loads(_native.qds_default_keys())["rate_window_ms"])


def _sim_rows(src: SimSource, opts: RowOptions) -> pd.DataFrame:
    from ..config.scenario import load_scenario
    from ..substrates.sim import simulate

    scenario = load_scenario(src.scenario)
    if scenario.queue.discipline != "qds":
        raise TrainSetError(
            f"{src.scenario}: queue.discipline is {scenario.queue.discipline!r}: only a QDS run records the "
            'monitor\'s features (qds_flows); set it to "qds"'
        )
    frames = []
    for run in src.runs:
        flows = simulate(scenario, run).qds_flows
        df = pd.DataFrame({"t_s": flows["t"].to_numpy(), "flow": flows["conn"].to_numpy()})
        for c in FEATURE_COLUMNS:
            df[c] = flows[c].to_numpy()
        df["idle"] = df["f_size_mean"] == 0.0  # Features::is_idle
        df["label"] = [CONTROLLER_TYPES[int(c)] for c in flows["app_true"]]
        df["source"] = f"{src.scenario} run {run}"
        frames.append(_keep(df, opts))
    df = pd.concat(frames, ignore_index=True)
    df["group"] = src.group
    return df[["source", "group", "label", "t_s", "flow", "idle", *FEATURE_COLUMNS]]


def _matrix(rows: pd.DataFrame) -> list[list[float]]:
    return rows[FEATURE_COLUMNS].to_numpy(dtype=float).tolist()


def train_model(rows: pd.DataFrame) -> str:
    """The core's ``Model::train`` on the labelled rows: the model's JSON."""

    if rows.empty:
        raise TrainSetError("no row to train on (every source was shorter than the warm-up, or idle)")
    return str(_native.qds_train(_matrix(rows), rows["label"].tolist()))


def read_model(path: Path | None) -> str | None:
    """A model file's JSON, checked by the core (None: the shipped model)."""

    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TrainSetError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise TrainSetError(f"{path}: not a model: not UTF-8 text (a model is JSON)") from None
    except OSError as e:
        raise TrainSetError(f"{path}: cannot read: {e.strerror}") from None
    try:
        _native.qds_predict([], text)
    except ValueError as e:
        raise TrainSetError(f"{path}: {e}") from None
    return text


def predict(rows: pd.DataFrame, model_json: str | None) -> np.ndarray:
    """The type the core's model names for each row (``model_json`` None: shipped)."""

    return np.asarray(_native.qds_predict(_matrix(rows), model_json), dtype=object)


def _report(truth: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """Accuracy, per-type recall and the confusion matrix (rows: true type)."""
    types = list(CONTROLLER_TYPES)
    counts = {t: dict.fromkeys(types, 0) for t in types}
    for a, b in zip(truth, predicted, strict=True):
        counts[a][b] += 1
    n = len(truth)
    right = sum(counts[t][t] for t in types)
    recall = {t: (counts[t][t] / sum(counts[t].values()) if sum(counts[t].values()) else None) for t in types}
    return {
        "rows": n,
        "accuracy": right / n if n else None,
        "recall": recall,
        "confusion": counts,
    }


def evaluate(rows: pd.DataFrame, predicted: Sequence[str]) -> dict[str, Any]:
    """Overall, per group and per source: accuracy, recall per type, confusion matrix."""
    predicted = list(predicted)
    out = _report(rows["label"].tolist(), predicted)
    pred = pd.Series(predicted, index=rows.index)
    for key, column in (("by_group", "group"), ("by_source", "source")):
        out[key] = {
            str(name): _report(part["label"].tolist(), pred[part.index].tolist())
            for name, part in rows.groupby(column, sort=False)
        }
    return out


def leave_one_out(rows: pd.DataFrame, extra: pd.DataFrame | None = None) -> dict[str, Any]:
    """Train on every group but one (plus ``extra``'s rows, if given), test on that one;
    pooled over the folds, and per fold. Needs at least two groups."""
    groups = list(dict.fromkeys(rows["group"]))
    if len(groups) < 2:
        raise TrainSetError(f"--leave-one-out needs at least two groups, got {groups}")
    predicted = pd.Series(index=rows.index, dtype=object)
    folds: dict[str, Any] = {}
    for g in groups:
        test = rows[rows["group"] == g]
        train = rows[rows["group"] != g]
        if extra is not None:
            train = pd.concat([train, extra], ignore_index=True)
        model = train_model(train)
        predicted[test.index] = predict(test, model)
        folds[g] = {"train_rows": len(train), "labels_trained": sorted(set(train["label"]))}
    out = evaluate(rows, predicted.tolist())
    for g, fold in folds.items():
        out["by_group"][g].update(fold)
    return out

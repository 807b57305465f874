"""Sweep files: many scenarios from one base, as data (flent's batch files; docs/sweeps.md).

A sweep file names a base scenario, fixed overrides (``[set]``) and *axes* (``[vary]``):
lists of values for one key, or named bundles of overrides. The points of the sweep are
every combination of the axes. A point's id is a hash of its complete scenario (less
name, description, runs and ``[records]``, which do not change what is simulated) and of
its bundle names, so a re-run can tell which points changed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .files import ScenarioError, read_toml
from .scenario import Scenario, load_scenario

__all__ = ["SweepError", "Axis", "Point", "SweepTask", "Sweep", "load_sweep", "label", "short_names"]

_RESERVED_KEYS = {
    "scenario.name": "set by the sweep for each point",
    "scenario.description": "set by the sweep for each point",
    "scenario.runs": "use 'runs' in [sweep]",
}
_DEFAULT_X = "topology.bottleneck_delay_ms"


class SweepError(ScenarioError):
    """A sweep that cannot be used (bad file, bad option): a user error, exit status 2."""


# ---------------------------------------------------------------------------------------
# The sweep definition


@dataclass(frozen=True)
class Axis:
    """One dimension of a sweep.

    A *plain* axis varies one key: ``name`` is the dotted key and ``labels`` its values. A
    *named* axis has bundles: ``labels`` are the bundle names. ``overrides[i]`` is what
    label ``i`` sets, as ``{"section.key": value}``.
    """

    name: str
    plain: bool
    labels: tuple[Any, ...]
    overrides: tuple[dict[str, Any], ...]

    @property
    def keys(self) -> list[str]:
        """Every dotted key some label of this axis sets, in first-seen order."""
        return list(dict.fromkeys(k for o in self.overrides for k in o))


@dataclass(frozen=True)
class Point:
    """One combination of axis labels and the complete scenario it gives."""

    id: str  # 12 hex digits of the content hash; stable across edits of other points
    name: str  # e.g. "bottleneck_delay_ms=20,config=none,buffer=small"
    index: tuple[int, ...]  # label index on each axis, in axis order
    params: dict[str, Any]  # axis name → label (the value, for a plain axis)
    values: dict[str, Any]  # every key any axis varies → its value at this point
    scenario: Scenario


@dataclass(frozen=True)
class SweepTask:
    """Run ``run`` of one point: all a worker needs (no paths, so it runs anywhere)."""

    point_id: str
    run: int
    scenario: Scenario

    @property
    def filename(self) -> str:
        return f"{self.point_id}-run{self.run}.parquet"


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file: its axes, its points, and the roles of axes in the report."""

    name: str
    description: str
    path: Path
    base_path: Path
    runs: int
    fixed: dict[str, Any]  # [set]
    axes: tuple[Axis, ...]
    points: tuple[Point, ...]
    x_axis: str | None = None  # plain numeric axis on the x of the report's line plots
    line_axis: str | None = None  # axis drawn as one line per label
    panel_axes: tuple[str, ...] = field(default=())  # every other axis: one panel per combination
    substrate: str = "sim"  # "sim": the simulator; "lab": real TCP in the namespace lab
    sensitivity_axis: str | None = None  # [report] sensitivity: the one-at-a-time axis to rank

    def axis(self, name: str) -> Axis:
        """The axis called ``name``."""
        return next(a for a in self.axes if a.name == name)

    @property
    def varied_keys(self) -> list[str]:
        """Every dotted key some axis varies, in axis order."""
        return [k for a in self.axes for k in a.keys]


def load_sweep(
    path: str | Path, *, runs: int | None = None, duration_s: float | None = None, substrate: str = "sim"
) -> Sweep:
    """Read and validate a sweep file; every error names the file and the key (or point).

    ``runs`` and ``duration_s`` override the file's runs per point and every point's
    ``scenario.duration_s`` (real-time lab runs are long). ``substrate = "lab"`` gives the
    points ids of their own, so lab and simulator rows never stand in for each other.
    """
    path = Path(path)
    data = read_toml(path, SweepError, "a sweep file")
    return _parse_sweep(data, path, runs=runs, duration_s=duration_s, substrate=substrate)


# ---------------------------------------------------------------------------------------
# Parsing the sweep file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _SweepSection(_Strict):
    name: str = ""
    description: str = ""
    base: str
    runs: int | None = Field(None, ge=1)


class _ReportSection(_Strict):
    x: str | None = None
    lines: str | None = None
    sensitivity: str | None = None


_SECTIONS = ("sweep", "set", "vary", "report")


def _parse_sweep(
    data: Mapping[str, Any], path: Path, *, runs: int | None, duration_s: float | None, substrate: str
) -> Sweep:
    where = str(path)
    for section in data:
        if section not in _SECTIONS:
            raise SweepError(f"{where}: {section}: unknown section (expected {', '.join(_SECTIONS)})")
    if "sweep" not in data:
        raise SweepError(f'{where}: sweep: missing section (it names the base scenario: base = "….toml")')
    head = _validate(_SweepSection, data["sweep"], where, "sweep")
    report = _validate(_ReportSection, data.get("report", {}), where, "report")

    base_path = path.parent / head.base
    if not base_path.is_file():
        raise SweepError(f"{where}: sweep.base: no such scenario file: {base_path}")
    base = load_scenario(base_path)  # its errors name the base file
    known = _known_keys()
    fixed = _overrides(_table(data.get("set", {}), where, "set"), where, "set", known)
    axes = _parse_axes(_table(data.get("vary", {}), where, "vary"), where, known)
    _check_disjoint(axes, fixed, where)
    if duration_s is not None:
        if any("scenario.duration_s" in a.keys for a in axes):
            raise SweepError(f"{where}: --duration: scenario.duration_s is varied by an axis")
        fixed = {**fixed, "scenario.duration_s": duration_s}

    name = head.name or path.stem
    runs = runs or head.runs or base.scenario.runs
    points = _points(name, base, head.base, runs, fixed, axes, where, substrate)
    x_axis, line_axis = _report_roles(report, axes, where)
    panels = tuple(a.name for a in axes if a.name not in (x_axis, line_axis))
    sensitivity = _sensitivity_axis(report, axes, where)
    return Sweep(
        name=name,
        description=head.description,
        path=path,
        base_path=base_path,
        runs=runs,
        fixed=fixed,
        axes=tuple(axes),
        points=tuple(points),
        x_axis=x_axis,
        line_axis=line_axis,
        panel_axes=panels,
        substrate=substrate,
        sensitivity_axis=sensitivity,
    )


def _parse_axes(vary: Mapping[str, Any], where: str, known: set[str]) -> list[Axis]:
    axes = []
    for name, spec in vary.items():
        here = f"vary.{_toml_key(name)}"
        if isinstance(spec, list):
            axes.append(_plain_axis(name, spec, where, here, known))
        elif isinstance(spec, dict):
            if "." in name:
                raise SweepError(
                    f"{where}: {here}: to vary one key give a list of values; "
                    "an axis of named bundles needs a name without dots"
                )
            axes.append(_named_axis(name, spec, where, here, known))
        else:
            raise SweepError(
                f'{where}: {here}: expected a list of values ("section.key" = [...]) '
                "or a table of named bundles ([vary.NAME])"
            )
    return axes


def _plain_axis(name: str, values: list[Any], where: str, here: str, known: set[str]) -> Axis:
    if "." not in name:
        raise SweepError(f'{where}: {here}: a list of values varies one key: name it "section.key"')
    _check_key(name, where, "vary", known)
    if not values:
        raise SweepError(f"{where}: {here}: empty list of values")
    for i, v in enumerate(values):
        if isinstance(v, (dict, list)):
            raise SweepError(f"{where}: {here}: value {i + 1} is not a single value")
        if any(_same(v, w) for w in values[:i]):
            raise SweepError(f"{where}: {here}: value {v!r} is listed twice")
    return Axis(name, plain=True, labels=tuple(values), overrides=tuple({name: v} for v in values))


def _named_axis(name: str, bundles: Mapping[str, Any], where: str, here: str, known: set[str]) -> Axis:
    if not bundles:
        raise SweepError(f"{where}: {here}: no bundles (an empty bundle is written NAME = {{}})")
    labels, overrides = [], []
    for label, bundle in bundles.items():
        at = f"{here}.{_toml_key(label)}"
        if not isinstance(bundle, dict):
            hint = ""
            if isinstance(bundle, list) and f"{name}.{label}" in known:
                hint = f'; to vary {name}.{label}, quote it: "{name}.{label}" = [...] under [vary]'
            raise SweepError(f'{where}: {at}: a bundle is a table of overrides {{ "section.key" = value }}{hint}')
        labels.append(label)
        overrides.append(_overrides(bundle, where, at, known))
    return Axis(name, plain=False, labels=tuple(labels), overrides=tuple(overrides))


def _overrides(table: Mapping[str, Any], where: str, here: str, known: set[str]) -> dict[str, Any]:
    """``{"section.key": value}`` from a table; ``{section = {key = value}}`` is accepted too."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):  # unquoted dotted keys: tcp.sack = true
            for sub, v in value.items():
                flat[f"{key}.{sub}"] = v
        else:
            flat[key] = value
    for key in flat:
        _check_key(key, where, here, known)
    return flat


def _check_key(key: str, where: str, here: str, known: set[str]) -> None:
    if key in _RESERVED_KEYS:
        raise SweepError(f"{where}: {here}: {key}: cannot be set here ({_RESERVED_KEYS[key]})")
    if key not in known:
        section = key.partition(".")[0]
        sections = {k.partition(".")[0] for k in known}
        problem = "unknown key" if section in sections else "unknown section"
        raise SweepError(f"{where}: {here}: {key}: {problem} (see docs/scenario.md)")


def _check_disjoint(axes: Sequence[Axis], fixed: Mapping[str, Any], where: str) -> None:
    """Each key has one owner: two axes (or an axis and [set]) setting it would be ambiguous."""
    owner = {key: "[set]" for key in fixed}
    for axis in axes:
        for key in axis.keys:
            if key in owner:
                raise SweepError(f"{where}: vary: {key} is set both by {owner[key]} and by axis {axis.name}")
            owner[key] = f"axis {axis.name}"


def _points(
    sweep_name: str,
    base: Scenario,
    base_name: str,
    runs: int,
    fixed: Mapping[str, Any],
    axes: Sequence[Axis],
    where: str,
    substrate: str,
) -> list[Point]:
    varied = [k for a in axes for k in a.keys]
    short = short_names(axes)
    points = []
    for index in itertools.product(*(range(len(a.labels)) for a in axes)):
        name = ",".join(f"{short[a.name]}={label(a.labels[i])}" for a, i in zip(axes, index)) or "base"
        values: dict[str, Any] = dict(fixed)
        for a, i in zip(axes, index):
            values.update(a.overrides[i])
        values["scenario.runs"] = runs
        values["scenario.name"] = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{sweep_name}-{name}")
        values["scenario.description"] = f"point {name} of sweep {sweep_name} (base: {base_name})"
        try:
            scenario = base.with_values(values, source=f"{where}: point {name}")
        except ScenarioError as e:
            raise SweepError(str(e)) from None
        named = {a.name: a.labels[i] for a, i in zip(axes, index) if not a.plain}
        points.append(
            Point(
                id=_point_id(scenario, named, substrate),
                name=name,
                index=index,
                params={a.name: a.labels[i] for a, i in zip(axes, index)},
                values={k: _get(scenario, k) for k in varied},
                scenario=scenario,
            )
        )
    return points


def _point_id(scenario: Scenario, bundle_names: Mapping[str, str], substrate: str) -> str:
    """Hash of what is simulated (and of the bundle names, so that ids are unique); lab
    points hash their substrate too (simulator ids stay those of earlier versions).
    Keys left unset (None) are not hashed, so adding an optional key keeps the ids, and
    the runs, of earlier versions."""
    content = scenario.model_dump(exclude_none=True)
    del content["records"]  # what is recorded, not what happens
    for key in ("name", "description", "runs"):  # run k does not depend on how many runs
        del content["scenario"][key]
    key = {"scenario": content, "bundles": bundle_names, **({"substrate": substrate} if substrate != "sim" else {})}
    text = json.dumps(key, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _report_roles(report: _ReportSection, axes: Sequence[Axis], where: str) -> tuple[str | None, str | None]:
    by_name = {a.name: a for a in axes}
    numeric = [a.name for a in axes if a.plain and all(_is_number(v) for v in a.labels)]
    if report.x is not None:
        if report.x not in numeric:
            raise SweepError(
                f"{where}: report.x: {report.x!r} is not a plain axis of numbers "
                f"(numeric axes: {', '.join(numeric) or 'none'})"
            )
        x = report.x
    else:
        x = _DEFAULT_X if _DEFAULT_X in numeric else (numeric[0] if numeric else None)
    if report.lines is not None:
        if report.lines not in by_name or report.lines == x:
            raise SweepError(f"{where}: report.lines: {report.lines!r} is not an axis other than report.x")
        lines = report.lines
    else:
        rest = [a for a in axes if a.name != x]
        named = [a.name for a in rest if not a.plain]
        lines = named[0] if named else (rest[0].name if rest else None)
    return x, lines


def _sensitivity_axis(report: _ReportSection, axes: Sequence[Axis], where: str) -> str | None:
    """``[report] sensitivity``: a named axis with exactly one empty bundle (the base point)."""
    if report.sensitivity is None:
        return None
    axis = next((a for a in axes if a.name == report.sensitivity), None)
    if axis is None or axis.plain:
        named = [a.name for a in axes if not a.plain]
        raise SweepError(
            f"{where}: report.sensitivity: {report.sensitivity!r} is not a named axis "
            f"(named axes: {', '.join(named) or 'none'})"
        )
    # The rule thinwan.analysis.sensitivity.choices_of relies on (config does not import analysis).
    empty = [label(lab) for lab, o in zip(axis.labels, axis.overrides) if not o]
    if len(empty) != 1:
        raise SweepError(
            f"{where}: report.sensitivity: axis {axis.name} needs exactly one empty bundle {{}} "
            f"(the base point); found: {', '.join(empty) or 'none'}"
        )
    return axis.name


# ---------------------------------------------------------------------------------------
# Helpers: parsing


def _validate(model: type[BaseModel], data: Any, where: str, section: str) -> Any:
    if not isinstance(data, dict):
        raise SweepError(f"{where}: {section}: expected a table ([{section}])")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            key = ".".join([section, *map(str, err["loc"])])
            problem = {"extra_forbidden": "unknown key", "missing": "missing key"}.get(err["type"], err["msg"])
            lines.append(f"{where}: {key}: {problem}")
        raise SweepError("\n".join(lines)) from None


def _table(value: Any, where: str, section: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise SweepError(f"{where}: {section}: expected a table ([{section}])")
    return value


def _known_keys() -> set[str]:
    """Every ``section.key`` of the scenario model (the lead's docs/scenario.md)."""
    return {
        f"{section}.{key}"
        for section, info in Scenario.model_fields.items()
        if section != "lab"  # not part of a point's id: lab sweeps use the lab's defaults
        for key in info.annotation.model_fields  # type: ignore[union-attr]
    }


def _get(scenario: Scenario, dotted: str) -> Any:
    section, _, key = dotted.partition(".")
    return getattr(getattr(scenario, section), key)


def short_names(axes: Sequence[Axis]) -> dict[str, str]:
    """Per axis, ``bottleneck_delay_ms`` for ``topology.bottleneck_delay_ms`` unless that is ambiguous."""
    last = [a.name.rpartition(".")[2] for a in axes]
    return {a.name: s if last.count(s) == 1 else a.name for a, s in zip(axes, last)}


def label(value: Any) -> str:
    """An axis label as text: TOML's ``true``/``false``, floats without trailing zeros."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _same(a: Any, b: Any) -> bool:
    """Equal values (7 and 7.0 are the same delay; true and 1 are not the same thing)."""
    return (type(a) is type(b) or (_is_number(a) and _is_number(b))) and a == b


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)

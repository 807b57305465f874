"""The one TOML reader of thinwan: scenario and sweep files, with ``inherits``.

Every failure (missing file, a directory, bytes that are not UTF-8, bad TOML, an
``inherits`` cycle) raises the caller's error class with a message that names the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomllib

from .tcp_profiles import overlay

__all__ = ["ScenarioError", "read_toml", "read_scenario_data"]


class ScenarioError(Exception):
    """A scenario that cannot be used; the message names the source and the key."""


def read_toml(path: Path, error: type[Exception] = ScenarioError, what: str = "a scenario file") -> dict[str, Any]:
    """A TOML file's tables; any failure raises ``error`` naming the file (``what`` says
    what the file should have been, for a directory given by mistake)."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not {what}") from None
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start}): TOML files are UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        # The decoder's message already says "(at line L, column C)".
        raise error(f"{path}: invalid TOML: {e}") from None


def read_scenario_data(path: Path) -> dict[str, Any]:
    """A scenario file's tables, with ``inherits`` resolved, before validation.

    A file may start with ``inherits = "other.toml"`` (a path relative to it, flent
    style): the other file's settings apply first and this file's keys override them,
    key by key; a ``tcp.profile`` here drops the other file's ``[tcp]`` keys (docs/scenario.md
    "Profiles"). The name follows the inheriting file.
    """
    return _read_with_inherits(Path(path), ())


def _read_with_inherits(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    """The file's data merged over the data of the file it inherits from, if any."""
    data = read_toml(path)
    # A capture (or a QDS classifier model) named in a file is relative to that file,
    # like `inherits`.
    for section, key in (("traffic", "pcap_file"), ("qds", "model_file")):
        table = data.get(section)
        if isinstance(table, dict) and isinstance(table.get(key), str) and table[key]:
            table[key] = str((path.parent / table[key]).resolve())
    base = data.pop("inherits", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ScenarioError(f"{path}: inherits: expected a file name (a string)")
    base_path = (path.parent / base).resolve()
    if base_path in chain or base_path == path.resolve():
        raise ScenarioError(f"{path}: inherits: {base} inherits from itself (a cycle)")
    merged = _read_with_inherits(base_path, (*chain, path.resolve()))
    merged.get("scenario", {}).pop("name", None)  # the name follows the inheriting file
    for section, keys in data.items():
        if section == "tcp" and isinstance(keys, Mapping) and isinstance(merged.get(section), Mapping):
            merged[section] = overlay(merged[section], keys)  # a profile here drops the base's [tcp]
        elif isinstance(keys, Mapping) and isinstance(merged.get(section), Mapping):
            merged[section] = {**merged[section], **keys}
        else:
            merged[section] = keys
    return merged

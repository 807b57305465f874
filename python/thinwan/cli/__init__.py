"""The ``thinwan`` command: argparse subcommands only, a thin layer over the package.

Each subcommand parses its options, calls library functions and prints; nothing imports
this package. Building the parser imports nothing heavy (no pandas, no pydantic, no
simulator), so ``thinwan --help`` answers at once: every handler imports what it uses.
Results go to stdout (a table, or exactly one JSON object with ``--json``); progress and
log lines go to stderr. Mistakes of the user (bad scenario, missing file, bad option)
end with ``thinwan: error: <message>`` and exit status 2, never a traceback; a run that
fails ends with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .. import __version__
from ..config.files import ScenarioError
from ..execute.errors import RunError

__all__ = ["main"]

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# Errors of modules a command may have loaded: (module, class) → exit status.
_LAZY_ERRORS = (
    ("thinwan.substrates.lab.netns", "LabError", EXIT_FAILURE),
    ("thinwan.substrates.binaries", "MissingBinary", EXIT_FAILURE),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``thinwan`` and ``python -m thinwan``; returns the exit status."""
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ScenarioError as e:
        return error(str(e), EXIT_USAGE)
    except RunError as e:
        return error(str(e), EXIT_FAILURE)
    except OSError as e:  # e.g. an output directory that cannot be written
        return error(f"{e.filename}: {e.strerror}" if e.filename else str(e), EXIT_FAILURE)
    except KeyboardInterrupt:
        return error("interrupted", EXIT_INTERRUPTED)
    except Exception as e:
        status = _lazy_status(e)
        if status is None:
            raise
        return error(str(e), status)


def parser() -> argparse.ArgumentParser:
    """The ``thinwan`` parser with every subcommand (cheap: nothing heavy is imported)."""
    from .analyze_cmd import add_analyze_subcommand
    from .anatomy_cmd import add_anatomy_subcommand
    from .desktop_cmd import add_desktop_subcommands
    from .fit_cmd import add_fit_subcommands
    from .lab_cmds import add_lab_subcommands, add_validate_subcommand
    from .mux_cmd import add_mux_subcommand
    from .qds_cmd import add_qds_subcommand
    from .run_cmd import add_run_subcommand
    from .sweep_cmd import add_sweep_subcommand

    p = Parser(prog="thinwan", description="Simulate thin-client traffic over a WAN bottleneck.")
    p.add_argument("--version", action="version", version=f"thinwan {__version__}")
    # One subparser per pipeline stage.
    commands = p.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    add_run_subcommand(commands)
    add_sweep_subcommand(commands)
    add_anatomy_subcommand(commands)
    add_lab_subcommands(commands)
    add_validate_subcommand(commands)
    add_mux_subcommand(commands)
    add_qds_subcommand(commands)
    add_desktop_subcommands(commands)
    add_analyze_subcommand(commands)
    add_fit_subcommands(commands)
    return p


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors read ``thinwan: error: …`` like all others."""

    def error(self, message: str) -> NoReturn:
        error(f"{message} (see '{self.prog} --help')", EXIT_USAGE)
        sys.exit(EXIT_USAGE)


def int_at_least(lowest: int) -> Callable[[str], int]:
    """An argparse type: an integer ≥ ``lowest``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"must be ≥ {lowest}, got {value}")
        return value

    return parse


def seed_value(text: str) -> int:
    """An argparse type: a seed, 0 ≤ S ≤ 2^64 − 1 (the simulator's seeds are u64)."""
    value = int_at_least(0)(text)
    if value > (1 << 64) - 1:
        raise argparse.ArgumentTypeError(f"must be ≤ {(1 << 64) - 1} (a 64-bit seed), got {value}")
    return value


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1 ≤ N ≤ 65535."""
    value = int_at_least(0)(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"must be 1..65535 (a TCP port), got {value}")
    return value


def positive_number(unit: str) -> Callable[[str], float]:
    """An argparse type: a finite number > 0 of ``unit`` (e.g. "seconds")."""

    def parse(text: str) -> float:
        import math

        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of {unit}, got {text!r}") from None
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


positive_float = positive_number("seconds")


def span(seeds: Sequence[int]) -> str:
    """``1`` or ``1–5``."""
    return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"


def error(message: str, status: int) -> int:
    """Print ``thinwan: error: …`` (one line per line of ``message``); return ``status``."""
    for line in message.splitlines() or [""]:
        print(f"thinwan: error: {line}", file=sys.stderr)
    return status


def _lazy_status(e: Exception) -> int | None:
    for module, name, status in _LAZY_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(e, cls):
            return status
    return None

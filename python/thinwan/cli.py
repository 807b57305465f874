"""The ``thinwan`` command: a thin layer over the package.

Each subcommand parses its options, calls library functions and prints. Results go to
stdout (a table, or exactly one JSON object with ``--json``); progress and log lines go
to stderr. Mistakes of the user (bad scenario, missing file, bad option) end with
``thinwan: error: <message>`` and exit status 2, never a traceback; a run that fails
ends with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from . import __version__
from .lab.netns import LabError
from .report import summary_table
from .runner import RunError, dumps_json, run_scenario, summary_document
from .scenario import ScenarioError, load_scenario

__all__ = ["main"]

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``thinwan`` and ``python -m thinwan``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except ScenarioError as e:
        return _error(str(e), EXIT_USAGE)
    except (RunError, LabError) as e:
        return _error(str(e), EXIT_FAILURE)
    except OSError as e:  # e.g. an output directory that cannot be written
        return _error(f"{e.filename}: {e.strerror}" if e.filename else str(e), EXIT_FAILURE)
    except KeyboardInterrupt:
        return _error("interrupted", EXIT_INTERRUPTED)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="thinwan", description="Simulate thin-client traffic over a WAN bottleneck.")
    parser.add_argument("--version", action="version", version=f"thinwan {__version__}")
    # One subparser per pipeline stage.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = commands.add_parser("run", help="run a scenario file", description=_cmd_run.__doc__)
    run.add_argument("scenario", metavar="SCENARIO.toml", help="scenario file")
    run.add_argument("--runs", type=_int_at_least(1), help="number of runs (overrides scenario.runs)")
    run.add_argument("--seed", type=_int_at_least(0), help="base seed (overrides scenario.seed)")
    run.add_argument("--out", metavar="DIR", help="output directory (default: results/<scenario name>)")
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    run.add_argument("--jobs", type=_int_at_least(1), help="parallel runs (default: runs, at most CPUs)")
    run.add_argument("--no-report", action="store_true", help="do not write report.html")
    run.add_argument("--quiet", action="store_true", help="no progress bar or log lines on stderr")
    run.set_defaults(func=_cmd_run)

    from .anatomy import add_anatomy_subcommand
    from .lab.cli import add_lab_subcommands, add_validate_subcommand
    from .mux import add_mux_subcommand
    from .sweep import add_sweep_subcommand

    add_sweep_subcommand(commands)
    add_anatomy_subcommand(commands)
    add_lab_subcommands(commands)
    add_validate_subcommand(commands)
    add_mux_subcommand(commands)
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    """Run every run of a scenario, write records, summary.json and report.html."""
    scenario = load_scenario(args.scenario).with_overrides(runs=args.runs, seed=args.seed)
    out = Path(args.out) if args.out else Path("results") / scenario.name
    runs = scenario.scenario.runs
    if not args.quiet:
        print(f"thinwan: {scenario.name}: {runs} run(s) → {out}", file=sys.stderr)
    summaries = run_scenario(scenario, out, jobs=args.jobs, progress=not args.quiet, report=not args.no_report)
    document = {**summary_document(scenario, summaries), "out": str(out)}
    if args.json:
        print(dumps_json(document))
        return 0
    seeds = document["seeds"]
    print(f"{scenario.name}: {runs} run(s), seed{'s' if runs > 1 else ''} {_span(seeds)}")
    print(summary_table(document["summary"], scenario))
    print()
    print(f"report: {out / 'report.html'}" if not args.no_report else f"results: {out}")
    return 0


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors read ``thinwan: error: …`` like all others."""

    def error(self, message: str) -> NoReturn:
        _error(f"{message} (see '{self.prog} --help')", EXIT_USAGE)
        sys.exit(EXIT_USAGE)


def _int_at_least(lowest: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"must be ≥ {lowest}, got {value}")
        return value

    return parse


def _span(seeds: Sequence[int]) -> str:
    return str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"


def _error(message: str, status: int) -> int:
    for line in message.splitlines() or [""]:
        print(f"thinwan: error: {line}", file=sys.stderr)
    return status

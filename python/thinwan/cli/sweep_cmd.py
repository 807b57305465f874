"""``thinwan sweep SWEEP.toml``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add_sweep_subcommand"]


def add_sweep_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``sweep`` to the ``thinwan`` command's subparsers; returns its parser.

    Errors raise :class:`~thinwan.config.sweepfile.SweepError` (a ScenarioError: exit 2)
    or :class:`~thinwan.execute.errors.RunError` (exit 1), as ``thinwan run`` does.
    """
    from . import int_at_least, positive_float

    p = subparsers.add_parser("sweep", help="run a sweep file", description=_cmd_sweep.__doc__)
    p.add_argument("sweep", metavar="SWEEP.toml", help="sweep file (docs/sweeps.md)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: results/<sweep name>)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--jobs", metavar="N", type=int_at_least(1), help="local worker processes (default: CPUs)")
    where.add_argument("--scheduler", metavar="ADDRESS", help="run on the Dask cluster at ADDRESS (tcp://host:port)")
    where.add_argument(
        "--lab",
        action="store_true",
        help="run every point in the namespace lab (real TCP, thinwan-link, thinwan-mux; needs root) instead of the simulator",
    )
    p.add_argument(
        "--keep-raw",
        action="store_true",
        help="with --lab: keep every task's raw logs in DIR/lab-raw/ (default: only a failed task's)",
    )
    p.add_argument("--runs", metavar="N", type=int_at_least(1), help="runs per point (overrides the sweep file)")
    p.add_argument("--duration", metavar="S", type=positive_float, help="override every point's scenario.duration_s")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--quiet", action="store_true", help="no progress bar or log lines on stderr")
    p.add_argument("--check", action="store_true", help="validate the sweep file and every point, run nothing")
    p.set_defaults(func=_cmd_sweep)
    return p


def _cmd_sweep(args: argparse.Namespace) -> int:
    """Run every point of a sweep file (skipping finished runs), write the dataset and a report."""
    from ..analysis.aggregate import check_column_names
    from ..config.files import ScenarioError
    from ..config.sweepfile import load_sweep
    from ..execute.sweeps import run_sweep
    from ..records.meta import dumps_json
    from ..report.text import comparison_table

    if args.keep_raw and not args.lab:
        raise ScenarioError("--keep-raw: the raw logs are the lab's; add --lab")
    substrate = "lab" if args.lab else "sim"
    sweep = load_sweep(args.sweep, runs=args.runs, duration_s=args.duration, substrate=substrate)
    check_column_names(sweep)
    out = Path(args.out) if args.out else Path("results") / (sweep.name + ("-lab" if args.lab else ""))
    if args.check:
        if not args.lab:
            from ..execute.sweeps import check_sweep_simulable

            check_sweep_simulable(sweep)
        print(f"{sweep.name}: ok: {len(sweep.points)} point(s) × {sweep.runs} run(s)")
        return 0
    log = (lambda _: None) if args.quiet else (lambda line: print(f"thinwan: {line}", file=sys.stderr))
    started = time.monotonic()
    result = run_sweep(
        sweep, out, jobs=args.jobs, scheduler=args.scheduler, progress=not args.quiet, log=log, keep_raw=args.keep_raw
    )
    if not args.no_report:
        from ..report.sweep_page import write_sweep_report

        write_sweep_report(out, sweep, result.frame, result.document)
    log(f"{sweep.name}: {len(result.ran)} run(s) in {time.monotonic() - started:.1f} s")
    if args.json:
        print(dumps_json(result.document))
        return 0
    print(comparison_table(sweep, result.document))
    if "sensitivity" in result.document:
        from ..report.sensitivity_page import sensitivity_text

        print()
        print(sensitivity_text(result.document))
    print()
    print(f"report: {out / 'report.html'}" if not args.no_report else f"results: {out}")
    return 0

"""``thinwan run SCENARIO.toml``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_run_subcommand"]


def add_run_subcommand(commands: Any) -> argparse.ArgumentParser:
    from . import int_at_least, seed_value

    run = commands.add_parser("run", help="run a scenario file", description=_cmd_run.__doc__)
    run.add_argument("scenario", metavar="SCENARIO.toml", help="scenario file")
    run.add_argument("--runs", type=int_at_least(1), help="number of runs (overrides scenario.runs)")
    run.add_argument("--seed", type=seed_value, help="base seed (overrides scenario.seed)")
    run.add_argument(
        "--out",
        metavar="DIR",
        help="output directory (default: results/<scenario name>); written aside and swapped in when "
        "complete, replacing earlier results (an interrupted run leaves them as they were)",
    )
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    run.add_argument("--jobs", type=int_at_least(1), help="parallel runs (default: runs, at most CPUs)")
    run.add_argument("--no-report", action="store_true", help="do not write report.html")
    run.add_argument("--quiet", action="store_true", help="no progress bar or log lines on stderr")
    run.add_argument(
        "--check", action="store_true", help="validate the scenario and its limits (docs/limits.md), run nothing"
    )
    run.set_defaults(func=_cmd_run)
    return run


def _cmd_run(args: argparse.Namespace) -> int:
    """Run every run of a scenario, write records, summary.json and report.html."""
    from ..config.scenario import load_scenario
    from ..execute.runs import run_scenario
    from ..records.meta import dumps_json
    from ..report.text import summary_table
    from . import span

    scenario = load_scenario(args.scenario).with_overrides(runs=args.runs, seed=args.seed)
    out = Path(args.out) if args.out else Path("results") / scenario.name
    if args.check:
        return _check(scenario, args.jobs)
    runs = scenario.scenario.runs
    if not args.quiet:
        print(f"thinwan: {scenario.name}: {runs} run(s) → {out}", file=sys.stderr)
    finish = None
    if not args.no_report:
        from ..report.run_page import write_run_report

        def finish(directory: Path, result: Any) -> None:
            write_run_report(directory, scenario, result.digests, result.document["summary"])

    result = run_scenario(scenario, out, jobs=args.jobs, progress=not args.quiet, finish=finish)
    document = {**result.document, "out": str(out)}
    if args.json:
        print(dumps_json(document))
        return 0
    seeds = document["seeds"]
    print(f"{scenario.name}: {runs} run(s), seed{'s' if runs > 1 else ''} {span(seeds)}")
    print(summary_table(document["summary"], scenario))
    print()
    print(f"report: {out / 'report.html'}" if not args.no_report else f"results: {out}")
    return 0


def _check(scenario: Any, jobs: int | None) -> int:
    """``--check``: what the run would ask for, refused as a run would be."""
    from ..config.limits import human_bytes
    from ..config.scenario import check_simulable, estimate_run
    from ..execute.executors import LocalProcesses
    from ..execute.runs import check_memory

    check_simulable(scenario)
    workers = LocalProcesses(jobs).workers(scenario.scenario.runs)
    check_memory(scenario, workers)
    e = estimate_run(scenario)
    print(
        f"{scenario.name}: ok: {scenario.scenario.runs} run(s), about {e.messages:,} messages and "
        f"{human_bytes(e.bytes)} per run, {workers} at once"
    )
    return 0

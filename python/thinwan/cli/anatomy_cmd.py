"""``thinwan anatomy SCENARIO.toml``: explain one retransmission timeout of a run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_anatomy_subcommand"]

DESCRIPTION = """Anatomy of a timeout: why did this retransmission timer fire?

Re-runs one run of a scenario with the packet log on for one connection (runs are
deterministic and logging changes nothing, so it is the same run), picks one of its
timeouts, says in words what happened (the RTO in force, the last RTT sample, whether the
timed-out segment had actually been dropped: a spurious timeout when not) and draws
everything around it on one time axis in a self-contained HTML page: sequence numbers,
cwnd and ssthresh, RTT samples / SRTT / RTTVAR / RTO, and the bottleneck queue."""


def add_anatomy_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``anatomy`` to the ``thinwan`` command."""
    p = subparsers.add_parser(
        "anatomy",
        help="explain one retransmission timeout of a run",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", metavar="SCENARIO.toml")
    p.add_argument("--run", type=int, default=0, help="run index (seed = scenario.seed + run; default 0)")
    p.add_argument("--conn", type=int, help="connection (default: the one with the most timeouts)")
    p.add_argument("--timeout", type=int, default=1, metavar="N", help="the N-th timeout of it (default 1)")
    p.add_argument("--before", type=float, default=2.0, metavar="S", help="seconds shown before it (default 2)")
    p.add_argument("--after", type=float, default=0.5, metavar="S", help="seconds shown after it (default 0.5)")
    p.add_argument(
        "--out",
        metavar="FILE.html",
        help="picture, written to exactly this path (a directory: the default name in it; "
        "default: results/<name>/anatomy-run<K>-conn<C>-<N>.html)",
    )
    p.set_defaults(func=_cmd_anatomy)
    return p


def _cmd_anatomy(args: argparse.Namespace) -> int:
    """Re-run one run with the packet log on, explain a timeout in words and in a picture."""
    from ..config.files import ScenarioError
    from ..config.scenario import load_scenario
    from ..report.anatomy_page import write_anatomy_page
    from ..substrates.sim import timeout_anatomy

    scenario = load_scenario(args.scenario)
    if args.run < 0 or (args.conn is not None and args.conn < 0) or args.before < 0 or args.after < 0:
        raise ScenarioError("--run, --conn, --before and --after must not be negative")
    a = timeout_anatomy(scenario, args.run, args.conn, args.timeout, args.before, args.after)
    name = f"anatomy-run{a.run}-conn{a.conn}-{args.timeout}.html"
    target = Path(args.out) if args.out else Path("results") / scenario.name / name
    if target.is_dir():
        target = target / name  # a directory: the default name inside it
    # Exactly the path printed below: nothing is appended to a name the user gave.
    out = write_anatomy_page(target, a)
    print(a.explain())
    print(f"picture: {out}", file=sys.stderr)
    return 0

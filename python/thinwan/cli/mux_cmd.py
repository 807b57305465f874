"""``thinwan mux core|edge|gen-certs``: the thin-stream multiplexing tunnel.

The daemons are the Rust binary ``thinwan-mux`` (crates/mux; docs/mux.md): ``core`` runs
next to the servers, ``edge`` is the regional proxy next to the clients. This command only
finds the binary and hands over to it, so signals (SIGTERM for a graceful stop) and exit
codes (2 = bad configuration, naming the key) are the daemon's own.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

__all__ = ["add_mux_subcommand"]


def add_mux_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``mux`` to the ``thinwan`` command."""
    p = subparsers.add_parser(
        "mux",
        help="thin-stream multiplexing tunnel daemons (core / edge)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "role",
        choices=["core", "edge", "gen-certs"],
        help="core: next to the servers; edge: the regional proxy; gen-certs: test certificates",
    )
    p.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        help="passed to thinwan-mux, e.g. --config FILE [--check] (see `thinwan mux core --help`)",
    )
    p.set_defaults(func=_cmd_mux)
    return p


def _cmd_mux(args: argparse.Namespace) -> int:
    """Replace this process with the daemon."""
    from ..substrates.binaries import find_binary

    binary = find_binary("thinwan-mux")
    os.execv(binary, [str(binary), args.role, *args.args])
    return 0  # not reached

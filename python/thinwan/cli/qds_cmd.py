"""``thinwan qds CONFIG.toml``: the QDS middlebox daemon.

The daemon is the Rust binary ``thinwan-qds`` (crates/qds; docs/qds-lab.md): it captures
the middlebox's TCP flows, decides each flow's class and the class rates every period,
and programs Linux HTB on the downlink over netlink, restoring the downlink's original
qdisc on exit. This command only finds the binary and hands over to it, so signals
(SIGTERM/SIGINT: restore and stop) and exit codes (2 = bad configuration, naming the
file and key; 1 = cannot run) are the daemon's own. Run it in the middlebox's network
namespace, e.g. ``ip netns exec NS thinwan qds qds.toml``.

``--lab`` runs it on a fresh three-namespace lab instead (servers ─ middlebox ─ clients,
docs/qds-lab.md): the config's ``downlink``/``uplink`` are replaced by the lab's
interfaces, and Ctrl-C stops the daemon and removes the lab.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

__all__ = ["add_qds_subcommand"]


def add_qds_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``qds`` to the ``thinwan`` command."""
    p = subparsers.add_parser(
        "qds",
        help="QoE-driven middlebox scheduler daemon (real Linux HTB over netlink)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--lab", action="store_true", help="run on a fresh servers ─ middlebox ─ clients lab (root)")
    p.add_argument(
        "--client-delay-ms", type=float, default=5.0, help="--lab: one-way delay of the last hop (default 5)"
    )
    p.add_argument("--cc", default="cubic", help="--lab: TCP congestion control of the lab's hosts (default cubic)")
    p.add_argument("config", help="daemon configuration (TOML; docs/qds-lab.md)")
    p.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        help="passed to thinwan-qds: --check, --restore, --stats FILE, --bench-updates N [--bench-flows F]",
    )
    p.set_defaults(func=_cmd_qds)
    return p


def _cmd_qds(args: argparse.Namespace) -> int:
    """Replace this process with the daemon."""
    from ..substrates.binaries import find_binary

    binary = find_binary("thinwan-qds")
    if args.lab:
        from pathlib import Path

        from ..substrates.lab.htb_middlebox import run_on_lab

        return run_on_lab(Path(args.config), args.args, args.client_delay_ms, args.cc)
    os.execv(binary, [str(binary), args.config, *args.args])
    return 0  # not reached

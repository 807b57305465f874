"""The three-namespace chain of the tunnel grid (``topology.kind = "mux"``).

::

    ┌ <id>-srv ──────────┐  WAN link   ┌ <id>-mid ───────────┐ last hop  ┌ <id>-cli ────┐
    │ 198.18.1.1 <id>-s  │◀═thinwan═══▶│ <id>-w 198.18.3.1   │◀═thinwan═▶│ <id>-c       │
    │ pump, mux core     │ -link "wan" │ mux edge, ip_forward│ -link     │ 198.18.2.1   │
    │                    │ delay, loss │ <id>-l 198.18.4.1   │ "lasthop" │ sink         │
    └────────────────────┘ both ways,  └─────────────────────┘ clean     └──────────────┘
                           jitter

``direct``: the sink in ``<id>-cli`` listens, the pump connects across both links (the
middle namespace only routes). ``mux``: the pump listens in ``<id>-srv``; the sink
connects to the edge in ``<id>-mid``, which carries each connection as a stream over
``mux.trunks`` trunk connections to the core, which connects to the pump
(server ↔ core is local, like the simulator's fast access link).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..binaries import find_binary
from . import netns
from .linkspec import LinkSpec, TcpSettings
from .topology import CLIENT_ADDR, SERVER_ADDR, Namespaces

__all__ = ["Chain", "EDGE_ADDR", "MID_WAN_ADDR"]

MID_WAN_ADDR = "198.18.3.1"  # the middle namespace on the WAN side (edge → core)
EDGE_ADDR = "198.18.4.1"  # the middle namespace on the client side (clients → edge)
LAB_NET = "198.18.0.0/16"
SERVER_NET = "198.18.1.0/24"
CLIENT_NET = "198.18.2.0/24"


class Chain(Namespaces):
    """``<id>-srv`` ─ WAN ─ ``<id>-mid`` ─ last hop ─ ``<id>-cli``, one emulator per link."""

    def __init__(
        self,
        wan: LinkSpec,
        last_hop: LinkSpec,
        tcp: TcpSettings,
        workdir: str | Path | None = None,
        notes: tuple[str, ...] = (),
        events: bool = True,
    ) -> None:
        super().__init__(workdir, notes)
        self.wan, self.last_hop, self.tcp, self.events = wan, last_hop, tcp, events
        self.netns = {
            side: f"{self.id}-{suffix}" for side, suffix in (("server", "srv"), ("middle", "mid"), ("client", "cli"))
        }
        self.tun = {
            "server": f"{self.id}-s",
            "wan": f"{self.id}-w",
            "last_hop": f"{self.id}-l",
            "client": f"{self.id}-c",
        }

    def up(self, detach: bool = False) -> None:
        """Create the namespaces and TUNs, apply TCP settings (all three namespaces: the
        edge's sockets live in the middle), start both emulators."""
        netns.require_root()
        find_binary("thinwan-link")
        self.workdir.mkdir(parents=True, exist_ok=True)
        # State first, so a crash at any later point leaves something `clean` can find.
        self._save_state(owner=os.getpid())
        tun, ns = self.tun, self.netns
        self._add_netns(ns["server"], self.tcp, [(tun["server"], f"{SERVER_ADDR}/24")], [(LAB_NET, tun["server"])])
        self._add_netns(
            ns["middle"],
            self.tcp,
            [(tun["wan"], f"{MID_WAN_ADDR}/32"), (tun["last_hop"], f"{EDGE_ADDR}/32")],
            [(SERVER_NET, tun["wan"]), (CLIENT_NET, tun["last_hop"])],
        )
        netns.sysctl(ns["middle"], "net.ipv4.ip_forward", 1)
        self._add_netns(ns["client"], self.tcp, [(tun["client"], f"{CLIENT_ADDR}/24")], [(LAB_NET, tun["client"])])
        self._start_emulator(
            "wan",
            f"{ns['server']}:{tun['server']}",
            f"{ns['middle']}:{tun['wan']}",
            self.wan,
            self.events,
            False,
            detach,
        )
        self._start_emulator(
            "lasthop",
            f"{ns['middle']}:{tun['last_hop']}",
            f"{ns['client']}:{tun['client']}",
            self.last_hop,
            False,
            False,
            detach,
        )
        self._save_state(owner=os.getpid())
        self._wait_ready()

    def _save_state(self, owner: int, **extra: Any) -> None:
        super()._save_state(owner, tun=self.tun, links={"wan": self.wan.to_json(), "lasthop": self.last_hop.to_json()})

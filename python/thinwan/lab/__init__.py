"""The namespace lab: real Linux TCP stacks across the ``thinwan-link`` WAN emulator.

::

    ┌ netns <id>-srv ─────┐       root netns         ┌ netns <id>-cli ─────┐
    │ 198.18.1.1          │                           │ 198.18.2.1          │
    │ pump / servers      │◀─ TUN <id>-s ─ thinwan-link ─ TUN <id>-c ─▶│ sink / clients      │
    └─────────────────────┘  fwd: queue→rate→loss→delay  └─────────────────────┘

Modules by stage: :mod:`.netns` (names, root check, commands, leftovers),
:mod:`.spec` (link and TCP settings from a scenario), :mod:`.topology` (bring a lab up
and down), :mod:`.events` (the emulator's event log), :mod:`.records` (join pump, sink
and emulator logs into the records of docs/records.md), :mod:`.run` (``lab run``,
``validate``), :mod:`.cli` (the ``lab`` subcommands). Everything needs root.
"""

from .netns import LabError
from .spec import DirLink, LabOptions, LabSpec, LinkSpec, TcpSettings
from .topology import CLIENT_ADDR, SERVER_ADDR, Lab

__all__ = [
    "LabError",
    "Lab",
    "LabSpec",
    "LinkSpec",
    "DirLink",
    "TcpSettings",
    "LabOptions",
    "SERVER_ADDR",
    "CLIENT_ADDR",
]

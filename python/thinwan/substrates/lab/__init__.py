"""The namespace lab: real Linux TCP stacks across the ``thinwan-link`` WAN emulator.

::

    ┌ netns <id>-srv ─────┐       root netns         ┌ netns <id>-cli ─────┐
    │ 198.18.1.1          │                           │ 198.18.2.1          │
    │ pump / servers      │◀─ TUN <id>-s ─ thinwan-link ─ TUN <id>-c ─▶│ sink / clients      │
    └─────────────────────┘  fwd: queue→rate→loss→delay  └─────────────────────┘

Modules: :mod:`.netns` (names, root check, commands, leftovers), :mod:`.linkspec` (link
and TCP settings from a scenario; ``thinwan-link --check``), :mod:`.topology` (bring a
lab up and down), :mod:`.chain` (the three-namespace chain of the tunnel grid),
:mod:`.labrun` (one run: pump, sink, logs → records), :mod:`.tunnel` (one run of the
tunnel grid), :mod:`.conntrace` (TCP state sampled with ``ss``). Everything needs root.
"""

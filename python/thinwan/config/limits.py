"""What a scenario may ask for, and what one simulated run of it needs (docs/limits.md).

Two kinds of limit, both checked before anything runs:

- **hard bounds** (:data:`MAX_DURATION_S`, :data:`MAX_PAIRS`, :data:`MAX_ROWS`): values
  past them are mistakes on any machine (a duration of 1e12 s, more rows than a record
  table can index); the scenario model rejects them naming the key;
- **memory**: :func:`thinwan.config.scenario.estimate_run` says how many message rows and trace rows a run will
  hold and how much memory that takes; :func:`check_fits` refuses runs that cannot fit in
  the memory the kernel says is available, saying how much they need.

The per-row costs are measured peak RSS of ``thinwan run --runs 1`` (records built by the
simulator, copied to NumPy, written to Parquet and digested, all in one process), fitted
as ``base + a·messages + b·conn-trace rows + c·queue-trace rows`` on the AMD EPYC host
(2026-11-24):

====================================  ==========  ============  ===============  ==========
scenario (large-buffer base)          messages    conn trace    queue trace      peak RSS
====================================  ==========  ============  ===============  ==========
1 pair, 1 s, traces off               4           0             0                138 MB
100 pairs, 300 s, traces off          258,540     0             0                194 MB
100 pairs, 300 s, traces on           258,540     251,952       62,002           235 MB
300 pairs, 300 s, traces off          772,089     0             0                316 MB
1000 pairs, 300 s, traces off         2,597,003   0             0                764 MB
1000 pairs, 300 s, traces on          2,597,003   247,865       62,002           915 MB
1 pair, 100,000 s, traces off         854,221     0             0                307 MB
1 pair, 100,000 s, traces on          854,221     854,219       20,002,002       5,638 MB
====================================  ==========  ============  ===============  ==========

→ 140 MB + 240 B per message + 170 B per connection-trace row + 260 B per queue-trace
row (each rounded up; the fit is within +10 % of every row above except 1000 pairs with
traces, where the connection trace holds fewer rows than messages and the estimate is
a third high).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MAX_DURATION_S",
    "MAX_PAIRS",
    "MAX_ROWS",
    "MAX_SEED",
    "U32_MAX",
    "U64_MAX",
    "RunEstimate",
    "check_fits",
    "mem_available_bytes",
    "human_bytes",
]

# Virtual time is integer nanoseconds (u64: 584 years); a bound far below that keeps
# every derived time (drain, timers) exact. ~116 days of simulated traffic.
MAX_DURATION_S = 1e7
# Connection ids are u32 and every pair holds a few KB of state; a million pairs is
# ~100x the largest scenario measured (BENCHMARKS.md, scaling).
MAX_PAIRS = 1_000_000
# Rows of one record table: the simulator indexes them with u32.
MAX_ROWS = (1 << 32) - 1
# Seeds are u64 and run k uses seed + k.
MAX_SEED = (1 << 64) - 1
# Largest values of the simulator's unsigned integer keys (crates/sim/src/config.rs): a
# value past them passes as a Python int and then fails inside the native run.
U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1

BASE_BYTES = 140_000_000
MESSAGE_BYTES = 240
CONN_TRACE_ROW_BYTES = 170
QUEUE_TRACE_ROW_BYTES = 260
# Ports the queue trace samples (the bottleneck, both directions).
QUEUE_TRACE_PORTS = 2


@dataclass(frozen=True)
class RunEstimate:
    """What one simulated run of a scenario will hold (expected values)."""

    messages: int  # rows of messages.parquet (one per write)
    conn_trace_rows: int
    queue_trace_rows: int

    @property
    def bytes(self) -> int:
        """Expected peak memory of the run (process included)."""
        return (
            BASE_BYTES
            + MESSAGE_BYTES * self.messages
            + CONN_TRACE_ROW_BYTES * self.conn_trace_rows
            + QUEUE_TRACE_ROW_BYTES * self.queue_trace_rows
        )


def check_fits(estimate_bytes: int, workers: int = 1, available: int | None = None) -> str | None:
    """None when ``workers`` runs of ``estimate_bytes`` each fit in the available
    memory; else a sentence saying what they need and what there is."""
    available = mem_available_bytes() if available is None else available
    if available is None:
        return None  # not Linux: nothing to compare with
    need = estimate_bytes * workers
    if need <= available:
        return None
    runs = f"{workers} runs at once need" if workers > 1 else "one run needs"
    return f"{runs} about {human_bytes(need)} of memory; {human_bytes(available)} is available (MemAvailable)"


def mem_available_bytes() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (None when unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def human_bytes(n: float) -> str:
    """``1.2 GB``, ``640 MB``."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 1e3:.0f} kB"

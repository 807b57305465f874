"""One invocation's results, or none: an output directory written aside and swapped in.

``thinwan run``, ``lab run`` and ``validate`` write into a fresh staging directory next
to ``--out`` (``.<name>.staging-<pid>-<random>``) and rename it into place only once
complete; the earlier results are removed after the swap. An interrupt or an error
removes the staging directory and leaves the earlier results as they were, so a results
directory never mixes the runs of two invocations.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import secrets
import shutil
import signal
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..config.files import ScenarioError

__all__ = ["RESULT_ENTRIES", "staged_output"]

# What thinwan writes into a run's output directory (run, lab run, validate), and the
# pages ``thinwan anatomy`` puts there by default (kept across a swap: they explain runs
# that a re-run reproduces bit for bit).
RESULT_ENTRIES = (
    "scenario.toml",
    "summary.json",
    "report.html",
    "runs",
    "lab.json",
    "lab-raw",
    "sim",
    "lab",
    "validate.json",
)
KEPT_PATTERNS = ("anatomy-*.html",)


@contextlib.contextmanager
def staged_output(out: Path, owned: Iterable[str] = RESULT_ENTRIES) -> Iterator[Path]:
    """Yield a fresh directory to write ``out``'s new contents into; on success it
    replaces ``out``, on any exception (Ctrl-C included) it is removed.

    Raises :class:`ScenarioError` before anything is written when ``out`` is a file, or a
    directory holding entries thinwan did not write (it would not delete those).
    """
    out = Path(out)
    owned = set(owned)
    if out.exists() and not out.is_dir():
        raise ScenarioError(f"--out {out}: is a file, not a directory")
    if out.is_dir():
        foreign = sorted(
            e.name
            for e in out.iterdir()
            if e.name not in owned and not any(fnmatch.fnmatch(e.name, p) for p in KEPT_PATTERNS)
        )
        if foreign:
            shown = ", ".join(foreign[:3]) + (", …" if len(foreign) > 3 else "")
            raise ScenarioError(
                f"--out {out}: holds files thinwan did not write ({shown}); results replace the "
                "directory's contents, so give a new or empty directory"
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".{out.name}.staging-{os.getpid()}-{secrets.token_hex(3)}"
    stage.mkdir()
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    with _sigint_deferred():
        _swap(stage, out)


def _swap(stage: Path, out: Path) -> None:
    if not out.is_dir():
        os.rename(stage, out)
        return
    for pattern in KEPT_PATTERNS:
        for kept in out.glob(pattern):
            if not (stage / kept.name).exists():
                os.replace(kept, stage / kept.name)
    old = out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(3)}"
    os.rename(out, old)
    os.rename(stage, out)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold SIGINT while the two renames run (delivered right after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)

"""Where tasks run: one :class:`Executor` protocol and its three implementations.

An executor takes a picklable, module-level function and a list of tasks and yields
``(task, result)`` as each task finishes, in any order. Closing the iterator early (an
error, Ctrl-C) drops the tasks not started. A task that fails raises
:class:`~thinwan.execute.errors.RunError` naming it (``describe(task)``).

- :class:`LocalProcesses`: worker processes on this machine (spawned, so the native
  simulator crashing or exhausting memory takes down one worker, not the caller); with
  one worker, in this process instead (a worker would only add a process start);
- :class:`DaskCluster`: the workers of a Dask distributed scheduler;
- :class:`SerialLab`: the namespace lab, one task at a time in this process (needs
  root; SIGTERM becomes KeyboardInterrupt so the lab is torn down).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from ..config.files import ScenarioError
from .errors import RunError

__all__ = ["Executor", "LocalProcesses", "DaskCluster", "SerialLab", "progress_bar"]

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``fn(task)`` for every task; yields ``(task, result)`` as they finish."""

    def where(self, tasks: int) -> str:
        """Where ``tasks`` tasks would run, for a log line."""
        ...

    def map(
        self,
        fn: Callable[[T], R],
        tasks: Sequence[T],
        describe: Callable[[T], str],
        key: Callable[[T], str] | None = None,
    ) -> Iterator[tuple[T, R]]:
        """``key(task)`` names a task where the executor keeps names (Dask)."""
        ...


class LocalProcesses:
    """``jobs`` spawned worker processes (default: one per CPU, never more than tasks)."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs

    def workers(self, tasks: int) -> int:
        return max(1, min(self.jobs or os.cpu_count() or 1, tasks))

    def where(self, tasks: int) -> str:
        n = self.workers(tasks)
        return f"{n} local worker process{'es' if n > 1 else ''}"

    def map(
        self,
        fn: Callable[[T], R],
        tasks: Sequence[T],
        describe: Callable[[T], str],
        key: Callable[[T], str] | None = None,
    ) -> Iterator[tuple[T, R]]:
        if self.workers(len(tasks)) == 1:
            yield from _in_process(fn, tasks, describe)
            return
        from concurrent.futures import as_completed
        from concurrent.futures.process import BrokenProcessPool

        pool = self._pool(self.workers(len(tasks)))
        finished = False
        try:
            futures = {pool.submit(_in_worker, fn, t): t for t in tasks}
            for future in as_completed(futures):
                task = futures[future]
                try:
                    result = future.result()
                except BrokenProcessPool:
                    raise RunError(
                        f"{describe(task)}: a worker process died (crash in the native simulator?)"
                    ) from None
                except WorkerFailure as e:
                    raise RunError(f"{describe(task)} failed: {e}") from None
                except Exception as e:
                    raise RunError(f"{describe(task)} failed: {_failure(e)}") from e
                yield task, result
            finished = True
        finally:
            if finished:
                pool.shutdown(wait=True)
            else:
                # An error, Ctrl-C or an abandoned iterator: the native run loop cannot be
                # interrupted, so the workers are killed (their tasks' partial files are
                # temporary names) and nothing queued starts.
                _kill_pool(pool)

    def _pool(self, workers: int) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: the parent may hold threads (tqdm's monitor) and their locks,
        # which a forked child would inherit in an undefined state. Workers ignore SIGINT:
        # Ctrl-C in a terminal reaches the whole process group, and the parent, not each
        # worker, decides what stops (all of them, at once).
        return ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_sigint
        )


class DaskCluster:
    """The workers of the Dask scheduler at ``address`` (e.g. ``tcp://host:8786``)."""

    def __init__(self, address: str) -> None:
        self.address = address

    def where(self, tasks: int) -> str:
        return f"the Dask cluster at {self.address}"

    def map(
        self,
        fn: Callable[[T], R],
        tasks: Sequence[T],
        describe: Callable[[T], str],
        key: Callable[[T], str] | None = None,
    ) -> Iterator[tuple[T, R]]:
        try:
            import distributed
        except ImportError:
            raise ScenarioError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
        try:
            # Waits up to dask's distributed.comm.timeouts.connect (30 s unless configured).
            client = distributed.Client(self.address)
        except (OSError, TimeoutError, ValueError) as e:
            raise ScenarioError(f"--scheduler: cannot connect to the Dask scheduler at {self.address}: {e}") from None
        futures = []
        try:
            # Named keys: a resubmitted task (same point, same run) is the same key.
            futures = [client.submit(fn, t, **({"key": key(t)} if key else {})) for t in tasks]
            by_key = dict(zip((f.key for f in futures), tasks))
            for future in distributed.as_completed(futures):
                task = by_key[future.key]
                try:
                    result = future.result()
                except Exception as e:  # includes KilledWorker: a worker died running it, repeatedly
                    raise RunError(f"{describe(task)} failed: {_failure(e)}") from e
                yield task, result
        finally:
            if futures:
                client.cancel(futures)
            client.close()


class SerialLab:
    """The namespace lab: one task at a time, in this process (root). A failing task's
    error (a :class:`~thinwan.substrates.lab.netns.LabError`) is raised as it is."""

    def where(self, tasks: int) -> str:
        return "the namespace lab, one at a time"

    def check(self) -> None:
        """Raise :class:`~thinwan.substrates.lab.netns.LabError` unless the lab can run here."""
        from ..substrates.lab import netns

        netns.require_root()

    def map(
        self,
        fn: Callable[[T], R],
        tasks: Sequence[T],
        describe: Callable[[T], str],
        key: Callable[[T], str] | None = None,
    ) -> Iterator[tuple[T, R]]:
        from ..substrates.lifecycle import sigterm_as_interrupt

        self.check()
        with sigterm_as_interrupt():
            for task in tasks:
                yield task, fn(task)


def progress_bar(total: int, desc: str, show: bool, initial: int = 0) -> Any:
    """A tqdm bar on stderr, shown only on a terminal and when ``show``."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit="run",
        file=sys.stderr,
        disable=not (show and sys.stderr.isatty()),
    )


class WorkerFailure(Exception):
    """What a task raised in a worker process, as its type and text. Carried back in this
    form because not every exception pickles: the native simulator's panic is a
    ``pyo3_runtime.PanicException``, whose class no worker-side import can name, so the
    pool would report only a PicklingError instead of the panic's message."""


def _in_worker(fn: Callable[[T], R], task: T) -> R:
    """``fn(task)`` in a worker process, any failure raised as :class:`WorkerFailure`."""
    try:
        return fn(task)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a panic is a BaseException (pyo3), not an Exception
        raise WorkerFailure(_failure(e)) from None


def _failure(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _kill_pool(pool: Any) -> None:
    """Kill a ProcessPoolExecutor's workers, reap them, drop its queued tasks."""
    processes = list(getattr(pool, "_processes", {}).values())  # no public way to reach them
    for p in processes:
        p.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        p.join(timeout=5)


def _in_process(fn: Callable[[T], R], tasks: Sequence[T], describe: Callable[[T], str]) -> Iterator[tuple[T, R]]:
    for task in tasks:
        try:
            result = fn(task)
        except (OSError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # a panic in the native simulator is a BaseException
            raise RunError(f"{describe(task)} failed: {_failure(e)}") from e
        yield task, result

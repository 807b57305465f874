"""Things a substrate brings up and must tear down whatever happens — a lab's namespaces
and emulators, a remote desktop's servers and viewers — in one place, so every one of
them handles exceptions, Ctrl-C and SIGTERM the same way."""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

__all__ = ["Managed", "sigterm_as_interrupt"]

M = TypeVar("M", bound="Managed")


class Managed(ABC):
    """:meth:`up` on entering a ``with`` block, :meth:`down` on leaving it, also after an
    exception, Ctrl-C or SIGTERM: inside the block SIGTERM raises KeyboardInterrupt (a
    process killed politely still runs its tear-down), and the previous handler comes
    back afterwards. A failed ``up`` is torn down before the error propagates."""

    _old_sigterm: Any = None

    @abstractmethod
    def up(self) -> None:
        """Bring everything up."""

    @abstractmethod
    def down(self) -> Any:
        """Tear everything down; safe on a half-built or already removed one."""

    def __enter__(self: M) -> M:
        self._old_sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self.up()
        except BaseException:
            self.down()
            signal.signal(signal.SIGTERM, self._old_sigterm)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.down()
        finally:
            signal.signal(signal.SIGTERM, self._old_sigterm)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt (so cleanup runs)."""
    old = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")

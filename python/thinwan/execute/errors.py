"""The error of a run that could not be completed (kept apart so the CLI can catch it
without importing the executors)."""

from __future__ import annotations

__all__ = ["RunError"]


class RunError(Exception):
    """A run could not be completed (simulator missing, failed or crashed)."""

"""Errors that are part of the interface: every user-caused failure is one of these, with a one-sentence message."""

from __future__ import annotations

import threading
from typing import Callable, Optional

#: ``progress(fraction in [0, 1], message)``: how long-running core calls report progress.
Progress = Callable[[float, str], None]


class CalibviewError(Exception):
    """A failure the user caused or can fix; ``str(error)`` is one sentence naming the file, the dataset path and
    what to do. The CLI prints it without a traceback, the GUI shows it in a dialog."""


class Cancelled(CalibviewError):
    """The caller set the cancel event; the work stopped without a result."""

    def __init__(self, message: str = "Cancelled.") -> None:
        super().__init__(message)


def check_cancel(cancel: Optional[threading.Event]) -> None:
    """Raise :class:`Cancelled` if ``cancel`` is set. Call it between chunks of work."""
    if cancel is not None and cancel.is_set():
        raise Cancelled()


def report(progress: Optional[Progress], fraction: float, message: str) -> None:
    """Call ``progress`` if one was given (fractions are clipped to [0, 1])."""
    if progress is not None:
        progress(min(max(float(fraction), 0.0), 1.0), message)

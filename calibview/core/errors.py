"""Errors that are part of the interface: every user-caused failure is one of these, with a one-sentence message."""

from __future__ import annotations

import threading
from typing import Callable, Optional

#: ``progress(fraction in [0, 1], message)``: how long-running core calls report progress.
Progress = Callable[[float, str], None]


class CalibviewError(Exception):
    """A failure the user caused or can fix; ``str(error)`` is one sentence naming the file, the dataset path and
    what to do. The CLI prints it without a traceback, the GUI shows it in a dialog."""


class ParameterError(CalibviewError):
    """A refused parameter value. The message names each parameter as a library caller spells it: ``name=value``
    or the bare ``name`` (``target_precision must lie in (0, 1], not 2.``); ``parameters`` lists those names, so
    that a program with other spellings (the command line's ``--target-precision``) can put its own in their
    place."""

    def __init__(self, message: str, *parameters: str) -> None:
        super().__init__(message)
        self.parameters = parameters


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

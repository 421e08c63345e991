"""Named points where a test makes the process die or a write fail, chosen by environment variables so that
subprocess tests are deterministic instead of racing a timer.

``CALIBVIEW_TEST_KILL_AT=<point>``: the process sends itself SIGKILL at that point (no cleanup of any kind runs,
as after ``kill -9``). ``CALIBVIEW_TEST_ENOSPC_AT=<point>``: an ``OSError(ENOSPC)`` is raised there, as a full disk
would. ``CALIBVIEW_TEST_NO_RENAME_EXCHANGE=1``: the folder swap takes its fallback path (rename aside, rename in).
Nothing happens when they are unset.
"""

from __future__ import annotations

import errno
import os
import signal

KILL_AT = "CALIBVIEW_TEST_KILL_AT"
ENOSPC_AT = "CALIBVIEW_TEST_ENOSPC_AT"
NO_RENAME_EXCHANGE = "CALIBVIEW_TEST_NO_RENAME_EXCHANGE"


def checkpoint(point: str) -> None:
    """Die (SIGKILL) or raise ``OSError(ENOSPC)`` here when the environment names ``point``; otherwise nothing."""
    if os.environ.get(KILL_AT) == point:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(ENOSPC_AT) == point:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def exchange_disabled() -> bool:
    """True when a test asked for the swap's fallback path (no ``renameat2``)."""
    return os.environ.get(NO_RENAME_EXCHANGE, "") not in ("", "0")

"""Advisory locks (``fcntl.flock``) that serialise the writers of one output.

The lock of an output ``DIR/NAME`` (an HDF5 file, a report or release folder) is the file ``DIR/.NAME.calibview-lock``
beside it, not the output itself: the output is replaced by a rename, so a lock on its inode would not outlive
the write. The holder writes its PID into the lock file, so that a writer refused after ``--lock-timeout`` seconds
can name it, and removes the file when done; a writer that locked a file just removed by its previous holder sees
that the path no longer names its inode and tries again. A killed holder's lock ends with its process (the kernel
drops it), and the file it leaves is taken over by the next writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator, Optional, Union

from calibview.core.errors import CalibviewError

#: seconds a writer waits for another writer of the same output (``--lock-timeout``)
LOCK_TIMEOUT = 10.0
_timeout = LOCK_TIMEOUT
_POLL = 0.05


def set_timeout(seconds: float) -> float:
    """Set how long (seconds, >= 0) writers wait for a held lock; returns the previous value."""
    global _timeout
    seconds = float(seconds)
    if not seconds >= 0 or seconds == float("inf"):
        raise CalibviewError(f"--lock-timeout must be a finite number of seconds >= 0, not {seconds:g}.")
    old, _timeout = _timeout, seconds
    return old


def lock_path(target: Union[str, os.PathLike]) -> Path:
    """The lock file of output ``target``: ``.NAME.calibview-lock`` in its folder."""
    target = Path(os.path.abspath(os.fspath(target)))
    return target.parent / f".{target.name}.calibview-lock"


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""


@contextlib.contextmanager
def output_lock(target: Union[str, os.PathLike], timeout: Optional[float] = None) -> Iterator[Path]:
    """Hold the lock of output ``target`` for the block; wait up to ``timeout`` seconds (default: the process's
    ``--lock-timeout``) for another holder, then refuse with one sentence naming its PID."""
    path = lock_path(target)
    wait = _timeout if timeout is None else timeout
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise CalibviewError(f"Cannot lock {target} for writing ({path}: {e.strerror or e}); nothing was "
                                 f"written.") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            if time.monotonic() >= deadline:
                who = f"PID {holder}" if holder else "a process whose PID it has not recorded yet"
                raise CalibviewError(f"{target} is being written by another calibview process ({who}); waited "
                                     f"{wait:g} s for it (--lock-timeout), nothing was written.") from None
            time.sleep(_POLL)
            continue
        try:
            st, now = os.fstat(fd), os.stat(path)
            current = (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)                   # its previous holder removed it after we opened it: lock the new one
    try:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass                       # a full disk: the lock holds all the same, without the PID
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


def hold(path: Union[str, os.PathLike]) -> int:
    """Lock a staging folder (or file) as owned by this process: returns the descriptor to close when done."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def owned(path: Union[str, os.PathLike]) -> bool:
    """True when a live process holds the lock of ``path`` (:func:`hold`); False when nobody does."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False

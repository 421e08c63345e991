"""Swap a complete staged folder in place of its target, so that a reader sees the old folder or the new one.

On Linux, ``renameat2(RENAME_EXCHANGE)`` (through ctypes; glibc >= 2.28, Linux >= 3.15, and a file system that
supports it) exchanges the two names in one step: the target is never missing and never mixed. Elsewhere the old
folder is renamed aside (``.NAME.calibview-old-*``) and the staged one renamed in; between these two renames the
target does not exist. A run killed in that moment leaves the old folder aside, and the next writer of the target
renames it back before anything else (:func:`calibview.core.io.durable.stale.sweep`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional

from calibview.core.io.durable.hooks import checkpoint, exchange_disabled

RENAME_EXCHANGE = 2
AT_FDCWD = -100
OLD_TAG = ".calibview-old-"
STAGING_TAG = ".calibview-staging-"


def _renameat2():
    if not sys.platform.startswith("linux") or exchange_disabled():
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: os.PathLike, b: os.PathLike) -> bool:
    """Exchange the names ``a`` and ``b`` atomically; False when this system or file system cannot (nothing was
    changed then), OSError for any other failure."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), os.fspath(b))


def staging_folder(target: Path) -> Path:
    """A new, empty staging folder for ``target`` in its parent (``.NAME.calibview-staging-PID-*``)."""
    return Path(tempfile.mkdtemp(prefix=f".{target.name}{STAGING_TAG}{os.getpid()}-", dir=target.parent))


def swap_in(staged: Path, target: Path) -> Optional[Path]:
    """Put the folder ``staged`` in place of ``target``; return where the old target now lies (to be removed by
    the caller), or None when there was none."""
    if not os.path.lexists(target):
        os.rename(staged, target)
        return None
    if exchange(staged, target):
        return staged                     # the old folder now has the staging name
    aside = Path(tempfile.mkdtemp(prefix=f".{target.name}{OLD_TAG}{os.getpid()}-", dir=target.parent))
    os.rename(target, aside)              # replaces the empty folder just made: the name is ours
    checkpoint("swap-aside")              # the moment without a target
    try:
        os.rename(staged, target)
    except OSError:
        os.rename(aside, target)
        raise
    return aside


def carry_over(source: Path, staged: Path, drop) -> None:
    """Hard-link (or, where the file system cannot, copy) into ``staged`` everything of folder ``source`` that
    ``staged`` lacks, except the relative names (``a/b.csv``) for which ``drop(name)`` is true. Symbolic links are
    copied as links, never followed; folders are recreated with their modes."""
    stack = [""]
    while stack:
        rel = stack.pop()
        for entry in os.scandir(source / rel if rel else source):
            name = f"{rel}/{entry.name}" if rel else entry.name
            dst = staged / name
            if drop(name):
                continue
            if entry.is_dir(follow_symlinks=False):
                if not os.path.lexists(dst):
                    os.mkdir(dst)
                    shutil.copystat(entry.path, dst, follow_symlinks=False)
                if os.path.isdir(dst) and not os.path.islink(dst):
                    stack.append(name)
                continue
            if os.path.lexists(dst):            # the new run wrote it: the new file wins
                continue
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), dst)
                continue
            try:
                os.link(entry.path, dst, follow_symlinks=False)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                shutil.copy2(entry.path, dst, follow_symlinks=False)

"""Find and remove what killed runs left beside an output: staging folders (``.NAME.calibview-staging-*``), old
folders of an interrupted swap (``.NAME.calibview-old-*``) and temporary HDF5 copies (``.NAME.PID.TID.tmp``).

Called by the next writer of the same output while it holds that output's lock (:mod:`.locks`), so no live writer
of the output is between its two renames or appending to a copy. A staging folder is locked by the process
writing it (:func:`.locks.hold`); anything is removed only when it is older than :data:`STALE_AFTER` seconds and no
live process holds its lock. An old folder whose target is missing (a kill between the two renames of the
fallback swap) is renamed back at once. Each removal is said on stderr (the ``calibview`` logger).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from pathlib import Path

from calibview.core.io.durable.locks import owned
from calibview.core.io.durable.swap import OLD_TAG, STAGING_TAG

#: seconds after which an unowned leftover is removed
STALE_AFTER = 60.0


def _log(message: str) -> None:
    logging.getLogger("calibview").warning(f"note: {message}")


def _stale(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return time.time() - st.st_mtime > STALE_AFTER and not owned(path)


def _remove(path: Path, what: str) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError as e:
        _log(f"{path}, {what} left by an interrupted calibview run, could not be removed ({e.strerror or e})")
        return
    _log(f"removed {path}, {what} left by an interrupted calibview run")


def sweep(target: os.PathLike, hdf5: bool = False) -> None:
    """Remove the leftovers of killed runs that wrote ``target`` (``hdf5``: its temporary copies, else its
    staging and old folders), restoring an old folder when ``target`` is missing; see the module docstring."""
    target = Path(os.path.abspath(os.fspath(target)))
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    if hdf5:
        copy = re.compile(r"^\." + re.escape(target.name) + r"\.\d+\.\d+\.tmp$")
        for name in names:
            if copy.match(name) and _stale(target.parent / name):
                _remove(target.parent / name, "a temporary copy")
        return
    old = sorted((n for n in names if n.startswith(f".{target.name}{OLD_TAG}")),
                 key=lambda n: os.lstat(target.parent / n).st_mtime if os.path.lexists(target.parent / n) else 0)
    if old and not os.path.lexists(target):
        os.rename(target.parent / old[-1], target)
        _log(f"restored {target} from {target.parent / old[-1]}, where an interrupted calibview run had moved it")
        old = old[:-1]
    for name in old:
        if _stale(target.parent / name):
            _remove(target.parent / name, "an old folder")
    for name in names:
        if name.startswith(f".{target.name}{STAGING_TAG}") and _stale(target.parent / name):
            _remove(target.parent / name, "a staging folder")
    if target.is_dir() and not target.is_symlink():        # inside: staging folders of earlier calibview versions
        for inner in os.listdir(target):
            if inner.startswith(STAGING_TAG) and _stale(target / inner):
                _remove(target / inner, "a staging folder")

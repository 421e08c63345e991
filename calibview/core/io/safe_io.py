"""Outputs never touch inputs (issue 12): the same-file test every writing command runs before it writes, and the
temporary-copy write of HDF5 files that are appended to.

``same_file`` compares device and inode (``os.stat``), so another name for an input (a hard link, a symbolic link,
``./x`` against ``x``) is caught as well as the same name. ``refuse_overwriting_inputs`` is called by ``import``,
``apply``, ``report`` (and ``release``) before anything is written; ``atomic_hdf5`` gives a writer a temporary copy
of the destination in its folder, renamed into place only when the write completed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import threading
from typing import Iterable, Iterator, Optional, Union

from calibview.core.errors import CalibviewError

PathLike = Union[str, "os.PathLike[str]"]


def _identity(path: PathLike) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def same_file(a: PathLike, b: PathLike) -> bool:
    """True if both paths exist and are the same file (device and inode), whatever their names."""
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def _expand(inputs: Iterable[Optional[PathLike]]) -> list[str]:
    files = []
    for p in inputs:
        if p is None:
            continue
        p = os.fspath(p)
        files += sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]   # shard patterns: every shard
    return files


def refuse_overwriting_inputs(outputs: Iterable[PathLike], inputs: Iterable[Optional[PathLike]]) -> None:
    """CalibviewError (one sentence, nothing written) if any output path is one of the input files."""
    files = _expand(inputs)
    for out in outputs:
        for inp in files:
            if same_file(out, inp):
                how = "" if os.path.abspath(out) == os.path.abspath(inp) else f" (under another name, {inp})"
                raise CalibviewError(f"{os.path.abspath(out)}: this output is one of the inputs being read{how}; "
                                     f"write to another path, nothing was written.")


@contextlib.contextmanager
def atomic_hdf5(path: PathLike) -> Iterator[str]:
    """Yield a temporary path in ``path``'s folder, holding a copy of ``path`` if it exists; when the block ends
    without an error the copy replaces ``path`` (one rename), otherwise it is removed and ``path`` is untouched."""
    file = os.path.realpath(os.fspath(path))        # through a symbolic link: replace its target, keep the link
    directory, base = os.path.split(file)
    if not os.path.isdir(directory):
        raise CalibviewError(f"{file}: the output directory does not exist.")
    tmp = os.path.join(directory, f".{base}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        if os.path.exists(file):
            shutil.copyfile(file, tmp)
            shutil.copymode(file, tmp)
        yield tmp
        os.replace(tmp, file)
    except OSError as e:
        raise CalibviewError(f"{file}: could not be written ({e.strerror or e}); it was left as it was.") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

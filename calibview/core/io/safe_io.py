"""Safe writes: an output never replaces an input, and no reader ever sees half of a file.

Every file calibview writes goes through here: :func:`atomic_write` for whole files (CSV, JSON, HTML, images:
a temporary file in the same folder, renamed into place), :func:`atomic_hdf5` for HDF5 files that are appended
to (a temporary copy of the destination, renamed into place only when the write completed), and the same-file
test every writing command runs before it writes (:func:`refuse_overwriting_inputs`).

``same_file`` compares device and inode (``os.stat``), so another name for an input (a hard link, a symbolic link,
``./x`` against ``x``) is caught as well as the same name. ``refuse_overwriting_inputs`` is called by ``import``,
``apply``, ``report`` (and ``release``) before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Union

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
def atomic_hdf5(path: PathLike, reserve: int = 0, init: Optional[Callable[[str], None]] = None) -> Iterator[str]:
    """Yield a temporary path in ``path``'s folder, holding a copy of ``path`` if it exists (else what ``init(tmp)``
    creates, if given); when the block ends without an error the copy replaces ``path`` (one rename), otherwise it
    is removed and ``path`` is untouched.

    The whole write holds the output's lock (:func:`calibview.core.io.durable.locks.output_lock`), so concurrent
    writers append one after the other; copies left by killed runs are removed first. ``reserve`` bytes (an upper
    bound of what the block adds) are allocated on disk before the block runs, so that a full disk is refused
    here, in one sentence, and never reaches the HDF5 library in the middle of a write (which it does not survive:
    it crashes on closing the file). The HDF5 library gives back what was not used when it closes the file."""
    from calibview.core.io.durable.hooks import checkpoint
    from calibview.core.io.durable.locks import output_lock
    from calibview.core.io.durable.stale import sweep

    file = os.path.realpath(os.fspath(path))        # through a symbolic link: replace its target, keep the link
    directory, base = os.path.split(file)
    if not os.path.isdir(directory):
        raise CalibviewError(f"{file}: the output directory does not exist.")
    tmp = os.path.join(directory, f".{base}.{os.getpid()}.{threading.get_ident()}.tmp")
    with output_lock(file):
        sweep(file, hdf5=True)
        try:
            if os.path.exists(file):
                shutil.copyfile(file, tmp)
                shutil.copymode(file, tmp)
            elif init is not None:
                init(tmp)
            checkpoint("hdf5-copied")
            if reserve > 0:
                _reserve(tmp, int(reserve), file)
            yield tmp
            checkpoint("hdf5-written")
            os.replace(tmp, file)
        except OSError as e:
            raise CalibviewError(f"{file}: could not be written ({e.strerror or e}); it was left as it was.") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _reserve(tmp: str, extra: int, file: str) -> None:
    """Allocate ``extra`` bytes past the end of ``tmp`` on disk (or, where the file system cannot, check that
    they are free); one sentence when the disk has not got them."""
    size = os.path.getsize(tmp)
    fd = os.open(tmp, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, size + extra)
        return
    except OSError as e:
        if e.errno != errno.ENOSPC and e.errno not in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS):
            raise
        full = e.errno == errno.ENOSPC
    except AttributeError:                           # no posix_fallocate on this system
        full = False
    finally:
        os.close(fd)
    if not full:
        st = os.statvfs(os.path.dirname(tmp))
        full = st.f_bavail * st.f_frsize < extra
    if full:
        raise CalibviewError(f"{file}: writing it needs up to {extra / 2**20:.1f} MB free on its disk, which has "
                             f"less (no space left on device); it was left as it was.")


#: where Linux (>= 4.7) shows the umask without changing it
PROC_STATUS = "/proc/self/status"
_UMASK_LOCK = threading.Lock()


def _current_umask() -> int:
    """The process umask, read from /proc where there is one; elsewhere POSIX only lets one read it by setting
    it, so it is set and restored at once (under a lock), at the time of a write and never on import."""
    try:
        with open(PROC_STATUS) as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half of one."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise CalibviewError(f"Cannot write {path}: {e.strerror or e}.") from None
    try:
        from calibview.core.io.durable.hooks import checkpoint

        # mkstemp creates the file 0600: keep the mode of the file being replaced, or give a new one the
        # permissions a plain open() would (0666 minus the umask).
        try:
            mode = os.stat(path).st_mode & 0o777
        except OSError:
            mode = 0o666 & ~_current_umask()
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as f:
            checkpoint("atomic-write")     # where tests kill the process or fill the disk
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise CalibviewError(f"Cannot write {path}: {e.strerror or e}.") from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

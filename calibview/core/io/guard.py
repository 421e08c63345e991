"""Untrusted input files: what calibview refuses to follow or to inflate in a hostile HDF5 file.

Logit files are exchanged between teams and downloaded from papers' supplements, so a file must not make calibview
read another file on the machine (external links, external raw storage, virtual datasets) or allocate far more than
it stores (chunks declared but never written, compression bombs). Every check here reads metadata only; none of
them opens a linked file. The process-wide :class:`Policy` (``--allow-external PATH``, ``--allow-sparse`` on the
command line) relaxes them; the window and every command share it, so an :class:`EvalRequest` stays as it is.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import h5py
import numpy as np

from calibview.core.errors import CalibviewError

#: a dataset declaring more than this, and more than RATIO times what it stores, is refused (scores only)
SIZE_LIMIT = 256 << 20
RATIO_LIMIT = 200
#: one HDF5 chunk is decompressed whole to read any row of it: larger chunks are refused
CHUNK_LIMIT = 256 << 20
_MAX_LINK_DEPTH = 16
_PREFIX_ENV = ("HDF5_EXT_PREFIX", "HDF5_VDS_PREFIX", "HDF5_EXTFILE_PREFIX")


@dataclass(frozen=True)
class Policy:
    """What the user allowed: files an input may point into (by device and inode), and sparse/bomb overrides."""

    allow_external: tuple[str, ...] = ()
    allow_sparse: bool = False
    #: ``--max-memory`` (None: the default), from which the read budget is derived (calibview.core.io.budget)
    max_memory: Optional[int] = None
    #: ``--allow-large-read``: read what the read budget refuses (in bounded blocks all the same)
    allow_large_read: bool = False


_policy = Policy()


def policy() -> Policy:
    """The process-wide policy in force (which foreign files may be followed, whether sparse datasets pass)."""
    return _policy


def set_policy(allow_external: Sequence[str] = (), allow_sparse: bool = False, max_memory: Optional[int] = None,
               allow_large_read: bool = False) -> Policy:
    """Set the process-wide policy (the CLI does, from its flags); returns the previous one.

    ``max_memory`` (bytes, None for the default) sets the read budget; ``allow_large_read`` lifts it."""
    global _policy
    old = _policy
    _policy = Policy(tuple(os.path.abspath(os.fspath(p)) for p in allow_external), bool(allow_sparse),
                     int(max_memory) if max_memory else None, bool(allow_large_read))
    return old


@contextlib.contextmanager
def using(allow_external: Sequence[str] = (), allow_sparse: bool = False, max_memory: Optional[int] = None,
          allow_large_read: bool = False) -> Iterator[Policy]:
    """Apply a policy for the ``with`` block only (see :func:`set_policy`); the previous one is restored after."""
    old = set_policy(allow_external, allow_sparse, max_memory, allow_large_read)
    try:
        yield _policy
    finally:
        set_policy(old.allow_external, old.allow_sparse, old.max_memory, old.allow_large_read)


def _mb(n: float) -> str:
    return f"{n / 2**20:,.1f} MB" if n >= 2**20 else f"{int(n):,} bytes"


def _identity(path: str) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)  # stat never opens the file (a FIFO stays unopened)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _allowed(target: str, file: str) -> bool:
    """True if every place HDF5 could find ``target`` (named inside ``file``) is a file the user allowed."""
    allowed = {i for i in (_identity(p) for p in _policy.allow_external) if i is not None}
    if not allowed or any(os.environ.get(v) for v in _PREFIX_ENV):
        return False
    if target == ".":
        target = file
    if os.path.isabs(target):
        candidates = [target]
    else:                                            # relative: the linking file's folder, then the current one
        candidates = [os.path.join(os.path.dirname(file), target), os.path.abspath(target)]
    found = [i for i in (_identity(c) for c in candidates) if i is not None]
    return bool(found) and all(i in allowed for i in found)


def _refuse_link(file: str, where: str, what: str, target: str) -> CalibviewError:
    return CalibviewError(f"{file}: {where} is {what} {target}, which calibview does not follow in an untrusted "
                          f"file; pass --allow-external {target} if you trust that file.")


def child(group: h5py.Group, name: str, file: str, depth: int = 0):
    """``group[name]`` (one path component) or None, following hard links, soft links within the file and only
    those external links whose target file the policy allows; the target of any other link is never opened."""
    if depth > _MAX_LINK_DEPTH:
        raise CalibviewError(f"{file}: the links at {group.name}/{name} are nested more than {_MAX_LINK_DEPTH} deep "
                             f"(a loop?); store the datasets directly.")
    try:
        link = group.get(name, getlink=True)
    except (KeyError, OSError, ValueError, TypeError):
        return None
    if link is None:
        return None
    where = group.name.rstrip("/") + "/" + name
    if isinstance(link, h5py.HardLink):
        return group.get(name)
    if isinstance(link, h5py.SoftLink):
        start = group.file["/"] if link.path.startswith("/") else group
        return resolve(start, link.path, file, depth + 1)
    if isinstance(link, h5py.ExternalLink):
        if not _allowed(link.filename, file):
            raise _refuse_link(file, where, "an external link to", link.filename)
        try:
            return group.get(name)
        except (KeyError, OSError) as e:
            raise CalibviewError(f"{file}: the external link {where} to {link.filename} could not be followed "
                                 f"({' '.join(str(e).split()).rstrip('.')}).") from None
    raise CalibviewError(f"{file}: {where} is a user-defined link, which calibview does not follow.")


def resolve(start: h5py.Group, path: str, file: str, depth: int = 0):
    """The object at ``path`` (absolute, or relative to ``start``), each component by :func:`child`; or None."""
    obj = start.file["/"] if path.startswith("/") else start
    for part in (p for p in path.split("/") if p and p != "."):
        if not isinstance(obj, h5py.Group):
            return None
        obj = child(obj, part, file, depth)
        if obj is None:
            return None
    return obj


def check_dataset(ds: h5py.Dataset, file: str, scores: bool = False, ratio: bool = False) -> None:
    """Refuse a dataset that reads other files, was declared but never written, lies in a hole of a sparse file,
    or inflates far beyond what it stores (``scores`` or ``ratio``: the compression-ratio rule); one sentence
    naming the dataset and both sizes. HDF5's own failures (a corrupt chunk index) are one sentence too."""
    try:
        _check_dataset(ds, file, scores, ratio)
    except (OSError, RuntimeError, KeyError, ValueError) as e:
        raise CalibviewError(f"{file}: the layout of {ds.name} could not be read "
                             f"({' '.join(str(e).split()).rstrip('.')}); the file may be corrupt.") from None


def _check_dataset(ds: h5py.Dataset, file: str, scores: bool, ratio: bool) -> None:
    name = ds.name
    if ds.is_virtual:
        try:
            sources = {s.file_name for s in ds.virtual_sources()}
        except (RuntimeError, OSError, ValueError, TypeError) as e:   # e.g. an unlimited mapping of an empty shape
            raise CalibviewError(f"{file}: {name} is a virtual dataset whose sources cannot be listed "
                                 f"({' '.join(str(e).split()).rstrip('.')}), so it is not read.") from None
        for source in sources:
            if not _allowed(source, file):
                shown = file if source == "." else source
                raise _refuse_link(file, name, "a virtual dataset reading", shown)
        return                                       # stored in its sources, which the user vouched for
    external = ds.external
    if external:
        for entry in external:
            target = os.fsdecode(entry[0])
            if not _allowed(target, file):
                raise _refuse_link(file, name, "stored in the external raw file", target)
        return
    if _policy.allow_sparse:
        return
    shape = tuple(int(s) for s in ds.shape or ())
    declared = int(np.prod(shape, dtype=object)) * ds.dtype.itemsize if shape else ds.dtype.itemsize
    if declared == 0:
        return
    dsid = ds.id
    layout = dsid.get_create_plist().get_layout()
    stored = int(dsid.get_storage_size())
    if layout == h5py.h5d.CHUNKED:
        chunks = tuple(int(c) for c in ds.chunks)
        chunk_bytes = int(np.prod(chunks, dtype=object)) * ds.dtype.itemsize
        if chunk_bytes > CHUNK_LIMIT:
            raise CalibviewError(f"{file}: {name} has HDF5 chunks of {_mb(chunk_bytes)} each (declared "
                                 f"{_mb(declared)}, stored {_mb(stored)}), over the {_mb(CHUNK_LIMIT)} that calibview "
                                 f"decompresses at once; rewrite it with smaller chunks or pass --allow-sparse.")
        expected = math.prod(-(-s // c) for s, c in zip(shape, chunks))
        written = int(dsid.get_num_chunks())
        if written < expected:
            raise CalibviewError(f"{file}: {name} declares {_mb(declared)} but only {written:,} of its {expected:,} "
                                 f"chunks were ever written ({_mb(stored)} stored); the rest would read as fill "
                                 f"values, so it is refused (pass --allow-sparse to read it anyway).")
    elif layout == h5py.h5d.CONTIGUOUS and (dsid.get_offset() is None or stored == 0):
        raise CalibviewError(f"{file}: {name} declares {_mb(declared)} but none of it was ever written (0 bytes "
                             f"stored), so it is refused (pass --allow-sparse to read it as fill values).")
    elif layout == h5py.h5d.CONTIGUOUS and stored > SIZE_LIMIT:
        on_disk = _bytes_on_disk(ds.file.filename, int(dsid.get_offset()), stored)
        if on_disk is not None and RATIO_LIMIT * on_disk < stored:
            raise CalibviewError(f"{file}: {name} spans {_mb(stored)} of the file but only {_mb(on_disk)} of them "
                                 f"are on disk (the rest are holes of a sparse file, which read as zeros), so it is "
                                 f"refused (pass --allow-sparse to read it anyway).")
    if (scores or ratio) and declared > SIZE_LIMIT and declared > RATIO_LIMIT * stored:
        what = " of scores" if scores else ""
        why = ", which real logits never reach" if scores else ""
        raise CalibviewError(f"{file}: {name} declares {_mb(declared)}{what} but stores only {_mb(stored)} "
                             f"(over {RATIO_LIMIT}x compression{why}), so it is refused as "
                             f"a possible compression bomb (pass --allow-sparse to read it anyway).")


#: at most this many data/hole segments are followed; a file cut finer than that counts as written
_MAX_SEGMENTS = 4096


def _bytes_on_disk(path: str, offset: int, size: int) -> Optional[int]:
    """How many of the bytes ``offset .. offset + size`` of the file are backed by disk blocks (SEEK_DATA and
    SEEK_HOLE), or None where the system cannot tell. A hole of a sparse file reads as zeros."""
    if not (hasattr(os, "SEEK_DATA") and hasattr(os, "SEEK_HOLE")):
        return None
    end, at, data = offset + size, offset, 0
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        for _ in range(_MAX_SEGMENTS):
            try:
                start = os.lseek(fd, at, os.SEEK_DATA)
            except OSError as e:               # ENXIO: no data after ``at``; anything else: cannot tell
                return data if e.errno == errno.ENXIO else None
            if start >= end:
                return data
            stop = min(end, os.lseek(fd, start, os.SEEK_HOLE))
            data += stop - start
            at = stop
            if at >= end:
                return data
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def check_archive_member(src: str, member: str, uncompressed: int, compressed: int) -> None:
    """The same size rule for a member of a .npz (zip) archive."""
    if not _policy.allow_sparse and uncompressed > SIZE_LIMIT and uncompressed > RATIO_LIMIT * compressed:
        raise CalibviewError(f"{src}: the array {member} declares {_mb(uncompressed)} but stores only "
                             f"{_mb(compressed)} (over {RATIO_LIMIT}x compression), so it is refused as a possible "
                             f"zip bomb (pass --allow-sparse to import it anyway).")

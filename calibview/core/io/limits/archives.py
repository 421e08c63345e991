"""The declared sizes of .npz and .pt archives, checked before anything is loaded from them.

numpy and torch inflate every member they load at once, so a 2 MB archive of deflated members can declare
gigabytes. The compression-ratio rule of :mod:`calibview.core.io.guard` (over 256 MB declared and over 200x what
is stored) applies to each member and to the sum of the members to be loaded, and that sum must fit the read
budget (:func:`calibview.core.io.limits.cost.read_budget`). Only the zip directory and the .npy headers are read.
"""

from __future__ import annotations

import os
import zipfile
from typing import Callable

import numpy as np

from calibview.core.errors import CalibviewError
from calibview.core.io import guard
from calibview.core.io.limits.cost import read_budget
from calibview.core.io.memory import human


def _npy_bytes(member) -> int:
    """Bytes the .npy header of an open archive member declares (0 when it is not a plain .npy header)."""
    try:
        version = np.lib.format.read_magic(member)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(member)
        return int(np.prod(shape, dtype=object)) * dtype.itemsize
    except (ValueError, TypeError, EOFError, SyntaxError):
        return 0                           # not a plain .npy: np.load gives its own error


def check_total(src: str, what: str, declared: int, stored: int, count: int) -> None:
    """Refuse ``count`` members declaring ``declared`` bytes in all (``stored`` bytes in the archive) that break the
    compression-ratio rule or exceed the read budget; one sentence, before anything is loaded."""
    policy = guard.policy()
    if policy.allow_sparse:
        return
    if declared > guard.SIZE_LIMIT and declared > guard.RATIO_LIMIT * stored:
        raise CalibviewError(f"{src}: the {count} {what} to be loaded declare {human(declared)} in all but store only "
                             f"{human(stored)} (over {guard.RATIO_LIMIT}x compression), so they are refused as a "
                             f"possible zip bomb before any is loaded (pass --allow-sparse to import them anyway).")
    budget = read_budget()
    if declared > budget and not policy.allow_large_read:
        raise CalibviewError(f"{src}: the {count} {what} to be loaded take {human(declared)} in memory, over the "
                             f"{human(budget)} read budget, so none is loaded; split the file, or pass "
                             f"--allow-large-read to load them anyway.")


def check_npz(src: str, wanted: Callable[[str], bool]) -> None:
    """The size rules for the members of the .npz ``src`` whose key (name without ``.npy``) ``wanted`` accepts:
    each member's size (the larger of what the zip and the .npy header declare) and their sum."""
    total = stored = count = 0
    with zipfile.ZipFile(src) as z:
        for info in z.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if not wanted(key):
                continue
            with z.open(info) as member:
                declared = max(info.file_size, _npy_bytes(member))
            guard.check_archive_member(src, key, declared, info.compress_size)
            total, stored, count = total + declared, stored + info.compress_size, count + 1
    check_total(src, "arrays", total, stored, count)


def check_torch(src: str) -> None:
    """The size rules for a .pt/.pth file before torch loads it: a zip archive (torch >= 1.6) by the sizes its
    directory declares for every record (the tensors' storages and the pickle); an older, unzipped file by its size."""
    if not zipfile.is_zipfile(src):
        size = os.path.getsize(src)
        check_total(src, "records", size, size, 1)
        return
    try:
        with zipfile.ZipFile(src) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise CalibviewError(f"{src}: not a readable PyTorch file ({' '.join(str(e).split()).rstrip('.')}).") from None
    for info in infos:
        guard.check_archive_member(src, info.filename, info.file_size, info.compress_size)
    check_total(src, "records", sum(i.file_size for i in infos), sum(i.compress_size for i in infos), len(infos))

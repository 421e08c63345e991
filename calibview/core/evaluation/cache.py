"""A bounded least-recently-used cache for the engine's stages, and the file identity that keys them.

Keys are plain tuples whose first two items are the file as the user named it and its identity (path, size and
modification time of every file behind it); :meth:`LRUCache.forget_file` drops every entry of a file whose
identity changed, so a file rewritten on disk is read again. Sizes are counted in bytes of the arrays an entry
holds (:func:`nbytes`); entries are evicted oldest-use first once the budget is exceeded.
"""

from __future__ import annotations

import glob
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional

import numpy as np
import torch

#: default memory budget of an engine's cache (the per-sample vectors of ~20 calibrators of a 1M-sample split)
DEFAULT_BUDGET = 1 << 30


#: bytes counted for every entry besides its arrays (the Python objects around them)
ENTRY_OVERHEAD = 512


def file_identity(file: str) -> tuple:
    """(path, size, mtime_ns) of the file, or of every shard of a glob pattern, sorted: changes when any of them
    is rewritten. A missing file gives an empty identity (reading it reports the error)."""
    paths = sorted(glob.glob(file)) if any(c in file for c in "*?[") else [file]
    ident = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        ident.append((os.path.realpath(p), st.st_size, st.st_mtime_ns))
    return tuple(ident)


def nbytes(obj: Any, _depth: int = 0) -> int:
    """Bytes held by the arrays inside ``obj`` (arrays, tensors, mappings, sequences, dataclass fields)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, torch.Tensor):
        return int(obj.numel() * obj.element_size())
    if _depth > 4:
        return 0
    if isinstance(obj, dict):
        return sum(nbytes(v, _depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v, _depth + 1) for v in obj)
    if hasattr(obj, "__dataclass_fields__"):
        return sum(nbytes(getattr(obj, f, None), _depth + 1) for f in obj.__dataclass_fields__)
    if hasattr(obj, "__dict__"):
        return sum(nbytes(v, _depth + 1) for v in vars(obj).values())
    return 0


class LRUCache:
    """Thread-safe mapping with a byte budget; ``hits`` and ``misses`` count lookups."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = int(budget)
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.size = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value stored under ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return default
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any, size: Optional[int] = None) -> Any:
        """Store ``value`` (its size counted by :func:`nbytes` unless given) and evict the least recently used
        entries beyond the budget; a value larger than the whole budget is returned but not kept."""
        size = ENTRY_OVERHEAD + (nbytes(value) if size is None else int(size))
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.size -= old[1]
            if size <= self.budget:
                self._items[key] = (value, size)
                self.size += size
            while self.size > self.budget and self._items:
                _, (_, s) = self._items.popitem(last=False)
                self.size -= s
                self.evictions += 1
        return value

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The value under ``key``; on a miss, ``build()`` stored under it (see :meth:`put`) and returned."""
        value = self.get(key, _MISSING)
        return self.put(key, build()) if value is _MISSING else value

    def forget(self, predicate: Callable[[Hashable], bool]) -> int:
        """Drop every entry whose key satisfies ``predicate``; returns how many were dropped."""
        with self._lock:
            doomed = [k for k in self._items if predicate(k)]
            for k in doomed:
                self.size -= self._items.pop(k)[1]
        return len(doomed)

    def forget_file(self, file: str, identity: tuple) -> int:
        """Drop the entries of ``file`` whose identity is not ``identity`` (the file changed on disk)."""
        return self.forget(lambda k: isinstance(k, tuple) and len(k) > 2 and k[1] == file and k[2] != identity)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._items.clear()
            self.size = 0


_MISSING = object()

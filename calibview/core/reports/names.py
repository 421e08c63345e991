"""File names derived from run names and splits, one per distinct original, so that no output overwrites another.

Sanitising keeps letters, digits, ``-`` and ``.`` and turns every other character into ``_``, so ``m/a<b``,
``m/a>b`` and ``m_a/b`` all become ``m_a_b``. Where distinct originals sanitise to the same name, each of them gets
``_`` and the first 8 hex digits of the SHA-256 of its original parts (joined by NUL) appended (more digits in
the unlikely case that is not enough), so the names stay readable, are stable from run to run, and are distinct.
"""

from __future__ import annotations

import hashlib
from typing import Hashable, Sequence


def sanitise(part: str) -> str:
    """``part`` with every character but letters, digits, ``-`` and ``.`` replaced by ``_``."""
    return "".join(c if c.isalnum() or c in "-." else "_" for c in part)


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def unique_stems(keys: Sequence[Sequence[str]], prefix: str) -> dict[tuple, str]:
    """``{tuple(key): stem}`` for the given keys (each a sequence of texts: a run name, a split): the stem is
    ``prefix`` and the sanitised parts joined by ``_``; keys whose stems collide get a short hash of the original
    parts appended. Equal keys get the same stem, distinct keys distinct stems."""
    distinct: list[tuple] = list(dict.fromkeys(tuple(k) for k in keys))
    plain = {k: "_".join([prefix] + [sanitise(p) for p in k]) for k in distinct}
    width = 8
    while True:
        seen: dict[str, list[tuple]] = {}
        for k in distinct:
            seen.setdefault(plain[k], []).append(k)
        out = {k: plain[k] if len(seen[plain[k]]) == 1 else f"{plain[k]}_{_digest(k)[:width]}" for k in distinct}
        if len(set(out.values())) == len(out) or width >= 64:
            return out
        width *= 2                          # a hashed name met another name: lengthen every hash


def unique_names(keys: Sequence[Sequence[Hashable]], prefix: str, suffix: str) -> list[str]:
    """One file name per key, in order (:func:`unique_stems` then ``suffix``, e.g. ``".png"``)."""
    stems = unique_stems([tuple(str(p) for p in k) for k in keys], prefix)
    return [stems[tuple(str(p) for p in k)] + suffix for k in keys]


__all__ = ["sanitise", "unique_names", "unique_stems"]

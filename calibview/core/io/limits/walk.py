"""The groups of an HDF5 file, walked iteratively (a file of groups nested 1,500 deep would overflow Python's
recursion) with a depth limit, and HDF5's failures while listing turned into one sentence naming the group."""

from __future__ import annotations

from typing import Callable, Iterator

import h5py

from calibview.core.errors import CalibviewError

#: groups nested deeper than this below the root are refused (the format needs three levels; 64 is generous)
MAX_DEPTH = 64
#: the errors h5py raises for a damaged file while listing (a bad B-tree signature is a RuntimeError)
H5_ERRORS = (OSError, RuntimeError, KeyError, ValueError)


def _brief(e: BaseException) -> str:
    return " ".join(str(e).split()).rstrip(".").replace(". ", "; ")


def damaged(file: str, where: str, e: BaseException) -> CalibviewError:
    """The one sentence for an HDF5 failure at ``where`` (a group or dataset path) of ``file``."""
    return CalibviewError(f"{file}: {where} could not be read ({_brief(e)}); the file may be corrupt.")


def groups(root: h5py.Group, file: str, skip: Callable[[h5py.Group, str], bool] = lambda g, n: False
           ) -> Iterator[h5py.Group]:
    """Every group reachable from ``root`` by hard links, each once, in file order (depth first, parents before
    children); ``skip(group, name)`` leaves a child out. CalibviewError past :data:`MAX_DEPTH` levels or when
    HDF5 fails to list a group."""
    seen: set = set()
    stack: list[tuple[h5py.Group, int]] = [(root, 0)]
    while stack:
        group, depth = stack.pop()
        where = group.name
        try:
            if group.id in seen:            # the same group reached by two hard links
                continue
            seen.add(group.id)
        except H5_ERRORS as e:
            raise damaged(file, where, e) from None
        yield group
        try:
            children = []
            for name in group:
                if skip(group, name):
                    continue
                if isinstance(group.get(name, getlink=True), h5py.HardLink):
                    child = group.get(name)
                    if isinstance(child, h5py.Group):
                        children.append(child)
        except H5_ERRORS as e:
            raise damaged(file, where, e) from None
        if children and depth + 1 > MAX_DEPTH:
            shown = where if len(where) <= 80 else where[:79] + "…"
            raise CalibviewError(f"{file}: the groups below {shown} are nested more than {MAX_DEPTH} deep, which no "
                                 f"logits file needs; store the runs as /<model>/<dataset>/<split>.")
        stack.extend((c, depth + 1) for c in reversed(children))

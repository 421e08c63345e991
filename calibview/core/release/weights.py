"""The model weights an inference config ships with: ``release --weights FILE`` records each file's SHA-256 and
size in the config (its ``weights`` list), ``check --weights FILE`` verifies files against that record.

A record is ``{"file": base name, "sha256": hex digest of the bytes, "size": bytes}``; files are matched by their
base name, so the weights may live in another folder when they are checked. A config without ``--weights`` has no
``weights`` key at all (configs written before it existed read the same).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Mapping, Sequence

from calibview.core.errors import CalibviewError
from calibview.core.release.acceptance import Criterion

#: bytes read per step while hashing (a file of many GB is never read whole)
READ_BYTES = 16 << 20


def file_record(path: str | os.PathLike) -> dict:
    """``{"file", "sha256", "size"}`` of one weights file, read in blocks; a missing or unreadable file is a
    one-sentence CalibviewError."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise CalibviewError(f"{path}: the weights file does not exist; check the path given to --weights.")
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            size = 0
            for block in iter(lambda: f.read(READ_BYTES), b""):
                h.update(block)
                size += len(block)
    except OSError as e:
        raise CalibviewError(f"{path}: could not read the weights file ({e.strerror or e}).") from None
    return {"file": os.path.basename(path), "sha256": h.hexdigest(), "size": size}


def weights_records(paths: Sequence[str | os.PathLike]) -> list[dict]:
    """The records of ``paths`` in their order; two files of the same base name are refused (they could not be
    told apart when checked)."""
    records = [file_record(p) for p in paths]
    names = [r["file"] for r in records]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CalibviewError(f"--weights names two files called {twice[0]}; weights are matched by file name, so "
                             f"give each file a distinct name.")
    return records


def weights_criteria(config: Mapping[str, Any], paths: Sequence[str | os.PathLike]) -> list[Criterion]:
    """One checklist row per file of ``paths``: it passes when the config records a file of that name with the
    same SHA-256 and size. Recorded files that were not given are not checked."""
    recorded = {r.get("file"): r for r in (config.get("weights") or []) if isinstance(r, Mapping)}
    out = []
    for rec in weights_records(paths):
        name = rec["file"]
        old = recorded.get(name)
        if old is None:
            value = ("the config records no weights" if not recorded else
                     f"not recorded (the config has {', '.join(map(str, recorded))})")
            ok = False
        elif old.get("sha256") == rec["sha256"] and old.get("size") == rec["size"]:
            value, ok = f"sha256 {rec['sha256'][:12]}, {rec['size']} bytes", True
        else:
            value = (f"sha256 {rec['sha256'][:12]}, {rec['size']} bytes; recorded {str(old.get('sha256'))[:12]}, "
                     f"{old.get('size')} bytes")
            ok = False
        out.append(Criterion(f"weights {name} match the config", value, None, None, "match", ok))
    return out

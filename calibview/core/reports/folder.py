"""A report folder that is always one run's report: ``manifest.json`` lists what the run wrote.

The run's writers write into a staging folder inside ``--out`` (``ReportFolder.dir``); only when all of them
finished are the files renamed into place, then the files of the previous manifest that this run did not rewrite
are removed (only those, and only if unchanged since), and the new manifest is written last. A failed run leaves
the previous report as it was. A non-empty folder without a manifest is refused unless ``force``. The manifest
lists whatever files the run wrote (any writer may add files), with the settings, the calibview version and the
inputs' identity (path, size, modification time, device and inode).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional

from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.io.safe_io import atomic_write
from calibview.core.io.safe_io import refuse_overwriting_inputs, same_file

MANIFEST = "manifest.json"
SCHEMA = "calibview.report-manifest/1"
_STAGING_PREFIX = ".calibview-staging-"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _input_identity(path: str) -> dict:
    st = os.stat(path)
    return {"path": os.path.abspath(path), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "device": st.st_dev,
            "inode": st.st_ino}


def _safe_name(name: object) -> bool:
    """A manifest entry may only name a file below the folder (a hostile manifest cannot make us delete /etc/x)."""
    if not isinstance(name, str) or not name or os.path.isabs(name) or "\\" in name:
        return False
    parts = name.split("/")
    return all(p not in ("", ".", "..") for p in parts) and name != MANIFEST


class ReportFolder:
    """``with ReportFolder(out, inputs=[...], settings={...}, force=False) as folder:`` write into ``folder.dir``;
    the files move into ``out`` when the block ends without an error (``folder.written`` then lists them)."""

    def __init__(self, out, *, inputs: Iterable[str] = (), settings: Optional[Mapping] = None,
                 force: bool = False) -> None:
        self.out = Path(os.path.abspath(os.fspath(out)))
        self.inputs = [p for pattern in inputs for p in (sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[")
                                                         else [pattern])]
        self.settings = dict(settings or {})
        self.written: list[Path] = []
        self.notes: list[str] = []
        self.dir: Optional[Path] = None
        self._created = False
        if self.out.exists() and not self.out.is_dir():
            raise ParameterError(f"out={self.out} exists and is not a directory; give a directory to write into.",
                                 "out")
        refuse_overwriting_inputs([self.out / MANIFEST], self.inputs)
        self.previous = self._previous_manifest(force)

    def _previous_manifest(self, force: bool) -> dict:
        if not self.out.is_dir():
            return {}
        manifest = self.out / MANIFEST
        others = [p for p in self.out.iterdir() if not p.name.startswith(_STAGING_PREFIX)]
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            if not (isinstance(data, dict) and data.get("schema") == SCHEMA and isinstance(data.get("files"), list)):
                raise ValueError("not a calibview report manifest")
            return data
        except (OSError, ValueError, UnicodeDecodeError):
            if others and not force:
                what = "an unreadable" if manifest.exists() else "no"
                raise ParameterError(f"out={self.out} is not empty and has {what} {MANIFEST} of an earlier report, "
                                     f"so calibview will not write into it; choose an empty or new folder, or pass "
                                     f"force=True to add the report's files (other files are left alone).",
                                     "out", "force") from None
            return {}

    def __enter__(self) -> "ReportFolder":
        try:
            self._created = not self.out.exists()
            self.out.mkdir(parents=True, exist_ok=True)
            self.dir = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=self.out))
        except OSError as e:
            raise CalibviewError(f"Cannot write into {self.out}: {e.strerror or e}.") from None
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self._commit()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            if exc_type is not None and self._created:
                try:
                    self.out.rmdir()             # only if it is still empty: nothing written
                except OSError:
                    pass

    def _commit(self) -> None:
        staged = sorted(p.relative_to(self.dir).as_posix() for p in self.dir.rglob("*") if p.is_file())
        refuse_overwriting_inputs([self.out / n for n in staged], self.inputs)
        entries = [{"name": n, "bytes": (self.dir / n).stat().st_size, "sha256": _sha256(self.dir / n)}
                   for n in staged]
        try:
            for name in staged:
                target = self.out / name
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.dir / name, target)
                self.written.append(target)
        except OSError as e:
            raise CalibviewError(f"Cannot write into {self.out}: {e.strerror or e}.") from None
        self._remove_stale(set(staged))
        from calibview._version import __version__
        manifest = {"schema": SCHEMA, "calibview_version": __version__,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "settings": self.settings, "inputs": [_input_identity(p) for p in self.inputs if os.path.exists(p)],
                    "files": entries}
        atomic_write(self.out / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
        self.written.append(self.out / MANIFEST)

    def _remove_stale(self, rewritten: set) -> None:
        """The previous manifest's files this run did not rewrite, if still as that run left them."""
        for entry in self.previous.get("files", []):
            name = entry.get("name") if isinstance(entry, dict) else None
            if not _safe_name(name) or name in rewritten:
                continue
            path = self.out / name
            if path.is_symlink() or not path.is_file() or any(same_file(path, i) for i in self.inputs):
                continue
            if _sha256(path) != entry.get("sha256"):
                self.notes.append(f"{path} was listed by the previous report but changed since; it was left in place")
                continue
            try:
                path.unlink()
            except OSError as e:
                self.notes.append(f"{path} of the previous report could not be removed ({e.strerror or e})")

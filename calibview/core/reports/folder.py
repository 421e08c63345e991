"""A report (or release) folder that is always one run's output: ``manifest.json`` lists what the run wrote.

The run's writers write into a staging folder beside ``--out``, in its parent (``ReportFolder.dir``). When all of
them finished, under the lock of ``--out`` (:mod:`calibview.core.io.durable.locks`): the leftovers of killed runs
are removed (:mod:`calibview.core.io.durable.stale`), the files of ``--out`` that calibview did not write are
hard-linked (or copied) into the staging folder, the manifest is written there, and the staging folder is swapped
in place of ``--out`` in one step (:func:`calibview.core.io.durable.swap.swap_in`); then the old folder is removed.
A reader sees the old set of files or the new one, never a mix. The files of the previous manifest that this run
did not rewrite are left out of the new folder (only those, and only if unchanged since); every entry of that
manifest must name a path that stays inside ``--out`` with every symbolic link followed, or the run is refused.
A failed run (a write error, a full disk) removes its staging folder and leaves ``--out`` as it was. A non-empty
folder without a manifest of the same kind is refused unless ``force`` (a report; a release has no ``force``, but
a release folder of an earlier version, without a manifest, is recognised by its file names). The manifest lists
whatever files the run wrote, with the settings, the calibview version and the inputs' identity (path, size,
modification time, device and inode).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional

from calibview.core.errors import CalibviewError, ParameterError
from calibview.core.io.durable import swap
from calibview.core.io.durable.hooks import checkpoint
from calibview.core.io.durable.locks import hold, output_lock
from calibview.core.io.durable.stale import sweep
from calibview.core.io.safe_io import atomic_write
from calibview.core.io.safe_io import refuse_overwriting_inputs, same_file

MANIFEST = "manifest.json"
SCHEMA = "calibview.report-manifest/1"
RELEASE_SCHEMA = "calibview.release-manifest/1"
#: what a release folder written before releases had a manifest holds
RELEASE_FILES = ("inference_config.json", "metrics.csv", "per_class.csv", "report.html", "diagram.png")


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
    the folder is swapped in place of ``out`` when the block ends without an error (``folder.written`` then lists
    its files). ``release=True``: a release folder (its own manifest schema, and no ``force``)."""

    def __init__(self, out, *, inputs: Iterable[str] = (), settings: Optional[Mapping] = None,
                 force: bool = False, release: bool = False) -> None:
        self.out = Path(os.path.abspath(os.fspath(out)))
        self.inputs = [p for pattern in inputs for p in (sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[")
                                                         else [pattern])]
        self.settings = dict(settings or {})
        self.force = bool(force) and not release
        self.release = release
        self.schema = RELEASE_SCHEMA if release else SCHEMA
        self.written: list[Path] = []
        self.notes: list[str] = []
        self.dir: Optional[Path] = None
        self._owner: Optional[int] = None
        if self.out.exists() and not self.out.is_dir():
            raise ParameterError(f"out={self.out} exists and is not a directory; give a directory to write into.",
                                 "out")
        refuse_overwriting_inputs([self.out / MANIFEST], self.inputs)
        self.previous = self._previous_manifest()

    # ----------------------------------------------------------------------------------- the previous output

    def _previous_manifest(self) -> dict:
        if not self.out.is_dir():
            return {}
        manifest = self.out / MANIFEST
        others = [p for p in self.out.iterdir() if not p.name.startswith(swap.STAGING_TAG)]
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            if not (isinstance(data, dict) and data.get("schema") == self.schema and isinstance(data.get("files"),
                                                                                                    list)):
                raise ValueError("not a calibview manifest of this kind")
        except (OSError, ValueError, UnicodeDecodeError):
            if not others or self.force:
                return {}
            if self.release:
                return self._earlier_release(others, manifest)
            what = "an unreadable" if manifest.exists() else "no"
            raise ParameterError(f"out={self.out} is not empty and has {what} {MANIFEST} of an earlier report, "
                                 f"so calibview will not write into it; choose an empty or new folder, or pass "
                                 f"force=True to add the report's files (other files are left alone).",
                                 "out", "force") from None
        self._check_entries(data["files"])
        return data

    def _earlier_release(self, others: list, manifest: Path) -> dict:
        """A release folder of a calibview version that wrote no manifest: only release files, with a config."""
        names = {p.name for p in others}
        if (self.out / RELEASE_FILES[0]).is_file() and names <= set(RELEASE_FILES) and not manifest.exists() \
                and all(p.is_file() and not p.is_symlink() for p in others):
            return {"files": [{"name": n, "sha256": _sha256(self.out / n)} for n in sorted(names)]}
        raise ParameterError(f"out={self.out} is not empty and is not an earlier release (it has no {MANIFEST} of "
                             f"one), so calibview will not write into it; choose an empty or new folder.", "out")

    def _check_entries(self, entries: list) -> None:
        """Every entry names a path inside ``out`` once each symbolic link on the way is followed."""
        real = os.path.realpath(self.out)
        for entry in entries:
            name = entry.get("name") if isinstance(entry, dict) else None
            where = (os.path.realpath(os.path.join(real, name)) if _safe_name(name) else None)
            if where is None or os.path.commonpath([real, where]) != real:
                shown = f"{name!r}" + (f", which resolves to {where}" if where else "")
                raise CalibviewError(f"{self.out / MANIFEST} lists {shown}, a path outside {self.out}; calibview "
                                     f"only removes files inside the folder it writes, so it refuses this manifest "
                                     f"(remove that entry, or the manifest, and run again).")

    # ------------------------------------------------------------------------------------- staging and swap

    def __enter__(self) -> "ReportFolder":
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self.dir = swap.staging_folder(Path(os.path.realpath(self.out)))
            self._owner = hold(self.dir)      # a staging folder in use is never taken for a killed run's
        except OSError as e:
            raise CalibviewError(f"Cannot write into {self.out}: {e.strerror or e}.") from None
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        staging = self.dir
        try:
            if exc_type is None:
                self._commit()
        except (OSError, CalibviewError) as e:
            exc = e
        finally:
            if self._owner is not None:
                os.close(self._owner)
            shutil.rmtree(staging, ignore_errors=True)      # the staging folder, or the old folder after a swap
        if isinstance(exc, OSError):           # a write error (a full disk): one sentence, --out as it was
            raise CalibviewError(f"Cannot write into {self.out} ({exc.strerror or exc}); it was left as it "
                                 f"was.") from None
        if isinstance(exc, CalibviewError) and str(staging) in str(exc):     # name --out, not the staging folder
            raise CalibviewError(str(exc).replace(str(staging), str(self.out)).rstrip(".")
                                 + f"; {self.out} was left as it was.") from None
        if exc is not None and exc_type is None:
            raise exc

    def _commit(self) -> None:
        target = Path(os.path.realpath(self.out))            # through a symbolic link: swap its target
        staged = sorted(p.relative_to(self.dir).as_posix() for p in self.dir.rglob("*") if p.is_file())
        refuse_overwriting_inputs([self.out / n for n in staged], self.inputs)
        entries = [{"name": n, "bytes": (self.dir / n).stat().st_size, "sha256": _sha256(self.dir / n)}
                   for n in staged]
        checkpoint("folder-staged")
        with output_lock(target):
            sweep(target)
            if target.exists() and not target.is_dir():
                raise CalibviewError(f"{self.out} is no longer a directory; nothing was written.")
            self.previous = self._previous_manifest()     # again: another writer may have swapped in since
            if target.is_dir():
                dropped = self._dropped(target, set(staged))
                swap.carry_over(target, self.dir, lambda n: n == MANIFEST or n in dropped)
            from calibview._version import __version__
            manifest = {"schema": self.schema, "calibview_version": __version__,
                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "settings": self.settings,
                        "inputs": [_input_identity(p) for p in self.inputs if os.path.exists(p)], "files": entries}
            atomic_write(self.dir / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
            checkpoint("folder-linked")
            old = swap.swap_in(self.dir, target)
            checkpoint("folder-swapped")
            if old is not None and old != self.dir:
                shutil.rmtree(old, ignore_errors=True)
        self.written = [self.out / n for n in staged] + [self.out / MANIFEST]

    def _dropped(self, target: Path, rewritten: set) -> set:
        """The previous manifest's files this run did not rewrite, if still as that run left them."""
        out = set()
        for entry in self.previous.get("files", []):
            name = entry.get("name")
            if name in rewritten:
                continue
            path = target / name
            if path.is_symlink() or not path.is_file() or any(same_file(path, i) for i in self.inputs):
                continue
            if _sha256(path) != entry.get("sha256"):
                self.notes.append(f"{self.out / name} was listed by the previous output but changed since; it was "
                                  f"left in place")
                continue
            out.add(name)
        return out

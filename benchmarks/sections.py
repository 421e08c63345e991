"""Each benchmark writes its own section of RESULTS.md, between an HTML-comment pair such as
``<!-- bench_engine -->`` ... ``<!-- /bench_engine -->``, and leaves every other section as it was."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else what the platform module knows (for the sections' headers)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def write_section(path, text: str, begin: str, end: str) -> None:
    """Replace the section of ``path`` between ``begin`` and ``end`` by ``text`` (which starts with ``begin`` and
    ends with ``end``); appended after a blank line when the file has no such section, the file created when
    missing. Written to a temporary file and renamed into place, so an interrupted run leaves the old file."""
    path = Path(path)
    old = path.read_text() if path.exists() else ""
    if begin in old and end in old:
        new = old[:old.index(begin)] + text.rstrip("\n") + old[old.index(end) + len(end):]
    else:
        new = (old.rstrip("\n") + "\n\n" if old.strip() else "") + text
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(new)
    os.replace(tmp, path)

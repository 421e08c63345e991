"""What several commands share besides the options: computing every run under one progress bar before anything is
written (slices, conformal), the diagram as PNG bytes, the output folder, writing every file after everything was
computed, and the checklist as a table (release, check, drift). Not a command itself."""

from __future__ import annotations

import tempfile
from pathlib import Path

from calibview.core.errors import CalibviewError


def compute_each(items, name_of, compute, *, quiet: bool) -> list:
    """``compute(item, bar, cancel)`` for each of ``items`` under one progress bar (prefixed with ``name_of(item)``
    and the count; off with ``quiet``), before anything is written; then every result's ``notes`` logged as
    ``note: <run>: <note>`` (results carry ``run`` and ``notes``). Returns the results in order."""
    import logging
    import threading

    from calibview.cli.options import ProgressBar

    bar = ProgressBar(enabled=False if quiet else None)
    cancel, results = threading.Event(), []
    try:
        for i, item in enumerate(items):
            bar.prefix = f"{name_of(item)} ({i + 1}/{len(items)}) "
            results.append(compute(item, bar, cancel))
    finally:
        bar.done()
    for res in results:
        for note in res.notes:
            logging.getLogger("calibview").warning(f"note: {res.run.name}: {note}")
    return results


def render_png(evaluation, title: str) -> bytes | None:
    """diagram.png drawn offscreen by the GUI canvas (lazily: the core never imports Qt), as bytes; None (with a
    warning) when Qt is not installed."""
    import logging

    try:
        from calibview.plot.canvas import render_diagram_png
    except ImportError as e:
        logging.getLogger("calibview").warning(f"warning: no diagram.png ({e}); install PySide6 and pyqtgraph for it.")
        return None
    with tempfile.TemporaryDirectory(prefix="calibview-diagram-") as tmp:
        path = Path(tmp) / "diagram.png"
        render_diagram_png(list(evaluation.results), path, bandwidth=evaluation.request.bandwidth,
                           kernel=evaluation.request.kernel, title=title)
        return path.read_bytes()


def out_dir(path: str) -> Path:
    """``path`` as the output directory (created when written); refused when it exists and is not a directory."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise CalibviewError(f"-o {out} exists and is not a directory; give a directory to write into.")
    return out


def write_all(out: Path, files: dict, inputs=()) -> list[Path]:
    """Write every file atomically, after everything was computed (an error before leaves nothing behind); an
    output that is one of ``inputs`` (same device and inode) is refused before anything is written."""
    from calibview.core.io.safe_io import atomic_write
    from calibview.core.io.safe_io import refuse_overwriting_inputs

    refuse_overwriting_inputs([out / name for name in files], inputs)
    paths = []
    for name, data in files.items():
        atomic_write(out / name, data)
        paths.append(out / name)
    return paths


def fmt(x, digits: int = 4) -> str:
    """A number with ``digits`` decimals, ``-`` for None or a non-finite float, anything else as text."""
    import math

    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def criteria_table(rows, rule: str = "point") -> str:
    """The checklist as a plain-text table: criterion, value [interval], limit, result (pass, FAIL or
    inconclusive; "(point)" where ``rule`` wanted an interval and the criterion had none), then a note line for
    each criterion decided on its point estimate for want of an interval."""
    lines = []
    cells = []
    notes = []
    for c in rows:
        value = fmt(c.value)
        if c.lo is not None and c.hi is not None:
            value += f" [{fmt(c.lo)}, {fmt(c.hi)}]"
        limit = f"<= {fmt(c.limit)}" if isinstance(c.limit, float) else str(c.limit)
        result = {"pass": "pass", "fail": "FAIL"}.get(c.outcome, c.outcome)
        if rule != "point" and c.decided_on == "point":
            result += " (point)"
            notes.append(f"note: {c.criterion}: {c.note}")
        cells.append((c.criterion, value, limit, result))
    w = [max(len(r[i]) for r in cells + [("criterion", "value [interval]", "limit", "result")]) for i in range(4)]
    head = ("criterion", "value [interval]", "limit", "result")
    lines.append("  ".join(h.ljust(w[i]) for i, h in enumerate(head)).rstrip())
    for r in cells:
        lines.append("  ".join(v.ljust(w[i]) for i, v in enumerate(r)).rstrip())
    return "\n".join(lines + notes)

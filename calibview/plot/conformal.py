"""conformal.png of ``calibview conformal --out``: per calibrator, score and alpha, coverage by class as bars
around the 1 - alpha line, and the histogram of set sizes. Drawn offscreen with pyqtgraph (as diagram.png),
from the command's flat records alone."""

from __future__ import annotations

from PySide6 import QtCore

import pyqtgraph as pg

from calibview.plot.palette import PALETTE
from calibview.plot.render_png import layout_png

__all__ = ["conformal_png"]

#: rows of panels at most (one per calibrator, score and alpha); the CSV holds every combination
MAX_ROWS = 12
ABOVE, BELOW, HIST = PALETTE[0], PALETTE[1], PALETTE[2]


def conformal_png(records, path, *, width: int = 1000, row_height: int = 260, scale: float = 2.0) -> None:
    """Draw the records of one run (keys of calibview.core.evaluation.conformal.COLUMNS) and write ``path``.

    Each (calibrator, score, alpha) gets a row: left, each class's coverage as a bar from the target 1 - alpha
    (above it blue, below it vermillion) with the target line; right, the fraction of evaluation samples per set
    size. Sizes in pixels before ``scale``."""
    combos = list(dict.fromkeys((r["calibrator"], r["score"], r["alpha"]) for r in records))[:MAX_ROWS]

    def build(win) -> None:
        for i, (cal, score, alpha) in enumerate(combos):
            rows = [r for r in records if (r["calibrator"], r["score"], r["alpha"]) == (cal, score, alpha)]
            _row(win, i, cal, score, alpha, rows)

    layout_png(build, path, width, row_height * max(1, len(combos)), scale=scale, what="conformal figure")


def _row(win, i: int, cal: str, score: str, alpha: float, rows: list) -> None:
    whole = next(r for r in rows if r["group"] == "all")
    classes = [r for r in rows if r["group"].startswith("class=")]
    sizes = [r for r in rows if r["group"].startswith("size=")]
    target = 1.0 - alpha
    worst = min((r["coverage"] for r in classes), default=float("nan"))
    left = win.addPlot(row=i, col=0)
    left.setTitle(f"{cal} · {score} · alpha={alpha:g}: coverage {whole['coverage']:.3f} (target {target:g}), "
                  f"worst class {worst:.3f}", size="9pt", color="k")
    left.setLabel("bottom", "class")
    left.setLabel("left", "coverage")
    x = list(range(len(classes)))
    cov = [r["coverage"] for r in classes]
    for keep, colour in ((lambda c: c >= target, ABOVE), (lambda c: c < target, BELOW)):
        xs = [xi for xi, c in zip(x, cov) if keep(c)]
        if xs:
            left.addItem(pg.BarGraphItem(x=xs, y0=[target] * len(xs), height=[c - target for c in cov if keep(c)],
                                         width=0.8, brush=colour, pen=None))
    left.addItem(pg.InfiniteLine(pos=target, angle=0, pen=pg.mkPen("k", width=1, style=QtCore.Qt.PenStyle.DashLine)))
    left.setYRange(min([target] + cov) - 0.02, 1.0 + 0.01)
    right = win.addPlot(row=i, col=1)
    right.setTitle(f"set size: mean {whole['mean_set_size']:.2f}, empty {whole['empty_frac']:.3f}, "
                   f"full {whole['full_frac']:.3f}", size="9pt", color="k")
    right.setLabel("bottom", "set size")
    right.setLabel("left", "fraction of samples")
    for plot in (left, right):
        plot.getAxis("left").enableAutoSIPrefix(False)
    if sizes:
        s = [int(r["group"][len("size="):]) for r in sizes]
        right.addItem(pg.BarGraphItem(x=s, height=[r["n"] / whole["n"] for r in sizes], width=0.8, brush=HIST,
                                      pen=None))

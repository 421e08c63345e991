"""regression.png of ``calibview report`` for a regression run, and the grid layout's figure of the window's
export: one row per recalibrator (:mod:`calibview.plot.regression.rows`: the diagram, interval coverage, the PIT
histogram and the quantile calibration curve), drawn offscreen with pyqtgraph
(:func:`calibview.plot.render_png.layout_png`) like diagram.png.
"""

from __future__ import annotations

from typing import Callable, Optional

from calibview.plot.regression.rows import add_row
from calibview.plot.render_png import layout_png, offscreen_layout

__all__ = ["regression_figure", "regression_png", "MAX_ROWS"]

#: rows at most (one per recalibrator)
MAX_ROWS = 6


def _rows(win, evaluation, bandwidth: Optional[float], theme: str = "light", font_pt: Optional[float] = None,
          curve: Optional[Callable] = None) -> int:
    """Add a row per recalibrator of ``evaluation`` to ``win`` (at most MAX_ROWS) at ``bandwidth`` (target units;
    None: the evaluation's); returns the number of rows."""
    results = list(evaluation.results)[:MAX_ROWS]
    h = float(evaluation.bandwidth if bandwidth is None else bandwidth)
    for i, res in enumerate(results):
        add_row(win, i, res, h, float(evaluation.request.level), f"{evaluation.run.name} · {res.name}",
                theme=theme, font_pt=font_pt, curve=curve)
    return len(results)


def regression_png(evaluation, path, *, width: int = 1500, row_height: int = 300, scale: float = 2.0) -> None:
    """Draw the regression evaluation ``evaluation`` (:class:`calibview.core.regression.evaluate.RegEvaluation`):
    one row per recalibrator (at most MAX_ROWS), at its bandwidth and interval level, and write ``path``."""
    n = min(len(evaluation.results), MAX_ROWS)
    layout_png(lambda win: _rows(win, evaluation, None), path, width, row_height * max(1, n), scale=scale,
               what="regression figure")


#: height of one recalibrator's row of a publication figure, in units of the figure's width
ROW_ASPECT = 0.2
#: the narrowest publication figure of the regression rows, in inches
MIN_WIDTH_IN = 16.0


def regression_figure(evaluation, path, fmt: str, options, *, bandwidth: Optional[float] = None,
                      curve: Optional[Callable] = None):
    """The same rows as :func:`regression_png`, written as ``fmt`` ("png", "pdf" or "svg") at the figure options
    ``options`` (:class:`calibview.plot.spec.FigureOptions`: width, DPI, font, theme) through the exports' writer
    (:func:`calibview.plot.export.write_view`: atomic), at least MIN_WIDTH_IN wide; the diagrams at ``bandwidth``
    (target units; None: the evaluation's), ``curve(result, h)`` giving their curves (a cache; default computed).
    Returns the path written."""
    from dataclasses import replace

    from calibview.plot.export import write_view
    from calibview.plot.theme import THEMES

    # four panels a row with their titles need about 16 in (regression.png is 1500 px): a narrower width would push
    # the right-hand panels off the page, so the figure is never narrower than that
    options = replace(options, width_in=max(float(options.width_in), MIN_WIDTH_IN))
    theme = options.theme if options.theme in THEMES else "light"
    with offscreen_layout() as win:
        win.setBackground(THEMES[theme].background)
        n = _rows(win, evaluation, bandwidth, theme, options.font_pt, curve)
        height_in = options.width_in * ROW_ASPECT * max(1, n)
        return write_view(win, path, fmt, options, height_in, background=THEMES[theme].background)

"""File > Export: what the window writes of what it shows, each file through the core's writers.

The publication figure dialog (PNG, SVG, PDF at a size and DPI) of the canvas or of the compared runs' figure,
the diagram as on screen (PNG, SVG), the metrics and the curves as CSV and the fitted calibrators as JSON; for a
regression run its diagram, metrics.csv rows, regression.csv coverage curves and recalibrators. An export
never replaces a file the window is reading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6 import QtWidgets

from calibview.core.errors import CalibviewError
from calibview.core.io.safe_io import atomic_write, refuse_overwriting_inputs
from calibview.core.reports import tables as report
from calibview.gui import preferences
from calibview.gui.model.corp import run_key

#: kind -> (file dialog filter, suffix, the default name's stem)
EXPORTS = {
    "png": ("PNG image (*.png)", ".png", "diagram"),
    "svg": ("SVG image (*.svg)", ".svg", "diagram"),
    "metrics": ("CSV (*.csv)", ".csv", "metrics"),
    "curves": ("CSV (*.csv)", ".csv", "curves"),
    "json": ("JSON (*.json)", ".json", "calibrators"),
}


def export_figure(window) -> None:
    """The publication export dialog of what ``window`` shows: the regression diagram, the compared runs' figure,
    else the canvas."""
    if window.regression.active:
        if window.session.regression is None:
            window.show_error("Nothing to export", "The regression run is not evaluated yet: wait for its diagram.")
            return
        window.regression.canvas.open_export_dialog()
        return
    if window.session.evaluation is None:
        window.show_error("Nothing to export", "There is no evaluation yet: open a file and evaluate it first.")
        return
    (window.compare_figure if window.compare_figure.active else window.canvas).open_export_dialog()


def export(window, kind: str, path: Optional[str] = None) -> Optional[str]:
    """Export ``window``'s diagram / table / curves / calibrators (``kind``: a key of EXPORTS) to ``path``, asking
    for one when not given; returns the path written, or None (cancelled, or failed: said in a dialog)."""
    session = window.session
    if window.regression.active:
        return _export_regression(window, kind, path)
    ev = session.evaluation
    if ev is None:
        window.show_error("Nothing to export", "There is no evaluation yet: open a file and wait for the diagram.")
        return None
    path = _ask_path(window, kind, ev, path)
    if not path:
        return None
    try:
        refuse_overwriting_inputs([path], [e.run.file for e in session.evaluations] or [ev.run.file])
        if kind in ("png", "svg") and window.compare_figure.active:      # compared runs: their figure
            window.compare_figure.export(path)
        elif kind == "png":
            window.domains.export_png(path, scale=2.0)       # with several eval splits: side by side
        elif kind == "svg":
            window.canvas.export_svg(path)
        elif kind == "metrics":
            window.table.export_csv(path)
        elif kind == "curves":
            evs = session.evaluations or [ev]        # the CORP columns: filled where the curves were computed
            corp = {k: cs for e in evs for k, cs in [(run_key(e), session.corp.shown(e))] if cs is not None}
            atomic_write(path, report.curves_csv(evs, session.bandwidth, session.kernel, corp=corp))
        else:
            atomic_write(path, report.calibrators_json([ev]))
    except (CalibviewError, OSError) as e:
        window.show_error("Export failed", str(e))
        return None
    window.statusBar().showMessage(f"Exported {path}", 5000)
    return path


def _ask_path(window, kind: str, ev, path: Optional[str]) -> Optional[str]:
    """``path``, or the one the save dialog returns (None when cancelled), starting in the last folder used."""
    if path is not None:
        return path
    filt, suffix, stem = EXPORTS[kind]
    default = preferences.last_dir(window.settings) / f"{ev.run.name.replace('/', '_')}_{stem}{suffix}"
    path, _ = QtWidgets.QFileDialog.getSaveFileName(window, "Export", str(default), filt)
    if path:
        preferences.remember_dir(window.settings, Path(path).parent)
    return path or None


def _export_regression(window, kind: str, path: Optional[str]) -> Optional[str]:
    """The regression run's exports: the diagram as on screen (PNG, SVG), its metrics.csv rows, its
    regression.csv coverage curves ("curves") and its recalibrators' calibrators.json records."""
    from calibview.core.regression.records import REGRESSION_COLUMNS, coverage_rows

    ev = window.session.regression
    if ev is None:
        window.show_error("Nothing to export", "The regression run is not evaluated yet: wait for its diagram.")
        return None
    path = _ask_path(window, kind, ev, path)
    if not path:
        return None
    canvas = window.regression.canvas
    try:
        refuse_overwriting_inputs([path], [ev.run.file])
        if kind == "png":
            canvas.export_png(path, scale=2.0)
        elif kind == "svg":
            canvas.export_svg(path)
        elif kind == "metrics":
            window.regression.table.export_csv(path)
        elif kind == "curves":
            atomic_write(path, report.table_csv(coverage_rows([ev]), REGRESSION_COLUMNS,
                                                floats=REGRESSION_COLUMNS[4:]))
        else:
            atomic_write(path, report.calibrators_json([], [ev]))
    except (CalibviewError, OSError) as e:
        window.show_error("Export failed", str(e))
        return None
    window.statusBar().showMessage(f"Exported {path}", 5000)
    return path

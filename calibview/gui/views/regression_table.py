"""The metrics dock's regression tabs: "Regression metrics", a row per recalibrator with each metric over its
bootstrap interval (:class:`RegressionTable`), and "Coverage · PIT · quantiles" (:class:`CoverageTab`).

A thin read-only adapter over the immutable RegEvaluation; nothing here computes a metric. Roles as in the
classification table (calibview.gui.views.table_views): DisplayRole the text, UserRole the raw float, SORT_ROLE
the sort key. A metric the result's predictive form has none of reads "n/a", with the reason in its tooltip.
"""

from __future__ import annotations

import math
from typing import Optional

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

from calibview.core.io.safe_io import atomic_write
from calibview.core.regression.metrics import COVERAGE_LEVELS, GAUSSIAN, REG_METRIC_NAMES
from calibview.core.reports.tables import metrics_csv, with_regression
from calibview.gui.views.table_views import (INTERVAL_TEXT_ROLE, SORT_ROLE, VALUE_TEXT_ROLE, IntervalDelegate,
                                             NumericSortProxy, TableView)
from calibview.plot.regression.panels import CoveragePanels

__all__ = ["RegressionMetricsModel", "RegressionTable", "CoverageTab", "NA_TEXT", "REG_HELP"]

NA_TEXT = "n/a"
#: one line per metric (docs/DEFINITIONS.md, "Regression runs"); units: those of the target unless said
REG_HELP = {
    "rmse": "root mean squared error of the predictive mean",
    "mae": "mean absolute error of the predictive mean",
    "nll_gaussian": "mean Gaussian negative log-likelihood (nats; var runs)",
    "crps_gaussian": "mean Gaussian continuous ranked probability score (var runs)",
    "miscalibration_area": "area between the interval-coverage curve and the diagonal",
    "rms_calibration_error": "root mean square of observed minus nominal coverage over 100 levels",
    "ma_calibration_error": "mean absolute observed minus nominal coverage over 100 levels",
    "sharpness": "sqrt of the mean predicted variance (var and sample runs)",
    "ence": "expected normalised calibration error over equal-mass bins of the predicted SD",
    "coverage_50": "fraction of targets inside the central 50 % interval",
    "coverage_80": "fraction of targets inside the central 80 % interval",
    "coverage_90": "fraction of targets inside the central 90 % interval",
    "coverage_95": "fraction of targets inside the central 95 % interval",
    "pinball": "mean pinball (check) loss over the quantile levels (quantile predictives)",
    "cal": "mean (m(v) - v)^2 of the kernel estimate m of E[Y | mean = v] (squared target units)",
    "sharpness_gap": "MSE - cal (squared target units)",
}
_HEADERS = {"nll_gaussian": "NLL\n(Gauss)", "crps_gaussian": "CRPS\n(Gauss)", "miscalibration_area": "miscal.\narea",
            "rms_calibration_error": "RMS cal.\nerror", "ma_calibration_error": "MA cal.\nerror",
            "sharpness_gap": "sharp.\ngap", **{c: f"cov.\n{c[9:]} %" for c in COVERAGE_LEVELS}}
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
_DISPLAY, _TOOLTIP, _USER = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.UserRole)


def fmt(metric: str, value: float) -> str:
    """A metric as the table shows it: a coverage in %, anything else with 4 significant digits."""
    if not math.isfinite(value):
        return NA_TEXT if math.isnan(value) else ("∞" if value > 0 else "-∞")
    return f"{100 * value:.1f} %" if metric in COVERAGE_LEVELS else f"{value:.4g}"


def absent_reason(metric: str, form: str) -> str:
    """Why a result of predictive ``form`` has no ``metric`` ("" when it has one)."""
    if metric in GAUSSIAN and form != "var":
        return f"a Gaussian metric: this predictive is {form}, not a Gaussian variance"
    if metric in ("sharpness", "ence") and form == "quantiles":
        return "needs a predicted variance, and a quantile predictive has none"
    if metric == "pinball" and form != "quantiles":
        return "the pinball loss of the quantile levels: this predictive gives no quantiles"
    return ""


class RegressionMetricsModel(QtCore.QAbstractTableModel):
    """One read-only row per recalibrator of a RegEvaluation: its name, then each metric of REG_METRIC_NAMES."""

    def __init__(self, parent: Optional[QtCore.QObject] = None) -> None:
        super().__init__(parent)
        self._ev = None

    def set_evaluation(self, evaluation) -> None:
        """The rows of ``evaluation`` (None: no rows)."""
        self.beginResetModel()
        self._ev = evaluation
        self.endResetModel()

    def evaluation(self):
        """The RegEvaluation shown, or None."""
        return self._ev

    def result(self, row: int):
        """The RegResult of row ``row``."""
        return self._ev.results[row]

    def metric_of(self, column: int) -> Optional[str]:
        """The metric of ``column`` (None for the recalibrator's column)."""
        return REG_METRIC_NAMES[column - 1] if 1 <= column <= len(REG_METRIC_NAMES) else None

    def rowCount(self, parent=QtCore.QModelIndex()) -> int:  # noqa: N802 (Qt override)
        return 0 if parent.isValid() or self._ev is None else len(self._ev.results)

    def columnCount(self, parent=QtCore.QModelIndex()) -> int:  # noqa: N802 (Qt override)
        return 0 if parent.isValid() else 1 + len(REG_METRIC_NAMES)

    def flags(self, index):
        """Enabled and selectable, never editable."""
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable if index.isValid() else Qt.ItemFlag.NoItemFlags

    def headerData(self, section, orientation, role=_DISPLAY):  # noqa: N802 (Qt override)
        if orientation != Qt.Orientation.Horizontal:
            return None
        m = self.metric_of(section)
        if role == _DISPLAY:
            return _HEADERS.get(m, m) if m else "Recalibrator"
        if role == _TOOLTIP:
            if m is None:
                return "Recalibrator fitted on the fit split (none: the run's own predictive)."
            level = f"{self._ev.request.level * 100:g} % " if self._ev is not None else ""
            return f"{m}: {REG_HELP[m]}. Each cell: the value over its {level}bootstrap interval."
        if role == Qt.ItemDataRole.TextAlignmentRole and m:
            return _RIGHT
        return None

    def data(self, index, role=_DISPLAY):
        """The cell's text, raw value, sort key, tooltip or delegate lines, by ``role``."""
        if not index.isValid() or self._ev is None:
            return None
        r = self._ev.results[index.row()]
        m = self.metric_of(index.column())
        if m is None:
            return {_DISPLAY: r.name, _USER: r.name, SORT_ROLE: index.row(),
                    _TOOLTIP: f"{r.name}: {r.predictive.form} predictive, fitted on {r.fitted.n_fit:,} samples"
                    if r.fitted.n_fit else f"{r.name}: the run's {r.predictive.form} predictive"}.get(role)
        est = r.metrics[m]
        why = absent_reason(m, r.predictive.form) if math.isnan(est.value) else ""
        if role in (_USER, SORT_ROLE):
            return float(est.value)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _RIGHT
        has_interval = not (math.isnan(est.lo) or math.isnan(est.hi))
        if role in (_DISPLAY, VALUE_TEXT_ROLE):
            value = fmt(m, est.value)
            if role == _DISPLAY and has_interval:
                return f"{value} [{fmt(m, est.lo)}, {fmt(m, est.hi)}]"
            return value
        if role == INTERVAL_TEXT_ROLE:
            return f"{fmt(m, est.lo)}–{fmt(m, est.hi)}" if has_interval else ""
        if role == _TOOLTIP:
            lines = [f"{m} of {r.name} = {est.value!r}"]
            if why:
                lines.append(f"n/a: {why}.")
            elif has_interval:
                lines.append(f"{self._ev.request.level * 100:g} % bootstrap interval [{est.lo!r}, {est.hi!r}] "
                             f"({est.method}, {self._ev.request.n_boot:,} resamples)")
            lines.append(REG_HELP[m])
            return "\n".join(lines)
        return None


class RegressionTable(QtWidgets.QWidget):
    """The "Regression metrics" tab: the table over a caption naming the split, fit and bandwidth."""

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None) -> None:
        super().__init__(parent)
        self.model = RegressionMetricsModel(self)
        self.proxy = NumericSortProxy(self)
        self.proxy.setSourceModel(self.model)
        self.view = TableView()
        self.view.setModel(self.proxy)
        self.view.setItemDelegate(IntervalDelegate(self.view))
        self.view.verticalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.view.copy_requested.connect(self.copy_selection)
        self.caption = QtWidgets.QLabel()
        self.caption.setWordWrap(True)
        self.caption.setForegroundRole(QtGui.QPalette.ColorRole.PlaceholderText)
        self.caption.setContentsMargins(4, 0, 4, 2)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.view)
        lay.addWidget(self.caption)
        self.set_evaluation(None)

    def set_evaluation(self, evaluation) -> None:
        """Show a RegEvaluation (None clears)."""
        self.model.set_evaluation(evaluation)
        self.view.resizeColumnsToContents()
        if evaluation is None:
            self.caption.setText("No regression run evaluated.")
            return
        req = evaluation.request
        fitted = [r.fitted.n_fit for r in evaluation.results if r.name != "none"]
        fit = f", recalibrators fitted on {req.fit_split} (N = {fitted[0]:,})" if fitted else ", no fit split"
        boot = (f"below each value its {req.level * 100:g} % bootstrap interval ({req.n_boot:,} resamples)"
                if req.n_boot else "no bootstrap intervals (0 resamples)")
        notes = "".join(f" · {n}" for n in evaluation.notes)
        self.caption.setText(f"{evaluation.run.name} · {req.eval_split} split, N = {evaluation.n_eval:,}{fit} · "
                             f"{boot} · cal and sharp. gap at h = {evaluation.bandwidth:.4g} (target units) · "
                             f"n/a: the predictive form has no such metric{notes}")

    def value(self, calibrator: str, metric: str) -> float:
        """The raw value shown for ``metric`` of ``calibrator`` (KeyError when there is no such row)."""
        for row in range(self.model.rowCount()):
            if self.model.result(row).name == calibrator:
                return self.model.data(self.model.index(row, 1 + REG_METRIC_NAMES.index(metric)), _USER)
        raise KeyError(calibrator)

    def text(self, calibrator: str, metric: str) -> str:
        """The value's text as shown ("n/a" where the form has none)."""
        for row in range(self.model.rowCount()):
            if self.model.result(row).name == calibrator:
                return self.model.data(self.model.index(row, 1 + REG_METRIC_NAMES.index(metric)), VALUE_TEXT_ROLE)
        raise KeyError(calibrator)

    def csv_text(self) -> str:
        """The CLI's metrics.csv of this regression evaluation (every metric, full precision)."""
        ev = self.model.evaluation()
        return metrics_csv(with_regression([], [ev] if ev is not None else []))

    def export_csv(self, path) -> None:
        """Write :meth:`csv_text` atomically."""
        atomic_write(path, self.csv_text())

    def copy_selection(self) -> str:
        """Copy the selected cells (tab-separated, with headers); returns them."""
        text = self.view.selection_text()
        if text:
            QtWidgets.QApplication.clipboard().setText(text)
        return text


class CoverageTab(QtWidgets.QWidget):
    """The "Coverage · PIT · quantiles" tab: the three panels of every recalibrator over a caption."""

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None) -> None:
        super().__init__(parent)
        self.panels = CoveragePanels()
        self.caption = QtWidgets.QLabel("No regression run evaluated.")
        self.caption.setWordWrap(True)
        self.caption.setForegroundRole(QtGui.QPalette.ColorRole.PlaceholderText)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.panels, 1)
        lay.addWidget(self.caption)

    def set_evaluation(self, evaluation) -> None:
        """Draw a RegEvaluation's recalibrators (None clears)."""
        self.panels.set_evaluation(evaluation)
        if evaluation is not None:
            self.caption.setText(f"{evaluation.run.name} · {evaluation.request.eval_split}: coverage of the central "
                                 "intervals (a line on the diagonal is calibrated), the PIT (flat at 1 is "
                                 "calibrated) and the fraction of targets below each predicted quantile")
        else:
            self.caption.setText("No regression run evaluated.")

    def set_theme(self, name: str) -> None:
        """The light or dark theme of the panels."""
        self.panels.set_theme(name)

"""The metrics table: one row per calibrator (value over its bootstrap interval per metric) and a per-class tab.

Models are thin read-only adapters over the immutable :class:`~calibview.core.evaluation.results.Evaluation`;
nothing here computes a metric. Roles: ``DisplayRole`` is the text shown ("7.88 [7.48, 8.55]", "∞"),
``Qt.UserRole`` the raw float (the calibrator's name in the first column), :data:`SORT_ROLE` the sort key.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

import numpy as np

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

from calibview.core.evaluation.results import CalibratorResult, Evaluation
from calibview.core.evaluation.toplabel.absent import ABSENT_TEXT, BINARY_METRICS, BINARY_TEXT, absent_metrics
from calibview.core.reports import units
from calibview.core.stats.metrics import METRIC_HELP, METRIC_NAMES
from calibview.core.io.safe_io import atomic_write
from calibview.core.reports.tables import metrics_csv, metrics_rows, table_csv
from calibview.gui.views.table_views import (INTERVAL_TEXT_ROLE, SORT_ROLE, VALUE_TEXT_ROLE, IntervalDelegate,
                                             NumericSortProxy, PerClassModel, TableView, fit_columns)

__all__ = ["MetricsTable", "MetricsTableModel", "PerClassModel", "SORT_ROLE", "VALUE_TEXT_ROLE", "INTERVAL_TEXT_ROLE"]


#: Column headers with their unit ("ECE %", "CAL ×100"): the one convention of :mod:`calibview.core.reports.units`.
HEADERS = {m: units.header(m) for m in METRIC_NAMES}
HIGHER_IS_BETTER = frozenset({"accuracy", "acc_at_cov80", "acc_at_cov90", "acc_at_cov95", "cov_at_acc95",
                              "cov_at_acc99", "auroc", "auroc_correct",
                              # discrimination, and p-values: the higher, the less evidence of miscalibration
                              "corp_dsc", "corp_dsc_log", "p_ece", "p_skce"})
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
_DISPLAY, _TOOLTIP, _USER = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.UserRole)


def _has_interval(lo: float, hi: float) -> bool:
    return not (math.isnan(lo) or math.isnan(hi))


class MetricsTableModel(QtCore.QAbstractTableModel):
    """One read-only row per calibrator of an Evaluation: its label, then each metric of METRIC_NAMES. With the
    evaluations of several eval splits (domains) a row per calibrator and split, the splits of a calibrator
    together, and a "Split" column after the calibrator's."""

    def __init__(self, parent: Optional[QtCore.QObject] = None):
        super().__init__(parent)
        self._ev: Optional[Evaluation] = None
        self._evs: tuple[Evaluation, ...] = ()
        self._rows: list[tuple[Evaluation, CalibratorResult]] = []
        self._offset = 1                                 # the first metric's column
        self._hidden: frozenset[str] = frozenset()
        self._best: dict[str, frozenset[int]] = {}
        self._absent: frozenset[str] = frozenset()        # metrics the shown runs cannot have

    # -- content ------------------------------------------------------------------------------------------------
    def set_evaluation(self, evaluation: Optional[Evaluation]) -> None:
        """Rows of one evaluation (None: no rows)."""
        self.set_evaluations((evaluation,) if evaluation is not None else ())

    def set_evaluations(self, evaluations) -> None:
        """The evaluations of one run on one or more eval splits (the first is the reference)."""
        self.beginResetModel()
        self._evs = tuple(evaluations)
        self._ev = self._evs[0] if self._evs else None
        self._offset = 2 if len(self._evs) > 1 else 1
        self._rows = [(ev, r) for r0 in (self._ev.results if self._ev else ()) for ev in self._evs
                      for r in ev.results if r.name == r0.name]
        # a top-label run has no full probability vector: its NLL, Brier, ... read "n/a", never 0 or nan
        self._absent = frozenset().union(*(absent_metrics(ev.run) for ev in self._evs))
        self._update_best()
        self.endResetModel()

    def evaluation(self) -> Optional[Evaluation]:
        """The reference evaluation (the first), or None."""
        return self._ev

    def evaluations(self) -> tuple[Evaluation, ...]:
        """Every evaluation shown, the reference first."""
        return self._evs

    def result(self, row: int) -> CalibratorResult:
        """The calibrator result of row ``row``."""
        return self._rows[row][1]

    def evaluation_of(self, row: int) -> Evaluation:
        """The evaluation (eval split) of row ``row``."""
        return self._rows[row][0]

    def row_of(self, name: Optional[str], split: Optional[str] = None) -> int:
        """Source row of calibrator ``name`` (on eval split ``split``, else its first), -1 when absent."""
        for i, (ev, r) in enumerate(self._rows):
            if r.name == name and split in (None, ev.request.eval_split):
                return i
        return -1

    def set_hidden(self, names: Iterable[str]) -> None:
        """Hide the rows of these calibrators; the best value per column is taken over the shown rows."""
        self._hidden = frozenset(names)
        self._update_best()
        if self.rowCount():
            self.dataChanged.emit(self.index(0, 1), self.index(self.rowCount() - 1, self.columnCount() - 1),
                                  [Qt.ItemDataRole.FontRole])

    def hidden(self) -> frozenset[str]:
        """The calibrators whose rows are hidden."""
        return self._hidden

    def is_hidden(self, row: int) -> bool:
        """Whether row ``row``'s calibrator is hidden."""
        return self._ev is not None and self._rows[row][1].name in self._hidden

    def metric_of(self, column: int) -> Optional[str]:
        """The metric of column ``column``, or None for the label and split columns."""
        i = column - self._offset
        return METRIC_NAMES[i] if 0 <= i < len(METRIC_NAMES) else None

    def is_split_column(self, column: int) -> bool:
        """Whether ``column`` is the Split column (shown with several eval splits)."""
        return self._offset == 2 and column == 1

    def _update_best(self) -> None:
        """Rows holding the best finite value of each column among the visible rows; none when all tie."""
        self._best = {}
        for ev in self._evs:                 # best within each split: domains are not competitors
            rows = [i for i in range(self.rowCount()) if not self.is_hidden(i) and self._rows[i][0] is ev]
            for m in METRIC_NAMES:
                if m in self._absent:
                    continue
                vals = {i: self._rows[i][1].metrics[m].value for i in rows}
                finite = [v for v in vals.values() if v is not None and math.isfinite(v)]
                if len(rows) < 2 or not finite or (len(finite) == len(rows) and min(finite) == max(finite)):
                    continue
                best = max(finite) if m in HIGHER_IS_BETTER else min(finite)
                self._best[m] = self._best.get(m, frozenset()) | frozenset(i for i, v in vals.items()
                                                                            if v == best)

    # -- Qt model interface -------------------------------------------------------------------------------------
    def rowCount(self, parent=QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() or self._ev is None else len(self._rows)

    def columnCount(self, parent=QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else self._offset + len(METRIC_NAMES)

    def flags(self, index):
        """Enabled and selectable, never editable."""
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable if index.isValid() else Qt.ItemFlag.NoItemFlags

    def headerData(self, section, orientation, role=_DISPLAY):
        if orientation != Qt.Orientation.Horizontal:
            return None
        m = self.metric_of(section)
        if self.is_split_column(section):
            return {_DISPLAY: "Split", _TOOLTIP: "Evaluation split (domain); the first is the reference"}.get(role)
        if role == _DISPLAY:
            # Two lines ("ECE" over "%") keep the columns as narrow as their numbers.
            return "\n".join(HEADERS[m].rsplit(" ", 1)) if m else "Calibrator"
        if role == _TOOLTIP:
            if m is None:
                return "Calibrator fitted on the fit split. Sorting by this column restores the requested order."
            req = self._ev.request if self._ev else None
            level = f"{req.level * 100:g} % " if req else ""
            unit = units.describe(m)
            better = "higher" if m in HIGHER_IS_BETTER else "lower"
            return (f"{HEADERS[m]}: {METRIC_HELP[m]}.\n{unit} Each cell: the value over its {level}bootstrap "
                    f"interval [lo, hi]; ∞ means infinite. Bold: best in the column ({better} is better).")
        if role == Qt.ItemDataRole.TextAlignmentRole and m:
            return _RIGHT
        return None

    def data(self, index, role=_DISPLAY):
        """The cell's text, raw value, sort key, tooltip, alignment, font or delegate lines, by ``role``."""
        if not index.isValid() or self._ev is None:
            return None
        ev, r = self._rows[index.row()]
        if self.is_split_column(index.column()):
            split = ev.request.eval_split
            return {_DISPLAY: split, _USER: split, SORT_ROLE: self._evs.index(ev),
                    _TOOLTIP: f"{split}: N = {ev.n_eval:,}"}.get(role)
        m = self.metric_of(index.column())
        if m is None:
            return self._calibrator_data(r, index.row(), role)
        if m in self._absent:
            binary = m in BINARY_METRICS
            text = BINARY_TEXT if binary else ABSENT_TEXT
            return {_DISPLAY: text, VALUE_TEXT_ROLE: text, INTERVAL_TEXT_ROLE: "",
                    _USER: math.nan, SORT_ROLE: math.nan, Qt.ItemDataRole.TextAlignmentRole: _RIGHT,
                    _TOOLTIP: ("the log score's decomposition is that of the NLL of a binary run" if binary else
                               "needs the probability of every class; a top-label run stores only the confidence "
                               "of its prediction")}.get(role)
        est = r.metrics[m]
        if role in (_DISPLAY, VALUE_TEXT_ROLE, INTERVAL_TEXT_ROLE):
            value = units.fmt(m, est.value, ev.request.n_boot)
            if not _has_interval(est.lo, est.hi):
                if ev.pending and ev.request.n_boot:
                    # intervals are on their way (progressive results): say so rather than show none
                    return "pending…" if role == INTERVAL_TEXT_ROLE else value if role == VALUE_TEXT_ROLE else \
                        f"{value} [pending]"
                return "" if role == INTERVAL_TEXT_ROLE else value
            # The delegate's second line is narrow; the text copied and read by screen readers is explicit.
            return units.fmt_interval(m, est.lo, est.hi, "–", False) if role == INTERVAL_TEXT_ROLE else \
                value if role == VALUE_TEXT_ROLE else units.fmt_estimate(m, est.value, est.lo, est.hi)
        if role in (_USER, SORT_ROLE):
            return float(est.value)
        if role == _TOOLTIP:
            return self._metric_tooltip(r, m)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _RIGHT
        if role == Qt.ItemDataRole.FontRole and index.row() in self._best.get(m, ()):
            font = QtGui.QFont()
            font.setBold(True)
            return font
        return None

    def cell_lines(self, row: int, column: int) -> tuple[str, str, bool]:
        """(value line, interval line or "", whether bold) of a metric cell: what the delegate draws there."""
        index = self.index(row, column)
        return (self.data(index, VALUE_TEXT_ROLE), self.data(index, INTERVAL_TEXT_ROLE) or "",
                self.data(index, Qt.ItemDataRole.FontRole) is not None)

    def _calibrator_data(self, r: CalibratorResult, row: int, role):
        if role == _DISPLAY:
            return r.label
        if role == _USER:
            return r.name
        if role == SORT_ROLE:
            return row
        if role == Qt.ItemDataRole.DecorationRole and r.warnings:
            return QtWidgets.QApplication.style().standardIcon(
                QtWidgets.QStyle.StandardPixmap.SP_MessageBoxWarning)
        if role == _TOOLTIP:
            lines = [f"{r.label} ({r.name})"]
            if r.argmax_changed > 0:
                lines.append(f"Moves the arg-max of {r.argmax_changed * 100:.2f} % of the samples, so its accuracy "
                             f"differs from the uncalibrated one.")
            lines += [f"⚠ {w}" for w in r.warnings]
            return "\n".join(lines)
        return None

    def _metric_tooltip(self, r: CalibratorResult, m: str) -> str:
        est, req = r.metrics[m], self._ev.request
        shown = units.caption(m, est.value, n_boot=req.n_boot)
        lines = [f"{units.short_name(m)} of {r.label} = {est.value!r} (shown as {shown})"]
        if _has_interval(est.lo, est.hi):
            lines.append(f"{req.level * 100:g} % bootstrap interval [{est.lo!r}, {est.hi!r}] "
                         f"({req.n_boot} resamples)")
            if math.isfinite(est.value) and not est.lo <= est.value <= est.hi:
                lines.append("The value lies outside its bootstrap interval: this estimator is biased at this "
                             "sample size, so read the interval as spread, not location.")
        elif m in units.P_VALUES:
            if req.n_boot:
                lines.append(f"A Monte-Carlo p-value over {req.n_boot} redraws under calibration: its resolution is "
                             f"1/{req.n_boot + 1}, its smallest value, which reads \"<1/{req.n_boot + 1}\".")
        else:
            lines.append("No bootstrap interval (0 resamples).")
        if m == "nll" and math.isinf(est.value):
            lines += [w for w in r.warnings if w.startswith("NLL")]
        lines.append(METRIC_HELP[m])
        return "\n".join(lines)


class MetricsTable(QtWidgets.QWidget):
    """Tabs "Metrics" (a row per calibrator) and "Per class"; the window feeds it Session.evaluation_changed."""

    #: The calibrator whose row is current; "" when there is none (no evaluation, or every row hidden).
    selected_calibrator_changed = QtCore.Signal(str)

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None):
        super().__init__(parent)
        self._selected: Optional[str] = None
        self._per_class_ev: Optional[Evaluation] = None      # the evaluation (split) of the current row
        self._per_class_fitted: Optional[tuple] = None       # what the per-class columns were sized for
        self._quiet = False
        self._fitting = False                                # _fit_columns sizes the rows once, at its end
        self.metrics_model = MetricsTableModel(self)
        self.metrics_proxy = NumericSortProxy(self)
        self.metrics_proxy.setSourceModel(self.metrics_model)
        self.per_class_model = PerClassModel(self)
        self.per_class_proxy = NumericSortProxy(self)
        self.per_class_proxy.setSourceModel(self.per_class_model)

        self.metrics_view = TableView()
        self.metrics_view.setModel(self.metrics_proxy)
        self.metrics_view.setItemDelegate(IntervalDelegate(self.metrics_view))
        # rows are sized by _fit_rows when their contents change, not by a ResizeToContents header, which asks the
        # delegate for every cell's size at each layout pass (several per redraw, and on every selection change)
        self.metrics_proxy.layoutChanged.connect(self._fit_rows)
        self.metrics_view.horizontalHeader().sectionResized.connect(
            lambda col, _old, _new: self._fit_rows() if col == 0 and not self._fitting else None)  # labels rewrap
        self.metrics_view.setWordWrap(True)
        self.metrics_view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.metrics_view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.metrics_view.selectionModel().currentRowChanged.connect(self._on_metrics_view_current_row_changed)
        self.per_class_view = TableView()
        self.per_class_view.setModel(self.per_class_proxy)
        self.per_class_view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.per_class_view.verticalHeader().setDefaultSectionSize(self.per_class_view.fontMetrics().height() + 6)
        for view in (self.metrics_view, self.per_class_view):
            view.copy_requested.connect(self.copy_selection)

        self._metrics_caption, self._per_class_caption = QtWidgets.QLabel(), QtWidgets.QLabel()
        self.tabs = QtWidgets.QTabWidget()
        for title, view, caption in (("Metrics", self.metrics_view, self._metrics_caption),
                                     ("Per class", self.per_class_view, self._per_class_caption)):
            caption.setTextFormat(Qt.TextFormat.PlainText)
            caption.setWordWrap(True)            # a long caption (several splits) must not widen the window
            caption.setForegroundRole(QtGui.QPalette.ColorRole.PlaceholderText)
            page = QtWidgets.QWidget()
            lay = QtWidgets.QVBoxLayout(page)
            lay.setContentsMargins(0, 0, 0, 0)
            lay.setSpacing(2)
            caption.setContentsMargins(4, 0, 4, 2)
            lay.addWidget(view)
            lay.addWidget(caption)
            self.tabs.addTab(page, title)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)
        self.set_evaluation(None)

    # -- public API ---------------------------------------------------------------------------------------------
    def set_evaluation(self, evaluation: Optional[Evaluation]) -> None:
        """Show ``evaluation`` (None clears both tabs); keeps the selected calibrator when it is still there."""
        self.set_evaluations((evaluation,) if evaluation is not None else ())

    def set_evaluations(self, evaluations) -> None:
        """Show the evaluations of one run on several eval splits (domains; the first is the reference)."""
        self._quiet = True           # the reset clears the current row; announce only the final selection
        try:
            self.metrics_model.set_evaluations(evaluations)
            self._fit_columns()
            self._update_metrics_caption()
            if not self._select(self._selected):
                self._select_first()
        finally:
            self._quiet = False
        self._sync_from_view()

    def evaluation(self) -> Optional[Evaluation]:
        """The reference evaluation shown, or None."""
        return self.metrics_model.evaluation()

    def _fit_columns(self) -> None:
        """Size each column to its contents as QTableView.resizeColumnsToContents would (the metric columns from
        their texts: see :func:`fit_columns`), then each row once."""
        view, model = self.metrics_view, self.metrics_model
        rows = [r for r in range(model.rowCount()) if not model.is_hidden(r)]
        self._fitting = True                # resizing the label column must not size the rows each time
        try:
            fit_columns(view, lambda col: None if model.metric_of(col) is None else
                        [model.cell_lines(r, col) for r in rows])
            # Long labels wrap onto the two lines every row has anyway; the tooltip holds the full label.
            view.setColumnWidth(0, min(view.columnWidth(0), view.fontMetrics().horizontalAdvance("Temperature") + 40))
        finally:
            self._fitting = False
        self._fit_rows()

    def _fit_rows(self) -> None:
        """Each row's height for its cells (the label column wraps): once per change of the contents, the
        calibrators shown, the order or the label column's width."""
        self.metrics_view.resizeRowsToContents()

    def selected_calibrator(self) -> Optional[str]:
        """The name of the current row's calibrator, or None."""
        return self._selected

    def select_calibrator(self, name: str) -> bool:
        """Make ``name``'s row current; False (and no change) when it is not a visible row."""
        ok = self._select(name)
        self._sync_from_view()
        return ok

    def set_hidden_calibrators(self, names: Iterable[str]) -> None:
        """Hide these calibrators' rows (the CSV export still holds every row)."""
        if frozenset(names) == self.metrics_model.hidden():
            return                              # the window says so after every result: nothing to lay out again
        self._quiet = True
        try:
            self.metrics_model.set_hidden(names)
            self.metrics_proxy.refilter()
            self._fit_rows()                       # rows shown again come back at the default height
            if not self._select(self._selected):
                self._select_first()
        finally:
            self._quiet = False
        self._sync_from_view()

    def csv_text(self) -> str:
        """Exactly the CLI's metrics.csv for this evaluation: every calibrator, requested order, full precision."""
        return metrics_csv(metrics_rows(self.metrics_model.evaluations()))

    def export_csv(self, path) -> None:
        """Write :meth:`csv_text` atomically; raises CalibviewError with a one-sentence message on failure."""
        atomic_write(path, self.csv_text())

    def per_class_csv_text(self) -> str:
        """The selected calibrator's per-class numbers as CSV (fractions at full precision, class order)."""
        columns = ("model", "dataset", "split", "calibrator", "class", "class_name", "count", "accuracy", "ece")
        ev, m = self._per_class_ev, self.per_class_model
        rows = []
        if ev is not None and m.result() is not None:
            for k in range(m.rowCount()):
                _, name, count, acc, ece = (m.raw(k, c) for c in range(5))
                rows.append(dict(zip(columns, (ev.run.model, ev.run.dataset, ev.request.eval_split,
                                               m.result().name, k, name, count, acc, ece))))
        return table_csv(rows, columns, floats=("accuracy", "ece"))

    def export_per_class_csv(self, path) -> None:
        """Write :meth:`per_class_csv_text` atomically."""
        atomic_write(path, self.per_class_csv_text())

    def copy_selection(self) -> str:
        """Copy the selected cells of the visible tab (tab-separated, with headers, as displayed); returns them."""
        view = self.metrics_view if self.tabs.currentIndex() == 0 else self.per_class_view
        text = view.selection_text()
        if text:
            QtWidgets.QApplication.clipboard().setText(text)
        return text

    # -- selection ----------------------------------------------------------------------------------------------
    def _select(self, name: Optional[str]) -> bool:
        row = self.metrics_model.row_of(name)
        if row < 0 or self.metrics_model.is_hidden(row):
            return False
        self._set_current(self.metrics_proxy.mapFromSource(self.metrics_model.index(row, 0)))
        return True

    def _select_first(self) -> None:
        self._set_current(self.metrics_proxy.index(0, 0))

    def _set_current(self, index: QtCore.QModelIndex) -> None:
        sel = self.metrics_view.selectionModel()
        if not index.isValid():
            sel.clear()
            return
        sel.setCurrentIndex(index, QtCore.QItemSelectionModel.SelectionFlag.ClearAndSelect
                            | QtCore.QItemSelectionModel.SelectionFlag.Rows)

    def _on_metrics_view_current_row_changed(self, current, previous) -> None:
        if not self._quiet:
            self._sync_from_view()

    def _sync_from_view(self) -> None:
        """Point the per-class tab at the current row's result and announce a changed calibrator name."""
        index = self.metrics_view.selectionModel().currentIndex()
        result = None
        if index.isValid():
            row = self.metrics_proxy.mapToSource(index).row()
            result = self.metrics_model.result(row)
            self._per_class_ev = self.metrics_model.evaluation_of(row)
        if result is not self.per_class_model.result():
            ev = self.evaluation()
            self.per_class_model.set_result(result, ev.run.class_names if ev and result else None)
            self.per_class_view.setColumnHidden(1, not self.per_class_model.has_class_names())
            # a partial result and the final one of the same calibrator carry the same per-class numbers: the
            # columns are sized again only when what they show changed (a hundred classes' sizing took 30-50 ms
            # of every partial redraw)
            fitted = (None if result is None else
                      (tuple(ev.run.class_names or ()) if ev else (),
                       *(np.asarray(a).tobytes() for a in (result.per_class_count, result.per_class_accuracy,
                                                           result.per_class_ece))))
            if fitted is None or fitted != self._per_class_fitted:
                self.per_class_view.resizeColumnsToContents()
            self._per_class_fitted = fitted
            self._update_per_class_caption()
        name = result.name if result else None
        if name != self._selected:
            self._selected = name
            self.selected_calibrator_changed.emit(name or "")

    # -- captions -----------------------------------------------------------------------------------------------
    def _update_metrics_caption(self) -> None:
        ev = self.evaluation()
        if ev is None:
            self._metrics_caption.setText("No evaluation.")
            return
        req = ev.request
        fit = f", fitted on {req.fit_split} (N = {ev.n_fit:,})" if ev.n_fit else ""
        boot = (f"below each value its {req.level * 100:g} % bootstrap interval ({req.n_boot:,} resamples)"
                if req.n_boot else "no bootstrap intervals (0 resamples)")
        evs = self.metrics_model.evaluations()
        if len(evs) > 1:
            splits = ", ".join(f"{e.request.eval_split} (N = {e.n_eval:,})" for e in evs)
            self._metrics_caption.setText(f"{ev.run.name} · splits {splits}, K = {ev.k or '?'}{fit} · {boot} · "
                                          "bold: best in column per split")
            return
        self._metrics_caption.setText(f"{ev.run.name} · {req.eval_split} split, N = {ev.n_eval:,}, K = {ev.k or '?'}"
                                      f"{fit} · {boot} · bold: best in column")

    def _update_per_class_caption(self) -> None:
        r, ev = self.per_class_model.result(), self._per_class_ev
        if r is None or ev is None:
            self._per_class_caption.setText("Select a calibrator in the Metrics tab.")
            return
        self._per_class_caption.setText(f"{r.label} · {ev.request.eval_split} split · {ev.k} classes · "
                                        f"one-vs-rest ECE: p of the class against 1[y = class] (the mean is CW-ECE)")

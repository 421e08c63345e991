"""The metrics table: one row per calibrator (value over its bootstrap interval per metric) and a per-class tab.

Models are thin read-only adapters over the immutable :class:`~calibview.core.evaluate.Evaluation`; nothing here
computes a metric. Roles: ``DisplayRole`` is the text shown ("7.88 [7.48, 8.55]", "∞"), ``Qt.UserRole`` the raw
float (the calibrator's name in the first column), :data:`SORT_ROLE` the sort key.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Iterable, Optional, Sequence

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

from ..core.evaluate import CalibratorResult, Evaluation
from ..core.metrics import METRIC_HELP, METRIC_NAMES
from ..core.report import atomic_write, metrics_csv, metrics_rows

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
VALUE_TEXT_ROLE = Qt.ItemDataRole.UserRole + 2      # the value line the delegate paints
INTERVAL_TEXT_ROLE = Qt.ItemDataRole.UserRole + 3   # the "lo–hi" line under it ("" without bootstrap)

HEADERS = {
    "accuracy": "Acc %", "nll": "NLL", "brier": "Brier", "brier_top": "Brier (top)", "ece": "ECE %",
    "rmsce": "RMSCE %", "mce": "MCE %", "ace": "ACE %", "classwise_ece": "CW-ECE %", "debiased_ece": "dECE %",
    "smece": "smECE %", "cal": "CAL", "tot": "TOT", "sharpness_gap": "Sharp. gap",
    "aurc": "AURC", "e_aurc": "E-AURC", "acc_at_cov80": "Acc@80 %", "acc_at_cov90": "Acc@90 %",
    "acc_at_cov95": "Acc@95 %", "cov_at_acc95": "Cov@95 %", "cov_at_acc99": "Cov@99 %", "auroc": "AUROC",
    "auroc_correct": "AUROC (correct)",
}
#: Shown ×100 in the table only; the CSV, the tooltips and Qt.UserRole keep plain fractions.
PERCENT = frozenset({"accuracy", "ece", "rmsce", "mce", "ace", "classwise_ece", "debiased_ece", "smece",
                     "acc_at_cov80", "acc_at_cov90", "acc_at_cov95", "cov_at_acc95", "cov_at_acc99"})
HIGHER_IS_BETTER = frozenset({"accuracy", "acc_at_cov80", "acc_at_cov90", "acc_at_cov95", "cov_at_acc95",
                              "cov_at_acc99", "auroc", "auroc_correct"})
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
_DISPLAY, _TOOLTIP, _USER = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.UserRole)


def _decimals(values: Iterable[float], sig: int = 3, cap: int = 5) -> int:
    """Decimals that give the smallest non-zero finite magnitude ``sig`` significant digits (one per column)."""
    mags = [abs(v) for v in values if math.isfinite(v) and v != 0.0]
    if not mags:
        return 2
    return int(min(cap, max(0, sig - 1 - math.floor(math.log10(min(mags))))))


def _num(x: float, decimals: int) -> str:
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    return f"{x:.{decimals}f}"


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
        self._decimals: dict[str, int] = {}
        self._best: dict[str, frozenset[int]] = {}

    # -- content ------------------------------------------------------------------------------------------------
    def set_evaluation(self, evaluation: Optional[Evaluation]) -> None:
        self.set_evaluations((evaluation,) if evaluation is not None else ())

    def set_evaluations(self, evaluations) -> None:
        """The evaluations of one run on one or more eval splits (the first is the reference)."""
        self.beginResetModel()
        self._evs = tuple(evaluations)
        self._ev = self._evs[0] if self._evs else None
        self._offset = 2 if len(self._evs) > 1 else 1
        self._rows = [(ev, r) for r0 in (self._ev.results if self._ev else ()) for ev in self._evs
                      for r in ev.results if r.name == r0.name]
        results = [r for _, r in self._rows]
        self._decimals = {m: _decimals(r.metrics[m].value * (100 if m in PERCENT else 1) for r in results)
                          for m in METRIC_NAMES}
        self._update_best()
        self.endResetModel()

    def evaluation(self) -> Optional[Evaluation]:
        return self._ev

    def evaluations(self) -> tuple[Evaluation, ...]:
        return self._evs

    def result(self, row: int) -> CalibratorResult:
        return self._rows[row][1]

    def evaluation_of(self, row: int) -> Evaluation:
        return self._rows[row][0]

    def row_of(self, name: Optional[str], split: Optional[str] = None) -> int:
        """Source row of calibrator ``name`` (on eval split ``split``, else its first), -1 when absent."""
        for i, (ev, r) in enumerate(self._rows):
            if r.name == name and split in (None, ev.request.eval_split):
                return i
        return -1

    def set_hidden(self, names: Iterable[str]) -> None:
        self._hidden = frozenset(names)
        self._update_best()
        if self.rowCount():
            self.dataChanged.emit(self.index(0, 1), self.index(self.rowCount() - 1, self.columnCount() - 1),
                                  [Qt.ItemDataRole.FontRole])

    def is_hidden(self, row: int) -> bool:
        return self._ev is not None and self._rows[row][1].name in self._hidden

    def metric_of(self, column: int) -> Optional[str]:
        i = column - self._offset
        return METRIC_NAMES[i] if 0 <= i < len(METRIC_NAMES) else None

    def is_split_column(self, column: int) -> bool:
        return self._offset == 2 and column == 1

    def _update_best(self) -> None:
        """Rows holding the best finite value of each column among the visible rows; none when all tie."""
        self._best = {}
        for ev in self._evs:                 # best within each split: domains are not competitors
            rows = [i for i in range(self.rowCount()) if not self.is_hidden(i) and self._rows[i][0] is ev]
            for m in METRIC_NAMES:
                vals = {i: self._rows[i][1].metrics[m].value for i in rows}
                finite = [v for v in vals.values() if math.isfinite(v)]
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
            unit = ("Shown in percent (the CSV holds fractions)." if m in PERCENT else
                    "In nats." if m == "nll" else "Plain number, as in the CSV.")
            better = "higher" if m in HIGHER_IS_BETTER else "lower"
            return (f"{HEADERS[m]}: {METRIC_HELP[m]}.\n{unit} Each cell: the value over its {level}bootstrap "
                    f"interval [lo, hi]; ∞ means infinite. Bold: best in the column ({better} is better).")
        if role == Qt.ItemDataRole.TextAlignmentRole and m:
            return _RIGHT
        return None

    def data(self, index, role=_DISPLAY):
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
        est = r.metrics[m]
        scale = 100.0 if m in PERCENT else 1.0
        d = self._decimals[m]
        if role in (_DISPLAY, VALUE_TEXT_ROLE, INTERVAL_TEXT_ROLE):
            value = _num(est.value * scale, d)
            if not _has_interval(est.lo, est.hi):
                if ev.pending and ev.request.n_boot:
                    # intervals are on their way (progressive results): say so rather than show none
                    return "pending…" if role == INTERVAL_TEXT_ROLE else value if role == VALUE_TEXT_ROLE else \
                        f"{value} [pending]"
                return "" if role == INTERVAL_TEXT_ROLE else value
            lo, hi = _num(est.lo * scale, d), _num(est.hi * scale, d)
            # The delegate's second line is narrow; the text copied and read by screen readers is explicit.
            return f"{lo}–{hi}" if role == INTERVAL_TEXT_ROLE else value if role == VALUE_TEXT_ROLE else \
                f"{value} [{lo}, {hi}]"
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
        lines = [f"{HEADERS[m].removesuffix(' %')} of {r.label} = {est.value!r}"]
        if _has_interval(est.lo, est.hi):
            lines.append(f"{req.level * 100:g} % bootstrap interval [{est.lo!r}, {est.hi!r}] "
                         f"({req.n_boot} resamples)")
            if math.isfinite(est.value) and not est.lo <= est.value <= est.hi:
                lines.append("The value lies outside its bootstrap interval: this estimator is biased at this "
                             "sample size, so read the interval as spread, not location.")
        else:
            lines.append("No bootstrap interval (0 resamples).")
        if m == "nll" and math.isinf(est.value):
            lines += [w for w in r.warnings if w.startswith("NLL")]
        lines.append(METRIC_HELP[m])
        return "\n".join(lines)


class PerClassModel(QtCore.QAbstractTableModel):
    """Per-class count, accuracy and class-wise ECE of one calibrator's result (read-only)."""

    COLUMNS = ("#", "Class", "Count", "Acc %", "ECE %")
    _TIPS = ("Class index", "Class name from the file's class_names",
             "Evaluation samples whose label is this class (the column sums to N)",
             "Accuracy on the samples whose label is this class, in percent; — when the class has no samples",
             "Equal-width ECE of p_k against 1[y=k] for this class, in percent; the mean over classes is CW-ECE")

    def __init__(self, parent: Optional[QtCore.QObject] = None):
        super().__init__(parent)
        self._result: Optional[CalibratorResult] = None
        self._names: Optional[Sequence[str]] = None
        self._decimals = (2, 2)

    def set_result(self, result: Optional[CalibratorResult], class_names: Optional[Sequence[str]] = None) -> None:
        self.beginResetModel()
        self._result, self._names = result, class_names
        if result is not None:
            self._decimals = (_decimals(result.per_class_accuracy * 100, cap=2),
                              _decimals(result.per_class_ece * 100, cap=4))
        self.endResetModel()

    def result(self) -> Optional[CalibratorResult]:
        return self._result

    def has_class_names(self) -> bool:
        return self._names is not None

    def rowCount(self, parent=QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() or self._result is None else int(self._result.per_class_count.shape[0])

    def columnCount(self, parent=QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def flags(self, index):
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable if index.isValid() else Qt.ItemFlag.NoItemFlags

    def headerData(self, section, orientation, role=_DISPLAY):
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == _DISPLAY:
            return self.COLUMNS[section]
        if role == _TOOLTIP:
            return self._TIPS[section]
        if role == Qt.ItemDataRole.TextAlignmentRole and section != 1:
            return _RIGHT
        return None

    def raw(self, row: int, column: int):
        """The exact value behind a cell: int index, class name, int count, or float fraction."""
        r = self._result
        return (row, self._names[row] if self._names else "", int(r.per_class_count[row]),
                float(r.per_class_accuracy[row]), float(r.per_class_ece[row]))[column]

    def data(self, index, role=_DISPLAY):
        if not index.isValid() or self._result is None:
            return None
        row, col = index.row(), index.column()
        raw = self.raw(row, col)
        if role == _DISPLAY:
            return _num(raw * 100, self._decimals[col - 3]) if col >= 3 else str(raw)
        if role == _USER:
            return raw
        if role == SORT_ROLE:
            return raw.casefold() if col == 1 else raw
        if role == _TOOLTIP:
            if col == 3 and math.isnan(raw):
                return "No samples of this class in the evaluation split."
            return f"{self.COLUMNS[col]}: {raw!r}" if col >= 3 else None
        if role == Qt.ItemDataRole.TextAlignmentRole and col != 1:
            return _RIGHT
        return None


class _NumericSortProxy(QtCore.QSortFilterProxyModel):
    """Sorts on SORT_ROLE numerically with NaN always last, and hides the rows the source reports hidden."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)

    def lessThan(self, left, right) -> bool:
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        nan_a = isinstance(a, float) and math.isnan(a)
        nan_b = isinstance(b, float) and math.isnan(b)
        if nan_a or nan_b:
            # NaN is "largest" ascending and "smallest" descending, so it ends up last either way.
            last_is_large = self.sortOrder() == Qt.SortOrder.AscendingOrder
            return (nan_b and not nan_a) if last_is_large else (nan_a and not nan_b)
        return a < b

    def filterAcceptsRow(self, row, parent) -> bool:
        src = self.sourceModel()
        return not (isinstance(src, MetricsTableModel) and src.is_hidden(row))

    def refilter(self) -> None:
        if hasattr(self, "beginFilterChange"):           # Qt >= 6.10
            self.beginFilterChange()
            self.endFilterChange(QtCore.QSortFilterProxyModel.Direction.Rows)
        else:
            self.invalidateRowsFilter()


class _IntervalDelegate(QtWidgets.QStyledItemDelegate):
    """Paints a metric cell as its value with the interval in a smaller, dimmer line underneath."""

    def _lines(self, option, index):
        opt = QtWidgets.QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        small = QtGui.QFont(opt.font)
        small.setBold(False)
        small.setPointSizeF(opt.font.pointSizeF() * 0.85)
        return opt, index.data(VALUE_TEXT_ROLE), index.data(INTERVAL_TEXT_ROLE) or "", small

    def sizeHint(self, option, index):
        opt, value, interval, small = self._lines(option, index)
        if value is None:
            return super().sizeHint(option, index)
        fm, sfm = QtGui.QFontMetrics(opt.font), QtGui.QFontMetrics(small)
        width = max(fm.horizontalAdvance(value), sfm.horizontalAdvance(interval)) + 8
        return QtCore.QSize(width, fm.height() + (sfm.height() if interval else 0) + 6)

    def paint(self, painter, option, index):
        opt, value, interval, small = self._lines(option, index)
        if value is None:
            return super().paint(painter, option, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget else QtWidgets.QApplication.style()
        style.drawControl(QtWidgets.QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        rect = opt.rect.adjusted(3, 2, -4, -2)
        selected = bool(opt.state & QtWidgets.QStyle.StateFlag.State_Selected)
        pal = opt.palette
        text = pal.color(QtGui.QPalette.ColorRole.HighlightedText if selected else QtGui.QPalette.ColorRole.Text)
        back = pal.color(QtGui.QPalette.ColorRole.Highlight if selected else QtGui.QPalette.ColorRole.Base)
        dim = QtGui.QColor.fromRgbF(*(0.6 * t + 0.4 * b for t, b in zip(text.getRgbF()[:3], back.getRgbF()[:3])))
        fm = QtGui.QFontMetrics(opt.font)
        painter.save()
        painter.setFont(opt.font)
        painter.setPen(text)
        top = QtCore.QRect(rect) if not interval else QtCore.QRect(rect.left(), rect.top(), rect.width(), fm.height())
        painter.drawText(top, _RIGHT, value)
        if interval:
            painter.setFont(small)
            painter.setPen(dim)
            painter.drawText(QtCore.QRect(rect.left(), top.bottom() + 1, rect.width(), rect.bottom() - top.bottom()),
                             _RIGHT, interval)
        painter.restore()


class _Header(QtWidgets.QHeaderView):
    """A horizontal header that reserves the sort arrow's width, not the section height, for the arrow."""

    def __init__(self, parent=None):
        super().__init__(Qt.Orientation.Horizontal, parent)

    def sectionSizeFromContents(self, logical_index: int) -> QtCore.QSize:
        size = super().sectionSizeFromContents(logical_index)
        if self.isSortIndicatorShown():
            # QHeaderView adds height + margin, which doubles the waste of a two-line header.
            style = self.style()
            arrow = style.pixelMetric(QtWidgets.QStyle.PixelMetric.PM_HeaderMarkSize, None, self)
            size.setWidth(size.width() - size.height() + arrow)
        return size


class _TableView(QtWidgets.QTableView):
    """A read-only table view that reports Ctrl+C instead of copying only the current cell."""

    copy_requested = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setHorizontalHeader(_Header(self))
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setAlternatingRowColors(True)
        self.setSortingEnabled(True)
        self.setWordWrap(False)
        self.verticalHeader().hide()
        self.horizontalHeader().setHighlightSections(False)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        copy = QtGui.QAction("Copy", self)
        copy.triggered.connect(self.copy_requested)
        self.addAction(copy)

    def keyPressEvent(self, event: QtGui.QKeyEvent) -> None:
        if event.matches(QtGui.QKeySequence.StandardKey.Copy):
            self.copy_requested.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def selection_text(self) -> str:
        """Selected cells as tab-separated text: a header line, then one line per selected row, in view order."""
        indexes = self.selectionModel().selectedIndexes() if self.selectionModel() else []
        header = self.horizontalHeader()
        indexes = [i for i in indexes if not self.isColumnHidden(i.column())]
        if not indexes:
            return ""
        cols = sorted({i.column() for i in indexes}, key=header.visualIndex)
        cells = {(i.row(), i.column()): i.data() for i in indexes}
        clean = lambda s: "" if s is None else str(s).replace("\t", " ").replace("\n", " ")
        lines = ["\t".join(clean(self.model().headerData(c, Qt.Orientation.Horizontal)) for c in cols)]
        for row in sorted({i.row() for i in indexes}):
            lines.append("\t".join(clean(cells.get((row, c))) for c in cols))
        return "\n".join(lines) + "\n"


class MetricsTable(QtWidgets.QWidget):
    """Tabs "Metrics" (a row per calibrator) and "Per class"; the window feeds it Session.evaluation_changed."""

    #: The calibrator whose row is current; "" when there is none (no evaluation, or every row hidden).
    selected_calibrator_changed = QtCore.Signal(str)

    def __init__(self, parent: Optional[QtWidgets.QWidget] = None):
        super().__init__(parent)
        self._selected: Optional[str] = None
        self._per_class_ev: Optional[Evaluation] = None      # the evaluation (split) of the current row
        self._quiet = False
        self.metrics_model = MetricsTableModel(self)
        self.metrics_proxy = _NumericSortProxy(self)
        self.metrics_proxy.setSourceModel(self.metrics_model)
        self.per_class_model = PerClassModel(self)
        self.per_class_proxy = _NumericSortProxy(self)
        self.per_class_proxy.setSourceModel(self.per_class_model)

        self.metrics_view = _TableView()
        self.metrics_view.setModel(self.metrics_proxy)
        self.metrics_view.setItemDelegate(_IntervalDelegate(self.metrics_view))
        self.metrics_view.verticalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.metrics_view.setWordWrap(True)
        self.metrics_view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.metrics_view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.metrics_view.selectionModel().currentRowChanged.connect(self._on_metrics_view_current_row_changed)
        self.per_class_view = _TableView()
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
        return self.metrics_model.evaluation()

    def _fit_columns(self) -> None:
        view = self.metrics_view
        view.resizeColumnsToContents()
        # Long labels wrap onto the two lines every row has anyway; the tooltip holds the full label.
        view.setColumnWidth(0, min(view.columnWidth(0), view.fontMetrics().horizontalAdvance("Temperature") + 40))

    def selected_calibrator(self) -> Optional[str]:
        return self._selected

    def select_calibrator(self, name: str) -> bool:
        """Make ``name``'s row current; False (and no change) when it is not a visible row."""
        ok = self._select(name)
        self._sync_from_view()
        return ok

    def set_hidden_calibrators(self, names: Iterable[str]) -> None:
        """Hide these calibrators' rows (the CSV export still holds every row)."""
        self._quiet = True
        try:
            self.metrics_model.set_hidden(names)
            self.metrics_proxy.refilter()
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
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["model", "dataset", "split", "calibrator", "class", "class_name", "count", "accuracy", "ece"])
        ev, m = self._per_class_ev, self.per_class_model
        if ev is not None and m.result() is not None:
            fmt = lambda x: "" if math.isnan(x) else repr(x)
            for k in range(m.rowCount()):
                _, name, count, acc, ece = (m.raw(k, c) for c in range(5))
                w.writerow([ev.run.model, ev.run.dataset, ev.request.eval_split, m.result().name, k, name, count,
                            fmt(acc), fmt(ece)])
        return buf.getvalue()

    def export_per_class_csv(self, path) -> None:
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
            self.per_class_view.resizeColumnsToContents()
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
            self._metrics_caption.setText(f"{ev.run.name} · splits {splits}, K = {ev.k}{fit} · {boot} · "
                                          "bold: best in column per split")
            return
        self._metrics_caption.setText(f"{ev.run.name} · {req.eval_split} split, N = {ev.n_eval:,}, K = {ev.k}"
                                      f"{fit} · {boot} · bold: best in column")

    def _update_per_class_caption(self) -> None:
        r, ev = self.per_class_model.result(), self._per_class_ev
        if r is None or ev is None:
            self._per_class_caption.setText("Select a calibrator in the Metrics tab.")
            return
        self._per_class_caption.setText(f"{r.label} · {ev.request.eval_split} split · {ev.k} classes · "
                                        f"ECE % is each class's class-wise ECE (their mean is CW-ECE)")

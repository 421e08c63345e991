"""The pieces of the metrics dock's tables that hold no metric logic: the per-class model, a numeric sort and
filter proxy, the two-line value/interval delegate, a compact header and a copyable read-only view.

Roles: ``DisplayRole`` is the text shown, ``Qt.UserRole`` the raw value, :data:`SORT_ROLE` the sort key;
:data:`VALUE_TEXT_ROLE` and :data:`INTERVAL_TEXT_ROLE` the two lines :class:`IntervalDelegate` paints.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

from calibview.core.reports import units
from calibview.core.evaluation.results import CalibratorResult

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
VALUE_TEXT_ROLE = Qt.ItemDataRole.UserRole + 2      # the value line the delegate paints
INTERVAL_TEXT_ROLE = Qt.ItemDataRole.UserRole + 3   # the "lo–hi" line under it ("" without bootstrap)
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
_DISPLAY, _TOOLTIP, _USER = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.UserRole)


class PerClassModel(QtCore.QAbstractTableModel):
    """Per-class count, accuracy and one-vs-rest (class-wise) ECE of one calibrator's result (read-only)."""

    # "one-vs-rest": the ECE of p_k against 1[y=k] over all samples, not the top-label ECE of the class's slice
    COLUMNS = ("#", "Class", "Count", "Acc %", "one-vs-rest ECE %")
    _TIPS = ("Class index", "Class name from the file's class_names",
             "Evaluation samples whose label is this class (the column sums to N)",
             "Accuracy on the samples whose label is this class, in percent; — when the class has no samples",
             "Equal-width ECE of p_k against 1[y=k] for this class, in percent; the mean over classes is CW-ECE")

    def __init__(self, parent: Optional[QtCore.QObject] = None):
        super().__init__(parent)
        self._result: Optional[CalibratorResult] = None
        self._names: Optional[Sequence[str]] = None

    def set_result(self, result: Optional[CalibratorResult], class_names: Optional[Sequence[str]] = None) -> None:
        """Rows of one calibrator result (None: no rows), with the file's class names when it has them."""
        self.beginResetModel()
        self._result, self._names = result, class_names
        self.endResetModel()

    def result(self) -> Optional[CalibratorResult]:
        """The result shown, or None."""
        return self._result

    def has_class_names(self) -> bool:
        """Whether the file names its classes (the Class column is shown then)."""
        return self._names is not None

    def rowCount(self, parent=QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() or self._result is None else int(self._result.per_class_count.shape[0])

    def columnCount(self, parent=QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def flags(self, index):
        """Enabled and selectable, never editable."""
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
        """The cell's text, raw value, sort key, tooltip or alignment, by ``role``."""
        if not index.isValid() or self._result is None:
            return None
        row, col = index.row(), index.column()
        raw = self.raw(row, col)
        if role == _DISPLAY:
            return units.fmt(("accuracy", "classwise_ece")[col - 3], raw) if col >= 3 else str(raw)
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


class NumericSortProxy(QtCore.QSortFilterProxyModel):
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
        return not (hasattr(src, "is_hidden") and src.is_hidden(row))       # the metrics model's hidden rows

    def refilter(self) -> None:
        """Apply the source model's hidden rows again (after they changed)."""
        if hasattr(self, "beginFilterChange"):           # Qt >= 6.10
            self.beginFilterChange()
            self.endFilterChange(QtCore.QSortFilterProxyModel.Direction.Rows)
        else:
            self.invalidateRowsFilter()


def _small(font: QtGui.QFont) -> QtGui.QFont:
    """The interval line's font: ``font`` at 85 %, never bold."""
    small = QtGui.QFont(font)
    small.setBold(False)
    small.setPointSizeF(font.pointSizeF() * 0.85)
    return small


class IntervalDelegate(QtWidgets.QStyledItemDelegate):
    """Paints a metric cell as its value with the interval in a smaller, dimmer line underneath."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._fonts: dict = {}              # font key -> what _lines answers for it

    def _lines(self, font: QtGui.QFont) -> tuple[QtGui.QFontMetrics, QtGui.QFontMetrics, QtGui.QFont]:
        """(metrics of the value line in ``font``, metrics of the interval line, the interval line's font)."""
        key = font.key()
        if key not in self._fonts:
            small = _small(font)
            self._fonts[key] = (QtGui.QFontMetrics(font), QtGui.QFontMetrics(small), small)
        return self._fonts[key]

    @staticmethod
    def _cell_font(option, index) -> QtGui.QFont:
        """The cell's font: the view's, with what the model's font role sets (bold: best in its column)."""
        role_font = index.data(Qt.ItemDataRole.FontRole)
        return QtGui.QFont(role_font).resolve(option.font) if role_font is not None else option.font

    def sizeHint(self, option, index):
        """The two lines' size. Only the cell's font matters, so it is resolved from the font role directly: the
        style option initStyleOption fills (0.1-0.2 ms a cell) made fitting the columns of seven calibrators'
        metrics take most of each partial result's redraw."""
        value = index.data(VALUE_TEXT_ROLE)
        if value is None:
            return super().sizeHint(option, index)
        return self.cell_size(self._cell_font(option, index), value, index.data(INTERVAL_TEXT_ROLE) or "")

    def cell_size(self, font: QtGui.QFont, value: str, interval: str) -> QtCore.QSize:
        """The size of a cell showing ``value`` in ``font`` over ``interval`` ("" for none) in its smaller font:
        what :meth:`sizeHint` answers, for callers that already hold the texts (fitting a column)."""
        fm, sfm, _ = self._lines(font)
        width = max(fm.horizontalAdvance(value), sfm.horizontalAdvance(interval)) + 8
        return QtCore.QSize(width, fm.height() + (sfm.height() if interval else 0) + 6)

    def paint(self, painter, option, index):
        """The value, and under it its interval in a smaller font, right-aligned. The cell's panel (alternating
        row, selection) is the style's; the style option is the view's with the cell's font, not one filled by
        initStyleOption (0.13-0.24 ms a cell with it, 0.08-0.09 without, offscreen). The style never draws a metric
        cell's text (:meth:`draw` does, as two lines) and the model gives such a cell no icon or background, so
        the panel is the same, pixel for pixel."""
        value = index.data(VALUE_TEXT_ROLE)
        if value is None:
            return super().paint(painter, option, index)
        interval = index.data(INTERVAL_TEXT_ROLE) or ""
        opt = QtWidgets.QStyleOptionViewItem(option)
        opt.font = self._cell_font(option, index)
        opt.index = index
        self.draw(painter, opt, value, interval)

    def draw(self, painter, opt, value: str, interval: str) -> None:
        """Paint the cell's panel by the style, then ``value`` and under it ``interval`` ("" for none) in the
        option's rectangle and font."""
        style = opt.widget.style() if opt.widget else QtWidgets.QApplication.style()
        style.drawControl(QtWidgets.QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        rect = opt.rect.adjusted(3, 2, -4, -2)
        selected = bool(opt.state & QtWidgets.QStyle.StateFlag.State_Selected)
        pal = opt.palette
        text = pal.color(QtGui.QPalette.ColorRole.HighlightedText if selected else QtGui.QPalette.ColorRole.Text)
        back = pal.color(QtGui.QPalette.ColorRole.Highlight if selected else QtGui.QPalette.ColorRole.Base)
        dim = QtGui.QColor.fromRgbF(*(0.6 * t + 0.4 * b for t, b in zip(text.getRgbF()[:3], back.getRgbF()[:3])))
        fm, _, small = self._lines(opt.font)
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


def fit_columns(view: QtWidgets.QTableView, cells) -> None:
    """Size every shown column of ``view`` (an :class:`IntervalDelegate`'s) as QTableView.resizeColumnsToContents
    would: the wider of the header's size hint and the cells', within the header's bounds. ``cells(column)`` gives
    the column's (value line, interval line or "", bold) of every shown row, or None for a column Qt sizes itself
    (its few label cells). Qt's own way asks the delegate for every cell through the proxy and the model, four
    data() calls a cell: over 36 columns that was most of the GUI thread's quarter second per partial result,
    taken while the worker computed beside it on the same two cores."""
    header, delegate = view.horizontalHeader(), view.itemDelegate()
    base = view.font()
    bold = QtGui.QFont(base)
    bold.setBold(True)
    grid = 1 if view.showGrid() else 0
    for col in range(view.model().columnCount()):
        if view.isColumnHidden(col):
            continue
        lines = cells(col)
        if lines is None:
            content = view.sizeHintForColumn(col)
        else:
            content = max((delegate.cell_size(bold if bolded else base, value, interval).width()
                           for value, interval, bolded in lines), default=0) + grid
        width = max(content, header.sectionSizeHint(col))
        header.resizeSection(col, min(max(width, header.minimumSectionSize()), header.maximumSectionSize()))


class Header(QtWidgets.QHeaderView):
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


class TableView(QtWidgets.QTableView):
    """A read-only table view that reports Ctrl+C instead of copying only the current cell."""

    copy_requested = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setHorizontalHeader(Header(self))
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

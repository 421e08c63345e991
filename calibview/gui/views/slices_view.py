"""Slices in the window: the "Slices" tab of the metrics dock (a slice-by combo and the per-slice rows of
core.evaluation.slices.evaluate_slices) and the per-slice overlay on the canvas (each slice's kernel curve of one
calibrator).

The rows and the slices' binned statistics come from Session.slices (computed on the worker); the overlay redraws
each curve from those statistics at the current bandwidth, O(grid) per slice, like the canvas itself.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.stats import smoothing
from calibview.core.reports import units
from calibview.gui.model.document import is_regression
from calibview.gui.session import Session
from calibview.plot.theme import THEMES, qcolor

NONE_TEXT = "(none)"
CLASS = "class"
EPISTEMIC = "epistemic"
#: at most this many slices are overlaid (the largest ones): beyond, the diagram is unreadable
MAX_OVERLAY = 12
COLUMNS = ("Calibrator", "Slice", "n", "Acc %", "ECE % [interval]", "ΔECE % [interval]", "Flag")


def overlay_colors(count: int) -> list[QtGui.QColor]:
    """Distinct hues for the slices (the calibrators' palette stays for the calibrators)."""
    return [QtGui.QColor.fromHsvF((0.08 + i / max(count, 1)) % 1.0, 0.75, 0.85) for i in range(count)]


def slice_colors(entries) -> dict:
    """Slice name -> the colour of its overlaid curve, for ``entries`` (slice name, n, ...) of one calibrator: the
    MAX_OVERLAY largest slices, in the order SliceOverlay draws them."""
    entries = sorted(entries, key=lambda e: -e[1])[:MAX_OVERLAY]
    return {str(e[0]): c for e, c in zip(entries, overlay_colors(len(entries)))}


class SliceOverlay:
    """Thin dashed kernel curves, one per slice, over a canvas's accuracy plot, with a small legend; the window
    feeds it Session.slices and the bandwidth. ``avoid``: the canvas's own legend, which the slices' legend never
    covers (``place``)."""

    def __init__(self, plot: pg.PlotItem, avoid: Optional[pg.GraphicsObject] = None) -> None:
        self.plot = plot
        self.avoid = avoid
        self.items: list[tuple[pg.PlotCurveItem, object]] = []
        self.legend = pg.TextItem(anchor=(0, 0))
        self.legend.setZValue(50)
        self._theme = THEMES["light"]
        self._html = ""
        self._head = ""
        self._entries: list[tuple[str, int, QtGui.QColor]] = []
        self.form = self.FORMS[0]
        self.legend.hide()
        plot.addItem(self.legend, ignoreBounds=True)
        self._at: Optional[tuple[float, str]] = None
        plot.vb.sigResized.connect(lambda *_: self.place())
        plot.vb.sigXRangeChanged.connect(lambda *_: self.place())
        if avoid is not None:                      # the canvas's legend dragged or following the range
            avoid.xChanged.connect(self.place)
            avoid.yChanged.connect(self.place)

    def set_slices(self, entries, bandwidth: float, kernel: str, calibrator_label: str = "") -> None:
        """``entries``: (slice name, n, BinnedStats) of one calibrator; () removes the overlay."""
        for item, _ in self.items:
            self.plot.removeItem(item)
        self.items = []
        colors = slice_colors(entries)
        entries = sorted(entries, key=lambda e: -e[1])[:MAX_OVERLAY]
        for (name, n, stats), color in zip(entries, colors.values()):
            item = pg.PlotCurveItem(pen=pg.mkPen(color, width=1.5, style=QtCore.Qt.PenStyle.DashLine),
                                    antialias=True, connect="finite")
            item.setZValue(15)
            self.plot.addItem(item, ignoreBounds=True)
            self.items.append((item, stats))
        self._entries = [(name, n, c) for (name, n, _), c in zip(entries, colors.values())]
        self._head = _esc(calibrator_label)
        self._show_legend()
        self._at = None
        self.set_bandwidth(bandwidth, kernel)

    #: the legend's forms, largest first: (columns, with each slice's n); columns 0: the heading alone
    FORMS = ((1, True), (2, True), (3, True), (2, False), (3, False), (4, False), (0, False))

    def _table(self, columns: int, counts: bool) -> str:
        """The legend's rows: the slices in ``columns`` columns side by side (filled column by column), with their
        n or without; ``columns`` 0: only the heading (the Slices tab's rows carry the colours)."""
        if not self._entries:
            return ""
        if columns == 0:
            return f"<tr><td><b>{self._head}</b> by slice: colours in the Slices tab</td></tr>"
        rows = -(-len(self._entries) // columns)
        cells = []
        for r in range(rows):
            row = []
            for c in range(columns):
                i = c * rows + r
                if i < len(self._entries):
                    name, n, color = self._entries[i]
                    pad = "&nbsp;&nbsp;&nbsp;" if c else ""
                    row.append(f"<td style='color:{color.name()}'>{pad}&#9476;&#9476;</td><td>&nbsp;{_esc(name)}</td>"
                               + (f"<td align='right'>&nbsp;n={n:,}</td>" if counts else ""))
            cells.append("<tr>" + "".join(row) + "</tr>")
        span = (3 if counts else 2) * columns
        return f"<tr><td colspan='{span}'><b>{self._head}</b> by slice</td></tr>" + "".join(cells)

    def place(self) -> None:
        """Put the legend inside the plot where it covers neither the canvas's legend nor the plot's edge: the
        largest of FORMS that fits at a corner (bottom right, top right, bottom left, top left). Where not even
        the heading fits, the legend is hidden (the Slices tab's rows carry the colours)."""
        if not self._entries:
            return
        vb = self.plot.vb
        frame = vb.sceneBoundingRect().adjusted(4, 4, -4, -4)
        other = self.avoid.sceneBoundingRect() if self.avoid is not None and self.avoid.isVisible() else None
        for form in self.FORMS:
            if form[0] > len(self._entries):
                continue
            self._set_html(form)
            size = self.legend.boundingRect().size()
            w, h = size.width(), size.height()
            for x, y in ((frame.right() - w, frame.bottom() - h), (frame.right() - w, frame.top()),
                         (frame.left(), frame.bottom() - h), (frame.left(), frame.top())):
                box = QtCore.QRectF(x, y, w, h)
                if frame.contains(box) and (other is None or not box.intersects(other)):
                    self.legend.setPos(vb.mapSceneToView(box.topLeft()))
                    self.legend.setVisible(True)
                    return
        self.legend.setVisible(False)

    def _set_html(self, form: tuple) -> None:
        self.form = form
        self._html = self._table(*form)
        t = self._theme
        self.legend.setHtml(f"<table cellspacing='0' style='color:{t.foreground}; font-size:8pt'>{self._html}</table>")

    def colors(self) -> dict:
        """Slice name -> the QColor of its curve."""
        return {name: color for name, _, color in self._entries}

    def set_theme(self, name: str) -> None:
        """The light or dark theme of the legend."""
        self._theme = THEMES[name]
        self._show_legend()

    def _show_legend(self) -> None:
        t = self._theme
        self.legend.border = pg.mkPen(t.legend_border, width=1)
        self.legend.fill = pg.mkBrush(qcolor(t.legend_fill, t.legend_alpha))
        self.legend.setVisible(bool(self._entries))
        if self._entries:
            self.place()

    def set_bandwidth(self, bandwidth: float, kernel: str) -> None:
        """Redraw every slice's curve at this bandwidth and kernel (nothing when they are drawn at it)."""
        if self._at == (bandwidth, kernel):
            return
        self._at = (bandwidth, kernel)
        for item, stats in self.items:
            sc = smoothing.sharpness_curve(stats, bandwidth, kernel)
            ok = sc.valid & (sc.density >= 1e-3)
            item.setData(x=sc.x[::4], y=np.where(ok, sc.curve, np.nan)[::4])

    def drawn(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The (x, y) arrays of every drawn slice curve, largest slice first."""
        return [(item.xData, item.yData) for item, _ in self.items]


def _swatch(color: QtGui.QColor) -> QtGui.QIcon:
    pix = QtGui.QPixmap(14, 4)
    pix.fill(color)
    return QtGui.QIcon(pix)


def _esc(text) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlicesView(QtWidgets.QWidget):
    """The Slices tab: pick a metadata column (or the true class) of the evaluation split and read every shown
    calibrator's metrics per slice with the difference to the whole split; listens to selection_changed,
    slices_changed and visible_changed."""

    overlay_changed = QtCore.Signal()

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.combo = QtWidgets.QComboBox()
        self.combo.setToolTip("Slice the evaluation split by a metadata column of the file, or by the true class")
        # every change the user makes (mouse, Down/Up on the closed combo, Return in its list, a typed letter, the
        # wheel); the view's own refills block the signal
        self.combo.currentIndexChanged.connect(self._on_combo_changed)
        self.overlay_combo = QtWidgets.QComboBox()
        self.overlay_combo.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.overlay_combo.setToolTip("The calibrator whose per-slice kernel curves are drawn on the diagram")
        self.overlay_combo.currentIndexChanged.connect(self._on_overlay_changed)
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.caption = QtWidgets.QLabel("")
        self.caption.setWordWrap(True)
        self.caption.setForegroundRole(QtGui.QPalette.ColorRole.PlaceholderText)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(QtWidgets.QLabel("Slice by"))
        top.addWidget(self.combo)
        top.addSpacing(12)
        top.addWidget(QtWidgets.QLabel("Overlay"))
        top.addWidget(self.overlay_combo)
        top.addStretch(1)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.caption)
        session.selection_changed.connect(self._on_session_selection_changed)
        session.slices_changed.connect(self._on_session_slices_changed)
        session.visible_changed.connect(lambda _v: self._fill())
        self._on_session_selection_changed()

    def overlay_calibrator(self) -> Optional[str]:
        """The calibrator whose slice curves are overlaid, or None."""
        return self.overlay_combo.currentData() or None

    def _on_session_selection_changed(self) -> None:
        run, split = self.session.run, self.session.eval_split
        if is_regression(run):
            run = None                          # slices are of classification runs (the tab is disabled)
        columns = list(run.split(split).meta) if run is not None and split else []
        if run is not None and split and run.split(split).members:
            columns.insert(0, EPISTEMIC)        # members: the terciles of the mutual information between them
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItems([NONE_TEXT, CLASS] + columns)
        self.combo.setCurrentText(self.session.slice_by or NONE_TEXT)
        self.combo.blockSignals(False)
        self.combo.setEnabled(run is not None)

    def _on_combo_changed(self, _index: int) -> None:
        text = self.combo.currentText()
        column = None if text == NONE_TEXT else text
        if column != self.session.slice_by:
            self.session.set_slice_by(column)
            self._fill()                # "Computing slices by …" at once (the rows arrive with slices_changed)

    def _on_overlay_changed(self, _index: int) -> None:
        self._fill()                          # the colour swatches follow the overlaid calibrator
        self.overlay_changed.emit()

    def _on_session_slices_changed(self, _result) -> None:
        res = self.session.slices
        names = list(dict.fromkeys(r["calibrator"] for r in res.evaluation.records)) if res else []
        current = self.overlay_calibrator()
        self.overlay_combo.blockSignals(True)
        self.overlay_combo.clear()
        self.overlay_combo.addItem("(none)", "")
        for nm in names:
            self.overlay_combo.addItem(res.labels.get(nm, nm), nm)
        pick = current if current in names else next((n for n in names if n != "none"), names[0] if names else "")
        self.overlay_combo.setCurrentIndex(max(0, self.overlay_combo.findData(pick)))
        self.overlay_combo.blockSignals(False)
        self._fill()
        self.overlay_changed.emit()

    def _fill(self) -> None:
        res = self.session.slices
        recs = [] if res is None else [r for r in res.evaluation.records if r["calibrator"] in self.session.visible]
        overlaid = self.overlay_calibrator()
        colors = slice_colors(res.curves.get(overlaid, ())) if res is not None and overlaid else {}
        self.table.setRowCount(len(recs))
        for row, r in enumerate(recs):
            whole = r["slice"] is None
            cells = (res.labels.get(r["calibrator"], r["calibrator"]), "(all)" if whole else str(r["slice"]),
                     f"{r['n']:,}", _pct(r["accuracy"]), _pct_iv(r["ece"], r["ece_lo"], r["ece_hi"]),
                     "" if whole else _pct_iv(r["delta_ece"], r["delta_ece_lo"], r["delta_ece_hi"], sign=True),
                     _flag(r, res))
            for col, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                if 2 <= col <= 5:
                    item.setTextAlignment(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
                if col == 1 and r["calibrator"] == overlaid and r["slice"] is not None and str(r["slice"]) in colors:
                    item.setIcon(_swatch(colors[str(r["slice"])]))        # its dashed curve on the diagram
                    item.setToolTip(f"{text}: the dashed curve of this colour on the diagram")
                if whole:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()
        if res is None:
            self.caption.setText("Pick a column to slice the evaluation split by." if self.session.slice_by is None
                                 else f"Computing slices by {self.session.slice_by}…")
        else:
            ev = res.evaluation
            small = f" · below --min-slice (no interval, no flag): {', '.join(ev.small[:6])}" if ev.small else ""
            flagged = sum(bool(r["flagged"]) for r in recs)
            self.caption.setText(f"{ev.run.name} · {ev.request.eval_split} by {ev.column}: {len(ev.slices)} slices, "
                                 f"{flagged} flagged (the ECE difference's interval excludes 0){small}"
                                 + "".join(f" · {n}" for n in ev.notes[:2]))


def _pct(x) -> str:
    return units.fmt("accuracy", x)


def _pct_iv(v, lo, hi, sign: bool = False) -> str:
    """ECE (or its difference to the whole split, signed) with its interval, as calibview.core.reports.units shows
    ECE."""
    if v is None or not math.isfinite(v):
        return "—"
    text = units.fmt("ece", v)
    if sign and v > 0 and not text.startswith("<"):
        text = "+" + text
    iv = units.fmt_interval("ece", lo, hi)
    return f"{text} {iv}" if iv else text


def _flag(r, res) -> str:
    if r["slice"] is None:
        return ""
    if r["slice"] in res.evaluation.small:
        return "small"
    if not r["flagged"]:
        return ""
    return "⚠ ECE higher" if r["delta_ece"] > 0 else "ECE lower"

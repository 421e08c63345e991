"""The Decisions view: risk-coverage curves and a confidence-threshold slider with the high-confidence audit.

Listens to Session.decisions_changed (the data, built on the worker), visible_changed and evaluation_changed (the
splits it can audit). A slider move is one O(log N) lookup per shown calibrator (SortedConfidence.at) plus a few
item updates: nothing is computed here.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core.reports import units
from calibview.core.reports.selective import DEFAULT_AUDIT
from calibview.gui.session import Session
from calibview.plot.theme import THEMES, calibrator_color, themed_color

STEPS = 1000
DECADES = 3.0                # the slider spans t = 0 ... 1 - 10^-3 on a log scale of 1 - t: room near 1
PRESETS = DEFAULT_AUDIT       # the threshold buttons: the thresholds the report audits
COLUMNS = ("Calibrator", "n ≥ t", "Coverage %", "Sel. acc. % [Wilson]", "Mean conf. %", "Audit")


def slider_to_threshold(v: int) -> float:
    """The confidence threshold t of slider position ``v`` (0..STEPS): log-spaced in 1 - t, from 0 to
    1 - 10^-DECADES."""
    return 1.0 - 10.0 ** (-DECADES * v / STEPS)


def threshold_to_slider(t: float) -> int:
    """The slider position of threshold ``t`` (clipped to the slider's range): the inverse of slider_to_threshold."""
    t = min(max(float(t), 0.0), slider_to_threshold(STEPS))
    return int(round(-STEPS * math.log10(1.0 - t) / DECADES))


class DecisionsView(QtWidgets.QWidget):
    """Risk-coverage curve per shown calibrator, a threshold slider, and per calibrator at that threshold: n above,
    coverage, selective accuracy with its Wilson interval, mean confidence and a flag when the interval excludes
    the mean confidence (over- or under-confident above t). Listens to decisions_changed, visible_changed and
    evaluation_changed."""

    threshold_changed = QtCore.Signal(float)

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.threshold = 0.95
        self.last_move_s = 0.0                      # time of the last threshold update (for the latency test)
        self._data = None
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._markers: dict[str, pg.ScatterPlotItem] = {}
        self._theme = THEMES["light"]

        self.split_combo = QtWidgets.QComboBox()
        self.split_combo.setToolTip("The evaluated split whose decisions are shown")
        self.split_combo.activated.connect(self._on_split_combo_activated)
        self.caption = QtWidgets.QLabel("No evaluation.")
        self.caption.setForegroundRole(QtGui.QPalette.ColorRole.PlaceholderText)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(QtWidgets.QLabel("Split"))
        top.addWidget(self.split_combo)
        top.addWidget(self.caption, 1)

        self.plot = pg.PlotWidget()
        self.plot.setMinimumSize(240, 100)
        p = self.plot.getPlotItem()
        p.setMouseEnabled(x=False, y=False)
        p.setMenuEnabled(False)
        p.hideButtons()
        p.setLabel("bottom", "coverage (fraction accepted, most confident first)")
        p.setLabel("left", "sel. risk")
        p.getAxis("left").enableAutoSIPrefix(False)
        p.setXRange(0, 1, padding=0.01)
        p.showGrid(x=True, y=True, alpha=0.2)

        self.slider = QtWidgets.QSlider(QtCore.Qt.Horizontal)
        self.slider.setRange(0, STEPS)
        self.slider.setToolTip("Accept predictions whose confidence is at least t (log scale of 1 - t)")
        self.box = QtWidgets.QDoubleSpinBox()
        self.box.setDecimals(4)
        self.box.setRange(0.0, 1.0)
        self.box.setSingleStep(0.005)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(QtWidgets.QLabel("Threshold t"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.box)
        for t in PRESETS:
            b = QtWidgets.QToolButton()
            b.setText(f"{t:g}")
            b.setToolTip(f"Set the threshold to {t:g}")
            b.clicked.connect(lambda _=False, t=t: self.set_threshold(t))
            row.addWidget(b)

        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setTextElideMode(QtCore.Qt.TextElideMode.ElideRight)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        tips = ("", "Samples with confidence ≥ t", "n ≥ t as a share of the split",
                "Accuracy of the accepted samples (1 - selective risk) and its Wilson interval",
                "Mean confidence of the accepted samples",
                "⚠ when the Wilson interval excludes the mean confidence: the scores above t are not calibrated")
        for c, tip in enumerate(tips):
            self.table.horizontalHeaderItem(c).setToolTip(tip)

        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        split = self.splitter = QtWidgets.QSplitter(QtCore.Qt.Horizontal)
        split.addWidget(self.plot)
        right = self.right = QtWidgets.QWidget()
        rl = QtWidgets.QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addLayout(row)
        rl.addWidget(self.table, 1)
        split.addWidget(right)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        lay.addWidget(split, 1)

        self._updating = False
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.box.valueChanged.connect(self._on_box_value_changed)
        session.decisions_changed.connect(self._on_session_decisions_changed)
        session.visible_changed.connect(self._on_session_visible_changed)
        session.evaluation_changed.connect(self._on_session_evaluation_changed)
        self._sync_controls()

    # --- public ----------------------------------------------------------------------------------------------
    def set_threshold(self, t: float) -> None:
        """Accept predictions whose confidence is at least ``t`` (clipped to [0, 1]) and update the audit."""
        self.threshold = min(max(float(t), 0.0), 1.0)
        self._sync_controls()
        self._update_readout()

    def readout(self) -> dict:
        """name -> the AtThreshold shown for that calibrator (shown calibrators only)."""
        if self._data is None:
            return {}
        return {n: d.sorted.at(self.threshold) for n, d in self._data.calibrators.items()
                if n in self.session.visible}

    def set_theme(self, name: str) -> None:
        """The light or dark theme of the plot."""
        self._theme = t = THEMES[name]
        self.plot.setBackground(t.background)
        for side in ("left", "bottom"):
            ax = self.plot.getPlotItem().getAxis(side)
            ax.setPen(pg.mkPen(t.foreground))
            ax.setTextPen(pg.mkPen(t.foreground))
        self._rebuild()

    # --- session reactions -----------------------------------------------------------------------------------
    def _on_session_decisions_changed(self, data) -> None:
        self._data = data
        self._rebuild()

    def _on_session_visible_changed(self, _visible) -> None:
        self._rebuild()

    def _on_session_evaluation_changed(self, _ev) -> None:
        splits = [e.request.eval_split for e in self.session.evaluations]
        current = self.session.decisions_split or (splits[0] if splits else None)
        self.split_combo.blockSignals(True)
        self.split_combo.clear()
        self.split_combo.addItems(splits)
        if current in splits:
            self.split_combo.setCurrentText(current)
        self.split_combo.blockSignals(False)
        self.split_combo.setEnabled(len(splits) > 1)

    def _on_split_combo_activated(self, _index: int) -> None:
        name = self.split_combo.currentText()
        self.session.set_decisions_split(name if name else None)

    # --- drawing ---------------------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        """New data or new visibility: one curve and one marker per shown calibrator, then the readout."""
        p = self.plot.getPlotItem()
        for item in list(self._curves.values()) + list(self._markers.values()):
            p.removeItem(item)
        self._curves, self._markers = {}, {}
        d = self._data
        shown = [] if d is None else [(i, c) for i, (n, c) in enumerate(d.calibrators.items())
                                      if n in self.session.visible]
        ymax = 0.0
        for i, c in shown:
            color = themed_color(calibrator_color(c.name, i), self._theme.name)
            curve = pg.PlotDataItem(c.coverage, c.risk, pen=pg.mkPen(color, width=2), antialias=True)
            marker = pg.ScatterPlotItem(size=10, pen=pg.mkPen(self._theme.background, width=1.5),
                                        brush=pg.mkBrush(color))
            marker.setZValue(10)
            p.addItem(curve)
            p.addItem(marker)
            self._curves[c.name], self._markers[c.name] = curve, marker
            # the y range: every point past the first 1 % of coverage, whose few samples make the risk jumpy
            settled = c.risk[(c.coverage >= 0.01) & np.isfinite(c.risk)]
            if settled.size:
                ymax = max(ymax, float(settled.max()))
        p.setYRange(0, max(0.02, ymax * 1.1), padding=0)
        self.table.setRowCount(len(shown))
        for row, (i, c) in enumerate(shown):
            item = QtWidgets.QTableWidgetItem(c.label)
            pix = QtGui.QPixmap(12, 12)
            pix.fill(QtGui.QColor(themed_color(calibrator_color(c.name, i), self._theme.name)))
            item.setIcon(QtGui.QIcon(pix))
            item.setToolTip(f"{c.label}: AURC {c.aurc:.4g}")
            self.table.setItem(row, 0, item)
            for col in range(1, len(COLUMNS)):
                cell = QtWidgets.QTableWidgetItem("")
                if col < len(COLUMNS) - 1:
                    cell.setTextAlignment(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
                self.table.setItem(row, col, cell)
        if d is None:
            self.caption.setText("No evaluation." if self.session.evaluation is None else "Computing…")
        else:
            fit = f", calibrators fitted on {d.fit_split}" if d.fit_split else ""
            self.caption.setText(f"{d.run} · {d.eval_split} (N = {d.n:,}){fit} · Wilson {d.level * 100:g} %")
        self._update_readout()
        self._fit_table()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit_table()

    def _fit_table(self) -> None:
        """Every column of the audit whole: the splitter gives the table the width its columns take (the plot
        keeps at least its minimum), and where that is still too little the calibrator's name is elided (its
        tooltip has it whole), never the numbers or the Audit flag."""
        table, header = self.table, self.table.horizontalHeader()
        table.resizeColumnsToContents()
        cols = range(table.columnCount())
        # the Audit column as wide as its longest flag, whatever the threshold: a slider move never cuts it
        flag = max(table.fontMetrics().horizontalAdvance(t) for t in ("no sample above t", "⚠ under-conf."))
        header.resizeSection(len(COLUMNS) - 1, max(header.sectionSize(len(COLUMNS) - 1), flag + 12))
        widths = [header.sectionSize(c) for c in cols]
        bar = table.verticalScrollBar().sizeHint().width()        # reserved: rows may outgrow the dock later
        need = sum(widths) + 2 * table.frameWidth() + bar + 2
        extra = self.right.width() - table.width()                # the margins around the table in its pane
        sizes = self.splitter.sizes()
        total = sum(sizes)
        if total > 0 and sizes[1] < need + extra:
            right = min(need + extra, total - self.plot.minimumWidth())
            if right > sizes[1]:
                self.splitter.setSizes([total - right, right])
                sizes = [total - right, right]
        # the table's new width (its layout follows later): what the numbers and the flag leave for the name
        room = sizes[1] - extra - 2 * table.frameWidth() - bar - 2
        if widths and room - sum(widths[1:]) < widths[0]:
            header.resizeSection(0, max(48, room - sum(widths[1:])))

    def _update_readout(self) -> None:
        """The slider's hot path: O(log N) per shown calibrator, then text and marker updates."""
        t0 = time.perf_counter()
        d = self._data
        if d is None:
            return
        row = 0
        for name in self._curves:
            a = d.calibrators[name].sorted.at(self.threshold)
            # percent at the precision of calibview.core.reports.units; the interval at its estimate's precision
            texts = (f"{a.n:,}", units.fmt("coverage", a.coverage),
                     units.fmt_estimate("accuracy", a.accuracy if a.n else math.nan, a.lo, a.hi),
                     units.fmt("confidence", a.mean_conf if a.n else math.nan), _flag(a))
            for col, text in enumerate(texts, start=1):
                self.table.item(row, col).setText(text)
            if a.n:
                self._markers[name].setData([a.coverage], [1.0 - a.accuracy])
            else:
                self._markers[name].setData([], [])
            row += 1
        self.last_move_s = time.perf_counter() - t0
        self.threshold_changed.emit(self.threshold)

    def _sync_controls(self) -> None:
        self._updating = True
        self.slider.setValue(threshold_to_slider(self.threshold))
        self.box.setValue(self.threshold)
        self._updating = False

    def _on_slider_value_changed(self, v: int) -> None:
        if self._updating:
            return
        self.threshold = slider_to_threshold(v)
        self._updating = True
        self.box.setValue(self.threshold)
        self._updating = False
        self._update_readout()

    def _on_box_value_changed(self, value: float) -> None:
        if self._updating:
            return
        self.threshold = float(value)
        self._updating = True
        self.slider.setValue(threshold_to_slider(value))
        self._updating = False
        self._update_readout()


def _flag(a) -> str:
    if not a.n:
        return "no sample above t"
    if not a.flagged:
        return "ok"
    return "⚠ over-conf." if a.mean_conf > a.hi else "⚠ under-conf."

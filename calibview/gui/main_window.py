"""The main window: lays out the docks, the canvas and the bandwidth bar, and wires actions. No numerics here."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6 import QtCore, QtGui, QtWidgets

from calibview._version import __version__
from calibview.core.reports import tables as report
from calibview.core.io.demo import demo_path
from calibview.core import calibrators as calib
from calibview.core.errors import CalibviewError
from calibview.core.io.safe_io import refuse_overwriting_inputs
from calibview.gui.views.bandwidth_bar import (H_MAX, H_MIN, BandwidthBar, bandwidth_to_slider,  # noqa: F401 (API)
                                         slider_to_bandwidth)
from calibview.gui.views.browser import Browser
from calibview.gui.views.calibrators import CalibratorPanel
from calibview.plot.canvas import CalibrationCanvas
from calibview.gui.views.compare import CompareView
from calibview.gui.views.compare_figure import CompareFigure
from calibview.gui.views.decisions import DecisionsView
from calibview.gui.views.domains import DomainCanvases
from calibview.gui import layout
from calibview.gui.views.metrics_table import MetricsTable
from calibview.gui.session import Session
from calibview.gui.views.slices import SliceOverlay, SlicesView
from calibview.gui.status import StatusFields

H5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")
MAX_RECENT = 8


class MainWindow(QtWidgets.QMainWindow):
    """The calibview window; owns the Session and lays out the views around it."""

    def __init__(self, settings: Optional[QtCore.QSettings] = None, parent=None) -> None:
        super().__init__(parent)
        self.settings = settings or QtCore.QSettings()
        self.setWindowTitle("calibview")
        self.setAcceptDrops(True)
        self.session = Session(self)
        self._restore_session_settings()
        self.canvas = CalibrationCanvas()
        self.stale = False
        self.stale_label = QtWidgets.QLabel(self.canvas)
        self.stale_label.setStyleSheet("QLabel { background: rgba(40, 40, 40, 200); color: white; "
                                       "padding: 6px 12px; border-radius: 4px; }")
        self.stale_label.hide()
        self.bandwidth_bar = BandwidthBar(self.session)
        central = QtWidgets.QWidget()
        col = QtWidgets.QVBoxLayout(central)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addWidget(self.bandwidth_bar)
        self.domains = DomainCanvases(self.canvas)          # one diagram per eval split, side by side
        col.addWidget(self.domains, 1)
        self.compare_figure = CompareFigure(self.session)    # compared runs: in place of the canvas
        self.compare_figure.active_changed.connect(self.domains.setHidden)
        col.addWidget(self.compare_figure, 1)
        self.setCentralWidget(central)
        self.browser = Browser(self.session)
        self.panel = CalibratorPanel(self.session)
        self.table = MetricsTable()
        self.browser_dock = self._dock("Browser", self.browser, QtCore.Qt.LeftDockWidgetArea)
        # in a scroll area: the calibrators' list shrinks with a laptop's screen instead of setting its height
        self.panel_dock = self._dock("Calibrators", layout.scrollable(self.panel), QtCore.Qt.RightDockWidgetArea)
        self.table_dock = self._dock("Metrics", self.table, QtCore.Qt.BottomDockWidgetArea)
        self.slices_view = SlicesView(self.session)
        self.table.tabs.addTab(self.slices_view, "Slices")
        self.slice_overlay = SliceOverlay(self.canvas.accuracy_plot)
        self.slices_view.overlay_changed.connect(self._update_slice_overlay)
        self.compare_view = CompareView(self.session)          # runs on the same samples, paired differences
        self.table.tabs.addTab(self.compare_view, "Compare")
        self.session.comparison_changed.connect(
            lambda c: c is not None and self.table.tabs.setCurrentWidget(self.compare_view))
        self.decisions = DecisionsView(self.session)
        self.decisions_dock = self._dock("Decisions", self.decisions, QtCore.Qt.BottomDockWidgetArea)
        self.tabifyDockWidget(self.table_dock, self.decisions_dock)
        self.table_dock.raise_()
        # computed only while someone looks (a tab behind Metrics is not looked at)
        self.decisions_dock.visibilityChanged.connect(self.session.want_decisions)
        self._build_status_bar()
        self._build_actions()
        self.last_error: Optional[tuple[str, str]] = None
        self.error_box: Optional[QtWidgets.QMessageBox] = None
        self.session.evaluation_changed.connect(self._on_session_evaluation_changed)
        self.session.bandwidth_changed.connect(self._on_session_bandwidth_changed)
        self.session.visible_changed.connect(self._on_session_visible_changed)
        self.session.progress_changed.connect(self._on_session_progress_changed)
        self.session.busy_changed.connect(self._on_session_busy_changed)
        self.session.error_occurred.connect(self._on_session_error_occurred)
        self.session.selection_changed.connect(self._update_title)
        self.bandwidth_bar.show_bins.toggled.connect(self.domains.set_show_bins)
        self.domains.hover_changed.connect(self.hover_label.setText)
        self.resize(layout.default_size(self))
        restored = self._restore_layout()
        self.dock_share = layout.DockShare(self, (self.table_dock, self.decisions_dock), on_show=not restored)
        self.set_theme(self.settings.value("theme", "light"))

    # --- construction ----------------------------------------------------------------------------------------

    def _dock(self, title: str, widget: QtWidgets.QWidget, area) -> QtWidgets.QDockWidget:
        dock = QtWidgets.QDockWidget(title, self)
        dock.setObjectName(f"dock-{title.lower()}")
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _build_status_bar(self) -> None:
        fields = StatusFields(self.statusBar(), self)
        # the hover readout and the request's status each in its own field (calibview.gui.status)
        self.hover_label, self.progress_label = fields.hover, fields.status
        self.progress, self.cancel_button = fields.progress, fields.cancel
        self.cancel_button.clicked.connect(self.session.cancel)
        self._progress_shown = False         # the status field shows a running request's message
        self._on_session_busy_changed(False)

    def _action(self, menu: QtWidgets.QMenu, text: str, slot, shortcut=None, tip: str = "") -> QtGui.QAction:
        act = QtGui.QAction(text, self)
        if shortcut:
            act.setShortcut(QtGui.QKeySequence(shortcut))
        if tip:
            act.setStatusTip(tip)
        act.triggered.connect(slot)
        menu.addAction(act)
        return act

    def _build_actions(self) -> None:
        mb = self.menuBar()
        f = mb.addMenu("&File")
        self._action(f, "&Open…", self.open_dialog, QtGui.QKeySequence.Open, "Open an HDF5 logits file")
        self.recent_menu = f.addMenu("Open &recent")
        self._action(f, "Open &demo", self.open_demo, tip="The bundled CIFAR ResNet-110 logits")
        f.addSeparator()
        self._action(f, "Export &figure (PNG, SVG, PDF; size, DPI, fonts)…", self.export_figure, "Ctrl+E")
        self._action(f, "Export diagram as on &screen (PNG)…", lambda: self.export("png"))
        self._action(f, "Export diagram as on screen (&SVG)…", lambda: self.export("svg"))
        self._action(f, "Export &metrics as CSV…", lambda: self.export("metrics"), "Ctrl+Shift+E")
        self._action(f, "Export &curves as CSV…", lambda: self.export("curves"))
        self._action(f, "Export fitted calibrators as &JSON…", lambda: self.export("json"))
        f.addSeparator()
        self._action(f, "&Quit", self.close, QtGui.QKeySequence.Quit)
        r = mb.addMenu("&Run")
        self._action(r, "&Fit and evaluate", self.panel.fit, "Ctrl+R")
        self._action(r, "&Cancel", self.session.cancel, "Esc")
        r.addSeparator()
        self._action(r, "&Wider bandwidth", lambda: self.bandwidth_bar.step(1.25), "Ctrl+]")
        self._action(r, "&Narrower bandwidth", lambda: self.bandwidth_bar.step(0.8), "Ctrl+[")
        v = mb.addMenu("&View")
        self.theme_actions = {}
        group = QtGui.QActionGroup(self)
        for name in ("light", "dark"):
            act = self._action(v, f"{name.title()} theme", lambda _=False, n=name: self.set_theme(n))
            act.setCheckable(True)
            group.addAction(act)
            self.theme_actions[name] = act
        v.addSeparator()
        for dock in (self.browser_dock, self.panel_dock, self.table_dock, self.decisions_dock):
            v.addAction(dock.toggleViewAction())
        h = mb.addMenu("&Help")
        self._action(h, "&Metric definitions", self.show_definitions)
        self._action(h, "&About calibview", self.show_about)
        self._refresh_recent_menu()

    # --- files -----------------------------------------------------------------------------------------------

    def open_files(self, paths) -> None:
        for p in paths:
            if self.session.open_file(p):
                self._remember_recent(str(Path(p).resolve()))

    def start(self, files=(), *, run: Optional[str] = None, calibrators: Optional[str] = None) -> None:
        """What the command line asks for: open ``files`` (the demo when none), tick ``calibrators`` (a comma-
        separated list) and evaluate ``run`` (MODEL/DATASET; the first run otherwise). A bad name raises
        CalibviewError before anything is opened."""
        if calibrators:
            names = [c.strip() for c in calibrators.split(",") if c.strip()]
            for name in names:
                calib.get(name)
            self.session.set_calibrators(names)
            for name, box in self.panel.boxes.items():
                box.setChecked(name in self.session.calibrators)
        paths = [str(p) for p in files] or [str(demo_path())]
        opened = [p for p in paths if self.session.open_file(p, select=False)]
        for p in opened:
            self._remember_recent(str(Path(p).resolve()))
        if not opened:
            return
        if run:
            for p in opened:
                path = str(Path(p).expanduser().resolve())
                try:
                    self.session.select_run(path, run)
                    return
                except CalibviewError:
                    continue
            raise CalibviewError(f"No opened file has a run '{run}'; see `calibview runs FILE` for the names.")
        path = str(Path(opened[0]).expanduser().resolve())
        self.session.select_run(path, self.session.files[path][0].name)

    def open_dialog(self) -> None:
        start = self.settings.value("last_dir", str(Path.home()))
        paths, _ = QtWidgets.QFileDialog.getOpenFileNames(
            self, "Open logits file", start, "HDF5 logits (*.h5 *.hdf5 *.hdf *.he5);;All files (*)")
        if paths:
            self.settings.setValue("last_dir", str(Path(paths[0]).parent))
            self.open_files(paths)

    def open_demo(self) -> None:
        try:
            self.open_files([demo_path()])
        except CalibviewError as e:
            self._on_session_error_occurred("Demo missing", str(e))

    def recent_files(self) -> list[str]:
        """File > Open recent, newest first. QSettings (INI, and some native backends) hands a one-item list
        back as a plain string: iterated, that made the menu of its single characters."""
        recent = self.settings.value("recent", []) or []
        return [recent] if isinstance(recent, str) else [str(p) for p in recent]

    def _remember_recent(self, path: str) -> None:
        recent = [p for p in self.recent_files() if p != path]
        self.settings.setValue("recent", [path] + recent[: MAX_RECENT - 1])
        self._refresh_recent_menu()

    def _refresh_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = self.recent_files()
        for p in recent:
            self.recent_menu.addAction(p, lambda p=p: self.open_files([p]))
        self.recent_menu.setEnabled(bool(recent))

    def dragEnterEvent(self, event: QtGui.QDragEnterEvent) -> None:
        if any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QtGui.QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.open_files(paths)

    # --- export ----------------------------------------------------------------------------------------------

    EXPORTS = {
        "png": ("PNG image (*.png)", ".png", "diagram"),
        "svg": ("SVG image (*.svg)", ".svg", "diagram"),
        "metrics": ("CSV (*.csv)", ".csv", "metrics"),
        "curves": ("CSV (*.csv)", ".csv", "curves"),
        "json": ("JSON (*.json)", ".json", "calibrators"),
    }

    def export_figure(self) -> None:
        """The publication export dialog of what is shown: the compared runs' figure, else the canvas."""
        if self.session.evaluation is None:
            self._on_session_error_occurred("Nothing to export", "There is no evaluation yet: open a file and "
                                            "evaluate it first.")
            return
        (self.compare_figure if self.compare_figure.active else self.canvas).open_export_dialog()

    def export(self, kind: str, path: Optional[str] = None) -> Optional[str]:
        """Export the current diagram / table / curves / calibrators; asks for a path unless given."""
        ev = self.session.evaluation
        if ev is None:
            self._on_session_error_occurred("Nothing to export", "There is no evaluation yet: open a file and "
                                                                  "wait for the diagram.")
            return None
        filt, suffix, stem = self.EXPORTS[kind]
        if path is None:
            default = Path(self.settings.value("last_dir", str(Path.home()))) / \
                f"{ev.run.name.replace('/', '_')}_{stem}{suffix}"
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export", str(default), filt)
            if not path:
                return None
            self.settings.setValue("last_dir", str(Path(path).parent))
        try:
            refuse_overwriting_inputs([path], [e.run.file for e in self.session.evaluations] or [ev.run.file])
            if kind in ("png", "svg") and self.compare_figure.active:      # compared runs: their figure
                self.compare_figure.export(path)
            elif kind == "png":
                self.domains.export_png(path, scale=2.0)       # with several eval splits: side by side
            elif kind == "svg":
                self.canvas.export_svg(path)
            elif kind == "metrics":
                self.table.export_csv(path)
            elif kind == "curves":
                report.atomic_write(path, report.curves_csv(self.session.evaluations or [ev], self.session.bandwidth, self.session.kernel))
            else:
                report.atomic_write(path, report.calibrators_json([ev]))
        except (CalibviewError, OSError) as e:
            self._on_session_error_occurred("Export failed", str(e))
            return None
        self.statusBar().showMessage(f"Exported {path}", 5000)
        return path

    # --- session reactions -----------------------------------------------------------------------------------

    def _on_session_evaluation_changed(self, ev) -> None:
        evs = self.session.evaluations if ev is not None and ev is self.session.evaluation else \
            ((ev,) if ev is not None else ())
        self.table.set_evaluations(evs[:1] if self.session.compare_runs else evs)   # runs: the Compare tab
        self.domains.set_evaluations(evs[:1] if self.session.compare_runs else evs, self.session.bandwidth,
                                     self.session.kernel, self.session.visible)
        if ev is None:
            return
        warnings = [f"{r.label}: {w}" for r in ev.results for w in r.warnings]
        warnings += [f"{r.label}: {c.notice}" for r in ev.results
                     for c in [r.curve(self.session.bandwidth, self.session.kernel)] if c.notice]
        for e in evs:
            if e.request.fit_split == e.request.eval_split and e.n_fit:
                warnings.append(f"Calibrators were fitted and evaluated on the same split ({e.request.eval_split}): "
                                "these are in-sample numbers.")
        if ev.pending:
            return                  # the progress text stays until the intervals arrive
        msg = f"Evaluated in {ev.elapsed_s:.1f} s on {ev.device}"
        self._progress_shown = False
        self.progress_label.setText(msg + (f" · {len(warnings)} warning(s)" if warnings else ""))
        self.progress_label.setToolTip("\n".join(warnings))

    def _on_session_bandwidth_changed(self, h: float, kernel: str) -> None:
        self.domains.set_bandwidth(h, kernel)
        self.slice_overlay.set_bandwidth(h, kernel)

    def _update_slice_overlay(self) -> None:
        res, name = self.session.slices, self.slices_view.overlay_calibrator()
        entries = res.curves.get(name, ()) if res is not None and name else ()
        label = res.labels.get(name, name) if res is not None and name else ""
        self.slice_overlay.set_slices(entries, self.session.bandwidth, self.session.kernel, label)

    def _on_session_visible_changed(self, visible) -> None:
        self.domains.set_visible(visible)
        self.table.set_hidden_calibrators([r.name for r in (self.session.evaluation.results
                                                            if self.session.evaluation else ())
                                           if r.name not in visible])

    def _on_session_progress_changed(self, fraction: float, message: str) -> None:
        self.progress.setValue(int(round(1000 * fraction)))
        self.progress_label.setText(message)
        self.progress_label.setToolTip("")
        self._progress_shown = self.session.busy

    def _on_session_busy_changed(self, busy: bool) -> None:
        self.cancel_button.setVisible(busy)
        self.progress.setVisible(busy)
        if busy:
            self.progress.setValue(0)
        elif self._progress_shown:           # the request ended without a final word: no stale "Reading …"
            self.progress_label.setText("")
            self._progress_shown = False
        self._set_stale(busy and self._shows_other_selection())

    def _shows_other_selection(self) -> bool:
        """Whether the diagram and table show another run or split than the one being computed."""
        ev, s = self.session.evaluation, self.session
        shown = tuple((e.run.file, e.run.name, e.request.eval_split) for e in s.evaluations)
        want = tuple((s.run.file, s.run.name, x) for x in s.eval_splits) + tuple(
            (f, n, s.eval_split) for f, n in s.compare_runs) if s.run is not None else ()
        return ev is not None and (ev.run != s.run or ev.request.eval_split != s.eval_split
                                   or ev.request.fit_split != s.fit_split or shown != want)

    def _set_stale(self, stale: bool) -> None:
        """While the diagram and table still show the previous selection: grey the table out and say so over
        the diagram. (A QGraphicsOpacityEffect over the plot renders garbage on some platforms.)"""
        self.table.setEnabled(not stale)
        if stale:
            run = self.session.run
            what = f"{run.name} ({self.session.eval_split})" if run is not None else "a new request"
            self.stale_label.setText(f"Computing {what}… the diagram still shows the previous selection")
            self.stale_label.adjustSize()
            self.stale_label.move(max(0, (self.canvas.width() - self.stale_label.width()) // 2), 40)
            self.stale_label.raise_()
        self.stale_label.setVisible(stale)
        self.stale = stale

    def _on_session_error_occurred(self, title: str, message: str) -> None:
        """A window-modal, non-blocking dialog naming the problem (the event loop keeps running)."""
        self.last_error = (title, message)
        self.progress_label.setText(f"{title}.")      # not the failed request's last "Reading …"
        self.progress_label.setToolTip(message)
        self._progress_shown = False
        box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Warning, title, message, QtWidgets.QMessageBox.Ok, self)
        box.setAttribute(QtCore.Qt.WA_DeleteOnClose)
        box.open()
        self.error_box = box

    def _update_title(self) -> None:
        run = self.session.run
        self.setWindowTitle(f"calibview — {run.name} ({Path(run.file).name})" if run else "calibview")

    # --- theme, help, settings -------------------------------------------------------------------------------

    def set_theme(self, name: str) -> None:
        name = name if name in ("light", "dark") else "light"
        self.theme = name
        apply_palette(QtWidgets.QApplication.instance(), name)
        self.domains.set_theme(name)
        self.compare_figure.set_theme(name)
        self.decisions.set_theme(name)
        self.slice_overlay.set_theme(name)
        self.theme_actions[name].setChecked(True)
        self.settings.setValue("theme", name)

    def show_definitions(self) -> None:
        from calibview.core.stats.metrics import METRIC_HELP
        text = "\n".join(f"{k}: {v}" for k, v in METRIC_HELP.items())
        QtWidgets.QMessageBox.information(self, "Metric definitions", text)

    def show_about(self) -> None:
        QtWidgets.QMessageBox.about(self, "About calibview", f"calibview {__version__}\nCalibration and "
                                    "sharpness of stored classifier logits.")

    def _restore_session_settings(self) -> None:
        s = self.settings
        try:
            self.session.bandwidth = min(max(float(s.value("bandwidth", 0.05)), H_MIN), H_MAX)
        except (TypeError, ValueError):
            self.session.bandwidth = 0.05
        kernel = s.value("kernel", "gaussian")
        self.session.kernel = kernel if kernel in ("gaussian", "epanechnikov") else "gaussian"

    def _restore_layout(self) -> bool:
        """Geometry and dock layout of the last session; False when there was none."""
        geometry = self.settings.value("geometry")
        state = self.settings.value("window_state")
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is not None:
            self.restoreState(state)
        layout.fit_to_screen(self)          # a size saved on a bigger screen
        return state is not None

    def save_settings(self) -> None:
        s = self.settings
        s.setValue("geometry", self.saveGeometry())
        s.setValue("window_state", self.saveState())
        s.setValue("bandwidth", self.session.bandwidth)
        s.setValue("kernel", self.session.kernel)
        s.setValue("theme", self.theme)
        s.sync()

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        self.save_settings()
        self.session.shutdown()
        super().closeEvent(event)


def apply_palette(app: Optional[QtWidgets.QApplication], name: str) -> None:
    """Fusion style with a light or dark palette, so the docks match the canvas."""
    if app is None:
        return
    app.setStyle("Fusion")
    if name == "light":
        app.setPalette(app.style().standardPalette())
        return
    p = QtGui.QPalette()
    c = QtGui.QColor
    roles = {
        QtGui.QPalette.Window: c(37, 38, 41), QtGui.QPalette.WindowText: c(225, 225, 225),
        QtGui.QPalette.Base: c(27, 28, 30), QtGui.QPalette.AlternateBase: c(44, 45, 48),
        QtGui.QPalette.ToolTipBase: c(50, 50, 54), QtGui.QPalette.ToolTipText: c(230, 230, 230),
        QtGui.QPalette.Text: c(225, 225, 225), QtGui.QPalette.Button: c(48, 49, 53),
        QtGui.QPalette.ButtonText: c(225, 225, 225), QtGui.QPalette.Highlight: c(56, 117, 215),
        QtGui.QPalette.HighlightedText: c(255, 255, 255), QtGui.QPalette.PlaceholderText: c(140, 140, 140),
    }
    for role, color in roles.items():
        p.setColor(role, color)
    p.setColor(QtGui.QPalette.Disabled, QtGui.QPalette.Text, c(120, 120, 120))
    p.setColor(QtGui.QPalette.Disabled, QtGui.QPalette.WindowText, c(110, 110, 110))
    p.setColor(QtGui.QPalette.Disabled, QtGui.QPalette.ButtonText, c(120, 120, 120))
    app.setPalette(p)

"""The main window: lays out the docks, the canvas and the bandwidth bar, and wires the menus' actions to the
session and to the window's helpers (:mod:`~calibview.gui.exports`, :mod:`~calibview.gui.recent`,
:mod:`~calibview.gui.preferences`). No numerics here."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6 import QtCore, QtGui, QtWidgets

from calibview._version import __version__
from calibview.core import calibrators as calib
from calibview.core.errors import CalibviewError
from calibview.core.io.demo import demo_path
from calibview.core.stats.metrics import METRIC_HELP
from calibview.gui import exports, layout, preferences
from calibview.gui.regression_mode import RegressionMode
from calibview.gui.preferences import apply_palette  # noqa: F401 (its old home)
from calibview.gui.recent import MAX_RECENT, RecentFiles  # noqa: F401 (MAX_RECENT: its old home)
from calibview.gui.session import Session
from calibview.gui.status import StatusFields
from calibview.gui.views.bandwidth_bar import (H_MAX, H_MIN, BandwidthBar, bandwidth_to_slider,  # noqa: F401 (API)
                                               slider_to_bandwidth)
from calibview.gui.views.browser import Browser
from calibview.gui.views.calibrator_panel import CalibratorPanel
from calibview.gui.views.compare_view import CompareView
from calibview.gui.views.compare_figure import CompareFigure
from calibview.gui.views.conformal_view import ConformalView
from calibview.gui.views.decisions_view import DecisionsView
from calibview.gui.views.members_view import MembersView
from calibview.gui.views.domain_canvases import DomainCanvases
from calibview.gui.views.metrics_table import MetricsTable
from calibview.gui.views.slices_view import SliceOverlay, SlicesView
from calibview.gui.corp_mode import CorpMode
from calibview.gui.views.tercile_toggle import TercileToggle
from calibview.plot.canvas import CalibrationCanvas

H5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")


class MainWindow(QtWidgets.QMainWindow):
    """The calibview window: the diagram, the browser, calibrator, metrics and decisions docks and the status bar
    around one Session; listens to its evaluation_changed, bandwidth_changed, visible_changed, progress_changed,
    busy_changed, error_occurred, selection_changed and comparison_changed."""

    def __init__(self, settings: Optional[QtCore.QSettings] = None, parent=None) -> None:
        super().__init__(parent)
        self.settings = settings or QtCore.QSettings()
        self.setWindowTitle("calibview")
        self.setAcceptDrops(True)
        self.session = Session(self)
        preferences.restore_session(self.settings, self.session)
        self.canvas = CalibrationCanvas()
        self.stale = False
        self.stale_label = QtWidgets.QLabel(self.canvas)
        self.stale_label.setStyleSheet("QLabel { background: rgba(40, 40, 40, 200); color: white; "
                                       "padding: 6px 12px; border-radius: 4px; }")
        self.stale_label.hide()
        self.bandwidth_bar = BandwidthBar(self.session)
        self.tercile_toggle = TercileToggle(self.session)    # the curve split by epistemic tercile (members)
        self.canvas.toolbar.add_extra(self.tercile_toggle)     # the bandwidth row is full at 1280 px
        self.tercile_toggle.changed.connect(self._update_terciles)
        self.session.terciles_changed.connect(lambda _split: self._update_terciles())
        classification = QtWidgets.QWidget()
        col = QtWidgets.QVBoxLayout(classification)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addWidget(self.bandwidth_bar)
        self.domains = DomainCanvases(self.canvas)          # one diagram per eval split, side by side
        col.addWidget(self.domains, 1)
        self.compare_figure = CompareFigure(self.session)    # compared runs: in place of the canvas
        self.compare_figure.active_changed.connect(self.domains.setHidden)
        col.addWidget(self.compare_figure, 1)
        self.central_stack = QtWidgets.QStackedWidget()      # a regression run: its own view in this place
        self.central_stack.addWidget(classification)
        self.setCentralWidget(self.central_stack)
        self.browser = Browser(self.session)
        self.panel = CalibratorPanel(self.session)
        self.table = MetricsTable()
        self.browser_dock = self._dock("Browser", self.browser, QtCore.Qt.LeftDockWidgetArea)
        # in a scroll area: the calibrators' list shrinks with a laptop's screen instead of setting its height
        self.panel_dock = self._dock("Calibrators", layout.scrollable(self.panel), QtCore.Qt.RightDockWidgetArea)
        self.table_dock = self._dock("Metrics", self.table, QtCore.Qt.BottomDockWidgetArea)
        self.slices_view = SlicesView(self.session)
        self.table.tabs.addTab(self.slices_view, "Slices")
        self.slice_overlay = SliceOverlay(self.canvas.accuracy_plot, avoid=self.canvas.legend_box)
        self.slices_view.overlay_changed.connect(self._update_slice_overlay)
        self.compare_view = CompareView(self.session)          # runs on the same samples, paired differences
        self.table.tabs.addTab(self.compare_view, "Compare")
        self.members_view = MembersView(self.session)          # an ensemble's members and their spread
        self.table.tabs.addTab(self.members_view, "Members")
        self.conformal_view = ConformalView(self.session)      # conformal sets with an alpha slider
        self.table.tabs.addTab(self.conformal_view, "Conformal")
        self.session.comparison_changed.connect(
            lambda c: c is not None and self.table.tabs.setCurrentWidget(self.compare_view))
        self.decisions = DecisionsView(self.session)
        self.decisions_dock = self._dock("Decisions", self.decisions, QtCore.Qt.BottomDockWidgetArea)
        self.tabifyDockWidget(self.table_dock, self.decisions_dock)
        self.regression = RegressionMode(self, self.central_stack, classification)
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
        self.session.error_occurred.connect(self.show_error)
        self.session.selection_changed.connect(self._update_title)
        self.bandwidth_bar.show_bins.toggled.connect(self.domains.set_show_bins)
        self.domains.hover_changed.connect(self.hover_label.setText)
        self.corp = CorpMode(self)          # the CORP toggle and the MCB-DSC tab (after the connections above)
        self.resize(layout.default_size(self))
        restored = preferences.restore_layout(self, self.settings)
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
        self.recent = RecentFiles(self.settings, self.recent_menu, lambda paths: self.open_files(paths))
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
        self._action(r, "&Wider bandwidth", lambda: self.step_bandwidth(1.25), "Ctrl+]")
        self._action(r, "&Narrower bandwidth", lambda: self.step_bandwidth(0.8), "Ctrl+[")
        v = mb.addMenu("&View")
        self.theme_actions = {}
        group = QtGui.QActionGroup(self)
        for name in preferences.THEMES:
            act = self._action(v, f"{name.title()} theme", lambda _=False, n=name: self.set_theme(n))
            act.setCheckable(True)
            group.addAction(act)
            self.theme_actions[name] = act
        v.addSeparator()
        v.addAction(self.tercile_toggle.action)
        self.view_menu = v
        v.addSeparator()
        for dock in (self.browser_dock, self.panel_dock, self.table_dock, self.decisions_dock):
            v.addAction(dock.toggleViewAction())
        h = mb.addMenu("&Help")
        self._action(h, "&Metric definitions", self.show_definitions)
        self._action(h, "&About calibview", self.show_about)

    # --- files -----------------------------------------------------------------------------------------------

    def open_files(self, paths) -> None:
        """Open these files (each selects its first run and is evaluated) and remember them in Open recent."""
        for p in paths:
            if self.session.open_file(p):
                self.recent.remember(str(Path(p).resolve()))

    def start(self, files=(), *, run: Optional[str] = None, calibrators: Optional[str] = None) -> None:
        """What the command line asks for: open ``files`` (the demo when none), tick ``calibrators`` (a comma-
        separated list) and evaluate ``run`` (MODEL/DATASET; the first run otherwise). A bad name raises
        CalibviewError before anything is opened. Whatever fails here stops the worker thread first: the caller
        then returns without an event loop, and a QThread destroyed while running aborts the process."""
        try:
            self._start(files, run, calibrators)
        except BaseException:
            self.session.shutdown()
            raise

    def _start(self, files, run: Optional[str], calibrators: Optional[str]) -> None:
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
            self.recent.remember(str(Path(p).resolve()))
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
        """File > Open: pick HDF5 logits files (the dialog starts in the last folder used)."""
        start = str(preferences.last_dir(self.settings))
        paths, _ = QtWidgets.QFileDialog.getOpenFileNames(
            self, "Open logits file", start, "HDF5 logits (*.h5 *.hdf5 *.hdf *.he5);;All files (*)")
        if paths:
            preferences.remember_dir(self.settings, Path(paths[0]).parent)
            self.open_files(paths)

    def open_demo(self) -> None:
        """File > Open demo: the bundled CIFAR ResNet-110 logits."""
        try:
            self.open_files([demo_path()])
        except CalibviewError as e:
            self.show_error("Demo missing", str(e))

    def recent_files(self) -> list[str]:
        """File > Open recent, newest first."""
        return self.recent.files()

    def dragEnterEvent(self, event: QtGui.QDragEnterEvent) -> None:
        if any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QtGui.QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.open_files(paths)

    # --- export ----------------------------------------------------------------------------------------------

    EXPORTS = exports.EXPORTS

    def export_figure(self) -> None:
        """The publication export dialog of what is shown: the compared runs' figure, else the canvas."""
        exports.export_figure(self)

    def export(self, kind: str, path: Optional[str] = None) -> Optional[str]:
        """Export the current diagram / table / curves / calibrators; asks for a path unless given."""
        return exports.export(self, kind, path)

    # --- session reactions -----------------------------------------------------------------------------------

    def _on_session_evaluation_changed(self, ev) -> None:
        evs = self.session.evaluations if ev is not None and ev is self.session.evaluation else \
            ((ev,) if ev is not None else ())
        self.table.set_evaluations(evs[:1] if self.session.compare_runs else evs)   # runs: the Compare tab
        self.domains.set_evaluations(evs[:1] if self.session.compare_runs else evs, self.session.bandwidth,
                                     self.session.kernel, self.session.visible)
        self._update_terciles()
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

    def step_bandwidth(self, factor: float) -> None:
        """Run > Wider / Narrower bandwidth: the regression diagram's while a regression run is selected."""
        (self.regression.view if self.regression.active else self.bandwidth_bar).step(factor)

    def _on_session_bandwidth_changed(self, h: float, kernel: str) -> None:
        self.domains.set_bandwidth(h, kernel)
        self.slice_overlay.set_bandwidth(h, kernel)

    def _update_terciles(self) -> None:
        """The chosen calibrator's curve split by epistemic tercile on the canvas, while switched on and computed
        for the shown evaluation (Session.shown_terciles); else none."""
        split, name = self.session.shown_terciles(), self.tercile_toggle.calibrator_name()
        curves = split.of(name) if split is not None and name else ()
        if (self.canvas.terciles.calibrator, self.canvas.terciles.curves) != ((name, curves) if curves else (None, ())):
            self.canvas.set_terciles(name, curves)

    def _update_slice_overlay(self) -> None:
        res, name = self.session.slices, self.slices_view.overlay_calibrator()
        entries = res.curves.get(name, ()) if res is not None and name else ()
        label = res.labels.get(name, name) if res is not None and name else ""
        self.slice_overlay.set_slices(entries, self.session.bandwidth, self.session.kernel, label)

    def _on_session_visible_changed(self, visible) -> None:
        self.domains.set_visible(visible)
        self.slice_overlay.place()             # the canvas's legend changed size
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
        s = self.session
        ev = s.evaluation or s.regression
        shown = tuple((e.run.file, e.run.name, e.request.eval_split) for e in s.evaluations or ((ev,) if ev else ()))
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

    def show_error(self, title: str, message: str) -> None:
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
        """The light or dark theme for the docks and every diagram ("light" for an unknown name); remembered."""
        name = preferences.theme_name(name)
        self.theme = name
        preferences.apply_palette(QtWidgets.QApplication.instance(), name)
        self.domains.set_theme(name)
        self.compare_figure.set_theme(name)
        self.decisions.set_theme(name)
        self.slice_overlay.set_theme(name)
        self.regression.set_theme(name)
        self.corp.set_theme(name)
        self.theme_actions[name].setChecked(True)
        self.settings.setValue("theme", name)

    def show_definitions(self) -> None:
        """Help > Metric definitions: one line per metric."""
        text = "\n".join(f"{k}: {v}" for k, v in METRIC_HELP.items())
        QtWidgets.QMessageBox.information(self, "Metric definitions", text)

    def show_about(self) -> None:
        """Help > About: the version and what calibview is for."""
        QtWidgets.QMessageBox.about(self, "About calibview", f"calibview {__version__}\nCalibration and "
                                    "sharpness of stored classifier logits.")

    def save_settings(self) -> None:
        """Remember the geometry, the dock layout, the bandwidth, the kernel and the theme for the next session."""
        preferences.save(self, self.settings, self.session, self.theme)

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        self.save_settings()
        self.conformal_view.stop()
        self.members_view.stop()
        self.session.shutdown()
        super().closeEvent(event)


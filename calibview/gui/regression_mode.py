"""The window with a regression run selected: the regression view in place of the classification bar and
canvas, the "Regression metrics" and "Coverage · PIT · quantiles" tabs, and every classification control that
does not apply disabled with a tooltip saying why (:class:`RegressionMode`). The window builds one and routes
the bandwidth steps and exports through it while :attr:`RegressionMode.active`."""

from __future__ import annotations

from PySide6 import QtWidgets

from calibview.gui.model.document import is_regression
from calibview.gui.views.regression_table import CoverageTab, RegressionTable
from calibview.gui.views.regression_view import RegressionView

#: the tooltip of a classification control while a regression run is selected
NOT_FOR_REGRESSION = "A regression run is selected: {what} is for classification runs."
#: the tooltip of a regression tab while a classification run is selected
NOT_FOR_CLASSIFICATION = "Select a regression run in the browser (marked \"regression · …\") to see this tab."
CALIBRATORS_TIP = ("A regression run is selected: it is evaluated with the recalibrators none, var-scaling and "
                   "isotonic-pit (those that apply to its form); these calibrators are for classification runs.")


class RegressionMode:
    """Adds the regression view to ``stack`` (beside ``classification``, the classification page) and the
    regression tabs to the window's metrics dock; switches between them on selection_changed and fills them on
    regression_changed."""

    def __init__(self, window, stack: QtWidgets.QStackedWidget, classification: QtWidgets.QWidget) -> None:
        self.window, self.stack, self.classification = window, stack, classification
        session = window.session
        self.view = RegressionView(session)
        stack.addWidget(self.view)
        self.table = RegressionTable()
        self.coverage = CoverageTab()
        tabs = window.table.tabs
        self._class_tabs = [(tabs.widget(i), tabs.tabToolTip(i)) for i in range(tabs.count())]
        tabs.addTab(self.table, "Regression metrics")
        tabs.addTab(self.coverage, "Coverage · PIT · quantiles")
        self._tips: dict = {}                  # widget -> its tooltip before regression mode
        self.active = False
        session.selection_changed.connect(self.sync)
        session.regression_changed.connect(self.show)
        self.sync()

    @property
    def canvas(self):
        """The regression diagram (calibview.plot.regression.canvas.RegressionCanvas)."""
        return self.view.canvas

    def sync(self) -> None:
        """Regression mode on while a regression run is selected, off otherwise."""
        w = self.window
        on = is_regression(w.session.run)
        if on != self.active:
            self.active = on
            self.stack.setCurrentWidget(self.view if on else self.classification)
        tabs = w.table.tabs
        for widget, tip in self._class_tabs:
            i = tabs.indexOf(widget)
            tabs.setTabEnabled(i, not on)
            tabs.setTabToolTip(i, NOT_FOR_REGRESSION.format(what=f"the {tabs.tabText(i)} tab") if on else tip)
        for widget in (self.table, self.coverage):
            i = tabs.indexOf(widget)
            tabs.setTabEnabled(i, on)
            tabs.setTabToolTip(i, "" if on else NOT_FOR_CLASSIFICATION)
        if on and not tabs.isTabEnabled(tabs.currentIndex()):
            tabs.setCurrentWidget(self.table)
        elif not on and not tabs.isTabEnabled(tabs.currentIndex()):
            tabs.setCurrentIndex(0)
        b = w.browser
        self._disable(w.panel, on, CALIBRATORS_TIP)
        # the browser's lists are enabled when they list something (as the browser itself decides)
        self._disable(b.compare_list, on, NOT_FOR_REGRESSION.format(what="comparing eval splits side by side"),
                      b.compare_list.count() > 0)
        self._disable(b.run_picker, on, NOT_FOR_REGRESSION.format(what="comparing runs on the same samples"),
                      b.run_picker.count() > 0)
        self._disable(w.decisions, on, NOT_FOR_REGRESSION.format(what="the Decisions view (risk-coverage, "
                                                                       "thresholds)"))

    def _disable(self, widget: QtWidgets.QWidget, on: bool, tip: str, enabled: bool = True) -> None:
        """Off with ``tip`` in regression mode; back to its own tooltip and ``enabled`` after it."""
        if on:
            self._tips.setdefault(widget, widget.toolTip())
            widget.setEnabled(False)
            widget.setToolTip(tip)
        elif widget in self._tips:
            widget.setToolTip(self._tips.pop(widget))
            widget.setEnabled(enabled)

    def show(self, evaluation) -> None:
        """Fill the regression view and tabs with ``evaluation`` (a RegEvaluation, or None)."""
        self.table.set_evaluation(evaluation)
        self.coverage.set_evaluation(evaluation)
        if evaluation is None:
            return
        w = self.window
        if w.table.tabs.currentWidget() is not self.coverage:
            w.table.tabs.setCurrentWidget(self.table)
        names = ", ".join(r.name for r in evaluation.results)
        w.progress_label.setText(f"Evaluated {evaluation.run.name} ({evaluation.request.eval_split}): {names}"
                                 + (f" · {len(evaluation.notes)} note(s)" if evaluation.notes else ""))
        w.progress_label.setToolTip("\n".join(evaluation.notes))
        w._progress_shown = False

    def set_theme(self, name: str) -> None:
        """The light or dark theme of the diagram and the panels."""
        self.view.canvas.set_theme(name)
        self.coverage.set_theme(name)

"""The browser dock: open files > model > dataset, with N, K and splits, and the fit / evaluation split pickers."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets

from calibview.gui.model.document import is_regression
from calibview.gui.views.compare_view import RunPicker
from calibview.gui.views.regression_view import form_text
from calibview.gui.session import Session

FILE_ROLE = QtCore.Qt.UserRole
RUN_ROLE = QtCore.Qt.UserRole + 1
NO_FIT = "(none: uncalibrated only)"


class Browser(QtWidgets.QWidget):
    """Shows Session.files as a tree and the selected run's splits; listens to files_changed, selection_changed."""

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setHeaderLabels(["file / model / dataset", "K", "splits"])
        # the sizes live in each run's tooltip: "val (5,000), test (10,000)" never fitted a laptop's dock
        self.tree.headerItem().setToolTip(2, "The run's splits; hover a run for each split's N")
        self.tree.setUniformRowHeights(True)
        # K and the splits always in view: the names take what is left and are elided (their tooltips are whole);
        # sized to the longest name, a regression run's "diabetes · regression · quantiles (Q=19)" pushed K past a
        # laptop's dock, where CIFAR-100's "100" read "10"
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Stretch)
        for col in (1, 2):
            header.setSectionResizeMode(col, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.tree.setAlternatingRowColors(True)
        self.tree.itemSelectionChanged.connect(self._on_tree_selection_changed)
        self.tree.setContextMenuPolicy(QtCore.Qt.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._on_tree_context_menu)
        self.fit_combo = QtWidgets.QComboBox()
        self.eval_combo = QtWidgets.QComboBox()
        self.fit_combo.setToolTip("Split the calibrators are fitted on")
        self.eval_combo.setToolTip("Split every metric is computed on")
        self.fit_combo.activated.connect(self._on_combo_activated)
        self.eval_combo.activated.connect(self._on_combo_activated)
        # Domains: further eval splits scored with the same fitted calibrators, drawn side by side.
        self.compare_list = QtWidgets.QListWidget()
        self.compare_list.setToolTip("Also evaluate the same fitted calibrators on these splits (e.g. a deployment "
                                     "split): one diagram per split side by side, a row per split in the table")
        self.compare_list.setAlternatingRowColors(False)
        self.compare_list.itemChanged.connect(self._on_compare_item_changed)
        form = QtWidgets.QFormLayout()
        form.addRow("Fit on", self.fit_combo)
        form.addRow("Evaluate on", self.eval_combo)
        form.addRow("Compare on", self.compare_list)
        self.run_picker = RunPicker(session)          # models on the same samples (calibview.gui.views.compare_view)
        form.addRow("Compare with", self.run_picker)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.tree, 1)
        layout.addLayout(form)
        self._updating = False
        session.files_changed.connect(self._on_session_files_changed)
        session.selection_changed.connect(self._on_session_selection_changed)

    def _on_session_files_changed(self) -> None:
        self._updating = True
        self.tree.clear()
        for path, runs in self.session.files.items():
            top = QtWidgets.QTreeWidgetItem([Path(path).name, "", f"{len(runs)} run(s)"])
            top.setToolTip(0, path)
            top.setData(0, FILE_ROLE, path)
            models: dict[str, QtWidgets.QTreeWidgetItem] = {}
            for run in runs:
                parent = models.get(run.model)
                if parent is None:
                    parent = models[run.model] = QtWidgets.QTreeWidgetItem(top, [run.model, "", ""])
                    parent.setData(0, FILE_ROLE, path)
                splits = ", ".join(s.name for s in run.splits)
                if is_regression(run):           # marked with its predictive form; K means nothing for it
                    item = QtWidgets.QTreeWidgetItem(parent, [f"{run.dataset or '(data)'}  ·  {form_text(run)}", "–",
                                                              splits])
                    item.setToolTip(1, "A regression run has no classes")
                else:
                    item = QtWidgets.QTreeWidgetItem(parent, [run.dataset or "(data)", str(run.k or "?"), splits])
                item.setToolTip(2, "\n".join(f"{s.name}: N = {s.n:,}" for s in run.splits))
                item.setData(0, FILE_ROLE, path)
                item.setData(0, RUN_ROLE, run.name)
                attribution = run.attrs.get("attribution") if run.attrs else None
                name = f"{run.name} ({form_text(run)})" if is_regression(run) else run.name
                item.setToolTip(0, f"{name}\n{attribution}" if attribution else name)
            self.tree.addTopLevelItem(top)
            top.setExpanded(True)
            for parent in models.values():
                parent.setExpanded(True)
        self._updating = False
        self._on_session_selection_changed()

    def _on_session_selection_changed(self) -> None:
        self._updating = True
        run = self.session.run
        it = QtWidgets.QTreeWidgetItemIterator(self.tree)
        while it.value():
            item = it.value()
            if run is not None and item.data(0, RUN_ROLE) == run.name and item.data(0, FILE_ROLE) == run.file:
                self.tree.setCurrentItem(item)
                break
            it += 1
        self.fit_combo.clear()
        self.eval_combo.clear()
        if run is not None:
            names = [s.name for s in run.splits]
            self.eval_combo.addItems(names)
            self.eval_combo.setCurrentText(self.session.eval_split or names[-1])
            self.fit_combo.addItems(names + [NO_FIT])
            self.fit_combo.setCurrentText(self.session.fit_split or NO_FIT)
        self._fill_compare_list(run)
        self._updating = False

    def _fill_compare_list(self, run) -> None:
        self.compare_list.clear()
        names = [s.name for s in run.splits] if run is not None else []
        for name in names:
            if name == self.session.eval_split:
                continue
            item = QtWidgets.QListWidgetItem(name)
            item.setFlags(item.flags() | QtCore.Qt.ItemIsUserCheckable)
            item.setCheckState(QtCore.Qt.Checked if name in self.session.compare_splits else QtCore.Qt.Unchecked)
            if name == self.session.fit_split:
                item.setToolTip("The calibrators' fit split: in-sample numbers")
            self.compare_list.addItem(item)
        rows = max(1, self.compare_list.count())
        self.compare_list.setFixedHeight(min(rows, 4) * (self.compare_list.sizeHintForRow(0) or 18) + 6)
        self.compare_list.setEnabled(self.compare_list.count() > 0)

    def compare_checked(self) -> list[str]:
        """The further eval splits ticked under "Compare on", in the run's split order."""
        return [self.compare_list.item(i).text() for i in range(self.compare_list.count())
                if self.compare_list.item(i).checkState() == QtCore.Qt.Checked]

    def _on_compare_item_changed(self, _item) -> None:
        if self._updating or self.session.run is None:
            return
        self.session.set_compare_splits(self.compare_checked())

    def _on_tree_selection_changed(self) -> None:
        if self._updating:
            return
        item = self.tree.currentItem()
        if item is None or item.data(0, RUN_ROLE) is None:
            return
        path, name = item.data(0, FILE_ROLE), item.data(0, RUN_ROLE)
        run = self.session.run
        if run is None or run.file != path or run.name != name:
            self.session.select_run(path, name)

    def _on_combo_activated(self, _index: int) -> None:
        if self._updating or self.session.run is None:
            return
        fit = self.fit_combo.currentText()
        self.session.set_splits(None if fit == NO_FIT else fit, self.eval_combo.currentText(),
                                self.compare_checked())

    def _on_tree_context_menu(self, pos) -> None:
        item = self.tree.itemAt(pos)
        if item is None:
            return
        path = item.data(0, FILE_ROLE)
        menu = QtWidgets.QMenu(self)
        close = menu.addAction(f"Close {Path(path).name}")
        if menu.exec(self.tree.viewport().mapToGlobal(pos)) is close:
            self.session.close_file(path)

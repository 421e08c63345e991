"""The comparison of runs on the same samples: a "Compare" tab in the metrics dock with every metric (a row) per
calibrator and run (a column), each run's paired bootstrap difference to the reference run and a mark where its
interval excludes 0 (core.evaluation.compare), and a picker in the browser of the runs to compare with the selected one.

Draws only: the numbers are the records of :func:`calibview.core.evaluation.compare.compare_rows`, as in compare.csv.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from PySide6 import QtGui, QtWidgets
from PySide6.QtCore import Qt

from calibview.core.reports import units
from calibview.core.reports.contrasts import compare_csv
from calibview.core.stats.metrics import METRIC_HELP, METRIC_NAMES
from calibview.core.io.safe_io import atomic_write
from calibview.gui.session import Session

MARK = "●"
RUN_ROLE = Qt.ItemDataRole.UserRole
ROW_ROLE = Qt.ItemDataRole.UserRole + 1        # the record behind a cell (core.evaluation.compare row)


def _signed(metric: str, x: float) -> str:
    """A difference in ``metric``'s display unit and decimals (core.reports.units), with its sign: "+0.06", "-0.69"."""
    text = units.fmt(metric, x)
    return f"+{text}" if x > 0 and not text.startswith("∞") else text


def cell_text(row: dict, metric: str) -> str:
    """"value" for the reference; "value  Δ +d [lo, hi] ●" for another run (● when the interval excludes 0), in
    the metric's display unit (core.reports.units: the table's convention); the difference and its interval with the
    estimate's decimals."""
    text = units.fmt(metric, row[metric])
    if row["is_reference"] or row[f"delta_{metric}"] is None:        # None: a metric these runs do not have
        return text
    text += f"   Δ {_signed(metric, row[f'delta_{metric}'])}"
    lo, hi = row[f"delta_{metric}_lo"], row[f"delta_{metric}_hi"]
    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
        text += f" [{_signed(metric, lo)}, {_signed(metric, hi)}]"
    return text + (f" {MARK}" if row[f"significant_{metric}"] else "")


class CompareView(QtWidgets.QWidget):
    """The table of a core.evaluation.compare.Comparison: a row per metric, a column per calibrator and run (the
    reference first), a caption naming the reference and the interval level, and an export of compare.csv;
    listens to comparison_changed and visible_changed."""

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.comparison = None
        self.caption = QtWidgets.QLabel("Compare runs on the same samples: tick runs under “Compare with” in "
                                        "the browser.")
        self.caption.setWordWrap(True)
        self.export_button = QtWidgets.QPushButton("Export CSV…")
        self.export_button.setToolTip("compare.csv: the metrics rows, the reference, delta_<metric> with _lo/_hi "
                                      "and significant_<metric>")
        self.export_button.clicked.connect(lambda: self.export_csv())
        self.table = QtWidgets.QTableWidget()
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeToContents)
        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.caption, 1)
        top.addWidget(self.export_button)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        session.comparison_changed.connect(self.set_comparison)
        session.visible_changed.connect(self._on_visible_changed)
        self.set_comparison(None)

    def set_comparison(self, comparison) -> None:
        """Show ``comparison`` (a core.evaluation.compare.Comparison; None empties the table)."""
        self.comparison = comparison
        self.table.clear()
        self.export_button.setEnabled(comparison is not None)
        if comparison is None:
            self.table.setRowCount(0)
            self.table.setColumnCount(0)
            return
        ref = comparison.evaluations[comparison.reference]
        level = ref.request.level
        self.caption.setText(f"Paired bootstrap differences Δ to the reference {comparison.reference_run} on "
                             f"{ref.request.eval_split} (N = {ref.n_eval:,}, the same {ref.request.n_boot} resamples "
                             f"for every run, {100 * level:g} % intervals); {MARK} the interval excludes 0. "
                             "Values in the units of the metrics table (row headers).")
        names = list(dict.fromkeys(r["calibrator"] for r in comparison.rows))
        runs = [(ev.run.file, ev.run.name) for ev in comparison.evaluations]
        runs = [runs[comparison.reference]] + [r for i, r in enumerate(runs) if i != comparison.reference]
        columns = [(nm, run) for nm in names for run in runs
                   if any(r["calibrator"] == nm and (r["file"], r["run"]) == run for r in comparison.rows)]
        labels = {res.name: res.label for ev in comparison.evaluations for res in ev.results}
        twice = {n for _, n in runs if sum(m == n for _, m in runs) > 1}      # same name in two files
        self.table.setColumnCount(len(columns))
        self.table.setRowCount(len(METRIC_NAMES))
        self.table.setHorizontalHeaderLabels([
            f"{labels[nm]}\n{run}" + (f" ({Path(file).name})" if run in twice else "")
            + (" (reference)" if (file, run) == runs[0] else "") for nm, (file, run) in columns])
        self.table.setVerticalHeaderLabels([units.header(m) for m in METRIC_NAMES])
        for i, m in enumerate(METRIC_NAMES):
            self.table.verticalHeaderItem(i).setToolTip(f"{METRIC_HELP.get(m, m)}\n{units.describe(m)}")
            rows = [comparison.row(run, nm, file) for nm, (file, run) in columns]
            for j, row in enumerate(rows):
                item = QtWidgets.QTableWidgetItem(cell_text(row, m))
                item.setData(RUN_ROLE, row["run"])
                item.setData(ROW_ROLE, row)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if row[f"significant_{m}"]:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                    item.setBackground(QtGui.QColor(230, 159, 0, 70))
                item.setToolTip(self._tooltip(row, m))
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self._on_visible_changed(self.session.visible)

    @staticmethod
    def _tooltip(row: dict, m: str) -> str:
        lines = [f"{row['run']} · {row['calibrator']} · {m}: {row[m]!r} [{row[f'{m}_lo']!r}, {row[f'{m}_hi']!r}]"]
        if not row["is_reference"]:
            mark = {True: "significant: the interval excludes 0", False: "not significant: the interval holds 0",
                    None: "no interval"}[row[f"significant_{m}"]]
            lines.append(f"minus {row['reference']}: {row[f'delta_{m}']!r} [{row[f'delta_{m}_lo']!r}, "
                         f"{row[f'delta_{m}_hi']!r}] ({mark})")
        return "\n".join(lines)

    def marked(self) -> list[tuple[str, str, str]]:
        """(run, calibrator, metric) of every marked cell, as shown."""
        out = []
        for i in range(self.table.rowCount()):
            for j in range(self.table.columnCount()):
                item = self.table.item(i, j)
                if item is not None and item.text().endswith(MARK):
                    row = item.data(ROW_ROLE)
                    out.append((row["run"], row["calibrator"], METRIC_NAMES[i]))
        return out

    def _on_visible_changed(self, visible) -> None:
        for j in range(self.table.columnCount()):
            item = self.table.item(0, j)
            row = item.data(ROW_ROLE) if item is not None else None
            self.table.setColumnHidden(j, row is not None and bool(visible) and row["calibrator"] not in visible)

    def export_csv(self, path: Optional[str] = None) -> Optional[str]:
        """Write compare.csv of the shown comparison to ``path`` (asked for when None); returns the path, or None when
        there is nothing to write or the dialog was cancelled."""
        if self.comparison is None:
            return None
        if path is None:
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Export comparison", "compare.csv", "CSV (*.csv)")
            if not path:
                return None
        atomic_write(path, compare_csv(self.comparison.rows))
        return path


class RunPicker(QtWidgets.QListWidget):
    """The browser's "Compare with" list: every other open run, ticked when compared with the selected one;
    runs whose metadata rules a comparison out are greyed out with the reason as tooltip. Listens to
    selection_changed and files_changed."""

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self._updating = False
        self.setToolTip("Compare the selected run with these runs on the same samples (same dataset, eval split "
                        "and labels): one diagram per run, paired differences in the metrics dock's Compare tab")
        self.itemChanged.connect(self._on_item_changed)
        session.selection_changed.connect(self.fill)
        session.files_changed.connect(self.fill)

    def fill(self) -> None:
        """List every other open run, ticked when compared, greyed out with the reason when it cannot be."""
        self._updating = True
        self.clear()
        ticked = set(self.session.compare_runs)
        for run, why in self.session.compare_candidates():
            item = QtWidgets.QListWidgetItem(run.name)
            item.setData(RUN_ROLE, (run.file, run.name))
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if (run.file, run.name) in ticked else Qt.CheckState.Unchecked)
            if why is not None:
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
                item.setToolTip(why)
            else:
                item.setToolTip(f"{run.name} ({run.file})")
            self.addItem(item)
        self.setFixedHeight(min(max(1, self.count()), 4) * (self.sizeHintForRow(0) or 18) + 6)
        self.setEnabled(self.count() > 0)
        self._updating = False

    def checked(self) -> list[tuple[str, str]]:
        """The (file, run name) of every ticked run."""
        return [tuple(self.item(i).data(RUN_ROLE)) for i in range(self.count())
                if self.item(i).checkState() == Qt.CheckState.Checked]

    def _on_item_changed(self, _item) -> None:
        if not self._updating:
            self.session.set_compare_runs(self.checked())

"""The metrics table shows exactly the Evaluation's numbers, sorts them numerically and exports the CLI's CSV."""

import csv
import dataclasses
import io
import math
import re

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6 import QtWidgets  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402

from calibview.core.evaluation.engine import evaluate  # noqa: E402
from calibview.core.evaluation.request import EvalRequest  # noqa: E402
from calibview.core.io.writer import write_run  # noqa: E402
from calibview.core.stats.metrics import METRIC_NAMES, NO_INTERVAL  # noqa: E402
from calibview.core.evaluation.toplabel.absent import BINARY_METRICS  # noqa: E402
from calibview.core.reports.tables import metrics_csv, metrics_rows  # noqa: E402
from calibview.gui.views.metrics_table import INTERVAL_TEXT_ROLE, VALUE_TEXT_ROLE, MetricsTable  # noqa: E402

DISPLAY, USER, TOOLTIP = Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.UserRole, Qt.ItemDataRole.ToolTipRole
EXPECTED_HEADERS = ["Calibrator", "Acc %", "NLL", "Brier ×100", "Brier (top) ×100", "ECE %", "RMSCE %", "MCE %",
                    "ACE %", "CW-ECE %", "dECE %", "smECE %", "CAL ×100", "TOT ×100", "Sharp. gap ×100",
                    "AURC ×100", "E-AURC ×100", "Acc@80 %",
                    "Acc@90 %", "Acc@95 %", "Cov@95 %", "Cov@99 %", "AUROC", "AUROC (correct)", "MCB ×100",
                    "DSC ×100", "UNC ×100", "MCB (log)", "DSC (log)", "UNC (log)", "p (ECE)", "p (SKCE)",
                    "NLL refinement", "NLL calibration", "Brier refinement ×100", "Brier calibration ×100"]
CELL = re.compile(r"^(\S+)(?: \[(\S+), (\S+)\])?$")


@pytest.fixture(scope="module")
def demo_ev(demo_file):
    return evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100",
                                calibrators=("none", "ts", "ts-grid"), n_boot=30, device="cpu"))


@pytest.fixture(scope="module")
def zero_ev(tmp_path_factory):
    """A probability file where two samples give the true label probability exactly 0 (NLL = inf)."""
    rng = np.random.default_rng(0)
    n, k = 400, 4
    probs = rng.dirichlet(np.ones(k), size=n)
    labels = rng.integers(0, k, size=n)
    for i in (3, 17):
        probs[i, labels[i]] = 0.0
        probs[i] /= probs[i].sum()
    path = tmp_path_factory.mktemp("zero") / "zero.h5"
    write_run(path, "m", "d", "test", probs=probs, labels=labels)
    return evaluate(EvalRequest(file=str(path), run="m/d", calibrators=("none",), fit_split=None, n_boot=20,
                                device="cpu"))


@pytest.fixture
def table(qtbot):
    w = MetricsTable()
    qtbot.addWidget(w)
    w.resize(1100, 300)
    w.show()
    return w


def _headers(model):
    return [model.headerData(c, Qt.Orientation.Horizontal).replace("\n", " ") for c in range(model.columnCount())]


def _parse(text):
    return {"∞": math.inf, "-∞": -math.inf}.get(text, None) or float(text)


def _close(text, exact, scale):
    """``text`` is ``exact * scale`` rounded to the decimals it shows (∞ only for an infinite value)."""
    if math.isinf(exact):
        return text == ("∞" if exact > 0 else "-∞")
    if text == "≈0":                                       # an estimate clipped at 0
        return exact == 0.0
    if text.startswith("<1/"):                             # a Monte-Carlo p-value at its floor 1 / (n + 1)
        return exact == pytest.approx(1.0 / int(text[3:]), rel=1e-12)
    if text[0] in "<>":                                    # non-zero, below the last decimal shown
        return exact != 0.0 and abs(exact * scale) < float(text.lstrip("<>-"))
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(_parse(text) - exact * scale) <= 0.5 * 10 ** -decimals + 1e-12


def _column_values(table, column):
    proxy = table.metrics_proxy
    return [proxy.data(proxy.index(r, column), USER) for r in range(proxy.rowCount())]


def test_rows_columns_and_header_order(table, demo_ev):
    table.set_evaluation(demo_ev)
    model = table.metrics_proxy
    assert model.rowCount() == len(demo_ev.results) == 3
    assert model.columnCount() == 1 + len(METRIC_NAMES)
    assert _headers(model) == EXPECTED_HEADERS
    assert [table.metrics_model.metric_of(c) for c in range(1, model.columnCount())] == list(METRIC_NAMES)
    # Header tooltips carry the metric's definition.
    assert "equal-width bins" in model.headerData(5, Qt.Orientation.Horizontal, TOOLTIP)


def test_every_cell_shows_the_evaluation_numbers(table, demo_ev):
    table.set_evaluation(demo_ev)
    model = table.metrics_proxy
    headers = _headers(model)
    for row in range(model.rowCount()):
        result = demo_ev.results[row]                      # unsorted: requested order
        assert model.data(model.index(row, 0), DISPLAY) == result.label
        assert model.data(model.index(row, 0), USER) == result.name
        for col, m in enumerate(METRIC_NAMES, start=1):
            idx = model.index(row, col)
            est = result.metrics[m]
            text = model.data(idx, DISPLAY)
            if m in BINARY_METRICS:                        # K = 100: the log score's decomposition is K = 2's
                assert text == "n/a (K > 2)"
                continue
            assert "nan" not in text.lower() and "inf" not in text.lower()
            value, lo, hi = CELL.match(text).groups()
            scale = 100.0 if headers[col].endswith(("%", "×100")) else 1.0
            assert _close(value, est.value, scale), (m, text, est)
            if m in NO_INTERVAL:                           # a p-value: no interval
                assert lo is None, (m, text)
            else:
                assert lo is not None and _close(lo, est.lo, scale) and _close(hi, est.hi, scale), (m, text, est)
            assert model.data(idx, USER) == est.value        # the exact float, no rounding
            assert repr(est.value) in model.data(idx, TOOLTIP)


def test_a_p_value_at_its_monte_carlo_floor_reads_below_its_resolution(table, demo_ev):
    """30 redraws: p = (1 + 0) / 31 when no redraw reaches the observed ECE; it reads "<1/31", never a number."""
    table.set_evaluation(demo_ev)
    model = table.metrics_proxy
    col = 1 + METRIC_NAMES.index("p_ece")
    floors = [r for r, res in enumerate(demo_ev.results) if res.metrics["p_ece"].value == 1 / 31]
    assert floors, [res.metrics["p_ece"].value for res in demo_ev.results]     # the uncalibrated model at least
    for r in floors:
        assert model.data(model.index(r, col), DISPLAY) == "<1/31"
        assert "resolution is 1/31" in model.data(model.index(r, col), TOOLTIP)
        assert model.data(model.index(r, col), USER) == 1 / 31


def test_csv_text_is_the_cli_csv_and_parses_back_to_the_table(table, demo_ev, tmp_path):
    table.set_evaluation(demo_ev)
    assert table.csv_text() == metrics_csv(metrics_rows([demo_ev]))
    path = tmp_path / "out" / "metrics.csv"
    table.export_csv(path)
    rows = list(csv.DictReader(path.open(newline="")))
    assert [r["calibrator"] for r in rows] == [r.name for r in demo_ev.results]
    model = table.metrics_proxy
    for i, (row, result) in enumerate(zip(rows, demo_ev.results)):
        for col, m in enumerate(METRIC_NAMES, start=1):
            est = result.metrics[m]
            if m in BINARY_METRICS:                        # absent: empty cells
                assert row[m] == row[f"{m}_lo"] == ""
                continue
            bounds = (None, None) if m in NO_INTERVAL else (est.lo, est.hi)     # a p-value's: empty
            got = tuple(float(row[c]) if row[c] else None for c in (f"{m}_lo", f"{m}_hi"))
            assert (float(row[m]),) + got == (est.value,) + bounds
            assert float(row[m]) == model.data(model.index(i, col), USER)


def test_sorting_by_ece_orders_rows_by_value(table, demo_ev):
    table.set_evaluation(demo_ev)
    col = 1 + METRIC_NAMES.index("ece")
    table.metrics_view.sortByColumn(col, Qt.SortOrder.AscendingOrder)
    values = _column_values(table, col)
    assert values == sorted(r.metrics["ece"].value for r in demo_ev.results)
    assert values != [r.metrics["ece"].value for r in demo_ev.results]    # the order really changed
    table.metrics_view.sortByColumn(col, Qt.SortOrder.DescendingOrder)
    assert _column_values(table, col) == sorted(values, reverse=True)
    # Sorting by the calibrator column restores the requested order.
    table.metrics_view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    assert _column_values(table, 0) == [r.name for r in demo_ev.results]


def test_best_value_in_a_column_is_bold(table, demo_ev):
    table.set_evaluation(demo_ev)
    col = 1 + METRIC_NAMES.index("ece")
    best = min(range(3), key=lambda i: demo_ev.results[i].metrics["ece"].value)
    fonts = [table.metrics_proxy.data(table.metrics_proxy.index(r, col), Qt.ItemDataRole.FontRole)
             for r in range(3)]
    assert [f is not None and f.bold() for f in fonts] == [r == best for r in range(3)]


def test_infinite_nll_shows_infinity_and_sorts_last(table, demo_ev, zero_ev):
    zero = zero_ev.results[0]
    assert math.isinf(zero.metrics["nll"].value)
    table.set_evaluation(zero_ev)
    nll_col = 1 + METRIC_NAMES.index("nll")
    idx = table.metrics_proxy.index(0, nll_col)
    assert table.metrics_proxy.data(idx, DISPLAY).split(" ")[0] == "∞"
    assert "inf" not in table.metrics_proxy.data(idx, DISPLAY)
    assert table.metrics_proxy.data(idx, USER) == math.inf
    assert "probability 0" in table.metrics_proxy.data(idx, TOOLTIP)
    assert table.metrics_proxy.data(table.metrics_proxy.index(0, 0), Qt.ItemDataRole.DecorationRole) is not None
    assert "inf" in table.csv_text()                        # the CSV keeps the CLI's spelling
    # Mixed with finite rows, ∞ sorts after every finite NLL.
    mixed = dataclasses.replace(demo_ev, results=(dataclasses.replace(zero, name="zero", label="Zero"),)
                                + demo_ev.results)
    table.set_evaluation(mixed)
    table.metrics_view.sortByColumn(nll_col, Qt.SortOrder.AscendingOrder)
    values = _column_values(table, nll_col)
    assert math.isinf(values[-1]) and all(math.isfinite(v) for v in values[:-1])
    assert values[:-1] == sorted(values[:-1])
    assert _column_values(table, 0)[-1] == "zero"


def test_selecting_a_row_changes_the_per_class_tab(table, demo_ev, qtbot):
    table.set_evaluation(demo_ev)
    assert table.selected_calibrator() == "none"           # the first row by default
    assert table.per_class_model.result() is demo_ev.result("none")
    view, proxy = table.metrics_view, table.metrics_proxy
    rect = view.visualRect(proxy.index(1, 3))
    with qtbot.waitSignal(table.selected_calibrator_changed, timeout=1000) as blocker:
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args == ["ts"]
    assert table.selected_calibrator() == "ts"
    result = demo_ev.result("ts")
    pc = table.per_class_proxy
    assert pc.rowCount() == demo_ev.k == 100
    assert sum(pc.data(pc.index(r, 2), USER) for r in range(pc.rowCount())) == demo_ev.n_eval
    assert [pc.data(pc.index(r, 1), DISPLAY) for r in range(pc.rowCount())] == list(demo_ev.run.class_names)
    assert not table.per_class_view.isColumnHidden(1)
    for r in range(pc.rowCount()):
        assert _close(pc.data(pc.index(r, 3), DISPLAY), result.per_class_accuracy[r], 100.0)
        assert _close(pc.data(pc.index(r, 4), DISPLAY), result.per_class_ece[r], 100.0)
        assert pc.data(pc.index(r, 4), USER) == result.per_class_ece[r]
    # Per-class sorting is numeric too.
    table.per_class_view.sortByColumn(4, Qt.SortOrder.AscendingOrder)
    eces = [pc.data(pc.index(r, 4), USER) for r in range(pc.rowCount())]
    assert eces == sorted(result.per_class_ece.tolist())
    with qtbot.waitSignal(table.selected_calibrator_changed, timeout=1000) as blocker:
        assert table.select_calibrator("ts-grid")
    assert blocker.args == ["ts-grid"] and table.per_class_model.result() is demo_ev.result("ts-grid")
    assert not table.select_calibrator("no-such") and table.selected_calibrator() == "ts-grid"
    assert table.per_class_csv_text().count("\n") == 1 + demo_ev.k


def test_selection_survives_a_new_evaluation_and_hiding(table, demo_ev, qtbot):
    table.set_evaluation(demo_ev)
    table.select_calibrator("ts")
    with qtbot.assertNotEmitted(table.selected_calibrator_changed):
        table.set_evaluation(dataclasses.replace(demo_ev))
    assert table.selected_calibrator() == "ts"
    with qtbot.waitSignal(table.selected_calibrator_changed, timeout=1000) as blocker:
        table.set_hidden_calibrators({"ts"})
    assert blocker.args == ["none"] and table.metrics_proxy.rowCount() == 2
    assert table.csv_text() == metrics_csv(metrics_rows([demo_ev]))      # the export keeps every row


def test_per_class_without_class_names_hides_the_name_column(table, zero_ev):
    table.set_evaluation(zero_ev)
    assert table.per_class_proxy.rowCount() == zero_ev.k
    assert table.per_class_view.isColumnHidden(1)
    counts = [table.per_class_proxy.data(table.per_class_proxy.index(r, 2), USER) for r in range(zero_ev.k)]
    assert sum(counts) == zero_ev.n_eval


def test_copy_selection_puts_tab_separated_text_on_the_clipboard(table, demo_ev, qtbot):
    table.set_evaluation(demo_ev)
    clipboard = QtWidgets.QApplication.clipboard()
    clipboard.setText("")
    table.metrics_view.selectAll()
    text = table.copy_selection()
    assert clipboard.text() == text
    lines = text.rstrip("\n").split("\n")
    assert len(lines) == 1 + len(demo_ev.results)
    assert lines[0].split("\t") == EXPECTED_HEADERS
    assert all(len(line.split("\t")) == len(EXPECTED_HEADERS) for line in lines)
    assert lines[2].split("\t")[0] == demo_ev.results[1].label
    # Ctrl+C on the per-class view copies the per-class selection.
    clipboard.setText("")
    table.tabs.setCurrentIndex(1)
    table.per_class_view.selectRow(0)
    table.per_class_view.setFocus()
    qtbot.keyClick(table.per_class_view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    rows = list(csv.reader(io.StringIO(clipboard.text()), delimiter="\t"))
    assert rows[0] == ["#", "Class", "Count", "Acc %", "one-vs-rest ECE %"]      # not the slice's top-label ECE
    assert rows[1][:3] == ["0", demo_ev.run.class_names[0], "100"]


def test_set_evaluation_none_clears_both_tabs(table, demo_ev, qtbot):
    table.set_evaluation(demo_ev)
    assert table.per_class_proxy.rowCount() == 100
    with qtbot.waitSignal(table.selected_calibrator_changed, timeout=1000) as blocker:
        table.set_evaluation(None)
    assert blocker.args == [""]
    assert table.metrics_proxy.rowCount() == 0 and table.per_class_proxy.rowCount() == 0
    assert table.selected_calibrator() is None
    assert table.csv_text() == metrics_csv([])
    assert table.copy_selection() == ""


def test_without_bootstrap_a_cell_shows_only_the_value(table, demo_file):
    ev = evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100", calibrators=("none",),
                              fit_split=None, n_boot=0, device="cpu"))
    table.set_evaluation(ev)
    text = table.metrics_proxy.data(table.metrics_proxy.index(0, 1 + METRIC_NAMES.index("ece")), DISPLAY)
    assert CELL.match(text).group(2) is None and "[" not in text
    assert _close(text, ev.results[0].metrics["ece"].value, 100.0)


def test_precision_is_fixed_per_column_and_matches_the_shared_convention(table, demo_ev):
    """Precision jumped to 4-6 decimals when a calibrator with tiny values joined; dECE showed "0.0".
    Every cell now reads as calibview.core.reports.units says, whatever else the column holds."""
    from calibview.core.reports import units
    table.set_evaluation(demo_ev)
    model = table.metrics_proxy
    for row in range(model.rowCount()):
        result = demo_ev.results[row]
        for col, m in enumerate(METRIC_NAMES, start=1):
            est = result.metrics[m]
            if m in BINARY_METRICS:
                continue
            assert model.data(model.index(row, col), DISPLAY) == units.fmt_estimate(m, est.value, est.lo, est.hi,
                                                                                      demo_ev.request.n_boot)
            text = model.data(model.index(row, col), VALUE_TEXT_ROLE)
            if "." in text and "/" not in text:
                assert len(text.split(".")[1]) == units.unit(m).decimals, (m, text)
        assert model.data(model.index(row, METRIC_NAMES.index("debiased_ece") + 1), DISPLAY) not in ("0.0", "0.00")


def test_the_interval_delegates_size_hint_is_the_style_options(table, demo_ev):
    """sizeHint resolves the cell's font from the font role itself instead of filling a style option: the same
    size for every cell, bold best-in-column cells and plain ones, with and without an interval line."""
    from PySide6 import QtCore, QtGui

    table.set_evaluation(demo_ev)
    view = table.metrics_view
    delegate = view.itemDelegate()
    option = QtWidgets.QStyleOptionViewItem()
    option.initFrom(view)
    option.font = view.font()
    model, bold = view.model(), 0
    for r in range(model.rowCount()):
        for c in range(1, model.columnCount()):
            index = model.index(r, c)
            value, interval = index.data(VALUE_TEXT_ROLE), index.data(INTERVAL_TEXT_ROLE) or ""
            if value is None:
                continue
            opt = QtWidgets.QStyleOptionViewItem(option)
            delegate.initStyleOption(opt, index)                  # the font Qt's own option filling gives
            small = QtGui.QFont(opt.font)
            small.setBold(False)
            small.setPointSizeF(opt.font.pointSizeF() * 0.85)
            bold += opt.font.bold()
            fm, sfm = QtGui.QFontMetrics(opt.font), QtGui.QFontMetrics(small)
            want = QtCore.QSize(max(fm.horizontalAdvance(value), sfm.horizontalAdvance(interval)) + 8,
                                fm.height() + (sfm.height() if interval else 0) + 6)
            assert delegate.sizeHint(option, index) == want, (r, c, value, interval)
    assert bold > 0                       # the bold (best in column) font was among them


def test_per_class_columns_are_sized_again_only_when_their_numbers_change(table, demo_ev, monkeypatch):
    calls = []
    real = table.per_class_view.resizeColumnsToContents
    monkeypatch.setattr(table.per_class_view, "resizeColumnsToContents", lambda: calls.append(1) or real())
    table.set_evaluation(demo_ev)
    assert len(calls) == 1
    again = dataclasses.replace(demo_ev, results=tuple(dataclasses.replace(r) for r in demo_ev.results))
    table.set_evaluation(again)                     # new result objects, the same per-class numbers: not resized
    assert table.per_class_model.result() is again.results[0] and len(calls) == 1
    assert table.select_calibrator("ts")            # another calibrator's numbers
    assert len(calls) == 2


def _pending(ev):
    """``ev`` as a partial result: every interval still on its way."""
    nan = float("nan")
    results = tuple(dataclasses.replace(r, metrics={m: dataclasses.replace(e, lo=nan, hi=nan)
                                                    for m, e in r.metrics.items()}) for r in ev.results)
    return dataclasses.replace(ev, results=results, pending=True)


def _sizes(view):
    header = view.horizontalHeader()
    return [header.sectionSize(c) for c in range(view.model().columnCount())]


def _qt_sizes(view):
    """The column widths Qt's own resizeColumnsToContents gives, the label column clamped as the table does."""
    view.resizeColumnsToContents()
    view.setColumnWidth(0, min(view.columnWidth(0), view.fontMetrics().horizontalAdvance("Temperature") + 40))
    return _sizes(view)


def test_columns_and_rows_are_sized_as_qt_sizes_them_to_their_contents(table, demo_ev, demo_file):
    """The table fits its columns from the texts themselves and its rows once per change; the widths are Qt's
    resizeColumnsToContents ones and every row is as tall as Qt's size hint for it, in every state: partial
    (pending intervals), final (bold best cells), a hidden calibrator shown again, two splits, sorted, no
    intervals, a narrower label column."""
    view = table.metrics_view
    no_boot = evaluate(EvalRequest(file=str(demo_file), run="resnet110-brier/cifar100", calibrators=("none", "ts"),
                                   n_boot=0, device="cpu"))
    other_split = dataclasses.replace(demo_ev, request=dataclasses.replace(demo_ev.request, eval_split="val"))

    def rows_fit():
        return [view.rowHeight(r) for r in range(view.model().rowCount())] == \
            [view.sizeHintForRow(r) for r in range(view.model().rowCount())]

    states = [lambda: table.set_evaluation(_pending(demo_ev)), lambda: table.set_evaluation(demo_ev),
              lambda: table.set_hidden_calibrators({"ts"}), lambda: table.set_hidden_calibrators(()),
              lambda: table.set_evaluations((demo_ev, other_split)), lambda: table.set_evaluation(no_boot)]
    for i, state in enumerate(states):
        state()
        assert rows_fit(), i
        ours = _sizes(view)
        assert ours == _qt_sizes(view), i
    table.set_evaluation(demo_ev)
    view.sortByColumn(1 + METRIC_NAMES.index("ece"), Qt.SortOrder.DescendingOrder)
    assert rows_fit()
    view.setColumnWidth(0, 40)                          # the labels wrap onto more lines
    assert rows_fit()


def test_fitting_the_columns_does_not_ask_the_delegate_for_every_cell(table, demo_ev, monkeypatch):
    """The metric columns are sized from their texts: the delegate's sizeHint is asked only for the label column
    while the widths are fitted (the rows' heights still come from Qt, once per change)."""
    delegate = table.metrics_view.itemDelegate()
    calls, fitting, fits = [], [], []
    from calibview.gui.views import metrics_table

    real_hint, real_fit = type(delegate).sizeHint, metrics_table.fit_columns

    def fit(view, cells):
        fitting.append(1)
        fits.append(1)
        real_fit(view, cells)
        fitting.clear()
    monkeypatch.setattr(type(delegate), "sizeHint",
                        lambda self, o, i: calls.append((bool(fitting), i.column())) or real_hint(self, o, i))
    monkeypatch.setattr(metrics_table, "fit_columns", fit)
    table.set_evaluation(_pending(demo_ev))
    table.set_evaluation(demo_ev)
    assert len(fits) == 2
    assert {c for during, c in calls if during} == {0}, calls
    rows, columns = table.metrics_proxy.rowCount(), table.metrics_proxy.columnCount()
    # one row fitting per result: each cell once, not once per layout pass or selection change
    assert len(calls) <= 2 * rows * columns + 2 * rows, (len(calls), rows, columns)


def test_the_same_hidden_calibrators_again_lay_out_nothing(table, demo_ev, monkeypatch):
    table.set_evaluation(demo_ev)
    table.set_hidden_calibrators({"ts"})
    fits = []
    monkeypatch.setattr(table, "_fit_rows", lambda: fits.append(1))
    table.set_hidden_calibrators({"ts"})
    assert fits == [] and table.metrics_proxy.rowCount() == len(demo_ev.results) - 1
    table.set_hidden_calibrators(())
    assert fits == [1] and table.metrics_proxy.rowCount() == len(demo_ev.results)


def _reference_paint(delegate, painter, option, index):
    """A metric cell drawn from the style option Qt's initStyleOption fills (what the delegate did before it took
    the view's option with the cell's font): the oracle of the pixel comparison below."""
    opt = QtWidgets.QStyleOptionViewItem(option)
    delegate.initStyleOption(opt, index)
    opt.text = ""
    delegate.draw(painter, opt, index.data(VALUE_TEXT_ROLE), index.data(INTERVAL_TEXT_ROLE) or "")


@pytest.mark.parametrize("pending", [False, True])
def test_metric_cells_paint_the_pixels_of_qts_style_option(table, demo_ev, pending):
    """Every metric cell, selected or not, on plain and alternate rows, bold or not, with an interval, a pending
    one or none: the delegate's paint gives exactly the pixels of the style option initStyleOption fills."""
    from PySide6 import QtCore, QtGui

    table.set_evaluation(_pending(demo_ev) if pending else demo_ev)
    view = table.metrics_view
    model, delegate = view.model(), view.itemDelegate()
    compared = bold = 0
    for r in range(model.rowCount()):
        for c in range(1, model.columnCount()):
            index = model.index(r, c)
            if index.data(VALUE_TEXT_ROLE) is None:
                continue
            for selected in (False, True):
                option = QtWidgets.QStyleOptionViewItem()
                option.initFrom(view)
                option.font = view.font()
                option.rect = QtCore.QRect(0, 0, view.columnWidth(c), view.rowHeight(r))
                option.widget = view
                if r % 2:
                    option.features |= QtWidgets.QStyleOptionViewItem.ViewItemFeature.Alternate
                if selected:
                    option.state |= QtWidgets.QStyle.StateFlag.State_Selected
                images = []
                for paint in (delegate.paint, lambda p, o, i: _reference_paint(delegate, p, o, i)):
                    image = QtGui.QImage(option.rect.size(), QtGui.QImage.Format.Format_ARGB32)
                    image.fill(QtGui.QColor("white"))
                    painter = QtGui.QPainter(image)
                    paint(painter, option, index)
                    painter.end()
                    images.append(image)
                assert images[0] == images[1], (r, c, selected)
                compared += 1
            bold += index.data(Qt.ItemDataRole.FontRole) is not None
    assert compared > 100 and (pending or bold > 0)

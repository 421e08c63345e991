"""The window fits a laptop (1280 x 720, 1366 x 768) and still uses a large screen."""

import pytest
from PySide6 import QtCore, QtWidgets

from calibview.gui import layout

WAIT_MS = 120_000
TITLE_BAR = 30          # a window manager's frame and title bar
pytestmark = pytest.mark.window(n_boot=0, demo=True)


@pytest.mark.parametrize("size", [(1280, 720), (1366, 768)])
def test_the_minimum_size_fits_a_laptop_screen(window, size):
    hint = window.minimumSizeHint().expandedTo(window.minimumSize())
    assert hint.width() <= size[0] and hint.height() <= size[1] - TITLE_BAR, hint


def test_the_diagrams_rows_of_controls_leave_room_for_the_docks(window):
    # 1280 px less the browser's and the calibrator panel's widths at that size (about 340 and 310): a control
    # added to the bandwidth row once made it 945 px wide and squeezed the browser to 180 px
    assert window.central_stack.minimumSizeHint().width() <= 640, window.central_stack.minimumSizeHint()


def _resize(qtbot, w, width, height):
    w.resize(width, height)
    qtbot.waitUntil(lambda: w.size() == QtCore.QSize(width, height), timeout=5000)
    qtbot.wait(100)


@pytest.mark.parametrize("size", [(1280, 720 - TITLE_BAR), (1366, 768 - TITLE_BAR), (1920, 1080 - TITLE_BAR)])
def test_the_diagram_is_never_cropped_and_the_slider_stays_usable(qtbot, window, size):
    _resize(qtbot, window, *size)
    canvas = window.canvas
    # the whole canvas widget is visible inside the window (not cut off by a too-small central area)
    top_left = canvas.mapTo(window, QtCore.QPoint(0, 0))
    assert QtCore.QRect(top_left, canvas.size()).intersected(window.rect()).size() == canvas.size()
    assert canvas.width() >= canvas.minimumSizeHint().width()
    assert canvas.height() >= canvas.minimumSizeHint().height()
    (x0, x1), _ = canvas.accuracy_plot.viewRange()
    assert x0 <= 0.0 and x1 >= 1.0                           # the full [0, 1] axis
    assert window.bandwidth_bar.slider.width() >= 100        # a slider, not a square


def test_the_metrics_dock_grows_with_the_window(qtbot, window):
    _resize(qtbot, window, 1280, 690)
    small = window.table_dock.height()
    _resize(qtbot, window, 1920, 1050)
    assert window.table_dock.height() > small * 1.2


def test_the_default_size_fits_the_screen(window):
    avail = layout.available(window)
    size = layout.default_size(window)
    assert size.width() <= avail.width() and size.height() <= avail.height()


def test_the_browser_shows_split_sizes_in_a_tooltip(window):
    tree = window.browser.tree
    items = tree.findItems("cifar100", QtCore.Qt.MatchExactly | QtCore.Qt.MatchRecursive, 0)
    assert items
    assert items[0].text(2) == "val, test"
    assert "val: N = 5,000" in items[0].toolTip(2) and "test: N = 10,000" in items[0].toolTip(2)


def test_a_first_start_on_a_laptop_gives_the_diagram_more_height_than_the_table(qtbot, make_window, demo_file):
    """Without a saved layout the metrics dock took its table's full height and squeezed the diagram."""
    w = make_window(n_boot=0, settings="fresh.ini", size=(1205, 662))    # the default size on a 1280 x 720 screen
    w.open_files([demo_file])
    qtbot.waitUntil(lambda: not w.session.busy and w.session.evaluation is not None, timeout=WAIT_MS)
    qtbot.wait(100)
    assert w.canvas.height() > 1.2 * w.table_dock.height()


def test_the_browser_keeps_k_and_the_splits_in_view(window):
    """The names column takes what is left: a long regression run's name no longer pushes K out of the dock."""
    tree = window.browser.tree
    header = tree.header()
    right = header.sectionPosition(2) + header.sectionSize(2)
    assert right <= tree.viewport().width() + 1
    item = tree.findItems("cifar100", QtCore.Qt.MatchExactly | QtCore.Qt.MatchRecursive, 0)[0]
    assert item.text(1) == "100"
    assert header.sectionSize(1) >= tree.fontMetrics().horizontalAdvance("100")
